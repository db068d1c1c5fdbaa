"""Warm starts from a guessed complementary basis: the independent part of the guess, the tableau (or B⁻¹) of
the guessed basis for ``lemke_from_basis``, and ``solve_from_basis`` (principal subsystems and block principal
pivoting, no Lemke path; docs/lcp.md §2)."""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
import scipy.linalg
import scipy.sparse

from convexsim.lcp.lemke.checks import final_check
from convexsim.lcp.lemke.options import EPS, LemkeOptions


def independent_basis(M, basic, rank_tol: float = 1e-10) -> np.ndarray:
    """The guessed basic z's with dependent columns of M_αα removed (QR with column pivoting; a column
    whose pivot is ≤ rank_tol times the first is dependent, e.g. a fourth coplanar corner). Shape (n,)."""
    alpha = np.array(basic, dtype=bool).reshape(-1)
    idx = np.flatnonzero(alpha)
    if idx.size:
        R, P = scipy.linalg.qr(M[np.ix_(idx, idx)], mode="r", pivoting=True, check_finite=False)
        diag = np.abs(np.diag(R))
        rank = int(np.count_nonzero(diag > rank_tol * max(diag[0], 1e-300)))
        alpha[idx[P[rank:]]] = False
    return alpha


def warm_tableau(M, q, alpha, T, basis, rank_tol: float = 1e-10, rhs_out=None) -> np.ndarray | None:
    """Fill T = B⁻¹[I | −M | −d | q] and basis for the complementary basis B (z_i basic for i ∈ α, w_i
    otherwise) with d = B·1. Rows are ordered (α, β): B = [[−M_αα, 0], [−M_βα, I]], so
    B⁻¹ = [[−M_αα⁻¹, 0], [−M_βα M_αα⁻¹, I]] — one LU of M_αα and O(n²k) products (k = |α|), instead
    of an LU of the n × n basis. Dependent columns of M_αα (a pivot ≤ rank_tol times the largest) are
    first removed from α (``independent_basis``; α is updated in place). Returns d, or None if M_αα is
    still singular or the values are not finite.

    With ``rhs_out`` (revised kernel) T is B⁻¹ alone, shape (n, n), and the rhs B⁻¹q goes to rhs_out: the
    z columns B⁻¹M are not formed."""
    revised = rhs_out is not None
    n = q.shape[0]
    rhs = 2 * n + 1
    rcol = rhs_out if revised else T[:, rhs]
    for attempt in range(2):
        a = np.flatnonzero(alpha)
        if not a.size:
            break
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)   # singular: tested just below
            lu = scipy.linalg.lu_factor(M[np.ix_(a, a)], check_finite=False)
        piv = np.abs(np.diag(lu[0]))
        if np.all(np.isfinite(lu[0])) and piv.min() > rank_tol * piv.max():
            break
        if attempt:
            return None
        alpha[:] = independent_basis(M, alpha, rank_tol)
    a = np.flatnonzero(alpha)
    b = np.flatnonzero(~alpha)
    k = a.size
    basis[:k] = n + a
    basis[k:] = b
    d = np.zeros(n)
    d[b] = 1.0
    Ta, Tb = T[:k], T[k:]
    Ta[:, :n] = 0.0
    Tb[:, :n] = 0.0
    Tb[np.arange(n - k), b] = 1.0
    if k:
        Mba = M[np.ix_(b, a)]
        with np.errstate(all="ignore"):
            X = scipy.linalg.lu_solve(lu, np.concatenate([q[a, None], np.eye(k)] + ([] if revised else [M[a]]),
                                                          axis=1), check_finite=False)   # M_αα⁻¹ [q_α | I | M_α·]
        y, inv = X[:, 0], X[:, 1:k + 1]
        Ta[:, a] = -inv
        if revised:   # contact LCPs are a few percent dense: the product through M_βα's nonzeros
            Tb[:, a] = -np.asarray(scipy.sparse.csr_matrix(Mba) @ inv)
        else:
            Tb[:, a] = -(Mba @ inv)
        if not revised:
            Xm = X[:, k + 1:]
            Ta[:, n:2 * n] = Xm
            np.matmul(Mba, Xm, out=Tb[:, n:2 * n])
            Tb[:, n:2 * n] -= M[b]
        rcol[:k] = -y
        rcol[k:] = q[b] - Mba @ y
        d -= M[:, a].sum(axis=1)
    else:
        if not revised:
            Tb[:, n:2 * n] = -M
        rcol[:] = q
    if not revised:
        T[:, 2 * n] = -1.0
        T[:, basis] = 0.0                     # basic columns are exact unit vectors
        T[np.arange(n), basis] = 1.0
    else:
        wb = basis[basis < n]
        T[:, wb] = 0.0                        # basic w's columns of B⁻¹ are exact unit vectors
        T[np.flatnonzero(basis < n), wb] = 1.0
    if not np.all(np.isfinite(rcol)):
        return None
    return d


class BasisSolveResult(NamedTuple):
    """Outcome of ``solve_from_basis``.

    Attributes:
        z: the accepted solution (``solved``), else the last principal-subsystem point, shape (n,).
        w: M z + q, shape (n,).
        solved: the point passed the same scaled final check as ``lemke`` (LemkeOptions.check_tol).
        solves: principal subsystems factorized (1 if the guess was right).
        residual: largest scaled violation (≤ 1 when solved; inf for a singular subsystem).
        basic: final guess of which z are basic, shape (n,) bool.
    """

    z: np.ndarray
    w: np.ndarray
    solved: bool
    solves: int
    residual: float
    basic: np.ndarray


def solve_from_basis(M, q, basic, *, max_solves: int = 8, feas_tol: float = 10.0 * EPS,
                     rank_tol: float = 1e-10, options: LemkeOptions | None = None) -> BasisSolveResult:
    """Try to solve LCP(M, q) from a guess of its complementary basis (warm start; docs/lcp.md §2).

    With α the guessed basic z's: solve ``M_αα z_α = −q_α`` (QR with column pivoting; columns whose
    pivot is ≤ ``rank_tol`` times the first are dependent and leave α, which counts as one of the
    ``max_solves`` factorizations), set the other z's to 0, and accept
    the point only if no index is infeasible at the tight level ``t = feas_tol·n`` (``z_i < −t‖z‖∞`` for
    i ∈ α, ``w_i < −t·s_w`` for i ∉ α, ``s_w = ‖M‖∞‖z‖∞ + ‖q‖∞``) and it passes the final check ``lemke``
    uses (``final_check``, ``check_tol``; tiny negatives of z are then clipped to 0 and the check repeated).
    The tight level (1000× below check_tol by default) keeps a warm start from accepting, step after
    step, a basis that is infeasible within the check's tolerance: on box_stack that biased the
    velocities (1e-8 m/s after 0.4 s against 1e-13 cold). Otherwise the guess is corrected by block
    principal pivoting (Júdice–Pires): every infeasible index switches sides while the number of
    infeasible indices keeps falling, otherwise only the largest one (Murty's rule); at most
    ``max_solves`` factorizations. A non-finite solution ends the attempt. This is a
    heuristic without a convergence guarantee for the contact LCP (M is not a P-matrix): the caller
    falls back to ``lemke`` when ``solved`` is False. Never raises on data; M and q are not validated
    beyond shape (callers pass ``lemke``-ready data).
    """
    M = np.ascontiguousarray(M, dtype=np.float64)
    q = np.ascontiguousarray(q, dtype=np.float64)
    n = q.shape[0]
    alpha = np.array(basic, dtype=bool).reshape(n)
    opts = options or LemkeOptions()
    z = np.zeros(n)
    w = np.empty(n)
    if n == 0:
        return BasisSolveResult(z, w, True, 0, 0.0, alpha)
    mnorm = float(np.abs(M).sum(axis=1).max())
    qnorm = float(np.abs(q).max())
    t = feas_tol * n
    best_bad = n + 1
    solves = 0
    res = np.inf
    while solves < max_solves:
        z[:] = 0.0
        idx = np.flatnonzero(alpha)
        solves += 1
        if idx.size:
            Q, R, P = scipy.linalg.qr(M[np.ix_(idx, idx)], pivoting=True, check_finite=False)
            diag = np.abs(np.diag(R))
            rank = int(np.count_nonzero(diag > rank_tol * max(diag[0], 1e-300)))
            if rank < idx.size:
                # dependent columns (e.g. a fourth coplanar corner of a face): those z's leave the basis
                alpha[idx[P[rank:]]] = False
                continue
            z[idx[P]] = scipy.linalg.solve_triangular(R, Q.T @ -q[idx], check_finite=False)
        if not np.all(np.isfinite(z)):
            return BasisSolveResult(z, M @ z + q, False, solves, np.inf, alpha)
        res = float(final_check(M, q, z, w, opts.check_tol))
        znorm = max(float(np.abs(z).max()), 1e-300)
        sw = max(mnorm * znorm + qnorm, 1e-300)
        bad = np.flatnonzero((alpha & (z < -t * znorm)) | (~alpha & (w < -t * sw)))
        if bad.size == 0:
            if res <= 1.0:
                z[z < 0.0] = 0.0
                res = float(final_check(M, q, z, w, opts.check_tol))
                if res <= 1.0:
                    return BasisSolveResult(z, w, True, solves, res, alpha)
            break  # fails on complementarity (w_α ≠ 0: an ill-conditioned subsystem): give up
        if bad.size < best_bad:
            best_bad = bad.size
            alpha[bad] = ~alpha[bad]
        else:
            alpha[bad[-1]] = not alpha[bad[-1]]
    return BasisSolveResult(z, w, False, solves, res, alpha)
