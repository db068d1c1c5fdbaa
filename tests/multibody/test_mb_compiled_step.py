"""The compiled step of models with kinematic trees (``stepping.compiled_trees``) against its reference
(``stepping.articulated.articulated_sap_step``): stage by stage (free motion A and v*, joint rows, point
Jacobians, integration, link rows) to round-off, whole runs within a stated bound, and the physics of
the shipped tree scenes on the compiled path."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mb_trees import random_q, random_tree
from convexsim.multibody.dynamics import forest_free_motion
from convexsim.multibody.forest import link_rows, tree_step_data
from convexsim.multibody.kinematics import (Kinematics, integrate_q, integrate_q_kernel, link_rows_kernel,
                                            path_point_jacobian)
from convexsim.multibody.model import JOINT_NV
from convexsim.multibody.reference_step import free_motion
from convexsim.simulate import prepare
from convexsim.stepping import StepContext, step
from convexsim.stepping.compiled import compiled_step_supported
from convexsim.stepping.compiled_trees import packed_forest
from convexsim.stepping.tree_kernels import forest_kinematics, tree_rows

G = 9.81
SCENES = ("pendulum", "pendulum_limit", "double_pendulum", "iiwa_push", "gripper_lift")


def _rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b))))) if a.size else 0.0


def _tree_arrays(m):
    nvj = JOINT_NV[m.joint_type].astype(np.int64)
    return (m.parent, m.joint_type, m.joint_dofadr, nvj)


@pytest.mark.parametrize("seed", range(4))
def test_free_motion_jacobians_integration_and_link_rows_match_the_numpy_reference(seed):
    """A = M + dt·D, v*, the point Jacobian of a link point, integrate_q and the link rows of one random
    tree (every joint type, damping and armature) agree with the numpy reference to 1e-12 relative."""
    rng = np.random.default_rng(seed)
    m = random_tree(rng, nbody=7)
    q = random_q(m, rng)
    v = rng.normal(size=m.nv)
    dt = 1e-3
    kin = Kinematics(m, q)
    A_ref, vs_ref = free_motion(m, q, v, dt)
    parent, jtype, dofadr, nvj = _tree_arrays(m)
    A = np.empty((m.nv, m.nv))
    vs = np.empty(m.nv)
    forest_free_motion(parent, jtype, dofadr, nvj, kin.S, kin.R_WB, kin.p_WB, m.body_mass, m.body_com,
                       m.body_inertia, m.dof_armature, m.dof_damping, m.gravity, v, dt,
                       np.array([0]), np.array([m.nv]), A, vs)
    assert _rel(A, A_ref) < 1e-12
    assert _rel(vs, vs_ref) < 1e-12
    J = np.empty((3, m.nv))
    for b in range(m.nbody):
        p_B = rng.normal(size=3)
        p = kin.point_position(b, p_B)
        path_point_jacobian(parent, dofadr, nvj, kin.S, b, p[0], p[1], p[2], 0, J)
        assert _rel(J, kin.point_jacobian(b, p_B)) < 1e-12
    assert _rel(integrate_q_kernel_py(m, q, v, 0.01), integrate_q(m, q, v, 0.01)) < 1e-13
    poses_ref, vels_ref = link_rows_ref(m, q, v)
    body_q = np.zeros((m.nbody, 7))
    body_v = np.zeros((m.nbody, 6))
    link_rows_kernel(parent, dofadr, nvj, m.body_com, kin.R_WB, kin.p_WB, kin.S, v, np.arange(m.nbody),
                     body_q, body_v)
    assert _rel(body_q, poses_ref) < 1e-12
    assert _rel(body_v, vels_ref) < 1e-12


def integrate_q_kernel_py(m, q, v, dt):
    out = np.empty(m.nq)
    integrate_q_kernel(m.joint_type, m.joint_qadr, m.joint_dofadr, np.asarray(q, float), np.asarray(v, float), dt,
                       out)
    return out


def link_rows_ref(m, q, v):
    from convexsim.multibody.forest import Tree

    t = Tree(model=m, bodies=np.arange(m.nbody), joint_names=tuple(m.body_names), q_start=0, v_start=0)
    return link_rows(t, q, v)


@pytest.mark.parametrize("scene", ["pendulum_limit", "iiwa_push", "gripper_lift"])
@pytest.mark.parametrize("where", ["start", "near_limits"])
def test_joint_rows_match_the_reference_rows(scene, where):
    """The kernel's joint rows (J, R, v̂, box, kind) are those of ``forest.tree_step_data`` to 1e-12 relative,
    at the scene's start and at a state put inside every limit window (limits active)."""
    model, state, _ = prepare(scene)
    tree = model.forest.trees[0]
    q = state.tree_q.copy()
    v = state.tree_v.copy()
    if where == "near_limits":
        for lim in tree.limits:
            qa, d = tree.model.joint_qadr[lim.joint], tree.model.joint_dofadr[lim.joint]
            q[qa] = (lim.lower if math.isfinite(lim.lower) else lim.upper) + 1e-5
            v[d] = -0.02
    t = 1.2
    dt = model.time_step
    A, vs, J_ref, par_ref, kinds_ref, _, _ = tree_step_data(tree, q, v, dt, t)
    pf = packed_forest(model)
    n = 2 * len(tree.limits) + len(tree.actuators) + len(tree.couplers)
    row_tree = np.empty(n, np.int64)
    row_kind = np.empty(n, np.int64)
    row_owner = np.empty(n, np.int64)
    row_J = np.empty((n, tree.nv))
    row_par = np.empty((n, 4))
    nr = tree_rows(pf.fa, pf.ra, t, dt, q, v, A, vs, row_tree, row_kind, row_owner, row_J, row_par)
    assert nr == J_ref.shape[0]
    if where == "near_limits" and tree.limits:
        assert 10 in list(kinds_ref)
    assert list(row_kind[:nr]) == list(kinds_ref)
    assert _rel(row_J[:nr], J_ref) < 1e-12
    finite = np.isfinite(par_ref)
    assert np.array_equal(np.isfinite(row_par[:nr]), finite)
    assert np.array_equal(row_par[:nr][~finite], par_ref[~finite])
    assert _rel(row_par[:nr][finite], par_ref[finite]) < 1e-12


@pytest.mark.parametrize("scene", SCENES)
def test_shipped_tree_scenes_take_the_compiled_step(scene):
    model, _, _ = prepare(scene)
    assert compiled_step_supported(model) == (True, "")


def test_forest_kinematics_of_the_packed_forest_is_the_tree_kinematics():
    model, state, _ = prepare("iiwa_push")
    pf = packed_forest(model)
    R_WB, p_WB, _, S = forest_kinematics(pf.fa, state.tree_q)
    kin = Kinematics(model.forest.trees[0].model, state.tree_q)
    assert _rel(R_WB, kin.R_WB) < 1e-14 and _rel(p_WB, kin.p_WB) < 1e-14 and _rel(S, kin.S) < 1e-14


def _run(scene, duration, path, **kw):
    model, state, _ = prepare(scene, **kw)
    ctx = StepContext()
    states, infos = [state], []
    for _ in range(round(duration / model.time_step)):
        state, info = step(model, state, ctx, strict=True, path=path)
        states.append(state)
        infos.append(info)
    return model, states, infos


# Whole runs: both paths build the same convex problem each step from the same formulas (to round-off, the
# stage tests above) and minimize it; they differ in the order of floating-point operations and in the
# Newton stopping rule. Both stop once the scaled momentum residual ‖D ∇ℓ(v)‖ (D = diag(A)^-½) is below
# solver.rel_tolerance = 1e-6 of its scale (the compiled loop also on sap.solver's cost criterion), so
# each step's v may differ from the exact minimizer, and hence between the paths, by about 1e-6 of the
# velocity scale |v|: the bound on v is 10× that, 1e-5·(1 + max |v|). Positions integrate these
# differences: over 200 steps of 1 ms at most 0.2 s · 1e-5 · (1 + max |v|), and since the steps are
# stable and dissipative (PD, contact, damping) far less; Q_BOUND = 1e-6 m or rad. Measured on the
# development machine: at most 7e-15 on the shipped scenes (Newton reaches round-off in one or two
# iterations there), and on TUMBLER (a spinning floating base landing on the floor, max |v| = 29 rad/s)
# 2e-8 in q and 5.7e-6 in v.
Q_BOUND = 1e-6


def _v_bound(states):
    return 1e-5 * (1.0 + max(float(np.max(np.abs(s.tree_v))) for s in states))


@pytest.mark.parametrize("scene", SCENES + ("iiwa_push:lagged",))
def test_compiled_and_reference_runs_agree(scene):
    """0.2 s of each scene (the limit scene started near its limit) on both paths: tree_q, tree_v and the
    bodies' q, v agree within Q_BOUND and _v_bound; the contact sets, actuator and limit forces agree."""
    kw = {}
    if scene.endswith(":lagged"):                        # a Hunt–Crossley contact model on a tree scene
        scene, kw = scene.split(":")[0], dict(contact_model="lagged")
    if scene == "pendulum_limit":
        kw = dict(overrides=["joints[0].initial_position=0.32"])
    _, sc, ic = _run(scene, 0.2, "compiled", **kw)
    _, sr, ir = _run(scene, 0.2, "reference", **kw)
    for a, r in zip(sc[1:], sr[1:]):
        assert np.max(np.abs(a.tree_q - r.tree_q)) < Q_BOUND
        assert np.max(np.abs(a.tree_v - r.tree_v)) < _v_bound(sr)
        assert np.max(np.abs(a.q - r.q)) < Q_BOUND
        assert np.max(np.abs(a.v - r.v)) < _v_bound(sr)
    for a, r in zip(ic, ir):
        assert a.contacts.count == r.contacts.count
        assert a.actuator_names == r.actuator_names
        assert np.allclose(a.actuator_force, r.actuator_force, rtol=1e-5, atol=1e-6)
        assert a.limit_force.keys() == r.limit_force.keys()
        for k in a.limit_force:
            assert a.limit_force[k] == pytest.approx(r.limit_force[k], rel=1e-5, abs=1e-6)
        assert np.allclose(a.force_world, r.force_world, rtol=1e-5, atol=1e-6)


def test_compiled_pendulum_small_amplitude_period():
    """θ0 = 0.05 rad: T = 2π√(L/g)·√(1 + 2r²/(5L²))·(1 + θ0²/16) within 1e-3 (dt = 1 ms is 5e-4 of T)."""
    model, states, _ = _run("pendulum", 4.5, "compiled", overrides=["joints[0].initial_position=0.05"])
    dt = model.time_step
    th = np.array([s.tree_q[0] for s in states])
    i = np.flatnonzero((th[:-1] > 0) & (th[1:] <= 0))
    period = np.mean(np.diff((i + th[i] / (th[i] - th[i + 1])) * dt))
    T = 2 * math.pi * math.sqrt(1.0 / G) * math.sqrt(1 + 2 * 0.02 ** 2 / 5) * (1 + 0.05 ** 2 / 16)
    assert abs(period / T - 1) < 1e-3


def test_compiled_limit_rest_and_limit_force():
    """The pendulum comes to rest on its limit at 0.3 rad (beyond it by the limit compliance
    dt² τ/(200π² A), 1e-4 relative) and the limit carries the gravity torque m g L sin 0.3."""
    model, states, infos = _run("pendulum_limit", 3.0, "compiled")
    dt = model.time_step
    tau = G * math.sin(0.3)
    A = 1.0 + 0.4 * 0.02 ** 2
    assert 0.3 - states[-1].tree_q[0] == pytest.approx(dt ** 2 * tau / (200 * math.pi ** 2 * A), rel=1e-4)
    assert infos[-1].limit_force["hinge"] == pytest.approx(tau, rel=1e-6)


def test_compiled_pd_steady_state_is_target_minus_gravity_torque_over_kp():
    """iiwa holding its pose: at t = 1 s each joint's error q − q_d = −g_i(q)/Kp_i to 1e-6 rad."""
    from convexsim.multibody import gravity_forces

    model, states, infos = _run("iiwa_push", 1.0, "compiled")
    tree = model.forest.trees[0]
    q = states[-1].tree_q
    g = gravity_forces(tree.model, q)
    for a in tree.actuators:
        d = tree.model.joint_dofadr[a.joint]
        q_d, _ = a.target(states[-1].t)
        assert q[tree.model.joint_qadr[a.joint]] - q_d == pytest.approx(-g[d] / a.kp, abs=1e-6)
    assert infos[-1].actuator_force == pytest.approx(g, rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("scene", ["iiwa_push", "gripper_lift"])
def test_run_loop_records_what_the_step_by_step_compiled_path_computes(scene):
    """``run_model`` (the compiled run loop, tree_run_kernel) and the step-by-step compiled path give the
    same frames, contact rows and joint forces: the same kernel on the same inputs, so to the last bit."""
    from convexsim.simulate import Recorder, run_model

    model, state, _ = prepare(scene)
    traj, _ = run_model(model, state, duration=0.05, record_every=10)
    rec = Recorder(model)
    rec.record(state, None)
    ctx = StepContext()
    s = state
    for k in range(50):
        s, info = step(model, s, ctx, path="compiled")
        if (k + 1) % 10 == 0:
            rec.record(s, info)
    ref = rec.to_trajectory(scene_yaml=model.scene_yaml, solver_kind="sap", contact_model="sap")
    for f in ("time", "position", "quaternion", "linear_velocity", "angular_velocity", "contact_offsets",
              "contact_point", "contact_force", "solver_iterations"):
        assert np.array_equal(getattr(traj, f), getattr(ref, f)), f
    assert list(traj.constraint_force_names) == list(ref.constraint_force_names)
    assert np.array_equal(traj.constraint_force, ref.constraint_force)


COUPLED = """
time_step: 0.001
bodies:
  - {name: bob, mass: 1.0, inertia: [1.0e-4, 1.0e-4, 1.0e-4]}
  - {name: wheel, mass: 2.0, inertia: [0.05, 0.05, 0.1]}
  - {name: arm, mass: 0.5, inertia: [1.0e-3, 1.0e-3, 1.0e-3]}
  - {name: hand, mass: 0.2, inertia: [1.0e-4, 1.0e-4, 1.0e-4]}
joints:
  - {name: swing, type: revolute, child: bob, axis: [0, 1, 0], position: [0, 0, 2], child_offset: [0, 0, -0.5],
     initial_position: 0.3}
  - {name: turn, type: revolute, child: wheel, axis: [0, 0, 1], position: [1, 0, 0], damping: 2.0}
  - {name: shoulder, type: revolute, child: arm, axis: [1, 0, 0], position: [-1, 0, 1], child_offset: [0, 0, -0.3],
     initial_position: 0.5}
  - {name: elbow, type: revolute, parent: arm, child: hand, axis: [1, 0, 0], position: [0, 0, -0.3],
     child_offset: [0, 0, -0.2]}
actuators:
  - {joint: turn, kp: 50, kd: 5, target: 0.2}
constraints:
  - {type: coupler, name: gear, joint: swing, reference: turn, ratio: 2.0, offset: 0.1}
  - {type: coupler, name: mimic, joint: elbow, reference: shoulder, ratio: -0.5, offset: 0.0}
"""


def test_joint_couplers_across_and_within_trees_agree_with_the_reference():
    """Joint couplers (scene ``constraints:``) between two trees (two-clique rows) and within one tree take
    the compiled step; 0.2 s agree with the reference within Q_BOUND and _v_bound, and so do the couplers'
    forces (StepInfo.constraint_force)."""
    model, _, _ = prepare(COUPLED)
    assert compiled_step_supported(model) == (True, "")
    _, sc, ic = _run(COUPLED, 0.2, "compiled")
    _, sr, ir = _run(COUPLED, 0.2, "reference")
    for a, r in zip(sc[1:], sr[1:]):
        assert np.max(np.abs(a.tree_q - r.tree_q)) < Q_BOUND
        assert np.max(np.abs(a.tree_v - r.tree_v)) < _v_bound(sr)
    for a, r in zip(ic, ir):
        assert a.constraint_force.keys() == r.constraint_force.keys() == {"gear", "mimic"}
        for k in a.constraint_force:
            assert a.constraint_force[k] == pytest.approx(r.constraint_force[k], rel=1e-5, abs=1e-6)
    assert abs(ic[-1].constraint_force["gear"][0]) > 0.1


def test_welds_and_cone_limits_take_the_reference_step_with_a_reason_and_controls_the_compiled_one():
    from convexsim.multibody.forest import Controls

    weld = """
time_step: 0.001
bodies:
  - {name: l1, mass: 1.0, inertia: [0.02, 0.03, 0.04]}
  - {name: box, mass: 2.0, position: [0.4, 0.1, 0.5], inertia: [0.05, 0.07, 0.09]}
joints:
  - {name: j1, type: revolute, child: l1, axis: [0, 1, 0], position: [0, 0, 1.5], child_offset: [0, 0, -0.3]}
constraints:
  - {type: weld, name: glue, body_a: l1, body_b: box}
"""
    model, state, _ = prepare(weld)
    ok, reason = compiled_step_supported(model)
    assert not ok and "glue" in reason
    with pytest.raises(ValueError, match="glue"):
        step(model, state, path="compiled")
    model, state, _ = prepare("iiwa_push")
    ctx = StepContext(controls=Controls(targets={"iiwa_joint_1": 0.1}))
    s_auto, info = step(model, state, ctx)
    s_ref, _ = step(model, state, StepContext(controls=Controls(targets={"iiwa_joint_1": 0.1})), path="reference")
    assert info.path == "compiled"                             # the compiled tree step takes the controls
    assert np.max(np.abs(s_auto.tree_q - s_ref.tree_q)) < Q_BOUND


TUMBLER = """
time_step: 0.001
bodies:
  - {name: floor, fixed: true, geometries: [{shape: halfspace}]}
  - {name: base, mass: 2.0, geometries: [{shape: box, size: [0.2, 0.15, 0.1]}]}
  - {name: arm, mass: 0.5, geometries: [{shape: capsule, radius: 0.03, length: 0.3}]}
  - {name: hand, mass: 0.2, geometries: [{shape: sphere, radius: 0.05}]}
  - {name: ball, mass: 0.3, position: [0.3, 0.1, 0.06], geometries: [{shape: sphere, radius: 0.05}]}
joints:
  - {name: float, type: free, child: base, initial_position: [0.0, 0.0, 0.2, 0.9, 0.1, -0.3, 0.3],
     initial_velocity: [1.0, -2.0, 0.5, 0.3, 0.1, -1.0]}
  - {name: elbow, type: revolute, parent: base, child: arm, axis: [1, 0, 0], position: [0, 0.1, 0],
     child_offset: [0, 0, 0.2], initial_position: 0.6, initial_velocity: 2.0, damping: 0.1}
  - {name: wrist, type: ball, parent: arm, child: hand, position: [0, 0, 0.4], child_offset: [0.05, 0, 0],
     initial_position: [0.9, 0.3, 0.3, 0.1], initial_velocity: [3.0, -1.0, 2.0]}
"""


def test_floating_base_with_a_ball_joint_tumbling_on_the_floor_agrees_with_the_reference():
    """A free-floating tree (free, revolute and ball joints, spinning) landing on the floor next to a free
    ball: 0.2 s on both paths agree within Q_BOUND and _v_bound (quaternion integration of the free and ball
    joints, contacts on links)."""
    _, sc, ic = _run(TUMBLER, 0.2, "compiled")
    _, sr, ir = _run(TUMBLER, 0.2, "reference")
    assert sum(i.contacts.count for i in ic) > 0
    for a, r in zip(sc[1:], sr[1:]):
        assert np.max(np.abs(a.tree_q - r.tree_q)) < Q_BOUND
        assert np.max(np.abs(a.tree_v - r.tree_v)) < _v_bound(sr)
        assert np.max(np.abs(a.q - r.q)) < Q_BOUND
        assert np.max(np.abs(a.v - r.v)) < _v_bound(sr)
