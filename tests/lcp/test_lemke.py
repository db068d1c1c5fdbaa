"""Lemke's algorithm on textbook LCPs (docs/lcp.md §1), peer test data, random families, bad input.

Correctness is judged by the LCP conditions themselves (z ≥ 0, w = Mz + q ≥ 0, z∘w = 0), checked
here independently of the solver's own check, and against known unique solutions where they exist.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convexsim.lcp.lemke import LemkeOptions, LemkeStatus, LemkeWorkspace, lcp_residual, lemke

SICONOS = Path(__file__).parent / "data" / "siconos"  # third-party test data, see its README

# Complementarity tolerance, relative to the size of the terms that form w: s = ‖M‖∞‖z‖∞ + ‖q‖∞.
# The solution comes from one dense solve on the final basis, so its error is ~cond·n·ε·s; 1e-9
# leaves room for cond up to ~1e5 on the random families while still catching any wrong basis
# (a wrong basis violates a sign condition by O(s)).
COMPL_TOL = 1e-9


def assert_lcp_solution(M, q, z, tol=COMPL_TOL):
    M = np.asarray(M, float)
    q = np.asarray(q, float)
    w = M @ z + q
    s = np.abs(M).sum(axis=1).max() * max(np.abs(z).max(), 1e-300) + np.abs(q).max()
    assert z.min() >= -tol * max(np.abs(z).max(), 1.0), z
    assert w.min() >= -tol * s, w
    assert np.abs(z * w).max() <= tol * s * max(np.abs(z).max(), 1.0), z * w


def murty(n):
    """Murty's exponential example: upper triangular, 1 on the diagonal, 2 above; q_i = −Σ_{j≥i} 2^j."""
    M = np.triu(np.full((n, n), 2.0), 1) + np.eye(n)
    q = -np.array([sum(2.0**j for j in range(i, n + 1)) for i in range(1, n + 1)])
    return M, q


# (name, M, q, expected z or None (non-unique), expected w or None, pivots or None)
TEXTBOOK = [
    ("T1 deudeu", [[2, 1], [1, 2]], [-5, -6], [4 / 3, 7 / 3], [0, 0], 3),
    ("T2 trivial", np.diag(np.arange(1.0, 10.0)), -np.ones(9), 1 / np.arange(1.0, 10.0), np.zeros(9), 10),
    ("T3 ortiz", [[3, 1, 0, -1], [-1, 2, 1, 1], [0, 1, 3, -1], [0, 0, 1, 2]], [-2, 1, -1, 1],
     [2 / 3, 0, 1 / 3, 0], [0, 2 / 3, 0, 4 / 3], 3),
    ("T4 PPM", [[60, 26, 37], [26, 36, 29], [37, 29, 30]], [-1, -1, -1], [0, 1 / 239, 7 / 239],
     [46 / 239, 0, 0], 3),
    ("T5 QuantEcon", [[1, 0, 0], [2, 1, 0], [2, 2, 1]], [-8, -12, -14], [8, 0, 0], [0, 4, 2], 8),
    ("T6 Murty 2.8", [[1, -1, -1, -1], [-1, 1, -1, -1], [1, 1, 2, 0], [1, 1, 0, 2]], [3, 5, -9, -5],
     [2, 1, 3, 1], [0, 0, 0, 0], 5),
    ("T7 CPS 4.4.7", [[0, -1, 2], [2, 0, -2], [-1, 1, 0]], [-3, 6, -1], [0, 1, 3], [2, 0, 0], 5),
    ("T8 cycling w/o lexico", [[1, 2, 2], [2, 2, 2], [0, 0, 1]], [-1, -1, -1], [0, 0, 1], [1, 1, 0], 2),
    ("T9 Kostreva 1", [[1, 2, 0], [0, 1, 2], [2, 0, 1]], [-1, -1, -1], [1 / 3] * 3, [0, 0, 0], 4),
    ("T10 CPS 4.4.16 (z0 first)", [[1, -1], [-1, 1]], [1, -1], [0, 1], [0, 0], 2),
    ("T11 CPS 4.1.14", [[1, 1], [1, 1]], [-1, -1], None, None, 2),
    ("T12 CPS QP", [[11, 0, 10, -1], [0, 11, 10, -1], [10, 10, 21, -1], [1, 1, 1, 0]], [50, 50, 10, -6],
     [2, 2, 2, 92], [0, 0, 0, 0], 5),
    ("T12bis degenerate", [[11, 0, 10, -1], [0, 11, 10, -1], [10, 10, 21, -1], [1, 1, 1, 0]],
     [50, 50, 23, -6], [3, 3, 0, 83], [0, 0, 0, 0], 5),
    ("T14 Murty q=-e", murty(6)[0], -np.ones(6), [0, 0, 0, 0, 0, 1], [1, 1, 1, 1, 1, 0], 2),
    ("T16 Pang isolated", [[0, -1, -1], [1, 0, 0], [-1, 0, 0]], [0, -1, 1], [1, 0, 0], [0, 0, 0], 3),
    ("T17 inf sol perturbed", [[0, -1, 1], [1, 0, 0], [-1, 0, 0]], [-1e-4, -1, 1], None, None, 5),
]


TEXTBOOK_RULE = LemkeOptions(ratio_test="textbook")


@pytest.mark.parametrize("rule", ["textbook", "harris"])
@pytest.mark.parametrize("name,M,q,z_exp,w_exp,piv", TEXTBOOK, ids=[t[0] for t in TEXTBOOK])
def test_textbook_instances(name, M, q, z_exp, w_exp, piv, rule):
    r = lemke(M, q, options=LemkeOptions(ratio_test=rule))
    assert r.status == LemkeStatus.SOLVED
    assert_lcp_solution(M, q, r.z)
    if z_exp is not None:
        # unique solutions given as exact rationals; one dense solve is accurate to ~1e-13 here
        np.testing.assert_allclose(r.z, z_exp, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(r.w, w_exp, rtol=1e-12, atol=1e-12)
    if rule == "textbook":
        # published pivot counts (z0 preferred, lexicographic ties, the first z0 pivot counted); the
        # Harris rule may take another path, only its answer is asserted
        assert r.pivots == piv


def test_non_unique_families_are_members():
    # T11: any z ≥ 0 with z1 + z2 = 1; T17: z = (1, t, t + 1e-4), t ≥ 0
    z = lemke([[1, 1], [1, 1]], [-1, -1]).z
    assert z.sum() == pytest.approx(1.0, abs=1e-14)
    z = lemke([[0, -1, 1], [1, 0, 0], [-1, 0, 0]], [-1e-4, -1, 1]).z
    assert z[0] == pytest.approx(1.0, abs=1e-14) and z[2] - z[1] == pytest.approx(1e-4, abs=1e-15)


@pytest.mark.parametrize("rule", ["textbook", "harris"])
@pytest.mark.parametrize("n", range(1, 11))
def test_murty_exponential_pivot_count(n, rule):
    # T13: nondegenerate, so the count 2^n (first z0 pivot included) does not depend on tie rules; z0
    # stays O(2^n) until its last pivot, so the Harris rule's early exit cannot shorten the path either
    M, q = murty(n)
    r = lemke(M, q, max_pivots=2**n + 5, options=LemkeOptions(ratio_test=rule))
    assert r.status == LemkeStatus.SOLVED
    assert r.pivots == 2**n
    expected = np.zeros(n)
    expected[-1] = 2.0**n
    np.testing.assert_array_equal(r.z, expected)
    np.testing.assert_array_equal(r.w, [2.0**i for i in range(1, n)] + [0.0])


def test_murty_hits_pivot_limit_and_says_so():
    M, q = murty(8)
    r = lemke(M, q, max_pivots=100, options=TEXTBOOK_RULE)
    assert r.status == LemkeStatus.PIVOT_LIMIT and r.pivots == 100


@pytest.mark.parametrize("n", [3, 6, 8, 10])
def test_fathi_spd_lexicographic_pivots(n):
    # T15: SPD, unique z = e1; under the textbook rule (lexicographic ties everywhere) 2^n pivots. The
    # count is sensitive to rounding noise in B⁻¹ at the tie decisions (n = 8 gave 252 before lemke
    # rebuilt the tableau ahead of lexicographic decisions), so it checks that mechanism.
    L = np.tril(np.full((n, n), 2.0), -1) + np.eye(n)
    r = lemke(L @ L.T, -np.ones(n), max_pivots=2**n + 1, options=TEXTBOOK_RULE)  # default cap < 2^10
    assert r.status == LemkeStatus.SOLVED and r.pivots == 2**n
    np.testing.assert_allclose(r.z, np.eye(n)[0], atol=1e-12)
    # the Harris rule (default) finds the same unique solution
    h = lemke(L @ L.T, -np.ones(n), max_pivots=2**n + 1)
    assert h.solved
    np.testing.assert_allclose(h.z, np.eye(n)[0], atol=1e-12)


RAYS = [
    ("R1 lemkelcp", [[2, -1], [0, -2]], [-1, -2], None),
    ("R2 skew infeasible", [[0, 1], [-1, 0]], [-1, -1], None),
    ("R3 Murty 2.9", [[-1, 0, -3], [1, -2, -5], [-2, -1, -2]], [-3, -2, -1], None),
    ("R4 Kostreva 2", [[1, -1, 3], [2, -1, 3], [-1, -2, 0]], [-1, -1, -1], None),
    ("R5 Pang perturbed", [[0, -1, -1], [1, 0, 0], [-1, 0, 0]], [-1e-4, -1, 1], None),
    ("R6 Murty 2.11 d=(5,16)", [[-1.5, 2], [-4, 4]], [-5, 17], [5, 16]),
    ("R7 bimatrix game", [[0, 0, 10, 20], [0, 0, 30, 15], [10, 20, 0, 0], [30, 15, 0, 0]], [-1] * 4, None),
]


@pytest.mark.parametrize("name,M,q,d", RAYS, ids=[r[0] for r in RAYS])
def test_ray_cases(name, M, q, d):
    r = lemke(M, q, d=d)
    assert r.status == LemkeStatus.SECONDARY_RAY
    assert not r.solved
    assert np.any(r.ray != 0)


def test_ray_direction_is_a_recession_direction():
    # R2 (skew, monotone): the ray proves infeasibility; along the ray z grows without bound
    r = lemke([[0, 1], [-1, 0]], [-1, -1])
    assert r.ray.min() >= 0 and r.ray.max() > 0


def test_covering_vector_changes_outcome_murty_2_11():
    M, q = [[-1.5, 2], [-4, 4]], [-5, 17]
    r = lemke(M, q)  # d = e solves it
    assert r.solved
    np.testing.assert_allclose(r.z, [27, 22.75], rtol=1e-13)


def test_kostreva_first_index_cycler_solves_with_user_d():
    # Kostreva Ex. 1 cycles under a tie-blind rule; any d > 0 must still solve a P-matrix LCP
    r = lemke([[1, 2, 0], [0, 1, 2], [2, 0, 1]], [-1, -1, -1], d=[1.0, 2.0, 3.0])
    assert r.solved
    np.testing.assert_allclose(r.z, [1 / 3] * 3, rtol=1e-13)


# --------------------------------------------------------------------------------------------
# Siconos test data (third-party, vendored in data/siconos with its license)
# --------------------------------------------------------------------------------------------


def read_siconos(path):
    tokens = []
    for line in Path(path).read_text().splitlines():
        if line.strip().startswith("#"):
            break
        tokens += line.split()
    n = int(tokens[0])
    assert int(tokens[1]) == 0  # dense storage
    vals = np.array(tokens[6:6 + n * n + n], float)
    M = vals[: n * n].reshape(n, n, order="F")
    return M, vals[n * n:]


SICONOS_SOLVED = ["lcp_deudeu", "lcp_trivial", "lcp_ortiz", "lcp_CPS_1", "lcp_CPS_2", "lcp_CPS_4",
                  "lcp_CPS_4bis", "lcp_CPS_5", "lcp_exp_murty", "lcp_exp_murty2", "lcp_Pang_isolated_sol",
                  "lcp_inf_sol_perturbed", "lcp_mmc", "lcp_tobenna", "lcp_enum_fails"]
SICONOS_RAY = ["lcp_CPS_3", "lcp_Pang_isolated_sol_perturbed"]


@pytest.mark.parametrize("rule", ["textbook", "harris"])
@pytest.mark.parametrize("name", SICONOS_SOLVED + SICONOS_RAY)
def test_siconos_files(name, rule):
    M, q = read_siconos(SICONOS / f"{name}.dat")
    r = lemke(M, q, options=LemkeOptions(ratio_test=rule))
    if name in SICONOS_RAY:
        assert r.status == LemkeStatus.SECONDARY_RAY
    else:
        assert r.status == LemkeStatus.SOLVED, r.status
        assert_lcp_solution(M, q, r.z)
    if name == "lcp_exp_murty2":
        assert r.pivots == 64


# --------------------------------------------------------------------------------------------
# random families (property tests): each class has a theorem that Lemke must solve it
# --------------------------------------------------------------------------------------------

# 300 instances per family, reproducible: derandomize=True makes hypothesis derive its examples
# from the test itself (no random seed, no example database), so every run checks the same
# instances; the numpy generator is seeded from the drawn integer. Each instance is a few
# microseconds of Lemke plus hypothesis' overhead: a family takes ~1 s.
PROPERTY = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


def random_p_matrix(rng, n):
    """P-matrix: D + S with D positive diagonal dominating a random nonsymmetric S (row diagonally
    dominant with positive diagonal ⇒ P)."""
    S = rng.normal(size=(n, n))
    np.fill_diagonal(S, 0.0)
    return S + np.diag(np.abs(S).sum(axis=1) + rng.uniform(0.1, 2.0, n))


def random_pd(rng, n):
    """Positive definite, nonsymmetric: AAᵀ + εI plus a skew part (xᵀMx = ‖Aᵀx‖² + ε‖x‖²)."""
    A = rng.normal(size=(n, n))
    K = rng.normal(size=(n, n))
    return A @ A.T + 0.1 * np.eye(n) + (K - K.T)


def random_psd_singular(rng, n):
    """PSD (monotone), singular, integer data, plus a skew part: copositive-plus."""
    A = rng.integers(-2, 3, size=(n, max(1, n // 2)))
    K = rng.integers(-2, 3, size=(n, n))
    return (A @ A.T + (K - K.T)).astype(float)


def random_copositive_plus(rng, n):
    """Nonnegative matrix with positive diagonal plus PSD: strictly copositive hence copositive-plus."""
    N = rng.integers(0, 3, size=(n, n)).astype(float)
    np.fill_diagonal(N, rng.integers(1, 3, size=n))
    return N + random_psd_singular(rng, n)


def random_copositive_plus_not_strict(rng, n):
    """Copositive-plus, not strictly copositive, in general neither PSD nor P.

    M = AAᵀ + (K − Kᵀ) + N with N ≥ 0. A sum of copositive-plus matrices is copositive-plus
    (zᵀMz = 0 on z ≥ 0 forces zᵀ(AAᵀ)z = zᵀNz = 0, hence (M + Mᵀ)z = 0 termwise), and a nonnegative N
    is copositive-plus iff each zero diagonal entry has a zero row and column (zᵀNz = 0 ⇒ N_SS = 0 on
    S = supp z). So N gets zero row/column 0 and 1 and a positive diagonal elsewhere; A's rows 0 and 1
    are opposite, so z̄ = e₀ + e₁ ≥ 0 has Aᵀz̄ = 0 and z̄ᵀMz̄ = 0: not strictly copositive. N is
    nonsymmetric, so the symmetric part of M is usually indefinite (not PSD).
    """
    n = max(n, 2)
    A = rng.integers(-2, 3, size=(n, max(1, n // 2))).astype(float)
    A[1] = -A[0]
    K = rng.integers(-2, 3, size=(n, n)).astype(float)
    N = rng.integers(0, 4, size=(n, n)).astype(float) * (rng.random((n, n)) < 0.5)
    np.fill_diagonal(N, rng.integers(1, 3, size=n))
    N[:2, :] = 0.0
    N[:, :2] = 0.0
    return A @ A.T + (K - K.T) + N


def feasible_q(rng, M):
    """q = w̄ − M z̄ from a complementary pair with many zeros (degenerate on purpose): feasible."""
    n = M.shape[0]
    z = rng.integers(0, 3, size=n).astype(float) * (rng.random(n) < 0.5)
    w = rng.integers(0, 3, size=n).astype(float) * (z == 0) * (rng.random(n) < 0.5)
    return w - M @ z


def assert_family_solved(seed, n, make_M, make_q):
    """Lemke solves LCP(M, q) for M = make_M(rng, n), q = make_q(rng, M) drawn from one seed (a family of
    matrices for which Lemke's method provably ends with a solution when q is as drawn)."""
    rng = np.random.default_rng(seed)
    M = make_M(rng, n)
    q = make_q(rng, M)
    r = lemke(M, q)
    assert r.solved
    assert_lcp_solution(M, q, r.z)


@PROPERTY
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 12))
def test_random_p_matrices_always_solved(seed, n):
    assert_family_solved(seed, n, random_p_matrix,
                         lambda rng, M: rng.normal(size=n) * 10.0 ** rng.integers(-3, 4))


@PROPERTY
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 12))
def test_random_positive_definite_always_solved(seed, n):
    assert_family_solved(seed, n, random_pd, lambda rng, M: rng.normal(size=n))


@PROPERTY
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 12))
def test_random_psd_feasible_solved(seed, n):
    # copositive-plus and feasible ⇒ Lemke (lexicographic) ends with a solution
    assert_family_solved(seed, n, random_psd_singular, feasible_q)


@PROPERTY
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 12))
def test_random_copositive_plus_feasible_solved(seed, n):
    assert_family_solved(seed, n, random_copositive_plus, lambda rng, M: (
        feasible_q(rng, M) if rng.random() < 0.5 else -rng.integers(0, 3, size=n).astype(float)))


@PROPERTY
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 12))
def test_random_copositive_plus_not_strictly_feasible_solved(seed, n):
    # copositive-plus (not strictly, not PSD in general) and feasible ⇒ Lemke ends with a solution
    rng = np.random.default_rng(seed)
    M = random_copositive_plus_not_strict(rng, n)
    zbar = np.zeros(n)
    zbar[:2] = 1.0
    assert zbar @ M @ zbar == 0.0  # not strictly copositive (exact: integer data)
    q = feasible_q(rng, M)
    r = lemke(M, q)
    assert r.solved
    assert_lcp_solution(M, q, r.z)


def test_not_strict_family_is_copositive_plus_and_often_not_psd():
    # the family's claims, checked independently on samples: copositive on random z ≥ 0, the
    # copositive-plus implication on the known zero z̄, and that indefinite symmetric parts (not PSD)
    # are common, so the family adds cases the PSD family does not cover
    rng = np.random.default_rng(0)
    indefinite = 0
    for _ in range(200):
        n = int(rng.integers(3, 10))
        M = random_copositive_plus_not_strict(rng, n)
        Z = rng.random((500, n)) * (rng.random((500, n)) < 0.6)
        assert np.einsum("ki,ij,kj->k", Z, M, Z).min() >= -1e-12
        zbar = np.zeros(n)
        zbar[:2] = 1.0
        np.testing.assert_array_equal((M + M.T) @ zbar, 0.0)
        indefinite += np.linalg.eigvalsh(M + M.T).min() < -1e-9
    assert indefinite >= 50  # 96 of these 200 (seeded) samples


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 8))
def test_psd_rays_are_infeasible(seed, n):
    # For PSD M a ray proves infeasibility: check with an independent LP (HiGHS) that no z ≥ 0 has
    # Mz + q ≥ 0. Random q is often infeasible for singular M, so both branches get exercised.
    from scipy.optimize import linprog

    rng = np.random.default_rng(seed)
    M = random_psd_singular(rng, n)
    q = rng.integers(-3, 4, size=n).astype(float)
    r = lemke(M, q)
    lp = linprog(np.zeros(n), A_ub=-M, b_ub=q, bounds=[(0, None)] * n, method="highs")
    if r.solved:
        assert_lcp_solution(M, q, r.z)
        assert lp.status == 0
    else:
        assert r.status == LemkeStatus.SECONDARY_RAY
        assert lp.status == 2  # infeasible


def test_solution_agrees_with_enumeration_small_p():
    # independent solver: enumerate all 2^n complementary bases (unique solution for P matrices)
    rng = np.random.default_rng(7)
    for _ in range(30):
        n = 5
        M = random_p_matrix(rng, n)
        q = rng.normal(size=n)
        sols = []
        for mask in range(2**n):
            a = [i for i in range(n) if mask >> i & 1]
            z = np.zeros(n)
            if a:
                z[a] = np.linalg.solve(M[np.ix_(a, a)], -q[a])
            if z.min() >= -1e-12 and (M @ z + q).min() >= -1e-12:
                sols.append(z)
        assert len(sols) == 1
        np.testing.assert_allclose(lemke(M, q).z, sols[0], rtol=1e-10, atol=1e-12)


def test_workspace_reuse_gives_identical_results():
    rng = np.random.default_rng(3)
    ws = LemkeWorkspace(2)
    for n in [3, 9, 5, 12, 1]:
        M = random_pd(rng, n)
        q = rng.normal(size=n)
        a = lemke(M, q)
        b = lemke(M, q, workspace=ws)
        np.testing.assert_array_equal(a.z, b.z)
        assert a.pivots == b.pivots
    assert ws.capacity >= 12


def test_refactorization_does_not_change_answers():
    rng = np.random.default_rng(11)
    for _ in range(10):
        M = random_pd(rng, 10)
        q = rng.normal(size=10)
        a = lemke(M, q, options=LemkeOptions(refactor_every=0))
        b = lemke(M, q, options=LemkeOptions(refactor_every=2))
        assert a.solved and b.solved
        # the solution is unique (PD): both paths land on it to round-off
        np.testing.assert_allclose(a.z, b.z, rtol=1e-10, atol=1e-12)


def test_never_returns_wrong_answer_as_solved():
    # a hopelessly scaled problem: whatever the status, SOLVED must mean a checked solution
    rng = np.random.default_rng(5)
    for _ in range(50):
        n = 6
        M = random_pd(rng, n) * 10.0 ** rng.integers(-8, 9, size=(n, 1))
        q = rng.normal(size=n) * 10.0 ** rng.integers(-8, 9, size=n)
        r = lemke(M, q)
        if r.solved:
            assert lcp_residual(M, q, r.z) <= 1e-8 * (np.abs(M).sum(1).max() * r.z.max() + np.abs(q).max())


def _raw_kernel(M, q, harris):
    """Run the numba kernel directly, bypassing lemke()'s input validation (which rejects NaN)."""
    from convexsim.lcp.lemke.tableau import tableau_kernel

    M, q = np.asarray(M, float), np.asarray(q, float)
    n = q.size
    T, LU, perm, perm2, basis, vecs = LemkeWorkspace(n).views(n)
    o = LemkeOptions()
    status, pivots, _, _ = tableau_kernel(M, q, np.ones(n), 100, o.pivot_tol, o.ratio_rel_tol, o.rhs_tol,
                                          o.lex_rel_tol, o.lex_abs_tol, o.check_tol, 50, harris, o.harris_tol,
                                          o.harris_pivot_ratio, T, LU, perm, perm2, basis, vecs)
    return LemkeStatus(int(status)), int(pivots)


@pytest.mark.parametrize("harris", [0, 1])
@pytest.mark.parametrize("row", [0, 1, 2])
@pytest.mark.parametrize("M", [np.eye(3), [[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]])
def test_non_finite_tableau_is_numerical_failure_not_a_ray(row, M, harris):
    # A NaN right-hand side fails every ratio comparison, so its row is never a candidate and the
    # entering column looks ray-like. The ray branch must check every row (it used to check only
    # row 0: NaN in rows 1 and 2 came back as SECONDARY_RAY, a false claim about the LCP).
    q = -np.ones(3)
    q[row] = np.nan
    status, _ = _raw_kernel(M, q, harris)
    assert status == LemkeStatus.NUMERICAL_FAILURE


def test_trivial_q_nonnegative_zero_pivots():
    r = lemke(np.eye(3), [1.0, 0.0, 2.0])
    assert r.solved and r.pivots == 0
    np.testing.assert_array_equal(r.z, 0.0)


# --------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "M,q,d,match",
    [
        (np.ones((2, 3)), np.ones(2), None, "square"),
        (np.ones(3), np.ones(3), None, "square"),
        (np.eye(2), np.ones(3), None, "shape"),
        ([[1.0, np.nan], [0.0, 1.0]], [1.0, 1.0], None, "non-finite"),
        (np.eye(2), [np.inf, 1.0], None, "non-finite"),
        (np.eye(2), [-1.0, 1.0], [1.0, 0.0], "> 0"),
        (np.eye(2), [-1.0, 1.0], [1.0, -2.0], "> 0"),
        (np.eye(2), [-1.0, 1.0], [1.0, np.nan], "> 0"),
        (np.eye(2), [-1.0, 1.0], [1.0], "covering"),
    ],
)
def test_bad_input_raises_clear_errors(M, q, d, match):
    with pytest.raises(ValueError, match=match):
        lemke(M, q, d=d)


def test_bad_ratio_test_name():
    with pytest.raises(ValueError, match="ratio_test"):
        lemke(np.eye(2), [-1.0, -1.0], options=LemkeOptions(ratio_test="harris2"))


def test_bad_max_pivots():
    with pytest.raises(ValueError, match="max_pivots"):
        lemke(np.eye(2), [-1.0, -1.0], max_pivots=0)
