"""convexsim.geometry (work in progress)."""
