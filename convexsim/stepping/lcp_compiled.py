"""The compiled LCP step of free-body models: the Python runner (eligibility and packing in ``packing``).

``compiled_lcp_step`` returns what the reference ``lcp_stepper.lcp_step`` returns,
computed by one numba call (``lcp_composition.lcp_step_kernel``: collision, frames, Jacobians, free
motion and integration through the same stages as the compiled SAP step; islands, the dense (M, q), Lemke, impulses,
warm-start bookkeeping). ``stepping.dispatch`` sends here the models ``packing.lcp_compiled_supported`` accepts
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

from convexsim.model import Contacts, Model, State
from convexsim.stepping.status import J_NDIR, LCP_OK, LCP_STATUS_NAMES
from convexsim.stepping.contacts import combined_friction
from convexsim.stepping.lcp_composition import lcp_step_kernel
from convexsim.stepping.packing import LcpPacked, lcp_packed
from convexsim.stepping.types import Handoff


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
    lp = lcp_packed(model, friction_directions)
    q = np.ascontiguousarray(state.q, dtype=np.float64)
    v = np.ascontiguousarray(state.v, dtype=np.float64)
    q_out = np.empty_like(q)
    v_out = np.empty_like(v)
    (status, _where, geoms, phi, point, normal, R_WC, gamma, force, pivots, nisl, basic_pc,
     keys) = lcp_step_kernel(lp.fpar, *lp.arrays, q, v, lp.U, lp.stabilization,
                                lp.settings(warm_min if warm else -1, dense_work), lp.lpar, q_out, v_out)
    if status != LCP_OK:
        return Handoff(LCP_STATUS_NAMES[status])
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
        d = int(lp.jpar[J_NDIR]) if _any_friction(lp, geoms) else 0
        ctx.lcp_warm.store_per_contact(model, state.step + 1, keys, d, basic_pc[:, :d + 2])
    return new, info


def _any_friction(lp: LcpPacked, geoms: np.ndarray) -> bool:
    """Whether some contact has μ > 0 (the step's LCP then has d friction directions)."""
    mu = combined_friction(lp.arrays[13], geoms)
    return bool(np.any(mu > 0))


__all__ = ["compiled_lcp_step"]
