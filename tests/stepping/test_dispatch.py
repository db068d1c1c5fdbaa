"""The dispatcher (``stepping.dispatch``): the one table from (model kind, solver, path) to the runner.

Contracts checked without taking a step (no kernel compiles): every runner of the table resolves; "auto" takes
the compiled runner exactly when the eligibility check says yes; "compiled" refuses an ineligible model with the
check's reason; "reference" always takes the reference; the run plan's path text names the reason.
"""

from __future__ import annotations

import pytest

from convexsim.simulate import prepare
from convexsim.stepping import dispatch

SCENES = [("sphere_drop", "sap"), ("sphere_drop", "lcp"), ("pendulum", "sap"), ("pendulum", "lcp"),
          ("iiwa_push", "sap"), ("box_stack", "sap")]


def test_every_runner_and_check_resolves():
    """Each "module:function" of RUNNERS and ELIGIBILITY names a function; every (kind, solver) has a reference
    runner, and a compiled runner exactly when it has an eligibility check."""
    for spec, takes in dispatch.RUNNERS.values():
        assert callable(dispatch.resolve(spec)), spec
        assert set(takes) <= {"strict", "warm_start"}
    for spec in dispatch.ELIGIBILITY.values():
        assert callable(dispatch.resolve(spec)), spec
    pairs = {(k, s) for k, s, _ in dispatch.RUNNERS}
    for pair in pairs:
        assert (*pair, "reference") in dispatch.RUNNERS
        assert ((*pair, "compiled") in dispatch.RUNNERS) == (pair in dispatch.ELIGIBILITY)


@pytest.mark.parametrize("eligible", [True, False])
@pytest.mark.parametrize("scene, solver", SCENES)
def test_route_follows_the_eligibility_check(scene, solver, eligible, monkeypatch):
    """Both branches on every scene: as shipped (all eligible today) and with the pair's compiled step
    refused (forced through NO_COMPILED): auto routes to the reference with the reason, "compiled" raises."""
    model, _, _ = prepare(scene, solver=solver)
    if not eligible:
        monkeypatch.setitem(dispatch.NO_COMPILED, (dispatch.model_kind(model), solver), "refused by the test")
    ok, reason = dispatch.eligibility(model)
    kind = "trees" if model.has_trees else "bodies"
    assert dispatch.route(model, "reference") == (kind, solver, "reference", "path='reference' was asked for")
    auto = dispatch.route(model, "auto")
    assert auto.key == (kind, solver, "compiled" if ok else "reference") and auto.reason == reason
    if ok:
        assert dispatch.route(model, "compiled").path == "compiled"
    else:
        assert reason
        with pytest.raises(ValueError, match="cannot take the compiled step"):
            dispatch.route(model, "compiled")
    assert (ok, reason) == ((True, "") if eligible else (False, "refused by the test"))
    with pytest.raises(ValueError, match="path must be one of"):
        dispatch.route(model, "fast")


def test_run_plan_names_the_path_and_the_reason():
    model, _, _ = prepare("sphere_drop")
    assert dispatch.run_plan(model) == (True, "compiled step (compiled run loop)")
    loop, text = dispatch.run_plan(model, step_callback=True)
    assert not loop and text.startswith("compiled step, one call per step")
    assert dispatch.run_plan(model, "reference") == (False, "Python path: path='reference' was asked for")
    model, _, _ = prepare("pendulum", solver="lcp")
    assert dispatch.run_plan(model) == (False, "compiled LCP step")
    model, _, _ = prepare("pendulum")
    loop, text = dispatch.run_plan(model, controller=True)      # the compiled tree step takes the controls
    assert not loop and text.startswith("compiled step, one call per step")
    model, _, _ = prepare("sphere_drop")                          # so does the free-body compiled step
    loop, text = dispatch.run_plan(model, controller=True)
    assert not loop and text.startswith("compiled step, one call per step")
    model, _, _ = prepare("pendulum", solver="lcp")               # and the compiled LCP step
    assert dispatch.run_plan(model, controller=True) == (False, "compiled LCP step")
