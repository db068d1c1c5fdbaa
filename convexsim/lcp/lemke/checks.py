"""Checks of an answer: the final check every SOLVED result passes on the original (M, q) (dense and CSR M),
the ray test's finiteness, the gain test of a restarted run, and the solver-independent natural-map residual.
"""

from __future__ import annotations

import numpy as np

from convexsim._jit import jit


@jit(inline="always")
def row_sum_norm(M):
    """‖M‖∞ = max_i Σ_j |M_ij| of a dense square M (0 for an empty M); inlined into the kernels."""
    n = M.shape[0]
    mnorm = 0.0
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += abs(M[i, j])
        mnorm = max(mnorm, s)
    return mnorm


@jit
def final_check(M, q, z, w, check_tol):
    """Compute w = Mz + q and return the largest scaled violation of the LCP conditions (÷ tol,
    ``scaled_violation``)."""
    n = M.shape[0]
    mnorm = row_sum_norm(M)
    for i in range(n):
        s = q[i]
        for j in range(n):
            s += M[i, j] * z[j]
        w[i] = s
    return scaled_violation(mnorm, q, z, w, check_tol)


@jit
def final_check_sparse(rowptr, rowidx, rowval, mnorm, q, z, w, check_tol):
    """``final_check`` with M in CSR form and ‖M‖∞ given: the same value bit for bit (the dense sums add the
    zero entries, which changes no partial sum), O(nnz) instead of O(n²)."""
    n = q.shape[0]
    for i in range(n):
        s = q[i]
        for k in range(rowptr[i], rowptr[i + 1]):
            s += rowval[k] * z[rowidx[k]]
        w[i] = s
    return scaled_violation(mnorm, q, z, w, check_tol)


@jit
def scaled_violation(mnorm, q, z, w, check_tol):
    """The largest violation of z ≥ 0, w ≥ 0, z∘w = 0 relative to its tolerance, with t = check_tol·n:
    max_i of −z_i/(t‖z‖∞), −w_i/(t·s_w), |z_i w_i|/(t‖z‖∞·s_w), s_w = ‖M‖∞‖z‖∞ + ‖q‖∞ (each scale floored at
    1e-300); ∞ for a non-finite entry. ≤ 1: the point passes."""
    n = q.shape[0]
    qnorm = 0.0
    znorm = 0.0
    for i in range(n):
        qnorm = max(qnorm, abs(q[i]))
        znorm = max(znorm, abs(z[i]))
    sw = max(mnorm * znorm + qnorm, 1e-300)
    zs = max(znorm, 1e-300)
    t = check_tol * n
    worst = 0.0
    for i in range(n):
        if not (np.isfinite(z[i]) and np.isfinite(w[i])):
            return np.inf
        worst = max(worst, -z[i] / (t * zs))
        worst = max(worst, -w[i] / (t * sw))
        worst = max(worst, abs(z[i] * w[i]) / (t * zs * sw))
    return worst


@jit
def both_finite(a, b):
    """Every entry of the vectors a and b (same length) is finite. Shared by the dense and sparse kernels' ray
    test (a ray on non-finite data is a numerical failure)."""
    for i in range(a.shape[0]):
        if not (np.isfinite(a[i]) and np.isfinite(b[i])):
            return False
    return True


RESTART_MAX_GAIN = 1e8
"""A restarted run's answer must have ‖M‖∞‖z‖∞ ≤ RESTART_MAX_GAIN·‖q‖∞ (``plausible_gain``). The final check is
relative to s_w = ‖M‖∞‖z‖∞ + ‖q‖∞, so on an LCP without solution (its first run ended on a true secondary ray)
a restart can end on a point with z ~ 1e15 that passes it; contact answers have gains ~1e3."""


def inf_norm(M) -> float:
    """‖M‖∞ (largest absolute row sum) of a dense or scipy.sparse M; 0 for an empty one (numpy; the kernels
    use :func:`row_sum_norm`)."""
    if M.shape[0] == 0:
        return 0.0
    return float(np.asarray(abs(M).sum(axis=1)).max())


def plausible_gain(M, q, z) -> bool:
    """‖M‖∞‖z‖∞ ≤ RESTART_MAX_GAIN·‖q‖∞ (M dense or scipy.sparse): the answer is not a huge z that passes the
    relative final check only through its own size."""
    mnorm = inf_norm(M) if q.shape[0] else 0.0
    return bool(mnorm * float(np.abs(z).max(initial=0.0)) <= RESTART_MAX_GAIN * float(np.abs(q).max(initial=0.0)))


def lcp_residual(M, q, z) -> float:
    """Natural-map residual ‖min(z, Mz + q)‖∞ (0 exactly at a solution); a solver-independent check."""
    M = np.asarray(M, float)
    z = np.asarray(z, float)
    w = M @ z + np.asarray(q, float)
    return float(np.max(np.abs(np.minimum(z, w)))) if z.size else 0.0
