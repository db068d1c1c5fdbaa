"""Joint-constraint rows (limits, couplers, implicit PD): γ = −∂ℓ/∂vc and G = −∂γ/∂vc by central
differences in every region, the published formulas (SAP paper; Drake's SapLimitConstraint,
SapCouplerConstraint, SapPdControllerConstraint and its gain limiting), and the reference clique solve."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.optimize

from one_tree_step import SOLVE_PARAMETERS
from convexsim.sap.solver import solve_rows
from convexsim.sap.joint_constraints import (
    BETA_JOINT,
    LIMIT_STIFFNESS,
    coupler_row,
    delassus_row,
    holonomic_row,
    limit_in_window,
    limit_rows,
    near_rigid_regularization,
    pd_effective_gains,
    pd_row,
    row_impulse,
)

DT = 1e-3
W = 2.5  # Delassus estimate [1/kg]


def solve_clique(A, v_star, J, par, v_guess):
    """The one SAP Newton loop (numpy reference) on one clique with scalar rows; gamma (nr,)."""
    r = solve_rows(A, v_star, Jr=J, par=par, v_guess=v_guess, params=SOLVE_PARAMETERS)
    return SimpleNamespace(v=r.v, gamma=r.gamma[:, 0], iterations=r.iterations, converged=r.converged)


def assert_fd_consistent(par, vc, h):
    """Central differences with step h: exact up to round-off inside a quadratic or linear piece (the
    samples are 10·h from the nearest piece boundary), round-off O(ε |vc|/h) <= 1e-8; 1e-6 relative."""
    ell, g, G = row_impulse(par, vc)
    lp, gp, _ = row_impulse(par, vc + h)
    lm, gm, _ = row_impulse(par, vc - h)
    assert -(lp - lm) / (2 * h) == pytest.approx(g, rel=1e-6, abs=1e-6 * abs(ell) / h + 1e-300)
    assert -(gp - gm) / (2 * h) == pytest.approx(G, rel=1e-6, abs=1e-300)
    assert G >= 0.0


def row_samples(par):
    """(vc samples in each region, FD step): y = (v̂ − vc)/R below the box, inside, above it, at distance
    Δ = ½·max(1e-3, |v̂|/R, |finite bounds|) (or half the box) from every boundary."""
    R, v_hat, lo, hi = par
    finite = [abs(b) for b in (lo, hi) if math.isfinite(b)]
    delta = 0.5 * max([1e-3, abs(v_hat) / R] + finite)
    ys = {}
    if math.isfinite(hi):
        ys["y above the box"] = hi + delta
    if math.isfinite(lo):
        ys["y below the box"] = lo - delta
    if math.isfinite(lo) and math.isfinite(hi):
        ys["inside"] = 0.5 * (lo + hi)
        delta = min(delta, 0.5 * (hi - lo))
    elif math.isfinite(lo):
        ys["inside"] = lo + delta
    elif math.isfinite(hi):
        ys["inside"] = hi - delta
    else:
        ys["inside"] = 0.3 * delta
    samples = {k: v_hat - R * y for k, y in ys.items()}
    return samples, 0.1 * R * delta


ROWS = {
    "limit near-rigid, violated": limit_rows(DT, -0.01, 0.0, 0.5, W)[0][1],
    "limit near-rigid, inside": limit_rows(DT, 0.2, 0.0, 0.5, W)[1][1],
    "limit soft": limit_rows(DT, 0.02, 0.0, 0.5, W, k=50.0, tau=0.05)[0][1],
    "coupler": coupler_row(DT, 0.3, 0.1, 2.0, 0.05, W),
    "pd soft": pd_row(DT, 0.1, 0.4, 0.0, 0.3, kp=100.0, kd=5.0, effort=4.0, w=W),
    "pd no effort limit": pd_row(DT, 0.1, 0.4, 0.2, 0.0, kp=100.0, kd=5.0, effort=math.inf, w=W),
    "pd gain-limited": pd_row(DT, 0.1, 0.4, 0.0, 0.0, kp=1e9, kd=1e6, effort=50.0, w=W),
    "holonomic box": holonomic_row(DT, 0.02, W, k=1e4, tau=0.01, lo=-0.3, hi=0.5),
}


@pytest.mark.parametrize("name", ROWS)
def test_impulse_and_hessian_are_derivatives_of_the_cost_in_every_region(name):
    par = ROWS[name]
    samples, h = row_samples(par)
    for vc in samples.values():
        assert_fd_consistent(par, vc, h)
    # the regions are the ones named: G = 1/R inside, 0 where the box is active
    assert row_impulse(par, samples["inside"])[2] == pytest.approx(1.0 / par[0])
    for key in ("y above the box", "y below the box"):
        if key in samples:
            assert row_impulse(par, samples[key])[2] == 0.0


@pytest.mark.parametrize("name", [n for n in ROWS if math.isfinite(ROWS[n][3]) or math.isfinite(ROWS[n][2])])
def test_cost_is_continuous_at_the_box_boundary(name):
    """The continuous antiderivative outside the box: across a boundary γ_b, ℓ changes by at most
    2δ·|γ| (Lipschitz), not by the jump ½ R γ_b² that dropping the constant would leave (Drake's form)."""
    R, v_hat, lo, hi = ROWS[name]
    for bound in (lo, hi):
        if math.isfinite(bound):
            vc_b = v_hat - R * bound
            d = 1e-12 * max(abs(vc_b), 1.0)
            (lp, gp, _), (lm, gm, _) = row_impulse(ROWS[name], vc_b + d), row_impulse(ROWS[name], vc_b - d)
            step = (vc_b + d) - (vc_b - d)  # the step actually taken (vc_b ± d rounds)
            assert abs(lp - lm) <= step * max(abs(gp), abs(gm)) * (1 + 1e-9) + 1e-15 * abs(lp)
            if bound != 0.0:
                assert 0.5 * R * bound ** 2 > 100 * 2 * d * max(abs(gp), abs(gm))


def test_limit_regularization_and_bias_follow_the_near_rigid_rule():
    """With Drake's defaults (k = 1e12, τ = dt, β = 0.1) a limit is always near-rigid: R = w/(400π²),
    v̂ = −g/(2 dt). A soft limit (k = 50, τ = 0.05) keeps R = 1/(dt (dt + τ) k) and v̂ = −g/(dt + τ)."""
    (s_lo, lo_row), (s_hi, hi_row) = limit_rows(DT, 0.03, -0.1, 0.2, W)
    assert (s_lo, s_hi) == (1.0, -1.0)
    assert lo_row[0] == pytest.approx(W / (400 * math.pi ** 2), rel=1e-15)
    assert lo_row[1] == pytest.approx(-(0.03 + 0.1) / (2 * DT), rel=1e-15)
    assert hi_row[1] == pytest.approx(-(0.2 - 0.03) / (2 * DT), rel=1e-15)
    assert lo_row[2] == 0.0 and lo_row[3] == math.inf
    assert 1.0 / (DT * 2 * DT * LIMIT_STIFFNESS) < lo_row[0]  # the compliant R is below the clamp
    soft = limit_rows(DT, 0.03, -0.1, math.inf, W, k=50.0, tau=0.05)
    assert len(soft) == 1
    assert soft[0][1][0] == pytest.approx(1.0 / (DT * (DT + 0.05) * 50.0), rel=1e-15)
    assert soft[0][1][1] == pytest.approx(-0.13 / (DT + 0.05), rel=1e-15)
    with pytest.raises(ValueError, match="lower .* > upper"):
        limit_rows(DT, 0.0, 1.0, 0.5, W)


def test_limit_window():
    """A side enters only within 2·dt·max(|v0|, |v*|) of q0, or when already violated."""
    assert limit_in_window(DT, 0.0999, 0.1, -1, v0=0.06, v_star=0.0)      # 1e-4 <= 2·1e-3·0.06
    assert not limit_in_window(DT, 0.0999, 0.1, -1, v0=0.04, v_star=0.0)  # 1e-4 >  8e-5
    assert limit_in_window(DT, 0.1001, 0.1, -1, v0=0.0, v_star=0.0)       # beyond the upper limit
    assert limit_in_window(DT, -1e-9, 0.0, +1, v0=0.0, v_star=0.0)        # beyond the lower limit
    assert not limit_in_window(DT, 0.5, -math.inf, +1, 1e9, 1e9)


def test_coupler_row_is_rigid():
    par = coupler_row(DT, 0.3, 0.1, 2.0, 0.05, W)
    g = 0.3 - 2.0 * 0.1 - 0.05
    assert par[0] == pytest.approx(BETA_JOINT ** 2 * W / (4 * math.pi ** 2), rel=1e-15)
    assert par[1] == pytest.approx(-g / (2 * DT), rel=1e-15)
    assert (par[2], par[3]) == (-math.inf, math.inf)
    assert delassus_row([1.0, -2.0], [2.0, 4.0]) == pytest.approx(0.5 + 1.0)


def drake_pd(dt, kp, kd, q0, qd, vd, u_ff, e, v):
    """SapPdControllerConstraint as published: ũ, u = clamp(ũ), γ = dt u, ℓ = dt Φ(ũ)/(dt Kp + Kd),
    G = dt (dt Kp + Kd) [|ũ| <= e], Φ the antiderivative of the clamp."""
    u_t = -kp * (q0 + dt * v - qd) - kd * (v - vd) + u_ff
    phi = 0.5 * u_t ** 2 if abs(u_t) <= e else e * (abs(u_t) - 0.5 * e)
    return dt * phi / (dt * kp + kd), dt * min(max(u_t, -e), e), dt * (dt * kp + kd) * (abs(u_t) <= e)


@pytest.mark.parametrize("kp, kd", [(100.0, 5.0), (0.0, 5.0), (100.0, 0.0), (3e4, 1.0)])
def test_pd_row_equals_the_published_pd_constraint(kp, kd):
    q0, qd, vd, u_ff, e = 0.1, 0.4, 0.2, 0.3, 4.0
    par = pd_row(DT, q0, qd, vd, u_ff, kp, kd, e, W)
    assert pd_effective_gains(DT, kp, kd, W) == (kp, kd)  # these gains are below the near-rigid clamp
    for v in np.linspace(-3.0, 3.0, 41):
        ell, g, G = row_impulse(par, v)
        ell_d, g_d, G_d = drake_pd(DT, kp, kd, q0, qd, vd, u_ff, e, v)
        assert g == pytest.approx(g_d, rel=1e-12, abs=1e-15)
        assert ell == pytest.approx(ell_d, rel=1e-10, abs=1e-15)
        assert G == pytest.approx(G_d, rel=1e-12)


@pytest.mark.parametrize("kp, kd", [(1e9, 1e6), (1e10, 0.0), (0.0, 1e9), (1e7, 1e7)])
def test_pd_gain_limiting_keeps_the_ratio_and_reaches_the_near_rigid_regularization(kp, kd):
    kp2, kd2 = pd_effective_gains(DT, kp, kd, W)
    R_nr = near_rigid_regularization(W)
    assert 1.0 / (DT * (DT * kp2 + kd2)) == pytest.approx(R_nr, rel=1e-12)
    assert kp2 <= kp and kd2 <= kd
    if kp > 0 and kd > 0:
        assert kd2 / kp2 == pytest.approx(kd / kp, rel=1e-12)
    else:
        assert (kp2 == 0) == (kp == 0) and (kd2 == 0) == (kd == 0)
    with pytest.raises(ValueError, match="not both 0"):
        pd_effective_gains(DT, 0.0, 0.0, W)


# ------------------------------------------------------------------------------------ reference solve

S33 = np.array([[4.0, 1, 2], [1, 5, 3], [2, 3, 6]])


def velocity_box(vl, vu, R=1e-3):
    """Drake's SapNewtonIterationTest box: rows v_k >= vl_k (J = +e_k) and v_k <= vu_k (J = −e_k) with
    γ = max(0, −(vc − v̂)/R): our limit rows with v̂ = (vl, −vu) and box [0, ∞)."""
    n = len(vl)
    J = np.vstack([np.eye(n), -np.eye(n)])
    par = np.array([[R, x, 0.0, math.inf] for x in list(vl) + [-u for u in vu]])
    return J, par


def test_reference_solve_mirrors_the_newton_iteration_test():
    """v* inside the box: the solution is v*. Guess v* → 0 iterations; a guess inside the box → exactly one
    Newton iteration; a guess outside → several, ending at v* within a few ε (Drake's test)."""
    vl, vu = (-3.0, -2.0, -1.0), (1.0, 2.0, 3.0)
    J, par = velocity_box(vl, vu)
    v_star = np.array([0.5, -0.5, 1.0])
    r0 = solve_clique(S33, v_star, J, par, v_star)
    assert r0.converged and r0.iterations == 0 and np.array_equal(r0.v, v_star)
    r1 = solve_clique(S33, v_star, J, par, np.array([0.1, 0.2, -0.3]))
    assert r1.converged and r1.iterations == 1
    np.testing.assert_allclose(r1.v, v_star, rtol=0, atol=4 * np.finfo(float).eps)
    r2 = solve_clique(S33, v_star, J, par, np.array([10.0, -20.0, 30.0]))
    assert r2.converged and r2.iterations > 1
    np.testing.assert_allclose(r2.v, v_star, rtol=0, atol=4 * np.finfo(float).eps)


def test_reference_solve_finds_the_minimum_of_mixed_rows():
    """Random SPD A, limit + PD + coupler + boxed rows, solution checked (a) by the momentum balance
    A (v − v*) = Jᵀγ to 1e-10 relative and (b) against scipy's BFGS on the same C¹ convex cost (1e-5)."""
    rng = np.random.default_rng(5)
    for _ in range(5):
        n = 4
        X = rng.normal(size=(n, n))
        A = X @ X.T + n * np.eye(n)
        v_star = rng.normal(size=n)
        rows = [(np.eye(n)[0], limit_rows(DT, -0.001, 0.0, 1.0, 1 / A[0, 0])[0][1]),
                (-np.eye(n)[1], limit_rows(DT, 0.099, -1.0, 0.1, 1 / A[1, 1])[1][1]),
                (np.eye(n)[2], pd_row(DT, 0.1, 0.5, 0.0, 0.0, 2e3, 40.0, 30.0, 1 / A[2, 2])),
                (np.eye(n)[3] - 0.5 * np.eye(n)[0], coupler_row(DT, 0.2, 0.3, 0.5, 0.0, 0.3)),
                (rng.normal(size=n), holonomic_row(DT, 0.01, 1.0, 1e3, 0.01, -0.2, 0.2))]
        J = np.array([r[0] for r in rows])
        par = np.array([r[1] for r in rows])
        res = solve_clique(A, v_star, J, par, np.zeros(n))
        assert res.converged
        lhs = A @ (res.v - v_star)
        np.testing.assert_allclose(lhs, J.T @ res.gamma, rtol=0, atol=1e-10 * max(np.abs(lhs).max(), 1.0))

        def cost(v):
            vals = [row_impulse(p, vc) for p, vc in zip(par, J @ v)]
            return 0.5 * (v - v_star) @ A @ (v - v_star) + sum(x[0] for x in vals), \
                A @ (v - v_star) - J.T @ np.array([x[1] for x in vals])

        ref = scipy.optimize.minimize(cost, np.zeros(n), jac=True, method="BFGS", options={"gtol": 1e-11})
        assert cost(res.v)[0] <= ref.fun + 1e-12 * abs(ref.fun) + 1e-12
        np.testing.assert_allclose(res.v, ref.x, rtol=0, atol=1e-5 * max(np.abs(ref.x).max(), 1.0))


def test_scalar_interpolation_of_targets_is_numpys():
    """The compiled PD targets interpolate without allocating (``interp_scalar``); numpy's np.interp is the
    reference: exactly the same values (the same formula) inside, at and between the samples, before and after
    them, for one sample, a repeated time (an infinite slope) and NaN."""
    from convexsim.sap.joint_constraints import interp_scalar, pd_target

    rng = np.random.default_rng(11)
    times = np.cumsum(rng.uniform(0.05, 0.3, 6))
    values = rng.normal(0.0, 1.0, 6)
    probes = np.concatenate([times, rng.uniform(times[0] - 0.5, times[-1] + 0.5, 200), [times[0] - 1.0, 1e9]])
    for t in probes:
        assert interp_scalar(float(t), times, values) == np.interp(t, times, values)
    one = np.array([0.3])
    assert interp_scalar(-2.0, one, np.array([1.5])) == 1.5 and interp_scalar(7.0, one, np.array([1.5])) == 1.5
    steps = np.array([0.0, 1.0, 1.0, 2.0])          # a jump at t = 1
    jump = np.array([0.0, 1.0, 3.0, 3.0])
    for t in (0.5, 1.0, 1.5, 2.0, 2.5):
        assert interp_scalar(t, steps, jump) == np.interp(t, steps, jump)
    assert math.isnan(interp_scalar(math.nan, times, values))
    q_d, v_d = pd_target(float(times[2] + 0.01), times, values, math.nan)
    assert q_d == np.interp(times[2] + 0.01, times, values)
    assert v_d == pytest.approx((values[3] - values[2]) / (times[3] - times[2]), rel=1e-15)
