"""The 2D particle (flight, stick, slide+, slide−): what a linear-softmax gate reaches.

Training 40 episodes × 200 steps (seed 501), test 40 held-out episodes (seed 601), 4 experts,
the gate sees (y, ẋ, ẏ, u_x, u_y) (not x: the dynamics do not depend on it).

Every mode is affine in (state, force), and each boundary is a plane, but the four regions are
not a linear-softmax partition: flight | slide± and flight | stick are the same plane λ_n = 0
(zero normal force), while stick | slide± are the planes |ẋ + hu_x/m| = hμλ_n/m, which meet it
at λ_n = 0. Softmax logit differences are affine, so the flight | slide boundary must tilt and
samples with small normal force (u_y near mg, take-off and landing) are misassigned.
Measured on three seed pairs: 97.4 %, 97.9 %, 98.9 %; this seed pair: 98.2 %. Asserted: ≥ 96.5 %.
The seed objective on the same data reaches 47 % (reported in docs/learn.md, not asserted).
"""

import numpy as np
import pytest

from convexsim.learn import metrics as M
from convexsim.learn.data import make_particle_data
from convexsim.learn.moe import fit


@pytest.fixture(scope="module")
def particle():
    train = make_particle_data(episodes=40, steps=200, seed=501)
    test = make_particle_data(episodes=40, steps=200, seed=601)
    model = fit(train.X, train.Y, 4, seed=1, gate_columns=train.gate_columns)
    _, mode, _ = model.predict(train.X)
    mapping, _ = M.match_modes(mode, train.modes, 4, 4)
    return train, test, model, mapping


def test_four_mode_accuracy(particle):
    """Mode accuracy on held-out data ≥ 96.5 % (measured 98.2 %; limit above); all modes matched."""
    _, test, model, mapping = particle
    acc, _ = M.mode_accuracy(model, test, mapping)
    assert sorted(mapping.tolist()) == [0, 1, 2, 3]
    assert 0.965 <= acc < 1.0, acc


def test_flight_expert_is_free_fall(particle):
    """The flight expert is the exact free-flight step (1e-6):
    x' = x + hẋ + h²u_x/m, y' = y + hẏ + h²(u_y/m − g), ẋ' = ẋ + hu_x/m, ẏ' = ẏ + h(u_y/m − g).

    (The stick expert is not asserted: in this fit it also absorbs some slide samples of small
    normal force, the gate's structural error above, and its x-row picks up a y-slope of ≈ 0.03.)
    """
    _, _, model, mapping = particle
    h, g = 0.01, 9.81
    params = model.expert_params()
    flight = params[int(np.flatnonzero(mapping == 0)[0])]
    A = np.array([[1, 0, h, 0, h * h, 0], [0, 1, 0, h, 0, h * h], [0, 0, 1, 0, h, 0], [0, 0, 0, 1, 0, h]])
    np.testing.assert_allclose(flight["coef"], A, atol=1e-6)
    np.testing.assert_allclose(flight["intercept"], [0, -h * h * g, 0, -h * g], atol=1e-6)


def test_velocity_prediction_beats_one_affine_model(particle):
    """One-step RMSE of the velocities ≥ 5× below one affine model (measured 6.0× on all outputs)."""
    train, test, model, _ = particle
    y_hat, _, _ = model.predict(test.X)
    from convexsim.learn.moe import fit_affine

    base = fit_affine(train.X, train.Y)(test.X)
    rm = np.sqrt(np.mean((y_hat[:, 2:] - test.Y[:, 2:]) ** 2))
    rb = np.sqrt(np.mean((base[:, 2:] - test.Y[:, 2:]) ** 2))
    assert rb >= 5 * rm, (rb, rm)
