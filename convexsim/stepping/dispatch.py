"""The one place that chooses how a step (and a run) is taken: compiled or reference, which runner.

A route is a key of :data:`RUNNERS`, (model kind, solver, path):

* model kind: "bodies" (free and fixed bodies only) or "trees" (the model has kinematic trees),
* solver: ``model.solver.kind``, "sap" or "lcp",
* path: "compiled" (one numba call per step) or "reference" (the numpy composition of the same stages,
  kept for the tests).

``path="auto"`` takes the compiled runner when the model is eligible (:func:`eligibility`: the "why not
compiled" reason the run summary prints, ``RunStats.path``), else the reference. ``path="compiled"``
raises ValueError with that reason instead of falling back.

A compiled runner may hand one step over: it returns a :class:`~convexsim.stepping.types.Handoff` (a
margin share that is not finite, the LCP kernel's first Lemke run failing, ...) and :func:`step` takes that
step with the reference runner of the same (kind, solver). No other module chooses between runners;
``tests/test_architecture.py`` holds that.

The run loops: :func:`run_plan` says whether ``simulate.run_model`` takes the compiled run loop (many steps
per numba call: ``sap_composition.run_kernel``, free bodies and trees) or steps one step at a
time through :func:`step`, and why.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from convexsim.stepping.types import Handoff, SimulationError

if TYPE_CHECKING:
    from convexsim.model import Model, State
    from convexsim.stepping.context import StepContext
    from convexsim.stepping.types import StepInfo

PATHS = ("auto", "compiled", "reference")
"""The ways a step can be asked for: "compiled", "reference", or "auto" (compiled when eligible)."""

RUNNERS: dict[tuple[str, str, str], tuple[str, tuple[str, ...]]] = {
    ("bodies", "sap", "compiled"): ("convexsim.stepping.compiled:compiled_step", ("strict",)),
    ("bodies", "sap", "reference"): ("convexsim.stepping.sap_stepper:sap_step", ("strict",)),
    ("trees", "sap", "compiled"): ("convexsim.stepping.compiled:compiled_step", ("strict",)),
    ("trees", "sap", "reference"): ("convexsim.stepping.sap_stepper:sap_step", ("strict",)),
    ("bodies", "lcp", "compiled"): ("convexsim.stepping.lcp_compiled:compiled_lcp_step", ("warm_start",)),
    ("bodies", "lcp", "reference"): ("convexsim.stepping.lcp_reference:reference_lcp_step", ("warm_start",)),
    ("trees", "lcp", "compiled"): ("convexsim.stepping.lcp_compiled:compiled_lcp_step", ("warm_start",)),
    ("trees", "lcp", "reference"): ("convexsim.stepping.lcp_reference:reference_lcp_step", ("warm_start",)),
}
"""(model kind, solver, path) -> ("module:function" of the runner, the options it takes among ``strict``
and ``warm_start``). A runner is called as ``runner(model, state, ctx, **options)`` and returns
(state, StepInfo); a compiled runner may return a Handoff instead. Modules are imported on first use (a
free-body run imports no reference stepper)."""

ELIGIBILITY: dict[tuple[str, str], str] = {
    ("bodies", "sap"): "convexsim.stepping.packing:supported_cached",
    ("trees", "sap"): "convexsim.stepping.packing:supported_cached",
    ("bodies", "lcp"): "convexsim.stepping.packing:lcp_supported_cached",
    ("trees", "lcp"): "convexsim.stepping.packing:lcp_tree_supported_cached",
}
"""(model kind, solver) -> "module:function" giving (ok, why not) for the compiled runner, once per model.
A pair without an entry has no compiled runner (:data:`NO_COMPILED`)."""

NO_COMPILED: dict[tuple[str, str], str] = {}
"""(model kind, solver) -> why the pair has no compiled runner (every pair has one today)."""

RUN_LOOPS = {("bodies", "sap"), ("trees", "sap")}
"""(model kind, solver) with a compiled run loop (``simulate.run_model``)."""

CONTROLLED = "per-step controls are set (this compiled step takes none)"

CONTROLLED_COMPILED = {("bodies", "sap"), ("trees", "sap"), ("bodies", "lcp"), ("trees", "lcp")}
"""(model kind, solver) whose compiled runner takes per-step controls (PD targets, joint torques, body
wrenches: ``controls.ControlArrays.kernel_controls``); every one today."""


class Route(NamedTuple):
    """A chosen runner: its key in :data:`RUNNERS` and, for the reference, why not the compiled one."""
    kind: str
    solver: str
    path: str
    reason: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return self.kind, self.solver, self.path


def resolve(spec: str) -> Any:
    """The function a "module:function" entry of the tables names (its module imported on first use)."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def model_kind(model: Model) -> str:
    """"trees" when the model has kinematic trees, else "bodies"."""
    return "trees" if model.has_trees else "bodies"


def check_path(path: str) -> None:
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")


def motor_driven(model: Model) -> bool:
    """Whether a motor of the model applies a constant torque: every step is then a controlled one."""
    forest = model.forest
    return forest is not None and any(m.torque != 0.0 for m in forest.motors)


def eligibility(model: Model, *, controlled: bool = False) -> tuple[bool, str]:
    """(True, "") when ``model`` can take its solver's compiled runner, else (False, the reason).
    ``controlled``: a controller sets joint targets, torques or body wrenches this step (the reference step
    unless (kind, solver) is in :data:`CONTROLLED_COMPILED`)."""
    kind, solver = model_kind(model), model.solver.kind
    controlled = controlled or motor_driven(model)
    if (kind, solver) in NO_COMPILED:
        return False, NO_COMPILED[kind, solver]
    spec = ELIGIBILITY.get((kind, solver))
    if spec is None:
        return False, f"solver.kind {solver!r} has no compiled step"
    ok, reason = resolve(spec)(model)
    if ok and controlled and (kind, solver) not in CONTROLLED_COMPILED:
        return False, CONTROLLED
    return ok, reason


def route(model: Model, path: str = "auto", *, controlled: bool = False) -> Route:
    """The runner of a step of ``model`` asked for with ``path`` (module docstring).

    Raises:
        ValueError: an unknown path, or path "compiled" for a model that cannot take it (with the reason).
    """
    check_path(path)
    kind, solver = model_kind(model), model.solver.kind
    if path == "reference":
        return Route(kind, solver, "reference", "path='reference' was asked for")
    ok, reason = eligibility(model, controlled=controlled)
    if ok:
        return Route(kind, solver, "compiled")
    if path == "compiled":
        raise ValueError(f"path='compiled': this model cannot take the compiled step: {reason}")
    return Route(kind, solver, "reference", reason)


def _call(key: tuple[str, str, str], model, state, ctx, options: dict):
    """The runner ``key`` on the step. A LinAlgError of its dense algebra (LAPACK's LU finding an exactly zero
    pivot in a matrix the model made singular in double precision: a tree's M(q) whose links' masses and lever
    arms span ~16 orders of magnitude) is this step's SimulationError, with numpy's message and the step."""
    spec, takes = RUNNERS[key]
    try:
        return resolve(spec)(model, state, ctx, **{k: options[k] for k in takes})
    except np.linalg.LinAlgError as exc:
        raise SimulationError(f"the {key[1].upper()} step's linear algebra failed ({exc}): a matrix of the step "
                              "is singular in double precision (check the joints' offsets and the links' masses "
                              "for a wrong unit)", step=state.step, time=state.t) from exc


def step(model: Model, state: State, ctx: StepContext | None = None, *, strict: bool = False,
         path: str = "auto", warm_start: bool | None = None) -> tuple[State, StepInfo]:
    """One step of ``model`` by the runner :func:`route` chooses; a compiled runner's Handoff is taken by the
    reference runner of the same (kind, solver). ``strict`` (SAP) and ``warm_start`` (LCP) are passed on
    (``convexsim.stepping.step``, ``stepping.lcp_step``)."""
    from convexsim.stepping.context import StepContext

    ctx = StepContext() if ctx is None else ctx
    r = route(model, path, controlled=ctx.controlled)
    options = {"strict": strict, "warm_start": warm_start}
    out = _call(r.key, model, state, ctx, options)
    if isinstance(out, Handoff):
        new, info = _call((r.kind, r.solver, "reference"), model, state, ctx, options)
        info.path = f"reference: {out.reason}"     # the compiled path handed this step over: say why
        return new, info
    new, info = out
    info.path = r.path                         # "compiled" or "reference" (route(model).reason says why)
    return new, info


def run_plan(model: Model, path: str = "auto", *, step_callback: bool = False,
             controller: bool = False) -> tuple[bool, str]:
    """(whether ``run_model`` takes the compiled run loop, the path text of the run summary).

    The compiled run loop needs a compiled route, a (kind, solver) in :data:`RUN_LOOPS`, no step callback
    (it must see every step) and no controller (it sets controls between steps).

    Raises:
        ValueError: as :func:`route`.
    """
    r = route(model, path, controlled=controller)
    if r.path == "reference":
        return False, f"Python path: {r.reason}"
    if (r.kind, r.solver) not in RUN_LOOPS:
        return False, "compiled LCP step" if r.solver == "lcp" else "compiled step"
    if step_callback:
        return False, "compiled step, one call per step (a step callback, e.g. the live viewer, sees every step)"
    if controller:
        return False, "compiled step, one call per step (a Python controller sets the controls before each step)"
    return True, "compiled step (compiled run loop)"


__all__ = ["PATHS", "RUNNERS", "ELIGIBILITY", "RUN_LOOPS", "Route", "route", "eligibility", "step", "run_plan",
           "model_kind"]
