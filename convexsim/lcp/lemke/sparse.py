"""Revised Lemke with a sparse LU of the basis (``LemkeOptions.method="sparse"``; ``"auto"`` picks it for
large sparse LCPs).

The dense revised kernel (``revised.py``) keeps B⁻¹ explicitly: a pivot on a heap island (n ≈ 2300, k ≈ 700
basic z's) streams the n·k non-unit entries of B⁻¹ twice, 1.5–3 ms per pivot. Here the basis matrix B
(columns: e_j for a basic w_j, −M_·j for a basic z_j, −d for z0) is kept as a sparse LU of the basis at the
last refactorization, B₀ = LU (SuperLU, ``scipy.sparse.linalg.splu``), and the pivots since then as an eta
file (product form: B⁻¹ = E_t ⋯ E_1 B₀⁻¹). A pivot costs one sparse solve with B₀ plus the etas (FTRAN of the
entering column), an O(n·s) update of the rhs and of a sketch (below), and the ratio test: O(nnz(LU) + n·t)
instead of O(n·k). Every ``refactor`` pivots B is factorized afresh from the original data (drift control,
and the eta file stays short).

The pivots between two refactorizations run in one compiled kernel (``sparse_kernels.walk_pivots``): FTRAN (``lu_solve_csc`` on
SuperLU's factors, then the etas), the ratio test with the sketch's noise scales formed only for the rows
with a positive pivot entry (``harris_sketch``), lexicographic ties on rows of B⁻¹ (BTRAN: the transposed
etas on the unit row, which touch only its nonzeros, then ``lu_solve_transposed`` on CSR copies of L and U),
the pivot on the rhs, sketch and eta file, the early exit. It returns to Python to refactorize (eta file
full, or a tie to be decided on a fresh basis) and at the end. The Python loop (``compiled=False``,
``COMPILED``) is kept as the reference: the same kernels and arithmetic, so the same path. Eta columns are
stored dense when more than a quarter of their entries are nonzero (on heap LCPs all are: −d, z0's column,
fills B⁻¹), sparse otherwise. Per pivot at n = 2570 (heap LCP, cold): ≈ 0.11 ms in the kernel (the etas and
the LU solve ≈ 2/3 of it, memory bound) plus ≈ 0.05 ms of refactorizations (≈ 4 ms each with the re-FTRAN
of q and the sketch, every 100 pivots; 50–200 measured, 100 is best).

The path follows the dense revised kernel's rules (docs/lcp.md §1): the Harris two-pass ratio test with
negative rhs clamped, pivot candidates above their noise level, z0 first, the 1e-6 pivot filter and the
lexicographic rule among the rest (rows of B⁻¹ by transposed solves, BTRAN), the bound shift, the early exit
when the current point passes the final check, the round-off z0 rule and the final re-solve on the basis'
z support with the check on the original (M, q). What differs is the rounding-noise scales of the Harris
test, which the dense kernel reads from the rows of |B⁻¹|. A factorization does not give those rows; they
are estimated from a random sketch kept alongside the rhs: Y = B⁻¹[S | diag(|q|) S] with S an n × s matrix
of random signs (seeded, so the runs are reproducible), updated by the same pivots as the rhs, and

    e_i = max(|r_i|, ‖Y_q,i‖₂/√s)       ≈ ‖B⁻¹_i· ∘ q‖₂ ≤ (|B⁻¹||q|)_i       (rhs noise scale)
    f_i = ‖Y_S,i‖₂/√s · ‖a‖₂            ≈ ‖B⁻¹_i·‖₂‖a‖₂ ≥ (|B⁻¹||a|)_i      (entering column noise scale)

E‖Y_i‖²/s equals the squared 2-norm of row i (weighted by |q| for Y_q). The rhs scale thus errs low (the
Harris feasibility tolerance keeps the data floor max(e_i, floor_i) and never exceeds the dense one by more
than the sketch's spread), and the column scale errs high (an entry near its noise level is then excluded
from the pivot candidates a little earlier, the safe side). The path may therefore differ from the dense
kernel's on degenerate problems; every answer passes the same final check on the original data.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse
import scipy.sparse.linalg

from convexsim.lcp.lemke.checks import final_check_sparse, plausible_gain
from convexsim.lcp.lemke.options import LemkeOptions
from convexsim.lcp.lemke.result import LemkeResult, LemkeStatus
from convexsim.lcp.lemke.pivot_rules import early_exit_csr, fill_floors, harris_ratio_test, lex_less_rows, write_ray
from convexsim.lcp.lemke.revised import compressed_transpose, sparse_pattern
from convexsim.lcp.lemke.sparse_kernels import (WALK_FAILED, WALK_REFACTOR, apply_etas, basis_csc, btran_row,
                                                lu_solve_csc, lu_solve_csc_many, noise_scales, pivot_vectors,
                                                record_eta, variable_column, walk_pivots)
from convexsim.lcp.lemke.validate import as_sparse_lcp_matrix
from convexsim.lcp.lemke.warm import independent_basis


SKETCH_COLUMNS = 8
"""s, the sketch width: the row-norm estimates have relative spread ≈ 1/√(2s) = 25 %."""


REFACTOR_EVERY = 100
"""Pivots between sparse refactorizations (the eta file's length at most); chosen by measurement on heap
islands (docs/lcp.md §1, "Sparse-LU Lemke")."""


COMPILED = True
"""Run the pivots in the compiled kernel ``walk_pivots`` (False: the Python loop, kept as the reference path;
``sparse_lemke(..., compiled=...)`` overrides it per call)."""


AUTO_MIN_SIZE = 600
"""``method="auto"``: the sparse kernel for n ≥ this and M at most ``AUTO_MAX_DENSITY`` nonzero, the dense
revised kernel otherwise."""


AUTO_MAX_DENSITY = 0.1


PIVOT_RATIO_MIN = 1e-3
"""The Harris pass-2 pivot filter of this kernel is c_i ≥ max(``LemkeOptions.harris_pivot_ratio``, this)·c_max.
With the options' 1e-6 the lexicographic rule took pivots 1e-6 of the largest eligible one on cold heap LCPs
(e.g. 5.9e-6 against 4.3): B⁻¹'s entries jumped from O(1) to 1e6, the Harris tolerances (which scale with
the rows of |B⁻¹||q|) to 5e-4 of ‖q‖∞, and the next ratio test let basic variables go to −4e-4: the path
ended on a complementary but infeasible basis (NUMERICAL_FAILURE) after ≈ 1800 pivots (docs/lcp.md §6)."""


def use_sparse(M: np.ndarray) -> int:
    """``method="auto"``'s choice: n ≥ AUTO_MIN_SIZE and at most AUTO_MAX_DENSITY of M's entries nonzero.
    Returns nnz(M) when chosen (≥ 1 then; the count is passed on to ``sparse_lemke``), else 0."""
    n = M.shape[0]
    if n < AUTO_MIN_SIZE:
        return 0
    nnz = int(np.count_nonzero(M))
    return max(nnz, 1) if nnz <= AUTO_MAX_DENSITY * n * n else 0


class _Basis:
    """B⁻¹ = E_t ⋯ E_1 B₀⁻¹ with B₀ = LU (SuperLU) or the identity (cold start before the first refactor).
    M's columns come from its CSC copy (colptr, colidx, colval). The eta file keeps each pivot's entering
    column as its nonzeros (eta_ptr, eta_idx, eta_val; CSC-like), its pivot row and pivot value."""

    _NO_INT = np.zeros(1, np.int64)
    _NO_FLOAT = np.zeros(1)

    def __init__(self, colptr, colidx, colval, d: np.ndarray, cap: int):
        n = d.shape[0]
        self.colptr, self.colidx, self.colval = colptr, colidx, colval
        self.d = d
        self.n = n
        self.lu = None
        self.factors = (self._NO_INT, self._NO_INT, self._NO_FLOAT, self._NO_INT, self._NO_INT, self._NO_FLOAT,
                        self._NO_FLOAT, self._NO_INT, self._NO_INT)
        self.tfactors = self.factors[:6]      # L and U in CSR form (for BTRAN)
        self.cap = cap
        self.eta_ptr = np.zeros(cap + 1, np.int64)
        self.eta_idx = np.empty(cap * n, np.int64)
        self.eta_val = np.empty(cap * n)
        self.eta_row = np.empty(cap, np.int64)
        self.eta_piv = np.empty(cap)
        self.neta = 0
        nmax = 2 * n + colidx.shape[0]
        self.Bp = np.empty(n + 1, np.int64)
        self.Bi = np.empty(nmax, np.int64)
        self.Bx = np.empty(nmax)
        self.y = np.empty(n)

    @property
    def eta_file(self):
        """The eta file's arrays, in the kernels' argument order (without the count)."""
        return self.eta_ptr, self.eta_idx, self.eta_val, self.eta_row, self.eta_piv

    def column(self, var: int) -> tuple[np.ndarray, float]:
        """The original column a of variable var in the tableau [I | −M | −d], dense, and ‖a‖₂."""
        a = np.empty(self.n)
        anorm = variable_column(var, self.colptr, self.colidx, self.colval, self.d, a)
        return a, anorm

    def ftran(self, a: np.ndarray) -> np.ndarray:
        """B⁻¹a (a new array)."""
        if self.lu is None:
            x = a.copy()
        else:
            x = np.empty(self.n)
            lu_solve_csc(*self.factors, a, x, self.y)
        apply_etas(x, *self.eta_file, self.neta)
        return x

    def ftran_many(self, A: np.ndarray) -> np.ndarray:
        """B⁻¹A for a few columns (n × k, C order)."""
        if self.lu is None:
            X = A.copy()
        else:
            X = np.empty_like(A)
            lu_solve_csc_many(*self.factors, A, X, np.empty_like(A))
        if not self.neta:
            return X
        for k in range(X.shape[1]):
            x = np.ascontiguousarray(X[:, k])
            apply_etas(x, *self.eta_file, self.neta)
            X[:, k] = x
        return X

    def row(self, i: int) -> np.ndarray:
        """Row i of B⁻¹ (BTRAN: transposed etas, then the transposed solve with the stored factors, the
        compiled walk's own ``btran_row``; SuperLU's ``solve(trans="T")`` agrees to round-off, but a
        lexicographic tie can turn on that round-off, so both paths use the same BTRAN)."""
        out = np.empty(self.n)
        btran_row(i, self.lu is not None, *self.tfactors, *self.factors[6:], *self.eta_file, self.neta, out,
                  np.zeros(self.n), np.empty(self.n), np.empty(self.n + 1, np.int64))
        return out

    def record(self, c: np.ndarray, row: int) -> bool:
        """Append a pivot; False when the eta file is full (refactor first)."""
        if self.neta >= self.cap:
            return False
        self.neta = record_eta(*self.eta_file, self.neta, c, row)
        return True

    def factor(self, basis: np.ndarray) -> bool:
        """B₀ = LU of the basis matrix from the original data (SuperLU, COLAMD order); the eta file is emptied.
        False if B is singular (an exactly zero pivot) or the factors are not finite."""
        n = self.n
        nnz = basis_csc(basis, self.colptr, self.colidx, self.colval, self.d, self.Bp, self.Bi, self.Bx)
        B = scipy.sparse.csc_matrix((self.Bx[:nnz], self.Bi[:nnz], self.Bp), shape=(n, n))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", scipy.sparse.linalg.MatrixRankWarning)
                lu = scipy.sparse.linalg.splu(B, permc_spec="COLAMD")
        except RuntimeError:   # "Factor is exactly singular"
            return False
        L, U = lu.L, lu.U
        udiag = U.diagonal()
        if not (np.all(np.isfinite(U.data)) and np.all(np.isfinite(L.data)) and np.all(udiag != 0.0)):
            return False
        self.lu = lu
        self.factors = (L.indptr.astype(np.int64), L.indices.astype(np.int64), L.data, U.indptr.astype(np.int64),
                        U.indices.astype(np.int64), U.data, udiag, lu.perm_r.astype(np.int64),
                        lu.perm_c.astype(np.int64))
        tf = []
        for p, i, x in (self.factors[0:3], self.factors[3:6]):
            tp, ti, tx = np.empty_like(p), np.empty_like(i), np.empty_like(x)
            compressed_transpose(p, i, x, tp, ti, tx)
            tf += [tp, ti, tx]
        self.tfactors = tuple(tf)
        self.neta = 0
        return True


def _final_resolve_sparse(Mc, rp, ri, rv, mnorm, q, z, basis, check_tol):
    """``tableau.final_resolve`` with sparse data: re-solve M_αα z_α = −q_α (SuperLU), keep the better of the
    two candidates, check, clip tiny negatives. Returns (status, z, w, residual)."""
    n = q.shape[0]
    w = np.empty(n)
    res = final_check_sparse(rp, ri, rv, mnorm, q, z, w, check_tol)
    a = np.sort(basis[(basis >= n) & (basis < 2 * n)] - n)
    if a.size:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", scipy.sparse.linalg.MatrixRankWarning)
                x = scipy.sparse.linalg.splu(Mc[a][:, a].tocsc(), permc_spec="COLAMD").solve(-q[a])
            zalt = np.zeros(n)
            zalt[a] = x
            walt = np.empty(n)
            res_alt = final_check_sparse(rp, ri, rv, mnorm, q, zalt, walt, check_tol)
            if res_alt < res:
                z, w, res = zalt, walt, res_alt
        except RuntimeError:
            pass
    if not (res <= 1.0):
        return 3, z, w, res
    z = np.where(z < 0.0, 0.0, z)
    res = final_check_sparse(rp, ri, rv, mnorm, q, z, w, check_tol)
    return (0 if res <= 1.0 else 3), z, w, res


def _warm_basis(M, Mc, q, alpha, rank_tol):
    """The complementary basis of the guess α (z_i basic for i ∈ α; dependent columns of M_αα removed) as
    (basis, d = B·1), or None if M_αα stays singular."""
    n = q.shape[0]
    for attempt in range(2):
        a = np.flatnonzero(alpha)
        if not a.size:
            break
        ok = True
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", scipy.sparse.linalg.MatrixRankWarning)
                lu = scipy.sparse.linalg.splu(Mc[a][:, a].tocsc(), permc_spec="COLAMD")
            piv = np.abs(lu.U.diagonal())
            ok = bool(np.all(np.isfinite(piv)) and piv.min() > rank_tol * piv.max())
        except RuntimeError:
            ok = False
        if ok:
            break
        if attempt:
            return None
        # the rank test on M_αα alone (no dense copy of M)
        keep = independent_basis(Mc[a][:, a].toarray(), np.ones(a.size, bool), rank_tol)
        alpha[a[~keep]] = False
    a = np.flatnonzero(alpha)
    b = np.flatnonzero(~alpha)
    basis = np.concatenate([n + a, b]).astype(np.int64)
    d = np.zeros(n)
    d[b] = 1.0
    if a.size:
        d -= np.asarray(Mc[:, a].sum(axis=1)).ravel()
    return basis, d


def sparse_lemke(M, q, *, d=None, max_pivots: int, options: LemkeOptions | None = None, refactor: int = -1,
                 basic=None, rank_tol: float = 1e-10, seed: int = 0, nnz: int | None = None,
                 restart: bool = True, compiled: bool | None = None) -> LemkeResult:
    """Lemke's method on LCP(M, q) with a sparse LU basis (module docstring); ``lemke`` / ``lemke_from_basis``
    call it for ``method="sparse"`` (and ``"auto"`` on large sparse M). Data must be validated by the caller.

    A run that ends in NUMERICAL_FAILURE or on a secondary ray is restarted once (``restart``) from its last
    basis: the complementary basis of its basic z's, factorized afresh from the original data, with the warm
    start's covering vector d = B·1 (``lemke_from_basis``), within the pivots left. On cold heap LCPs a path
    through a near-degenerate vertex can take a pivot ≈ 1e-7 of its column (the exact minimum ratio, not
    noise); B⁻¹ then grows by that factor, the Harris tolerances with it, and the path ends on a complementary
    but infeasible basis. That basis is close to a solution: the restart solves it in ≈ 200 pivots where
    a new cold run takes ≈ 2000 (docs/lcp.md §6). The restart's answer passes the same final check on the
    original (M, q) and must have a plausible gain (``checks.plausible_gain``); pivots count both runs. If the restart fails too, the first run's result is returned
    (its status, ray and basis), with the pivots of both.

    Args:
        M, q, d: the LCP (M dense or scipy.sparse) and covering vector (d ignored for the warm start, which
            uses d = B·1).
        max_pivots: pivot cap (the first z0 pivot counts).
        options: LemkeOptions (tolerances, ratio test).
        refactor: pivots between refactorizations (≤ 0: ``REFACTOR_EVERY``; 0 in the options means "never
            rebuild before a tie decision", as in the dense kernel).
        basic: warm start from the complementary basis of this guess of basic z's (``lemke_from_basis``).
        seed: seed of the sketch's random signs.
        nnz: M's nonzero count if known (saves an O(n²) pass).

    Returns:
        LemkeResult, statuses and fields as ``lemke``'s.
    """
    first = _sparse_lemke_run(M, q, d=d, max_pivots=max_pivots, options=options, refactor=refactor, basic=basic,
                              rank_tol=rank_tol, seed=seed, nnz=nnz, compiled=compiled)
    n = first.z.shape[0]
    left = int(max_pivots) - first.pivots
    if first.solved or not restart or first.status == LemkeStatus.PIVOT_LIMIT or left < 1:
        return first
    b = first.basis
    alpha = np.zeros(n, bool)
    alpha[b[(b >= n) & (b < 2 * n)] - n] = True
    if not alpha.any():
        return first
    again = _sparse_lemke_run(M, q, max_pivots=left, options=options, refactor=refactor, basic=alpha,
                              rank_tol=rank_tol, seed=seed, nnz=nnz, compiled=compiled)
    pivots = first.pivots + again.pivots
    if again.solved and plausible_gain(M, q, again.z):
        return LemkeResult(again.z, again.w, again.status, pivots, again.z0, again.basis, again.ray, again.residual)
    return LemkeResult(first.z, first.w, first.status, pivots, first.z0, first.basis, first.ray, first.residual)


def _compressed_copies(M, nnz: int | None):
    """(Mr, Mc, rowptr, rowidx, rowval, colptr, colidx, colval): M's CSR and CSC forms (int64 indices, sorted,
    no stored zeros) from a dense array (one compiled pass; ``nnz`` its nonzero count if known) or from a
    scipy.sparse matrix (no dense copy)."""
    if scipy.sparse.issparse(M):
        Mr = as_sparse_lcp_matrix(M)
        Mc = Mr.tocsc()
        Mc.sort_indices()
        n = Mr.shape[0]
        rp, ri = Mr.indptr.astype(np.int64), Mr.indices.astype(np.int64)
        cp, ci = Mc.indptr.astype(np.int64), Mc.indices.astype(np.int64)
        rv, cv = Mr.data, Mc.data
        return Mr, Mc, rp, ri, rv, cp, ci, cv
    M = np.ascontiguousarray(M, dtype=np.float64)
    n = M.shape[0]
    nnz = int(np.count_nonzero(M)) if nnz is None else int(nnz)
    cp, rp = np.empty(n + 1, np.int64), np.empty(n + 1, np.int64)
    ci, ri = np.empty(nnz, np.int64), np.empty(nnz, np.int64)
    cv, rv = np.empty(nnz), np.empty(nnz)
    sparse_pattern(M, cp, ci, cv, rp, ri, rv)
    Mc = scipy.sparse.csc_matrix((cv, ci, cp), shape=(n, n))
    Mr = scipy.sparse.csr_matrix((rv, ri, rp), shape=(n, n))
    return Mr, Mc, rp, ri, rv, cp, ci, cv


def _sparse_lemke_run(M, q, *, d=None, max_pivots: int, options: LemkeOptions | None = None, refactor: int = -1,
                      basic=None, rank_tol: float = 1e-10, seed: int = 0, nnz: int | None = None,
                      compiled: bool | None = None) -> LemkeResult:
    """One run of the sparse-LU path (``sparse_lemke`` without the restart)."""
    compiled = COMPILED if compiled is None else bool(compiled)
    opts = options or LemkeOptions()
    harris = opts.ratio_test == "harris"
    q = np.ascontiguousarray(q, dtype=np.float64)
    n = q.shape[0]
    Mr, Mc, rp, ri, rv, cp, ci, cv = _compressed_copies(M, nnz)
    mnorm = float(abs(Mr).sum(axis=1).max()) if Mr.nnz else 0.0
    qmax = float(np.abs(q).max()) if n else 0.0
    start = basic is not None
    basis = np.arange(n, dtype=np.int64)
    if start:
        alpha = np.array(basic, dtype=bool).reshape(n)
        wb = _warm_basis(M, Mc, q, alpha, rank_tol)
        if wb is None:
            e = np.zeros(n)
            return LemkeResult(e, q.copy(), LemkeStatus.NUMERICAL_FAILURE, 0, 0.0, basis, e.copy(), np.inf)
        basis, d = wb
    elif d is None:
        d = np.ones(n)
    d = np.ascontiguousarray(d, dtype=np.float64)
    dmax = float(np.abs(d).max()) if n else 0.0
    z = np.zeros(n)
    w = np.empty(n)
    ray = np.zeros(n)

    def result(status, pivots, z0, res, zz=None, ww=None):
        zz = z if zz is None else zz
        ww = w if ww is None else ww
        return LemkeResult(zz, ww, LemkeStatus(int(status)), int(pivots), float(z0), basis.copy(), ray, float(res))

    scale = max(1.0, mnorm, dmax)
    piv_tol = opts.pivot_tol * n * scale
    e_rhs = opts.rhs_tol * max(qmax, 1e-300)
    if q.min() >= -e_rhs and not start:
        return result(0, 0, 0.0, final_check_sparse(rp, ri, rv, mnorm, q, z, w, opts.check_tol))
    every = refactor if refactor > 0 else REFACTOR_EVERY
    B = _Basis(cp, ci, cv, d, max(1, min(every, int(max_pivots))))
    s = SKETCH_COLUMNS
    rng = np.random.default_rng(seed)
    S = rng.choice(np.array([-1.0, 1.0]), size=(n, s))
    Sw = np.concatenate([S, np.abs(q)[:, None] * S], axis=1)
    if start:
        if not B.factor(basis):
            e = np.zeros(n)
            return result(3, 0, 0.0, np.inf, e, q.copy())
        r = B.ftran(q)
        Y = np.ascontiguousarray(B.ftran_many(Sw))
    else:
        r = q.copy()
        Y = Sw.copy()
    erhs = np.empty(n)
    ecol = np.empty(n)
    ratio_rel_tol = opts.ratio_rel_tol
    pivot_ratio = max(opts.harris_pivot_ratio, PIVOT_RATIO_MIN)
    if not np.all(np.isfinite(r)):
        return result(3, 0, 0.0, np.inf)
    walk = True
    if not start:
        best = float(np.min(q / d))
        row0 = int(np.flatnonzero(q / d - best <= ratio_rel_tol * abs(best) + 2.0 * e_rhs / d)[-1])
    else:
        best = float(r.min())
        noise_scales(r, Y, s, 0.0, erhs, ecol)
        row0 = int(np.flatnonzero(r - best <= ratio_rel_tol * abs(best) + 2.0 * opts.rhs_tol * erhs)[-1])
        walk = best < 0.0
        if walk:
            zb = basis >= n
            z[basis[zb] - n] = r[zb]
            znorm = float(np.abs(r[zb]).max()) if zb.any() else 0.0
            tt = opts.pivot_tol * n
            lim = np.where(zb, tt * znorm, tt * (mnorm * znorm + qmax))
            tight = bool(np.all(r >= -lim))
            walk = not (tight and final_check_sparse(rp, ri, rv, mnorm, q, z, w, opts.check_tol) <= 1.0)
    pivots = 0
    z0_row = -1
    status = 0
    entering = -1
    tied = np.empty(n, np.int64)
    cand = np.empty(n)
    floors = np.empty(n)
    ratio_rows = np.empty(n, np.int64)   # scratch of the Harris ratio test
    t_check = opts.check_tol * n
    since_refactor = 0
    tie_refactor = max(8, n)

    def do_pivot(c, row):
        nonlocal since_refactor
        if not B.record(c, row):
            raise AssertionError("eta file overflow")   # refactor happens before it fills
        pivot_vectors(r, Y, c, row)
        since_refactor += 1

    def refactor_now() -> bool:
        nonlocal r, Y, since_refactor
        if not B.factor(basis):
            return False
        r = B.ftran(q)
        Y = np.ascontiguousarray(B.ftran_many(Sw))
        since_refactor = 0
        return bool(np.all(np.isfinite(r)))

    if walk:
        c = -np.ones(n) if start else B.ftran(-d)
        leaving = int(basis[row0])
        basis[row0] = 2 * n
        do_pivot(c, row0)
        z0_row = row0
        pivots = 1
        entering = leaving + n if leaving < n else leaving - n
        status = 1
    if walk and compiled:
        # the pivots between refactorizations in one kernel call; Python refactorizes when it asks
        state = np.array([pivots, entering, since_refactor, B.neta], np.int64)
        a, c, y, work, row_a, row_b, cand = (np.empty(n) for _ in range(7))
        rows = np.empty(n, np.int64)
        nz = np.empty(n + 1, np.int64)
        no_tie_refactor = np.iinfo(np.int64).max
        while True:
            code = walk_pivots(basis, r, Y, s, q, d, cp, ci, cv, rp, ri, rv, B.lu is not None, *B.factors, *B.tfactors,
                               *B.eta_file,
                               state, int(max_pivots), every, tie_refactor if opts.refactor_every != 0 else no_tie_refactor,
                               harris, z0_row, qmax, mnorm, dmax, piv_tol, opts.pivot_tol * n, opts.harris_tol * n,
                               pivot_ratio, ratio_rel_tol, opts.rhs_tol, opts.lex_rel_tol, opts.lex_abs_tol,
                               opts.check_tol, t_check, a, c, y, work, row_a, row_b, tied, rows, cand, z, w, ray, nz)
            B.neta = int(state[3])
            if code != WALK_REFACTOR:
                break
            if not refactor_now():
                code = WALK_FAILED
                break
            state[2] = 0
            state[3] = B.neta
        pivots = int(state[0])
        status = int(code)
        walk = False
    while walk and pivots < max_pivots:
        if B.neta >= every:
            if not refactor_now():
                status = 3
                break
        a, anorm = B.column(entering)
        c = B.ftran(a)
        if harris:
            noise_scales(r, Y, s, anorm, erhs, ecol)
            fill_floors(basis, qmax, mnorm, dmax, floors)
            ntied, z0_tied = harris_ratio_test(c, r, erhs, ecol, floors, piv_tol, opts.pivot_tol * n,
                                               opts.harris_tol * n, pivot_ratio, z0_row, tied, cand, ratio_rows)
            found = ntied > 0
        else:
            ok = c > piv_tol
            found = bool(ok.any())
            if found:
                rho = np.where(ok, r / np.where(ok, c, 1.0), np.inf)
                imin = int(np.argmin(rho))
                rho_min, cmin = rho[imin], c[imin]
                noise_scales(r, Y, s, 0.0, erhs, ecol)
                sel = np.flatnonzero(ok & (rho - rho_min <= ratio_rel_tol * abs(rho_min)
                                           + opts.rhs_tol * (erhs / np.where(ok, c, 1.0) + erhs[imin] / cmin)))
                ntied = sel.size
                tied[:ntied] = sel
                z0_tied = bool(z0_row in sel)
        if not found:
            if not (np.all(np.isfinite(r)) and np.all(np.isfinite(c))):
                status = 3
                break
            status = 2
            write_ray(basis, c, entering, ray)
            break
        if ntied > 1 and not z0_tied and since_refactor >= tie_refactor and opts.refactor_every != 0:
            if not refactor_now():
                status = 3
                break
            continue
        if z0_tied:
            row = z0_row
        else:
            row = int(tied[0])
            if ntied > 1:
                rows = {int(i): B.row(int(i)) for i in tied[:ntied]}
                for k in range(1, ntied):
                    i = int(tied[k])
                    if lex_less_rows(rows[i], c[i], rows[row], c[row], opts.lex_rel_tol, opts.lex_abs_tol):
                        row = i
        if harris and r[row] < 0.0:
            r[row] = 0.0
        leaving = int(basis[row])
        basis[row] = entering
        do_pivot(c, row)
        pivots += 1
        if leaving == 2 * n:
            status = 0
            break
        if harris and early_exit_csr(r, basis, z, w, opts.check_tol, t_check, mnorm, qmax, dmax, q, rp, ri,
                                         rv):
            status = 0
            break
        entering = leaving + n if leaving < n else leaving - n
    z[:] = 0.0
    zb = (basis >= n) & (basis < 2 * n)
    z[basis[zb] - n] = r[zb]
    z0v = float(r[basis == 2 * n][0]) if np.any(basis == 2 * n) else 0.0
    if status in (1, 2):
        if final_check_sparse(rp, ri, rv, mnorm, q, z, w, opts.check_tol) <= 1.0:
            ray[:] = 0.0
            status = 0
        else:
            return result(status, pivots, z0v, np.inf)
    elif status != 0:
        w[:] = Mr @ z + q
        return result(status, pivots, z0v, np.inf)
    st, zf, wf, res = _final_resolve_sparse(Mc, rp, ri, rv, mnorm, q, z, basis, opts.check_tol)
    return result(st, pivots, z0v, res, zf, wf)
