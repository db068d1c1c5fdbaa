"""Revised Lemke (``LemkeOptions.method="revised"``): B⁻¹ and B⁻¹q only, entering columns computed on demand
as B⁻¹a through M's sparse copies, B⁻¹ updated on the pivot row's nonzero columns, rebuilds by LU (up to
``REBUILD_LU_MAX``) or the LAPACK inverse. Same path and rules as the tableau kernel (``tableau.py``), whose
pieces it shares; they differ in rounding only (docs/lcp.md §1, "Revised Lemke")."""

from __future__ import annotations

import numpy as np

from convexsim._jit import jit
from convexsim.lcp.lemke.checks import final_check
from convexsim.lcp.lemke.pivot_rules import (basic_point, cold_entry_row, complement, early_exit_csr,
                                             leaving_row, path_scales, ratio_test, reset_path, tie_refactor_due,
                                             warm_basis_passes, warm_entry_row, z0_enters)
from convexsim.lcp.lemke.tableau import basis_matrix, end_of_path, lu_factor, lu_solve, original_column


@jit
def sparse_pattern(M, colptr, colidx, colval, rowptr, rowidx, rowval):
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
def compressed_transpose(p, idx, val, tp, tidx, tval):
    """(tp, tidx, tval) = the CSC arrays of Aᵀ (= A in CSR) for A in CSC (p, idx, val); rows in increasing order.
    The same call turns CSR arrays into CSC ones. Shared by ``sparse_pattern`` and the sparse kernel."""
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
            original_column(M, q, d, var, col)
            lu_solve(LU, perm, col, c)
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
        if qabs[j] != 0.0:
            _add_noise(Bt, wrow, j, qabs[j], erhs)


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
def _add_noise(Bt, wrow, j, v, e):
    """e += |B⁻¹|'s column j times v ≥ 0 (a term of the noise scales |B⁻¹||q|, |B⁻¹||a|): v in w_j's row alone
    while w_j is basic (B⁻¹'s column j is then the exact unit vector of that row)."""
    if wrow[j] >= 0:
        e[wrow[j]] += v
    else:
        col = Bt[j]
        for i in range(e.shape[0]):
            e[i] += abs(col[i]) * v


@jit
def _rhs_noise_all(Bt, wrow, qabs, erhs):
    """erhs = 1e-300 + |B⁻¹||q| for every row: ``tableau.row_noise``'s sums (of q), in the same order, skipping zero terms (a
    basic w_j's column of B⁻¹ is the exact unit vector of its row, so it adds |q_j| there)."""
    n = Bt.shape[0]
    for i in range(n):
        erhs[i] = 1e-300
    for j in range(n):
        if qabs[j] != 0.0:
            _add_noise(Bt, wrow, j, qabs[j], erhs)


@jit
def _col_noise_all(Bt, wrow, aidx, aval, na, ecol):
    """ecol = 1e-300 + |B⁻¹||a| for every row (a's nonzeros aidx, aval): ``tableau.row_noise``'s sums (of a), same order."""
    n = Bt.shape[0]
    for i in range(n):
        ecol[i] = 1e-300
    for k in range(na):
        _add_noise(Bt, wrow, aidx[k], abs(aval[k]), ecol)


@jit
def _refactor_revised(M, q, d, Bt, r, basis, Bmat, perm, col, x, lu_max):
    """Rebuild B⁻¹ (into Bt, transposed) and r = B⁻¹q from the original data. n ≤ lu_max: the tableau's own
    rebuild (``lu_factor`` of B kept in Bmat/perm, ``lu_solve`` per column: the same values as the
    tableau); larger n: the LAPACK inverse (O(n³) at BLAS speed instead of n scalar solves). Basic w's
    columns of B⁻¹ are then set to exact unit vectors (as the tableau rebuild does). Returns 0, or 1
    (singular B or non-finite values)."""
    n = M.shape[0]
    basis_matrix(M, q, d, basis, Bmat, col)
    if n <= lu_max:
        if lu_factor(Bmat, perm, 1e-300) != 0:
            return 1
        for j in range(n):
            original_column(M, q, d, j, col)
            lu_solve(Bmat, perm, col, x)
            for i in range(n):
                Bt[j, i] = x[i]
        original_column(M, q, d, 2 * n + 1, col)
        lu_solve(Bmat, perm, col, r)
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


@jit(inline="always")
def _basis_pivot(Bt, r, c, row, basis, wrow, qabs, erhs):
    """The pivot on (row, entering column c) once ``basis`` names the entering variable: the w rows refreshed
    (``_set_wrow``), then B⁻¹, r and the rhs noise updated (``_pivot_revised``)."""
    _set_wrow(basis, wrow)
    _pivot_revised(Bt, r, c, row, wrow, qabs, erhs)


@jit(inline="always")
def _revised_start(M, q, d, Bt, r, B0t, basis, z, w, wrow, qabs, erhs, start, pivot_tol, ratio_rel_tol, rhs_tol,
                   check_tol, mnorm, qmax, e_rhs):
    """The path's first row, as ``tableau._tableau_start``: cold (start 0), B⁻¹ = I and r = q; warm (start 1),
    Bt and r already hold the basis's B⁻¹ and B⁻¹q, copied to B0t (the product form's base), with the rhs noise.
    Returns (row, walk, base): base 1 when B0t holds a start basis, else 0."""
    n = M.shape[0]
    if start == 0:
        for i in range(n):
            for j in range(n):
                Bt[i, j] = 0.0
            Bt[i, i] = 1.0
            r[i] = q[i]
        return cold_entry_row(q, d, ratio_rel_tol, e_rhs), True, 0
    for i in range(n):
        for j in range(n):
            B0t[i, j] = Bt[i, j]
    _set_wrow(basis, wrow)
    _rhs_noise_all(Bt, wrow, qabs, erhs)
    row, best = warm_entry_row(r, erhs, ratio_rel_tol, rhs_tol)
    return row, best < 0.0 and not warm_basis_passes(M, q, r, basis, z, w, pivot_tol, mnorm, qmax, check_tol), 1


@jit
def revised_kernel(M, q, d, max_pivots, pivot_tol, ratio_rel_tol, rhs_tol, lex_rel_tol, lex_abs_tol,
                   check_tol, refactor_every, harris, harris_tol, harris_ratio, Bt, r, c, LU, perm,
                   perm2, basis, vecs, colptr, colidx, colval, rowptr, rowidx, rowval, ibuf, aval,
                   B0t, etas, eta_row, lu_max, start=0):
    """``tableau_kernel`` in revised form: the same path, rules and final steps, with the tableau replaced
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
    z, w, col, x, ray, zalt = vecs[0], vecs[1], vecs[2], vecs[3], vecs[4], vecs[5]
    cand, floors = zalt, x   # Harris flags and data floors during the path (as the tableau kernel)
    aidx = ibuf[:n]
    rows = ibuf[n:2 * n]
    wrow = ibuf[3 * n:4 * n]
    qabs = aval[n:2 * n]
    avals = aval[:n]
    erhs = aval[2 * n:3 * n]
    ecol = aval[3 * n:4 * n]
    reset_path(z, ray, basis, start)
    sparse_pattern(M, colptr, colidx, colval, rowptr, rowidx, rowval)
    for j in range(n):
        qabs[j] = abs(q[j])
    mnorm, qmax, dmax, piv_tol, e_rhs, qmin = path_scales(M, q, d, pivot_tol, rhs_tol)
    if not (np.isfinite(mnorm) and np.isfinite(qmax) and np.isfinite(dmax)):
        return 3, 0, 0.0, np.inf
    if qmin >= -e_rhs:
        return 0, 0, 0.0, final_check(M, q, z, w, check_tol)
    neta = 0
    eta_cap = eta_row.shape[0]
    row0, walk, base = _revised_start(M, q, d, Bt, r, B0t, basis, z, w, wrow, qabs, erhs, start, pivot_tol,
                                      ratio_rel_tol, rhs_tol, check_tol, mnorm, qmax, e_rhs)
    z0_row, pivots, status, entering = -1, 0, 0, -1
    if walk:
        _entering_column(Bt, B0t, base, etas, eta_row, neta, d, colptr, colidx, colval, 2 * n, c, aidx, avals,
                         start, M, q, LU, perm, col)
        neta = _record_eta(etas, eta_row, neta, eta_cap, c, row0)
        z0_row, pivots, status, entering = z0_enters(basis, row0)
        _basis_pivot(Bt, r, c, row0, basis, wrow, qabs, erhs)
    since_refactor = 0
    t_check = check_tol * n
    while walk and pivots < max_pivots:
        na = _entering_column(Bt, B0t, base, etas, eta_row, neta, d, colptr, colidx, colval, entering, c, aidx,
                              avals, start, M, q, LU, perm, col)
        if harris:
            _col_noise_all(Bt, wrow, aidx, avals, na, ecol)
        ntied, z0_tied, end = ratio_test(harris, c, r, erhs, ecol, floors, basis, qmax, mnorm, dmax, piv_tol,
                                         pivot_tol * n, harris_tol * n, harris_ratio, ratio_rel_tol, rhs_tol, z0_row,
                                         tied, cand, rows, entering, ray)
        if end >= 0:    # no row bounds the step: a secondary ray (2) or non-finite data (3)
            status = end
            break
        if tie_refactor_due(ntied, z0_tied, since_refactor, n, refactor_every):
            base = _rebuild(M, q, d, Bt, r, basis, LU, perm, col, x, B0t, wrow, qabs, erhs, lu_max)
            if base < 0:
                status = 3
                break
            neta = 0
            since_refactor = 0
            continue
        row = leaving_row(Bt.T, c, tied, ntied, z0_tied, z0_row, lex_rel_tol, lex_abs_tol)
        if harris and r[row] < 0.0:
            r[row] = 0.0
        neta = _record_eta(etas, eta_row, neta, eta_cap, c, row)
        leaving = basis[row]
        basis[row] = entering
        _basis_pivot(Bt, r, c, row, basis, wrow, qabs, erhs)
        pivots += 1
        since_refactor += 1
        if leaving == 2 * n:
            status = 0
            break
        if refactor_every > 0 and pivots % refactor_every == 0:
            base = _rebuild(M, q, d, Bt, r, basis, LU, perm, col, x, B0t, wrow, qabs, erhs, lu_max)
            if base < 0:
                status = 3
                break
            neta = 0
            since_refactor = 0
        if harris and early_exit_csr(r, basis, z, w, check_tol, t_check, mnorm, qmax, dmax, q, rowptr, rowidx,
                                     rowval):
            status = 0
            break
        entering = complement(leaving, n)
    z0 = basic_point(r, basis, z)
    return end_of_path(M, q, z, w, zalt, ray, basis, LU, perm, perm2, col, x, check_tol, status, pivots, z0, lu_max)


@jit
def _rebuild(M, q, d, Bt, r, basis, LU, perm, col, x, B0t, wrow, qabs, erhs, lu_max):
    """``_refactor_revised``, then the entering columns' new base (2: the LU of the rebuild, n ≤ lu_max; 1: B0t, a
    copy of the new B⁻¹) and the rhs noise scales of the new inverse. Returns the base, −1 if the rebuild failed
    (singular B or non-finite values)."""
    if _refactor_revised(M, q, d, Bt, r, basis, LU, perm, col, x, lu_max) != 0:
        return -1
    n = Bt.shape[0]
    base = 2
    if n > lu_max:
        base = 1
        for i in range(n):
            for j in range(n):
                B0t[i, j] = Bt[i, j]
    _rhs_noise_all(Bt, wrow, qabs, erhs)
    return base


REBUILD_LU_MAX = 400
"""Revised Lemke: up to this size a rebuild uses the tableau's own LU and solves (so the two methods agree
bit for bit, rebuilds included); above it, the LAPACK inverse (n scalar solves would cost seconds)."""


def run_revised(M, q, d, max_pivots, opts, refactor, harris, Bt, r, c, LU, perm, perm2, basis, vecs, ibuf,
                fbuf, start):
    """``revised_kernel`` with M's sparse copies (sized for its nonzeros) and the eta file (one column
    per pivot up to the next rebuild: min(max_pivots, rebuild interval or max(50, 2n)) + 1 columns)."""
    n = q.shape[0]
    colptr, colidx, colval, rowptr, rowidx, rowval, etas, eta_row = revised_buffers(
        n, int(np.count_nonzero(M)), int(max_pivots), int(refactor))
    B0t = np.empty((n, n)) if start == 1 or (refactor != 0 and n > REBUILD_LU_MAX) else np.empty((1, 1))
    return revised_kernel(
        M, q, d, max_pivots, opts.pivot_tol, opts.ratio_rel_tol, opts.rhs_tol, opts.lex_rel_tol,
        opts.lex_abs_tol, opts.check_tol, refactor, harris, opts.harris_tol, opts.harris_pivot_ratio,
        Bt, r, c, LU, perm, perm2, basis, vecs, colptr, colidx, colval, rowptr, rowidx, rowval, ibuf, fbuf,
        B0t, etas, eta_row, REBUILD_LU_MAX, start)
