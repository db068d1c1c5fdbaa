"""Per-step controls on the compiled step: PD targets and joint torques are arrays the compiled tree step
takes every step, and its trajectories equal the reference step's within the bounds of two SAP solves.

Bounds (the same argument as tests/multibody/test_mb_compiled_step.py's whole runs): both paths build the
same convex problem each step from the same formulas, to round-off, and minimize it to the solver's
relative tolerance 1e-6; each step's v may differ by about 1e-6 of the velocity scale, so v is bounded by
1e-5·(1 + max |v|) and q, integrating it over 0.3 s of stable, damped steps, by 1e-6 rad or m. Where Newton
reaches round-off in an iteration or two (these scenes) the differences are ~1e-14.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from convexsim.sim import Simulation
from convexsim.simulate import SlowPathWarning, prepare, run_model
from tests.scripting.scripting_helpers import assert_follows_implicit_pd

Q_BOUND = 1e-6
STEPS = 300


def _v_bound(sims) -> float:
    return 1e-5 * (1.0 + max(float(np.max(np.abs(s.state.tree_v))) for s in sims))


def _drive(path: str, set_controls):
    """iiwa_push for STEPS steps on ``path``, ``set_controls(sim)`` before every step; (states, infos)."""
    sim = Simulation("iiwa_push", path=path)
    states, infos = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SlowPathWarning)
        for _ in range(STEPS):
            set_controls(sim)
            sim.step()
            states.append(sim.state)
            infos.append(sim.info)
    return sim, states, infos


def _sine_target(sim):
    sim.set_target("iiwa_joint_2", 0.800688 + 0.1 * math.sin(2 * math.pi * 2.0 * sim.t),
                   velocity=0.1 * 2 * math.pi * 2.0 * math.cos(2 * math.pi * 2.0 * sim.t))


def _torques(sim):
    for j, name in enumerate(sim.joint_names):
        sim.set_torque(name, 3.0 * math.sin(2 * math.pi * (1.0 + 0.5 * j) * sim.t))


@pytest.mark.parametrize("set_controls", [_sine_target, _torques], ids=["sine target", "torques on all seven"])
def test_controlled_iiwa_takes_the_compiled_step_and_equals_the_reference(set_controls):
    sc, states_c, infos_c = _drive("auto", set_controls)
    sr, states_r, infos_r = _drive("reference", set_controls)
    assert all(i.path == "compiled" for i in infos_c)
    bound = _v_bound([sr])
    for a, r in zip(states_c, states_r):
        assert np.max(np.abs(a.tree_q - r.tree_q)) < Q_BOUND
        assert np.max(np.abs(a.tree_v - r.tree_v)) < bound
        assert np.max(np.abs(a.q - r.q)) < Q_BOUND
    for a, r in zip(infos_c, infos_r):
        assert a.contacts.count == r.contacts.count
        assert np.allclose(a.actuator_force, r.actuator_force, rtol=1e-5, atol=1e-6)
    moved = max(abs(a.tree_q[1] - states_c[0].tree_q[1]) for a in states_c)
    assert moved > 1e-3          # the controls did move the arm


KP, KD = 40.0, 8.0
PENDULUM = f"""
gravity: [0, 0, -9.81]
time_step: 1.0e-3
bodies:
  - {{name: bob, mass: 1.0, geometries: [{{shape: sphere, radius: 0.05}}]}}
joints:
  - {{name: hinge, type: revolute, child: bob, axis: [0, 1, 0], position: [0, 0, 1.5], child_offset: [0, 0, -1],
     initial_position: 0.4}}
actuators:
  - {{joint: hinge, kp: {KP}, kd: {KD}}}
"""


def test_the_compiled_driven_joint_follows_the_implicit_pd_law():
    """On the compiled step, every step of a sine target: u = −Kp (q0 + dt v1 − q_d) − Kd (v1 − v_d) (gains
    far below the near-rigid limit), to the solver's relative tolerance 1e-6."""
    assert_follows_implicit_pd(Simulation(PENDULUM), "hinge", KP, KD, steps=200, rel=1e-6, abs_=1e-9)


def test_a_python_controller_runs_on_compiled_steps():
    """run_model(controller=fn) takes compiled single steps (no slow-path warning) and equals the same
    controls set through Simulation."""
    model, state, _ = prepare(PENDULUM)

    def controller(m, s):
        return {"targets": {"hinge": 0.2 * math.sin(5 * s.t)}, "torques": {"hinge": 0.3}}

    with warnings.catch_warnings():
        warnings.simplefilter("error", SlowPathWarning)
        traj, stats = run_model(model, state, duration=0.1, controller=controller)
    assert stats.path.startswith("compiled step")
    sim = Simulation.from_model(model, state)
    sim.set_torque("hinge", 0.3)
    for _ in range(100):
        sim.set_target("hinge", 0.2 * math.sin(5 * sim.t))
        sim.step()
    assert np.array_equal(sim.state.q[:, :3], traj.position[-1])
