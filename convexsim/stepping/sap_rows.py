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

Numpy (below the kernels): the rows of the body constraints, for both reference steps.

Body constraints (``Forest.constraints``, a scene's ``constraints:``): welds, fixed distances and joint couplers
between bodies and joints of different trees, free bodies and the world. Their rows live here, beside the
compiled joint-coupler rows (:func:`joint_coupler_rows`), because a constraint is defined once, as scalar
holonomic rows g(q) = 0 with ġ = J v over the reference step's v (``free_motion.ArticulatedSystem``), and SAP
rows are what the SAP reference makes of them (:func:`body_constraint_rows`); the LCP reference reads the same
rows (their J and g) and makes each a bilateral pair of rigid rows, and both read the forces back by
:func:`body_constraint_forces`. A row is turned into (R, v̂, box) by ``sap.joint_constraints.holonomic_row``
with its Delassus estimate w = Σ_k J_k²/A_kk:

* weld of B to A (6 rows): Q = B's centre of mass, P the point of A it must coincide with, R_T = R_WA R_AB
  the orientation B must keep. Position rows g = p_WQ − p_WP (world axes), J = J_Q,B − J_P,A (linear
  point Jacobians); orientation rows g = θ = log(R_WB R_Tᵀ) (a rotation vector in W,
  ``spatial.rotation_log``), and since the error rotation moves with Ṙ_err R_errᵀ = [ω_B − R_err ω_A]ₓ,
  θ̇ = J_l(θ)⁻¹ (ω_B − R_err ω_A) with J_l the left Jacobian of SO(3): J = J_l(θ)⁻¹ (J_ω,B − R_err J_ω,A),
  exact (not only at θ = 0).
* distance (1 row): d = p_WQ − p_WP, g = |d| − L, J = n̂ᵀ (J_Q,B − J_P,A) with n̂ = d/|d|; the points must
  not coincide (the direction is undefined there; the step raises naming the constraint).
* coupler (1 row): g = q_i − ρ q_j − offset, J = e_i − ρ e_j on the two joints' global dofs.

Rows are near-rigid (k = ∞: R = β² w/(4π²), τ = dt) unless the constraint has a finite stiffness k, when
R = max(1/(dt (dt + τ) k), β² w/(4π²)). At rest under a steady load f (the row's generalized force
γ/dt) the row settles where γ = v̂/R, i.e.

    |g| = |f|/k                         (compliant row)
    |g| = 2 dt² R_nr |f| = dt² β² w |f| / (2π²)   (near-rigid row)

which is the compliance the physics tests check.
"""

from __future__ import annotations

import math

import numpy as np

from convexsim._jit import jit
from convexsim.model import Model, State
from convexsim.multibody.model import JointType
from convexsim.sap import blocks
from convexsim.sap.constraints import KIND_SAP, NPAR
from convexsim.sap.friction_cone import regularization
from convexsim.sap.hunt_crossley import hc_kernel_parameters
from convexsim.sap.joint_constraints import (BETA_JOINT, KIND_COUPLER, KIND_HOLONOMIC, KIND_LIMIT, KIND_PD,
                                             LIMIT_STIFFNESS, delassus_row, holonomic_row, holonomic_row_kernel,
                                             limit_in_window, pd_row_kernel, pd_target)
from convexsim.sap.newton import F_BETA, F_DT, F_SIGMA, F_VS, I_CONTACT_KIND, clique_graph, islands_into
from convexsim.spatial import quat_to_matrix, rotation_log, skew
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
    if kind_code == KIND_SAP:              # the materials contact by contact: nothing else allocated
        for c in range(nc):
            ga = geoms[c, 0]
            gb = geoms[c, 1]
            k, mu, tau, _ = combine_materials(geom_k[ga], geom_k[gb], geom_mu[ga], geom_mu[gb], geom_tau[ga],
                                              geom_tau[gb], geom_d[ga], geom_d[gb])
            Rt, Rn, vn_hat = regularization(dt, k, tau, w[c], fpar[F_BETA], fpar[F_SIGMA], phi[c])
            cpar[c, 0] = mu
            cpar[c, 1] = Rt
            cpar[c, 2] = Rn
            cpar[c, 5] = vn_hat
    else:
        mat = np.empty((4, nc))            # k, μ, d, fe0 = −k φ per contact, as hc_kernel_parameters takes them
        for c in range(nc):
            ga = geoms[c, 0]
            gb = geoms[c, 1]
            mat[0, c], mat[1, c], _, mat[2, c] = combine_materials(
                geom_k[ga], geom_k[gb], geom_mu[ga], geom_mu[gb], geom_tau[ga], geom_tau[gb], geom_d[ga], geom_d[gb])
            mat[3, c] = -mat[0, c] * phi[c]
        hc_kernel_parameters(dt, mat[0], mat[2], mat[1], mat[3], vn0, fpar[F_SIGMA], w, fpar[F_VS], cpar)
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
    vn0 = w[:0]                        # no normal velocities for SAP contacts
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
def _compact_index(used):
    """(new_index, count): the entries where ``used`` (n,) is True numbered 0, 1, ... in their order, −1 the
    others (the participating cliques of a problem)."""
    new_index = -np.ones(used.shape[0], np.int64)
    count = 0
    for m in range(used.shape[0]):
        if used[m]:
            new_index[m] = count
            count += 1
    return new_index, count


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
    new_index, ncl = _compact_index(used)
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
    ``cl`` (``sap.newton.clique_graph``, ``islands_into``)."""
    edges, constraint_edge = clique_graph(cl)
    max_n = 0
    if edges.shape[0] == 0:            # every clique its own island
        for c in range(ncl):
            max_n = max(max_n, sizes[c])
        return edges, constraint_edge, max_n
    work = np.empty(3 * ncl, np.int64)    # parent links, island of each clique, dofs per island
    island = work[ncl:2 * ncl]
    nisl = islands_into(ncl, edges, work[:ncl], island)
    isl_size = work[2 * ncl:2 * ncl + nisl]
    isl_size[:] = 0
    for c in range(ncl):
        isl_size[island[c]] += sizes[c]
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
    return _compact_index(used)


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
    as :func:`body_constraint_rows` builds them: g = q_i − ρ q_j − Δ, J = e_i − ρ e_j over the
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


# ---- numpy references: the body constraints' rows (module docstring)

class BodyConstraintError(ValueError):
    """A body constraint cannot be evaluated at this state (e.g. a distance whose points coincide)."""


def _body_pose(state: State, body: int) -> tuple[np.ndarray, np.ndarray]:
    """(p_W of the body frame origin (its COM), R_WB); the world (−1) is the identity."""
    if body < 0:
        return np.zeros(3), np.eye(3)
    return np.asarray(state.q[body, :3], dtype=float), quat_to_matrix(np.asarray(state.q[body, 3:], dtype=float))


def left_jacobian_inverse(theta: np.ndarray) -> np.ndarray:
    """J_l(θ)⁻¹ = I − ½[θ]ₓ + (1/|θ|² − (1 + cos|θ|)/(2|θ| sin|θ|)) [θ]ₓ² (series below 1e-4 rad)."""
    a = float(np.linalg.norm(theta))
    S = skew(theta)
    if a < 1e-4:
        c = 1.0 / 12.0 + a * a / 720.0
    else:
        c = 1.0 / (a * a) - (1.0 + math.cos(a)) / (2.0 * a * math.sin(a))
    return np.eye(3) - 0.5 * S + c * (S @ S)


class _Addressing:
    """Where each Model body and forest joint lives in the reference step's v (``free_motion.ArticulatedSystem``)."""

    def __init__(self, model: Model, state: State, system):
        self.q = state.q
        self.free = {int(b): i for i, b in enumerate(system.free_bodies)}
        self.local = {}
        for k, t in enumerate(model.forest.trees):
            for i, b in enumerate(t.bodies):
                self.local[int(b)] = (k, i)
        self.system = system
        self.model = model

    def jacobians(self, body: int, p_W: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        """(J_ω (3, nv), J_P (3, nv), moves) of body ``body`` and its point at p_W (world)."""
        nv = self.system.nv
        Jw, Jp = np.zeros((3, nv)), np.zeros((3, nv))
        if body in self.free:
            s = self.system.clique_start[self.free[body]]
            r = p_W - self.q[body, :3]
            Jw[:, s:s + 3] = np.eye(3)
            Jp[:, s:s + 3] = -skew(r)
            Jp[:, s + 3:s + 6] = np.eye(3)
            return Jw, Jp, True
        if body in self.local:
            k, i = self.local[body]
            t = self.model.forest.trees[k]
            if t.nv == 0:
                return Jw, Jp, False
            kin = self.system.kins[k]
            p_B = kin.R_WB[i].T @ (p_W - kin.p_WB[i])
            J = kin.spatial_jacobian(i, p_B)
            s = self.system.tree_start[k]
            Jw[:, s:s + t.nv] = J[:3]
            Jp[:, s:s + t.nv] = J[3:]
            return Jw, Jp, bool(np.any(J != 0.0))
        return Jw, Jp, False

    def dof(self, joint: str) -> tuple[int, int, int]:
        """(tree, q address in State.tree_q, global dof) of a 1-dof forest joint."""
        k, n = self.model.forest.joint_index[joint]
        t = self.model.forest.trees[k]
        if t.model.joint_type[n] not in (JointType.REVOLUTE, JointType.PRISMATIC):
            raise BodyConstraintError(f"coupler: joint {joint!r} is not revolute or prismatic")
        return k, t.q_start + int(t.model.joint_qadr[n]), self.system.tree_start[k] + int(t.model.joint_dofadr[n])


def body_constraint_values(model: Model, state: State, c) -> np.ndarray:
    """g(q) of one constraint at ``state`` (module docstring): weld (6,) position then θ, distance (1,),
    coupler (1,)."""
    from convexsim.multibody.forest import JointCoupler, Weld    # a free-body run imports no forest

    if isinstance(c, JointCoupler):
        forest = model.forest
        vals = []
        for name in (c.joint, c.reference):
            k, n = forest.joint_index[name]
            t = forest.trees[k]
            vals.append(float(state.tree_q[t.q_start + int(t.model.joint_qadr[n])]))
        return np.array([vals[0] - c.rho * vals[1] - c.offset])
    pA, RA = _body_pose(state, c.body_a)
    pB, RB = _body_pose(state, c.body_b)
    P = pA + RA @ c.p_AP
    if isinstance(c, Weld):
        return np.concatenate([pB - P, rotation_log(RB @ (RA @ c.R_AB).T)])
    Q = pB + RB @ c.p_BQ
    return np.array([np.linalg.norm(Q - P) - c.length])


def body_constraint_jacobian(model: Model, state: State, system, c, addr: _Addressing | None = None) -> np.ndarray:
    """J (nrow, nv) with ġ = J v for one constraint (module docstring)."""
    from convexsim.multibody.forest import JointCoupler, Weld

    addr = _Addressing(model, state, system) if addr is None else addr
    nv = system.nv
    if isinstance(c, JointCoupler):
        _, _, di = addr.dof(c.joint)
        _, _, dj = addr.dof(c.reference)
        J = np.zeros((1, nv))
        J[0, di] += 1.0
        J[0, dj] -= c.rho
        return J
    pA, RA = _body_pose(state, c.body_a)
    pB, RB = _body_pose(state, c.body_b)
    P = pA + RA @ c.p_AP
    if isinstance(c, Weld):
        JwA, JpA, _ = addr.jacobians(c.body_a, P)
        JwB, JpB, _ = addr.jacobians(c.body_b, pB)
        R_err = RB @ (RA @ c.R_AB).T
        Jl_inv = left_jacobian_inverse(rotation_log(R_err))
        return np.vstack([JpB - JpA, Jl_inv @ (JwB - R_err @ JwA)])
    Q = pB + RB @ c.p_BQ
    d = Q - P
    n = np.linalg.norm(d)
    if not n > 1e-12 * max(1.0, c.length):
        raise BodyConstraintError(f"distance constraint {c.name!r}: its two points coincide "
                                  f"(|p_Q − p_P| = {n:g} m), the direction is undefined")
    _, JpA, _ = addr.jacobians(c.body_a, P)
    _, JpB, _ = addr.jacobians(c.body_b, Q)
    return ((d / n) @ (JpB - JpA))[None, :]


def body_constraint_rows(model: Model, state: State, system, A_diag: np.ndarray):
    """(J (nr, nv), par (nr, 4), kinds, owners) of every body constraint of the model at ``state``.

    ``owners[r]`` = (constraint index, row index within it). Raises BodyConstraintError naming the
    constraint when it cannot be evaluated.
    """
    from convexsim.multibody.forest import JointCoupler, Weld

    dt = model.time_step
    addr = _Addressing(model, state, system)
    rows_J, rows_par, kinds, owners = [], [], [], []
    for ci, c in enumerate(model.forest.constraints):
        J = body_constraint_jacobian(model, state, system, c, addr)
        g = body_constraint_values(model, state, c)
        for r in range(J.shape[0]):
            w = delassus_row(J[r], A_diag)
            if not w > 0:                   # the row moves no dof (e.g. a slider's rotation): nothing to do
                continue
            if isinstance(c, JointCoupler):
                par = holonomic_row(dt, float(g[0]), w)           # rigid: k = ∞ (coupler_row's row)
                kind = KIND_COUPLER
            else:
                k = c.stiffness
                if isinstance(c, Weld) and r >= 3:
                    k = c.angular_stiffness
                par = holonomic_row(dt, float(g[r]), w, k, c.relaxation_time)
                kind = KIND_HOLONOMIC
            rows_J.append(J[r])
            rows_par.append(par)
            kinds.append(kind)
            owners.append((ci, r))
    nv = system.nv
    return (np.array(rows_J).reshape(-1, nv), np.array(rows_par).reshape(-1, 4), kinds, owners)


def add_body_constraint_rows(model: Model, state: State, system) -> None:
    """Append the body constraints' SAP rows (:func:`body_constraint_rows`) to the joint rows of ``system`` (the
    step's ``free_motion.ArticulatedSystem``: Jr, par, row_kinds, and body_rows = (first row, owners)) when the
    model has any. Raises BodyConstraintError naming a constraint that cannot be evaluated."""
    if model.forest is None or not model.forest.constraints:
        return
    nr = system.par.shape[0]
    Jb, pb, kb, bown = body_constraint_rows(model, state, system, np.diag(system.A))
    system.Jr = np.vstack([system.Jr, Jb])
    system.par = np.vstack([system.par, pb])
    system.row_kinds = system.row_kinds + kb
    system.body_rows = (nr, bown)


def body_constraint_forces(model: Model, state: State, owners, impulses: np.ndarray) -> dict:
    """What each body constraint transmitted over the step, by name, from its rows' impulses γ [N·s]
    (``owners`` as returned by :func:`body_constraint_rows`, ``impulses`` aligned with them). The row impulse
    enters the step as Jᵀγ, so with γ/dt the average force:

    * weld: (6,) = (force on B at its COM Q, torque on B) in W [N, N·m]: position rows give f = γ_p/dt
      directly; orientation rows give τ_B = J_l(θ)⁻ᵀ γ_θ/dt (the weld's torque on B; A receives −f at P
      and the matching torque). A row that moves no dof (skipped) contributes 0.
    * distance: (1,) = the force on B along n̂ = (p_Q − p_P)/|p_Q − p_P| [N]: positive pushes the points
      apart, negative pulls them together (a hanging rope reads −m·g); A receives the opposite.
    * coupler: (1,) = the generalized force on ``joint`` [N·m or N]; ``reference`` receives −ρ times it.

    Every constraint of the model has an entry (zeros when none of its rows was active).
    """
    from convexsim.multibody.forest import Weld

    dt = model.time_step
    cons = model.forest.constraints
    raw = {ci: np.zeros(6 if isinstance(c, Weld) else 1) for ci, c in enumerate(cons)}
    for (ci, r), g in zip(owners, np.asarray(impulses, dtype=float)):
        raw[ci][r] += g / dt
    out = {}
    for ci, c in enumerate(cons):
        f = raw[ci]
        if isinstance(c, Weld) and np.any(f[3:]):
            theta = body_constraint_values(model, state, c)[3:]
            f = np.concatenate([f[:3], left_jacobian_inverse(theta).T @ f[3:]])
        out[c.name] = f
    return out


def body_constraint_label(c) -> str:
    """'weld 'name'' etc. for messages."""
    from convexsim.multibody.forest import Distance, JointCoupler, Weld

    what = {Weld: "weld", Distance: "distance", JointCoupler: "coupler"}[type(c)]
    return f"{what} {c.name!r}"


__all__ = ["contact_parameters", "contact_kernel_rows", "body_problem", "largest_island", "forest_used_cliques", "forest_problem", "tree_rows", "joint_coupler_rows", "forest_joint_rows",
           "control_pd_targets",
           "joint_row_entries", "joint_row_blocks", "shift_known_velocity", "kinematic_contact_rows", "BodyConstraintError", "left_jacobian_inverse", "body_constraint_values",
           "body_constraint_jacobian", "body_constraint_rows", "body_constraint_forces", "body_constraint_label"]
