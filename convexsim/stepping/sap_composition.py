"""The compiled SAP step: one composition of the stages for every model the compiled step takes (a free-body
model is a forest without trees), and the run loop that takes many steps per numba call. Only stage calls
live here; each stage's math is in its module (docs/architecture.md, "The data path of one step"):

1. start checks, collision with the margins and the pair-reach filter, the tree-pair filter, contact frames
   (``contacts``);
2. free motion A, v* under the step's controls (``free_motion``);
3. the contacts' Jacobians (``jacobians``), the participating cliques, the contacts' kernel parameters and
   the joint rows (``sap_rows``);
4. the SAP Newton solve (``sap.newton.newton_solve``, the one Newton loop);
5. impulses to forces, joint forces and the solved velocities back into v (``post_solve``);
6. integration and the end-of-step check (``integration``); recording (``recording``).

:func:`step_prepare` takes stages 1–3, :func:`finish_stages` stages 4–5 and the entry kernel that calls it
integrates (stage 6); :func:`run_kernel` calls step_prepare and finish_stages per step (finish_stages inlined: its
call boundary cost a one-body step ≈ 0.3 µs; its code is small, Newton is a kernel of its own). A step whose largest
island is above ``ipar[I_ISLAND_MAX_DOFS]`` is not taken by the run loop (STEP_TOO_LARGE): the caller takes it with
:func:`step_finish` (finish_stages and the integration as an entry of their own) on the supernodal factor of an
analysis made in Python between the two calls (``stepping.compiled``). Stages 2–3 and 6 of a model
without trees take the free-body variants (:func:`body_rows_stage`: 6 × 6 masses, the body Jacobian blocks;
``integrate_bodies``), which are the forest's with no tree and skip its empty loops. The variant is chosen when
numba compiles an entry kernel, by the length of the model's arrays tuple (:data:`NO_TREES`): each entry is compiled
once per model kind and the free bodies' step holds no tree stage. The entry points take the model's arrays as the
flat buffers of ``packing.step_arrays`` and build views of what their branch reads (:func:`model_views`): numba
unboxes every array argument of a call from Python and reference-counts every array a call passes on, which for
the 73 arrays of a forest cost more than a small free-body step. There is no separately compiled one-step kernel:
numba emits the machine code of a kernel's whole call tree into every kernel compiled on its own, so each extra
entry point repeats the cost of compiling the step; a single step is the run kernel for one step.
"""

from __future__ import annotations

import math

import numpy as np

from convexsim._jit import jit
from convexsim.sap.constraints import NPAR
from convexsim.sap.newton import F_DT, I_ISLAND_MAX_DOFS, I_STRICT, SAP_CONVERGED, newton_solve, no_supernodal
from convexsim.stepping.contacts import (collide_and_filter, contact_frames_kernel,
                                         start_check)
from convexsim.stepping.free_motion import applied_forces, body_free_motion, free_motion_stage, motor_forces_kernel
from convexsim.stepping.integration import integrate_bodies, integrate_forest
from convexsim.stepping.jacobians import body_contact_blocks, forest_contact_blocks, forest_contact_sides
from convexsim.stepping.post_solve import contact_impulses, sap_joint_forces, scatter_cliques, solve_failed
from convexsim.stepping.recording import count_step, record_frame
from convexsim.stepping.sap_rows import (body_problem, contact_kernel_rows, control_pd_targets, forest_joint_rows,
                                         forest_problem, forest_used_cliques, joint_row_blocks, joint_row_entries,
                                         kinematic_contact_rows, largest_island)
from convexsim.stepping.status import (RUN_CHUNK_END, RUN_DONE, RUN_NEED_CONTACT_SPACE, STEP_BAD_MARGIN,
                                       STEP_NONFINITE_END, STEP_NONFINITE_START, STEP_OK, STEP_SINGULAR_MASS,
                                       STEP_SOLVER_FAILED, STEP_TOO_LARGE)


FA0 = 17
"""Index of ``PackedForest.fa[0]`` among the flat arrays of ``packing.step_arrays`` (after the 17 model arrays)."""
RA0 = 42
"""Index of ``PackedForest.ra[0]`` among them (after the 25 forest arrays)."""
FILTER = 73
"""Index of ``PackedModel.pair_rule``'s (ngeom, 2) collision bits among them (after the 31 joint-row arrays); the
tree-pair rule's arrays are the forest's body_tree, body_moves and tree_base (``FA0 + 17 … 19``)."""
KINEMATIC = 74
"""Index of ``PackedModel.kinematic`` (nbody,) among them: the kinematic bodies."""


@jit(inline="always")
def kinematic_flags(arrays):
    """``PackedModel.kinematic`` (nbody,) as a view of the flat buffers."""
    return _v1(arrays[2], arrays[3], KINEMATIC)


@jit(inline="always")
def _v1(buf, h, k):
    return buf[h[k, 0]:h[k, 0] + h[k, 1]]


@jit(inline="always")
def _v2(buf, h, k):
    return buf[h[k, 0]:h[k, 0] + h[k, 1] * h[k, 2]].reshape((h[k, 1], h[k, 2]))


@jit(inline="always")
def _v3(buf, h, k):
    return buf[h[k, 0]:h[k, 0] + h[k, 1] * h[k, 2] * h[k, 3]].reshape((h[k, 1], h[k, 2], h[k, 3]))


@jit(inline="always")
def model_views(arrays):
    """``packing.PackedModel.model_arrays`` as views of the flat buffers ``arrays`` of ``packing.step_arrays``
    (int64, float64 and bool buffers, header (offset, shape) per array), in the order and with the dtypes and
    dimensions of the packing. The step builds the views its branch reads, each step: a view costs no copy,
    while every array a kernel call passes on costs its reference counting."""
    ib, fb, bb, h = arrays[0], arrays[1], arrays[2], arrays[3]
    return (_v1(fb, h, 0), _v1(bb, h, 1), _v1(ib, h, 2), _v1(ib, h, 3), _v1(fb, h, 4), _v3(fb, h, 5), _v1(fb, h, 6),
            _v1(ib, h, 7), _v2(fb, h, 8), _v1(ib, h, 9), _v2(fb, h, 10), _v2(fb, h, 11), _v1(fb, h, 12),
            _v1(fb, h, 13), _v1(fb, h, 14), _v1(fb, h, 15), _v1(fb, h, 16))


@jit(inline="always")
def forest_views(arrays):
    """``packing.PackedForest.fa`` as views of the flat buffers (:func:`model_views`)."""
    ib, fb, bb, h = arrays[0], arrays[1], arrays[2], arrays[3]
    return (_v1(ib, h, 17), _v1(ib, h, 18), _v2(fb, h, 19), _v2(fb, h, 20), _v3(fb, h, 21), _v1(ib, h, 22),
            _v1(ib, h, 23), _v1(ib, h, 24), _v1(fb, h, 25), _v2(fb, h, 26), _v3(fb, h, 27), _v1(fb, h, 28),
            _v1(fb, h, 29), _v1(fb, h, 30), _v1(ib, h, 31), _v1(ib, h, 32), _v1(ib, h, 33), _v1(ib, h, 34),
            _v1(bb, h, 35), _v1(ib, h, 36), _v1(ib, h, 37), _v1(ib, h, 38), _v1(ib, h, 39), _v1(ib, h, 40),
            _v1(ib, h, 41))


@jit(inline="always")
def row_views(arrays):
    """``packing.PackedForest.ra`` as views of the flat buffers (:func:`model_views`)."""
    ib, fb, bb, h = arrays[0], arrays[1], arrays[2], arrays[3]
    return (_v1(ib, h, 42), _v1(ib, h, 43), _v1(ib, h, 44), _v1(fb, h, 45), _v1(fb, h, 46), _v1(ib, h, 47),
            _v1(ib, h, 48), _v1(ib, h, 49), _v1(fb, h, 50), _v1(fb, h, 51), _v1(fb, h, 52), _v1(fb, h, 53),
            _v1(fb, h, 54), _v1(ib, h, 55), _v1(fb, h, 56), _v1(fb, h, 57), _v1(ib, h, 58), _v1(ib, h, 59),
            _v1(ib, h, 60), _v1(ib, h, 61), _v1(ib, h, 62), _v1(fb, h, 63), _v1(fb, h, 64), _v1(ib, h, 65),
            _v1(ib, h, 66), _v1(ib, h, 67), _v1(ib, h, 68), _v1(ib, h, 69), _v1(ib, h, 70), _v1(fb, h, 71),
            _v1(fb, h, 72))


@jit(inline="always")
def ints(arrays, k):
    """Int64 array k of the flat buffers (e.g. ``FA0 + 15``: the forest's tree_nv)."""
    return _v1(arrays[0], arrays[3], k)


@jit(inline="always")
def body_rows_stage(fpar, ipar, mb, kinematic, q, v, wrench, geoms, phi, point, normal):
    """Stages 2–3 of a model without trees (the forest's stages with no tree, without their empty loops):
    the bodies' 6 × 6 masses and v* under the external wrenches ``wrench`` (nbody, 6), the body Jacobian
    blocks, the participating cliques in body order and the contacts' kernel parameters (with the known
    velocity of the kinematic bodies, ``kinematic`` (nbody,) True, ``sap_rows.kinematic_contact_rows``); no
    joint rows. Returns what :func:`tree_rows_stage` returns."""
    (gravity, _, body_dof, moving, mass, inertia, _, _, _, geom_body, _, _, _, geom_k, geom_mu, geom_tau,
     geom_d) = mb
    A_values, v_star = body_free_motion(fpar, gravity, body_dof, mass, inertia, q, v, moving, wrench)
    R_WC = contact_frames_kernel(normal)
    cliques, J_ptr, J_values = body_contact_blocks(R_WC, geoms, point, q, geom_body, body_dof)
    new_index, sizes, cstart, A_ptr, A_red, vs_red, v_red, cl_red = body_problem(moving, v, A_values, v_star,
                                                                                 cliques)
    kind, cpar = contact_kernel_rows(fpar, ipar, geoms, phi, cstart, sizes, A_ptr, A_red, cl_red, J_ptr, J_values,
                                     v_red, geom_k, geom_mu, geom_tau, geom_d)
    kinematic_contact_rows(kind, cpar, R_WC, geoms, point, q, v, geom_body, kinematic)
    e = cstart[:0]                     # no joint rows: empty views, nothing allocated
    problem = (sizes, cstart, A_ptr, A_red, vs_red, v_red, cl_red, J_ptr, J_values, kind, cpar)
    return R_WC, v_star, new_index, problem, (0, e, e, cpar[:0], 0, e)


@jit(inline="always")
def tree_rows_stage(fpar, ipar, mb, kinematic, fa, ra, t, q, v, tq, tv, ctl, geoms, phi, point, normal):
    """Stages 2–3 of a model with trees on its contacts: free motion, joint rows, cliques, the contacts'
    Jacobians and kernel parameters (with the kinematic bodies' known velocities, as :func:`body_rows_stage`),
    the joint rows' blocks — the participating problem in the flat layout of ``sap.ContactProblem``.

    Returns (R_WC, v* over v = (free bodies | trees), new_index (per clique of ``fa``'s clique layout), the
    problem (sizes, clique_start, A_ptr, A_values, v*, v₀, cliques, J_ptr, J_values, kind, cpar), the joint
    rows (nr, row_kind, row_owner, row_J, njr, jr_index))."""
    moving, geom_body = mb[3], mb[9]
    tree_vstart, tree_nv, body_tree, tree_clique, size_all, start_all = fa[14], fa[15], fa[17], fa[22], fa[23], fa[24]
    nmov = moving.shape[0]
    nc = phi.shape[0]
    A_free, vs_free, A_tree, vs_tree, S, R_WB, p_WB = free_motion_stage(fpar, mb, fa, q, v, tq, tv)
    applied_forces(fpar[F_DT], mb, fa, R_WB, p_WB, S, ctl[2], ctl[3], A_free, vs_free, A_tree, vs_tree)
    nr, row_tree, row_kind, row_owner, row_J, row_par, njr, jr_index, jr_par = forest_joint_rows(
        fa, ra, t, fpar[F_DT], tq, tv, A_tree, vs_tree)
    control_pd_targets(ra, fpar[F_DT], tq, A_tree, ctl[0], ctl[1], nr, row_kind, row_owner, row_par)
    R_WC = contact_frames_kernel(normal)
    side_cl, side_body, side_sign, nJ = forest_contact_sides(geoms, geom_body, mb[2], body_tree, tree_clique,
                                                            size_all)
    new_index, ncl = forest_used_cliques(size_all.shape[0], side_cl, tree_clique, row_tree, nr, ra[25], ra[28],
                                         jr_index, njr)
    sizes, cstart, A_ptr, A_red, vs_red, v_red = forest_problem(new_index, ncl, size_all, start_all, moving,
                                                                A_free, vs_free, A_tree, vs_tree, v, tv)
    nk = nc + nr + njr
    J_values = np.zeros(nJ + joint_row_entries(tree_nv, row_tree, nr, ra[25], ra[28], jr_index, njr))
    J_ptr = -np.ones((nk, 2), np.int64)
    cl_red = -np.ones((nk, 2), np.int64)
    off = forest_contact_blocks(fa, nmov, q, S, R_WC, point, side_cl, side_body, side_sign, new_index, J_values,
                                J_ptr, cl_red)
    kind_c, cpar_c = contact_kernel_rows(fpar, ipar, geoms, phi, cstart, sizes, A_ptr, A_red, cl_red[:nc].copy(),
                                         J_ptr[:nc].copy(), J_values, v_red, mb[13], mb[14], mb[15], mb[16])
    kinematic_contact_rows(kind_c, cpar_c, R_WC, geoms, point, q, v, geom_body, kinematic)
    kind = np.empty(nk, np.int64)
    cpar = np.zeros((nk, NPAR))
    kind[:nc] = kind_c
    cpar[:nc] = cpar_c
    joint_row_blocks(ra, tree_nv, tree_vstart, tree_clique, new_index, nc, nr, row_tree, row_kind, row_J, row_par,
                     njr, jr_index, jr_par, kind, cpar, cl_red, J_ptr, J_values, off)
    problem = (sizes, cstart, A_ptr, A_red, vs_red, v_red, cl_red, J_ptr, J_values, kind, cpar)
    return (R_WC, np.concatenate((vs_free, vs_tree)), new_index, problem,
            (nr, row_kind, row_owner, row_J, njr, jr_index))


NO_TREES = 4
"""``len(arrays)`` of a model without trees: ``packing.step_arrays`` gives the three flat buffers and their header,
and a fifth item (True) for a model with trees. The entry kernels branch on ``len(arrays) == NO_TREES`` in their own
body (stages 2–3 in :func:`step_prepare`, stage 6 in :func:`step_finish` and :func:`run_kernel`): to numba a tuple's
length is part of its type, so the condition is a constant where the entry is compiled, and numba's dead-branch
pruning drops the other variant before inlining or typing it (a branch inside an inlined helper would be pruned
only after both variants were inlined, which is most of the cost). Each entry is thus compiled once per model kind,
and a free-body model's step holds no tree stage."""


@jit(inline="always")
def no_prepared(nmov):
    """The prepared tuple of :func:`step_prepare` for a step that stops before collision (its types)."""
    e0 = np.zeros(0)
    ei = np.zeros(0, np.int64)
    e2 = np.zeros((0, 2), np.int64)
    e3 = np.zeros((0, 3))
    problem = (ei, ei, ei, e0, e0, e0, e2, e2, e0, ei, np.zeros((0, NPAR)))
    return (e2, e0, e3, e3, np.zeros((0, 3, 3)), np.zeros(6 * nmov), -np.ones(nmov, np.int64), problem,
            (0, ei, ei, np.zeros((0, NPAR)), 0, ei), e2, ei)


@jit
def step_prepare(fpar, ipar, arrays, t, q, v, tq, tv, ctl):
    """Stages 1–3 of a SAP step from (q, v, tree_q, tree_v) at time t [s]: everything before Newton.

    ``arrays``: the model arrays of ``packing.PackedModel`` and the packed forest (zero trees for a free-body
    model) with its joint rows (``packing.PackedForest``), as the flat buffers of ``packing.step_arrays``
    (:func:`model_views`); ``ctl``: the step's controls (target (nact,), target velocity (nact,), joint
    forces (nvt,), external wrenches (nbody, 6); ``convexsim.controls.ControlArrays``). The joint forces are the
    step's work array: the links' wrenches are added into it (``free_motion.applied_forces``).

    Returns (status, bad_body, largest island in dofs, prepared) with status STEP_OK, STEP_NONFINITE_START,
    STEP_BAD_MARGIN or STEP_SINGULAR_MASS (then ``bad_body`` is a tree dof of the singular mass matrix), and
    prepared = (geoms (nc, 2), φ, point, normal, R_WC, v* over v = (free bodies | trees), new_index (per
    clique), the problem (sizes, clique_start, A_ptr, A_values, v*, v₀ of the participating cliques, cliques
    (nk, 2), J_ptr, J_values, kind, cpar), the joint rows (nr, row_kind, row_owner, row_J, njr, jr_index), edges
    (ne, 2), constraint_edge) as :func:`step_finish` takes it."""
    mb = model_views(arrays)
    fixed, body_rb, geom_body = mb[1], mb[6], mb[9]
    body_sweep = ints(arrays, FA0 + 21)
    bad, bad_margin = start_check(fpar, fixed, body_sweep, body_rb, q, v)
    if bad >= 0 or bad_margin >= 0:
        return (STEP_NONFINITE_START if bad >= 0 else STEP_BAD_MARGIN, max(bad, bad_margin), 0,
                no_prepared(mb[3].shape[0]))
    ib, bb, h = arrays[0], arrays[2], arrays[3]
    pair_rule = (_v2(ib, h, FILTER), (ints(arrays, FA0 + 17), _v1(bb, h, FA0 + 18), ints(arrays, FA0 + 19)))
    geoms, phi, point, normal = collide_and_filter(fpar, fixed, body_sweep, body_rb, mb[7], mb[8], geom_body,
                                                   mb[10], mb[11], mb[12], q, v, *pair_rule)
    if len(arrays) == NO_TREES:     # a constant where this kernel is compiled: one variant per model kind
        R_WC, v_next, new_index, problem, rows = body_rows_stage(fpar, ipar, mb, kinematic_flags(arrays), q, v,
                                                                 ctl[3], geoms, phi, point, normal)
    else:
        R_WC, v_next, new_index, problem, rows = tree_rows_stage(fpar, ipar, mb, kinematic_flags(arrays),
                                                                 forest_views(arrays), row_views(arrays), t, q, v,
                                                                 tq, tv, ctl, geoms, phi, point, normal)
        nfree = 6 * mb[3].shape[0]
        for d in range(nfree, v_next.shape[0]):    # finite start: M(q) singular, or forces overflow
            if not math.isfinite(v_next[d]):
                return STEP_SINGULAR_MASS, d - nfree, 0, no_prepared(mb[3].shape[0])
    sizes, cl_red = problem[0], problem[6]
    edges, constraint_edge, max_n = largest_island(sizes.shape[0], sizes, cl_red)
    return STEP_OK, -1, max_n, (geoms, phi, point, normal, R_WC, v_next, new_index, problem, rows, edges,
                                constraint_edge)


@jit
def step_finish(fpar, ipar, arrays, q, v, tq, prep, q_out, v_out, tq_out, tv_out, act_force, lim_force, con_force,
                use_sn, sn, sn_edges):
    """Stages 4–6 of a SAP step on what :func:`step_prepare` returned (:func:`finish_stages`, then the integration
    into the *_out arrays) as an entry kernel: the second call of the two-call step of islands above the dense
    limit (``stepping.compiled``), after the supernodal analysis made in Python; the run loop inlines the same
    stages. Returns (status, bad_body, sap_status, iterations, ls_evaluations, relative residual, gamma (nc, 3),
    force_world (nc, 3) [N]); status STEP_TOO_LARGE: nothing was solved (an island above the dense limit
    without ``use_sn``, or ``sn_edges`` misses an edge of the graph)."""
    status, sap_status, iterations, ls_evals, resid, gamma, force, v_next = finish_stages(
        fpar, ipar, arrays, prep, act_force, lim_force, con_force, use_sn, sn, sn_edges)
    if status != STEP_OK:
        return status, -1, sap_status, iterations, ls_evals, resid, gamma, force
    if len(arrays) == NO_TREES:     # a constant where this kernel is compiled: one variant per model kind
        bad = integrate_bodies(fpar, ints(arrays, 3), kinematic_flags(arrays), q, v, v_next, q_out, v_out)
    else:
        bad = integrate_forest(fpar, forest_views(arrays), ints(arrays, 3), kinematic_flags(arrays), q, v, tq,
                               v_next, q_out, v_out, tq_out, tv_out)
    return STEP_OK if bad < 0 else STEP_NONFINITE_END, bad, sap_status, iterations, ls_evals, resid, gamma, force


@jit(inline="always")
def finish_stages(fpar, ipar, arrays, prep, act_force, lim_force, con_force, use_sn, sn, sn_edges):
    """Stages 4–5 of a SAP step on what :func:`step_prepare` returned: Newton (dense Cholesky per island, or
    with ``use_sn`` the supernodal factor of the analysis ``sn`` of the pattern ``sn_edges``; see
    :func:`newton_solve`), impulses to world forces and joint forces, the solved velocities back into v.
    Writes actuator_force (nact,), limit_force (nlim,) and joint-coupler force (ncoupler,) [N·m or N] (γ/dt on
    its joint; zeros when no problem was solved). The caller integrates (stage 6, by model kind).

    The prepared arrays v* and v₀ are overwritten (v* by the new velocities, v₀ by Newton's iterate): a
    prepared step is finished once. Returns (status, sap_status, iterations, ls_evaluations, relative residual,
    gamma (nc, 3), force_world (nc, 3) [N], v_next) with status STEP_OK, STEP_TOO_LARGE (nothing solved: an
    island above the dense limit without ``use_sn``, or ``sn_edges`` misses an edge of the graph) or
    STEP_SOLVER_FAILED."""
    geoms, phi, point, normal, R_WC, v_star, new_index, problem, rows, edges, constraint_edge = prep
    sizes, cstart, A_ptr, A_red, vs_red, v_red, cl_red, J_ptr, J_values, kind, cpar = problem
    nr, row_kind, row_owner, row_J, njr, jr_index = rows
    nc = phi.shape[0]
    gamma = np.zeros((nc, 3))
    force = np.zeros((nc, 3))
    act_force[:] = 0.0
    lim_force[:] = 0.0
    con_force[:] = 0.0
    status, iterations, ls_evals, resid = SAP_CONVERGED, 0, 0, 0.0
    v_next = v_star                    # the prepared v* and v₀ are the solve's work arrays (used once)
    if kind.shape[0] > 0:
        status, iterations, ls_evals, rr, ss, gamma_all, too_large = newton_solve(
            fpar, ipar, cstart, sizes, A_ptr, A_red, vs_red, cl_red, J_ptr, J_values, kind, cpar, v_red, edges,
            constraint_edge, use_sn, sn, sn_edges)
        if too_large:
            return STEP_TOO_LARGE, 0, 0, 0, 0.0, gamma, force, v_next
        resid = rr / ss if ss > 0 else rr
        contact_impulses(R_WC, gamma_all, fpar[F_DT], gamma, force)
        sap_joint_forces(gamma_all, nc, nr, row_kind, row_owner, row_J, njr, jr_index, fpar[F_DT], act_force,
                         lim_force, con_force)
        scatter_cliques(new_index, ints(arrays, FA0 + 23), ints(arrays, FA0 + 24), cstart, v_red, v_next)
        if solve_failed(status, v_next, ipar[I_STRICT]):
            return STEP_SOLVER_FAILED, status, iterations, ls_evals, resid, gamma, force, v_next
    return STEP_OK, status, iterations, ls_evals, resid, gamma, force, v_next


@jit
def run_kernel(fpar, ipar, arrays, t0, q, v, tq, tv, ctl, law, params, k0, n_total, max_steps, record_every,
               fr_step, fr_q, fr_v, fr_stat, fr_resid, fr_nc, fr_act, fr_lim, fr_con, st,
               c_body, c_geom, c_point, c_normal, c_phi, c_gamma, c_force):
    """Advance (q, v, tree_q, tree_v) in place from step index k0 and time t0 [s] by up to ``max_steps`` steps
    (never past ``n_total``), recording a frame after step k when (k + 1) % record_every == 0 or
    k + 1 == n_total. The time of step j is t0 + j·dt accumulated step by step, as the Python loop does;
    ``arrays``: the model and its packed forest as the flat buffers of ``packing.step_arrays``
    (:func:`step_prepare`); ``ctl`` = (target, target velocity, joint torques as commanded, the motors' dofs,
    constant torques and efforts, external wrenches (nbody, 6); ``controls.ControlArrays.kernel_controls``);
    ``law``: a compiled controller (``convexsim.controllers``) called before every step with the state,
    ``ctl``'s first three arrays (which it may rewrite) and ``params``; then the motors turn the commanded
    torques into joint forces (``free_motion.motor_forces_kernel``) and the step takes (target, target
    velocity, joint forces, wrenches).

    Frame buffers (one row per frame): fr_step (step index after the step), fr_q, fr_v, fr_stat
    (iterations, converged, line-search evaluations, sap status; −1: no problem was solved), fr_resid, fr_nc
    (contacts), fr_act (frames, nact), fr_lim (frames, nlim), fr_con (frames, ncoupler) [N·m or N]; contact
    rows: c_body (body_a, body_b), c_geom (geom_a, geom_b), c_point, c_normal, c_phi, c_gamma, c_force. Per
    step taken (row ``taken``): st = (iterations, contacts, converged, line-search evaluations); st has at
    least max_steps rows.

    Returns (code, steps taken, frames written, contact rows written, bad_body, sap_status, iterations):
    code RUN_DONE (n_total reached), RUN_CHUNK_END (max_steps taken or the frame buffer full),
    RUN_NEED_CONTACT_SPACE (the next frame's contacts do not fit: that step was not taken), or a STEP_*
    failure code of the step after the ones taken (which was not taken; STEP_TOO_LARGE: an island above the
    dense limit, which the caller takes with the supernodal factor)."""
    dt = fpar[F_DT]
    geom_body = ints(arrays, 9)
    nf, ncr, taken, t = 0, 0, 0, t0
    q_new, v_new, tq_new, tv_new = np.empty_like(q), np.empty_like(v), np.empty_like(tq), np.empty_like(tv)
    act_force = np.zeros(ints(arrays, RA0 + 6).shape[0])
    lim_force = np.zeros(ints(arrays, RA0 + 1).shape[0])
    con_force = np.zeros(ints(arrays, RA0 + 23).shape[0])
    sn, sn_edges = no_supernodal()
    target, target_velocity, commanded = ctl[0], ctl[1], ctl[2]
    forces = np.empty_like(commanded)
    step_ctl = (target, target_velocity, forces, ctl[6])
    while taken < max_steps and k0 + taken < n_total:
        k = k0 + taken
        record = (k + 1) % record_every == 0 or k + 1 == n_total
        if record and nf >= fr_step.shape[0]:
            return RUN_CHUNK_END, taken, nf, ncr, -1, 0, 0
        law(t, q, v, tq, tv, target, target_velocity, commanded, ctl[6], params)
        motor_forces_kernel(ctl[3], ctl[4], ctl[5], commanded, forces)
        status, bad, max_n, prep = step_prepare(fpar, ipar, arrays, t, q, v, tq, tv, step_ctl)
        if status != STEP_OK:
            return status, taken, nf, ncr, bad, 0, 0
        if max_n > ipar[I_ISLAND_MAX_DOFS]:       # the caller takes this step with the supernodal factor
            return STEP_TOO_LARGE, taken, nf, ncr, -1, 0, 0
        status, sap_status, iterations, ls_evals, resid, gamma, force, v_next = finish_stages(
            fpar, ipar, arrays, prep, act_force, lim_force, con_force, False, sn, sn_edges)
        if status != STEP_OK:
            return status, taken, nf, ncr, -1, sap_status, iterations
        if len(arrays) == NO_TREES:     # stage 6, by model kind (as step_finish)
            bad = integrate_bodies(fpar, ints(arrays, 3), kinematic_flags(arrays), q, v, v_next, q_new, v_new)
        else:
            bad = integrate_forest(fpar, forest_views(arrays), ints(arrays, 3), kinematic_flags(arrays), q, v, tq,
                                   v_next, q_new, v_new, tq_new, tv_new)
        if bad >= 0:
            return STEP_NONFINITE_END, taken, nf, ncr, bad, sap_status, iterations
        geoms, phi, point, normal = prep[0], prep[1], prep[2], prep[3]
        nc = phi.shape[0]
        quiet = prep[7][9].shape[0] == 0           # no problem was solved: StepInfo's defaults
        if record:
            if ncr + nc > c_phi.shape[0]:
                return RUN_NEED_CONTACT_SPACE, taken, nf, ncr, -1, 0, nc
            ncr = record_frame(nf, ncr, k, q_new, v_new, quiet, iterations, sap_status, ls_evals, resid, geoms,
                               phi, point, normal, gamma, force, geom_body, fr_step, fr_q, fr_v, fr_stat, fr_resid,
                               fr_nc, c_body, c_geom, c_point, c_normal, c_phi, c_gamma, c_force)
            if tq.shape[0] > 0:            # the trees' joint forces and state (none for free bodies)
                fr_act[nf] = act_force
                fr_lim[nf] = lim_force
                fr_con[nf] = con_force
            nf += 1
        count_step(st, taken, quiet, iterations, nc, sap_status, ls_evals, q, v, q_new, v_new)
        if tq.shape[0] > 0:
            tq[:] = tq_new
            tv[:] = tv_new
        taken += 1
        t += dt
    code = RUN_DONE if k0 + taken >= n_total else RUN_CHUNK_END
    return code, taken, nf, ncr, -1, 0, 0


__all__ = ["step_prepare", "step_finish", "run_kernel"]
