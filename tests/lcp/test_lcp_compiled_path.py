"""The compiled LCP step (``stepping.lcp_compiled``) against the Python reference step (``path="reference"``).

The compiled kernel runs the reference's own kernels in the reference's order (collision, frames, Jacobian
blocks, free motion and integration are the compiled SAP step's, which reproduce the Python ones; the dense
(M, q) is the same ``assemble_dense``; Lemke is the same revised kernel with the same options; A⁻¹ by LAPACK
gesv, as ``np.linalg.inv``). So the trajectories agree to round-off of the few places where the two take a
different but equivalent route (LAPACK/BLAS entry points of numba vs numpy, 3-term sums in another order):
per step ~1e-16 relative, accumulated over up to 2500 steps and amplified by the contact response (measured
on 2026-11-26: sphere_drop bitwise equal, box_stack ≤ 6e-28, incline_slip and capsule_roll ≤ 7e-13 in q, v).
The bound is 1e-9 in q [m, –] and v [m/s, rad/s] and 1e-9·max(1, max|γ|) in γ [N·s]: three orders above
the measured drift (another machine's BLAS may round differently), far below any physical scale of these
scenes (mm, mm/s, mN·s), so a wrong index, sign or missing term (≥ 1e-6) fails. Pivot counts, rungs and
contact sets must be equal exactly (a different Lemke path would show there first).
"""

from __future__ import annotations

import numpy as np
import pytest

from convexsim.lcp.lemke import LemkeStatus
from convexsim.simulate import prepare
from convexsim.stepping import StepContext
from convexsim.stepping import lcp_stepper as stepper
from convexsim.stepping.lcp_compiled import lcp_compiled_supported
from repo_paths import scene_file

ROUND_OFF = 1e-9
"""Bound on |q − q_ref|, |v − v_ref| and |γ − γ_ref|/max(1, max|γ_ref|) per step (module docstring)."""

SCENES = [("sphere_drop", None), ("box_slide", None), ("box_stack", None), ("incline_stick", None),
          ("incline_slip", None), ("capsule_roll", None)]


def _compare(model, state, steps: int, warm: bool, before_step=None):
    """Step both paths side by side from ``state`` (``before_step(k)`` called first); assert equality as
    stated; returns the sets of ``LcpStepInfo.path`` and ``rung`` values of the default path's steps."""
    a, b = state, state
    ca, cb = StepContext(), StepContext()
    taken, rungs = set(), set()
    for k in range(steps):
        if before_step is not None:
            before_step(k)
        a, ia = stepper.lcp_step(model, a, ca, warm_start=warm, path="reference")
        b, ib = stepper.lcp_step(model, b, cb, warm_start=warm)
        taken.add(ib.path)
        rungs.add(ib.rung)
        where = f"step {k}"
        assert (ib.rung, ib.pivots, ib.iterations, ib.islands, ib.lemke_runs, ib.warm_attempted,
                ib.warm_accepted, ib.warm_solves, ib.status, ib.converged) == \
               (ia.rung, ia.pivots, ia.iterations, ia.islands, ia.lemke_runs, ia.warm_attempted,
                ia.warm_accepted, ia.warm_solves, ia.status, ia.converged), where
        assert ib.contacts.count == ia.contacts.count, where
        for f in ("geom_a", "geom_b", "body_a", "body_b"):
            np.testing.assert_array_equal(getattr(ib.contacts, f), getattr(ia.contacts, f), err_msg=where)
        np.testing.assert_allclose(ib.contacts.phi, ia.contacts.phi, rtol=0, atol=ROUND_OFF, err_msg=where)
        scale = max(1.0, float(np.abs(ia.gamma).max(initial=0.0)))
        np.testing.assert_allclose(ib.gamma, ia.gamma, rtol=0, atol=ROUND_OFF * scale, err_msg=where)
        np.testing.assert_allclose(ib.force_world * model.time_step, ia.force_world * model.time_step, rtol=0,
                                   atol=ROUND_OFF * scale, err_msg=where)
        np.testing.assert_allclose(b.q, a.q, rtol=0, atol=ROUND_OFF, err_msg=where)
        np.testing.assert_allclose(b.v, a.v, rtol=0, atol=ROUND_OFF, err_msg=where)
        assert (b.t, b.step) == (a.t, a.step)
        if warm and ia.contacts.count:       # the warm-start bookkeeping: the same guess for any next LCP
            m = ia.contacts.count
            mu_any = bool(np.any(_mu(model, ia.contacts) > 0))
            d = model.solver.friction_directions if mu_any else 0
            layout = stepper.ContactLcpLayout(m, d, np.zeros((d, 2)), np.zeros((0, 0)), np.zeros((0, 0)))
            keys = stepper.contact_keys(ia.contacts)
            ga = ca.lcp_warm.guess(model, a.step, keys, layout)
            gb = cb.lcp_warm.guess(model, b.step, keys, layout)
            assert ga is not None and gb is not None, where
            np.testing.assert_array_equal(gb, ga, err_msg=where)
    return taken, rungs


def _mu(model, contacts):
    from convexsim.stepping.contacts import combined_parameters
    return np.asarray(combined_parameters(model, contacts).mu)


@pytest.mark.parametrize("warm", [True, False])
@pytest.mark.parametrize("name", [s for s, _ in SCENES])
def test_compiled_trajectory_equals_reference(name, warm):
    """Full duration of each small shipped scene, warm start on and off: state, impulses, contacts, step info
    equal to ROUND_OFF; every step taken by the compiled kernel (none handed to the reference)."""
    model, state, duration = prepare(scene_file(name), solver="lcp")
    ok, reason = lcp_compiled_supported(model)
    assert ok, reason
    steps = int(round(duration / model.time_step))
    taken, _ = _compare(model, state, steps, warm)
    assert taken == {"compiled"}, taken


def test_warm_size_steps_go_to_reference_with_the_compiled_basis(monkeypatch):
    """box_stack with WARM_MIN_SIZE switched every other step between 10⁶ (the compiled path takes the step
    and stores its basis, ``store_per_contact``) and 0 (the LCP is warm-start sized: the compiled path hands
    the step to the reference, which warm-starts from that stored basis). Same trajectory and step info as
    the reference path under the same switching, warm rungs included."""
    model, state, _ = prepare(scene_file("box_stack"), solver="lcp")

    def switch(k):
        monkeypatch.setattr(stepper, "WARM_MIN_SIZE", 0 if k % 2 else 10**6)

    taken, rungs = _compare(model, state, 200, True, before_step=switch)
    assert taken == {"compiled", "reference: warm-start size"}, taken
    assert "warm" in rungs, rungs          # the stored basis was used (and accepted) on some step


def test_pivot_limit_failure_is_reported_as_by_the_reference():
    """sphere_drop with lcp_max_pivots = 1: the first landing step's LCP needs two pivots. The compiled path
    hands that step to the reference chain, which fails the same way: LcpStepError at the same step, time,
    contacts, status, pivots and message as the reference path alone."""
    model, state, _ = prepare(scene_file("sphere_drop"), solver="lcp", overrides={"solver.lcp_max_pivots": 1})
    errors = []
    for path in ("reference", "auto"):
        s, ctx = state, StepContext()
        with pytest.raises(stepper.LcpStepError) as exc:
            for _ in range(1000):
                s, _ = stepper.lcp_step(model, s, ctx, path=path)
        errors.append(exc.value)
    ref, comp = errors
    assert comp.status == LemkeStatus.PIVOT_LIMIT
    assert (comp.step, comp.time, comp.contacts, comp.status, comp.pivots, str(comp)) == \
           (ref.step, ref.time, ref.contacts, ref.status, ref.pivots, str(ref))


def test_secondary_ray_is_reported_as_by_the_reference():
    """A ball jammed between two fixed plates (penetrating both, no solution): the ray is reported with the
    same contacts, step and message on both paths."""
    from test_stepper import SPHERE_BETWEEN_PLATES

    model, state, _ = prepare(SPHERE_BETWEEN_PLATES)
    assert lcp_compiled_supported(model)[0]
    errors = []
    for path in ("reference", "auto"):
        with pytest.raises(stepper.LcpStepError) as exc:
            stepper.lcp_step(model, state, StepContext(), path=path)
        errors.append(exc.value)
    ref, comp = errors
    assert comp.status == LemkeStatus.SECONDARY_RAY and sorted(comp.contacts) == [0, 1]
    assert (comp.step, comp.contacts, comp.pivots, str(comp)) == (ref.step, ref.contacts, ref.pivots, str(ref))


def test_nonfinite_state_is_reported_as_by_the_reference():
    """A NaN velocity: the compiled path takes no such step; ``step`` reports it as for the reference."""
    from convexsim.stepping import SimulationError, step

    model, state, _ = prepare(scene_file("box_slide"), solver="lcp")
    state.v[1, 3] = np.nan
    msgs = []
    for path in ("reference", "auto"):
        with pytest.raises(SimulationError) as exc:
            step(model, state, StepContext(), path=path)
        msgs.append(str(exc.value))
    assert msgs[0] == msgs[1]


def test_unsupported_models_name_the_reason():
    """Restitution stays on the reference path; path='compiled' then raises naming why."""
    model, state, _ = prepare(scene_file("sphere_drop"), solver="lcp", overrides={"solver.lcp_restitution": 0.5})
    ok, reason = lcp_compiled_supported(model)
    assert not ok and "restitution" in reason
    with pytest.raises(ValueError, match="restitution"):
        stepper.lcp_step(model, state, path="compiled")
    _, info = stepper.lcp_step(model, state)
    assert info.path == "reference"
    from convexsim.simulate import run_model
    with pytest.raises(ValueError, match="restitution"):          # refused before the run starts
        run_model(model, state, duration=0.01, path="compiled")
