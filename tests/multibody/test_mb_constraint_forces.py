"""Per-constraint forces in StepInfo (actuator_force/actuator_names, limit_force, constraint_force,
named_forces) from the SAP and LCP steps with trees and body constraints, against statics: at rest every
constraint carries exactly the load it holds (force balance of the resting bodies), whatever the row's
compliance (that moves the pose, not the force). Both solvers must give the same answer."""

from __future__ import annotations

import math

import numpy as np
import pytest

from convexsim.multibody import gravity_forces
from convexsim.multibody.forest import Controls
from convexsim.simulate import prepare
from convexsim.stepping import StepContext, step

G = 9.81
SOLVERS = {"sap": "", "lcp": "solver: {kind: lcp}\n"}


def run(text, duration, controls=None):
    model, state, _ = prepare(text)
    ctx = StepContext()
    ctx.controls = controls
    info = None
    for _ in range(round(duration / model.time_step)):
        state, info = step(model, state, ctx, **({"strict": True} if "lcp" not in text else {}))
    return model, state, info


@pytest.mark.parametrize("solver", SOLVERS)
def test_hanging_bob_on_a_distance_constraint_carries_m_g(solver):
    """A 1.3 kg bob hanging at rest 1 m below a world point on a rigid distance: the rope pulls with
    exactly m·g (reported as −m·g: the force on the bob along p_Q − p_P, which points down). Statics holds
    to the solver's tolerance (1e-9 relative measured); bound 1e-6 relative."""
    text = """
time_step: 0.001
bodies:
  - {name: bob, mass: 1.3, inertia: [1.0e-4, 1.0e-4, 1.0e-4], position: [0, 0, -1]}
constraints:
  - {type: distance, name: rope, body_a: world, body_b: bob}
""" + SOLVERS[solver]
    _, _, info = run(text, 0.3)
    assert info.constraint_force["rope"].shape == (1,)
    assert info.constraint_force["rope"][0] == pytest.approx(-1.3 * G, rel=1e-6)
    assert info.named_forces()["constraint:rope"][0] == info.constraint_force["rope"][0]


WELD_CHAIN = """
time_step: 0.001
bodies:
  - {name: a, mass: 1.0, inertia: [0.01, 0.01, 0.01], position: [0, 0, 1]}
  - {name: b, mass: 1.5, inertia: [0.02, 0.01, 0.03], position: [0.3, 0, 1], quaternion: [0.96, 0, 0.28, 0]}
constraints:
  - {type: weld, name: hold, body_a: world, body_b: a}
  - {type: weld, name: glue, body_a: a, body_b: b}
"""


@pytest.mark.parametrize("solver", SOLVERS)
def test_welded_chain_transmits_weight_and_the_torque_of_the_offset_mass(solver):
    """a welded to the world, b (COM 0.3 m along x from a's) welded to a. The weld acts at body_b's COM:
    'glue' holds b with f = m_b g ẑ and no torque; 'hold' holds both, f = (m_a + m_b) g ẑ, and the torque
    on a about its COM must cancel the moment of b's weight, τ = r × (m_b g ẑ) = (0, −0.3 m_b g, 0).
    Bound: 1e-6 of m g (forces) and of m_b g r (torques)."""
    ma, mb, r = 1.0, 1.5, 0.3
    _, _, info = run(WELD_CHAIN + SOLVERS[solver], 0.5)
    hold, glue = info.constraint_force["hold"], info.constraint_force["glue"]
    np.testing.assert_allclose(hold[:3], [0, 0, (ma + mb) * G], rtol=0, atol=1e-6 * (ma + mb) * G)
    np.testing.assert_allclose(hold[3:], [0, -r * mb * G, 0], rtol=0, atol=1e-6 * r * mb * G)
    np.testing.assert_allclose(glue, [0, 0, mb * G, 0, 0, 0], rtol=0, atol=1e-6 * mb * G)


ARM = """
time_step: 0.001
bodies:
  - {{name: upper, mass: 2.0, inertia: [0.02, 0.02, 0.002]}}
  - {{name: fore, mass: 1.2, inertia: [0.01, 0.01, 0.001]}}
joints:
  - {{name: shoulder, type: revolute, child: upper, axis: [0, 1, 0], position: [0, 0, 1.0],
      child_offset: [0, 0, 0.25], initial_position: 0.6}}
  - {{name: elbow, type: revolute, parent: upper, child: fore, axis: [0, 1, 0], position: [0, 0, 0.25],
      child_offset: [0, 0, 0.2], initial_position: -0.9}}
actuators:
  - {{joint: shoulder, kp: 2000, kd: 200, target: 0.6{effort}}}
  - {{joint: elbow, kp: 800, kd: 80, target: -0.9}}
"""


@pytest.mark.parametrize("solver", SOLVERS)
def test_arm_holding_a_pose_reports_the_gravity_torques(solver):
    """A two-link arm held by implicit PD: at rest the actuators apply exactly the gravity torques g(q) at
    the resting pose (M q̈ + C v + g = u with q̈ = v = 0), 1e-6 relative after 3 s (slowest mode ~e^(−5 t)
    of the PD's damping; residual velocity 1e-7). Names follow the actuators' joints."""
    model, state, info = run(ARM.format(effort="") + SOLVERS[solver], 3.0)
    g = gravity_forces(model.forest.trees[0].model, state.tree_q)
    assert np.abs(g).min() > 0.5
    assert info.actuator_names == ("shoulder", "elbow")
    np.testing.assert_allclose(info.actuator_force, g, rtol=1e-6)
    f = info.named_forces()
    assert f["actuator:elbow"][0] == info.actuator_force[1]


@pytest.mark.parametrize("solver", SOLVERS)
def test_actuator_at_its_effort_limit_reports_exactly_the_limit(solver):
    """The shoulder's effort (3 N·m) is far below the gravity torque it must hold (~8.8 N·m): within a few
    steps it saturates and then reports exactly ±3 N·m (the sign of the PD's pull back) every step (1e-12)."""
    model, state, _ = prepare(ARM.format(effort=", effort: 3.0") + SOLVERS[solver])
    ctx = StepContext()
    u = []
    for _ in range(200):
        state, info = step(model, state, ctx)
        u.append(info.actuator_force[0])
    u = np.array(u)
    first = int(np.argmax(np.abs(u) >= 3.0 - 1e-12))
    assert 0 < first < 20
    assert np.all(np.abs(np.abs(u[first:]) - 3.0) <= 1e-12)
    assert np.all(np.sign(u[first:]) == np.sign(u[first]))


LIMITED = """
time_step: 0.001
bodies:
  - {name: bob, mass: 0.8, inertia: [1.0e-9, 1.0e-9, 1.0e-9]}
joints:
  - {name: hinge, type: revolute, child: bob, axis: [0, 1, 0], position: [0, 0, 2.0],
     child_offset: [0, 0, -0.7], initial_position: 1.0, lower: 0.3, upper: 1.5}
"""


@pytest.mark.parametrize("solver", SOLVERS)
def test_pendulum_resting_on_its_lower_limit_reports_m_g_l_sin(solver):
    """Released at 1 rad, the pendulum (m = 0.8 kg, L = 0.7 m) falls onto its lower limit 0.3 rad and rests
    there: the limit pushes q up with exactly m g L sin(q) at the resting q (SAP's q is beyond 0.3 by its
    compliance dt² τ/(200π² m L²) ≈ 1e-8 rad, the LCP's is on it). 1e-6 relative."""
    m, L = 0.8, 0.7
    _, state, info = run(LIMITED + SOLVERS[solver], 3.0)
    assert abs(state.tree_q[0] - 0.3) < 1e-6
    assert info.limit_force["hinge"] == pytest.approx(m * G * L * math.sin(state.tree_q[0]), rel=1e-6)
    assert info.named_forces()["limit:hinge"][0] == info.limit_force["hinge"]


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("force", [10.0, -10.0])
def test_slider_pushed_into_a_limit_reports_the_push_with_the_limits_sign(solver, force):
    """Drake's limit case (1 kg slider, limits [0, 0.1] m, ±10 N, no gravity): at rest the limit returns
    the push, −F: negative on the upper limit, positive on the lower one (1e-9 relative)."""
    text = """
time_step: 0.001
gravity: [0, 0, 0]
bodies:
  - {name: box, mass: 1.0, inertia: [1.0e-3, 1.0e-3, 1.0e-3]}
joints:
  - {name: slide, type: prismatic, child: box, axis: [1, 0, 0], lower: 0.0, upper: 0.1, initial_position: 0.05}
""" + SOLVERS[solver]
    _, _, info = run(text, 1.0, Controls(torques={"slide": force}))
    assert info.limit_force["slide"] == pytest.approx(-force, rel=1e-9)


@pytest.mark.parametrize("solver", SOLVERS)
def test_free_pendulum_reports_zero_limit_force(solver):
    """A limit that is not active reports 0 (the pendulum swings between its limits, never touching them)."""
    _, _, info = run(LIMITED.replace("lower: 0.3, upper: 1.5", "lower: -1.2, upper: 1.2") + SOLVERS[solver], 0.2)
    assert info.limit_force == {"hinge": 0.0}


def test_trajectory_records_the_named_forces_and_older_files_still_load(tmp_path):
    """A run records every step's named forces (frame 0: zeros); they survive save/load; a file written
    without the two fields (as before they existed) loads with no forces; `convexsim info` prints them."""
    import contextlib
    import io

    from convexsim.cli import main
    from convexsim.io import load_trajectory, save_trajectory
    from convexsim.simulate import simulate

    traj = simulate(WELD_CHAIN, duration=0.2, record_every=10)
    names = [str(n) for n in traj.constraint_force_names]
    assert names == ["constraint:hold", "constraint:glue"]
    assert traj.constraint_force.shape == (traj.num_frames, 2, 6)
    assert np.all(traj.constraint_force[0] == 0.0)
    np.testing.assert_allclose(traj.forces_of("constraint:glue")[-1], [0, 0, 1.5 * G, 0, 0, 0], atol=1e-5)
    path = save_trajectory(tmp_path / "w.npz", traj)
    back = load_trajectory(path)
    np.testing.assert_array_equal(back.constraint_force, traj.constraint_force)
    with np.load(path) as data:
        old = {k: data[k] for k in data.files if not k.startswith("constraint_force")}
    np.savez(tmp_path / "old.npz", **old)
    legacy = load_trajectory(tmp_path / "old.npz")
    assert legacy.constraint_force.shape == (traj.num_frames, 0, 6)
    with pytest.raises(KeyError, match="no force named 'limit:x'"):
        back.forces_of("limit:x")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["info", str(path)]) == 0
    assert "constraint:glue" in out.getvalue() and "14.72" in out.getvalue()


COUPLED = """
time_step: 0.001
bodies:
  - {name: bob, mass: 1.0, inertia: [1.0e-4, 1.0e-4, 1.0e-4]}
  - {name: wheel, mass: 2.0, inertia: [0.05, 0.05, 0.1]}
joints:
  - {name: swing, type: revolute, child: bob, axis: [0, 1, 0], position: [0, 0, 2], child_offset: [0, 0, -0.5]}
  - {name: turn, type: revolute, child: wheel, axis: [0, 0, 1], position: [1, 0, 0], damping: 2.0}
actuators:
  - {joint: turn, kp: 50, kd: 5, target: 0.2}
constraints:
  - {type: coupler, name: gear, joint: swing, reference: turn, ratio: 2.0, offset: 0.1}
"""


@pytest.mark.parametrize("solver", SOLVERS)
def test_coupler_force_holds_the_pendulum_and_the_wheels_actuator_returns_rho_times_it(solver):
    """A pendulum (1 kg, 0.5 m) geared to a PD-held wheel, q_swing = 2 q_turn + 0.1, at rest after 3 s: the
    coupler holds the swing against gravity, f = m g l sin(q_swing), and the wheel receives −ρ f, which its
    actuator returns: u = ρ f. Within 1e-3 relative, the bound of the same scene's steady-state check in
    test_mb_body_constraints (the lightly damped swing has not fully settled at 3 s: 2e-4 measured)."""
    _, state, info = run(COUPLED + SOLVERS[solver], 3.0)
    f = info.constraint_force["gear"][0]
    assert abs(f) > 0.5
    assert f == pytest.approx(1.0 * G * 0.5 * math.sin(state.tree_q[0]), rel=1e-3)
    assert info.actuator_force[0] == pytest.approx(2.0 * f, rel=1e-3)
