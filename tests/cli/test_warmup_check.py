"""The warm-up's coverage check: `convexsim warmup --check` (run by `make test` right after the warm-up, in a
fresh process) must notice a kernel compiled during a shipped scene's run. Here: its compile log records a
convexsim kernel compiled inside it, and ignores one loaded from memory."""

import numba
import numpy as np

from convexsim.tools.warmup import _CompileLog


def _probe(x):
    return 2.0 * x


def test_compile_log_records_a_convexsim_kernel_compiled_inside_it():
    _probe.__module__ = "convexsim.probe"          # the log keeps convexsim's kernels only
    kernel = numba.njit(cache=False)(_probe)
    with _CompileLog() as log:
        assert kernel(np.float64(1.5)) == 3.0
    assert log.names == ["convexsim.probe._probe"]
    with _CompileLog() as again:                   # compiled already: nothing to record
        kernel(np.float64(2.0))
    assert again.names == []


def test_compile_log_ignores_other_packages():
    def elsewhere(x):
        return x + 1.0

    kernel = numba.njit(cache=False)(elsewhere)
    with _CompileLog() as log:
        kernel(np.float64(1.0))
    assert log.names == []
