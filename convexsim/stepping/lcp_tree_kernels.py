"""The rigid LCP step of a model with kinematic trees as one numba call (the compiled twin of
``stepping.lcp_trees.lcp_trees_step``), and the assembly pieces both paths share.

Shared with the reference (one formula, called from both): :func:`pd_terms` (an implicit PD actuator's
c = dt·Kp + Kd and f₀ = −Kp (q₀ − q_d) + Kd v_d + u_ff), :func:`fold_pd` (the actuators folded into a
tree's block of A and v*, with the effort saturation), :func:`regularize_normals` (M_ii ← (1 + ε) M_ii on
the contact normal rows), and ``lcp_dense.assemble_dense`` (the dense (M, q)).

:func:`lcp_tree_step_kernel`, stage by stage, through the kernels of the modules that own the math:

1. finite start state, margin shares, collision and the pair-reach filter, the tree filter
   (``contacts.margin_shares`` / ``collide_and_filter``, ``tree_kernels.drop_tree_pairs``: the SAP tree
   step's contact set);
2. free motion: free bodies (``dynamics.free_motion_kernel``) and the forest A = M(q₀) + dt·D, v*
   (``tree_kernels.forest_kinematics``, ``multibody.dynamics.forest_free_motion``: CRBA, RNEA), assembled
   over v = (free bodies 6 by 6 | tree_v);
3. PD actuators folded into A and v* per tree (:func:`fold_pd`, targets at t by
   ``joint_constraints.pd_target``); 1-dof joint-limit sides in their window
   (``joint_constraints.limit_in_window``) as unilateral rows J = ±e_d with gap ±(q₀ − bound); each joint
   coupler q_i = ρ q_j + Δ as the bilateral pair ±(e_i − ρ e_j) with gaps ±g;
4. contact frames (``dynamics.contact_frame``), dense contact Jacobian rows (free bodies
   ``dynamics.jacobian_block``; links R_WCᵀ J_P with ``kinematics.path_point_jacobian``), contacts whose
   normal row moves nothing dropped; gap term b = max(φ, 0)/dt + s·min(φ, 0)/dt, μ combined per contact;
5. A⁻¹, the dense (M, q) (``lcp_dense.assemble_dense``), the contact normals regularized
   (:func:`regularize_normals`), one Lemke run (``lcp_compiled_kernels.lemke_run``: the revised kernel with
   ``lemke``'s defaults), v⁺ = v* + A⁻¹W z, impulses, actuator, limit and coupler forces;
6. integration (``tree_kernels.integrate_forest``, shared with the SAP tree step): free bodies, trees, link
   rows at the new q.

Whatever the kernel does not take returns a status other than ``LCP_OK`` (``lcp_compiled_kernels``' codes)
and the reference step takes the step (the dispatcher, on a Handoff): non-finite data, an LCP of the large
size whose Lemke runs are capped (``lcp_stepper.LARGE_ISLAND_SIZE``), the first Lemke run failing (the
reference then runs its fallback chain). Units SI throughout.
"""

from __future__ import annotations

import math

import numpy as np

from convexsim._jit import jit
from convexsim.dynamics import contact_frame, jacobian_block
from convexsim.multibody.kinematics import path_point_jacobian
from convexsim.sap.joint_constraints import limit_in_window, pd_target
from convexsim.sap.newton import F_DT
from convexsim.stepping.compiled_kernels import first_nonfinite_body
from convexsim.stepping.contacts import collide_and_filter, margin_shares
from convexsim.stepping.lcp_compiled_kernels import (J_MAX_PIVOTS, J_NDIR, LCP_LEMKE_FAILED, LCP_NONFINITE_DATA,
                                                     LCP_NONFINITE_END, LCP_NONFINITE_START, LCP_OK, LCP_TOO_LARGE,
                                                     combined_friction, lemke_run)
from convexsim.stepping.lcp_dense import assemble_dense
from convexsim.stepping.tree_kernels import drop_tree_pairs, free_motion_stage, integrate_forest

ROW_LIMIT = 0
ROW_COUPLER = 1


@jit
def pd_terms(dt, kp, kd, q0, q_d, v_d, u_ff):
    """(c, f₀) of an implicit PD actuator u = −Kp (q₀ + dt v − q_d) − Kd (v − v_d) + u_ff = f₀ − c v:
    c = dt·Kp + Kd [N·m·s/rad or N·s/m], f₀ = −Kp (q₀ − q_d) + Kd v_d + u_ff [N·m or N]."""
    return dt * kp + kd, -kp * (q0 - q_d) + kd * v_d + u_ff


@jit
def fold_pd(blk, vs, dof, c, f0, effort, dt):
    """A tree's block of A and v* with its PD actuators folded in (``lcp_trees`` module docstring).

    ``blk`` (n, n) = M + dt·D, ``vs`` (n,) its v*; per actuator its tree-local ``dof``, ``c``, ``f0``
    (:func:`pd_terms`) and ``effort`` limit [N·m or N]. An implicit actuator adds dt·c to A_dd and dt·f₀ to
    (A v*)_d; one whose implicit force of the new free motion exceeds ±effort applies ±effort explicitly
    instead (dt·(±effort) on (A v*)_d), decided in at most two passes.

    Returns (A' (n, n), v*' (n,), the explicit force of each actuator (0 unless saturated), saturated flags).
    """
    na = dof.shape[0]
    rhs = blk @ vs
    sat = np.zeros(na)
    saturated = np.zeros(na, np.bool_)
    A = blk.copy()
    out = vs.copy()
    for _ in range(2):                      # implicit; saturated actuators become explicit ±effort
        A = blk.copy()
        r = rhs.copy()
        for i in range(na):
            d = dof[i]
            if saturated[i]:
                r[d] += dt * sat[i]
            else:
                A[d, d] += dt * c[i]
                r[d] += dt * f0[i]
        out = np.linalg.solve(A, r)
        changed = False
        for i in range(na):
            if not saturated[i]:
                u = f0[i] - c[i] * out[dof[i]]
                if abs(u) > effort[i]:
                    sat[i] = math.copysign(effort[i], u)
                    saturated[i] = True
                    changed = True
        if not changed:
            break
    return A, out, sat, saturated


@jit
def regularize_normals(M, nc, eps):
    """M_ii ← (1 + ε) M_ii on the first ``nc`` rows (the contact normals), in place (``lcp_trees``)."""
    for i in range(nc):
        M[i, i] *= 1.0 + eps


@jit
def free_motion(fpar, mb, fa, q, v, tq, tv):
    """(A (nv, nv), v* (nv,), S) over v = (free bodies 6 by 6 | tree_v): the free bodies' spatial masses and
    the forest's A = M(q₀) + dt·D with their v* (``tree_kernels.free_motion_stage``, shared with the SAP tree
    step) in one dense matrix, S the forest's motion subspaces at q₀ (for the contact Jacobians)."""
    nmov = mb[3].shape[0]
    nvt = tv.shape[0]
    nv = 6 * nmov + nvt
    A_free, vs_free, A_tree, vs_tree, S = free_motion_stage(fpar, mb, fa, q, v, tq, tv)
    A = np.zeros((nv, nv))
    v_star = np.empty(nv)
    for m in range(nmov):
        for i in range(6):
            v_star[6 * m + i] = vs_free[6 * m + i]
            for j in range(6):
                A[6 * m + i, 6 * m + j] = A_free[36 * m + 6 * i + j]
    for i in range(nvt):
        v_star[6 * nmov + i] = vs_tree[i]
        for j in range(nvt):
            A[6 * nmov + i, 6 * nmov + j] = A_tree[i, j]
    return A, v_star, S


@jit
def contact_rows(mb, fa, nmov, q, S, geoms, point, normal, R_WC, J):
    """Dense contact Jacobian rows J[c] (3, nv) over v = (free bodies | tree_v), (t1, t2, n) in the contact
    frame R_WC[c] (written): side B with +, side A with −, a side on a tree without dofs or a fixed body
    contributes nothing (``articulated.contact_jacobian``)."""
    body_dof, geom_body = mb[2], mb[9]
    parent, dofadr, nvj = fa[0], fa[6], fa[7]
    tree_vstart, tree_nv, body_tree, body_local = fa[14], fa[15], fa[17], fa[20]
    max_tree = 1
    for k in range(tree_nv.shape[0]):
        max_tree = max(max_tree, tree_nv[k])
    Jp = np.empty((3, max_tree))
    blk = np.empty(18)
    for c in range(geoms.shape[0]):
        contact_frame(normal[c], R_WC[c])
        for s in range(2):
            body = geom_body[geoms[c, 1 - s]]
            sign = 1.0 if s == 0 else -1.0
            if body_dof[body] >= 0:
                col0 = body_dof[body]
                jacobian_block(R_WC[c], point[c], q, body, sign, blk, 0)
                for r in range(3):
                    for j in range(6):
                        J[c, r, col0 + j] += blk[6 * r + j]
            elif body_tree[body] >= 0 and tree_nv[body_tree[body]] > 0:
                k = body_tree[body]
                n = tree_nv[k]
                path_point_jacobian(parent, dofadr, nvj, S, body_local[body], point[c, 0], point[c, 1],
                                    point[c, 2], tree_vstart[k], Jp)
                col0 = 6 * nmov + tree_vstart[k]
                for r in range(3):
                    for j in range(n):
                        acc = R_WC[c, 0, r] * Jp[0, j] + R_WC[c, 1, r] * Jp[1, j] + R_WC[c, 2, r] * Jp[2, j]
                        J[c, r, col0 + j] += sign * acc


@jit
def fold_forest_pd(fa, ra, t, dt, tq, nmov, A, v_star, act_c, act_f0, act_sat, act_saturated):
    """:func:`fold_pd` on every tree with dofs (A, v* over the whole v, in place); per packed actuator its
    c, f₀, explicit force and saturation flag (written). Targets at time t [s] (``pd_target``)."""
    tree_vstart, tree_nv = fa[14], fa[15]
    act_ptr, act_dof, act_qadr, act_kp, act_kd, act_uff = ra[5], ra[6], ra[7], ra[8], ra[9], ra[10]
    act_effort, act_vel, act_tptr, act_times, act_values = ra[11], ra[12], ra[13], ra[14], ra[15]
    for k in range(tree_vstart.shape[0]):
        n = tree_nv[k]
        if n == 0:
            continue
        s0 = 6 * nmov + tree_vstart[k]
        a0, a1 = act_ptr[k], act_ptr[k + 1]
        na = a1 - a0
        dof = np.empty(na, np.int64)
        for i in range(na):
            a = a0 + i
            dof[i] = act_dof[a] - tree_vstart[k]
            q_d, v_d = pd_target(t, act_times[act_tptr[a]:act_tptr[a + 1]], act_values[act_tptr[a]:act_tptr[a + 1]],
                                 act_vel[a])
            act_c[a], act_f0[a] = pd_terms(dt, act_kp[a], act_kd[a], tq[act_qadr[a]], q_d, v_d, act_uff[a])
        blk = np.ascontiguousarray(A[s0:s0 + n, s0:s0 + n])
        vs = np.ascontiguousarray(v_star[s0:s0 + n])
        Ak, vk, sat, saturated = fold_pd(blk, vs, dof, act_c[a0:a1].copy(), act_f0[a0:a1].copy(),
                                         act_effort[a0:a1].copy(), dt)
        A[s0:s0 + n, s0:s0 + n] = Ak
        v_star[s0:s0 + n] = vk
        for i in range(na):
            act_sat[a0 + i] = sat[i]
            act_saturated[a0 + i] = saturated[i]


@jit
def joint_rows(fa, ra, dt, tq, tv, nmov, v_star, row_type, row_owner, row_sign, row_gap, row_dofs, row_coef):
    """The limit sides entering this step (tree by tree, lower then upper: J = ±e_d, gap ±(q₀ − bound)),
    then each joint coupler's bilateral pair (J = ±(e_i − ρ e_j), gap ±(q_i − ρ q_j − Δ); a coupler whose row
    moves no dof is skipped). Row r's J is Σ_k row_coef[r, k] e_{row_dofs[r, k]} (global dofs; −1 none).
    Returns the number of rows."""
    tree_vstart = fa[14]
    lim_ptr, lim_dof, lim_qadr, lim_lower, lim_upper = ra[0], ra[1], ra[2], ra[3], ra[4]
    jc_di, jc_qi, jc_dj, jc_qj, jc_rho, jc_offset = ra[23], ra[24], ra[26], ra[27], ra[29], ra[30]
    nr = 0
    for k in range(tree_vstart.shape[0]):
        for n in range(lim_ptr[k], lim_ptr[k + 1]):
            d = lim_dof[n]
            q0 = tq[lim_qadr[n]]
            for side in range(2):
                bound = lim_lower[n] if side == 0 else lim_upper[n]
                sign = 1.0 if side == 0 else -1.0
                if not limit_in_window(dt, q0, bound, int(sign), tv[d], v_star[6 * nmov + d]):
                    continue
                row_type[nr], row_owner[nr], row_sign[nr] = ROW_LIMIT, n, sign
                row_gap[nr] = sign * (q0 - bound)
                row_dofs[nr, 0], row_dofs[nr, 1] = 6 * nmov + d, -1
                row_coef[nr, 0], row_coef[nr, 1] = sign, 0.0
                nr += 1
    for n in range(jc_di.shape[0]):
        di, dj, rho = jc_di[n], jc_dj[n], jc_rho[n]
        if di == dj and rho == 1.0:          # J = 0: the row moves no dof
            continue
        g = tq[jc_qi[n]] - rho * tq[jc_qj[n]] - jc_offset[n]
        for side in range(2):
            sign = 1.0 if side == 0 else -1.0
            row_type[nr], row_owner[nr], row_sign[nr], row_gap[nr] = ROW_COUPLER, n, sign, sign * g
            row_dofs[nr, 0], row_dofs[nr, 1] = 6 * nmov + di, 6 * nmov + dj
            row_coef[nr, 0], row_coef[nr, 1] = sign, -sign * rho
            nr += 1
    return nr


@jit
def lcp_tree_step_kernel(fpar, mb, fa, ra, t, q, v, tq, tv, U, stabilization, eps, large_n, jpar, lpar,
                         q_out, v_out, tq_out, tv_out):
    """One rigid LCP step of a model with trees (module docstring) from (q, v, tree_q, tree_v) into the
    *_out arrays.

    Args:
        mb, fa, ra: the packed model (``compiled.PackedModel.model_arrays``), forest and joint rows
            (``compiled_trees.PackedForest``).
        t: time at the start of the step [s]; U: friction directions (d, 2); stabilization: s of the gap
            term; eps: the normal rows' regularization ε; large_n: LCP size from which the reference takes
            the step (its capped Lemke runs); jpar, lpar: ``lcp_compiled_kernels``' J_* and L_* settings.

    Returns:
        (status, bad body, geoms (nc, 2), phi, point, normal, gamma (nc, 3) [N·s], force_world (nc, 3) [N],
        actuator_force (nact,), limit_force (nlim,), coupler force (ncoupler,) [N·m or N], pivots, number of
        joint rows). A status other than LCP_OK: the outputs are not to be used.
    """
    fixed, moving, body_rb, geom_type, geom_size, geom_body = mb[1], mb[3], mb[6], mb[7], mb[8], mb[9]
    geom_pos, geom_quat, geom_rho, geom_mu = mb[10], mb[11], mb[12], mb[14]
    body_tree, body_moves, tree_base, body_sweep = fa[17], fa[18], fa[19], fa[21]
    dt = fpar[F_DT]
    nmov = moving.shape[0]
    nvt = tv.shape[0]
    nv = 6 * nmov + nvt
    nact = ra[6].shape[0]
    nlim = ra[1].shape[0]
    njc = ra[23].shape[0]
    act_force = np.zeros(nact)
    lim_force = np.zeros(nlim)
    con_force = np.zeros(njc)
    e2 = np.zeros((0, 2), np.int64)
    e3 = np.zeros((0, 3))
    bad = first_nonfinite_body(q, v)
    if bad >= 0:
        return (LCP_NONFINITE_START, bad, e2, np.zeros(0), e3, e3, e3, e3, act_force, lim_force, con_force, 0, 0)
    share = np.empty(fixed.shape[0])
    margin_shares(fpar, fixed, body_sweep, body_rb, v, share)
    for b in range(share.shape[0]):
        if not math.isfinite(share[b]):
            return (LCP_NONFINITE_START, b, e2, np.zeros(0), e3, e3, e3, e3, act_force, lim_force, con_force,
                    0, 0)
    geoms, phi, point, normal = collide_and_filter(fpar, fixed, body_sweep, body_rb, geom_type, geom_size,
                                                   geom_body, geom_pos, geom_quat, geom_rho, q, v)
    geoms, phi, point, normal = drop_tree_pairs(geoms, phi, point, normal, geom_body, body_tree, body_moves,
                                                tree_base)
    # free motion over v = (free bodies | tree_v), then the actuators folded in
    A, v_star, S = free_motion(fpar, mb, fa, q, v, tq, tv)
    act_c = np.zeros(nact)
    act_f0 = np.zeros(nact)
    act_sat = np.zeros(nact)
    act_saturated = np.zeros(nact, np.bool_)
    fold_forest_pd(fa, ra, t, dt, tq, nmov, A, v_star, act_c, act_f0, act_sat, act_saturated)
    # joint rows, then contacts (idle normal rows dropped)
    nmax = 2 * nlim + 2 * njc
    row_type = np.empty(nmax, np.int64)
    row_owner = np.empty(nmax, np.int64)
    row_sign = np.empty(nmax)
    row_gap = np.empty(nmax)
    row_dofs = np.empty((nmax, 2), np.int64)
    row_coef = np.empty((nmax, 2))
    nl = joint_rows(fa, ra, dt, tq, tv, nmov, v_star, row_type, row_owner, row_sign, row_gap, row_dofs, row_coef)
    nc0 = phi.shape[0]
    R_all = np.empty((nc0, 3, 3))
    J_all = np.zeros((nc0, 3, nv))
    contact_rows(mb, fa, nmov, q, S, geoms, point, normal, R_all, J_all)
    nc = 0
    for c in range(nc0):                     # keep the contacts whose normal row moves something, in order
        moves = False
        for j in range(nv):
            if J_all[c, 2, j] != 0.0:
                moves = True
        if not moves:
            continue
        geoms[nc] = geoms[c]
        phi[nc] = phi[c]
        point[nc] = point[c]
        normal[nc] = normal[c]
        R_all[nc] = R_all[c]
        J_all[nc] = J_all[c]
        nc += 1
    geoms, phi, point, normal, R_WC = geoms[:nc], phi[:nc], point[:nc], normal[:nc], R_all[:nc]
    m = nc + nl
    J = np.zeros((m, 3, nv))
    bias = np.empty(m)
    mu = np.zeros(m)
    mu_c = combined_friction(geom_mu, geoms)
    for c in range(nc):
        J[c] = J_all[c]
        bias[c] = max(phi[c], 0.0) / dt + stabilization * min(phi[c], 0.0) / dt
        mu[c] = mu_c[c]
    for r in range(nl):
        for k in range(2):
            if row_dofs[r, k] >= 0:
                J[nc + r, 2, row_dofs[r, k]] += row_coef[r, k]
        g = row_gap[r]
        bias[nc + r] = max(g, 0.0) / dt + stabilization * min(g, 0.0) / dt
    gamma = np.zeros((nc, 3))
    force = np.zeros((nc, 3))
    v_next = v_star.copy()
    pivots = 0
    if m > 0:
        d = 0
        for c in range(nc):
            if mu[c] > 0:
                d = jpar[J_NDIR]
        Ui = U if d else np.zeros((0, 2))
        Ainv = np.linalg.inv(A)
        M, qv, _W, AinvW = assemble_dense(Ainv, v_star, J, bias, mu, Ui, d)
        regularize_normals(M, nc, eps)
        n = qv.shape[0]
        for a in range(n):
            if not math.isfinite(qv[a]):
                return (LCP_NONFINITE_DATA, -1, geoms, phi, point, normal, gamma, force, act_force, lim_force,
                        con_force, 0, nl)
            for b in range(n):
                if not math.isfinite(M[a, b]):
                    return (LCP_NONFINITE_DATA, -1, geoms, phi, point, normal, gamma, force, act_force,
                            lim_force, con_force, 0, nl)
        if jpar[J_MAX_PIVOTS] <= 0 and n >= large_n:
            return (LCP_TOO_LARGE, -1, geoms, phi, point, normal, gamma, force, act_force, lim_force, con_force,
                    0, nl)
        status, pivots, z, _basis = lemke_run(M, qv, jpar[J_MAX_PIVOTS], lpar, jpar)
        if status != 0:
            return (LCP_LEMKE_FAILED, -1, geoms, phi, point, normal, gamma, force, act_force, lim_force,
                    con_force, pivots, nl)
        nw = AinvW.shape[1]
        dv = np.dot(AinvW, np.ascontiguousarray(z[:nw]))
        for j in range(nv):
            v_next[j] = v_star[j] + dv[j]
        for c in range(nc):
            gamma[c, 2] = z[c]
            for j in range(d):
                beta = z[m + c * d + j]
                gamma[c, 0] += beta * U[j, 0]
                gamma[c, 1] += beta * U[j, 1]
            for i in range(3):
                force[c, i] = (R_WC[c, i, 0] * gamma[c, 0] + R_WC[c, i, 1] * gamma[c, 1]
                               + R_WC[c, i, 2] * gamma[c, 2]) / dt
        for r in range(nl):
            p = z[nc + r]
            if row_type[r] == ROW_LIMIT:
                lim_force[row_owner[r]] += row_sign[r] * p / dt
            else:
                con_force[row_owner[r]] += row_sign[r] * p / dt
    for a in range(nact):
        if act_saturated[a]:
            act_force[a] = act_sat[a]
        else:
            act_force[a] = act_f0[a] - act_c[a] * v_next[6 * nmov + ra[6][a]]
    bad = integrate_forest(fpar, fa, moving, q, v, tq, v_next, q_out, v_out, tq_out, tv_out)
    if bad >= 0:
        return (LCP_NONFINITE_END, bad, geoms, phi, point, normal, gamma, force, act_force, lim_force, con_force,
                pivots, nl)
    return LCP_OK, -1, geoms, phi, point, normal, gamma, force, act_force, lim_force, con_force, pivots, nl
