"""The whole SAP step of a model with kinematic trees as one numba call (the compiled twin of
``stepping.articulated.articulated_sap_step``).

The stages, in the order of the reference step, each calling the kernel of the module that owns its math:

1. finite start state; per-body margin shares (``contacts.margin_shares``, links sweeping like free
   bodies, as ``articulated.detect_contacts``), collision and the pair-reach filter
   (``contacts.collide_and_filter``), then the tree filter: pairs within one tree, pairs of a
   link and the body its tree hangs from, and pairs of two bodies without dofs are dropped;
2. poses and motion subspaces of the forest at q0 (``multibody.kinematics.fk_kernel``,
   ``subspace_kernel``), free motion of the trees A = M + dt·D, v* (``multibody.dynamics.forest_free_motion``:
   CRBA, RNEA, implicit joint damping) and of the free bodies (``dynamics.free_motion_kernel``);
3. joint rows of every tree, as ``multibody.reference_step.constraint_rows`` builds them: limit sides in
   their window (``joint_constraints.limit_in_window``, near-rigid ``holonomic_row_kernel``), PD actuators
   with the targets at t (``joint_constraints.pd_target``, ``pd_row_kernel``), couplers;
4. contact frames, Jacobian blocks (``dynamics.jacobian_block`` on free bodies, R_WCᵀ J_P with the
   tree's point Jacobian ``kinematics.path_point_jacobian`` on links), Delassus estimate and contact
   kernel parameters (``compiled_kernels.contact_parameters``);
5. one SAP Newton solve (``sap.newton.newton_solve``) over the participating cliques (free bodies,
   6 dofs; trees, nv_k dofs) with the contacts and the joint rows as constraints of one problem (a joint
   row is a constraint of kind ≥ ``sap.constraints.KIND_ROW_MIN`` whose block carries J in its first row);
6. integration (:func:`integrate_forest`): free bodies by ``dynamics.integrate_kernel``, trees by
   ``kinematics.integrate_q_kernel``; link rows of q, v by forward kinematics at the new q
   (``kinematics.link_rows_kernel``).

The forest is packed once per model into flat arrays (``stepping.compiled_trees.PackedForest``), one
MultibodyModel-like set of arrays for all trees (parents first; the trees' q and v are ``State.tree_q`` and
``State.tree_v``), so CRBA gives a block-diagonal M over the trees. Units SI throughout.
"""

from __future__ import annotations

import math

import numpy as np

from convexsim._jit import jit
from convexsim.multibody.dynamics import forest_free_motion
from convexsim.multibody.kinematics import (fk_kernel, integrate_q_kernel, link_rows_kernel, path_point_jacobian,
                                            subspace_kernel)
from convexsim.sap import blocks
from convexsim.sap.constraints import KIND_SAP, NPAR
from convexsim.sap.joint_constraints import (BETA_JOINT, KIND_COUPLER, KIND_LIMIT, KIND_PD, LIMIT_STIFFNESS,
                                             holonomic_row_kernel, limit_in_window, pd_row_kernel, pd_target)
from convexsim.dynamics import contact_frame, free_motion_kernel, integrate_kernel, jacobian_block
from convexsim.sap.newton import (F_DT, I_CONTACT_KIND, I_ISLAND_MAX_DOFS, I_STRICT, SAP_CONVERGED, clique_graph,
                                  islands, newton_solve, no_supernodal)
from convexsim.stepping.compiled_kernels import (RUN_CHUNK_END, RUN_DONE, RUN_NEED_CONTACT_SPACE, STEP_BAD_MARGIN,
                                                 STEP_NONFINITE_END, STEP_NONFINITE_START, STEP_OK, STEP_SOLVER_FAILED,
                                                 STEP_TOO_LARGE, contact_parameters, count_step,
                                                 first_nonfinite_body, record_frame)
from convexsim.stepping.contacts import collide_and_filter, margin_shares, move_contact_row


@jit
def forest_kinematics(fa, tq):
    """(R_WB, p_WB, R_WJ, S) of the packed forest ``fa`` at tree_q ``tq`` (fk_kernel, subspace_kernel)."""
    parent, jtype, axis, jpos, jrot, qadr, dofadr = fa[0], fa[1], fa[2], fa[3], fa[4], fa[5], fa[6]
    nb = parent.shape[0]
    R_WB = np.empty((nb, 3, 3))
    p_WB = np.empty((nb, 3))
    R_WJ = np.empty((nb, 3, 3))
    fk_kernel(parent, jtype, axis, jpos, jrot, qadr, tq, R_WB, p_WB, R_WJ)
    S = np.zeros((6, fa[11].shape[0]))
    subspace_kernel(jtype, axis, dofadr, R_WJ, p_WB, S)
    return R_WB, p_WB, R_WJ, S


@jit
def tree_rows(fa, ra, t, dt, tq, tv, A, v_star, row_tree, row_kind, row_owner, row_J, row_par):
    """Joint rows of every tree at (q0, v0) = (tq, tv) with A, v* of the step (``reference_step.constraint_rows``
    tree by tree: limit sides in their window, then PD actuators, then couplers). Writes row r's tree,
    kind, owner (index into the packed limits, actuators or couplers), J (nv_tree; tree-local dofs, in the
    first n columns of row_J[r]) and par (R, v̂, γ_lo, γ_hi). Returns the number of rows."""
    tree_vstart = fa[14]
    lim_ptr, lim_dof, lim_qadr, lim_lower, lim_upper = ra[0], ra[1], ra[2], ra[3], ra[4]
    act_ptr, act_dof, act_qadr, act_kp, act_kd, act_uff = ra[5], ra[6], ra[7], ra[8], ra[9], ra[10]
    act_effort, act_vel, act_tptr, act_times, act_values = ra[11], ra[12], ra[13], ra[14], ra[15]
    cp_ptr, cp_di, cp_qi, cp_dj, cp_qj, cp_rho, cp_offset = ra[16], ra[17], ra[18], ra[19], ra[20], ra[21], ra[22]
    nr = 0
    for k in range(tree_vstart.shape[0]):
        s0 = tree_vstart[k]
        for n in range(lim_ptr[k], lim_ptr[k + 1]):
            d = lim_dof[n]
            q0 = tq[lim_qadr[n]]
            w = 1.0 * 1.0 / A[d, d]
            for side in range(2):
                bound = lim_lower[n] if side == 0 else lim_upper[n]
                sign = 1.0 if side == 0 else -1.0
                if not math.isfinite(bound):
                    continue
                if not limit_in_window(dt, q0, bound, int(sign), tv[d], v_star[d]):
                    continue
                g = q0 - bound if side == 0 else bound - q0
                R, v_hat = holonomic_row_kernel(dt, g, w, LIMIT_STIFFNESS, dt, BETA_JOINT)
                row_tree[nr], row_kind[nr], row_owner[nr] = k, KIND_LIMIT, n
                row_J[nr, :] = 0.0
                row_J[nr, d - s0] = sign
                row_par[nr, 0], row_par[nr, 1], row_par[nr, 2], row_par[nr, 3] = R, v_hat, 0.0, np.inf
                nr += 1
        for n in range(act_ptr[k], act_ptr[k + 1]):
            d = act_dof[n]
            w = 1.0 * 1.0 / A[d, d]
            a0, a1 = act_tptr[n], act_tptr[n + 1]
            q_d, v_d = pd_target(t, act_times[a0:a1], act_values[a0:a1], act_vel[n])
            R, v_hat = pd_row_kernel(dt, tq[act_qadr[n]], q_d, v_d, act_uff[n], act_kp[n], act_kd[n], w,
                                     BETA_JOINT)
            row_tree[nr], row_kind[nr], row_owner[nr] = k, KIND_PD, n
            row_J[nr, :] = 0.0
            row_J[nr, d - s0] = 1.0
            e = act_effort[n]
            row_par[nr, 0], row_par[nr, 1], row_par[nr, 2], row_par[nr, 3] = R, v_hat, -dt * e, dt * e
            nr += 1
        for n in range(cp_ptr[k], cp_ptr[k + 1]):
            row_J[nr, :] = 0.0
            row_J[nr, cp_di[n] - s0] += 1.0
            row_J[nr, cp_dj[n] - s0] -= cp_rho[n]
            w = 0.0
            for j in range(row_J.shape[1]):
                if row_J[nr, j] != 0.0:
                    w += row_J[nr, j] * row_J[nr, j] / A[s0 + j, s0 + j]
            g = tq[cp_qi[n]] - cp_rho[n] * tq[cp_qj[n]] - cp_offset[n]
            R, v_hat = holonomic_row_kernel(dt, g, w, np.inf, 0.0, BETA_JOINT)
            row_tree[nr], row_kind[nr], row_owner[nr] = k, KIND_COUPLER, n
            row_par[nr, 0], row_par[nr, 1], row_par[nr, 2], row_par[nr, 3] = R, v_hat, -np.inf, np.inf
            nr += 1
    return nr


@jit
def joint_coupler_rows(ra, dt, tq, A, jr_index, jr_par):
    """Rows of the scene's joint couplers q_i = ρ q_j + Δ between 1-dof joints of any trees (``forest.JointCoupler``,
    as ``body_constraints.constraint_rows`` builds them: g = q_i − ρ q_j − Δ, J = e_i − ρ e_j over the
    forest's dofs, w = Σ J²/A_kk, rigid ``holonomic_row_kernel``; a row that moves no dof is skipped).
    Writes the coupler index and (R, v̂, −∞, ∞) of each row; returns the number of rows."""
    jc_di, jc_qi, jc_dj, jc_qj, jc_rho, jc_offset = ra[23], ra[24], ra[26], ra[27], ra[29], ra[30]
    n_out = 0
    for n in range(jc_di.shape[0]):
        di, dj, rho = jc_di[n], jc_dj[n], jc_rho[n]
        if di == dj:
            w = (1.0 - rho) * (1.0 - rho) / A[di, di]
        else:
            w = 1.0 * 1.0 / A[di, di] + rho * rho / A[dj, dj]
        if not w > 0.0:
            continue
        g = tq[jc_qi[n]] - rho * tq[jc_qj[n]] - jc_offset[n]
        R, v_hat = holonomic_row_kernel(dt, g, w, np.inf, 0.0, BETA_JOINT)
        jr_index[n_out] = n
        jr_par[n_out, 0], jr_par[n_out, 1], jr_par[n_out, 2], jr_par[n_out, 3] = R, v_hat, -np.inf, np.inf
        n_out += 1
    return n_out


@jit
def free_motion_stage(fpar, mb, fa, q, v, tq, tv):
    """Stage 3 of a step of a model with trees: the free bodies' spatial masses (36 per body) and v* (6 per
    body) by ``dynamics.free_motion_kernel``; the forest's A = M(q₀) + dt·D (nvt, nvt) and v* (nvt,) by
    ``multibody.dynamics.forest_free_motion`` at the poses of :func:`forest_kinematics`. Returns (A_free,
    vs_free, A_tree, vs_tree, S) with S the forest's motion subspaces at q₀ (for the contact Jacobians)."""
    gravity, body_dof, moving, mass, inertia = mb[0], mb[2], mb[3], mb[4], mb[5]
    nmov = moving.shape[0]
    nvt = tv.shape[0]
    A_free = np.empty(36 * nmov)
    vs_free = np.empty(6 * nmov)
    free_motion_kernel(fpar, gravity, body_dof, mass, inertia, q, v, moving, A_free, vs_free)
    R_WB, p_WB, _, S = forest_kinematics(fa, tq)
    A_tree = np.empty((nvt, nvt))
    vs_tree = np.empty(nvt)
    forest_free_motion(fa[0], fa[1], fa[6], fa[7], S, R_WB, p_WB, fa[8], fa[9], fa[10], fa[11], fa[12], fa[13],
                       tv, fpar[F_DT], fa[14], fa[15], A_tree, vs_tree)
    return A_free, vs_free, A_tree, vs_tree, S


@jit
def add_joint_forces(fa, dt, A_tree, vs_tree, tau):
    """The free motion under applied joint forces τ (nvt,) [N·m or N] (a controller's torques): v* gains
    dt·A⁻¹τ, tree by tree on the blocks of A = M(q₀) + dt·D (``multibody.forest.tree_step_data``'s v* =
    v₀ + dt·A⁻¹(τ − h − D v₀), to round-off)."""
    tree_vstart, tree_nv = fa[14], fa[15]
    for k in range(tree_vstart.shape[0]):
        s, n = tree_vstart[k], tree_nv[k]
        hit = False
        for i in range(n):
            hit = hit or tau[s + i] != 0.0
        if not hit:
            continue
        x = np.linalg.solve(np.ascontiguousarray(A_tree[s:s + n, s:s + n]), np.ascontiguousarray(tau[s:s + n]))
        for i in range(n):
            vs_tree[s + i] += dt * x[i]


@jit
def control_pd_targets(ra, dt, tq, A_tree, target, target_v, nr, row_kind, row_owner, row_par):
    """PD rows of actuators with a controller's target (``target[n]`` not NaN; ``target_v[n]``, NaN: 0)
    instead of their scene schedule: (R, v̂) again by ``pd_row_kernel`` at (q_d, v_d) (the rows of
    :func:`tree_rows`, ``multibody.forest.current_actuators``'s rule)."""
    act_dof, act_qadr, act_kp, act_kd, act_uff = ra[6], ra[7], ra[8], ra[9], ra[10]
    for r in range(nr):
        n = row_owner[r]
        if row_kind[r] != KIND_PD or target[n] != target[n]:
            continue
        v_d = target_v[n] if target_v[n] == target_v[n] else 0.0
        d = act_dof[n]
        R, v_hat = pd_row_kernel(dt, tq[act_qadr[n]], target[n], v_d, act_uff[n], act_kp[n], act_kd[n],
                                 1.0 / A_tree[d, d], BETA_JOINT)
        row_par[r, 0], row_par[r, 1] = R, v_hat


@jit
def integrate_forest(fpar, fa, moving, q, v, tq, v_next, q_out, v_out, tq_out, tv_out):
    """Stage 6 of a step of a model with trees, from the new velocities v_next = (free bodies 6 each | the
    trees' joint velocities): free bodies by ``dynamics.integrate_kernel``, the trees' q by
    ``kinematics.integrate_q_kernel``, the link rows of (q, v) by forward kinematics at the new q
    (``kinematics.link_rows_kernel``). Writes q_out, v_out, tq_out, tv_out; returns the first body whose new
    state is not finite, or −1."""
    parent, jtype, qadr, dofadr, nvj, com, link_body = fa[0], fa[1], fa[5], fa[6], fa[7], fa[9], fa[16]
    nmov = moving.shape[0]
    integrate_kernel(fpar, moving, q, v, v_next[:6 * nmov].copy(), q_out, v_out)
    for i in range(tv_out.shape[0]):
        tv_out[i] = v_next[6 * nmov + i]
    integrate_q_kernel(jtype, qadr, dofadr, tq, tv_out, fpar[F_DT], tq_out)
    R1, p1, _, S1 = forest_kinematics(fa, tq_out)
    link_rows_kernel(parent, dofadr, nvj, com, R1, p1, S1, tv_out, link_body, q_out, v_out)
    return first_nonfinite_body(q_out, v_out)


@jit
def drop_tree_pairs(geoms, phi, point, normal, geom_body, body_tree, body_moves, tree_base):
    """The contacts without those within one tree, between a link and the fixed body its tree hangs from,
    and between two bodies without dofs (``articulated.detect_contacts``), in their order."""
    keep = 0
    for c in range(phi.shape[0]):
        a = geom_body[geoms[c, 0]]
        b = geom_body[geoms[c, 1]]
        ta, tb = body_tree[a], body_tree[b]
        if ta >= 0 and ta == tb:
            continue
        if not body_moves[a] and not body_moves[b]:
            continue
        if (tb >= 0 and tree_base[tb] == a) or (ta >= 0 and tree_base[ta] == b):
            continue
        move_contact_row(geoms, phi, point, normal, c, keep)
        keep += 1
    return geoms[:keep], phi[:keep], point[:keep], normal[:keep]


@jit(inline="always")
def tree_step_kernel(fpar, ipar, mb, fa, ra, t, q, v, tq, tv, ctl, q_out, v_out, tq_out, tv_out):
    """One SAP step of a model with trees (module docstring) from (q, v, tree_q, tree_v) into the *_out arrays.

    ``mb``: the free-body model arrays of ``compiled.PackedModel`` (the tuple its kernels take), with
    ``body_dof`` for free bodies only; ``fa``, ``ra``: the packed forest and its joint rows
    (``compiled_trees.PackedForest``); t: the time at the start of the step [s]; ``ctl``: the step's controls
    (target (nact,), target velocity (nact,), joint forces (nvt,); ``convexsim.controls.ControlArrays``).

    Returns (status, bad_body, sap_status, iterations, ls_evaluations, relative residual, geoms (nc, 2),
    phi, point, normal, gamma (nc, 3), force_world (nc, 3) [N], actuator_force (nact,) [N·m or N],
    limit_force (nlim,) [N·m or N], joint-coupler force (ncoupler,) [N·m or N] (γ/dt on its joint), number of
    joint rows). Status STEP_TOO_LARGE (an island above the
    dense limit) and STEP_BAD_MARGIN leave the outputs unwritten: the caller takes the reference step."""
    (gravity, fixed, body_dof, moving, mass, inertia, body_rb, geom_type, geom_size, geom_body, geom_pos,
     geom_quat, geom_rho, geom_k, geom_mu, geom_tau, geom_d) = mb
    parent, jtype, dofadr, nvj, com = fa[0], fa[1], fa[6], fa[7], fa[9]
    tree_vstart, tree_nv, body_tree, body_moves, tree_base, body_local, body_sweep = (
        fa[14], fa[15], fa[17], fa[18], fa[19], fa[20], fa[21])
    dt = fpar[F_DT]
    nmov = moving.shape[0]
    ntree = tree_vstart.shape[0]
    nvt = tv.shape[0]
    nact = ra[6].shape[0]
    nlim = ra[1].shape[0]
    act_force = np.zeros(nact)
    lim_force = np.zeros(nlim)
    e2 = np.zeros((0, 2), np.int64)
    e3 = np.zeros((0, 3))
    bad = first_nonfinite_body(q, v)
    if bad >= 0:
        return (STEP_NONFINITE_START, bad, 0, 0, 0, 0.0, e2, np.zeros(0), e3, e3, e3, e3, act_force, lim_force,
                np.zeros(ra[23].shape[0]), 0)
    share = np.empty(fixed.shape[0])
    margin_shares(fpar, fixed, body_sweep, body_rb, v, share)
    for b in range(share.shape[0]):
        if not math.isfinite(share[b]):
            return (STEP_BAD_MARGIN, b, 0, 0, 0, 0.0, e2, np.zeros(0), e3, e3, e3, e3, act_force, lim_force,
                    np.zeros(ra[23].shape[0]), 0)
    geoms, phi, point, normal = collide_and_filter(fpar, fixed, body_sweep, body_rb, geom_type, geom_size,
                                                   geom_body, geom_pos, geom_quat, geom_rho, q, v)
    geoms, phi, point, normal = drop_tree_pairs(geoms, phi, point, normal, geom_body, body_tree, body_moves,
                                                tree_base)
    nc = phi.shape[0]
    A_free, vs_free, A_tree, vs_tree, S = free_motion_stage(fpar, mb, fa, q, v, tq, tv)
    add_joint_forces(fa, dt, A_tree, vs_tree, ctl[2])
    # joint rows
    nmax_rows = 2 * nlim + nact + ra[17].shape[0]
    max_tree = 1
    for k in range(ntree):
        max_tree = max(max_tree, tree_nv[k])
    row_tree = np.empty(nmax_rows, np.int64)
    row_kind = np.empty(nmax_rows, np.int64)
    row_owner = np.empty(nmax_rows, np.int64)
    row_J = np.empty((nmax_rows, max_tree))
    row_par = np.empty((nmax_rows, 4))
    nr = tree_rows(fa, ra, t, dt, tq, tv, A_tree, vs_tree, row_tree, row_kind, row_owner, row_J, row_par)
    control_pd_targets(ra, dt, tq, A_tree, ctl[0], ctl[1], nr, row_kind, row_owner, row_par)
    njc = ra[23].shape[0]
    jc_ti, jc_tj, jc_di, jc_dj, jc_rho = ra[25], ra[28], ra[23], ra[26], ra[29]
    jr_index = np.empty(njc, np.int64)
    jr_par = np.empty((njc, 4))
    njr = joint_coupler_rows(ra, dt, tq, A_tree, jr_index, jr_par)
    con_force = np.zeros(njc)
    # cliques: free bodies 0..nmov-1, then every tree with dofs
    tree_clique = -np.ones(ntree, np.int64)
    ncl_all = nmov
    for k in range(ntree):
        if tree_nv[k] > 0:
            tree_clique[k] = ncl_all
            ncl_all += 1
    size_all = np.empty(ncl_all, np.int64)
    start_all = np.empty(ncl_all, np.int64)     # offset in the full v = (free bodies | trees)
    for m in range(nmov):
        size_all[m] = 6
        start_all[m] = 6 * m
    for k in range(ntree):
        if tree_clique[k] >= 0:
            size_all[tree_clique[k]] = tree_nv[k]
            start_all[tree_clique[k]] = 6 * nmov + tree_vstart[k]
    # contact sides: (clique, sign, body) sorted by clique
    R_WC = np.empty((nc, 3, 3))
    side_cl = -np.ones((nc, 2), np.int64)
    side_body = -np.ones((nc, 2), np.int64)
    side_sign = np.zeros((nc, 2))
    nJ = 0
    for c in range(nc):
        contact_frame(normal[c], R_WC[c])
        ns = 0
        for s in range(2):
            body = geom_body[geoms[c, 1 - s]]           # side B (+) first, then A (−), as the reference
            sign = 1.0 if s == 0 else -1.0
            cl = -1
            if body_dof[body] >= 0:
                cl = body_dof[body] // 6
            elif body_tree[body] >= 0:
                cl = tree_clique[body_tree[body]]
            if cl < 0:
                continue
            side_cl[c, ns], side_body[c, ns], side_sign[c, ns] = cl, body, sign
            nJ += 3 * size_all[cl]
            ns += 1
        if ns == 2 and side_cl[c, 1] < side_cl[c, 0]:
            x = side_cl[c, 0]
            side_cl[c, 0] = side_cl[c, 1]
            side_cl[c, 1] = x
            x = side_body[c, 0]
            side_body[c, 0] = side_body[c, 1]
            side_body[c, 1] = x
            x2 = side_sign[c, 0]
            side_sign[c, 0] = side_sign[c, 1]
            side_sign[c, 1] = x2
    # participating cliques
    used = np.zeros(ncl_all, np.bool_)
    for c in range(nc):
        for s in range(2):
            if side_cl[c, s] >= 0:
                used[side_cl[c, s]] = True
    for r in range(nr):
        used[tree_clique[row_tree[r]]] = True
    for r in range(njr):
        used[tree_clique[jc_ti[jr_index[r]]]] = True
        used[tree_clique[jc_tj[jr_index[r]]]] = True
    new_index = -np.ones(ncl_all, np.int64)
    ncl = 0
    for m in range(ncl_all):
        if used[m]:
            new_index[m] = ncl
            ncl += 1
    sizes = np.empty(ncl, np.int64)
    cstart = np.empty(ncl, np.int64)
    A_ptr = np.empty(ncl, np.int64)
    nA = 0
    nvr = 0
    for m in range(ncl_all):
        k = new_index[m]
        if k >= 0:
            sizes[k] = size_all[m]
            cstart[k] = nvr
            A_ptr[k] = nA
            nvr += size_all[m]
            nA += size_all[m] * size_all[m]
    A_red = np.empty(nA)
    vs_red = np.empty(nvr)
    v_red = np.empty(nvr)
    for m in range(ncl_all):
        k = new_index[m]
        if k < 0:
            continue
        n = size_all[m]
        if m < nmov:
            for i in range(36):
                A_red[A_ptr[k] + i] = A_free[36 * m + i]
            b = moving[m]
            for i in range(6):
                vs_red[cstart[k] + i] = vs_free[6 * m + i]
                v_red[cstart[k] + i] = v[b, i]
        else:
            s0 = start_all[m] - 6 * nmov
            for i in range(n):
                for j in range(n):
                    A_red[A_ptr[k] + i * n + j] = A_tree[s0 + i, s0 + j]
                vs_red[cstart[k] + i] = vs_tree[s0 + i]
                v_red[cstart[k] + i] = tv[s0 + i]
    # constraints: contacts, then joint rows; Jacobian blocks (3 x n_c, row-major)
    nk = nc + nr + njr
    for r in range(nr):
        nJ += 3 * tree_nv[row_tree[r]]
    for r in range(njr):
        n = jr_index[r]
        nJ += 3 * tree_nv[jc_ti[n]]
        if jc_tj[n] != jc_ti[n]:
            nJ += 3 * tree_nv[jc_tj[n]]
    J_values = np.zeros(nJ)
    J_ptr = -np.ones((nk, 2), np.int64)
    cl_red = -np.ones((nk, 2), np.int64)
    off = 0
    Jp = np.empty((3, max_tree))
    for c in range(nc):
        for s in range(2):
            cl = side_cl[c, s]
            if cl < 0:
                continue
            J_ptr[c, s] = off
            cl_red[c, s] = new_index[cl]
            body = side_body[c, s]
            sign = side_sign[c, s]
            if cl < nmov:
                jacobian_block(R_WC[c], point[c], q, body, sign, J_values, off)
                off += 18
            else:
                k = body_tree[body]
                n = tree_nv[k]
                path_point_jacobian(parent, dofadr, nvj, S, body_local[body], point[c, 0], point[c, 1],
                                    point[c, 2], tree_vstart[k], Jp)
                for r in range(3):
                    for j in range(n):
                        acc = R_WC[c, 0, r] * Jp[0, j] + R_WC[c, 1, r] * Jp[1, j] + R_WC[c, 2, r] * Jp[2, j]
                        J_values[off + r * n + j] = sign * acc
                off += 3 * n
    # contact kernel parameters: Delassus estimate over the contacts' blocks, normal velocities at v0
    w = np.empty(nc)
    blocks.delassus_estimate(cstart, sizes, A_ptr, A_red, cl_red[:nc].copy(), J_ptr[:nc].copy(), J_values, w)
    for c in range(nc):
        if not w[c] > 0.0:
            w[c] = 1.0
    vn0 = np.empty(0)
    if ipar[I_CONTACT_KIND] != KIND_SAP:
        vc0 = np.empty((nc, 3))
        blocks.constraint_velocities(cstart, sizes, cl_red[:nc].copy(), J_ptr[:nc].copy(), J_values, v_red, vc0)
        vn0 = vc0[:, 2].copy()
    kind_c, cpar_c = contact_parameters(fpar, ipar, geoms, phi, w, vn0, geom_k, geom_mu, geom_tau, geom_d)
    kind = np.empty(nk, np.int64)
    cpar = np.zeros((nk, NPAR))
    for c in range(nc):
        kind[c] = kind_c[c]
        for i in range(NPAR):
            cpar[c, i] = cpar_c[c, i]
    for r in range(nr):
        i = nc + r
        k = row_tree[r]
        n = tree_nv[k]
        kind[i] = row_kind[r]
        for j in range(4):
            cpar[i, j] = row_par[r, j]
        cl_red[i, 0] = new_index[tree_clique[k]]
        J_ptr[i, 0] = off
        for j in range(n):
            J_values[off + j] = row_J[r, j]
        off += 3 * n
    for r in range(njr):                       # joint couplers: one side per tree, sides in clique order
        i = nc + nr + r
        n = jr_index[r]
        ti, tj = jc_ti[n], jc_tj[n]
        kind[i] = KIND_COUPLER
        for j in range(4):
            cpar[i, j] = jr_par[r, j]
        if ti == tj:
            cl_red[i, 0] = new_index[tree_clique[ti]]
            J_ptr[i, 0] = off
            J_values[off + jc_di[n] - tree_vstart[ti]] += 1.0
            J_values[off + jc_dj[n] - tree_vstart[ti]] -= jc_rho[n]
            off += 3 * tree_nv[ti]
        else:
            first = 0 if tree_clique[ti] < tree_clique[tj] else 1
            for s_ in range(2):
                tk = ti if s_ == 0 else tj
                side = s_ if first == 0 else 1 - s_
                cl_red[i, side] = new_index[tree_clique[tk]]
                J_ptr[i, side] = off
                if s_ == 0:
                    J_values[off + jc_di[n] - tree_vstart[tk]] = 1.0
                else:
                    J_values[off + jc_dj[n] - tree_vstart[tk]] = -jc_rho[n]
                off += 3 * tree_nv[tk]
    # Newton
    v_next = np.empty(6 * nmov + nvt)
    for i in range(6 * nmov):
        v_next[i] = vs_free[i]
    for i in range(nvt):
        v_next[6 * nmov + i] = vs_tree[i]
    gamma = np.zeros((nc, 3))
    force = np.zeros((nc, 3))
    status = SAP_CONVERGED
    iterations = 0
    ls_evals = 0
    resid = 0.0
    if nk > 0:
        edges, constraint_edge = clique_graph(cl_red)
        island, nisl = islands(ncl, edges)
        isl_size = np.zeros(nisl, np.int64)
        for c in range(ncl):
            isl_size[island[c]] += sizes[c]
        for i in range(nisl):
            if isl_size[i] > ipar[I_ISLAND_MAX_DOFS]:
                return (STEP_TOO_LARGE, -1, 0, 0, 0, 0.0, geoms, phi, point, normal, gamma, force, act_force,
                        lim_force, con_force, nr + njr)
        sn, sn_edges = no_supernodal()
        status, iterations, ls_evals, rr, ss, gamma_all, too_large = newton_solve(
            fpar, ipar, cstart, sizes, A_ptr, A_red, vs_red, cl_red, J_ptr, J_values, kind, cpar, v_red, edges,
            constraint_edge, False, sn, sn_edges)
        resid = rr / ss if ss > 0 else rr
        for c in range(nc):
            for i in range(3):
                gamma[c, i] = gamma_all[c, i]
            for i in range(3):
                force[c, i] = (R_WC[c, i, 0] * gamma[c, 0] + R_WC[c, i, 1] * gamma[c, 1]
                               + R_WC[c, i, 2] * gamma[c, 2]) / dt
        for r in range(nr):
            g = gamma_all[nc + r, 0]
            if row_kind[r] == KIND_PD:
                act_force[row_owner[r]] = g / dt
            elif row_kind[r] == KIND_LIMIT:
                d = 0
                for j in range(row_J.shape[1]):
                    if row_J[r, j] != 0.0:
                        d = j
                lim_force[row_owner[r]] += row_J[r, d] * g / dt
        for r in range(njr):
            con_force[jr_index[r]] = gamma_all[nc + nr + r, 0] / dt
        for m in range(ncl_all):
            k = new_index[m]
            if k < 0:
                continue
            for i in range(size_all[m]):
                v_next[start_all[m] + i] = v_red[cstart[k] + i]
        if status != SAP_CONVERGED:
            finite = True
            for i in range(v_next.shape[0]):
                if not math.isfinite(v_next[i]):
                    finite = False
            if ipar[I_STRICT] != 0 or not finite:
                return (STEP_SOLVER_FAILED, -1, status, iterations, ls_evals, resid, geoms, phi, point, normal,
                        gamma, force, act_force, lim_force, con_force, nr + njr)
    bad = integrate_forest(fpar, fa, moving, q, v, tq, v_next, q_out, v_out, tq_out, tv_out)
    if bad >= 0:
        return (STEP_NONFINITE_END, bad, status, iterations, ls_evals, resid, geoms, phi, point, normal, gamma,
                force, act_force, lim_force, con_force, nr + njr)
    return (STEP_OK, -1, status, iterations, ls_evals, resid, geoms, phi, point, normal, gamma, force, act_force,
            lim_force, con_force, nr + njr)


@jit
def tree_run_kernel(fpar, ipar, mb, fa, ra, t0, q, v, tq, tv, ctl, k0, n_total, max_steps, record_every,
                    fr_step, fr_q, fr_v, fr_stat, fr_resid, fr_nc, fr_act, fr_lim, fr_con, st,
                    c_body, c_geom, c_point, c_normal, c_phi, c_gamma, c_force):
    """Advance (q, v, tree_q, tree_v) in place from step index k0 and time t0 [s] by up to ``max_steps``
    steps of :func:`tree_step_kernel` (never past ``n_total``); the frame and contact buffers, ``st`` and the
    return value as ``compiled_kernels.run_kernel``, plus per frame the actuator forces fr_act (frames, nact)
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
