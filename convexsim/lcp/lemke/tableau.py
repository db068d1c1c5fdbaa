"""The dense tableau kernel (``LemkeOptions.method="tableau"``): T = B⁻¹[I | −M | −d | q] updated by every
pivot, and the pieces the revised kernel shares with it: the LU of the basis, original columns, rounding-noise
scales, the Harris ratio test, the early exit and the final re-solve (method: the package docstring).

numba kernels: they never raise; they return status codes (``LemkeStatus`` values)."""

from __future__ import annotations

import numpy as np

from convexsim._jit import jit
from convexsim.lcp.lemke.checks import final_check, row_sum_norm


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
        original_column(M, q, d, basis[k], col)
        for i in range(n):
            LU[i, k] = col[i]
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
def rhs_noise(T, i, q, n):
    """Rounding-noise scale of row i's rhs: (|B⁻¹||q|)_i, with B⁻¹ = T[:, :n] (plus a 1e-300 floor)."""
    s = 1e-300
    for j in range(n):
        s += abs(T[i, j]) * abs(q[j])
    return s


@jit
def col_noise(T, i, col0, n):
    """Rounding-noise scale of the entering column's entry in row i: (|B⁻¹||a|)_i, a its original column."""
    s = 1e-300
    for j in range(n):
        s += abs(T[i, j]) * abs(col0[j])
    return s


@jit
def harris_tied(T, entering, q, n, piv_tol, noise_tol, tol, pivot_ratio, z0_row, tied, col0, cand, floors):
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
            cand[i] = 1.0 if c > noise_tol * col_noise(T, i, col0, n) else 0.0
            delta = tol * max(rhs_noise(T, i, q, n), floors[i])
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
def early_exit(M, q, d, T, basis, z, w, check_tol, t_check, mnorm, qmax, dmax):
    """True if the current basic point with z0 dropped passes the final check (``final_check``).

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
    return final_check(M, q, z, w, check_tol) <= 1.0


@jit
def tableau_kernel(M, q, d, max_pivots, pivot_tol, ratio_rel_tol, rhs_tol, lex_rel_tol, lex_abs_tol,
                   check_tol, refactor_every, harris, harris_tol, harris_ratio, T, LU, perm, perm2, basis,
                   vecs, start=0):
    """Run Lemke. Fills vecs[0] = z, vecs[1] = w, vecs[4] = ray. Returns (status, pivots, z0, residual).

    harris = 1: Harris two-pass ratio test with early exit (``harris_tied``, ``early_exit``); 0: textbook.
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
    # trivial case
    qmin = np.inf
    for i in range(n):
        qmin = min(qmin, q[i])
    if qmin >= -e_rhs:
        res = final_check(M, q, z, w, check_tol)
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
            if T[i, rhs] - best <= ratio_rel_tol * abs(best) + 2.0 * rhs_tol * rhs_noise(T, i, q, n):
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
            walk = not (tight and final_check(M, q, z, w, check_tol) <= 1.0)
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
            original_column(M, q, d, entering, col)
            for i in range(n):
                b = basis[i]
                floors[i] = qmax if b < n else (qmax / max(mnorm, 1e-300) if b < 2 * n else qmax / dmax)
            ntied, z0_tied = harris_tied(T, entering, q, n, piv_tol, pivot_tol * n, harris_tol * n,
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
            noise_min = rhs_noise(T, imin, q, n) / cmin
            for i in range(n):
                c = T[i, entering]
                if c > piv_tol:
                    rho = T[i, rhs] / c
                    if rho - rho_min <= ratio_rel_tol * abs(rho_min) + rhs_tol * (rhs_noise(T, i, q, n) / c
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
        if harris and early_exit(M, q, d, T, basis, z, w, check_tol, t_check, mnorm, qmax, dmax):
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
    return final_resolve(M, q, z, w, zalt, basis, LU, perm, perm2, col, x, check_tol, pivots, z0, 1 << 62)


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
