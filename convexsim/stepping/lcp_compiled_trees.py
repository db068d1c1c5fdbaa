"""The compiled LCP step of models with kinematic trees: the Python runner (eligibility and packing in ``packing``).

``compiled_lcp_tree_step(model, state, ctx)`` returns what the reference ``lcp_trees.lcp_trees_step``
returns, computed by one numba call (``lcp_composition.lcp_tree_step_kernel``) on the packings of the
compiled SAP tree step (``packing.packed``, ``packing.packed_forest``) and the LCP settings of the
free-body compiled LCP step (``packing.LcpPacked``).

Which models (``packing.lcp_tree_supported``, asked once per model by ``stepping.dispatch``): the LCP solver
without restitution; the trees the compiled SAP tree step takes (``packing.tree_layout_problem``:
revolute, prismatic, ball, free and fixed joints, limits and PD actuators on 1-dof joints, joint couplers
between 1-dof joints; no cone limits, welds or distances), no couplers given in Python (``Tree.couplers``);
free or fixed bodies besides the links, shapes the compiled collision takes; finite friction ≥ 0. Other
models take the reference step with the reason (the run summary prints it).

Steps the kernel does not take are handed to the reference step with the reason (``Handoff``): a step
driven by a controller, non-finite data, the first Lemke run failing (the reference runs its fallback
chain), an LCP of at least ``lcp_stepper.LARGE_ISLAND_SIZE`` unknowns.
"""

from __future__ import annotations

import numpy as np

from convexsim.model import Contacts, Model, State
from convexsim.stepping.status import LCP_OK, LCP_STATUS_NAMES
from convexsim.stepping.packing import lcp_packed, packed, packed_forest
from convexsim.stepping.types import Handoff


def compiled_lcp_tree_step(model: Model, state: State, ctx=None):
    """One LCP step of a tree model by ``lcp_composition.lcp_tree_step_kernel`` (same contract as
    ``lcp_trees.lcp_trees_step``), or a Handoff saying why the reference step takes it (module docstring)."""
    from convexsim.stepping import lcp_stepper as S
    from convexsim.stepping.lcp_composition import lcp_tree_step_kernel
    from convexsim.stepping.lcp_trees import NORMAL_REGULARIZATION

    if ctx is not None and ctx.controlled:
        return Handoff("a controller drives the joints this step")
    lp = lcp_packed(model, S.friction_directions)
    pm = packed(model)
    pf = packed_forest(model)
    q = np.ascontiguousarray(state.q, dtype=np.float64)
    v = np.ascontiguousarray(state.v, dtype=np.float64)
    tq = np.ascontiguousarray(state.tree_q, dtype=np.float64)
    tv = np.ascontiguousarray(state.tree_v, dtype=np.float64)
    q_out, v_out, tq_out, tv_out = np.empty_like(q), np.empty_like(v), np.empty_like(tq), np.empty_like(tv)
    (status, _bad, geoms, phi, point, normal, gamma, force, act_force, lim_force, con_force, pivots,
     nrows) = lcp_tree_step_kernel(pm.fpar, pm.model_arrays, pf.fa, pf.ra, float(state.t), q, v, tq, tv, lp.U,
                                   lp.stabilization, NORMAL_REGULARIZATION, S.LARGE_ISLAND_SIZE, lp.jpar, lp.lpar,
                                   q_out, v_out, tq_out, tv_out)
    if status != LCP_OK:
        return Handoff(LCP_STATUS_NAMES[status])
    geom_body = pm.model_arrays[9]
    contacts = Contacts(geom_a=geoms[:, 0].copy(), geom_b=geoms[:, 1].copy(), body_a=geom_body[geoms[:, 0]],
                        body_b=geom_body[geoms[:, 1]], phi=phi, point=point, normal=normal)
    info = S.LcpStepInfo(contacts=contacts, path="compiled")
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
    new = State(t=state.t + model.time_step, q=q_out, v=v_out, step=state.step + 1, tree_q=tq_out, tree_v=tv_out)
    return new, info


__all__ = ["compiled_lcp_tree_step"]
