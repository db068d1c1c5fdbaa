"""The compiled SAP step of a model with kinematic trees: the Python runner (the forest's packing is
``packing.PackedForest``, the kernels ``sap_composition``).

``compiled_tree_step(model, state, ctx)`` returns what ``articulated.articulated_sap_step`` returns,
computed by one numba call (``sap_composition.tree_run_kernel`` for one step). ``packing.tree_layout_problem`` says which
tree models it takes (``packing.compiled_step_supported`` asks it): revolute, prismatic, ball, free and fixed
joints; joint limits on 1-dof joints, implicit PD actuators, couplers within a tree; every tree with the
model's gravity; joint couplers between 1-dof joints of any trees (``Forest.constraints``). Refused (the
reference step then runs, with the reason): cone limits on ball joints, welds and distances between
bodies. A controller's PD targets and joint torques (``ctx.controls``) are arrays the kernel takes every
step; a step with body wrenches is taken by the reference step, and so is a step whose island exceeds the
dense limit (``packing.ISLAND_MAX_DOFS``).
"""

from __future__ import annotations

import warnings

import numpy as np

from convexsim.model import Contacts, Model, State
from convexsim.stepping import status as K
from convexsim.stepping.compiled import SAP_STATUS_NAMES, nonfinite_error, one_step_buffers
from convexsim.stepping.packing import packed, packed_forest, per_model
from convexsim.stepping.types import ConvergenceWarning, Handoff, SimulationError, StepInfo


WRENCHES = "body wrenches are set (the compiled step takes joint targets and torques)"
"""Why a controlled step with body wrenches takes the reference step."""

_NO_CONTROLS: dict = {}


def no_controls(model: Model) -> tuple:
    """The kernel's controls argument when none is set: NaN targets (the scene's schedules), the motors'
    constant torques (zero without motors)."""
    def make(m):
        from convexsim.controls import ControlArrays

        c = ControlArrays.empty(m)
        return c.target, c.target_velocity, c.joint_forces(m)
    return per_model(_NO_CONTROLS, model, make)


def compiled_tree_step(model: Model, state: State, ctx=None, *,
                       strict: bool = False) -> tuple[State, StepInfo] | Handoff:
    """One SAP step of a tree model (same contract as ``articulated.articulated_sap_step``), or a Handoff for
    the steps the reference takes instead (module docstring; ``stepping.dispatch`` takes them).

    The step is one call of the run loop ``sap_composition.tree_run_kernel`` for one step with one frame: the
    tree step has a single compiled entry point, so a first run compiles it once (numba emits a kernel's whole
    call tree into each kernel compiled on its own)."""
    from convexsim.stepping.context import StepContext
    from convexsim.stepping.sap_composition import tree_run_kernel

    ctl = no_controls(model)
    if ctx is not None and ctx.controlled:
        arrays = ctx.control_arrays(model)
        if arrays.wrench.any():
            return Handoff(WRENCHES)
        ctl = (arrays.target, arrays.target_velocity, arrays.joint_forces(model))
    pm = packed(model)
    pf = packed_forest(model)
    args = pm.args(strict)
    q = np.array(state.q, dtype=np.float64, order="C")
    v = np.array(state.v, dtype=np.float64, order="C")
    tq = np.array(state.tree_q, dtype=np.float64, order="C")
    tv = np.array(state.tree_v, dtype=np.float64, order="C")
    ctx = StepContext() if ctx is None else ctx
    b = one_step_buffers(ctx, model, len(pf.actuator_names), len(pf.limit_names), len(pf.coupler_names))
    code, bad, sap_status, extra = b.run(lambda b: tree_run_kernel(
        args[0], args[1], args[2:], pf.fa, pf.ra, float(state.t), q, v, tq, tv, ctl, 0, 1, 1, 1, b.fr_step, b.fr_q,
        b.fr_v, b.fr_stat, b.fr_resid, b.fr_nc, b.fr_act, b.fr_lim, b.fr_con, b.st, b.c_body, b.c_geom, b.c_point,
        b.c_normal, b.c_phi, b.c_gamma, b.c_force))
    if code in (K.STEP_TOO_LARGE, K.STEP_BAD_MARGIN):
        return Handoff(K.STEP_STATUS_NAMES[code])
    if code == K.STEP_NONFINITE_START:
        raise nonfinite_error(model, state, bad, state.step, state.t)
    t_new = state.t + model.time_step
    if code == K.STEP_SOLVER_FAILED:
        raise SimulationError(f"SAP (articulated) did not converge ({SAP_STATUS_NAMES[sap_status]}) after "
                              f"{int(extra)} iterations", step=state.step, time=state.t)
    if code == K.STEP_NONFINITE_END:
        raise nonfinite_error(model, state, bad, state.step + 1, t_new)
    nc = int(b.fr_nc[0])
    geom_body = pm.model_arrays[9]
    geoms, phi, point, normal, gamma, force = b.contacts(nc)
    contacts = Contacts(geom_a=geoms[:, 0].copy(), geom_b=geoms[:, 1].copy(), body_a=geom_body[geoms[:, 0]],
                        body_b=geom_body[geoms[:, 1]], phi=phi, point=point, normal=normal)
    iterations, _, ls_evals, status = (int(x) for x in b.fr_stat[0])
    limit = {name: 0.0 for name in pf.limit_names}
    for name, f in zip(pf.limit_names, b.fr_lim[0]):
        limit[name] += float(f)
    if status < 0:                                   # no problem was solved: StepInfo's defaults
        info = StepInfo(contacts=contacts)
    else:
        info = StepInfo(contacts=contacts, gamma=gamma, force_world=force, iterations=iterations,
                        converged=status == 0, status=SAP_STATUS_NAMES[status],
                        momentum_residual=float(b.fr_resid[0]), line_search_evaluations=ls_evals,
                        actuator_force=b.fr_act[0].copy())
    info.limit_force = limit
    info.constraint_force = {n: np.array([f]) for n, f in zip(pf.coupler_names, b.fr_con[0])}
    info.actuator_names = pf.actuator_names
    if status > 0:
        warnings.warn(f"step {state.step} (t = {state.t:.6g} s): SAP (articulated) did not converge "
                      f"({info.status}) after {info.iterations} iterations", ConvergenceWarning, stacklevel=4)
    return State(t=t_new, q=q, v=v, step=state.step + 1, tree_q=tq, tree_v=tv), info


__all__ = ["compiled_tree_step", "no_controls", "WRENCHES"]
