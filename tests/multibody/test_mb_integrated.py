"""Kinematic trees through the integrated stepper (convexsim.stepping.step, scene files with ``joints:``
and ``actuators:``) against the one-tree step of the tests (one_tree_step) and the analytic answers of
test_mb_physics.py: the same numbers must come out of the scene → Model → SAP path."""

from __future__ import annotations

import math

import numpy as np
import pytest

import one_tree_step as rs
from convexsim.multibody import gravity_forces
from convexsim.multibody.forest import Controls
from convexsim.multibody.model import PdActuator
from convexsim.simulate import prepare, simulate
from convexsim.stepping import StepContext, step

G = 9.81

PENDULUM = """
name: pend
time_step: {dt}
solver: {{rel_tolerance: 1.0e-10}}
bodies:
  - {{name: bob, mass: 1.0, inertia: [1.0e-9, 1.0e-9, 1.0e-9]}}
joints:
  - {{name: hinge, type: revolute, child: bob, axis: [0, 1, 0], position: [0, 0, 2.0],
      child_offset: [0, 0, -1.0], initial_position: {q0}{extra}}}
"""


def pendulum_scene(dt=1e-3, q0=0.05, extra="", actuators=""):
    return PENDULUM.format(dt=dt, q0=q0, extra=extra) + actuators


def run(text, duration, controls=None):
    model, state, _ = prepare(text)
    ctx = StepContext()
    ctx.controls = controls
    states, infos = [state], []
    for _ in range(round(duration / model.time_step)):
        state, info = step(model, state, ctx, strict=True)
        states.append(state)
        infos.append(info)
    return model, states, infos


def test_tree_without_contact_equals_the_reference_step():
    """Double pendulum with a PD actuator on joint 1 and a limit on joint 2, 300 steps: the integrated
    stepper (scene → Model → the SAP step) equals one_tree_step.step to 1e-10."""
    text = """
time_step: 0.001
solver: {rel_tolerance: 1.0e-12}
bodies:
  - {name: l1, mass: 1.0, inertia: [0.01, 0.01, 0.001]}
  - {name: l2, mass: 0.5, inertia: [0.005, 0.005, 0.001]}
joints:
  - {name: j1, type: revolute, child: l1, axis: [0, 1, 0], position: [0, 0, 2], child_offset: [0, 0, -0.5],
     initial_position: 0.8}
  - {name: j2, type: revolute, parent: l1, child: l2, axis: [0, 1, 0], position: [0, 0, -0.5],
     child_offset: [0, 0, -0.4], initial_position: -0.2, lower: -0.25, upper: 0.6, damping: 0.01}
actuators:
  - {joint: j1, kp: 50, kd: 5, target: [[0, 0.8], [0.2, 0.2]], effort: 8}
"""
    model, states, infos = run(text, 0.3)
    tree = model.forest.trees[0]
    q, v = states[0].tree_q.copy(), states[0].tree_v.copy()
    worst = 0.0
    for k, s in enumerate(states[1:]):
        a = tree.actuators[0]
        q_d, v_d = a.target(k * model.time_step)
        act = PdActuator(a.joint, a.kp, a.kd, q_d, v_d, effort=a.effort)
        q, v, rep = rs.step(tree.model, q, v, model.time_step, limits=tree.limits, actuators=[act])
        worst = max(worst, np.abs(s.tree_q - q).max(), np.abs(s.tree_v - v).max())
        assert infos[k].actuator_force == pytest.approx(rep.actuator_force, abs=1e-8)
    assert worst < 1e-10
    assert any(abs(f[0]) == pytest.approx(8.0) for f in (i.actuator_force for i in infos))  # saturated


def test_pendulum_period_through_the_stepper():
    """Point-like bob, L = 1 m: T = 2π√(L/g)(1 + θ0²/16) within 1e-4, so within the 0.5 % criterion."""
    dt, theta0 = 1e-3, 0.05
    _, states, _ = run(pendulum_scene(dt, theta0), 4.5)
    th = np.array([s.tree_q[0] for s in states])
    i = np.flatnonzero((th[:-1] > 0) & (th[1:] <= 0))
    t_cross = (i + th[i] / (th[i] - th[i + 1])) * dt
    period = np.mean(np.diff(t_cross))
    T0 = 2 * math.pi * math.sqrt(1.0 / G)
    assert abs(period / T0 - 1) < 5e-3
    assert abs(period / (T0 * (1 + theta0 ** 2 / 16)) - 1) < 1e-4


def test_link_body_rows_follow_forward_kinematics():
    """The link's row of State.q is the bob's COM: (−L sin θ, 0, 2 − L cos θ) for a hinge about y."""
    _, states, _ = run(pendulum_scene(q0=0.3), 0.05)
    for s in states[::10]:
        th = s.tree_q[0]
        assert s.q[0, :3] == pytest.approx([-math.sin(th), 0.0, 2.0 - math.cos(th)], abs=1e-12)
        assert s.v[0, 4] == pytest.approx(s.tree_v[0] * -math.cos(th) * 0.0, abs=1e-12)   # no y motion
        assert s.v[0, 1] == pytest.approx(s.tree_v[0], abs=1e-12)                        # ω_y = θ̇


@pytest.mark.parametrize("dt", [2.5e-4, 5e-4, 1e-3])
@pytest.mark.parametrize("force", [10.0, -10.0])
def test_drakes_joint_limit_case_through_the_stepper(dt, force):
    """Drake's joint-limit case (1 kg prismatic, limits [0, 0.1] m, ±10 N from a controller, no gravity):
    at rest on the limit after 1 s with error < 1100 dt², exactly dt² |F| / (200 π² m) beyond it."""
    text = f"""
time_step: {dt}
gravity: [0, 0, 0]
bodies:
  - {{name: box, mass: 1.0, inertia: [1.0e-3, 1.0e-3, 1.0e-3]}}
joints:
  - {{name: slide, type: prismatic, child: box, axis: [1, 0, 0], lower: 0.0, upper: 0.1, initial_position: 0.05}}
"""
    _, states, _ = run(text, 1.0, Controls(torques={"slide": force}))
    q, v = states[-1].tree_q[0], states[-1].tree_v[0]
    err = q - (0.1 if force > 0 else 0.0)
    assert abs(err) < 1100 * dt ** 2
    assert err * np.sign(force) == pytest.approx(dt ** 2 * abs(force) / (200 * math.pi ** 2), rel=1e-6)
    assert abs(v) < 1e-10


def test_pd_steady_state_error_is_gravity_torque_over_kp():
    """Implicit PD: Kp (q_ss − q_d) = −g(q_ss) exactly (docs/articulated.md §5), through the stepper."""
    kp, qd = 400.0, 0.5
    text = pendulum_scene(q0=0.5, actuators=f"actuators:\n  - {{joint: hinge, kp: {kp}, kd: 80, target: {qd}}}\n")
    model, states, _ = run(text, 4.0)
    q = states[-1].tree_q
    g = gravity_forces(model.forest.trees[0].model, q)[0]
    assert kp * (q[0] - qd) == pytest.approx(-g, rel=1e-6)
    assert abs(states[-1].tree_v[0]) < 1e-9


def test_simulate_controller_targets_move_the_joint():
    """simulate(..., controller=fn): a target from the callback replaces the scene's target."""
    text = pendulum_scene(q0=0.0, actuators="actuators:\n  - {joint: hinge, kp: 2000, kd: 100, target: 0.0}\n")
    seen = []

    def controller(model, state):
        seen.append(state.t)
        return {"targets": {"hinge": 0.3}}

    traj = simulate(text, duration=2.0, controller=controller)
    assert len(seen) == 2000
    th = -math.asin(traj.position[-1, 0, 0])           # bob x = −sin θ
    g = G * math.sin(th)
    assert 2000 * (th - 0.3) == pytest.approx(-g, rel=1e-3)
    with pytest.raises(ValueError, match="controller.targets: unknown joint 'nope'"):
        simulate(text, duration=0.01, controller=lambda m, s: {"targets": {"nope": 1.0}})


def test_link_resting_on_the_floor_sinks_like_a_free_body():
    """A 2 kg box on a vertical prismatic joint dropped on the floor rests where the same free box rests
    (contact on a link: Jacobian in the joint velocity; the compliant penetration is m g / (4 · k/2) in
    both: four corners, the pair stiffness of two equal materials in series)."""
    common = """
time_step: 0.001
materials: {default: {stiffness: 1.0e5, dissipation_time: 0.05}}
bodies:
  - {name: floor, fixed: true, geometries: [{shape: halfspace}]}
  - {name: box, mass: 2.0, %s geometries: [{shape: box, size: [0.2, 0.2, 0.2]}]}
"""
    free = common % "position: [0, 0, 0.12],"
    link = common % "" + """joints:
  - {name: lift, type: prismatic, child: box, axis: [0, 0, 1], initial_position: 0.12}
"""
    _, s_free, _ = run(free, 1.5)
    _, s_link, infos = run(link, 1.5)
    z_free, z_link = s_free[-1].q[1, 2], s_link[-1].q[1, 2]
    assert infos[-1].contacts.count == 4
    pen = 2.0 * G / (4 * 0.5e5)    # 4 corner contacts, pair stiffness k/2 (in series)
    assert z_free == pytest.approx(0.1 - pen, abs=2e-5)
    assert z_link == pytest.approx(z_free, abs=1e-8)
