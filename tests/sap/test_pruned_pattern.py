"""The Newton matrix factored in the pattern of its nonzero blocks (docs/block-sparse.md, "Pruned pattern").

H = A + Σ J_iᵀ G_i J_i: a clique pair whose constraints all have G_i = 0 (open speculative contacts, flat
regions of the cost) has an exactly zero block, so the Cholesky factor of H in the pattern without those
pairs is the factor of H itself. Checked here against the whole-graph factor and dense numpy on the Newton
matrices of a real sphere pile, on random SPD block patterns (with an elimination order kept from a smaller
pattern, as the solver does when its pattern grows) and through whole SAP solves.
"""

import numpy as np
import pytest

from convexsim.sap import SapParameters, block_sparse as bs, linalg, solve, supernodal as sn
from convexsim.sap.constraints import eval_constraints
from convexsim.sap.problem import constraint_kernel_data, delassus_diagonal

EPS = np.finfo(float).eps


def _pile_problem(steps=25):
    """The SAP problem of step ``steps`` of scenes/pile_100.yaml (landed: ~150 contacts, some open)."""
    from convexsim import dynamics
    from convexsim.simulate import prepare
    from convexsim.stepping import build_sap_problem, contact_kinematics, step

    model, state, _ = prepare("scenes/pile_100.yaml")
    for _ in range(steps):
        state, _ = step(model, state, path="reference")
    kin = contact_kinematics(model, state)
    A_blocks, v_star = dynamics.free_motion(model, state)
    v0 = state.v[dynamics.moving_bodies(model)].reshape(-1)
    return build_sap_problem(model, state, kin, A_blocks, v_star, v0), v0


def _hessian_blocks(problem, v):
    kind, cpar, _, _ = constraint_kernel_data(problem, delassus_diagonal(problem))
    gamma, G = np.empty((problem.nk, 3)), np.empty((problem.nk, 3, 3))
    eval_constraints(kind, cpar, problem.constraint_velocities(v), gamma, G, True)
    return G


@pytest.fixture(scope="module")
def pile():
    return _pile_problem()


def test_pruned_newton_step_equals_whole_graph_step_and_dense(pile):
    """Check on a landed pile, at the warm start and at the solution: the pruned pattern drops pairs (their
    G_i are all exactly zero), and the pruned step equals the whole-graph step and the dense solve within
    100·cond(H)·eps relative (both factors are backward stable; they differ only in elimination order)."""
    problem, v0 = pile
    v_sol = solve(problem, v_guess=v0).v
    rng = np.random.default_rng(3)
    for v in (v0, v_sol):
        G = _hessian_blocks(problem, v)
        pruned = linalg.SparseHessian(problem, prune=True)
        whole = linalg.SparseHessian(problem, prune=False)
        rhs = rng.standard_normal(problem.nv)
        x_p, ok_p = pruned.factor_and_solve(G, rhs)
        x_w, ok_w = whole.factor_and_solve(G, rhs)
        assert ok_p and ok_w
        assert 0 < pruned.edges.shape[0] < whole.edges.shape[0]  # a real pruning, not all or nothing
        # every dropped pair has only G = 0 constraints
        ce = whole.constraint_edge
        dropped = ~_rows_in(whole.edges, pruned.edges)
        on_dropped = (ce >= 0) & dropped[np.maximum(ce, 0)]
        assert on_dropped.any() and np.all(G[on_dropped] == 0.0)
        H = whole.dense()
        np.testing.assert_array_equal(pruned.dense(), H)  # the same matrix, exactly (zeros are zeros)
        tol = 100 * np.linalg.cond(H) * EPS
        x_ref = np.linalg.solve(H, rhs)
        assert np.linalg.norm(x_p - x_w) <= tol * np.linalg.norm(x_w)
        assert np.linalg.norm(x_p - x_ref) <= tol * np.linalg.norm(x_ref)


def _rows_in(edges, sub):
    """Bool (ne,): which rows of edges appear in sub (both (k, 2) int arrays)."""
    keys = {(int(a), int(b)) for a, b in sub}
    return np.array([(int(a), int(b)) in keys for a, b in edges], dtype=bool)


def test_pattern_grows_and_keeps_its_analysis_while_covered(pile):
    """Check the pattern follows G: a G with fewer nonzero pairs reuses the current analysis (no new one),
    a G with a pair outside the pattern grows it to the union (exact either way)."""
    problem, v0 = pile
    G = _hessian_blocks(problem, v0)
    h = linalg.SparseHessian(problem, prune=True)
    h.assemble(G)
    sym0, edges0 = h.sym, h.edges.copy()
    G_less = G.copy()
    two = np.flatnonzero(problem.constraint_cliques[:, 1] >= 0)
    G_less[two[: two.size // 2]] = 0.0
    h.assemble(G_less)
    assert h.sym is sym0  # a sub-pattern: same analysis
    G_more = np.zeros_like(G)
    G_more[two] = np.eye(3)  # every pair coupled
    h.assemble(G_more)
    assert h.edges.shape[0] == h.all_edges.shape[0] > edges0.shape[0]
    np.testing.assert_array_equal(h.sym.perm.size, problem.ncliques)
    H = linalg.SparseHessian(problem, prune=False)
    H.assemble(G_more)
    np.testing.assert_array_equal(h.dense(), H.dense())


@pytest.mark.roundoff
def test_sap_solve_same_with_and_without_pruning(pile, monkeypatch):
    """Check whole SAP solves on the pile: same number of Newton iterations and the same v within 1e-10
    relative (each Newton step agrees to ~cond·eps; the iterates then differ by round-off only)."""
    problem, v0 = pile
    params = SapParameters(rel_tolerance=1e-10, abs_tolerance=0.0, on_failure="raise")
    monkeypatch.setattr(linalg, "PRUNE_PATTERN", True)
    stats = linalg.reset_factor_stats()
    r_p = solve(problem, v_guess=v0, params=params)
    assert stats.kept_edges < stats.graph_edges  # the pruned solve did factor smaller patterns
    monkeypatch.setattr(linalg, "PRUNE_PATTERN", False)
    r_w = solve(problem, v_guess=v0, params=params)
    assert r_p.iterations == r_w.iterations >= 3
    assert np.linalg.norm(r_p.v - r_w.v) <= 1e-10 * np.linalg.norm(r_w.v)
    np.testing.assert_allclose(r_p.gamma, r_w.gamma, rtol=0, atol=1e-10 * np.abs(r_w.gamma).max())


def _random_spd_blocks(rng, nb, edges):
    """Block values of a well-conditioned SPD H (diagonally dominant, cond < 100) on the pattern."""
    sizes = rng.choice([2, 3, 6], size=nb)
    d = []
    for n in sizes:
        M = rng.standard_normal((n, n))
        d.append((M @ M.T + 10.0 * (1 + len(edges)) / max(nb, 1) * 6 * np.eye(n)).ravel())
    ev = [rng.uniform(-1, 1, size=sizes[i] * sizes[j]) for i, j in edges]
    diag = np.concatenate(d)
    off = np.concatenate(ev) if ev else np.zeros(0)
    return sizes.astype(np.int64), diag, off


@pytest.mark.parametrize("seed", range(6))
def test_stale_elimination_order_gives_the_exact_factor_under_perturbation(seed):
    """Check the supernodal factor with an elimination order taken from a smaller pattern (as when the
    solver's pattern grows) solves random SPD block systems like numpy to 1e-12 relative, also after a
    1e-10 relative perturbation of the values (same analysis, the dense solve of the perturbed matrix)."""
    rng = np.random.default_rng(seed)
    nb = int(rng.integers(5, 60))
    pairs = [(i, j) for i in range(nb) for j in range(i + 1, nb) if rng.random() < 4.0 / nb]
    small = [p for p in pairs if rng.random() < 0.7]
    sizes, diag, off = _random_spd_blocks(rng, nb, pairs)
    edges = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    sym_small = sn.analyze(sizes, np.array(small, dtype=np.int64).reshape(-1, 2))
    sym = sn.analyze(sizes, edges, perm=sym_small.perm)
    b = rng.standard_normal(int(sizes.sum()))
    for scale in (0.0, 1e-10):
        d2 = diag * (1 + scale * rng.uniform(-1, 1, diag.size))
        o2 = off * (1 + scale * rng.uniform(-1, 1, off.size))
        H = bs.to_dense(sizes, edges, d2, o2)
        H = 0.5 * (H + H.T)
        assert np.linalg.cond(H) < 1e3  # so cond·eps < 1e-12
        x = sn.solve(sym, sn.factor(sym, d2, o2), b)
        x_ref = np.linalg.solve(H, b)
        assert np.linalg.norm(x - x_ref) <= 1e-12 * np.linalg.norm(x_ref)


def test_analyze_rejects_a_bad_elimination_order():
    """Check a perm that is not a permutation of the blocks is a ValueError naming it."""
    sizes = np.array([2, 2, 2], dtype=np.int64)
    edges = np.array([[0, 1], [1, 2]], dtype=np.int64)
    for bad in ([0, 1], [0, 0, 2], [0, 1, 3]):
        with pytest.raises(ValueError, match="perm"):
            sn.analyze(sizes, edges, perm=bad)
