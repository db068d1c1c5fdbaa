"""The solve chain on one contact LCP (M, q): Lemke (Harris ratio test); if it fails, Lemke on seeded
perturbations q + 1e-12·‖q‖∞·r, with other covering vectors d (these first on LCPs of ≥ LARGE_ISLAND_SIZE
unknowns, whose cold runs stop at LARGE_ISLAND_PIVOTS·n pivots), and on M + ε‖M‖∞I; an answer of a modified
problem is accepted only if it passes Lemke's final check on the original (M, q) (docs/lcp.md §2). If nothing
passes, ``LcpStepError`` names the contacts from the first Lemke run (:func:`ray_contacts`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse

from convexsim.lcp.lemke import (LemkeOptions, LemkeResult, LemkeStatus, LemkeWorkspace, as_sparse_lcp_matrix,
                                 default_max_pivots, final_check, final_check_sparse, inf_norm, lemke,
                                 solve_from_basis)
from convexsim.model import Model, State
from convexsim.stepping.lcp_info import LcpStepError
from convexsim.stepping.lcp_problem import ContactLcpLayout

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



@dataclass
class ChainResult:
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
                      workspace: LemkeWorkspace | None = None) -> tuple[ChainResult | None, LemkeResult]:
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
        return ChainResult(first.z, "lemke", first.pivots, 1, basic_of(first)), first
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
                return ChainResult(z, rung, pivots, attempts, basic_of(r)), first
    return None, first


def solve_chain(M, q, layout, model: Model, state: State, kin, workspace,
                 contact_index: np.ndarray | None = None) -> ChainResult:
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




__all__ = ["FALLBACK_Q_TRIES", "FALLBACK_COVERING_TRIES", "FALLBACK_REGULARIZATION", "FALLBACK_MAX_GAIN",
           "LARGE_ISLAND_SIZE", "LARGE_ISLAND_PIVOTS", "ChainResult", "basic_of", "solve_contact_lcp", "solve_chain",
           "ray_contacts"]
