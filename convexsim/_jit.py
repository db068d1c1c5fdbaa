"""The one numba decorator used by every kernel in convexsim.

All jitted functions use ``jit`` from here so that compilation flags live in one place:
``cache=True`` (compiled code is cached on disk next to the sources, or in
``NUMBA_CACHE_DIR``), and *no* fastmath: the solvers rely on honest NaN/inf handling
(with fast-math flags numba may compile a NaN check away).
"""

from __future__ import annotations

import functools
import sys


def _preload_cython_blas() -> None:
    """Load ``scipy.linalg.cython_blas`` without running ``scipy.linalg/__init__``.

    The first kernel a process compiles or loads from the cache initializes numba's CPU target, which checks
    for BLAS with ``import scipy.linalg.cython_blas``; that import runs the whole ``scipy.linalg`` package
    (≈ 0.25 s of CPU, most of a warm ``convexsim run``'s start-up beyond numba itself), although numba only
    needs the extension module (the C addresses of the BLAS routines). Registering the extension module
    under its name first makes numba's check find it; a later ``import scipy.linalg`` imports the package
    as usual and reuses the same module. Best effort: on any surprise nothing is registered and numba
    imports scipy.linalg itself.
    """
    name = "scipy.linalg.cython_blas"
    if name in sys.modules or "scipy.linalg" in sys.modules:
        return
    try:
        import importlib.machinery
        import importlib.util

        scipy_spec = importlib.util.find_spec("scipy")          # locates scipy, imports nothing
        if scipy_spec is None or not scipy_spec.submodule_search_locations:
            return
        dirs = [f"{d}/linalg" for d in scipy_spec.submodule_search_locations]
        spec = importlib.machinery.PathFinder.find_spec(name, dirs)
        if spec is None or not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            return
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
    except Exception:  # noqa: BLE001 - an unexpected scipy layout only costs the time it would have anyway
        return


_preload_cython_blas()

import numba  # noqa: E402 - after the preload (which must precede numba's first kernel, not its import)

CACHE = True
"""Cache compiled kernels on disk."""

jit = functools.partial(numba.njit, cache=CACHE, fastmath=False, error_model="numpy")
"""``numba.njit`` with convexsim's flags. Use as ``@jit`` or ``@jit(inline="never")``."""

__all__ = ["jit", "CACHE"]
