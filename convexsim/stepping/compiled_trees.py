"""The compiled SAP step of a model with kinematic trees: the forest packed once into flat arrays, what the
kernel cannot express, and the Python entry point.

``compiled_tree_step(model, state, ctx)`` returns what ``articulated.articulated_sap_step`` returns,
computed by one numba call (``tree_kernels.tree_run_kernel`` for one step). ``compiled.tree_layout_problem`` says which
tree models it takes (``compiled.compiled_step_supported`` asks it): revolute, prismatic, ball, free and fixed
joints; joint limits on 1-dof joints, implicit PD actuators, couplers within a tree; every tree with the
model's gravity; joint couplers between 1-dof joints of any trees (``Forest.constraints``). Refused (the
reference step then runs, with the reason): cone limits on ball joints, welds and distances between
bodies. A controller's PD targets and joint torques (``ctx.controls``) are arrays the kernel takes every
step; a step with body wrenches is taken by the reference step, and so is a step whose island exceeds the
dense limit (``compiled.ISLAND_MAX_DOFS``).
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from convexsim.model import Contacts, Model, State
from convexsim.multibody.model import JOINT_NV
from convexsim.stepping import compiled_kernels as K
from convexsim.stepping.compiled import SAP_STATUS_NAMES, nonfinite_error, one_step_buffers, packed, per_model
from convexsim.stepping.types import ConvergenceWarning, Handoff, SimulationError, StepInfo

class PackedForest:
    """The forest of a model as the flat arrays of ``tree_kernels`` (built once per model).

    ``fa``: (parent, jtype, axis, jpos, jrot, qadr, dofadr, nvj, mass, com, inertia, armature, damping,
    gravity, tree_vstart, tree_nv, link_body, body_tree, body_moves, tree_base, body_local, body_sweep) —
    all trees' bodies in one parents-first list (parent −1: the world; q and v addresses into
    State.tree_q / tree_v), the Model body of each forest body and back, the tree of each Model body, which
    Model bodies move, the body each tree hangs from, and the per-body sweep flag of the margin shares
    (free bodies and links ≥ 0). ``ra``: the joint rows' data (limits, actuators with their targets,
    couplers; per-tree ranges ``*_ptr``; then the scene's joint couplers between trees, ``forest.JointCoupler``).
    ``limit_names``, ``actuator_names``, ``coupler_names``: reporting."""

    def __init__(self, model: Model):
        forest = model.forest
        trees = forest.trees
        i64 = lambda a: np.ascontiguousarray(a, dtype=np.int64)  # noqa: E731
        f64 = lambda a: np.ascontiguousarray(a, dtype=np.float64)  # noqa: E731
        parent, jtype, axis, jpos, jrot, qadr, dofadr, mass, com, inertia, arm, damp, link = ([] for _ in range(13))
        tree_vstart, tree_nv, tree_base = [], [], []
        nbody = model.nbody
        body_tree = -np.ones(nbody, np.int64)
        body_local = -np.ones(nbody, np.int64)
        body_moves = np.asarray(model.body_dof) >= 0
        off = 0
        for k, t in enumerate(trees):
            m = t.model
            parent.append(np.where(m.parent >= 0, m.parent + off, -1))
            jtype.append(m.joint_type)
            axis.append(m.joint_axis)
            jpos.append(m.joint_pos)
            jrot.append(m.joint_rot)
            qadr.append(m.joint_qadr + t.q_start)
            dofadr.append(m.joint_dofadr + t.v_start)
            mass.append(m.body_mass)
            com.append(m.body_com)
            inertia.append(m.body_inertia)
            arm.append(m.dof_armature)
            damp.append(m.dof_damping)
            link.append(t.bodies)
            tree_vstart.append(t.v_start)
            tree_nv.append(t.nv)
            tree_base.append(t.base_body)
            body_tree[t.bodies] = k
            body_local[t.bodies] = off + np.arange(m.nbody)
            body_moves[t.bodies] = t.moving_bodies()
            off += m.nbody
        cat = lambda xs, shape: np.concatenate(xs) if xs else np.zeros(shape)  # noqa: E731
        body_sweep = np.array(model.body_dof, dtype=np.int64)
        body_sweep[body_tree >= 0] = 0
        jt = i64(cat(jtype, (0,)))
        self.fa = (i64(cat(parent, (0,))), jt, f64(cat(axis, (0, 3))), f64(cat(jpos, (0, 3))),
                   f64(cat(jrot, (0, 3, 3))), i64(cat(qadr, (0,))), i64(cat(dofadr, (0,))), i64(JOINT_NV[jt]),
                   f64(cat(mass, (0,))), f64(cat(com, (0, 3))), f64(cat(inertia, (0, 3, 3))), f64(cat(arm, (0,))),
                   f64(cat(damp, (0,))), f64(model.gravity), i64(tree_vstart), i64(tree_nv), i64(cat(link, (0,))),
                   body_tree, np.ascontiguousarray(body_moves, dtype=np.bool_), i64(tree_base), body_local,
                   body_sweep)
        # joint rows
        lim_ptr, lim_dof, lim_qadr, lim_lo, lim_hi, self.limit_names = [0], [], [], [], [], []
        act_ptr, act = [0], {k: [] for k in ("dof", "qadr", "kp", "kd", "uff", "effort", "vel")}
        tptr, times, values, self.actuator_names = [0], [], [], []
        cp_ptr, cp = [0], {k: [] for k in ("di", "qi", "dj", "qj", "rho", "offset")}
        for t in trees:
            m = t.model
            for lim in t.limits:
                lim_dof.append(m.joint_dofadr[lim.joint] + t.v_start)
                lim_qadr.append(m.joint_qadr[lim.joint] + t.q_start)
                lim_lo.append(lim.lower)
                lim_hi.append(lim.upper)
                self.limit_names.append(t.joint_names[lim.joint])
            lim_ptr.append(len(lim_dof))
            for a in t.actuators:
                act["dof"].append(m.joint_dofadr[a.joint] + t.v_start)
                act["qadr"].append(m.joint_qadr[a.joint] + t.q_start)
                act["kp"].append(a.kp)
                act["kd"].append(a.kd)
                act["uff"].append(a.u_ff)
                act["effort"].append(a.effort)
                act["vel"].append(math.nan if a.velocity is None else a.velocity)
                times.extend(a.times)
                values.extend(a.values)
                tptr.append(len(times))
                self.actuator_names.append(a.name)
            act_ptr.append(len(act["dof"]))
            for c in t.couplers:
                cp["di"].append(m.joint_dofadr[c.joint_i] + t.v_start)
                cp["qi"].append(m.joint_qadr[c.joint_i] + t.q_start)
                cp["dj"].append(m.joint_dofadr[c.joint_j] + t.v_start)
                cp["qj"].append(m.joint_qadr[c.joint_j] + t.q_start)
                cp["rho"].append(c.rho)
                cp["offset"].append(c.offset)
            cp_ptr.append(len(cp["di"]))
        jc = {k: [] for k in ("di", "qi", "ti", "dj", "qj", "tj", "rho", "offset")}
        self.coupler_names = tuple(c.name for c in forest.constraints)
        for c in forest.constraints:               # JointCoupler only (tree_layout_problem)
            for name, tag in ((c.joint, "i"), (c.reference, "j")):
                k, j = forest.joint_index[name]
                t = trees[k]
                jc["d" + tag].append(t.model.joint_dofadr[j] + t.v_start)
                jc["q" + tag].append(t.model.joint_qadr[j] + t.q_start)
                jc["t" + tag].append(k)
            jc["rho"].append(c.rho)
            jc["offset"].append(c.offset)
        self.ra = (i64(lim_ptr), i64(lim_dof), i64(lim_qadr), f64(lim_lo), f64(lim_hi), i64(act_ptr),
                   i64(act["dof"]), i64(act["qadr"]), f64(act["kp"]), f64(act["kd"]), f64(act["uff"]),
                   f64(act["effort"]), f64(act["vel"]), i64(tptr), f64(times), f64(values), i64(cp_ptr),
                   i64(cp["di"]), i64(cp["qi"]), i64(cp["dj"]), i64(cp["qj"]), f64(cp["rho"]), f64(cp["offset"]),
                   i64(jc["di"]), i64(jc["qi"]), i64(jc["ti"]), i64(jc["dj"]), i64(jc["qj"]), i64(jc["tj"]),
                   f64(jc["rho"]), f64(jc["offset"]))
        self.actuator_names = tuple(self.actuator_names)


_PACKED_FOREST: dict = {}


def packed_forest(model: Model) -> PackedForest:
    """The PackedForest of ``model`` (built on first use, kept while the model lives)."""
    return per_model(_PACKED_FOREST, model, PackedForest)


WRENCHES = "body wrenches are set (the compiled step takes joint targets and torques)"
"""Why a controlled step with body wrenches takes the reference step."""

_NO_CONTROLS: dict = {}


def no_controls(model: Model) -> tuple:
    """The kernel's controls argument when none is set: NaN targets (the scene's schedules), zero torques."""
    def make(m):
        from convexsim.controls import ControlArrays

        c = ControlArrays.empty(m)
        return c.target, c.target_velocity, c.torque
    return per_model(_NO_CONTROLS, model, make)


def compiled_tree_step(model: Model, state: State, ctx=None, *,
                       strict: bool = False) -> tuple[State, StepInfo] | Handoff:
    """One SAP step of a tree model (same contract as ``articulated.articulated_sap_step``), or a Handoff for
    the steps the reference takes instead (module docstring; ``stepping.dispatch`` takes them).

    The step is one call of the run loop ``tree_kernels.tree_run_kernel`` for one step with one frame: the
    tree step has a single compiled entry point, so a first run compiles it once (numba emits a kernel's whole
    call tree into each kernel compiled on its own)."""
    from convexsim.stepping.context import StepContext
    from convexsim.stepping.tree_kernels import tree_run_kernel

    ctl = no_controls(model)
    if ctx is not None and ctx.controlled:
        arrays = ctx.control_arrays(model)
        if arrays.wrench.any():
            return Handoff(WRENCHES)
        ctl = (arrays.target, arrays.target_velocity, arrays.torque)
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


__all__ = ["PackedForest", "compiled_tree_step", "packed_forest", "no_controls", "WRENCHES"]
