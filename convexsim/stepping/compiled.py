"""The compiled SAP step: eligibility, the model packed once into flat arrays, and the Python entry points.

``compiled_step(model, state, ctx)`` returns what ``sap_stepper.sap_step`` returns, computed by one call of
the run loop ``compiled_kernels.run_kernel`` for one step; ``run_compiled`` (used by ``simulate.run_model``) advances many
steps per numba call (``compiled_kernels.run_kernel``). The reference Python path stays in
``sap_stepper`` and is what the tests compare against.

Which models: :func:`compiled_step_supported` is the one place that decides (free bodies, fixed bodies and
the links of kinematic trees that ``tree_layout_problem`` accepts, the shipped primitive
shapes, the SAP solver with any of its contact models, valid materials). Models with trees step by
``compiled_trees.compiled_tree_step`` (and ``tree_kernels.tree_run_kernel`` in the run loop).

Large islands: the Newton matrix is factored by a dense Cholesky per island (connected component of the
contact graph). A step with an island of more than :data:`ISLAND_MAX_DOFS` dofs (20 bodies) is factored
with the supernodal Cholesky (``sap.supernodal``) inside the compiled Newton loop; its
symbolic analysis is done in Python, only when the contact graph leaves the pattern of the step context's
last analysis (``SymbolicCache.covering``: a superset pattern is kept across steps, exact up to round-off).
The run loop (``run_kernel``) stops before such a step and the caller takes it with :func:`compiled_step`.
"""

from __future__ import annotations

import math
import warnings
import weakref

import numpy as np

from convexsim.model import ContactModel, Contacts, GeomType, Model, State
from convexsim.geometry.collide import geometry_table
from convexsim.sap import newton as N
from convexsim.stepping import compiled_kernels as K
from convexsim.stepping.contacts import MARGIN_FLOOR, geom_sweep_radius
from convexsim.stepping.types import ConvergenceWarning, Handoff, SimulationError, StepInfo

ISLAND_MAX_DOFS = 120
"""Largest island (dofs) the compiled step factors with a dense Cholesky; larger ones take the reference
step. 120 dofs = 20 free bodies: a dense factor of that size costs about as much as the reference
step's orchestration (docs/performance.md)."""

SUPPORTED_SHAPES = (GeomType.SPHERE, GeomType.BOX, GeomType.CAPSULE, GeomType.HALFSPACE, GeomType.CYLINDER,
                    GeomType.MESH)

SAP_STATUS_NAMES = N.SAP_STATUS_NAMES


def free_body_layout_problem(model: Model, links_allowed: bool = False) -> str:
    """Why the compiled kernels cannot take ``model``'s bodies and shapes ("" if they can): every shape
    among sphere, box, capsule, halfspace, cylinder, mesh; every body free (6 dofs, in body order) or fixed (or, with
    ``links_allowed``, a link of a kinematic tree). Shared by the compiled SAP and LCP steps."""
    bad = sorted({int(t) for t in np.asarray(model.geom_type)} - {int(s) for s in SUPPORTED_SHAPES})
    if bad:
        return f"geometry type(s) {bad} not supported (sphere, box, capsule, halfspace, cylinder, mesh)"
    fixed = np.asarray(model.body_fixed, dtype=bool)
    dof = np.asarray(model.body_dof)
    if links_allowed and model.forest is not None:
        fixed = fixed.copy()
        for t in model.forest.trees:
            fixed[t.bodies] = True                # links: neither free nor fixed, their rows come from FK
        if np.any(dof[np.asarray(model.body_fixed, dtype=bool)] != -1):
            return "a fixed body has dofs"
        moving = np.flatnonzero(~fixed)
        if not np.array_equal(dof[moving], 6 * np.arange(moving.size)):
            return "bodies are not all free (6 dofs each, in body order), fixed or links"
        return ""
    moving = np.flatnonzero(~fixed)
    if np.any(dof[fixed] != -1) or not np.array_equal(dof[moving], 6 * np.arange(moving.size)):
        return "bodies are not all free (6 dofs each, in body order) or fixed"
    return ""


def tree_layout_problem(model: Model) -> str:
    """Why the compiled tree step (``compiled_trees``) cannot take ``model``'s trees ("" if it can): cone
    limits, welds and distances, joint rows on joints with more than one dof, a tree's gravity other than
    the model's are refused."""
    from convexsim.multibody.forest import JointCoupler
    from convexsim.multibody.model import JointType
    from convexsim.multibody.reference_step import ConeLimit

    one_dof = (int(JointType.REVOLUTE), int(JointType.PRISMATIC))
    forest = model.forest
    if forest is None:
        return ""
    for c in forest.constraints:
        if not isinstance(c, JointCoupler):
            return (f"constraint {c.name!r}: welds and distances between bodies are not in the compiled step "
                    "(joint couplers are)")
        for name in (c.joint, c.reference):
            k, j = forest.joint_index[name]
            if int(forest.trees[k].model.joint_type[j]) not in one_dof:
                return f"coupler {c.name!r}: joint {name!r} is not a 1-dof joint"
    g = np.asarray(model.gravity, dtype=float)
    for t in forest.trees:
        m = t.model
        if not np.array_equal(np.asarray(m.gravity, dtype=float), g):
            return f"tree {t.joint_names[0]!r}: its gravity differs from the model's"
        for lim in t.limits:
            if isinstance(lim, ConeLimit):
                return f"joint {t.joint_names[lim.joint]!r}: cone limits are not in the compiled step"
            if int(m.joint_type[lim.joint]) not in one_dof:
                return f"joint {t.joint_names[lim.joint]!r}: a limit on a joint with more than one dof"
            if not lim.lower <= lim.upper:
                return f"joint {t.joint_names[lim.joint]!r}: lower limit above the upper"
        for a in t.actuators:
            if int(m.joint_type[a.joint]) not in one_dof:
                return f"actuator {a.name!r}: not on a 1-dof joint"
            if not (a.effort > 0 and a.kp >= 0 and a.kd >= 0 and a.kp + a.kd > 0 and math.isfinite(a.kp)
                    and math.isfinite(a.kd)):
                return f"actuator {a.name!r}: gains or effort out of range"
        for cp in t.couplers:
            for j in (cp.joint_i, cp.joint_j):
                if int(m.joint_type[j]) not in one_dof:
                    return f"coupler on joint {t.joint_names[j]!r}: not a 1-dof joint"
    return ""


def compiled_step_supported(model: Model) -> tuple[bool, str]:
    """(True, "") when the compiled step can advance ``model``, else (False, the reason).

    Conditions: the SAP solver (not LCP); every body free (6 dofs), fixed or a link of a kinematic tree
    whose joints, limits, actuators and couplers ``tree_layout_problem`` accepts (no cone
    limits, no body constraints); geometry shapes among sphere, box, capsule, halfspace, cylinder, mesh; contact model
    sap, lagged or similar; every material with stiffness > 0, friction >= 0, dissipation >= 0 (the
    reference path rejects others when it builds the problem). Tree models step by
    ``compiled_trees.compiled_tree_step``, free-body models by :func:`compiled_step`."""
    if model.solver.kind != "sap":
        return False, f"solver.kind is {model.solver.kind!r}; the compiled step is the SAP step"
    if model.has_trees:
        why = tree_layout_problem(model)
        if why:
            return False, why
    try:
        cm = ContactModel(model.contact_model)
    except ValueError:
        return False, f"contact model {model.contact_model!r} is not one of sap, lagged, similar"
    del cm
    layout = free_body_layout_problem(model, links_allowed=model.has_trees)
    if layout:
        return False, layout
    for name, arr, positive in (("stiffness", model.material_stiffness, True),
                                ("friction", model.material_friction, False),
                                ("dissipation_time", model.material_dissipation_time, False),
                                ("hc_dissipation", model.material_hc_dissipation, False)):
        a = np.asarray(arr, dtype=float)
        ok = np.isfinite(a) & ((a > 0) if positive else (a >= 0))
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            return False, f"material {model.material_names[i]!r}: {name} = {float(a[i])!r} is out of range"
    return True, ""


class PackedModel:
    """The model as the flat arrays the kernels take (built once per model, :func:`packed`)."""

    def __init__(self, model: Model, strict: bool = False):
        from convexsim.stepping.sap_stepper import sap_parameters

        prm = sap_parameters(model)
        s = model.solver
        fpar = np.zeros(N.NFPAR)
        fpar[N.F_DT] = model.time_step
        fpar[N.F_GNORM] = float(np.linalg.norm(model.gravity))
        fpar[N.F_SIGMA] = s.sigma
        fpar[N.F_BETA] = s.beta
        fpar[N.F_VS] = s.stiction_tolerance
        fpar[N.F_REL_TOL] = prm.rel_tolerance
        fpar[N.F_ABS_TOL] = prm.abs_tolerance
        fpar[N.F_COST_ABS_TOL] = prm.cost_abs_tolerance
        fpar[N.F_COST_REL_TOL] = prm.cost_rel_tolerance
        fpar[N.F_EXACT_ALPHA_MAX] = prm.exact_alpha_max
        fpar[N.F_ARMIJO] = prm.armijo
        fpar[N.F_RHO] = prm.rho
        fpar[N.F_RELATIVE_SLOP] = prm.relative_slop
        fpar[N.F_MARGIN_FLOOR] = MARGIN_FLOOR
        fpar[N.F_SLIP_CURVATURE] = prm.slip_curvature
        fpar[N.F_SLIP_CURVATURE_RESIDUAL] = prm.slip_curvature_residual
        ipar = np.zeros(N.NIPAR, np.int64)
        ipar[N.I_CONTACT_KIND] = int(ContactModel(model.contact_model))
        ipar[N.I_MAX_ITERATIONS] = prm.max_iterations
        ipar[N.I_LINE_SEARCH] = 0 if prm.line_search == "exact" else 1
        ipar[N.I_EXACT_MAX_ITERATIONS] = prm.exact_max_iterations
        ipar[N.I_BACKTRACKING_MAX_ITERATIONS] = prm.backtracking_max_iterations
        ipar[N.I_ISLAND_MAX_DOFS] = ISLAND_MAX_DOFS
        ipar[N.I_STRICT] = int(bool(strict))
        self.fpar, self.ipar = fpar, ipar
        fixed = np.ascontiguousarray(model.body_fixed, dtype=np.bool_)
        geom_body = np.ascontiguousarray(model.geom_body, dtype=np.int64)
        rho = np.ascontiguousarray(geom_sweep_radius(model), dtype=float)
        rb = np.zeros(model.nbody)
        finite = np.isfinite(rho)
        np.maximum.at(rb, geom_body[finite], rho[finite])
        mat = np.asarray(model.geom_material, dtype=np.int64)
        f = lambda a: np.ascontiguousarray(a, dtype=np.float64)  # noqa: E731
        self.model_arrays = (
            f(model.gravity), fixed, np.ascontiguousarray(model.body_dof, dtype=np.int64),
            np.flatnonzero(np.asarray(model.body_dof) >= 0).astype(np.int64), f(model.body_mass), f(model.body_inertia), rb,
            np.ascontiguousarray(model.geom_type, dtype=np.int64), geometry_table(model), geom_body,
            f(model.geom_pos), f(model.geom_quat), rho,
            f(np.asarray(model.material_stiffness)[mat]), f(np.asarray(model.material_friction)[mat]),
            f(np.asarray(model.material_dissipation_time)[mat]),
            f(np.asarray(model.material_hc_dissipation)[mat]),
        )

    def args(self, strict: bool) -> tuple:
        """(fpar, ipar, *model arrays) with the strict flag set."""
        ipar = self.ipar
        if bool(ipar[N.I_STRICT]) != bool(strict):
            ipar = ipar.copy()
            ipar[N.I_STRICT] = int(bool(strict))
        return (self.fpar, ipar, *self.model_arrays)


_PACKED: dict[int, tuple[weakref.ref, PackedModel]] = {}
_SUPPORTED: dict[int, tuple[weakref.ref, tuple[bool, str]]] = {}


def per_model(cache: dict, model: Model, build):
    """``build(model)``, computed once per model object and kept while the model lives.

    Model is frozen, so the answer cannot go stale; the entry is dropped when the model is
    collected (a weak reference keyed by ``id``, checked against reuse of the id).
    """
    key = id(model)
    hit = cache.get(key)
    if hit is not None and hit[0]() is model:
        return hit[1]
    value = build(model)
    cache[key] = (weakref.ref(model, lambda _r, key=key: cache.pop(key, None)), value)
    return value


def supported_cached(model: Model) -> tuple[bool, str]:
    """``compiled_step_supported(model)``, evaluated once per model object."""
    return per_model(_SUPPORTED, model, compiled_step_supported)


def packed(model: Model) -> PackedModel:
    """The PackedModel of ``model`` (built on first use, kept while the model lives)."""
    return per_model(_PACKED, model, PackedModel)


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
    code, bad, sap_status, extra = bufs.run(lambda b: K.run_kernel(
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
    status, bad, max_n, prep = K.step_prepare(*args, q, v)
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
     force) = K.step_finish(args[0], args[1], args[5], q, v, q_out, v_out, prep, use_sn, sn, sn_edges)
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


__all__ = ["OneStepBuffers", "one_step_buffers", "compiled_step_supported", "supported_cached", "compiled_step", "packed", "PackedModel",
           "ISLAND_MAX_DOFS"]
