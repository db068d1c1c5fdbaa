"""The pivot rules every Lemke kernel shares (dense tableau, revised, sparse): one home each.

The kernels keep B⁻¹ differently (the tableau's first n columns, the revised kernel's transpose, the sparse
kernel's LU and eta file). The rules read only what all of them have as vectors: the basic values r = B⁻¹q,
the entering column c = B⁻¹a, per-row rounding-noise scales (``erhs`` = (|B⁻¹||q|)_i, ``ecol`` = (|B⁻¹||a|)_i
in the dense kernels, sketched in the sparse one) and rows of B⁻¹ handed over explicitly. Method and
tolerances: the package docstring.

* ``reset_path``, ``path_scales``, ``cold_entry_row``, ``warm_entry_row``, ``warm_basis_passes``, ``z0_enters``:
  the start of a path; ``complement``: the variable that enters next.
* ``ratio_test``: ``textbook_ratio_test`` (``min_ratio_ties``) or ``harris_ratio_test`` (with ``fill_floors``, ``harris_passes``);
  ``leaving_row`` (``lex_less_rows``): the leaving row.
* ``blocked_status`` (``write_ray``), ``basic_point``, ``early_exit_dense`` / ``early_exit_csr`` (``z0_droppable``): a path's end
  (secondary ray, the basic point, the early exit).

numba kernels: the same arithmetic in the same order for every kernel, so a kernel's pivots and path do not
depend on which kernel it shares a rule with.
"""

from __future__ import annotations

import numpy as np

from convexsim._jit import jit
from convexsim.lcp.lemke.checks import both_finite, final_check, final_check_sparse, row_sum_norm


@jit
def reset_path(z, ray, basis, start):
    """z = 0, ray = 0 and, for a cold start (start = 0), the basis of all w (w_i basic in row i)."""
    for i in range(z.shape[0]):
        z[i] = 0.0
        ray[i] = 0.0
        if start == 0:
            basis[i] = i


@jit
def path_scales(M, q, d, pivot_tol, rhs_tol):
    """(‖M‖∞, ‖q‖∞, ‖d‖∞, piv_tol, e_rhs, min_i q_i): the data scales and the tolerances relative to them,
    piv_tol = pivot_tol·n·max(1, ‖M‖∞, ‖d‖∞) (a pivot entry) and e_rhs = rhs_tol·‖q‖∞ (an rhs; q ≥ −e_rhs is
    solved by z = 0)."""
    n = q.shape[0]
    mnorm = row_sum_norm(M)
    dmax = 0.0
    qmax = 0.0
    for i in range(n):
        dmax = max(dmax, abs(d[i]))
        qmax = max(qmax, abs(q[i]))
    qmin = np.inf
    for i in range(n):
        qmin = min(qmin, q[i])
    return mnorm, qmax, dmax, pivot_tol * n * max(1.0, mnorm, dmax), rhs_tol * max(qmax, 1e-300), qmin


@jit
def cold_entry_row(q, d, ratio_rel_tol, e_rhs):
    """The row where z0 enters the initial basis (all w basic): argmin q_i/d_i, ties within ratio_rel_tol
    relative plus 2·e_rhs/d_i going to the largest index (the lexicographic rule on (q_i, e_i)/d_i)."""
    n = q.shape[0]
    best = np.inf
    for i in range(n):
        best = min(best, q[i] / d[i])
    row = 0
    for i in range(n):
        if q[i] / d[i] - best <= ratio_rel_tol * abs(best) + 2.0 * e_rhs / d[i]:
            row = i
    return row


@jit
def warm_entry_row(r, erhs, ratio_rel_tol, rhs_tol):
    """Warm start (d = B·1, so z0's column is −1 in every row): (the row where z0 enters, the smallest basic
    value); the row of the smallest r_i, ties within ratio_rel_tol relative plus 2·rhs_tol·erhs_i going to
    the largest index. No path is walked when that value is ≥ 0."""
    n = r.shape[0]
    best = np.inf
    for i in range(n):
        best = min(best, r[i])
    row = 0
    for i in range(n):
        if r[i] - best <= ratio_rel_tol * abs(best) + 2.0 * rhs_tol * erhs[i]:
            row = i
    return row, best


@jit
def warm_basis_passes(M, q, r, basis, z, w, pivot_tol, mnorm, qmax, check_tol):
    """True if a guessed basis with some negative basic values (r) is a solution already: every value is
    ≥ −10ε·n-sized limits (pivot_tol·n·‖z‖∞ for a z, pivot_tol·n·s_w for a w, as ``solve_from_basis``) and
    its point z passes the final check (z, w written). Lemke's looser check alone let a slightly infeasible
    basis persist step after step."""
    n = r.shape[0]
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
    return tight and final_check(M, q, z, w, check_tol) <= 1.0


@jit
def complement(v, n):
    """The complement of variable v (w_i ↔ z_i: indices i and n + i), which enters when v leaves."""
    return v + n if v < n else v - n


@jit
def z0_enters(basis, row):
    """The path's first pivot: z0 (variable 2n) becomes basic in ``row``. Returns (z0's row, pivots = 1, status = 1
    (walking), the variable entering next: the complement of the one that left)."""
    n = basis.shape[0]
    leaving = basis[row]
    basis[row] = 2 * n
    return row, 1, 1, complement(leaving, n)


@jit
def textbook_ratio_test(c, r, erhs, piv_tol, ratio_rel_tol, rhs_tol, z0_row, tied):
    """The textbook ratio test on the entering column c (rows with c_i > piv_tol): the minimum ratio
    ρ = r_i/c_i and the rows tied with it (``min_ratio_ties``). Returns (number of rows in ``tied``, z0's row
    among them), −1 rows when no row bounds the step (a secondary ray)."""
    n = c.shape[0]
    rho_min = np.inf
    imin = -1
    for i in range(n):
        ci = c[i]
        if ci > piv_tol:
            rho = r[i] / ci
            if rho < rho_min:
                rho_min = rho
                imin = i
    if rho_min == np.inf:
        return -1, False
    return min_ratio_ties(c, r, erhs, imin, rho_min, piv_tol, ratio_rel_tol, rhs_tol, z0_row, tied)


@jit
def min_ratio_ties(c, r, erhs, imin, rho_min, piv_tol, ratio_rel_tol, rhs_tol, z0_row, tied):
    """The rows (c_i > piv_tol) tied with the minimum ratio ρ_min of row imin up to their rounding noise:
    ρ_i − ρ_min ≤ ratio_rel_tol·|ρ_min| + rhs_tol·(erhs_i/c_i + erhs_imin/c_imin). Returns (number of rows in
    ``tied``, z0's row among them). Shared by the dense kernels' and the sparse kernel's textbook tests."""
    n = c.shape[0]
    noise_min = erhs[imin] / c[imin]
    ntied = 0
    z0_tied = False
    for i in range(n):
        ci = c[i]
        if ci > piv_tol:
            rho = r[i] / ci
            if rho - rho_min <= ratio_rel_tol * abs(rho_min) + rhs_tol * (erhs[i] / ci + noise_min):
                tied[ntied] = i
                ntied += 1
                if i == z0_row:
                    z0_tied = True
    return ntied, z0_tied


@jit
def ratio_test(harris, c, r, erhs, ecol, floors, basis, qmax, mnorm, dmax, piv_tol, noise_tol, harris_tol,
               harris_ratio, ratio_rel_tol, rhs_tol, z0_row, tied, cand, rows, entering, ray):
    """The leaving-row candidates of the entering column c: ``harris_ratio_test`` (harris = 1, data floors from
    ``fill_floors`` into floors) or ``textbook_ratio_test``. Returns (rows in ``tied``, z0's row among them, the
    path's end status when no row bounds the step (``blocked_status``: 2 ray, 3 failure), else −1)."""
    if harris:
        fill_floors(basis, qmax, mnorm, dmax, floors)
        ntied, z0_tied = harris_ratio_test(c, r, erhs, ecol, floors, piv_tol, noise_tol, harris_tol, harris_ratio,
                                           z0_row, tied, cand, rows)
        blocked = ntied == 0
    else:
        ntied, z0_tied = textbook_ratio_test(c, r, erhs, piv_tol, ratio_rel_tol, rhs_tol, z0_row, tied)
        blocked = ntied < 0
    return ntied, z0_tied, blocked_status(basis, r, c, entering, ray) if blocked else -1


@jit(inline="always")
def tie_refactor_due(ntied, z0_tied, since_refactor, n, refactor_every):
    """Whether a lexicographic tie decision reads B⁻¹ from a fresh factorization first: a tie of several rows
    without z0's, at least max(8, n) pivots since the last factorization (a rebuild costs about 1.2·n pivots: at
    most about doubles the work), factorizations not switched off (``refactor_every`` ≠ 0). A tableau carrying
    the rounding noise of many pivots decides ties wrongly (Fathi's SPD family needs this)."""
    return ntied > 1 and not z0_tied and since_refactor >= max(8, n) and refactor_every != 0


@jit
def fill_floors(basis, qmax, mnorm, dmax, floors):
    """The Harris data floor of each row's basic variable (:func:`data_floor`)."""
    n = basis.shape[0]
    for i in range(n):
        floors[i] = data_floor(basis[i], n, qmax, mnorm, dmax)


@jit(inline="always")
def data_floor(b, n, qmax, mnorm, dmax):
    """The Harris data floor of basic variable b (the scale of its value): ‖q‖∞ for a w, ‖q‖∞/‖M‖∞ for a z,
    ‖q‖∞/‖d‖∞ for z0."""
    return qmax if b < n else (qmax / max(mnorm, 1e-300) if b < 2 * n else qmax / dmax)


@jit(inline="always")
def harris_first_pass_row(i, ci, r, erhs_i, ecol_i, floor_i, noise_tol, tol, theta, cand, rows, m):
    """Pass 1 of the Harris ratio test for row i with c_i > piv_tol: its candidate flag (c_i above its noise level
    noise_tol·ecol_i), θ lowered to (max(r_i, 0) + δ_i)/c_i with δ_i = tol·max(erhs_i, floor_i), i appended to
    ``rows[m]``. Returns (θ, m + 1)."""
    cand[i] = 1.0 if ci > noise_tol * ecol_i else 0.0
    delta = tol * max(erhs_i, floor_i)
    theta = min(theta, (max(r[i], 0.0) + delta) / ci)
    rows[m] = i
    return theta, m + 1


@jit
def harris_ratio_test(c, r, erhs, ecol, floors, piv_tol, noise_tol, tol, pivot_ratio, z0_row, tied, cand, rows):
    """Harris two-pass ratio test on the entering column c, basic values r.

    Rows with c_i > piv_tol take part. Pass 1: θ = min_i (max(r_i, 0) + δ_i)/c_i, the longest step that lowers no
    basic variable more than δ_i below max(r_i, 0), with δ_i = tol·max(erhs_i, floors_i) (the row's rounding
    noise, the data scale of its basic variable, ``fill_floors``). Pivot candidates: c_i > noise_tol·ecol_i, since
    an entry at its own rounding-noise level may have either sign (``cand``: 1 candidate, 0 noise level, −1 not
    taking part). Passes 2–4: ``harris_passes``. Returns (number of rows in ``tied``, z0's row eligible); no
    row: a secondary ray. ``rows`` (int, n): scratch."""
    n = c.shape[0]
    theta = np.inf
    m = 0
    for i in range(n):
        ci = c[i]
        if ci > piv_tol:
            theta, m = harris_first_pass_row(i, ci, r, erhs[i], ecol[i], floors[i], noise_tol, tol, theta, cand, rows,
                                             m)
        else:
            cand[i] = -1.0
    return harris_passes(rows, m, c, r, cand, theta, pivot_ratio, z0_row, tied)


@jit
def harris_passes(rows, m, c, r, cand, theta, pivot_ratio, z0_row, tied):
    """Passes 2–4 of the Harris ratio test over the candidate rows ``rows[:m]`` (increasing; c_i > piv_tol, cand_i
    = 1 above the column's noise level, 0 below) with the pass-1 bound θ: the eligible rows (ratio max(r_i, 0)/c_i ≤
    θ, negative values being noise of a feasible basis; when none is above the noise level, those below it become
    eligible), the largest eligible pivot c_max, and the tied rows with c_i ≥ pivot_ratio·c_max (a tiny pivot never
    wins on a noise-sized ratio). Returns (number of tied rows in ``tied``, whether z0's row is eligible: then it
    leaves)."""
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
def lex_less_rows(ra, ca, rb, cb, rel, abs_tol):
    """True if the row ra/ca of B⁻¹ (ca: its entering-column entry) is lexicographically smaller than rb/cb.

    Entries count as equal within ``rel`` relative plus ``abs_tol``·max(‖ra/ca‖∞, ‖rb/cb‖∞) (the rounding-noise
    level of the pair); if all are equal in that sense (nearly parallel rows: a nearly singular basis, e.g.
    redundant contacts), the raw values decide rather than the first row, which lets the path cycle.
    """
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
def leaving_row(Binv, c, tied, ntied, z0_tied, z0_row, rel, abs_tol):
    """The row that leaves among the ``ntied`` candidates of a ratio test: z0's when tied, else the
    lexicographically smallest row of B⁻¹ (rows Binv[i], scaled by c_i; ``lex_less_rows``), the first on equality."""
    if z0_tied:
        return z0_row
    row = tied[0]
    for k in range(1, ntied):
        i = tied[k]
        if lex_less_rows(Binv[i], c[i], Binv[row], c[row], rel, abs_tol):
            row = i
    return row


@jit
def write_ray(basis, c, entering, ray):
    """The secondary ray of an entering column c that no row bounds: the entering z grows by 1, every basic z
    by −c_i (ray entries of the other z's untouched)."""
    n = basis.shape[0]
    if n <= entering < 2 * n:
        ray[entering - n] = 1.0
    for i in range(n):
        v = basis[i]
        if n <= v < 2 * n:
            ray[v - n] = -c[i]


@jit
def blocked_status(basis, r, c, entering, ray):
    """The end of a path whose entering column no row bounds: a secondary ray (2, ``write_ray``) only if r and c
    are finite (a NaN entry fails every comparison of the ratio test and would fake a ray), else 3."""
    if not both_finite(r, c):
        return 3
    write_ray(basis, c, entering, ray)
    return 2


@jit
def basic_point(r, basis, z):
    """z = the basic z's values r_i (nonbasic 0); returns z0 (0 when nonbasic)."""
    n = r.shape[0]
    z0 = 0.0
    for i in range(n):
        z[i] = 0.0
    for i in range(n):
        b = basis[i]
        if b >= n and b < 2 * n:
            z[b - n] = r[i]
        elif b == 2 * n:
            z0 = r[i]
    return z0


@jit
def z0_droppable(r, basis, z, t_check, mnorm, qmax, dmax):
    """True if z0 is small enough to be dropped, d·z0 ≤ t·s_w (the final check's w tolerance, O(n)); then z holds
    the basic point without z0, for the early exit's final check (on degenerate contact data the path passes
    through solutions long before z0 leaves; that check costs one product Mz, about a quarter of a pivot)."""
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
    basic_point(r, basis, z)
    return True


@jit
def early_exit_dense(M, q, r, basis, z, w, check_tol, t_check, mnorm, qmax, dmax):
    """True if the basic point with z0 dropped (``z0_droppable``) passes the final check (``final_check``)."""
    return z0_droppable(r, basis, z, t_check, mnorm, qmax, dmax) and final_check(M, q, z, w, check_tol) <= 1.0


@jit
def early_exit_csr(r, basis, z, w, check_tol, t_check, mnorm, qmax, dmax, q, rowptr, rowidx, rowval):
    """``early_exit_dense`` with the check through M's CSR copy (``final_check_sparse``, the same value)."""
    return (z0_droppable(r, basis, z, t_check, mnorm, qmax, dmax)
            and final_check_sparse(rowptr, rowidx, rowval, mnorm, q, z, w, check_tol) <= 1.0)
