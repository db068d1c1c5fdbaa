"""Revised Lemke (``LemkeOptions.method="revised"``): B⁻¹ and B⁻¹q only, entering columns computed on demand
as B⁻¹a through M's sparse copies, B⁻¹ updated on the pivot row's nonzero columns, rebuilds by LU (up to
``REBUILD_LU_MAX``) or the LAPACK inverse. Same path and rules as the tableau kernel (``tableau.py``), whose
pieces it shares; they differ in rounding only (docs/lcp.md §1, "Revised Lemke")."""

from __future__ import annotations

import numpy as np

from convexsim._jit import jit
from convexsim.lcp.lemke.checks import both_finite, final_check, final_check_sparse, row_sum_norm
from convexsim.lcp.lemke.tableau import final_resolve, lu_factor, lu_solve, original_column


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
    """erhs = 1e-300 + |B⁻¹||q| for every row: ``rhs_noise``'s sums, in the same order, skipping zero terms (a
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
    """ecol = 1e-300 + |B⁻¹||a| for every row (a's nonzeros aidx, aval): ``col_noise``'s sums, same order."""
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
def harris_tied_revised(c, r, erhs, ecol, n, piv_tol, noise_tol, tol, pivot_ratio, z0_row, tied, cand, floors):
    """``harris_tied`` on the revised data: entering column c, rhs r, noise scales erhs, ecol
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
    rebuild (``lu_factor`` of B kept in Bmat/perm, ``lu_solve`` per column: the same values as the
    tableau); larger n: the LAPACK inverse (O(n³) at BLAS speed instead of n scalar solves). Basic w's
    columns of B⁻¹ are then set to exact unit vectors (as the tableau rebuild does). Returns 0, or 1
    (singular B or non-finite values)."""
    n = M.shape[0]
    for k in range(n):
        original_column(M, q, d, basis[k], col)
        for i in range(n):
            Bmat[i, k] = col[i]
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


@jit
def early_exit_revised(r, basis, z, w, check_tol, t_check, mnorm, qmax, dmax, q, rowptr, rowidx, rowval):
    """``early_exit`` on the revised data (basic values r; the check through M's CSR copy)."""
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
    return final_check_sparse(rowptr, rowidx, rowval, mnorm, q, z, w, check_tol) <= 1.0


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
    sparse_pattern(M, colptr, colidx, colval, rowptr, rowidx, rowval)
    for j in range(n):
        qabs[j] = abs(q[j])
    mnorm = row_sum_norm(M)
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
        res = final_check(M, q, z, w, check_tol)
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
            walk = not (tight and final_check(M, q, z, w, check_tol) <= 1.0)
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
            ntied, z0_tied = harris_tied_revised(c, r, erhs, ecol, n, piv_tol, pivot_tol * n, harris_tol * n,
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
        if harris and early_exit_revised(r, basis, z, w, check_tol, t_check, mnorm, qmax, dmax, q, rowptr,
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
        if final_check(M, q, z, w, check_tol) <= 1.0:
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
    return final_resolve(M, q, z, w, zalt, basis, LU, perm, perm2, col, x, check_tol, pivots, z0, lu_max)


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
