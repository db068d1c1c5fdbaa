"""Gradients of SAP steps and rollouts of tree models (convexsim.inverse.trees) against central
differences of the steps themselves, and the analytic parameter partials of the momentum residual against
central differences of the residual.

Tolerances. The step is solved to a relative momentum residual of 1e-12 (``gradient_model``); a central
difference of re-solved steps with relative step h has truncation error O(h²) ≈ 1e-10 and solver noise
≈ 1e-12/h ≈ 1e-7 relative (h = 1e-5), so step and rollout derivatives are asked 1e-5 relative to the
largest entry, 100× above these errors: set by the finite differences, not by the analytic side.
Parameter derivatives that move the steps enough are asked 1e-6 (PARAM_TOL: the arm's 20-step rollout,
≤ 1.4e-8 measured; one iiwa step, both contact models, ≤ 2e-8); the arm's single step moves by only
~1e-3 rad/s per N·m·s/rad of damping (2.8e-7 measured) and keeps 1e-5. The residual's differences that
the closed forms replaced were already this close at the step level (≤ 3e-8 on the iiwa), so the step
tests cannot tell the two apart; the partials' own check is against central differences of the residual
at the fixed solution (no solve in between: truncation O(h²) ≈ 1e-12 relative, round-off
≈ 1e-16·|g's terms|/h ≈ 1e-8 of a column at h = 1e-6, measured), asked 1e-6 (PARTIAL_TOL; stiff
actuator rows need a larger step, stated there). Adjoint = forward to 1e-9 (same linear algebra,
different order).
"""

from __future__ import annotations

import numpy as np
import pytest

from convexsim.inverse.rollout import adjoint, tangents
from convexsim.inverse.trees import (RobotParameter, TreeGradientError, gradient_model, parameter_columns,
                                     residual, robot_value, step_stages, target_controls, target_gradient,
                                     tree_rollout, velocity_vector, with_robot_parameters)
from convexsim.simulate import prepare
from tree_scenes import ARM

ARM_PARAMS = (RobotParameter("damping", "shoulder"), RobotParameter("kp", "elbow"),
              RobotParameter("kd", "shoulder"), RobotParameter("mass", "fore"))
H_REL = 1e-5
TOL = 1e-5
PARAM_TOL = 1e-6
"""Parameter derivatives where the re-solved steps' noise allows it (module docstring)."""
PARTIAL_TOL = 1e-6


def residual_differences(model, state, v, parameters, controls=None, h_rel=1e-6):
    """−∂g/∂θ at fixed v, q0, v0 and contact set by central differences of the residual (the step's own
    stages re-assembled at θ ± h): the oracle of the analytic ``parameter_columns``."""
    ref = step_stages(model, state, controls)
    cols = []
    for p in parameters:
        base = robot_value(model, p)
        h = h_rel * max(abs(base), 1.0)
        g = [residual(step_stages(with_robot_parameters(model, {p: base + sign * h}), state, controls,
                                  ref.contacts), v) for sign in (1.0, -1.0)]
        cols.append(-(g[0] - g[1]) / (2 * h))
    return np.array(cols).T


def assert_partials_match(model, state, v, parameters, controls=None, h_rel=1e-6, tol=PARTIAL_TOL):
    """Analytic Mθ = central differences of the residual, per parameter, to ``tol`` of the column."""
    st = step_stages(model, state, controls)
    an = parameter_columns(model, state, st, v, parameters, controls)
    fd = residual_differences(model, state, v, parameters, controls, h_rel)
    for j, p in enumerate(parameters):
        assert np.max(np.abs(fd[:, j])) > 0, p.label()
        assert np.max(np.abs(an[:, j] - fd[:, j])) <= tol * np.max(np.abs(fd[:, j])), p.label()


def scene_targets(model, state0, steps):
    """The scene's PD targets (q̄, v̄) at the start of every step, shape (steps, nact, 2)."""
    acts = [a for t in model.forest.trees for a in t.actuators]
    dt = model.time_step
    return np.array([[a.target(state0.t + l * dt) for a in acts] for l in range(steps)])


@pytest.fixture(scope="module")
def arm():
    model, state, _ = prepare(ARM)
    return gradient_model(model), state


def fd_rollout(model, state, steps, p=None, targets=None, what=None, h=None):
    """Central difference of a rollout's joint angles (T, nq) in a parameter or one target entry."""
    out = []
    for sign in (1.0, -1.0):
        if p is not None:
            base = robot_value(model, p)
            ro = tree_rollout(model, state, steps, values={p: base + sign * h * base}, targets=targets)
        else:
            tg = targets.copy()
            tg[what] += sign * h
            ro = tree_rollout(model, state, steps, targets=tg)
        out.append(ro.q)
    scale = h * robot_value(model, p) if p is not None else h
    return (out[0] - out[1]) / (2 * scale)


def test_one_step_derivatives_match_finite_differences(arm):
    """dv/dθ of one arm step for damping, Kp, Kd, a link mass and every actuator's (q̄, v̄)."""
    model, state = arm
    tg = scene_targets(model, state, 1)
    ro = tree_rollout(model, state, 1, parameters=ARM_PARAMS, targets=tg, linearize=True)
    rec = ro.records[0]
    assert rec.residual < 1e-10
    assert_partials_match(model, state, rec.v_next, ARM_PARAMS, target_controls(model, tg, 0))
    for j, p in enumerate(ARM_PARAMS):
        fd = fd_rollout(model, state, 1, p=p, targets=tg, h=H_REL)[1] / model.time_step    # dq = dt dv
        an = rec.solve(rec.Mtheta[:, j])
        assert np.max(np.abs(an - fd)) <= TOL * np.max(np.abs(fd)), p.label()
    for n in range(tg.shape[1]):
        for k in range(2):
            fd = fd_rollout(model, state, 1, targets=tg, what=(0, n, k), h=1e-6)[1] / model.time_step
            an = rec.solve(rec.Mtarget[:, n, k])
            assert np.max(np.abs(an)) > 0
            assert np.max(np.abs(an - fd)) <= TOL * np.max(np.abs(fd)), (n, k)


@pytest.mark.parametrize("kp, kd", [(1e10, 1e6), (1e8, 1e7)])
def test_near_rigid_actuator_gains(kp, kd):
    """Actuators so stiff that their gains are limited to R = β² w/(4π²) (dt·Kp > Kd and dt·Kp < Kd, the
    two branches of ``pd_effective_gains``): Kp', Kd' then move with the row's Delassus estimate w, i.e.
    with the link masses and the joint damping through diag(A), as well as with Kp and Kd. The analytic
    partials equal the residual's differences and one step's derivative equals re-solved steps.

    The rows' impulses reach 1e4 N·s here while the damping column is ~1e-3 N·s per N·m·s/rad, so the
    residual's differences carry round-off ≈ 1e-16·1e4/h: with h = 1e-4 (truncation O(h²) ≈ 1e-8) they
    are good to ≈ 2e-6 of the column (measured), and are asked 1e-5. The rigid actuators hold the joints,
    so the step moves by only ~5e-7 rad/s per N·m·s/rad of damping: re-solved steps with the solver's
    ~1e-12 noise need a relative step of 1e-3 and agree to ≤ 3e-5 (measured); asked 1e-4."""
    from convexsim.inverse.trees import actuator_rows
    from convexsim.sap.joint_constraints import BETA_JOINT, pd_gains_kernel

    scene = ARM.replace("kp: 300, kd: 8", f"kp: {kp:g}, kd: {kd:g}").replace("kp: 150, kd: 4",
                                                                            f"kp: {kp:g}, kd: {kd:g}")
    model, state, _ = prepare(scene)
    model = gradient_model(model)
    tg = scene_targets(model, state, 1)
    ro = tree_rollout(model, state, 1, parameters=ARM_PARAMS, targets=tg, linearize=True)
    rec = ro.records[0]
    dt = model.time_step
    st = step_stages(model, state, target_controls(model, tg, 0))
    for r, act, q0, w in actuator_rows(model, state, st, target_controls(model, tg, 0)):
        assert pd_gains_kernel(dt, act.kp, act.kd, w, BETA_JOINT)[0] < 0.5 * act.kp     # limited (s < 1/2)
    assert_partials_match(model, state, rec.v_next, ARM_PARAMS, target_controls(model, tg, 0),
                          h_rel=1e-4, tol=1e-5)
    for j, p in enumerate(ARM_PARAMS):
        fd = fd_rollout(model, state, 1, p=p, targets=tg, h=1e-3)[1] / dt
        an = rec.solve(rec.Mtheta[:, j])
        assert np.max(np.abs(an - fd)) <= 1e-4 * np.max(np.abs(fd)), p.label()


def test_joint_limit_row_moves_with_mass_and_damping():
    """The arm's shoulder 2 mrad above its lower limit, moving onto it: the limit's near-rigid row,
    R = β² w/(4π²), pushes, and its w = 1/A_ss moves with the forearm's mass and the shoulder's damping.
    The partials equal the residual's differences (1e-6; without the row's dR they are off by 46 % and
    400 %, measured) and dv/d(mass, Kp) one step's re-solved differences (≤ 1e-7 measured, asked 1e-6;
    without dR the mass is off by 4e-4). The damping and Kd of the limited shoulder move the step by only
    ~1e-6 rad/s per unit, below what re-solved steps resolve, so they are checked on the residual only."""
    from convexsim.sap.joint_constraints import KIND_LIMIT

    scene = ARM.replace("damping: 0.8}", "damping: 0.8, lower: 0.598, upper: 2.0}")
    model, state, _ = prepare(scene)
    model = gradient_model(model)
    tg = scene_targets(model, state, 1)
    controls = target_controls(model, tg, 0)
    rec = tree_rollout(model, state, 1, parameters=ARM_PARAMS, targets=tg, linearize=True).records[0]
    st = step_stages(model, state, controls)
    r = st.system.row_kinds.index(KIND_LIMIT)
    assert st.system.par[r, 1] > st.system.Jr[r] @ rec.v_next            # y > 0: the limit pushes
    assert_partials_match(model, state, rec.v_next, ARM_PARAMS, controls)
    for j in (1, 3):                                         # kp:elbow, mass:fore
        fd = fd_rollout(model, state, 1, p=ARM_PARAMS[j], targets=tg, h=H_REL)[1] / model.time_step
        an = rec.solve(rec.Mtheta[:, j])
        assert np.max(np.abs(an - fd)) <= PARAM_TOL * np.max(np.abs(fd)), ARM_PARAMS[j].label()


@pytest.mark.parametrize("contact_model, k, moved", [("sap", 1e4, (1,)), ("sap", 1e12, (1, 2)),
                                                     ("lagged", 1e4, (6,)), ("similar", 1e4, (6,))])
def test_delassus_partials_match_kernel_differences(contact_model, k, moved):
    """``gradients.delassus_partials`` (∂p/∂w, the contact parameters' dependence on the Delassus estimate
    that a link's mass or a joint's damping moves) against central differences of the kernel parameters
    (``constraint_kernel_data``) in w: SAP compliant (k = 1e4 N/m: Rt = σw only) and near-rigid (k = 1e12:
    Rt and Rn = β²w/(4π²)), and the Hunt–Crossley models with εs = μσw n0 above v_s (σ = 10). Both
    branches are linear in w, so the difference is exact up to round-off (1e-9 relative)."""
    from convexsim.inverse.gradients import delassus_partials
    from convexsim.sap.problem import ContactProblem, constraint_kernel_data, delassus_diagonal

    extra = (dict(tau_d=0.01, phi0=-1e-3, beta=1.0, sigma=1e-2) if contact_model == "sap"
             else dict(d=1.0, fe0=20.0, vn0=-0.05, v_s=1e-4, sigma=10.0))
    problem = ContactProblem.from_dense(np.eye(3), np.array([0.02, 0.0, -0.01]), np.eye(3), dt=0.01,
                                        model=contact_model, mu=0.5, k=k, **extra)
    w = delassus_diagonal(problem)
    h = 1e-6 * w
    fd = (constraint_kernel_data(problem, w + h)[1] - constraint_kernel_data(problem, w - h)[1]) / (2 * h)
    an = delassus_partials(problem, w)
    assert sorted(np.nonzero(an[0])[0]) == list(moved)
    np.testing.assert_allclose(an, fd, rtol=0, atol=1e-9 * np.abs(fd).max())


def test_rollout_tangents_and_adjoint_match_finite_differences(arm):
    """20 steps of the swinging arm: dq_l/dθ forward = central differences of whole rollouts, every frame;
    the adjoint of L = Σ_l w_l·q_l equals the forward sensitivities (1e-9) and its PD-target gradient at
    three steps equals central differences."""
    model, state = arm
    steps = 20
    tg = scene_targets(model, state, steps)
    ro = tree_rollout(model, state, steps, parameters=ARM_PARAMS, targets=tg, linearize=True)
    Sq, _ = tangents(ro)
    nf = 0                                                  # no free body: q rows are the joints
    for j, p in enumerate(ARM_PARAMS):
        fd = fd_rollout(model, state, steps, p=p, targets=tg, h=H_REL)
        an = Sq[:, nf:, j]
        assert np.max(np.abs(an - fd)) <= PARAM_TOL * np.max(np.abs(fd)), p.label()
    w = np.random.default_rng(3).normal(size=(steps + 1, ro.nv))
    grad, _, _, mult = adjoint(ro, w, step_multipliers=True)
    np.testing.assert_allclose(grad, np.einsum("tn,tnj->j", w, Sq), rtol=1e-9, atol=0)
    dtg = target_gradient(ro, mult)
    for what in ((0, 0, 0), (7, 1, 0), (15, 0, 1)):
        fd = fd_rollout(model, state, steps, targets=tg, what=what, h=1e-6)
        L_fd = float(np.sum(w * fd))
        assert abs(dtg[what] - L_fd) <= TOL * abs(L_fd), what


def test_saturated_actuator_has_zero_target_gradient():
    """An elbow whose effort (0.5 N·m) is below the torque it must apply saturates: the step does not
    depend on its target (the saturated side's derivative, 0) and the finite difference agrees."""
    model, state, _ = prepare(ARM.replace("kp: 150, kd: 4,", "kp: 150, kd: 4, effort: 0.5,"))
    model = gradient_model(model)
    tg = scene_targets(model, state, 1)
    ro = tree_rollout(model, state, 1, targets=tg, linearize=True)
    assert np.all(ro.records[0].Mtarget[:, 1, :] == 0.0)
    fd = fd_rollout(model, state, 1, targets=tg, what=(0, 1, 0), h=1e-6)
    assert np.max(np.abs(fd)) < 1e-9


def test_bad_parameters_are_refused(arm):
    model, state = arm
    with pytest.raises(TreeGradientError, match="no joint 'wrist'"):
        tree_rollout(model, state, 1, parameters=(RobotParameter("damping", "wrist"),))
    with pytest.raises(TreeGradientError, match="KIND:NAME"):
        RobotParameter.parse("stiffness:elbow")
    with pytest.raises(TreeGradientError, match="not a link"):
        free, _, _ = prepare("scenes/iiwa_push.yaml")
        tree_rollout(free, state, 1, parameters=(RobotParameter("mass", "box"),))


IIWA_PARAMS = (RobotParameter("mass", "iiwa_link_7"), RobotParameter("mu", "box"),
               RobotParameter("kp", "iiwa_joint_2"), RobotParameter("damping", "iiwa_joint_4"))


@pytest.fixture(scope="module")
def iiwa():
    model, state, _ = prepare("scenes/iiwa_push.yaml")
    return gradient_model(model), state


@pytest.mark.parametrize("contact_model", ["sap", "lagged"])
def test_iiwa_pushing_box_step_matches_finite_differences(contact_model):
    """One step of the iiwa pushing its box 1.25 s in, with the `sap` and the `lagged` contact model (whose
    impulses read the previous normal velocity, so the velocity columns difference the whole residual) (13 dofs: the box's 6, the arm's 7; the pusher–box
    face and the box's floor corners, PD and limit rows on one Newton matrix): dv/dθ for a payload mass,
    the box's friction, a gain and a joint damping, and dv/d(previous state), against re-solved steps.

    The pusher's contacts hover at φ0 ≈ +3e-7 m (speculative): v̂n = −φ0/dt there and −φ0/(dt + τ_d) once
    touching, a kink at φ0 = 0 a step of 1e-6 m in the box's x already crosses (and the sliding box's floor
    corners sit 1e-3 from the contact/no-contact boundary), so every state column is checked with 1e-8
    steps, where the step is smooth (docs/identify.md §6); 1e-5 relative, the differences carry ~1e-7
    relative noise from the solver's 1e-12 residual."""
    from convexsim.inverse.trees import _shift
    from convexsim.stepping import StepContext, step

    model, state, _ = prepare("scenes/iiwa_push.yaml", contact_model=contact_model)
    model = gradient_model(model)
    ctx = StepContext()
    for _ in range(1250):
        state, info = step(model, state, ctx)
    assert info.contacts.count >= 4 and state.v[1, 3] > 0.05       # pushed and sliding
    rec = tree_rollout(model, state, 1, parameters=IIWA_PARAMS, linearize=True).records[0]
    # the partials differentiate the step's own problem: trees.step_stages is sap_stepper.step_problem
    assert_partials_match(model, state, rec.v_next, IIWA_PARAMS)
    v1 = lambda s, **kw: velocity_vector(model, tree_rollout(model, s, 1, **kw).states[1])  # noqa: E731
    for j, p in enumerate(IIWA_PARAMS):
        base = robot_value(model, p)
        h = H_REL * max(base, 1.0)
        fd = (v1(state, values={p: base + h}) - v1(state, values={p: base - h})) / (2 * h)
        an = rec.solve(rec.Mtheta[:, j])
        assert np.max(np.abs(fd)) > 0, p.label()
        assert np.max(np.abs(an - fd)) <= PARAM_TOL * np.max(np.abs(fd)), p.label()
    for which in ("dq", "dv"):
        M = rec.Mq if which == "dq" else rec.Mv
        for col in range(13):
            e = np.zeros(13)
            e[col] = 1e-8
            fd = (v1(_shift(model, state, **{which: e})) - v1(_shift(model, state, **{which: -e}))) / 2e-8
            an = rec.solve(M[:, col])
            assert np.max(np.abs(an - fd)) <= TOL * np.max(np.abs(fd)), (which, col)


def test_iiwa_rollout_matches_finite_differences(iiwa):
    """10 steps of the iiwa settling under its PD actuators at t = 0 with the box resting on the floor
    (four corner contacts): d(joint angles, box position)/dθ for a payload mass, a gain and a joint damping,
    forward against central differences of whole rollouts, and the adjoint equal to them (1e-9). The arm
    starts on its targets, so the gain moves the joints by only ~1e-7 rad per N·m/rad here: a relative step
    of 1e-3 keeps the solver's ~1e-12 noise out of the difference (truncation O(h²) ≈ 1e-6)."""
    model, state = iiwa
    steps = 10
    params = (IIWA_PARAMS[0], IIWA_PARAMS[2], IIWA_PARAMS[3])
    ro = tree_rollout(model, state, steps, parameters=params, linearize=True)
    Sq, _ = tangents(ro)
    obs = lambda r: np.concatenate([r.positions().reshape(steps + 1, -1), r.q], axis=1)   # noqa: E731
    rows = np.r_[3:6, 6:13]                                 # box position, then the 7 joints
    for j, p in enumerate(params):
        base = robot_value(model, p)
        h = 1e-3 * max(base, 1.0)
        fd = (obs(tree_rollout(model, state, steps, values={p: base + h}))
              - obs(tree_rollout(model, state, steps, values={p: base - h}))) / (2 * h)
        an = Sq[:, rows, j]
        assert np.max(np.abs(fd)) > 0, p.label()
        assert np.max(np.abs(an - fd)) <= TOL * np.max(np.abs(fd)), p.label()
    w = np.random.default_rng(5).normal(size=(steps + 1, ro.nv))
    grad = adjoint(ro, w)[0]
    np.testing.assert_allclose(grad, np.einsum("tn,tnj->j", w, Sq), rtol=1e-9, atol=0)
