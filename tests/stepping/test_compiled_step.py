"""The compiled SAP step (convexsim.stepping.compiled) against the reference Python step (sap_stepper).

Round-off bound: the compiled kernel evaluates the reference's formulas in the reference's order and
calls the same numba kernels (narrow phase, Delassus estimate, cone / Hunt–Crossley laws, Hessian
assembly, line searches). What differs: (1) an island of several bodies is factored by one dense
Cholesky in clique order, the reference by the supernodal factor in its elimination order; (2) numpy's
3x3 products (matmul, einsum, solve) may run BLAS/LAPACK kernels with another summation order or fused
multiply-adds. Both change the last bits of a step; the dynamics carry such differences on. Measured on
this machine over 200 steps: 0 (bit for bit) on sphere_drop, box_slide and box_stack, at most 4e-14 m or
m/s on the others. The tests assert ATOL = 1e-10 (m, m/s, rad/s, N·s·…) — far below any physical scale
of these scenes and far above the measured round-off — together with exactly equal contact sets,
Newton iteration counts, line-search evaluation counts and statuses.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import threading

import numpy as np
import pytest

from convexsim.simulate import RunInterrupted, prepare, run_model
from convexsim.stepping import SimulationError, StepContext, compiled_step_supported, step
from repo_paths import SCENES

ATOL = 1e-10
"""Largest difference allowed between the compiled and the reference step (module docstring)."""

SMALL = [("sphere_drop", 200), ("box_slide", 200), ("box_stack", 200), ("incline_stick", 200),
         ("incline_slip", 200), ("capsule_roll", 200), ("mixed_clutter", 30), ("sphere_pile", 30)]


def _model(name, **kw):
    return prepare(SCENES / f"{name}.yaml", **kw)


def _compare_steps(model, state, n, start=0):
    sr, sc = state.copy(), state.copy()
    cr, cc = StepContext(), StepContext()
    worst = 0.0
    for k in range(n):
        sr, ir = step(model, sr, cr, path="reference")
        sc, ic = step(model, sc, cc, path="compiled")
        where = f"step {start + k + 1}"
        a, b = ir.contacts, ic.contacts
        assert a.count == b.count, where
        for name in ("geom_a", "geom_b", "body_a", "body_b"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=where)
        for name in ("phi", "point", "normal"):
            np.testing.assert_allclose(getattr(b, name), getattr(a, name), rtol=0, atol=ATOL, err_msg=where)
        assert (ic.iterations, ic.line_search_evaluations, ic.status, ic.converged) == \
            (ir.iterations, ir.line_search_evaluations, ir.status, ir.converged), where
        if a.count:
            # γt in the world frame (force_world = R_WC γ / dt): the tangent axes of dynamics.contact_frame
            # switch where two components of the normal tie (|nx| = |ny| on a symmetric pile), and the
            # two paths' normals agree only to round-off there
            np.testing.assert_allclose(ic.gamma[:, 2], ir.gamma[:, 2], rtol=0, atol=ATOL, err_msg=where)
            np.testing.assert_allclose(ic.force_world, ir.force_world, rtol=0, atol=ATOL / model.time_step,
                                       err_msg=where)
            assert abs(ic.momentum_residual - ir.momentum_residual) <= 1e-6 * max(ir.momentum_residual, 1e-6)
        np.testing.assert_allclose(sc.q, sr.q, rtol=0, atol=ATOL, err_msg=where)
        np.testing.assert_allclose(sc.v, sr.v, rtol=0, atol=ATOL, err_msg=where)
        assert (sc.t, sc.step) == (sr.t, sr.step)
        worst = max(worst, float(np.abs(sc.q - sr.q).max()), float(np.abs(sc.v - sr.v).max()))
    return worst


@pytest.mark.roundoff
@pytest.mark.parametrize("name,n", SMALL, ids=[s for s, _ in SMALL])
def test_compiled_step_equals_reference(name, n):
    """Check every shipped small scene's first n steps: the compiled step gives the reference step's
    contacts (the same pairs in the same order), iteration and line-search counts, statuses, impulses and
    states to ATOL."""
    model, state, _ = _model(name)
    assert compiled_step_supported(model) == (True, "")
    _compare_steps(model, state, n)


@pytest.mark.roundoff
@pytest.mark.parametrize("contact_model", ["lagged", "similar"])
def test_compiled_step_equals_reference_hunt_crossley(contact_model):
    """Check the Hunt–Crossley models (kernel parameters from the start-of-step normal velocity) on a
    scene with sliding, spinning and resting contacts."""
    model, state, _ = _model("mixed_clutter", contact_model=contact_model)
    _compare_steps(model, state, 25)
    model, state, _ = _model("box_slide", contact_model=contact_model)
    _compare_steps(model, state, 100)


@pytest.mark.roundoff
def test_compiled_step_equals_reference_backtracking_and_large_island():
    """Check the backtracking line search, and a stack whose island exceeds a lowered dense limit (the
    compiled step then factors it with the supernodal Cholesky inside its Newton loop)."""
    model, state, _ = _model("box_stack", overrides=["solver.line_search=backtracking"])
    _compare_steps(model, state, 60)
    from convexsim.stepping import packing

    model, state, _ = _model("box_stack")
    old = packing.ISLAND_MAX_DOFS
    try:
        packing.ISLAND_MAX_DOFS = 12
        packing._PACKED.clear()
        _compare_steps(model, state, 20)
    finally:
        packing.ISLAND_MAX_DOFS = old
        packing._PACKED.clear()


@pytest.mark.roundoff
@pytest.mark.parametrize("record_every", [1, 7])
def test_compiled_run_loop_equals_reference_run(record_every):
    """Check run_model's compiled loop records the reference loop's frames: same times, contact rows,
    statistics, and states to ATOL."""
    model, state, _ = _model("box_slide")
    ref, rs = run_model(model, state, duration=0.25, record_every=record_every, path="reference")
    com, cs = run_model(model, state, duration=0.25, record_every=record_every, path="compiled")
    np.testing.assert_array_equal(com.time, ref.time)
    for name in ("contact_offsets", "contact_body_a", "contact_body_b", "solver_iterations",
                 "solver_converged", "line_search_evaluations"):
        np.testing.assert_array_equal(getattr(com, name), getattr(ref, name), err_msg=name)
    for name in ("position", "quaternion", "linear_velocity", "angular_velocity", "contact_point",
                 "contact_normal", "contact_phi"):
        np.testing.assert_allclose(getattr(com, name), getattr(ref, name), rtol=0, atol=ATOL, err_msg=name)
    np.testing.assert_allclose(com.contact_force, ref.contact_force, rtol=0, atol=ATOL / model.time_step)
    assert (cs.steps, cs.iterations, cs.contacts) == (rs.steps, rs.iterations, rs.contacts)
    assert com.failure == ref.failure == ""


def test_eligibility_refusals():
    """Check compiled_step_supported names why a model cannot take the compiled step, and step(path=
    'compiled') refuses it with that reason while 'auto' takes the reference path. An LCP model is not the
    SAP step's; step(path='compiled') gives it the compiled LCP step (``stepping.lcp_compiled``)."""
    model, state, _ = _model("box_slide", solver="lcp")
    ok, reason = compiled_step_supported(model)
    assert not ok and "solver.kind is 'lcp'" in reason
    assert step(model, state, path="compiled")[1].path == "compiled"
    assert step(model, state, path="reference")[1].path == "reference"
    step(model, state, path="auto")   # the LCP step
    model, _, _ = _model("box_slide")
    shape = dataclasses.replace(model, geom_type=np.where(model.geom_type == 1, 7, model.geom_type))
    ok, reason = compiled_step_supported(shape)
    assert not ok and "geometry type(s) [7] not supported" in reason
    soft = dataclasses.replace(model, material_stiffness=np.zeros_like(model.material_stiffness))
    ok, reason = compiled_step_supported(soft)
    assert not ok and "stiffness = 0.0 is out of range" in reason
    dof = dataclasses.replace(model, body_dof=np.where(model.body_dof >= 0, model.body_dof + 6, -1))
    ok, reason = compiled_step_supported(dof)
    assert not ok and "not all free" in reason
    with pytest.raises(ValueError, match="path must be one of"):
        step(model, state, path="fast")


def test_nonfinite_state_named_within_one_step():
    """Check a non-finite state is reported with the step and the body: at the start (a NaN velocity)
    by both paths alike, and in the step that produces it (a NaN inertia)."""
    model, state, _ = _model("box_stack")
    bad = state.copy()
    bad.v[3, 2] = np.nan
    messages = []
    for path in ("compiled", "reference"):
        with pytest.raises(SimulationError) as err:
            step(model, bad, path=path)
        messages.append(str(err.value))
        assert err.value.step == 0
    assert messages[0] == messages[1] == f"step 0 (t = 0 s): non-finite state of bodies {model.body_names[3]}"
    # A NaN inertia makes the free motion of a spinning ball NaN: the compiled step stops in that step;
    # the reference step (no contact: no check at its end) stops at the start of the next one. Both name
    # step 1 and the ball.
    model, state, _ = _model("sphere_drop")
    inertia = model.body_inertia.copy()
    inertia[1] = np.nan
    sick = dataclasses.replace(model, body_inertia=inertia)
    state = state.copy()
    state.v[1, 0] = 1.0
    message = "step 1 (t = 0.001 s): non-finite state of bodies ball"
    with pytest.raises(SimulationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        step(sick, state, path="compiled")
    failures = [run_model(sick, state, duration=0.01, path=path)[0] for path in ("compiled", "reference")]
    assert [t.failure for t in failures] == [message, message]
    assert [t.num_frames for t in failures] == [1, 2]   # the reference recorded the NaN state of step 1


def test_overflowing_margin_raises_the_reference_error():
    """Check a step whose speculative margin overflows (|g| = inf in floating point) raises the reference
    path's ValueError on both paths, also from the compiled run loop. The scene gate refuses such a gravity
    in a scene file, so it is set on the compiled model, as a scripted user could."""
    import dataclasses

    model, state, _ = _model("sphere_drop")
    model = dataclasses.replace(model, gravity=np.array([1e308, 0.0, 0.0]))
    messages = []
    for path in ("reference", "compiled"):
        with pytest.raises(ValueError, match="per-body margins must be finite") as err:
            step(model, state, path=path)
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    with pytest.raises(ValueError, match="per-body margins must be finite"):
        run_model(model, state, duration=0.01, path="compiled")


def test_compiled_run_loop_interrupted_keeps_its_frames():
    """Check Ctrl-C during the compiled run loop raises RunInterrupted carrying every frame of the steps
    taken (record_every 1: frames = steps + 1) and a message naming the step reached."""
    model, state, _ = _model("box_stack")
    run_model(model, state, duration=0.01)   # load the kernels
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(RunInterrupted) as err:
            run_model(model, state, duration=200.0, path="compiled")
    finally:
        timer.cancel()
    rec, stats = err.value.recorder, err.value.stats
    assert 0 < stats.steps < 200_000
    assert len(rec.frames_t) == stats.steps + 1 == len(rec.frames_q)
    assert str(err.value) == f"interrupted by the user at step {stats.steps} (t = {rec.frames_t[-1]:.6g} s)"
    np.testing.assert_allclose(np.diff(rec.frames_t), model.time_step, rtol=1e-9)


@pytest.mark.roundoff
def test_compiled_supernodal_step_equals_reference_on_a_pile():
    """Check the 100-sphere pile, whose island (up to 600 dofs) exceeds the dense limit: the compiled step
    factors it with the supernodal Cholesky of an analysis kept across steps while the contact graph stays
    inside its pattern (SymbolicCache.covering; round-off only), the reference with a fresh exact analysis;
    same contacts, iterations and statuses, states within ATOL, over the landing (steps 1-40)."""
    model, state, _ = _model("pile_100")
    ctx = StepContext()
    _compare_steps(model, state, 40)
    for _ in range(40):
        state, info = step(model, state, ctx, path="compiled")
    assert ctx.big_islands and ctx.symbolic.hits > 0 and info.contacts.count > 100
