"""SAP rollouts of a scene with per-material-pair parameters, and their derivatives (docs/identify.md).

A rollout steps through the SAP reference step's own stages (``stepping.sap_stepper``: ``step_problem``,
``solve``, ``finish``), except that the combined contact parameters of chosen material pairs can be
overridden. With ``linearize=True`` every step also keeps
its linearization (``convexsim.inverse.gradients``):

    v_{l+1} = V(q_l, v_l, θ),     H dv_{l+1} = Mv dv_l + Mq dq_l + Mθ dθ,
    q_{l+1} = q_l + dt v_{l+1}    (in tangent coordinates: per moving body (δrotation, δposition)),

    Mv = A ∂v*/∂v + Σ_i J_iᵀ ∂γ_i/∂vn0 J_n,i,    Mθ = Σ_i J_iᵀ ∂γ_i/∂θ  (+ A ∂v*/∂dt for θ = dt),

    Mq = −∂g/∂q at fixed v, g(v; q) = A(q)(v − v*(q)) − J(q)ᵀ γ(J(q) v; p(q)),

where the configuration enters through the gaps φ, the contact points (lever arms), frames and A. Mq is
the one derivative not taken analytically: it is a central difference of the contact kinematics
(collision at perturbed q with the same contact set, step ``Q_STEP``), at fixed v, so the implicit
solve stays analytic. The contact set itself is held fixed (a contact entering the speculative margin
is a jump the derivative does not see). Configurations move in tangent coordinates, per moving body
(δrotation [rad] about W axes, δposition [m]); q_{l+1} = q_l + dt v_{l+1} is exact for positions and
first order for rotations (the exponential map is linearized). Gradients through a whole
trajectory come forward (:func:`tangents`, one solve per parameter per step) or reverse
(:func:`adjoint`, one solve per step for a scalar loss).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from convexsim import dynamics, sap
from convexsim.inverse.gradients import GRADIENT_PARAMETERS, StepSensitivity, step_sensitivity
from convexsim.model import ContactModel, Model, State
from convexsim.spatial import skew
from convexsim.stepping.contacts import check_finite_state
from convexsim.stepping.context import StepContext
from convexsim.stepping.sap_stepper import StepProblem, finish, solve, step_problem
from convexsim.stepping.types import SimulationError

PAIR_PARAMETERS = {"mu": "mu", "k": "stiffness", "tau_d": "dissipation_time", "d": "hc_dissipation"}
"""Per-material-pair parameters -> field of ``convexsim.stepping.ContactParameters``."""
GLOBAL_PARAMETERS = ("sigma", "dt")
Q_STEP = 1e-7
"""Step [m, rad] of the central difference of the contact kinematics in Mq = −∂g/∂q."""


@dataclass(frozen=True)
class Parameter:
    """One differentiable input: a pair parameter (name in PAIR_PARAMETERS, pair = two material names,
    sorted) or a global one (``sigma``, ``dt``; pair None)."""

    name: str
    pair: tuple[str, str] | None = None

    def label(self) -> str:
        """e.g. ``mu[steel/wood]`` or ``sigma``."""
        return self.name if self.pair is None else f"{self.name}[{self.pair[0]}/{self.pair[1]}]"


def pair_key(a: str, b: str) -> tuple[str, str]:
    """The sorted material pair."""
    return (a, b) if a <= b else (b, a)


def contact_pairs(model: Model, contacts) -> list[tuple[str, str]]:
    """Material pair of every contact."""
    names = model.material_names
    ma = model.geom_material[contacts.geom_a]
    mb = model.geom_material[contacts.geom_b]
    return [pair_key(names[a], names[b]) for a, b in zip(ma, mb)]


def check_parameters(model: Model, parameters) -> None:
    """Raise ValueError for a name that the model's contact model does not use."""
    cm = ContactModel(model.contact_model).name.lower()
    for p in parameters:
        if p.name in GLOBAL_PARAMETERS:
            continue
        if p.name not in PAIR_PARAMETERS:
            known = ", ".join([*PAIR_PARAMETERS, *GLOBAL_PARAMETERS])
            raise ValueError(f"unknown parameter {p.name!r}; known: {known}")
        if p.name == "tau_d" and cm != "sap":
            raise ValueError(f"parameter tau_d does not appear in the {cm!r} contact model (it uses d)")
        if p.name == "d" and cm == "sap":
            raise ValueError("parameter d does not appear in the 'sap' contact model (it uses tau_d)")
        if p.pair is None:
            raise ValueError(f"parameter {p.name} needs a material pair")
        for m in p.pair:
            if m not in model.material_names:
                raise ValueError(f"material {m!r} of {p.label()} is not in the scene "
                                 f"(materials: {', '.join(model.material_names)})")


def pair_overrides(model: Model, overrides: dict[Parameter, float]):
    """The step's ``adjust`` (``sap_stepper.step_problem``): the contacts' combined parameters with those of
    overridden pairs replaced; None without pair overrides."""
    pair_over = {p: v for p, v in overrides.items() if p.pair is not None}
    if not pair_over:
        return None

    def adjust(contacts, params):
        if contacts.count == 0:
            return params
        pairs = contact_pairs(model, contacts)
        fields = {f: getattr(params, f).copy() for f in PAIR_PARAMETERS.values()}
        for p, value in pair_over.items():
            mask = np.array([pk == p.pair for pk in pairs])
            fields[PAIR_PARAMETERS[p.name]][mask] = value
        return replace(params, **fields)

    return adjust


def apply_globals(model: Model, overrides: dict[Parameter, float]) -> Model:
    """The model with overridden σ and dt."""
    for p, value in overrides.items():
        if p.name == "sigma":
            model = replace(model, solver=replace(model.solver, sigma=float(value)))
        elif p.name == "dt":
            model = replace(model, time_step=float(value))
    return model


def gyro_jacobian(model: Model, state: State) -> np.ndarray:
    """∂v*/∂v of the free motion v* = v + dt M⁻¹(−ω × I_W ω, m g), block diagonal (nv, nv)."""
    bodies = dynamics.moving_bodies(model)
    nv = 6 * bodies.size
    out = np.eye(nv)
    I_W = dynamics.world_inertia(model, state.q, bodies)
    for b in range(bodies.size):
        w = state.v[bodies[b], :3]
        dtau = -skew(w) @ I_W[b] + skew(I_W[b] @ w)
        out[6 * b:6 * b + 3, 6 * b:6 * b + 3] += model.time_step * np.linalg.solve(I_W[b], dtau)
    return out


@dataclass
class StepRecord:
    """Linearization of one rollout step (module docstring). ``sens`` is None for a step without contacts
    (then H = A)."""

    sens: StepSensitivity | None
    A: np.ndarray
    Mv: np.ndarray
    Mq: np.ndarray
    Mtheta: np.ndarray
    v_next: np.ndarray

    def solve(self, rhs) -> np.ndarray:
        """H⁻¹ rhs."""
        if self.sens is None:
            return np.linalg.solve(self.A, rhs)
        return self.sens.solve(rhs)


@dataclass
class Rollout:
    """States of a rollout (frame 0 = initial) and, if linearized, one StepRecord per step."""

    model: Model
    parameters: tuple[Parameter, ...]
    q: np.ndarray           # (T, nbody, 7)
    v: np.ndarray           # (T, nbody, 6)
    records: list[StepRecord] = field(default_factory=list)

    @property
    def bodies(self) -> np.ndarray:
        """Moving bodies (clique order)."""
        return dynamics.moving_bodies(self.model)

    @property
    def nv(self) -> int:
        """Generalized velocities of a step (6 per moving body)."""
        return 6 * int(self.bodies.size)

    def positions(self) -> np.ndarray:
        """COM positions of the moving bodies, shape (T, nmov, 3) [m]."""
        return self.q[:, self.bodies, :3]


def perturbed(model: Model, state: State, j: int, h: float) -> State:
    """The state with moving-body dof j moved by h (tangent coordinates: rotation about W axes, then
    position)."""
    bodies = dynamics.moving_bodies(model)
    b, k = divmod(j, 6)
    s = state.copy()
    if k >= 3:
        s.q[bodies[b], k - 3] += h
    else:
        from convexsim.spatial import quat_exp, quat_multiply
        rot = np.zeros((1, 3))
        rot[0, k] = h
        quat = quat_multiply(quat_exp(rot), s.q[bodies[b]:bodies[b] + 1, 3:7])[0]
        s.q[bodies[b], 3:7] = quat / np.linalg.norm(quat)
    return s


def momentum_residual(sp: StepProblem, v: np.ndarray) -> np.ndarray:
    """g = A(v − v*) − Jᵀγ(Jv) of the step's problem ``sp`` (``sap_stepper.step_problem``) at v (nv,)."""
    from convexsim.sap.constraints import eval_constraints
    from convexsim.sap.problem import constraint_kernel_data, delassus_diagonal

    system = sp.system
    g = system.A @ (v - system.v_star)
    if sp.problem is None:
        return g
    kind, cpar, _, _ = constraint_kernel_data(sp.problem, delassus_diagonal(sp.problem))
    gamma = np.empty((sp.problem.nk, 3))
    eval_constraints(kind, np.ascontiguousarray(cpar), sp.problem.constraint_velocities(v), gamma,
                     np.empty((sp.problem.nk, 3, 3)), False, 0.0)
    return g - sp.problem.generalized_impulses(gamma)


def _dg_dq(model, state, sp: StepProblem, v, adjust, wrench, ctx) -> np.ndarray:
    """∂g/∂q at fixed v by central differences of the step's problem at perturbed configurations (the
    speculative margins and reaches read velocities only, so they stay those of ``state``), shape (nv, nv).

    The contact set must stay the same; when it changes on one side (a contact exactly at the margin) the
    one-sided difference on the other side is used, when on both a SimulationError is raised. Without
    contacts only the rotations move g (the gyroscopic term through I_W(q)).
    """
    nv = v.size
    out = np.zeros((nv, nv))
    base = sp.contacts
    if base.count == 0 and not np.any(state.v[dynamics.moving_bodies(model), :3]):
        return out
    g0 = momentum_residual(sp, v)

    def same(c):
        return c.count == base.count and np.all(c.geom_a == base.geom_a) and np.all(c.geom_b == base.geom_b)

    for j in range(nv):
        if base.count == 0 and j % 6 >= 3:
            continue
        g = {}
        for sign in (1.0, -1.0):
            s2 = step_problem(model, perturbed(model, state, j, sign * Q_STEP), ctx, wrench=wrench, adjust=adjust)
            if same(s2.contacts):
                g[sign] = momentum_residual(s2, v)
        if len(g) == 2:
            out[:, j] = (g[1.0] - g[-1.0]) / (2.0 * Q_STEP)
        elif g:
            sign, gs = next(iter(g.items()))
            out[:, j] = sign * (gs - g0) / Q_STEP
        else:
            raise SimulationError("the contact set changes within the kinematics difference step",
                                  step=state.step, time=state.t)
    return out


def _step_record(model: Model, state: State, sp: StepProblem, result, parameters, adjust, wrench,
                 ctx) -> StepRecord:
    system = sp.system
    A = system.A
    Mv = A @ gyro_jacobian(model, state)
    Mtheta = np.zeros((system.nv, len(parameters)))
    dvstar_ddt = (system.v_star - system.v0) / model.time_step
    sens = None
    if result is not None:
        sens = step_sensitivity(sp.problem, result)
        Mv += sens.contact_columns("vn0") @ sens.J[:, 2, :]
    v_next = system.v_star if result is None else np.asarray(result.v)
    Mq = -_dg_dq(model, state, sp, v_next, adjust, wrench, ctx)
    pairs = contact_pairs(model, sp.contacts) if result is not None else []
    for j, p in enumerate(parameters):
        if p.name == "dt":
            Mtheta[:, j] = A @ dvstar_ddt
        if sens is None:
            continue
        cols = sens.contact_columns(p.name)
        if p.pair is None:
            Mtheta[:, j] += cols.sum(axis=1)
        else:
            mask = np.array([pk == p.pair for pk in pairs])
            Mtheta[:, j] += cols[:, mask].sum(axis=1)
    return StepRecord(sens, A, Mv, Mq, Mtheta, np.array(v_next, dtype=float))


def rollout(model: Model, state0: State, steps: int, *, overrides: dict[Parameter, float] | None = None,
            parameters=(), linearize: bool = False, applied: np.ndarray | None = None,
            solver_params: sap.SapParameters = GRADIENT_PARAMETERS) -> Rollout:
    """Simulate ``steps`` SAP steps from ``state0`` with overridden pair/global parameters.

    Args:
        overrides: Parameter -> value (pair parameters replace the combined value of that pair).
        parameters: the Parameters to differentiate with respect to (order of the Mθ columns).
        linearize: keep each step's linearization (needed by :func:`tangents` and :func:`adjoint`).
        applied: generalized forces u_l held over step l, shape (steps, nmov, 6) per moving body
            (torque [N·m] about the world axes, then force [N], the v layout [ω; v]); they enter the free
            motion as v* = v_l + dt M⁻¹(f + u_l) (the B·u term). Default none.
        solver_params: SAP settings (default: tight, see gradients.GRADIENT_PARAMETERS).

    Raises:
        SimulationError: a step failed (naming the step and time).
    """
    overrides = dict(overrides or {})
    parameters = tuple(parameters)
    check_parameters(model, list(overrides) + list(parameters))
    model = apply_globals(model, overrides)
    if model.solver.kind != "sap":
        model = replace(model, solver=replace(model.solver, kind="sap"))
    ctx = StepContext()
    bodies = dynamics.moving_bodies(model)
    u = _applied_array(applied, int(steps), bodies.size)
    adjust = pair_overrides(model, overrides)
    qs, vs, records = [state0.q.copy()], [state0.v.copy()], []
    state = state0.copy()
    for l in range(int(steps)):
        wrench = None
        if u is not None:
            wrench = np.zeros((model.nbody, 6))
            wrench[bodies] = u[l]
        sp = step_problem(model, state, ctx, wrench=wrench, adjust=adjust)
        try:
            result = solve(sp, params=solver_params, symbolic=ctx.symbolic)
        except sap.SapSolverError as exc:
            raise SimulationError(str(exc), step=state.step, time=state.t) from None
        if linearize:
            records.append(_step_record(model, state, sp, result, parameters, adjust, wrench, ctx))
        state, _ = finish(model, state, sp, result)
        check_finite_state(model, state)
        qs.append(state.q.copy())
        vs.append(state.v.copy())
    return Rollout(model, parameters, np.array(qs), np.array(vs), records)


def _applied_array(applied, steps: int, nmov: int) -> np.ndarray | None:
    """``applied`` as an array (steps, nmov, 6), or None; ValueError naming the expected shape."""
    if applied is None:
        return None
    u = np.asarray(applied, dtype=float)
    if u.shape != (steps, nmov, 6):
        raise ValueError(f"applied forces: expected shape (steps, moving bodies, 6) = ({steps}, {nmov}, 6), "
                         f"got {u.shape}")
    if not np.all(np.isfinite(u)):
        raise ValueError("applied forces: non-finite values")
    return u


def tangents(ro: Rollout, *, initial: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Forward sensitivities of every frame: (dq/dx, dv/dx), shapes (T, nv, nx) each.

    x = the rollout's parameters, then (with ``initial``) the initial state in tangent coordinates
    (δq0 (nv), δv0 (nv)). dq is in tangent coordinates: per moving body (δrotation [rad], δposition [m]),
    then (tree rollouts, ``convexsim.inverse.trees``) the joint coordinates.
    """
    _check_linearized(ro)
    nv = ro.nv
    ntheta = len(ro.parameters)
    nx = ntheta + (2 * nv if initial else 0)
    dt = ro.model.time_step
    Sq = np.zeros((nv, nx))
    Sv = np.zeros((nv, nx))
    if initial:
        Sq[:, ntheta:ntheta + nv] = np.eye(nv)
        Sv[:, ntheta + nv:] = np.eye(nv)
    out_q, out_v = [Sq.copy()], [Sv.copy()]
    dt_col = _dt_columns(ro)
    for rec in ro.records:
        rhs = rec.Mv @ Sv + rec.Mq @ Sq
        rhs[:, :ntheta] += rec.Mtheta
        Sv = rec.solve(rhs)
        Sq = Sq + dt * Sv
        for j in dt_col:
            Sq[:, j] += rec.v_next
        out_q.append(Sq.copy())
        out_v.append(Sv.copy())
    return np.array(out_q), np.array(out_v)


def _check_linearized(ro) -> None:
    if len(ro.records) != len(ro.states if hasattr(ro, "states") else ro.q) - 1:
        raise ValueError("the rollout was not linearized (rollout(..., linearize=True))")


def _dt_columns(ro) -> list[int]:
    return [j for j, p in enumerate(ro.parameters) if getattr(p, "name", None) == "dt"]


def adjoint(ro: Rollout, dL_dq: np.ndarray, dL_dv: np.ndarray | None = None, *,
            applied_gradient: bool = False, step_multipliers: bool = False) -> tuple[np.ndarray, ...]:
    """Reverse accumulation of a loss L = Σ_l ℓ_l(q_l, v_l) through the rollout.

    Args:
        dL_dq: ∂ℓ_l/∂q_l in tangent coordinates, shape (T, nv). dL_dv: ∂ℓ_l/∂v_l, shape (T, nv) (default 0).
        applied_gradient: also return dL/du_l for the applied generalized forces of every step.

    Returns:
        (dL/dθ (nθ,), dL/dq0 (nv,), dL/dv0 (nv,)), and with ``applied_gradient`` dL/du (T−1, nmov, 6)
        [per N, N·m]: one H solve per step; with ``step_multipliers`` (instead) the per-step u_l = H_l⁻¹ a_l,
        shape (T−1, nv) (``trees.target_gradient`` turns them into PD-target gradients).

    Recurrence (a = λv_{l+1} + dt λq_{l+1}, u = H⁻¹a): λq_l = ∂ℓ_l/∂q_l + λq_{l+1} + Mqᵀu,
    λv_l = ∂ℓ_l/∂v_l + Mvᵀu, dL/dθ += Mθᵀu (+ λq_{l+1}·v_{l+1} for θ = dt). The applied force enters
    g = A(v − v*) − Jᵀγ as −dt·u_l (A ∂v*/∂u = dt A M⁻¹ = dt I for rigid bodies), so dL/du_l = dt·u.
    """
    _check_linearized(ro)
    T = len(ro.records) + 1
    nv = ro.nv
    dL_dq = np.asarray(dL_dq, float).reshape(T, nv)
    dL_dv = np.zeros((T, nv)) if dL_dv is None else np.asarray(dL_dv, float).reshape(T, nv)
    dt = ro.model.time_step
    lam_q, lam_v = dL_dq[-1].copy(), dL_dv[-1].copy()
    grad = np.zeros(len(ro.parameters))
    dt_col = _dt_columns(ro)
    d_applied = np.zeros((T - 1, nv))
    multipliers = np.zeros((T - 1, nv))
    for l in range(T - 2, -1, -1):
        rec = ro.records[l]
        a = lam_v + dt * lam_q
        u = rec.solve(a)
        grad += rec.Mtheta.T @ u
        d_applied[l] = dt * u
        multipliers[l] = u
        for j in dt_col:
            grad[j] += lam_q @ rec.v_next
        lam_q = dL_dq[l] + lam_q + rec.Mq.T @ u
        lam_v = dL_dv[l] + rec.Mv.T @ u
    if step_multipliers:
        return grad, lam_q, lam_v, multipliers
    if applied_gradient:
        return grad, lam_q, lam_v, d_applied.reshape(T - 1, -1, 6)
    return grad, lam_q, lam_v


__all__ = [
    "GLOBAL_PARAMETERS",
    "PAIR_PARAMETERS",
    "Parameter",
    "Rollout",
    "StepRecord",
    "adjoint",
    "apply_globals",
    "check_parameters",
    "contact_pairs",
    "gyro_jacobian",
    "pair_key",
    "pair_overrides",
    "rollout",
    "tangents",
]
