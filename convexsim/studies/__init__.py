"""convexsim.studies (work in progress)."""
