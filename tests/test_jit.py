"""convexsim._jit: a kernel declared with explicit signatures compiles on first use (not at import) and then
behaves as numba's eagerly compiled dispatcher: those signatures only, the same argument conversions."""

from __future__ import annotations

import pickle

import numba
import numpy as np
import pytest

from convexsim._jit import LazySignatureDispatcher, jit

SIG = "float64[::1](float64[:, ::1], int64)"


@jit(SIG)
def column(R, j):
    return R[:, j].copy()


@jit(SIG)
def column_called_from_a_kernel(R, j):
    return R[:, j].copy()


eager_column = numba.njit(SIG)(column.py_func)

R = np.arange(9.0).reshape(3, 3)


def test_nothing_is_compiled_before_the_first_use():
    fresh = jit(SIG)(column.py_func)
    assert isinstance(fresh, LazySignatureDispatcher)
    assert fresh.signatures == []


def test_a_call_from_python_compiles_the_declared_signature_only():
    for j in range(3):
        np.testing.assert_array_equal(column(R, j), R[:, j])
    np.testing.assert_array_equal(column(R, np.int32(1)), R[:, 1])
    assert column.signatures == eager_column.signatures
    assert len(column.signatures) == 1


def test_conversions_and_errors_are_the_eager_dispatchers():
    np.testing.assert_array_equal(column(R, 1.0), eager_column(R, 1.0))     # float -> int64, as eager
    for bad in ("a", R):
        with pytest.raises(TypeError):
            eager_column(R, bad)
        with pytest.raises(TypeError):
            column(R, bad)


def test_calls_with_literals_from_a_kernel_share_one_signature():
    @numba.njit          # not cached: typed here, so the callee is compiled for it (literals 0, 1, 2)
    def trace_by_columns(R):
        return (column_called_from_a_kernel(R, 0)[0] + column_called_from_a_kernel(R, 1)[1]
                + column_called_from_a_kernel(R, 2)[2])

    assert column_called_from_a_kernel.signatures == []
    assert trace_by_columns(R) == pytest.approx(np.trace(R))
    assert len(column_called_from_a_kernel.signatures) == 1


def test_pickles_as_itself():
    column(R, 0)
    assert pickle.loads(pickle.dumps(column)) is column
