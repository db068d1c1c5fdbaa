"""Newton-direction linear algebra: H dv = −∇ℓ with H = A + Jᵀ G J, block-sparse or dense.

* Sparse path: H's nonzero blocks (one per clique, one per coupled clique pair) are assembled by
  ``blocks.assemble_hessian_blocks`` and factored by the supernodal Cholesky ``convexsim.sap.supernodal``
  (ordering and symbolic analysis once per clique graph — per solve, or cached across solves by a
  ``SymbolicCache``, which a step context owns — and a numeric factorization every Newton iteration).
  ``factorization="block"`` uses the one-block-at-a-time ``convexsim.sap.block_sparse`` instead (the
  earlier factor, kept as a test oracle and for comparison).
* Dense path: H = A + Jᵀ G J formed with dense numpy products from dense A and J, Cholesky by a
  single-threaded numba kernel. Kept for small problems and as the test oracle of the sparse path.

Both ``factor_and_solve`` methods return (dv, ok); ok is False when H is not numerically SPD.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from convexsim.sap import block_sparse, blocks, supernodal

FACTORIZATIONS = {"supernodal": supernodal, "block": block_sparse}
"""The sparse factorizations by name (the same analyze / factor / solve functions)."""

GROWTH_KEEPS_ORDER = (4, 0.02)
"""A pattern that grows by at most max(4, 2 % of its edges) keeps its elimination order (no new minimum
degree ordering); a larger growth is ordered afresh (a stale order then costs more fill than it saves)."""

PRUNE_PATTERN = False
"""True: the SAP solver factors H in the pattern of its nonzero blocks (``SparseHessian(prune=True)``);
False (default): in the whole clique graph. Same factor either way; on the sphere piles pruning costs more
in re-analyses than it saves in the factorization (docs/block-sparse.md), so it is off
(``convexsim bench --prune`` compares)."""


@dataclass
class FactorStats:
    """Counters of the sparse factorizations in this process (read by ``convexsim bench``; reset with
    :func:`reset_factor_stats`). Instrumentation only: nothing reads them to compute a result. Times are
    wall-clock seconds."""

    analyses: int = 0
    reused: int = 0
    analyze_s: float = 0.0
    factorizations: int = 0
    factor_s: float = 0.0
    l_blocks: int = 0
    """Sum over factorizations of the nonzero blocks of L (lower triangle incl. diagonal)."""
    h_blocks: int = 0
    """Sum over factorizations of the nonzero blocks of H's lower triangle (in the factored pattern)."""
    graph_edges: int = 0
    """Sum over factorizations of the clique graph's edges (coupled clique pairs)."""
    kept_edges: int = 0
    """Sum over factorizations of the edges in the factored pattern (fewer when pruned: G_i = 0)."""


FACTOR_STATS = FactorStats()


def reset_factor_stats() -> FactorStats:
    """Zero :data:`FACTOR_STATS` and return it."""
    FACTOR_STATS.__init__()
    return FACTOR_STATS


def analyze(factorization: str, sizes: np.ndarray, edges: np.ndarray, **options):
    """A fresh symbolic analysis of the block graph (sizes (nb,), edges (ne, 2)) for ``factorization``
    (``options``: keywords of that module's ``analyze``)."""
    t0 = time.perf_counter()
    sym = FACTORIZATIONS[factorization].analyze(sizes, edges, **options)
    FACTOR_STATS.analyze_s += time.perf_counter() - t0
    FACTOR_STATS.analyses += 1
    return sym


class SymbolicCache:
    """Symbolic analyses (ordering + fill pattern of L) of Newton matrices, keyed by the clique graph.

    The pattern of H = A + Jᵀ G J depends only on the clique sizes and the coupled clique pairs, which
    rarely change between Newton iterations and between time steps. A step context (convexsim.stepping)
    owns one cache per run, so a step's result never depends on another run's history: for a given
    graph the cached analysis is exactly what a fresh ``analyze`` returns. Keeps the ``capacity`` most
    recently used graphs.
    """

    def __init__(self, capacity: int = 4):
        self.capacity = int(capacity)
        self._entries: dict[tuple[str, bytes, bytes], object] = {}
        self.hits = 0
        self.misses = 0

    def analysis(self, sizes: np.ndarray, edges: np.ndarray, factorization: str = "supernodal"):
        """The analysis of the graph (sizes (nb,), edges (ne, 2) sorted unique), computed once."""
        key = (factorization, np.ascontiguousarray(sizes, np.int64).tobytes(),
               np.ascontiguousarray(edges, np.int64).tobytes())
        sym = self._entries.pop(key, None)
        if sym is None:
            self.misses += 1
            sym = analyze(factorization, sizes, edges)
        else:
            self.hits += 1
            FACTOR_STATS.reused += 1
        self._store(key, sym)
        return sym

    def _store(self, key, sym) -> None:
        self._entries[key] = sym  # most recently used last
        while len(self._entries) > self.capacity:
            self._entries.pop(next(iter(self._entries)))

    def covering(self, sizes: np.ndarray, edges: np.ndarray, factorization: str = "supernodal"):
        """An analysis whose pattern contains the graph (same block sizes, ``edges`` (ne, 2) sorted unique
        a subset of its edges, not too many more: :data:`COVER_SLACK`): the most recently used such one,
        else a new one of the graph, or of its union with the most recent pattern of the same blocks.
        Once the last analysis of these blocks costs more than :data:`COVER_MAX_FLOPS` per factorization,
        the same as :meth:`analysis` (exact pattern).

        H's blocks outside the graph are zero, so the factor of H in a covering pattern is the factor in
        the graph's own pattern with some explicit zeros: the same numbers up to round-off (a different
        elimination order sums the updates in another order), not the same bits. Which analysis a step
        gets depends on what this cache saw before — in the same run only; a fresh cache (a fresh step
        context) always analyses the graph itself."""
        sizes = np.ascontiguousarray(sizes, np.int64)
        edges = np.ascontiguousarray(np.asarray(edges, dtype=np.int64).reshape(-1, 2))
        nb = sizes.size
        keys = _edge_keys(edges, nb)
        base = None
        same = [k for k in reversed(list(self._entries)) if k[0] == factorization and k[1] == sizes.tobytes()]
        if same and getattr(self._entries[same[0]], "flops", 0.0) > COVER_MAX_FLOPS:  # large: exact patterns
            return self.analysis(sizes, edges, factorization)
        for key in same:
            sym = self._entries[key]
            have = _edge_keys(sym.edges, nb)
            if base is None:
                base = have
            if keys.size == 0 or (keys.size <= have.size <= (1.0 + 2.0 * COVER_SLACK) * keys.size and np.all(
                    have[np.minimum(np.searchsorted(have, keys), have.size - 1)] == keys)):
                self.hits += 1
                FACTOR_STATS.reused += 1
                self._entries[key] = self._entries.pop(key)  # most recently used last
                return sym
        self.misses += 1
        if base is not None:
            union = np.union1d(base, keys)
            if union.size <= (1.0 + COVER_SLACK) * keys.size:
                keys = union
                edges = np.stack([keys // nb, keys % nb], axis=1).astype(np.int64)
        key = (factorization, sizes.tobytes(), edges.tobytes())
        sym = analyze(factorization, sizes, edges)
        self._store(key, sym)
        return sym


COVER_SLACK = 0.25
"""``SymbolicCache.covering``: a pattern serves a graph it contains if it has at most (1 + 2·COVER_SLACK)
times the graph's edges (a much larger one would cost more in the factor than an analysis); on a miss, the
new graph is analysed together with the edges of the most recent analysis of the same blocks when that
union has at most (1 + COVER_SLACK) times the new graph's edges (so the next steps, whose contacts come and
go among the same neighbours, find it); else alone."""


COVER_MAX_FLOPS = 1.0e6
"""``SymbolicCache.covering`` keeps superset patterns only while the last analysis of the same blocks costs at
most this many multiply-adds per factorization; larger graphs get exact-pattern analyses (``analysis``).
Measured (docs/block-sparse.md): on pile_100 (0.03–0.27 Mflop per factorization) keeping saves a quarter
of a step, on pile_1000 (several Mflop) the extra fill of a superset costs more than the analyses it saves."""


def _edge_keys(edges: np.ndarray, nb: int) -> np.ndarray:
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    return e[:, 0] * nb + e[:, 1]


def clique_graph(constraint_cliques: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edges (ne, 2) of coupled clique pairs (a < b, unique) and the edge of each constraint (−1 if none)."""
    two = constraint_cliques[:, 1] >= 0
    pairs = np.sort(constraint_cliques[two], axis=1)
    constraint_edge = -np.ones(constraint_cliques.shape[0], dtype=np.int64)
    if pairs.shape[0] == 0:
        return np.zeros((0, 2), dtype=np.int64), constraint_edge
    edges, inverse = np.unique(pairs, axis=0, return_inverse=True)
    constraint_edge[two] = inverse.reshape(-1)
    return np.ascontiguousarray(edges, dtype=np.int64), constraint_edge


class SparseHessian:
    """Block-sparse H = A + Jᵀ G J for one problem, factored in the pattern of its nonzero blocks.

    ``factorization``: "supernodal" (default) or "block" (``block_sparse``, one 6x6 block at a time).

    ``prune=False``: the pattern is the whole clique graph (every constraint couples its two cliques),
    analysed at construction. ``prune=True`` (the solver's choice): the pattern holds only the clique
    pairs coupled by a constraint whose Hessian block G_i is not exactly zero (open speculative contacts
    and the other flat regions of the cost have G_i = 0), so it changes with G and is re-derived by
    ``assemble``; its analysis is reused while the set of coupled pairs is unchanged (within a solve, and
    across solves through a SymbolicCache). This is exact: the dropped blocks of H are exactly zero, and
    the Cholesky factor of H in any pattern that contains its nonzero blocks is the same factor.
    ``edges``, ``sym``, ``diag_ptr``, ``edge_ptr``, ``edge_values`` describe the current pattern.
    """

    def __init__(self, problem, symbolic_cache: SymbolicCache | None = None,
                 factorization: str = "supernodal", prune: bool = False):
        if factorization not in FACTORIZATIONS:
            raise ValueError(f"factorization must be 'supernodal' or 'block', got {factorization!r}")
        self.problem = problem
        self.factorization = factorization
        self.module = FACTORIZATIONS[factorization]
        self.symbolic_cache = symbolic_cache
        self.prune = bool(prune)
        self.all_edges, self.all_constraint_edge = clique_graph(problem.constraint_cliques)
        sizes = problem.clique_sizes
        self.diag_ptr = np.zeros(sizes.size + 1, dtype=np.int64)
        self.diag_ptr[1:] = np.cumsum(sizes * sizes)
        self.diag_values = np.zeros(int(self.diag_ptr[-1]))
        self.diag_ptr = self.diag_ptr[:-1]
        self._edge_kept = None
        if not self.prune:
            self._use_pattern(np.ones(self.all_edges.shape[0], dtype=bool))

    def _use_pattern(self, kept: np.ndarray, grown: bool = False) -> None:
        """Switch to the pattern of the kept edges (bool (ne,)): analysis (cached), value layout.

        ``grown``: the pattern grows the current one; its analysis keeps the current elimination order
        (no new ordering: cheaper, and exact all the same)."""
        self._edge_kept = kept
        sizes = self.problem.clique_sizes
        self.edges = np.ascontiguousarray(self.all_edges[kept])
        new_index = np.cumsum(kept) - 1
        ce = self.all_constraint_edge
        on = ce >= 0
        on[on] = kept[ce[on]]
        self.constraint_edge = -np.ones(ce.shape[0], dtype=np.int64)
        self.constraint_edge[on] = new_index[ce[on]]
        if grown and self.factorization == "supernodal":  # a few more edges: keep the elimination order
            self.sym = analyze(self.factorization, sizes, self.edges, perm=self.sym.perm)
        elif self.symbolic_cache is None:
            self.sym = analyze(self.factorization, sizes, self.edges)
        else:
            self.sym = self.symbolic_cache.analysis(sizes, self.edges, self.factorization)
        if self.factorization == "supernodal":
            self._blocks = (self.sym.l_blocks, self.sym.h_blocks)
        else:
            self._blocks = (sizes.size + int(self.sym.l_colptr[-1]), sizes.size + self.edges.shape[0])
        e_sizes = sizes[self.edges[:, 0]] * sizes[self.edges[:, 1]]
        self.edge_ptr = np.zeros(self.edges.shape[0], dtype=np.int64)
        if e_sizes.size:
            self.edge_ptr[1:] = np.cumsum(e_sizes)[:-1]
        self.edge_values = np.zeros(int(np.sum(e_sizes)))

    def _update_pattern(self, G: np.ndarray) -> None:
        """Keep the edges with a constraint whose G_i is not exactly zero (NaN counts as nonzero)."""
        ce = self.all_constraint_edge
        nonzero = np.any(G.reshape(G.shape[0], 9) != 0.0, axis=1) & (ce >= 0)
        kept = np.zeros(self.all_edges.shape[0], dtype=bool)
        kept[ce[nonzero]] = True
        if self._edge_kept is None:
            self._use_pattern(kept)
        else:
            new = int(np.count_nonzero(kept & ~self._edge_kept))
            if new:  # small growth: keep the elimination order (a large one would cost fill)
                small = new <= max(GROWTH_KEEPS_ORDER[0], GROWTH_KEEPS_ORDER[1] * self.edges.shape[0])
                self._use_pattern(kept | self._edge_kept, grown=small)

    def assemble(self, G: np.ndarray) -> None:
        """Fill the nonzero blocks of H for the Hessian blocks G (nk, 3, 3) (first the pattern, if pruned)."""
        if self.prune:
            self._update_pattern(G)
        p = self.problem
        blocks.assemble_hessian_blocks(
            p.clique_sizes, p.A_ptr, p.A_values, p.constraint_cliques, p.J_ptr, p.J_values, G,
            self.constraint_edge, self.diag_ptr, self.edge_ptr, self.diag_values, self.edge_values,
        )

    def dense(self) -> np.ndarray:
        """Dense H from the assembled blocks (for tests)."""
        n = self.problem.nv
        out = np.empty((n, n))
        blocks.blocks_to_dense(
            self.problem.clique_sizes, self.edges, self.diag_ptr, self.edge_ptr, self.diag_values,
            self.edge_values, out,
        )
        return out

    def factor_and_solve(self, G: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray, bool]:
        """Solve H x = rhs; returns (x, ok)."""
        self.assemble(G)
        t0 = time.perf_counter()
        try:
            fac = self.module.factor(self.sym, self.diag_values, self.edge_values)
        except np.linalg.LinAlgError:
            return np.full_like(rhs, np.nan), False
        finally:
            FACTOR_STATS.factor_s += time.perf_counter() - t0
            FACTOR_STATS.factorizations += 1
            FACTOR_STATS.l_blocks += self._blocks[0]
            FACTOR_STATS.h_blocks += self._blocks[1]
            FACTOR_STATS.graph_edges += self.all_edges.shape[0]
            FACTOR_STATS.kept_edges += self.edges.shape[0]
        x = np.asarray(self.module.solve(self.sym, fac, rhs), dtype=float)
        return x, bool(np.all(np.isfinite(x)))


class DenseHessian:
    """Dense H = A + Jᵀ G J from dense A (nv, nv) and J (3 nk, nv) (the reference path)."""

    def __init__(self, problem):
        self.A = problem.A_dense()
        self.J = problem.J_dense()
        self.nk = problem.nk

    def matrix(self, G: np.ndarray) -> np.ndarray:
        """H for Hessian blocks G (nk, 3, 3)."""
        J3 = self.J.reshape(self.nk, 3, -1)
        GJ = np.einsum("irc,icn->irn", G, J3).reshape(3 * self.nk, -1)
        H = self.A + self.J.T @ GJ
        return 0.5 * (H + H.T)

    def factor_and_solve(self, G: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray, bool]:
        """Solve H x = rhs; returns (x, ok)."""
        return _dense_cholesky_solve(self.matrix(G), rhs)


def _dense_cholesky_solve(H: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray, bool]:
    if not np.all(np.isfinite(H)):
        return np.full_like(rhs, np.nan), False
    x = np.empty_like(rhs)
    info = blocks.dense_cholesky_solve(np.ascontiguousarray(H, dtype=float), np.ascontiguousarray(rhs), x)
    return x, info == 0 and bool(np.all(np.isfinite(x)))
