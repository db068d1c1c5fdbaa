"""External body wrenches on the compiled steps (SAP and LCP): a wrench w = (τ_W, f_W) at a body's centre of
mass enters the free motion as v*_b += dt·M_b⁻¹w (free bodies) or as the generalized force J_bᵀw (tree links),
on the compiled path as on the reference.

Oracles: the free motion of the reference step (``dynamics.free_motion``, ``free_motion.assemble`` with
``multibody.forest.link_wrench_torques``), to round-off; whole controlled runs of both paths; and closed forms
no path can tune: a = F/m, Newton–Euler's angular acceleration, a pendulum held where gravity's torque is
r × F.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from convexsim import dynamics
from convexsim.controls import ControlArrays
from convexsim.sim import Simulation
from convexsim.simulate import prepare
from convexsim.stepping.free_motion import assemble
from convexsim.stepping.free_motion import body_free_motion, dense_free_motion
from convexsim.stepping.packing import packed, packed_forest
from tests.scripting.scripting_helpers import drive

ROUNDOFF = 1e-12
"""Relative bound of a compiled stage against its reference: the same sums in another order (a 3 × 3 LU
against LAPACK's, the wrench added after the gyroscopic term or with it; measured a few 1e-16)."""

BOX = """
gravity: [0, 0, -9.81]
time_step: 1.0e-3
bodies:
  - {name: box, mass: 2.0, position: [0, 0, 1], geometries: [{shape: box, size: [0.2, 0.4, 0.6]}],
     quaternion: [0.8, 0.36, 0.48, 0.0]}
"""
"""A free 2 kg box of sides (0.2, 0.4, 0.6) m turned off its principal axes, in the air (no contact)."""

PENDULUM = """
gravity: [0, 0, -9.81]
time_step: 1.0e-3
bodies:
  - {name: bob, mass: 1.0, geometries: [{shape: sphere, radius: 0.05}]}
joints:
  - {name: hinge, type: revolute, child: bob, axis: [0, 1, 0], position: [0, 0, 1.5], child_offset: [0, 0, -1],
     initial_position: 0.4}
"""
"""A 1 m pendulum about y (1 kg bob), no actuator, no contact."""


def _close(a, b, what):
    scale = max(1.0, float(np.abs(b).max(initial=0.0)))
    assert np.abs(np.asarray(a) - np.asarray(b)).max(initial=0.0) <= ROUNDOFF * scale, what


def _arrays(state):
    return tuple(np.ascontiguousarray(x, dtype=float) for x in (state.q, state.v, state.tree_q, state.tree_v))


def test_free_body_wrenches_in_the_free_motion_equal_the_reference():
    """box_stack's free bodies turning and moving, a random wrench on each: the compiled free motion (A, v*)
    equals ``dynamics.free_motion``'s to ROUNDOFF."""
    model, state, _ = prepare("box_stack")
    rng = np.random.default_rng(1)
    state.v[:] = rng.normal(0.0, 2.0, state.v.shape)
    wrench = rng.normal(0.0, 5.0, (model.nbody, 6))
    pm = packed(model)
    mb = pm.model_arrays
    q, v, _, _ = _arrays(state)
    A, v_star = body_free_motion(pm.fpar, mb[0], mb[2], mb[4], mb[5], q, v, mb[3], wrench)
    A_ref, vs_ref = dynamics.free_motion(model, state, wrench)
    _, vs_none = dynamics.free_motion(model, state)
    _close(A, A_ref.reshape(-1), "A")
    _close(v_star, vs_ref, "v* with wrenches")
    assert np.abs(vs_ref - vs_none).max() > 1e-3          # the wrenches did act


def test_link_and_body_wrenches_and_torques_in_the_tree_free_motion_equal_the_reference():
    """iiwa_push moving (the arm's links and the free box), random wrenches on every body and torques on
    every joint: the compiled dense free motion (the LCP's, built on the SAP tree step's stage) equals
    ``free_motion.assemble``'s (joint torques, J_bᵀw on links, M⁻¹w on the box) to ROUNDOFF."""
    model, state, _ = prepare("iiwa_push")
    rng = np.random.default_rng(2)
    state.tree_v[:] = rng.normal(0.0, 0.5, state.tree_v.shape)
    controls = ControlArrays.empty(model)
    controls.wrench[:] = rng.normal(0.0, 5.0, controls.wrench.shape)
    controls.torque[:] = rng.normal(0.0, 5.0, controls.torque.shape)
    pm, pf = packed(model), packed_forest(model)
    q, v, tq, tv = _arrays(state)
    A, v_star, _ = dense_free_motion(pm.fpar, pm.model_arrays, pf.fa, q, v, tq, tv, controls.torque.copy(),
                                     controls.wrench)
    system = assemble(model, state, controls.to_controls(model))
    _close(A, system.A, "A")
    _close(v_star, system.v_star, "v* with torques and wrenches")
    bare = assemble(model, state)
    assert np.abs(system.v_star - bare.v_star).max() > 1e-3


def _drive(scene, solver, path, steps, set_controls):
    return drive(scene, steps, set_controls, solver=solver, path=path)


def _push_link_and_box(sim):
    """A wrench on the iiwa's last link (a force and a torque turning with time) and a push on the box."""
    t = sim.t
    sim.set_wrench("iiwa_link_7", force=(4.0 * math.sin(6 * t), 3.0, -2.0),
                   torque=(0.0, 0.5 * math.cos(4 * t), 0.2))
    sim.set_wrench("box", force=(2.0 * math.sin(3 * t), 1.0, 0.0), torque=(0.0, 0.0, 0.1))


@pytest.mark.parametrize("solver, steps, q_bound", [("sap", 200, 1e-6), ("lcp", 60, 1e-9)])
def test_runs_with_wrenches_take_the_compiled_step_and_equal_the_reference(solver, steps, q_bound):
    """iiwa_push with wrenches on a link and on the box every step: every step compiled, the same contact
    counts, states equal to the reference path's within the bounds of the solvers' own comparisons (SAP:
    tests/scripting/test_compiled_controls.py, 1e-6 on q and 1e-5·(1 + max |v|) on v, the two SAP solves meeting
    the relative tolerance 1e-6; LCP: tests/multibody/test_mb_lcp_compiled.py, 1e-9 with the same pivots).
    Measured: at most 7e-16 (SAP) and 2e-16 (LCP), round-off."""
    sc, ic = _drive("iiwa_push", solver, "auto", steps, _push_link_and_box)
    sr, ir = _drive("iiwa_push", solver, "reference", steps, _push_link_and_box)
    assert all(i.path == "compiled" for i in ic)
    assert [i.contacts.count for i in ic] == [i.contacts.count for i in ir]
    v_bound = q_bound if solver == "lcp" else 1e-5 * (1.0 + max(float(np.abs(s.tree_v).max()) for s in sr))
    for a, r in zip(sc, sr):
        assert np.abs(a.tree_q - r.tree_q).max() <= q_bound and np.abs(a.q - r.q).max() <= q_bound
        assert np.abs(a.tree_v - r.tree_v).max() <= v_bound and np.abs(a.v - r.v).max() <= v_bound
    if solver == "lcp":
        assert [i.pivots for i in ic] == [i.pivots for i in ir]
    bare, _ = _drive("iiwa_push", solver, "auto", steps, lambda sim: None)
    assert np.abs(bare[-1].tree_q - sc[-1].tree_q).max() > 1e-4        # the wrenches did move the arm


@pytest.mark.parametrize("solver", ["sap", "lcp"])
def test_a_force_on_a_free_body_gives_f_over_m(solver):
    """The box in the air under f = (3, −1, m·g + 2) N at its COM: on the compiled step, v_n = n·dt·a with
    a = f/m + g, and x_n = dt²·a·n(n+1)/2 (symplectic Euler), to round-off (1e-12 m, m/s)."""
    sim = Simulation(BOX, solver=solver)
    m, dt, n = 2.0, sim.model.time_step, 300
    f = np.array([3.0, -1.0, m * 9.81 + 2.0])
    a = f / m + np.array([0.0, 0.0, -9.81])
    x0 = sim.body_pose("box")[:3]
    sim.set_wrench("box", force=f)
    sim.step(n)
    assert sim.info.path == "compiled"
    assert np.abs(sim.body_velocity("box")[3:] - n * dt * a).max() <= 1e-12
    assert np.abs(sim.body_pose("box")[:3] - x0 - dt ** 2 * a * n * (n + 1) / 2).max() <= 1e-12
    assert np.abs(sim.body_velocity("box")[:3]).max() == 0.0


def _quat_matrix(qw, qx, qy, qz):
    """R(q) of a unit quaternion (w, x, y, z), written out."""
    return np.array([[1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy - qw * qz), 2 * (qx * qz + qw * qy)],
                     [2 * (qx * qy + qw * qz), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz - qw * qx)],
                     [2 * (qx * qz - qw * qy), 2 * (qy * qz + qw * qx), 1 - 2 * (qx * qx + qy * qy)]])


@pytest.mark.parametrize("solver", ["sap", "lcp"])
def test_a_torque_gives_the_angular_acceleration_of_newton_euler(solver):
    """The turned box under τ = (0.3, −0.2, 0.5) N·m: every step, ω₁ − ω₀ = dt·I_W⁻¹(τ − ω₀ × I_W ω₀) with
    I_W = R I_B Rᵀ at the step's start (I_B of the box's sides, R of its quaternion, both built here), on the
    compiled step, to round-off (1e-12 relative); the COM does not move sideways (gravity only)."""
    sim = Simulation(BOX, solver=solver)
    m, dt = 2.0, sim.model.time_step
    a, b, c = 0.2, 0.4, 0.6
    I_B = m / 12 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    tau = np.array([0.3, -0.2, 0.5])
    sim.set_wrench("box", torque=tau)
    for k in range(100):
        w0 = sim.body_velocity("box")[:3]
        R = _quat_matrix(*sim.body_pose("box")[3:])
        I_W = R @ I_B @ R.T
        sim.step()
        assert sim.info.path == "compiled"
        expected = w0 + dt * np.linalg.solve(I_W, tau - np.cross(w0, I_W @ w0))
        w1 = sim.body_velocity("box")[:3]
        assert np.abs(w1 - expected).max() <= 1e-12 * max(1.0, np.abs(expected).max()), k
    assert np.abs(w1).max() > 0.1 and np.abs(sim.body_pose("box")[:2]).max() == 0.0


@pytest.mark.parametrize("solver", ["sap", "lcp"])
def test_a_force_on_a_pendulum_link_holds_it_where_gravity_torque_is_r_cross_f(solver):
    """A horizontal force f_x on the bob at angle q₀ = 0.4 rad: the hinge torque of the force,
    (r × f)·ŷ = −L cos q₀ f_x (r = L (sin q₀, 0, −cos q₀)), cancels gravity's −m g L sin q₀ for
    f_x = −m g tan q₀: the link's wrench goes through its Jacobian on the compiled step and the pendulum stays
    at q₀ (to round-off: 1e-12 rad over 500 steps); with half that force it swings (a check that it acts)."""
    held = Simulation(PENDULUM, solver=solver)
    q0 = held.qpos("hinge")
    f_x = -1.0 * 9.81 * math.tan(q0)
    held.set_wrench("bob", force=(f_x, 0.0, 0.0))
    half = held.copy()
    half.set_wrench("bob", force=(0.5 * f_x, 0.0, 0.0))
    for sim in (held, half):
        sim.step(500)
        assert sim.info.path == "compiled"
    assert abs(held.qpos("hinge") - q0) <= 1e-12 and abs(held.qvel("hinge")) <= 1e-12
    assert abs(half.qpos("hinge") - q0) > 1e-2


def test_a_python_controller_returning_wrenches_runs_on_compiled_steps():
    """run_model(controller=fn) with wrenches on a link and on the box: every step is the compiled single step
    (no slow-path warning, the summary's path says so), and the run equals the same wrenches set through
    Simulation (the run kernel, n steps per call) bit for bit: one kernel, the same arithmetic."""
    import warnings

    from convexsim.simulate import SlowPathWarning, run_model

    link, box = [0.1, 0.0, 0.2, 1.0, 2.0, -3.0], [0.0, 0.0, 0.1, 2.0, 1.0, 0.0]
    model, state, _ = prepare("iiwa_push")
    with warnings.catch_warnings():
        warnings.simplefilter("error", SlowPathWarning)
        traj, stats = run_model(model, state, duration=0.05,
                                controller=lambda m, s: {"wrenches": {"iiwa_link_7": link, "box": box}})
    assert stats.path.startswith("compiled step, one call per step")
    sim = Simulation.from_model(model, state)
    sim.set_wrench("iiwa_link_7", force=link[3:], torque=link[:3])
    sim.set_wrench("box", force=box[3:], torque=box[:3])
    sim.step(50)
    assert np.array_equal(sim.state.q[:, :3], traj.position[-1])


def test_the_two_call_step_takes_the_wrenches_as_the_run_kernel():
    """The compiled single step in two kernel calls (the path of an island above the dense limit; forced here
    by the step context's routing hint, which changes nothing else) equals the one-call step with the same
    wrenches bit for bit: both hand the same controls to the same stages."""
    from convexsim.stepping import StepContext, step

    model, state, _ = prepare("box_stack")
    controls = ControlArrays.empty(model)
    controls.wrench[1:, 3] = 4.0                      # push every box along x
    controls.wrench[1:, 2] = 0.3
    out = []
    for two_calls in (False, True):
        s, ctx = state, StepContext(controls=controls)
        for _ in range(30):
            ctx.big_islands = two_calls
            s, info = step(model, s, ctx)
            assert info.path == "compiled"
        out.append(s)
    assert np.array_equal(out[0].q, out[1].q) and np.array_equal(out[0].v, out[1].v)
    assert np.abs(out[0].v[1:, 3]).max() > 1e-3       # the pushes acted
