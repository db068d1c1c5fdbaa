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

Which path takes a step is not asserted from one machine's run: which steps of a long run need a fallback rung,
or reach an island above the dense-assembly size, depends on the last bits of the trajectory, i.e. on the BLAS
kernel and the processor (a box_stack run on an AVX2 machine reaches an island above the dense size that the
AVX-512 one never does). The tests force the branch they need (monkeypatched ``WARM_MIN_SIZE`` and
``DENSE_ASSEMBLY_WORK``) and assert, step by step, the path that the step's own data call for
(:func:`_expected_path`). ``make test`` reruns this file under other BLAS kernels and numba targets (marker
``roundoff``).
"""

from __future__ import annotations

import collections

import numpy as np
import pytest

from convexsim.lcp.lemke import LemkeStatus
from convexsim.simulate import prepare
from convexsim.stepping import StepContext
from convexsim.stepping import lcp_info, lcp_islands, lcp_problem, lcp_step
from convexsim.stepping.packing import lcp_compiled_supported
from repo_paths import scene_file

ROUND_OFF = 1e-9
"""Bound on |q − q_ref|, |v − v_ref| and |γ − γ_ref|/max(1, max|γ_ref|) per step (module docstring)."""

SCENES = [("sphere_drop", 600), ("box_slide", 500), ("box_stack", 400), ("incline_stick", 300),
          ("incline_slip", 500), ("capsule_roll", 400)]
"""(scene, steps compared): each scene's events and then some, not its full duration (≈ 3.5× less work; the
compiled and reference steps are compared step by step, so a longer rest adds nothing): sphere_drop lands at
step 427 and rests; box_slide stops at 0.41 s (v0/(μg)); box_stack settles within ~30 steps and rests, its
20–28 contacts per step the largest LCPs here; incline_stick sticks from the start; incline_slip slides
throughout; capsule_roll rolls without slipping from 0.066 s."""


pytestmark = pytest.mark.roundoff   # compiled vs reference step by step: rerun under other BLAS/numba targets

FALLBACK_RUNGS = {"perturbed_q", "covering", "regularized"}
"""Rungs that mean the first cold Lemke run of some island failed (``lcp_info.RUNGS``)."""


def _expected_path(info, warm: bool, model) -> str:
    """The path the compiled LCP step must report for a step, from the reference path's ``info`` of the same
    step (the contract of ``stepping.lcp_compiled``): a warm-start-sized LCP with the warm start on is handed
    over as "warm-start size" (before any Lemke run); else an island whose first Lemke run fails (the
    reference then needs a fallback rung) as "first Lemke run failed"; every other step is compiled. The tests
    keep every island under the dense-assembly size (``DENSE_ASSEMBLY_WORK`` raised), so that reason cannot
    occur. Which steps need a fallback rung is round-off (module docstring); what each such step reports is
    not."""
    if warm and info.contacts.count and _unknowns(model, info.contacts) >= lcp_islands.WARM_MIN_SIZE:
        return "reference: warm-start size"
    if info.rung in FALLBACK_RUNGS:
        return "reference: first Lemke run failed"
    return "compiled"


def _unknowns(model, contacts) -> int:
    """Unknowns of the step's largest possible LCP (all contacts in one island): m·(d + 2), d = 0 frictionless."""
    d = model.solver.friction_directions if bool(np.any(_mu(model, contacts) > 0)) else 0
    return contacts.count * (d + 2) if d else contacts.count


@pytest.fixture
def dense_islands(monkeypatch):
    """Every island dense-assembled on both paths (none "above the dense size"), whatever the trajectory."""
    monkeypatch.setattr(lcp_problem, "DENSE_ASSEMBLY_WORK", 10**15)


def _compare(model, state, steps: int, warm: bool, before_step=None):
    """Step both paths side by side from ``state`` (``before_step(k)`` called first); assert equality as
    stated, and each step's path as :func:`_expected_path` says; returns the lists of the default path's
    ``LcpStepInfo.path`` and ``rung`` values, one per step."""
    a, b = state, state
    ca, cb = StepContext(), StepContext()
    taken, rungs = [], []
    for k in range(steps):
        if before_step is not None:
            before_step(k)
        a, ia = lcp_step(model, a, ca, warm_start=warm, path="reference")
        b, ib = lcp_step(model, b, cb, warm_start=warm)
        taken.append(ib.path)
        rungs.append(ib.rung)
        where = f"step {k}"
        assert ib.path == _expected_path(ia, warm, model), (where, ia.rung)
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
            layout = lcp_problem.ContactLcpLayout(m, d, np.zeros((d, 2)), np.zeros((0, 0)), np.zeros((0, 0)))
            keys = lcp_problem.contact_keys(ia.contacts)
            ga = ca.lcp_warm.guess(model, a.step, keys, layout)
            gb = cb.lcp_warm.guess(model, b.step, keys, layout)
            assert ga is not None and gb is not None, where
            np.testing.assert_array_equal(gb, ga, err_msg=where)
    return taken, rungs


def _mu(model, contacts):
    from convexsim.stepping.contacts import combined_parameters
    return np.asarray(combined_parameters(model, contacts).mu)


@pytest.mark.parametrize("warm", [True, False])
@pytest.mark.parametrize("name,steps", SCENES, ids=[s for s, _ in SCENES])
def test_compiled_trajectory_equals_reference(name, steps, warm, dense_islands):
    """The first ``steps`` steps of each small shipped scene (``SCENES``), warm start on and off: state,
    impulses, contacts, step info equal to ROUND_OFF; each step on the path its data call for
    (``_expected_path``), nearly all compiled.

    MIN_COMPILED_SHARE: every step of the full durations was compiled on the AVX-512 and AVX2 machines (no
    first Lemke run failed; these scenes' LCPs stay below the warm-start size); the bound only keeps the test
    from passing with the compiled kernel hardly used."""
    model, state, duration = prepare(scene_file(name), solver="lcp")
    ok, reason = lcp_compiled_supported(model)
    assert ok, reason
    assert steps <= int(round(duration / model.time_step))
    taken, _ = _compare(model, state, steps, warm)
    assert taken.count("compiled") >= MIN_COMPILED_SHARE * steps, collections.Counter(taken)


MIN_COMPILED_SHARE = 0.95
"""Share of a scene's steps that the compiled kernel must take itself (test_compiled_trajectory_equals_reference)."""


def test_warm_size_steps_go_to_reference_with_the_compiled_basis(monkeypatch, dense_islands):
    """box_stack with WARM_MIN_SIZE switched every other step between 10⁶ (the compiled path takes the step
    and stores its basis, ``store_per_contact``) and 0 (the LCP is warm-start sized: the compiled path hands
    the step to the reference, which warm-starts from that stored basis). Same trajectory and step info as
    the reference path under the same switching, warm rungs included; every island dense-assembled
    (``dense_islands``: which steps of the run reach an island above the default dense size is round-off,
    module docstring), so the paths are forced: each odd step with contacts handed over for its size, each
    even one compiled unless its first Lemke run failed."""
    model, state, _ = prepare(scene_file("box_stack"), solver="lcp")

    def switch(k):
        monkeypatch.setattr(lcp_islands, "WARM_MIN_SIZE", 0 if k % 2 else 10**6)

    taken, rungs = _compare(model, state, 200, True, before_step=switch)
    assert all(p == "reference: warm-start size" for p in taken[1::2]), collections.Counter(taken[1::2])
    assert taken[0::2].count("compiled") >= MIN_COMPILED_SHARE * 100, collections.Counter(taken[0::2])
    assert "warm" in rungs[1::2], collections.Counter(rungs)   # the stored basis was used (and accepted)


def test_pivot_limit_failure_is_reported_as_by_the_reference():
    """sphere_drop with lcp_max_pivots = 1: the first landing step's LCP needs two pivots. The compiled path
    hands that step to the reference chain, which fails the same way: LcpStepError at the same step, time,
    contacts, status, pivots and message as the reference path alone."""
    model, state, _ = prepare(scene_file("sphere_drop"), solver="lcp", overrides={"solver.lcp_max_pivots": 1})
    errors = []
    for path in ("reference", "auto"):
        s, ctx = state, StepContext()
        with pytest.raises(lcp_info.LcpStepError) as exc:
            for _ in range(1000):
                s, _ = lcp_step(model, s, ctx, path=path)
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
        with pytest.raises(lcp_info.LcpStepError) as exc:
            lcp_step(model, state, StepContext(), path=path)
        errors.append(exc.value)
    ref, comp = errors
    assert comp.status == LemkeStatus.SECONDARY_RAY and sorted(comp.contacts) == [0, 1]
    assert (comp.step, comp.contacts, comp.pivots, str(comp)) == (ref.step, ref.contacts, ref.pivots, str(ref))


@pytest.mark.parametrize("field", ["v", "q"])
def test_nonfinite_state_is_reported_as_by_the_reference(field):
    """A NaN in the box's velocity or pose: the compiled path (forced, not left to the dispatcher) and the
    reference both refuse the step with a SimulationError that names the step, its time and the body."""
    from convexsim.stepping import SimulationError, step

    model, state, _ = prepare(scene_file("box_slide"), solver="lcp")
    assert lcp_compiled_supported(model)[0]
    getattr(state, field)[1, 0] = np.nan
    errors = []
    for path in ("reference", "compiled"):
        with pytest.raises(SimulationError) as exc:
            step(model, state, StepContext(), path=path)
        errors.append(exc.value)
    for e in errors:
        assert e.step == 0 and str(e) == "step 0 (t = 0 s): non-finite state of bodies box", str(e)


def test_unsupported_models_name_the_reason():
    """Restitution stays on the reference path; path='compiled' then raises naming why."""
    model, state, _ = prepare(scene_file("sphere_drop"), solver="lcp", overrides={"solver.lcp_restitution": 0.5})
    ok, reason = lcp_compiled_supported(model)
    assert not ok and "restitution" in reason
    with pytest.raises(ValueError, match="restitution"):
        lcp_step(model, state, path="compiled")
    _, info = lcp_step(model, state)
    assert info.path == "reference"
    from convexsim.simulate import run_model
    with pytest.raises(ValueError, match="restitution"):          # refused before the run starts
        run_model(model, state, duration=0.01, path="compiled")
