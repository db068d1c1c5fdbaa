"""Newton-direction linear algebra: H dv = −∇ℓ with H = A + Jᵀ G J, block-sparse or dense.

* Sparse path: H's nonzero blocks (one per clique, one per coupled clique pair) are assembled by
  ``blocks.assemble_hessian_blocks`` and factored by ``convexsim.sap.block_sparse`` (fill-reducing ordering
  and symbolic analysis once per clique graph — per solve, or cached across steps by a ``SymbolicCache`` —
  and a numeric block Cholesky every Newton iteration).
* Dense path: H = A + Jᵀ G J formed with dense numpy products from dense A and J, Cholesky by a
  single-threaded numba kernel. Kept for small problems and as the test oracle of the sparse path.

Both ``factor_and_solve`` methods return (dv, ok); ok is False when H is not numerically SPD.
"""

from __future__ import annotations

import numpy as np

from convexsim.sap import block_sparse, blocks


class SymbolicCache:
    """Symbolic analyses (ordering + fill pattern of L) of Newton matrices, keyed by the clique graph.

    The pattern of H = A + Jᵀ G J depends only on the clique sizes and the coupled clique pairs, which
    rarely change between Newton iterations and between time steps. A step context (convexsim.stepping)
    owns one cache per run, so a step's result never depends on another run's history: for a given
    graph the cached analysis is exactly what ``block_sparse.analyze`` would return. Keeps the
    ``capacity`` most recently used graphs.
    """

    def __init__(self, capacity: int = 4):
        self.capacity = int(capacity)
        self._entries: dict[tuple[bytes, bytes], object] = {}
        self.hits = 0
        self.misses = 0

    def analysis(self, sizes: np.ndarray, edges: np.ndarray):
        """The BlockSymbolic of the graph (sizes (nb,), edges (ne, 2) sorted unique), computed once."""
        key = (np.ascontiguousarray(sizes, np.int64).tobytes(), np.ascontiguousarray(edges, np.int64).tobytes())
        sym = self._entries.pop(key, None)
        if sym is None:
            self.misses += 1
            sym = block_sparse.analyze(sizes, edges)
        else:
            self.hits += 1
        self._entries[key] = sym  # most recently used last
        while len(self._entries) > self.capacity:
            self._entries.pop(next(iter(self._entries)))
        return sym


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
    """Block-sparse H = A + Jᵀ G J for one problem (analysis done once, at construction)."""

    def __init__(self, problem, symbolic_cache: SymbolicCache | None = None):
        self.problem = problem
        self.edges, self.constraint_edge = clique_graph(problem.constraint_cliques)
        sizes = problem.clique_sizes
        if symbolic_cache is None:
            self.sym = block_sparse.analyze(sizes, self.edges)
        else:
            self.sym = symbolic_cache.analysis(sizes, self.edges)
        self.diag_ptr = np.asarray(self.sym.diag_ptr, dtype=np.int64)
        self.edge_ptr = np.asarray(self.sym.edge_ptr, dtype=np.int64)
        e_sizes = sizes[self.edges[:, 0]] * sizes[self.edges[:, 1]]
        self.diag_values = np.zeros(int(np.sum(sizes * sizes)))
        self.edge_values = np.zeros(int(np.sum(e_sizes)))

    def assemble(self, G: np.ndarray) -> None:
        """Fill the nonzero blocks of H for the Hessian blocks G (nk, 3, 3)."""
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
        try:
            fac = block_sparse.factor(self.sym, self.diag_values, self.edge_values)
        except np.linalg.LinAlgError:
            return np.full_like(rhs, np.nan), False
        x = np.asarray(block_sparse.solve(self.sym, fac, rhs), dtype=float)
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
