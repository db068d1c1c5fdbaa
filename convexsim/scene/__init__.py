"""convexsim.scene (work in progress)."""
