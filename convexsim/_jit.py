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

from numba.core import sigutils  # noqa: E402
from numba.core.compiler_lock import global_compiler_lock  # noqa: E402
from numba.core.registry import CPUDispatcher  # noqa: E402

CACHE = True
"""Cache compiled kernels on disk."""

_OPTIONS = {"cache": CACHE, "fastmath": False, "error_model": "numpy", "no_cfunc_wrapper": True}
"""numba's options for every kernel. ``no_cfunc_wrapper``: numba would otherwise build, optimize and emit a C-ABI
wrapper beside every compiled function (for ``dispatcher.cfunc``/first-class function use, which convexsim never
makes) -- first-run compile time spent on code nothing calls."""


class KernelDispatcher(CPUDispatcher):
    """numba's dispatcher, typed from other kernels with the arguments' plain types.

    numba types a constant argument of a kernel-to-kernel call (``f(x, False)``, ``g(a, 0)``) as a literal
    (``Literal[bool](False)``) and compiles the callee for it, specialized to the constant; the same callee
    called elsewhere with a variable is compiled again. Measured on the warm-up, such second copies were
    about a fifth of a first run's compile time (the Newton finish of the step twice, 18 s; the revised
    Lemke kernel twice, 15 s). Here a callee is compiled once per plain signature; the call site converts
    its constant."""

    def get_call_template(self, args, kws):
        from numba.core import types

        args = tuple(types.unliteral(a) for a in args)
        kws = {k: types.unliteral(a) for k, a in kws.items()}
        return super().get_call_template(args, kws)


class LazySignatureDispatcher(KernelDispatcher):
    """A kernel declared with explicit signatures (``@jit("float64[::1](float64[:, ::1], int64)")``) that is
    compiled for them -- or loaded from the disk cache -- on first use instead of when its module is
    imported: the first call from Python, or the typing of a kernel that calls it.

    Afterwards it behaves as numba's eagerly compiled dispatcher: those signatures only (no specialization
    per argument type or literal), arguments converted to them. A run whose kernels all come from the
    disk cache then loads none of these: the cached code of a kernel includes its callees'.
    """

    _pending: tuple = ()
    _compiling_pending = False

    def _compile_pending(self) -> None:
        if not self._pending or self._compiling_pending:
            return
        with global_compiler_lock:              # reentrant; another thread may have compiled them meanwhile
            if not self._pending or self._compiling_pending:
                return
            from numba.core import typeinfer

            self._compiling_pending = True
            try:
                with typeinfer.register_dispatcher(self):
                    for sig in self._pending:
                        self.compile(sig)
                self.disable_compile()
                self._pending = ()
            finally:
                self._compiling_pending = False

    def get_call_template(self, args, kws):
        self._compile_pending()
        return super().get_call_template(args, kws)

    def _compile_for_args(self, *args, **kws):
        if self._pending:
            self._compile_pending()
            return self   # numba's C dispatcher calls what this returns: a dispatch among the compiled signatures
        return super()._compile_for_args(*args, **kws)


_PACKAGE_ROOT = None


def _package_root():
    """The directory of the ``convexsim`` package (this file's folder)."""
    global _PACKAGE_ROOT
    if _PACKAGE_ROOT is None:
        from pathlib import Path

        _PACKAGE_ROOT = Path(__file__).resolve().parent
    return _PACKAGE_ROOT


def kernel_modules() -> tuple[str, ...]:
    """Every module of the package that defines kernels (it imports this decorator), as paths relative to
    the package, sorted. Derived from the sources, so it cannot go stale."""
    root = _package_root()
    return tuple(sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                        if p.name != "_jit.py" and "_jit import" in p.read_text(encoding="utf-8")))


def _module_file(dotted: str):
    """The source file of the convexsim module ``dotted`` (a package's ``__init__.py``), or None."""
    parts = dotted.split(".")
    if parts[0] != "convexsim":
        return None
    base = _package_root().joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


_FROM_IMPORT = None
_PLAIN_IMPORT = None


@functools.lru_cache(maxsize=None)
def _direct_imports(path) -> tuple:
    """Source files of the convexsim modules that the file ``path`` imports (every ``import`` statement,
    function-local ones included; ``from pkg import name`` counts ``pkg.name`` when it is a module, else
    ``pkg``).

    Read with two regular expressions over the text, not by parsing it: every process that loads a cached
    kernel fingerprints its module's import closure, and parsing the ~80 files of that closure cost 0.5 s of
    CPU per start (the expressions take a tenth of that). A line that only looks like an import (in a string
    or docstring) adds a file to the closure: a fingerprint over more files than needed, never fewer."""
    import re

    global _FROM_IMPORT, _PLAIN_IMPORT
    if _FROM_IMPORT is None:
        _FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+(convexsim(?:\.\w+)*)[ \t]+import[ \t]+"
                                  r"(\([^)]*\)|(?:[^\n\\]|\\\n)*)", re.M)
        _PLAIN_IMPORT = re.compile(r"^[ \t]*import[ \t]+((?:[^\n\\]|\\\n)*)", re.M)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ()

    def items(body: str) -> list[str]:
        body = re.sub(r"#[^\n]*", "", body).replace("\\\n", " ").strip().strip("()")
        return [item.split(" as ")[0].strip() for item in body.split(",") if item.strip()]

    names = []
    for m in _FROM_IMPORT.finditer(text):
        for name in items(m.group(2)):
            sub = f"{m.group(1)}.{name}"
            names.append(sub if _module_file(sub) is not None else m.group(1))
    for m in _PLAIN_IMPORT.finditer(text):
        names.extend(name for name in items(m.group(1)) if name.startswith("convexsim"))
    found = {f for f in map(_module_file, names) if f is not None and f != path}
    return tuple(sorted(found))


def import_closure(path) -> tuple:
    """``path`` and every convexsim source file it reaches through imports, transitively (sorted)."""
    seen = {path}
    todo = [path]
    while todo:
        for f in _direct_imports(todo.pop()):
            if f not in seen:
                seen.add(f)
                todo.append(f)
    return tuple(sorted(seen))


@functools.lru_cache(maxsize=None)
def kernel_sources_fingerprint(module_file=None) -> str:
    """SHA-256 (hex) over the sources of the convexsim files that ``module_file`` (a path; None: every
    kernel module) reaches through its imports.

    numba stamps a cached kernel with its own file only, but the cached machine code of a kernel includes
    the code of the kernels it calls and the values of the module constants it reads, which may live in
    other files: after an edit of one of those (or an upgrade of convexsim) numba would silently run the
    old callee. Every convexsim kernel's cache stamp also carries this fingerprint of its own module's
    import closure (:func:`_stamp_with_sources`): an edit invalidates the cached kernels of the modules
    that can reach the edited file, and only those (an edit of the stepper does not recompile
    collision)."""
    import hashlib
    from pathlib import Path

    root = _package_root()
    if module_file is None:
        files = set()
        for rel in kernel_modules():
            files.update(import_closure(root / rel))
    else:
        files = import_closure(Path(module_file).resolve())
    digest = hashlib.sha256()
    for f in sorted(files):
        try:
            digest.update(str(f.relative_to(root)).encode())
        except ValueError:                   # a kernel defined outside the package (a test's)
            digest.update(f.name.encode())
        try:
            digest.update(f.read_bytes())
        except OSError:                      # a missing module changes the fingerprint too
            digest.update(b"<missing>")
    return digest.hexdigest()


def _defining_file(func):
    """The resolved source file of the module that defines ``func`` (None if unknown)."""
    from pathlib import Path

    module = sys.modules.get(getattr(func, "__module__", None) or "")
    filename = getattr(module, "__file__", None) or getattr(getattr(func, "__code__", None), "co_filename", None)
    return Path(filename).resolve() if filename else None


def _stamp_with_sources(disp):
    """Add the fingerprint of the import closure of the kernel's module (:func:`kernel_sources_fingerprint`)
    to the disk-cache stamp of the dispatcher ``disp`` (numba internals, best effort: without them the
    cache keeps numba's own per-file stamp)."""
    cache_file = getattr(getattr(disp, "_cache", None), "_cache_file", None)
    if cache_file is not None and hasattr(cache_file, "_source_stamp"):
        cache_file._source_stamp = (cache_file._source_stamp,
                                    kernel_sources_fingerprint(_defining_file(disp.py_func)))
    return disp


def _kernel_class(disp):
    """``disp`` as a :class:`KernelDispatcher` (not with NUMBA_DISABLE_JIT, which returns the function)."""
    if type(disp) is CPUDispatcher:
        disp.__class__ = KernelDispatcher
    return disp


def jit(signature_or_function=None, **options):
    """``numba.njit`` with convexsim's flags (:data:`CACHE`, no fastmath, numpy's error model) and a
    disk-cache stamp that covers the kernel's module and every convexsim file it imports
    (:func:`kernel_sources_fingerprint`).

    Use as ``@jit``, ``@jit(inline="never")`` or with explicit signatures, ``@jit("int64(float64[::1])")``:
    then a :class:`LazySignatureDispatcher`, compiled for them on first use rather than at import.

    ``borrowed=True``: a kernel that allocates nothing and returns no array (it reads and writes the arrays it
    is given). numba then compiles it without its reference-counting runtime: every array argument of a call
    costs an atomic increment at entry and a decrement at exit otherwise (≈ 1–2 ns each; a small step makes
    about a thousand of them). The caller keeps its arrays alive for the call, so nothing is lost; a kernel
    marked so that allocates or returns a new array fails to compile (a numba error)."""
    if options.pop("borrowed", False):
        options["_nrt"] = False
    options = {**_OPTIONS, **options}
    if signature_or_function is None:
        return lambda func: _stamp_with_sources(_kernel_class(numba.njit(**options)(func)))
    if not (isinstance(signature_or_function, list) or sigutils.is_signature(signature_or_function)):
        return _stamp_with_sources(_kernel_class(numba.njit(signature_or_function, **options)))
    sigs = signature_or_function if isinstance(signature_or_function, list) else [signature_or_function]

    def wrap(func):
        disp = _stamp_with_sources(numba.njit(**options)(func))
        if isinstance(disp, CPUDispatcher):      # not with NUMBA_DISABLE_JIT, which returns ``func``
            disp.__class__ = LazySignatureDispatcher
            disp._pending = tuple(sigs)
        return disp

    return wrap


__all__ = ["jit", "CACHE", "KernelDispatcher", "LazySignatureDispatcher", "import_closure", "kernel_modules", "kernel_sources_fingerprint"]
