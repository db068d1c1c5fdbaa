"""Compiled controllers (``convexsim.controllers``): a numba control law the run loop calls before every step.

Oracle: the same law as a Python controller (``run_model(controller=fn)``) drives the same compiled step one
call per step; the two runs build identical problems from identical controls, so their trajectories agree to
round-off (measured: bit-identical; bound 1e-12 m, far below the SAP tolerance, so a law that skipped or
shifted a step would fail). And the motors' clamp in the kernel equals its numpy reference.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from convexsim.controllers import compiled_controller
from convexsim.simulate import SlowPathWarning, prepare, run_model

DURATION = 0.3
JOINT2 = 1           # iiwa_push's actuator order: iiwa_joint_1 … iiwa_joint_7


@compiled_controller(params=[0.800688, 0.1, 2.0 * math.pi * 2.0])
def sine_target(t, q, v, tree_q, tree_v, target, target_velocity, torque, wrench, params):
    """Joint 2's target q_d = q0 + a·sin(ω t), v_d = a·ω·cos(ω t) (params = q0, a, ω)."""
    target[1] = params[0] + params[1] * np.sin(params[2] * t)
    target_velocity[1] = params[1] * params[2] * np.cos(params[2] * t)


@compiled_controller
def torques(t, q, v, tree_q, tree_v, target, target_velocity, torque, wrench, params):
    """3 N·m·sin(2π (1 + j/2) t) on every joint j."""
    for j in range(torque.shape[0]):
        torque[j] = 3.0 * np.sin(2.0 * np.pi * (1.0 + 0.5 * j) * t)


@compiled_controller(params=[-1.0, 2.0, 0.5])
def box_wrench(t, q, v, tree_q, tree_v, target, target_velocity, torque, wrench, params):
    """A force (2 N along y, then 0.5 N·m about z from t = 0.1 s) on body params[0] (set by the test)."""
    b = int(params[0])
    wrench[b, 4] = params[1]
    if t >= 0.1:
        wrench[b, 2] = params[2]


def _python_box_wrench(model, state):
    return {"wrenches": {"box": (0.0, 0.0, 0.5 if state.t >= 0.1 else 0.0, 0.0, 2.0, 0.0)}}


def _python_sine(model, state):
    q0, a, w = sine_target.params
    return {"targets": {"iiwa_joint_2": (q0 + a * math.sin(w * state.t), a * w * math.cos(w * state.t))}}


def _python_torques(model, state):
    names = [n for t in model.forest.trees for n in t.joint_names]
    return {"torques": {n: 3.0 * math.sin(2.0 * math.pi * (1.0 + 0.5 * j) * state.t) for j, n in enumerate(names)}}


@pytest.mark.parametrize("law, python", [(sine_target, _python_sine), (torques, _python_torques),
                                          (box_wrench, _python_box_wrench)],
                         ids=["sine target", "torques on all seven", "wrench on the box"])
def test_a_compiled_law_equals_the_same_python_controller(law, python):
    model, state, _ = prepare("iiwa_push")
    if law is box_wrench:                       # the box's row in q and in the wrench array
        law = law.with_params([model.body_names.index("box"), *law.params[1:]])
    ours, _ = run_model(model, state, duration=DURATION, controller=law)
    assert "compiled controller" in ours.metadata["path"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SlowPathWarning)
        ref, _ = run_model(model, state, duration=DURATION, controller=python)
    assert ours.position.shape == ref.position.shape
    assert np.abs(ours.position - ref.position).max() < 1e-12
    free, _ = run_model(model, state, duration=DURATION)
    assert np.abs(ours.position - free.position).max() > 1e-4        # the law did drive the arm (or the box)


def test_a_second_law_reuses_the_compiled_run_loop():
    """Every law has the same numba type: the run loop has one compiled specialization for all of them."""
    from convexsim.stepping.sap_composition import run_kernel

    model, state, _ = prepare("iiwa_push")
    run_model(model, state, duration=0.01, controller=sine_target)
    n = len(run_kernel.signatures)
    run_model(model, state, duration=0.01, controller=torques)
    run_model(model, state, duration=0.01, controller=sine_target.with_params([0.8, 0.2, 3.0]))
    assert len(run_kernel.signatures) == n


def test_params_reach_the_law_and_a_run_without_one_is_refused_clearly():
    model, state, _ = prepare("iiwa_push")
    a, _ = run_model(model, state, duration=0.1, controller=sine_target)
    b, _ = run_model(model, state, duration=0.1, controller=sine_target.with_params([0.800688, 0.3, 12.0]))
    assert np.abs(a.position - b.position).max() > 1e-5
    from convexsim.errors import InputError

    lcp_model, lcp_state, _ = prepare("iiwa_push", solver="lcp")
    with pytest.raises(InputError, match="compiled controller runs inside the compiled SAP run loop"):
        run_model(lcp_model, lcp_state, duration=0.01, controller=sine_target)
    with pytest.raises(ValueError, match="1-d"):
        sine_target.with_params(np.zeros((2, 2)))


def test_motor_clamp_kernel_equals_its_numpy_reference():
    from convexsim.multibody.forest import Motor, motor_forces
    from convexsim.stepping.free_motion import motor_forces_kernel

    rng = np.random.default_rng(5)
    tau = rng.normal(0.0, 3.0, 9)
    dof = np.array([0, 4, 7], np.int64)
    tau0, effort = np.array([0.5, -1.0, 2.0]), np.array([1.0, math.inf, 2.5])
    out = np.empty(9)
    motor_forces_kernel(dof, tau0, effort, tau, out)
    ref = motor_forces(tuple(Motor(f"m{i}", int(d), float(t), float(e)) for i, (d, t, e) in
                             enumerate(zip(dof, tau0, effort))), tau)
    assert np.array_equal(out, ref)
    assert abs(out[0]) <= 1.0 and abs(out[7]) <= 2.5 and out[4] == tau[4] - 1.0
