"""Welds, fixed distances and joint couplers between bodies of different trees, free bodies and the world
(scene ``constraints:``; their rows in convexsim.stepping.sap_rows): the Jacobian of each constraint function
by finite differences, cost → impulse → Hessian by finite differences, and the physics against analytic
answers (distance pendulum period, weld sag m·g/k and the near-rigid compliance, coupler compliance,
welded bodies resting on the ground under contact)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from convexsim.sap.joint_constraints import BETA_JOINT, eval_rows
from convexsim.scene import SceneError
from convexsim.simulate import prepare
from convexsim.spatial import quat_exp, quat_log, quat_to_matrix, rotation_log
from convexsim.stepping import StepContext, step
from convexsim.stepping.free_motion import assemble
from convexsim.stepping.integration import finish_step
from convexsim.stepping.sap_rows import (body_constraint_jacobian, body_constraint_rows, body_constraint_values,
                                         left_jacobian_inverse)
from convexsim.stepping.types import SimulationError
from convexsim.multibody.forest import write_link_rows

G = 9.81

MIXED = """
time_step: 0.001
gravity: [0, 0, -9.81]
bodies:
  - {name: post, fixed: true, position: [0.3, -0.2, 1.0], quaternion: [0.5, 0.5, 0.5, 0.5]}
  - {name: l1, mass: 1.0, inertia: [0.02, 0.03, 0.04]}
  - {name: l2, mass: 0.7, inertia: [0.01, 0.02, 0.015]}
  - {name: w1, mass: 0.5, inertia: [0.004, 0.004, 0.006]}
  - {name: box, mass: 2.0, position: [0.4, 0.1, 0.5], quaternion: [0.7, 0.1, -0.7, 0.1], inertia: [0.05, 0.07, 0.09]}
  - {name: ball, mass: 0.3, position: [-0.3, 0.2, 0.8], inertia: [0.001, 0.001, 0.001]}
joints:
  - {name: j1, type: revolute, child: l1, axis: [0, 1, 0], position: [0, 0, 1.5], child_offset: [0, 0, -0.3],
     initial_position: 0.4, initial_velocity: 0.3}
  - {name: j2, type: revolute, parent: l1, child: l2, axis: [1, 0, 0], position: [0, 0, -0.3],
     child_offset: [0, 0.1, -0.2], initial_position: -0.7}
  - {name: j3, type: prismatic, parent: post, child: w1, axis: [0, 0, 1], initial_position: 0.05}
constraints:
  - {type: weld, name: glue, body_a: l2, body_b: box}
  - {type: weld, name: pin, body_a: world, body_b: ball}
  - {type: distance, name: rope, body_a: post, body_b: ball, point_a: [0.1, 0, 0], point_b: [0, 0.02, 0.01]}
  - {type: distance, name: strut, body_a: box, body_b: l1, point_a: [0.05, 0.05, 0], point_b: [0, 0, 0.1],
     distance: 0.7}
  - {type: coupler, name: gear, joint: j1, reference: j3, ratio: 2.0, offset: 0.1}
  - {type: weld, name: glue2, body_a: w1, body_b: l2}
"""


def _perturbed(seed=0):
    """The MIXED model at a random state (orientations, joint coordinates), so welds carry finite
    rotation errors and distances are off their lengths."""
    model, state, _ = prepare(MIXED)
    rng = np.random.default_rng(seed)
    q = state.q.copy()
    for b in (4, 5):
        quat = rng.normal(size=4)
        q[b, 3:] = quat / np.linalg.norm(quat)
        q[b, :3] += 0.1 * rng.normal(size=3)
    tq = state.tree_q + 0.5 * rng.normal(size=state.tree_q.size)
    tv = rng.normal(size=state.tree_v.size)
    v = state.v.copy()
    write_link_rows(model.forest, q, v, tq, tv)
    return model, dataclasses.replace(state, q=q, v=v, tree_q=tq, tree_v=tv), rng


def test_rotation_log_and_left_jacobian():
    """exp(log R) = R, including near π; J_l⁻¹ is the inverse of J_l = I + (1−cos a)/a² S + (a − sin a)/a³ S²."""
    from scipy.spatial.transform import Rotation
    rng = np.random.default_rng(3)
    for _ in range(20):
        th = rng.normal(size=3)
        th *= rng.uniform(0, math.pi) / np.linalg.norm(th)
        R = Rotation.from_rotvec(th).as_matrix()
        assert np.allclose(rotation_log(R), th, atol=1e-9)
        a = np.linalg.norm(th)
        S = np.array([[0, -th[2], th[1]], [th[2], 0, -th[0]], [-th[1], th[0], 0]])
        Jl = np.eye(3) + (1 - math.cos(a)) / a ** 2 * S + (a - math.sin(a)) / a ** 3 * S @ S
        assert np.allclose(left_jacobian_inverse(th) @ Jl, np.eye(3), atol=1e-10)
    th = np.array([0.0, 0.0, math.pi - 1e-8])
    assert np.allclose(Rotation.from_rotvec(rotation_log(Rotation.from_rotvec(th).as_matrix())).as_matrix(),
                       Rotation.from_rotvec(th).as_matrix(), atol=1e-7)


def test_quat_log_inverts_quat_exp():
    """quat_log(±quat_exp(θ)) = θ for |θ| < π, to 1e-15 relative at 1e-9 rad (no loss of precision at small
    angles: the angle comes from atan2, not from acos of a number near 1) and to 1e-12 rad elsewhere."""
    rng = np.random.default_rng(4)
    for scale in (1e-9, 1e-6, 1e-3, 1.0, math.pi - 1e-3):
        for _ in range(5):
            th = rng.normal(size=3)
            th *= scale / np.linalg.norm(th)
            q = quat_exp(th)
            for sign in (1.0, -1.0):
                err = np.linalg.norm(quat_log(sign * q) - th)
                assert err <= max(1e-15 * scale, 1e-12 * min(scale, 1.0)), (scale, err)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_constraint_jacobians_are_the_derivatives_of_the_constraint_functions(seed):
    """ġ = J v: central differences of g along the step's own integrator (free bodies: exact exponential
    map, trees: integrate_q) with step h = 1e-5 s. Truncation is O(h^2)|g'''| (about 1e-8 at h = 1e-4,
    so about 1e-10 here); round-off is eps|g|/h amplified by the rotation log near pi (seed 2's weld error
    is a 3.08 rad rotation, 1/sin(theta) = 16): measured 1e-7 at h = 1e-6 and 4e-7 at 1e-7 on one machine,
    8e-9 at h = 1e-5. So 1e-7 absolute keeps a 10x margin at this h; the largest |g'| is O(1)."""
    model, state, rng = _perturbed(seed)
    system = assemble(model, state)
    h = 1e-5
    mh = dataclasses.replace(model, time_step=h)
    v = rng.normal(size=system.nv)
    plus = finish_step(mh, state, system, v)
    minus = finish_step(mh, state, system, -v)
    for c in model.forest.constraints:
        J = body_constraint_jacobian(model, state, system, c)
        fd = (body_constraint_values(model, plus, c) - body_constraint_values(model, minus, c)) / (2 * h)
        assert np.allclose(J @ v, fd, atol=1e-7, rtol=0), (c.name, J @ v, fd)
        assert np.max(np.abs(J @ v)) > 1e-3, c.name          # the test moves every constraint


def test_cost_impulse_and_hessian_by_finite_differences():
    """ℓ(v) = Σ_r ℓ_r(J_r v) of all body-constraint rows: −∂ℓ/∂v = Jᵀγ and ∂²ℓ/∂v² = Jᵀ diag(G) J by central
    differences (h = 1e-6; ℓ is quadratic in each row here, so only round-off ε|ℓ|/h remains)."""
    model, state, rng = _perturbed(4)
    system = assemble(model, state)
    J, par, kinds, owners = body_constraint_rows(model, state, system, np.diag(system.A))
    assert J.shape[0] == 6 + 6 + 1 + 1 + 1 + 6 and len(set(c for c, _ in owners)) == 6

    def ell(v):
        g, Gd = np.zeros(par.shape[0]), np.zeros(par.shape[0])
        return eval_rows(par, np.ascontiguousarray(J @ v), g, Gd), g, Gd

    v = rng.normal(size=system.nv)
    l0, gamma, Gd = ell(v)
    h = 1e-6
    grad = np.array([(ell(v + h * e)[0] - ell(v - h * e)[0]) / (2 * h) for e in np.eye(system.nv)])
    assert np.allclose(-grad, J.T @ gamma, rtol=1e-6, atol=1e-6 * max(1.0, abs(l0)) / h * 1e-6 + 1e-6)
    H = J.T @ (Gd[:, None] * J)
    Hfd = np.array([-(J.T @ (ell(v + h * e)[1] - ell(v - h * e)[1])) / (2 * h) for e in np.eye(system.nv)])
    assert np.allclose(H, Hfd, rtol=1e-5, atol=1e-5 * np.abs(H).max())
    assert np.all(np.linalg.eigvalsh(H) > -1e-9 * np.abs(H).max())


def run(text, duration, record=None):
    model, state, _ = prepare(text)
    ctx = StepContext()
    for _ in range(round(duration / model.time_step)):
        state, info = step(model, state, ctx, strict=True)
        if record is not None:
            record(model, state, info)
    return model, state


PENDULUM = """
time_step: 0.001
bodies:
  - {{name: bob, mass: 1.0, inertia: [1.0e-6, 1.0e-6, 1.0e-6],
      position: [{x}, 0, {z}]}}
constraints:
  - {{type: distance, name: rope, body_a: world, body_b: bob}}
"""


def test_distance_pendulum_period():
    """A bob hanging from a world point on a rigid distance constraint, L = 1 m, θ0 = 0.1 rad: the rope
    acts at the COM so the bob's spin decouples and this is the mathematical pendulum. Period
    2π√(L/g) within 0.5 % (small-angle claim), and within 1e-4 of 2π√(L/g)(1 + θ0²/16) (the finite
    amplitude correction; the step's O(dt²) period error ~1e-7 and the O(θ0⁴) term 1e-5 are far below)."""
    state = _check_rope_pendulum_period("", 4.5)
    assert abs(np.linalg.norm(state.q[0, :3]) - 1.0) < 1e-6            # the rope keeps its length


def _check_rope_pendulum_period(extra_yaml: str, duration: float, th0: float = 0.1):
    """Run PENDULUM released at θ0 (plus ``extra_yaml``) and check its period: 2π√(L/g) within 0.5 % and
    2π√(L/g)(1 + θ0²/16) within 1e-4 (zero crossings of x, linearly interpolated). Returns the last state."""
    xs = []
    model, state = run(PENDULUM.format(x=math.sin(th0), z=-math.cos(th0)) + extra_yaml, duration,
                       record=lambda m, s, i: xs.append(s.q[0, 0]))
    xs = np.array(xs)
    i = np.flatnonzero((xs[:-1] > 0) & (xs[1:] <= 0))
    period = np.mean(np.diff((i + xs[i] / (xs[i] - xs[i + 1])) * model.time_step))
    T0 = 2 * math.pi * math.sqrt(1.0 / G)
    assert i.size >= 2
    assert abs(period / T0 - 1) < 5e-3
    assert abs(period / (T0 * (1 + th0 ** 2 / 16)) - 1) < 1e-4
    return state


WELD_CHAIN = """
time_step: 0.001
bodies:
  - {{name: a, mass: {ma}, inertia: [0.01, 0.01, 0.01], position: [0, 0, 1]}}
  - {{name: b, mass: {mb}, inertia: [0.02, 0.01, 0.03], position: [0.3, 0, 1], quaternion: [0.96, 0, 0.28, 0]}}
constraints:
  - {{type: weld, name: hold, body_a: world, body_b: a}}
  - {{type: weld, name: glue, body_a: a, body_b: b{extra}}}
"""


def _weld_error(model, state, c):
    return body_constraint_values(model, state, model.forest.constraints[c])


def test_compliant_weld_sags_m_g_over_k():
    """b welded to a (itself welded rigidly to the world) with stiffness k = 1e4 N/m and τ = 2√(m/k)
    (critical damping): at rest the weld carries b's weight, so b sits m_b·g/k below its place, along
    −z only, and does not rotate (the weld acts at b's COM, gravity makes no torque about it). Within 1 %
    after 1.5 s (the damped transient is e^{−1.5/0.02·...} ≈ 0)."""
    mb, k = 1.5, 1.0e4
    tau = 2 * math.sqrt(mb / k)
    model, state = run(WELD_CHAIN.format(ma=1.0, mb=mb, extra=f", stiffness: {k}, relaxation_time: {tau}"), 1.5)
    g = _weld_error(model, state, 1)
    assert g[2] == pytest.approx(-mb * G / k, rel=1e-2)
    assert np.all(np.abs(g[:2]) < 1e-3 * mb * G / k)
    assert np.all(np.abs(g[3:]) < 1e-6)


def test_rigid_weld_error_is_its_near_rigid_compliance():
    """A near-rigid weld row at rest under a load f settles at |g| = 2 dt² R_nr |f| = dt² β² w |f|/(2π²)
    (the SAP row's equilibrium γ = v̂/R with v̂ = −g/(2 dt)). b's vertical row moves b's COM and the point P
    of a 0.3 m from a's COM along x: ġ_z = v_b,z − v_a,z + r_x ω_a,y, so w = 1/m_a + 1/m_b + r_x²/I_a,yy;
    f = m_b g. Equal within 2 % after 1 s."""
    ma, mb, dt = 1.0, 1.5, 1e-3
    model, state = run(WELD_CHAIN.format(ma=ma, mb=mb, extra=""), 1.0)
    g = _weld_error(model, state, 1)
    w = 1 / ma + 1 / mb + 0.3 ** 2 / 0.01
    bound = dt ** 2 * BETA_JOINT ** 2 * w * mb * G / (2 * math.pi ** 2)
    assert -g[2] == pytest.approx(bound, rel=2e-2)
    assert np.all(np.abs(g[:2]) < 1e-2 * bound) and np.all(np.abs(g[3:]) < 1e-9)
    g0 = _weld_error(model, state, 0)                    # the world weld carries both weights
    assert -g0[2] == pytest.approx(dt ** 2 * BETA_JOINT ** 2 / ma * (ma + mb) * G / (2 * math.pi ** 2), rel=2e-2)


COUPLED = """
time_step: 0.001
bodies:
  - {{name: bob, mass: 1.0, inertia: [1.0e-4, 1.0e-4, 1.0e-4]}}
  - {{name: wheel, mass: 2.0, inertia: [0.05, 0.05, 0.1]}}
joints:
  - {{name: swing, type: revolute, child: bob, axis: [0, 1, 0], position: [0, 0, 2], child_offset: [0, 0, -0.5]}}
  - {{name: turn, type: revolute, child: wheel, axis: [0, 0, 1], position: [1, 0, 0], damping: 2.0}}
actuators:
  - {{joint: turn, kp: 50, kd: 5, target: 0.2}}
constraints:
  - {{type: coupler, name: gear, joint: swing, reference: turn, ratio: {rho}, offset: {off}}}
"""


@pytest.mark.parametrize("rho, off", [(2.0, 0.1), (-0.5, 0.0)])
def test_coupler_error_is_its_near_rigid_compliance_under_load(rho, off):
    """A pendulum ('swing', gravity torque T = −m g l sin q) geared to a PD-held wheel ('turn', vertical
    axis, no gravity) by q_swing = ρ q_turn + offset. At rest the coupler carries T, so its row settles at
    |g| = dt² β² w |T|/(2π²) with w = 1/A_swing + ρ²/A_turn (A = M + dt·D diagonal), within 2 %; the wheel
    sits where the PD balances ρ·T: Kp (0.2 − q_turn) = −ρ T (within 1e-3 relative)."""
    model, state = run(COUPLED.format(rho=rho, off=off), 3.0)
    q_s, q_t = state.tree_q
    gval = q_s - rho * q_t - off
    T = -1.0 * G * 0.5 * math.sin(q_s)
    dt = model.time_step
    A_s = 1.0 * 0.25 + 1e-4
    A_t = 0.1 + dt * 2.0
    w = 1 / A_s + rho ** 2 / A_t
    bound = dt ** 2 * BETA_JOINT ** 2 * w * abs(T) / (2 * math.pi ** 2)
    assert abs(T) > 0.3
    assert abs(gval) == pytest.approx(bound, rel=2e-2)
    assert 50 * (0.2 - q_t) == pytest.approx(-rho * T, rel=1e-3)


WELDED_ON_FLOOR = """
time_step: 0.001
bodies:
  - {name: floor, fixed: true, geometries: [{shape: halfspace}]}
  - {name: a, mass: 1.0, position: [0, 0, 0.05], geometries: [{shape: box, size: [0.1, 0.1, 0.1]}]}
  - {name: b, mass: 3.0, position: [0.3, 0, 0.05], geometries: [{shape: box, size: [0.1, 0.1, 0.1]}]}
constraints:
  - {type: weld, name: beam, body_a: a, body_b: b}
"""


def test_welded_boxes_rest_on_the_floor_with_contact_in_the_same_problem():
    """Two boxes welded 0.3 m apart resting on the floor: contact and weld rows in one SAP problem. At
    rest the contact forces carry the total weight (Σ f_z = (m_a + m_b) g within 1e-6 relative), the
    weld's error stays below its near-rigid compliance for the largest load it can carry here (the
    heavier box's weight; dt² β² w f/(2π²) with w <= 1/m_a + 1/m_b + arm terms, 1e-8 m is a bound with
    margin) and the assembly neither slides nor tilts."""
    forces = []
    model, state = run(WELDED_ON_FLOOR, 1.0, record=lambda m, s, i: forces.append(i.force_world.sum(axis=0)))
    assert forces[-1][2] == pytest.approx(4.0 * G, rel=1e-6)
    g = body_constraint_values(model, state, model.forest.constraints[0])
    assert np.all(np.abs(g) < 1e-8)
    assert np.all(np.abs(state.q[1:, :2] - [[0, 0], [0.3, 0]]) < 1e-6)
    assert np.all(np.abs(state.v[1:]) < 1e-5)


def test_coincident_distance_points_are_a_scene_error():
    text = PENDULUM.format(x=0.0, z=0.0)
    with pytest.raises(SceneError, match=r"constraints\[0\]\.point_b"):
        prepare(text)


def test_distance_points_that_meet_during_a_run_stop_the_step_naming_the_constraint():
    model, state, _ = prepare(PENDULUM.format(x=0.0, z=-1.0))
    state = dataclasses.replace(state, q=state.q.copy())
    state.q[0, :3] = 0.0
    with pytest.raises(SimulationError, match="distance constraint 'rope'"):
        step(model, state, StepContext())


def test_weld_keeps_a_rotated_pose_of_t0():
    """The weld target is the relative pose at t = 0: b (rotated 32.6° about y) keeps its orientation in a's
    frame while the pair swings on a rope from the world (a only on the rope, so the pair rotates)."""
    text = """
time_step: 0.001
bodies:
  - {name: a, mass: 1.0, inertia: [0.01, 0.01, 0.01], position: [0.3, 0, 0]}
  - {name: b, mass: 1.5, inertia: [0.02, 0.01, 0.03], position: [0.6, 0, 0], quaternion: [0.96, 0, 0.28, 0]}
constraints:
  - {type: distance, name: rope, body_a: world, body_b: a, point_a: [0, 0, 0.5]}
  - {type: weld, name: glue, body_a: a, body_b: b}
"""
    model, state = run(text, 0.5)
    R_a, R_b = quat_to_matrix(state.q[0, 3:]), quat_to_matrix(state.q[1, 3:])
    R0 = quat_to_matrix(np.array([0.96, 0, 0.28, 0]) / np.linalg.norm([0.96, 0, 0.28, 0]))
    assert np.linalg.norm(rotation_log(R_a)) > 0.05                # the pair did rotate
    assert np.allclose(R_a.T @ R_b, R0, atol=1e-6)
    assert np.allclose(R_a.T @ (state.q[1, :3] - state.q[0, :3]), [0.3, 0, 0], atol=1e-6)


# ------------------------------------------------------------------------------------ the LCP stepper

def test_lcp_distance_pendulum_period():
    """The LCP stepper takes the rope as a bilateral pair of rigid rows: the same period claims as SAP
    (2π√(L/g) within 0.5 %, with the amplitude correction within 1e-4) and the rope keeps its length
    within 1e-5 m (the gap term removes the fraction s of each step's drift)."""
    state = _check_rope_pendulum_period("solver: {kind: lcp}\n", 2.7)
    assert abs(np.linalg.norm(state.q[0, :3]) - 1.0) < 1e-5


def test_lcp_rigid_weld_and_coupler_hold():
    """Rigid rows in the LCP: the weld chain's relative pose error and the geared pendulum's coupler error
    stay below 1e-9 (rigid rows with s = 1 close each step's error exactly, up to Lemke's round-off)."""
    model, state = run(WELD_CHAIN.format(ma=1.0, mb=1.5, extra="") + "solver: {kind: lcp}\n", 0.3)
    assert np.all(np.abs(_weld_error(model, state, 1)) < 1e-9)
    assert np.all(np.abs(_weld_error(model, state, 0)) < 1e-9)
    model, state = run(COUPLED.format(rho=2.0, off=0.1) + "solver: {kind: lcp}\n", 0.3)
    q_s, q_t = state.tree_q
    assert abs(q_s - 2.0 * q_t - 0.1) < 1e-9
    assert abs(q_s - 0.1) > 1e-3                                       # it moved


def test_lcp_refuses_a_compliant_constraint_naming_it():
    text = WELD_CHAIN.format(ma=1.0, mb=1.5, extra=", stiffness: 1.0e4") + "solver: {kind: lcp}\n"
    model, state, _ = prepare(text)
    with pytest.raises(ValueError, match="weld 'glue' has a finite stiffness"):
        step(model, state, StepContext())


def test_scenes_with_constraints_and_ball_free_joints_round_trip_through_dump():
    """A trajectory's scene_yaml is a dump (defaults included): it must load back to the same scene."""
    from convexsim.scene import dump_scene, dump_scene_compact, scene_from_yaml
    floating = """
bodies:
  - {name: base, mass: 2.0, inertia: [0.02, 0.03, 0.04]}
  - {name: hand, mass: 0.2, inertia: [0.001, 0.002, 0.002]}
  - {name: bob, mass: 0.2, inertia: [0.001, 0.002, 0.002]}
joints:
  - {name: float, type: free, child: base, initial_position: [0, 0, 3, 0.7, 0.1, -0.7, 0.1]}
  - {name: wrist, type: ball, parent: base, child: hand, initial_position: [0.9, 0.3, 0.3, 0.1]}
  - {name: socket, type: ball, child: bob}
constraints:
  - {type: weld, body_b: bob}
"""
    for text in (MIXED, floating):
        spec = scene_from_yaml(text)
        assert scene_from_yaml(dump_scene(spec)) == spec
        assert scene_from_yaml(dump_scene_compact(spec)) == spec


def test_a_scene_with_constraints_but_no_joints_runs_through_simulate_with_both_solvers():
    """Constraints alone route the model to the articulated steppers (Model.has_trees), and the
    trajectory path (link rows, empty tree coordinates) works: the rope keeps its length in both."""
    from convexsim.simulate import simulate
    for solver in ("sap", "lcp"):
        tr = simulate(PENDULUM.format(x=0.6, z=-0.8), duration=0.05, solver=solver)
        assert not tr.failure, tr.failure
        assert abs(np.linalg.norm(tr.position[-1, 0]) - 1.0) < 1e-6
        assert tr.position[-1, 0, 0] < 0.6 - 1e-3                        # it swung
