"""Repository-wide pytest setup, so that the suite gives the same result from any directory.

* The repository root goes first on ``sys.path`` and on ``PYTHONPATH`` (for child processes): the
  ``convexsim`` under test is this checkout's, not whatever an installed copy points at.
* ``tests/`` goes on ``sys.path`` so that ``repo_paths`` (REPO, SCENES, STUDIES, DOCS) and
  ``model_builder`` are importable from every test directory; the ``repo`` fixture gives the root.
* Hypothesis runs derandomized, without an example database, its caches under the root; the fuzzers
  (``tests/fuzz``) draw from a seed that changes per run: printed in the header and in the summary (with the
  statuses their CLI calls ended in), ``CONVEXSIM_FUZZ_SEED=N`` repeats a run.
* In CI (``CI=true``) a skipped browser test (marker ``browser``: Chromium missing) or Drake test (marker
  ``drake``: the ``compare`` extra missing) fails: CI runs what it claims.
* Every test starts with Ctrl-C deliverable (SIGINT unblocked, Python's KeyboardInterrupt handler): the
  tests that interrupt a run (in this process or in a child, which inherits both) must not depend on how
  the suite was started (a command put in the background of a non-interactive shell, e.g. ``make test &``
  in a script, starts with SIGINT ignored, and so do the xdist workers and every child) nor on what an
  earlier test in the same process did. A test that leaves SIGINT blocked, ignored or handled is named in
  a warning.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import warnings
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

_ROOT = Path(__file__).resolve().parent
for _p in (_ROOT / "tests", _ROOT):
    if str(_p) not in sys.path[:2]:
        sys.path.insert(0, str(_p))
# Child processes (``python -m convexsim.cli ...``) import this checkout too, whatever their cwd.
_rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(_ROOT)]
os.environ["PYTHONPATH"] = os.pathsep.join([str(_ROOT), *_rest])

from repo_paths import REPO  # noqa: E402

assert REPO == _ROOT, (REPO, _ROOT)

# Property tests draw the same examples on every run and from every directory: examples derived from
# the test itself, no example database in the working directory, no wall-clock deadline.
settings.register_profile("convexsim", derandomize=True, database=None, deadline=None)
settings.load_profile("convexsim")
set_hypothesis_home_dir(REPO / ".hypothesis")   # its caches at the root (git-ignored), not in the cwd

FUZZ_SEED_ENV = "CONVEXSIM_FUZZ_SEED"
if not os.environ.get(FUZZ_SEED_ENV):       # one seed per run, drawn once: xdist workers inherit it
    import secrets

    os.environ[FUZZ_SEED_ENV] = str(secrets.randbelow(2**32))
FUZZ_SEED = int(os.environ[FUZZ_SEED_ENV])
"""The seed of the fuzzers' examples (the Hypothesis tests under ``FUZZ_DIR``): new inputs on every run."""
FUZZ_DIR = "tests/fuzz/"
FUZZ_PROPERTY = "fuzz statuses"
"""The user property a fuzz test reports its CLI calls' statuses in ({status: count})."""


@pytest.fixture(scope="session")
def repo() -> Path:
    """The repository root."""
    return REPO


_SESSION_START = "(start of the session)"
_previous_test = [_SESSION_START]


def _sigint_ignored_by_the_kernel() -> bool:
    """SIGINT's bit in this process's ignored-signal mask (Linux /proc; False where unavailable)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            mask = next(int(line.split()[1], 16) for line in f if line.startswith("SigIgn:"))
    except (OSError, StopIteration, ValueError):
        return False
    return bool(mask >> (signal.SIGINT - 1) & 1)


@pytest.fixture(autouse=True)
def _ctrl_c_is_deliverable(request):
    """Reset SIGINT to unblocked with Python's default handler before each test (see the module docstring)."""
    if threading.current_thread() is threading.main_thread():
        found = []
        if signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
            found.append("blocked")
        handler = signal.getsignal(signal.SIGINT)
        if handler is not signal.default_int_handler or _sigint_ignored_by_the_kernel():
            signal.signal(signal.SIGINT, signal.default_int_handler)
            found.append(f"handled by {handler!r}" if handler is not signal.default_int_handler else "ignored")
        if found and _previous_test[0] != _SESSION_START:   # inherited at the start: no warning
            warnings.warn(f"SIGINT was {' and '.join(found)} after {_previous_test[0]}; reset",
                          pytest.PytestWarning, stacklevel=1)
    yield
    _previous_test[0] = request.node.nodeid


LONG_FILES_FIRST = ("tests/lcp/test_lcp_clutter.py", "tests/lcp/test_lcp_clutter_warm.py")
"""Test files collected first. With ``-n 2 --dist loadfile --no-loadscope-reorder`` (the Makefile) xdist hands out
files in collection order (by default it sorts them by test count, which puts these one-test files last); the
cold full mixed_clutter LCP run (≈ 3 min, one test) started last kept one worker busy long after the other had
finished (CI 2026-11-26: pytest 441 s, of which the last ≈ 2–3 min on one worker)."""


def pytest_collection_modifyitems(config, items):
    """Move the tests of ``LONG_FILES_FIRST`` to the front (in that order), the rest in collection order."""
    rank = {path: k for k, path in enumerate(LONG_FILES_FIRST)}

    def key(item):
        path = item.nodeid.split("::", 1)[0]
        return rank.get(path, len(rank))

    items[:] = sorted(items, key=key)       # stable: the order within each group is kept
    from hypothesis import seed

    for item in items:                      # the fuzzers draw from the run's seed, not the derandomized one
        fn = getattr(item, "obj", None)
        if item.nodeid.startswith(FUZZ_DIR) and getattr(fn, "is_hypothesis_test", False):
            seed(FUZZ_SEED)(fn)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """A fuzz test's CLI statuses (``fuzz_kit.TALLY``) into its report (user property ``FUZZ_PROPERTY``)."""
    kit = sys.modules.get("fuzz_kit") if item.nodeid.startswith(FUZZ_DIR) else None
    if kit is not None:
        kit.TALLY.clear()
    yield
    if kit is not None and kit.TALLY:
        item.user_properties.append((FUZZ_PROPERTY, {str(k): v for k, v in kit.TALLY.items()}))


def _blas_core() -> str:
    """The OpenBLAS kernel numpy uses here (e.g. "SkylakeX", "Haswell"), or "?" (another BLAS, or not found)."""
    import ctypes
    import glob

    import numpy as np

    libs = glob.glob(os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs", "*openblas*"))
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename64_",
                     "openblas_get_corename"):
            f = getattr(lib, name, None)
            if f is not None:
                f.restype = ctypes.c_char_p
                return f().decode()
    return "?"


def pytest_report_header(config):
    """The arithmetic this run sees, in the header: which BLAS kernel and numba target (README, Testing)."""
    try:
        import llvmlite.binding as llvm

        target = os.environ.get("NUMBA_CPU_NAME") or llvm.get_host_cpu_name()
        core = _blas_core()
    except Exception as exc:  # noqa: BLE001 - a header line must never break the run
        return f"fuzz seed: {FUZZ_SEED}\nround-off: unknown ({exc!r})"
    return (f"fuzz seed: {FUZZ_SEED} (repeat with {FUZZ_SEED_ENV}={FUZZ_SEED})\n"
            f"round-off: OpenBLAS kernel {core} (OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '')!s}, "
            f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '')!s}), numba target {target}")




def pytest_terminal_summary(terminalreporter):
    """The fuzzers' split, per test and in all: how many CLI calls were refused (2) and how many ran (0 ok,
    1 failed run or check, 3 identify mismatch); the seed to repeat them."""
    counts = {}
    for reports in terminalreporter.stats.values():
        for rep in reports:
            for name, value in getattr(rep, "user_properties", ()):
                if name == FUZZ_PROPERTY and getattr(rep, "when", "") == "call":   # per test function
                    c = counts.setdefault(rep.nodeid.split("[")[0], {})
                    for k, v in value.items():
                        c[k] = c.get(k, 0) + v
    if not counts:
        return
    tr = terminalreporter
    tr.section(f"fuzz split (seed {FUZZ_SEED}; {FUZZ_SEED_ENV}={FUZZ_SEED} repeats it)")
    total = {}
    for nodeid, c in sorted(counts.items()):
        c = {int(k): v for k, v in c.items()}
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
        tr.write_line(f"{nodeid}: {_split_text(c)}")
    tr.write_line(f"all: {_split_text(total)}")


def _split_text(c: dict) -> str:
    ran = sum(v for k, v in c.items() if k in (0, 1, 3))
    other = {k: v for k, v in sorted(c.items()) if k not in (0, 1, 2, 3)}
    return (f"{sum(c.values())} calls: refused {c.get(2, 0)}, ran {ran} (ok {c.get(0, 0)}, failed {c.get(1, 0)}, "
            f"mismatch {c.get(3, 0)})" + (f", other {other}" if other else ""))


MUST_RUN_IN_CI = ("browser", "drake")
"""Markers of tests that CI must run, not skip: the viewer in Chromium, the Drake translation."""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under ``CI=true`` a skip of a test marked with one of MUST_RUN_IN_CI is turned into a failure naming it."""
    outcome = yield
    rep = outcome.get_result()
    if os.environ.get("CI") != "true" or not rep.skipped or hasattr(rep, "wasxfail"):
        return
    marks = [m for m in MUST_RUN_IN_CI if item.get_closest_marker(m) is not None]
    if marks:
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = f"skipped in CI (CI=true), but a {marks[0]} test must run here: {reason}"
