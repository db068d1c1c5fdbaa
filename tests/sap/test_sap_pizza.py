"""Drake's "pizza saver" (sap-math.md §6.1): a triangle on three point contacts, q = (x, y, z, θ).

Mass m = 3 kg, circumradius R = 1.5 m, I = m R², g = 10 m/s², contacts at angles θ + 2πi/3, φ0 = z, contact
Jacobian rows [1, 0, 0, −p_y; 0, 1, 0, p_x; 0, 0, 1, 0] (p = contact offset in W), v* = v0 + dt A⁻¹ τ with
τ = (fx, 0, −m g, Mz), guess (1, 2, 3, 4) every step, θ0 = π/5. Every case runs with both line searches.
"""

from __future__ import annotations

import numpy as np
import pytest

from convexsim.sap import ContactProblem, SapParameters, SapStatus, solve

M, RADIUS, G = 3.0, 1.5, 10.0
INERTIA = M * RADIUS**2
A = np.diag([M, M, M, INERTIA])
EPS = np.finfo(float).eps


def pizza_problem(q, v0, dt, mu, k, tau_d, beta, fx=0.0, mz=0.0, sigma=1e-3):
    tau = np.array([fx, 0.0, -M * G, mz])
    v_star = v0 + dt * tau / np.diag(A)
    J = np.zeros((9, 4))
    for i in range(3):
        angle = q[3] + 2 * np.pi * i / 3
        px, py = RADIUS * np.cos(angle), RADIUS * np.sin(angle)
        J[3 * i : 3 * i + 3] = [[1, 0, 0, -py], [0, 1, 0, px], [0, 0, 1, 0]]
    return ContactProblem.from_dense(
        A, v_star, J, dt=dt, mu=mu, k=k, tau_d=tau_d, phi0=q[2], beta=beta, sigma=sigma
    )


def simulate(steps, dt, mu, k, tau_d, beta, line_search, fx=0.0, mz=0.0, q0=None, **solver):
    q = np.array([0.0, 0.0, 0.0, np.pi / 5]) if q0 is None else np.array(q0, float)
    v = np.zeros(4)
    params = SapParameters(line_search=line_search, **solver)
    results = []
    for _ in range(steps):
        problem = pizza_problem(q, v, dt, mu, k, tau_d, beta, fx, mz)
        r = solve(problem, np.array([1.0, 2.0, 3.0, 4.0]), params=params)
        results.append((problem, r))
        v = r.v
        q = q + dt * v
    return q, results


LINE_SEARCHES = ["exact", "backtracking"]


@pytest.mark.parametrize("ls", LINE_SEARCHES)
def test_no_applied_torque_rests_with_equal_normal_impulses(ls):
    """Check the triangle comes to rest with j = (0, 0, dt m g, 0) and γ = (0, 0, dt m g/3) per contact."""
    dt = 0.01
    _, results = simulate(30, dt, mu=1.0, k=1e4, tau_d=dt, beta=EPS, line_search=ls)
    problem, r = results[-1]
    assert all(res.converged for _, res in results)
    # After 30 steps (0.3 s) of the near-critically damped, implicitly integrated contact the transient has
    # decayed below 1e-6 of dt g (checked); the equilibrium values are exact (momentum balance).
    np.testing.assert_allclose(r.v, 0.0, atol=1e-6 * dt * G)
    np.testing.assert_allclose(r.j, [0, 0, dt * M * G, 0], rtol=0, atol=1e-5 * dt * M * G)
    np.testing.assert_allclose(r.gamma, np.tile([0, 0, dt * M * G / 3], (3, 1)), rtol=0, atol=1e-5 * dt * M * G)


@pytest.mark.parametrize("ls", LINE_SEARCHES)
def test_exact_guess_converges_in_zero_iterations(ls):
    """Check starting at the static equilibrium z = −m g/(3k) with v = 0 returns the guess with 0 iterations."""
    dt, k = 0.01, 1e4
    q = np.array([0.0, 0.0, -M * G / (3 * k), np.pi / 5])
    problem = pizza_problem(q, np.zeros(4), dt, mu=1.0, k=k, tau_d=dt, beta=EPS)
    guess = np.zeros(4)
    r = solve(problem, guess, params=SapParameters(line_search=ls, max_iterations=0))
    assert r.status == SapStatus.CONVERGED and r.iterations == 0 and r.line_search_evaluations == 0
    np.testing.assert_array_equal(r.v, guess)
    np.testing.assert_allclose(r.gamma[:, 2], dt * M * G / 3, rtol=1e-12)


@pytest.mark.parametrize("ls", LINE_SEARCHES)
@pytest.mark.parametrize("tight", [False, True])
def test_stiction_below_the_transition_torque(ls, tight):
    """Check Mz = 20 < μ m g R = 30 sticks: v ≈ 0, j = dt(0,0,mg,−Mz), |γt| = dt Mz/(3R) ≤ μγn, slip ≤ σμ dt g."""
    dt, mu, mz, sigma = 0.01, 2.0 / 3.0, 20.0, 1e-3
    solver = dict(rel_tolerance=0.0, abs_tolerance=0.0) if tight else {}
    _, results = simulate(40, dt, mu=mu, k=1e4, tau_d=2 * dt, beta=1.0, line_search=ls, mz=mz, **solver)
    problem, r = results[-1]
    assert all(res.converged for _, res in results)
    if tight:  # ε_a = ε_r = 0: only the cost-stall criterion can stop the solver
        assert all(res.cost_criterion_reached for _, res in results)
    else:
        assert all(res.optimality_reached for _, res in results)
    # Translations vanish by symmetry (1e-10); the spin is the regularized-friction creep of order σ w γt.
    np.testing.assert_allclose(r.v[:3], 0.0, atol=1e-10)
    # Momentum balance at steady state: j = −dt τ; 1e-6 relative = the solver's ε_r plus the decayed transient.
    np.testing.assert_allclose(r.j, dt * np.array([0, 0, M * G, -mz]), rtol=0, atol=1e-6 * dt * M * G)
    gt = np.hypot(r.gamma[:, 0], r.gamma[:, 1])
    np.testing.assert_allclose(r.gamma[:, 2], r.j[2] / 3, rtol=1e-9)
    np.testing.assert_allclose(gt, dt * mz / (3 * RADIUS), rtol=1e-6)
    assert np.all(gt <= mu * r.gamma[:, 2])
    slip = np.hypot(r.vc[:, 0], r.vc[:, 1])
    assert np.all(slip <= sigma * mu * dt * G)  # paper Eq. 31: |vt| ≤ σ w μ γn ≈ σ μ dt g
    assert np.all(slip > 0)  # regularized friction always creeps a little: the bound above is not vacuous


@pytest.mark.parametrize("ls", LINE_SEARCHES)
def test_no_friction_slides_freely(ls):
    """Check with μ = 0 a horizontal force fx = 1 N gives vx = n dt fx/m after n = 30 steps."""
    dt, fx = 0.01, 1.0
    _, results = simulate(30, dt, mu=0.0, k=1e4, tau_d=dt, beta=EPS, line_search=ls, fx=fx)
    problem, r = results[-1]
    # Nothing resists x-motion: vx is exact up to the solver tolerance (relative 1e-6 of the momentum scale).
    assert r.v[0] == pytest.approx(30 * dt * fx / M, rel=1e-6)
    np.testing.assert_allclose(r.gamma[:, :2], 0.0, atol=1e-14)
    np.testing.assert_allclose(r.j[2], dt * M * G, rtol=1e-5)


@pytest.mark.parametrize("ls", LINE_SEARCHES)
def test_sliding_above_the_transition_torque(ls):
    """Check Mz = 40 > 30 makes the triangle spin up with |γt| = μ γn at every contact."""
    dt, mu = 0.01, 2.0 / 3.0
    _, results = simulate(40, dt, mu=mu, k=1e4, tau_d=2 * dt, beta=1.0, line_search=ls, mz=40.0)
    problem, r = results[-1]
    spins = [res.v[3] for _, res in results[-10:]]
    assert spins[-1] > 0 and np.all(np.diff(spins) > 0)  # accelerating rotation
    gt = np.hypot(r.gamma[:, 0], r.gamma[:, 1])
    # Region II gives γt = μ γn t̂ with |t̂| = ‖yt‖/sqrt(‖yt‖² + ε²): equal to μγn up to (ε/‖yt‖)² ≈ 1e-20.
    np.testing.assert_allclose(gt, mu * r.gamma[:, 2], rtol=1e-13)


@pytest.mark.parametrize("ls", LINE_SEARCHES)
def test_one_iteration_is_not_enough_while_sliding(ls):
    """Check max_iterations = 1 on a sliding step reports MAX_ITERATIONS (and warns) instead of a wrong v."""
    from convexsim.sap import SapConvergenceWarning

    dt = 0.01
    problem = pizza_problem(np.array([0, 0, -1e-3, np.pi / 5]), np.zeros(4), dt, 2 / 3, 1e4, 2 * dt, 1.0, mz=40.0)
    with pytest.warns(SapConvergenceWarning, match="MAX_ITERATIONS"):
        r = solve(problem, np.array([1.0, 2.0, 3.0, 4.0]), params=SapParameters(line_search=ls, max_iterations=1))
    assert r.status == SapStatus.MAX_ITERATIONS and not r.converged and r.iterations == 1


@pytest.mark.parametrize("ls", LINE_SEARCHES)
def test_near_rigid_stiction_needs_the_near_rigid_clamp(ls):
    """Check k = 1e20 converges with β = 1 (and sticks) but not with β = ε (condition number ~1e20)."""
    dt, mu, mz = 0.01, 2.0 / 3.0, 20.0
    with pytest.warns(Warning):
        _, bad = simulate(3, dt, mu=mu, k=1e20, tau_d=2 * dt, beta=EPS, line_search=ls, mz=mz, max_iterations=50)
    assert not all(res.converged for _, res in bad)
    _, results = simulate(40, dt, mu=mu, k=1e20, tau_d=2 * dt, beta=1.0, line_search=ls, mz=mz)
    assert all(res.converged for _, res in results)
    r = results[-1][1]
    np.testing.assert_allclose(r.v[:3], 0.0, atol=1e-9)
    np.testing.assert_allclose(r.j, dt * np.array([0, 0, M * G, -mz]), rtol=0, atol=1e-6 * dt * M * G)


def test_cost_is_monotone_along_the_iterations():
    """Check ℓ never increases between Newton iterations (both line searches) on hard sliding steps."""
    for ls in LINE_SEARCHES:
        _, results = simulate(10, 0.01, mu=2 / 3, k=1e4, tau_d=0.02, beta=1.0, line_search=ls, mz=40.0)
        for _, r in results:
            c = r.cost_history
            slop = 1000 * EPS * np.maximum(1.0, np.abs(c[1:]))  # Drake's relative_slop
            assert np.all(c[1:] <= c[:-1] + slop)
            assert r.iterations >= 1
