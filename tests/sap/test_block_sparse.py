"""Block-sparse Cholesky (convexsim.sap.block_sparse) against dense numpy linear algebra.

Oracles that cannot be tuned: numpy.linalg.cholesky / solve on the dense matrix, the uniqueness of the
Cholesky factor of an SPD matrix, closed-form fill counts for chains and stars.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from convexsim.sap import block_sparse as bs

# Both paths are backward stable, so the forward error of x is <~ cond(H) * eps. The generated problems
# have cond(H) < 1e5 (asserted), so cond * eps ~ 2e-11: 1e-10 relative (the acceptance tolerance) holds
# with margin and would catch any wrong block, transpose or missing Schur update (O(1) errors).
REL_TOL = 1e-10


def sap_like_problem(sizes, edges, rng, ground_fraction=0.5):
    """Random SPD H = A + sum_c J_c^T G_c J_c with the block pattern of ``edges`` (like the SAP Hessian).

    Returns (diag_values, edge_values, H_direct) where H_direct (scipy.sparse CSR) is assembled from the
    same J, G as a sum of per-constraint terms placed at explicit (row, col) offsets, independently of
    ``bs.to_dense`` (so the storage convention is checked, not assumed)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    offset, diag_ptr, edge_ptr, nd, ne = bs.block_pointers(sizes, edges)
    n = int(sizes.sum())
    rows, cols, vals = [], [], []

    def add(block, r0, c0):
        r, c = np.meshgrid(np.arange(block.shape[0]) + r0, np.arange(block.shape[1]) + c0, indexing="ij")
        rows.append(r.ravel())
        cols.append(c.ravel())
        vals.append(block.ravel())

    diag_blocks = []
    for i, ni in enumerate(sizes):
        M = rng.standard_normal((ni, ni))
        A = np.exp(rng.uniform(-1, 1)) * (M @ M.T + 0.5 * np.eye(ni))  # SPD "mass" block
        if rng.random() < ground_fraction:  # contact with the ground: touches one clique
            J = rng.standard_normal((3, ni))
            A = A + J.T @ np.diag(rng.uniform(0.1, 2.0, 3)) @ J
        add(A, offset[i], offset[i])
        diag_blocks.append(A)
    edge_blocks = []
    for i, j in edges:
        J_i = rng.standard_normal((3, sizes[i]))
        J_j = rng.standard_normal((3, sizes[j]))
        G = np.diag(rng.uniform(0.1, 2.0, 3))
        # the constraint Jacobian [J_i, J_j] contributes [J_i J_j]^T G [J_i J_j] to H
        J = np.hstack([J_i, J_j])
        term = J.T @ G @ J
        ni = sizes[i]
        add(term[:ni, :ni], offset[i], offset[i])
        add(term[ni:, ni:], offset[j], offset[j])
        add(term[ni:, :ni], offset[j], offset[i])
        add(term[:ni, ni:], offset[i], offset[j])
        diag_blocks[i] = diag_blocks[i] + term[:ni, :ni]
        diag_blocks[j] = diag_blocks[j] + term[ni:, ni:]
        edge_blocks.append(term[ni:, :ni])  # H[rows j, cols i]
    d = np.concatenate([blk.ravel() for blk in diag_blocks])
    ev = np.concatenate([blk.ravel() for blk in edge_blocks]) if edge_blocks else np.zeros(0)
    assert d.size == nd and ev.size == ne
    H = sp.coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n))
    return d, ev, H.tocsr()


def random_edges(nb, n_edges, rng):
    seen = set()
    out = []
    while len(out) < n_edges:
        i, j = rng.integers(0, nb, 2)
        if i == j:
            continue
        key = (min(i, j), max(i, j))
        if key not in seen:
            seen.add(key)
            out.append(key)
    return np.array(out, dtype=np.int64).reshape(-1, 2)


def grid_edges(rows, cols):
    idx = np.arange(rows * cols).reshape(rows, cols)
    right = np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1)
    down = np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], 1)
    return np.concatenate([right, down]).astype(np.int64)


def dense_L(sym, fac):
    """Scatter the blocks of L into a dense matrix in elimination (permuted) scalar order."""
    sizes_p = sym.block_sizes[sym.perm]
    off_p = np.concatenate(([0], np.cumsum(sizes_p)[:-1]))
    L = np.zeros((sym.n, sym.n))
    for k, nk in enumerate(sizes_p):
        p = sym.l_diag_ptr[k]
        L[off_p[k] : off_p[k] + nk, off_p[k] : off_p[k] + nk] = fac.values[p : p + nk * nk].reshape(nk, nk)
        for e in range(sym.l_colptr[k], sym.l_colptr[k + 1]):
            r = sym.l_rows[e]
            nr = sizes_p[r]
            p = sym.l_ptr[e]
            blk = fac.values[p : p + nr * nk].reshape(nr, nk)
            L[off_p[r] : off_p[r] + nr, off_p[k] : off_p[k] + nk] = blk
    return L


def scalar_perm(sym):
    return np.concatenate([np.arange(sym.block_offset[b], sym.block_offset[b] + sym.block_sizes[b])
                           for b in sym.perm])


def assert_rel_close(x, ref, scale=None):
    """max |x − ref| <= REL_TOL · max |scale| (scale: ref itself by default)."""
    assert np.abs(x - ref).max() <= REL_TOL * np.abs(ref if scale is None else scale).max()


def random_problem(seed, nb, n_edges):
    """(rng, sizes, edges, d, ev, H) of a random SAP-like problem: nb blocks of sizes 2–6, n_edges edges."""
    rng = np.random.default_rng(seed)
    sizes = rng.choice([2, 3, 4, 6], nb)
    edges = random_edges(nb, n_edges, rng)
    d, ev, H = sap_like_problem(sizes, edges, rng)
    return rng, sizes, edges, d, ev, H


def check_against_dense(sizes, edges, rng, m=3):
    d, ev, H_direct = sap_like_problem(sizes, edges, rng)
    H_direct = H_direct.toarray()
    H = bs.to_dense(sizes, edges, d, ev)
    # the storage convention: to_dense reproduces the directly assembled matrix (same floating-point sums
    # up to ordering of additions -> 1e-12 relative)
    np.testing.assert_allclose(H, H_direct, rtol=0, atol=1e-12 * np.abs(H_direct).max())
    eig = np.linalg.eigvalsh(H)
    cond = eig[-1] / eig[0]
    assert cond < 1e5, cond
    sym = bs.analyze(sizes, edges)
    fac = bs.factor(sym, d, ev)
    # L is the unique Cholesky factor of P H P^T: compare with numpy's, block for block
    sp = scalar_perm(sym)
    L_ref = np.linalg.cholesky(H[np.ix_(sp, sp)])
    L = dense_L(sym, fac)
    assert_rel_close(L, L_ref)
    b = rng.standard_normal((sym.n, m))
    x_ref = np.linalg.solve(H, b)
    x = bs.solve(sym, fac, b)
    assert x.shape == b.shape
    assert_rel_close(x, x_ref)
    x1 = bs.solve(sym, fac, b[:, 0])
    assert x1.shape == (sym.n,)
    assert_rel_close(x1, x_ref[:, 0])
    x_dense = bs.dense_solve(sizes, edges, d, ev, b)
    assert np.abs(x_dense - x_ref).max() <= REL_TOL * np.abs(x_ref).max()
    return sym


@pytest.mark.parametrize("nb,n_edges,seed", [(1, 0, 0), (2, 1, 1), (10, 15, 2), (50, 75, 3), (200, 300, 4),
                                             (200, 600, 5)])
def test_random_problems_match_dense(nb, n_edges, seed):
    rng = np.random.default_rng(seed)
    sizes = rng.choice([2, 3, 4, 6], nb)
    edges = random_edges(nb, n_edges, rng)
    check_against_dense(sizes, edges, rng)


@pytest.mark.parametrize("seed", range(12))
def test_small_random_graphs_of_any_density(seed):
    # from no edges to the complete graph (every block coupled: no fill but a dense L), random block sizes
    rng = np.random.default_rng(100 + seed)
    nb = int(rng.integers(1, 13))
    all_pairs = [(i, j) for i in range(nb) for j in range(i + 1, nb)]
    n_edges = int(rng.integers(0, len(all_pairs) + 1)) if all_pairs else 0
    pick = rng.permutation(len(all_pairs))[:n_edges]
    edges = np.array([all_pairs[p] for p in pick], dtype=np.int64).reshape(-1, 2)
    sizes = rng.integers(1, 7, nb)
    check_against_dense(sizes, edges, rng, m=2)


def test_disconnected_components_and_isolated_blocks():
    rng = np.random.default_rng(10)
    # three components: a triangle (0,1,2), a chain 3-4-5-6, isolated 7 and 8; edges listed out of order
    edges = np.array([[4, 5], [1, 2], [0, 2], [5, 6], [0, 1], [3, 4]])
    sizes = np.array([6, 2, 3, 4, 6, 6, 2, 3, 1])
    sym = check_against_dense(sizes, edges, rng)
    assert sym.fill_blocks == 0  # forests and a triangle need no fill under minimum degree


def test_grid_graph_matches_dense_and_beats_natural_ordering():
    rng = np.random.default_rng(11)
    rows, cols = 8, 11
    edges = grid_edges(rows, cols)
    sizes = np.full(rows * cols, 6)
    sym = check_against_dense(sizes, edges[rng.permutation(len(edges))], rng)
    # natural (row-major) ordering of a grid fills the whole band: ~ (rows*cols) * cols blocks;
    # minimum degree must do strictly better (it is ~ n log n for 2-D grids)
    natural = bs.natural_ordering_fill(sizes, edges) - len(edges)
    assert sym.fill_blocks < natural


def test_chain_of_1000_blocks_no_fill():
    rng = np.random.default_rng(12)
    nb = 1000
    edges = np.stack([np.arange(nb - 1), np.arange(1, nb)], 1)[rng.permutation(nb - 1)]
    sizes = rng.choice([2, 3, 4, 6], nb)
    d, ev, H = sap_like_problem(sizes, edges, rng)
    sym = bs.analyze(sizes, edges)
    # a tree eliminated leaf-first has zero fill: L has exactly one off-diagonal block per edge
    assert sym.fill_blocks == 0 and sym.l_colptr[-1] == nb - 1
    assert sym.l_size == int((sizes**2).sum() + (sizes[edges[:, 0]] * sizes[edges[:, 1]]).sum())
    fac = bs.factor(sym, d, ev)
    b = rng.standard_normal(sym.n)
    x = bs.solve(sym, fac, b)
    # independent sparse direct solver (SuperLU with its own ordering) as the oracle; a chain of SPD
    # blocks with O(1) couplings is well conditioned, so the 1e-10 relative tolerance applies
    x_ref = spla.spsolve(H.tocsc(), b)
    assert np.abs(x - x_ref).max() <= REL_TOL * np.abs(x_ref).max()
    assert np.abs(H @ x - b).max() <= 1e-12 * np.abs(b).max() * abs(H).max()


@pytest.mark.parametrize("nb", [8, 40])
def test_star_graph_minimum_degree_avoids_fill(nb):
    # arrow/star: hub 0 coupled to every other block. Natural order eliminates the hub first and turns the
    # remaining nb-1 blocks into a clique: (nb-1)(nb-2)/2 fill blocks. Minimum degree eliminates the leaves
    # first (degree 6 each vs the hub's 6(nb-1)) and has none.
    rng = np.random.default_rng(nb)
    edges = np.stack([np.zeros(nb - 1, dtype=np.int64), np.arange(1, nb)], 1)
    sizes = np.full(nb, 6)
    natural_fill = bs.natural_ordering_fill(sizes, edges) - (nb - 1)
    assert natural_fill == (nb - 1) * (nb - 2) // 2
    sym = check_against_dense(sizes, edges, rng)
    assert sym.fill_blocks == 0
    # the hub goes last but one (the final leaf ties with it at one neighbour; ties go to the lower index)
    assert 0 in sym.perm[-2:]


def test_edge_order_does_not_change_the_solution():
    rng, sizes, edges, d, ev, H = random_problem(13, 60, 120)
    H = H.toarray()
    b = rng.standard_normal(int(sizes.sum()))
    sym = bs.analyze(sizes, edges)
    x = bs.solve(sym, bs.factor(sym, d, ev), b)
    # shuffle the edges and move their value blocks accordingly
    order = rng.permutation(len(edges))
    _, _, edge_ptr, _, _ = bs.block_pointers(sizes, edges)
    blocks = [ev[edge_ptr[e] : edge_ptr[e] + sizes[i] * sizes[j]] for e, (i, j) in enumerate(edges)]
    ev2 = np.concatenate([blocks[e] for e in order])
    sym2 = bs.analyze(sizes, edges[order])
    x2 = bs.solve(sym2, bs.factor(sym2, d, ev2), b)
    x_ref = np.linalg.solve(H, b)
    assert_rel_close(x2, x_ref)
    assert_rel_close(x2, x, x_ref)


def test_not_positive_definite_names_the_block():
    nb = 30
    _, sizes, edges, d, ev, _ = random_problem(14, nb, 45)
    sym = bs.analyze(sizes, edges)
    bad = 17
    p = sym.diag_ptr[bad]
    n_bad = sizes[bad]
    # make H_bad,bad indefinite: its Schur complement (H_bb minus PSD terms) stays indefinite whatever the
    # order, while every other block is untouched, so the pivot fails exactly at block 17
    d[p : p + n_bad * n_bad] = -np.eye(n_bad).ravel()
    with pytest.raises(np.linalg.LinAlgError, match=rf"block {bad}\b"):
        bs.factor(sym, d, ev)
    with pytest.raises(np.linalg.LinAlgError):
        bs.dense_solve(sizes, edges, d, ev, np.ones(sym.n))
    d[p] = np.nan
    with pytest.raises(np.linalg.LinAlgError, match=rf"block {bad}\b"):
        bs.factor(sym, d, ev)


def test_malformed_input_rejected():
    sizes = np.array([2, 3, 4])
    with pytest.raises(ValueError, match="not a pair"):
        bs.analyze(sizes, [[1, 0]])
    with pytest.raises(ValueError, match="not a pair"):
        bs.analyze(sizes, [[0, 3]])
    with pytest.raises(ValueError, match="duplicate"):
        bs.analyze(sizes, [[0, 1], [1, 2], [0, 1]])
    with pytest.raises(ValueError, match=">= 1"):
        bs.analyze([2, 0], [])
    sym = bs.analyze(sizes, [[0, 1]])
    with pytest.raises(ValueError, match="diag_values"):
        bs.factor(sym, np.zeros(5), np.zeros(6))
    with pytest.raises(ValueError, match="b must have shape"):
        bs.solve(sym, bs.factor(sym, np.concatenate([np.eye(k).ravel() for k in sizes]), np.zeros(6)),
                 np.ones(4))


# ----------------------------------------------------------------------------------------------------
# The benchmark's problem generator (convexsim.tools.bench)
# ----------------------------------------------------------------------------------------------------


def test_bench_point_jacobian_is_rigid_body_point_velocity():
    from convexsim.tools.bench import _frame, _point_jacobian

    rng = np.random.default_rng(20)
    normal = rng.standard_normal(3)
    normal /= np.linalg.norm(normal)
    frame = _frame(normal)
    # orthonormal, right-handed, normal last (exact up to rounding)
    np.testing.assert_allclose(frame @ frame.T, np.eye(3), atol=1e-14)
    np.testing.assert_allclose(frame[2], normal, atol=1e-15)
    assert np.linalg.det(frame) == pytest.approx(1.0, abs=1e-14)
    w, v, r = rng.standard_normal((3, 3))
    # independent: the velocity of the material point at offset r is v + w x r (numpy cross product)
    expected = frame @ (v + np.cross(w, r))
    np.testing.assert_allclose(_point_jacobian(frame, r) @ np.concatenate([w, v]), expected, atol=1e-14)


@pytest.mark.parametrize("layout", ["rows", "grid"])
def test_bench_hessian_sparse_matches_dense(layout):
    from convexsim.tools.bench import sap_like_hessian

    sizes, edges, d, ev = sap_like_hessian(40, seed=3, layout=layout)
    H = bs.to_dense(sizes, edges, d, ev)
    sym = bs.analyze(sizes, edges)
    b = np.random.default_rng(3).standard_normal(sym.n)
    x = bs.solve(sym, bs.factor(sym, d, ev), b)
    x_ref = np.linalg.solve(H, b)
    # the contact Hessian has cond ~1e7 here (stiff G vs light inertias): cond * eps ~ 2e-9 makes x itself
    # uncertain at that level, so compare the residual instead, which a backward-stable Cholesky keeps at
    # ~n eps |H| |x| (n = 240: ~5e-14 relative; 1e-12 leaves margin, a wrong block gives O(1))
    assert np.abs(H @ x - b).max() <= 1e-12 * np.abs(H).max() * np.abs(x_ref).max()
    if layout == "rows":
        assert sym.fill_blocks == 0  # chains


def test_run_benchmark_smoke():
    from convexsim.tools.bench import format_table, run_benchmark

    rows = run_benchmark(sizes=(3, 12), repeats=1, seed=1)
    assert [r["bodies"] for r in rows] == [3, 12]
    for r in rows:
        assert r["converged"] and r["newton_iterations"] >= 1 and r["line_search_evaluations"] >= 1
        # sparse vs dense solve of the same H: both backward stable, cond(H) ~1e7 -> differences ~cond*eps
        assert r["factor_rel_diff"] < 1e-8
        assert r["supernodal_vs_block_rel_diff"] < 1e-8
        n = r["bodies"]
        assert r["contacts"] == 2 * n + n - (n + 9) // 10  # 2 ground contacts per body + row neighbours
    assert "ratio" in format_table(rows)
