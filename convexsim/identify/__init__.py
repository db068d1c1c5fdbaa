"""convexsim.identify: material parameters from recorded trajectories (docs/identify.md)."""
