"""The compiled LCP step of tree models (convexsim.stepping.lcp_composition) against its reference
(convexsim.stepping.lcp_reference): stage by stage on the shipped robot scenes (the trees' A and v* also against
the independent numpy sums of ``tree_reference``, the PD fold against its definition from the scene's gains
and targets), over short runs, and on physics neither path can tune (a pendulum resting on its rigid limit,
the iiwa's PD hold)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tree_reference

from convexsim.dynamics import contact_frames
from convexsim.multibody import gravity_forces
from convexsim.simulate import prepare
from convexsim.stepping import StepContext, dispatch
from convexsim.stepping.contacts import detect_contacts
from convexsim.stepping.free_motion import assemble
from convexsim.stepping.jacobians import contact_jacobian
from convexsim.stepping.packing import packed, packed_forest
from convexsim.stepping.free_motion import dense_free_motion as free_motion
from convexsim.stepping.jacobians import dense_contact_rows as contact_rows
from convexsim.stepping.lcp_rows import fold_forest_pd, joint_rows
from convexsim.stepping.post_solve import ROW_COUPLER
from convexsim.stepping.lcp_reference import pd_and_limit_rows

ROUNDOFF = 1e-12
"""Relative bound of a stage against its reference: the same quantity by other formulas or in another order
(CRBA and RNEA in numba against the numpy body sums of ``tree_reference``, LAPACK solves of <= 20 x 20
blocks); measured at most a few 1e-15, so three orders of margin."""
FD_BOUND = 2e-9
"""Relative bound on v* against ``tree_reference.free_motion``, whose bias forces take J̇ v by central
differences (O(ε²), ε = 1e-5; measured <= 1.3e-10 on random trees)."""


def _advanced(scene, steps):
    """(model, state) of ``scene`` with the LCP solver after ``steps`` compiled steps (contacts made)."""
    model, state, _ = prepare(scene, solver="lcp")
    ctx = StepContext()
    for _ in range(steps):
        state, info = dispatch.step(model, state, ctx)
        assert info.path == "compiled", info.path
    return model, state


def _close(a, b, what):
    scale = max(1.0, float(np.abs(b).max(initial=0.0)))
    assert np.abs(np.asarray(a) - np.asarray(b)).max(initial=0.0) <= ROUNDOFF * scale, what


@pytest.mark.parametrize("scene, steps", [("iiwa_push", 5), ("gripper_lift", 5), ("robotiq_pick", 5)])
def test_stages_agree_with_the_reference(scene, steps):
    """Free motion A, v*; the PD fold (A', v*', c, f₀); the limit and coupler rows; the contact frames and
    the contact Jacobian rows (on the reference's contact set): compiled stages equal the reference's to
    ROUNDOFF."""
    model, state = _advanced(scene, steps)
    pm, pf = packed(model), packed_forest(model)
    q, v, tq, tv = (np.ascontiguousarray(x, dtype=float) for x in (state.q, state.v, state.tree_q, state.tree_v))
    A, v_star, S = free_motion(pm.fpar, pm.model_arrays, pf.fa, q, v, tq, tv, np.zeros_like(tv),
                               np.zeros((model.nbody, 6)))
    system = assemble(model, state)
    _close(A, system.A, "A = M + dt D")
    _close(v_star, system.v_star, "v*")
    nmov = pm.model_arrays[3].shape[0]
    dt = model.time_step
    for tree in model.forest.trees:                 # the tree blocks against the independent numpy sums
        s = 6 * nmov + tree.v_start
        A_ref, vs_ref = tree_reference.free_motion(tree.model, tree.q_of(tq), tree.v_of(tv), dt)
        _close(A[s:s + tree.nv, s:s + tree.nv], A_ref, "A = M + dt D of a tree")
        assert np.abs(v_star[s:s + tree.nv] - vs_ref).max() <= FD_BOUND * max(1.0, np.abs(vs_ref).max()), "v*"
    A0, vs0 = A.copy(), v_star.copy()
    nact = pf.ra[6].shape[0]
    c, f0, sat, saturated = np.zeros(nact), np.zeros(nact), np.zeros(nact), np.zeros(nact, np.bool_)
    no_target = np.full(nact, np.nan)
    fold_forest_pd(pf.fa, pf.ra, float(state.t), dt, tq, nmov, A, v_star, no_target, no_target, c, f0, sat,
                   saturated)
    _check_pd_fold(model, state, nmov, A0, vs0, A, v_star, c, f0, sat, saturated)
    A_ref, vs_ref, pds, limits = pd_and_limit_rows(model, state, system, None)
    _close(A, A_ref, "A with the PD folded in")
    _close(v_star, vs_ref, "v* with the PD folded in")
    assert [p[3] is not None for p in pds] == list(saturated)
    nmax = 2 * pf.ra[1].shape[0] + 2 * pf.ra[23].shape[0]
    rows = (np.empty(nmax, np.int64), np.empty(nmax, np.int64), np.empty(nmax), np.empty(nmax),
            np.empty((nmax, 2), np.int64), np.empty((nmax, 2)))
    nl = joint_rows(pf.fa, pf.ra, model.time_step, tq, tv, nmov, v_star, *rows)
    kinds, _, signs, gaps, dofs, _ = rows
    lim = [r for r in range(nl) if kinds[r] != ROW_COUPLER]
    assert [(int(dofs[r, 0]), float(signs[r])) for r in lim] == [(d, s) for d, s, _, _ in limits]
    _close(gaps[lim], [g for _, _, g, _ in limits], "limit gaps")
    assert nl - len(lim) == 2 * len(model.forest.constraints)      # robotiq: five mimic couplers, two rows each
    contacts = detect_contacts(model, state, StepContext())
    assert contacts.count > 0
    R_WC = np.empty((contacts.count, 3, 3))
    J = np.zeros((contacts.count, 3, system.nv))
    geoms = np.ascontiguousarray(np.stack([contacts.geom_a, contacts.geom_b], axis=1), dtype=np.int64)
    contact_rows(pm.model_arrays, pf.fa, nmov, q, S, geoms, np.ascontiguousarray(contacts.point),
                 np.ascontiguousarray(contacts.normal), R_WC, J)
    _close(R_WC, contact_frames(contacts.normal), "contact frames")
    Jc, _, _ = contact_jacobian(model, state, system, contacts, R_WC)
    _close(J, Jc.reshape(contacts.count, 3, system.nv), "contact Jacobian rows")


def _check_pd_fold(model, state, nmov, A0, vs0, A, v_star, c, f0, sat, saturated):
    """The PD fold against its definition, actuator by actuator from the scene's gains and targets: c = dt Kp
    + Kd, f₀ = −Kp (q₀ − q_d) + Kd v_d + u_ff; implicit actuators add dt·c to A_dd and their force
    u = f₀ − c v*'_d, within ±effort, acts over the step: A' v*' = A v* + dt Σ u e_d (saturated ones:
    u = ±effort explicitly, and the implicit force would have exceeded it)."""
    dt = model.time_step
    dA = np.zeros_like(A0)
    impulse = np.zeros(A0.shape[0])
    a = 0
    for tree in model.forest.trees:
        for act in tree.actuators:
            d = 6 * nmov + tree.v_start + int(tree.model.joint_dofadr[act.joint])
            q_d, v_d = act.target(float(state.t))
            q0 = tree.q_of(state.tree_q)[int(tree.model.joint_qadr[act.joint])]
            _close(c[a], dt * act.kp + act.kd, "c = dt Kp + Kd")
            _close(f0[a], -act.kp * (q0 - q_d) + act.kd * v_d + act.u_ff, "f0")
            if saturated[a]:
                assert abs(sat[a]) == act.effort and abs(f0[a] - c[a] * v_star[d]) >= act.effort * (1 - 1e-12)
                impulse[d] += dt * sat[a]
            else:
                u = f0[a] - c[a] * v_star[d]
                assert abs(u) <= act.effort
                dA[d, d] += dt * c[a]
                impulse[d] += dt * f0[a]
            a += 1
    assert a == c.shape[0] and a > 0
    _close(A, A0 + dA, "A' = A + dt c on the actuated dofs")
    _close(A @ v_star, A0 @ vs0 + impulse, "A' v*' = A v* + dt f")


def _runs(scene, steps, state_edit=None):
    model, state, _ = prepare(scene, solver="lcp")
    if state_edit:
        state = state_edit(state)
    out = {}
    for path in ("auto", "reference"):
        s, ctx, infos = state, StepContext(), []
        for _ in range(steps):
            s, info = dispatch.step(model, s, ctx, path=path)
            infos.append(info)
        out[path] = (s, infos)
    return model, out


@pytest.mark.roundoff
@pytest.mark.parametrize("scene, steps", [("iiwa_push", 40), ("gripper_lift", 40), ("gripper_mesh_pick", 20)])
def test_runs_agree_with_the_reference(scene, steps):
    """A few dozen steps on both paths: every step compiled, same contact counts and Lemke pivots, states and
    forces equal to 1e-9 (measured: bit for bit on x86-64; the bound leaves room for another BLAS's
    summation order in A⁻¹ and Lemke's solves, as long as the pivot sequence is the same). Marked roundoff
    (rerun under other BLAS kernels) but not numba_target: under the generic numba CPU it would compile the
    whole tree LCP step again (≈ 30 s of CPU), and the Lemke kernel it runs has numba_target tests of its own."""
    _, out = _runs(scene, steps)
    (sc, ic), (sr, ir) = out["auto"], out["reference"]
    assert all(i.path == "compiled" for i in ic)
    assert [i.contacts.count for i in ic] == [i.contacts.count for i in ir]
    assert [i.pivots for i in ic] == [i.pivots for i in ir]
    for a, b in ((sc.tree_q, sr.tree_q), (sc.tree_v, sr.tree_v), (sc.q, sr.q), (sc.v, sr.v)):
        assert np.abs(a - b).max() <= 1e-9
    for a, b in zip(ic, ir):
        assert np.abs(a.actuator_force - b.actuator_force).max(initial=0.0) <= 1e-6
        assert np.abs(a.force_world - b.force_world).max(initial=0.0) <= 1e-6
        assert a.limit_force.keys() == b.limit_force.keys()
        for name in b.constraint_force:
            assert abs(a.constraint_force[name][0] - b.constraint_force[name][0]) <= 1e-6


@pytest.mark.parametrize("path", ["auto", "reference"])
def test_pendulum_rests_on_its_rigid_limit(path):
    """pendulum_limit at rest on its lower limit (q = 0.3 rad, v = 0): the rigid limit row's impulse is the
    gravity torque m g L sin 0.3 times dt (limit_force = m g L sin 0.3, m = 1 kg, L = 1 m) and the bob does not
    move, to round-off, on both paths."""
    def on_limit(state):
        state.tree_q[:] = 0.3
        state.tree_v[:] = 0.0
        return state
    model, out = _runs("pendulum_limit", 5, on_limit)
    s, infos = out[path]
    tau = -model.gravity[2] * 1.0 * 1.0 * math.sin(0.3)
    for info in infos:
        assert info.path == ("compiled" if path == "auto" else "reference")
        assert info.limit_force["hinge"] == pytest.approx(tau, rel=1e-12)
    assert abs(s.tree_q[0] - 0.3) <= 1e-15 and abs(s.tree_v[0]) <= 1e-12


def test_compiled_arm_holds_its_pose_with_gravity_over_kp():
    """iiwa_push with the LCP on the compiled path: at t = 1 s (before the push) Kp (q − q_d) = −g(q) per
    joint (implicit PD, as SAP's) and each actuator applies g(q), to 1e-6 of the largest gravity torque."""
    model, state, _ = prepare("iiwa_push", solver="lcp")
    ctx = StepContext()
    for _ in range(round(1.0 / model.time_step)):
        state, info = dispatch.step(model, state, ctx)
    assert info.path == "compiled"
    tree = model.forest.trees[0]
    q = state.tree_q[tree.q_start:tree.q_start + tree.nq]
    g = gravity_forces(tree.model, q)
    err = np.array([a.kp * (q[a.joint] - a.target(state.t)[0]) for a in tree.actuators])
    assert np.abs(err + g).max() <= 1e-6 * np.abs(g).max()
    assert np.abs(info.actuator_force - g).max() <= 1e-6 * np.abs(g).max()
    assert np.abs(g).max() > 10.0


def test_refused_models_take_the_reference_with_the_reason_and_controlled_steps_do_not():
    """A cone limit keeps a tree model on the reference step (the eligibility check names it); a step driven by
    a controller takes the compiled step (tests/scripting/test_lcp_controls.py)."""
    text = """
time_step: 0.001
solver: {kind: lcp}
bodies:
  - {name: bob, mass: 1.0, geometries: [{shape: sphere, radius: 0.05}]}
joints:
  - {name: shoulder, type: ball, child: bob, position: [0, 0, 1.0], child_offset: [0, 0, -0.5], cone_limit: 0.5}
"""
    model, _, _ = prepare(text)
    r = dispatch.route(model)
    assert r.path == "reference" and "cone limits" in r.reason
    model, _, _ = prepare("pendulum", solver="lcp")
    assert dispatch.route(model).path == "compiled"
    assert dispatch.route(model, controlled=True).path == "compiled"


def test_a_step_the_kernel_refuses_is_taken_by_the_reference_with_the_reason(monkeypatch):
    """When the kernel returns a status other than LCP_OK (here: its first Lemke run failed, forced) the
    dispatcher takes that step by the reference, which says why in ``info.path``; the state is the
    reference's."""
    import convexsim.stepping.lcp_composition as TK
    from convexsim.stepping import status as LK

    model, state = _advanced("gripper_lift", 3)
    expected, _ = dispatch.step(model, state, StepContext(), path="reference")
    kernel = TK.lcp_step_kernel
    monkeypatch.setattr(TK, "lcp_step_kernel", lambda *a: (LK.LCP_LEMKE_FAILED, *kernel(*a)[1:]))
    new, info = dispatch.step(model, state, StepContext())
    assert info.path == "reference: first Lemke run failed"
    assert np.array_equal(new.tree_q, expected.tree_q) and np.array_equal(new.q, expected.q)
