"""Input/output: trajectory files (npz) and atomic writes."""

from convexsim.io.atomic import atomic_write_bytes, atomic_write_text, atomic_path
from convexsim.io.trajectory import (
    SCHEMA_VERSION,
    Trajectory,
    TrajectoryFormatError,
    load_trajectory,
    save_trajectory,
)

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
