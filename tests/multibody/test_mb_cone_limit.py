"""Cone (swing) limits of ball joints: the swing rate's Jacobian against finite differences, an inverted
spherical pendulum resting on its cone at the limit's own compliance (SAP) and exactly on it (LCP), twist
left free, and the scene errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from convexsim.multibody.model import ConeLimit
from convexsim.multibody.reference_step import cone_swing, free_motion
from convexsim.sap.joint_constraints import BETA_JOINT
from convexsim.scene import SceneError
from convexsim.simulate import prepare
from convexsim.spatial import quat_to_matrix
from convexsim.stepping import StepContext, step

G = 9.81


def _quat_exp(w: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z) of the rotation vector w [rad]."""
    a = float(np.linalg.norm(w))
    if a == 0.0:
        return np.array([1.0, 0.0, 0.0, 0.0])
    return np.concatenate([[math.cos(a / 2)], math.sin(a / 2) * w / a])


def _quat_mul(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    pw, pv, qw, qv = p[0], p[1:], q[0], q[1:]
    return np.concatenate([[pw * qw - pv @ qv], pw * qv + qw * pv + np.cross(pv, qv)])


SCENE = """
time_step: {dt}
solver: {{kind: {solver}}}
bodies:
  - {{name: bob, mass: 1.0, inertia: [1.0e-4, 1.0e-4, 1.0e-4]}}
joints:
  - {{name: hip, type: ball, child: bob, position: [0, 0, 1], child_offset: [0, 0, {L}], axis: [0, 0, 1],
     cone_limit: {cone}, damping: {damping}, initial_position: {quat}, initial_velocity: {omega}}}
"""


def _scene(solver="sap", cone=0.3, tilt=0.1, damping=0.5, dt=1e-3, L=0.5, omega=(0.0, 0.0, 0.0)):
    quat = [math.cos(tilt / 2), math.sin(tilt / 2), 0.0, 0.0]
    return SCENE.format(dt=dt, solver=solver, cone=cone, damping=damping, L=L, quat=quat, omega=list(omega))


def _run(text, duration):
    model, state, _ = prepare(text)
    ctx = StepContext()
    infos = []
    for _ in range(round(duration / model.time_step)):
        state, info = step(model, state, ctx, strict=True)
        infos.append(info)
    return model, state, infos


@pytest.mark.parametrize("seed", range(5))
def test_swing_rate_row_is_the_derivative_of_the_swing_angle(seed):
    """θ̇ = (∂θ/∂ω)·ω: central differences of θ along q(h) = exp(h ω) ∘ q (ω in J, R_JB's left
    perturbation) at random orientations and axes, step 1e-6 rad: error O(h²) ≈ 1e-11, bound 1e-8."""
    rng = np.random.default_rng(seed)
    model, _, _ = prepare(_scene())
    tree = model.forest.trees[0].model
    axis = rng.normal(size=3)
    lim = ConeLimit(0, tuple(axis / np.linalg.norm(axis)), 1.0)
    q = _quat_exp(rng.normal(size=3))
    omega = rng.normal(size=3)
    theta, row = cone_swing(tree, q, lim)
    h = 1e-6
    tp, _ = cone_swing(tree, _quat_mul(_quat_exp(h * omega), q), lim)
    tm, _ = cone_swing(tree, _quat_mul(_quat_exp(-h * omega), q), lim)
    assert 0.05 < theta < math.pi - 0.05
    assert (tp - tm) / (2 * h) == pytest.approx(float(row @ omega), abs=1e-8)


def test_inverted_pendulum_rests_on_its_cone_at_the_limit_compliance():
    """A 1 kg bob 0.5 m above a ball joint, tipped by 0.1 rad, falls onto a 0.3 rad cone and comes to rest
    (joint damping) against it. At rest the cone row carries the gravity torque τ = m g L sin θ, and the
    near-rigid row (R = β² w/(4π²), v̂ = −g/(2 dt)) settles at a violation θ − θmax = dt² β² w τ/(2π²), with
    w = Σ n_k²/A_kk of the step matrix A = M + dt D. At t = 4 s the rest is steady (|v| < 1e-4 rad/s;
    measured 1e-14), so both agree to round-off: checked to 1e-4 relative, and the reported limit torque
    equals τ to 1e-6 relative."""
    model, state, infos = _run(_scene(), 4.0)
    tree = model.forest.trees[0]
    q = tree.q_of(state.tree_q)
    lim = tree.limits[0]
    theta, n = cone_swing(tree.model, q, lim)
    A, _ = free_motion(tree.model, q, np.zeros(3), model.time_step)
    w = float(np.sum(n * n / np.diag(A)))
    tau = 1.0 * G * 0.5 * math.sin(theta)
    dt = model.time_step
    expected = dt ** 2 * BETA_JOINT ** 2 * w * tau / (2 * math.pi ** 2)
    assert theta - 0.3 == pytest.approx(expected, rel=1e-4)
    assert 0.0 < expected < 1e-6
    assert infos[-1].limit_force["hip"] == pytest.approx(tau, rel=1e-6)
    assert np.abs(tree.v_of(state.tree_v)).max() < 1e-4


def test_lcp_holds_the_cone_rigidly():
    """The LCP's cone row is rigid: the same pendulum rests on θmax to the gap stabilization's round-off
    (1e-9 rad), with the limit torque m g L sin θmax to 1e-6 relative."""
    model, state, infos = _run(_scene(solver="lcp"), 3.0)
    tree = model.forest.trees[0]
    theta, _ = cone_swing(tree.model, tree.q_of(state.tree_q), tree.limits[0])
    assert theta == pytest.approx(0.3, abs=1e-9)
    assert infos[-1].limit_force["hip"] == pytest.approx(G * 0.5 * math.sin(0.3), rel=1e-6)


def test_twist_about_the_axis_is_free_and_inside_the_cone_nothing_acts():
    """A bob spinning about the cone axis (θ = 0, ω along a) keeps its spin (no limit row, no damping,
    no gravity torque): ω unchanged to round-off; a hanging pendulum swinging inside its cone (0.2 rad
    amplitude, cone 0.5) is never touched by the limit (zero limit torque every step)."""
    text = _scene(cone=0.3, tilt=0.0, damping=0.0, omega=(0.0, 0.0, 3.0))
    model, state, infos = _run(text, 0.5)
    np.testing.assert_allclose(model.forest.trees[0].v_of(state.tree_v), [0.0, 0.0, 3.0], atol=1e-9)
    assert all(i.limit_force["hip"] == 0.0 for i in infos)
    hanging = _scene(cone=0.5, tilt=0.2, damping=0.0, L=-0.5)
    model, state, infos = _run(hanging, 1.0)
    tree = model.forest.trees[0]
    assert all(i.limit_force["hip"] == 0.0 for i in infos)
    R = quat_to_matrix(tree.q_of(state.tree_q))
    assert math.acos(min(1.0, R[2, 2])) < 0.2 + 1e-3


REVOLUTE_WITH_CONE = """
bodies:
  - {name: bob, mass: 1.0, inertia: [1.0e-4, 1.0e-4, 1.0e-4]}
joints:
  - {name: hip, type: revolute, child: bob, axis: [0, 1, 0], child_offset: [0, 0, -0.5], cone_limit: 0.3}
"""


@pytest.mark.parametrize("text, message", [
    (REVOLUTE_WITH_CONE, "a cone limit applies to ball joints, not revolute joints"),
    (_scene(cone=4.0), "must be an angle in (0, π)"),
    (_scene(cone=-0.1), "must be an angle in (0, π)"),
])
def test_bad_cone_limits_are_one_field_error(text, message):
    with pytest.raises(SceneError) as info:
        prepare(text)
    problems = info.value.problems
    assert len(problems) == 1 and "cone_limit" in problems[0] and message in problems[0], problems
