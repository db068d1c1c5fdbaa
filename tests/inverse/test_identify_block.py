"""A synthetic block on three support points recovers its own μ (the analogue of Berard & Trinkle's sliding
block, whose data are not published).

Derived bound. The block slides with its three feet on the ground, so its COM x obeys the stepper's
semi-implicit Euler with constant acceleration a = g_x − μ g (the normal forces sum to m g and the
polyhedral cone has a direction along x, so friction is exactly μ m g):

    x_l = x_0 + l·dt·v_0 + dt²·a·l(l+1)/2.

With uniform noise on [−ε, ε] (variance ε²/3) least squares on (x_0, v_0, a) gives
Var(â) = (ε²/3)[(XᵀX)⁻¹]_aa, X = [1, l·dt, dt² l(l+1)/2], hence σ_μ = sqrt(Var â)/g (1.15e-3 at ε = 1 mm,
26 frames). The MPEC also sees y, z and the contact forces, which carry no further information on μ, so
its σ must agree with the derived one, and |μ̂ − μ| ≤ 5σ_μ fails by chance with probability 6e-7.
Noise seed 21 was not used while developing the estimator.
"""

import numpy as np
import pytest
from inverse_scenes import tripod_block

from convexsim.identify import identify
from convexsim.simulate import simulate

MU, EPS, G, GX = 0.3, 1e-3, 9.81, 5.0


def derived_sigma(frames: int, dt: float, eps: float) -> float:
    l = np.arange(frames)
    X = np.column_stack([np.ones(frames), l * dt, dt * dt * l * (l + 1) / 2])
    return float(np.sqrt(np.linalg.inv(X.T @ X)[2, 2] * eps ** 2 / 3) / G)


@pytest.mark.slow
def test_tripod_block_recovers_its_own_mu_within_the_derived_bound():
    traj = simulate(tripod_block(), solver="lcp")
    x = traj.position[:, 1, 0]
    dt = 0.02
    # the forward model is the one the bound assumes: the block slides at a = g_x − μ g on all three feet
    l = np.arange(x.size)
    np.testing.assert_allclose(x, x[0] + l * dt * 1.0 + dt * dt * (GX - MU * G) * l * (l + 1) / 2, atol=1e-9)
    np.testing.assert_allclose(traj.position[:, 1, 2], 0.06, atol=1e-9)
    rng = np.random.default_rng(21)
    traj.position[:, 1, :] += rng.uniform(-EPS, EPS, size=traj.position[:, 1, :].shape)
    res = identify(traj, ("mu",), methods=("mpec",)).results[0]
    est = res.estimates[0]
    assert est.parameter == "mu[felt/floor]"
    sigma = derived_sigma(x.size, dt, EPS)
    assert sigma == pytest.approx(1.15e-3, rel=0.01)
    assert res.violation < 1e-3                          # a feasible point of the MPEC
    assert est.std == pytest.approx(sigma, rel=0.2)      # the fit's Gauss–Newton σ is the derived one
    assert abs(est.value - MU) <= 5 * sigma
