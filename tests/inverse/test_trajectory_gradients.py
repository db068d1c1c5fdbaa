"""Gradients through SAP rollouts (forward tangents and the adjoint) against central finite differences.

The loss is a fixed random linear functional of all positions, L = Σ_l w_l·p_l, so the finite difference
has no truncation error from the loss itself. Steps h = 1e-6 relative; rollouts are solved to a momentum
residual of 1e-12, so the difference quotient is good to ~1e-6 relative: 1e-4 relative is the bound.
The rolling ball makes friction couple translation and rotation (lever arms change with the gap, which
the kinematics difference in ∂g/∂q covers).
"""

import numpy as np
import pytest
from inverse_scenes import rolling_ball

from convexsim.inverse.rollout import Parameter, adjoint, rollout, tangents
from convexsim.simulate import prepare

STEPS = 30


def _loss(ro, W):
    return float(np.sum(W * ro.positions()))


@pytest.mark.parametrize("cm", ["sap", "lagged", "similar"])
def test_adjoint_and_tangents_match_finite_differences(cm):
    model, state, _ = prepare(rolling_ball(cm))
    pair = ("ball", "floor")
    params = [Parameter("mu", pair), Parameter("k", pair), Parameter("tau_d" if cm == "sap" else "d", pair),
              Parameter("sigma"), Parameter("dt")]
    base = dict(zip(params, [0.3, 1e5, 0.01 if cm == "sap" else 5.0, 1e-3, 0.01]))
    ro = rollout(model, state, STEPS, overrides=base, parameters=params, linearize=True)
    assert ro.positions()[:, 0, 2].min() < 0.1            # it lands (the contact acts)
    W = np.random.default_rng(7).normal(size=ro.positions().shape)
    dLdq = np.zeros((STEPS + 1, 6))
    dLdq[:, 3:] = W[:, 0, :]
    grad, lam_q, lam_v = adjoint(ro, dLdq)
    Sq, _ = tangents(ro, initial=True)
    fwd = np.einsum("tn,tnx->x", dLdq, Sq)
    np.testing.assert_allclose(grad, fwd[:len(params)], rtol=1e-9)          # two accumulations, one answer
    np.testing.assert_allclose(lam_q, fwd[len(params):len(params) + 6], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(lam_v, fwd[len(params) + 6:], rtol=1e-9, atol=1e-9)
    for j, p in enumerate(params):
        h = (1e-4 if p.name == "sigma" else 1e-6) * abs(base[p])   # σ = 1e-3: a larger step beats round-off
        Lp = _loss(rollout(model, state, STEPS, overrides={**base, p: base[p] + h}), W)
        Lm = _loss(rollout(model, state, STEPS, overrides={**base, p: base[p] - h}), W)
        assert grad[j] == pytest.approx((Lp - Lm) / (2 * h), rel=1e-4), p.label()
    for dof, (field, k) in {5: ("v", 5), 3: ("v", 3), 1: ("v", 1)}.items():   # initial velocities
        h = 1e-6
        sp_, sm_ = state.copy(), state.copy()
        sp_.v[1, k] += h
        sm_.v[1, k] -= h
        fd = (_loss(rollout(model, sp_, STEPS, overrides=base), W)
              - _loss(rollout(model, sm_, STEPS, overrides=base), W)) / (2 * h)
        assert lam_v[dof] == pytest.approx(fd, rel=1e-4, abs=1e-8)
    h = 1e-6
    sp_, sm_ = state.copy(), state.copy()
    sp_.q[1, 2] += h
    sm_.q[1, 2] -= h
    fd = (_loss(rollout(model, sp_, STEPS, overrides=base), W)
          - _loss(rollout(model, sm_, STEPS, overrides=base), W)) / (2 * h)
    assert lam_q[5] == pytest.approx(fd, rel=1e-4)


def test_rollout_without_overrides_is_the_stepper():
    # same solver settings: the rollout's states are the SAP stepper's, step for step
    from dataclasses import replace

    from convexsim.inverse.gradients import GRADIENT_PARAMETERS
    from convexsim.stepping import StepContext, step

    model, state, _ = prepare(rolling_ball("sap"))
    model = replace(model, solver=replace(model.solver, rel_tolerance=GRADIENT_PARAMETERS.rel_tolerance,
                                          abs_tolerance=GRADIENT_PARAMETERS.abs_tolerance,
                                          max_iterations=GRADIENT_PARAMETERS.max_iterations))
    ro = rollout(model, state, 25)
    ctx, s = StepContext(), state.copy()
    for l in range(25):
        s, _ = step(model, s, ctx, path="reference")   # the rollout is built on the reference path
        np.testing.assert_array_equal(s.q, ro.q[l + 1])


def test_unknown_or_absent_parameters_are_refused():
    model, state, _ = prepare(rolling_ball("lagged"))
    with pytest.raises(ValueError, match="tau_d does not appear"):
        rollout(model, state, 2, parameters=[Parameter("tau_d", ("ball", "floor"))])
    with pytest.raises(ValueError, match="not in the scene"):
        rollout(model, state, 2, parameters=[Parameter("mu", ("ball", "ice"))])


@pytest.mark.parametrize("cm", ["sap", "lagged"])
def test_applied_force_gradient_through_a_rollout(cm):
    # dL/du_l from the adjoint against central differences of whole rollouts, for a force and a torque at
    # a step in flight, one at landing and one while rolling (1e-4 relative, as above; h = 1e-5 N).
    model, state, _ = prepare(rolling_ball(cm))
    rng = np.random.default_rng(11)
    u = rng.normal(size=(STEPS, 1, 6)) * 0.5
    ro = rollout(model, state, STEPS, linearize=True, applied=u)
    free = rollout(model, state, STEPS)
    assert np.abs(ro.positions() - free.positions()).max() > 1e-4      # the input acts
    W = rng.normal(size=ro.positions().shape)
    dLdq = np.zeros((STEPS + 1, 6))
    dLdq[:, 3:] = W[:, 0, :]
    _grad, _lam_q, _lam_v, dLdu = adjoint(ro, dLdq, applied_gradient=True)
    assert dLdu.shape == (STEPS, 1, 6)
    landing = int(np.argmax(ro.positions()[:, 0, 2] < 0.1005))
    checked = 0
    for l in (2, max(landing - 1, 0), STEPS - 3):
        for k in (0, 3, 5):                           # torque about x, force along x, force along z
            h = 1e-5
            up, um = u.copy(), u.copy()
            up[l, 0, k] += h
            um[l, 0, k] -= h
            fd = (_loss(rollout(model, state, STEPS, applied=up), W)
                  - _loss(rollout(model, state, STEPS, applied=um), W)) / (2 * h)
            assert dLdu[l, 0, k] == pytest.approx(fd, rel=1e-4, abs=1e-9), (l, k)
            checked += abs(fd) > 1e-6
    assert checked >= 6
    with pytest.raises(ValueError, match="expected shape"):
        rollout(model, state, 3, applied=np.zeros((2, 1, 6)))
