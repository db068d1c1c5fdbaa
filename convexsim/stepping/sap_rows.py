"""Stage: the rows of the SAP problem: the participating cliques, the contacts' kernel parameters and the
joint rows (limits, PD actuators, couplers), in the flat block layout of ``sap.ContactProblem``.

* Contacts: the Delassus estimate w (``blocks.delassus_estimate``, 1 where it is not positive), the normal
  velocities at v₀ for the Hunt–Crossley models, the combined materials (``contacts.combine_materials``, the
  one rule) and the contact model's kernel parameters (``friction_cone.regularization`` for SAP,
  ``hunt_crossley.hc_kernel_parameters`` otherwise): :func:`contact_kernel_rows`; a kinematic body's known
  velocity shifts the bias v̂ of its contacts (:func:`kinematic_contact_rows`).
* Joint rows of the trees, as ``multibody.reference_step.constraint_rows`` builds them (the numpy
  reference): limit sides in their window (``joint_constraints.limit_in_window``, near-rigid
  ``holonomic_row_kernel``), PD actuators with their targets at t (``pd_target``, ``pd_row_kernel``),
  couplers within a tree (:func:`tree_rows`), and the scene's joint couplers between trees
  (:func:`joint_coupler_rows`); a joint row is a constraint of kind ≥ ``sap.constraints.KIND_ROW_MIN``
  whose block carries J in its first row (:func:`joint_row_blocks`).
* Cliques: free bodies (6 dofs) and trees (nv_k dofs); only the cliques a constraint touches enter the
  problem (:func:`body_problem`, :func:`forest_problem`); the clique graph and its largest island
  (:func:`largest_island`, which decides the dense or the supernodal factor).
"""

from __future__ import annotations

import math

import numpy as np

from convexsim._jit import jit
from convexsim.sap import blocks
from convexsim.sap.constraints import KIND_SAP, NPAR
from convexsim.sap.friction_cone import regularization
from convexsim.sap.hunt_crossley import hc_kernel_parameters
from convexsim.sap.joint_constraints import (BETA_JOINT, KIND_COUPLER, KIND_LIMIT, KIND_PD, LIMIT_STIFFNESS,
                                             holonomic_row_kernel, limit_in_window, pd_row_kernel, pd_target)
from convexsim.sap.newton import F_BETA, F_DT, F_SIGMA, F_VS, I_CONTACT_KIND, clique_graph, islands
from convexsim.stepping.contacts import combine_materials
from convexsim.stepping.jacobians import known_contact_velocities


# ---- contacts

@jit
def contact_parameters(fpar, ipar, geoms, phi, w, vn0, geom_k, geom_mu, geom_tau, geom_d):
    """(kind (nc,), cpar (nc, NPAR)) of the contacts: combined materials (``contacts.combine_materials``)
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
        k_arr[c], mu_arr[c], tau_arr[c], d_arr[c] = combine_materials(
            geom_k[ga], geom_k[gb], geom_mu[ga], geom_mu[gb], geom_tau[ga], geom_tau[gb], geom_d[ga], geom_d[gb])
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
def contact_kernel_rows(fpar, ipar, geoms, phi, cstart, sizes, A_ptr, A_red, cl, J_ptr, J_values, v_red,
                        geom_k, geom_mu, geom_tau, geom_d):
    """(kind (nc,), cpar (nc, NPAR)) of the contacts (the first nc rows of ``cl``, ``J_ptr``) of a problem in
    the block layout: the Delassus estimate w, the normal velocities at v₀ = v_red for the Hunt–Crossley
    models, then :func:`contact_parameters`."""
    nc = phi.shape[0]
    w = np.empty(nc)
    blocks.delassus_estimate(cstart, sizes, A_ptr, A_red, cl, J_ptr, J_values, w)
    for c in range(nc):
        if not w[c] > 0.0:
            w[c] = 1.0
    vn0 = np.empty(0)
    if ipar[I_CONTACT_KIND] != KIND_SAP:
        vc0 = np.empty((nc, 3))
        blocks.constraint_velocities(cstart, sizes, cl, J_ptr, J_values, v_red, vc0)
        vn0 = vc0[:, 2].copy()
    return contact_parameters(fpar, ipar, geoms, phi, w, vn0, geom_k, geom_mu, geom_tau, geom_d)


@jit(inline="always")
def shift_known_velocity(kind, cpar, known):
    """The contacts' bias velocities v̂ (cpar[:, 3:6], SAP kind) shifted by −b for the known part b (nc, 3) of
    their velocity (a kinematic body, ``jacobians.known_contact_velocities``): vc = J v + b, so the cone's
    v̂ − vc = (v̂ − b) − J v (numpy reference ``sap.problem.constraint_kernel_data`` with ``v_known``). The
    Hunt–Crossley kinds have no such term; their models are refused with kinematic bodies
    (``packing.compiled_step_supported``)."""
    for c in range(known.shape[0]):
        if kind[c] == KIND_SAP:
            cpar[c, 3] -= known[c, 0]
            cpar[c, 4] -= known[c, 1]
            cpar[c, 5] -= known[c, 2]


@jit(inline="always")
def kinematic_contact_rows(kind, cpar, R_WC, geoms, point, q, v, geom_body, kinematic):
    """The contact rows (kind, cpar) of :func:`contact_kernel_rows` with the kinematic bodies' known velocities
    (``kinematic`` (nbody,) True; ``jacobians.known_contact_velocities``) moved into their bias velocities
    (:func:`shift_known_velocity`). Nothing is computed when the model has no kinematic body."""
    for b in range(kinematic.shape[0]):
        if kinematic[b]:
            shift_known_velocity(kind, cpar, known_contact_velocities(R_WC, geoms, point, q, v, geom_body,
                                                                      kinematic))
            return


# ---- cliques

@jit(inline="always")
def body_problem(moving, v, A_values, v_star, cliques):
    """The participating cliques of a free-body model (those a contact touches, in body order): (new_index
    (nmov; −1 not participating), sizes, clique_start, A_ptr, A (36 per clique), v* and v₀ of the cliques,
    the contacts' cliques renumbered (nc, 2))."""
    nmov = moving.shape[0]
    nc = cliques.shape[0]
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
    return new_index, sizes, cstart, A_ptr, A_red, vs_red, v_red, cl_red


@jit(inline="always")
def largest_island(ncl, sizes, cl):
    """(edges, constraint_edge, dofs of the largest island) of the clique graph of the constraints' cliques
    ``cl`` (``sap.newton.clique_graph``, ``islands``)."""
    edges, constraint_edge = clique_graph(cl)
    island, nisl = islands(ncl, edges)
    isl_size = np.zeros(nisl, np.int64)
    for c in range(ncl):
        isl_size[island[c]] += sizes[c]
    max_n = 0
    for i in range(nisl):
        max_n = max(max_n, isl_size[i])
    return edges, constraint_edge, max_n


@jit(inline="always")
def forest_used_cliques(ncl_all, side_cl, tree_clique, row_tree, nr, jc_ti, jc_tj, jr_index, njr):
    """(new_index (ncl_all; −1 not participating), number participating): the cliques a contact side, a joint
    row or a joint coupler touches, in clique order."""
    used = np.zeros(ncl_all, np.bool_)
    for c in range(side_cl.shape[0]):
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
    return new_index, ncl


@jit(inline="always")
def forest_problem(new_index, ncl, size_all, start_all, moving, A_free, vs_free, A_tree, vs_tree, v, tv):
    """The participating cliques' (sizes, clique_start, A_ptr, A (row-major blocks), v*, v₀) of a model with
    trees, from the free bodies' 6 × 6 masses and v* and the forest's A and v* (``free_motion``)."""
    nmov = moving.shape[0]
    sizes = np.empty(ncl, np.int64)
    cstart = np.empty(ncl, np.int64)
    A_ptr = np.empty(ncl, np.int64)
    nA = 0
    nvr = 0
    for m in range(new_index.shape[0]):
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
    for m in range(new_index.shape[0]):
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
    return sizes, cstart, A_ptr, A_red, vs_red, v_red


# ---- joint rows

@jit(inline="always")
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


@jit(inline="always")
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
def control_pd_targets(ra, dt, tq, A_tree, target, target_v, nr, row_kind, row_owner, row_par):
    """PD rows of actuators with a controller's target (``target[n]`` not NaN; ``target_v[n]``, NaN: 0)
    instead of their scene schedule: (R, v̂) again by ``pd_row_kernel`` at (q_d, v_d) (the rows of
    :func:`tree_rows`; ``multibody.forest.current_actuators``'s rule)."""
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


@jit(inline="always")
def forest_joint_rows(fa, ra, t, dt, tq, tv, A_tree, vs_tree):
    """Every joint row of the step: the trees' rows (:func:`tree_rows`) and the joint couplers between trees
    (:func:`joint_coupler_rows`). Returns (nr, row_tree, row_kind, row_owner, row_J, row_par, njr, jr_index,
    jr_par)."""
    tree_nv = fa[15]
    nlim = ra[1].shape[0]
    nact = ra[6].shape[0]
    nmax_rows = 2 * nlim + nact + ra[17].shape[0]
    max_tree = 1
    for k in range(tree_nv.shape[0]):
        max_tree = max(max_tree, tree_nv[k])
    row_tree = np.empty(nmax_rows, np.int64)
    row_kind = np.empty(nmax_rows, np.int64)
    row_owner = np.empty(nmax_rows, np.int64)
    row_J = np.empty((nmax_rows, max_tree))
    row_par = np.empty((nmax_rows, 4))
    nr = tree_rows(fa, ra, t, dt, tq, tv, A_tree, vs_tree, row_tree, row_kind, row_owner, row_J, row_par)
    njc = ra[23].shape[0]
    jr_index = np.empty(njc, np.int64)
    jr_par = np.empty((njc, 4))
    njr = joint_coupler_rows(ra, dt, tq, A_tree, jr_index, jr_par)
    return nr, row_tree, row_kind, row_owner, row_J, row_par, njr, jr_index, jr_par


@jit(inline="always")
def joint_row_entries(tree_nv, row_tree, nr, jc_ti, jc_tj, jr_index, njr):
    """How many Jacobian entries the joint rows take in the block layout (3 × n per clique side)."""
    nJ = 0
    for r in range(nr):
        nJ += 3 * tree_nv[row_tree[r]]
    for r in range(njr):
        n = jr_index[r]
        nJ += 3 * tree_nv[jc_ti[n]]
        if jc_tj[n] != jc_ti[n]:
            nJ += 3 * tree_nv[jc_tj[n]]
    return nJ


@jit(inline="always")
def joint_row_blocks(ra, tree_nv, tree_vstart, tree_clique, new_index, nc, nr, row_tree, row_kind, row_J,
                     row_par, njr, jr_index, jr_par, kind, cpar, cl_red, J_ptr, J_values, off):
    """Write the joint rows after the nc contacts: their kind, parameters (R, v̂, γ_lo, γ_hi), clique(s) and J
    in the first row of their blocks from J_values[off] (the trees' rows one side; a coupler between two
    trees one side per tree, sides in clique order). Returns the next free offset."""
    jc_ti, jc_tj, jc_di, jc_dj, jc_rho = ra[25], ra[28], ra[23], ra[26], ra[29]
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
    return off


__all__ = ["contact_parameters", "contact_kernel_rows", "body_problem", "largest_island", "forest_used_cliques", "forest_problem", "tree_rows", "joint_coupler_rows", "forest_joint_rows",
           "control_pd_targets",
           "joint_row_entries", "joint_row_blocks", "shift_known_velocity", "kinematic_contact_rows"]
