"""convexsim.lcp (work in progress)."""
