"""The compiled LCP step of models with kinematic trees: eligibility and the Python entry point.

``compiled_lcp_tree_step(model, state, ctx)`` returns what the reference ``lcp_trees.lcp_trees_step``
returns, computed by one numba call (``lcp_tree_kernels.lcp_tree_step_kernel``) on the packings of the
compiled SAP tree step (``compiled.packed``, ``compiled_trees.packed_forest``) and the LCP settings of the
free-body compiled LCP step (``lcp_compiled.LcpPacked``).

Which models (:func:`lcp_tree_supported`, asked once per model by ``stepping.dispatch``): the LCP solver
without restitution; the trees the compiled SAP tree step takes (``compiled.tree_layout_problem``:
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
from convexsim.stepping import lcp_compiled_kernels as LK
from convexsim.stepping.compiled import free_body_layout_problem, packed, per_model, tree_layout_problem
from convexsim.stepping.compiled_trees import packed_forest
from convexsim.stepping.lcp_compiled import LcpPacked, lcp_packing_problem
from convexsim.stepping.types import Handoff

_SUPPORTED: dict = {}
_PACKED: dict = {}


def lcp_tree_supported(model: Model) -> tuple[bool, str]:
    """(True, "") when the compiled tree LCP step can advance ``model``, else (False, the reason) (module
    docstring)."""
    s = model.solver
    if s.kind != "lcp":
        return False, f"solver.kind is {s.kind!r}; the compiled tree LCP step is the LCP step"
    if not model.has_trees:
        return False, "the model has no kinematic trees (the free-body compiled LCP step takes it)"
    if s.lcp_restitution != 0.0:
        return False, "lcp_restitution > 0 is not supported with joints (the reference step says so)"
    if not (0.0 <= s.lcp_stabilization <= 1.0 and (s.friction_directions == 0 or s.friction_directions >= 3)):
        return False, "lcp_stabilization or friction_directions out of range (the reference step says which)"
    why = tree_layout_problem(model)
    if why:
        return False, why
    for t in model.forest.trees:
        if t.couplers:
            return False, (f"tree of joint {t.joint_names[0]!r}: couplers given in Python (Tree.couplers) are "
                           "not supported by the LCP stepper")
    layout = free_body_layout_problem(model, links_allowed=True)
    if layout:
        return False, layout
    why = lcp_packing_problem(model, (packed, packed_forest))
    return (False, why) if why else (True, "")


def lcp_tree_supported_cached(model: Model) -> tuple[bool, str]:
    """``lcp_tree_supported(model)``, evaluated once per model object."""
    return per_model(_SUPPORTED, model, lcp_tree_supported)


def compiled_lcp_tree_step(model: Model, state: State, ctx=None):
    """One LCP step of a tree model by ``lcp_tree_kernels.lcp_tree_step_kernel`` (same contract as
    ``lcp_trees.lcp_trees_step``), or a Handoff saying why the reference step takes it (module docstring)."""
    from convexsim.stepping import lcp_stepper as S
    from convexsim.stepping.lcp_tree_kernels import lcp_tree_step_kernel
    from convexsim.stepping.lcp_trees import NORMAL_REGULARIZATION

    if ctx is not None and ctx.controlled:
        return Handoff("a controller drives the joints this step")
    lp = per_model(_PACKED, model, lambda m: LcpPacked(m, S.friction_directions))
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
    if status != LK.LCP_OK:
        return Handoff(LK.STATUS_NAMES[status])
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


__all__ = ["compiled_lcp_tree_step", "lcp_tree_supported", "lcp_tree_supported_cached"]
