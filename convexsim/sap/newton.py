"""The SAP Newton loop, compiled: the one Newton loop of every SAP step (free bodies, trees, mixed scenes).

:func:`newton_solve` minimizes the SAP cost ℓ(v) = ½ (v − v*)ᵀ A (v − v*) + Σ_i ℓ_i(J_i v) over the participating
cliques of one step, with the stopping rules, slip curvature and line searches of ``sap.solver`` (its numpy
reference: ``sap.solve`` for block problems, ``sap.solver.solve_rows`` for one dense clique with joint rows):
the Hessian A + Jᵀ G J assembled by ``blocks.assemble_hessian_blocks`` and factored by a dense Cholesky per
island (connected component of the clique graph: :func:`clique_graph`, :func:`islands`) or, for large islands,
by the supernodal Cholesky of ``sap.supernodal`` on an analysis made in Python (:data:`SN_FIELDS`).
A constraint is a contact (kinds 0–2) or a scalar joint row (kinds ≥ ``constraints.KIND_ROW_MIN``).

The step's settings come in two flat arrays (``fpar`` floats, ``ipar`` ints) whose slots are the F_* / I_*
constants below: every SapParameters field has one, so a new setting is one new slot.
"""

from __future__ import annotations

import math

import numpy as np

from convexsim._jit import jit
from convexsim.sap import blocks, supernodal
from convexsim.sap.constraints import cost_along_ray, eval_constraints, relinearize_predicted_stiction
from convexsim.sap.linesearch import LS_OK, backtracking_line_search, exact_line_search

# ---- slots of fpar (floats)
F_DT = 0
F_GNORM = 1
F_SIGMA = 2
F_BETA = 3
F_VS = 4
F_REL_TOL = 5
F_ABS_TOL = 6
F_COST_ABS_TOL = 7
F_COST_REL_TOL = 8
F_EXACT_ALPHA_MAX = 9
F_ARMIJO = 10
F_RHO = 11
F_RELATIVE_SLOP = 12
F_MARGIN_FLOOR = 13
F_SLIP_CURVATURE = 14       # κ of SapParameters.slip_curvature (0: exact Hessian blocks)
F_SLIP_CURVATURE_RESIDUAL = 15  # ε_κ: exact blocks once r ≤ ε_κ·s
NFPAR = 16
# ---- slots of ipar (ints)
I_CONTACT_KIND = 0
I_MAX_ITERATIONS = 1
I_LINE_SEARCH = 2          # 0 exact, 1 backtracking
I_EXACT_MAX_ITERATIONS = 3
I_BACKTRACKING_MAX_ITERATIONS = 4
I_ISLAND_MAX_DOFS = 5
I_STRICT = 6
I_STICTION_PREDICTION = 7  # 1: SapParameters.stiction_prediction (a second direction after a damped step)
NIPAR = 8

# SapStatus values (convexsim.sap.types)
SAP_CONVERGED = 0
_MAX_ITERATIONS = 1
_LINE_SEARCH_FAILED = 2
_FACTORIZATION_FAILED = 3
_NUMERICAL_FAILURE = 4
SAP_STATUS_NAMES = ("converged", "max_iterations", "line_search_failed", "factorization_failed",
                    "numerical_failure")


@jit
def _dot(a, b):
    """aᵀb of two contiguous vectors through BLAS, like numpy's ``np.dot``."""
    return np.dot(a, b)


@jit
def clique_graph(cliques):
    """Edges (ne, 2) of coupled clique pairs (a < b, sorted unique) and the edge of each constraint."""
    nk = cliques.shape[0]
    big = 1
    m = 0
    for i in range(nk):
        big = max(big, cliques[i, 0] + 1, cliques[i, 1] + 1)
        if cliques[i, 1] >= 0:
            m += 1
    if m == 0:                          # no constraint couples two cliques (e.g. contacts with the ground only)
        return np.empty((0, 2), np.int64), -np.ones(nk, np.int64)
    keys = np.empty(m, np.int64)
    m = 0
    for i in range(nk):
        if cliques[i, 1] >= 0:
            a = min(cliques[i, 0], cliques[i, 1])
            b = max(cliques[i, 0], cliques[i, 1])
            keys[m] = a * big + b
            m += 1
    uniq = np.unique(keys[:m])
    edges = np.empty((uniq.shape[0], 2), np.int64)
    for e in range(uniq.shape[0]):
        edges[e, 0] = uniq[e] // big
        edges[e, 1] = uniq[e] % big
    constraint_edge = -np.ones(nk, np.int64)
    for i in range(nk):
        if cliques[i, 1] >= 0:
            a = min(cliques[i, 0], cliques[i, 1])
            b = max(cliques[i, 0], cliques[i, 1])
            constraint_edge[i] = np.searchsorted(uniq, a * big + b)
    return edges, constraint_edge


@jit
def islands_into(ncl, edges, parent, island):
    """Connected components of the clique graph into ``island`` (ncl,): the island of each clique, numbered in the
    order of their lowest clique; ``parent`` (>= ncl,) is work. Returns the number of islands."""
    for c in range(ncl):
        parent[c] = c
    for e in range(edges.shape[0]):
        a = edges[e, 0]
        b = edges[e, 1]
        while parent[a] != a:
            a = parent[a]
        while parent[b] != b:
            b = parent[b]
        if a != b:
            if a < b:
                parent[b] = a
            else:
                parent[a] = b
    for c in range(ncl):
        island[c] = -1
    count = 0
    for c in range(ncl):
        r = c
        while parent[r] != r:
            r = parent[r]
        if island[r] < 0:
            island[r] = count
            count += 1
        island[c] = island[r]
    return count


@jit
def islands(ncl, edges):
    """Connected components of the clique graph: (island of each clique, number of islands); islands are
    numbered in the order of their lowest clique (:func:`islands_into`)."""
    island = np.empty(ncl, np.int64)
    count = islands_into(ncl, edges, np.empty(ncl, np.int64), island)
    return island, count


SN_FIELDS = ("sn_col", "sn_rowptr", "sn_rows", "sn_valptr", "upd_ptr", "upd_target", "upd_first",
             "upd_relptr", "upd_rel", "diag_dst", "diag_stride", "edge_dst", "edge_stride", "edge_transposed",
             "scalar_perm")
"""The fields of a ``sap.supernodal.SupernodalSymbolic`` that :func:`newton_solve` takes (in this order,
one tuple of int64 arrays)."""
SN_VALPTR = 3


@jit
def _supernodal_solve(sizes, edges, diag_ptr, edge_ptr, diag_values, edge_values, sn, values, grad, x, dv):
    """dv = −H⁻¹ grad with H's blocks scattered into the panels of the analysis ``sn`` and factored by
    ``sap.supernodal`` (the kernels and operation order of ``supernodal.factor`` / ``supernodal.solve``).
    Returns False if H is not numerically SPD or dv is not finite."""
    supernodal._scatter_h(sizes, edges, diag_ptr, edge_ptr, diag_values, edge_values, sn[9], sn[10], sn[11],
                          sn[12], sn[13], values)
    bad = supernodal._factor_kernel(sn[0], sn[1], sn[3], sn[4], sn[5], sn[6], sn[7], sn[8], values, False)
    if bad >= 0:
        return False
    perm = sn[14]
    n = perm.shape[0]
    for p in range(n):
        x[p, 0] = -grad[perm[p]]
    supernodal._solve_kernel(sn[0], sn[1], sn[2], sn[3], values, x)
    for p in range(n):
        dv[perm[p]] = x[p, 0]
    return True


@jit
def _pattern_edges(cliques, ncl, sn_edges):
    """The edge of every constraint in the (superset) pattern ``sn_edges`` (sorted unique pairs a < b),
    -1 for a one-clique constraint; -2 if some pair is missing from the pattern."""
    nk = cliques.shape[0]
    ne = sn_edges.shape[0]
    keys = np.empty(ne, np.int64)
    for e in range(ne):
        keys[e] = sn_edges[e, 0] * ncl + sn_edges[e, 1]
    out = -np.ones(nk, np.int64)
    for i in range(nk):
        if cliques[i, 1] >= 0:
            a = min(cliques[i, 0], cliques[i, 1])
            b = max(cliques[i, 0], cliques[i, 1])
            key = a * ncl + b
            e = np.searchsorted(keys, key)
            if e >= ne or keys[e] != key:
                out[0] = -2
                return out
            out[i] = e
    return out


@jit(inline="always")
def _scaling_diagonal(clique_start, clique_sizes, A_ptr, A_values, D):
    """D = diag(A)^(-1/2) (nv,), in place: the scaling of the momentum residual r = ‖D ∇ℓ‖ and of its scale s."""
    for c in range(clique_sizes.shape[0]):
        n = clique_sizes[c]
        for k in range(n):
            D[clique_start[c] + k] = 1.0 / math.sqrt(A_values[A_ptr[c] + k * (n + 1)])


@jit(inline="always")
def _island_layout(clique_sizes, island, nisl, iw):
    """Where each clique's dofs sit in its island's dense matrix: (dofs per island, offset of each clique in
    its island, island → cliques as CSR (``isl_ptr``, ``isl_cliques``, cliques in increasing order), the
    largest island's dofs), as views of the int64 work array ``iw`` (>= 3 nisl + 2 ncl + 1)."""
    ncl = clique_sizes.shape[0]
    isl_size = iw[:nisl]
    pos_in_island = iw[nisl:nisl + ncl]
    isl_ptr = iw[nisl + ncl:2 * nisl + ncl + 1]
    fill = iw[2 * nisl + ncl + 1:3 * nisl + ncl + 1]
    isl_cliques = iw[3 * nisl + ncl + 1:3 * nisl + 2 * ncl + 1]
    isl_size[:] = 0
    for c in range(ncl):
        pos_in_island[c] = isl_size[island[c]]
        isl_size[island[c]] += clique_sizes[c]
    max_n = 0
    for i in range(nisl):
        max_n = max(max_n, isl_size[i])
    isl_ptr[:] = 0
    for c in range(ncl):
        isl_ptr[island[c] + 1] += 1
    for i in range(nisl):
        isl_ptr[i + 1] += isl_ptr[i]
    fill[:] = isl_ptr[:-1]
    for c in range(ncl):
        isl_cliques[fill[island[c]]] = c
        fill[island[c]] += 1
    return isl_size, pos_in_island, isl_ptr, isl_cliques, max_n


@jit(inline="always")
def _hessian_offsets(clique_sizes, edges, diag_ptr, edge_ptr):
    """Offsets of H's blocks in their value arrays, in place: diag_ptr (ncl,) of the row-major n_c × n_c diagonal
    blocks, edge_ptr (ne,) of the n_b × n_a edge blocks, as ``blocks.assemble_hessian_blocks`` writes them.
    Returns the two arrays' lengths."""
    total = 0
    for c in range(clique_sizes.shape[0]):
        diag_ptr[c] = total
        total += clique_sizes[c] * clique_sizes[c]
    etotal = 0
    for e in range(edges.shape[0]):
        edge_ptr[e] = etotal
        etotal += clique_sizes[edges[e, 0]] * clique_sizes[edges[e, 1]]
    return total, etotal


@jit(inline="always")
def _padded(n):
    """n rounded up to a multiple of 8: the work arrays carved from one buffer start on 64-byte boundaries, as
    separate allocations would (the BLAS dot products see the same alignment)."""
    return (n + 7) // 8 * 8


@jit(inline="always")
def _residual_norms(D, grad, Av, jc, tmp):
    """(r, s): the scaled momentum residual r = ‖D ∇ℓ‖ and its scale s = max(‖D A v‖, ‖D Jᵀγ‖)."""
    nv = D.shape[0]
    for k in range(nv):
        tmp[k] = D[k] * grad[k]
    r = math.sqrt(_dot(tmp, tmp))
    for k in range(nv):
        tmp[k] = D[k] * Av[k]
    s1 = math.sqrt(_dot(tmp, tmp))
    for k in range(nv):
        tmp[k] = D[k] * jc[k]
    s2 = math.sqrt(_dot(tmp, tmp))
    return r, max(s1, s2)


@jit(inline="always")
def _cost_and_gradient(clique_start, clique_sizes, A_ptr, A_values, cliques, J_ptr, J_values, kind, cpar, kappa,
                       v, v_star, p_star, vc, gamma, G, Av, jc, Avp, grad, vmv):
    """The cost at v: constraint velocities vc = J v, impulses γ and their curvature blocks G (slip curvature
    κ = ``kappa``), A v, Jᵀγ, A v − p* (``Avp``), ∇ℓ = A v − p* − Jᵀγ and v − v*, all in place.
    Returns (ℓ, ℓ_A) with ℓ_A = ½ (v − v*)ᵀ A (v − v*)."""
    blocks.constraint_velocities(clique_start, clique_sizes, cliques, J_ptr, J_values, v, vc)
    ell_r = eval_constraints(kind, cpar, vc, gamma, G, True, kappa)
    blocks.block_diag_matvec(clique_start, clique_sizes, A_ptr, A_values, v, Av)
    blocks.generalized_impulses(clique_start, clique_sizes, cliques, J_ptr, J_values, gamma, jc)
    for k in range(v.shape[0]):
        Avp[k] = Av[k] - p_star[k]
        grad[k] = Avp[k] - jc[k]
        vmv[k] = v[k] - v_star[k]
    ell_a = 0.5 * _dot(vmv, Avp)
    return ell_a + ell_r, ell_a


@jit(inline="always")
def _converged(fpar, iterations, ell, ell_prev, alpha_last, r, s):
    """The stopping rule of ``sap.solver``: optimality r ≤ ε_a + ε_r s, or (after the first iteration) a cost
    change below ε_ℓ,a + ε_ℓ,r (|ℓ| + |ℓ_prev|)/2 after a step with α > ½."""
    if r <= fpar[F_ABS_TOL] + fpar[F_REL_TOL] * s:
        return True
    if iterations > 0:
        tol = fpar[F_COST_ABS_TOL] + fpar[F_COST_REL_TOL] * 0.5 * (abs(ell) + abs(ell_prev))
        return abs(ell_prev - ell) < tol and alpha_last > 0.5
    return False


@jit(inline="always")
def _dense_island_solve(isl, clique_start, clique_sizes, edges, island, isl_size, pos_in_island, isl_ptr,
                        isl_cliques, diag_ptr, edge_ptr, diag_values, edge_values, grad, H, rhs, xs, dv):
    """Island ``isl``'s part of dv = −H⁻¹ ∇ℓ: its blocks gathered into the dense matrix H[:n, :n] (n its
    dofs) and solved by a dense Cholesky. Returns False if H is not numerically SPD."""
    n = isl_size[isl]
    Hi = H[:n, :n]
    if isl_ptr[isl + 1] - isl_ptr[isl] > 1:
        Hi[:, :] = 0.0
    for c_i in range(isl_ptr[isl], isl_ptr[isl + 1]):
        c = isl_cliques[c_i]
        nc_ = clique_sizes[c]
        o = pos_in_island[c]
        for a in range(nc_):
            for b in range(nc_):
                Hi[o + a, o + b] = diag_values[diag_ptr[c] + a * nc_ + b]
            rhs[o + a] = -grad[clique_start[c] + a]
    for e in range(edges.shape[0]):
        ca = edges[e, 0]
        if island[ca] != isl:
            continue
        cb = edges[e, 1]
        na = clique_sizes[ca]
        nb = clique_sizes[cb]
        oa = pos_in_island[ca]
        ob = pos_in_island[cb]
        for rr in range(nb):
            for kk in range(na):
                x = edge_values[edge_ptr[e] + rr * na + kk]
                Hi[ob + rr, oa + kk] = x
                Hi[oa + kk, ob + rr] = x
    if blocks.dense_cholesky_solve(Hi, rhs[:n], xs[:n]) != 0:
        return False
    for c_i in range(isl_ptr[isl], isl_ptr[isl + 1]):
        c = isl_cliques[c_i]
        o = pos_in_island[c]
        for a in range(clique_sizes[c]):
            dv[clique_start[c] + a] = xs[o + a]
    return True


@jit(inline="always")
def _newton_direction(clique_start, clique_sizes, A_ptr, A_values, cliques, J_ptr, J_values, G, constraint_edge,
                      edges, island, nisl, isl_size, pos_in_island, isl_ptr, isl_cliques, diag_ptr, edge_ptr,
                      diag_values, edge_values, use_sn, sn, sn_values, sn_x, grad, H, rhs, xs, dv):
    """The Newton direction dv = −H⁻¹ ∇ℓ, H = A + Jᵀ G J: H's blocks assembled, then one dense Cholesky per island
    (:func:`_dense_island_solve`) or the supernodal one (``use_sn``). Returns False if H is not numerically SPD
    or dv is not finite."""
    blocks.assemble_hessian_blocks(clique_sizes, A_ptr, A_values, cliques, J_ptr, J_values, G,
                                   constraint_edge, diag_ptr, edge_ptr, diag_values, edge_values)
    if use_sn:
        ok = _supernodal_solve(clique_sizes, edges, diag_ptr, edge_ptr, diag_values, edge_values, sn,
                               sn_values, grad, sn_x, dv)
    else:
        ok = True
        for isl in range(nisl):
            if not _dense_island_solve(isl, clique_start, clique_sizes, edges, island, isl_size, pos_in_island,
                                       isl_ptr, isl_cliques, diag_ptr, edge_ptr, diag_values, edge_values,
                                       grad, H, rhs, xs, dv):
                ok = False
                break
    for k in range(dv.shape[0]):
        ok = ok and math.isfinite(dv[k])
    return ok


@jit(inline="always")
def _line_search(fpar, ipar, kind, cpar, vc, dvc, ell, ell_a, a1, a2, dell0, work):
    """The step length α along dv by the exact (``ipar[I_LINE_SEARCH]`` 0) or the backtracking line search:
    (α, cost evaluations, ``sap.linesearch`` code); ``work`` (12,): the searches' per-constraint γ and G."""
    if ipar[I_LINE_SEARCH] == 0:
        return exact_line_search(kind, cpar, vc, dvc, ell, ell_a, a1, a2, dell0, fpar[F_EXACT_ALPHA_MAX],
                                 ipar[I_EXACT_MAX_ITERATIONS], fpar[F_COST_ABS_TOL], fpar[F_COST_REL_TOL], work)
    return backtracking_line_search(kind, cpar, vc, dvc, ell, ell_a, a1, a2, dell0, 1.0 / fpar[F_RHO],
                                    ipar[I_BACKTRACKING_MAX_ITERATIONS], fpar[F_ARMIJO], fpar[F_RHO],
                                    fpar[F_RELATIVE_SLOP], work)


@jit(inline="always")
def _ray_cost(kind, cpar, vc, dvc, ell_a, a1, a2, alpha, work):
    """ℓ(v + α dv) from the ray's terms of ``sap.linesearch`` (a1 = dpᵀ(v − v*), a2 = dvᵀ dp). O(nk)."""
    return ell_a + alpha * a1 + 0.5 * alpha * alpha * a2 + cost_along_ray(kind, cpar, vc, dvc, alpha, work)[0]


@jit(inline="always")
def _better_step(fpar, ipar, clique_start, clique_sizes, A_ptr, A_values, cliques, J_ptr, J_values, kind, cpar,
                 vc, vmv, grad, ell, ell_a, dv, dvc, a1, a2, alpha, dv2, dp2, dvc2, work):
    """The stiction-predicted direction dv2 against the first one (dv, its α, a1, a2): dv2 is line-searched
    if it is a descent direction and replaces dv (copied into dv, dvc) when its step reaches a lower cost.
    Returns (α of the step taken, line-search evaluations, whether dv2 was taken)."""
    dell0 = _dot(grad, dv2)
    if not dell0 < 0.0:
        return alpha, 0, False
    blocks.block_diag_matvec(clique_start, clique_sizes, A_ptr, A_values, dv2, dp2)
    blocks.constraint_velocities(clique_start, clique_sizes, cliques, J_ptr, J_values, dv2, dvc2)
    b1 = _dot(dp2, vmv)
    b2 = _dot(dv2, dp2)
    if not b2 > 0.0:
        return alpha, 0, False
    alpha2, nev, code = _line_search(fpar, ipar, kind, cpar, vc, dvc2, ell, ell_a, b1, b2, dell0, work)
    if code != LS_OK:
        return alpha, nev, False
    if not (_ray_cost(kind, cpar, vc, dvc2, ell_a, b1, b2, alpha2, work)
            < _ray_cost(kind, cpar, vc, dvc, ell_a, a1, a2, alpha, work)):
        return alpha, nev + 2, False
    dv[:] = dv2
    dvc[:, :] = dvc2
    return alpha2, nev + 2, True


@jit
def newton_solve(fpar, ipar, clique_start, clique_sizes, A_ptr, A_values, v_star, cliques, J_ptr, J_values,
                 kind, cpar, v, edges, constraint_edge, use_sn, sn, sn_edges):
    """SAP Newton iterations of ``sap.solver._NewtonRun.iterate`` on one (participating) problem, v in place.

    ``edges``, ``constraint_edge``: the clique graph (``clique_graph``). ``use_sn`` False: H is factored
    by a dense Cholesky per island; True: by the supernodal Cholesky (``sap.supernodal``) of the symbolic
    analysis ``sn`` (:data:`SN_FIELDS` of a ``SupernodalSymbolic``) of the pattern ``sn_edges``, which must
    contain ``edges`` (a superset pattern gives the same factor up to round-off).

    Returns (status, iterations, line-search evaluations, r, s, gamma (nk, 3), too_large) with r, s the
    momentum residual and its scale at the last evaluation; too_large: an island exceeds the dense limit,
    or the pattern misses an edge (nothing was solved)."""
    nv = v.shape[0]
    nk = cliques.shape[0]
    ncl = clique_sizes.shape[0]
    gamma = np.empty((nk, 3))
    if use_sn:
        edges = sn_edges
        constraint_edge = _pattern_edges(cliques, ncl, sn_edges)
        if nk > 0 and constraint_edge[0] == -2:
            return SAP_CONVERGED, 0, 0, 0.0, 0.0, gamma, True
    ne = edges.shape[0]
    iw = np.empty(7 * ncl + 1 + ne, np.int64)      # every int64 work array of the solve, carved below (the
    island = iw[:ncl]                              # islands' parent links are dead once the layout overwrites them)
    nisl = islands_into(ncl, edges, iw[ncl:2 * ncl], island)
    isl_size, pos_in_island, isl_ptr, isl_cliques, max_n = _island_layout(clique_sizes, island, nisl,
                                                                          iw[ncl:6 * ncl + 1])
    if max_n > ipar[I_ISLAND_MAX_DOFS] and not use_sn:
        return SAP_CONVERGED, 0, 0, 0.0, 0.0, gamma, True
    diag_ptr = iw[6 * ncl + 1:7 * ncl + 1]
    edge_ptr = iw[7 * ncl + 1:7 * ncl + 1 + ne]
    n_diag, n_edge = _hessian_offsets(clique_sizes, edges, diag_ptr, edge_ptr)
    n_sn = sn[SN_VALPTR][-1] if use_sn else 0
    if use_sn:
        max_n = 0
    p3, p9, pv = _padded(3 * nk), _padded(9 * nk), _padded(nv)
    fw = np.empty(3 * p3 + p9 + 12 * pv + _padded(n_diag) + _padded(n_edge) + _padded(n_sn)
                  + _padded(max_n * max_n) + 2 * _padded(max_n) + 16)   # every float work array, carved below
    o = 0
    vc = fw[o:o + 3 * nk].reshape(nk, 3)
    o += p3
    dvc = fw[o:o + 3 * nk].reshape(nk, 3)
    o += p3
    dvc2 = fw[o:o + 3 * nk].reshape(nk, 3)      # the stiction-predicted direction (grad2 in dp, jc2 in tmp)
    o += p3
    G = fw[o:o + 9 * nk].reshape(nk, 3, 3)
    o += p9
    ls_work = fw[o:o + 12]                        # the line search's γ (3) and G (3 × 3) of one constraint
    o += 16
    p_star, D, Av, jc, dp, dv, tmp, grad, Avp, vmv, dv2 = (
        fw[o:o + nv], fw[o + pv:o + pv + nv], fw[o + 2 * pv:o + 2 * pv + nv], fw[o + 3 * pv:o + 3 * pv + nv],
        fw[o + 4 * pv:o + 4 * pv + nv], fw[o + 5 * pv:o + 5 * pv + nv], fw[o + 6 * pv:o + 6 * pv + nv],
        fw[o + 7 * pv:o + 7 * pv + nv], fw[o + 8 * pv:o + 8 * pv + nv], fw[o + 9 * pv:o + 9 * pv + nv],
        fw[o + 10 * pv:o + 10 * pv + nv])
    o += 11 * pv
    sn_x = fw[o:o + (nv if use_sn else 0)].reshape(nv if use_sn else 0, 1)
    o += pv
    diag_values = fw[o:o + n_diag]
    o += _padded(n_diag)
    edge_values = fw[o:o + n_edge]
    o += _padded(n_edge)
    sn_values = fw[o:o + n_sn]
    o += _padded(n_sn)
    H = fw[o:o + max_n * max_n].reshape(max_n, max_n)
    o += _padded(max_n * max_n)
    rhs = fw[o:o + max_n]
    o += _padded(max_n)
    xs = fw[o:o + max_n]
    blocks.block_diag_matvec(clique_start, clique_sizes, A_ptr, A_values, v_star, p_star)
    _scaling_diagonal(clique_start, clique_sizes, A_ptr, A_values, D)
    kappa = fpar[F_SLIP_CURVATURE]
    ell_prev = np.inf
    alpha_last = 1.0
    iterations = 0
    ls_evaluations = 0
    while True:
        ell, ell_a = _cost_and_gradient(clique_start, clique_sizes, A_ptr, A_values, cliques, J_ptr, J_values, kind,
                                        cpar, kappa, v, v_star, p_star, vc, gamma, G, Av, jc, Avp, grad, vmv)
        r, s = _residual_norms(D, grad, Av, jc, tmp)
        if not (math.isfinite(ell) and math.isfinite(r)):
            return _NUMERICAL_FAILURE, iterations, ls_evaluations, r, s, gamma, False
        if _converged(fpar, iterations, ell, ell_prev, alpha_last, r, s):
            return SAP_CONVERGED, iterations, ls_evaluations, r, s, gamma, False
        if kappa > 0.0 and r <= fpar[F_SLIP_CURVATURE_RESIDUAL] * s:
            kappa = 0.0  # near the optimum: exact Hessian blocks from here on, as sap.solver does
            eval_constraints(kind, cpar, vc, gamma, G, True, 0.0)
        if iterations >= ipar[I_MAX_ITERATIONS]:
            return _MAX_ITERATIONS, iterations, ls_evaluations, r, s, gamma, False
        if not _newton_direction(clique_start, clique_sizes, A_ptr, A_values, cliques, J_ptr, J_values, G,
                                 constraint_edge, edges, island, nisl, isl_size, pos_in_island, isl_ptr, isl_cliques,
                                 diag_ptr, edge_ptr, diag_values, edge_values, use_sn, sn, sn_values, sn_x, grad, H,
                                 rhs, xs, dv):
            return _FACTORIZATION_FAILED, iterations, ls_evaluations, r, s, gamma, False
        blocks.block_diag_matvec(clique_start, clique_sizes, A_ptr, A_values, dv, dp)
        blocks.constraint_velocities(clique_start, clique_sizes, cliques, J_ptr, J_values, dv, dvc)
        a2 = _dot(dv, dp)
        if not a2 > 0.0:
            return _FACTORIZATION_FAILED, iterations, ls_evaluations, r, s, gamma, False
        a1 = _dot(dp, vmv)
        alpha, nev, code = _line_search(fpar, ipar, kind, cpar, vc, dvc, ell, ell_a, a1, a2, _dot(grad, dv),
                                        ls_work)
        ls_evaluations += nev
        iterations += 1
        if code != LS_OK:
            return _LINE_SEARCH_FAILED, iterations, ls_evaluations, r, s, gamma, False
        if (ipar[I_STICTION_PREDICTION] != 0 and ipar[I_LINE_SEARCH] == 0 and alpha < 0.5
                and iterations < ipar[I_MAX_ITERATIONS]
                and relinearize_predicted_stiction(kind, cpar, vc, dvc, gamma, G) > 0):
            # a damped step: one more direction with the contacts it would stop (or reverse) sticking
            blocks.generalized_impulses(clique_start, clique_sizes, cliques, J_ptr, J_values, gamma, tmp)
            for k in range(nv):
                dp[k] = Avp[k] - tmp[k]
            iterations += 1
            if _newton_direction(clique_start, clique_sizes, A_ptr, A_values, cliques, J_ptr, J_values, G,
                                 constraint_edge, edges, island, nisl, isl_size, pos_in_island, isl_ptr,
                                 isl_cliques, diag_ptr, edge_ptr, diag_values, edge_values, use_sn, sn, sn_values,
                                 sn_x, dp, H, rhs, xs, dv2):
                alpha, nev, _ = _better_step(fpar, ipar, clique_start, clique_sizes, A_ptr, A_values, cliques,
                                             J_ptr, J_values, kind, cpar, vc, vmv, grad, ell, ell_a, dv, dvc, a1,
                                             a2, alpha, dv2, dp, dvc2, ls_work)
                ls_evaluations += nev
        for k in range(nv):
            v[k] += alpha * dv[k]
        alpha_last = alpha
        ell_prev = ell


@jit
def no_supernodal():
    """An empty analysis tuple (:data:`SN_FIELDS`) and pattern, for :func:`step_finish` without one."""
    e = np.zeros(0, np.int64)
    return (e, e, e, e, e, e, e, e, e, e, e, e, e, e, e), np.zeros((0, 2), np.int64)

