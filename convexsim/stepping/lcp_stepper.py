"""The rigid LCP reference stepper: velocity-level contact with a polyhedral friction cone.

Anitescu–Potra / Stewart–Trinkle time stepping (docs/lcp.md §2). With the momentum
matrix A (per-body spatial mass in W), the free-motion velocity v* and, per contact i, the contact-
frame Jacobian rows J_t,i (2 × n_v, tangents t1, t2) and J_n,i (1 × n_v, normal from A into B):

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

Solve chain (``_solve_chain``; ``LcpStepInfo.rung`` says which rung solved the step): the warm start
(Lemke started from the previous step's basis, ``lemke_from_basis``, on islands of ≥ WARM_MIN_SIZE
unknowns, when on), on islands of ≥ LARGE_ISLAND_SIZE unknowns not solved warm Lemke from a crash basis
computed from the island's own LCP (``CRASH_START``, ``lcp.crash``), then Lemke (Harris ratio test) on
(M, q); if it fails, Lemke on seeded perturbations q + 1e-12·‖q‖∞·r, with other covering vectors d
(these first on islands of ≥ LARGE_ISLAND_SIZE unknowns, whose cold runs stop at LARGE_ISLAND_PIVOTS·n
pivots), and on M + ε‖M‖∞I; an answer of a modified problem is accepted only if it passes Lemke's final
check on the original (M, q). If nothing passes, ``LcpStepError`` names the contacts from the first Lemke run.

Newton restitution (``lcp_restitution`` = e > 0) uses Moreau's midpoint scheme (Glocker–Studer 2005):
q_M = q + (dt/2)v, contacts detected at q_M; active ones (φ_M ≤ 0) get the law 0 ≤ p_n ⊥ v_n⁺ + e·v_n⁻;
inactive ones keep the gap condition b = φ_M/(dt/2); then q⁺ = q_M + (dt/2)v⁺. No stabilization is applied
in this mode (it would change the rebound velocity).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse

from convexsim import dynamics
from convexsim.lcp.crash import crash_guess
from convexsim.lcp.lemke import (LemkeOptions, LemkeResult, LemkeStatus, LemkeWorkspace, as_sparse_lcp_matrix,
                                 default_max_pivots, final_check, final_check_sparse, inf_norm, lemke,
                                 lemke_from_basis, solve_from_basis)
from convexsim.model import Contacts, Model, State
from convexsim.stepping.contacts import contact_kinematics, contact_velocities
from convexsim.stepping.context import StepContext
from convexsim.stepping.lcp_rows import assemble_dense
from convexsim.stepping.types import SimulationError, StepInfo

WARM_START_DEFAULT = True
"""Whether ``lcp_step`` warm-starts each step's LCP from the previous step's solution when its
``warm_start`` argument is None (docs/lcp.md §2, "Warm start")."""

WARM_MIN_SIZE = 300
"""Islands with fewer LCP unknowns are solved cold even with the warm start on: below this size a cold
Lemke run (a few pivots) costs less than setting up the warm tableau (docs/lcp.md §2, "Warm start")."""

WARM_PIVOT_FRACTION = 0.5
"""The warm Lemke run (``lemke_from_basis``) may take at most max(50, WARM_PIVOT_FRACTION·n) pivots (n the
island's unknowns; a cold run on the heap takes ≈ 0.8·n) before the island falls back to the cold chain."""


class LcpStepError(SimulationError):
    """Lemke did not solve a step's contact LCP (secondary ray, pivot limit or numerical failure).

    Attributes:
        step, time: where it happened (from SimulationError).
        contacts: indices (into the step's contact list) of the contacts involved: for a ray those
            carrying the ray direction (``ray_contacts``: the entering variable's contact if the ray's
            z-part is all zero), otherwise, or if no contact is identified, all contacts of the step.
        status: the LemkeStatus.
        pivots: pivots performed.
    """

    def __init__(self, message: str, *, step: int, time: float, contacts: list[int], status: LemkeStatus,
                 pivots: int):
        super().__init__(message, step=step, time=time, contacts=contacts)
        self.status = status
        self.pivots = pivots


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
        bias: constant term of the normal row b [m/s], shape (m,).
        mu: friction coefficients, shape (m,).
        num_directions: d ≥ 3, or 0 for frictionless contact (also used when every μ is 0).

    Returns:
        (M, q, layout): M shape (N, N), q shape (N,), N = layout.size.
    """
    J = np.asarray(J, float)
    m, _, nv = J.shape
    mu, d, U = _friction_setup(mu, num_directions)
    nw = m * (d + 1)
    if nv * nw * (nv + nw) <= DENSE_ASSEMBLY_WORK:
        Ainv = np.ascontiguousarray(Ainv, dtype=float)
        M, q, W, AinvW = assemble_dense(Ainv, np.ascontiguousarray(v_star, dtype=float), np.ascontiguousarray(J),
                                        np.ascontiguousarray(bias, dtype=float), np.ascontiguousarray(mu), U, d)
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
    nz = m * (d + 2) if d else m
    M = np.zeros((nz, nz))
    q = np.zeros(nz)
    nw = W.shape[1]
    M[B.row, B.col] = B.data
    q[:nw] = W.T @ v_star
    q[:m] += bias
    if d:
        c = np.arange(m)
        rows = m + np.arange(m * d)                             # β rows, contact-major
        M[rows, nw + rows_contact(m, d)] = 1.0                 # E = blockdiag(1_d)
        M[nw + c, c] = mu
        M[nw + rows_contact(m, d), rows] = -1.0                # −Eᵀ
    return M, q, ContactLcpLayout(m, d, U, W, AinvW)


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
    q[:m] += np.asarray(bias, float)
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


def ray_contacts(result: LemkeResult, layout: ContactLcpLayout) -> list[int]:
    """Contacts carrying a secondary ray's direction (sorted indices into the step's contact list).

    The z-part of the ray names them. When it is all zero (the entering variable was a slack w_i
    and no basic z moves along the ray), the contact of the entering variable is named instead:
    it is the complement of the last variable that left, recorded in ``result.basis``' missing
    index. Empty if neither identifies a contact (the caller then names all contacts).
    """
    nz = np.flatnonzero(np.abs(result.ray) > 0)
    if nz.size:
        return sorted({layout.contact_of_variable(int(i)) for i in nz})
    n = layout.size
    basis = np.asarray(result.basis)
    if basis.shape != (n,):
        return []
    # almost-complementary basis: exactly one index pair (w_i, z_i) has neither member basic; the
    # entering variable is one of that pair (the other just left), so i names the contact
    present = np.zeros(n, bool)
    for b in basis:
        b = int(b)
        if b < 2 * n:
            present[b % n] = True
    missing = np.flatnonzero(~present)
    return sorted({layout.contact_of_variable(int(i)) for i in missing})


@dataclass
class LcpStepInfo(StepInfo):
    """StepInfo of the LCP stepper, with the solve path and the work done.

    Attributes (besides StepInfo's; ``iterations`` = ``pivots`` + ``warm_solves``, all the step's solver
    work: the warm runs' pivots and factorizations, then the cold runs' pivots):
        warm_attempted: a previous basis was available and tried on some island (warm start on, an
            island of ≥ WARM_MIN_SIZE unknowns).
        warm_accepted: the step's solution came from the warm start (it passed Lemke's final check).
        warm_solves: islands tried warm or from a crash basis (one factorization of M_αα each).
        pivots: Lemke pivots over every Lemke run of the step (fallback rungs included).
        rung: what solved the LCP (``RUNGS``): "warm", "crash" (Lemke from the island's crash basis), "lemke",
            "perturbed_q", "covering", "regularized";
            "" for a step without contacts. With several contact islands, the furthest rung any needed.
        lemke_runs: cold Lemke runs (1 + fallback attempts per island not solved warm).
        islands: contact islands solved separately (``contact_islands``; 1 with SPLIT_ISLANDS off).
    """

    warm_attempted: bool = False
    warm_accepted: bool = False
    warm_solves: int = 0
    pivots: int = 0
    rung: str = ""
    lemke_runs: int = 0
    islands: int = 0
    path: str = "reference"
    """Which path took the step: "compiled" (``stepping.lcp_compiled``), "reference", or "reference: <why>"
    when the compiled path handed the step to the reference (e.g. its first Lemke run failed)."""


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


def validate_settings(model: Model) -> None:
    s = model.solver
    if not 0.0 <= s.lcp_stabilization <= 1.0:
        raise ValueError(f"solver.lcp_stabilization must be in [0, 1]; got {s.lcp_stabilization}")
    if not 0.0 <= s.lcp_restitution <= 1.0:
        raise ValueError(f"solver.lcp_restitution must be in [0, 1]; got {s.lcp_restitution}")
    if s.friction_directions != 0 and s.friction_directions < 3:
        raise ValueError(f"solver.friction_directions must be ≥ 3; got {s.friction_directions}")


FALLBACK_Q_TRIES = 3
"""Seeded perturbations q + 1e-12·‖q‖∞·r (r ~ N(0, 1)) tried when Lemke fails on (M, q)."""

FALLBACK_COVERING_TRIES = 2
"""Seeded covering vectors d ~ U(0.5, 1.5)ⁿ tried next (d changes Lemke's path, not the LCP)."""

FALLBACK_REGULARIZATION = (1e-13, 1e-12)
"""ε of the last rung, M + ε·‖M‖∞·I. Larger ε made failures more frequent on box_stack, not fewer."""

FALLBACK_MAX_GAIN = 1e8
"""A fallback answer must have ‖M‖∞‖z‖∞ ≤ FALLBACK_MAX_GAIN·‖q‖∞. The final check is relative to
s_w = ‖M‖∞‖z‖∞ + ‖q‖∞, so a huge z can pass it on an LCP without solution: M + εI gives jammed
penetrating contacts (internal forces, no solution) z ~ 1/ε, gain ~1e13. Real contact answers: ~1e3
(box_stack)."""

RUNGS = ("warm", "crash", "lemke", "perturbed_q", "covering", "regularized")
"""What solved a step's LCP, in the order tried (``LcpStepInfo.rung``; "" for a step without contacts)."""


@dataclass
class _ChainResult:
    z: np.ndarray
    rung: str
    pivots: int
    attempts: int
    basic: np.ndarray | None = None


def _accept_on_original(M, q, z) -> np.ndarray | None:
    """z if it passes Lemke's final check on (M, q), else the re-solve on z's support if that passes, else None.

    An answer of a modified problem (perturbed q, εI) is only as good as its check on the original data;
    a z beyond ``FALLBACK_MAX_GAIN`` is refused first.
    """
    opts = LemkeOptions()
    w = np.empty(q.shape[0])
    z = np.ascontiguousarray(z, dtype=float)
    mnorm = inf_norm(M)
    bound = FALLBACK_MAX_GAIN * float(np.abs(q).max()) / max(mnorm, 1e-300)
    if not np.abs(z).max() <= bound:
        return None
    if scipy.sparse.issparse(M):
        Mr = as_sparse_lcp_matrix(M)
        if final_check_sparse(Mr.indptr.astype(np.int64), Mr.indices.astype(np.int64), Mr.data, mnorm, q, z, w,
                              opts.check_tol) <= 1.0:
            return z.copy()
        M = Mr.toarray()                       # the rare re-solve below: a dense copy is fine
    elif final_check(M, q, z, w, opts.check_tol) <= 1.0:
        return z.copy()
    r = solve_from_basis(M, q, z > 0.0, max_solves=1)
    return r.z.copy() if r.solved and np.abs(r.z).max() <= bound else None


def basic_of(result: LemkeResult) -> np.ndarray:
    """Which z's are basic in a Lemke result's final basis, shape (n,) bool (basic z's at value 0
    included: on degenerate contact LCPs they are what makes the basis re-solvable next step)."""
    n = result.z.shape[0]
    b = np.asarray(result.basis, np.int64)
    mask = np.zeros(n, bool)
    mask[b[(b >= n) & (b < 2 * n)] - n] = True
    return mask


LARGE_ISLAND_SIZE = 600
"""Islands with at least this many unknowns (the sparse kernel's, ``lemke.sparse.AUTO_MIN_SIZE``) try the
covering vectors before perturbed q, and their cold runs stop at ``LARGE_ISLAND_PIVOTS``·n pivots."""

LARGE_ISLAND_PIVOTS = 5
"""Pivot cap of a large island's cold runs, per unknown (unless ``solver.lcp_max_pivots`` is set). A cold heap
run takes ≈ 0.8·n; a cycling one (mixed_clutter cold at t = 0.64 s, n = 1910) ran to the default 50·n
(95 500 pivots, 16 s) once per rung, and only a covering vector solved it (≈ 1600 pivots; docs/lcp.md §6)."""


def _fallback_attempts(M, q, step: int):
    """The fallback rungs as (rung, M', q', d) tuples, seeded by the step index (reproducible runs); on a large
    island the covering vectors come first (``LARGE_ISLAND_SIZE``)."""
    n = q.shape[0]
    qscale = float(np.abs(q).max()) if n else 0.0
    perturbed = [("perturbed_q", M, q + 1e-12 * qscale * np.random.default_rng([step, 1, k]).standard_normal(n),
                  None) for k in range(FALLBACK_Q_TRIES)]
    covering = [("covering", M, q, np.random.default_rng([step, 2, k]).uniform(0.5, 1.5, n))
                for k in range(FALLBACK_COVERING_TRIES)]
    yield from (covering + perturbed if n >= LARGE_ISLAND_SIZE else perturbed + covering)
    mscale = inf_norm(M)
    eye = scipy.sparse.identity(n, format="csr") if scipy.sparse.issparse(M) else np.eye(n)
    for eps in FALLBACK_REGULARIZATION:
        yield "regularized", M + eps * mscale * eye, q, None


def solve_contact_lcp(M, q, *, step: int = 0, max_pivots: int | None = None,
                      workspace: LemkeWorkspace | None = None) -> tuple[_ChainResult | None, LemkeResult]:
    """The stepper's solve chain on one LCP: Lemke on (M, q), then the fallback rungs
    (``_fallback_attempts``, seeded by ``step``), each answer accepted only if it passes the final check on
    the original (M, q) (``_accept_on_original``).

    Returns:
        (result or None if no rung solved it, the first Lemke run's result (a copy when it failed)).
    """
    n = q.shape[0]
    max_piv = max_pivots if max_pivots else default_max_pivots(n)
    if not max_pivots and n >= LARGE_ISLAND_SIZE:
        max_piv = min(max_piv, LARGE_ISLAND_PIVOTS * n)
    first = lemke(M, q, max_pivots=max_piv, workspace=workspace)
    if first.status == LemkeStatus.SOLVED:
        return _ChainResult(first.z, "lemke", first.pivots, 1, basic_of(first)), first
    first = LemkeResult(first.z.copy(), first.w.copy(), first.status, first.pivots, first.z0,
                        first.basis.copy(), first.ray.copy(), first.residual)
    pivots, attempts = first.pivots, 1
    for rung, Mk, qk, d in _fallback_attempts(M, q, step):
        r = lemke(Mk, qk, d=d, max_pivots=max_piv, workspace=workspace)
        pivots += r.pivots
        attempts += 1
        if r.status == LemkeStatus.SOLVED:
            z = _accept_on_original(M, q, r.z)
            if z is not None:
                return _ChainResult(z, rung, pivots, attempts, basic_of(r)), first
    return None, first


def _solve_chain(M, q, layout, model: Model, state: State, kin, workspace,
                 contact_index: np.ndarray | None = None) -> _ChainResult:
    """``solve_contact_lcp`` for a step; if no rung solves it, ``LcpStepError`` from the first Lemke result
    (it names the contacts; ``contact_index`` maps the LCP's contacts to the step's)."""
    s = model.solver
    n = q.shape[0]
    max_piv = s.lcp_max_pivots if s.lcp_max_pivots > 0 else default_max_pivots(n)
    if s.lcp_max_pivots <= 0 and n >= LARGE_ISLAND_SIZE:
        max_piv = min(max_piv, LARGE_ISLAND_PIVOTS * n)
    res, first = solve_contact_lcp(M, q, step=state.step, max_pivots=max_piv, workspace=workspace)
    if res is not None:
        return res
    attempts = 1 + FALLBACK_Q_TRIES + FALLBACK_COVERING_TRIES + len(FALLBACK_REGULARIZATION)
    _raise_step_error(first, layout, model, state, kin, max_piv, attempts, contact_index)


def _raise_step_error(r: LemkeResult, layout, model: Model, state: State, kin, max_piv: int, attempts: int,
                      contact_index: np.ndarray | None = None):
    """LcpStepError for a step no rung solved: what Lemke did on the original data, the contacts involved
    (indices into the step's contact list)."""
    m = layout.num_contacts
    involved = ray_contacts(r, layout) if r.status == LemkeStatus.SECONDARY_RAY else []
    if not involved:
        involved = list(range(m))
    if contact_index is not None:
        involved = sorted(int(contact_index[i]) for i in involved)
    c = kin.contacts
    desc = "; ".join(
        f"#{i} {model.body_names[c.body_a[i]]}–{model.body_names[c.body_b[i]]} φ = {c.phi[i]:.3g} m"
        for i in involved[:8])
    more = f" (+{len(involved) - 8} more)" if len(involved) > 8 else ""
    what = {LemkeStatus.SECONDARY_RAY: "ended on a secondary ray (no solution found; with penetration "
                                       "this signals jammed contacts, docs/lcp.md §2)",
            LemkeStatus.PIVOT_LIMIT: f"hit the pivot limit ({max_piv})",
            LemkeStatus.NUMERICAL_FAILURE: "failed its numerical check"}[r.status]
    raise LcpStepError(f"LCP contact solve {what} after {r.pivots} pivots; {m} contacts, size {layout.size}; "
                       f"{attempts - 1} fallback attempts (perturbed q, other covering vectors, M + εI) "
                       f"found no answer passing the check on the original data; contacts involved: "
                       f"{desc}{more}",
                       step=state.step, time=state.t, contacts=involved, status=r.status, pivots=r.pivots)


SPLIT_ISLANDS = True
"""Solve each contact island's LCP on its own (exact: the LCP is block diagonal over islands)."""


def contact_islands(clique_a: np.ndarray, clique_b: np.ndarray) -> list[np.ndarray]:
    """Contact index sets of the contact islands, in order of their first contact.

    Moving bodies (clique index ≥ 0) connected through contacts form an island; fixed bodies (−1) do not
    connect. Contacts of different islands share no velocity, so the contact LCP is block diagonal over
    islands. A contact between two fixed bodies forms an island of its own.
    """
    ca = np.asarray(clique_a, np.int64)
    cb = np.asarray(clique_b, np.int64)
    nb = int(max(ca.max(initial=-1), cb.max(initial=-1))) + 1
    parent = np.arange(nb)

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in zip(ca.tolist(), cb.tolist()):
        if a >= 0 and b >= 0:
            ra, rb = root(a), root(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    label = {}
    groups: list[list[int]] = []
    for i, (a, b) in enumerate(zip(ca.tolist(), cb.tolist())):
        key = root(a) if a >= 0 else (root(b) if b >= 0 else ("fixed", i))
        if key not in label:
            label[key] = len(groups)
            groups.append([])
        groups[label[key]].append(i)
    return [np.array(g, np.int64) for g in groups]


def _island_variables(idx: np.ndarray, m: int, d_global: int, d_island: int) -> np.ndarray:
    """Positions in the step's z = (p_n, β, λ) (m contacts, d_global directions) of an island's variables
    (its contacts idx, d_island directions: d_global, or 0 when the island is frictionless)."""
    if not d_island:
        return idx.copy()
    d = d_global
    beta = (m + idx[:, None] * d + np.arange(d)[None, :]).reshape(-1)
    return np.concatenate([idx, beta, m + m * d + idx])


CRASH_START = True
"""A large island (≥ LARGE_ISLAND_SIZE unknowns) not solved warm first tries Lemke from a crash basis computed
from its own LCP (``lcp.crash.crash_guess``: a projected Gauss–Seidel estimate of each contact's stick/slip
state), at most max(50, CRASH_PIVOT_FRACTION·n) pivots, before the cold chain (rung "crash"; docs/lcp.md §6,
"Crash basis for cold large islands")."""

CRASH_PIVOT_FRACTION = 1.5
"""Pivot cap of the crash start, per unknown. Measured on cold heap islands (n = 1470–3120): 0.01–0.1·n on
most, 0.37–0.70·n on the heap of a cold LCP run from t = 0 at t ≥ 1.15 s, against ≈ 0.8–1.05·n for a cold run
on the same LCPs: even a poor guess beats the cold run, so the cap sits above the cold run's count (with
0.75·n, late-heap crash runs hit it and paid the cold run on top; docs/lcp.md §6)."""


CRASH_BACKOFF_MAX = 4
"""After a failed crash run the crash start is skipped for k steps, k = 1, 2, 4 up to this with each failure in
a row (reset by a success): crash runs fail in stretches, each failure costing up to CRASH_PIVOT_FRACTION·n
pivots before the cold chain (docs/lcp.md §6)."""


def _crash_allowed(ctx: StepContext, step: int) -> bool:
    """Whether the crash start is tried at ``step`` (``CRASH_START`` and the backoff ``CRASH_BACKOFF_MAX``)."""
    failed, skip = ctx.lcp_crash_failed
    return CRASH_START and not 0 < step - failed <= skip


def _crash_outcome(ctx: StepContext, step: int, solved: bool) -> None:
    """Record a crash run's outcome in the context's backoff."""
    failed, skip = ctx.lcp_crash_failed
    if solved:
        ctx.lcp_crash_failed = (failed, 0)
    else:
        ctx.lcp_crash_failed = (step, min(max(1, 2 * skip), CRASH_BACKOFF_MAX))


def _crash_solve(M, q, layout, workspace) -> tuple[np.ndarray | None, int, np.ndarray | None]:
    """Lemke from the island's crash basis (``CRASH_START``), at most max(50, CRASH_PIVOT_FRACTION·n) pivots in
    all; if that run ends on a ray or fails numerically (not at the cap), once more from the guess without its
    λ's: (z or None, pivots, the final basis' basic z's or None). A returned z passed Lemke's final check on
    (M, q)."""
    n = q.shape[0]
    m, d = layout.num_contacts, layout.num_directions
    cap = max(50, int(CRASH_PIVOT_FRACTION * n))
    guess = crash_guess(M, q, m, d)
    r = lemke_from_basis(M, q, guess, max_pivots=cap, workspace=workspace)
    pivots = r.pivots
    if not r.solved and r.status != LemkeStatus.PIVOT_LIMIT and d and cap - pivots > 0:
        # a start basis whose path ends on a ray within a few pivots (seen on heap islands: 1–3 pivots, the same
        # with other covering vectors): the same guess without the sliding multipliers λ takes ≈ 0.4·n pivots
        # where a cold run takes ≈ 0.95·n (docs/lcp.md §6, "Crash basis for cold large islands")
        reduced = guess.copy()
        reduced[m + m * d:] = False
        r = lemke_from_basis(M, q, reduced, max_pivots=cap - pivots, workspace=workspace)
        pivots += r.pivots
    return (r.z.copy() if r.solved else None), pivots, (basic_of(r) if r.solved else None)


def _warm_solve(M, q, basic, workspace) -> tuple[np.ndarray | None, int, np.ndarray | None]:
    """Lemke started from the guessed basis (``lemke_from_basis``), at most max(50, WARM_PIVOT_FRACTION·n)
    pivots: (z or None, pivots, the final basis' basic z's or None). A returned z passed Lemke's final check
    on (M, q)."""
    n = q.shape[0]
    r = lemke_from_basis(M, q, basic, max_pivots=max(50, int(WARM_PIVOT_FRACTION * n)), workspace=workspace)
    return (r.z.copy() if r.solved else None), r.pivots, (basic_of(r) if r.solved else None)


@dataclass
class _StepSolution:
    v_next: np.ndarray
    gamma: np.ndarray
    pivots: int = 0
    warm_solves: int = 0
    warm_attempted: bool = False
    warm_accepted: bool = True
    rung: str = ""
    lemke_runs: int = 0
    islands: int = 0


SPARSE_ISLAND_SIZE = 600
"""Islands with at least this many LCP unknowns are assembled in sparse form (``build_contact_lcp_sparse``) and
solved by the sparse-LU Lemke without a dense n × n copy of M (the size from which the sparse kernel pays,
``lemke.sparse.AUTO_MIN_SIZE``)."""


def _island_size(m: int, d: int) -> int:
    """LCP unknowns of an island of m contacts with d friction directions (0: frictionless)."""
    return m * (d + 2) if d else m


def _solve_islands(model: Model, state: State, kin, A_blocks, v_star, J, bias, warm: bool,
                   ctx: StepContext) -> _StepSolution:
    """Solve the step's contact LCP island by island (all at once with SPLIT_ISLANDS off): warm start per
    island (from the previous step's solution), else the solve chain. Returns v⁺ and the impulses. J: the
    dense contact Jacobians (m, 3, n_v), or None (built on the first small island that needs them; large
    islands are assembled from the per-body blocks)."""
    s = model.solver
    m = kin.contacts.count
    mu = np.asarray(kin.params.mu, float)
    d_global = int(s.friction_directions) if np.any(mu > 0) else 0
    glob = ContactLcpLayout(m, d_global, np.zeros((d_global, 2)), np.zeros((0, 0)), np.zeros((0, 0)))
    guess = None
    if warm:
        cache = ctx.lcp_warm
        keys = contact_keys(kin.contacts)
        if glob.size >= WARM_MIN_SIZE:      # otherwise no island is warm-started: skip building the guess
            guess = cache.guess(model, state.step, keys, glob)
    if SPLIT_ISLANDS:
        islands = contact_islands(kin.clique_a, kin.clique_b)
    else:
        islands = [np.arange(m)]
    sol = _StepSolution(v_next=v_star.copy(), gamma=np.zeros((m, 3)), islands=len(islands))
    basic_all = np.zeros(glob.size, bool)
    worst = -1
    for idx in islands:
        cl = np.unique(np.concatenate([kin.clique_a[idx], kin.clique_b[idx]]))
        cl = cl[cl >= 0]
        dofs = (6 * cl[:, None] + np.arange(6)[None, :]).reshape(-1)
        vs = v_star[dofs]
        if _island_size(idx.size, d_global) >= SPARSE_ISLAND_SIZE:
            local = np.full(A_blocks.shape[0], -1, np.int64)
            local[cl] = np.arange(cl.size)
            ca, cb = kin.clique_a[idx], kin.clique_b[idx]
            M, q, layout = build_contact_lcp_sparse(
                np.linalg.inv(A_blocks[cl]), vs, kin.J_a[idx], kin.J_b[idx], np.where(ca >= 0, local[ca], -1),
                np.where(cb >= 0, local[cb], -1), bias[idx], mu[idx], s.friction_directions)
        else:
            if J is None:
                J = dense_jacobian(kin, v_star.shape[0])
            M, q, layout = build_contact_lcp(block_inverse(A_blocks[cl]), vs, J[idx][:, :, dofs], bias[idx],
                                             mu[idx], s.friction_directions)
        var = _island_variables(idx, m, d_global, layout.num_directions)
        z = None
        basic = None
        if guess is not None and q.shape[0] >= WARM_MIN_SIZE:
            sol.warm_attempted = True
            z, piv, basic = _warm_solve(M, q, guess[var], ctx.lemke)
            sol.warm_solves += 1
            sol.pivots += piv
            rung = "warm"
        if z is None and q.shape[0] >= LARGE_ISLAND_SIZE and _crash_allowed(ctx, state.step):
            z, piv, basic = _crash_solve(M, q, layout, ctx.lemke)
            _crash_outcome(ctx, state.step, z is not None)
            sol.warm_solves += 1
            sol.pivots += piv
            rung = "crash"
        if z is None:
            chain = _solve_chain(M, q, layout, model, state, kin, ctx.lemke, contact_index=idx)
            z, rung, basic = chain.z, chain.rung, chain.basic
            sol.pivots += chain.pivots
            sol.lemke_runs += chain.attempts
        worst = max(worst, RUNGS.index(rung))
        basic_all[var] = (z > 0.0) if basic is None else basic
        sol.v_next[dofs] = layout.velocity(vs, z)
        sol.gamma[idx] = layout.impulses(z)
    sol.warm_accepted = worst == 0
    sol.rung = RUNGS[worst] if worst >= 0 else ""
    if warm:
        cache.store(model, state.step + 1, keys, glob, basic_all)
    return sol


def lcp_step(model: Model, state: State, ctx: StepContext | None = None, *,
             warm_start: bool | None = None, path: str = "auto") -> tuple[State, StepInfo]:
    """Advance one step of the rigid LCP stepper (module docstring).

    Args:
        model, state: the model and the state at the start of the step.
        ctx: the run's StepContext (Lemke workspace, collision buffers and the previous step's
            final basis); None uses a fresh one (a cold step).
        warm_start: start Lemke from the previous step's basis first (default ``WARM_START_DEFAULT``;
            islands of ≥ WARM_MIN_SIZE unknowns). The previous final basis is kept in ``ctx.lcp_warm`` and
            used only if it belongs to the same model object and to step ``state.step − 1``; a warm
            solution is accepted only if it passes Lemke's final check, otherwise the cold chain runs
            (docs/lcp.md, "Warm start").
        path: "auto" (default): the compiled step (``stepping.lcp_compiled``) when the model is eligible,
            else :func:`reference_lcp_step`; "compiled": the compiled step (ValueError naming the reason if
            the model is not eligible); "reference": :func:`reference_lcp_step`. The choice is
            ``stepping.dispatch``'s.

    Returns:
        (new state, LcpStepInfo) with gamma the contact-frame impulses [N·s], force_world = R_WC γ / dt [N]
        (force on body B), iterations = Lemke pivots (warm and cold) + warm-start factorizations, pivots, rung (what
        solved the LCP), lemke_runs, warm_attempted / warm_accepted / warm_solves.

    Raises:
        LcpStepError: neither Lemke nor any fallback rung (perturbed q, other covering vectors, M + εI)
            gave an answer passing the check on the step's LCP (step, time, contacts, Lemke's status).
        ValueError: invalid LCP settings in model.solver.
    """
    from convexsim.stepping import dispatch

    return dispatch.step(model, state, ctx, path=path, warm_start=warm_start)


def reference_lcp_step(model: Model, state: State, ctx: StepContext | None = None, *,
                       warm_start: bool | None = None) -> tuple[State, StepInfo]:
    """The numpy reference of the LCP step (arguments and result as :func:`lcp_step`)."""
    ctx = StepContext() if ctx is None else ctx
    validate_settings(model)
    warm = WARM_START_DEFAULT if warm_start is None else bool(warm_start)
    s = model.solver
    dt = model.time_step
    A_blocks, v_star = dynamics.free_motion(model, state, ctx.body_wrench(model))
    bodies = dynamics.moving_bodies(model)
    nv = 6 * bodies.size
    restitution = s.lcp_restitution > 0.0
    if restitution:
        half = replace(model, time_step=0.5 * dt)
        v0 = state.v[bodies].reshape(-1)
        mid = dynamics.integrate(half, state, v0)
        kin = contact_kinematics(model, mid, workspace=ctx.collision)
    else:
        kin = contact_kinematics(model, state, workspace=ctx.collision)
    m = kin.contacts.count
    if m == 0:
        if restitution:
            new = dynamics.integrate(half, mid, v_star)
            return State(state.t + dt, new.q, new.v, state.step + 1), LcpStepInfo(contacts=kin.contacts,
                                                                                  status="solved")
        return dynamics.integrate(model, state, v_star), LcpStepInfo(contacts=kin.contacts, status="solved")
    phi = kin.contacts.phi
    if restitution:
        vn_before = contact_velocities(kin, state.v[bodies].reshape(-1))[:, 2]
        bias = np.where(phi <= 0.0, s.lcp_restitution * vn_before, phi / (0.5 * dt))
    else:
        bias = gap_bias(phi, dt, s.lcp_stabilization)
    sol = _solve_islands(model, state, kin, A_blocks, v_star, None, bias, warm, ctx)
    v_next, gamma = sol.v_next, sol.gamma
    info = LcpStepInfo(contacts=kin.contacts, gamma=gamma,
                       force_world=np.einsum("nij,nj->ni", kin.R_WC, gamma) / dt,
                       iterations=sol.pivots + sol.warm_solves, converged=True, status="solved",
                       warm_attempted=sol.warm_attempted, warm_accepted=sol.warm_accepted,
                       warm_solves=sol.warm_solves, pivots=sol.pivots, rung=sol.rung,
                       lemke_runs=sol.lemke_runs, islands=sol.islands)
    if restitution:
        new = dynamics.integrate(half, mid, v_next)
        return State(state.t + dt, new.q, new.v, state.step + 1), info
    return dynamics.integrate(model, state, v_next), info


__all__ = ["lcp_step", "reference_lcp_step", "solve_contact_lcp", "contact_islands", "LcpStepInfo", "contact_keys", "WARM_START_DEFAULT", "build_contact_lcp", "ContactLcpLayout", "LcpStepError", "friction_directions",
           "gap_bias", "dense_jacobian", "block_inverse", "ray_contacts"]
