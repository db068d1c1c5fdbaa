"""Kinematic trees through the LCP stepper (convexsim.stepping.lcp_reference and its compiled twin): limits as rigid
unilateral rows, PD in the implicit linear form with explicit effort saturation (docs/articulated.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from convexsim.multibody import gravity_forces
from convexsim.multibody.forest import Controls
from convexsim.simulate import prepare
from convexsim.stepping import StepContext, step


def run(text, duration, controls=None):
    model, state, _ = prepare(text)
    ctx = StepContext()
    ctx.controls = controls
    infos = []
    for _ in range(round(duration / model.time_step)):
        state, info = step(model, state, ctx)
        infos.append(info)
    return model, state, infos


@pytest.mark.parametrize("force", [10.0, -10.0])
def test_lcp_limit_is_rigid(force):
    """Drake's limit case with the LCP: the rigid unilateral row holds the slider exactly on the limit
    (gap term b = g/dt closes the gap within a step and no compliance: error 0 to round-off)."""
    text = """
time_step: 0.001
gravity: [0, 0, 0]
solver: {kind: lcp}
bodies:
  - {name: box, mass: 1.0, inertia: [1.0e-3, 1.0e-3, 1.0e-3]}
joints:
  - {name: slide, type: prismatic, child: box, axis: [1, 0, 0], lower: 0.0, upper: 0.1, initial_position: 0.05}
"""
    _, s, _ = run(text, 1.0, Controls(torques={"slide": force}))
    assert s.tree_q[0] == pytest.approx(0.1 if force > 0 else 0.0, abs=1e-12)
    assert abs(s.tree_v[0]) < 1e-12


def test_lcp_pd_steady_state_is_gravity_over_kp():
    """Implicit linear PD (folded into A and v*): at rest Kp (q_ss − q_d) = −g(q_ss), as SAP's row."""
    kp, qd = 400.0, 0.5
    text = f"""
time_step: 0.001
solver: {{kind: lcp}}
bodies:
  - {{name: bob, mass: 1.0, inertia: [1.0e-9, 1.0e-9, 1.0e-9]}}
joints:
  - {{name: hinge, type: revolute, child: bob, axis: [0, 1, 0], position: [0, 0, 2.0],
      child_offset: [0, 0, -1.0], initial_position: 0.5}}
actuators:
  - {{joint: hinge, kp: {kp}, kd: 80, target: {qd}}}
"""
    model, s, infos = run(text, 4.0)
    g = gravity_forces(model.forest.trees[0].model, s.tree_q)[0]
    assert kp * (s.tree_q[0] - qd) == pytest.approx(-g, rel=1e-6)
    assert infos[-1].actuator_force[0] == pytest.approx(g, rel=1e-6)


@pytest.mark.parametrize("path", ["auto", "reference"])
def test_lcp_effort_limit_saturates_exactly(path):
    """A 2 kg vertical slider held by a PD whose effort (5 N) is below its weight: once saturated the
    actuator gives exactly 5 N every step and the slider falls with a = 5/2 − g (the compiled step, taken by
    "auto", and the reference)."""
    text = """
time_step: 0.001
solver: {kind: lcp}
bodies:
  - {name: box, mass: 2.0, inertia: [1.0e-3, 1.0e-3, 1.0e-3]}
joints:
  - {name: lift, type: prismatic, child: box, axis: [0, 0, 1], initial_position: 1.0}
actuators:
  - {joint: lift, kp: 1000, kd: 50, target: 1.0, effort: 5.0}
"""
    model, state, _ = prepare(text)
    ctx = StepContext()
    u, v = [], []
    for _ in range(500):
        state, info = step(model, state, ctx, path=path)
        assert info.path == ("compiled" if path == "auto" else "reference")
        u.append(info.actuator_force[0])
        v.append(state.tree_v[0])
    first = next(k for k, x in enumerate(u) if abs(x) >= 5.0 - 1e-12)
    assert first < 50
    assert np.all(np.abs(np.array(u[first:]) - 5.0) <= 1e-12)
    assert (v[-1] - v[-2]) / 1e-3 == pytest.approx(5.0 / 2.0 - 9.81, rel=1e-9)
