"""Numba kernels: timing their compilation and announcing a first run (beside ``_jit``, the decorator; the
core's run loop uses it, so it is no tool: ``convexsim.tools.kernels`` re-exports it for the CLI).

Every kernel is compiled with ``cache=True`` (``convexsim._jit``): the first run on a machine (or after
a source change) compiles each kernel it reaches and stores it on disk; later runs load it. A run's
:class:`KernelClock` measures that warm-up so that ``ms/step`` excludes it, and prints a one-time
notice when compilation starts. ``convexsim.tools.warmup`` compiles the kernels of a solver path ahead of
a run (``convexsim run`` does it for its own step on first use, ``convexsim warmup`` for every path), in
parallel processes, so that the run itself starts at full speed.
"""

from __future__ import annotations

import sys
import time as _time

COMPILE_SECONDS_PER_KERNEL = 0.9
"""Mean time [s] numba takes to compile one convexsim kernel on a 2-core machine; scales the first-run
notice's estimate. The kernels grew with the compiled step: ``convexsim warmup`` from an empty cache took
106 s of CPU for 114 kernels (0.93 s each, lightly loaded) and 185 s of CPU for 137 kernels at load 7
(2026-11-25); it was 77 kernels in 30–33 s before the compiled step."""

_compile_notice_shown = False


class KernelClock:
    """Times numba's work during a run, and announces a first-run compilation once per process.

    While active, a listener on numba's ``numba:compiler_lock`` event adds up the wall time of every
    outermost kernel compilation or load from the on-disk cache (``seconds``). With ``notice``, the
    first cache miss (numba's ``numba:compile`` event) prints to stderr, once per process:
    ``compiling kernels (first run, ~N s; cached for later runs)…``, N estimated from the number of
    convexsim kernels without a valid cache entry times COMPILE_SECONDS_PER_KERNEL.
    """

    def __init__(self, *, notice: bool = False):
        self.notice = notice
        self.seconds = 0.0
        self._depth = 0
        self._t = 0.0
        self._listeners: list = []

    def __enter__(self) -> "KernelClock":
        from numba.core import event

        clock = self

        class _Lock(event.Listener):
            def on_start(self, ev):
                if clock._depth == 0:
                    clock._t = _time.perf_counter()
                clock._depth += 1

            def on_end(self, ev):
                clock._depth -= 1
                if clock._depth == 0:
                    clock.seconds += _time.perf_counter() - clock._t

        class _Compile(event.Listener):
            def on_start(self, ev):
                clock._announce()

            def on_end(self, ev):
                pass

        self._listeners = [("numba:compiler_lock", _Lock()), ("numba:compile", _Compile())]
        for kind, listener in self._listeners:
            event.register(kind, listener)
        return self

    def __exit__(self, *exc) -> None:
        from numba.core import event

        for kind, listener in self._listeners:
            event.unregister(kind, listener)
        self._listeners = []

    def _announce(self) -> None:
        global _compile_notice_shown
        if not self.notice or _compile_notice_shown:
            return
        _compile_notice_shown = True
        n = len(uncached_kernels())
        estimate = f"~{max(1, round(n * COMPILE_SECONDS_PER_KERNEL))} s; " if n else ""
        print(f"compiling kernels (first run, {estimate}cached for later runs)…", file=sys.stderr, flush=True)


def kernel_modules() -> list[str]:
    """Dotted names of the convexsim modules that define numba kernels (``convexsim._jit.kernel_modules``, the
    one list, as module names)."""
    from convexsim._jit import kernel_modules as kernel_files

    names = []
    for rel in kernel_files():
        parts = rel[:-len(".py")].split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join(["convexsim", *parts]))
    return names


def uncached_kernels() -> list[str]:
    """Names of the convexsim numba kernels that have neither compiled code in memory nor a valid entry in
    numba's disk cache (no index, or one written for another version of the source); kernels declared
    ``inline="always"`` are compiled inside their callers and not counted. Imports the kernel
    modules (:func:`kernel_modules`) to find them; a few hundredths of a second."""
    import importlib

    from numba.core.dispatcher import Dispatcher

    names = []
    for mod_name in kernel_modules():
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            continue
        for attr, obj in list(vars(mod).items()):
            if (isinstance(obj, Dispatcher) and obj.__module__ == mod_name and not obj.overloads
                    and obj.targetoptions.get("inline") != "always"):    # inlined into its callers: never compiled alone
                try:
                    cached = bool(obj._cache._cache_file._load_index())   # numba internals: best effort
                except Exception:  # noqa: BLE001 - an unknown numba layout only affects the estimate
                    cached = False
                if not cached:
                    names.append(f"{mod_name}.{attr}")
    return names


__all__ = ["KernelClock", "uncached_kernels", "COMPILE_SECONDS_PER_KERNEL", "kernel_modules"]
