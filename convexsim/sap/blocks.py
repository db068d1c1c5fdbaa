"""Numba kernels on the block layout of a SAP problem: products with A and J, Delassus estimate, Hessian.

Layout (built by :class:`convexsim.sap.ContactProblem`):

* cliques c = 0..ncl−1 own the contiguous velocity range ``clique_start[c] : clique_start[c] + clique_sizes[c]``;
  A = blkdiag(A_c) with A_c (n_c x n_c, row-major) at ``A_values[A_ptr[c]:]``.
* constraint i touches ``cliques[i, 0]`` and optionally ``cliques[i, 1]`` (−1 if absent); its Jacobian block for
  side s (3 x n_c, row-major, contact frame, normal last) is at ``J_values[J_ptr[i, s]:]`` (−1 if absent), so
  vc_i = Σ_s J_i,s v_c(s).
* Hessian H = A + Jᵀ G J in the block-sparse format of ``convexsim.sap.block_sparse``: diagonal block c at
  ``diag_ptr[c]``; edge e = (a, b), a < b, stores H[rows of b, cols of a] (n_b x n_a) at ``edge_ptr[e]``;
  ``constraint_edge[i]`` is the edge of constraint i (−1 for a single-clique constraint).
"""

from __future__ import annotations

import math

import numpy as np

from convexsim._jit import jit


@jit
def _clique_of(cliques, clique_sizes, J_ptr, i, side):
    """(clique c, its size n, the offset p of its 3 × n Jacobian block J_i,c in J_values) of constraint i's side
    0 or 1; c = −1 when that side is the world (no clique)."""
    c = cliques[i, side]
    if c < 0:
        return c, 0, 0
    return c, clique_sizes[c], J_ptr[i, side]


@jit
def block_diag_matvec(clique_start, clique_sizes, A_ptr, A_values, x, out):
    """out = A x for A = blkdiag(A_c). x, out: (nv,)."""
    for c in range(clique_sizes.shape[0]):
        n = clique_sizes[c]
        s = clique_start[c]
        p = A_ptr[c]
        for r in range(n):
            acc = 0.0
            for k in range(n):
                acc += A_values[p + r * n + k] * x[s + k]
            out[s + r] = acc


@jit
def constraint_velocities(clique_start, clique_sizes, cliques, J_ptr, J_values, v, vc_out):
    """vc_out[i] = Σ_s J_i,s v_c(s) [m/s], shape (nk, 3)."""
    for i in range(cliques.shape[0]):
        for r in range(3):
            vc_out[i, r] = 0.0
        for side in range(2):
            c, n, p = _clique_of(cliques, clique_sizes, J_ptr, i, side)
            if c < 0:
                continue
            s = clique_start[c]
            for r in range(3):
                acc = 0.0
                for k in range(n):
                    acc += J_values[p + r * n + k] * v[s + k]
                vc_out[i, r] += acc


@jit
def generalized_impulses(clique_start, clique_sizes, cliques, J_ptr, J_values, gamma, out):
    """out = Jᵀ γ (nv,) [N·s] for impulses γ (nk, 3)."""
    out[:] = 0.0
    for i in range(cliques.shape[0]):
        for side in range(2):
            c, n, p = _clique_of(cliques, clique_sizes, J_ptr, i, side)
            if c < 0:
                continue
            s = clique_start[c]
            for k in range(n):
                acc = 0.0
                for r in range(3):
                    acc += J_values[p + r * n + k] * gamma[i, r]
                out[s + k] += acc


@jit
def delassus_estimate(clique_start, clique_sizes, A_ptr, A_values, cliques, J_ptr, J_values, w_out):
    """Delassus diagonal estimate w_i = ‖Σ_c J_i,c diag(A_c)⁻¹ J_i,cᵀ‖_F / 3 [1/kg] (docs/sap-model.md §1)."""
    W = np.empty((3, 3))
    for i in range(cliques.shape[0]):
        W[:, :] = 0.0
        for side in range(2):
            c, n, p = _clique_of(cliques, clique_sizes, J_ptr, i, side)
            if c < 0:
                continue
            pa = A_ptr[c]
            for k in range(n):
                inv_a = 1.0 / A_values[pa + k * n + k]
                for r in range(3):
                    for q in range(3):
                        W[r, q] += J_values[p + r * n + k] * inv_a * J_values[p + q * n + k]
        acc = 0.0
        for r in range(3):
            for q in range(3):
                acc += W[r, q] * W[r, q]
        w_out[i] = math.sqrt(acc) / 3.0


@jit
def _add_jt_g_j(J_values, pb, nb, G, pa, na, out, po, GJa):
    """out[po:] (nb x na, row-major) += J_bᵀ G J_a with J_b at J_values[pb:], J_a at J_values[pa:].

    GJa: scratch of shape (3, ≥ na).
    """
    for r in range(3):
        for k in range(na):
            acc = 0.0
            for q in range(3):
                acc += G[r, q] * J_values[pa + q * na + k]
            GJa[r, k] = acc
    for rb in range(nb):
        for k in range(na):
            acc = 0.0
            for r in range(3):
                acc += J_values[pb + r * nb + rb] * GJa[r, k]
            out[po + rb * na + k] += acc


@jit
def _is_zero3(g):
    """True when every entry of the 3x3 block g is exactly zero (NaN is not zero)."""
    for r in range(3):
        for q in range(3):
            if g[r, q] != 0.0:
                return False
    return True


@jit
def assemble_hessian_blocks(
    clique_sizes, A_ptr, A_values, cliques, J_ptr, J_values, G, constraint_edge, diag_ptr, edge_ptr,
    diag_out, edge_out,
):
    """Nonzero blocks of H = A + Jᵀ G J into diag_out / edge_out (layout in the module docstring)."""
    edge_out[:] = 0.0
    n_max = 1
    for c in range(clique_sizes.shape[0]):
        n = clique_sizes[c]
        n_max = max(n_max, n)
        for k in range(n * n):
            diag_out[diag_ptr[c] + k] = A_values[A_ptr[c] + k]
    GJa = np.empty((3, n_max))
    for i in range(cliques.shape[0]):
        if _is_zero3(G[i]):  # adds exactly nothing (open speculative contacts, flat regions of the cost)
            continue
        for side in range(2):
            c, n, p = _clique_of(cliques, clique_sizes, J_ptr, i, side)
            if c < 0:
                continue
            _add_jt_g_j(J_values, p, n, G[i], p, n, diag_out, diag_ptr[c], GJa)
        e = constraint_edge[i]
        if e >= 0:
            c0 = cliques[i, 0]
            c1 = cliques[i, 1]
            a, b = (0, 1) if c0 < c1 else (1, 0)
            ca = cliques[i, a]
            cb = cliques[i, b]
            _add_jt_g_j(
                J_values, J_ptr[i, b], clique_sizes[cb], G[i], J_ptr[i, a], clique_sizes[ca], edge_out,
                edge_ptr[e], GJa,
            )


@jit
def blocks_to_dense(block_sizes, edges, diag_ptr, edge_ptr, diag_values, edge_values, out):
    """Scatter the block description of a symmetric matrix into the dense out (n x n)."""
    nb = block_sizes.shape[0]
    start = np.zeros(nb, dtype=np.int64)
    for c in range(1, nb):
        start[c] = start[c - 1] + block_sizes[c - 1]
    out[:, :] = 0.0
    for c in range(nb):
        n = block_sizes[c]
        for r in range(n):
            for k in range(n):
                out[start[c] + r, start[c] + k] = diag_values[diag_ptr[c] + r * n + k]
    for e in range(edges.shape[0]):
        a = edges[e, 0]
        b = edges[e, 1]
        na = block_sizes[a]
        nb_ = block_sizes[b]
        for r in range(nb_):
            for k in range(na):
                x = edge_values[edge_ptr[e] + r * na + k]
                out[start[b] + r, start[a] + k] = x
                out[start[a] + k, start[b] + r] = x


@jit
def cholesky_in_place(M, n):
    """Lower Cholesky factor of the leading n x n of M, in place. Returns 0 on success, else 1 + failed pivot."""
    for j in range(n):
        d = M[j, j]
        for k in range(j):
            d -= M[j, k] * M[j, k]
        if not (d > 0.0) or not math.isfinite(d):
            return j + 1
        d = math.sqrt(d)
        M[j, j] = d
        for i in range(j + 1, n):
            acc = M[i, j]
            for k in range(j):
                acc -= M[i, k] * M[j, k]
            M[i, j] = acc / d
    return 0


@jit(inline="always")
def forward_substitution(L, x, o, c):
    """x[o:o+w, c] ← L⁻¹ x[o:o+w, c] for the lower-triangular w × w top of L (w = L's columns; rows beyond w are
    not read): x_j = (x_j − Σ_(t<j) L_jt x_t) / L_jj, j = 0…w−1."""
    for j in range(L.shape[1]):
        s = x[o + j, c]
        for t in range(j):
            s -= L[j, t] * x[o + t, c]
        x[o + j, c] = s / L[j, j]


@jit(inline="always")
def back_substitution_transposed(L, x, o, c):
    """x[o:o+w, c] ← L⁻ᵀ x[o:o+w, c] for L as in :func:`forward_substitution`: x_j = (x_j − Σ_(t>j) L_tj x_t) / L_jj,
    j = w−1…0."""
    w = L.shape[1]
    for j in range(w - 1, -1, -1):
        s = x[o + j, c]
        for t in range(j + 1, w):
            s -= L[t, j] * x[o + t, c]
        x[o + j, c] = s / L[j, j]


@jit(inline="always")
def subtract_block_product(B, x, o_in, o_out, c, transposed):
    """x[o_out:, c] −= B x[o_in:, c] (B: nr × nk), or −= Bᵀ x[o_in:, c] (``transposed``); each entry summed in
    index order. The input and output ranges must not overlap."""
    nr, nk = B.shape
    for i in range(nk if transposed else nr):
        acc = 0.0
        for t in range(nr if transposed else nk):
            acc += (B[t, i] if transposed else B[i, t]) * x[o_in + t, c]
        x[o_out + i, c] -= acc


@jit
def first_non_spd_block(clique_sizes, A_ptr, A_values):
    """Index of the first A_c that is not symmetric positive definite (or −1 if all are SPD)."""
    for c in range(clique_sizes.shape[0]):
        n = clique_sizes[c]
        p = A_ptr[c]
        M = np.empty((n, n))
        scale = 0.0
        for r in range(n):
            for k in range(n):
                M[r, k] = A_values[p + r * n + k]
                scale = max(scale, abs(M[r, k]))
        for r in range(n):
            for k in range(r):
                if abs(M[r, k] - M[k, r]) > 1e-10 * scale:
                    return c
        if cholesky_in_place(M, n) != 0:
            return c
    return -1


@jit
def dense_cholesky_solve(H, rhs, x_out):
    """Solve H x = rhs for SPD H (n x n) by Cholesky (H is overwritten by L). Returns 0, or 1 + failed pivot.

    Single-threaded on purpose: the dense path is for small problems and tests, where a threaded BLAS on a
    shared machine costs more than it saves.
    """
    n = H.shape[0]
    info = cholesky_in_place(H, n)
    if info != 0:
        return info
    for i in range(n):  # L y = rhs
        acc = rhs[i]
        for k in range(i):
            acc -= H[i, k] * x_out[k]
        x_out[i] = acc / H[i, i]
    for i in range(n - 1, -1, -1):  # Lᵀ x = y
        acc = x_out[i]
        for k in range(i + 1, n):
            acc -= H[k, i] * x_out[k]
        x_out[i] = acc / H[i, i]
    return 0
