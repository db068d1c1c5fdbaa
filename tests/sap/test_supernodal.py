"""Supernodal Cholesky (convexsim.sap.supernodal) against dense numpy and the one-block-at-a-time factor.

Oracles that cannot be tuned: numpy.linalg.cholesky / solve on the dense matrix, the uniqueness of the
Cholesky factor of an SPD matrix (so L is checked entry by entry, not only the solution), and the
block_sparse factor (an independent implementation with its own ordering) on the same matrices.
"""

from __future__ import annotations

import numpy as np
import pytest

from convexsim.sap import block_sparse as bs
from convexsim.sap import supernodal as sn
from tests.sap.test_block_sparse import assert_rel_close, grid_edges, random_edges, sap_like_problem

# Both factorizations are backward stable: forward error of x <~ cond(H)·eps. The generated problems have
# cond(H) < 1e5 (asserted), cond·eps ~ 2e-11, so 1e-10 relative catches any misplaced block, missing
# update or wrong transpose (O(1) errors) with margin.
REL_TOL = 1e-10


def dense_L(sym: sn.SupernodalSymbolic, fac: sn.SupernodalFactor) -> np.ndarray:
    """L (permuted scalar order) from the supernode panels."""
    L = np.zeros((sym.n, sym.n))
    for s in range(sym.supernodes):
        c0, c1 = sym.sn_col[s], sym.sn_col[s + 1]
        w = c1 - c0
        rows = np.concatenate([np.arange(c0, c1), sym.sn_rows[sym.sn_rowptr[s]:sym.sn_rowptr[s + 1]]])
        P = fac.values[sym.sn_valptr[s]:sym.sn_valptr[s + 1]].reshape(rows.size, w)
        L[np.ix_(rows, np.arange(c0, c1))] = P
    return L


def check(sizes, edges, rng, ordering, m=2):
    d, ev, _ = sap_like_problem(sizes, edges, rng)
    H = bs.to_dense(sizes, edges, d, ev)
    eig = np.linalg.eigvalsh(H)
    assert eig[-1] / eig[0] < 1e5
    sym = sn.analyze(sizes, edges, ordering)
    assert np.array_equal(np.sort(sym.perm), np.arange(len(sizes)))
    fac = sn.factor(sym, d, ev)
    p = sym.scalar_perm
    L_ref = np.linalg.cholesky(H[np.ix_(p, p)])
    L = dense_L(sym, fac)
    assert_rel_close(np.tril(L), L_ref)
    assert np.all(np.triu(L, 1) == 0.0)  # panels hold no stray values above the diagonal
    b = rng.standard_normal((sym.n, m))
    x_ref = np.linalg.solve(H, b)
    x = sn.solve(sym, fac, b)
    assert x.shape == b.shape
    assert_rel_close(x, x_ref)
    x1 = sn.solve(sym, fac, b[:, 0])
    assert x1.shape == (sym.n,)
    assert_rel_close(x1, x[:, 0], x_ref)
    # the one-block-at-a-time factor (the previous implementation, its own ordering) agrees
    old = bs.analyze(sizes, edges)
    x_old = bs.solve(old, bs.factor(old, d, ev), b)
    assert_rel_close(x, x_old, x_ref)
    # the block pattern of L is that of the ordering: same count as a symbolic elimination in that order
    assert sym.l_blocks >= sym.h_blocks
    return sym


@pytest.mark.parametrize("ordering", sn.ORDERINGS)
@pytest.mark.parametrize("nb, n_edges, seed",
                         [(1, 0, 0), (2, 1, 1), (12, 20, 2), (60, 150, 3), (200, 500, 4)])
def test_random_sap_like_problems_match_dense(nb, n_edges, seed, ordering):
    rng = np.random.default_rng(seed)
    sizes = rng.choice([2, 3, 4, 6], nb)
    check(sizes, random_edges(nb, n_edges, rng), rng, ordering)


@pytest.mark.parametrize("seed", range(12))
def test_small_graphs_of_any_density(seed):
    """Empty to complete graphs (dense L: one supernode), both orderings."""
    rng = np.random.default_rng(100 + seed)
    nb = int(rng.integers(2, 14))
    n_edges = int(rng.integers(0, nb * (nb - 1) // 2 + 1))
    sizes = rng.choice([1, 3, 6], nb)
    for ordering in sn.ORDERINGS:
        check(sizes, random_edges(nb, n_edges, rng), rng, ordering)


@pytest.mark.parametrize("ordering", sn.ORDERINGS)
def test_grid_disconnected_and_isolated_blocks(ordering):
    rng = np.random.default_rng(7)
    e = grid_edges(6, 7)
    edges = np.concatenate([e, e + 42, [[84, 85]]])  # two 6x7 grids, a pair, an isolated block 86
    check(np.full(87, 6), edges, rng, ordering)


def test_chain_has_no_fill_and_few_supernodes():
    """A chain: minimum degree eliminates from the ends, L has exactly H's blocks. Relaxed amalgamation
    merges neighbouring pairs (width 12, explicit zeros 36/150 = 24 % < 80 %) but not triples (width 18 >
    16 with 39 % zeros), so there are exactly nb/2 supernodes."""
    nb = 150
    edges = np.stack([np.arange(nb - 1), np.arange(1, nb)], 1)
    sym = check(np.full(nb, 6), edges, np.random.default_rng(3), "md")
    assert sym.l_blocks == sym.h_blocks == 2 * nb - 1
    assert sym.supernodes == nb // 2


def test_edge_order_layout_and_matches():
    """The value layout follows the edge order, so matches() requires the same order; results agree."""
    rng = np.random.default_rng(11)
    sizes = rng.choice([3, 6], 40)
    edges = random_edges(40, 90, rng)
    d, ev, _ = sap_like_problem(sizes, edges, rng)
    sym = sn.analyze(sizes, edges)
    assert sym.matches(sizes, edges) and sym.matches(list(sizes), edges.tolist())
    order = rng.permutation(len(edges))
    assert not sym.matches(sizes, edges[order])
    assert not sym.matches(sizes, edges[:-1])
    assert not sym.matches(np.where(np.arange(40) == 0, 2, sizes), edges)
    # shuffled edges with their blocks moved accordingly: same solution
    _, _, edge_ptr, _, _ = bs.block_pointers(sizes, edges)
    blk = [ev[edge_ptr[e]:edge_ptr[e] + sizes[i] * sizes[j]] for e, (i, j) in enumerate(edges)]
    ev2 = np.concatenate([blk[e] for e in order])
    b = rng.standard_normal(int(sizes.sum()))
    x1 = sn.solve(sym, sn.factor(sym, d, ev), b)
    sym2 = sn.analyze(sizes, edges[order])
    x2 = sn.solve(sym2, sn.factor(sym2, d, ev2), b)
    assert np.abs(x1 - x2).max() <= REL_TOL * np.abs(x1).max()


def test_not_positive_definite_names_the_block():
    rng = np.random.default_rng(5)
    sizes = np.full(30, 6)
    edges = grid_edges(5, 6)
    d, ev, _ = sap_like_problem(sizes, edges, rng)
    sym = sn.analyze(sizes, edges)
    bad = d.copy()
    _, diag_ptr, _, _, _ = bs.block_pointers(sizes, edges)
    bad[diag_ptr[17]:diag_ptr[17] + 36] *= -1.0  # block 17 negative definite
    with pytest.raises(np.linalg.LinAlgError, match=r"block \d+"):
        sn.factor(sym, bad, ev)
    nan = d.copy()
    nan[diag_ptr[4]] = np.nan
    with pytest.raises(np.linalg.LinAlgError, match="block 4 "):
        sn.factor(sym, nan, ev)
    with pytest.raises(ValueError, match="diag_values"):
        sn.factor(sym, d[:-1], ev)
    with pytest.raises(ValueError, match="ordering"):
        sn.analyze(sizes, edges, "amd")


def _pile_hessians(monkeypatch, steps=18):
    """Hessian blocks of every Newton iteration of steps ``steps - 2 .. steps`` of the pile_100 scene (the
    pile has landed, ~300 contacts), recorded from the solver's sparse path."""
    from convexsim import stepping
    from convexsim.sap import linalg
    from convexsim.simulate import prepare

    recorded = []
    original = linalg.SparseHessian.factor_and_solve

    def record(self, G, rhs):
        self.assemble(G)
        recorded.append((self.problem.clique_sizes.copy(), self.edges.copy(), self.diag_values.copy(),
                         self.edge_values.copy()))
        return original(self, G, rhs)

    model, state, _ = prepare("scenes/pile_100.yaml")
    for k in range(steps):
        if k == steps - 3:
            monkeypatch.setattr(linalg.SparseHessian, "factor_and_solve", record)
        state, _ = stepping.step(model, state, path="reference")
    monkeypatch.undo()
    return recorded


def test_real_pile_hessians_match_dense_and_block_factor_under_perturbation(monkeypatch):
    """On the Newton matrices of a landed sphere pile: supernodal = block factor = dense solve; a tiny
    symmetric perturbation δH (1e-9 relative) reuses the analysis (same pattern) and moves x by about
    ‖H⁻¹ δH x‖, which the dense solve of the perturbed matrix confirms."""
    recorded = _pile_hessians(monkeypatch)
    assert len(recorded) >= 3
    rng = np.random.default_rng(0)
    for sizes, edges, d, ev in recorded[:: max(1, len(recorded) // 4)]:
        assert edges.shape[0] > sizes.size  # a real contact graph, not a forest
        H = bs.to_dense(sizes, edges, d, ev)
        b = rng.standard_normal(H.shape[0])
        x_ref = np.linalg.solve(H, b)
        cond = np.linalg.cond(H)
        tol = max(REL_TOL, 100 * cond * np.finfo(float).eps)  # backward-stable solves: error <~ cond·eps
        sym = sn.analyze(sizes, edges)
        x = sn.solve(sym, sn.factor(sym, d, ev), b)
        assert np.abs(x - x_ref).max() <= tol * np.abs(x_ref).max()
        old = bs.analyze(sizes, edges)
        x_old = bs.solve(old, bs.factor(old, d, ev), b)
        assert np.abs(x - x_old).max() <= tol * np.abs(x_ref).max()
        # perturb the values, then symmetrize the diagonal blocks from their lower part (what factor reads)
        H2 = bs.to_dense(sizes, edges, d * (1 + 1e-9 * rng.standard_normal(d.size)), ev)
        off = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        d2v = np.concatenate([H2[o:o + n, o:o + n].ravel() for o, n in zip(off, sizes)])
        assert sym.matches(sizes, edges)
        x2 = sn.solve(sym, sn.factor(sym, d2v, ev), b)
        x2_ref = np.linalg.solve(H2, b)
        assert np.abs(x2 - x2_ref).max() <= tol * np.abs(x2_ref).max()
        assert 0 < np.abs(x2 - x).max() <= 1e3 * cond * 1e-9 * np.abs(x).max()


@pytest.mark.roundoff
def test_solver_uses_supernodal_and_agrees_with_block_and_dense():
    """The SAP solver's result does not depend on the linear solver (same Newton iterates up to round-off)."""
    from convexsim.sap import SapParameters, solve
    from convexsim.tools.bench import make_problem

    problem = make_problem(30, 1, "grid")
    res = {ls: solve(problem, params=SapParameters(linear_solver=ls, rel_tolerance=1e-10))
           for ls in ("sparse", "block", "dense")}
    for ls in ("block", "dense"):
        assert res[ls].converged and res["sparse"].converged
        assert res[ls].iterations == res["sparse"].iterations
        assert np.abs(res[ls].v - res["sparse"].v).max() <= 1e-8 * np.abs(res["dense"].v).max()


def test_blas_update_and_out_buffer_give_the_same_factor():
    """use_blas=True (numpy dot per update group) and a reused ``out`` array: the same L to round-off."""
    rng = np.random.default_rng(21)
    sizes = np.full(60, 6)
    edges = random_edges(60, 200, rng)
    d, ev, _ = sap_like_problem(sizes, edges, rng)
    sym = sn.analyze(sizes, edges)
    ref = sn.factor(sym, d, ev).values
    blas = sn.factor(sym, d, ev, use_blas=True).values
    out = np.full(sym.l_size, np.nan)
    again = sn.factor(sym, d, ev, out=out).values
    assert again is out
    scale = np.abs(ref).max()
    assert np.abs(blas - ref).max() <= 1e-12 * scale and np.abs(again - ref).max() == 0.0
    with pytest.raises(ValueError, match="out must be"):
        sn.factor(sym, d, ev, out=np.zeros(sym.l_size + 1))


def test_linalg_reuses_the_analysis_while_the_graph_is_unchanged():
    from convexsim.sap import linalg

    rng = np.random.default_rng(2)
    sizes = np.full(20, 6)
    edges = np.unique(np.sort(random_edges(20, 40, rng), axis=1), axis=0)
    stats = linalg.reset_factor_stats()
    cache = linalg.SymbolicCache()
    first = cache.analysis(sizes, edges)
    assert cache.analysis(sizes.copy(), edges.copy()) is first
    assert (stats.analyses, stats.reused) == (1, 1)
    other = cache.analysis(sizes, edges[1:])
    assert other is not first and other.matches(sizes, edges[1:]) and stats.analyses == 2
    assert linalg.SymbolicCache().analysis(sizes, edges) is not first  # caches share nothing


def _in_pattern(sym, sizes, edges, d, ev):
    """H's edge values laid out in the (superset) pattern of ``sym`` (zero blocks where H has none)."""
    nb = sizes.size
    keys = sym.edges[:, 0] * nb + sym.edges[:, 1]
    where = np.searchsorted(keys, edges[:, 0] * nb + edges[:, 1])
    assert np.array_equal(keys[where], edges[:, 0] * nb + edges[:, 1])
    out = np.zeros((sym.edges.shape[0], 36))
    out[where] = ev.reshape(-1, 36)
    return d, out.ravel()


def test_covering_analysis_keeps_a_superset_pattern_and_solves_to_round_off():
    """SymbolicCache.covering: a subgraph of the analysed pattern reuses it; a graph outside it is analysed
    together with that pattern when the union stays within COVER_SLACK, else alone; the solve in a superset
    pattern equals the dense solve to REL_TOL (explicit zero blocks, another elimination order)."""
    from convexsim.sap import linalg

    rng = np.random.default_rng(5)
    sizes = np.full(40, 6)
    full = np.unique(np.sort(random_edges(40, 90, rng), axis=1), axis=0)
    cache = linalg.SymbolicCache()
    first = cache.covering(sizes, full)
    assert first.matches(sizes, full) and cache.misses == 1
    sub = full[rng.permutation(full.shape[0])[:80]]
    sub = sub[np.lexsort((sub[:, 1], sub[:, 0]))]
    assert cache.covering(sizes, sub) is first and cache.hits == 1
    assert cache.covering(sizes, full) is first  # the most recently used covering one
    d, ev, _ = sap_like_problem(sizes, sub, rng)
    H = bs.to_dense(sizes, sub, d, ev)
    b = rng.standard_normal(sym_n := int(sizes.sum()))
    x = sn.solve(first, sn.factor(first, *_in_pattern(first, sizes, sub, d, ev)), b)
    x_ref = np.linalg.solve(H, b)
    assert x.shape == (sym_n,) and np.abs(x - x_ref).max() <= REL_TOL * np.abs(x_ref).max()
    # a few new edges: analysed with the old pattern (union within the slack)
    extra = np.array([[a, b_] for a in range(40) for b_ in range(a + 1, 40)
                      if not np.any((full[:, 0] == a) & (full[:, 1] == b_))][:3])
    grown = np.unique(np.concatenate([sub, extra]), axis=0)
    union = cache.covering(sizes, grown)
    assert cache.misses == 2
    assert union.edges.shape[0] == np.unique(np.concatenate([full, extra]), axis=0).shape[0]
    # a graph much smaller than the pattern: analysed alone (the union would exceed the slack)
    small = full[:10]
    alone = cache.covering(sizes, small)
    assert alone.matches(sizes, small) and cache.misses == 3
    # other block sizes never share a pattern
    assert cache.covering(np.full(41, 6), full).block_sizes.size == 41 and cache.misses == 4


def test_covering_uses_exact_patterns_for_costly_factorizations(monkeypatch):
    """Above COVER_MAX_FLOPS per factorization (of the last analysis of the same blocks) covering analyses the
    exact graph, like SymbolicCache.analysis."""
    from convexsim.sap import linalg

    rng = np.random.default_rng(6)
    sizes = np.full(30, 6)
    full = np.unique(np.sort(random_edges(30, 60, rng), axis=1), axis=0)
    cache = linalg.SymbolicCache()
    first = cache.covering(sizes, full)
    assert first.flops > 0
    monkeypatch.setattr(linalg, "COVER_MAX_FLOPS", 0.5 * first.flops)
    sub = full[:-1]
    exact = cache.covering(sizes, sub)
    assert exact is not first and exact.matches(sizes, sub)
    assert cache.covering(sizes, sub) is exact and cache.covering(sizes, full) is first  # exact-pattern cache


@pytest.mark.parametrize("relax", [((0, 0.0),), ((32, 0.8), (96, 0.2), (1 << 62, 0.1)),
                                   ((64, 0.8), (192, 0.3), (1 << 62, 0.15))])
def test_other_amalgamation_rules_give_the_dense_factor(monkeypatch, relax):
    """No merging and the wider rules measured in docs/block-sparse.md: the same L and x as dense numpy (the
    explicit zeros stay zero), and wider rules give fewer supernodes with more stored floats."""
    rng = np.random.default_rng(11)
    sizes = rng.choice([3, 6], 80)
    edges = grid_edges(8, 10)
    base = sn.analyze(sizes, edges)
    monkeypatch.setattr(sn, "RELAX", relax)
    sym = check(sizes, edges, rng, "md")
    if relax[0][0] == 0:
        assert sym.supernodes >= base.supernodes and sym.l_size <= base.l_size
    else:
        assert sym.supernodes <= base.supernodes and sym.l_size >= base.l_size
