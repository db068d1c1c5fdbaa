"""Stage: the LCP solve of the compiled LCP steps: contact islands, A⁻¹ per island, the dense (M, q)
(``lcp_rows.assemble_dense``), one Lemke run per island (the revised kernel with ``lemke``'s defaults,
:func:`lemke_run`), v⁺ = v* + A⁻¹W z and the final basis' basic z's (the warm start's next guess).

The reference (``lcp_reference``, ``lcp_islands``, ``lcp_fallback``) adds what the compiled steps hand over to it: the fallback chain after a
failed first Lemke run, warm starts from the previous basis, the crash start of large islands, the sparse
assembly of islands above the dense size (``lcp.crash``, ``lcp.lemke.warm``). A status other than
``status.LCP_OK`` returned here makes the step a Handoff to the reference.
"""

from __future__ import annotations

import math

import numpy as np

from convexsim._jit import jit
from convexsim.lcp.lemke.revised import revised_buffers, revised_kernel
from convexsim.stepping.lcp_rows import assemble_dense, regularize_normals
from convexsim.stepping.status import (J_HARRIS, J_LU_MAX, J_MAX_PIVOTS, J_NDIR, J_REFACTOR, L_CHECK_TOL,
                                       L_HARRIS_RATIO, L_HARRIS_TOL, L_LEX_ABS_TOL, L_LEX_REL_TOL, L_PIVOT_TOL,
                                       L_RATIO_REL_TOL, L_RHS_TOL, LCP_LEMKE_FAILED, LCP_NONFINITE_DATA, LCP_OK,
                                       LCP_TOO_LARGE)


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
def _root(parent, i):
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


@jit(inline="always")
def contact_islands_kernel(cliques, ncl):
    """Island of each contact, numbered in the order of the islands' first contacts, and the count
    (``lcp_islands.contact_islands``: union of moving cliques, the larger root under the smaller; a contact
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
def _inverse6(A):
    """A⁻¹ of one 6 × 6 block as ``np.linalg.inv`` computes it (LAPACK gesv on the identity)."""
    return np.linalg.solve(A, np.eye(6))


@jit(inline="always")
def contact_cliques(geoms, geom_body, body_dof):
    """The clique (body_dof // 6) of each side (A, B) of each contact of a free-body model, −1 for a fixed
    body, shape (nc, 2)."""
    m = geoms.shape[0]
    cliques = np.empty((m, 2), np.int64)
    for c in range(m):
        for s in range(2):
            body = geom_body[geoms[c, s]]
            cliques[c, s] = body_dof[body] // 6 if body_dof[body] >= 0 else -1
    return cliques


@jit(inline="always")
def island_contacts(island, i, cliques, nmov, in_island):
    """(the contacts of island i in their order, the moving bodies it holds in body order); in_island (nmov,)
    is scratch."""
    m = island.shape[0]
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
    return idx, np.flatnonzero(in_island)


@jit(inline="always")
def any_friction(mu, idx):
    """Whether a contact of ``idx`` has μ > 0 (its island's LCP then has the friction directions)."""
    for c in idx:
        if mu[c] > 0:
            return True
    return False


@jit(inline="always")
def first_large_island(island, nisl, cliques, mu, nmov, d_set, dense_work):
    """The first island whose dense assembly work 6nb·nw·(6nb + nw) exceeds ``dense_work`` (nb bodies, nw =
    contacts·(d + 1) impulse unknowns), or −1."""
    in_island = np.zeros(nmov, np.bool_)
    for i in range(nisl):
        idx, cl = island_contacts(island, i, cliques, nmov, in_island)
        di = d_set if any_friction(mu, idx) else 0
        nvi = 6 * cl.shape[0]
        nw = idx.shape[0] * (di + 1)
        if nvi * nw * (nvi + nw) > dense_work:
            return i
    return -1


@jit(inline="always")
def island_inverse(A_values, cl):
    """A⁻¹ (6nb, 6nb) of an island's bodies ``cl`` from their 6 × 6 blocks (36 per moving body)."""
    nb = cl.shape[0]
    Ainv = np.zeros((6 * nb, 6 * nb))
    Ab = np.empty((6, 6))
    for a in range(nb):
        for r in range(6):
            for j in range(6):
                Ab[r, j] = A_values[36 * cl[a] + 6 * r + j]
        inv = _inverse6(Ab)
        for r in range(6):
            for j in range(6):
                Ainv[6 * a + r, 6 * a + j] = inv[r, j]
    return Ainv


@jit(inline="always")
def finite_lcp(M, qv):
    """Whether every entry of (M, q) is finite."""
    n = qv.shape[0]
    for a in range(n):
        if not math.isfinite(qv[a]):
            return False
        for b in range(n):
            if not math.isfinite(M[a, b]):
                return False
    return True


@jit(inline="always")
def store_island(z, basis, idx, di, U, AinvW, vs, dofs, v_next, gamma, basic_pc):
    """An island's solution into the step's arrays: v⁺ = v* + A⁻¹W z on its dofs, the impulses γ of its
    contacts (normal z, tangential Σ β_j U_j), and which of their z's are basic in the final basis."""
    ncon = idx.shape[0]
    n = z.shape[0]
    nw = AinvW.shape[1]
    dv = np.dot(AinvW, np.ascontiguousarray(z[:nw]))
    for j in range(dofs.shape[0]):
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


@jit(inline="always")
def solve_island(i, island, cliques, nmov, A_values, v_star, J, bias, mu, U, jpar, lpar, in_island, v_next,
                 gamma, basic_pc):
    """Island i of a free-body LCP: its dense (M, q) and one Lemke run, stored by :func:`store_island`.
    Returns (status: LCP_OK, LCP_NONFINITE_DATA or LCP_LEMKE_FAILED, pivots)."""
    idx, cl = island_contacts(island, i, cliques, nmov, in_island)
    ncon = idx.shape[0]
    nb = cl.shape[0]
    dofs = np.empty(6 * nb, np.int64)
    for a in range(nb):
        for j in range(6):
            dofs[6 * a + j] = 6 * cl[a] + j
    nvi = 6 * nb
    Ainv = island_inverse(A_values, cl)
    vs = np.empty(nvi)
    for j in range(nvi):
        vs[j] = v_star[dofs[j]]
    Ji = np.empty((ncon, 3, nvi))
    bi = np.empty((ncon, 3))
    mui = np.empty(ncon)
    for a in range(ncon):
        c = idx[a]
        for r in range(3):
            for j in range(nvi):
                Ji[a, r, j] = J[c, r, dofs[j]]
        for r in range(3):
            bi[a, r] = bias[c, r]
        mui[a] = mu[c]
    di = jpar[J_NDIR] if any_friction(mu, idx) else 0
    Ui = U if di else np.zeros((0, 2))
    M, qv, W, AinvW = assemble_dense(Ainv, vs, Ji, bi, mui, Ui, di)
    if not finite_lcp(M, qv):
        return LCP_NONFINITE_DATA, 0
    status, piv, z, basis = lemke_run(M, qv, jpar[J_MAX_PIVOTS], lpar, jpar)
    if status != 0:
        return LCP_LEMKE_FAILED, piv
    store_island(z, basis, idx, di, U, AinvW, vs, dofs, v_next, gamma, basic_pc)
    return LCP_OK, piv


@jit(inline="always")
def solve_dense_lcp(A, v_star, J, bias, mu, nc, U, eps, large_n, jpar, lpar):
    """The whole LCP of a model with trees in one dense (M, q): A⁻¹ by ``np.linalg.inv``, the contact normals
    regularized by ε (:func:`regularize_normals`), one Lemke run. Returns (status: LCP_OK,
    LCP_NONFINITE_DATA, LCP_TOO_LARGE (n ≥ large_n with the default pivot cap: the reference's capped runs)
    or LCP_LEMKE_FAILED, pivots, z, A⁻¹W, d friction directions)."""
    d = 0
    for c in range(nc):
        if mu[c] > 0:
            d = jpar[J_NDIR]
    Ui = U if d else np.zeros((0, 2))
    Ainv = np.linalg.inv(A)
    M, qv, _W, AinvW = assemble_dense(Ainv, v_star, J, bias, mu, Ui, d)
    regularize_normals(M, nc, eps)
    n = qv.shape[0]
    if not finite_lcp(M, qv):
        return LCP_NONFINITE_DATA, 0, qv, AinvW, d
    if jpar[J_MAX_PIVOTS] <= 0 and n >= large_n:
        return LCP_TOO_LARGE, 0, qv, AinvW, d
    status, pivots, z, _basis = lemke_run(M, qv, jpar[J_MAX_PIVOTS], lpar, jpar)
    if status != 0:
        return LCP_LEMKE_FAILED, pivots, z, AinvW, d
    return LCP_OK, pivots, z, AinvW, d


__all__ = ["lemke_run", "contact_islands_kernel", "contact_cliques", "first_large_island", "solve_island",
           "solve_dense_lcp", "island_inverse", "store_island"]
