"""The warm-up of every solver path in a detached, low-priority process (started by ``make demo``), and the
wait of a later run for it.

After the demo has compiled the free-body SAP step, ``python -m convexsim.tools.background_warmup`` compiles
the other paths (trees, the LCP stepper, the reference path) while the newcomer reads the output: at the
lowest CPU priority, its output in a log file, its process id in ``convexsim-warmup-background.pid`` in
numba's cache directory for as long as it runs. A ``convexsim run`` that needs a path the process has not
finished yet waits for it (:func:`wait_for_background_warmup`) instead of compiling the same kernels a
second time beside it.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

PID_NAME = "convexsim-warmup-background.pid"
"""The process id file, in numba's cache directory (warmup.cache_root)."""

POLL_S = 0.5
"""How often a waiting run looks at the warm-up's markers [s]."""


def pid_file() -> Path:
    from convexsim.tools.warmup import cache_root

    return cache_root() / PID_NAME


def _pid_and_log() -> tuple[int, str]:
    """(process id, log file) written by :func:`main`; OSError/ValueError/IndexError when there is none."""
    lines = pid_file().read_text(encoding="utf-8").splitlines()
    return int(lines[0]), (lines[1] if len(lines) > 1 else "")


def running_pid() -> int | None:
    """The id of the background warm-up process while it runs, else None (no file, a dead process, or a
    process id reused by another program)."""
    try:
        pid, _ = _pid_and_log()
    except (OSError, ValueError, IndexError):
        return None
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return None
    try:                                    # Linux: make sure it is still this module, not a reused id
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"background_warmup" not in cmdline:
            return None
    except OSError:
        pass
    return pid


def wait_for_background_warmup(model, solver: str) -> float | None:
    """Before a run: when the background warm-up is running and has not finished the kernels of this run's
    group yet (warmup.run_group), wait until it has (or has ended), saying so on stderr. Returns the seconds
    waited, or None when there was nothing to wait for."""
    import numba

    from convexsim.tools.warmup import is_warm, run_group

    if numba.config.DISABLE_JIT:
        return None
    group = run_group(model, solver)
    pid = None if is_warm(group) else running_pid()
    if pid is None:
        return None
    try:
        log = _pid_and_log()[1]
    except (OSError, ValueError, IndexError):
        log = ""
    print(f"waiting for the background warm-up (process {pid}, started by `make demo`"
          + (f"; its log: {log}" if log else "") + ") to finish the kernels of this step…", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    while not is_warm(group) and running_pid() == pid:
        time.sleep(POLL_S)
    waited = time.perf_counter() - t0
    print(f"waited {waited:.1f} s", file=sys.stderr, flush=True)
    return waited


def main(argv: list[str] | None = None) -> int:
    """Compile every path's kernels (those already cached load in seconds), with the process id file written
    for the duration (atomically) and removed at the end. ``argv``: the log file this process writes to
    (named in the messages of the runs that wait for it)."""
    argv = sys.argv[1:] if argv is None else argv
    from convexsim.io.atomic import atomic_write_text
    from convexsim.tools.warmup import warm_up

    try:
        os.nice(19)                          # below every interactive process (make demo starts it niced too)
    except (AttributeError, OSError):
        pass
    path = pid_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, f"{os.getpid()}\n{argv[0] if argv else ''}\n")
    t0 = time.perf_counter()
    print(f"background warm-up (process {os.getpid()}): compiling the kernels of every solver path…", flush=True)
    try:
        seconds = warm_up(progress=True)
        print(f"background warm-up: done in {seconds:.1f} s; no later run compiles.", flush=True)
        return 0
    finally:
        try:
            if _pid_and_log()[0] == os.getpid():
                path.unlink()
        except (OSError, ValueError, IndexError):
            pass
        print(f"background warm-up: ended after {time.perf_counter() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
