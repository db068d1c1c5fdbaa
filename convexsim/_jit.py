"""The one numba decorator used by every kernel in convexsim.

All jitted functions use ``jit`` from here so that compilation flags live in one place:
``cache=True`` (compiled code is cached on disk next to the sources, or in
``NUMBA_CACHE_DIR``), and *no* fastmath: the solvers rely on honest NaN/inf handling
(with fast-math flags numba may compile a NaN check away).
"""

from __future__ import annotations

import functools

import numba

CACHE = True
"""Cache compiled kernels on disk."""

jit = functools.partial(numba.njit, cache=CACHE, fastmath=False, error_model="numpy")
"""``numba.njit`` with convexsim's flags. Use as ``@jit`` or ``@jit(inline="never")``."""

__all__ = ["jit", "CACHE"]
