"""``python -m convexsim``: the command line (the same as the ``convexsim`` command)."""

import sys

from convexsim.cli import main

if __name__ == "__main__":
    sys.exit(main())
