"""The compiled LCP step: one composition of the stages for every model (:func:`lcp_step_kernel`); a model of
free bodies is a forest without trees. Only stage calls live here (docs/architecture.md):

1. start checks, collision with the margins, the pair rule (collision bits, tree pairs) and the pair-reach
   filter, contact frames
   (``contacts``), the same contact set as the SAP step;
2. free motion A, v* under the step's controls (``free_motion``: joint torques through the motors, body and
   link wrenches; free bodies: A block diagonal, 6 × 6 per body), the PD actuators of trees folded into A and
   v* at their scene targets or the controls' (``lcp_rows``);
3. dense contact Jacobian rows (``jacobians``), gap terms, combined μ, the trees' limit and coupler rows
   (``lcp_rows``);
4. the LCP solve (``lcp_solve``): with A block diagonal island by island with A⁻¹ per island, else one dense
   LCP; one Lemke run each;
5. impulses, forces and the new velocities (``post_solve``);
6. integration and the end-of-step check (``integration``).

Stages 2-6 have a free-body variant (:func:`step_free_bodies`) and a tree variant (:func:`step_forest`): a model
without trees is a forest of zero trees (``packing.PackedForest``) of the same array types, and the kernel is
specialized on the model's kind when numba compiles it (:data:`NO_TREES`), as the SAP
composition is, so that a free-body model's step carries no tree stage.

Whatever the kernel does not take returns a status other than ``status.LCP_OK`` before anything is
written, and the dispatcher (``stepping.dispatch``, on a Handoff) takes the step by the reference path, which
reports it as it always does: a first Lemke run that fails (the fallback chain, and ``LcpStepError`` if no
rung solves it), an island above the dense-assembly size, a warm-start-sized LCP, non-finite data, an LCP of
the tree step's large size.
"""

from __future__ import annotations

import math

import numpy as np

from convexsim._jit import jit
from convexsim.sap.newton import F_DT
from convexsim.stepping.contacts import collide_and_filter, combined_friction, contact_frames_kernel, start_check
from convexsim.stepping.free_motion import body_free_motion, dense_free_motion, motor_forces_kernel
from convexsim.stepping.integration import integrate_bodies, integrate_forest
from convexsim.stepping.jacobians import dense_contact_jacobian, dense_contact_rows, known_contact_velocities
from convexsim.stepping.lcp_rows import contact_bias, contact_keys_kernel, contact_lcp_rows, fold_forest_pd, joint_rows
from convexsim.stepping.lcp_solve import (contact_cliques, contact_islands_kernel, first_large_island,
                                          solve_dense_lcp, solve_island)
from convexsim.stepping.post_solve import actuator_forces, lcp_contact_impulses, lcp_joint_forces, world_forces
from convexsim.stepping.status import (J_DENSE_WORK, J_NDIR, J_WARM_MIN, LCP_NONFINITE_END, LCP_NONFINITE_START,
                                       LCP_OK, LCP_SINGULAR_MASS, LCP_TOO_LARGE, LCP_WARM_SIZE)


NO_TREES = 9
"""``len(forest)`` of a model without trees in :func:`lcp_step_kernel` (a model with trees adds a tenth item,
True): a constant to numba where the kernel is compiled (a tuple's length is part of its type), so that the
kernel's branch on it keeps one variant of stages 2-6 and numba prunes the other before inlining or typing it (as
the SAP composition's ``NO_TREES``)."""


@jit
def lcp_step_kernel(fpar, mb, q, v, U, stabilization, jpar, lpar, q_out, v_out, forest, pair_rule, ctl):
    """One LCP step (module docstring) from (q, v) into (q_out, v_out) (and the trees' state).

    Args:
        fpar, mb: the packed model (``packing.PackedModel``: fpar, model_arrays, then its kinematic flags).
        U: friction directions u_j in (t1, t2), shape (d, 2) (``lcp_problem.friction_directions``).
        stabilization: solver.lcp_stabilization s (gap term b = max(φ, 0)/dt + s·min(φ, 0)/dt).
        jpar, lpar: integer settings (``status.J_*`` slots) and Lemke tolerances (``status.L_*`` slots).
        forest: (fa, ra, t, tree_q, tree_v, eps, large_n, tree_q_out, tree_v_out[, True]): the packed forest and
            joint rows (``packing.PackedForest``; zero trees for a free-body model), the time at the start of the
            step [s], the trees' state and its outputs (empty without trees), the normal rows' regularization ε,
            the LCP size from which the reference takes the step of a model with trees (its capped Lemke runs),
            and for a model with trees a tenth item, True (the kernel is compiled once per model kind,
            :data:`NO_TREES`).
        pair_rule: the broad phase's pair rule (``packing.PackedModel.pair_rule``: collision bits, tree-pair
            rule), so that filtered pairs never reach the narrow phase.
        ctl: the step's controls, the SAP run kernel's (``controls.ControlArrays.kernel_controls``): PD targets
            and velocity targets (nact,; NaN: the scene's), joint torques as commanded (nvt,), the motors'
            dofs, constant torques and efforts, external wrenches (nbody, 6) [N·m, N].

    Returns:
        (status, island or body of the failure, geoms (m, 2), phi, point, normal, gamma (m, 3) [N·s],
        force_world (m, 3) [N], actuator force (nact,), limit force (nlim,), coupler force (ncoupler,)
        [N·m or N], pivots, joint rows, islands, per-contact basic z's (m, d + 2) bool, keys (m, 3)). Status
        other than LCP_OK: the outputs are not to be used.
    """
    fa, ra = forest[0], forest[1]
    sweep = fa[21]
    nact, nlim, njc = ra[6].shape[0], ra[1].shape[0], ra[23].shape[0]
    bad, bad_margin = start_check(fpar, mb[1], sweep, mb[6], q, v)
    if bad >= 0 or bad_margin >= 0:
        e3 = np.zeros((0, 3))
        return (LCP_NONFINITE_START, max(bad, bad_margin), np.zeros((0, 2), np.int64), np.zeros(0), e3, e3, e3,
                e3, np.zeros(nact), np.zeros(nlim), np.zeros(njc), 0, 0, 0,
                np.zeros((0, jpar[J_NDIR] + 2), np.bool_), np.zeros((0, 3), np.int64))
    geoms, phi, point, normal = collide_and_filter(fpar, mb[1], sweep, mb[6], mb[7], mb[8], mb[9], mb[10], mb[11],
                                                   mb[12], q, v, pair_rule[0], pair_rule[1])
    if len(forest) == NO_TREES:       # a constant where this kernel is compiled: one variant per model kind
        return step_free_bodies(fpar, mb, q, v, U, stabilization, jpar, lpar, q_out, v_out, geoms, phi, point,
                                normal, ctl[6])
    tq, tv = forest[3], forest[4]
    forces = np.empty(tv.shape[0])
    motor_forces_kernel(ctl[3], ctl[4], ctl[5], ctl[2], forces)
    return step_forest(fpar, mb, fa, ra, forest[2], q, v, tq, tv, U, stabilization, forest[5], forest[6], jpar, lpar,
                       q_out, v_out, forest[7], forest[8], geoms, phi, point, normal, (ctl[0], ctl[1], forces, ctl[6]))



@jit(inline="always")
def step_free_bodies(fpar, mb, q, v, U, stabilization, jpar, lpar, q_out, v_out, geoms, phi, point, normal,
                     wrench):
    """Stages 2-6 of a model without trees (A block diagonal) under the external wrenches ``wrench``
    (nbody, 6): the contact islands, each with A⁻¹ from its bodies' 6 × 6 blocks and one Lemke run; the result
    tuple of :func:`lcp_step_kernel`."""
    gravity, fixed, body_dof, moving, mass, inertia, geom_body, geom_mu = mb[0], mb[1], mb[2], mb[3], mb[4], mb[5], \
        mb[9], mb[14]
    nmov = moving.shape[0]
    dt = fpar[F_DT]
    d_set = jpar[J_NDIR]
    m = phi.shape[0]
    A_values, v_star = body_free_motion(fpar, gravity, body_dof, mass, inertia, q, v, moving, wrench)
    R_WC = contact_frames_kernel(normal)
    gamma = np.zeros((m, 3))
    force = np.zeros((m, 3))
    keys = contact_keys_kernel(geoms)
    mu = combined_friction(geom_mu, geoms)
    d_glob = d_set if np.any(mu > 0) else 0
    basic_pc = np.zeros((m, d_set + 2), np.bool_)
    e0 = np.zeros(0)
    glob_size = m * (d_glob + 2) if d_glob else m
    if m > 0 and jpar[J_WARM_MIN] >= 0 and glob_size >= jpar[J_WARM_MIN]:
        return (LCP_WARM_SIZE, -1, geoms, phi, point, normal, gamma, force, e0, e0, e0, 0, 0, 0, basic_pc, keys)
    J = np.zeros((m, 3, 6 * nmov))
    e = np.zeros(0, np.int64)
    dense_contact_jacobian(R_WC, geoms, point, q, geom_body, body_dof, e, e, e, e, e,
                           np.full(fixed.shape[0], -1, np.int64), e, np.zeros((6, 0)), nmov, J)
    bias = contact_bias(phi, dt, stabilization, known_contact_velocities(R_WC, geoms, point, q, v, geom_body, mb[17]))
    cliques = contact_cliques(geoms, geom_body, body_dof)
    island, nisl = contact_islands_kernel(cliques, nmov)
    big = first_large_island(island, nisl, cliques, mu, nmov, d_set, jpar[J_DENSE_WORK])
    if big >= 0:
        return (LCP_TOO_LARGE, big, geoms, phi, point, normal, gamma, force, e0, e0, e0, 0, 0, nisl, basic_pc, keys)
    v_next = v_star.copy()
    pivots = 0
    in_island = np.zeros(nmov, np.bool_)
    for i in range(nisl):
        status, piv = solve_island(i, island, cliques, nmov, A_values, v_star, J, bias, mu, U, jpar, lpar,
                                   in_island, v_next, gamma, basic_pc)
        pivots += piv
        if status != LCP_OK:
            return (status, i, geoms, phi, point, normal, gamma, force, e0, e0, e0, pivots, 0, nisl, basic_pc, keys)
    world_forces(R_WC, gamma, dt, force)
    bad = integrate_bodies(fpar, moving, mb[17], q, v, v_next, q_out, v_out)
    return (LCP_OK if bad < 0 else LCP_NONFINITE_END, bad, geoms, phi, point, normal, gamma, force, e0, e0, e0,
            pivots, 0, nisl, basic_pc, keys)


@jit(inline="always")
def step_forest(fpar, mb, fa, ra, t, q, v, tq, tv, U, stabilization, eps, large_n, jpar, lpar, q_out, v_out, tq_out,
                tv_out, geoms, phi, point, normal, ctl):
    """Stages 2-6 of a model with trees: the dense A under the controls ``ctl`` (target, target velocity,
    joint forces after the motors, wrenches; the joint forces are a work array) with the PD fold, the joint
    rows, one dense LCP with the contact normals regularized by ε; the result tuple of :func:`lcp_step_kernel`."""
    moving, geom_body = mb[3], mb[9]
    dt = fpar[F_DT]
    nmov = moving.shape[0]
    nact, nlim, njc = ra[6].shape[0], ra[1].shape[0], ra[23].shape[0]
    act_force, lim_force, con_force = np.zeros(nact), np.zeros(nlim), np.zeros(njc)
    A, v_star, S = dense_free_motion(fpar, mb, fa, q, v, tq, tv, ctl[2], ctl[3])
    for d in range(6 * nmov, v_star.shape[0]):    # finite start: a tree's M(q) singular, or forces overflow
        if not math.isfinite(v_star[d]):
            e3 = np.zeros((phi.shape[0], 3))
            return (LCP_SINGULAR_MASS, d - 6 * nmov, geoms, phi, point, normal, e3, e3.copy(), act_force, lim_force,
                    con_force, 0, 0, 0, np.zeros((0, jpar[J_NDIR] + 2), np.bool_), np.zeros((0, 3), np.int64))
    act_c, act_f0, act_sat = np.zeros(nact), np.zeros(nact), np.zeros(nact)
    act_saturated = np.zeros(nact, np.bool_)
    fold_forest_pd(fa, ra, t, dt, tq, nmov, A, v_star, ctl[0], ctl[1], act_c, act_f0, act_sat, act_saturated)
    nmax = 2 * nlim + 2 * njc
    row_type, row_owner = np.empty(nmax, np.int64), np.empty(nmax, np.int64)
    row_sign, row_gap = np.empty(nmax), np.empty(nmax)
    row_dofs, row_coef = np.empty((nmax, 2), np.int64), np.empty((nmax, 2))
    nl = joint_rows(fa, ra, dt, tq, tv, nmov, v_star, row_type, row_owner, row_sign, row_gap, row_dofs, row_coef)
    R_all = np.empty((phi.shape[0], 3, 3))
    J_all = np.zeros((phi.shape[0], 3, v_star.shape[0]))
    dense_contact_rows(mb, fa, nmov, q, S, geoms, point, normal, R_all, J_all)
    geoms, phi, point, normal, R_WC, J, bias, mu = contact_lcp_rows(geoms, phi, point, normal, R_all, J_all, nl,
                                                                    row_gap, row_dofs, row_coef, mb[14], dt,
                                                                    stabilization, q, v, geom_body, mb[17])
    nc = phi.shape[0]
    gamma, force = np.zeros((nc, 3)), np.zeros((nc, 3))
    basic_pc, keys = np.zeros((0, jpar[J_NDIR] + 2), np.bool_), np.zeros((0, 3), np.int64)
    v_next = v_star.copy()
    pivots = 0
    if nc + nl > 0:
        status, pivots, z, AinvW, d = solve_dense_lcp(A, v_star, J, bias, mu, nc, U, eps, large_n, jpar, lpar)
        if status != LCP_OK:
            return (status, -1, geoms, phi, point, normal, gamma, force, act_force, lim_force, con_force, pivots,
                    nl, 1, basic_pc, keys)
        dv = np.dot(AinvW, np.ascontiguousarray(z[:AinvW.shape[1]]))
        for j in range(v_next.shape[0]):
            v_next[j] = v_star[j] + dv[j]
        lcp_contact_impulses(z, nc, nc + nl, d, U, gamma)
        world_forces(R_WC, gamma, dt, force)
        lcp_joint_forces(z, nc, nl, row_type, row_owner, row_sign, dt, lim_force, con_force)
    actuator_forces(ra[6], nmov, act_c, act_f0, act_sat, act_saturated, v_next, act_force)
    bad = integrate_forest(fpar, fa, moving, mb[17], q, v, tq, v_next, q_out, v_out, tq_out, tv_out)
    return (LCP_OK if bad < 0 else LCP_NONFINITE_END, bad, geoms, phi, point, normal, gamma, force, act_force,
            lim_force, con_force, pivots, nl, 1, basic_pc, keys)


__all__ = ["lcp_step_kernel", "step_free_bodies", "step_forest"]
