"""Time stepping: ``step(model, state, ctx) -> (state, info)`` for the SAP and LCP solvers.

The step is organised by stage (docs/architecture.md, "The data path of one step"), each stage a module with
its numba kernels beside or called by its numpy reference:

* ``packing`` (model → arrays, settings slots, eligibility), ``status`` (the compiled steps' codes),
* ``contacts`` (start checks, collision, margins, pair-reach and tree-pair filters, contact frames, the
  materials rule), ``free_motion`` (A, v*), ``jacobians`` (contact Jacobians, block and dense layouts),
* ``sap_rows`` / ``lcp_rows`` (the rows of each solver's problem), ``lcp_solve`` (islands, Lemke),
* ``post_solve`` (impulses, forces, velocities back into v), ``integration``, ``recording``.

The compiled steps compose the stages, one module per solver (``sap_composition``, ``lcp_composition``); the
runners turn a kernel's result into (state, StepInfo), a Handoff or an error (``compiled``
for SAP, ``lcp_compiled``, ``lcp_compiled_trees``); the numpy references are ``sap_stepper``
(``sap_step``), ``articulated`` (trees), ``lcp_stepper`` (``lcp_step``, the rigid LCP with polyhedral
friction) and ``lcp_trees``. ``context``: the ``StepContext`` a run carries between steps (buffers, caches,
warm starts); ``types``: ``StepInfo`` and the errors.

``step`` asks ``dispatch`` (the one table from (model kind, solver, path) to the runner). Everything a step
reads is in its arguments: with a fresh context the same (model, state) always gives the same result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from convexsim._lazy import lazy_attributes

from convexsim.model import Model, State
from convexsim.stepping.types import ConvergenceWarning, SimulationError, StepInfo

if TYPE_CHECKING:
    from convexsim.stepping.articulated import articulated_sap_step
    from convexsim.stepping.compiled import compiled_step
    from convexsim.stepping.packing import compiled_step_supported, supported_cached
    from convexsim.stepping.contacts import (ContactKinematics, ContactParameters, check_finite_state,
                                             combined_parameters, contact_kinematics, contact_margin,
                                             contact_velocities, pair_reach)
    from convexsim.stepping.context import LcpWarmStart, StepContext
    from convexsim.stepping.lcp_stepper import LcpStepError, LcpStepInfo, lcp_step
    from convexsim.stepping.sap_stepper import build_sap_problem, sap_step

_LAZY = {
    "articulated_sap_step": "articulated",
    "compiled_step": "compiled", "compiled_step_supported": "packing", "supported_cached": "packing",
    "ContactKinematics": "contacts", "ContactParameters": "contacts", "check_finite_state": "contacts",
    "combined_parameters": "contacts", "contact_kinematics": "contacts", "contact_margin": "contacts",
    "contact_velocities": "contacts", "pair_reach": "contacts",
    "LcpWarmStart": "context", "StepContext": "context",
    "LcpStepError": "lcp_stepper", "LcpStepInfo": "lcp_stepper", "lcp_step": "lcp_stepper",
    "build_sap_problem": "sap_stepper", "sap_step": "sap_stepper",
}
"""Public names -> the submodule that defines them, imported on first use (PEP 562): a run of the compiled
loop imports ``stepping.compiled`` and ``stepping.types`` only, not the reference, articulated and LCP
steppers (their modules and numba kernels cost start-up time)."""


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals())


PATHS = ("auto", "compiled", "reference")
"""The ways ``step`` can take a step (``stepping.dispatch``): "compiled" (one numba call), "reference" (the
numpy composition of the same stages), "auto" (compiled when the model is eligible)."""


def step(model: Model, state: State, ctx: StepContext | None = None, *,
         strict: bool = False, path: str = "auto") -> tuple[State, StepInfo]:
    """Advance one step with the solver of ``model.solver.kind`` ("sap" or "lcp").

    Args:
        model, state: the compiled scene and the state at the start of the step.
        ctx: the run's StepContext; pass the same one every step of a run to reuse buffers, the
            symbolic analysis and the LCP warm start. None: a fresh context (a cold step).
        strict: SAP only — raise SimulationError instead of warning when Newton does not converge.
            The LCP stepper has no approximate answer to fall back on and always raises (LcpStepError).
        path: "auto" (default): the compiled step when the model is eligible, else the reference;
            "compiled": the compiled step (ValueError naming the reason if the model is not eligible);
            "reference": the numpy reference step. ``stepping.dispatch`` holds the table of runners.

    Returns:
        (the state at t + dt, StepInfo of the step).
    """
    from convexsim.stepping import dispatch

    if model.solver.kind == "lcp" and not model.has_trees:
        from convexsim.stepping.contacts import check_finite_state

        check_finite_state(model, state)
    return dispatch.step(model, state, ctx, strict=strict, path=path)


__all__ = ["step", "PATHS", "compiled_step", "compiled_step_supported", "supported_cached",
           "sap_step", "lcp_step", "StepContext", "LcpWarmStart", "StepInfo", "LcpStepInfo",
           "SimulationError", "ConvergenceWarning", "LcpStepError", "contact_kinematics",
           "ContactKinematics", "ContactParameters", "combined_parameters", "contact_margin",
           "contact_velocities", "check_finite_state", "build_sap_problem", "pair_reach", "articulated_sap_step"]
