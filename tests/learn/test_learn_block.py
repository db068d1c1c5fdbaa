"""Acceptance of the learner on the sliding block: the six criteria of docs/learn.md.

Training data: 18 episodes × 1000 steps simulated with Lemke on the block's friction LCP (seed 101).
Test data: 30 held-out episodes from the closed-form direct formulation (seed 202), and a
2000-step rollout under a held-out force sequence (seed 303). Δt = 0.01 s, μ = 0.3, m = 1 kg,
u uniform on [−6, 6] N held for 25 steps (≈ 27 % of samples stick).

Why these sizes: the stick-band edge at rest is pinned only by the distinct forces near ±μg
(one per 25-step hold); with 6 000 training samples the gap between them is ≈ 1.7 % of μg and a
single test hold just beyond the threshold (25 samples) costs ≈ 0.8 % accuracy. 18 000 samples
and 30 000 test samples make the ≥ 99.5 % check about the learner, not about one hold.
"""

import numpy as np
import pytest

from convexsim.learn import metrics as M
from convexsim.learn.data import make_block_data, piecewise_constant
from convexsim.learn.moe import fit

DT, MU, G = 0.01, 0.3, 9.81
THR = DT * MU * G


@pytest.fixture(scope="module")
def block():
    train = make_block_data(episodes=18, steps=1000, seed=101, formulation="lcp")
    test = make_block_data(episodes=30, steps=1000, seed=202, formulation="direct")
    model = fit(train.X, train.Y, 3, seed=7)
    _, mode, _ = model.predict(train.X)
    mapping, _ = M.match_modes(mode, train.modes, 3, 3)
    return train, test, model, mapping


def test_one_step_rmse(block):
    """(1) one-step RMSE ≤ 1e-3·std(y) and ≥ 50× better than one affine model (measured ≈ 1e-5, ≈ 4000×)."""
    train, test, model, _ = block
    rmse = M.one_step_rmse(model, test)
    assert rmse <= 1e-3 * test.Y.std()
    assert M.baseline_rmse(train, test) >= 50 * rmse


def test_mode_accuracy(block):
    """(2) argmax-gate mode = true mode on ≥ 99.5 % of held-out samples (map chosen on training data)."""
    _, test, model, mapping = block
    acc, _ = M.mode_accuracy(model, test, mapping)
    assert sorted(mapping.tolist()) == [0, 1, 2]
    assert acc >= 0.995, acc


def test_friction_from_the_slide_experts(block):
    """(3) μ̂ = (c₋ − c₊)/(2Δtg) within 0.5 % of μ; slide slopes within 1e-3 of (1, Δt); stick expert ≈ 0."""
    _, _, model, mapping = block
    phys = M.block_physics(model, mapping, DT, G)
    assert abs(phys["mu_hat"] - MU) / MU <= 5e-3
    for s in ("slide+", "slide-"):
        np.testing.assert_allclose(phys[f"{s}_slopes"], [1.0, DT], rtol=0, atol=1e-3)
    assert phys["slide+_intercept"] < 0 < phys["slide-_intercept"]
    np.testing.assert_allclose(phys["stick_slopes"], 0.0, atol=1e-6)


def test_gate_band_edges(block):
    """(4) the gate's stick-band edges within 5 % of ∓Δtμg where the state plane's axes cross them.

    At rest (v = 0: the break-away force) and without force (u = 0: the stopping speed), in units
    of a = v + Δt u. Over the whole force range the edges tilt a little more (measured ≤ 3 %; far from
    v = 0 only the few stopping steps constrain them); that figure is checked at 10 %.
    """
    _, _, model, mapping = block
    axes = M.block_axis_edges(model, mapping, DT)
    for name, (lo, hi) in axes.items():
        assert lo == pytest.approx(-THR, rel=0.05), name
        assert hi == pytest.approx(THR, rel=0.05), name
    edges = M.block_band_edges(model, mapping, np.linspace(-6, 6, 49), DT)
    np.testing.assert_allclose(edges, np.tile([-THR, THR], (49, 1)), rtol=0.10)


def test_rollout_2000_steps(block):
    """(5) closed loop over 2000 steps: ≥ 95 % of true-stick steps |v̂| < 1e-3 m/s, RMS ≤ 1e-2 m/s."""
    _, _, model, _ = block
    U = piecewise_constant(np.random.default_rng(303), 2000, 25, -6.0, 6.0)[:, 0]
    r = M.block_rollout_metrics(model, U, DT, MU, G)
    assert (r["modes"] == 0).sum() > 200  # the check is not vacuous
    assert r["stick_hit"] >= 0.95
    assert r["rms"] <= 1e-2


def test_same_seed_same_numbers(block):
    """(6) refitting with the same seed gives bit-identical parameters and predictions."""
    train, test, model, _ = block
    again = fit(train.X, train.Y, 3, seed=7)
    for p, q in zip(model.expert_params(), again.expert_params()):
        np.testing.assert_array_equal(p["coef"], q["coef"])
        np.testing.assert_array_equal(p["intercept"], q["intercept"])
    np.testing.assert_array_equal(model.gate_params()["W"], again.gate_params()["W"])
    np.testing.assert_array_equal(model.predict(test.X)[0], again.predict(test.X)[0])


def test_seed_objective_is_worse(block):
    """The seed's gate-weighted objective, same data and settings, specializes worse than EM.

    Measured: RMSE/std 3.7e-3 (EM 9e-6), accuracy 98.1 % (EM 99.98 %), band edges up to 92 % off at
    u = 0. Its experts still find the slide lines (μ̂ within 0.01 %), so the weakness is the gate.
    """
    train, test, model, mapping = block
    seed_model = fit(train.X, train.Y, 3, seed=7, objective="seed")
    em_rmse, seed_rmse = M.one_step_rmse(model, test), M.one_step_rmse(seed_model, test)
    em_acc, _ = M.mode_accuracy(model, test, mapping)
    _, mode, _ = seed_model.predict(train.X)
    seed_map, _ = M.match_modes(mode, train.modes, 3, 3)
    seed_acc, _ = M.mode_accuracy(seed_model, test, seed_map)
    assert seed_rmse > 10 * em_rmse
    assert seed_acc < em_acc
    assert seed_acc > 0.9  # still a mixture that found the three modes
