"""The worked LCP examples (docs/lcp.md §3) against closed forms derived by hand."""

from __future__ import annotations

import numpy as np
import pytest

from convexsim.lcp import seeds
from convexsim.lcp.seeds import G

# Closed-form comparisons: the LCP solutions come from one dense solve of at most 4×4 systems with
# O(1)..O(1e3) entries, so they match exact arithmetic to ~1e-13 relative; 1e-12 states that.
TOL = 1e-12


@pytest.mark.parametrize("x,xd", [(1.0, 0.0), (0.001, -2.0), (0.5, 3.0), (0.0, 0.0), (1e-5, -0.001)])
@pytest.mark.parametrize("dt", [0.01, 0.001])
def test_falling_block_closed_form(x, xd, dt):
    s = seeds.falling_block_step(x, xd, dt)
    x1 = max(0.0, x + dt * xd - G * dt**2)
    lam = max(0.0, (G * dt**2 - x - dt * xd) / dt**2)
    assert s.values["x"] == pytest.approx(x1, rel=TOL, abs=TOL)
    assert s.values["lambda"] == pytest.approx(lam, rel=TOL, abs=TOL * 1e3)
    assert s.values["xdot"] == pytest.approx((x1 - x) / dt, rel=1e-10, abs=1e-10)


def test_falling_block_worked_examples():
    s = seeds.falling_block_step(0.001, -2.0, 0.01)
    assert (s.values["x"], s.values["lambda"], s.values["xdot"]) == pytest.approx((0.0, 199.81, -0.1), abs=1e-11)
    assert seeds.falling_block_step(1.0, 0.0, 0.01).values["x"] == pytest.approx(0.999019, abs=1e-15)


@pytest.mark.parametrize("xd,u", [(0.0, 1.0), (0.5, 1.0), (0.0, 5.0), (2.0, 0.0), (0.01, 2.9)])
def test_sliding_block_forward_closed_form(xd, u):
    dt, mu = 0.01, 0.3
    s = seeds.sliding_block_forward_step(xd, u, dt, mu)
    v1 = max(0.0, xd + dt * (u - mu * G))
    assert s.values["xdot"] == pytest.approx(v1, abs=TOL)
    # friction never propels (seed Remark 1) and never exceeds μg
    assert -TOL <= s.values["friction"] <= mu * G + TOL


def test_sliding_block_forward_worked_examples():
    f = seeds.sliding_block_forward_step
    assert f(0.0, 1.0, 0.01, 0.3).values["friction"] == pytest.approx(1.0, abs=TOL)
    assert f(0.5, 1.0, 0.01, 0.3).values["xdot"] == pytest.approx(0.48057, abs=TOL)
    s = f(0.0, 5.0, 0.01, 0.3)
    assert (s.values["xdot"], s.values["friction"]) == pytest.approx((0.02057, 2.943), abs=TOL)


def soft_threshold(v, u, dt, mu):
    a = v + dt * u
    return np.sign(a) * max(abs(a) - dt * mu * G, 0.0)


def test_bidirectional_direct_lemma_2_1_over_30000_random_steps():
    # Seed 000 Lemma 2.1: ẋ⁺·ẋ⁻ = 0 at every step. Random piecewise forces in [−8, 8] N (μg = 2.943)
    # drive the block through stick, slide+ and slide−; each step also matches the soft threshold.
    rng = np.random.default_rng(2019)
    dt, mu = 0.01, 0.3
    xp, xm = 0.0, 0.0
    modes = set()
    for k in range(30_000):
        u = rng.uniform(-8.0, 8.0)
        s = seeds.sliding_block_direct_step(xp, xm, u, dt, mu)
        v_expected = soft_threshold(xp - xm, u, dt, mu)
        xp, xm = s.values["xdot_pos"], s.values["xdot_neg"]
        assert xp * xm == 0.0
        assert xp - xm == pytest.approx(v_expected, abs=1e-12)
        modes.add(int(np.sign(xp - xm)))
    assert modes == {-1, 0, 1}


def test_direct_fictitious_slack_force():
    s = seeds.sliding_block_direct_step(0.5, 0.0, -1.0, 0.01, 0.3)
    assert s.values["slack_pos"] == pytest.approx(51.943, abs=1e-11)


def test_traditional_equals_direct_velocities():
    rng = np.random.default_rng(0)
    dt, mu = 0.01, 0.3
    for _ in range(2000):
        v = rng.uniform(-1, 1) * 10.0 ** rng.integers(-3, 1)
        u = rng.uniform(-8, 8)
        st = seeds.sliding_block_traditional_step(v, u, dt, mu)
        sd = seeds.sliding_block_direct_step(max(v, 0.0), max(-v, 0.0), u, dt, mu)
        assert st.values["v"] == pytest.approx(sd.values["v"], abs=1e-12)
        # γ = |v_{k+1}| (unique since μmg > 0)
        assert st.values["gamma"] == pytest.approx(abs(sd.values["v"]), abs=1e-12)


def test_traditional_matrix_is_psd_not_p():
    M, _ = seeds.traditional_lcp(0.0, 0.0, 1.0, 0.3)
    assert np.linalg.eigvalsh(M + M.T).min() >= -1e-15  # PSD
    assert M[2, 2] == 0.0  # a zero principal minor: not P (the seed's guess is false)
    assert np.linalg.det(M[:2, :2]) == 0.0


@pytest.mark.parametrize("a", [0.0, 0.003, -0.005])
@pytest.mark.parametrize("eps", [1e-2, 1e-3])
def test_traditional_creep_eps_half(a, eps):
    # Pfrommer's LCP notes §3.2.1: exact stick becomes creep v = γ = ε/2 with saturated friction
    s = seeds.traditional_creep(a, eps)
    assert s.values["gamma"] == pytest.approx(eps / 2, rel=1e-10)
    assert s.values["lambda_sum"] == pytest.approx(0.3 * G, rel=1e-12)


def berard_trinkle_closed_form(l):
    """Hand-derived BT trajectory (μ=0.2, h=0.05, m=1, g=9.81, x_app=5, q⁰=(0,3), ν⁰=0)."""
    h, g, xa, mu = 0.05, 9.81, 5.0, 0.2
    if l <= 15:  # free flight, semi-implicit Euler: ẋ = h·xa·l, x = h²·xa·l(l+1)/2
        return (h * h * xa * l * (l + 1) / 2, 3.0 - h * h * g * l * (l + 1) / 2, h * xa * l, -h * g * l)
    x15, y15, xd15, yd15 = berard_trinkle_closed_form(15)
    # landing step: y¹⁶ = 0, ẏ¹⁶ = −y¹⁵/h, impulse hλ_n = ẏ¹⁶ − ẏ¹⁵ + gh, sliding friction μλ_n
    yd16 = -y15 / h
    ln16 = (yd16 - yd15) / h + g
    xd16 = xd15 + h * (xa - mu * ln16)
    x16 = x15 + h * xd16
    if l == 16:
        return (x16, 0.0, xd16, yd16)
    ln17 = (0.0 - yd16) / h + g
    xd17 = xd16 + h * (xa - mu * ln17)
    x17 = x16 + h * xd17
    # then sliding with ẍ = xa − μg: ẋˡ = ẋ¹⁷ + h(xa − μg)(l − 17)
    k = l - 17
    acc = xa - mu * g
    xdl = xd17 + h * acc * k
    xl = x17 + h * (k * xd17 + h * acc * k * (k + 1) / 2)
    return (xl, 0.0, xdl, 0.0)


def test_berard_trinkle_trajectory_matches_hand_derivation():
    states, forces = seeds.berard_trinkle_trajectory()
    assert states.shape == (101, 4)
    for l in range(101):
        # 1e-10 absolute (the acceptance tolerance); positions reach 39 m, accumulated round-off ~1e-13
        np.testing.assert_allclose(states[l], berard_trinkle_closed_form(l), rtol=0, atol=1e-10)
    # the published trajectory table (Berard & Trinkle; printed digits, docs/lcp.md §3)
    expect = {15: (1.5, 0.057, 3.75, -7.3575), 16: (1.63292, 0.0, 2.6584, -1.14),
              17: (1.76204, 0.0, 2.5823, 0.0), 50: (10.28363, 0.0, 7.595, 0.0),
              100: (38.95475, 0.0, 15.19, 0.0)}
    for l, row in expect.items():
        np.testing.assert_allclose(states[l], row, atol=5e-6)
    np.testing.assert_allclose(forces[16][:3], (134.16, 26.832, 0.0), atol=1e-9)
    np.testing.assert_allclose(forces[17][:3], (32.61, 6.522, 0.0), atol=1e-9)
    np.testing.assert_allclose(forces[100], (9.81, 1.962, 0.0, 15.19), atol=1e-9)
    # flight step: σ is any value ≥ |ẋ|; Lemke returns exactly ẋ here
    assert forces[15][3] == pytest.approx(3.75, abs=1e-12)


def test_bouncing_particle_restitution_ratio_and_stick():
    hist = seeds.bouncing_particle(steps=600)
    first = next(r for r in hist if "Lambda_N" in r)
    assert first["step"] - 1 == 452  # zero-based index of the first active step (docs/lcp.md §3)
    np.testing.assert_allclose(first["uA"], (1.0, -4.43412), atol=1e-12)
    # Newton restitution exact on a closed contact: −u^E_y/u^A_y = ε_N = 0.5
    assert -first["u"][1] / first["uA"][1] == pytest.approx(0.5, rel=1e-13)
    assert first["u"][0] == pytest.approx(0.0, abs=1e-13)  # stick: |Λ_T| = 1 < μΛ_N
    assert first["Lambda_N"] == pytest.approx(6.66099, abs=1e-12)
    assert first["Lambda_T"] == pytest.approx(-1.0, abs=1e-12)


def test_main_prints_all_examples(capsys):
    assert seeds.main([]) == 0
    out = capsys.readouterr().out
    for key in ("falling block", "forward", "direct vs traditional", "creep", "Berard–Trinkle", "bouncing"):
        assert key in out
    assert "38.954750" in out
