"""Revised Lemke with a sparse LU of the basis (``LemkeOptions.method="sparse"``; ``"auto"`` picks it for
large sparse LCPs).

The dense revised kernel (``lemke.py``) keeps B⁻¹ explicitly: a pivot on a heap island (n ≈ 2300, k ≈ 700
basic z's) streams the n·k non-unit entries of B⁻¹ twice, 1.5–3 ms per pivot. Here the basis matrix B
(columns: e_j for a basic w_j, −M_·j for a basic z_j, −d for z0) is kept as a sparse LU of the basis at the
last refactorization, B₀ = LU (SuperLU, ``scipy.sparse.linalg.splu``), and the pivots since then as an eta
file (product form: B⁻¹ = E_t ⋯ E_1 B₀⁻¹). A pivot costs one sparse solve with B₀ plus the etas (FTRAN of the
entering column), an O(n·s) update of the rhs and of a sketch (below), and the ratio test: O(nnz(LU) + n·t)
instead of O(n·k). Every ``refactor`` pivots B is factorized afresh from the original data (drift control,
and the eta file stays short).

The pivots between two refactorizations run in one compiled kernel (``_walk``): FTRAN (``_lu_solve_csc`` on
SuperLU's factors, then the etas), the ratio test with the sketch's noise scales formed only for the rows
with a positive pivot entry (``_harris_sketch``), lexicographic ties on rows of B⁻¹ (BTRAN: the transposed
etas on the unit row, which touch only its nonzeros, then ``_lu_solve_transposed`` on CSR copies of L and U),
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

import sys
import warnings

import numpy as np
import scipy.sparse
import scipy.sparse.linalg

from convexsim._jit import jit
from convexsim.lcp.lemke import (LemkeOptions, LemkeResult, LemkeStatus, _check_sparse, _early_exit_revised,
                                 _harris_tied_revised, _sparse_pattern, as_sparse_lcp_matrix, both_finite,
                                 compressed_transpose, harris_passes, independent_basis, pivot_rhs, plausible_gain,
                                 register_sparse_kernel)

SKETCH_COLUMNS = 8
"""s, the sketch width: the row-norm estimates have relative spread ≈ 1/√(2s) = 25 %."""

REFACTOR_EVERY = 100
"""Pivots between sparse refactorizations (the eta file's length at most); chosen by measurement on heap
islands (docs/lcp.md §1, "Sparse-LU Lemke")."""

COMPILED = True
"""Run the pivots in the compiled kernel ``_walk`` (False: the Python loop, kept as the reference path;
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


# --------------------------------------------------------------------------------------------
# numba helpers (the per-pivot vector work; the sparse solves are SuperLU's)
# --------------------------------------------------------------------------------------------


ETA_DENSE_FRACTION = 0.25
"""An eta column with more than this fraction of nonzeros is stored dense (n values, no indices): on heap LCPs
the entering columns are dense (the z0 column −d makes B⁻¹ dense in its row), and a dense column is applied
by contiguous loops that vectorize."""


@jit
def _record_eta(eta_ptr, eta_idx, eta_val, eta_row, eta_piv, neta, c, row):
    """Append the pivot (entering column c, pivot row) to the eta file: the pivot c_row in ``eta_piv``, the
    other entries of c in ``eta_val[eta_ptr[t]:eta_ptr[t+1]]``, either all n of them (dense; the pivot's slot
    holds 0) or the nonzeros only, with their rows in ``eta_idx`` (increasing; a sparse column has fewer than
    n entries). Returns the new count."""
    n = c.shape[0]
    t = eta_ptr[neta]
    nnz = 0
    for i in range(n):
        if c[i] != 0.0:
            nnz += 1
    if nnz > ETA_DENSE_FRACTION * n:
        for i in range(n):
            eta_val[t + i] = c[i]
        eta_val[t + row] = 0.0
        t += n
    else:
        for i in range(n):
            ci = c[i]
            if ci != 0.0 and i != row:
                eta_idx[t] = i
                eta_val[t] = ci
                t += 1
    eta_ptr[neta + 1] = t
    eta_row[neta] = row
    eta_piv[neta] = c[row]
    return neta + 1


@jit
def _apply_etas(x, eta_ptr, eta_idx, eta_val, eta_row, eta_piv, neta):
    """x ← E_neta ⋯ E_1 x: each pivot's Gauss–Jordan step applied to x (the tableau's own column update:
    x_p ← x_p/c_p, x_i ← x_i − c_i·x_p for i ≠ p), over the stored entries of each eta column."""
    n = x.shape[0]
    for t in range(neta):
        p = eta_row[t]
        x[p] /= eta_piv[t]
        xp = x[p]
        if xp != 0.0:
            lo = eta_ptr[t]
            hi = eta_ptr[t + 1]
            if hi - lo == n:
                for i in range(n):
                    x[i] -= eta_val[lo + i] * xp
            else:
                for k in range(lo, hi):
                    x[eta_idx[k]] -= eta_val[k] * xp
            x[p] = xp


@jit
def _unit_row_etas_transposed(i, y, nz, eta_ptr, eta_idx, eta_val, eta_row, eta_piv, neta):
    """y ← E_1ᵀ ⋯ E_netaᵀ e_i (for row i of B⁻¹ = E ⋯ B₀⁻¹: eᵢᵀB⁻¹ = (E_1ᵀ⋯E_tᵀ eᵢ)ᵀ B₀⁻¹); y must be zero on
    entry. Eᵀ changes only entry p: y_p ← (y_p − Σ_{j≠p} c_j y_j)/c_p, so y's nonzeros are i and pivot rows
    only; they are kept in ``nz`` (increasing) and a dense eta's sum runs over them alone, in increasing j (the
    full sum's value: the other terms are zero). Returns the count of listed entries."""
    n = y.shape[0]
    y[i] = 1.0
    nz[0] = i
    m = 1
    for t in range(neta - 1, -1, -1):
        p = eta_row[t]
        lo = eta_ptr[t]
        hi = eta_ptr[t + 1]
        s = 0.0
        if hi - lo == n:
            for k in range(m):
                j = nz[k]
                s += eta_val[lo + j] * y[j]
        else:
            for k in range(lo, hi):
                s += eta_val[k] * y[eta_idx[k]]
        yp = (y[p] - s) / eta_piv[t]
        if y[p] == 0.0 and yp != 0.0:       # a new nonzero: p into the sorted list (unless listed)
            k = 0
            while k < m and nz[k] < p:
                k += 1
            if k == m or nz[k] != p:
                for kk in range(m, k, -1):
                    nz[kk] = nz[kk - 1]
                nz[k] = p
                m += 1
        y[p] = yp
    return m


@jit
def _pivot_vectors(r, Y, c, row):
    """The pivot's Gauss–Jordan step on the rhs r and the sketch columns Y (n × 2s), entering column c."""
    n = r.shape[0]
    p = c[row]
    pivot_rhs(r, c, row)
    for k in range(Y.shape[1]):
        Y[row, k] /= p
    for i in range(n):
        if i != row:
            ci = c[i]
            if ci != 0.0:
                for k in range(Y.shape[1]):
                    Y[i, k] -= ci * Y[row, k]


@jit
def _noise_scales(r, Y, s, anorm, erhs, ecol):
    """erhs_i = max(|r_i|, ‖Y_q,i‖/√s) + 1e-300, ecol_i = ‖Y_S,i‖/√s · ‖a‖₂ + 1e-300 (module docstring)."""
    n = r.shape[0]
    for i in range(n):
        a = 0.0
        b = 0.0
        for k in range(s):
            a += Y[i, k] * Y[i, k]
            b += Y[i, s + k] * Y[i, s + k]
        ecol[i] = np.sqrt(a / s) * anorm + 1e-300
        erhs[i] = max(abs(r[i]), np.sqrt(b / s)) + 1e-300


@jit
def _lex_less_rows(ra, ca, rb, cb, rel, abs_tol):
    """``lemke._lex_less`` on two rows of B⁻¹ given explicitly (ra, rb) with their pivots ca, cb."""
    n = ra.shape[0]
    scale = 0.0
    for j in range(n):
        scale = max(scale, abs(ra[j] / ca), abs(rb[j] / cb))
    floor = abs_tol * scale
    for j in range(n):
        va = ra[j] / ca
        vb = rb[j] / cb
        diff = va - vb
        if abs(diff) <= rel * max(abs(va), abs(vb)) + floor:
            continue
        return diff < 0.0
    for j in range(n):
        diff = ra[j] / ca - rb[j] / cb
        if diff != 0.0:
            return diff < 0.0
    return False


@jit
def _basis_csc(basis, colptr, colidx, colval, d, Bp, Bi, Bx):
    """The basis matrix B in CSC form (column k: e_b for w_b, −M_·j for z_j, −d for z0). Returns nnz."""
    n = basis.shape[0]
    t = 0
    for k in range(n):
        Bp[k] = t
        b = basis[k]
        if b < n:
            Bi[t] = b
            Bx[t] = 1.0
            t += 1
        elif b < 2 * n:
            for s in range(colptr[b - n], colptr[b - n + 1]):
                Bi[t] = colidx[s]
                Bx[t] = -colval[s]
                t += 1
        else:
            for i in range(n):
                Bi[t] = i
                Bx[t] = -d[i]
                t += 1
    Bp[n] = t
    return t


@jit
def _lu_solve_csc(Lp, Li, Lx, Up, Ui, Ux, Udiag, pr, pc, b, x, y):
    """x = B₀⁻¹b from SuperLU's factors (Pr·B₀·Pc = L·U, L unit lower, both CSC): y = Pr b, L and U column
    sweeps, x = y permuted by Pc. The same operations as SuperLU's solve up to summation order."""
    n = b.shape[0]
    for i in range(n):
        y[pr[i]] = b[i]
    for j in range(n):
        yj = y[j]
        if yj != 0.0:
            for k in range(Lp[j], Lp[j + 1]):
                i = Li[k]
                if i > j:
                    y[i] -= Lx[k] * yj
    for j in range(n - 1, -1, -1):
        y[j] /= Udiag[j]
        yj = y[j]
        if yj != 0.0:
            for k in range(Up[j], Up[j + 1]):
                i = Ui[k]
                if i < j:
                    y[i] -= Ux[k] * yj
    for i in range(n):
        x[i] = y[pc[i]]


@jit
def _lu_solve_csc_many(Lp, Li, Lx, Up, Ui, Ux, Udiag, pr, pc, B, X, W):
    """X = B₀⁻¹B for the k columns of B (n × k, C order; W n × k work): ``_lu_solve_csc``'s sweeps with the k
    columns side by side (the sketch's re-FTRAN after a refactorization)."""
    n, k = B.shape
    for i in range(n):
        for m in range(k):
            W[pr[i], m] = B[i, m]
    for j in range(n):
        for t in range(Lp[j], Lp[j + 1]):
            i = Li[t]
            if i > j:
                lij = Lx[t]
                for m in range(k):
                    W[i, m] -= lij * W[j, m]
    for j in range(n - 1, -1, -1):
        dj = Udiag[j]
        for m in range(k):
            W[j, m] /= dj
        for t in range(Up[j], Up[j + 1]):
            i = Ui[t]
            if i < j:
                uij = Ux[t]
                for m in range(k):
                    W[i, m] -= uij * W[j, m]
    for i in range(n):
        for m in range(k):
            X[i, m] = W[pc[i], m]


@jit
def _fill_floors(basis, qmax, mnorm, dmax, floors):
    """The Harris data floor of each row's basic variable: ‖q‖∞ (w), ‖q‖∞/‖M‖∞ (z), ‖q‖∞/‖d‖∞ (z0)."""
    n = basis.shape[0]
    for i in range(n):
        b = basis[i]
        floors[i] = qmax if b < n else (qmax / max(mnorm, 1e-300) if b < 2 * n else qmax / dmax)


@jit
def _column(var, colptr, colidx, colval, d, a):
    """a = the original column of variable var in the tableau [I | −M | −d] (dense, into a); returns ‖a‖₂."""
    n = a.shape[0]
    for i in range(n):
        a[i] = 0.0
    if var < n:
        a[var] = 1.0
    elif var < 2 * n:
        for k in range(colptr[var - n], colptr[var - n + 1]):
            a[colidx[k]] = -colval[k]
    else:
        for i in range(n):
            a[i] = -d[i]
    ss = 0.0
    for i in range(n):
        ss += a[i] * a[i]
    return np.sqrt(ss)


@jit
def _lu_solve_transposed(Ltp, Lti, Ltx, Utp, Uti, Utx, Udiag, pr, pc, b, x, y):
    """x = B₀⁻ᵀb from SuperLU's factors: B₀⁻¹ = Pc U⁻¹ L⁻¹ Pr (``_lu_solve_csc``), so B₀⁻ᵀ = Prᵀ L⁻ᵀ U⁻ᵀ Pcᵀ:
    y = Pcᵀb, then Uᵀ and Lᵀ by column sweeps over the columns of Uᵀ and Lᵀ (U's and L's rows: their CSR
    copies Utp/Uti/Utx, Ltp/Lti/Ltx, ``compressed_transpose``), skipping zero entries (b is a BTRAN'd unit vector,
    sparse), x = Prᵀy. SuperLU's ``solve(trans="T")`` up to summation order."""
    n = b.shape[0]
    for i in range(n):
        y[pc[i]] = b[i]
    for j in range(n):
        y[j] /= Udiag[j]
        yj = y[j]
        if yj != 0.0:
            for k in range(Utp[j], Utp[j + 1]):
                i = Uti[k]
                if i > j:
                    y[i] -= Utx[k] * yj
    for j in range(n - 1, -1, -1):
        yj = y[j]
        if yj != 0.0:
            for k in range(Ltp[j], Ltp[j + 1]):
                i = Lti[k]
                if i < j:
                    y[i] -= Ltx[k] * yj
    for i in range(n):
        x[i] = y[pr[i]]


@jit
def _btran_row(i, has_lu, Ltp, Lti, Ltx, Utp, Uti, Utx, Udiag, pr, pc, eta_ptr, eta_idx, eta_val, eta_row, eta_piv,
               neta, out, y, work, nz):
    """out = row i of B⁻¹ = E_t ⋯ E_1 B₀⁻¹ (transposed etas on eᵢ, then the transposed solve with B₀)."""
    for k in range(y.shape[0]):
        y[k] = 0.0
    _unit_row_etas_transposed(i, y, nz, eta_ptr, eta_idx, eta_val, eta_row, eta_piv, neta)
    if has_lu:
        _lu_solve_transposed(Ltp, Lti, Ltx, Utp, Uti, Utx, Udiag, pr, pc, y, out, work)
    else:
        for k in range(y.shape[0]):
            out[k] = y[k]


@jit
def _harris_sketch(c, r, Y, s, anorm, basis, qmax, mnorm, dmax, piv_tol, noise_tol, tol, pivot_ratio, z0_row,
                   tied, cand, rows):
    """``_noise_scales`` + ``_fill_floors`` + ``lemke._harris_tied_revised`` in one pass: the noise scales and
    data floors are formed only for the rows with c_i > piv_tol (the only ones the ratio test reads), and
    passes 2–4 run over those rows only (listed in ``rows``). The same values and comparisons, row for row.
    Returns (number of tied rows in ``tied``, whether z0's row is among the eligible ones)."""
    n = c.shape[0]
    theta = np.inf
    m = 0
    for i in range(n):
        ci = c[i]
        if ci > piv_tol:
            a = 0.0
            b = 0.0
            for k in range(s):
                a += Y[i, k] * Y[i, k]
                b += Y[i, s + k] * Y[i, s + k]
            ecol = np.sqrt(a / s) * anorm + 1e-300
            erhs = max(abs(r[i]), np.sqrt(b / s)) + 1e-300
            v = basis[i]
            floor = qmax if v < n else (qmax / max(mnorm, 1e-300) if v < 2 * n else qmax / dmax)
            cand[i] = 1.0 if ci > noise_tol * ecol else 0.0
            delta = tol * max(erhs, floor)
            theta = min(theta, (max(r[i], 0.0) + delta) / ci)
            rows[m] = i
            m += 1
    return harris_passes(rows, m, c, r, cand, theta, pivot_ratio, z0_row, tied)


@jit
def _rhs_scale(r, Y, s, i):
    """erhs_i of ``_noise_scales``."""
    b = 0.0
    for k in range(s):
        b += Y[i, s + k] * Y[i, s + k]
    return max(abs(r[i]), np.sqrt(b / s)) + 1e-300


@jit
def _textbook_tied(c, r, Y, s, piv_tol, ratio_rel_tol, rhs_tol, z0_row, tied):
    """The textbook ratio test of the Python loop (minimum ratio over c_i > piv_tol, ties within the relative
    and noise tolerances; numpy's argmin order). Returns (number tied, z0's row tied)."""
    n = c.shape[0]
    imin = 0
    rho_min = r[0] / c[0] if c[0] > piv_tol else np.inf
    for i in range(1, n):
        if np.isnan(rho_min):
            break
        rho = r[i] / c[i] if c[i] > piv_tol else np.inf
        if rho < rho_min or np.isnan(rho):
            imin = i
            rho_min = rho
    found = False
    for i in range(n):
        if c[i] > piv_tol:
            found = True
            break
    if not found:
        return 0, False
    cmin = c[imin]
    emin = _rhs_scale(r, Y, s, imin)
    ntied = 0
    z0_tied = False
    for i in range(n):
        ci = c[i]
        if ci > piv_tol:
            rho = r[i] / ci
            if rho - rho_min <= ratio_rel_tol * abs(rho_min) + rhs_tol * (_rhs_scale(r, Y, s, i) / ci + emin / cmin):
                tied[ntied] = i
                ntied += 1
                if i == z0_row:
                    z0_tied = True
    return ntied, z0_tied


WALK_SOLVED, WALK_PIVOT_LIMIT, WALK_RAY, WALK_FAILED, WALK_REFACTOR = 0, 1, 2, 3, 4
"""Return codes of ``_walk``: the first four are ``LemkeStatus`` values; WALK_REFACTOR asks the caller for a
refactorization (eta file full, or a tie to be decided on a fresh basis), after which it calls again."""


@jit
def _walk(basis, r, Y, s, q, d, colptr, colidx, colval, rowptr, rowidx, rowval,
          has_lu, Lp, Li, Lx, Up, Ui, Ux, Udiag, pr, pc, Ltp, Lti, Ltx, Utp, Uti, Utx,
          eta_ptr, eta_idx, eta_val, eta_row, eta_piv, state,
          max_pivots, every, tie_refactor, harris, z0_row, qmax, mnorm, dmax, piv_tol, noise_tol, harris_tol,
          pivot_ratio, ratio_rel_tol, rhs_tol, lex_rel_tol, lex_abs_tol, check_tol, t_check,
          a, c, y, work, row_a, row_b, tied, rows, cand, z, w, ray, nz):
    """The pivots of the path between two refactorizations, compiled: the Python loop of ``_sparse_lemke_run``
    (``compiled=False``) step for step — entering column by FTRAN (``_lu_solve_csc`` + etas), the ratio test
    (``_harris_sketch`` or ``_textbook_tied``), lexicographic ties on rows of B⁻¹ by BTRAN
    (``_btran_row``), the rhs clamp, the pivot on r, Y and the eta file, the early exit.

    state = [pivots, entering, pivots since the last refactorization, eta count] is read and written back.
    Returns a ``WALK_*`` code: SOLVED (z0 left, or the early exit), PIVOT_LIMIT (``max_pivots`` reached),
    RAY (no leaving row; ``ray`` set), FAILED (no leaving row with non-finite r or c), REFACTOR."""
    n = r.shape[0]
    pivots = state[0]
    entering = state[1]
    since = state[2]
    neta = state[3]
    code = WALK_PIVOT_LIMIT
    while pivots < max_pivots:
        if neta >= every:
            code = WALK_REFACTOR
            break
        anorm = _column(entering, colptr, colidx, colval, d, a)
        if has_lu:
            _lu_solve_csc(Lp, Li, Lx, Up, Ui, Ux, Udiag, pr, pc, a, c, y)
        else:
            for i in range(n):
                c[i] = a[i]
        _apply_etas(c, eta_ptr, eta_idx, eta_val, eta_row, eta_piv, neta)
        if harris:
            ntied, z0_tied = _harris_sketch(c, r, Y, s, anorm, basis, qmax, mnorm, dmax, piv_tol, noise_tol,
                                            harris_tol, pivot_ratio, z0_row, tied, cand, rows)
        else:
            ntied, z0_tied = _textbook_tied(c, r, Y, s, piv_tol, ratio_rel_tol, rhs_tol, z0_row, tied)
        if ntied == 0:
            if not both_finite(r, c):
                code = WALK_FAILED
                break
            if n <= entering < 2 * n:
                ray[entering - n] = 1.0
            for i in range(n):
                v = basis[i]
                if n <= v < 2 * n:
                    ray[v - n] = -c[i]
            code = WALK_RAY
            break
        if ntied > 1 and not z0_tied and since >= tie_refactor:
            code = WALK_REFACTOR
            break
        if z0_tied:
            row = z0_row
        else:
            row = tied[0]
            if ntied > 1:
                _btran_row(row, has_lu, Ltp, Lti, Ltx, Utp, Uti, Utx, Udiag, pr, pc, eta_ptr, eta_idx, eta_val,
                           eta_row, eta_piv, neta, row_b, y, work, nz)
                for k in range(1, ntied):
                    i = tied[k]
                    _btran_row(i, has_lu, Ltp, Lti, Ltx, Utp, Uti, Utx, Udiag, pr, pc, eta_ptr, eta_idx,
                               eta_val, eta_row, eta_piv, neta, row_a, y, work, nz)
                    if _lex_less_rows(row_a, c[i], row_b, c[row], lex_rel_tol, lex_abs_tol):
                        row = i
                        row_b[:] = row_a
        if harris and r[row] < 0.0:
            r[row] = 0.0
        leaving = basis[row]
        basis[row] = entering
        neta = _record_eta(eta_ptr, eta_idx, eta_val, eta_row, eta_piv, neta, c, row)
        _pivot_vectors(r, Y, c, row)
        since += 1
        pivots += 1
        if leaving == 2 * n:
            code = WALK_SOLVED
            break
        if harris and _early_exit_revised(r, basis, z, w, check_tol, t_check, mnorm, qmax, dmax, q, rowptr,
                                          rowidx, rowval):
            code = WALK_SOLVED
            break
        entering = leaving + n if leaving < n else leaving - n
    state[0] = pivots
    state[1] = entering
    state[2] = since
    state[3] = neta
    return code


# --------------------------------------------------------------------------------------------
# the basis: sparse LU at the last refactorization + eta file
# --------------------------------------------------------------------------------------------


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
        anorm = _column(var, self.colptr, self.colidx, self.colval, self.d, a)
        return a, anorm

    def ftran(self, a: np.ndarray) -> np.ndarray:
        """B⁻¹a (a new array)."""
        if self.lu is None:
            x = a.copy()
        else:
            x = np.empty(self.n)
            _lu_solve_csc(*self.factors, a, x, self.y)
        _apply_etas(x, *self.eta_file, self.neta)
        return x

    def ftran_many(self, A: np.ndarray) -> np.ndarray:
        """B⁻¹A for a few columns (n × k, C order)."""
        if self.lu is None:
            X = A.copy()
        else:
            X = np.empty_like(A)
            _lu_solve_csc_many(*self.factors, A, X, np.empty_like(A))
        if not self.neta:
            return X
        for k in range(X.shape[1]):
            x = np.ascontiguousarray(X[:, k])
            _apply_etas(x, *self.eta_file, self.neta)
            X[:, k] = x
        return X

    def row(self, i: int) -> np.ndarray:
        """Row i of B⁻¹ (BTRAN: transposed etas, then the transposed solve with the stored factors, the
        compiled walk's own ``_btran_row``; SuperLU's ``solve(trans="T")`` agrees to round-off, but a
        lexicographic tie can turn on that round-off, so both paths use the same BTRAN)."""
        out = np.empty(self.n)
        _btran_row(i, self.lu is not None, *self.tfactors, *self.factors[6:], *self.eta_file, self.neta, out,
                   np.zeros(self.n), np.empty(self.n), np.empty(self.n + 1, np.int64))
        return out

    def record(self, c: np.ndarray, row: int) -> bool:
        """Append a pivot; False when the eta file is full (refactor first)."""
        if self.neta >= self.cap:
            return False
        self.neta = _record_eta(*self.eta_file, self.neta, c, row)
        return True

    def factor(self, basis: np.ndarray) -> bool:
        """B₀ = LU of the basis matrix from the original data (SuperLU, COLAMD order); the eta file is emptied.
        False if B is singular (an exactly zero pivot) or the factors are not finite."""
        n = self.n
        nnz = _basis_csc(basis, self.colptr, self.colidx, self.colval, self.d, self.Bp, self.Bi, self.Bx)
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


# --------------------------------------------------------------------------------------------
# the path
# --------------------------------------------------------------------------------------------


def _final_resolve_sparse(Mc, rp, ri, rv, mnorm, q, z, basis, check_tol):
    """``lemke._final_resolve`` with sparse data: re-solve M_αα z_α = −q_α (SuperLU), keep the better of the
    two candidates, check, clip tiny negatives. Returns (status, z, w, residual)."""
    n = q.shape[0]
    w = np.empty(n)
    res = _check_sparse(rp, ri, rv, mnorm, q, z, w, check_tol)
    a = np.sort(basis[(basis >= n) & (basis < 2 * n)] - n)
    if a.size:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", scipy.sparse.linalg.MatrixRankWarning)
                x = scipy.sparse.linalg.splu(Mc[a][:, a].tocsc(), permc_spec="COLAMD").solve(-q[a])
            zalt = np.zeros(n)
            zalt[a] = x
            walt = np.empty(n)
            res_alt = _check_sparse(rp, ri, rv, mnorm, q, zalt, walt, check_tol)
            if res_alt < res:
                z, w, res = zalt, walt, res_alt
        except RuntimeError:
            pass
    if not (res <= 1.0):
        return 3, z, w, res
    z = np.where(z < 0.0, 0.0, z)
    res = _check_sparse(rp, ri, rv, mnorm, q, z, w, check_tol)
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
    original (M, q) and must have a plausible gain (``lemke.plausible_gain``); pivots count both runs. If the restart fails too, the first run's result is returned
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
    _sparse_pattern(M, cp, ci, cv, rp, ri, rv)
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
        return result(0, 0, 0.0, _check_sparse(rp, ri, rv, mnorm, q, z, w, opts.check_tol))
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
        _noise_scales(r, Y, s, 0.0, erhs, ecol)
        row0 = int(np.flatnonzero(r - best <= ratio_rel_tol * abs(best) + 2.0 * opts.rhs_tol * erhs)[-1])
        walk = best < 0.0
        if walk:
            zb = basis >= n
            z[basis[zb] - n] = r[zb]
            znorm = float(np.abs(r[zb]).max()) if zb.any() else 0.0
            tt = opts.pivot_tol * n
            lim = np.where(zb, tt * znorm, tt * (mnorm * znorm + qmax))
            tight = bool(np.all(r >= -lim))
            walk = not (tight and _check_sparse(rp, ri, rv, mnorm, q, z, w, opts.check_tol) <= 1.0)
    pivots = 0
    z0_row = -1
    status = 0
    entering = -1
    tied = np.empty(n, np.int64)
    cand = np.empty(n)
    floors = np.empty(n)
    t_check = opts.check_tol * n
    since_refactor = 0
    tie_refactor = max(8, n)

    def do_pivot(c, row):
        nonlocal since_refactor
        if not B.record(c, row):
            raise AssertionError("eta file overflow")   # refactor happens before it fills
        _pivot_vectors(r, Y, c, row)
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
            code = _walk(basis, r, Y, s, q, d, cp, ci, cv, rp, ri, rv, B.lu is not None, *B.factors, *B.tfactors,
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
            _noise_scales(r, Y, s, anorm, erhs, ecol)
            _fill_floors(basis, qmax, mnorm, dmax, floors)
            ntied, z0_tied = _harris_tied_revised(c, r, erhs, ecol, n, piv_tol, opts.pivot_tol * n,
                                                  opts.harris_tol * n, pivot_ratio, z0_row, tied, cand,
                                                  floors)
            found = ntied > 0
        else:
            ok = c > piv_tol
            found = bool(ok.any())
            if found:
                rho = np.where(ok, r / np.where(ok, c, 1.0), np.inf)
                imin = int(np.argmin(rho))
                rho_min, cmin = rho[imin], c[imin]
                _noise_scales(r, Y, s, 0.0, erhs, ecol)
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
            if n <= entering < 2 * n:
                ray[entering - n] = 1.0
            zb = (basis >= n) & (basis < 2 * n)
            ray[basis[zb] - n] = -c[zb]
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
                    if _lex_less_rows(rows[i], c[i], rows[row], c[row], opts.lex_rel_tol, opts.lex_abs_tol):
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
        if harris and _early_exit_revised(r, basis, z, w, opts.check_tol, t_check, mnorm, qmax, dmax, q, rp, ri,
                                          rv):
            status = 0
            break
        entering = leaving + n if leaving < n else leaving - n
    z[:] = 0.0
    zb = (basis >= n) & (basis < 2 * n)
    z[basis[zb] - n] = r[zb]
    z0v = float(r[basis == 2 * n][0]) if np.any(basis == 2 * n) else 0.0
    if status in (1, 2):
        if _check_sparse(rp, ri, rv, mnorm, q, z, w, opts.check_tol) <= 1.0:
            ray[:] = 0.0
            status = 0
        else:
            return result(status, pivots, z0v, np.inf)
    elif status != 0:
        w[:] = Mr @ z + q
        return result(status, pivots, z0v, np.inf)
    st, zf, wf, res = _final_resolve_sparse(Mc, rp, ri, rv, mnorm, q, z, basis, opts.check_tol)
    return result(st, pivots, z0v, res, zf, wf)


register_sparse_kernel(sys.modules[__name__])     # lemke's methods "sparse" and "auto" reach this module


__all__ = ["sparse_lemke", "use_sparse", "SKETCH_COLUMNS", "REFACTOR_EVERY", "AUTO_MIN_SIZE", "AUTO_MAX_DENSITY",
           "PIVOT_RATIO_MIN"]
