"""Input checks shared by the SAP entry points; every failure is a ValueError naming the argument."""

from __future__ import annotations

import numpy as np


def _first_bad(mask: np.ndarray, values: np.ndarray) -> str:
    idx = np.argwhere(mask)[0]
    where = "" if values.ndim == 0 else f" at index {tuple(int(i) for i in idx)}"
    return f"{values[tuple(idx)] if values.ndim else values.item()!r}{where}"


def check_finite(name: str, values) -> np.ndarray:
    """Raise ValueError if any entry of ``values`` is NaN or infinite."""
    a = np.asarray(values, dtype=float)
    bad = ~np.isfinite(a)
    if np.any(bad):
        raise ValueError(f"{name} must be finite, got {_first_bad(np.atleast_1d(bad), np.atleast_1d(a))}")
    return a


def check_positive(name: str, values) -> np.ndarray:
    """Raise ValueError unless every entry is finite and > 0."""
    a = check_finite(name, values)
    bad = ~(a > 0.0)
    if np.any(bad):
        raise ValueError(f"{name} must be > 0, got {_first_bad(np.atleast_1d(bad), np.atleast_1d(a))}")
    return a


def check_nonneg(name: str, values) -> np.ndarray:
    """Raise ValueError unless every entry is finite and ≥ 0."""
    a = check_finite(name, values)
    bad = ~(a >= 0.0)
    if np.any(bad):
        raise ValueError(f"{name} must be >= 0, got {_first_bad(np.atleast_1d(bad), np.atleast_1d(a))}")
    return a


def check_shape(name: str, a: np.ndarray, shape: tuple) -> np.ndarray:
    """Raise ValueError unless ``a.shape == shape``."""
    if a.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {a.shape}")
    return a


def per_constraint(name: str, values, nk: int) -> np.ndarray:
    """Broadcast a scalar or (nk,) parameter to a float64 array of shape (nk,)."""
    a = np.asarray(values, dtype=float)
    if a.ndim == 0:
        return np.full(nk, float(a))
    if a.shape != (nk,):
        raise ValueError(f"{name} must be a scalar or have shape ({nk},), got {a.shape}")
    return a.astype(float, copy=True)
