"""The entry points ``lemke`` (cold) and ``lemke_from_basis`` (warm): validation, the choice of kernel (dense
tableau, dense revised, sparse LU) from ``LemkeOptions.method`` and M, and the restart of a failed run from
its last basis."""

from __future__ import annotations

import numpy as np
import scipy.sparse

from convexsim.lcp.lemke import sparse as sparse_lemke
from convexsim.lcp.lemke.checks import plausible_gain
from convexsim.lcp.lemke.options import METHODS, RATIO_TESTS, LemkeOptions, pivot_limits
from convexsim.lcp.lemke.result import LemkeResult, LemkeStatus
from convexsim.lcp.lemke.revised import run_revised
from convexsim.lcp.lemke.tableau import tableau_kernel
from convexsim.lcp.lemke.validate import as_sparse_lcp_matrix, validate_lcp
from convexsim.lcp.lemke.warm import warm_tableau
from convexsim.lcp.lemke.workspace import LemkeWorkspace


def _sparse_choice(M, opts: "LemkeOptions"):
    """(the sparse-LU kernel module, nnz(M) or None) if ``opts.method`` selects it for M ("sparse"; "auto" on
    large sparse M, ``sparse_lemke.use_sparse``), else (None, None) (then "auto" means "revised")."""
    if opts.method not in ("sparse", "auto"):
        return None, None
    if scipy.sparse.issparse(M):             # given in sparse form: the sparse kernel whatever the size
        return sparse_lemke, int(M.nnz)
    if opts.method == "sparse":
        return sparse_lemke, None
    nnz = sparse_lemke.use_sparse(M)
    return (sparse_lemke, nnz) if nnz else (None, None)


def lemke(M, q, *, d=None, max_pivots: int | None = None, workspace: LemkeWorkspace | None = None,
          options: LemkeOptions | None = None) -> LemkeResult:
    """Solve LCP(M, q): z ≥ 0, w = Mz + q ≥ 0, zᵀw = 0 by Lemke's method (Harris ratio test by default).

    Args:
        M: matrix, shape (n, n): an array, or a scipy.sparse matrix (solved by the sparse-LU kernel unless
            ``options.method`` names a dense one; no n × n dense copy is made).
        q: vector, shape (n,).
        d: covering vector, shape (n,), every entry > 0 (default all ones). It changes the path,
            hence pivot counts and, outside the P / copositive-plus classes, possibly the outcome.
        max_pivots: pivot limit (default ``max(1000, 50 n)``); the first z0 pivot counts.
        workspace: reusable ``LemkeWorkspace`` (results are then views into it).
        options: ``LemkeOptions`` (tolerances; ``ratio_test="textbook"`` for the classic path).

    Returns:
        LemkeResult with status SOLVED, SECONDARY_RAY, PIVOT_LIMIT or NUMERICAL_FAILURE. A result is
        SOLVED only if it passed the scaled check of z ≥ 0, w ≥ 0, z∘w = 0.

    Raises:
        ValueError: non-square M, mismatched q or d, non-finite data, d with an entry ≤ 0,
            max_pivots < 1.

    Example:
        >>> r = lemke([[2.0, 1.0], [1.0, 2.0]], [-5.0, -6.0])
        >>> r.status.name, r.z.round(6).tolist(), r.pivots
        ('SOLVED', [1.333333, 2.333333], 3)
    """
    M, q, d = validate_lcp(M, q, d)
    n = M.shape[0]
    opts = options or LemkeOptions()
    max_pivots, refactor = pivot_limits(n, opts, max_pivots)
    if int(max_pivots) < 1:
        raise ValueError(f"max_pivots must be ≥ 1; got {max_pivots}")
    if opts.ratio_test not in RATIO_TESTS:
        raise ValueError(f"LemkeOptions.ratio_test must be one of {sorted(RATIO_TESTS)}; "
                         f"got {opts.ratio_test!r}")
    if opts.method not in METHODS:
        raise ValueError(f"LemkeOptions.method must be one of {list(METHODS)}; got {opts.method!r}")
    harris = RATIO_TESTS[opts.ratio_test]
    if n == 0:
        e = np.zeros(0)
        return LemkeResult(e, e.copy(), LemkeStatus.SOLVED, 0, 0.0, np.zeros(0, np.int64), e.copy(), 0.0)
    sparse, nnz = _sparse_choice(M, opts)
    if sparse is not None:
        return sparse.sparse_lemke(M, q, d=d, max_pivots=int(max_pivots), options=opts,
                                   refactor=int(opts.refactor_every), nnz=nnz, restart=_restarts(opts))
    if scipy.sparse.issparse(M):             # a dense method asked for: the dense copy
        M = np.ascontiguousarray(M.toarray())
    own = workspace is None
    ws = workspace if workspace is not None else LemkeWorkspace(n)
    if opts.method in ("revised", "auto"):
        Bt, r, c, LU, perm, perm2, basis, vecs, ibuf, fbuf = ws.revised_views(n)
        status, pivots, z0, res = run_revised(M, q, d, int(max_pivots), opts, refactor, harris, Bt, r, c, LU,
                                              perm, perm2, basis, vecs, ibuf, fbuf, 0)
    else:
        T, LU, perm, perm2, basis, vecs = ws.views(n)
        status, pivots, z0, res = tableau_kernel(
            M, q, d, int(max_pivots), opts.pivot_tol, opts.ratio_rel_tol, opts.rhs_tol, opts.lex_rel_tol,
            opts.lex_abs_tol, opts.check_tol, refactor, harris, opts.harris_tol, opts.harris_pivot_ratio,
            T, LU, perm, perm2, basis, vecs)
    z, w, ray = vecs[0], vecs[1], vecs[4]
    failed = _restarts(opts) and status in (LemkeStatus.NUMERICAL_FAILURE, LemkeStatus.SECONDARY_RAY)
    if own or failed:
        z, w, ray, basis = z.copy(), w.copy(), ray.copy(), basis.copy()
    first = LemkeResult(z, w, LemkeStatus(int(status)), int(pivots), float(z0), basis, ray, float(res))
    if failed:
        return _restart_from_last_basis(M, q, first, int(max_pivots), workspace, opts)
    return first


def lemke_from_basis(M, q, basic, *, max_pivots: int | None = None, workspace: LemkeWorkspace | None = None,
                     options: LemkeOptions | None = None, rank_tol: float = 1e-10) -> LemkeResult:
    """Lemke started from a guessed complementary basis (warm start; docs/lcp.md §2).

    With α the guessed basic z's (dependent columns of M_αα dropped, ``independent_basis``) and B the
    complementary basis they define, the covering vector is d = B·1: in the basis' coordinates (the
    principal pivot transform of M on α) z0's column is then −1, the standard start. If the guessed
    basis is feasible, no pivot is made; otherwise z0 enters at the most negative basic value and the
    path (same kernel, same Harris test, same final check on the original (M, q)) repairs the guess:
    roughly as many pivots as wrong indices. No termination guarantee (the transformed matrix need not
    be copositive-plus): callers fall back to ``lemke`` when it fails. M and q are not validated (callers
    pass ``lemke``-ready data). Returns a LemkeResult (status NUMERICAL_FAILURE, 0 pivots, if M_αα
    is singular).
    """
    Ms = as_sparse_lcp_matrix(M)
    M = Ms if Ms is not None else np.ascontiguousarray(M, dtype=np.float64)
    q = np.ascontiguousarray(q, dtype=np.float64)
    n = q.shape[0]
    opts = options or LemkeOptions()
    max_pivots, refactor = pivot_limits(n, opts, max_pivots)
    if n == 0:
        e = np.zeros(0)
        return LemkeResult(e, e.copy(), LemkeStatus.SOLVED, 0, 0.0, np.zeros(0, np.int64), e.copy(), 0.0)
    sparse, nnz = _sparse_choice(M, opts)
    if sparse is not None:
        return sparse.sparse_lemke(M, q, max_pivots=int(max_pivots), options=opts, refactor=int(opts.refactor_every),
                                   basic=basic, rank_tol=rank_tol, nnz=nnz, restart=_restarts(opts))
    if Ms is not None:
        M = np.ascontiguousarray(Ms.toarray())
    own = workspace is None
    ws = workspace if workspace is not None else LemkeWorkspace(n)
    alpha = np.array(basic, dtype=bool).reshape(n)
    revised = opts.method in ("revised", "auto")
    if revised:
        Bt, r, c, LU, perm, perm2, basis, vecs, ibuf, fbuf = ws.revised_views(n)
        d = warm_tableau(M, q, alpha, Bt.T, basis, rank_tol, rhs_out=r)
    else:
        T, LU, perm, perm2, basis, vecs = ws.views(n)
        d = warm_tableau(M, q, alpha, T, basis, rank_tol)
    if d is None:
        e = np.zeros(n)
        return LemkeResult(e, q.copy(), LemkeStatus.NUMERICAL_FAILURE, 0, 0.0, basis.copy(), e.copy(), np.inf)
    if revised:
        status, pivots, z0, res = run_revised(M, q, d, int(max_pivots), opts, refactor,
                                              RATIO_TESTS[opts.ratio_test], Bt, r, c, LU, perm, perm2, basis,
                                              vecs, ibuf, fbuf, 1)
    else:
        status, pivots, z0, res = tableau_kernel(
            M, q, d, int(max_pivots), opts.pivot_tol, opts.ratio_rel_tol, opts.rhs_tol, opts.lex_rel_tol,
            opts.lex_abs_tol, opts.check_tol, refactor, RATIO_TESTS[opts.ratio_test], opts.harris_tol,
            opts.harris_pivot_ratio, T, LU, perm, perm2, basis, vecs, 1)
    z, w, ray = vecs[0], vecs[1], vecs[4]
    if own:
        z, w, ray, basis = z.copy(), w.copy(), ray.copy(), basis.copy()
    return LemkeResult(z, w, LemkeStatus(int(status)), int(pivots), float(z0), basis, ray, float(res))


def _restarts(opts: "LemkeOptions") -> bool:
    """Whether a failed run restarts from its last basis: ``opts.restart`` with the Harris rule (the textbook
    rule stays the classic single path, whose pivot counts and failures the tests compare)."""
    return bool(opts.restart) and opts.ratio_test == "harris"


def _restart_from_last_basis(M, q, first: "LemkeResult", max_pivots: int, workspace, opts) -> "LemkeResult":
    """``LemkeOptions.restart``: a failed run (numerical failure, secondary ray) continued from the
    complementary basis of its basic z's by ``lemke_from_basis`` within the pivots left. Returns the restart's
    result if it solved with a plausible gain (``plausible_gain``), else ``first``; pivots count both runs."""
    n = q.shape[0]
    left = max_pivots - first.pivots
    b = first.basis
    alpha = np.zeros(n, bool)
    alpha[b[(b >= n) & (b < 2 * n)] - n] = True
    if left < 1 or not alpha.any():
        return first
    again = lemke_from_basis(M, q, alpha, max_pivots=left, workspace=workspace, options=opts)
    pivots = first.pivots + again.pivots
    if again.solved and plausible_gain(M, q, again.z):
        return LemkeResult(again.z, again.w, again.status, pivots, again.z0, again.basis, again.ray, again.residual)
    return LemkeResult(first.z, first.w, first.status, pivots, first.z0, first.basis, first.ray, first.residual)
