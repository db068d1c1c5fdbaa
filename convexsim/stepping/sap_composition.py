"""The compiled SAP step: the composition of the stages, for free-body models and models with trees, and
the run loops that take many steps per numba call. Only stage calls live here; each stage's math is in its
module (docs/architecture.md, "The data path of one step"):

1. start checks, collision with the margins and the pair-reach filter, the tree-pair filter, contact frames
   (``contacts``);
2. free motion A, v* (``free_motion``);
3. the contacts' Jacobians (``jacobians``), the participating cliques, the contacts' kernel parameters and
   the joint rows (``sap_rows``);
4. the SAP Newton solve (``sap.newton.newton_solve``, the one Newton loop);
5. impulses to forces and the solved velocities back into v (``post_solve``);
6. integration and the end-of-step check (``integration``); recording (``recording``).

Free-body models: :func:`step_prepare` (1–3) and :func:`step_finish` (4–6); a step whose largest island is
above ``ipar[I_ISLAND_MAX_DOFS]`` is not taken by the run loop (STEP_TOO_LARGE): the caller takes it with
:func:`step_finish` on the supernodal factor of an analysis made in Python between the two calls
(``stepping.compiled``). Models with trees: :func:`tree_step_kernel`, which hands such a step to the reference.
:func:`run_kernel` and :func:`tree_run_kernel` advance many steps per call. There is no separately compiled
one-step kernel: numba emits the machine code of a kernel's whole call tree into every kernel compiled on its
own, so each extra entry point repeats the cost of compiling the step; a single step is the run kernel for
one step.
"""

from __future__ import annotations

import numpy as np

from convexsim._jit import jit
from convexsim.sap.constraints import NPAR
from convexsim.sap.newton import F_DT, I_ISLAND_MAX_DOFS, I_STRICT, SAP_CONVERGED, newton_solve, no_supernodal
from convexsim.stepping.contacts import (collide_and_filter, contact_frames_kernel, drop_tree_pairs,
                                         start_check)
from convexsim.stepping.free_motion import add_joint_forces, body_free_motion, free_motion_stage
from convexsim.stepping.integration import integrate_bodies, integrate_forest
from convexsim.stepping.jacobians import body_contact_blocks, forest_contact_blocks, forest_contact_sides
from convexsim.stepping.post_solve import contact_impulses, sap_joint_forces, scatter_cliques, solve_failed
from convexsim.stepping.recording import count_step, record_frame
from convexsim.stepping.sap_rows import (body_problem, contact_kernel_rows, control_pd_targets, forest_cliques,
                                         forest_joint_rows,
                                         forest_problem, forest_used_cliques, joint_row_blocks, joint_row_entries,
                                         largest_island)
from convexsim.stepping.status import (RUN_CHUNK_END, RUN_DONE, RUN_NEED_CONTACT_SPACE, STEP_BAD_MARGIN,
                                       STEP_NONFINITE_END, STEP_NONFINITE_START, STEP_OK, STEP_SOLVER_FAILED,
                                       STEP_TOO_LARGE)


# ---- free-body models

@jit
def no_prepared(status, bad, nmov):
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
    """Stages 1–3 of a step of a free-body model: everything before Newton.

    Returns (status, bad_body, largest island in dofs, prepared) with status STEP_OK, STEP_NONFINITE_START
    or STEP_BAD_MARGIN, and prepared = (geoms, phi, point, normal, R_WC, v_star (6 nmov), new_index (nmov),
    clique_start, clique_sizes, A_ptr, A_values, v_star of the cliques, cliques (nc, 2), J_ptr, J_values,
    kind, cpar, v0 of the cliques, edges (ne, 2), constraint_edge) — the participating problem in the flat
    layout of ``sap.ContactProblem`` and its clique graph, as :func:`step_finish` takes it."""
    nmov = moving.shape[0]
    bad, bad_margin = start_check(fpar, fixed, body_dof, body_rb, q, v)
    if bad >= 0:
        return no_prepared(STEP_NONFINITE_START, bad, nmov)
    if bad_margin >= 0:
        return no_prepared(STEP_BAD_MARGIN, bad_margin, nmov)
    geoms, phi, point, normal = collide_and_filter(fpar, fixed, body_dof, body_rb, geom_type, geom_size,
                                                   geom_body, geom_pos, geom_quat, geom_rho, q, v)
    A_values, v_star = body_free_motion(fpar, gravity, body_dof, mass, inertia, q, v, moving)
    R_WC = contact_frames_kernel(normal)
    cliques, J_ptr, J_values = body_contact_blocks(R_WC, geoms, point, q, geom_body, body_dof)
    new_index, sizes, cstart, A_ptr, A_red, vs_red, v_red, cl_red = body_problem(moving, v, A_values, v_star,
                                                                                 cliques)
    kind, cpar = contact_kernel_rows(fpar, ipar, geoms, phi, cstart, sizes, A_ptr, A_red, cl_red, J_ptr, J_values,
                                     v_red, geom_k, geom_mu, geom_tau, geom_d)
    edges, constraint_edge, max_n = largest_island(cstart.shape[0], sizes, cl_red)
    prep = (geoms, phi, point, normal, R_WC, v_star, new_index, cstart, sizes, A_ptr, A_red, vs_red, cl_red,
            J_ptr, J_values, kind, cpar, v_red, edges, constraint_edge)
    return STEP_OK, -1, max_n, prep


@jit
def step_finish(fpar, ipar, moving, q, v, q_out, v_out, prep, use_sn, sn, sn_edges):
    """Stages 4–6 of a step of a free-body model on what :func:`step_prepare` returned: Newton (dense
    Cholesky per island, or with ``use_sn`` the supernodal factor of the analysis ``sn`` of the pattern
    ``sn_edges``; see :func:`newton_solve`), impulses to world forces, integration.

    Returns (status, bad_body, sap_status, iterations, ls_evaluations, relative residual, gamma (nc, 3),
    force_world (nc, 3)); status STEP_TOO_LARGE: nothing was solved (island above the dense limit without
    ``use_sn``, or ``sn_edges`` misses an edge of the graph)."""
    (geoms, phi, point, normal, R_WC, v_star, new_index, cstart, sizes, A_ptr, A_red, vs_red, cl_red,
     J_ptr, J_values, kind, cpar, v_red, edges, constraint_edge) = prep
    nc = phi.shape[0]
    nmov = moving.shape[0]
    gamma = np.zeros((nc, 3))
    force = np.zeros((nc, 3))
    if nc == 0:
        bad = integrate_bodies(fpar, moving, q, v, v_star, q_out, v_out)
        if bad >= 0:
            return STEP_NONFINITE_END, bad, 0, 0, 0, 0.0, gamma, force
        return STEP_OK, -1, 0, 0, 0, 0.0, gamma, force
    v_red = v_red.copy()
    status, iterations, ls_evals, r, s, gamma_s, too_large = newton_solve(
        fpar, ipar, cstart, sizes, A_ptr, A_red, vs_red, cl_red, J_ptr, J_values, kind, cpar, v_red,
        edges, constraint_edge, use_sn, sn, sn_edges)
    if too_large:
        return STEP_TOO_LARGE, -1, 0, 0, 0, 0.0, gamma, force
    resid = r / s if s > 0 else r
    contact_impulses(R_WC, gamma_s, fpar[F_DT], gamma, force)
    v_next = v_star.copy()
    scatter_cliques(new_index, np.full(nmov, 6, np.int64), 6 * np.arange(nmov), cstart, v_red, v_next)
    if solve_failed(status, v_next, ipar[I_STRICT]):
        return STEP_SOLVER_FAILED, -1, status, iterations, ls_evals, resid, gamma, force
    bad = integrate_bodies(fpar, moving, q, v, v_next, q_out, v_out)
    if bad >= 0:
        return STEP_NONFINITE_END, bad, status, iterations, ls_evals, resid, gamma, force
    return STEP_OK, -1, status, iterations, ls_evals, resid, gamma, force


@jit
def run_kernel(fpar, ipar, gravity, fixed, body_dof, moving, mass, inertia, body_rb, geom_type, geom_size,
               geom_body, geom_pos, geom_quat, geom_rho, geom_k, geom_mu, geom_tau, geom_d,
               q, v, k0, n_total, max_steps, record_every,
               fr_step, fr_q, fr_v, fr_stat, fr_resid, fr_nc, st,
               c_body, c_geom, c_point, c_normal, c_phi, c_gamma, c_force):
    """Advance (q, v) in place from step index k0 by up to ``max_steps`` steps (never past ``n_total``),
    recording a frame after step k when (k + 1) % record_every == 0 or k + 1 == n_total.

    Frame buffers (one row per frame): fr_step (step index after the step), fr_q, fr_v, fr_stat
    (iterations, converged, line-search evaluations, sap status), fr_resid, fr_nc (contacts); contact
    rows: c_body (body_a, body_b), c_geom (geom_a, geom_b), c_point, c_normal, c_phi, c_gamma, c_force. Per step taken (row ``taken``):
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
    sn, sn_edges = no_supernodal()
    while taken < max_steps and k0 + taken < n_total:
        k = k0 + taken
        record = (k + 1) % record_every == 0 or k + 1 == n_total
        if record and nf >= fr_step.shape[0]:
            return RUN_CHUNK_END, taken, nf, ncr, -1, 0, 0
        status, bad, max_n, prep = step_prepare(fpar, ipar, gravity, fixed, body_dof, moving, mass, inertia,
                                                body_rb, geom_type, geom_size, geom_body, geom_pos, geom_quat,
                                                geom_rho, geom_k, geom_mu, geom_tau, geom_d, q, v)
        if status != STEP_OK:
            return status, taken, nf, ncr, bad, 0, 0
        if max_n > ipar[I_ISLAND_MAX_DOFS]:       # the caller takes this step with the supernodal factor
            return STEP_TOO_LARGE, taken, nf, ncr, -1, 0, 0
        geoms, phi, point, normal = prep[0], prep[1], prep[2], prep[3]
        (status, bad, sap_status, iterations, ls_evals, resid, gamma,
         force) = step_finish(fpar, ipar, moving, q, v, q_new, v_new, prep, False, sn, sn_edges)
        if status != STEP_OK:
            return status, taken, nf, ncr, bad, sap_status, iterations
        nc = phi.shape[0]
        if record:
            if ncr + nc > c_phi.shape[0]:
                return RUN_NEED_CONTACT_SPACE, taken, nf, ncr, -1, 0, nc
            ncr = record_frame(nf, ncr, k, q_new, v_new, False, iterations, sap_status, ls_evals, resid, geoms,
                               phi, point, normal, gamma, force, geom_body, fr_step, fr_q, fr_v, fr_stat, fr_resid,
                               fr_nc, c_body, c_geom, c_point, c_normal, c_phi, c_gamma, c_force)
            nf += 1
        count_step(st, taken, False, iterations, nc, sap_status, ls_evals, q, v, q_new, v_new)
        taken += 1
    code = RUN_DONE if k0 + taken >= n_total else RUN_CHUNK_END
    return code, taken, nf, ncr, -1, 0, 0




# ---- models with trees

@jit(inline="always")
def tree_problem(fpar, ipar, mb, fa, ra, t, q, v, tq, tv, ctl, geoms, phi, point, normal):
    """Stages 2–3 of a step of a model with trees on its contacts: free motion, joint rows, cliques, the
    contacts' Jacobians and kernel parameters, the joint rows' blocks — the participating problem in the flat
    layout of ``sap.ContactProblem``.

    Returns (R_WC, v* over v = (free bodies | trees), new_index, size_all, start_all, the problem (sizes,
    clique_start, A_ptr, A_values, v*, v₀, cliques, J_ptr, J_values, kind, cpar), the joint rows (nr, row_kind,
    row_owner, row_J, njr, jr_index))."""
    (gravity, fixed, body_dof, moving, mass, inertia, body_rb, geom_type, geom_size, geom_body, geom_pos,
     geom_quat, geom_rho, geom_k, geom_mu, geom_tau, geom_d) = mb
    tree_vstart, tree_nv, body_tree = fa[14], fa[15], fa[17]
    nmov = moving.shape[0]
    nc = phi.shape[0]
    A_free, vs_free, A_tree, vs_tree, S = free_motion_stage(fpar, mb, fa, q, v, tq, tv)
    add_joint_forces(fa, fpar[F_DT], A_tree, vs_tree, ctl[2])
    nr, row_tree, row_kind, row_owner, row_J, row_par, njr, jr_index, jr_par = forest_joint_rows(
        fa, ra, t, fpar[F_DT], tq, tv, A_tree, vs_tree)
    control_pd_targets(ra, fpar[F_DT], tq, A_tree, ctl[0], ctl[1], nr, row_kind, row_owner, row_par)
    tree_clique, size_all, start_all = forest_cliques(nmov, tree_nv, tree_vstart)
    R_WC = contact_frames_kernel(normal)
    side_cl, side_body, side_sign, nJ = forest_contact_sides(geoms, geom_body, body_dof, body_tree, tree_clique,
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
                                         J_ptr[:nc].copy(), J_values, v_red, geom_k, geom_mu, geom_tau, geom_d)
    kind = np.empty(nk, np.int64)
    cpar = np.zeros((nk, NPAR))
    kind[:nc] = kind_c
    cpar[:nc] = cpar_c
    joint_row_blocks(ra, tree_nv, tree_vstart, tree_clique, new_index, nc, nr, row_tree, row_kind, row_J, row_par,
                     njr, jr_index, jr_par, kind, cpar, cl_red, J_ptr, J_values, off)
    v_next = np.concatenate((vs_free, vs_tree))
    problem = (sizes, cstart, A_ptr, A_red, vs_red, v_red, cl_red, J_ptr, J_values, kind, cpar)
    return R_WC, v_next, new_index, size_all, start_all, problem, (nr, row_kind, row_owner, row_J, njr, jr_index)


@jit(inline="always")
def tree_step_kernel(fpar, ipar, mb, fa, ra, t, q, v, tq, tv, ctl, q_out, v_out, tq_out, tv_out):
    """One SAP step of a model with trees from (q, v, tree_q, tree_v) into the *_out arrays.

    ``mb``: the free-body model arrays of ``packing.PackedModel`` (the tuple its kernels take), with
    ``body_dof`` for free bodies only; ``fa``, ``ra``: the packed forest and its joint rows
    (``packing.PackedForest``); t: the time at the start of the step [s]; ``ctl``: the step's controls
    (target (nact,), target velocity (nact,), joint forces (nvt,); ``convexsim.controls.ControlArrays``).

    Returns (status, bad_body, sap_status, iterations, ls_evaluations, relative residual, geoms (nc, 2),
    phi, point, normal, gamma (nc, 3), force_world (nc, 3) [N], actuator_force (nact,) [N·m or N],
    limit_force (nlim,) [N·m or N], joint-coupler force (ncoupler,) [N·m or N] (γ/dt on its joint), number of
    joint rows). Status STEP_TOO_LARGE (an island above the dense limit) and STEP_BAD_MARGIN leave the outputs
    unwritten: the caller takes the reference step."""
    fixed, moving, body_rb, geom_body = mb[1], mb[3], mb[6], mb[9]
    dt = fpar[F_DT]
    act_force = np.zeros(ra[6].shape[0])
    lim_force = np.zeros(ra[1].shape[0])
    con_force = np.zeros(ra[23].shape[0])
    e3 = np.zeros((0, 3))
    bad, bad_margin = start_check(fpar, fixed, fa[21], body_rb, q, v)
    if bad >= 0 or bad_margin >= 0:
        return (STEP_NONFINITE_START if bad >= 0 else STEP_BAD_MARGIN, max(bad, bad_margin), 0, 0, 0, 0.0,
                np.zeros((0, 2), np.int64), np.zeros(0), e3, e3, e3, e3, act_force, lim_force, con_force, 0)
    geoms, phi, point, normal = collide_and_filter(fpar, fixed, fa[21], body_rb, mb[7], mb[8], geom_body, mb[10],
                                                   mb[11], mb[12], q, v)
    geoms, phi, point, normal = drop_tree_pairs(geoms, phi, point, normal, geom_body, fa[17], fa[18], fa[19])
    nc = phi.shape[0]
    R_WC, v_next, new_index, size_all, start_all, problem, rows = tree_problem(fpar, ipar, mb, fa, ra, t, q, v, tq,
                                                                               tv, ctl, geoms, phi, point, normal)
    sizes, cstart, A_ptr, A_red, vs_red, v_red, cl_red, J_ptr, J_values, kind, cpar = problem
    nr, row_kind, row_owner, row_J, njr, jr_index = rows
    gamma = np.zeros((nc, 3))
    force = np.zeros((nc, 3))
    status, iterations, ls_evals, resid = SAP_CONVERGED, 0, 0, 0.0
    if kind.shape[0] > 0:
        edges, constraint_edge, max_n = largest_island(sizes.shape[0], sizes, cl_red)
        if max_n > ipar[I_ISLAND_MAX_DOFS]:
            return (STEP_TOO_LARGE, -1, 0, 0, 0, 0.0, geoms, phi, point, normal, gamma, force, act_force,
                    lim_force, con_force, nr + njr)
        sn, sn_edges = no_supernodal()
        status, iterations, ls_evals, rr, ss, gamma_all, too_large = newton_solve(
            fpar, ipar, cstart, sizes, A_ptr, A_red, vs_red, cl_red, J_ptr, J_values, kind, cpar, v_red, edges,
            constraint_edge, False, sn, sn_edges)
        resid = rr / ss if ss > 0 else rr
        contact_impulses(R_WC, gamma_all, dt, gamma, force)
        sap_joint_forces(gamma_all, nc, nr, row_kind, row_owner, row_J, njr, jr_index, dt, act_force, lim_force,
                         con_force)
        scatter_cliques(new_index, size_all, start_all, cstart, v_red, v_next)
        if solve_failed(status, v_next, ipar[I_STRICT]):
            return (STEP_SOLVER_FAILED, -1, status, iterations, ls_evals, resid, geoms, phi, point, normal,
                    gamma, force, act_force, lim_force, con_force, nr + njr)
    bad = integrate_forest(fpar, fa, moving, q, v, tq, v_next, q_out, v_out, tq_out, tv_out)
    return (STEP_OK if bad < 0 else STEP_NONFINITE_END, bad, status, iterations, ls_evals, resid, geoms, phi,
            point, normal, gamma, force, act_force, lim_force, con_force, nr + njr)


@jit
def tree_run_kernel(fpar, ipar, mb, fa, ra, t0, q, v, tq, tv, ctl, k0, n_total, max_steps, record_every,
                    fr_step, fr_q, fr_v, fr_stat, fr_resid, fr_nc, fr_act, fr_lim, fr_con, st,
                    c_body, c_geom, c_point, c_normal, c_phi, c_gamma, c_force):
    """Advance (q, v, tree_q, tree_v) in place from step index k0 and time t0 [s] by up to ``max_steps``
    steps of :func:`tree_step_kernel` (never past ``n_total``); the frame and contact buffers, ``st`` and the
    return value as :func:`run_kernel`, plus per frame the actuator forces fr_act (frames, nact)
    and limit forces fr_lim (frames, nlim) and joint-coupler forces fr_con (frames, ncoupler) [N·m or N]. The time of step j is t0 + j·dt accumulated step by
    step, as the Python loop does. ``ctl``: the controls of every step (:func:`tree_step_kernel`)."""
    geom_body = mb[9]
    dt = fpar[F_DT]
    nf = 0
    ncr = 0
    taken = 0
    t = t0
    q_new = np.empty_like(q)
    v_new = np.empty_like(v)
    tq_new = np.empty_like(tq)
    tv_new = np.empty_like(tv)
    while taken < max_steps and k0 + taken < n_total:
        k = k0 + taken
        record = (k + 1) % record_every == 0 or k + 1 == n_total
        if record and nf >= fr_step.shape[0]:
            return RUN_CHUNK_END, taken, nf, ncr, -1, 0, 0
        (status, bad, sap_status, iterations, ls_evals, resid, geoms, phi, point, normal, gamma, force,
         act_force, lim_force, con_force, nrows) = tree_step_kernel(fpar, ipar, mb, fa, ra, t, q, v, tq, tv, ctl, q_new, v_new,
                                                         tq_new, tv_new)
        if status != STEP_OK:
            return status, taken, nf, ncr, bad, sap_status, iterations
        nc = phi.shape[0]
        quiet = nc == 0 and nrows == 0           # no problem solved: StepInfo's defaults
        if record:
            if ncr + nc > c_phi.shape[0]:
                return RUN_NEED_CONTACT_SPACE, taken, nf, ncr, -1, 0, nc
            ncr = record_frame(nf, ncr, k, q_new, v_new, quiet, iterations, sap_status, ls_evals, resid, geoms,
                               phi, point, normal, gamma, force, geom_body, fr_step, fr_q, fr_v, fr_stat, fr_resid,
                               fr_nc, c_body, c_geom, c_point, c_normal, c_phi, c_gamma, c_force)
            fr_act[nf] = act_force
            fr_lim[nf] = lim_force
            fr_con[nf] = con_force
            nf += 1
        count_step(st, taken, quiet, iterations, nc, sap_status, ls_evals, q, v, q_new, v_new)
        tq[:] = tq_new
        tv[:] = tv_new
        taken += 1
        t += dt
    code = RUN_DONE if k0 + taken >= n_total else RUN_CHUNK_END
    return code, taken, nf, ncr, -1, 0, 0



__all__ = ["step_prepare", "step_finish", "run_kernel", "tree_step_kernel", "tree_run_kernel"]
