"""The compiled LCP step of free-body models: eligibility, packing, and the Python entry point.

``compiled_lcp_step`` returns what the reference ``lcp_stepper.lcp_step`` returns,
computed by one numba call (``lcp_compiled_kernels.lcp_step_kernel``: collision, frames, Jacobians, free
motion and integration through the compiled SAP step's kernels; islands, the dense (M, q), Lemke, impulses,
warm-start bookkeeping). ``stepping.dispatch`` sends here the models :func:`lcp_compiled_supported` accepts
(``path="auto"``); ``path="reference"`` is the Python step the tests compare against.

Steps the kernel does not take (its status is not LCP_OK: the first Lemke run of an island failed, an island
above ``DENSE_ASSEMBLY_WORK``, an LCP of warm-start size with the warm start on, non-finite data) are taken by
the reference path from the same (state, context) (the dispatcher does that on a Handoff), which reports
them exactly as it always does (the
fallback rungs in ``LcpStepInfo.rung``, ``LcpStepError`` naming the contacts and the step). Such a step's
``LcpStepInfo.path`` says so ("reference: <reason>"); it is never silent.
"""

from __future__ import annotations

import numpy as np

from convexsim.lcp.lemke import REBUILD_LU_MAX, LemkeOptions
from convexsim.model import Contacts, Model, State
from convexsim.stepping import lcp_compiled_kernels as LK
from convexsim.stepping.compiled import free_body_layout_problem, packed, per_model
from convexsim.stepping.types import Handoff

_SUPPORTED: dict = {}
_PACKED: dict = {}


def lcp_packing_problem(model: Model, packers=(packed,)) -> str:
    """Why the compiled LCP steps cannot take ``model``'s materials or packed arrays ("" if they can): a
    friction that is not finite and ≥ 0, or settings one of the ``packers`` (``compiled.packed``; for trees
    also ``compiled_trees.packed_forest``) rejects."""
    mu = np.asarray(model.material_friction, dtype=float)
    if not np.all(np.isfinite(mu) & (mu >= 0)):
        return "a material's friction is not finite and ≥ 0"
    try:
        for pack in packers:
            pack(model)
    except (ValueError, TypeError) as e:                  # settings the packing rejects
        return f"the model cannot be packed for the compiled kernels: {e}"
    return ""


def lcp_compiled_supported(model: Model) -> tuple[bool, str]:
    """(True, "") when the compiled LCP step can advance ``model``, else (False, the reason).

    Conditions: the LCP solver; no kinematic trees; every body free (6 dofs, in body order) or fixed; shapes
    among sphere, box, capsule, halfspace; no restitution (``lcp_restitution`` = 0: the midpoint scheme
    stays on the reference path); finite friction ≥ 0."""
    s = model.solver
    if s.kind != "lcp":
        return False, f"solver.kind is {s.kind!r}; the compiled LCP step is the LCP step"
    if model.has_trees:
        return False, "the model has kinematic trees (joints); the compiled LCP step is for free bodies"
    if s.lcp_restitution != 0.0:
        return False, "lcp_restitution > 0 (Moreau midpoint scheme) is taken by the reference step"
    layout = free_body_layout_problem(model)
    if layout:
        return False, layout
    why = lcp_packing_problem(model)
    return (False, why) if why else (True, "")


def lcp_supported_cached(model: Model) -> tuple[bool, str]:
    """``lcp_compiled_supported(model)``, evaluated once per model object."""
    return per_model(_SUPPORTED, model, lcp_compiled_supported)


class LcpPacked:
    """The kernel arguments of a model: the SAP packing's arrays (``compiled.packed``) and the LCP settings."""

    def __init__(self, model: Model, friction_directions):
        s = model.solver
        pm = packed(model)
        a = pm.model_arrays
        self.fpar = pm.fpar
        self.arrays = (*a[:13], a[14])          # geometry and bodies; geom friction (not k, τ, d)
        d = int(s.friction_directions)
        self.U = np.ascontiguousarray(friction_directions(d) if d else np.zeros((0, 2)))
        self.stabilization = float(s.lcp_stabilization)
        opts = LemkeOptions()
        lpar = np.zeros(LK.NLPAR)
        lpar[LK.L_PIVOT_TOL] = opts.pivot_tol
        lpar[LK.L_RATIO_REL_TOL] = opts.ratio_rel_tol
        lpar[LK.L_RHS_TOL] = opts.rhs_tol
        lpar[LK.L_LEX_REL_TOL] = opts.lex_rel_tol
        lpar[LK.L_LEX_ABS_TOL] = opts.lex_abs_tol
        lpar[LK.L_CHECK_TOL] = opts.check_tol
        lpar[LK.L_HARRIS_TOL] = opts.harris_tol
        lpar[LK.L_HARRIS_RATIO] = opts.harris_pivot_ratio
        self.lpar = lpar
        jpar = np.zeros(LK.NJPAR, np.int64)
        jpar[LK.J_NDIR] = d
        jpar[LK.J_MAX_PIVOTS] = int(s.lcp_max_pivots)
        jpar[LK.J_REFACTOR] = int(opts.refactor_every)
        jpar[LK.J_HARRIS] = 1 if opts.ratio_test == "harris" else 0
        jpar[LK.J_LU_MAX] = REBUILD_LU_MAX
        self.jpar = jpar

    def settings(self, warm_min: int, dense_work: int) -> np.ndarray:
        """The integer settings with the caller's limits (``lcp_stepper``'s module constants, read per step)."""
        jpar = self.jpar.copy()
        jpar[LK.J_WARM_MIN] = warm_min
        jpar[LK.J_DENSE_WORK] = dense_work
        return jpar


def compiled_lcp_step(model: Model, state: State, ctx=None, *, warm_start: bool | None = None):
    """One LCP step by the compiled kernel (same contract as ``lcp_stepper.lcp_step``), or a Handoff saying
    why the reference step takes it (module docstring). Reads ``lcp_stepper``'s settings per step:
    WARM_START_DEFAULT, WARM_MIN_SIZE (LCPs of this size with the warm start on go to the reference),
    DENSE_ASSEMBLY_WORK (islands above it go to the reference), SPLIT_ISLANDS (off: every step does)."""
    from convexsim.stepping import lcp_stepper as S
    from convexsim.stepping.context import StepContext

    ctx = StepContext() if ctx is None else ctx
    S.validate_settings(model)
    warm = S.WARM_START_DEFAULT if warm_start is None else bool(warm_start)
    if not S.SPLIT_ISLANDS:
        return Handoff("SPLIT_ISLANDS is off or dense assembly disabled")
    dense_work, warm_min, info_type = S.DENSE_ASSEMBLY_WORK, S.WARM_MIN_SIZE, S.LcpStepInfo
    friction_directions = S.friction_directions
    lp = per_model(_PACKED, model, lambda m: LcpPacked(m, friction_directions))
    q = np.ascontiguousarray(state.q, dtype=np.float64)
    v = np.ascontiguousarray(state.v, dtype=np.float64)
    q_out = np.empty_like(q)
    v_out = np.empty_like(v)
    (status, _where, geoms, phi, point, normal, R_WC, gamma, force, pivots, nisl, basic_pc,
     keys) = LK.lcp_step_kernel(lp.fpar, *lp.arrays, q, v, lp.U, lp.stabilization,
                                lp.settings(warm_min if warm else -1, dense_work), lp.lpar, q_out, v_out)
    if status != LK.LCP_OK:
        return Handoff(LK.STATUS_NAMES[status])
    geom_body = lp.arrays[9]
    contacts = Contacts(geom_a=geoms[:, 0].copy(), geom_b=geoms[:, 1].copy(), body_a=geom_body[geoms[:, 0]],
                        body_b=geom_body[geoms[:, 1]], phi=phi, point=point, normal=normal)
    new = State(t=state.t + model.time_step, q=q_out, v=v_out, step=state.step + 1)
    if contacts.count == 0:
        return new, info_type(contacts=contacts, status="solved", path="compiled")
    pivots = int(pivots)
    nisl = int(nisl)
    info = info_type(contacts=contacts, gamma=gamma, force_world=force, iterations=pivots, converged=True,
                     status="solved", warm_attempted=False, warm_accepted=False, warm_solves=0, pivots=pivots,
                     rung="lemke", lemke_runs=nisl, islands=nisl, path="compiled")
    if warm:
        d = int(lp.jpar[LK.J_NDIR]) if _any_friction(lp, geoms) else 0
        ctx.lcp_warm.store_per_contact(model, state.step + 1, keys, d, basic_pc[:, :d + 2])
    return new, info


def _any_friction(lp: LcpPacked, geoms: np.ndarray) -> bool:
    """Whether some contact has μ > 0 (the step's LCP then has d friction directions)."""
    mu = LK.combined_friction(lp.arrays[13], geoms)
    return bool(np.any(mu > 0))


__all__ = ["lcp_compiled_supported", "lcp_supported_cached", "compiled_lcp_step"]
