"""convexsim.sap (work in progress)."""
