"""Supernodal block-sparse Cholesky of the SAP Hessian (same input format as ``block_sparse``).

    P H Pᵀ = L Lᵀ,   P permutes whole blocks (cliques); L is stored as dense supernode panels.

A *supernode* is a run of consecutive columns of L whose strictly-lower row patterns coincide (after the
supernode's own rows), so the columns form one dense panel ``[L_d; L_b]`` (L_d: w x w lower triangular,
L_b: r x w). Factoring it costs one small dense Cholesky, one triangular solve ``L_b <- L_b L_d^{-T}`` and
one product ``L_b L_bᵀ`` (BLAS dgemm through numba's ``np.dot``) scattered into the panels of later
supernodes (right-looking). Compared with ``block_sparse`` (one 6x6 block at a time, scalar loops) the
flops are the same but they run in dense kernels.

Analysis (``analyze``), once per clique graph:

1. **Ordering** of the block graph: ``"md"`` (default), the exact minimum-degree elimination of
   ``block_sparse``; ``"nd"``, nested dissection by BFS level-set separators with minimum degree on the
   leaves (see docs/block-sparse.md for the measured comparison on sphere piles).
2. **Elimination tree and postorder** (same fill, supernode columns become contiguous).
3. **Fundamental supernodes** (column k+1 joins k when parent(k) = k+1 and |struct(k)| = |struct(k+1)| + 1),
   then **relaxed amalgamation**: the last child merges into its parent when the merged panel stays small
   or the explicit zeros it adds stay a small fraction (thresholds as in CHOLMOD's defaults, in scalar
   columns: width <= 16 and zeros < 80 %, width <= 48 and zeros < 10 %, or zeros < 5 %).
4. **Scatter maps**: where each H block lands in the panels, and for every (supernode, target supernode)
   pair the relative row indices of its update.

``SupernodalSymbolic.matches(block_sizes, edges)`` tells whether an analysis can be reused for a new
Hessian (same block sizes and the same edges in the same order, which fixes the value layout).
Numeric: ``factor(sym, diag_values, edge_values)`` raises ``np.linalg.LinAlgError`` naming the original
block whose pivot failed; ``solve(sym, fac, b)`` for b of shape (n,) or (n, m).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from convexsim._jit import jit
from convexsim.sap import block_sparse as bs
from convexsim.sap.block_sparse import sorted_find
from convexsim.sap.blocks import cholesky_in_place

__all__ = ["ORDERINGS", "SupernodalFactor", "SupernodalSymbolic", "analyze", "factor", "solve"]

ORDERINGS = ("md", "nd")
"""Available block orderings: exact minimum degree, nested dissection (level-set separators)."""

RELAX = ((16, 0.8), (48, 0.1), (1 << 62, 0.05))
"""Relaxed amalgamation: merge when (merged width <= w and zero fraction < z) for some (w, z)."""


@dataclass(frozen=True, eq=False)
class SupernodalSymbolic:
    """Ordering, supernode partition and scatter maps for one block pattern (int64 arrays)."""

    n: int
    block_sizes: np.ndarray
    edges: np.ndarray
    diag_ptr: np.ndarray
    edge_ptr: np.ndarray
    diag_len: int
    edge_len: int
    ordering: str
    perm: np.ndarray
    """(nb,) perm[k] = block eliminated k-th."""
    iperm: np.ndarray
    scalar_perm: np.ndarray
    """(n,) scalar_perm[p] = original dof at permuted position p."""
    sn_col: np.ndarray
    """(ns+1,) scalar columns of supernode s are sn_col[s]:sn_col[s+1] (permuted numbering)."""
    sn_rowptr: np.ndarray
    """(ns+1,) rows below supernode s are sn_rows[sn_rowptr[s]:sn_rowptr[s+1]] (ascending)."""
    sn_rows: np.ndarray
    sn_valptr: np.ndarray
    """(ns+1,) panel of s (m x w, row-major, m = w + rows below) at values[sn_valptr[s]:]."""
    upd_ptr: np.ndarray
    """(ns+1,) update groups of s are upd_ptr[s]:upd_ptr[s+1]."""
    upd_target: np.ndarray
    """(ng,) target supernode of each group."""
    upd_first: np.ndarray
    """(ng,) first below-row (local index) of the group; the group ends where the next one starts."""
    upd_relptr: np.ndarray
    """(ng+1,) rows a..r-1 of the group map to target panel rows upd_rel[upd_relptr[g]:]."""
    upd_rel: np.ndarray
    diag_dst: np.ndarray
    """(nb,) offset of H_ii's (0, 0) entry in the panels (row stride diag_stride)."""
    diag_stride: np.ndarray
    edge_dst: np.ndarray
    """(ne,) offset of the L-pattern block's (0, 0) entry (row stride edge_stride)."""
    edge_stride: np.ndarray
    edge_transposed: np.ndarray
    col_block: np.ndarray
    """(n,) original block of each permuted scalar column (for error messages)."""
    l_size: int
    """Floats in the panels (includes explicit zeros of amalgamation)."""
    l_blocks: int
    """Nonzero blocks of L (lower triangle incl. diagonal, block pattern, no amalgamation zeros)."""
    h_blocks: int
    """Nonzero blocks of H's lower triangle (nb + ne)."""
    flops: float
    """Multiply-adds of one numeric factorization (panels incl. zeros)."""

    @property
    def supernodes(self) -> int:
        """Number of supernodes."""
        return int(self.sn_col.size - 1)

    def matches(self, block_sizes, edges) -> bool:
        """True if this analysis serves a Hessian with these block sizes and edges (same order)."""
        s = np.asarray(block_sizes)
        e = np.asarray(edges).reshape(-1, 2)
        return (s.shape == self.block_sizes.shape and e.shape == self.edges.shape
                and bool(np.array_equal(s, self.block_sizes)) and bool(np.array_equal(e, self.edges)))


@dataclass(frozen=True, eq=False)
class SupernodalFactor:
    """Numeric factor: the supernode panels."""

    values: np.ndarray


# ----------------------------------------------------------------------------------------------------
# Ordering
# ----------------------------------------------------------------------------------------------------


def _md_order(sizes: np.ndarray, e: np.ndarray) -> np.ndarray:
    xadj, adjncy = bs._adjacency(sizes.size, e)
    perm, _, _ = bs._min_degree_kernel(sizes, xadj, adjncy, False)
    return perm


def _nd_order(sizes: np.ndarray, e: np.ndarray, leaf: int = 48) -> np.ndarray:
    """Nested dissection: split by the middle BFS level (weighted by block size) from a pseudo-peripheral
    node, order part 1, part 2, separator; parts of <= ``leaf`` blocks are ordered by minimum degree."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import breadth_first_order, connected_components

    nb = sizes.size
    xadj, adjncy = bs._adjacency(nb, e)
    graph = sp.csr_matrix((np.ones(adjncy.size), adjncy, xadj), shape=(nb, nb))
    order: list[np.ndarray] = []
    # iterative recursion; items are ("nodes", blocks to order) or ("emit", a separator, ordered last)
    work: list[tuple[str, np.ndarray]] = [("nodes", np.arange(nb))]
    while work:
        kind, nodes = work.pop()
        if kind == "emit":
            order.append(nodes)
            continue
        sub = graph[nodes][:, nodes]
        if nodes.size <= leaf:
            se = sp.triu(sub, 1).tocoo()
            local = _md_order(sizes[nodes], np.stack([se.row, se.col], axis=1).astype(np.int64))
            order.append(nodes[local])
            continue
        ncomp, label = connected_components(sub, directed=False)
        if ncomp > 1:
            for c in range(ncomp - 1, -1, -1):
                work.append(("nodes", nodes[label == c]))
            continue
        level = _bfs_levels(sub, breadth_first_order)
        w = sizes[nodes].astype(float)
        nlev = int(level.max()) + 1
        if nlev < 3:  # (nearly) complete graph: no useful separator
            se = sp.triu(sub, 1).tocoo()
            local = _md_order(sizes[nodes], np.stack([se.row, se.col], axis=1).astype(np.int64))
            order.append(nodes[local])
            continue
        cum = np.cumsum(np.bincount(level, weights=w, minlength=nlev))
        mid = int(np.clip(np.searchsorted(cum, 0.5 * cum[-1]), 1, nlev - 2))
        sep, a, b = nodes[level == mid], nodes[level < mid], nodes[level > mid]
        work.append(("emit", sep))
        work.append(("nodes", b))
        work.append(("nodes", a))
    perm = np.concatenate(order).astype(np.int64)
    if not np.array_equal(np.sort(perm), np.arange(nb)):
        raise RuntimeError("nested dissection: the ordering is not a permutation of the blocks "
                           "(internal error)")
    return perm


def _bfs_levels(sub, breadth_first_order) -> np.ndarray:
    """BFS levels from a pseudo-peripheral node (two sweeps) of a connected graph."""
    start = 0
    for _ in range(2):
        level = _levels_from(sub, start, breadth_first_order)
        start = int(np.argmax(level))
    return _levels_from(sub, start, breadth_first_order)


def _levels_from(sub, start, breadth_first_order) -> np.ndarray:
    order, pred = breadth_first_order(sub, start, directed=False, return_predecessors=True)
    level = np.zeros(sub.shape[0], dtype=np.int64)
    for v in order[1:]:
        level[v] = level[pred[v]] + 1
    return level


# ----------------------------------------------------------------------------------------------------
# Symbolic analysis (numba)
# ----------------------------------------------------------------------------------------------------


@jit
def _block_pattern(sizes, xadj, adjncy, perm):
    """Block column structures of L for the elimination order ``perm`` (positions, ascending per column)
    by symbolic elimination with the elimination tree (O(nnz(L)) with a marker array)."""
    nb = sizes.size
    iperm = np.empty(nb, dtype=np.int64)
    for k in range(nb):
        iperm[perm[k]] = k
    # column k's structure = (H's rows > k in column k) ∪ (structures of its etree children, minus k)
    parent = -np.ones(nb, dtype=np.int64)
    child_head = -np.ones(nb, dtype=np.int64)
    child_next = -np.ones(nb, dtype=np.int64)
    mark = -np.ones(nb, dtype=np.int64)
    colptr = np.zeros(nb + 1, dtype=np.int64)
    rows = np.empty(adjncy.size + 16, dtype=np.int64)
    nrows = 0
    buf = np.empty(nb, dtype=np.int64)
    for k in range(nb):
        cnt = 0
        mark[k] = k
        i = perm[k]
        for t in range(xadj[i], xadj[i + 1]):
            r = iperm[adjncy[t]]
            if r > k and mark[r] != k:
                mark[r] = k
                buf[cnt] = r
                cnt += 1
        c = child_head[k]
        while c >= 0:
            for t in range(colptr[c], colptr[c + 1]):
                r = rows[t]
                if r > k and mark[r] != k:
                    mark[r] = k
                    buf[cnt] = r
                    cnt += 1
            c = child_next[c]
        col = np.sort(buf[:cnt])
        if nrows + cnt > rows.size:
            bigger = np.empty(2 * rows.size + cnt, dtype=np.int64)
            bigger[:nrows] = rows[:nrows]
            rows = bigger
        rows[nrows:nrows + cnt] = col
        nrows += cnt
        colptr[k + 1] = nrows
        if cnt > 0:
            p = col[0]
            parent[k] = p
            child_next[k] = child_head[p]
            child_head[p] = k
    return iperm, parent, colptr, rows[:nrows].copy()


@jit
def _postorder(parent):
    """Postorder of a forest given by parent (-1 for roots); children visited in increasing index."""
    n = parent.size
    head = -np.ones(n, dtype=np.int64)
    nxt = -np.ones(n, dtype=np.int64)
    for v in range(n - 1, -1, -1):  # push in reverse so lists are increasing
        p = parent[v]
        if p >= 0:
            nxt[v] = head[p]
            head[p] = v
    post = np.empty(n, dtype=np.int64)
    stack = np.empty(n, dtype=np.int64)
    k = 0
    for root in range(n):
        if parent[root] >= 0:
            continue
        top = 0
        stack[0] = root
        while top >= 0:
            v = stack[top]
            c = head[v]
            if c >= 0:
                head[v] = nxt[c]
                top += 1
                stack[top] = c
            else:
                post[k] = v
                k += 1
                top -= 1
    return post


@jit
def _supernodes(sizes_pos, parent, colptr, rows, relax_w, relax_z):
    """Block-column partition into supernodes: fundamental, then relaxed amalgamation (see module doc).

    ``sizes_pos``: block sizes by position. Returns (first, ns) with first[s] the first block column of
    supernode s, first[ns] = nb."""
    nb = sizes_pos.size
    cnt = colptr[1:] - colptr[:nb]
    # scalar counts of each column's rows below
    rsc = np.zeros(nb, dtype=np.int64)
    for k in range(nb):
        for t in range(colptr[k], colptr[k + 1]):
            rsc[k] += sizes_pos[rows[t]]
    fund = np.zeros(nb + 1, dtype=np.int64)
    ns = 0
    for k in range(nb):
        if k == 0 or not (parent[k - 1] == k and cnt[k - 1] == cnt[k] + 1):
            fund[ns] = k
            ns += 1
    fund[ns] = nb
    # relaxed amalgamation on a stack of supernodes in postorder
    st_first = np.empty(ns, dtype=np.int64)
    st_last = np.empty(ns, dtype=np.int64)
    st_w = np.empty(ns, dtype=np.int64)
    st_r = np.empty(ns, dtype=np.int64)
    st_z = np.empty(ns, dtype=np.float64)
    top = -1
    for s in range(ns):
        f = fund[s]
        l = fund[s + 1] - 1
        w = 0
        for k in range(f, l + 1):
            w += sizes_pos[k]
        r = rsc[l]
        z = 0.0
        # merge the preceding supernode while it is a child whose columns end right before f
        while top >= 0 and parent[st_last[top]] >= f and parent[st_last[top]] <= l and st_last[top] + 1 == f:
            wc = st_w[top]
            rc = st_r[top]
            zc = st_z[top]
            znew = zc + z + wc * (w + r - rc)
            wm = wc + w
            total = wm * (wm + 1) / 2.0 + wm * r
            frac = znew / total
            ok = False
            for q in range(relax_w.size):
                if wm <= relax_w[q] and frac < relax_z[q]:
                    ok = True
                    break
            if not ok:
                break
            f = st_first[top]
            w = wm
            z = znew
            top -= 1
        top += 1
        st_first[top] = f
        st_last[top] = l
        st_w[top] = w
        st_r[top] = r
        st_z[top] = z
    first = np.empty(top + 2, dtype=np.int64)
    for s in range(top + 1):
        first[s] = st_first[s]
    first[top + 1] = nb
    return first, top + 1


@jit
def _layout(sizes_pos, scal_start, colptr, rows, first, ns):
    """Scalar panels: columns, rows below, value offsets, column->supernode map."""
    nb = sizes_pos.size
    n = scal_start[nb]
    sn_of_block = np.empty(nb, dtype=np.int64)
    sn_col = np.empty(ns + 1, dtype=np.int64)
    for s in range(ns):
        sn_col[s] = scal_start[first[s]]
        for k in range(first[s], first[s + 1]):
            sn_of_block[k] = s
    sn_col[ns] = n
    # rows below supernode s = rows of its last block column (they contain those of earlier columns,
    # after amalgamation too: the merged children's rows lie in the parent's columns or structure)
    sn_rowptr = np.zeros(ns + 1, dtype=np.int64)
    for s in range(ns):
        l = first[s + 1] - 1
        rs = 0
        for t in range(colptr[l], colptr[l + 1]):
            rs += sizes_pos[rows[t]]
        sn_rowptr[s + 1] = sn_rowptr[s] + rs
    sn_rows = np.empty(sn_rowptr[ns], dtype=np.int64)
    sn_valptr = np.zeros(ns + 1, dtype=np.int64)
    for s in range(ns):
        l = first[s + 1] - 1
        q = sn_rowptr[s]
        for t in range(colptr[l], colptr[l + 1]):
            b = rows[t]
            for a in range(sizes_pos[b]):
                sn_rows[q] = scal_start[b] + a
                q += 1
        w = sn_col[s + 1] - sn_col[s]
        m = w + sn_rowptr[s + 1] - sn_rowptr[s]
        sn_valptr[s + 1] = sn_valptr[s] + m * w
    col_sn = np.empty(n, dtype=np.int64)
    for s in range(ns):
        for c in range(sn_col[s], sn_col[s + 1]):
            col_sn[c] = s
    return sn_of_block, sn_col, sn_rowptr, sn_rows, sn_valptr, col_sn


@jit
def _update_maps(sn_col, sn_rowptr, sn_rows, col_sn):
    """Update groups: for each supernode s, runs of its rows below with the same target supernode t,
    and the target panel row of every row from the group's first one on."""
    ns = sn_col.size - 1
    n = sn_col[ns]
    local = -np.ones(n, dtype=np.int64)
    upd_ptr = np.zeros(ns + 1, dtype=np.int64)
    bound = sn_rowptr[ns]           # at most one group per row below the supernodes
    upd_target = np.empty(bound, dtype=np.int64)
    upd_first = np.empty(bound, dtype=np.int64)
    upd_relptr = np.zeros(bound + 1, dtype=np.int64)
    g = 0
    for s in range(ns):
        r0 = sn_rowptr[s]
        r1 = sn_rowptr[s + 1]
        prev = -1
        for i in range(r0, r1):
            t = col_sn[sn_rows[i]]
            if t != prev:
                upd_target[g] = t
                upd_first[g] = i - r0
                upd_relptr[g + 1] = upd_relptr[g] + (r1 - i)
                g += 1
                prev = t
        upd_ptr[s + 1] = g
    ng = g
    upd_target = upd_target[:ng].copy()
    upd_first = upd_first[:ng].copy()
    upd_relptr = upd_relptr[:ng + 1].copy()
    upd_rel = np.empty(upd_relptr[ng], dtype=np.int64)
    for s in range(ns):
        r0 = sn_rowptr[s]
        r1 = sn_rowptr[s + 1]
        for g in range(upd_ptr[s], upd_ptr[s + 1]):
            t = upd_target[g]
            wt = sn_col[t + 1] - sn_col[t]
            for c in range(sn_col[t], sn_col[t + 1]):
                local[c] = c - sn_col[t]
            for i in range(sn_rowptr[t], sn_rowptr[t + 1]):
                local[sn_rows[i]] = wt + i - sn_rowptr[t]
            q = upd_relptr[g]
            for i in range(r0 + upd_first[g], r1):
                li = local[sn_rows[i]]
                if li < 0:
                    return upd_ptr, upd_target, upd_first, upd_relptr, upd_rel, False
                upd_rel[q] = li
                q += 1
            for c in range(sn_col[t], sn_col[t + 1]):
                local[c] = -1
            for i in range(sn_rowptr[t], sn_rowptr[t + 1]):
                local[sn_rows[i]] = -1
    return upd_ptr, upd_target, upd_first, upd_relptr, upd_rel, True


@jit
def _panel_row(s, row, sn_col, sn_rowptr, sn_rows):
    """Local panel row of scalar row ``row`` in supernode s (binary search in its rows below)."""
    if row >= sn_col[s] and row < sn_col[s + 1]:
        return row - sn_col[s]
    k = sorted_find(sn_rows, sn_rowptr[s], sn_rowptr[s + 1], row)
    if k < 0:
        return -1
    return sn_col[s + 1] - sn_col[s] + k - sn_rowptr[s]


@jit
def _scatter_maps(sizes, edges, iperm, scal_start, sn_of_block, sn_col, sn_rowptr, sn_rows, sn_valptr):
    """Destination offset and row stride in the panels of every H block (diag and edge)."""
    nb = sizes.size
    ne = edges.shape[0]
    diag_dst = np.empty(nb, dtype=np.int64)
    diag_stride = np.empty(nb, dtype=np.int64)
    for i in range(nb):
        k = iperm[i]
        s = sn_of_block[k]
        w = sn_col[s + 1] - sn_col[s]
        c = scal_start[k] - sn_col[s]
        diag_dst[i] = sn_valptr[s] + c * w + c
        diag_stride[i] = w
    edge_dst = np.empty(ne, dtype=np.int64)
    edge_stride = np.empty(ne, dtype=np.int64)
    edge_transposed = np.zeros(ne, dtype=np.int64)
    for e in range(ne):
        pi = iperm[edges[e, 0]]
        pj = iperm[edges[e, 1]]
        lo = pi
        hi = pj
        if pj < pi:
            lo = pj
            hi = pi
            edge_transposed[e] = 1
        s = sn_of_block[lo]
        w = sn_col[s + 1] - sn_col[s]
        c = scal_start[lo] - sn_col[s]
        r = _panel_row(s, scal_start[hi], sn_col, sn_rowptr, sn_rows)
        if r < 0:
            return diag_dst, diag_stride, edge_dst, edge_stride, edge_transposed, False
        edge_dst[e] = sn_valptr[s] + r * w + c
        edge_stride[e] = w
    return diag_dst, diag_stride, edge_dst, edge_stride, edge_transposed, True


_RELAX_W = np.array([w for w, _ in RELAX], dtype=np.int64)
_RELAX_Z = np.array([z for _, z in RELAX], dtype=np.float64)


@jit
def _symbolic(sizes, edges, xadj, adjncy, perm0, block_offset, relax_w, relax_z):
    """Steps 2–4 of :func:`analyze` for the elimination order ``perm0`` in one kernel call (each call from
    Python costs its argument unboxing; the analysis of a 100-block pile graph is a few tens of µs of work):
    postordered perm, iperm, off-diagonal blocks of L, the supernode layout (sn_col, sn_rowptr, sn_rows,
    sn_valptr), the update maps and scatter maps (each with its success flag last), scalar_perm (n,) (the
    original dof at each permuted position) and col_block (n,) (the original block of each permuted column)."""
    nb = sizes.size
    _, parent0, _, _ = _block_pattern(sizes, xadj, adjncy, perm0)
    post = _postorder(parent0)
    perm = np.empty(nb, dtype=np.int64)
    for k in range(nb):
        perm[k] = perm0[post[k]]
    iperm, parent, colptr, rows = _block_pattern(sizes, xadj, adjncy, perm)
    sizes_pos = np.empty(nb, dtype=np.int64)
    scal_start = np.zeros(nb + 1, dtype=np.int64)
    for k in range(nb):
        sizes_pos[k] = sizes[perm[k]]
        scal_start[k + 1] = scal_start[k] + sizes_pos[k]
    first, ns = _supernodes(sizes_pos, parent, colptr, rows, relax_w, relax_z)
    sn_of_block, sn_col, sn_rowptr, sn_rows, sn_valptr, col_sn = _layout(sizes_pos, scal_start, colptr, rows,
                                                                         first, ns)
    upd = _update_maps(sn_col, sn_rowptr, sn_rows, col_sn)
    sc = _scatter_maps(sizes, edges, iperm, scal_start, sn_of_block, sn_col, sn_rowptr, sn_rows, sn_valptr)
    n = scal_start[nb]
    scalar_perm = np.empty(n, dtype=np.int64)     # dof a of the block at position k: scal_start[k] + a
    col_block = np.empty(n, dtype=np.int64)
    for k in range(nb):
        for a in range(sizes_pos[k]):
            scalar_perm[scal_start[k] + a] = block_offset[perm[k]] + a
            col_block[scal_start[k] + a] = perm[k]
    return (perm, iperm, colptr[nb], sn_col, sn_rowptr, sn_rows, sn_valptr, upd, sc, scalar_perm, col_block)


def analyze(block_sizes, edges, ordering: str = "md", perm=None) -> SupernodalSymbolic:
    """Ordering, postorder, supernodes and scatter maps for the block pattern (see module docstring).

    ``perm``: an elimination order of the blocks to use instead of computing ``ordering`` (e.g. the order of
    an earlier analysis of a slightly smaller pattern: any order gives the exact factor, a stale one only
    costs fill); it is still postordered. Raises ``ValueError`` for malformed input, an unknown ordering or
    a ``perm`` that is not a permutation of the blocks."""
    if ordering not in ORDERINGS:
        raise ValueError(f"ordering must be one of {ORDERINGS}, got {ordering!r}")
    sizes, e = bs._validate(block_sizes, edges)
    if float(sizes.size) ** 2 * float(sizes.sum() + 1) >= 2.0**62:
        raise ValueError(f"{sizes.size} blocks, total size {sizes.sum()}: int64 ordering keys would overflow")
    nb = sizes.size
    block_offset, diag_ptr, edge_ptr, diag_len, edge_len = bs.block_pointers(sizes, e)
    xadj, adjncy = bs._adjacency(nb, e)
    if perm is not None:
        perm0 = np.asarray(perm, dtype=np.int64)
        if perm0.shape != (nb,) or not np.array_equal(np.sort(perm0), np.arange(nb)):
            raise ValueError(f"perm must be a permutation of the {nb} blocks")
    elif ordering == "md":
        perm0 = bs._min_degree_kernel(sizes, xadj, adjncy, False)[0]
    else:
        perm0 = _nd_order(sizes, e)
    (perm, iperm, l_offdiag, sn_col, sn_rowptr, sn_rows, sn_valptr, upd, sc, scalar_perm,
     col_block) = _symbolic(sizes, e, xadj, adjncy, np.ascontiguousarray(perm0), block_offset, _RELAX_W, _RELAX_Z)
    if not upd[-1]:
        raise RuntimeError("supernodal analysis: update rows missing from a target panel (internal error)")
    if not sc[-1]:
        raise RuntimeError("supernodal analysis: an H block has no place in the panels (internal error)")
    w = np.diff(sn_col).astype(float)
    r = np.diff(sn_rowptr).astype(float)
    flops = float(np.sum(w**3 / 6 + r * w**2 / 2 + r * (r + 1) * w / 2))
    return SupernodalSymbolic(
        n=int(sizes.sum()), block_sizes=sizes, edges=e, diag_ptr=diag_ptr, edge_ptr=edge_ptr,
        diag_len=diag_len, edge_len=edge_len, ordering=ordering, perm=perm, iperm=iperm,
        scalar_perm=scalar_perm, sn_col=sn_col, sn_rowptr=sn_rowptr, sn_rows=sn_rows,
        sn_valptr=sn_valptr, upd_ptr=upd[0], upd_target=upd[1], upd_first=upd[2], upd_relptr=upd[3],
        upd_rel=upd[4], diag_dst=sc[0], diag_stride=sc[1], edge_dst=sc[2], edge_stride=sc[3],
        edge_transposed=sc[4], col_block=col_block,
        l_size=int(sn_valptr[-1]), l_blocks=int(nb + l_offdiag), h_blocks=int(nb + e.shape[0]), flops=flops,
    )


# ----------------------------------------------------------------------------------------------------
# Numeric factorization and solve (numba)
# ----------------------------------------------------------------------------------------------------


@jit
def _scatter_h(sizes, edges, diag_ptr, edge_ptr, diag_values, edge_values, diag_dst, diag_stride, edge_dst,
               edge_stride, edge_transposed, values):
    """Zero the panels and copy H's blocks into them (diagonal blocks: lower triangle)."""
    values[:] = 0.0
    for i in range(sizes.size):
        ni = sizes[i]
        src = diag_ptr[i]
        dst = diag_dst[i]
        st = diag_stride[i]
        for a in range(ni):
            row = values[dst + a * st:dst + a * st + a + 1]
            hrow = diag_values[src + a * ni:src + a * ni + a + 1]
            for b in range(a + 1):
                row[b] = hrow[b]
    for e in range(edges.shape[0]):
        ni = sizes[edges[e, 0]]
        nj = sizes[edges[e, 1]]
        src = edge_ptr[e]
        dst = edge_dst[e]
        st = edge_stride[e]
        if edge_transposed[e] == 0:  # stored H_ji (nj x ni) is the L-pattern block
            for a in range(nj):
                row = values[dst + a * st:dst + a * st + ni]
                hrow = edge_values[src + a * ni:src + a * ni + ni]
                for b in range(ni):
                    row[b] = hrow[b]
        else:  # L-pattern block is H_ij = H_ji^T (ni x nj)
            for a in range(nj):
                for b in range(ni):
                    values[dst + b * st + a] = edge_values[src + a * ni + b]


CHOL_BLOCK = 32
"""Column block of the dense Cholesky of a supernode's diagonal block (wider diagonals are blocked)."""


@jit
def _chol_lower(D, ptbuf, acc):
    """Lower Cholesky of the w x w row-major D in place (lower triangle read, strict upper zeroed), blocked
    by CHOL_BLOCK columns: factor the diagonal block, solve the panel below (:func:`_solve_lower_rows` on its
    transpose), update the trailing lower triangle (:func:`_syrk_rows4`, four rows at a time). Work buffers:
    ptbuf (>= w·CHOL_BLOCK), acc (>= w). Returns -1 on success or the failing column."""
    w = D.shape[0]
    nbk = CHOL_BLOCK
    for k0 in range(0, w, nbk):
        k1 = min(k0 + nbk, w)
        kb = k1 - k0
        Dk = D[k0:k1, k0:k1]
        bad = cholesky_in_place(Dk, kb)    # 0, or 1 + the failing column
        if bad != 0:
            return k0 + bad - 1
        m = w - k1
        if m == 0:
            break
        PT = ptbuf[:kb * m].reshape(kb, m)
        for i in range(m):
            for t in range(kb):
                PT[t, i] = D[k1 + i, k0 + t]
        _solve_lower_rows(Dk, PT)
        for i in range(m):
            for t in range(kb):
                D[k1 + i, k0 + t] = PT[t, i]
        T = D.reshape(w * w)[k1:k1 + (w - 1) * w].reshape(w - 1, w)  # T[k1 + i, j] is D[k1 + i, k1 + j]
        i = 0
        while i + 4 <= m:
            _syrk_rows4(PT, i, T, k1 + i, True)   # also writes D's strict upper triangle, zeroed at the end
            i += 4
        while i < m:
            _product_row(D[k1:, k0:k1], PT, i, acc)
            for j in range(i + 1):
                D[k1 + i, k1 + j] -= acc[j]
            i += 1
    for i in range(w):
        for j in range(i + 1, w):
            D[i, j] = 0.0
    return -1


@jit
def _product_row(B, BT, i, acc):
    """acc[:i+1] = row i of B Bᵀ up to the diagonal, as contiguous axpys over the columns t of B."""
    w = B.shape[1]
    for j in range(i + 1):
        acc[j] = 0.0
    for t in range(w):
        bit = B[i, t]
        if bit != 0.0:  # explicit zeros of amalgamation
            for j in range(i + 1):
                acc[j] += bit * BT[t, j]


@jit
def _solve_lower_rows(D, X):
    """X <- D⁻¹ X in place for the lower-triangular w × w D and X of w rows (X = Bᵀ: B <- B D⁻ᵀ), by blocks of
    four rows j0..j0+3: minus D[j0 + q, k..k+3] times rows k..k+3 of X for every block k < j0 (16 multiply-adds
    per pass over the rows, contiguous), then the 4 × 4 triangle row by row (:func:`_finish_row`)."""
    w = D.shape[1]
    r = X.shape[1]
    j0 = 0
    while j0 + 4 <= w:
        for k in range(0, j0, 4):
            a0, a1, a2, a3 = D[j0, k], D[j0, k + 1], D[j0, k + 2], D[j0, k + 3]
            b0, b1, b2, b3 = D[j0 + 1, k], D[j0 + 1, k + 1], D[j0 + 1, k + 2], D[j0 + 1, k + 3]
            c0, c1, c2, c3 = D[j0 + 2, k], D[j0 + 2, k + 1], D[j0 + 2, k + 2], D[j0 + 2, k + 3]
            d0, d1, d2, d3 = D[j0 + 3, k], D[j0 + 3, k + 1], D[j0 + 3, k + 2], D[j0 + 3, k + 3]
            for i in range(r):
                x = X[k, i]
                y = X[k + 1, i]
                z = X[k + 2, i]
                u = X[k + 3, i]
                X[j0, i] -= a0 * x + a1 * y + a2 * z + a3 * u
                X[j0 + 1, i] -= b0 * x + b1 * y + b2 * z + b3 * u
                X[j0 + 2, i] -= c0 * x + c1 * y + c2 * z + c3 * u
                X[j0 + 3, i] -= d0 * x + d1 * y + d2 * z + d3 * u
        for j in range(j0, j0 + 4):
            _finish_row(D, X, j, j0)
        j0 += 4
    for j in range(j0, w):
        _finish_row(D, X, j, 0)


@jit
def _finish_row(D, X, j, k0):
    """X[j] <- (X[j] − Σ_(k0 <= k < j) D[j, k] X[k]) / D[j, j] (rows k already final)."""
    r = X.shape[1]
    for k in range(k0, j):
        d = D[j, k]
        for i in range(r):
            X[j, i] -= d * X[k, i]
    djj = D[j, j]
    for i in range(r):
        X[j, i] = X[j, i] / djj


@jit
def _syrk_rows4(BT, i0, out, o, subtract):
    """Rows i0..i0+3 of B Bᵀ up to column i0+3 into out[o + q, j] (q = 0..3, j < i0 + 4; rows i0..i0+3 must
    exist), BT = Bᵀ (w × r, column t of B contiguous): stored (``subtract`` False) or subtracted (True). Four rows
    of B Bᵀ share every load of BT[t, j] and four columns t are summed per pass over j (contiguous, vectorized by
    the compiler), so each pass reads and writes the output rows once for 16 multiply-adds. The sum over t runs
    in order, four products at a time (round-off as any order)."""
    w = BT.shape[0]
    n = i0 + 4
    if not subtract:
        for q in range(4):
            for j in range(n):
                out[o + q, j] = 0.0
    t = 0
    while t + 4 <= w:
        a0, a1, a2, a3 = BT[t, i0], BT[t, i0 + 1], BT[t, i0 + 2], BT[t, i0 + 3]
        b0, b1, b2, b3 = BT[t + 1, i0], BT[t + 1, i0 + 1], BT[t + 1, i0 + 2], BT[t + 1, i0 + 3]
        c0, c1, c2, c3 = BT[t + 2, i0], BT[t + 2, i0 + 1], BT[t + 2, i0 + 2], BT[t + 2, i0 + 3]
        d0, d1, d2, d3 = BT[t + 3, i0], BT[t + 3, i0 + 1], BT[t + 3, i0 + 2], BT[t + 3, i0 + 3]
        if subtract:
            a0, a1, a2, a3, b0, b1, b2, b3 = -a0, -a1, -a2, -a3, -b0, -b1, -b2, -b3
            c0, c1, c2, c3, d0, d1, d2, d3 = -c0, -c1, -c2, -c3, -d0, -d1, -d2, -d3
        for j in range(n):
            x = BT[t, j]
            y = BT[t + 1, j]
            z = BT[t + 2, j]
            u = BT[t + 3, j]
            out[o, j] += a0 * x + b0 * y + c0 * z + d0 * u
            out[o + 1, j] += a1 * x + b1 * y + c1 * z + d1 * u
            out[o + 2, j] += a2 * x + b2 * y + c2 * z + d2 * u
            out[o + 3, j] += a3 * x + b3 * y + c3 * z + d3 * u
        t += 4
    while t < w:
        a0, a1, a2, a3 = BT[t, i0], BT[t, i0 + 1], BT[t, i0 + 2], BT[t, i0 + 3]
        if subtract:
            a0, a1, a2, a3 = -a0, -a1, -a2, -a3
        for j in range(n):
            x = BT[t, j]
            out[o, j] += a0 * x
            out[o + 1, j] += a1 * x
            out[o + 2, j] += a2 * x
            out[o + 3, j] += a3 * x
        t += 1


@jit
def _scatter_update(C, s, r, sn_col, sn_valptr, upd_ptr, upd_target, upd_first, upd_relptr, upd_rel, values):
    """Subtract the lower triangle of C (r × r) from the targets of s, group by group: C's columns a_g..b_g-1 are
    columns rel_g[0..] of target T_g and row i >= a_g is T_g's panel row rel_g[i - a_g] (each target's rows in
    increasing order; a contiguous run of target columns is one plain loop)."""
    g0 = upd_ptr[s]
    g1 = upd_ptr[s + 1]
    for g in range(g0, g1):
        a = upd_first[g]
        b = upd_first[g + 1] if g + 1 < g1 else r
        t_sn = upd_target[g]
        wt = sn_col[t_sn + 1] - sn_col[t_sn]
        base = sn_valptr[t_sn]
        rp = upd_relptr[g]
        c0 = upd_rel[rp]
        contiguous = upd_rel[rp + b - 1 - a] - c0 == b - 1 - a    # rel increases: first and last tell
        for i in range(a, r):
            row = base + upd_rel[rp + i - a] * wt
            e = min(i + 1, b)
            if contiguous:
                dst = values[row + c0:row + c0 + e - a]
                src = C[i, a:e]
                for j in range(e - a):
                    dst[j] -= src[j]
            else:
                for j in range(a, e):
                    values[row + upd_rel[rp + j - a]] -= C[i, j]


@jit
def _update_rows(BT, r, s, sn_col, sn_valptr, upd_ptr, upd_target, upd_first, upd_relptr, upd_rel, values, c_buf):
    """Subtract C = B Bᵀ (lower part, r × r) of supernode s from its targets: C four rows at a time
    (:func:`_syrk_rows4`; BT = Bᵀ with its columns padded by zeros to a multiple of four), then scattered target
    by target (:func:`_scatter_update`). Work buffer: c_buf (>= BT.shape[1]²)."""
    rp = BT.shape[1]
    C = c_buf[:rp * rp].reshape(rp, rp)
    for i in range(0, rp, 4):
        _syrk_rows4(BT, i, C, i, False)
    _scatter_update(C, s, r, sn_col, sn_valptr, upd_ptr, upd_target, upd_first, upd_relptr, upd_rel, values)


@jit
def _update_blas(B, BT, s, sn_col, sn_valptr, upd_ptr, upd_target, upd_first, upd_relptr, upd_rel, values):
    """Same update as :func:`_update_rows` with one ``np.dot`` (BLAS dgemm) per target group."""
    r = B.shape[0]
    for g in range(upd_ptr[s], upd_ptr[s + 1]):
        t_sn = upd_target[g]
        a = upd_first[g]
        b = upd_first[g + 1] if g + 1 < upd_ptr[s + 1] else r
        wt = sn_col[t_sn + 1] - sn_col[t_sn]
        base = sn_valptr[t_sn]
        rel = upd_rel[upd_relptr[g]:upd_relptr[g + 1]]
        U = np.dot(np.ascontiguousarray(B[a:, :]), np.ascontiguousarray(BT[:, a:b]))
        for i in range(r - a):
            row = base + rel[i] * wt
            for j in range(min(i + 1, b - a)):
                values[row + rel[j]] -= U[i, j]


@jit
def _factor_kernel(sn_col, sn_rowptr, sn_valptr, upd_ptr, upd_target, upd_first, upd_relptr, upd_rel, values,
                   use_blas):
    """Right-looking supernodal Cholesky on the scattered panels. Returns -1 or the failing scalar column.

    For each supernode s: D <- chol(D), B <- B D^{-T}, then the targets T receive T -= B Bᵀ (scattered)."""
    ns = sn_col.size - 1
    rmax = 1
    wmax = 1
    for s in range(ns):
        rmax = max(rmax, sn_rowptr[s + 1] - sn_rowptr[s])
        wmax = max(wmax, sn_col[s + 1] - sn_col[s])
    acc = np.empty(max(rmax, wmax))
    bt_buf = np.empty(wmax * (4 * ((rmax + 3) // 4)))
    ptbuf = np.empty(wmax * CHOL_BLOCK)
    rpad = 4 * ((rmax + 3) // 4)
    c_buf = np.empty(rpad * rpad)
    for s in range(ns):
        w = sn_col[s + 1] - sn_col[s]
        r = sn_rowptr[s + 1] - sn_rowptr[s]
        off = sn_valptr[s]
        D = values[off:off + w * w].reshape(w, w)
        bad = _chol_lower(D, ptbuf, acc)
        if bad >= 0:
            return sn_col[s] + bad
        if r == 0:
            continue
        B = values[off + w * w:off + (w + r) * w].reshape(r, w)
        rp = 4 * ((r + 3) // 4)
        BT = bt_buf[:w * rp].reshape(w, rp)  # column t of B contiguous, zero-padded to rp rows of B
        for t in range(w):
            for i in range(r, rp):
                BT[t, i] = 0.0
        for i in range(r):
            for t in range(w):
                BT[t, i] = B[i, t]
        _solve_lower_rows(D, BT)           # B <- B D^{-T} (the zero padding stays zero)
        for i in range(r):
            for t in range(w):
                B[i, t] = BT[t, i]
        if use_blas:
            _update_blas(B, BT[:, :r], s, sn_col, sn_valptr, upd_ptr, upd_target, upd_first, upd_relptr, upd_rel,
                         values)
        else:
            _update_rows(BT, r, s, sn_col, sn_valptr, upd_ptr, upd_target, upd_first, upd_relptr, upd_rel, values,
                         c_buf)
    return -1


@jit(inline="always")
def _panel(s, sn_col, sn_rowptr, sn_valptr, values):
    """Supernode s's panel: (first column c0, width w, rows below r, the (w + r) × w row-major view P of L's columns
    c0 … c0+w−1: the w × w lower-triangular diagonal block over the r rows ``sn_rows[sn_rowptr[s]:]``)."""
    c0 = sn_col[s]
    w = sn_col[s + 1] - c0
    r = sn_rowptr[s + 1] - sn_rowptr[s]
    return c0, w, r, values[sn_valptr[s]:sn_valptr[s] + (w + r) * w].reshape(w + r, w)


@jit
def _solve_kernel(sn_col, sn_rowptr, sn_rows, sn_valptr, values, x):
    """x (n x m, permuted order) <- H^{-1} x: forward L y = x, backward Lᵀ z = y, supernode by supernode, one
    column of x at a time through a contiguous copy y of the supernode's entries."""
    ns = sn_col.size - 1
    wmax = 1
    for s in range(ns):
        wmax = max(wmax, sn_col[s + 1] - sn_col[s])
    y = np.empty(wmax)
    for c in range(x.shape[1]):
        for s in range(ns):
            c0, w, r, P = _panel(s, sn_col, sn_rowptr, sn_valptr, values)
            for t in range(w):
                y[t] = x[c0 + t, c]
            _forward_panel(P, w, y)
            for t in range(w):
                x[c0 + t, c] = y[t]
            _subtract_below(P, w, r, y, sn_rows, sn_rowptr[s], x, c)
        for s in range(ns - 1, -1, -1):
            c0, w, r, P = _panel(s, sn_col, sn_rowptr, sn_valptr, values)
            for t in range(w):
                y[t] = x[c0 + t, c]
            for i in range(r):
                xi = x[sn_rows[sn_rowptr[s] + i], c]
                for t in range(w):
                    y[t] -= P[w + i, t] * xi
            _backward_panel(P, w, y)
            for t in range(w):
                x[c0 + t, c] = y[t]


@jit
def _forward_panel(P, w, y):
    """y[:w] <- L_d⁻¹ y for the panel's lower-triangular top L_d = P[:w]: y_j = (y_j − Σ_(t<j) P[j, t] y_t) / P[j, j],
    four rows' sums over t < j0 at a time (independent chains), each sum in ascending t."""
    j0 = 0
    while j0 + 4 <= w:
        s0 = y[j0]
        s1 = y[j0 + 1]
        s2 = y[j0 + 2]
        s3 = y[j0 + 3]
        for t in range(j0):
            yt = y[t]
            s0 -= P[j0, t] * yt
            s1 -= P[j0 + 1, t] * yt
            s2 -= P[j0 + 2, t] * yt
            s3 -= P[j0 + 3, t] * yt
        y[j0] = s0 / P[j0, j0]
        s1 -= P[j0 + 1, j0] * y[j0]
        y[j0 + 1] = s1 / P[j0 + 1, j0 + 1]
        s2 -= P[j0 + 2, j0] * y[j0]
        s2 -= P[j0 + 2, j0 + 1] * y[j0 + 1]
        y[j0 + 2] = s2 / P[j0 + 2, j0 + 2]
        s3 -= P[j0 + 3, j0] * y[j0]
        s3 -= P[j0 + 3, j0 + 1] * y[j0 + 1]
        s3 -= P[j0 + 3, j0 + 2] * y[j0 + 2]
        y[j0 + 3] = s3 / P[j0 + 3, j0 + 3]
        j0 += 4
    for j in range(j0, w):
        sj = y[j]
        for t in range(j):
            sj -= P[j, t] * y[t]
        y[j] = sj / P[j, j]


@jit
def _subtract_below(P, w, r, y, sn_rows, rp, x, c):
    """x[row_i, c] −= P[w + i, :w] · y for the r rows below the panel (four dot products at a time)."""
    i = 0
    while i + 4 <= r:
        a0 = a1 = a2 = a3 = 0.0
        for t in range(w):
            yt = y[t]
            a0 += P[w + i, t] * yt
            a1 += P[w + i + 1, t] * yt
            a2 += P[w + i + 2, t] * yt
            a3 += P[w + i + 3, t] * yt
        x[sn_rows[rp + i], c] -= a0
        x[sn_rows[rp + i + 1], c] -= a1
        x[sn_rows[rp + i + 2], c] -= a2
        x[sn_rows[rp + i + 3], c] -= a3
        i += 4
    while i < r:
        a0 = 0.0
        for t in range(w):
            a0 += P[w + i, t] * y[t]
        x[sn_rows[rp + i], c] -= a0
        i += 1


@jit
def _backward_panel(P, w, y):
    """y[:w] <- L_d⁻ᵀ y: for j = w−1 … 0, y_j /= P[j, j], then y[:j] −= y_j P[j, :j] (a contiguous row of P)."""
    for j in range(w - 1, -1, -1):
        yj = y[j] / P[j, j]
        y[j] = yj
        for t in range(j):
            y[t] -= P[j, t] * yj


def factor(sym: SupernodalSymbolic, diag_values, edge_values, out: np.ndarray | None = None, *,
           use_blas: bool = False) -> SupernodalFactor:
    """Numeric supernodal Cholesky of H given by its blocks (layout of ``block_sparse``).

    ``out``: optional contiguous float64 array of length ``sym.l_size`` reused for the panels.
    Raises ``np.linalg.LinAlgError`` naming the original block whose pivot failed if H is not SPD."""
    d, ev = bs.check_values(sym, diag_values, edge_values)
    values = bs.factor_buffer(out, sym.l_size)
    _scatter_h(sym.block_sizes, sym.edges, sym.diag_ptr, sym.edge_ptr, d, ev, sym.diag_dst, sym.diag_stride,
               sym.edge_dst, sym.edge_stride, sym.edge_transposed, values)
    bad = _factor_kernel(sym.sn_col, sym.sn_rowptr, sym.sn_valptr, sym.upd_ptr, sym.upd_target, sym.upd_first,
                         sym.upd_relptr, sym.upd_rel, values, use_blas)
    if bad >= 0:
        raise bs.not_positive_definite("supernodal Cholesky", int(sym.col_block[bad]), sym.iperm,
                                       sym.block_sizes.size)
    return SupernodalFactor(values=values)


def solve(sym: SupernodalSymbolic, fac: SupernodalFactor, b) -> np.ndarray:
    """Solve H x = b for b of shape (n,) or (n, m); returns a new array of the same shape."""
    b = bs.rhs_array(sym.n, b)
    x = np.ascontiguousarray(b.reshape(sym.n, -1)[sym.scalar_perm])
    _solve_kernel(sym.sn_col, sym.sn_rowptr, sym.sn_rows, sym.sn_valptr, fac.values, x)
    out = np.empty_like(x)
    out[sym.scalar_perm] = x
    return out.reshape(b.shape)
