"""Print the seed documents' LCP examples (the same as `convexsim seeds`).

Run: .venv/bin/python docs/examples/seeds.py
"""

from convexsim.lcp.seeds import main

if __name__ == "__main__":
    raise SystemExit(main())
