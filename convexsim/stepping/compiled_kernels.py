"""The whole SAP step of a free-body model as numba code (the compiled path of ``convexsim.stepping``).

One call of :func:`step_kernel` does what ``sap_stepper.sap_step`` does with numpy and Python objects,
in the same order and with the same kernels wherever the reference path has one:

1. finite start state, per-body margin shares (``contacts.contact_margin``),
2. world poses, broad phase (``sweep_and_prune_pairs``), pairs sorted by (A, B), narrow phase
   (``narrow_phase``), the per-pair reach filter (``contacts.pair_reach``),
3. contact frames, Jacobian blocks, combined material parameters (``contacts.combined_parameters``),
4. free motion v*, the SAP problem of the participating cliques in the flat block layout of
   ``sap.ContactProblem``, Delassus estimate (``blocks.delassus_estimate``), kernel parameters
   (``friction_cone.regularization``, ``hunt_crossley.hc_kernel_parameters``),
5. Newton with the stopping rules of ``sap.solver`` (``constraints.eval_constraints``, the exact or
   backtracking line search of ``sap.linesearch``), the Hessian assembled by
   ``blocks.assemble_hessian_blocks`` and factored by a dense Cholesky per island (connected component
   of the contact graph),
6. symplectic Euler (``dynamics.integrate``) and a finite check of the new state.

An island larger than ``ipar[I_ISLAND_MAX_DOFS]`` dofs is not factored by ``step_kernel``: it returns
STEP_TOO_LARGE before changing anything, and the caller takes the step in two calls, :func:`step_prepare`
(stages 1–4 and the clique graph) and :func:`step_finish` (stages 5–6) with the supernodal Cholesky of
``sap.supernodal`` on a symbolic analysis made in Python between the two (``stepping.compiled``).
So does a step whose margin shares are not finite (STEP_BAD_MARGIN, e.g. |g| overflowing): the reference
step then raises its ValueError.

:func:`run_kernel` advances many steps per call and records frames into preallocated buffers.

Solver settings come in two flat arrays (``fpar`` floats, ``ipar`` ints) whose slots are the F_* / I_*
constants below: every SapParameters field has one, so a new setting is one new slot.
"""

from __future__ import annotations

import math

import numpy as np

from convexsim._jit import jit
from convexsim.geometry.broadphase import sweep_and_prune_pairs
from convexsim.geometry.collide import narrow_phase
from convexsim.geometry.transforms import geom_world_poses_kernel, rotation_entries_kernel, quat_exp_times
from convexsim.sap import blocks, supernodal
from convexsim.sap.constraints import KIND_SAP, NPAR, eval_constraints
from convexsim.sap.friction_cone import regularization
from convexsim.sap.hunt_crossley import hc_kernel_parameters
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
NIPAR = 7

# ---- step status codes
STEP_OK = 0
STEP_NONFINITE_START = 1
STEP_NONFINITE_END = 2
STEP_TOO_LARGE = 3
STEP_SOLVER_FAILED = 4     # not converged and strict, or not converged with a non-finite v
STEP_BAD_MARGIN = 5        # a margin share is not finite (the reference path raises its ValueError)
STEP_STATUS_NAMES = ("ok", "non-finite start state", "non-finite end state",
                     "an island above the dense limit (compiled.ISLAND_MAX_DOFS)", "solver failed",
                     "a margin share is not finite")
# ---- extra run_kernel codes
RUN_DONE = 0
RUN_NEED_CONTACT_SPACE = 10
RUN_CHUNK_END = 11

# SapStatus values (convexsim.sap.types)
SAP_CONVERGED = 0
_MAX_ITERATIONS = 1
_LINE_SEARCH_FAILED = 2
_FACTORIZATION_FAILED = 3
_NUMERICAL_FAILURE = 4


@jit
def _dot(a, b):
    """aᵀb of two contiguous vectors through BLAS, like numpy's ``np.dot``."""
    return np.dot(a, b)


@jit
def _finite_body(q, v, b):
    for i in range(q.shape[1]):
        if not math.isfinite(q[b, i]):
            return False
    for i in range(v.shape[1]):
        if not math.isfinite(v[b, i]):
            return False
    return True


@jit
def first_nonfinite_body(q, v):
    for b in range(q.shape[0]):
        if not _finite_body(q, v, b):
            return b
    return -1


@jit
def _norm3_seq(x0, x1, x2):
    """sqrt((x0² + x1²) + x2²): numpy's ``norm(axis=1)`` of a row of 3."""
    return math.sqrt(x0 * x0 + x1 * x1 + x2 * x2)


@jit
def margin_shares(fpar, fixed, body_dof, body_rb, v, share):
    """Per-body speculative-margin shares m_b [m] (``contacts.contact_margin``) into share (nbody,)."""
    dt = fpar[F_DT]
    fall = dt * dt * fpar[F_GNORM]
    for b in range(fixed.shape[0]):
        share[b] = 0.5 * fpar[F_MARGIN_FLOOR]
        if fixed[b]:
            share[b] += fall
    for b in range(fixed.shape[0]):
        if body_dof[b] < 0:
            continue
        speed = _norm3_seq(v[b, 3], v[b, 4], v[b, 5]) + _norm3_seq(v[b, 0], v[b, 1], v[b, 2]) * body_rb[b]
        share[b] += dt * speed


@jit
def collide_and_filter(fpar, fixed, body_dof, body_rb, geom_type, geom_size, geom_body, geom_pos, geom_quat,
                       geom_rho, q, v):
    """Contacts of the step: collision with the margin shares, then the pair-reach filter.

    Returns (geoms (nc, 2), phi (nc,), point (nc, 3), normal (nc, 3)).
    """
    nbody = fixed.shape[0]
    ngeom = geom_type.shape[0]
    share = np.empty(nbody)
    margin_shares(fpar, fixed, body_dof, body_rb, v, share)
    gmargin = np.empty(ngeom)
    for g in range(ngeom):
        gmargin[g] = share[geom_body[g]]
    pos, rot = geom_world_poses_kernel(q, geom_body, geom_pos, geom_quat)
    cap = max(16, 2 * ngeom)
    pairs = np.empty((cap, 2), np.int64)
    while True:
        npairs = sweep_and_prune_pairs(geom_type, geom_size, geom_body, fixed, pos, rot, gmargin, pairs)
        if npairs <= pairs.shape[0]:
            break
        pairs = np.empty((max(npairs, 2 * pairs.shape[0]), 2), np.int64)
    key = np.empty(npairs, np.int64)
    ng = max(ngeom, 1)
    for k in range(npairs):
        key[k] = pairs[k, 0] * ng + pairs[k, 1]
    order = np.argsort(key, kind="mergesort")
    sorted_pairs = np.empty((npairs, 2), np.int64)
    for k in range(npairs):
        sorted_pairs[k, 0] = pairs[order[k], 0]
        sorted_pairs[k, 1] = pairs[order[k], 1]
    ccap = max(16, 4 * npairs)
    while True:
        geoms = np.empty((ccap, 2), np.int64)
        phi = np.empty(ccap)
        point = np.empty((ccap, 3))
        normal = np.empty((ccap, 3))
        nc = narrow_phase(sorted_pairs, npairs, geom_type, geom_size, pos, rot, gmargin, geoms, phi, point,
                          normal)
        if nc <= ccap:
            break
        ccap = nc
    # pair reach: keep the contacts whose gap can close in the step
    dt = fpar[F_DT]
    fall = dt * dt * fpar[F_GNORM]
    floor = fpar[F_MARGIN_FLOOR]
    keep = 0
    for c in range(nc):
        ga = geoms[c, 0]
        gb = geoms[c, 1]
        a = geom_body[ga]
        b = geom_body[gb]
        rel = _norm3_seq(v[a, 3] - v[b, 3], v[a, 4] - v[b, 4], v[a, 5] - v[b, 5])
        spin_a = _norm3_seq(v[a, 0], v[a, 1], v[a, 2]) * (0.0 if fixed[a] else geom_rho[ga])
        spin_b = _norm3_seq(v[b, 0], v[b, 1], v[b, 2]) * (0.0 if fixed[b] else geom_rho[gb])
        reach = dt * (rel + spin_a + spin_b)
        if fixed[a] or fixed[b]:
            reach = reach + (fall + floor)
        else:
            reach = reach + max(fall, floor)
        if phi[c] > reach:
            continue
        geoms[keep, 0] = ga
        geoms[keep, 1] = gb
        phi[keep] = phi[c]
        for i in range(3):
            point[keep, i] = point[c, i]
            normal[keep, i] = normal[c, i]
        keep += 1
    return geoms[:keep], phi[:keep], point[:keep], normal[:keep]


@jit
def contact_frame(n, R):
    """R_WC (3, 3), columns (t1, t2, n) (``dynamics.contact_frames``)."""
    i = 0
    if abs(n[1]) < abs(n[i]):
        i = 1
    if abs(n[2]) < abs(n[i]):
        i = 2
    j = (i + 1) % 3
    k = (j + 1) % 3
    s = math.sqrt(max(1.0 - n[i] * n[i], 1e-300))
    t1 = np.zeros(3)
    t1[j] = -n[k] / s
    t1[k] = n[j] / s
    t2 = np.empty(3)
    t2[0] = n[1] * t1[2] - n[2] * t1[1]
    t2[1] = n[2] * t1[0] - n[0] * t1[2]
    t2[2] = n[0] * t1[1] - n[1] * t1[0]
    for r in range(3):
        R[r, 0] = t1[r]
        R[r, 1] = t2[r]
        R[r, 2] = n[r]


@jit
def jacobian_block(R, point, q, body, sign, out, off):
    """J = sign·R_WCᵀ[−[r]ₓ, 1₃] (3 x 6, row-major) at out[off:], r = point − p_WB."""
    r0 = point[0] - q[body, 0]
    r1 = point[1] - q[body, 1]
    r2 = point[2] - q[body, 2]
    # −[r]ₓ
    M = np.empty((3, 3))
    M[0, 0] = -0.0
    M[0, 1] = r2
    M[0, 2] = -r1
    M[1, 0] = -r2
    M[1, 1] = -0.0
    M[1, 2] = r0
    M[2, 0] = r1
    M[2, 1] = -r0
    M[2, 2] = -0.0
    for i in range(3):
        for j in range(3):
            acc = R[0, i] * M[0, j]
            acc += R[1, i] * M[1, j]
            acc += R[2, i] * M[2, j]
            out[off + 6 * i + j] = sign * acc
            out[off + 6 * i + 3 + j] = sign * R[j, i]


@jit
def solve3(M, b):
    """x = M⁻¹ b for a 3 x 3 M: LU with partial pivoting in LAPACK's unblocked order (dgetf2: pivot = first
    largest |entry|, column scaled by the pivot's reciprocal, rank-1 update; dgetrs: unit-lower forward and
    column-oriented upper back substitution). NaN and inf pass through (no exception)."""
    A = M.copy()
    x = b.copy()
    for j in range(3):
        p = j
        best = abs(A[j, j])
        for i in range(j + 1, 3):
            if abs(A[i, j]) > best:
                best = abs(A[i, j])
                p = i
        if p != j:
            for k in range(3):
                t = A[j, k]
                A[j, k] = A[p, k]
                A[p, k] = t
            t = x[j]
            x[j] = x[p]
            x[p] = t
        if j < 2:
            r = 1.0 / A[j, j]
            for i in range(j + 1, 3):
                A[i, j] *= r
            for k in range(j + 1, 3):
                for i in range(j + 1, 3):
                    A[i, k] -= A[i, j] * A[j, k]
    for k in range(3):           # L y = x (unit diagonal), column by column
        for i in range(k + 1, 3):
            x[i] -= x[k] * A[i, k]
    for k in range(2, -1, -1):   # U x = y, column by column
        x[k] = x[k] / A[k, k]
        for i in range(k):
            x[i] -= x[k] * A[i, k]
    return x


@jit
def free_motion_kernel(fpar, gravity, body_dof, mass, inertia, q, v, moving, A_values, v_star):
    """A blocks (6 x 6 per moving body, angular first) and v* (``dynamics.free_motion``)."""
    dt = fpar[F_DT]
    for m in range(moving.shape[0]):
        b = moving[m]
        w = q[b, 3]
        x = q[b, 4]
        y = q[b, 5]
        z = q[b, 6]
        e = rotation_entries_kernel(w, x, y, z)      # the one quaternion → rotation formula (as stored)
        R = np.empty((3, 3))
        for i in range(3):
            for j in range(3):
                R[i, j] = e[3 * i + j]
        RI = np.empty((3, 3))
        for i in range(3):
            for j in range(3):
                acc = R[i, 0] * inertia[b, 0, j]
                acc += R[i, 1] * inertia[b, 1, j]
                acc += R[i, 2] * inertia[b, 2, j]
                RI[i, j] = acc
        IW = np.empty((3, 3))
        for i in range(3):
            for j in range(3):
                acc = RI[i, 0] * R[j, 0]
                acc += RI[i, 1] * R[j, 1]
                acc += RI[i, 2] * R[j, 2]
                IW[i, j] = acc
        p = 36 * m
        for i in range(36):
            A_values[p + i] = 0.0
        for i in range(3):
            for j in range(3):
                A_values[p + 6 * i + j] = IW[i, j]
            A_values[p + 6 * (3 + i) + 3 + i] = mass[b]
        Iw = np.empty(3)
        for i in range(3):
            acc = IW[i, 0] * v[b, 0]
            acc += IW[i, 1] * v[b, 1]
            acc += IW[i, 2] * v[b, 2]
            Iw[i] = acc
        tau = np.empty(3)
        tau[0] = -(v[b, 1] * Iw[2] - v[b, 2] * Iw[1])
        tau[1] = -(v[b, 2] * Iw[0] - v[b, 0] * Iw[2])
        tau[2] = -(v[b, 0] * Iw[1] - v[b, 1] * Iw[0])
        if tau[0] != 0.0 or tau[1] != 0.0 or tau[2] != 0.0:
            dw = solve3(IW, tau)
            for i in range(3):
                v_star[6 * m + i] = v[b, i] + dt * dw[i]
        else:
            for i in range(3):
                v_star[6 * m + i] = v[b, i]
        for i in range(3):
            v_star[6 * m + 3 + i] = v[b, 3 + i] + dt * gravity[i]


@jit
def integrate_kernel(fpar, moving, q, v, v_next, q_out, v_out):
    """Symplectic Euler (``dynamics.integrate``): v_out = v with the moving bodies' v_next, q_out advanced."""
    dt = fpar[F_DT]
    for b in range(q.shape[0]):
        for i in range(7):
            q_out[b, i] = q[b, i]
        for i in range(6):
            v_out[b, i] = v[b, i]
    for m in range(moving.shape[0]):
        b = moving[m]
        for i in range(6):
            v_out[b, i] = v_next[6 * m + i]
        for i in range(3):
            q_out[b, i] = q[b, i] + dt * v_out[b, 3 + i]
        qw, qx, qy, qz = quat_exp_times(dt * v_out[b, 0], dt * v_out[b, 1], dt * v_out[b, 2], q[b, 3], q[b, 4],
                                        q[b, 5], q[b, 6])
        q_out[b, 3] = qw
        q_out[b, 4] = qx
        q_out[b, 5] = qy
        q_out[b, 6] = qz


@jit
def clique_graph(cliques):
    """Edges (ne, 2) of coupled clique pairs (a < b, sorted unique) and the edge of each constraint."""
    nk = cliques.shape[0]
    keys = np.empty(nk, np.int64)
    big = 1
    for i in range(nk):
        big = max(big, cliques[i, 0] + 1, cliques[i, 1] + 1)
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
def islands(ncl, edges):
    """Connected components of the clique graph: (island of each clique, number of islands); islands are
    numbered in the order of their lowest clique."""
    parent = np.arange(ncl)
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
    island = -np.ones(ncl, np.int64)
    count = 0
    for c in range(ncl):
        r = c
        while parent[r] != r:
            r = parent[r]
        if island[r] < 0:
            island[r] = count
            count += 1
        island[c] = island[r]
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
    vc = np.empty((nk, 3))
    dvc = np.empty((nk, 3))
    gamma = np.empty((nk, 3))
    G = np.empty((nk, 3, 3))
    Av = np.empty(nv)
    jc = np.empty(nv)
    dp = np.empty(nv)
    p_star = np.empty(nv)
    blocks.block_diag_matvec(clique_start, clique_sizes, A_ptr, A_values, v_star, p_star)
    D = np.empty(nv)
    for c in range(ncl):
        n = clique_sizes[c]
        for k in range(n):
            D[clique_start[c] + k] = 1.0 / math.sqrt(A_values[A_ptr[c] + k * (n + 1)])
    # Hessian layout and islands
    if use_sn:
        edges = sn_edges
        constraint_edge = _pattern_edges(cliques, ncl, sn_edges)
        if nk > 0 and constraint_edge[0] == -2:
            return SAP_CONVERGED, 0, 0, 0.0, 0.0, gamma, True
    island, nisl = islands(ncl, edges)
    isl_size = np.zeros(nisl, np.int64)
    pos_in_island = np.empty(ncl, np.int64)
    for c in range(ncl):
        pos_in_island[c] = isl_size[island[c]]
        isl_size[island[c]] += clique_sizes[c]
    max_n = 0
    for i in range(nisl):
        max_n = max(max_n, isl_size[i])
    too_large = max_n > ipar[I_ISLAND_MAX_DOFS] and not use_sn
    diag_ptr = np.empty(ncl, np.int64)
    total = 0
    for c in range(ncl):
        diag_ptr[c] = total
        total += clique_sizes[c] * clique_sizes[c]
    diag_values = np.empty(total)
    edge_ptr = np.empty(edges.shape[0], np.int64)
    total = 0
    for e in range(edges.shape[0]):
        edge_ptr[e] = total
        total += clique_sizes[edges[e, 0]] * clique_sizes[edges[e, 1]]
    edge_values = np.empty(total)
    # cliques of each island in order
    isl_ptr = np.zeros(nisl + 1, np.int64)
    for c in range(ncl):
        isl_ptr[island[c] + 1] += 1
    for i in range(nisl):
        isl_ptr[i + 1] += isl_ptr[i]
    fill = isl_ptr[:-1].copy()
    isl_cliques = np.empty(ncl, np.int64)
    for c in range(ncl):
        isl_cliques[fill[island[c]]] = c
        fill[island[c]] += 1
    dv = np.empty(nv)
    dv_minus = np.empty(nv)
    tmp = np.empty(nv)
    grad = np.empty(nv)
    Avp = np.empty(nv)
    vmv = np.empty(nv)

    ell_prev = np.inf
    alpha_last = 1.0
    iterations = 0
    ls_evaluations = 0
    r = 0.0
    s = 0.0
    if too_large:
        return SAP_CONVERGED, 0, 0, 0.0, 0.0, gamma, True
    if use_sn:
        max_n = 0
        sn_values = np.empty(sn[SN_VALPTR][-1])
        sn_x = np.empty((nv, 1))
    else:
        sn_values = np.empty(0)
        sn_x = np.empty((0, 1))
    H = np.empty((max_n, max_n))
    rhs = np.empty(max_n)
    xs = np.empty(max_n)
    exact = ipar[I_LINE_SEARCH] == 0
    kappa = fpar[F_SLIP_CURVATURE]
    while True:
        blocks.constraint_velocities(clique_start, clique_sizes, cliques, J_ptr, J_values, v, vc)
        ell_r = eval_constraints(kind, cpar, vc, gamma, G, True, kappa)
        blocks.block_diag_matvec(clique_start, clique_sizes, A_ptr, A_values, v, Av)
        blocks.generalized_impulses(clique_start, clique_sizes, cliques, J_ptr, J_values, gamma, jc)
        for k in range(nv):
            Avp[k] = Av[k] - p_star[k]
            grad[k] = Avp[k] - jc[k]
            vmv[k] = v[k] - v_star[k]
        ell_a = 0.5 * _dot(vmv, Avp)
        ell = ell_a + ell_r
        for k in range(nv):
            tmp[k] = D[k] * grad[k]
        r = math.sqrt(_dot(tmp, tmp))
        for k in range(nv):
            tmp[k] = D[k] * Av[k]
        s1 = math.sqrt(_dot(tmp, tmp))
        for k in range(nv):
            tmp[k] = D[k] * jc[k]
        s2 = math.sqrt(_dot(tmp, tmp))
        s = max(s1, s2)
        if not (math.isfinite(ell) and math.isfinite(r)):
            return _NUMERICAL_FAILURE, iterations, ls_evaluations, r, s, gamma, False
        optimality = r <= fpar[F_ABS_TOL] + fpar[F_REL_TOL] * s
        cost_reached = False
        if iterations > 0:
            tol = fpar[F_COST_ABS_TOL] + fpar[F_COST_REL_TOL] * 0.5 * (abs(ell) + abs(ell_prev))
            cost_reached = abs(ell_prev - ell) < tol and alpha_last > 0.5
        if optimality or cost_reached:
            return SAP_CONVERGED, iterations, ls_evaluations, r, s, gamma, False
        if kappa > 0.0 and r <= fpar[F_SLIP_CURVATURE_RESIDUAL] * s:
            kappa = 0.0  # near the optimum: exact Hessian blocks from here on, as sap.solver does
            eval_constraints(kind, cpar, vc, gamma, G, True, 0.0)
        if iterations >= ipar[I_MAX_ITERATIONS]:
            return _MAX_ITERATIONS, iterations, ls_evaluations, r, s, gamma, False
        # Newton direction: H dv = −∇ℓ, H = A + Jᵀ G J, one dense Cholesky per island
        blocks.assemble_hessian_blocks(clique_sizes, A_ptr, A_values, cliques, J_ptr, J_values, G,
                                       constraint_edge, diag_ptr, edge_ptr, diag_values, edge_values)
        ok = True
        if use_sn:
            ok = _supernodal_solve(clique_sizes, edges, diag_ptr, edge_ptr, diag_values, edge_values, sn,
                                   sn_values, grad, sn_x, dv)
            nisl_dense = 0
        else:
            nisl_dense = nisl
        for isl in range(nisl_dense):
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
            info = blocks.dense_cholesky_solve(Hi, rhs[:n], xs[:n])
            if info != 0:
                ok = False
                break
            for c_i in range(isl_ptr[isl], isl_ptr[isl + 1]):
                c = isl_cliques[c_i]
                o = pos_in_island[c]
                for a in range(clique_sizes[c]):
                    dv[clique_start[c] + a] = xs[o + a]
        if ok:
            for k in range(nv):
                if not math.isfinite(dv[k]):
                    ok = False
        if not ok:
            return _FACTORIZATION_FAILED, iterations, ls_evaluations, r, s, gamma, False
        blocks.block_diag_matvec(clique_start, clique_sizes, A_ptr, A_values, dv, dp)
        blocks.constraint_velocities(clique_start, clique_sizes, cliques, J_ptr, J_values, dv, dvc)
        a2 = _dot(dv, dp)
        if not a2 > 0.0:
            return _FACTORIZATION_FAILED, iterations, ls_evaluations, r, s, gamma, False
        a1 = _dot(dp, vmv)
        dell0 = _dot(grad, dv)
        if exact:
            alpha, nev, code = exact_line_search(
                kind, cpar, vc, dvc, ell, ell_a, a1, a2, dell0, fpar[F_EXACT_ALPHA_MAX],
                ipar[I_EXACT_MAX_ITERATIONS], fpar[F_COST_ABS_TOL], fpar[F_COST_REL_TOL])
        else:
            alpha, nev, code = backtracking_line_search(
                kind, cpar, vc, dvc, ell, ell_a, a1, a2, dell0, 1.0 / fpar[F_RHO],
                ipar[I_BACKTRACKING_MAX_ITERATIONS], fpar[F_ARMIJO], fpar[F_RHO], fpar[F_RELATIVE_SLOP])
        ls_evaluations += nev
        iterations += 1
        if code != LS_OK:
            return _LINE_SEARCH_FAILED, iterations, ls_evaluations, r, s, gamma, False
        for k in range(nv):
            v[k] += alpha * dv[k]
        alpha_last = alpha
        ell_prev = ell


@jit
def contact_parameters(fpar, ipar, geoms, phi, w, vn0, geom_k, geom_mu, geom_tau, geom_d):
    """(kind (nc,), cpar (nc, NPAR)) of the contacts: combined materials (``contacts.combined_parameters``)
    and the contact model's kernel parameters (``friction_cone.regularization`` for SAP with the Delassus
    estimate w [1/kg], ``hunt_crossley.hc_kernel_parameters`` with the normal velocities vn0 [m/s] at v0)."""
    dt = fpar[F_DT]
    nc = phi.shape[0]
    kind_code = ipar[I_CONTACT_KIND]
    kind = np.full(nc, kind_code, np.int64)
    cpar = np.zeros((nc, NPAR))
    k_arr = np.empty(nc)
    mu_arr = np.empty(nc)
    tau_arr = np.empty(nc)
    d_arr = np.empty(nc)
    for c in range(nc):
        ga = geoms[c, 0]
        gb = geoms[c, 1]
        ka = geom_k[ga]
        kb = geom_k[gb]
        ksum = ka + kb
        musum = geom_mu[ga] + geom_mu[gb]
        k_arr[c] = ka * kb / ksum if ksum > 0 else 0.0
        d_arr[c] = (kb * geom_d[ga] + ka * geom_d[gb]) / ksum if ksum > 0 else 0.0
        mu_arr[c] = 2 * geom_mu[ga] * geom_mu[gb] / musum if musum > 0 else 0.0
        tau_arr[c] = geom_tau[ga] + geom_tau[gb]
    if kind_code == KIND_SAP:
        for c in range(nc):
            Rt, Rn, vn_hat = regularization(dt, k_arr[c], tau_arr[c], w[c], fpar[F_BETA], fpar[F_SIGMA],
                                            phi[c])
            cpar[c, 0] = mu_arr[c]
            cpar[c, 1] = Rt
            cpar[c, 2] = Rn
            cpar[c, 5] = vn_hat
    else:
        fe0 = np.empty(nc)
        for c in range(nc):
            fe0[c] = -k_arr[c] * phi[c]
        hc_kernel_parameters(dt, k_arr, d_arr, mu_arr, fe0, vn0, fpar[F_SIGMA], w, fpar[F_VS], cpar)
    return kind, cpar


@jit
def _no_prepared(status, bad, nmov):
    """What :func:`step_prepare` returns for a step that stops before collision."""
    e0 = np.zeros(0)
    ei = np.zeros(0, np.int64)
    e2 = np.zeros((0, 2), np.int64)
    e3 = np.zeros((0, 3))
    prep = (e2, e0, e3, e3, np.zeros((0, 3, 3)), np.zeros(6 * nmov), -np.ones(nmov, np.int64), ei, ei, ei, e0,
            e0, e2, e2, e0, ei, np.zeros((0, NPAR)), e0, e2, ei)
    return status, bad, 0, prep


@jit
def step_prepare(fpar, ipar, gravity, fixed, body_dof, moving, mass, inertia, body_rb, geom_type, geom_size,
                 geom_body, geom_pos, geom_quat, geom_rho, geom_k, geom_mu, geom_tau, geom_d, q, v):
    """Stages 1–4 of a step (module docstring): everything before Newton.

    Returns (status, bad_body, largest island in dofs, prepared) with status STEP_OK, STEP_NONFINITE_START
    or STEP_BAD_MARGIN, and prepared = (geoms, phi, point, normal, R_WC, v_star (6 nmov), new_index (nmov),
    clique_start, clique_sizes, A_ptr, A_values, v_star of the cliques, cliques (nc, 2), J_ptr, J_values,
    kind, cpar, v0 of the cliques, edges (ne, 2), constraint_edge) — the participating problem in the flat
    layout of ``sap.ContactProblem`` and its clique graph, as :func:`step_finish` takes it."""
    nmov = moving.shape[0]
    bad = first_nonfinite_body(q, v)
    if bad >= 0:
        return _no_prepared(STEP_NONFINITE_START, bad, nmov)
    dt = fpar[F_DT]
    share = np.empty(fixed.shape[0])
    margin_shares(fpar, fixed, body_dof, body_rb, v, share)
    for b in range(share.shape[0]):
        if not math.isfinite(share[b]):
            return _no_prepared(STEP_BAD_MARGIN, b, nmov)
    geoms, phi, point, normal = collide_and_filter(fpar, fixed, body_dof, body_rb, geom_type, geom_size,
                                                   geom_body, geom_pos, geom_quat, geom_rho, q, v)
    nc = phi.shape[0]
    A_values = np.empty(36 * nmov)
    v_star = np.empty(6 * nmov)
    free_motion_kernel(fpar, gravity, body_dof, mass, inertia, q, v, moving, A_values, v_star)
    # frames, Jacobians, cliques
    R_WC = np.empty((nc, 3, 3))
    cliques = np.empty((nc, 2), np.int64)
    nside = 0
    for c in range(nc):
        contact_frame(normal[c], R_WC[c])
        a = geom_body[geoms[c, 0]]
        b = geom_body[geoms[c, 1]]
        if body_dof[a] >= 0:
            cliques[c, 0] = body_dof[a] // 6
            cliques[c, 1] = body_dof[b] // 6 if body_dof[b] >= 0 else -1
        else:
            cliques[c, 0] = body_dof[b] // 6
            cliques[c, 1] = -1
        nside += 1 if cliques[c, 1] < 0 else 2
    J_values = np.empty(18 * nside)
    J_full_ptr = np.empty((nc, 2), np.int64)
    off = 0
    for c in range(nc):
        a = geom_body[geoms[c, 0]]
        b = geom_body[geoms[c, 1]]
        J_full_ptr[c, 0] = off
        if body_dof[a] >= 0:
            jacobian_block(R_WC[c], point[c], q, a, -1.0, J_values, off)
            off += 18
            if cliques[c, 1] >= 0:
                J_full_ptr[c, 1] = off
                jacobian_block(R_WC[c], point[c], q, b, 1.0, J_values, off)
                off += 18
            else:
                J_full_ptr[c, 1] = -1
        else:
            jacobian_block(R_WC[c], point[c], q, b, 1.0, J_values, off)
            off += 18
            J_full_ptr[c, 1] = -1
    # participating cliques
    used = np.zeros(nmov, np.bool_)
    for c in range(nc):
        used[cliques[c, 0]] = True
        if cliques[c, 1] >= 0:
            used[cliques[c, 1]] = True
    new_index = -np.ones(nmov, np.int64)
    ncl = 0
    for m in range(nmov):
        if used[m]:
            new_index[m] = ncl
            ncl += 1
    sizes = np.full(ncl, 6, np.int64)
    cstart = np.empty(ncl, np.int64)
    A_ptr = np.empty(ncl, np.int64)
    A_red = np.empty(36 * ncl)
    vs_red = np.empty(6 * ncl)
    v_red = np.empty(6 * ncl)
    for m in range(nmov):
        k = new_index[m]
        if k < 0:
            continue
        cstart[k] = 6 * k
        A_ptr[k] = 36 * k
        for i in range(36):
            A_red[36 * k + i] = A_values[36 * m + i]
        b = moving[m]
        for i in range(6):
            vs_red[6 * k + i] = v_star[6 * m + i]
            v_red[6 * k + i] = v[b, i]
    cl_red = np.empty((nc, 2), np.int64)
    for c in range(nc):
        cl_red[c, 0] = new_index[cliques[c, 0]]
        cl_red[c, 1] = new_index[cliques[c, 1]] if cliques[c, 1] >= 0 else -1
    # per-contact parameters and kernel data
    w = np.empty(nc)
    blocks.delassus_estimate(cstart, sizes, A_ptr, A_red, cl_red, J_full_ptr, J_values, w)
    for c in range(nc):
        if not w[c] > 0.0:
            w[c] = 1.0
    kind_code = ipar[I_CONTACT_KIND]
    vn0 = np.empty(nc if kind_code != KIND_SAP else 0)
    if kind_code != KIND_SAP:
        for c in range(nc):
            acc = 0.0
            p0 = J_full_ptr[c, 0]
            m0 = body_dof[geom_body[geoms[c, 0]]]
            b0 = geom_body[geoms[c, 0]] if m0 >= 0 else geom_body[geoms[c, 1]]
            t = 0.0
            for j in range(6):
                t += J_values[p0 + 12 + j] * v[b0, j]
            acc = 0.0 + t
            if J_full_ptr[c, 1] >= 0:
                t = 0.0
                for j in range(6):
                    t += J_values[J_full_ptr[c, 1] + 12 + j] * v[geom_body[geoms[c, 1]], j]
                acc += t
            vn0[c] = acc
    kind, cpar = contact_parameters(fpar, ipar, geoms, phi, w, vn0, geom_k, geom_mu, geom_tau, geom_d)
    edges, constraint_edge = clique_graph(cl_red)
    island, nisl = islands(ncl, edges)
    isl_size = np.zeros(nisl, np.int64)
    for c in range(ncl):
        isl_size[island[c]] += sizes[c]
    max_n = 0
    for i in range(nisl):
        max_n = max(max_n, isl_size[i])
    prep = (geoms, phi, point, normal, R_WC, v_star, new_index, cstart, sizes, A_ptr, A_red, vs_red, cl_red,
            J_full_ptr, J_values, kind, cpar, v_red, edges, constraint_edge)
    return STEP_OK, -1, max_n, prep


@jit
def no_supernodal():
    """An empty analysis tuple (:data:`SN_FIELDS`) and pattern, for :func:`step_finish` without one."""
    e = np.zeros(0, np.int64)
    return (e, e, e, e, e, e, e, e, e, e, e, e, e, e, e), np.zeros((0, 2), np.int64)


@jit
def step_finish(fpar, ipar, moving, q, v, q_out, v_out, prep, use_sn, sn, sn_edges):
    """Stages 5–6 of a step on what :func:`step_prepare` returned: Newton (dense Cholesky per island, or
    with ``use_sn`` the supernodal factor of the analysis ``sn`` of the pattern ``sn_edges``; see
    :func:`newton_solve`), impulses to world forces, integration.

    Returns (status, bad_body, sap_status, iterations, ls_evaluations, relative residual, gamma (nc, 3),
    force_world (nc, 3)); status STEP_TOO_LARGE: nothing was solved (island above the dense limit without
    ``use_sn``, or ``sn_edges`` misses an edge of the graph)."""
    (geoms, phi, point, normal, R_WC, v_star, new_index, cstart, sizes, A_ptr, A_red, vs_red, cl_red,
     J_full_ptr, J_values, kind, cpar, v_red, edges, constraint_edge) = prep
    dt = fpar[F_DT]
    nc = phi.shape[0]
    nmov = moving.shape[0]
    gamma = np.zeros((nc, 3))
    force = np.zeros((nc, 3))
    if nc == 0:
        integrate_kernel(fpar, moving, q, v, v_star, q_out, v_out)
        bad = first_nonfinite_body(q_out, v_out)
        if bad >= 0:
            return STEP_NONFINITE_END, bad, 0, 0, 0, 0.0, gamma, force
        return STEP_OK, -1, 0, 0, 0, 0.0, gamma, force
    v_red = v_red.copy()
    status, iterations, ls_evals, r, s, gamma_s, too_large = newton_solve(
        fpar, ipar, cstart, sizes, A_ptr, A_red, vs_red, cl_red, J_full_ptr, J_values, kind, cpar, v_red,
        edges, constraint_edge, use_sn, sn, sn_edges)
    if too_large:
        return STEP_TOO_LARGE, -1, 0, 0, 0, 0.0, gamma, force
    resid = r / s if s > 0 else r
    for c in range(nc):
        for i in range(3):
            gamma[c, i] = gamma_s[c, i]
        for i in range(3):
            force[c, i] = (R_WC[c, i, 0] * gamma[c, 0] + R_WC[c, i, 1] * gamma[c, 1]
                           + R_WC[c, i, 2] * gamma[c, 2]) / dt
    v_next = v_star.copy()
    for m in range(nmov):
        k = new_index[m]
        if k >= 0:
            for i in range(6):
                v_next[6 * m + i] = v_red[6 * k + i]
    if status != SAP_CONVERGED:
        finite = True
        for i in range(v_next.shape[0]):
            if not math.isfinite(v_next[i]):
                finite = False
        if ipar[I_STRICT] != 0 or not finite:
            return STEP_SOLVER_FAILED, -1, status, iterations, ls_evals, resid, gamma, force
    integrate_kernel(fpar, moving, q, v, v_next, q_out, v_out)
    bad = first_nonfinite_body(q_out, v_out)
    if bad >= 0:
        return STEP_NONFINITE_END, bad, status, iterations, ls_evals, resid, gamma, force
    return STEP_OK, -1, status, iterations, ls_evals, resid, gamma, force


@jit
def step_kernel(fpar, ipar, gravity, fixed, body_dof, moving, mass, inertia, body_rb, geom_type, geom_size,
                geom_body, geom_pos, geom_quat, geom_rho, geom_k, geom_mu, geom_tau, geom_d, q, v, q_out,
                v_out):
    """One SAP step (module docstring) from (q, v) into (q_out, v_out): :func:`step_prepare` then, unless
    an island exceeds the dense limit (STEP_TOO_LARGE), :func:`step_finish` with dense island factors.

    Returns (status, bad_body, sap_status, iterations, ls_evaluations, relative residual,
    geoms (nc, 2), phi (nc,), point (nc, 3), normal (nc, 3), gamma (nc, 3), force_world (nc, 3)).
    """
    status, bad, max_n, prep = step_prepare(fpar, ipar, gravity, fixed, body_dof, moving, mass, inertia,
                                            body_rb, geom_type, geom_size, geom_body, geom_pos, geom_quat,
                                            geom_rho, geom_k, geom_mu, geom_tau, geom_d, q, v)
    geoms, phi, point, normal = prep[0], prep[1], prep[2], prep[3]
    nc = phi.shape[0]
    if status != STEP_OK:
        return status, bad, 0, 0, 0, 0.0, geoms, phi, point, normal, np.zeros((nc, 3)), np.zeros((nc, 3))
    if max_n > ipar[I_ISLAND_MAX_DOFS]:
        zeros = np.zeros((nc, 3))
        return STEP_TOO_LARGE, -1, 0, 0, 0, 0.0, geoms, phi, point, normal, zeros, zeros.copy()
    sn, sn_edges = no_supernodal()
    (status, bad, sap_status, iterations, ls_evals, resid, gamma,
     force) = step_finish(fpar, ipar, moving, q, v, q_out, v_out, prep, False, sn, sn_edges)
    return status, bad, sap_status, iterations, ls_evals, resid, geoms, phi, point, normal, gamma, force


@jit
def run_kernel(fpar, ipar, gravity, fixed, body_dof, moving, mass, inertia, body_rb, geom_type, geom_size,
               geom_body, geom_pos, geom_quat, geom_rho, geom_k, geom_mu, geom_tau, geom_d,
               q, v, k0, n_total, max_steps, record_every,
               fr_step, fr_q, fr_v, fr_stat, fr_resid, fr_nc, st,
               c_body, c_point, c_normal, c_phi, c_force):
    """Advance (q, v) in place from step index k0 by up to ``max_steps`` steps (never past ``n_total``),
    recording a frame after step k when (k + 1) % record_every == 0 or k + 1 == n_total.

    Frame buffers (one row per frame): fr_step (step index after the step), fr_q, fr_v, fr_stat
    (iterations, converged, line-search evaluations, sap status), fr_resid, fr_nc (contacts); contact
    rows: c_body (body_a, body_b), c_point, c_normal, c_phi, c_force. Per step taken (row ``taken``):
    st = (iterations, contacts, converged, line-search evaluations); st has at least max_steps rows.

    Returns (code, steps taken, frames written, contact rows written, bad_body, sap_status, iterations):
    code RUN_DONE (n_total reached), RUN_CHUNK_END (max_steps taken or the frame buffer full),
    RUN_NEED_CONTACT_SPACE (the next frame's contacts do not fit: that step was not taken), or a STEP_*
    failure code of the step after the ones taken (which was not taken)."""
    nf = 0
    ncr = 0
    taken = 0
    q_new = np.empty_like(q)
    v_new = np.empty_like(v)
    while taken < max_steps and k0 + taken < n_total:
        k = k0 + taken
        record = (k + 1) % record_every == 0 or k + 1 == n_total
        if record and nf >= fr_step.shape[0]:
            return RUN_CHUNK_END, taken, nf, ncr, -1, 0, 0
        (status, bad, sap_status, iterations, ls_evals, resid, geoms, phi, point, normal, gamma,
         force) = step_kernel(fpar, ipar, gravity, fixed, body_dof, moving, mass, inertia, body_rb, geom_type,
                              geom_size, geom_body, geom_pos, geom_quat, geom_rho, geom_k, geom_mu, geom_tau,
                              geom_d, q, v, q_new, v_new)
        if status != STEP_OK:
            return status, taken, nf, ncr, bad, sap_status, iterations
        nc = phi.shape[0]
        if record:
            if ncr + nc > c_phi.shape[0]:
                return RUN_NEED_CONTACT_SPACE, taken, nf, ncr, -1, 0, nc
            fr_step[nf] = k + 1
            for b in range(q.shape[0]):
                for i in range(7):
                    fr_q[nf, b, i] = q_new[b, i]
                for i in range(6):
                    fr_v[nf, b, i] = v_new[b, i]
            fr_stat[nf, 0] = iterations
            fr_stat[nf, 1] = 1 if sap_status == 0 else 0
            fr_stat[nf, 2] = ls_evals
            fr_stat[nf, 3] = sap_status
            fr_resid[nf] = resid
            fr_nc[nf] = nc
            for c in range(nc):
                c_body[ncr + c, 0] = geom_body[geoms[c, 0]]
                c_body[ncr + c, 1] = geom_body[geoms[c, 1]]
                c_phi[ncr + c] = phi[c]
                for i in range(3):
                    c_point[ncr + c, i] = point[c, i]
                    c_normal[ncr + c, i] = normal[c, i]
                    c_force[ncr + c, i] = force[c, i]
            ncr += nc
            nf += 1
        for b in range(q.shape[0]):
            for i in range(7):
                q[b, i] = q_new[b, i]
            for i in range(6):
                v[b, i] = v_new[b, i]
        st[taken, 0] = iterations
        st[taken, 1] = nc
        st[taken, 2] = 1 if sap_status == 0 else 0
        st[taken, 3] = ls_evals
        taken += 1
    code = RUN_DONE if k0 + taken >= n_total else RUN_CHUNK_END
    return code, taken, nf, ncr, -1, 0, 0
