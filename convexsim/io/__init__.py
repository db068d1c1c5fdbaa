"""Input/output: trajectory files (npz) and atomic writes.

Names load on first use (PEP 562), so that ``convexsim --help`` and the argument parsers import no numpy.
"""

import importlib

_LAZY = {"SCHEMA_VERSION": "trajectory", "Trajectory": "trajectory", "TrajectoryFormatError": "trajectory",
         "load_trajectory": "trajectory", "save_trajectory": "trajectory", "atomic_write_bytes": "atomic",
         "atomic_write_text": "atomic", "atomic_path": "atomic"}
_SUBMODULES = ("atomic", "compare", "trajectory")

QUANTITIES = ("position", "orientation", "velocity", "angular_velocity", "contact_force")
"""What ``convexsim compare`` measures per body (convexsim.io.compare); here so that parsers need no numpy."""
UNITS = {"position": "m", "orientation": "rad", "velocity": "m/s", "angular_velocity": "rad/s",
         "contact_force": "N"}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f"convexsim.io.{_LAZY[name]}"), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"convexsim.io.{name}")
    raise AttributeError(f"module 'convexsim.io' has no attribute {name!r}")


__all__ = [
    "SCHEMA_VERSION",
    "Trajectory",
    "TrajectoryFormatError",
    "load_trajectory",
    "save_trajectory",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_path",
]
