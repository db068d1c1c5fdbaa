"""A step is a function of (model, state, context): the same inputs give bit-identical results,
whatever else ran in the process before (other scenes, other solvers, other contexts)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from convexsim.simulate import prepare
from convexsim.stepping import StepContext, step
from repo_paths import SCENES


def _advance(model, state, n, ctx):
    for _ in range(n):
        state, _ = step(model, state, ctx)
    return state


def _other_work():
    """Step other scenes with both solvers, sharing nothing with the step under test."""
    for scene, solver, n in (("sphere_drop", "sap", 5), ("mixed_clutter", "lcp", 5), ("capsule_roll", "sap", 5)):
        m, s, _ = prepare(SCENES / f"{scene}.yaml", solver=solver)
        _advance(m, s, n, StepContext())


def _same(a, b):
    (sa, ia), (sb, ib) = a, b
    assert sa.q.tobytes() == sb.q.tobytes() and sa.v.tobytes() == sb.v.tobytes()
    assert ia.gamma.tobytes() == ib.gamma.tobytes() and ia.iterations == ib.iterations


@pytest.mark.parametrize("solver", ["sap", "lcp"])
def test_same_step_twice_is_bit_identical(solver):
    model, state, _ = prepare(SCENES / "box_stack.yaml", solver=solver)
    warm = StepContext()
    state = _advance(model, state, 40, warm)  # boxes in contact
    first_fresh = step(model, state, StepContext())
    first_warm = step(model, state, copy.deepcopy(warm))
    assert first_fresh[1].contacts.count > 0
    _other_work()
    _same(first_fresh, step(model, state, StepContext()))
    _same(first_warm, step(model, state, copy.deepcopy(warm)))
    _same(first_fresh, step(model, state))  # no context: a fresh one


def test_cached_symbolic_analysis_changes_nothing():
    """SAP with a context that has seen other graphs equals SAP with a fresh context, bit for bit (the
    reference path, which owns the symbolic cache)."""
    model, state, _ = prepare(SCENES / "box_stack.yaml")
    ctx = StepContext()
    for _ in range(60):
        fresh = step(model, state, StepContext(), path="reference")
        cached = step(model, state, ctx, path="reference")
        _same(fresh, cached)
        state = cached[0]
    assert ctx.symbolic.hits > 0  # the cache was actually used


@pytest.mark.roundoff
def test_kept_supernodal_analysis_changes_only_round_off():
    """The compiled step keeps a large island's symbolic analysis while the contact graph stays inside its
    pattern, so a warm context may factor in a larger pattern (another elimination order) than a fresh one:
    the same step to round-off — |Δv| ≤ 1e-12 m/s and |Δγ| ≤ 1e-12 N·s here, where v is O(1 m/s) and γ
    O(1e-2 N·s) — with the same contacts and Newton iterations. A copy of the warm context still gives the
    same bits."""
    model, state, _ = prepare(SCENES / "pile_100.yaml")
    ctx = StepContext()
    state = _advance(model, state, 25, ctx)  # landing: the graph changes every step
    hits = ctx.symbolic.hits
    for _ in range(10):
        fresh = step(model, state, StepContext())
        twin = copy.deepcopy(ctx)
        warm = step(model, state, ctx)
        _same(warm, step(model, state, twin))
        assert warm[1].contacts.count == fresh[1].contacts.count > 100
        assert warm[1].iterations == fresh[1].iterations
        assert np.abs(warm[0].v - fresh[0].v).max() <= 1e-12
        assert np.abs(warm[1].gamma - fresh[1].gamma).max() <= 1e-12
        state = warm[0]
    assert ctx.symbolic.hits > hits  # a kept analysis was actually used


def test_lcp_warm_start_stays_in_its_context(monkeypatch):
    """Two runs of one model with their own contexts do not see each other's warm start."""
    from convexsim.stepping import lcp_islands

    monkeypatch.setattr(lcp_islands, "WARM_MIN_SIZE", 0)  # box_stack's LCPs are below the warm-start size
    model, state, _ = prepare(SCENES / "box_stack.yaml", solver="lcp")
    a, b = StepContext(), StepContext()
    s_a = _advance(model, state, 20, a)
    _, info = step(model, s_a, b)
    assert not info.warm_attempted
    _, info = step(model, s_a, a)
    assert info.warm_attempted
    assert np.isfinite(s_a.q).all()
