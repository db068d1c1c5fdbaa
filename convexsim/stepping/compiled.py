"""The compiled SAP step's Python runner: one kernel call, its status turned into (state, StepInfo), a Handoff
or an error (the packing and eligibility are in ``packing``, the kernels in ``sap_composition``).

``compiled_step(model, state, ctx)`` returns what ``sap_stepper.sap_step`` returns, computed by one call of
the run loop ``sap_composition.run_kernel`` for one step; ``run_compiled`` (used by ``simulate.run_model``) advances many
steps per numba call (``sap_composition.run_kernel``). The reference Python path stays in
``sap_stepper`` and is what the tests compare against.

Which models: ``packing.compiled_step_supported`` is the one place that decides (free bodies, fixed bodies and
the links of kinematic trees that ``tree_layout_problem`` accepts, the shipped primitive
shapes, the SAP solver with any of its contact models, valid materials). Models with trees step by
``compiled_trees.compiled_tree_step`` (and ``sap_composition.tree_run_kernel`` in the run loop).

Large islands: the Newton matrix is factored by a dense Cholesky per island (connected component of the
contact graph). A step with an island of more than ``packing.ISLAND_MAX_DOFS`` dofs (20 bodies) is factored
with the supernodal Cholesky (``sap.supernodal``) inside the compiled Newton loop; its
symbolic analysis is done in Python, only when the contact graph leaves the pattern of the step context's
last analysis (``SymbolicCache.covering``: a superset pattern is kept across steps, exact up to round-off).
The run loop (``run_kernel``) stops before such a step and the caller takes it with :func:`compiled_step`.
"""

from __future__ import annotations

import warnings

import numpy as np

from convexsim.model import Contacts, Model, State
from convexsim.sap import newton as N
from convexsim.stepping import sap_composition as C
from convexsim.stepping import status as K
from convexsim.stepping.packing import packed
from convexsim.stepping.types import ConvergenceWarning, Handoff, SimulationError, StepInfo

SAP_STATUS_NAMES = N.SAP_STATUS_NAMES


def nonfinite_error(model: Model, state: State, bad: int, step: int, t: float) -> SimulationError:
    return SimulationError(f"non-finite state of bodies {model.body_names[bad]}", step=step, time=t)


def compiled_step(model: Model, state: State, ctx=None, *,
                  strict: bool = False) -> tuple[State, StepInfo] | Handoff:
    """One SAP step by the compiled kernels (same contract as ``sap_stepper.sap_step``), or a Handoff for a
    step the reference takes (``stepping.dispatch`` takes it).

    One call of the run loop ``run_kernel`` for one step (the compiled step has one entry kernel); a step
    with an island too large for the dense factor is taken in two kernel calls by :func:`_two_call_step` with
    the supernodal Cholesky (module docstring). ``ctx.big_islands`` remembers that, so that the next step
    starts there and does not collide twice (same result either way)."""
    from convexsim.stepping.context import StepContext

    ctx = StepContext() if ctx is None else ctx
    pm = packed(model)
    if ctx.big_islands:                  # the last step had a large island: the next one likely too
        q = np.ascontiguousarray(state.q, dtype=np.float64)
        v = np.ascontiguousarray(state.v, dtype=np.float64)
        return _two_call_step(model, state, ctx, strict, pm, q, v, np.empty_like(q), np.empty_like(v))
    args = pm.args(strict)
    q = np.array(state.q, dtype=np.float64, order="C")
    v = np.array(state.v, dtype=np.float64, order="C")
    bufs = one_step_buffers(ctx, model)
    code, bad, sap_status, extra = bufs.run(lambda b: C.run_kernel(
        *args, q, v, 0, 1, 1, 1, b.fr_step, b.fr_q, b.fr_v, b.fr_stat, b.fr_resid, b.fr_nc, b.st, b.c_body,
        b.c_geom, b.c_point, b.c_normal, b.c_phi, b.c_gamma, b.c_force))
    if code == K.STEP_TOO_LARGE:         # an island above the dense limit: the supernodal factor
        q = np.ascontiguousarray(state.q, dtype=np.float64)
        v = np.ascontiguousarray(state.v, dtype=np.float64)
        return _two_call_step(model, state, ctx, strict, pm, q, v, np.empty_like(q), np.empty_like(v))
    if code == K.STEP_SOLVER_FAILED:
        raise SimulationError(f"SAP did not converge ({SAP_STATUS_NAMES[sap_status]}) after {extra} iterations",
                              step=state.step, time=state.t)
    if code != K.RUN_DONE:
        return _result(model, state, pm, ctx, strict, code, bad, sap_status, extra, 0, 0.0, *bufs.contacts(0),
                       q, v)
    iterations, _, ls_evals, sap_status = (int(x) for x in bufs.fr_stat[0])
    nc = int(bufs.fr_nc[0])
    geoms, phi, point, normal, gamma, force = bufs.contacts(nc)
    return _result(model, state, pm, ctx, strict, K.STEP_OK, -1, sap_status, iterations, ls_evals,
                   float(bufs.fr_resid[0]), geoms, phi, point, normal, gamma, force, q, v)


class OneStepBuffers:
    """The frame and contact buffers of a run kernel called for one step with one frame (the compiled single
    step: ``compiled_step``, ``compiled_trees.compiled_tree_step``), kept in the step context between steps
    (``StepContext.step_buffers``; every call overwrites what it reads)."""

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


def _two_call_step(model, state, ctx, strict, pm, q, v, q_out, v_out):
    """The step in two kernel calls: ``step_prepare`` (collision, problem, clique graph), then
    ``step_finish`` — dense island factors if every island fits, else the supernodal factor of an
    analysis from ``ctx.symbolic.covering`` (Python, only when the graph leaves the analysed pattern)."""
    args = pm.args(strict)
    status, bad, max_n, prep = C.step_prepare(*args, q, v)
    if status != K.STEP_OK:
        return _result(model, state, pm, ctx, strict, status, bad, 0, 0, 0, 0.0, *prep[:4], None, None, q_out,
                       v_out)
    use_sn = bool(max_n > args[1][N.I_ISLAND_MAX_DOFS])
    ctx.big_islands = use_sn
    sym = None
    if use_sn:
        sym = ctx.symbolic.covering(prep[8], prep[18])
        sn = tuple(np.ascontiguousarray(getattr(sym, f), dtype=np.int64) for f in N.SN_FIELDS)
        sn_edges = np.ascontiguousarray(sym.edges, dtype=np.int64).reshape(-1, 2)
    else:
        sn, sn_edges = N.no_supernodal()
    (status, bad, sap_status, iterations, ls_evals, resid, gamma,
     force) = C.step_finish(args[0], args[1], args[5], q, v, q_out, v_out, prep, use_sn, sn, sn_edges)
    if sym is not None:
        from convexsim.sap.linalg import FACTOR_STATS   # instrumentation for `convexsim bench` (no time)

        FACTOR_STATS.factorizations += int(iterations)
        FACTOR_STATS.l_blocks += int(iterations) * sym.l_blocks
        FACTOR_STATS.h_blocks += int(iterations) * sym.h_blocks
        FACTOR_STATS.graph_edges += int(iterations) * int(prep[18].shape[0])
        FACTOR_STATS.kept_edges += int(iterations) * int(sn_edges.shape[0])
    return _result(model, state, pm, ctx, strict, status, bad, sap_status, iterations, ls_evals, resid,
                   *prep[:4], gamma, force, q_out, v_out)


def _result(model, state, pm, ctx, strict, status, bad, sap_status, iterations, ls_evals, resid, geoms, phi,
            point, normal, gamma, force, q_out, v_out) -> tuple[State, StepInfo]:
    """(new state, StepInfo) of a kernel step, a Handoff to the reference step (which raises for a bad
    margin), or an exception for its failure codes."""
    if status in (K.STEP_TOO_LARGE, K.STEP_BAD_MARGIN):
        return Handoff(K.STEP_STATUS_NAMES[status])
    if status == K.STEP_NONFINITE_START:
        raise nonfinite_error(model, state, bad, state.step, state.t)
    geom_body = pm.model_arrays[9]
    contacts = Contacts(geom_a=geoms[:, 0].copy(), geom_b=geoms[:, 1].copy(), body_a=geom_body[geoms[:, 0]],
                        body_b=geom_body[geoms[:, 1]], phi=phi, point=point, normal=normal)
    info = StepInfo(contacts=contacts, gamma=gamma, force_world=force, iterations=int(iterations),
                    converged=sap_status == 0, status=SAP_STATUS_NAMES[sap_status],
                    momentum_residual=float(resid), line_search_evaluations=int(ls_evals))
    if contacts.count == 0:
        info = StepInfo(contacts=contacts)
    if status == K.STEP_SOLVER_FAILED or (sap_status != 0 and status == K.STEP_OK):
        msg = f"SAP did not converge ({info.status}) after {info.iterations} iterations"
        if status == K.STEP_SOLVER_FAILED:
            raise SimulationError(msg, step=state.step, time=state.t)
        warnings.warn(f"step {state.step} (t = {state.t:.6g} s): {msg}", ConvergenceWarning, stacklevel=4)
    t_new = state.t + model.time_step
    if status == K.STEP_NONFINITE_END:
        raise nonfinite_error(model, state, bad, state.step + 1, t_new)
    return State(t=t_new, q=q_out, v=v_out, step=state.step + 1), info


__all__ = ["OneStepBuffers", "one_step_buffers", "compiled_step"]
