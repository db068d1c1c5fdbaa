"""``lemke_from_basis`` (Lemke started from a guessed complementary basis, the stepper's warm start) against
the dense cold ``lemke`` on random P-matrix LCPs and on the captured contact LCPs, also under bit-level
perturbations of the inputs (docs/lcp.md §2, "Warm start").

What cannot be tuned: for a P-matrix the LCP has exactly one solution, and a principal pivot transform of a
P-matrix is again a P-matrix, so Lemke on it (which is what the warm start runs) must find that solution
from any guess. For the contact LCPs (not P) every answer is checked on the unperturbed data by Lemke's
final check and by an independent check (test_lcp_regressions), and an empty guess must reproduce the
cold path pivot for pivot.
"""

from __future__ import annotations

import numpy as np
import pytest

from convexsim.lcp.lemke import lemke, lemke_from_basis
from test_lcp_regressions import CASES, independent_check, load_case, passes_final_check, perturbed


def _p_matrix(n, seed):
    """A random P-matrix (positive definite symmetric part, non-symmetric) and q with a mixed sign pattern."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    S = rng.standard_normal((n, n))
    return A @ A.T + 0.5 * n * np.eye(n) + (S - S.T), rng.standard_normal(n)


def _bits(M, q, rng):
    """Each entry × (1 + 1e-16·r), r ~ N(0, 1)."""
    return (M * (1.0 + 1e-16 * rng.standard_normal(M.shape)), q * (1.0 + 1e-16 * rng.standard_normal(q.shape)))


@pytest.mark.parametrize("seed", range(6))
def test_p_matrix_any_guess_gives_the_unique_solution(seed):
    n = 30 + 5 * seed
    M, q = _p_matrix(n, seed)
    ref = lemke(M, q)
    assert ref.solved
    rng = np.random.default_rng(100 + seed)
    right = ref.z > 0
    # the right basis: no pivot at all
    r = lemke_from_basis(M, q, right)
    assert r.solved and r.pivots == 0
    np.testing.assert_allclose(r.z, ref.z, rtol=0, atol=1e-10 * np.abs(ref.z).max())
    scale = np.abs(M).sum(1).max() * np.abs(ref.z).max() + np.abs(q).max()
    for trial in range(20):
        guess = right.copy()
        flip = rng.choice(n, int(rng.integers(1, n)), replace=False)
        guess[flip] = ~guess[flip]
        Mp, qp = _bits(M, q, rng) if trial % 2 else (M, q)
        r = lemke_from_basis(Mp, qp, guess)
        assert r.solved, (trial, r.status.name)
        # unique solution; the perturbation moves it by ~cond·1e-16 relative
        np.testing.assert_allclose(r.z, ref.z, rtol=0, atol=1e-10 * np.abs(ref.z).max())
        np.testing.assert_allclose(Mp @ r.z + qp, r.w, rtol=0, atol=1e-12 * scale)


@pytest.mark.numba_target
@pytest.mark.roundoff
@pytest.mark.parametrize("name", CASES)
def test_empty_guess_is_the_cold_path(name):
    # no z basic: B = I and d = B·1 = 1, the cold start; the same kernel then walks the same path
    M, q, _ = load_case(name)
    cold = lemke(M, q)
    warm = lemke_from_basis(M, q, np.zeros(q.shape[0], bool))
    assert cold.solved and warm.solved and warm.pivots == cold.pivots
    np.testing.assert_array_equal(warm.z, cold.z)


@pytest.mark.roundoff
@pytest.mark.parametrize("kind", ["rel16", "rel15", "q12"])
@pytest.mark.parametrize("name", CASES)
def test_captured_contact_lcps_from_guesses(name, kind):
    # guesses: the unperturbed solution's support (the step-to-step case: previous support, new bits) and
    # that support with 5 indices flipped. Every answer must pass both checks on the unperturbed data;
    # the exact support must be solved every time (measured: 0–2 pivots), flipped guesses nearly always
    # (measured 30/30 at 5 flips; the stepper falls back to cold Lemke otherwise).
    M, q, nw = load_case(name)
    ref = lemke(M, q)
    rng = np.random.default_rng([CASES.index(name), ["rel16", "rel15", "q12"].index(kind), 3])
    exact_solved = flipped_solved = 0
    trials = 20
    for _ in range(trials):
        Mp, qp = perturbed(M, q, nw, kind, rng)
        guess = ref.z > 0
        r = lemke_from_basis(Mp, qp, guess)
        exact_solved += r.solved
        if r.solved:
            assert passes_final_check(M, q, r.z) and independent_check(M, q, r.z)
            assert r.pivots <= 5
        flip = rng.choice(q.shape[0], 5, replace=False)
        guess[flip] = ~guess[flip]
        r = lemke_from_basis(Mp, qp, guess)
        flipped_solved += r.solved
        if r.solved:
            assert passes_final_check(M, q, r.z) and independent_check(M, q, r.z)
    assert exact_solved == trials
    assert flipped_solved >= 0.8 * trials


def test_infeasible_lcp_is_never_solved():
    # z ≥ 0, w = −z − 1 ≥ 0 has no solution
    M = -np.eye(3)
    q = -np.ones(3)
    for guess in ([True] * 3, [False] * 3, [True, False, True]):
        r = lemke_from_basis(M, q, np.array(guess))
        assert not r.solved


def test_dependent_columns_leave_the_basis():
    # two identical constraints (a redundant contact): M_αα singular when both are guessed basic
    M = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 2.0]])
    q = np.array([-1.0, -1.0, -4.0])
    r = lemke_from_basis(M, q, np.array([True, True, True]))
    assert r.solved
    assert r.z[0] + r.z[1] == pytest.approx(1.0, abs=1e-14) and r.z[2] == pytest.approx(2.0, abs=1e-14)
    np.testing.assert_allclose(M @ r.z + q, 0.0, atol=1e-14)


def test_singular_guess_falls_back_to_the_cold_start():
    # M_αα = 0: the only nonsingular reduction of α = {0} is the empty set, i.e. the cold start
    M = np.array([[0.0, 1.0], [-1.0, 2.0]])
    q = np.array([-1.0, 1.0])
    cold = lemke(M, q)
    r = lemke_from_basis(M, q, np.array([True, False]))
    assert r.status == cold.status and r.pivots == cold.pivots
    np.testing.assert_array_equal(r.z, cold.z)
