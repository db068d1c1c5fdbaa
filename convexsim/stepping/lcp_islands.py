"""The numpy LCP solve of a model whose A is block diagonal (free bodies, 6 × 6 per body): island by island
(exact: the LCP is block diagonal over the contact islands), each island's LCP dense or sparse by size, solved
from the previous step's basis (warm start), from a crash basis (large islands), else by the solve chain
(``lcp_fallback``). ``LcpStepInfo.rung`` says which rung solved the step (docs/lcp.md §2, §6).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from convexsim.lcp.crash import crash_guess
from convexsim.lcp.lemke import LemkeStatus, lemke_from_basis
from convexsim.model import Model, State
from convexsim.stepping import lcp_fallback
from convexsim.stepping.context import StepContext
from convexsim.stepping.lcp_fallback import basic_of, solve_chain
from convexsim.stepping.lcp_info import RUNGS
from convexsim.stepping.lcp_problem import (ContactLcpLayout, block_inverse, build_contact_lcp,
                                            build_contact_lcp_sparse, contact_keys, dense_jacobian)

WARM_START_DEFAULT = True
"""Whether ``lcp_step`` warm-starts each step's LCP from the previous step's solution when its
``warm_start`` argument is None (docs/lcp.md §2, "Warm start")."""

WARM_MIN_SIZE = 300
"""Islands with fewer LCP unknowns are solved cold even with the warm start on: below this size a cold
Lemke run (a few pivots) costs less than setting up the warm tableau (docs/lcp.md §2, "Warm start")."""

WARM_PIVOT_FRACTION = 0.5
"""The warm Lemke run (``lemke_from_basis``) may take at most max(50, WARM_PIVOT_FRACTION·n) pivots (n the
island's unknowns; a cold run on the heap takes ≈ 0.8·n) before the island falls back to the cold chain."""


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
class IslandsSolution:
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


def solve_islands(model: Model, state: State, kin, A_blocks, v_star, J, bias, warm: bool,
                   ctx: StepContext) -> IslandsSolution:
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
    sol = IslandsSolution(v_next=v_star.copy(), gamma=np.zeros((m, 3)), islands=len(islands))
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
        if z is None and q.shape[0] >= lcp_fallback.LARGE_ISLAND_SIZE and _crash_allowed(ctx, state.step):
            z, piv, basic = _crash_solve(M, q, layout, ctx.lemke)
            _crash_outcome(ctx, state.step, z is not None)
            sol.warm_solves += 1
            sol.pivots += piv
            rung = "crash"
        if z is None:
            chain = solve_chain(M, q, layout, model, state, kin, ctx.lemke, contact_index=idx)
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



__all__ = ["WARM_START_DEFAULT", "WARM_MIN_SIZE", "WARM_PIVOT_FRACTION", "SPLIT_ISLANDS", "CRASH_START",
           "CRASH_PIVOT_FRACTION", "CRASH_BACKOFF_MAX", "SPARSE_ISLAND_SIZE", "IslandsSolution", "contact_islands",
           "solve_islands"]
