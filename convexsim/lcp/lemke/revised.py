"""Lemke's complementary pivoting algorithm for the linear complementarity problem.

Problem LCP(M, q): find ``z ∈ ℝⁿ`` with

    z ≥ 0,   w = M z + q ≥ 0,   zᵀw = 0.

Method (docs/lcp.md): dense tableau ``B⁻¹[I | −M | −d | q]`` over the variables
``w_1..w_n, z_1..z_n, z0`` (indices 0..n−1, n..2n−1, 2n). An artificial variable ``z0`` with
covering vector ``d > 0`` makes ``(w = q + d z0, z = 0)`` feasible; complementary pivoting then
walks the almost-complementary path until ``z0`` leaves the basis (solved), the entering column
has no positive entry (secondary ray), or the pivot limit is hit.

Two ratio tests (``LemkeOptions.ratio_test``):

* ``"textbook"``: the minimum ratio; among ratios tied up to their rounding noise, ``z0`` leaves if
  it is tied, otherwise the lexicographic minimum of the rows ``(q̄_i, B⁻¹_{i,·}) / c_i`` (the
  ε-perturbation ``q + (ε, ε², …)``, which cannot cycle). Its pivot counts are the published ones.
* ``"harris"`` (default): built for degenerate, noisy data (contact LCPs: resting contacts, coplanar
  manifold points), where the textbook test lets the last bits of M and q decide.

  - Pass 1 bounds the step by ``θ = min_i (r_i⁺ + δ_i)/c_i``, δ_i a feasibility tolerance scaled to
    row i's data: a step lowers no basic value by more than δ_i below max(its value, 0).
  - Pass 2 takes the eligible rows ``r_i⁺/c_i ≤ θ`` (negative rhs, rounding noise of a feasible basis,
    count as 0; entries at their own noise level ``(|B⁻¹||a|)_i`` are not pivots): ``z0`` if it is
    there; otherwise pivots far below the largest eligible one are dropped (a tiny pivot never wins on
    a noise-sized ratio) and the lexicographic rule decides among the rest (no cycling at degenerate
    vertices). A negative rhs in the pivot row is set to 0 first (bound shift: the step is never
    backwards).
  - After every pivot, when ``z0`` is small enough to be dropped, the basic point without ``z0`` goes
    through the final check and the path stops if it passes (degenerate contact data pass through
    solutions long before ``z0`` leaves).

After a solve the final basis is re-solved from the original data (``M_αα z_α = −q_α``, α the
basic ``z``s), the better of the two candidates is kept, and ``z ≥ 0``, ``w ≥ 0``, ``z∘w ≈ 0`` are
checked with scaled tolerances; a failed check gives ``NUMERICAL_FAILURE``, never a wrong "solved".
Every ``refactor_every`` pivots the tableau is rebuilt from the original data with a fresh LU
of the basis (drift control), and also before a lexicographic tie decision once ``max(8, n)``
pivots have passed since the last rebuild: the decision reads ``B⁻¹``, whose accumulated rounding
noise otherwise decides near-ties (Fathi's SPD family lost 4 of its 2⁸ pivots that way). A rebuild
(LU of the basis, then B⁻¹ applied to the 2n + 2 tableau columns: ≈ 4.7 n³ flops) costs as much as
about 1.2·n pivots (a pivot updates the n × (2n + 2) tableau: ≈ 4 n² flops), so this at most about
doubles the work. ``refactor_every = 0`` turns off both kinds of rebuild.

References: K. G. Murty, *Linear Complementarity, Linear and Nonlinear Programming* (1988), ch. 2;
R. W. Cottle, J.-S. Pang, R. E. Stone, *The Linear Complementarity Problem* (1992), §4.4;
P. M. J. Harris, "Pivot selection methods of the Devex LP code", Math. Programming 5 (1973) (two-pass
ratio test).
"""

from __future__ import annotations

import enum
import warnings
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import scipy.linalg
import scipy.sparse

from convexsim._jit import jit

_EPS = float(np.finfo(np.float64).eps)


class LemkeStatus(enum.IntEnum):
    """How a Lemke run ended."""

    def __str__(self) -> str:
        return self.name

    def __format__(self, spec: str) -> str:
        return format(self.name, spec)

    SOLVED = 0
    """z0 left the basis (or q ≥ 0): z solves the LCP and passed the final check."""
    PIVOT_LIMIT = 1
    """max_pivots reached (exponential path or, with broken data, cycling)."""
    SECONDARY_RAY = 2
    """The entering column had no positive entry: the path escapes to infinity. For copositive-plus
    M (PSD included) this proves the LCP infeasible; for general M it proves nothing."""
    NUMERICAL_FAILURE = 3
    """Singular basis on refactorization, non-finite values, or the final check failed."""


class LemkeOptions(NamedTuple):
    """Tolerances of ``lemke`` (all dimensionless; they multiply data scales, see docs/lcp.md).

    Attributes:
        pivot_tol: an entering-column entry is a pivot candidate when ``c_i > pivot_tol·n·s``,
            s = max(1, ‖M‖∞, ‖d‖∞).
        ratio_rel_tol: ratios tie when ``ρ_i − ρ* ≤ ratio_rel_tol·|ρ*| + rhs_tol·(e_i/c_i + e*/c*)``
            with the rhs noise scale ``e_i = (|B⁻¹| |q|)_i`` of each row.
        rhs_tol: multiplies the rhs noise scale (ratio ties above; the trivial test ``q ≥ −rhs_tol·‖q‖∞``).
            Too loose a tie lets the lexicographic rule pick a row with a larger true ratio, which
            makes the basis slightly infeasible and derails degenerate (contact) problems; too tight
            lets rounding noise decide genuine ties.
        lex_rel_tol: lexicographic entries are equal when within ``lex_rel_tol`` relative, plus
            an absolute floor ``lex_abs_tol·max(‖row a‖∞, ‖row b‖∞)`` of the pair compared.
        lex_abs_tol: see lex_rel_tol. A floor scaled by the largest entry over *all* tied rows (tried:
            100ε·n·max) merged distinct lexicographic vectors on 240-variable contact problems and let
            the path cycle; without any floor rounding noise decides exact ties (Fathi's problem).
        check_tol: final check tolerance factor ``t = check_tol·n``: ``z ≥ −t·‖z‖∞``,
            ``w ≥ −t·s_w``, ``|z_i w_i| ≤ t·‖z‖∞·s_w`` with ``s_w = ‖M‖∞‖z‖∞ + ‖q‖∞``.
        refactor_every: rebuild the tableau from (M, q, d) every this many pivots (0 = never, −1 = automatic:
            max(50, 2n); a rebuild costs about as much as 1.2·n pivots). 0 also turns off the rebuild
            before lexicographic tie decisions.
        ratio_test: ``"harris"`` (default; robust on noisy degenerate data, module docstring) or
            ``"textbook"`` (minimum ratio, z0 first, lexicographic ties: the classic path, whose
            pivot counts match the literature; no early exit).
        harris_tol: Harris feasibility tolerance factor: a basic variable may go down to
            ``−δ_i = −harris_tol·n·max(e_i, f_i)`` (e_i = (|B⁻¹||q|)_i its rounding-noise scale, f_i its
            data scale: ‖q‖∞ for a w, ‖q‖∞/‖M‖∞ for a z). Default 1000ε: 10× below the final check's
            tolerance. 100ε, 300ε and 1000ε all leave a residual failure rate of ~1e-4 on perturbed box_stack
            LCPs (the stepper's fallback chain covers it); 1000ε takes the fewest pivots.
        harris_pivot_ratio: pass 2 keeps the eligible rows whose pivot is ``c_i ≥ harris_pivot_ratio·c_max``
            (c_max the largest eligible pivot) and the lexicographic rule decides among them. Near 1 this
            is "the largest pivot"; that cycled on Siconos' 40×40 ``lcp_tobenna`` (a degenerate vertex
            with exact zero rhs, where only the lexicographic rule prevents cycling), so the default
            1e-6 only excludes pivots a million times smaller than the best eligible one.
        method: ``"auto"`` (default): ``"sparse"`` for large sparse M (n ≥ ``sparse_lemke.AUTO_MIN_SIZE``, at
            most ``AUTO_MAX_DENSITY`` nonzero), ``"revised"`` otherwise. ``"sparse"``: the basis as a sparse
            LU with an eta file (``convexsim.lcp.sparse_lemke``; same rules, sketched noise scales, so the path
            may differ from the dense kernels' on degenerate data). ``"revised"``: keep only B⁻¹ and B⁻¹q and compute the entering column as B⁻¹a
            (a sparse product: contact LCPs are a few percent dense); a pivot updates B⁻¹ on the pivot
            row's nonzero columns (at most k + 1, k the basic z's) and a rebuild inverts B with LAPACK.
            ``"tableau"``: the dense tableau B⁻¹[I | −M | −d | q] (2n + 2 columns per pivot). Both walk
            the same path with the same rules; they differ in rounding only (docs/lcp.md §1, "Revised
            Lemke").
        restart: a run that ends in NUMERICAL_FAILURE or on a secondary ray starts once more from its last
            basis (the complementary basis of its basic z's, factorized afresh from the original data, with the
            warm start's covering vector; ``lemke_from_basis``), within the pivots left. Near-degenerate
            contact LCPs can end on a complementary basis that is infeasible by a few rounding units times
            the basis condition; that basis is next to a solution and the restart takes 2–200 pivots
            (docs/lcp.md §1, "Restart from the last basis"). An answer still has to pass the final check; if the
            restart fails too, the first run's result is returned (pivots of both counted). False: one run.
            Only with the Harris rule (``ratio_test="textbook"`` is always the classic single run).
    """

    pivot_tol: float = 10.0 * _EPS
    ratio_rel_tol: float = 1e-12
    rhs_tol: float = 10.0 * _EPS
    lex_rel_tol: float = 1e-12
    lex_abs_tol: float = 10.0 * _EPS
    check_tol: float = 1e4 * _EPS
    refactor_every: int = -1
    ratio_test: str = "harris"
    harris_tol: float = 1000.0 * _EPS
    harris_pivot_ratio: float = 1e-6
    method: str = "auto"
    restart: bool = True


@dataclass
class LemkeResult:
    """Outcome of ``lemke``.

    Attributes:
        z: the solution (status SOLVED), else the last basic point, shape (n,).
        w: M z + q, shape (n,).
        status: LemkeStatus.
        pivots: pivots performed, counting the first pivot of z0 into the basis.
        z0: value of the artificial variable at the end (0 when solved).
        basis: basic variable of each tableau row (0..n−1 → w_i, n..2n−1 → z_{i−n}, 2n → z0), shape (n,).
        ray: for SECONDARY_RAY, the z-part of the ray direction (entering z variable = 1, basic z
            variables increase by −c_i); zeros otherwise, shape (n,).
        residual: max of the scaled violations of z ≥ 0, w ≥ 0, z∘w = 0 (after the re-solve).
    """

    z: np.ndarray
    w: np.ndarray
    status: LemkeStatus
    pivots: int
    z0: float
    basis: np.ndarray
    ray: np.ndarray
    residual: float

    @property
    def solved(self) -> bool:
        """status is SOLVED."""
        return self.status == LemkeStatus.SOLVED


class LemkeWorkspace:
    """Preallocated buffers for ``lemke`` on problems of size n ≤ capacity.

    Reusing one workspace across a stepping loop avoids allocating the O(n²) buffers each step (the
    tableau for ``method="tableau"``, B⁻¹ for ``method="revised"``; each is allocated on first use).
    With a workspace, the returned ``z``, ``w``, ``basis`` and ``ray`` are views into it, valid
    until the next call that uses the same workspace.
    """

    def __init__(self, capacity: int):
        self.capacity = 0
        self.reserve(capacity)

    def reserve(self, n: int) -> None:
        """Grow the buffers (geometrically) so that problems of size n fit."""
        if n <= self.capacity:
            return
        cap = max(int(n), 2 * self.capacity, 4)
        self.capacity = cap
        self.tableau = None
        self.inverse = None
        self.lu = np.zeros(cap * cap)
        self.perm = np.zeros(cap, np.int64)
        self.perm2 = np.zeros(cap, np.int64)
        self.basis = np.zeros(cap, np.int64)
        self.vecs = np.zeros((6, cap))
        self.ibuf = np.zeros(4 * cap, np.int64)
        self.fbuf = np.zeros(8 * cap)

    def views(self, n: int):
        """Contiguous views sized for n (no data allocation once the tableau exists)."""
        self.reserve(n)
        cap = self.capacity
        if self.tableau is None:
            self.tableau = np.zeros(cap * (2 * cap + 2))
        T = self.tableau[: n * (2 * n + 2)].reshape(n, 2 * n + 2)
        lu = self.lu[: n * n].reshape(n, n)
        return T, lu, self.perm[:n], self.perm2[:n], self.basis[:n], self.vecs[:, :n]

    def revised_views(self, n: int):
        """Views for the revised kernel: ((B⁻¹)ᵀ (n, n), rhs (n,), column (n,), lu, perm, perm2, basis, vecs,
        int buffer (4n), float buffer (4n))."""
        self.reserve(n)
        cap = self.capacity
        if self.inverse is None:
            self.inverse = np.zeros(cap * cap)
        Bt = self.inverse[: n * n].reshape(n, n)
        lu = self.lu[: n * n].reshape(n, n)
        f = self.fbuf
        return (Bt, f[:n], f[cap:cap + n], lu, self.perm[:n], self.perm2[:n], self.basis[:n],
                self.vecs[:, :n], self.ibuf[:4 * n], f[2 * cap:2 * cap + 6 * n])


# --------------------------------------------------------------------------------------------
# numba kernels (never raise; return status codes)
# --------------------------------------------------------------------------------------------


@jit
def _lu_factor(A, perm, rel_tol):
    """In-place LU with partial pivoting, PA = LU. Returns 0, or 1 if a pivot ≤ rel_tol·max|A|."""
    n = A.shape[0]
    amax = 0.0
    for i in range(n):
        for j in range(n):
            a = abs(A[i, j])
            if a > amax:
                amax = a
    if not np.isfinite(amax):
        return 1
    thresh = rel_tol * max(amax, 1e-300)
    for i in range(n):
        perm[i] = i
    for k in range(n):
        p = k
        best = abs(A[k, k])
        for i in range(k + 1, n):
            a = abs(A[i, k])
            if a > best:
                best = a
                p = i
        if best <= thresh:
            return 1
        if p != k:
            for j in range(n):
                tmp = A[k, j]
                A[k, j] = A[p, j]
                A[p, j] = tmp
            t = perm[k]
            perm[k] = perm[p]
            perm[p] = t
        piv = A[k, k]
        for i in range(k + 1, n):
            f = A[i, k] / piv
            A[i, k] = f
            if f != 0.0:
                for j in range(k + 1, n):
                    A[i, j] -= f * A[k, j]
    return 0


@jit
def _lu_solve(LU, perm, b, x):
    """Solve (P⁻¹LU) x = b given _lu_factor's output; x and b distinct, shape (n,)."""
    n = LU.shape[0]
    for i in range(n):
        x[i] = b[perm[i]]
    for i in range(n):
        s = x[i]
        for j in range(i):
            s -= LU[i, j] * x[j]
        x[i] = s
    for i in range(n - 1, -1, -1):
        s = x[i]
        for j in range(i + 1, n):
            s -= LU[i, j] * x[j]
        x[i] = s / LU[i, i]


@jit
def _original_column(M, q, d, var, out):
    """Column of variable ``var`` in the original tableau [I | −M | −d | q] (var = 2n+1 → q)."""
    n = M.shape[0]
    if var < n:
        for i in range(n):
            out[i] = 0.0
        out[var] = 1.0
    elif var < 2 * n:
        for i in range(n):
            out[i] = -M[i, var - n]
    elif var == 2 * n:
        for i in range(n):
            out[i] = -d[i]
    else:
        for i in range(n):
            out[i] = q[i]


@jit
def _pivot(T, row, col):
    """Gauss–Jordan pivot on T[row, col]; the pivot column is then set to the exact unit vector."""
    n, ncol = T.shape
    p = T[row, col]
    for j in range(ncol):
        T[row, j] /= p
    for i in range(n):
        if i != row:
            f = T[i, col]
            if f != 0.0:
                for j in range(ncol):
                    T[i, j] -= f * T[row, j]
    for i in range(n):
        T[i, col] = 0.0
    T[row, col] = 1.0


@jit
def _refactor(M, q, d, T, basis, LU, perm, col, x):
    """Rebuild T = B⁻¹[I | −M | −d | q] from the original data. Returns 0 or 1 (singular B)."""
    n = M.shape[0]
    for k in range(n):
        _original_column(M, q, d, basis[k], col)
        for i in range(n):
            LU[i, k] = col[i]
    if _lu_factor(LU, perm, 1e-300) != 0:
        return 1
    # B x = e_k  with B columns ordered by tableau row: row k of T belongs to basis[k].
    for var in range(2 * n + 2):
        _original_column(M, q, d, var, col)
        _lu_solve(LU, perm, col, x)
        for i in range(n):
            T[i, var] = x[i]
    for k in range(n):
        for i in range(n):
            T[i, basis[k]] = 0.0
        T[k, basis[k]] = 1.0
    return 0


@jit
def _lex_less(T, a, ca, b, cb, n, rel, abs_tol):
    """True if row a's vector (B⁻¹_a·)/ca is lexicographically smaller than row b's (B⁻¹_b·)/cb.

    Entries count as equal within ``rel`` relative plus ``abs_tol``·max(‖row a‖∞, ‖row b‖∞) (the
    rounding-noise level of the pair); if all are equal in that sense, the raw values decide.
    """
    scale = 0.0
    for j in range(n):
        scale = max(scale, abs(T[a, j] / ca), abs(T[b, j] / cb))
    floor = abs_tol * scale
    for j in range(n):
        va = T[a, j] / ca
        vb = T[b, j] / cb
        diff = va - vb
        if abs(diff) <= rel * max(abs(va), abs(vb)) + floor:
            continue
        return diff < 0.0
    # Equal to noise level in every entry: the two B⁻¹ rows are nearly parallel (a nearly singular
    # basis, e.g. redundant contacts). Decide on the raw values rather than keep the first row,
    # which lets the path cycle.
    for j in range(n):
        diff = T[a, j] / ca - T[b, j] / cb
        if diff != 0.0:
            return diff < 0.0
    return False


@jit
def _rhs_noise(T, i, q, n):
    """Rounding-noise scale of row i's rhs: (|B⁻¹||q|)_i, with B⁻¹ = T[:, :n] (plus a 1e-300 floor)."""
    s = 1e-300
    for j in range(n):
        s += abs(T[i, j]) * abs(q[j])
    return s


@jit
def _check(M, q, z, w, check_tol):
    """Compute w = Mz + q and return the largest scaled violation of the LCP conditions (÷ tol)."""
    n = M.shape[0]
    mnorm = 0.0
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += abs(M[i, j])
        mnorm = max(mnorm, s)
    qnorm = 0.0
    znorm = 0.0
    for i in range(n):
        qnorm = max(qnorm, abs(q[i]))
        znorm = max(znorm, abs(z[i]))
    for i in range(n):
        s = q[i]
        for j in range(n):
            s += M[i, j] * z[j]
        w[i] = s
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
def _col_noise(T, i, col0, n):
    """Rounding-noise scale of the entering column's entry in row i: (|B⁻¹||a|)_i, a its original column."""
    s = 1e-300
    for j in range(n):
        s += abs(T[i, j]) * abs(col0[j])
    return s


@jit
def _harris_tied(T, entering, q, n, piv_tol, noise_tol, tol, pivot_ratio, z0_row, tied, col0, cand, floors):
    """Harris two-pass ratio test on the entering column c = T[:, entering]; rhs r = T[:, 2n+1].

    Rows with c_i > piv_tol take part. Pass 1: θ = min_i (max(r_i, 0) + δ_i)/c_i, the longest step that
    lowers no basic variable more than δ_i below max(r_i, 0), with δ_i = tol·max(e_i, f_i), e_i = (|B⁻¹||q|)_i the rounding-noise
    scale of row i and f_i (``floors``) the data scale of its basic variable: ‖q‖∞ for a w, ‖q‖∞/‖M‖∞
    for a z, ‖q‖∞/‖d‖∞ for z0. Pass 2: the eligible rows, max(r_i, 0)/c_i ≤ θ (negative rhs are noise of
    a feasible basis and count as 0), among the pivot candidates: c_i > noise_tol·(|B⁻¹||a|)_i, with a
    the entering variable's original column (``col0``), since an entry at its own rounding-noise level
    may have either sign (if no candidate is eligible, the noise-level rows are taken). Fills ``tied``
    with the eligible rows whose pivot is ≥ pivot_ratio·c_max (a row with a tiny pivot never wins on a
    noise-sized ratio when a larger pivot is eligible). Returns (number tied, z0 eligible); z0's row,
    when eligible, is to leave.
    """
    rhs = 2 * n + 1
    theta = np.inf
    for i in range(n):
        c = T[i, entering]
        if c > piv_tol:
            cand[i] = 1.0 if c > noise_tol * _col_noise(T, i, col0, n) else 0.0
            delta = tol * max(_rhs_noise(T, i, q, n), floors[i])
            theta = min(theta, (max(T[i, rhs], 0.0) + delta) / c)
        else:
            cand[i] = -1.0
    n_elig = 0
    for i in range(n):
        if cand[i] > 0.0 and max(T[i, rhs], 0.0) / T[i, entering] <= theta:
            n_elig += 1
    if n_elig == 0:
        for i in range(n):
            if cand[i] == 0.0:
                cand[i] = 1.0
    cmax = 0.0
    z0_ok = False
    for i in range(n):
        c = T[i, entering]
        if cand[i] > 0.0 and max(T[i, rhs], 0.0) / c <= theta:
            cmax = max(cmax, c)
            if i == z0_row:
                z0_ok = True
    ntied = 0
    for i in range(n):
        c = T[i, entering]
        if cand[i] > 0.0 and c >= pivot_ratio * cmax and max(T[i, rhs], 0.0) / c <= theta:
            tied[ntied] = i
            ntied += 1
    return ntied, z0_ok


@jit
def _early_exit(M, q, d, T, basis, z, w, check_tol, t_check, mnorm, qmax, dmax):
    """True if the current basic point with z0 dropped passes the final check (``_check``).

    Tried only when z0 is small enough to be dropped: d·z0 ≤ t·s_w (the check's w tolerance), which costs
    O(n); the check itself is one product Mz, O(n²), about a quarter of a pivot. On degenerate contact
    data the path passes through solutions long before z0 leaves; this stops there.
    """
    n = M.shape[0]
    rhs = 2 * n + 1
    z0 = 0.0
    znorm = 0.0
    for i in range(n):
        b = basis[i]
        if b == 2 * n:
            z0 = T[i, rhs]
        elif b >= n:
            znorm = max(znorm, abs(T[i, rhs]))
    if not (z0 * dmax <= t_check * (mnorm * znorm + qmax)):
        return False
    for i in range(n):
        z[i] = 0.0
    for i in range(n):
        b = basis[i]
        if b >= n and b < 2 * n:
            z[b - n] = T[i, rhs]
    return _check(M, q, z, w, check_tol) <= 1.0


@jit
def _lemke_kernel(M, q, d, max_pivots, pivot_tol, ratio_rel_tol, rhs_tol, lex_rel_tol, lex_abs_tol,
                  check_tol, refactor_every, harris, harris_tol, harris_ratio, T, LU, perm, perm2, basis,
                  vecs, start=0):
    """Run Lemke. Fills vecs[0] = z, vecs[1] = w, vecs[4] = ray. Returns (status, pivots, z0, residual).

    harris = 1: Harris two-pass ratio test with early exit (``_harris_tied``, ``_early_exit``); 0: textbook.
    start = 1: warm start (``lemke_from_basis``): T and basis already hold the tableau B⁻¹[I | −M | −d | q]
    of a complementary basis B with d = B·1 (so z0's column is −1); z0 enters in the row of the smallest
    rhs, and no path is walked if every rhs is ≥ 0 (the basis then goes straight to the final check).

    vecs rows: 0 z, 1 w, 2 scratch (column), 3 scratch (solution), 4 ray, 5 alternate z (Harris flags
    during the path).
    """
    n = M.shape[0]
    tied = perm2
    z = vecs[0]
    w = vecs[1]
    col = vecs[2]
    x = vecs[3]
    ray = vecs[4]
    zalt = vecs[5]
    cand = vecs[5]  # Harris candidate flags during the path (zalt is only used after it)
    floors = vecs[3]  # Harris data floors during the path (x is only used by rebuilds, which refill it)
    for i in range(n):
        z[i] = 0.0
        ray[i] = 0.0
        if start == 0:
            basis[i] = i
    # data scales
    mnorm = 0.0
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += abs(M[i, j])
        mnorm = max(mnorm, s)
    dmax = 0.0
    qmax = 0.0
    for i in range(n):
        dmax = max(dmax, abs(d[i]))
        qmax = max(qmax, abs(q[i]))
    if not (np.isfinite(mnorm) and np.isfinite(qmax) and np.isfinite(dmax)):
        return 3, 0, 0.0, np.inf
    scale = max(1.0, mnorm, dmax)
    piv_tol = pivot_tol * n * scale
    e_rhs = rhs_tol * max(qmax, 1e-300)
    # trivial case
    qmin = np.inf
    for i in range(n):
        qmin = min(qmin, q[i])
    if qmin >= -e_rhs:
        res = _check(M, q, z, w, check_tol)
        return 0, 0, 0.0, res
    rhs = 2 * n + 1
    walk = True
    if start == 0:
        # tableau [I | -M | -d | q]
        for i in range(n):
            for j in range(n):
                T[i, j] = 0.0
                T[i, n + j] = -M[i, j]
            T[i, i] = 1.0
            T[i, 2 * n] = -d[i]
            T[i, 2 * n + 1] = q[i]
        # z0 enters: row of min q_i/d_i, ties -> largest index (lexicographic on (q_i, e_i)/d_i)
        best = np.inf
        for i in range(n):
            best = min(best, q[i] / d[i])
        r = 0
        for i in range(n):
            if q[i] / d[i] - best <= ratio_rel_tol * abs(best) + 2.0 * e_rhs / d[i]:
                r = i
    else:
        # warm: z0's column is -1 in every row; it enters in the row of the smallest rhs (ties: the
        # largest index), or not at all when the guessed basis is already feasible
        best = np.inf
        for i in range(n):
            best = min(best, T[i, rhs])
        r = 0
        for i in range(n):
            if T[i, rhs] - best <= ratio_rel_tol * abs(best) + 2.0 * rhs_tol * _rhs_noise(T, i, q, n):
                r = i
        walk = best < 0.0
        if walk:
            # negative values at rounding level (tight sign test, 10ε·n, as ``solve_from_basis``; Lemke's
            # looser check alone let a slightly infeasible basis persist step after step): the guessed
            # basis may already pass the final check
            znorm = 0.0
            for i in range(n):
                z[i] = 0.0
            for i in range(n):
                if basis[i] >= n and basis[i] < 2 * n:
                    z[basis[i] - n] = T[i, rhs]
                    znorm = max(znorm, abs(T[i, rhs]))
            tt = pivot_tol * n
            sw = mnorm * znorm + qmax
            tight = True
            for i in range(n):
                lim = tt * znorm if basis[i] >= n else tt * sw
                if T[i, rhs] < -lim:
                    tight = False
            walk = not (tight and _check(M, q, z, w, check_tol) <= 1.0)
    pivots = 0
    z0_row = -1
    status = 0
    entering = -1
    if walk:
        _pivot(T, r, 2 * n)
        leaving = basis[r]
        basis[r] = 2 * n
        z0_row = r
        pivots = 1
        entering = leaving + n if leaving < n else leaving - n
        status = 1
    since_refactor = 0
    tie_refactor = max(8, n)  # a rebuild costs about 1.2·n pivots: at most about doubles the work
    t_check = check_tol * n
    while walk and pivots < max_pivots:
        # ratio test over positive entries of the entering column
        rho_min = np.inf
        cmin = 0.0
        imin = -1
        ntied = 0
        z0_tied = False
        if harris:
            _original_column(M, q, d, entering, col)
            for i in range(n):
                b = basis[i]
                floors[i] = qmax if b < n else (qmax / max(mnorm, 1e-300) if b < 2 * n else qmax / dmax)
            ntied, z0_tied = _harris_tied(T, entering, q, n, piv_tol, pivot_tol * n, harris_tol * n,
                                          harris_ratio, z0_row, tied, col, cand, floors)
            if ntied > 0:
                rho_min = 0.0
        else:
            for i in range(n):
                c = T[i, entering]
                if c > piv_tol:
                    rho = T[i, rhs] / c
                    if rho < rho_min:
                        rho_min = rho
                        cmin = c
                        imin = i
        if rho_min == np.inf:
            # no candidate row: a genuine ray only if the tableau is finite (a NaN entry in the
            # entering column or any rhs fails every comparison and would fake a ray)
            finite = True
            for i in range(n):
                if not (np.isfinite(T[i, rhs]) and np.isfinite(T[i, entering])):
                    finite = False
                    break
            if not finite:
                status = 3
                break
            status = 2
            if entering >= n and entering < 2 * n:
                ray[entering - n] = 1.0
            for i in range(n):
                b = basis[i]
                if b >= n and b < 2 * n:
                    ray[b - n] = -T[i, entering]
            break
        if not harris:
            # the tied set (ratios equal up to the rounding noise of their rhs); z0 first, then lexicographic
            noise_min = _rhs_noise(T, imin, q, n) / cmin
            for i in range(n):
                c = T[i, entering]
                if c > piv_tol:
                    rho = T[i, rhs] / c
                    if rho - rho_min <= ratio_rel_tol * abs(rho_min) + rhs_tol * (_rhs_noise(T, i, q, n) / c
                                                                                  + noise_min):
                        tied[ntied] = i
                        ntied += 1
                        if i == z0_row:
                            z0_tied = True
        if ntied > 1 and not z0_tied and since_refactor >= tie_refactor and refactor_every != 0:
            # a lexicographic decision reads B⁻¹: take it from a fresh factorization, not from a
            # tableau carrying the rounding noise of many pivots (Fathi's SPD family needs this)
            if _refactor(M, q, d, T, basis, LU, perm, col, x) != 0:
                status = 3
                break
            since_refactor = 0
            continue
        if z0_tied:
            row = z0_row
        else:
            row = tied[0]
            for k in range(1, ntied):
                i = tied[k]
                if _lex_less(T, i, T[i, entering], row, T[row, entering], n, lex_rel_tol, lex_abs_tol):
                    row = i
        if harris and T[row, rhs] < 0.0:
            # bound shift: the leaving row's negative rhs (noise, clamped in the ratio test) is set to 0, so
            # the entering variable steps forward by 0, not backward by r/c; a backward step, multiplied by
            # large entries of the column, pushed other rows' values negative beyond the final check
            T[row, rhs] = 0.0
        _pivot(T, row, entering)
        pivots += 1
        since_refactor += 1
        leaving = basis[row]
        basis[row] = entering
        if leaving == 2 * n:
            status = 0
            break
        if refactor_every > 0 and pivots % refactor_every == 0:
            if _refactor(M, q, d, T, basis, LU, perm, col, x) != 0:
                status = 3
                break
            since_refactor = 0
        if harris and _early_exit(M, q, d, T, basis, z, w, check_tol, t_check, mnorm, qmax, dmax):
            status = 0
            break
        entering = leaving + n if leaving < n else leaving - n
    # read the basic point
    z0 = 0.0
    for i in range(n):
        z[i] = 0.0
    for i in range(n):
        b = basis[i]
        if b >= n and b < 2 * n:
            z[b - n] = T[i, rhs]
        elif b == 2 * n:
            z0 = T[i, rhs]
    if status == 1 or status == 2:
        # The path stopped with z0 > 0. If z0 is at round-off level (degenerate data such as resting
        # contacts), the basic point with z0 dropped may already solve the LCP: accept it only if it
        # passes the same final check as a regular solve (below); otherwise report the status.
        if _check(M, q, z, w, check_tol) <= 1.0:
            for i in range(n):
                ray[i] = 0.0
            status = 0
        else:
            return status, pivots, z0, np.inf
    elif status != 0:
        for i in range(n):
            s = q[i]
            for j in range(n):
                s += M[i, j] * z[j]
            w[i] = s
        return status, pivots, z0, np.inf
    return _final_resolve(M, q, z, w, zalt, basis, LU, perm, perm2, col, x, check_tol, pivots, z0, 1 << 62)


@jit
def _final_resolve(M, q, z, w, zalt, basis, LU, perm, perm2, col, x, check_tol, pivots, z0, lu_max):
    """The end of a solved run (both kernels): re-solve M_αα z_α = −q_α on the final basis (α the basic z's),
    keep the better of the two candidates, check, clip tiny negatives of z. Returns (status, pivots, z0, res).
    The subsystem is solved by ``_lu_factor`` up to lu_max unknowns, by LAPACK above."""
    n = M.shape[0]
    # re-solve M_aa z_a = -q_a on the final basis; keep the better candidate
    k = 0
    for i in range(n):
        b = basis[i]
        if b >= n and b < 2 * n:
            perm[k] = b - n
            k += 1
    res_tab = _check(M, q, z, w, check_tol)
    if k > 0:
        idx = perm[:k]
        sub = LU[:k, :k]
        for a in range(k):
            for b in range(k):
                sub[a, b] = M[idx[a], idx[b]]
            col[a] = -q[idx[a]]
        for i in range(n):
            zalt[i] = 0.0
        ok = True
        if k > lu_max:
            # LAPACK for big bases (the scalar LU costs O(k³) at loop speed); a singular one keeps z
            try:
                sol = np.linalg.solve(np.ascontiguousarray(sub), col[:k].copy())
                for a in range(k):
                    x[a] = sol[a]
            except Exception:
                ok = False
        else:
            ok = _lu_factor(sub, perm2[:k], 1e-300) == 0
            if ok:
                _lu_solve(sub, perm2[:k], col[:k], x[:k])
        if ok:
            for a in range(k):
                zalt[idx[a]] = x[a]
            res_alt = _check(M, q, zalt, w, check_tol)
            if res_alt < res_tab:
                for i in range(n):
                    z[i] = zalt[i]
                res_tab = res_alt
    res = _check(M, q, z, w, check_tol)
    if not (res <= 1.0):
        return 3, pivots, z0, res
    # within tolerance: clip tiny negatives of z to exact zeros and recompute w
    for i in range(n):
        if z[i] < 0.0:
            z[i] = 0.0
    res = _check(M, q, z, w, check_tol)
    if not (res <= 1.0):
        return 3, pivots, z0, res
    return 0, pivots, z0, res


# --------------------------------------------------------------------------------------------
# revised Lemke (``LemkeOptions.method = "revised"``): B⁻¹ and B⁻¹q only, columns on demand
# --------------------------------------------------------------------------------------------


@jit
def _sparse_pattern(M, colptr, colidx, colval, rowptr, rowidx, rowval):
    """Compressed row (CSR) and column (CSC) copies of M's nonzeros, indices increasing (one row-wise pass
    over M, then the transpose by counting, ``compressed_transpose``). Returns nnz."""
    n = M.shape[0]
    k = 0
    for i in range(n):
        rowptr[i] = k
        row = M[i]
        for j in range(n):
            if row[j] != 0.0:
                rowidx[k] = j
                rowval[k] = row[j]
                k += 1
    rowptr[n] = k
    compressed_transpose(rowptr, rowidx, rowval, colptr, colidx, colval)
    return k


@jit
def both_finite(a, b):
    """Every entry of the vectors a and b (same length) is finite. Shared by the dense and sparse kernels' ray
    test (a ray on non-finite data is a numerical failure)."""
    for i in range(a.shape[0]):
        if not (np.isfinite(a[i]) and np.isfinite(b[i])):
            return False
    return True


@jit
def compressed_transpose(p, idx, val, tp, tidx, tval):
    """(tp, tidx, tval) = the CSC arrays of Aᵀ (= A in CSR) for A in CSC (p, idx, val); rows in increasing order.
    The same call turns CSR arrays into CSC ones. Shared by ``_sparse_pattern`` and the sparse kernel."""
    n = p.shape[0] - 1
    for j in range(n + 1):
        tp[j] = 0
    for k in range(p[n]):
        tp[idx[k] + 1] += 1
    for j in range(n):
        tp[j + 1] += tp[j]
    for j in range(n):
        for k in range(p[j], p[j + 1]):
            i = idx[k]
            dst = tp[i]
            tidx[dst] = j
            tval[dst] = val[k]
            tp[i] += 1
    for j in range(n, 0, -1):
        tp[j] = tp[j - 1]
    tp[0] = 0


@jit
def _check_sparse(rowptr, rowidx, rowval, mnorm, q, z, w, check_tol):
    """``_check`` with M in CSR form and ‖M‖∞ given: the same value bit for bit (the dense sums add the
    zero entries, which changes no partial sum), O(nnz) instead of O(n²)."""
    n = q.shape[0]
    qnorm = 0.0
    znorm = 0.0
    for i in range(n):
        qnorm = max(qnorm, abs(q[i]))
        znorm = max(znorm, abs(z[i]))
    for i in range(n):
        s = q[i]
        for k in range(rowptr[i], rowptr[i + 1]):
            s += rowval[k] * z[rowidx[k]]
        w[i] = s
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
def _entering_column(Bt, B0t, base, etas, eta_row, neta, d, colptr, colidx, colval, var, c, aidx, aval, start,
                     M, q, LU, perm, col):
    """The entering variable's column c of the tableau B⁻¹[I | −M | −d | q], and its original column a's
    nonzeros (aidx, aval; increasing index). Returns nnz(a).

    w_j: c = B⁻¹'s column j (row j of Bt, B⁻¹ kept transposed), a = e_j. z_j (a = −M_·j, sparse): product
    form, c = E_neta ⋯ E_1 B₀⁻¹a, with B₀⁻¹ the inverse at the start or the last rebuild (``base`` = 0: the
    identity, cold start; 1: B0t, transposed; 2: the rebuild's LU in LU/perm) and E_t the pivots since (``etas``: entering columns,
    ``eta_row``: pivot rows). Applying the pivots to a in order is the tableau's own update of that column,
    operation for operation, so c equals the tableau's column. neta < 0 (eta file full): c = B⁻¹a from
    the current inverse instead. z0: c = −B⁻¹d (−1 exactly for the warm start, whose d = B·1)."""
    n = Bt.shape[0]
    if var < n:
        for i in range(n):
            c[i] = Bt[var, i]
        aidx[0] = var
        aval[0] = 1.0
        return 1
    if var < 2 * n:
        j = var - n
        na = 0
        for k in range(colptr[j], colptr[j + 1]):
            aidx[na] = colidx[k]
            aval[na] = -colval[k]
            na += 1
        for i in range(n):
            c[i] = 0.0
        if neta >= 0 and base == 2:
            _original_column(M, q, d, var, col)
            _lu_solve(LU, perm, col, c)
        elif neta < 0 or base == 1:
            src = Bt if neta < 0 else B0t
            for k in range(na):
                row = src[aidx[k]]
                v = aval[k]
                for i in range(n):
                    c[i] += row[i] * v
        else:
            for k in range(na):
                c[aidx[k]] = aval[k]
        for t in range(max(neta, 0)):
            p = eta_row[t]
            e = etas[t]
            c[p] /= e[p]
            xp = c[p]
            if xp != 0.0:
                for i in range(n):
                    c[i] -= e[i] * xp
                c[p] = xp
        return na
    for k in range(n):
        aidx[k] = k
        aval[k] = -d[k]
    if start == 1:
        for i in range(n):
            c[i] = -1.0
    else:
        for i in range(n):
            c[i] = 0.0
        for k in range(n):
            row = Bt[k]
            v = d[k]
            for i in range(n):
                c[i] -= row[i] * v
    return n


@jit
def _record_eta(etas, eta_row, neta, cap, c, row):
    """Append the pivot (entering column c, pivot row) to the eta file; returns the new count, −1 once full
    (then columns come from the current inverse until the next rebuild)."""
    if neta < 0 or neta >= cap:
        return -1
    e = etas[neta]
    for i in range(c.shape[0]):
        e[i] = c[i]
    eta_row[neta] = row
    return neta + 1


@jit
def pivot_rhs(r, c, row):
    """The Gauss–Jordan pivot's update of the rhs r with entering column c on row ``row``:
    r_row ← r_row / c_row, r_i ← r_i − c_i·r_row (i ≠ row)."""
    r[row] /= c[row]
    rr = r[row]
    for i in range(r.shape[0]):
        if i != row:
            r[i] -= c[i] * rr


@jit
def revised_buffers(n, nnz, max_pivots, refactor):
    """The revised kernel's work arrays sized for an n×n M with nnz nonzeros: M's CSC and CSR copies
    (colptr, colidx, colval, rowptr, rowidx, rowval) and the eta file (etas, eta_row: one row per pivot up
    to the next rebuild, min(max_pivots, rebuild interval or max(50, 2n)) + 1)."""
    colptr = np.empty(n + 1, np.int64)
    rowptr = np.empty(n + 1, np.int64)
    colidx = np.empty(nnz, np.int64)
    rowidx = np.empty(nnz, np.int64)
    colval = np.empty(nnz)
    rowval = np.empty(nnz)
    cap = min(max_pivots, refactor if refactor > 0 else max(50, 2 * n)) + 1
    return colptr, colidx, colval, rowptr, rowidx, rowval, np.empty((cap, n)), np.empty(cap, np.int64)


@jit
def _pivot_revised(Bt, r, c, row, wrow, qabs, erhs):
    """The Gauss–Jordan pivot on row ``row`` with entering column c, applied to B⁻¹ (stored transposed, Bt)
    and the rhs only: entry for entry the tableau's update of its first n columns and its rhs. Only B⁻¹'s
    columns with a nonzero in the pivot row change (B⁻¹'s column j is a unit vector while w_j is basic, so at
    most k + 1 columns, k the basic z's). The same sweep over B⁻¹ forms the next ratio test's noise scales
    erhs = |B⁻¹||q| (``_rhs_noise_all``, same sums in the same order; wrow must already describe the basis
    after the pivot): one pass over the inverse per pivot."""
    n = Bt.shape[0]
    p = c[row]
    pivot_rhs(r, c, row)
    for i in range(n):
        erhs[i] = 1e-300
    for j in range(n):
        col = Bt[j]
        if col[row] != 0.0:
            col[row] /= p
            f = col[row]
            for i in range(n):
                col[i] -= c[i] * f
            col[row] = f
        v = qabs[j]
        if v != 0.0:
            if wrow[j] >= 0:
                erhs[wrow[j]] += v
            else:
                for i in range(n):
                    erhs[i] += abs(col[i]) * v


@jit
def _set_wrow(basis, wrow):
    """wrow[j] = the row where w_j is basic, −1 if w_j is nonbasic."""
    n = wrow.shape[0]
    for j in range(n):
        wrow[j] = -1
    for i in range(n):
        if basis[i] < n:
            wrow[basis[i]] = i


@jit
def _rhs_noise_all(Bt, wrow, qabs, erhs):
    """erhs = 1e-300 + |B⁻¹||q| for every row: ``_rhs_noise``'s sums, in the same order, skipping zero terms (a
    basic w_j's column of B⁻¹ is the exact unit vector of its row, so it adds |q_j| there)."""
    n = Bt.shape[0]
    for i in range(n):
        erhs[i] = 1e-300
    for j in range(n):
        v = qabs[j]
        if v != 0.0:
            if wrow[j] >= 0:
                erhs[wrow[j]] += v
            else:
                row = Bt[j]
                for i in range(n):
                    erhs[i] += abs(row[i]) * v


@jit
def _col_noise_all(Bt, wrow, aidx, aval, na, ecol):
    """ecol = 1e-300 + |B⁻¹||a| for every row (a's nonzeros aidx, aval): ``_col_noise``'s sums, same order."""
    n = Bt.shape[0]
    for i in range(n):
        ecol[i] = 1e-300
    for k in range(na):
        j = aidx[k]
        v = abs(aval[k])
        if wrow[j] >= 0:
            ecol[wrow[j]] += v
        else:
            row = Bt[j]
            for i in range(n):
                ecol[i] += abs(row[i]) * v


@jit
def _harris_tied_revised(c, r, erhs, ecol, n, piv_tol, noise_tol, tol, pivot_ratio, z0_row, tied, cand, floors):
    """``_harris_tied`` on the revised data: entering column c, rhs r, noise scales erhs, ecol
    (``_pivot_revised``, ``_col_noise_all``). The same rule and the same arithmetic, row for row."""
    theta = np.inf
    rows = np.empty(n, np.int64)
    m = 0
    for i in range(n):
        ci = c[i]
        if ci > piv_tol:
            cand[i] = 1.0 if ci > noise_tol * ecol[i] else 0.0
            delta = tol * max(erhs[i], floors[i])
            theta = min(theta, (max(r[i], 0.0) + delta) / ci)
            rows[m] = i
            m += 1
        else:
            cand[i] = -1.0
    return harris_passes(rows, m, c, r, cand, theta, pivot_ratio, z0_row, tied)


@jit
def harris_passes(rows, m, c, r, cand, theta, pivot_ratio, z0_row, tied):
    """Passes 2–4 of the Harris ratio test over the candidate rows ``rows[:m]`` (increasing; c_i > piv_tol, cand_i
    = 1 above the column's noise level, 0 below) with the pass-1 bound θ: the eligible rows (ratio max(r_i, 0)/c_i ≤
    θ; when none is above the noise level, those below it become eligible), the largest eligible pivot c_max,
    and the tied rows with c_i ≥ pivot_ratio·c_max. Returns (number of tied rows in ``tied``, whether z0's row is
    eligible). Shared by the revised and the sparse kernels."""
    n_elig = 0
    for k in range(m):
        i = rows[k]
        if cand[i] > 0.0 and max(r[i], 0.0) / c[i] <= theta:
            n_elig += 1
    if n_elig == 0:
        for k in range(m):
            i = rows[k]
            if cand[i] == 0.0:
                cand[i] = 1.0
    cmax = 0.0
    z0_ok = False
    for k in range(m):
        i = rows[k]
        ci = c[i]
        if cand[i] > 0.0 and max(r[i], 0.0) / ci <= theta:
            cmax = max(cmax, ci)
            if i == z0_row:
                z0_ok = True
    ntied = 0
    for k in range(m):
        i = rows[k]
        ci = c[i]
        if cand[i] > 0.0 and ci >= pivot_ratio * cmax and max(r[i], 0.0) / ci <= theta:
            tied[ntied] = i
            ntied += 1
    return ntied, z0_ok


@jit
def _lex_less_t(Bt, a, ca, b, cb, n, rel, abs_tol):
    """``_lex_less`` reading B⁻¹'s rows a and b from its transpose Bt (the same comparisons)."""
    scale = 0.0
    for j in range(n):
        scale = max(scale, abs(Bt[j, a] / ca), abs(Bt[j, b] / cb))
    floor = abs_tol * scale
    for j in range(n):
        va = Bt[j, a] / ca
        vb = Bt[j, b] / cb
        diff = va - vb
        if abs(diff) <= rel * max(abs(va), abs(vb)) + floor:
            continue
        return diff < 0.0
    for j in range(n):
        diff = Bt[j, a] / ca - Bt[j, b] / cb
        if diff != 0.0:
            return diff < 0.0
    return False


@jit
def _refactor_revised(M, q, d, Bt, r, basis, Bmat, perm, col, x, lu_max):
    """Rebuild B⁻¹ (into Bt, transposed) and r = B⁻¹q from the original data. n ≤ lu_max: the tableau's own
    rebuild (``_lu_factor`` of B kept in Bmat/perm, ``_lu_solve`` per column: the same values as the
    tableau); larger n: the LAPACK inverse (O(n³) at BLAS speed instead of n scalar solves). Basic w's
    columns of B⁻¹ are then set to exact unit vectors (as the tableau rebuild does). Returns 0, or 1
    (singular B or non-finite values)."""
    n = M.shape[0]
    for k in range(n):
        _original_column(M, q, d, basis[k], col)
        for i in range(n):
            Bmat[i, k] = col[i]
    if n <= lu_max:
        if _lu_factor(Bmat, perm, 1e-300) != 0:
            return 1
        for j in range(n):
            _original_column(M, q, d, j, col)
            _lu_solve(Bmat, perm, col, x)
            for i in range(n):
                Bt[j, i] = x[i]
        _original_column(M, q, d, 2 * n + 1, col)
        _lu_solve(Bmat, perm, col, r)
    else:
        ok = True
        try:
            inv = np.linalg.inv(Bmat)
        except Exception:  # singular basis
            ok = False
        if not ok:
            return 1
        for i in range(n):
            s = 0.0
            for j in range(n):
                s += inv[i, j] * q[j]
            r[i] = s
        for j in range(n):
            for i in range(n):
                Bt[j, i] = inv[i, j]
    for i in range(n):
        if not np.isfinite(r[i]):
            return 1
    for k in range(n):
        b = basis[k]
        if b < n:
            for i in range(n):
                Bt[b, i] = 0.0
            Bt[b, k] = 1.0
    return 0


@jit
def _early_exit_revised(r, basis, z, w, check_tol, t_check, mnorm, qmax, dmax, q, rowptr, rowidx, rowval):
    """``_early_exit`` on the revised data (basic values r; the check through M's CSR copy)."""
    n = r.shape[0]
    z0 = 0.0
    znorm = 0.0
    for i in range(n):
        b = basis[i]
        if b == 2 * n:
            z0 = r[i]
        elif b >= n:
            znorm = max(znorm, abs(r[i]))
    if not (z0 * dmax <= t_check * (mnorm * znorm + qmax)):
        return False
    for i in range(n):
        z[i] = 0.0
    for i in range(n):
        b = basis[i]
        if b >= n and b < 2 * n:
            z[b - n] = r[i]
    return _check_sparse(rowptr, rowidx, rowval, mnorm, q, z, w, check_tol) <= 1.0


@jit
def _lemke_revised_kernel(M, q, d, max_pivots, pivot_tol, ratio_rel_tol, rhs_tol, lex_rel_tol, lex_abs_tol,
                          check_tol, refactor_every, harris, harris_tol, harris_ratio, Bt, r, c, LU, perm,
                          perm2, basis, vecs, colptr, colidx, colval, rowptr, rowidx, rowval, ibuf, aval,
                          B0t, etas, eta_row, lu_max, start=0):
    """``_lemke_kernel`` in revised form: the same path, rules and final steps, with the tableau replaced
    by B⁻¹ (stored transposed: ``Bt[j]`` is B⁻¹'s column j, n × n) and the rhs r = B⁻¹q; the entering column
    is c = B⁻¹a (``_entering_column``, a sparse combination for a z), a pivot updates only B⁻¹'s columns with
    a nonzero in the pivot row (``_pivot_revised``), the noise scales come from B⁻¹'s non-unit columns
    (``_pivot_revised``, ``_col_noise_all``), the early-exit check uses M's CSR copy, a rebuild inverts B with LAPACK.

    M's sparse copies (colptr/colidx/colval: CSC, rowptr/rowidx/rowval: CSR) are filled here. ibuf: int
    buffer of length ≥ 4n; aval: float buffer of length ≥ 4n. B0t (n × n): B⁻¹ at the start (warm) or the
    last rebuild; etas (cap × n), eta_row (cap): the entering columns and pivot rows since then (product
    form of the z columns, ``_entering_column``). start = 1: Bt, r and basis hold a complementary basis with
    d = B·1 (warm start).
    """
    n = M.shape[0]
    tied = perm2
    z = vecs[0]
    w = vecs[1]
    col = vecs[2]
    x = vecs[3]
    ray = vecs[4]
    zalt = vecs[5]
    cand = vecs[5]
    floors = vecs[3]
    aidx = ibuf[:n]
    wrow = ibuf[3 * n:4 * n]
    qabs = aval[n:2 * n]
    avals = aval[:n]
    erhs = aval[2 * n:3 * n]
    ecol = aval[3 * n:4 * n]
    for i in range(n):
        z[i] = 0.0
        ray[i] = 0.0
        if start == 0:
            basis[i] = i
    _sparse_pattern(M, colptr, colidx, colval, rowptr, rowidx, rowval)
    for j in range(n):
        qabs[j] = abs(q[j])
    mnorm = 0.0
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += abs(M[i, j])
        mnorm = max(mnorm, s)
    dmax = 0.0
    qmax = 0.0
    for i in range(n):
        dmax = max(dmax, abs(d[i]))
        qmax = max(qmax, abs(q[i]))
    if not (np.isfinite(mnorm) and np.isfinite(qmax) and np.isfinite(dmax)):
        return 3, 0, 0.0, np.inf
    scale = max(1.0, mnorm, dmax)
    piv_tol = pivot_tol * n * scale
    e_rhs = rhs_tol * max(qmax, 1e-300)
    qmin = np.inf
    for i in range(n):
        qmin = min(qmin, q[i])
    if qmin >= -e_rhs:
        res = _check(M, q, z, w, check_tol)
        return 0, 0, 0.0, res
    walk = True
    base = 0
    neta = 0
    eta_cap = eta_row.shape[0]
    if start == 0:
        for i in range(n):
            for j in range(n):
                Bt[i, j] = 0.0
            Bt[i, i] = 1.0
            r[i] = q[i]
        best = np.inf
        for i in range(n):
            best = min(best, q[i] / d[i])
        row0 = 0
        for i in range(n):
            if q[i] / d[i] - best <= ratio_rel_tol * abs(best) + 2.0 * e_rhs / d[i]:
                row0 = i
    else:
        base = 1
        for i in range(n):
            for j in range(n):
                B0t[i, j] = Bt[i, j]
        best = np.inf
        for i in range(n):
            best = min(best, r[i])
        row0 = 0
        _set_wrow(basis, wrow)
        _rhs_noise_all(Bt, wrow, qabs, erhs)
        for i in range(n):
            if r[i] - best <= ratio_rel_tol * abs(best) + 2.0 * rhs_tol * erhs[i]:
                row0 = i
        walk = best < 0.0
        if walk:
            znorm = 0.0
            for i in range(n):
                z[i] = 0.0
            for i in range(n):
                if basis[i] >= n and basis[i] < 2 * n:
                    z[basis[i] - n] = r[i]
                    znorm = max(znorm, abs(r[i]))
            tt = pivot_tol * n
            sw = mnorm * znorm + qmax
            tight = True
            for i in range(n):
                lim = tt * znorm if basis[i] >= n else tt * sw
                if r[i] < -lim:
                    tight = False
            walk = not (tight and _check(M, q, z, w, check_tol) <= 1.0)
    pivots = 0
    z0_row = -1
    status = 0
    entering = -1
    if walk:
        _entering_column(Bt, B0t, base, etas, eta_row, neta, d, colptr, colidx, colval, 2 * n, c, aidx, avals,
                         start, M, q, LU, perm, col)
        neta = _record_eta(etas, eta_row, neta, eta_cap, c, row0)
        leaving = basis[row0]
        basis[row0] = 2 * n
        _set_wrow(basis, wrow)
        _pivot_revised(Bt, r, c, row0, wrow, qabs, erhs)
        z0_row = row0
        pivots = 1
        entering = leaving + n if leaving < n else leaving - n
        status = 1
    since_refactor = 0
    tie_refactor = max(8, n)
    t_check = check_tol * n
    while walk and pivots < max_pivots:
        na = _entering_column(Bt, B0t, base, etas, eta_row, neta, d, colptr, colidx, colval, entering, c, aidx,
                              avals, start, M, q, LU, perm, col)
        if harris:
            _col_noise_all(Bt, wrow, aidx, avals, na, ecol)
        rho_min = np.inf
        cmin = 0.0
        imin = -1
        ntied = 0
        z0_tied = False
        if harris:
            for i in range(n):
                b = basis[i]
                floors[i] = qmax if b < n else (qmax / max(mnorm, 1e-300) if b < 2 * n else qmax / dmax)
            ntied, z0_tied = _harris_tied_revised(c, r, erhs, ecol, n, piv_tol, pivot_tol * n, harris_tol * n,
                                                  harris_ratio, z0_row, tied, cand, floors)
            if ntied > 0:
                rho_min = 0.0
        else:
            for i in range(n):
                ci = c[i]
                if ci > piv_tol:
                    rho = r[i] / ci
                    if rho < rho_min:
                        rho_min = rho
                        cmin = ci
                        imin = i
        if rho_min == np.inf:
            if not both_finite(r, c):
                status = 3
                break
            status = 2
            if entering >= n and entering < 2 * n:
                ray[entering - n] = 1.0
            for i in range(n):
                b = basis[i]
                if b >= n and b < 2 * n:
                    ray[b - n] = -c[i]
            break
        if not harris:
            noise_min = erhs[imin] / cmin
            for i in range(n):
                ci = c[i]
                if ci > piv_tol:
                    rho = r[i] / ci
                    if rho - rho_min <= ratio_rel_tol * abs(rho_min) + rhs_tol * (erhs[i] / ci
                                                                                  + noise_min):
                        tied[ntied] = i
                        ntied += 1
                        if i == z0_row:
                            z0_tied = True
        if ntied > 1 and not z0_tied and since_refactor >= tie_refactor and refactor_every != 0:
            if _refactor_revised(M, q, d, Bt, r, basis, LU, perm, col, x, lu_max) != 0:
                status = 3
                break
            if n <= lu_max:
                base = 2
            else:
                base = 1
                for i in range(n):
                    for j in range(n):
                        B0t[i, j] = Bt[i, j]
            neta = 0
            since_refactor = 0
            _rhs_noise_all(Bt, wrow, qabs, erhs)
            continue
        if z0_tied:
            row = z0_row
        else:
            row = tied[0]
            for k in range(1, ntied):
                i = tied[k]
                if _lex_less_t(Bt, i, c[i], row, c[row], n, lex_rel_tol, lex_abs_tol):
                    row = i
        if harris and r[row] < 0.0:
            r[row] = 0.0
        neta = _record_eta(etas, eta_row, neta, eta_cap, c, row)
        leaving = basis[row]
        basis[row] = entering
        _set_wrow(basis, wrow)
        _pivot_revised(Bt, r, c, row, wrow, qabs, erhs)
        pivots += 1
        since_refactor += 1
        if leaving == 2 * n:
            status = 0
            break
        if refactor_every > 0 and pivots % refactor_every == 0:
            if _refactor_revised(M, q, d, Bt, r, basis, LU, perm, col, x, lu_max) != 0:
                status = 3
                break
            if n <= lu_max:
                base = 2
            else:
                base = 1
                for i in range(n):
                    for j in range(n):
                        B0t[i, j] = Bt[i, j]
            neta = 0
            since_refactor = 0
            _rhs_noise_all(Bt, wrow, qabs, erhs)
        if harris and _early_exit_revised(r, basis, z, w, check_tol, t_check, mnorm, qmax, dmax, q, rowptr,
                                          rowidx, rowval):
            status = 0
            break
        entering = leaving + n if leaving < n else leaving - n
    z0 = 0.0
    for i in range(n):
        z[i] = 0.0
    for i in range(n):
        b = basis[i]
        if b >= n and b < 2 * n:
            z[b - n] = r[i]
        elif b == 2 * n:
            z0 = r[i]
    if status == 1 or status == 2:
        if _check(M, q, z, w, check_tol) <= 1.0:
            for i in range(n):
                ray[i] = 0.0
            status = 0
        else:
            return status, pivots, z0, np.inf
    elif status != 0:
        for i in range(n):
            s = q[i]
            for j in range(n):
                s += M[i, j] * z[j]
            w[i] = s
        return status, pivots, z0, np.inf
    return _final_resolve(M, q, z, w, zalt, basis, LU, perm, perm2, col, x, check_tol, pivots, z0, lu_max)


# --------------------------------------------------------------------------------------------
# Python wrapper
# --------------------------------------------------------------------------------------------


_RATIO_TESTS = {"textbook": 0, "harris": 1}
_METHODS = ("auto", "revised", "tableau", "sparse")


_SPARSE_KERNEL: list = []
"""The sparse-LU kernel module (``convexsim.lcp.sparse_lemke``), registered by it when it is imported (the
package ``convexsim.lcp`` imports it): that module builds on this one's kernels, so this one reaches it
through the registration rather than an import (no import cycle)."""


def register_sparse_kernel(module) -> None:
    """Called by ``convexsim.lcp.sparse_lemke`` at import: methods "sparse" and "auto" use ``module``."""
    _SPARSE_KERNEL[:] = [module]


def _sparse_choice(M, opts: "LemkeOptions"):
    """(the sparse-LU kernel module, nnz(M) or None) if ``opts.method`` selects it for M ("sparse"; "auto" on
    large sparse M, ``sparse_lemke.use_sparse``), else (None, None) (then "auto" means "revised")."""
    if opts.method not in ("sparse", "auto"):
        return None, None
    if not _SPARSE_KERNEL:
        raise RuntimeError("the sparse-LU Lemke kernel is not registered (import convexsim.lcp, which does)")
    sparse_lemke = _SPARSE_KERNEL[0]
    if scipy.sparse.issparse(M):             # given in sparse form: the sparse kernel whatever the size
        return sparse_lemke, int(M.nnz)
    if opts.method == "sparse":
        return sparse_lemke, None
    nnz = sparse_lemke.use_sparse(M)
    return (sparse_lemke, nnz) if nnz else (None, None)

REBUILD_LU_MAX = 400
"""Revised Lemke: up to this size a rebuild uses the tableau's own LU and solves (so the two methods agree
bit for bit, rebuilds included); above it, the LAPACK inverse (n scalar solves would cost seconds)."""


def _run_revised(M, q, d, max_pivots, opts, refactor, harris, Bt, r, c, LU, perm, perm2, basis, vecs, ibuf,
                 fbuf, start):
    """``_lemke_revised_kernel`` with M's sparse copies (sized for its nonzeros) and the eta file (one column
    per pivot up to the next rebuild: min(max_pivots, rebuild interval or max(50, 2n)) + 1 columns)."""
    n = q.shape[0]
    colptr, colidx, colval, rowptr, rowidx, rowval, etas, eta_row = revised_buffers(
        n, int(np.count_nonzero(M)), int(max_pivots), int(refactor))
    B0t = np.empty((n, n)) if start == 1 or (refactor != 0 and n > REBUILD_LU_MAX) else np.empty((1, 1))
    return _lemke_revised_kernel(
        M, q, d, max_pivots, opts.pivot_tol, opts.ratio_rel_tol, opts.rhs_tol, opts.lex_rel_tol,
        opts.lex_abs_tol, opts.check_tol, refactor, harris, opts.harris_tol, opts.harris_pivot_ratio,
        Bt, r, c, LU, perm, perm2, basis, vecs, colptr, colidx, colval, rowptr, rowidx, rowval, ibuf, fbuf,
        B0t, etas, eta_row, REBUILD_LU_MAX, start)


def default_max_pivots(n: int) -> int:
    """max(1000, 50 n): O(n) pivots are expected on solvable problems; the cap guards degenerate ones."""
    return max(1000, 50 * int(n))


def as_sparse_lcp_matrix(M) -> "scipy.sparse.csr_matrix | None":
    """M as a CSR matrix (float64, sorted indices, no duplicates, no stored zeros) if it is a scipy.sparse matrix,
    else None: M itself if it is one already (no copy; the solvers never write to M), else a new one.

    ``lemke`` and ``lemke_from_basis`` accept M in sparse form: it goes straight to the sparse-LU kernel
    (``method`` "sparse" or "auto"; the dense methods get ``M.toarray()``), without an n × n dense copy."""
    if not scipy.sparse.issparse(M):
        return None
    if (isinstance(M, scipy.sparse.csr_matrix) and M.dtype == np.float64 and M.has_canonical_format
            and np.all(M.data != 0.0)):
        return M            # already in this form (the stepper's islands, each solver stage after the first)
    Mr = scipy.sparse.csr_matrix(M, dtype=np.float64, copy=True)
    Mr.sum_duplicates()
    Mr.eliminate_zeros()
    Mr.sort_indices()
    return Mr


def _validate(M, q, d):
    Ms = as_sparse_lcp_matrix(M)
    M = Ms if Ms is not None else np.asarray(M, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ValueError(f"LCP matrix M must be square (n, n); got shape {M.shape}")
    n = M.shape[0]
    if q.shape != (n,):
        raise ValueError(f"LCP vector q must have shape ({n},) to match M {M.shape}; got {q.shape}")
    if Ms is not None:
        if not np.all(np.isfinite(Ms.data)):
            k = int(np.flatnonzero(~np.isfinite(Ms.data))[0])
            i = int(np.searchsorted(Ms.indptr, k, side="right") - 1)
            raise ValueError(f"LCP matrix M has a non-finite entry at ({i}, {int(Ms.indices[k])})")
    elif not np.all(np.isfinite(M)):
        bad = np.argwhere(~np.isfinite(M))[0]
        raise ValueError(f"LCP matrix M has a non-finite entry at {tuple(int(i) for i in bad)}")
    if not np.all(np.isfinite(q)):
        raise ValueError(f"LCP vector q has a non-finite entry at index {int(np.flatnonzero(~np.isfinite(q))[0])}")
    if d is None:
        d = np.ones(n)
    else:
        d = np.asarray(d, dtype=np.float64)
        if d.shape != (n,):
            raise ValueError(f"covering vector d must have shape ({n},); got {d.shape}")
        if not np.all(np.isfinite(d)) or np.any(d <= 0.0):
            raise ValueError("covering vector d must be finite with every entry > 0 "
                             f"(got min {np.nanmin(d) if np.any(np.isfinite(d)) else d[0]})")
    return (M if Ms is not None else np.ascontiguousarray(M)), np.ascontiguousarray(q), np.ascontiguousarray(d)


def _pivot_limits(n: int, opts: "LemkeOptions", max_pivots: int | None) -> tuple[int, int]:
    """(pivot cap, rebuild interval) for an n×n LCP: the caller's cap or ``default_max_pivots(n)``;
    ``opts.refactor_every``, or max(50, 2n) when it is negative."""
    if max_pivots is None:
        max_pivots = default_max_pivots(n)
    refactor = int(opts.refactor_every)
    if refactor < 0:
        refactor = max(50, 2 * n)
    return max_pivots, refactor


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
    M, q, d = _validate(M, q, d)
    n = M.shape[0]
    opts = options or LemkeOptions()
    max_pivots, refactor = _pivot_limits(n, opts, max_pivots)
    if int(max_pivots) < 1:
        raise ValueError(f"max_pivots must be ≥ 1; got {max_pivots}")
    if opts.ratio_test not in _RATIO_TESTS:
        raise ValueError(f"LemkeOptions.ratio_test must be one of {sorted(_RATIO_TESTS)}; "
                         f"got {opts.ratio_test!r}")
    if opts.method not in _METHODS:
        raise ValueError(f"LemkeOptions.method must be one of {list(_METHODS)}; got {opts.method!r}")
    harris = _RATIO_TESTS[opts.ratio_test]
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
        status, pivots, z0, res = _run_revised(M, q, d, int(max_pivots), opts, refactor, harris, Bt, r, c, LU,
                                               perm, perm2, basis, vecs, ibuf, fbuf, 0)
    else:
        T, LU, perm, perm2, basis, vecs = ws.views(n)
        status, pivots, z0, res = _lemke_kernel(
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


def _restarts(opts: "LemkeOptions") -> bool:
    """Whether a failed run restarts from its last basis: ``opts.restart`` with the Harris rule (the textbook
    rule stays the classic single path, whose pivot counts and failures the tests compare)."""
    return bool(opts.restart) and opts.ratio_test == "harris"


RESTART_MAX_GAIN = 1e8
"""A restarted run's answer must have ‖M‖∞‖z‖∞ ≤ RESTART_MAX_GAIN·‖q‖∞ (``plausible_gain``). The final check is
relative to s_w = ‖M‖∞‖z‖∞ + ‖q‖∞, so on an LCP without solution (its first run ended on a true secondary ray)
a restart can end on a point with z ~ 1e15 that passes it; contact answers have gains ~1e3."""


def plausible_gain(M, q, z) -> bool:
    """‖M‖∞‖z‖∞ ≤ RESTART_MAX_GAIN·‖q‖∞ (M dense or scipy.sparse): the answer is not a huge z that passes the
    relative final check only through its own size."""
    mnorm = float(np.asarray(abs(M).sum(axis=1)).max()) if q.shape[0] else 0.0
    return bool(mnorm * float(np.abs(z).max(initial=0.0)) <= RESTART_MAX_GAIN * float(np.abs(q).max(initial=0.0)))


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


def _warm_tableau(M, q, alpha, T, basis, rank_tol: float = 1e-10, rhs_out=None) -> np.ndarray | None:
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
    max_pivots, refactor = _pivot_limits(n, opts, max_pivots)
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
        d = _warm_tableau(M, q, alpha, Bt.T, basis, rank_tol, rhs_out=r)
    else:
        T, LU, perm, perm2, basis, vecs = ws.views(n)
        d = _warm_tableau(M, q, alpha, T, basis, rank_tol)
    if d is None:
        e = np.zeros(n)
        return LemkeResult(e, q.copy(), LemkeStatus.NUMERICAL_FAILURE, 0, 0.0, basis.copy(), e.copy(), np.inf)
    if revised:
        status, pivots, z0, res = _run_revised(M, q, d, int(max_pivots), opts, refactor,
                                               _RATIO_TESTS[opts.ratio_test], Bt, r, c, LU, perm, perm2, basis,
                                               vecs, ibuf, fbuf, 1)
    else:
        status, pivots, z0, res = _lemke_kernel(
            M, q, d, int(max_pivots), opts.pivot_tol, opts.ratio_rel_tol, opts.rhs_tol, opts.lex_rel_tol,
            opts.lex_abs_tol, opts.check_tol, refactor, _RATIO_TESTS[opts.ratio_test], opts.harris_tol,
            opts.harris_pivot_ratio, T, LU, perm, perm2, basis, vecs, 1)
    z, w, ray = vecs[0], vecs[1], vecs[4]
    if own:
        z, w, ray, basis = z.copy(), w.copy(), ray.copy(), basis.copy()
    return LemkeResult(z, w, LemkeStatus(int(status)), int(pivots), float(z0), basis, ray, float(res))


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


def solve_from_basis(M, q, basic, *, max_solves: int = 8, feas_tol: float = 10.0 * _EPS,
                     rank_tol: float = 1e-10, options: LemkeOptions | None = None) -> BasisSolveResult:
    """Try to solve LCP(M, q) from a guess of its complementary basis (warm start; docs/lcp.md §2).

    With α the guessed basic z's: solve ``M_αα z_α = −q_α`` (QR with column pivoting; columns whose
    pivot is ≤ ``rank_tol`` times the first are dependent and leave α, which counts as one of the
    ``max_solves`` factorizations), set the other z's to 0, and accept
    the point only if no index is infeasible at the tight level ``t = feas_tol·n`` (``z_i < −t‖z‖∞`` for
    i ∈ α, ``w_i < −t·s_w`` for i ∉ α, ``s_w = ‖M‖∞‖z‖∞ + ‖q‖∞``) and it passes the final check ``lemke``
    uses (``_check``, ``check_tol``; tiny negatives of z are then clipped to 0 and the check repeated).
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
        res = float(_check(M, q, z, w, opts.check_tol))
        znorm = max(float(np.abs(z).max()), 1e-300)
        sw = max(mnorm * znorm + qnorm, 1e-300)
        bad = np.flatnonzero((alpha & (z < -t * znorm)) | (~alpha & (w < -t * sw)))
        if bad.size == 0:
            if res <= 1.0:
                z[z < 0.0] = 0.0
                res = float(_check(M, q, z, w, opts.check_tol))
                if res <= 1.0:
                    return BasisSolveResult(z, w, True, solves, res, alpha)
            break  # fails on complementarity (w_α ≠ 0: an ill-conditioned subsystem): give up
        if bad.size < best_bad:
            best_bad = bad.size
            alpha[bad] = ~alpha[bad]
        else:
            alpha[bad[-1]] = not alpha[bad[-1]]
    return BasisSolveResult(z, w, False, solves, res, alpha)


def lcp_residual(M, q, z) -> float:
    """Natural-map residual ‖min(z, Mz + q)‖∞ (0 exactly at a solution); a solver-independent check."""
    M = np.asarray(M, float)
    z = np.asarray(z, float)
    w = M @ z + np.asarray(q, float)
    return float(np.max(np.abs(np.minimum(z, w)))) if z.size else 0.0


__all__ = ["lemke", "LemkeResult", "LemkeStatus", "LemkeOptions", "LemkeWorkspace", "lcp_residual",
           "default_max_pivots", "solve_from_basis", "BasisSolveResult", "lemke_from_basis", "independent_basis"]
