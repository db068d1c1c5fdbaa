"""Block-sparse Cholesky factorization of the SAP Hessian (skeleton; implementation in progress).

H = A + J^T G J is SPD with one diagonal block per clique; every constraint couples at most two cliques,
so the block pattern of H is the clique graph. Input format (shared with the SAP solver):

* ``block_sizes`` int64 (nb,): n_i, the size of block i (clique dofs).
* ``edges`` int64 (ne, 2): unique pairs (i, j) with i < j of coupled blocks, in ANY order (not sorted).
* ``diag_values`` float64 flat: block i (n_i x n_i, row-major) at ``sym.diag_ptr[i]``.
* ``edge_values`` float64 flat: edge e = (i, j) stores H[rows of block j, cols of block i]
  (n_j x n_i, row-major) at ``sym.edge_ptr[e]``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class BlockSymbolic(NamedTuple):
    """Ordering and fill pattern of L (all arrays int64 unless noted)."""

    n: int
    block_sizes: np.ndarray
    edges: np.ndarray
    block_offset: np.ndarray  # (nb,) first row of block i in H
    diag_ptr: np.ndarray  # (nb,) offset of block i in diag_values
    edge_ptr: np.ndarray  # (ne,) offset of edge e in edge_values
    perm: np.ndarray  # (nb,) perm[k] = block eliminated k-th
    iperm: np.ndarray  # (nb,) iperm[i] = elimination position of block i
    l_colptr: np.ndarray  # (nb+1,) block column k of L: entries l_colptr[k]:l_colptr[k+1]
    l_rows: np.ndarray  # (nnzb,) elimination position of each off-diagonal block row (> column)
    l_ptr: np.ndarray  # (nnzb,) offset of each off-diagonal block of L in fac.values
    l_diag_ptr: np.ndarray  # (nb,) offset of diagonal block L_kk (position k) in fac.values
    edge_entry: np.ndarray  # (ne,) L entry that edge e scatters into
    edge_transposed: np.ndarray  # (ne,) 1 if the stored edge block must be transposed into L
    l_size: int  # number of floats in fac.values


class BlockFactor(NamedTuple):
    values: np.ndarray  # float64 (sym.l_size,), blocks of L (row-major)


def analyze(block_sizes, edges) -> BlockSymbolic:
    """Minimum-degree ordering of the block graph and symbolic factorization (fill pattern of L)."""
    raise NotImplementedError


def factor(sym: BlockSymbolic, diag_values, edge_values) -> BlockFactor:
    """Numeric right-looking block Cholesky H = P^T L L^T P; raises np.linalg.LinAlgError if not SPD."""
    raise NotImplementedError


def solve(sym: BlockSymbolic, fac: BlockFactor, b) -> np.ndarray:
    """Solve H x = b for b of shape (n,) or (n, m)."""
    raise NotImplementedError


def to_dense(block_sizes, edges, diag_values, edge_values) -> np.ndarray:
    """Dense symmetric H (n x n) from the block description (oracle for tests)."""
    raise NotImplementedError


def dense_solve(block_sizes, edges, diag_values, edge_values, b) -> np.ndarray:
    """Dense path: Cholesky of to_dense(...) then solve; raises np.linalg.LinAlgError if not SPD."""
    raise NotImplementedError
