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
for SAP, ``lcp_compiled`` for the LCP: free bodies and trees each); the numpy references are ``sap_stepper``
(``sap_step``, every model: free bodies are a forest without joints) and ``lcp_reference`` (the rigid LCP with
polyhedral friction, free bodies and trees; its pieces: ``lcp_problem``, ``lcp_islands``, ``lcp_fallback``,
``lcp_info``); the numpy forms of the stages they share sit beside their kernels in the stage modules.
``context``: the ``StepContext`` a run carries between steps (buffers, caches, warm starts); ``types``:
``StepInfo`` and the errors.

``step`` asks ``dispatch`` (the one table from (model kind, solver, path) to the runner). Everything a step
reads is in its arguments: with a fresh context the same (model, state) always gives the same result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from convexsim._lazy import lazy_attributes

from convexsim.model import Model, State
from convexsim.stepping.types import ConvergenceWarning, SimulationError, StepInfo

if TYPE_CHECKING:
    from convexsim.stepping.compiled import compiled_step
    from convexsim.stepping.packing import compiled_step_supported, supported_cached
    from convexsim.stepping.contacts import (ContactKinematics, ContactParameters, check_finite_state,
                                             combined_parameters, contact_kinematics, contact_margin,
                                             contact_velocities, pair_reach)
    from convexsim.stepping.context import LcpWarmStart, StepContext
    from convexsim.stepping.lcp_info import LcpStepError, LcpStepInfo
    from convexsim.stepping.sap_stepper import articulated_sap_step, build_sap_problem, sap_step

_LAZY = {
    "articulated_sap_step": "sap_stepper",
    "compiled_step": "compiled", "compiled_step_supported": "packing", "supported_cached": "packing",
    "ContactKinematics": "contacts", "ContactParameters": "contacts", "check_finite_state": "contacts",
    "combined_parameters": "contacts", "contact_kinematics": "contacts", "contact_margin": "contacts",
    "contact_velocities": "contacts", "pair_reach": "contacts",
    "LcpWarmStart": "context", "StepContext": "context",
    "LcpStepError": "lcp_info", "LcpStepInfo": "lcp_info",
    "build_sap_problem": "sap_stepper", "sap_step": "sap_stepper",
}
"""Public names -> the submodule that defines them, imported on first use (PEP 562): a run of the compiled
loop imports ``stepping.compiled`` and ``stepping.types`` only, not the reference and LCP
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


def lcp_step(model: Model, state: State, ctx: StepContext | None = None, *,
             warm_start: bool | None = None, path: str = "auto") -> tuple[State, StepInfo]:
    """Advance one step of the rigid LCP stepper (``lcp_reference``, its compiled form ``lcp_compiled``).

    Args:
        model, state: the model and the state at the start of the step.
        ctx: the run's StepContext (Lemke workspace, collision buffers and the previous step's
            final basis); None uses a fresh one (a cold step).
        warm_start: start Lemke from the previous step's basis first (default
            ``lcp_islands.WARM_START_DEFAULT``; islands of ≥ ``lcp_islands.WARM_MIN_SIZE`` unknowns). The
            previous final basis is kept in ``ctx.lcp_warm`` and used only if it belongs to the same model
            object and to step ``state.step − 1``; a warm solution is accepted only if it passes Lemke's
            final check, otherwise the cold chain runs (docs/lcp.md, "Warm start").
        path: "auto" (default): the compiled step when the model is eligible, else the reference
            (``lcp_reference.reference_lcp_step``); "compiled": the compiled step (ValueError naming the
            reason if the model is not eligible); "reference": the reference. The choice is
            ``stepping.dispatch``'s.

    Returns:
        (new state, LcpStepInfo) with gamma the contact-frame impulses [N·s], force_world = R_WC γ / dt [N]
        (force on body B), iterations = Lemke pivots (warm and cold) + warm-start factorizations, pivots,
        rung (what solved the LCP), lemke_runs, warm_attempted / warm_accepted / warm_solves.

    Raises:
        LcpStepError: neither Lemke nor any fallback rung (perturbed q, other covering vectors, M + εI)
            gave an answer passing the check on the step's LCP (step, time, contacts, Lemke's status).
        ValueError: invalid LCP settings in model.solver.
    """
    from convexsim.stepping import dispatch

    return dispatch.step(model, state, ctx, path=path, warm_start=warm_start)


__all__ = ["step", "PATHS", "compiled_step", "compiled_step_supported", "supported_cached",
           "sap_step", "lcp_step", "StepContext", "LcpWarmStart", "StepInfo", "LcpStepInfo",
           "SimulationError", "ConvergenceWarning", "LcpStepError", "contact_kinematics",
           "ContactKinematics", "ContactParameters", "combined_parameters", "contact_margin",
           "contact_velocities", "check_finite_state", "build_sap_problem", "pair_reach", "articulated_sap_step"]
