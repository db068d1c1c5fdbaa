"""The scripting interface (``convexsim.sim.Simulation``): named controls and state, step/reset/branching,
checked against the physics they claim and against ``run_model`` (the same steps by another door).

Scenes are small pendulums and a free box; controlled steps take the compiled step (its run kernel), as
uncontrolled ones do.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from convexsim.sim import Simulation
from convexsim.simulate import SlowPathWarning, prepare, run_model

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
"""A 1 m pendulum (1 kg point-like bob, I_COM = 2/5 m r² = 1e-3 kg·m²) about y, PD-actuated, no contacts."""

LENGTH, MASS, I_COM = 1.0, 1.0, 0.4 * 1.0 * 0.05 ** 2


def quiet(sim: Simulation, n: int) -> None:
    """n steps with the slow-path warning (expected for controlled steps) silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SlowPathWarning)
        sim.step(n)


def test_names_and_indices_match_the_state_arrays():
    sim = Simulation(PENDULUM)
    assert sim.joint_names == ("hinge",) and sim.actuator_names == ("hinge",)
    assert sim.qpos("hinge") == pytest.approx(0.4) and sim.qvel("hinge") == 0.0
    assert sim.target.shape == (1,) and sim.torque.shape == (1,) and sim.wrench.shape == (1, 6)
    assert np.array_equal(sim.body_pose("bob"), sim.state.q[0])
    with pytest.raises(KeyError, match="unknown joint 'elbow'"):
        sim.qpos("elbow")
    with pytest.raises(KeyError, match="unknown body"):
        sim.set_wrench("nobody", force=(1, 0, 0))


def test_the_driven_joint_follows_the_implicit_pd_law():
    """Every step of a sine target: the actuator's force is the implicit PD law evaluated at the step's end
    velocity, u = −Kp (q0 + dt v1 − q_d) − Kd (v1 − v_d) (these gains are far below the near-rigid limit,
    so they act unscaled), and the pendulum's angular momentum about the hinge changes by (u − m g L sin q0)·dt
    (A v1 = A v0 + dt τ, nothing else acts). Tolerances: the SAP solve's relative tolerance (1e-6) on
    the row's impulse."""
    sim = Simulation(PENDULUM)
    dt = sim.model.time_step
    inertia = MASS * LENGTH ** 2 + I_COM
    for k in range(200):
        q0, v0, t = sim.qpos("hinge"), sim.qvel("hinge"), sim.t
        q_d, v_d = 0.2 * math.sin(5 * t), 1.0 * math.cos(5 * t)
        sim.set_target("hinge", q_d, velocity=v_d)
        quiet(sim, 1)
        v1 = sim.qvel("hinge")
        u = sim.actuator_forces()["hinge"]
        assert u == pytest.approx(-KP * (q0 + dt * v1 - q_d) - KD * (v1 - v_d), rel=1e-6, abs=1e-9), k
        # gravity torque about +y of a bob hanging at angle q (x = L sin q, z = −L cos q): −m g L sin q
        assert inertia * (v1 - v0) == pytest.approx(dt * (u - MASS * 9.81 * LENGTH * math.sin(q0)), rel=1e-6, abs=1e-9)
        assert sim.qpos("hinge") == pytest.approx(q0 + dt * v1, abs=1e-15)


def test_a_held_target_settles_where_the_pd_force_balances_gravity():
    """Static equilibrium of the PD pendulum: Kp (q − q_d) = −m g L sin q after 4 s. The error decays as
    exp(−Kd t / 2I) = exp(−4 t), from 0.1 rad to 1e-8 rad at 4 s: a torque residual of Kp·1e-8 = 4e-7 N·m
    against the 2.9 N·m balanced (rel 1e-5 leaves margin for the solver's 1e-6 tolerance)."""
    sim = Simulation(PENDULUM)
    sim.set_target("hinge", 0.3)
    quiet(sim, 4000)
    q = sim.qpos("hinge")
    assert abs(sim.qvel("hinge")) < 1e-6
    assert KP * (q - 0.3) == pytest.approx(-MASS * 9.81 * LENGTH * math.sin(q), rel=1e-5)


def test_simulation_and_run_model_controller_take_the_same_steps():
    """A sine target set through Simulation equals the same controller in run_model(controller=...)
    bit for bit (both take stepping.step with the same Controls)."""
    model, state, _ = prepare(PENDULUM)

    def controller(model, s):
        return {"targets": {"hinge": (0.2 * math.sin(5 * s.t), 0.0)}, "torques": {"hinge": 0.5}}

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SlowPathWarning)
        traj, _ = run_model(model, state, duration=0.05, controller=controller)
    sim = Simulation.from_model(model, state)
    sim.set_torque("hinge", 0.5)
    for _ in range(50):
        sim.set_target("hinge", 0.2 * math.sin(5 * sim.t))
        quiet(sim, 1)
    assert np.array_equal(sim.state.q, np.concatenate([traj.position[-1], traj.quaternion[-1]], axis=1))


def test_copy_and_set_state_branch_identical_rollouts():
    """A branch (copy) and a restored snapshot repeat the original's steps exactly (a fresh context gives
    the same step: ``stepping.context``); reset returns to the initial state and clears the controls."""
    sim = Simulation(PENDULUM)
    sim.set_torque("hinge", 1.5)
    quiet(sim, 30)
    snap, branch = sim.state, sim.copy()
    quiet(sim, 40)
    quiet(branch, 40)
    assert np.array_equal(sim.state.tree_q, branch.state.tree_q)
    end = sim.state
    sim.set_state(snap)
    quiet(sim, 40)
    assert np.array_equal(sim.state.tree_q, end.tree_q) and sim.t == pytest.approx(end.t)
    sim.reset()
    assert sim.t == 0.0 and sim.qpos("hinge") == pytest.approx(0.4) and not sim.torque.any()


def test_joint_torque_and_link_wrench_are_the_same_generalized_force():
    """A wrench on a link acts through the link's Jacobian: a torque τ ŷ on the bob (the hinge axis) is the
    joint torque τ, and a force f at its centre of mass is the joint torque (r × f)·ŷ, r the COM's
    position from the hinge axis. Trajectories equal to round-off (1e-12 rad over 100 steps)."""
    runs = {}
    for how in ("joint", "wrench torque", "wrench force"):
        sim = Simulation(PENDULUM)
        q0 = sim.qpos("hinge")
        if how == "joint":
            sim.set_torque("hinge", 2.0)
        elif how == "wrench torque":
            sim.set_wrench("bob", torque=(0.0, 2.0, 0.0))
        else:      # r = L (sin q, 0, −cos q); (r × f)·ŷ = r_z f_x − r_x f_z; f along x: −L cos q f_x = 2 at q0
            sim.set_wrench("bob", force=(-2.0 / (LENGTH * math.cos(q0)), 0.0, 0.0))
        quiet(sim, 1 if how == "wrench force" else 100)
        runs[how] = sim
    one = Simulation(PENDULUM)
    one.set_torque("hinge", 2.0)
    quiet(one, 1)
    assert runs["wrench torque"].qpos("hinge") == pytest.approx(runs["joint"].qpos("hinge"), abs=1e-12)
    assert runs["wrench force"].qvel("hinge") == pytest.approx(one.qvel("hinge"), abs=1e-12)


BOX = """
gravity: [0, 0, -9.81]
time_step: 1.0e-3
bodies:
  - {name: box, mass: 2.0, position: [0, 0, 1], geometries: [{shape: box, size: [0.2, 0.2, 0.2]}]}
"""


def test_a_wrench_on_a_free_body_obeys_newton_euler():
    """A free 2 kg box (no contact): f = (3, 0, 2·9.81) cancels gravity vertically and accelerates it along
    x: v_n = n dt f_x/m, x_n = dt² (f_x/m) n(n+1)/2 (symplectic Euler); a torque about z spins it at
    ω_n = n dt τ/I_zz (no gyroscopic term about a principal axis). Tolerance: round-off (1e-12)."""
    sim = Simulation(BOX)
    m, dt, n = 2.0, sim.model.time_step, 200
    izz = m * (0.2 ** 2 + 0.2 ** 2) / 12
    sim.set_wrench("box", force=(3.0, 0.0, m * 9.81), torque=(0.0, 0.0, 0.05))
    quiet(sim, n)
    pose, vel = sim.body_pose("box"), sim.body_velocity("box")
    assert vel[3] == pytest.approx(n * dt * 3.0 / m, abs=1e-12)
    assert pose[0] == pytest.approx(dt ** 2 * 3.0 / m * n * (n + 1) / 2, abs=1e-12)
    assert pose[2] == pytest.approx(1.0, abs=1e-12) and vel[5] == pytest.approx(0.0, abs=1e-12)
    assert vel[2] == pytest.approx(n * dt * 0.05 / izz, rel=1e-12)


CONE = """
gravity: [0, 0, -9.81]
time_step: 1.0e-3
bodies:
  - {name: bob, mass: 1.0, geometries: [{shape: sphere, radius: 0.05}]}
joints:
  - {name: shoulder, type: ball, child: bob, position: [0, 0, 1.0], child_offset: [0, 0, -0.5], cone_limit: 0.5}
"""
"""A ball-joint pendulum with a cone limit: the compiled steps do not take cone limits (the reference does)."""


def test_a_slow_path_says_so_once_with_the_reason_and_the_cost(monkeypatch):
    """A model the compiled step does not take: a Simulation warns once (SlowPathWarning: why, and what it
    costs), however many steps; a run_model whose steps are handed over from some step on says so once (and
    its summary's path line says from which step); controls of every kind on the compiled models (targets,
    torques, wrenches on a tree and on a free body) take the compiled step and do not warn, nor does a run that
    asks for the reference path itself."""
    from convexsim.stepping import compiled
    from convexsim.stepping.types import Handoff

    sim = Simulation(CONE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sim.step(3)
        sim.set_wrench("bob", force=(1.0, 0.0, 0.0))
        sim.step(2)
    slow = [str(w.message) for w in caught if issubclass(w.category, SlowPathWarning)]
    assert len(slow) == 1 and "cone limits" in slow[0] and "ms" in slow[0]
    real = compiled.compiled_step
    monkeypatch.setattr(compiled, "compiled_step", lambda model, state, ctx=None, **kw: (
        Handoff("a step handed over") if state.t > 0.0025 else real(model, state, ctx, **kw)))
    model, state, _ = prepare(PENDULUM)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, stats = run_model(model, state, duration=0.005, controller=lambda m, s: {
            "wrenches": {"bob": [0, 0, 0, 1, 0, 0]}, "torques": {"hinge": 1}})
        run_model(model, state, duration=0.005, path="reference")
        monkeypatch.setattr(compiled, "compiled_step", real)
        _, free = run_model(*prepare(BOX)[:2], duration=0.003, controller=lambda m, s: {"wrenches": {"box": [0] * 5 + [1]}})
        sim = Simulation(PENDULUM)
        sim.set_target("hinge", 0.1)
        sim.set_torque("hinge", 0.2)
        sim.set_wrench("bob", force=(1.0, 0.0, 0.0))
        sim.step(3)
    slow = [str(w.message) for w in caught if issubclass(w.category, SlowPathWarning)]
    assert len(slow) == 1 and "a step handed over" in slow[0]
    assert "from step 3 some steps on the Python path: a step handed over" in stats.path
    assert free.path.startswith("compiled step, one call per step") and sim.info.path == "compiled"


def test_controls_are_checked_by_name():
    sim = Simulation(PENDULUM)
    with pytest.raises(KeyError, match="unknown actuator"):
        sim.set_target("bob", 0.1)
    with pytest.raises(ValueError, match="n must be >= 1"):
        sim.step(0)
    model, state, _ = prepare(PENDULUM)
    with pytest.raises(ValueError, match="unknown body 'arm'"):
        run_model(model, state, duration=0.002, controller=lambda m, s: {"wrenches": {"arm": [0] * 6}})


def test_uncontrolled_steps_go_straight_to_the_run_kernel_and_equal_stepping_step():
    """Without controls, Simulation.step(n) and step() call the compiled run kernel directly; the states and
    the last step's info equal a loop of stepping.step bit for bit (the same kernel, the same arithmetic)."""
    from convexsim.stepping import StepContext, step

    model, state, _ = prepare(PENDULUM)
    sim = Simulation.from_model(model, state)
    sim.step(150)
    for _ in range(50):
        sim.step()
    s, ctx = state, StepContext()
    for _ in range(200):
        s, info = step(model, s, ctx)
    assert info.path == "compiled" and sim.info.path == "compiled"
    assert np.array_equal(sim.state.q, s.q) and np.array_equal(sim.state.tree_v, s.tree_v)
    assert sim.t == s.t and sim.step_count == s.step == 200
    assert np.array_equal(sim.info.actuator_force, info.actuator_force) and sim.info.limit_force == info.limit_force


def test_control_arrays_and_named_controls_convert_both_ways():
    """The arrays the compiled step takes and the named Controls of the reference step say the same."""
    from convexsim.controls import ControlArrays
    from convexsim.multibody.forest import Controls

    model, _, _ = prepare(PENDULUM)
    named = Controls.from_output({"targets": {"hinge": (0.3, -0.1)}, "torques": {"hinge": 0.7},
                                  "wrenches": {"bob": [0, 1, 0, 2, 0, 0]}}, model.forest, model.body_names)
    arrays = ControlArrays.from_controls(named, model)
    assert arrays.target.tolist() == [0.3] and arrays.target_velocity.tolist() == [-0.1]
    assert arrays.torque.tolist() == [0.7] and arrays.wrench.tolist() == [[0, 1, 0, 2, 0, 0]]
    back = arrays.to_controls(model)
    assert back.targets == {"hinge": (0.3, -0.1)} and back.torques["hinge"].tolist() == [0.7]
    assert back.wrenches["bob"].tolist() == [0, 1, 0, 2, 0, 0]
    arrays.clear()
    assert not arrays.active() and arrays.to_controls(model) is None
