"""Meshcat viewer for convexsim (installed as convexsim.viz); the core never imports it."""
