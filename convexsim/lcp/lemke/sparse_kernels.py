"""numba kernels of the sparse-LU Lemke (``sparse.py``): the per-pivot vector work (the eta file, FTRAN and
BTRAN on SuperLU's factors, the sketched noise scales, the ratio tests) and ``walk_pivots``, the compiled
pivots between two refactorizations. The sparse factorizations themselves are SuperLU's."""

from __future__ import annotations

import numpy as np

from convexsim._jit import jit
from convexsim.lcp.lemke.pivot_rules import (blocked_status, complement, data_floor, early_exit_csr,
                                             harris_first_pass_row, harris_passes, lex_less_rows, min_ratio_ties)
from convexsim.lcp.lemke.revised import pivot_rhs


ETA_DENSE_FRACTION = 0.25
"""An eta column with more than this fraction of nonzeros is stored dense (n values, no indices): on heap LCPs
the entering columns are dense (the z0 column −d makes B⁻¹ dense in its row), and a dense column is applied
by contiguous loops that vectorize."""


@jit
def record_eta(eta_ptr, eta_idx, eta_val, eta_row, eta_piv, neta, c, row):
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
def apply_etas(x, eta_ptr, eta_idx, eta_val, eta_row, eta_piv, neta):
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
def unit_row_etas_transposed(i, y, nz, eta_ptr, eta_idx, eta_val, eta_row, eta_piv, neta):
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
def pivot_vectors(r, Y, c, row):
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
def noise_scales(r, Y, s, anorm, erhs, ecol):
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
def basis_csc(basis, colptr, colidx, colval, d, Bp, Bi, Bx):
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


@jit(inline="always")
def _eliminate_column(y, j, ptr, idx, val, below):
    """One step of a triangular column sweep on y in place: y_i −= a_ij·y_j for the stored entries a_ij of column j
    (CSC ``ptr``/``idx``/``val``) below the diagonal (``below``, i > j: a forward sweep) or above it (i < j: a
    backward sweep); nothing when y_j = 0 (sparse right-hand sides)."""
    yj = y[j]
    if yj != 0.0:
        for k in range(ptr[j], ptr[j + 1]):
            i = idx[k]
            if (i > j) if below else (i < j):
                y[i] -= val[k] * yj


@jit
def lu_solve_csc(Lp, Li, Lx, Up, Ui, Ux, Udiag, pr, pc, b, x, y):
    """x = B₀⁻¹b from SuperLU's factors (Pr·B₀·Pc = L·U, L unit lower, both CSC): y = Pr b, L and U column
    sweeps, x = y permuted by Pc. The same operations as SuperLU's solve up to summation order."""
    n = b.shape[0]
    for i in range(n):
        y[pr[i]] = b[i]
    for j in range(n):
        _eliminate_column(y, j, Lp, Li, Lx, True)
    for j in range(n - 1, -1, -1):
        y[j] /= Udiag[j]
        _eliminate_column(y, j, Up, Ui, Ux, False)
    for i in range(n):
        x[i] = y[pc[i]]


@jit
def lu_solve_csc_many(Lp, Li, Lx, Up, Ui, Ux, Udiag, pr, pc, B, X, W):
    """X = B₀⁻¹B for the k columns of B (n × k, C order; W n × k work): ``lu_solve_csc``'s sweeps with the k
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
def variable_column(var, colptr, colidx, colval, d, a):
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
def lu_solve_transposed(Ltp, Lti, Ltx, Utp, Uti, Utx, Udiag, pr, pc, b, x, y):
    """x = B₀⁻ᵀb from SuperLU's factors: B₀⁻¹ = Pc U⁻¹ L⁻¹ Pr (``lu_solve_csc``), so B₀⁻ᵀ = Prᵀ L⁻ᵀ U⁻ᵀ Pcᵀ:
    y = Pcᵀb, then Uᵀ and Lᵀ by column sweeps over the columns of Uᵀ and Lᵀ (U's and L's rows: their CSR
    copies Utp/Uti/Utx, Ltp/Lti/Ltx, ``compressed_transpose``), skipping zero entries (b is a BTRAN'd unit vector,
    sparse), x = Prᵀy. SuperLU's ``solve(trans="T")`` up to summation order."""
    n = b.shape[0]
    for i in range(n):
        y[pc[i]] = b[i]
    for j in range(n):
        y[j] /= Udiag[j]
        _eliminate_column(y, j, Utp, Uti, Utx, True)
    for j in range(n - 1, -1, -1):
        _eliminate_column(y, j, Ltp, Lti, Ltx, False)
    for i in range(n):
        x[i] = y[pr[i]]


@jit
def btran_row(i, has_lu, Ltp, Lti, Ltx, Utp, Uti, Utx, Udiag, pr, pc, eta_ptr, eta_idx, eta_val, eta_row, eta_piv,
              neta, out, y, work, nz):
    """out = row i of B⁻¹ = E_t ⋯ E_1 B₀⁻¹ (transposed etas on eᵢ, then the transposed solve with B₀)."""
    for k in range(y.shape[0]):
        y[k] = 0.0
    unit_row_etas_transposed(i, y, nz, eta_ptr, eta_idx, eta_val, eta_row, eta_piv, neta)
    if has_lu:
        lu_solve_transposed(Ltp, Lti, Ltx, Utp, Uti, Utx, Udiag, pr, pc, y, out, work)
    else:
        for k in range(y.shape[0]):
            out[k] = y[k]


@jit
def harris_sketch(c, r, Y, s, anorm, basis, qmax, mnorm, dmax, piv_tol, noise_tol, tol, pivot_ratio, z0_row,
                  tied, cand, rows):
    """``noise_scales`` + ``pivot_rules.fill_floors`` + ``pivot_rules.harris_ratio_test`` in one pass: the noise scales and
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
            for k in range(s):
                a += Y[i, k] * Y[i, k]
            ecol = np.sqrt(a / s) * anorm + 1e-300
            floor = data_floor(basis[i], n, qmax, mnorm, dmax)
            theta, m = harris_first_pass_row(i, ci, r, rhs_scale(r, Y, s, i), ecol, floor, noise_tol, tol, theta, cand,
                                             rows, m)
    return harris_passes(rows, m, c, r, cand, theta, pivot_ratio, z0_row, tied)


@jit
def rhs_scale(r, Y, s, i):
    """erhs_i of ``noise_scales``."""
    b = 0.0
    for k in range(s):
        b += Y[i, s + k] * Y[i, s + k]
    return max(abs(r[i]), np.sqrt(b / s)) + 1e-300


@jit
def textbook_tied(c, r, Y, s, piv_tol, ratio_rel_tol, rhs_tol, z0_row, tied):
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
    erhs = np.empty(n)   # the rhs noise scales the tie test reads (candidate rows and imin)
    for i in range(n):
        if c[i] > piv_tol:
            erhs[i] = rhs_scale(r, Y, s, i)
    erhs[imin] = rhs_scale(r, Y, s, imin)
    return min_ratio_ties(c, r, erhs, imin, rho_min, piv_tol, ratio_rel_tol, rhs_tol, z0_row, tied)


WALK_SOLVED, WALK_PIVOT_LIMIT, WALK_RAY, WALK_FAILED, WALK_REFACTOR = 0, 1, 2, 3, 4
"""Return codes of ``walk_pivots``: the first four are ``LemkeStatus`` values; WALK_REFACTOR asks the caller for a
refactorization (eta file full, or a tie to be decided on a fresh basis), after which it calls again."""


@jit
def walk_pivots(basis, r, Y, s, q, d, colptr, colidx, colval, rowptr, rowidx, rowval,
                has_lu, Lp, Li, Lx, Up, Ui, Ux, Udiag, pr, pc, Ltp, Lti, Ltx, Utp, Uti, Utx,
                eta_ptr, eta_idx, eta_val, eta_row, eta_piv, state,
                max_pivots, every, tie_refactor, harris, z0_row, qmax, mnorm, dmax, piv_tol, noise_tol, harris_tol,
                pivot_ratio, ratio_rel_tol, rhs_tol, lex_rel_tol, lex_abs_tol, check_tol, t_check,
                a, c, y, work, row_a, row_b, tied, rows, cand, z, w, ray, nz):
    """The pivots of the path between two refactorizations, compiled: the Python loop of ``sparse._sparse_lemke_run``
    (``compiled=False``) step for step — entering column by FTRAN (``lu_solve_csc`` + etas), the ratio test
    (``harris_sketch`` or ``textbook_tied``), lexicographic ties on rows of B⁻¹ by BTRAN
    (``btran_row``), the rhs clamp, the pivot on r, Y and the eta file, the early exit.

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
        anorm = variable_column(entering, colptr, colidx, colval, d, a)
        if has_lu:
            lu_solve_csc(Lp, Li, Lx, Up, Ui, Ux, Udiag, pr, pc, a, c, y)
        else:
            for i in range(n):
                c[i] = a[i]
        apply_etas(c, eta_ptr, eta_idx, eta_val, eta_row, eta_piv, neta)
        if harris:
            ntied, z0_tied = harris_sketch(c, r, Y, s, anorm, basis, qmax, mnorm, dmax, piv_tol, noise_tol,
                                           harris_tol, pivot_ratio, z0_row, tied, cand, rows)
        else:
            ntied, z0_tied = textbook_tied(c, r, Y, s, piv_tol, ratio_rel_tol, rhs_tol, z0_row, tied)
        if ntied == 0:
            code = blocked_status(basis, r, c, entering, ray)   # WALK_RAY or WALK_FAILED
            break
        if ntied > 1 and not z0_tied and since >= tie_refactor:
            code = WALK_REFACTOR
            break
        if z0_tied:
            row = z0_row
        else:
            row = tied[0]
            if ntied > 1:
                btran_row(row, has_lu, Ltp, Lti, Ltx, Utp, Uti, Utx, Udiag, pr, pc, eta_ptr, eta_idx, eta_val,
                          eta_row, eta_piv, neta, row_b, y, work, nz)
                for k in range(1, ntied):
                    i = tied[k]
                    btran_row(i, has_lu, Ltp, Lti, Ltx, Utp, Uti, Utx, Udiag, pr, pc, eta_ptr, eta_idx,
                              eta_val, eta_row, eta_piv, neta, row_a, y, work, nz)
                    if lex_less_rows(row_a, c[i], row_b, c[row], lex_rel_tol, lex_abs_tol):
                        row = i
                        row_b[:] = row_a
        if harris and r[row] < 0.0:
            r[row] = 0.0
        leaving = basis[row]
        basis[row] = entering
        neta = record_eta(eta_ptr, eta_idx, eta_val, eta_row, eta_piv, neta, c, row)
        pivot_vectors(r, Y, c, row)
        since += 1
        pivots += 1
        if leaving == 2 * n:
            code = WALK_SOLVED
            break
        if harris and early_exit_csr(r, basis, z, w, check_tol, t_check, mnorm, qmax, dmax, q, rowptr,
                                         rowidx, rowval):
            code = WALK_SOLVED
            break
        entering = complement(leaving, n)
    state[0] = pivots
    state[1] = entering
    state[2] = since
    state[3] = neta
    return code
