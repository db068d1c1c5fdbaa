"""The dense tableau kernel (``LemkeOptions.method="tableau"``): T = B⁻¹[I | −M | −d | q] updated by every
pivot, and the pieces the revised kernel shares with it: the LU of the basis, original columns, the end of a
path and the final re-solve. The pivot rules (ratio tests, lexicographic ties, early exit) are
``pivot_rules``'s; this kernel hands them its entering column and rhs as vectors (method: the package
docstring).

numba kernels: they never raise; they return status codes (``LemkeStatus`` values)."""

from __future__ import annotations

import numpy as np

from convexsim._jit import jit
from convexsim.lcp.lemke.checks import final_check
from convexsim.lcp.lemke.pivot_rules import (basic_point, cold_entry_row, complement, early_exit_dense,
                                             leaving_row, path_scales, ratio_test, reset_path, tie_refactor_due,
                                             warm_basis_passes, warm_entry_row, z0_enters)


@jit
def lu_factor(A, perm, rel_tol):
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
def lu_solve(LU, perm, b, x):
    """Solve (P⁻¹LU) x = b given lu_factor's output; x and b distinct, shape (n,)."""
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
def original_column(M, q, d, var, out):
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
def basis_matrix(M, q, d, basis, B, col):
    """B = the basis matrix: column k the original column of basis[k], the variable basic in row k."""
    n = M.shape[0]
    for k in range(n):
        original_column(M, q, d, basis[k], col)
        for i in range(n):
            B[i, k] = col[i]


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
    basis_matrix(M, q, d, basis, LU, col)
    if lu_factor(LU, perm, 1e-300) != 0:
        return 1
    # B x = e_k  with B columns ordered by tableau row: row k of T belongs to basis[k].
    for var in range(2 * n + 2):
        original_column(M, q, d, var, col)
        lu_solve(LU, perm, col, x)
        for i in range(n):
            T[i, var] = x[i]
    for k in range(n):
        for i in range(n):
            T[i, basis[k]] = 0.0
        T[k, basis[k]] = 1.0
    return 0


@jit
def row_noise(T, i, v):
    """Rounding-noise scale of row i of B⁻¹v, B⁻¹ = T[:, :n]: (|B⁻¹||v|)_i plus a 1e-300 floor."""
    s = 1e-300
    for j in range(v.shape[0]):
        s += abs(T[i, j]) * abs(v[j])
    return s


@jit
def noise_scales(T, c, q, col0, with_col, piv_tol, erhs, ecol):
    """The noise scales the ratio tests read, for the rows with c_i > piv_tol only: erhs_i = (|B⁻¹||q|)_i and,
    with_col, ecol_i = (|B⁻¹||a|)_i, a = col0 the entering variable's original column (``row_noise``)."""
    for i in range(c.shape[0]):
        if c[i] > piv_tol:
            erhs[i] = row_noise(T, i, q)
            if with_col:
                ecol[i] = row_noise(T, i, col0)


@jit
def column_into(T, j, out):
    """out = T[:, j] (the entering column or the rhs as a contiguous vector for the pivot rules)."""
    for i in range(out.shape[0]):
        out[i] = T[i, j]


@jit(inline="always")
def _tableau_start(M, q, d, T, basis, z, w, r, erhs, start, pivot_tol, ratio_rel_tol, rhs_tol, check_tol, mnorm,
                   qmax, e_rhs):
    """The path's first row: cold (start 0), the tableau [I | −M | −d | q] written into T and the row of
    ``cold_entry_row``; warm (start 1), T already holds B⁻¹[I | −M | −d | q] and the row is the smallest rhs
    (``warm_entry_row``), r and erhs are filled. Returns (row, walk): walk False when the warm basis needs no
    path (every rhs ≥ 0 or the basis already passes the final check)."""
    n = M.shape[0]
    if start == 0:
        for i in range(n):
            for j in range(n):
                T[i, j] = 0.0
                T[i, n + j] = -M[i, j]
            T[i, i] = 1.0
            T[i, 2 * n] = -d[i]
            T[i, 2 * n + 1] = q[i]
        return cold_entry_row(q, d, ratio_rel_tol, e_rhs), True
    column_into(T, 2 * n + 1, r)
    for i in range(n):
        erhs[i] = row_noise(T, i, q)
    row, best = warm_entry_row(r, erhs, ratio_rel_tol, rhs_tol)
    return row, best < 0.0 and not warm_basis_passes(M, q, r, basis, z, w, pivot_tol, mnorm, qmax, check_tol)


@jit
def tableau_kernel(M, q, d, max_pivots, pivot_tol, ratio_rel_tol, rhs_tol, lex_rel_tol, lex_abs_tol,
                   check_tol, refactor_every, harris, harris_tol, harris_ratio, T, LU, perm, perm2, basis,
                   vecs, start=0):
    """Run Lemke. Fills vecs[0] = z, vecs[1] = w, vecs[4] = ray. Returns (status, pivots, z0, residual).

    harris = 1: Harris two-pass ratio test with early exit (``pivot_rules``); 0: textbook.
    start = 1: warm start (``lemke_from_basis``): T and basis already hold the tableau B⁻¹[I | −M | −d | q]
    of a complementary basis B with d = B·1 (so z0's column is −1); z0 enters in the row of the smallest
    rhs, and no path is walked if every rhs is ≥ 0 (the basis then goes straight to the final check).

    vecs rows: 0 z, 1 w, 2 scratch (column), 3 scratch (solution), 4 ray, 5 alternate z (Harris flags
    during the path).
    """
    n = M.shape[0]
    tied = perm2
    z, w, col, x, ray, zalt = vecs[0], vecs[1], vecs[2], vecs[3], vecs[4], vecs[5]
    # Harris candidate flags and data floors during the path: zalt is only used after it, x only by rebuilds,
    # which refill it
    cand, floors = zalt, x
    work = np.empty((4, n))   # the entering column, the rhs and their noise scales as vectors (pivot rules)
    c = work[0]
    r = work[1]
    erhs = work[2]
    ecol = work[3]
    rows = np.empty(n, np.int64)
    reset_path(z, ray, basis, start)
    mnorm, qmax, dmax, piv_tol, e_rhs, qmin = path_scales(M, q, d, pivot_tol, rhs_tol)
    if not (np.isfinite(mnorm) and np.isfinite(qmax) and np.isfinite(dmax)):
        return 3, 0, 0.0, np.inf
    if qmin >= -e_rhs:
        return 0, 0, 0.0, final_check(M, q, z, w, check_tol)
    rhs = 2 * n + 1
    row, walk = _tableau_start(M, q, d, T, basis, z, w, r, erhs, start, pivot_tol, ratio_rel_tol, rhs_tol, check_tol,
                               mnorm, qmax, e_rhs)
    z0_row, pivots, status, entering = -1, 0, 0, -1
    if walk:
        _pivot(T, row, 2 * n)
        z0_row, pivots, status, entering = z0_enters(basis, row)
    since_refactor = 0
    t_check = check_tol * n
    while walk and pivots < max_pivots:
        column_into(T, entering, c)
        column_into(T, rhs, r)
        if harris:
            original_column(M, q, d, entering, col)
        noise_scales(T, c, q, col, harris, piv_tol, erhs, ecol)
        ntied, z0_tied, end = ratio_test(harris, c, r, erhs, ecol, floors, basis, qmax, mnorm, dmax, piv_tol,
                                         pivot_tol * n, harris_tol * n, harris_ratio, ratio_rel_tol, rhs_tol, z0_row,
                                         tied, cand, rows, entering, ray)
        if end >= 0:    # no row bounds the step: a secondary ray (2) or non-finite data (3)
            status = end
            break
        if tie_refactor_due(ntied, z0_tied, since_refactor, n, refactor_every):
            if _refactor(M, q, d, T, basis, LU, perm, col, x) != 0:
                status = 3
                break
            since_refactor = 0
            continue
        row = leaving_row(T[:, :n], c, tied, ntied, z0_tied, z0_row, lex_rel_tol, lex_abs_tol)
        if harris and r[row] < 0.0:
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
        if harris:
            column_into(T, rhs, r)
            if early_exit_dense(M, q, r, basis, z, w, check_tol, t_check, mnorm, qmax, dmax):
                status = 0
                break
        entering = complement(leaving, n)
    column_into(T, rhs, r)
    z0 = basic_point(r, basis, z)
    return end_of_path(M, q, z, w, zalt, ray, basis, LU, perm, perm2, col, x, check_tol, status, pivots, z0,
                       1 << 62)


@jit
def end_of_path(M, q, z, w, zalt, ray, basis, LU, perm, perm2, col, x, check_tol, status, pivots, z0, lu_max):
    """The end of a path in both dense kernels, z holding the basic point (``basic_point``). A path that stopped
    with z0 > 0 (pivot limit, ray) is still solved if its point without z0 passes the final check (z0 at round-off
    level: degenerate data such as resting contacts); another failure returns its status with w = Mz + q; a
    solved path ends in ``final_resolve``. Returns (status, pivots, z0, residual)."""
    n = M.shape[0]
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


@jit
def final_resolve(M, q, z, w, zalt, basis, LU, perm, perm2, col, x, check_tol, pivots, z0, lu_max):
    """The end of a solved run (both kernels): re-solve M_αα z_α = −q_α on the final basis (α the basic z's),
    keep the better of the two candidates, check, clip tiny negatives of z. Returns (status, pivots, z0, res).
    The subsystem is solved by ``lu_factor`` up to lu_max unknowns, by LAPACK above."""
    n = M.shape[0]
    # re-solve M_aa z_a = -q_a on the final basis; keep the better candidate
    k = 0
    for i in range(n):
        b = basis[i]
        if b >= n and b < 2 * n:
            perm[k] = b - n
            k += 1
    res_tab = final_check(M, q, z, w, check_tol)
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
            ok = lu_factor(sub, perm2[:k], 1e-300) == 0
            if ok:
                lu_solve(sub, perm2[:k], col[:k], x[:k])
        if ok:
            for a in range(k):
                zalt[idx[a]] = x[a]
            res_alt = final_check(M, q, zalt, w, check_tol)
            if res_alt < res_tab:
                for i in range(n):
                    z[i] = zalt[i]
                res_tab = res_alt
    res = final_check(M, q, z, w, check_tol)
    if not (res <= 1.0):
        return 3, pivots, z0, res
    # within tolerance: clip tiny negatives of z to exact zeros and recompute w
    for i in range(n):
        if z[i] < 0.0:
            z[i] = 0.0
    res = final_check(M, q, z, w, check_tol)
    if not (res <= 1.0):
        return 3, pivots, z0, res
    return 0, pivots, z0, res
