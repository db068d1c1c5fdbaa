"""Slip curvature κ (SapParameters.slip_curvature, docs/sap.md "Slip curvature"): a modified Newton matrix.

Checked: the modified blocks are symmetric PSD, differ from the exact −∂γ/∂vc only by a PSD rank-one term
along the slip direction that vanishes as the slip grows and for κ = 0; the Newton direction with them is a
descent direction; the optimum is the exact solver's within the stopping tolerance (random problems of all
three contact models and steps of shipped scenes); κ = 0 takes exactly the exact-Hessian iterates.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convexsim.sap import SapParameters, solve
from convexsim.sap.constraints import KIND_LAGGED, KIND_SAP, KIND_SIMILAR, NPAR, constraint_impulse, eval_constraints
from convexsim.sap.linalg import DenseHessian
from convexsim.sap.problem import constraint_kernel_data, delassus_diagonal
from tests.sap.sap_testproblems import assert_same_optimum, random_problem, scene_step_problems

MODELS = ("sap", "lagged", "similar")


def _sap_par(mu, Rt, Rn, vhn):
    p = np.zeros(NPAR)
    p[:6] = (mu, Rt, Rn, 0.0, 0.0, vhn)
    return p


def _hc_par(mu, dt, k, d, fe0, n0, eps_s, v_hat):
    return np.array([mu, dt, k, d, fe0, n0, eps_s, v_hat])


finite = dict(allow_nan=False, allow_infinity=False)


@st.composite
def constraint_cases(draw):
    """(kind, kernel parameters, vc) of one constraint, drawn across all regions."""
    kind = draw(st.sampled_from([KIND_SAP, KIND_LAGGED, KIND_SIMILAR]))
    mu = draw(st.floats(0.05, 1.5, **finite))
    vc = np.array([draw(st.floats(-1.0, 1.0, **finite)) * 10 ** draw(st.floats(-7, 0, **finite)) for _ in range(2)]
                  + [draw(st.floats(-0.5, 0.5, **finite))])
    if kind == KIND_SAP:
        Rt = 10 ** draw(st.floats(-5, -1, **finite))
        Rn = Rt * 10 ** draw(st.floats(0, 5, **finite))
        return kind, _sap_par(mu, Rt, Rn, draw(st.floats(-0.2, 0.2, **finite))), vc
    dt, k, d = 0.01, 10 ** draw(st.floats(3, 6, **finite)), draw(st.floats(0, 20, **finite))
    fe0 = draw(st.floats(0, 50, **finite))
    n0 = dt * fe0
    eps_s = max(1e-4, mu * 1e-3 * n0)
    v_hat = min(fe0 / (dt * k), 1.0 / (d + 1e-20))
    return kind, _hc_par(mu, dt, k, d, fe0, n0, eps_s, v_hat), vc


@settings(max_examples=400, deadline=None)
@given(constraint_cases(), st.sampled_from([0.1, 1.0, 10.0]))
def test_modified_block_is_symmetric_psd_and_exact_plus_psd_rank_one(case, kappa):
    kind, par, vc = case
    _, gamma, G = constraint_impulse(kind, par, vc)
    _, gamma_k, Gk = constraint_impulse(kind, par, vc, kappa)
    np.testing.assert_array_equal(gamma_k, gamma)  # impulses never change
    scale = max(np.abs(Gk).max(), 1e-300)
    assert np.abs(Gk - Gk.T).max() <= 1e-12 * scale
    assert np.linalg.eigvalsh(0.5 * (Gk + Gk.T)).min() >= -1e-9 * scale
    D = Gk - G  # the added term: PSD, rank ≤ 1, tangential only
    assert np.abs(D[2]).max() <= 1e-12 * scale and np.abs(D[:, 2]).max() <= 1e-12 * scale
    ev = np.linalg.eigvalsh(0.5 * (D + D.T))
    assert ev.min() >= -1e-9 * scale
    assert ev[0] <= 1e-9 * scale  # rank one: the smaller tangential eigenvalue is 0


def test_kappa_zero_is_the_exact_block_and_default_argument():
    rng = np.random.default_rng(3)
    for _ in range(200):
        par = _sap_par(rng.uniform(0.1, 1), 1e-4, 1e-2, rng.uniform(-0.1, 0.1))
        vc = rng.normal(scale=1e-2, size=3)
        for kind, p in ((KIND_SAP, par), (KIND_SIMILAR, _hc_par(0.5, 0.01, 1e5, 5.0, 10.0, 0.1, 1e-4, 1e-2))):
            gam, G = np.empty((1, 3)), np.empty((1, 3, 3))
            gam0, G0 = np.empty((1, 3)), np.empty((1, 3, 3))
            kinds = np.array([kind], dtype=np.int64)
            eval_constraints(kinds, p.reshape(1, NPAR), vc.reshape(1, 3), gam, G, True)
            eval_constraints(kinds, p.reshape(1, NPAR), vc.reshape(1, 3), gam0, G0, True, 0.0)
            np.testing.assert_array_equal(G, G0)


def _fd_hessian(kind, par, vc, h=1e-6):
    G = np.empty((3, 3))
    for j in range(3):
        e = np.zeros(3)
        e[j] = h * np.abs(vc).max()
        G[:, j] = -(constraint_impulse(kind, par, vc + e)[1] - constraint_impulse(kind, par, vc - e)[1]) / (2 * e[j])
    return G


def test_modification_vanishes_as_the_slip_grows_and_exact_block_matches_finite_differences():
    """Sliding "sap" contact: the added term is θ (c⊥ − c∥)₊ t̂t̂ᵀ/Rt with θ = min(1, κ μγn/‖yt‖) and
    c⊥ − c∥ = μ f yn/‖yt‖, so it falls at least like 1/slip; at κ = 0 G is −∂γ/∂vc (finite differences)."""
    par = _sap_par(0.5, 1e-4, 1e-3, 1e-3)
    rel = []
    for slip in (1e-4, 1e-3, 1e-2, 1e-1):
        vc = np.array([slip, 0.3 * slip, 0.0])
        G = constraint_impulse(KIND_SAP, par, vc)[2]
        Gk = constraint_impulse(KIND_SAP, par, vc, 1.0)[2]
        np.testing.assert_allclose(G, _fd_hessian(KIND_SAP, par, vc), rtol=1e-4, atol=1e-6 * np.abs(G).max())
        rel.append(np.abs(Gk - G).max() * par[1])  # relative to the stiction block 1/Rt
    assert rel[0] > 1e-3  # active near the stiction boundary
    for a, b in zip(rel[1:], rel[2:]):
        assert b < 0.2 * a  # ×10 slip: ≥ 5× smaller
    # stiction and no contact are unchanged
    for vc in (np.array([1e-9, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])):
        np.testing.assert_array_equal(constraint_impulse(KIND_SAP, par, vc, 1.0)[2], constraint_impulse(KIND_SAP, par, vc)[2])


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("seed", range(4))
def test_modified_newton_direction_is_a_descent_direction(model, seed):
    rng = np.random.default_rng(seed)
    problem = random_problem(rng, 6, model=model)
    kind, cpar, _, _ = constraint_kernel_data(problem, delassus_diagonal(problem))
    A, J = problem.A_dense(), problem.J_dense()
    for _ in range(5):
        v = problem.v_star + rng.normal(scale=0.05, size=problem.nv)
        vc = problem.constraint_velocities(v)
        gamma, G = np.empty((problem.nk, 3)), np.empty((problem.nk, 3, 3))
        eval_constraints(kind, cpar, vc, gamma, G, True, 1.0)
        grad = A @ (v - problem.v_star) - J.T @ gamma.reshape(-1)
        dv, ok = DenseHessian(problem).factor_and_solve(G, -grad)
        assert ok
        assert grad @ dv < 0.0 or np.linalg.norm(grad) == 0.0


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("seed", range(6))
def test_same_optimum_as_the_exact_hessian_random_problems(model, seed):
    rng = np.random.default_rng(100 + seed)
    problem = random_problem(rng, 12, contacts_per_body=3.0, model=model)
    exact = solve(problem, params=SapParameters(slip_curvature=0.0, on_failure="raise"))
    mod = solve(problem, params=SapParameters(slip_curvature=1.0, on_failure="raise"))
    assert_same_optimum(problem, exact, mod)


@pytest.mark.parametrize("model", MODELS)
def test_kappa_zero_iterates_are_those_of_an_immediate_switch(model):
    """slip_curvature_residual = 1e300 switches to the exact Hessian before the first factorization, so every
    iterate must equal the κ = 0 solver's bit for bit (the exact path is untouched by κ)."""
    problem = random_problem(np.random.default_rng(7), 10, model=model)
    a = solve(problem, params=SapParameters(slip_curvature=0.0))
    b = solve(problem, params=SapParameters(slip_curvature=3.0, slip_curvature_residual=1e300))
    assert a.iterations == b.iterations
    np.testing.assert_array_equal(a.v, b.v)
    np.testing.assert_array_equal(a.cost_history, b.cost_history)


def test_parameters_validated():
    for bad in (-1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="slip_curvature"):
            SapParameters(slip_curvature=bad)
    with pytest.raises(ValueError, match="slip_curvature_residual"):
        SapParameters(slip_curvature_residual=-1.0)


@pytest.mark.parametrize("scene, steps, every, contact_model", [
    ("box_stack", 40, 8, None), ("pile_100", 30, 6, None), ("pile_mixed", 12, 4, None), ("sphere_drop", 40, 8, None),
    ("box_slide", 40, 8, None), ("box_slide", 40, 8, "sap"), ("incline_stick", 30, 6, None),
    ("incline_stick", 30, 6, "lagged"), ("incline_slip", 30, 6, None), ("capsule_roll", 30, 6, None),
    ("sphere_pile", 30, 6, None), ("pile_100", 18, 6, "similar")])
def test_same_optimum_as_the_exact_hessian_on_scene_steps(scene, steps, every, contact_model):
    """Steps of the shipped scenes the verification tests run (and the piles), every contact model."""
    for problem, v0 in scene_step_problems(scene, steps, every, contact_model):
        exact = solve(problem, v0, params=SapParameters(slip_curvature=0.0, on_failure="raise"))
        mod = solve(problem, v0, params=SapParameters(slip_curvature=1.0, on_failure="raise"))
        assert mod.converged
        dv = np.abs(exact.v - mod.v).max()
        assert dv <= 1e-5 * max(np.abs(exact.v).max(), 1e-3), (scene, dv)


def test_fewer_newton_iterations_on_a_pile_step():
    """Not a timing: on pile_100 steps where the exact Newton needs many iterations the modified matrix
    needs fewer in total (the reason for the setting), in the Newton loop without the stiction prediction
    (which acts on the damped steps of both matrices: tests/sap/test_stiction_prediction.py)."""
    total = {0.0: 0, 1.0: 0}
    for problem, v0 in scene_step_problems("pile_100", 24, 3):
        for kappa in total:
            r = solve(problem, v0, params=SapParameters(slip_curvature=kappa, stiction_prediction=False,
                                                        on_failure="raise"))
            total[kappa] += r.iterations
    assert total[1.0] < 0.8 * total[0.0], total


def test_scene_setting_reaches_the_solver(monkeypatch):
    from convexsim import sap, stepping
    from convexsim.simulate import prepare

    model, state, _ = prepare("box_stack", overrides=["solver.slip_curvature=0.25"])
    assert model.solver.slip_curvature == 0.25
    seen = []
    original = sap.solve

    def spy(problem, v_guess=None, *, params=None, symbolic_cache=None):
        seen.append(params.slip_curvature)
        return original(problem, v_guess, params=params, symbolic_cache=symbolic_cache)

    monkeypatch.setattr(sap, "solve", spy)
    for _ in range(3):
        state, _ = stepping.step(model, state, path="reference")
    assert seen and set(seen) == {0.25}
    # the compiled step reads the same setting (its flat parameter array)
    from convexsim.sap import newton
    from convexsim.stepping import packing
    assert packing.packed(model).fpar[newton.F_SLIP_CURVATURE] == 0.25
