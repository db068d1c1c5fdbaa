"""Newton-direction linear algebra: H dv = −∇ℓ with H = A + Jᵀ G J, block-sparse or dense.

* Sparse path: H's nonzero blocks (one per clique, one per coupled clique pair) are assembled by
  ``blocks.assemble_hessian_blocks`` and factored by the supernodal Cholesky ``convexsim.sap.supernodal``
  (ordering and symbolic analysis once per clique graph: reused across Newton iterations, and across
  solves while the graph is unchanged, see :func:`supernodal_symbolic`; numeric factorization every Newton
  iteration). ``factorization="block"`` uses the one-block-at-a-time ``convexsim.sap.block_sparse``
  instead. If neither is usable, the blocks are scattered into a dense matrix and factored densely.
* Dense path: H = A + Jᵀ G J formed with dense numpy products from dense A and J, Cholesky by a
  single-threaded numba kernel. Kept for small problems and as the test oracle of the sparse path.

Both ``factor_and_solve`` methods return (dv, ok); ok is False when H is not numerically SPD.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import numpy as np

from convexsim.sap import blocks


@dataclass
class FactorStats:
    """Counters of the sparse factorizations in this process (read by ``convexsim bench``; reset with
    :func:`reset_factor_stats`). Times are wall-clock seconds."""

    analyses: int = 0
    reused: int = 0
    analyze_s: float = 0.0
    factorizations: int = 0
    factor_s: float = 0.0
    l_blocks: int = 0
    """Sum over factorizations of the nonzero blocks of L (lower triangle incl. diagonal)."""
    h_blocks: int = 0
    """Sum over factorizations of the nonzero blocks of H's lower triangle."""


FACTOR_STATS = FactorStats()


def reset_factor_stats() -> FactorStats:
    """Zero :data:`FACTOR_STATS` and return it."""
    FACTOR_STATS.__init__()
    return FACTOR_STATS


_LAST_SYMBOLIC: list = []


def supernodal_symbolic(block_sizes: np.ndarray, edges: np.ndarray):
    """The supernodal analysis of this block pattern, reusing the previous one when it matches
    (``symbolic.matches``: same block sizes and edges). One entry per process: consecutive time steps with an
    unchanged contact graph skip the ordering and symbolic factorization."""
    from convexsim.sap import supernodal

    last = _LAST_SYMBOLIC[0] if _LAST_SYMBOLIC else None  # read once: another thread may replace it
    if last is not None and last.matches(block_sizes, edges):
        FACTOR_STATS.reused += 1
        return last
    t0 = time.perf_counter()
    sym = supernodal.analyze(block_sizes, edges)
    FACTOR_STATS.analyze_s += time.perf_counter() - t0
    FACTOR_STATS.analyses += 1
    _LAST_SYMBOLIC[:] = [sym]
    return sym


@functools.lru_cache(maxsize=1)
def _block_sparse_module():
    """The block-sparse Cholesky module if it is implemented, else None (probed once per process)."""
    try:
        from convexsim.sap import block_sparse
    except ImportError:
        return None
    try:
        block_sparse.analyze(np.array([1], dtype=np.int64), np.zeros((0, 2), dtype=np.int64))
    except NotImplementedError:
        return None
    return block_sparse


def block_sparse_available() -> bool:
    """True when ``convexsim.sap.block_sparse`` is implemented (the sparse path is then the default)."""
    return _block_sparse_module() is not None


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
    """Block-sparse H = A + Jᵀ G J for one problem (analysis at construction, or reused).

    ``factorization``: "supernodal" (default) or "block" (``block_sparse``, one 6x6 block at a time)."""

    def __init__(self, problem, force_fallback: bool = False, factorization: str = "supernodal"):
        if factorization not in ("supernodal", "block"):
            raise ValueError(f"factorization must be 'supernodal' or 'block', got {factorization!r}")
        self.problem = problem
        self.edges, self.constraint_edge = clique_graph(problem.constraint_cliques)
        sizes = problem.clique_sizes
        self.module = None if force_fallback else _block_sparse_module()
        if self.module is not None and factorization == "supernodal":
            from convexsim.sap import supernodal

            self.module = supernodal
            self.sym = supernodal_symbolic(sizes, self.edges)
            self.diag_ptr = np.asarray(self.sym.diag_ptr, dtype=np.int64)
            self.edge_ptr = np.asarray(self.sym.edge_ptr, dtype=np.int64)
            self._blocks = (self.sym.l_blocks, self.sym.h_blocks)
        elif self.module is not None:
            t0 = time.perf_counter()
            self.sym = self.module.analyze(sizes, self.edges)
            FACTOR_STATS.analyze_s += time.perf_counter() - t0
            FACTOR_STATS.analyses += 1
            self._blocks = (sizes.size + int(self.sym.l_colptr[-1]), sizes.size + self.edges.shape[0])
            self.diag_ptr = np.asarray(self.sym.diag_ptr, dtype=np.int64)
            self.edge_ptr = np.asarray(self.sym.edge_ptr, dtype=np.int64)
        else:
            self.sym = None
            self.diag_ptr = np.concatenate([[0], np.cumsum(sizes * sizes)[:-1]]).astype(np.int64)
            e_sizes = sizes[self.edges[:, 0]] * sizes[self.edges[:, 1]]
            self.edge_ptr = np.concatenate([[0], np.cumsum(e_sizes)[:-1]]).astype(np.int64)
        e_sizes = sizes[self.edges[:, 0]] * sizes[self.edges[:, 1]]
        self.diag_values = np.zeros(int(np.sum(sizes * sizes)))
        self.edge_values = np.zeros(int(np.sum(e_sizes)))

    @property
    def uses_block_sparse(self) -> bool:
        """True when the block-sparse Cholesky (not the dense fallback) factors H."""
        return self.module is not None

    def assemble(self, G: np.ndarray) -> None:
        """Fill the nonzero blocks of H for the Hessian blocks G (nk, 3, 3)."""
        p = self.problem
        blocks.assemble_hessian_blocks(
            p.clique_sizes, p.A_ptr, p.A_values, p.constraint_cliques, p.J_ptr, p.J_values, G,
            self.constraint_edge, self.diag_ptr, self.edge_ptr, self.diag_values, self.edge_values,
        )

    def dense(self) -> np.ndarray:
        """Dense H from the assembled blocks (for tests and the fallback)."""
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
        if self.module is None:
            return _dense_cholesky_solve(self.dense(), rhs)
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
