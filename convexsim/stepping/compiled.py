"""The compiled SAP step's Python runner: one kernel call, its status turned into (state, StepInfo), a Handoff
or an error (the packing and eligibility are in ``packing``, the kernels in ``sap_composition``).

``compiled_step(model, state, ctx)`` returns what the reference step ``sap_stepper.sap_step`` returns (free
bodies and trees alike), computed by one call of the run loop ``sap_composition.run_kernel`` for one step;
``simulate.run_model`` advances many steps per numba call with the same kernel. A free-body model is a forest
of zero trees (``packing.PackedForest``): one composition takes both.

Which models: ``packing.compiled_step_supported`` is the one place that decides (free bodies, fixed bodies and
the links of kinematic trees that ``tree_layout_problem`` accepts, the shipped primitive shapes, the SAP
solver with any of its contact models, valid materials). A controller's PD targets, joint torques and body
wrenches (``ctx.controls``) are arrays the kernel takes every step; a step whose margin share is not finite is
taken by the reference step (a Handoff).

Large islands: the Newton matrix is factored by a dense Cholesky per island (connected component of the
clique graph). A step with an island of more than ``packing.ISLAND_MAX_DOFS`` dofs (20 free bodies) is
factored with the supernodal Cholesky (``sap.supernodal``) inside the compiled Newton loop; its symbolic
analysis is done in Python, only when the clique graph leaves the pattern of the step context's last analysis
(``SymbolicCache.covering``: a superset pattern is kept across steps, exact up to round-off). The run loop
stops before such a step and the caller takes it with :func:`compiled_step`, in two kernel calls
(``step_prepare``, the analysis, ``step_finish``).
"""

from __future__ import annotations

import warnings

import numpy as np

from convexsim.model import Contacts, Model, State
from convexsim.sap import newton as N
from convexsim.stepping import sap_composition as C
from convexsim.stepping import status as K
from convexsim.stepping.free_motion import motor_forces_kernel
from convexsim.stepping.packing import packed, packed_forest, per_model, step_arrays, tree_arrays
from convexsim.stepping.types import ConvergenceWarning, Handoff, SimulationError, StepInfo, singular_mass_error

SAP_STATUS_NAMES = N.SAP_STATUS_NAMES

def no_law():
    """(the do-nothing compiled controller, no parameters): the run kernel's law when none is given."""
    from convexsim.controllers import no_controller

    return no_controller().kernel_law, np.zeros(0)


def nonfinite_error(model: Model, state: State, bad: int, step: int, t: float) -> SimulationError:
    return SimulationError(f"non-finite state of bodies {model.body_names[bad]}", step=step, time=t)


class _StepPlan:
    """What a compiled step of one model reads besides its state, looked up once per model (:func:`_plan`):
    the packed model and forest, the run kernel's flat arrays, the controls when none is set, the sizes of the
    joint-force outputs."""

    def __init__(self, model: Model):
        self.pm, self.pf, self.arrays = packed(model), packed_forest(model), step_arrays(model)
        self.law, self.params = no_law()
        self.trees = model.has_trees
        self.sizes = (len(self.pf.actuator_names), len(self.pf.limit_names), len(self.pf.coupler_names))


_PLANS: dict = {}


def _plan(model: Model) -> _StepPlan:
    return per_model(_PLANS, model, _StepPlan)


def compiled_step(model: Model, state: State, ctx=None, *,
                  strict: bool = False) -> tuple[State, StepInfo] | Handoff:
    """One SAP step by the compiled kernels (same contract as the reference step of the model's kind), or a
    Handoff for a step the reference takes (``stepping.dispatch`` takes it).

    One call of the run loop ``run_kernel`` for one step (the compiled step has one entry kernel); a step
    with an island too large for the dense factor is taken in two kernel calls by :func:`_two_call_step` with
    the supernodal Cholesky (module docstring). ``ctx.big_islands`` remembers that, so that the next step
    starts there and does not collide twice (same result either way)."""
    if ctx is None:
        from convexsim.stepping.context import StepContext

        ctx = StepContext()
    from convexsim.controls import step_controls

    plan = _plan(model)
    ctl = step_controls(ctx.controls, model)
    args = plan.pm.args(strict)
    q = np.array(state.q, dtype=np.float64, order="C")
    v = np.array(state.v, dtype=np.float64, order="C")
    tq, tv = tree_arrays(state)
    if ctx.big_islands:                  # the last step had a large island: the next one likely too
        return _two_call_step(model, state, ctx, args, plan, ctl, q, v, tq, tv)
    b = one_step_buffers(ctx, model, *plan.sizes)
    arrays = plan.arrays
    code, bad, sap_status, extra = b.run(lambda b: C.run_kernel(
        args[0], args[1], arrays, float(state.t), q, v, tq, tv, ctl, plan.law, plan.params, 0, 1, 1, 1,
        *b.outputs))
    if code == K.STEP_TOO_LARGE:         # an island above the dense limit: the supernodal factor (q, v unchanged)
        return _two_call_step(model, state, ctx, args, plan, ctl, q, v, tq, tv)
    if code != K.RUN_DONE:
        return _result(model, state, plan, code, bad, sap_status, extra, 0, 0.0, *b.contacts(0), None, q, v, tq,
                       tv)
    iterations, _, ls_evals, sap_status = b.fr_stat[0].tolist()
    forces = (b.fr_act[0].copy(), b.fr_lim[0].copy(), b.fr_con[0].copy()) if plan.trees else None
    return _result(model, state, plan, K.STEP_OK, -1, sap_status, iterations, ls_evals, float(b.fr_resid[0]),
                   *b.contacts(int(b.fr_nc[0])), forces, q, v, tq, tv)


class OneStepBuffers:
    """The frame and contact buffers of the run kernel called for one step with one frame (the compiled single
    step, :func:`compiled_step`), kept in the step context between steps (``StepContext.step_buffers``; every
    call overwrites what it reads)."""

    def __init__(self, nbody: int, nact: int = 0, nlim: int = 0, ncoupler: int = 0):
        self.key = (nbody, nact, nlim, ncoupler)
        self.fr_step, self.fr_nc = np.empty(1, np.int64), np.empty(1, np.int64)
        self.fr_q, self.fr_v = np.empty((1, nbody, 7)), np.empty((1, nbody, 6))
        self.fr_stat, self.st = np.empty((1, 4), np.int64), np.empty((1, 4), np.int64)
        self.fr_resid = np.empty(1)
        self.fr_act, self.fr_lim, self.fr_con = np.empty((1, nact)), np.empty((1, nlim)), np.empty((1, ncoupler))
        self._rows(64)

    def _rows(self, rows: int) -> None:
        self.c_body, self.c_geom = np.empty((rows, 2), np.int64), np.empty((rows, 2), np.int64)
        self.c_point, self.c_normal, self.c_phi = np.empty((rows, 3)), np.empty((rows, 3)), np.empty(rows)
        self.c_gamma, self.c_force = np.empty((rows, 3)), np.empty((rows, 3))
        self.outputs = (self.fr_step, self.fr_q, self.fr_v, self.fr_stat, self.fr_resid, self.fr_nc, self.fr_act,
                        self.fr_lim, self.fr_con, self.st, self.c_body, self.c_geom, self.c_point, self.c_normal,
                        self.c_phi, self.c_gamma, self.c_force)
        """The run kernel's output arguments, in its order."""

    def run(self, call) -> tuple[int, int, int, int]:
        """``call(self)`` (a run kernel over these buffers) until its contacts fit; returns (code, bad body,
        sap status, iterations or contacts) of the kernel's return value."""
        while True:
            code, _, _, _, bad, sap_status, extra = call(self)
            if code != K.RUN_NEED_CONTACT_SPACE:
                return int(code), int(bad), int(sap_status), int(extra)
            self._rows(2 * (self.c_phi.shape[0] + int(extra)))

    def contacts(self, nc: int) -> tuple[np.ndarray, ...]:
        """Copies of the first ``nc`` contact rows: (geoms (nc, 2), φ, point, normal, γ, world force)."""
        return (self.c_geom[:nc].copy(), self.c_phi[:nc].copy(), self.c_point[:nc].copy(),
                self.c_normal[:nc].copy(), self.c_gamma[:nc].copy(), self.c_force[:nc].copy())


def one_step_buffers(ctx, model: Model, nact: int = 0, nlim: int = 0, ncoupler: int = 0) -> OneStepBuffers:
    """The step context's :class:`OneStepBuffers` for ``model``'s sizes (made anew when they differ)."""
    key = (model.nbody, nact, nlim, ncoupler)
    if ctx.step_buffers is None or ctx.step_buffers.key != key:
        ctx.step_buffers = OneStepBuffers(*key)
    return ctx.step_buffers


def _two_call_step(model, state, ctx, args, plan, ctl, q, v, tq, tv):
    """The step in two kernel calls: ``step_prepare`` (collision, problem, clique graph), then
    ``step_finish`` — dense island factors if every island fits, else the supernodal factor of an
    analysis from ``ctx.symbolic.covering`` (Python, only when the graph leaves the analysed pattern). ``ctl``:
    the run kernel's controls; the motors turn the commanded torques into the step's joint forces here."""
    forces = np.empty_like(ctl[2])
    motor_forces_kernel(ctl[3], ctl[4], ctl[5], ctl[2], forces)
    status, bad, max_n, prep = C.step_prepare(args[0], args[1], plan.arrays, float(state.t), q, v, tq, tv,
                                              (ctl[0], ctl[1], forces, ctl[6]))
    if status != K.STEP_OK:
        return _result(model, state, plan, status, bad, 0, 0, 0, 0.0, *prep[:4], None, None, None, q, v, tq, tv)
    use_sn = bool(max_n > args[1][N.I_ISLAND_MAX_DOFS])
    ctx.big_islands = use_sn
    sizes, edges = prep[7][0], prep[9]
    sym = None
    if use_sn:
        sym = ctx.symbolic.covering(sizes, edges)
        sn = tuple(np.ascontiguousarray(getattr(sym, f), dtype=np.int64) for f in N.SN_FIELDS)
        sn_edges = np.ascontiguousarray(sym.edges, dtype=np.int64).reshape(-1, 2)
    else:
        sn, sn_edges = N.no_supernodal()
    q_out, v_out, tq_out, tv_out = np.empty_like(q), np.empty_like(v), np.empty_like(tq), np.empty_like(tv)
    act, lim, con = (np.zeros(n) for n in plan.sizes)
    status, bad, sap_status, iterations, ls_evals, resid, gamma, force = C.step_finish(
        args[0], args[1], plan.arrays, q, v, tq, prep, q_out, v_out, tq_out, tv_out, act, lim, con, use_sn, sn,
        sn_edges)
    if sym is not None:
        from convexsim.sap.linalg import FACTOR_STATS   # instrumentation for `convexsim bench` (no time)

        FACTOR_STATS.factorizations += int(iterations)
        FACTOR_STATS.l_blocks += int(iterations) * sym.l_blocks
        FACTOR_STATS.h_blocks += int(iterations) * sym.h_blocks
        FACTOR_STATS.graph_edges += int(iterations) * int(edges.shape[0])
        FACTOR_STATS.kept_edges += int(iterations) * int(sn_edges.shape[0])
    if prep[7][9].shape[0] == 0:          # no problem was solved: StepInfo's defaults (as the run loop)
        sap_status = -1
    return _result(model, state, plan, status, bad, sap_status, iterations, ls_evals, resid, *prep[:4], gamma, force,
                   (act, lim, con), q_out, v_out, tq_out, tv_out)


def _result(model, state, plan, status, bad, sap_status, iterations, ls_evals, resid, geoms, phi, point, normal,
            gamma, force, forces, q_out, v_out, tq_out, tv_out) -> tuple[State, StepInfo] | Handoff:
    """(new state, StepInfo) of a kernel step, a Handoff to the reference step (which raises for a bad
    margin), or an exception for its failure codes. ``sap_status`` −1: no problem was solved (StepInfo's
    defaults); ``forces``: (actuator, limit, joint-coupler forces) of a model with trees."""
    trees = plan.trees
    solver = "SAP (articulated)" if trees else "SAP"
    if status in (K.STEP_TOO_LARGE, K.STEP_BAD_MARGIN):
        return Handoff(K.STEP_STATUS_NAMES[status])
    if status == K.STEP_NONFINITE_START:
        raise nonfinite_error(model, state, bad, state.step, state.t)
    if status == K.STEP_SINGULAR_MASS:
        raise singular_mass_error(model, bad, state.step, state.t)
    if status == K.STEP_SOLVER_FAILED:
        raise SimulationError(f"{solver} did not converge ({SAP_STATUS_NAMES[sap_status]}) after {int(iterations)} "
                              "iterations", step=state.step, time=state.t)
    t_new = state.t + model.time_step
    if status == K.STEP_NONFINITE_END:
        raise nonfinite_error(model, state, bad, state.step + 1, t_new)
    geom_body = plan.pm.model_arrays[9]
    contacts = Contacts(geom_a=geoms[:, 0].copy(), geom_b=geoms[:, 1].copy(), body_a=geom_body[geoms[:, 0]],
                        body_b=geom_body[geoms[:, 1]], phi=phi, point=point, normal=normal)
    if sap_status < 0 or contacts.count == 0 and not trees:
        info = StepInfo(contacts=contacts)
    else:
        info = StepInfo(contacts=contacts, gamma=gamma, force_world=force, iterations=int(iterations),
                        converged=sap_status == 0, status=SAP_STATUS_NAMES[sap_status],
                        momentum_residual=float(resid), line_search_evaluations=int(ls_evals))
        if trees:
            info.actuator_force = forces[0]
    if trees:
        pf = plan.pf
        limit = {name: 0.0 for name in pf.limit_names}
        for name, f in zip(pf.limit_names, forces[1]):
            limit[name] += float(f)
        info.limit_force = limit
        info.constraint_force = {n: np.array([f]) for n, f in zip(pf.coupler_names, forces[2])}
        info.actuator_names = pf.actuator_names
    if sap_status > 0:
        warnings.warn(f"step {state.step} (t = {state.t:.6g} s): {solver} did not converge ({info.status}) after "
                      f"{info.iterations} iterations", ConvergenceWarning, stacklevel=4)
    if not trees:
        return State(t=t_new, q=q_out, v=v_out, step=state.step + 1), info
    return State(t=t_new, q=q_out, v=v_out, step=state.step + 1, tree_q=tq_out, tree_v=tv_out), info


__all__ = ["OneStepBuffers", "one_step_buffers", "compiled_step", "no_law"]
