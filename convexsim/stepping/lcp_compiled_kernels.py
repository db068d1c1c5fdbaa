"""The free-body LCP step as numba code (the compiled path of ``lcp_stepper.lcp_step``).

One call of :func:`lcp_step_kernel` does what the reference ``lcp_step`` does for a free-body model without
restitution, in the same order and through the same kernels wherever one exists:

1. finite start state and margin shares (``contacts.margin_shares``), collision with the pair-reach
   filter (``contacts.collide_and_filter``, the compiled SAP step's),
2. free motion A, v* (``dynamics.free_motion_kernel``), contact frames and Jacobian blocks
   (``dynamics.contact_frame`` / ``jacobian_block``) written as dense rows (``dense_jacobian``),
   combined friction μ (``contacts.combined_parameters``), gap term b (``gap_bias``),
3. contact islands (``contact_islands``: same union rule, same island order), per island A⁻¹ of the
   6 × 6 blocks (``block_inverse``), the dense (M, q) (``lcp_dense.assemble_dense``, the reference's kernel),
   one Lemke run (``lemke.revised_kernel`` with ``lemke``'s defaults), v⁺ and the impulses
   (``ContactLcpLayout.velocity`` / ``impulses``), the final basis' basic z's (``basic_of``),
4. symplectic Euler (``dynamics.integrate_kernel``), contact keys (``contact_keys``).

Whatever the kernel does not take on returns a status other than LCP_OK *before* anything is written, and
the dispatcher (``stepping.dispatch``, on ``lcp_compiled``'s Handoff) takes the step by the reference path, which then reports it exactly
as it always does: a first Lemke run that fails (the fallback chain, and ``LcpStepError`` if no rung
solves it), an island above the dense-assembly size, a warm-start-sized LCP, non-finite data.
"""

from __future__ import annotations

import math

import numpy as np

from convexsim._jit import jit
from convexsim.lcp.lemke.revised import revised_buffers, revised_kernel
from convexsim.dynamics import contact_frame, free_motion_kernel, integrate_kernel, jacobian_block
from convexsim.sap.newton import F_DT
from convexsim.stepping.compiled_kernels import first_nonfinite_body
from convexsim.stepping.contacts import collide_and_filter, margin_shares
from convexsim.stepping.lcp_dense import assemble_dense

LCP_OK = 0
LCP_NONFINITE_START = 1      # non-finite q or v, or margin shares: the reference path reports it
LCP_LEMKE_FAILED = 2         # the first Lemke run did not solve an island: the reference path runs the chain
LCP_TOO_LARGE = 3            # an island above the dense-assembly work: the reference assembles it sparsely
LCP_WARM_SIZE = 4            # warm start on and the LCP of warm-start size: the reference path warm-starts it
LCP_NONFINITE_DATA = 5       # non-finite M or q (the reference's Lemke raises its ValueError)
LCP_NONFINITE_END = 6        # non-finite new state
STATUS_NAMES = ("ok", "non-finite start state", "first Lemke run failed", "island above the dense size",
                "warm-start size", "non-finite LCP data", "non-finite end state")

# slots of the Lemke options array (``lemke.LemkeOptions`` fields)
L_PIVOT_TOL = 0
L_RATIO_REL_TOL = 1
L_RHS_TOL = 2
L_LEX_REL_TOL = 3
L_LEX_ABS_TOL = 4
L_CHECK_TOL = 5
L_HARRIS_TOL = 6
L_HARRIS_RATIO = 7
NLPAR = 8

# slots of the integer settings array
J_NDIR = 0            # friction_directions d (0 = frictionless)
J_MAX_PIVOTS = 1      # solver.lcp_max_pivots (≤ 0: max(1000, 50 n))
J_WARM_MIN = 2        # WARM_MIN_SIZE with the warm start on, −1 off
J_DENSE_WORK = 3      # DENSE_ASSEMBLY_WORK
J_REFACTOR = 4        # LemkeOptions.refactor_every (−1: max(50, 2n))
J_HARRIS = 5          # 1 Harris ratio test, 0 textbook
J_LU_MAX = 6          # lemke.REBUILD_LU_MAX
NJPAR = 7


@jit
def combined_friction(geom_mu, geoms):
    """μ = 2 μ_a μ_b / (μ_a + μ_b) per contact (0 when both are 0), shape (nc,)."""
    nc = geoms.shape[0]
    mu = np.empty(nc)
    for c in range(nc):
        a = geom_mu[geoms[c, 0]]
        b = geom_mu[geoms[c, 1]]
        s = a + b
        mu[c] = 2 * a * b / s if s > 0 else 0.0
    return mu


@jit
def contact_keys_kernel(geoms):
    """(geom_a, geom_b, k) per contact, k the index within its pair (``lcp_stepper.contact_keys``)."""
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
def _root(parent, i):
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


@jit
def contact_islands_kernel(cliques, ncl):
    """Island of each contact, numbered in the order of the islands' first contacts, and the count
    (``lcp_stepper.contact_islands``: union of moving cliques, the larger root under the smaller; a contact
    between two fixed bodies is an island of its own)."""
    m = cliques.shape[0]
    parent = np.arange(max(ncl, 1))
    for c in range(m):
        a = cliques[c, 0]
        b = cliques[c, 1]
        if a >= 0 and b >= 0:
            ra = _root(parent, a)
            rb = _root(parent, b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    label = -np.ones(max(ncl, 1), np.int64)
    island = np.empty(m, np.int64)
    count = 0
    for c in range(m):
        a = cliques[c, 0]
        b = cliques[c, 1]
        if a < 0 and b < 0:
            island[c] = count
            count += 1
            continue
        r = _root(parent, a) if a >= 0 else _root(parent, b)
        if label[r] < 0:
            label[r] = count
            count += 1
        island[c] = label[r]
    return island, count


@jit
def lemke_run(M, q, max_pivots_setting, lpar, jpar):
    """One ``lemke(M, q)`` run with the default covering vector: (status, pivots, z, basis)."""
    n = q.shape[0]
    max_piv = max_pivots_setting if max_pivots_setting > 0 else max(1000, 50 * n)
    refactor = jpar[J_REFACTOR]
    if refactor < 0:
        refactor = max(50, 2 * n)
    nnz = 0
    for i in range(n):
        for j in range(n):
            if M[i, j] != 0.0:
                nnz += 1
    colptr, colidx, colval, rowptr, rowidx, rowval, etas, eta_row = revised_buffers(n, nnz, max_piv, refactor)
    lu_max = jpar[J_LU_MAX]
    B0t = np.empty((n, n)) if (refactor != 0 and n > lu_max) else np.empty((1, 1))
    Bt = np.zeros((n, n))
    r = np.zeros(n)
    col = np.zeros(n)
    LU = np.zeros((n, n))
    perm = np.zeros(n, np.int64)
    perm2 = np.zeros(n, np.int64)
    basis = np.zeros(n, np.int64)
    vecs = np.zeros((6, n))
    ibuf = np.zeros(4 * n, np.int64)
    fbuf = np.zeros(6 * n)
    d = np.ones(n)
    status, pivots, z0, res = revised_kernel(
        M, q, d, max_piv, lpar[L_PIVOT_TOL], lpar[L_RATIO_REL_TOL], lpar[L_RHS_TOL], lpar[L_LEX_REL_TOL],
        lpar[L_LEX_ABS_TOL], lpar[L_CHECK_TOL], refactor, jpar[J_HARRIS], lpar[L_HARRIS_TOL],
        lpar[L_HARRIS_RATIO], Bt, r, col, LU, perm, perm2, basis, vecs, colptr, colidx, colval, rowptr, rowidx,
        rowval, ibuf, fbuf, B0t, etas, eta_row, lu_max, 0)
    return status, pivots, vecs[0].copy(), basis


@jit
def _inverse6(A):
    """A⁻¹ of one 6 × 6 block as ``np.linalg.inv`` computes it (LAPACK gesv on the identity)."""
    return np.linalg.solve(A, np.eye(6))


@jit
def lcp_step_kernel(fpar, gravity, fixed, body_dof, moving, mass, inertia, body_rb, geom_type, geom_size,
                    geom_body, geom_pos, geom_quat, geom_rho, geom_mu, q, v, U, stabilization, jpar, lpar,
                    q_out, v_out):
    """One free-body LCP step (module docstring) from (q, v) into (q_out, v_out).

    Args:
        U: friction directions u_j in (t1, t2), shape (d, 2) (``lcp_stepper.friction_directions``).
        stabilization: solver.lcp_stabilization s (gap term b = max(φ, 0)/dt + s·min(φ, 0)/dt).
        jpar, lpar: integer settings (J_* slots) and Lemke tolerances (L_* slots).

    Returns:
        (status, island of the failure or bad body, geoms (m, 2), phi, point, normal, R_WC (m, 3, 3),
        gamma (m, 3) [N·s], force_world (m, 3) [N], pivots, islands, per-contact basic z's (m, d + 2) bool,
        keys (m, 3)). Status other than LCP_OK: (q_out, v_out) are not to be used.
    """
    nmov = moving.shape[0]
    nv = 6 * nmov
    dt = fpar[F_DT]
    e2 = np.zeros((0, 2), np.int64)
    e3 = np.zeros((0, 3))
    d_set = jpar[J_NDIR]
    bad = first_nonfinite_body(q, v)
    if bad >= 0:
        return (LCP_NONFINITE_START, bad, e2, np.zeros(0), e3, e3, np.zeros((0, 3, 3)), e3, e3, 0, 0,
                np.zeros((0, d_set + 2), np.bool_), np.zeros((0, 3), np.int64))
    share = np.empty(fixed.shape[0])
    margin_shares(fpar, fixed, body_dof, body_rb, v, share)
    for b in range(share.shape[0]):
        if not math.isfinite(share[b]):
            return (LCP_NONFINITE_START, b, e2, np.zeros(0), e3, e3, np.zeros((0, 3, 3)), e3, e3, 0, 0,
                    np.zeros((0, d_set + 2), np.bool_), np.zeros((0, 3), np.int64))
    geoms, phi, point, normal = collide_and_filter(fpar, fixed, body_dof, body_rb, geom_type, geom_size,
                                                   geom_body, geom_pos, geom_quat, geom_rho, q, v)
    m = phi.shape[0]
    A_values = np.empty(36 * nmov)
    v_star = np.empty(nv)
    free_motion_kernel(fpar, gravity, body_dof, mass, inertia, q, v, moving, A_values, v_star)
    R_WC = np.empty((m, 3, 3))
    gamma = np.zeros((m, 3))
    force = np.zeros((m, 3))
    keys = contact_keys_kernel(geoms)
    mu = combined_friction(geom_mu, geoms)
    any_mu = False
    for c in range(m):
        if mu[c] > 0:
            any_mu = True
    d_glob = d_set if any_mu else 0
    basic_pc = np.zeros((m, d_set + 2), np.bool_)
    glob_size = m * (d_glob + 2) if d_glob else m
    if m > 0 and jpar[J_WARM_MIN] >= 0 and glob_size >= jpar[J_WARM_MIN]:
        return (LCP_WARM_SIZE, -1, geoms, phi, point, normal, R_WC, gamma, force, 0, 0, basic_pc, keys)
    # frames, dense Jacobian rows (m, 3, nv), cliques
    J = np.zeros((m, 3, nv))
    cliques = np.empty((m, 2), np.int64)
    blk = np.empty(18)
    for c in range(m):
        contact_frame(normal[c], R_WC[c])
        for s in range(2):
            body = geom_body[geoms[c, s]]
            k = body_dof[body] // 6 if body_dof[body] >= 0 else -1
            cliques[c, s] = k
            if k < 0:
                continue
            jacobian_block(R_WC[c], point[c], q, body, -1.0 if s == 0 else 1.0, blk, 0)
            for i in range(3):
                for j in range(6):
                    J[c, i, 6 * k + j] += blk[6 * i + j]
    bias = np.empty(m)
    for c in range(m):
        bias[c] = max(phi[c], 0.0) / dt + stabilization * min(phi[c], 0.0) / dt
    island, nisl = contact_islands_kernel(cliques, nmov)
    # per island: the dofs and contacts, then the size check before any solve
    in_island = np.zeros(nmov, np.bool_)
    for i in range(nisl):
        ncon = 0
        for c in range(m):
            if island[c] == i:
                ncon += 1
        in_island[:] = False
        for c in range(m):
            if island[c] == i:
                for s in range(2):
                    if cliques[c, s] >= 0:
                        in_island[cliques[c, s]] = True
        nb = 0
        for k in range(nmov):
            if in_island[k]:
                nb += 1
        mu_any = False
        for c in range(m):
            if island[c] == i and mu[c] > 0:
                mu_any = True
        di = d_set if mu_any else 0
        nvi = 6 * nb
        nw = ncon * (di + 1)
        if nvi * nw * (nvi + nw) > jpar[J_DENSE_WORK]:
            return (LCP_TOO_LARGE, i, geoms, phi, point, normal, R_WC, gamma, force, 0, nisl, basic_pc, keys)
    v_next = v_star.copy()
    pivots = 0
    for i in range(nisl):
        idx = np.empty(m, np.int64)
        ncon = 0
        for c in range(m):
            if island[c] == i:
                idx[ncon] = c
                ncon += 1
        idx = idx[:ncon]
        in_island[:] = False
        for c in idx:
            for s in range(2):
                if cliques[c, s] >= 0:
                    in_island[cliques[c, s]] = True
        cl = np.flatnonzero(in_island)
        nb = cl.shape[0]
        dofs = np.empty(6 * nb, np.int64)
        for a in range(nb):
            for j in range(6):
                dofs[6 * a + j] = 6 * cl[a] + j
        nvi = 6 * nb
        Ainv = np.zeros((nvi, nvi))
        Ab = np.empty((6, 6))
        for a in range(nb):
            for r in range(6):
                for j in range(6):
                    Ab[r, j] = A_values[36 * cl[a] + 6 * r + j]
            inv = _inverse6(Ab)
            for r in range(6):
                for j in range(6):
                    Ainv[6 * a + r, 6 * a + j] = inv[r, j]
        vs = np.empty(nvi)
        for j in range(nvi):
            vs[j] = v_star[dofs[j]]
        Ji = np.empty((ncon, 3, nvi))
        bi = np.empty(ncon)
        mui = np.empty(ncon)
        mu_any = False
        for a in range(ncon):
            c = idx[a]
            for r in range(3):
                for j in range(nvi):
                    Ji[a, r, j] = J[c, r, dofs[j]]
            bi[a] = bias[c]
            mui[a] = mu[c]
            if mu[c] > 0:
                mu_any = True
        di = d_set if mu_any else 0
        Ui = U if di else np.zeros((0, 2))
        M, qv, W, AinvW = assemble_dense(Ainv, vs, Ji, bi, mui, Ui, di)
        n = qv.shape[0]
        for a in range(n):
            if not math.isfinite(qv[a]):
                return (LCP_NONFINITE_DATA, i, geoms, phi, point, normal, R_WC, gamma, force, pivots, nisl,
                        basic_pc, keys)
            for b in range(n):
                if not math.isfinite(M[a, b]):
                    return (LCP_NONFINITE_DATA, i, geoms, phi, point, normal, R_WC, gamma, force, pivots,
                            nisl, basic_pc, keys)
        status, piv, z, basis = lemke_run(M, qv, jpar[J_MAX_PIVOTS], lpar, jpar)
        pivots += piv
        if status != 0:
            return (LCP_LEMKE_FAILED, i, geoms, phi, point, normal, R_WC, gamma, force, pivots, nisl,
                    basic_pc, keys)
        nw = AinvW.shape[1]
        dv = np.dot(AinvW, np.ascontiguousarray(z[:nw]))
        for j in range(nvi):
            v_next[dofs[j]] = vs[j] + dv[j]
        basic = np.zeros(n, np.bool_)
        for r in range(n):
            bv = basis[r]
            if bv >= n and bv < 2 * n:
                basic[bv - n] = True
        g = np.zeros((ncon, 2))
        if di:
            beta = np.ascontiguousarray(z[ncon:ncon + ncon * di]).reshape(ncon, di)
            g = np.dot(beta, U)
        for a in range(ncon):
            c = idx[a]
            gamma[c, 2] = z[a]
            gamma[c, 0] = g[a, 0]
            gamma[c, 1] = g[a, 1]
            basic_pc[c, 0] = basic[a]
            if di:
                for j in range(di):
                    basic_pc[c, 1 + j] = basic[ncon + a * di + j]
                basic_pc[c, di + 1] = basic[ncon + ncon * di + a]
    for c in range(m):
        for i in range(3):
            force[c, i] = (R_WC[c, i, 0] * gamma[c, 0] + R_WC[c, i, 1] * gamma[c, 1]
                           + R_WC[c, i, 2] * gamma[c, 2]) / dt
    integrate_kernel(fpar, moving, q, v, v_next, q_out, v_out)
    bad = first_nonfinite_body(q_out, v_out)
    if bad >= 0:
        return (LCP_NONFINITE_END, bad, geoms, phi, point, normal, R_WC, gamma, force, pivots, nisl, basic_pc,
                keys)
    return LCP_OK, -1, geoms, phi, point, normal, R_WC, gamma, force, pivots, nisl, basic_pc, keys
