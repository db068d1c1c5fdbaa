"""Per-step controls on the compiled LCP step: PD targets, joint torques (through the scene's motors) and body
wrenches are arrays the compiled LCP step takes (``lcp_composition.lcp_step_kernel``), as the SAP step's.

Oracles: the LCP reference step (``lcp_reference``) driven by the same controls, whose trajectories the compiled
step equals to 1e-9 with the same Lemke pivots (the bound of tests/multibody/test_mb_lcp_compiled.py: measured
bit for bit, room left for another BLAS's summation order); and the PD law the LCP step states (implicit, folded
into A and v*: u = −Kp (q₀ + dt v₁ − q_d) − Kd (v₁ − v_d)), with the hinge's momentum balance.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from convexsim.sim import Simulation
from convexsim.simulate import prepare, run_model
from tests.scripting.scripting_helpers import assert_follows_implicit_pd, drive

BOUND = 1e-9
"""States and forces of the compiled against the reference LCP step (module docstring; measured on iiwa_push: at
most 1e-13, round-off)."""


def _drive(scene, path, steps, set_controls):
    return drive(scene, steps, set_controls, solver="lcp", path=path)


def _sine_target(sim):
    w = 2 * math.pi * 2.0
    sim.set_target("iiwa_joint_2", 0.800688 + 0.1 * math.sin(w * sim.t), velocity=0.1 * w * math.cos(w * sim.t))


def _torques(sim):
    for j, name in enumerate(sim.joint_names):
        sim.set_torque(name, 3.0 * math.sin(2 * math.pi * (1.0 + 0.5 * j) * sim.t))


def _all_three(sim):
    _sine_target(sim)
    _torques(sim)
    sim.set_wrench("iiwa_link_6", force=(0.0, 5.0 * math.sin(8 * sim.t), 1.0), torque=(0.2, 0.0, 0.0))


@pytest.mark.parametrize("set_controls", [_sine_target, _torques, _all_three],
                         ids=["sine target", "torques on all seven", "targets, torques and a link wrench"])
def test_controlled_lcp_iiwa_takes_the_compiled_step_and_equals_the_reference(set_controls):
    sc, ic = _drive("iiwa_push", "auto", 60, set_controls)
    sr, ir = _drive("iiwa_push", "reference", 60, set_controls)
    assert all(i.path == "compiled" for i in ic)
    assert [i.contacts.count for i in ic] == [i.contacts.count for i in ir]
    assert [i.pivots for i in ic] == [i.pivots for i in ir]
    for a, r in zip(sc, sr):
        for x, y in ((a.tree_q, r.tree_q), (a.tree_v, r.tree_v), (a.q, r.q), (a.v, r.v)):
            assert np.abs(x - y).max() <= BOUND
    for a, r in zip(ic, ir):
        assert np.abs(a.actuator_force - r.actuator_force).max() <= 1e-6
    bare, _ = _drive("iiwa_push", "auto", 60, lambda sim: None)
    assert np.abs(bare[-1].tree_q - sc[-1].tree_q).max() > 1e-4        # the controls did move the arm


KP, KD = 40.0, 8.0
PENDULUM = f"""
gravity: [0, 0, -9.81]
time_step: 1.0e-3
solver: {{kind: lcp}}
bodies:
  - {{name: bob, mass: 1.0, geometries: [{{shape: sphere, radius: 0.05}}]}}
  - {{name: arm, mass: 0.5, geometries: [{{shape: sphere, radius: 0.05}}]}}
joints:
  - {{name: hinge, type: revolute, child: bob, axis: [0, 1, 0], position: [0, 0, 1.5], child_offset: [0, 0, -1],
     initial_position: 0.4}}
  - {{name: wrist, type: revolute, parent: bob, child: arm, axis: [0, 1, 0], child_offset: [0, 0, -0.5]}}
actuators:
  - {{joint: hinge, kp: {KP}, kd: {KD}}}
motors:
  - {{joint: wrist, torque: 0.2, effort: 0.5}}
"""
"""A 1 m pendulum (1 kg bob, I_COM = 2/5 m r² = 1e-3 kg·m²) with a PD actuator on its hinge and a 0.5 m second
link on a motor-driven wrist (constant 0.2 N·m, effort 0.5 N·m), no contacts."""


def test_the_lcp_driven_joint_follows_the_implicit_pd_law():
    """On the compiled LCP step, every step of a sine target (the wrist held still): the actuator's force is the
    implicit PD law at the step's end velocity, u = −Kp (q₀ + dt v₁ − q_d) − Kd (v₁ − v_d), to round-off
    (1e-9 relative: A v₁ is solved, not iterated)."""
    text = PENDULUM.replace("motors:\n  - {joint: wrist, torque: 0.2, effort: 0.5}\n", "")
    sim = Simulation(text)
    assert_follows_implicit_pd(sim, "hinge", KP, KD, steps=200, rel=1e-9, abs_=1e-12)
    assert abs(sim.qpos("hinge") - 0.4) > 0.1          # it followed the target away from its start


def test_motor_torques_on_the_compiled_lcp_step_equal_the_reference():
    """A motor's constant torque, and a controller's torque on the motor's joint clamped by its effort (0.7 N·m
    commanded: 0.2 + 0.7 > 0.5), on both LCP paths: every step compiled, states equal to BOUND; the clamp
    acts (the trajectory differs from an unclamped 0.9 N·m)."""
    runs = {}
    for key, text, path in (("compiled", PENDULUM, "auto"), ("reference", PENDULUM, "reference"),
                            ("unclamped", PENDULUM.replace("effort: 0.5", "effort: 10.0"), "auto")):
        sim = Simulation(text, path=path)
        sim.set_torque("wrist", 0.7)
        sim.step(200)
        assert sim.info.path == ("reference" if path == "reference" else "compiled")
        runs[key] = sim.state
    a, r, free = runs["compiled"], runs["reference"], runs["unclamped"]
    assert np.abs(a.tree_q - r.tree_q).max() <= BOUND and np.abs(a.tree_v - r.tree_v).max() <= BOUND
    assert np.abs(a.tree_q - free.tree_q).max() > 1e-3


def test_a_python_controller_on_the_lcp_runs_on_compiled_steps():
    """run_model(controller=fn) with the LCP solver: every step is the compiled LCP step (its summary path says
    so, no reference step), and the run equals the same controls set through Simulation, bit for bit."""
    model, state, _ = prepare(PENDULUM)

    def controller(m, s):
        return {"targets": {"hinge": 0.2 * math.sin(5 * s.t)}, "torques": {"wrist": 0.1},
                "wrenches": {"arm": [0, 0, 0, 0.5, 0, 0]}}

    traj, stats = run_model(model, state, duration=0.1, controller=controller)
    assert stats.path == "compiled LCP step"
    sim = Simulation.from_model(model, state)
    sim.set_torque("wrist", 0.1)
    sim.set_wrench("arm", force=(0.5, 0.0, 0.0))
    for _ in range(100):
        sim.set_target("hinge", 0.2 * math.sin(5 * sim.t))
        sim.step()
    assert np.array_equal(sim.state.q[:, :3], traj.position[-1])
