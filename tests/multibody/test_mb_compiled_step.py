"""The compiled step of models with kinematic trees (``stepping.compiled``, the one SAP composition): its
stage kernels (forward kinematics, motion subspaces and point Jacobians, CRBA, RNEA, free motion A and v*,
joint rows, integration, link rows) against independent numpy references and closed forms (``tree_reference``: no kernel on the
reference side), whole runs against the reference step (``stepping.sap_stepper.sap_step``) with
equal iteration counts and round-off bounds, and the physics of the shipped tree scenes on the compiled path."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tree_reference
from mb_trees import random_q, random_tree
from convexsim.multibody.dynamics import bias_forces, forest_free_motion, mass_matrix
from convexsim.multibody.forest import link_rows
from convexsim.multibody.kinematics import (Kinematics, integrate_q, integrate_q_kernel, link_rows_kernel,
                                            path_point_jacobian)
from convexsim.multibody.model import JOINT_NV
from convexsim.spatial import quat_to_matrix
from convexsim.simulate import prepare
from convexsim.stepping import StepContext, step
from convexsim.stepping.free_motion import forest_kinematics
from convexsim.stepping.packing import compiled_step_supported, packed_forest
from convexsim.stepping.sap_rows import joint_coupler_rows, tree_rows

G = 9.81
SCENES = ("pendulum", "pendulum_limit", "double_pendulum", "iiwa_push", "gripper_lift")


def _rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b))))) if a.size else 0.0


def _tree_arrays(m):
    nvj = JOINT_NV[m.joint_type].astype(np.int64)
    return (m.parent, m.joint_type, m.joint_dofadr, nvj)


ROUNDOFF = 1e-12
"""Relative bound of a kernel against the independent numpy reference (``tree_reference``): the same
quantity by other formulas and another order of operations; measured at most 1.3e-15 (a few ulps) on the four
random trees, so 1e-12 leaves about three orders of margin and still fails on any formula error."""
FD_BOUND = 2e-9
"""Relative bound where the reference takes central differences (the Jacobian check, J̇ v in the bias forces,
hence v*): truncation O(ε²) with ε = 1e-5; measured at most 1.3e-10 (bias forces) and 7e-11 (Jacobians),
so about 15× margin."""


@pytest.mark.parametrize("seed", range(4))
def test_kinematics_and_dynamics_kernels_match_independent_references(seed):
    """On one random tree (every joint type, damping and armature) and a random state: the forward kinematics
    and motion subspace kernels (poses, point Jacobians: ``Kinematics`` and ``path_point_jacobian``) against
    the numpy reference poses and joint-axis Jacobians (themselves checked by central differences); CRBA
    (with the spatial inertias) against Σ Jᵀ M_b J; RNEA against the Newton–Euler body sum (gravity alone
    exactly, with velocity through J̇ v); ``forest_free_motion`` (A, v*) against M + dt D and
    v + dt A⁻¹(−h − D v) from those references."""
    rng = np.random.default_rng(seed)
    m = random_tree(rng, nbody=7)
    q = random_q(m, rng)
    v = rng.normal(size=m.nv)
    dt = 1e-3
    kin = Kinematics(m, q)
    fr = tree_reference.frames(m, q)
    assert _rel(kin.R_WB, fr[0]) < ROUNDOFF and _rel(kin.p_WB, fr[1]) < ROUNDOFF
    parent, jtype, dofadr, nvj = _tree_arrays(m)
    J = np.empty((3, m.nv))
    for b in range(m.nbody):
        p_B = rng.normal(size=3)
        p_W = fr[1][b] + fr[0][b] @ p_B
        J_ref = tree_reference.jacobian(m, q, b, p_W, fr)
        assert _rel(tree_reference.jacobian_fd(m, q, b, p_B), J_ref) < FD_BOUND     # the reference itself
        assert _rel(kin.spatial_jacobian(b, p_B), J_ref) < ROUNDOFF
        path_point_jacobian(parent, dofadr, nvj, kin.S, b, p_W[0], p_W[1], p_W[2], 0, J)
        assert _rel(J, J_ref[3:]) < ROUNDOFF
    assert _rel(mass_matrix(m, q), tree_reference.mass_matrix(m, q)) < ROUNDOFF
    assert _rel(bias_forces(m, q, np.zeros(m.nv)), tree_reference.bias_forces(m, q, np.zeros(m.nv))) < ROUNDOFF
    assert _rel(bias_forces(m, q, v), tree_reference.bias_forces(m, q, v)) < FD_BOUND
    A_ref, vs_ref = tree_reference.free_motion(m, q, v, dt)
    A = np.empty((m.nv, m.nv))
    vs = np.empty(m.nv)
    forest_free_motion(parent, jtype, dofadr, nvj, kin.S, kin.R_WB, kin.p_WB, m.body_mass, m.body_com,
                       m.body_inertia, m.dof_armature, m.dof_damping, m.gravity, v, dt,
                       np.array([0]), np.array([m.nv]), A, vs)
    assert _rel(A, A_ref) < ROUNDOFF
    assert _rel(vs, vs_ref) < FD_BOUND


@pytest.mark.parametrize("seed", range(4))
def test_integration_and_link_rows_match_the_numpy_reference(seed):
    """integrate_q_kernel against the numpy exponential map ``integrate_q``; the link rows (body poses and
    velocities of the links) against their definition: pose from the reference kinematics at the COM,
    velocity (ω, v_COM) = J_COM v with the reference Jacobian."""
    rng = np.random.default_rng(seed)
    m = random_tree(rng, nbody=7)
    q = random_q(m, rng)
    v = rng.normal(size=m.nv)
    assert _rel(integrate_q_kernel_py(m, q, v, 0.01), integrate_q(m, q, v, 0.01)) < 1e-13
    kin = Kinematics(m, q)
    parent, _, dofadr, nvj = _tree_arrays(m)
    body_q = np.zeros((m.nbody, 7))
    body_v = np.zeros((m.nbody, 6))
    link_rows_kernel(parent, dofadr, nvj, m.body_com, kin.R_WB, kin.p_WB, kin.S, v, np.arange(m.nbody),
                     body_q, body_v)
    R_WB, p_WB, _ = fr = tree_reference.frames(m, q)
    for b in range(m.nbody):
        com = p_WB[b] + R_WB[b] @ m.body_com[b]
        J = tree_reference.jacobian(m, q, b, com, fr)
        assert _rel(body_q[b, :3], com) < ROUNDOFF
        assert _rel(quat_to_matrix(body_q[b, 3:]), R_WB[b]) < ROUNDOFF
        assert _rel(body_v[b, :3], J[:3] @ v) < ROUNDOFF and _rel(body_v[b, 3:], J[3:] @ v) < ROUNDOFF
    poses_ref, vels_ref = link_rows_ref(m, q, v)                  # and the reference step's rows
    assert _rel(body_q, poses_ref) < ROUNDOFF and _rel(body_v, vels_ref) < ROUNDOFF


def integrate_q_kernel_py(m, q, v, dt):
    out = np.empty(m.nq)
    integrate_q_kernel(m.joint_type, m.joint_qadr, m.joint_dofadr, np.asarray(q, float), np.asarray(v, float), dt,
                       out)
    return out


def link_rows_ref(m, q, v):
    from convexsim.multibody.forest import Tree

    t = Tree(model=m, bodies=np.arange(m.nbody), joint_names=tuple(m.body_names), q_start=0, v_start=0)
    return link_rows(t, q, v)


@pytest.mark.parametrize("scene", ["pendulum_limit", "iiwa_push", "gripper_lift", "coupled"])
@pytest.mark.parametrize("where", ["start", "near_limits"])
def test_joint_rows_match_their_closed_forms(scene, where):
    """The kernel's joint rows (kind, J, R, v̂, box) are the closed forms of ``tree_reference.joint_rows``
    (limit sides in their window, PD rows with the gains limited to the near-rigid R, couplers e_i − ρ e_j) to
    ROUNDOFF, at the scene's start and at a state put inside every limit window (limits active)."""
    model, state, _ = prepare(COUPLED if scene == "coupled" else scene)
    pf = packed_forest(model)
    t = 1.2
    dt = model.time_step
    tq, tv = state.tree_q.copy(), state.tree_v.copy()
    nv = tv.shape[0]
    A, vs = np.zeros((nv, nv)), np.zeros(nv)
    ref, n = [], 0
    for tree in model.forest.trees:                 # every tree's rows, tree by tree, from the references
        q, v = tree.q_of(tq), tree.v_of(tv)
        if where == "near_limits":
            for lim in tree.limits:
                qa, d = tree.model.joint_qadr[lim.joint], tree.model.joint_dofadr[lim.joint]
                q[qa] = (lim.lower if math.isfinite(lim.lower) else lim.upper) + 1e-5
                v[d] = -0.02
        s, e = tree.v_start, tree.v_start + tree.nv
        tq[tree.q_start:tree.q_start + tree.model.nq], tv[s:e] = q, v
        A[s:e, s:e], vs[s:e] = tree_reference.free_motion(tree.model, q, v, dt)
        ref += tree_reference.joint_rows(tree, q, v, A[s:e, s:e], vs[s:e], dt, t)
        n += 2 * len(tree.limits) + len(tree.actuators) + len(tree.couplers)
    row_tree, row_kind, row_owner = (np.empty(n, np.int64) for _ in range(3))
    row_J, row_par = np.empty((n, max(tr.nv for tr in model.forest.trees))), np.empty((n, 4))
    nr = tree_rows(pf.fa, pf.ra, t, dt, tq, tv, A, vs, row_tree, row_kind, row_owner, row_J, row_par)
    assert nr == len(ref)
    assert list(row_kind[:nr]) == [kind for kind, _, _ in ref]
    kinds_seen = set(row_kind[:nr].tolist())
    for r, (_, J, par) in enumerate(ref):
        assert _rel(row_J[r, :J.shape[0]], J) < ROUNDOFF
        assert np.array_equal(np.isinf(row_par[r]), np.isinf(par)), (row_par[r], par)
        fin = np.isfinite(par)
        assert _rel(row_par[r][fin], np.array(par)[fin]) < ROUNDOFF, (r, row_par[r], par)
    if where == "near_limits" and scene == "pendulum_limit":
        assert 10 in kinds_seen                      # a limit row was built
    if scene == "coupled":
        assert 12 in kinds_seen                      # the PD row of `turn`
        _check_joint_couplers(model, pf, tq, A, dt)


def _check_joint_couplers(model, pf, tq, A, dt):
    """The scene's joint couplers q_i = ρ q_j + Δ (across and within trees; ``joint_coupler_rows``) against the
    rigid holonomic row of g = q_i − ρ q_j − Δ with J = e_i − ρ e_j over the forest's dofs."""
    from convexsim.multibody.forest import JointCoupler

    couplers = [c for c in model.forest.constraints if isinstance(c, JointCoupler)]
    assert len(couplers) == 2
    jr_index, jr_par = np.empty(len(couplers), np.int64), np.empty((len(couplers), 4))
    n = joint_coupler_rows(pf.ra, dt, tq, A, jr_index, jr_par)
    assert n == len(couplers)

    def where(name):
        k, b = model.forest.joint_index[name]
        tree = model.forest.trees[k]
        return tree.q_start + int(tree.model.joint_qadr[b]), tree.v_start + int(tree.model.joint_dofadr[b])

    for r in range(n):
        c = couplers[jr_index[r]]
        (qi, di), (qj, dj) = where(c.joint), where(c.reference)
        J = np.zeros(A.shape[0])
        J[di] += 1.0
        J[dj] -= c.rho
        R, v_hat = tree_reference.holonomic(dt, tq[qi] - c.rho * tq[qj] - c.offset, float(J @ (J / np.diag(A))),
                                            math.inf, 0.0)
        assert _rel(jr_par[r, :2], np.array([R, v_hat])) < ROUNDOFF
        assert np.isneginf(jr_par[r, 2]) and np.isposinf(jr_par[r, 3])          # a bilateral row


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
# stage tests above) and minimize it by the same Newton iteration; each step both take the same number of
# iterations (asserted), so their states differ only by the round-off of another order of operations,
# carried over the steps. Measured over 0.2 s (200 steps): at most 3.5e-18 in q and 6.1e-16 in v on the
# shipped scenes, 1.7e-13 in q and 4.6e-12 in v on COUPLED (max |v| = 137 rad/s), 2.6e-14 and 1.6e-12 on
# TUMBLER (29 rad/s). Bounds: Q_BOUND = 1e-11 m or rad (60x the largest), and on v V_REL·(1 + max |v|) with
# V_REL = 1e-12 (30x on COUPLED): room for another BLAS's summation order, none for a changed formula.
Q_BOUND = 1e-11
V_REL = 1e-12


def _v_bound(states):
    return V_REL * (1.0 + max(float(np.max(np.abs(s.tree_v))) for s in states))


def _same_iterations(ic, ir):
    assert [i.iterations for i in ic] == [i.iterations for i in ir]


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
    _same_iterations(ic, ir)
    for a, r in zip(ic, ir):
        assert a.contacts.count == r.contacts.count
        assert a.actuator_names == r.actuator_names
        assert np.allclose(a.actuator_force, r.actuator_force, rtol=1e-5, atol=1e-6)
        assert a.limit_force.keys() == r.limit_force.keys()
        for k in a.limit_force:
            assert a.limit_force[k] == pytest.approx(r.limit_force[k], rel=1e-5, abs=1e-6)
        assert np.allclose(a.force_world, r.force_world, rtol=1e-5, atol=1e-6)


def test_a_tree_island_above_the_dense_limit_takes_the_supernodal_factor_and_agrees_with_the_reference():
    """With the dense limit lowered to 6 dofs every island of gripper_lift that holds a tree (its fingers and
    the held box) is above it: the compiled step factors it with the supernodal Cholesky (two kernel calls, no
    handoff to the reference) and agrees with the reference run within the bounds of the whole runs above."""
    from convexsim.sap import linalg
    from convexsim.stepping import packing

    old = packing.ISLAND_MAX_DOFS
    try:
        packing.ISLAND_MAX_DOFS = 6
        stats = linalg.reset_factor_stats()
        _, sc, ic = _run("gripper_lift", 0.1, "compiled")
        assert stats.factorizations > 0                     # supernodal factorizations inside the kernel
    finally:
        packing.ISLAND_MAX_DOFS = old
    _, sr, ir = _run("gripper_lift", 0.1, "reference")
    assert {i.path for i in ic} == {"compiled"}
    assert any(i.contacts.count > 0 and i.iterations > 0 for i in ic)
    for a, r in zip(sc[1:], sr[1:]):
        assert np.max(np.abs(a.tree_q - r.tree_q)) < Q_BOUND
        assert np.max(np.abs(a.tree_v - r.tree_v)) < _v_bound(sr)
        assert np.max(np.abs(a.q - r.q)) < Q_BOUND
    _same_iterations(ic, ir)


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
    """``run_model`` (the compiled run loop, run_kernel) and the step-by-step compiled path give the
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
    the compiled step; 0.2 s agree with the reference (same iterations, within Q_BOUND and _v_bound), and so
    do the couplers' forces (StepInfo.constraint_force)."""
    model, _, _ = prepare(COUPLED)
    assert compiled_step_supported(model) == (True, "")
    _, sc, ic = _run(COUPLED, 0.2, "compiled")
    _, sr, ir = _run(COUPLED, 0.2, "reference")
    for a, r in zip(sc[1:], sr[1:]):
        assert np.max(np.abs(a.tree_q - r.tree_q)) < Q_BOUND
        assert np.max(np.abs(a.tree_v - r.tree_v)) < _v_bound(sr)
    _same_iterations(ic, ir)
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
    _same_iterations(ic, ir)
    assert [i.contacts.count for i in ic] == [i.contacts.count for i in ir]
    for a, r in zip(sc[1:], sr[1:]):
        assert np.max(np.abs(a.tree_q - r.tree_q)) < Q_BOUND
        assert np.max(np.abs(a.tree_v - r.tree_v)) < _v_bound(sr)
        assert np.max(np.abs(a.q - r.q)) < Q_BOUND
        assert np.max(np.abs(a.v - r.v)) < _v_bound(sr)
