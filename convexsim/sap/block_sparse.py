"""Block-sparse Cholesky factorization of the SAP Hessian.

H = A + J^T G J is symmetric positive definite with one diagonal block per clique (body or tree); every
constraint couples at most two cliques, so the block pattern of H is the clique graph. We factor

    P H P^T = L L^T,      L block lower triangular,

where P permutes *blocks* (never scalars inside a block) into a minimum-degree elimination order of the
clique graph (Drake: ``BlockSparseCholeskySolver``; docs/block-sparse.md). The SAP solver uses the
supernodal factor of ``convexsim.sap.supernodal`` by default; this one-block-at-a-time factor is its test
oracle and the ``linear_solver="block"`` option.

Input format (shared with the SAP solver; nothing else is assumed):

* ``block_sizes`` int64 (nb,): n_i >= 1, the size of block i (clique dofs).
* ``edges`` int64 (ne, 2): unique pairs (i, j) with i < j of coupled blocks. The rows may come in ANY
  order (they are not required to be sorted); a pair with i >= j or a duplicate pair is rejected.
* ``diag_values`` float64 flat: block H_ii (n_i x n_i, row-major) at ``sym.diag_ptr[i]``.
  Only its lower triangle is read (H is symmetric by assumption).
* ``edge_values`` float64 flat: edge e = (i, j) stores H_ji = H[rows of block j, cols of block i]
  (n_j x n_i, row-major) at ``sym.edge_ptr[e]``.

Workflow: ``sym = analyze(block_sizes, edges)`` once per time step (ordering + symbolic fill pattern),
then ``fac = factor(sym, diag_values, edge_values)`` and ``x = solve(sym, fac, b)`` every Newton iteration.

Ordering: *exact* minimum (external) degree on the explicit elimination graph of the block graph: at
every step eliminate the uneliminated block with the fewest neighbour blocks (ties: fewest neighbour
scalar rows, then smaller block index), then connect its neighbours into a clique. Counting blocks first
guarantees zero fill on forests (chains, trees) whatever the block sizes. The neighbours of a block
when it is eliminated are exactly the off-diagonal block rows of its column of L, so the ordering also
yields the symbolic factorization. Cost O(sum over pivots of deg * (deg + deg_neighbour)) with a binary heap,
i.e. linear in nb for bounded-degree graphs with bounded fill (no O(nb^2) scans anywhere).
It is not AMD (no quotient graph, no supervariables), which only matters for graphs with large fill.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from convexsim._jit import jit
from convexsim.sap.blocks import (back_substitution_transposed, cholesky_in_place, forward_substitution,
                                  subtract_block_product)

__all__ = [
    "BlockSymbolic",
    "BlockFactor",
    "analyze",
    "factor",
    "solve",
    "to_dense",
    "dense_solve",
    "block_pointers",
    "natural_ordering_fill",
]


class BlockSymbolic(NamedTuple):
    """Ordering and fill pattern of L. Arrays are int64; positions k refer to the elimination order."""

    n: int
    """Total size of H (sum of block sizes)."""
    block_sizes: np.ndarray
    """(nb,) n_i."""
    edges: np.ndarray
    """(ne, 2) the validated input edges (same order as given)."""
    block_offset: np.ndarray
    """(nb,) first row of block i in H (and in b, x)."""
    diag_ptr: np.ndarray
    """(nb,) offset of H_ii in ``diag_values``."""
    edge_ptr: np.ndarray
    """(ne,) offset of edge e's block in ``edge_values``."""
    perm: np.ndarray
    """(nb,) perm[k] = block eliminated k-th."""
    iperm: np.ndarray
    """(nb,) iperm[i] = elimination position of block i."""
    l_colptr: np.ndarray
    """(nb+1,) block column k of L has off-diagonal entries l_colptr[k]:l_colptr[k+1]."""
    l_rows: np.ndarray
    """(nnzb,) elimination position (> k, ascending within a column) of each off-diagonal block of L."""
    l_ptr: np.ndarray
    """(nnzb,) offset of each off-diagonal block L_rk (n_r x n_k, row-major) in ``fac.values``."""
    l_diag_ptr: np.ndarray
    """(nb,) offset of the diagonal block L_kk (position k) in ``fac.values``."""
    edge_entry: np.ndarray
    """(ne,) index of the L entry that edge e scatters into."""
    edge_transposed: np.ndarray
    """(ne,) 1 if H_ji must be transposed to become the L-pattern block (row later than column)."""
    l_size: int
    """Number of floats in ``fac.values``."""
    fill_blocks: int
    """Off-diagonal blocks of L that are not edges of H (block fill-in)."""
    diag_len: int
    """Length of ``diag_values`` (sum n_i^2)."""
    edge_len: int
    """Length of ``edge_values`` (sum over edges of n_i n_j)."""


class BlockFactor(NamedTuple):
    """Numeric factor: blocks of L (row-major) laid out as described by :class:`BlockSymbolic`."""

    values: np.ndarray


# ----------------------------------------------------------------------------------------------------
# Validation and pointers (Python)
# ----------------------------------------------------------------------------------------------------


def _validate(block_sizes, edges) -> tuple[np.ndarray, np.ndarray]:
    sizes = np.ascontiguousarray(block_sizes, dtype=np.int64)
    if sizes.ndim != 1 or sizes.size == 0:
        raise ValueError(f"block_sizes must be a non-empty 1-D array, got shape {sizes.shape}")
    if np.any(sizes < 1):
        raise ValueError(f"block sizes must be >= 1, got block {int(np.argmin(sizes))} of size {sizes.min()}")
    e = np.ascontiguousarray(edges, dtype=np.int64)
    if e.size == 0:
        e = np.zeros((0, 2), dtype=np.int64)
    if e.ndim != 2 or e.shape[1] != 2:
        raise ValueError(f"edges must have shape (ne, 2), got {e.shape}")
    nb = sizes.size
    if e.shape[0]:
        bad = np.flatnonzero((e[:, 0] >= e[:, 1]) | (e[:, 0] < 0) | (e[:, 1] >= nb))
        if bad.size:
            i, j = e[bad[0]]
            raise ValueError(f"edge {bad[0]} = ({i}, {j}) is not a pair 0 <= i < j < {nb}")
        key = e[:, 0] * nb + e[:, 1]
        uniq, counts = np.unique(key, return_counts=True)
        if np.any(counts > 1):
            dup = uniq[np.argmax(counts > 1)]
            raise ValueError(f"duplicate edge ({dup // nb}, {dup % nb})")
    return sizes, e


def block_pointers(block_sizes, edges) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """Offsets of the value arrays: (block_offset, diag_ptr, edge_ptr, diag_len, edge_len).

    ``diag_ptr[i] = sum_{l<i} n_l^2``, ``edge_ptr[e] = sum_{f<e} n_{j_f} n_{i_f}`` (edges in given order).
    """
    sizes = np.asarray(block_sizes, dtype=np.int64)
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    block_offset = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    sq = sizes * sizes
    diag_ptr = np.concatenate(([0], np.cumsum(sq)[:-1])).astype(np.int64)
    esz = sizes[e[:, 0]] * sizes[e[:, 1]]
    edge_ptr = np.concatenate(([0], np.cumsum(esz)[:-1])).astype(np.int64)[: e.shape[0]]
    return block_offset, diag_ptr, edge_ptr, int(sq.sum()), int(esz.sum())


def _adjacency(nb: int, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric CSR adjacency (xadj, adjncy) of the block graph, neighbours sorted."""
    both = np.concatenate((e, e[:, ::-1]), axis=0)
    order = np.lexsort((both[:, 1], both[:, 0]))
    both = both[order]
    xadj = np.zeros(nb + 1, dtype=np.int64)
    np.add.at(xadj, both[:, 0] + 1, 1)
    return np.cumsum(xadj), np.ascontiguousarray(both[:, 1])


# ----------------------------------------------------------------------------------------------------
# Ordering + symbolic factorization (numba)
# ----------------------------------------------------------------------------------------------------


@jit
def _heap_push(heap, size, key):
    """Push ``key`` on the int64 min-heap heap[:size]; returns (heap, size) (heap may be reallocated)."""
    if size == heap.size:
        bigger = np.empty(2 * heap.size + 16, dtype=np.int64)
        bigger[:size] = heap[:size]
        heap = bigger
    i = size
    heap[i] = key
    while i > 0:
        parent = (i - 1) // 2
        if heap[parent] <= heap[i]:
            break
        heap[parent], heap[i] = heap[i], heap[parent]
        i = parent
    return heap, size + 1


@jit
def _heap_pop(heap, size):
    """Pop the smallest key of heap[:size]; returns (key, new size)."""
    top = heap[0]
    size -= 1
    heap[0] = heap[size]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= size:
            break
        child = left
        if left + 1 < size and heap[left + 1] < heap[left]:
            child = left + 1
        if heap[i] <= heap[child]:
            break
        heap[i], heap[child] = heap[child], heap[i]
        i = child
    return top, size


@jit
def _merge_without(a, b, skip_a, skip_b, out):
    """Sorted union of sorted int arrays a and b into out, leaving out value skip_a from a and skip_b from b.
    Returns the number of values written."""
    ia = 0
    ib = 0
    m = 0
    while ia < a.size or ib < b.size:
        if ia < a.size and a[ia] == skip_a:
            ia += 1
            continue
        if ib < b.size and b[ib] == skip_b:
            ib += 1
            continue
        if ib >= b.size or (ia < a.size and a[ia] < b[ib]):
            v = a[ia]
            ia += 1
        elif ia >= a.size or b[ib] < a[ia]:
            v = b[ib]
            ib += 1
        else:
            v = a[ia]
            ia += 1
            ib += 1
        out[m] = v
        m += 1
    return m


@jit
def _min_degree_kernel(sizes, xadj, adjncy, use_natural):
    """Minimum-degree elimination on the explicit elimination graph.

    Returns (perm, colptr, cols) where cols[colptr[k]:colptr[k+1]] are the (original) block indices adjacent
    to block perm[k] when it is eliminated, i.e. the nonzero block rows of column k of L.
    ``use_natural`` = True eliminates in the order 0, 1, ..., nb-1 (used to measure fill for comparison).

    Storage: the sorted neighbour list of block i is pool[start[i] : start[i] + length[i]]; a list that
    outgrows its capacity moves to the end of the pool with twice the room (the pool doubles when full).
    """
    nb = sizes.size
    pool = adjncy.copy()
    if pool.size == 0:
        pool = np.empty(16, dtype=np.int64)
    pool_end = adjncy.size
    start = xadj[:nb].copy()
    length = xadj[1:] - xadj[:nb]
    cap = length.copy()
    # priority key = (number of neighbour blocks, number of neighbour scalar rows, block index)
    scale = np.int64(sizes.sum() + 1)
    key_of = np.zeros(nb, dtype=np.int64)
    for i in range(nb):
        d = 0
        for t in range(start[i], start[i] + length[i]):
            d += sizes[pool[t]]
        key_of[i] = (length[i] * scale + d) * nb + i
    eliminated = np.zeros(nb, dtype=np.bool_)
    heap = np.empty(nb + 16, dtype=np.int64)
    hsize = 0
    if not use_natural:
        for i in range(nb):
            heap, hsize = _heap_push(heap, hsize, key_of[i])
    perm = np.empty(nb, dtype=np.int64)
    colptr = np.zeros(nb + 1, dtype=np.int64)
    cols = np.empty(adjncy.size + 16, dtype=np.int64)
    ncols = 0
    merged = np.empty(2 * nb + 2, dtype=np.int64)
    for k in range(nb):
        if use_natural:
            p = k
        else:
            while True:
                key, hsize = _heap_pop(heap, hsize)
                p = key % nb
                if not eliminated[p] and key == key_of[p]:
                    break
        perm[k] = p
        eliminated[p] = True
        nbrs = pool[start[p] : start[p] + length[p]].copy()
        if ncols + nbrs.size > cols.size:
            bigger = np.empty(2 * cols.size + nbrs.size, dtype=np.int64)
            bigger[:ncols] = cols[:ncols]
            cols = bigger
        cols[ncols : ncols + nbrs.size] = nbrs
        ncols += nbrs.size
        colptr[k + 1] = ncols
        for t in range(nbrs.size):
            u = nbrs[t]
            m = _merge_without(pool[start[u] : start[u] + length[u]], nbrs, p, u, merged)
            if m > cap[u]:
                if pool_end + 2 * m > pool.size:
                    bigger = np.empty(2 * pool.size + 2 * m, dtype=np.int64)
                    bigger[:pool_end] = pool[:pool_end]
                    pool = bigger
                start[u] = pool_end
                cap[u] = 2 * m
                pool_end += 2 * m
            pool[start[u] : start[u] + m] = merged[:m]
            length[u] = m
            d = 0
            for s in range(m):
                d += sizes[merged[s]]
            key = (m * scale + d) * nb + u
            if key != key_of[u]:
                key_of[u] = key
                if not use_natural:
                    heap, hsize = _heap_push(heap, hsize, key)
        length[p] = 0
    return perm, colptr, cols[:ncols].copy()


@jit
def sorted_find(idx, lo, hi, value):
    """Position k in [lo, hi) with idx[k] == value, idx[lo:hi] increasing (binary search); -1 if absent."""
    end = hi
    while lo < hi:
        mid = (lo + hi) // 2
        if idx[mid] < value:
            lo = mid + 1
        else:
            hi = mid
    if lo < end and idx[lo] == value:
        return lo
    return -1


@jit
def _find_entry(l_colptr, l_rows, col, row):
    """Index of the L entry (row, col) (positions) by binary search; -1 if absent."""
    return sorted_find(l_rows, l_colptr[col], l_colptr[col + 1], row)


@jit
def _symbolic_kernel(sizes, edges, perm, colptr, cols):
    """Layout of L (positions, value pointers) and the scatter map of the edges of H."""
    nb = sizes.size
    iperm = np.empty(nb, dtype=np.int64)
    for k in range(nb):
        iperm[perm[k]] = k
    nnzb = colptr[nb]
    # sort each column's rows by a double transpose (O(nnzb), no comparison sort): list the columns of every
    # row in increasing column order, then read the rows back in increasing row order into the columns
    rowptr = np.zeros(nb + 1, dtype=np.int64)
    for t in range(nnzb):
        rowptr[iperm[cols[t]] + 1] += 1
    for r in range(nb):
        rowptr[r + 1] += rowptr[r]
    fill = rowptr[:nb].copy()
    row_cols = np.empty(nnzb, dtype=np.int64)
    for k in range(nb):
        for t in range(colptr[k], colptr[k + 1]):
            r = iperm[cols[t]]
            row_cols[fill[r]] = k
            fill[r] += 1
    fill = colptr[:nb].copy()
    l_rows = np.empty(nnzb, dtype=np.int64)
    for r in range(nb):
        for t in range(rowptr[r], rowptr[r + 1]):
            k = row_cols[t]
            l_rows[fill[k]] = r
            fill[k] += 1
    l_diag_ptr = np.empty(nb, dtype=np.int64)
    l_ptr = np.empty(nnzb, dtype=np.int64)
    off = 0
    for k in range(nb):
        nk = sizes[perm[k]]
        l_diag_ptr[k] = off
        off += nk * nk
        for e in range(colptr[k], colptr[k + 1]):
            l_ptr[e] = off
            off += sizes[perm[l_rows[e]]] * nk
    ne = edges.shape[0]
    edge_entry = np.empty(ne, dtype=np.int64)
    edge_transposed = np.zeros(ne, dtype=np.int64)
    for e in range(ne):
        pi = iperm[edges[e, 0]]
        pj = iperm[edges[e, 1]]
        if pj > pi:
            edge_entry[e] = _find_entry(colptr, l_rows, pi, pj)
        else:
            edge_entry[e] = _find_entry(colptr, l_rows, pj, pi)
            edge_transposed[e] = 1
    return iperm, l_rows, l_ptr, l_diag_ptr, edge_entry, edge_transposed, off


def _elimination_columns(sizes: np.ndarray, e: np.ndarray, natural: bool):
    xadj, adjncy = _adjacency(sizes.size, e)
    return _min_degree_kernel(sizes, xadj, adjncy, natural)


def analyze(block_sizes, edges) -> BlockSymbolic:
    """Minimum-degree ordering of the block graph and symbolic factorization (fill pattern of L).

    Parameters: ``block_sizes`` (nb,) ints >= 1; ``edges`` (ne, 2) unique pairs i < j in any order.
    Returns a :class:`BlockSymbolic` (NamedTuple of int64 arrays plus ``n``, ``l_size``, ``fill_blocks``).
    Raises ``ValueError`` for malformed input. Cost ~linear in nb for bounded-degree, low-fill graphs.
    """
    sizes, e = _validate(block_sizes, edges)
    if float(sizes.size) ** 2 * float(sizes.sum() + 1) >= 2.0**62:
        raise ValueError(f"{sizes.size} blocks, total size {sizes.sum()}: int64 ordering keys would overflow")
    block_offset, diag_ptr, edge_ptr, diag_len, edge_len = block_pointers(sizes, e)
    perm, colptr, cols = _elimination_columns(sizes, e, natural=False)
    iperm, l_rows, l_ptr, l_diag_ptr, edge_entry, edge_transposed, l_size = _symbolic_kernel(
        sizes, e, perm, colptr, cols
    )
    return BlockSymbolic(
        n=int(sizes.sum()),
        block_sizes=sizes,
        edges=e,
        block_offset=block_offset,
        diag_ptr=diag_ptr,
        edge_ptr=edge_ptr,
        perm=perm,
        iperm=iperm,
        l_colptr=colptr,
        l_rows=l_rows,
        l_ptr=l_ptr,
        l_diag_ptr=l_diag_ptr,
        edge_entry=edge_entry,
        edge_transposed=edge_transposed,
        l_size=int(l_size),
        fill_blocks=int(colptr[-1] - e.shape[0]),
        diag_len=diag_len,
        edge_len=edge_len,
    )


def natural_ordering_fill(block_sizes, edges) -> int:
    """Number of off-diagonal blocks of L when eliminating in the natural order 0..nb-1 (for comparison)."""
    sizes, e = _validate(block_sizes, edges)
    _, colptr, _ = _elimination_columns(sizes, e, natural=True)
    return int(colptr[-1])


# ----------------------------------------------------------------------------------------------------
# Numeric factorization and solves (numba)
# ----------------------------------------------------------------------------------------------------


@jit
def _dense_cholesky_inplace(v, off, n):
    """Lower Cholesky of the n x n row-major block v[off:off+n*n] in place (``blocks.cholesky_in_place``, then the
    strict upper triangle zeroed). Returns False if a pivot is not positive (or not finite)."""
    if cholesky_in_place(v[off:off + n * n].reshape((n, n)), n) != 0:
        return False
    for j in range(n):
        for i in range(j):
            v[off + i * n + j] = 0.0
    return True


@jit
def _right_solve_lower_transpose(v, boff, nr, loff, nk):
    """B <- B L^{-T} in place, B = v[boff:] (nr x nk), L = v[loff:] (nk x nk lower): solves X L^T = B."""
    for a in range(nr):
        row = boff + a * nk
        for j in range(nk):
            s = v[row + j]
            for t in range(j):
                s -= v[row + t] * v[loff + j * nk + t]
            v[row + j] = s / v[loff + j * nk + j]


@jit
def _factor_kernel(sizes, perm, l_colptr, l_rows, l_ptr, l_diag_ptr, edge_entry, edge_transposed,
                   edges, diag_ptr, edge_ptr, diag_values, edge_values, values):
    """Right-looking block Cholesky into ``values`` (length sym.l_size, overwritten).

    Returns 0 on success, 1 + (original index of the block whose diagonal pivot failed) when H is not
    positive definite (LAPACK-style info code), or -1 if the symbolic pattern is inconsistent."""
    nb = sizes.size
    values[:] = 0.0
    # scatter H into the pattern of L (lower triangle of each diagonal block suffices)
    for k in range(nb):
        i = perm[k]
        ni = sizes[i]
        dst = l_diag_ptr[k]
        src = diag_ptr[i]
        for t in range(ni * ni):
            values[dst + t] = diag_values[src + t]
    for e in range(edges.shape[0]):
        ni = sizes[edges[e, 0]]
        nj = sizes[edges[e, 1]]
        dst = l_ptr[edge_entry[e]]
        src = edge_ptr[e]
        if edge_transposed[e] == 0:
            for t in range(nj * ni):  # stored H_ji (nj x ni) is the L-pattern block as is
                values[dst + t] = edge_values[src + t]
        else:
            for a in range(nj):  # L-pattern block is H_ij = H_ji^T (ni x nj)
                for b in range(ni):
                    values[dst + b * nj + a] = edge_values[src + a * ni + b]
    for k in range(nb):
        nk = sizes[perm[k]]
        dk = l_diag_ptr[k]
        if not _dense_cholesky_inplace(values, dk, nk):
            return perm[k] + 1
        c0 = l_colptr[k]
        c1 = l_colptr[k + 1]
        for e in range(c0, c1):
            _right_solve_lower_transpose(values, l_ptr[e], sizes[perm[l_rows[e]]], dk, nk)
        # Schur complement update of the trailing blocks: H_rs -= L_rk L_sk^T for rows r >= s of column k.
        # Rows are sorted and column s of L contains every r > s of column k (symbolic closure), so one
        # forward-moving pointer q into column s finds the targets without searching.
        for e2 in range(c0, c1):
            s = l_rows[e2]
            ns = sizes[perm[s]]
            p2 = l_ptr[e2]
            q = l_colptr[s]
            q_end = l_colptr[s + 1]
            for e1 in range(e2, c1):
                r = l_rows[e1]
                nr = sizes[perm[r]]
                p1 = l_ptr[e1]
                if e1 == e2:
                    dst = l_diag_ptr[r]
                else:
                    while q < q_end and l_rows[q] < r:
                        q += 1
                    if q == q_end or l_rows[q] != r:
                        return -1  # symbolic pattern not closed under elimination (internal error)
                    dst = l_ptr[q]
                for a in range(nr):
                    for b in range(ns):
                        acc = 0.0
                        for t in range(nk):
                            acc += values[p1 + a * nk + t] * values[p2 + b * nk + t]
                        values[dst + a * ns + b] -= acc
    return 0


@jit
def _solve_kernel(sizes, perm, block_offset, l_colptr, l_rows, l_ptr, l_diag_ptr, values, x):
    """Overwrite x (n x m, rows in the original block layout) with H^{-1} x using L (forward, backward)."""
    nb = sizes.size
    m = x.shape[1]
    # forward: L y = P b
    for k in range(nb):
        nk = sizes[perm[k]]
        ok = block_offset[perm[k]]
        L = values[l_diag_ptr[k]:l_diag_ptr[k] + nk * nk].reshape((nk, nk))
        for c in range(m):
            forward_substitution(L, x, ok, c)
        for e in range(l_colptr[k], l_colptr[k + 1]):
            q = perm[l_rows[e]]
            B = values[l_ptr[e]:l_ptr[e] + sizes[q] * nk].reshape((sizes[q], nk))
            for c in range(m):
                subtract_block_product(B, x, ok, block_offset[q], c, False)
    # backward: L^T z = y
    for k in range(nb - 1, -1, -1):
        nk = sizes[perm[k]]
        ok = block_offset[perm[k]]
        for e in range(l_colptr[k], l_colptr[k + 1]):
            q = perm[l_rows[e]]
            B = values[l_ptr[e]:l_ptr[e] + sizes[q] * nk].reshape((sizes[q], nk))
            for c in range(m):
                subtract_block_product(B, x, block_offset[q], ok, c, True)
        L = values[l_diag_ptr[k]:l_diag_ptr[k] + nk * nk].reshape((nk, nk))
        for c in range(m):
            back_substitution_transposed(L, x, ok, c)


def check_values(sym, diag_values, edge_values) -> tuple[np.ndarray, np.ndarray]:
    """The diagonal and edge blocks' values as contiguous float64 vectors of the lengths ``sym`` expects
    (``diag_len``, ``edge_len``; a block-sparse or a supernodal symbolic analysis); ValueError otherwise."""
    d = np.ascontiguousarray(diag_values, dtype=np.float64).ravel()
    ev = np.ascontiguousarray(edge_values, dtype=np.float64).ravel()
    if d.size != sym.diag_len:
        raise ValueError(f"diag_values has {d.size} entries, expected sum n_i^2 = {sym.diag_len}")
    if ev.size != sym.edge_len:
        raise ValueError(f"edge_values has {ev.size} entries, expected sum n_i n_j = {sym.edge_len}")
    return d, ev


def factor_buffer(out, size: int) -> np.ndarray:
    """A new float64 vector of ``size`` entries for a factor, or ``out`` after checking it is one."""
    if out is None:
        return np.empty(size, dtype=np.float64)
    if out.dtype != np.float64 or out.shape != (size,) or not out.flags.c_contiguous:
        raise ValueError(f"out must be a contiguous float64 array of shape ({size},)")
    return out


def not_positive_definite(method: str, block: int, iperm, nblocks: int) -> np.linalg.LinAlgError:
    """The error of a Cholesky factorization whose pivot failed at the (original) block ``block``."""
    return np.linalg.LinAlgError(f"{method}: H is not positive definite; pivot failed at block {block} "
                                 f"(elimination position {int(iperm[block])} of {nblocks})")


def rhs_array(n: int, b) -> np.ndarray:
    """b as a float64 array of shape (n,) or (n, m) (the right-hand side of a solve); ValueError otherwise."""
    b = np.asarray(b, dtype=np.float64)
    if b.shape[0] != n or b.ndim not in (1, 2):
        raise ValueError(f"b must have shape ({n},) or ({n}, m), got {b.shape}")
    return b


def factor(sym: BlockSymbolic, diag_values, edge_values, out: np.ndarray | None = None) -> BlockFactor:
    """Numeric right-looking block Cholesky P H P^T = L L^T (block column k: dense LLT of the updated
    diagonal block, L_rk = H_rk L_kk^{-T}, Schur update H_rs -= L_rk L_sk^T).

    ``out``: optional float64 array of length ``sym.l_size`` reused for the factor (no allocation).
    Raises ``np.linalg.LinAlgError`` naming the (original) block whose pivot failed if H is not SPD.
    """
    d, ev = check_values(sym, diag_values, edge_values)
    values = factor_buffer(out, sym.l_size)
    info = _factor_kernel(sym.block_sizes, sym.perm, sym.l_colptr, sym.l_rows, sym.l_ptr, sym.l_diag_ptr,
                          sym.edge_entry, sym.edge_transposed, sym.edges, sym.diag_ptr, sym.edge_ptr, d, ev,
                          values)
    if info < 0:
        raise RuntimeError("block-sparse Cholesky: symbolic fill pattern is inconsistent (internal error)")
    if info != 0:
        raise not_positive_definite("block-sparse Cholesky", int(info) - 1, sym.iperm, sym.block_sizes.size)
    return BlockFactor(values=values)


def solve(sym: BlockSymbolic, fac: BlockFactor, b) -> np.ndarray:
    """Solve H x = b for b of shape (n,) or (n, m); returns a new array of the same shape."""
    b = rhs_array(sym.n, b)
    x = np.array(b.reshape(sym.n, -1), dtype=np.float64, order="C", copy=True)
    _solve_kernel(sym.block_sizes, sym.perm, sym.block_offset, sym.l_colptr, sym.l_rows, sym.l_ptr,
                  sym.l_diag_ptr, fac.values, x)
    return x.reshape(b.shape)


# ----------------------------------------------------------------------------------------------------
# Dense path (oracle)
# ----------------------------------------------------------------------------------------------------


def to_dense(block_sizes, edges, diag_values, edge_values) -> np.ndarray:
    """Dense symmetric H (n x n) from the block description. Diagonal blocks are symmetrized from their
    lower triangle (the only part the sparse factorization reads)."""
    sizes, e = _validate(block_sizes, edges)
    block_offset, diag_ptr, edge_ptr, need_d, need_e = block_pointers(sizes, e)
    d = np.asarray(diag_values, dtype=np.float64).ravel()
    ev = np.asarray(edge_values, dtype=np.float64).ravel()
    if d.size != need_d or ev.size != need_e:
        raise ValueError(f"value arrays have {d.size}, {ev.size} entries, expected {need_d}, {need_e}")
    n = int(sizes.sum())
    H = np.zeros((n, n))
    for i, (ni, oi, pi) in enumerate(zip(sizes, block_offset, diag_ptr)):
        blk = np.tril(d[pi : pi + ni * ni].reshape(ni, ni))
        H[oi : oi + ni, oi : oi + ni] = blk + np.tril(blk, -1).T
    for (i, j), pe in zip(e, edge_ptr):
        ni, nj = sizes[i], sizes[j]
        blk = ev[pe : pe + nj * ni].reshape(nj, ni)
        H[block_offset[j] : block_offset[j] + nj, block_offset[i] : block_offset[i] + ni] = blk
        H[block_offset[i] : block_offset[i] + ni, block_offset[j] : block_offset[j] + nj] = blk.T
    return H


def dense_solve(block_sizes, edges, diag_values, edge_values, b) -> np.ndarray:
    """Dense path: numpy Cholesky of :func:`to_dense` then two triangular solves.

    Raises ``np.linalg.LinAlgError`` if H is not SPD."""
    from scipy.linalg import solve_triangular

    H = to_dense(block_sizes, edges, diag_values, edge_values)
    L = np.linalg.cholesky(H)
    y = solve_triangular(L, np.asarray(b, dtype=np.float64), lower=True)
    return solve_triangular(L.T, y, lower=False)
