"""Stage: the rows of the rigid contact LCP (polyhedral friction; docs/lcp.md), numba kernels shared by the
compiled LCP steps and their numpy references (one kernel each, so both paths build the same rows):

* the gap term of a unilateral row, b = max(g, 0)/dt + s·min(g, 0)/dt (:func:`gap_term`; numpy reference
  ``lcp_problem.gap_bias``), and a row's constant term with a kinematic body's known contact velocity
  (:func:`contact_bias`);
* the contacts' rows: normals whose row moves something, their gap terms and combined μ
  (:func:`contact_lcp_rows`), the per-contact keys of the warm start (:func:`contact_keys_kernel`);
* the joints of trees: implicit PD actuators folded into A and v* (:func:`pd_terms`, :func:`fold_pd`,
  :func:`fold_forest_pd`), 1-dof limit sides in their window and each joint coupler's bilateral pair
  (:func:`joint_rows`);
* the dense (M, q) of an island (:func:`assemble_dense`, also the reference step's kernel) and the contact
  normals' regularization (:func:`regularize_normals`).
"""

from __future__ import annotations

import math

import numpy as np

from convexsim._jit import jit
from convexsim.sap.joint_constraints import limit_in_window, pd_target
from convexsim.stepping.contacts import combined_friction
from convexsim.stepping.jacobians import known_contact_velocities
from convexsim.stepping.post_solve import ROW_COUPLER, ROW_LIMIT


@jit(inline="always")
def gap_term(g, dt, stabilization):
    """b = max(g, 0)/dt + s·min(g, 0)/dt [m/s]: close a gap g [m] exactly, remove the fraction s of a
    penetration."""
    return max(g, 0.0) / dt + stabilization * min(g, 0.0) / dt


@jit(inline="always")
def contact_bias(gaps, dt, stabilization, known):
    """The constant term b (m, 3) of each row's velocity in its frame (t1, t2, n): the known velocity ``known``
    (m, 3) of the contact (a kinematic body, ``jacobians.known_contact_velocities``; zeros otherwise) plus the
    gap term :func:`gap_term` of the gap ``gaps`` (m,) [m] on the normal. q of the LCP gains b_n on the normal
    row and u_jᵀ b_t on friction direction j (:func:`assemble_dense`; numpy reference
    ``lcp_problem.contact_bias``)."""
    b = known.copy()
    for c in range(gaps.shape[0]):
        b[c, 2] += gap_term(gaps[c], dt, stabilization)
    return b


@jit
def contact_keys_kernel(geoms):
    """(geom_a, geom_b, k) per contact, k the index within its pair (``lcp_problem.contact_keys``)."""
    m = geoms.shape[0]
    keys = np.zeros((m, 3), np.int64)
    k = 0
    for c in range(m):
        if c > 0 and geoms[c, 0] == geoms[c - 1, 0] and geoms[c, 1] == geoms[c - 1, 1]:
            k += 1
        else:
            k = 0
        keys[c, 0] = geoms[c, 0]
        keys[c, 1] = geoms[c, 1]
        keys[c, 2] = k
    return keys


@jit
def _shares_body(body, a, b):
    """Whether columns a and b of W may touch a common body (``body``: up to two body indices per column,
    −1 none, −2 in the first slot: any body)."""
    if body[a, 0] == -2 or body[b, 0] == -2:
        return True
    for i in range(2):
        x = body[a, i]
        if x >= 0 and (x == body[b, 0] or x == body[b, 1]):
            return True
    return False


@jit
def add_row_bias(q, bias, U, m, d):
    """q += the rows' constant terms ``bias`` (m, 3) (:func:`contact_bias`): b_n on the m normal rows, u_jᵀ b_t
    on friction direction j of each contact (rows m + c·d + j); the one home of this rule (the dense and the
    sparse assemblies call it)."""
    for c in range(m):
        q[c] += bias[c, 2]
        if bias[c, 0] != 0.0 or bias[c, 1] != 0.0:
            for j in range(d):
                q[m + c * d + j] += U[j, 0] * bias[c, 0] + U[j, 1] * bias[c, 1]


@jit
def assemble_dense(Ainv, v_star, J, bias, mu, U, d):
    """(M, q, W, A⁻¹W) of ``build_contact_lcp`` by dense products: W = [J_nᵀ D], A⁻¹W, M's impulse block
    Wᵀ A⁻¹ W symmetrized, E, −Eᵀ and μ; q = Wᵀ v* + the rows' constant terms ``bias`` (m, 3) (:func:`contact_bias`):
    b_n on the normal rows, u_jᵀ (b_t1, b_t2) on the friction directions."""
    m = J.shape[0]
    nv = J.shape[2]
    nw = m * (d + 1)
    nz = m * (d + 2) if d else m
    W = np.zeros((nv, nw))
    for c in range(m):
        for k in range(nv):
            W[k, c] = J[c, 2, k]
            for j in range(d):
                W[k, m + c * d + j] = J[c, 0, k] * U[j, 0] + J[c, 1, k] * U[j, 1]
    AinvW = np.zeros((nv, nw))
    for i in range(nv):
        for k in range(nv):
            a = Ainv[i, k]
            if a != 0.0:
                for col in range(nw):
                    AinvW[i, col] += a * W[k, col]
    M = np.zeros((nz, nz))
    q = np.zeros(nz)
    rows = np.zeros((nw, nv), np.int64)                    # W's nonzero rows per column (≤ 12 for a contact)
    count = np.zeros(nw, np.int64)
    for a in range(nw):
        for k in range(nv):
            if W[k, a] != 0.0:
                rows[a, count[a]] = k
                count[a] += 1
    # bodies (6-dof blocks of W's rows) of each column. When A⁻¹ is block diagonal by 6 × 6 (free bodies), a
    # pair of columns on disjoint bodies has an exact zero in M (A⁻¹W is +0.0 on the other bodies' rows, so
    # both sums below would be +0.0), which M already holds: skipped. Otherwise (trees: A⁻¹ couples dofs)
    # every pair is computed.
    blockdiag = True
    for i in range(nv):
        for k in range(nv):
            if i // 6 != k // 6 and Ainv[i, k] != 0.0:
                blockdiag = False
    body = -np.ones((nw, 2), np.int64)
    for a in range(nw):
        for i in range(count[a]):
            k = rows[a, i] // 6
            if not blockdiag:
                body[a, 0] = -2
            elif body[a, 0] == -2:
                pass
            elif body[a, 0] < 0 or body[a, 0] == k:
                body[a, 0] = k
            elif body[a, 1] < 0 or body[a, 1] == k:
                body[a, 1] = k
            else:
                body[a, 0] = -2                        # a third body: pair it with every column
    for a in range(nw):
        for b in range(a, nw):
            if not (_shares_body(body, a, b)):
                continue
            s = 0.0
            for i in range(count[a]):
                k = rows[a, i]
                s += W[k, a] * AinvW[k, b]
            t = 0.0
            for i in range(count[b]):
                k = rows[b, i]
                t += W[k, b] * AinvW[k, a]
            v = 0.5 * (s + t)
            M[a, b] = v
            M[b, a] = v
        s = 0.0
        for k in range(nv):
            s += W[k, a] * v_star[k]
        q[a] = s
    add_row_bias(q, bias, U, m, d)
    if d:
        for c in range(m):
            for j in range(d):
                r = m + c * d + j
                M[r, nw + c] = 1.0
                M[nw + c, r] = -1.0
            M[nw + c, c] = mu[c]
    return M, q, W, AinvW


@jit
def pd_terms(dt, kp, kd, q0, q_d, v_d, u_ff):
    """(c, f₀) of an implicit PD actuator u = −Kp (q₀ + dt v − q_d) − Kd (v − v_d) + u_ff = f₀ − c v:
    c = dt·Kp + Kd [N·m·s/rad or N·s/m], f₀ = −Kp (q₀ − q_d) + Kd v_d + u_ff [N·m or N]."""
    return dt * kp + kd, -kp * (q0 - q_d) + kd * v_d + u_ff


@jit
def fold_pd(blk, vs, dof, c, f0, effort, dt):
    """A tree's block of A and v* with its PD actuators folded in (``lcp_reference`` module docstring).

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


NORMAL_REGULARIZATION = 1e-3
"""ε of the contact normal rows' regularization M_ii ← (1 + ε) M_ii in the LCP of a model with trees
(:func:`regularize_normals`; why, and its price: ``lcp_reference``'s module docstring)."""


@jit
def regularize_normals(M, nc, eps):
    """M_ii ← (1 + ε) M_ii on the first ``nc`` rows (the contact normals), in place (``lcp_reference``)."""
    for i in range(nc):
        M[i, i] *= 1.0 + eps


@jit(inline="always")
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


@jit(inline="always")
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


@jit(inline="always")
def contact_lcp_rows(geoms, phi, point, normal, R_all, J_all, nl, row_gap, row_dofs, row_coef, geom_mu, dt,
                     stabilization, q, v, geom_body, kinematic):
    """The LCP rows of a model with trees: the contacts whose normal row moves something (in their order;
    geoms, phi, point, normal, R_all, J_all compacted in place), then the nl joint rows of :func:`joint_rows`.
    Returns (geoms, phi, point, normal, R_WC of the kept contacts, J (m, 3, nv), b (m, 3), μ (m,); m = nc + nl):
    b per row of :func:`contact_bias` (the kinematic bodies, ``kinematic`` (nbody,) True, at (q, v))."""
    nc0 = phi.shape[0]
    nv = J_all.shape[2]
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
    gaps = np.empty(m)
    mu = np.zeros(m)
    mu_c = combined_friction(geom_mu, geoms)
    for c in range(nc):
        J[c] = J_all[c]
        gaps[c] = phi[c]
        mu[c] = mu_c[c]
    for r in range(nl):
        for k in range(2):
            if row_dofs[r, k] >= 0:
                J[nc + r, 2, row_dofs[r, k]] += row_coef[r, k]
        gaps[nc + r] = row_gap[r]
    known = np.zeros((m, 3))
    known[:nc] = known_contact_velocities(R_WC, geoms, point, q, v, geom_body, kinematic)
    return geoms, phi, point, normal, R_WC, J, contact_bias(gaps, dt, stabilization, known), mu


__all__ = ["gap_term", "contact_bias", "add_row_bias", "contact_keys_kernel", "assemble_dense", "pd_terms", "fold_pd", "NORMAL_REGULARIZATION", "regularize_normals",
           "fold_forest_pd", "joint_rows", "contact_lcp_rows"]
