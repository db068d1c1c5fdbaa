"""The compiled LCP step: the Python runner of every model (eligibility and packing in ``packing``).

``compiled_lcp_step(model, state, ctx)`` returns what the reference ``lcp_reference.reference_lcp_step``
returns, computed by one numba call (``lcp_composition.lcp_step_kernel``) on the packing of the compiled SAP
steps (``packing.packed``; for trees also ``packing.packed_forest``) and the LCP settings (``packing.LcpPacked``).
``stepping.dispatch`` sends here the models ``packing.lcp_compiled_supported`` (free bodies) or
``packing.lcp_tree_supported`` (trees) accept (``path="auto"``); ``path="reference"`` is the Python step the
tests compare against.

Steps the kernel does not take (its status is not LCP_OK) are taken by the reference path from the same (state,
context) (the dispatcher does that on a Handoff), which reports them exactly as it always does (the fallback
rungs in ``LcpStepInfo.rung``, ``LcpStepError`` naming the contacts and the step). Such a step's
``LcpStepInfo.path`` says so ("reference: <reason>"); it is never silent. Handed over: the first Lemke run of
an island failed (the reference runs its fallback chain), non-finite data; for free bodies an island above
``lcp_problem.DENSE_ASSEMBLY_WORK``, an LCP of warm-start size with the warm start on, every step with
``lcp_islands.SPLIT_ISLANDS`` off; for trees an LCP of at least ``lcp_fallback.LARGE_ISLAND_SIZE`` unknowns.
A controller's PD targets, joint torques (through the motors) and body wrenches (``ctx.controls``) are
arrays the kernel takes, as the SAP step's (``controls.ControlArrays.kernel_controls``).
"""

from __future__ import annotations

import numpy as np

from convexsim.model import Contacts, Model, State
from convexsim.stepping import lcp_composition, lcp_fallback, lcp_islands, lcp_problem
from convexsim.stepping.context import StepContext
from convexsim.stepping.contacts import combined_friction
from convexsim.stepping.lcp_info import LcpStepInfo, validate_settings
from convexsim.stepping.lcp_rows import NORMAL_REGULARIZATION
from convexsim.stepping.packing import lcp_packed, packed, packed_forest, per_model, tree_arrays
from convexsim.stepping.status import J_NDIR, LCP_OK, LCP_SINGULAR_MASS, LCP_STATUS_NAMES
from convexsim.stepping.types import Handoff, singular_mass_error

_ARGS: dict = {}


def _kernel_args(model: Model) -> tuple:
    """(LcpPacked, the packed model's fpar and arrays, the PackedForest (zero trees for a free-body model), its
    pair rule), once per model."""
    lp = lcp_packed(model, lcp_problem.friction_directions)
    pm = packed(model)
    return lp, pm.fpar, (*pm.model_arrays, pm.kinematic), packed_forest(model), pm.pair_rule


def compiled_lcp_step(model: Model, state: State, ctx=None, *, warm_start: bool | None = None):
    """One LCP step by the compiled kernel (same contract as ``stepping.lcp_step``), or a Handoff saying why
    the reference step takes it (module docstring). Reads the settings per step: ``lcp_islands``'
    WARM_START_DEFAULT, WARM_MIN_SIZE (LCPs of this size with the warm start on go to the reference) and
    SPLIT_ISLANDS (off: every free-body step does), ``lcp_problem.DENSE_ASSEMBLY_WORK`` (islands above it go to
    the reference), ``lcp_fallback.LARGE_ISLAND_SIZE``."""
    ctx = StepContext() if ctx is None else ctx
    from convexsim.controls import step_controls

    lp, fpar, mb, pf, rule = per_model(_ARGS, model, _kernel_args)
    ctl = step_controls(ctx.controls, model)
    q = np.ascontiguousarray(state.q, dtype=np.float64)
    v = np.ascontiguousarray(state.v, dtype=np.float64)
    q_out, v_out = np.empty_like(q), np.empty_like(v)
    trees = model.has_trees
    if not trees:
        validate_settings(model)
        if not lcp_islands.SPLIT_ISLANDS:
            return Handoff("SPLIT_ISLANDS is off or dense assembly disabled")
        warm = lcp_islands.WARM_START_DEFAULT if warm_start is None else bool(warm_start)
        jpar = lp.settings(lcp_islands.WARM_MIN_SIZE if warm else -1, lcp_problem.DENSE_ASSEMBLY_WORK)
    else:
        warm, jpar = False, lp.jpar
    tq, tv = tree_arrays(state)
    forest = (pf.fa, pf.ra, float(state.t), tq, tv, NORMAL_REGULARIZATION, lcp_fallback.LARGE_ISLAND_SIZE,
              np.empty_like(tq), np.empty_like(tv))
    if pf.fa[15].shape[0] > 0:            # the model kind, by the tuple's length (lcp_composition.NO_TREES)
        forest = (*forest, True)
    (status, where, geoms, phi, point, normal, gamma, force, act_force, lim_force, con_force, pivots, nrows, nisl,
     basic_pc, keys) = lcp_composition.lcp_step_kernel(fpar, mb, q, v, lp.U, lp.stabilization, jpar, lp.lpar, q_out,
                                                       v_out, forest, rule, ctl)
    if status == LCP_SINGULAR_MASS:
        raise singular_mass_error(model, int(where), state.step, state.t)
    if status != LCP_OK:
        return Handoff(LCP_STATUS_NAMES[status])
    geom_body = mb[9]
    contacts = Contacts(geom_a=geoms[:, 0].copy(), geom_b=geoms[:, 1].copy(), body_a=geom_body[geoms[:, 0]],
                        body_b=geom_body[geoms[:, 1]], phi=phi, point=point, normal=normal)
    if trees:
        new = State(t=state.t + model.time_step, q=q_out, v=v_out, step=state.step + 1, tree_q=forest[7],
                    tree_v=forest[8])
        return new, _forest_info(model, pf, contacts, gamma, force, act_force, lim_force, con_force, pivots, nrows)
    new = State(t=state.t + model.time_step, q=q_out, v=v_out, step=state.step + 1)
    if contacts.count == 0:
        return new, LcpStepInfo(contacts=contacts, status="solved", path="compiled")
    pivots, nisl = int(pivots), int(nisl)
    info = LcpStepInfo(contacts=contacts, gamma=gamma, force_world=force, iterations=pivots, converged=True,
                       status="solved", warm_attempted=False, warm_accepted=False, warm_solves=0, pivots=pivots,
                       rung="lemke", lemke_runs=nisl, islands=nisl, path="compiled")
    if warm:
        d = int(lp.jpar[J_NDIR]) if _any_friction(lp, geoms) else 0
        ctx.lcp_warm.store_per_contact(model, state.step + 1, keys, d, basic_pc[:, :d + 2])
    return new, info


def _forest_info(model: Model, pf, contacts: Contacts, gamma, force, act_force, lim_force, con_force, pivots,
                 nrows):
    """The LcpStepInfo of a step of a model with trees: the contacts' impulses and forces, the actuators', limits'
    and couplers' forces by name."""
    info = LcpStepInfo(contacts=contacts, path="compiled")
    if contacts.count + nrows:
        info.gamma, info.force_world = gamma, force
        info.iterations = info.pivots = int(pivots)
        info.rung, info.lemke_runs = "lemke", 1
    info.actuator_force = act_force
    info.actuator_names = pf.actuator_names
    info.limit_force = {name: 0.0 for name in pf.limit_names}
    for name, f in zip(pf.limit_names, lim_force):
        info.limit_force[name] += float(f)
    if model.forest.constraints:
        info.constraint_force = {n: np.array([f]) for n, f in zip(pf.coupler_names, con_force)}
    return info


def _any_friction(lp, geoms: np.ndarray) -> bool:
    """Whether some contact has μ > 0 (the step's LCP then has d friction directions)."""
    mu = combined_friction(lp.arrays[13], geoms)
    return bool(np.any(mu > 0))


__all__ = ["compiled_lcp_step"]
