"""The rigid contact LCP of one step in numpy: its layout, the dense and sparse assembly of (M, q), the friction
directions, the gap term, the dense Jacobian rows and block inverse of free bodies, the contacts' identities
across steps (the warm start's keys).

With the momentum matrix A, the free-motion velocity v* and, per contact i, the contact-frame Jacobian rows
J_t,i (2 × n_v, tangents t1, t2) and J_n,i (1 × n_v, normal from A into B) (Anitescu–Potra / Stewart–Trinkle,
docs/lcp.md §2):

    A v⁺ = A v* + J_nᵀ p_n + D β                         (impulses [N·s])
    0 ≤ p_n ⊥ J_n v⁺ + b            ≥ 0                  (normal; b = stabilized gap term [m/s])
    0 ≤ β   ⊥ Dᵀ v⁺ + E λ           ≥ 0                  (friction directions)
    0 ≤ λ   ⊥ μ p_n − Eᵀ β          ≥ 0                  (polyhedral Coulomb cone)

with D_i = J_t,iᵀ[u_1 … u_d], u_j = (cos 2πj/d, sin 2πj/d), d = ``friction_directions``, E = blockdiag(1_d).
Eliminating v⁺ = v* + A⁻¹W[p_n; β], W = [J_nᵀ D], gives LCP(M, q) in z = (p_n, β, λ) of size m(d+2):

    M = [[J_n A⁻¹ J_nᵀ, J_n A⁻¹ D, 0], [Dᵀ A⁻¹ J_nᵀ, Dᵀ A⁻¹ D, E], [μ, −Eᵀ, 0]],   q = (J_n v* + b, Dᵀ v*, 0).

Gap term (penetration stabilization, ``lcp_stabilization`` = s ∈ [0, 1]):
``b_i = max(φ_i, 0)/dt + s·min(φ_i, 0)/dt``: a gap may close exactly within the step (position-level
non-penetration, Stewart–Trinkle) and a penetration is removed at the fraction s per step (Baumgarte-like).
The compiled steps build the same rows with the kernels of ``lcp_rows`` (``assemble_dense`` is shared).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse

from convexsim.model import Contacts
from convexsim.stepping.lcp_rows import assemble_dense

@dataclass(frozen=True)
class ContactLcpLayout:
    """How z of the contact LCP is laid out and mapped back to impulses.

    z = (p_n (m), β (m·d, contact-major), λ (m)).

    Attributes:
        num_contacts: m.
        num_directions: d (0 = frictionless, β and λ absent).
        directions: u_j in the tangent plane (t1, t2), shape (d, 2).
        W: generalized impulse directions [J_nᵀ D], shape (n_v, m + m·d).
        AinvW: A⁻¹W, shape (n_v, m + m·d).
    """

    num_contacts: int
    num_directions: int
    directions: np.ndarray
    W: np.ndarray
    AinvW: np.ndarray

    @property
    def size(self) -> int:
        """Number of LCP unknowns m(d + 2) (m when frictionless)."""
        m, d = self.num_contacts, self.num_directions
        return m * (d + 2) if d else m

    def contact_of_variable(self, i: int) -> int:
        """Contact index owning LCP variable i."""
        m, d = self.num_contacts, self.num_directions
        if i < m:
            return i
        if i < m + m * d:
            return (i - m) // d
        return i - m - m * d

    def impulses(self, z: np.ndarray) -> np.ndarray:
        """Contact-frame impulses γ = (γ_t1, γ_t2, γ_n) [N·s] per contact, shape (m, 3)."""
        m, d = self.num_contacts, self.num_directions
        gamma = np.zeros((m, 3))
        gamma[:, 2] = z[:m]
        if d:
            beta = z[m:m + m * d].reshape(m, d)
            gamma[:, :2] = beta @ self.directions
        return gamma

    def velocity(self, v_star: np.ndarray, z: np.ndarray) -> np.ndarray:
        """v⁺ = v* + A⁻¹W[p_n; β], shape (n_v,)."""
        return v_star + self.AinvW @ z[: self.AinvW.shape[1]]




def friction_directions(d: int) -> np.ndarray:
    """u_j = (cos 2πj/d, sin 2πj/d), j = 0..d−1, in the tangent basis (t1, t2), shape (d, 2)."""
    a = 2.0 * np.pi * np.arange(d) / d
    return np.stack([np.cos(a), np.sin(a)], axis=1)


def _friction_setup(mu, num_directions: int) -> tuple[np.ndarray, int, np.ndarray]:
    """(μ as floats, d, the directions U (d × 2)): d = 0 when every μ is 0 (frictionless LCP); ValueError for
    0 < d < 3."""
    mu = np.asarray(mu, float)
    d = int(num_directions)
    if d and d < 3:
        raise ValueError(f"friction_directions must be ≥ 3 (or 0 for frictionless); got {d}")
    if d and not np.any(mu > 0):
        d = 0
    return mu, d, (friction_directions(d) if d else np.zeros((0, 2)))


def build_contact_lcp(Ainv: np.ndarray, v_star: np.ndarray, J: np.ndarray, bias: np.ndarray, mu: np.ndarray,
                      num_directions: int) -> tuple[np.ndarray, np.ndarray, ContactLcpLayout]:
    """The Anitescu–Potra / Stewart–Trinkle LCP (M, q) of one step (module docstring).

    Args:
        Ainv: inverse momentum matrix A⁻¹ [1/kg, 1/(kg·m²)], shape (n_v, n_v).
        v_star: free-motion velocity [m/s, rad/s], shape (n_v,).
        J: contact-frame Jacobians, rows (t1, t2, n) per contact, shape (m, 3, n_v).
        bias: constant term of the rows [m/s]: the normal row's b, shape (m,), or (t1, t2, n) per contact, shape
            (m, 3) (:func:`contact_bias`: a kinematic body's known velocity, q gains u_jᵀ b_t on the friction rows).
        mu: friction coefficients, shape (m,).
        num_directions: d ≥ 3, or 0 for frictionless contact (also used when every μ is 0).

    Returns:
        (M, q, layout): M shape (N, N), q shape (N,), N = layout.size.
    """
    J = np.asarray(J, float)
    m, _, nv = J.shape
    mu, d, U = _friction_setup(mu, num_directions)
    nw = m * (d + 1)
    bias = row_bias(bias, m)
    if nv * nw * (nv + nw) <= DENSE_ASSEMBLY_WORK:
        Ainv = np.ascontiguousarray(Ainv, dtype=float)
        M, q, W, AinvW = assemble_dense(Ainv, np.ascontiguousarray(v_star, dtype=float), np.ascontiguousarray(J),
                                        bias, np.ascontiguousarray(mu), U, d)
        return M, q, ContactLcpLayout(m, d, U, W, AinvW)
    Jn = J[:, 2, :]                                            # (m, nv)
    if d:
        D = np.einsum("cki,jk->icj", J[:, :2, :], U).reshape(nv, m * d)   # column (c, j) = J_t,cᵀ u_j
        W = np.concatenate([Jn.T, D], axis=1)
    else:
        W = Jn.T.copy()
    # W is sparse (a contact touches at most two bodies' dofs): products through its nonzeros, O(nnz(W)·n_v)
    # and O(nnz(W)·size) instead of dense O(n_v²·size) and O(n_v·size²) (the heap of a pile: ~20× less)
    # A⁻¹ is block diagonal (6 × 6 per body): the sparse–sparse product touches only the pairs of impulse
    # directions that share a body, instead of a dense (size × n_v) · (n_v × size) product
    Wt = scipy.sparse.csr_matrix(W.T)
    WtAinv = (Wt @ scipy.sparse.csr_matrix(Ainv.T)).tocsr()
    AinvW = np.ascontiguousarray(WtAinv.T.toarray())
    B = WtAinv @ Wt.T
    B = (0.5 * (B + B.T)).tocoo()                              # symmetric by construction; remove round-off
    M, q = lcp_from_impulse_block(B, W, v_star, bias, mu, m, d)
    return M, q, ContactLcpLayout(m, d, U, W, AinvW)


def lcp_from_impulse_block(B, W: np.ndarray, v_star: np.ndarray, bias: np.ndarray, mu: np.ndarray, m: int,
                           d: int) -> tuple[np.ndarray, np.ndarray]:
    """The LCP (M, q) of the module docstring from its impulse block B = WᵀA⁻¹W (dense, or a scipy COO
    matrix), W = [J_nᵀ D] (n_v, m(d + 1)), v* [m/s, rad/s], the normal rows' bias b [m/s] (m,) or the rows'
    constant terms (m, 3) (:func:`contact_bias`: b_t adds u_jᵀ b_t to the friction rows) and μ (m,):
    M = [[B, [0; E]], [μ, −Eᵀ, 0]], q = (J_n v* + b, Dᵀv*, 0); d = 0: M = B, q = J_n v* + b."""
    nz = m * (d + 2) if d else m
    nw = W.shape[1]
    M = np.zeros((nz, nz))
    q = np.zeros(nz)
    if isinstance(B, np.ndarray):
        M[:nw, :nw] = B
    else:
        M[B.row, B.col] = B.data
    q[:nw] = W.T @ v_star
    add_bias(q, row_bias(bias, m), friction_directions(d) if d else np.zeros((0, 2)), m, d)
    friction_cone_rows(M, mu, m, d)
    return M, q


def friction_cone_rows(M: np.ndarray, mu, m: int, d: int) -> None:
    """Write the friction rows of the LCP matrix M in place (d > 0): E = blockdiag(1_d) in the β rows' λ
    columns, μ (m,) and −Eᵀ in the λ rows (module docstring); nothing for d = 0."""
    if not d:
        return
    nw = m * (d + 1)
    c = np.arange(m)
    rows = m + np.arange(m * d)                                 # β rows, contact-major
    M[rows, nw + rows_contact(m, d)] = 1.0                     # E = blockdiag(1_d)
    M[nw + c, c] = mu
    M[nw + rows_contact(m, d), rows] = -1.0                    # −Eᵀ


def build_contact_lcp_sparse(inv_blocks: np.ndarray, v_star: np.ndarray, J_a: np.ndarray, J_b: np.ndarray,
                             body_a: np.ndarray, body_b: np.ndarray, bias: np.ndarray, mu: np.ndarray,
                             num_directions: int) -> tuple[scipy.sparse.csr_matrix, np.ndarray, ContactLcpLayout]:
    """``build_contact_lcp`` for a large island, from the per-body blocks, with M in sparse (CSR) form.

    The same LCP (module docstring) up to summation order: W = [J_nᵀ D] is assembled from each contact's two
    3 × 6 Jacobian blocks (D's columns u_j,1·J_t1 + u_j,2·J_t2 per block), A⁻¹ is block diagonal, and
    M's impulse block Wᵀ A⁻¹ W is a sparse product (two impulse directions couple only through a shared
    body). Nothing n × n or n_v × n is dense: the layout's W and A⁻¹W are sparse too (``velocity`` works
    unchanged).

    Args:
        inv_blocks: A⁻¹ per body of the island, shape (nb, 6, 6).
        v_star: free-motion velocity of the island's bodies, shape (6·nb,).
        J_a, J_b: contact-frame Jacobian blocks (rows t1, t2, n) of each side, shape (m, 3, 6).
        body_a, body_b: island-local body index of each side (−1: a fixed body), shape (m,).
        bias, mu, num_directions: as ``build_contact_lcp``.

    Returns:
        (M as scipy.sparse.csr_matrix, q, layout).
    """
    m = J_a.shape[0]
    nb = inv_blocks.shape[0]
    nv = 6 * nb
    mu, d, U = _friction_setup(mu, num_directions)
    nw = m * (d + 1)
    rows, cols, vals = [], [], []
    for blocks, body in ((np.asarray(J_a, float), np.asarray(body_a)), (np.asarray(J_b, float), np.asarray(body_b))):
        on = body >= 0
        c = np.flatnonzero(on)
        # Wᵀ rows of this side: the normal row of each contact, then its d direction rows (contact-major)
        wt = [blocks[c, 2, :]]
        r = [c]
        if d:
            wt.append(np.einsum("jk,ckl->cjl", U, blocks[c, :2, :]).reshape(-1, 6))
            r.append((m + c[:, None] * d + np.arange(d)[None, :]).reshape(-1))
        wt = np.concatenate(wt)
        r = np.concatenate(r)
        b = np.concatenate([body[c]] + ([np.repeat(body[c], d)] if d else []))
        rows.append(np.repeat(r, 6))
        cols.append((6 * b[:, None] + np.arange(6)[None, :]).reshape(-1))
        vals.append(wt.reshape(-1))
    Wt = scipy.sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                                 shape=(nw, nv))
    Ainv = scipy.sparse.bsr_matrix((np.asarray(inv_blocks, float), np.arange(nb), np.arange(nb + 1)),
                                   shape=(nv, nv)).tocsr()
    WtAinv = (Wt @ Ainv).tocsr()
    G = WtAinv @ Wt.T
    G = (0.5 * (G + G.T)).tocoo()                              # symmetric by construction; remove round-off
    nz = m * (d + 2) if d else m
    q = np.zeros(nz)
    q[:nw] = Wt @ np.asarray(v_star, float)
    add_bias(q, row_bias(bias, m), U, m, d)
    r, c, v = [G.row], [G.col], [G.data]
    if d:
        k = np.arange(m * d)
        owner = rows_contact(m, d)
        ci = np.arange(m)
        r += [m + k, nw + ci, nw + owner]                      # E, μ, −Eᵀ
        c += [nw + owner, ci, m + k]
        v += [np.ones(m * d), mu, -np.ones(m * d)]
    M = scipy.sparse.csr_matrix((np.concatenate(v), (np.concatenate(r), np.concatenate(c))), shape=(nz, nz))
    M.sum_duplicates()
    M.eliminate_zeros()
    M.sort_indices()
    return M, q, ContactLcpLayout(m, d, U, Wt.T.tocsc(), WtAinv.T.tocsc())


DENSE_ASSEMBLY_WORK = 2_000_000
"""``build_contact_lcp`` assembles with one compiled dense kernel (``assemble_dense``) when
n_v·n_w·(n_v + n_w) ≤ this (n_w = m(d + 1) impulse directions), through scipy.sparse products otherwise.
The two give the same (M, q) up to round-off (summation order); on small islands the sparse path's cost is
all Python and index bookkeeping."""


def row_bias(bias, m: int) -> np.ndarray:
    """The rows' constant terms as (m, 3) (t1, t2, n): a normal-only b (m,) goes to the normal column."""
    b = np.asarray(bias, dtype=float)
    if b.ndim == 2:
        return np.ascontiguousarray(b.reshape(m, 3))
    out = np.zeros((m, 3))
    out[:, 2] = b
    return out


def add_bias(q: np.ndarray, bias: np.ndarray, U: np.ndarray, m: int, d: int) -> None:
    """q += the rows' constant terms (m, 3): b_n on the normal rows, u_jᵀ b_t on friction direction j
    (contact-major): the numpy twin of ``lcp_rows.add_row_bias`` for the sparse assemblies (no kernel to
    compile on the reference path's large islands)."""
    q[:m] += bias[:, 2]
    if d and np.any(bias[:, :2] != 0.0):
        q[m:m + m * d] += (bias[:, None, :2] * U[None, :, :]).sum(axis=2).reshape(-1)


def contact_bias(gap: np.ndarray, known: np.ndarray | None) -> np.ndarray:
    """The contacts' constant terms: the gap terms b (m,) alone when ``known`` is None, else (m, 3): the known
    contact velocity of a kinematic body (``dynamics.known_contact_velocity``) with b added on the normal
    (the compiled kernel: ``lcp_rows.contact_bias``)."""
    if known is None:
        return gap
    out = np.array(known, dtype=float)
    out[:, 2] += gap
    return out


def rows_contact(m: int, d: int) -> np.ndarray:
    """Contact index of each β variable (contact-major, d per contact), shape (m·d,)."""
    return np.repeat(np.arange(m), d)


def dense_jacobian(kin, nv: int) -> np.ndarray:
    """Contact-frame Jacobians as dense rows (m, 3, n_v) from the per-body blocks of ``contact_kinematics``."""
    m = kin.contacts.count
    J = np.zeros((m, 3, nv // 6, 6))
    for blocks, clique in ((kin.J_a, kin.clique_a), (kin.J_b, kin.clique_b)):
        clique = np.asarray(clique)
        i = np.flatnonzero(clique >= 0)
        np.add.at(J, (i, slice(None), clique[i]), np.asarray(blocks)[i])
    return J.reshape(m, 3, nv)


def block_inverse(A_blocks: np.ndarray) -> np.ndarray:
    """Dense A⁻¹ from per-body 6×6 blocks, shape (6·nmov, 6·nmov)."""
    n = A_blocks.shape[0]
    Ainv = np.zeros((6 * n, 6 * n))
    inv = np.linalg.inv(A_blocks) if n else A_blocks
    for b in range(n):
        Ainv[6 * b:6 * b + 6, 6 * b:6 * b + 6] = inv[b]
    return Ainv



def gap_bias(phi: np.ndarray, dt: float, stabilization: float) -> np.ndarray:
    """b = max(φ, 0)/dt + s·min(φ, 0)/dt [m/s]: close gaps exactly, remove the fraction s of penetration."""
    phi = np.asarray(phi, float)
    return np.maximum(phi, 0.0) / dt + stabilization * np.minimum(phi, 0.0) / dt


def contact_keys(contacts: Contacts) -> np.ndarray:
    """Identity of each contact across steps: (geom_a, geom_b, k), k = index within its pair, shape (nc, 3).

    Contacts are ordered by pair and, within a pair, in the kernel's order (convexsim.geometry.collide),
    so k is the manifold point index. It is only a guess of "the same contact" (a manifold may reorder
    its points); the warm start never relies on it for correctness.
    """
    ga = np.asarray(contacts.geom_a, np.int64)
    gb = np.asarray(contacts.geom_b, np.int64)
    m = ga.shape[0]
    keys = np.zeros((m, 3), np.int64)
    if m == 0:
        return keys
    first = np.ones(m, bool)
    first[1:] = (ga[1:] != ga[:-1]) | (gb[1:] != gb[:-1])
    ar = np.arange(m)
    keys[:, 0], keys[:, 1] = ga, gb
    keys[:, 2] = ar - np.maximum.accumulate(np.where(first, ar, 0))
    return keys



__all__ = ["ContactLcpLayout", "friction_directions", "build_contact_lcp", "build_contact_lcp_sparse",
           "lcp_from_impulse_block", "friction_cone_rows", "row_bias", "add_bias", "contact_bias",
           "DENSE_ASSEMBLY_WORK", "rows_contact", "dense_jacobian", "block_inverse", "gap_bias", "contact_keys"]
