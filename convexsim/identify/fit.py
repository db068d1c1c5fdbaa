"""Identify material-pair parameters from a recorded trajectory (docs/identify.md).

Two estimators on the same data (the COM positions of the moving bodies in every frame):

* ``sap``: least squares on SAP rollouts, r(θ, x⁰) = positions(rollout) − observed positions, over the
  pair parameters θ (μ; k as log k; τ_d or d) and the initial state x⁰ (COM positions and linear
  velocities of the moving bodies; orientations and angular velocities are taken from the file), Jacobian
  from the forward sensitivities of ``convexsim.inverse.rollout``;
* ``mpec``: Berard & Trinkle's MPEC (``convexsim.identify.mpec``) with the LCP stepper's contact LCP per
  step (kinematics frozen at the observed configurations, gaps linear in the free positions); μ only —
  the rigid LCP has no k or τ_d.

Standard deviations are Gauss–Newton ones, s²(JᵀJ)⁻¹ with s² = misfit/(observations − unknowns).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import yaml
from scipy.optimize import least_squares

from convexsim import dynamics
from convexsim.identify.mpec import MpecProblem, MpecStep, solve_mpec
from convexsim.inverse.rollout import Parameter, check_parameters, contact_pairs, rollout, tangents
from convexsim.io import Trajectory, TrajectoryFormatError, load_trajectory
from convexsim.scene import SceneError
from convexsim.model import Model, State
from convexsim.stepping import contact_kinematics, contact_margin

IDENTIFIABLE = ("mu", "k", "tau_d", "d")
MAX_RELATIVE_STD = 0.5
"""A parameter whose standard deviation exceeds this fraction of its estimate is reported as not
identifiable (an error, not a number)."""
MPEC_MARGIN = 0.01
"""Extra distance [m] added to the speculative margin when collecting contacts at the observed
configurations: noise can lift a resting body above the stepper's 1 mm margin."""


class IdentificationError(ValueError):
    """The data cannot identify what was asked (no contacts, unknown parameter, too much noise)."""


@dataclass
class Estimate:
    """One parameter estimate."""

    method: str
    parameter: str
    value: float
    std: float
    initial: float


@dataclass
class MethodResult:
    """What one estimator found: estimates, objective Σ‖p − p̃‖² [m²], evaluations, fitted positions
    (T, nmov, 3), constraint violation (MPEC, m/s), notes."""

    method: str
    estimates: list[Estimate]
    objective: float
    evaluations: int
    positions: np.ndarray
    violation: float = 0.0
    notes: list[str] = field(default_factory=list)
    converged: bool = True
    message: str = ""


@dataclass
class Identification:
    """All results for one trajectory."""

    source: str
    model: Model
    time: np.ndarray
    observed: np.ndarray           # (T, nmov, 3)
    body_names: list[str]
    pairs: list[tuple[str, str]]
    results: list[MethodResult]


# --------------------------------------------------------------------------------------------------
def model_and_frames(traj: Trajectory) -> tuple[Model, list[State]]:
    """The trajectory's scene compiled, and one State per frame (from the recorded poses and velocities)."""
    from convexsim.simulate import prepare

    scene = yaml.safe_load(traj.scene_yaml) if traj.scene_yaml.strip() else None
    if not isinstance(scene, dict):         # "", "null", a comment: YAML of no mapping (load_trajectory's gate)
        raise IdentificationError("the trajectory holds no scene (scene_yaml is empty)")
    model, _, _ = prepare(scene)
    if traj.num_frames < 3:
        raise IdentificationError(f"the trajectory has {traj.num_frames} frames; at least 3 are needed")
    dt = np.diff(traj.time)
    if not np.allclose(dt, model.time_step, rtol=1e-6, atol=0.0):
        raise IdentificationError(f"frames are not one time step ({model.time_step} s) apart: record every "
                                  f"step (--record-every 1); found spacings {dt.min():.3g}..{dt.max():.3g} s")
    if list(traj.body_names) != list(model.body_names):
        raise IdentificationError("the trajectory's bodies differ from its scene's")
    frames = []
    for f in range(traj.num_frames):
        q = np.concatenate([traj.position[f], traj.quaternion[f]], axis=1)
        v = np.concatenate([traj.angular_velocity[f], traj.linear_velocity[f]], axis=1)
        frames.append(State(float(traj.time[f]), q, v, f))
    if model.solver.kind != "sap":
        model = replace(model, solver=replace(model.solver, kind="sap"))
    return model, frames


def observed_pairs(model: Model, frames: list[State]) -> list[tuple[str, str]]:
    """Material pairs in contact (within the margin) at some observed frame, sorted."""
    pairs = set()
    for s in frames[:-1]:
        kin = contact_kinematics(model, s, margin=contact_margin(model, s) + MPEC_MARGIN)
        pairs.update(contact_pairs(model, kin.contacts))
    return sorted(pairs)


def parameters_for(model: Model, names, pairs) -> list[Parameter]:
    """Parameters (name × pair) to estimate; errors name unknown or absent parameters."""
    if not pairs:
        raise IdentificationError("the trajectory has no contacts: nothing about the materials can be "
                                  "identified from it")
    out = []
    for n in names:
        if n not in IDENTIFIABLE:
            raise IdentificationError(f"unknown parameter {n!r}; identifiable: {', '.join(IDENTIFIABLE)}")
        for p in pairs:
            out.append(Parameter(n, p))
    try:
        check_parameters(model, out)
    except ValueError as exc:
        raise IdentificationError(str(exc)) from None
    return out


def scene_value(model: Model, p: Parameter) -> float:
    """The combined scene value of a pair parameter (the rule of docs/scene-format.md)."""
    ia, ib = (model.material_names.index(m) for m in p.pair)
    if p.name == "mu":
        a, b = model.material_friction[ia], model.material_friction[ib]
        return float(2 * a * b / (a + b)) if a + b > 0 else 0.0
    if p.name == "k":
        a, b = model.material_stiffness[ia], model.material_stiffness[ib]
        return float(a * b / (a + b))
    if p.name == "tau_d":
        return float(model.material_dissipation_time[ia] + model.material_dissipation_time[ib])
    ka, kb = model.material_stiffness[ia], model.material_stiffness[ib]
    da, db = model.material_hc_dissipation[ia], model.material_hc_dissipation[ib]
    return float((kb * da + ka * db) / (ka + kb))


def _check_identifiable(method: str, estimates: list[Estimate]) -> None:
    for e in estimates:
        if not np.isfinite(e.std) or e.std > MAX_RELATIVE_STD * max(abs(e.value), 1e-12):
            raise IdentificationError(
                f"{method}: {e.parameter} is not identifiable from this data: estimate {e.value:.4g} with "
                f"standard deviation {e.std:.3g} (> {MAX_RELATIVE_STD:.0%} of it); too much noise, too few "
                f"frames in contact, or motion that does not depend on it")


# --------------------------------------------------------------------------------------------------
# (b) least squares on SAP rollouts
# --------------------------------------------------------------------------------------------------
def _to_x(p: Parameter, value: float) -> float:
    return float(np.log(value)) if p.name == "k" else float(value)


def _from_x(p: Parameter, x: float) -> float:
    return float(np.exp(x)) if p.name == "k" else float(x)


def fit_sap(model: Model, frames: list[State], observed: np.ndarray, params: list[Parameter],
            initial: dict[Parameter, float], *, max_nfev: int = 30) -> MethodResult:
    """Least squares on SAP rollouts over (θ, x⁰) (module docstring)."""
    bodies = dynamics.moving_bodies(model)
    nv = 6 * bodies.size
    T = observed.shape[0]
    npar = len(params)
    trans = np.array([6 * b + 3 + k for b in range(bodies.size) for k in range(3)])
    cache = {}

    def run(x):
        key = x.tobytes()
        if key not in cache:
            cache.clear()
            s0 = frames[0].copy()
            s0.q[bodies, :3] = x[npar:npar + trans.size].reshape(-1, 3)
            s0.v[bodies, 3:] = x[npar + trans.size:].reshape(-1, 3)
            over = {p: _from_x(p, x[j]) for j, p in enumerate(params)}
            ro = rollout(model, s0, T - 1, overrides=over, parameters=params, linearize=True)
            cache[key] = ro
        return cache[key]

    def fun(x):
        return np.ravel(run(x).positions() - observed)

    def jac(x):
        ro = run(x)
        Sq, _ = tangents(ro, initial=True)                      # (T, nv, npar + 2nv)
        cols = list(range(npar)) + list(npar + trans) + list(npar + nv + trans)
        Jx = Sq[:, trans, :][:, :, cols].reshape(T * trans.size, len(cols))
        for j, p in enumerate(params):
            if p.name == "k":
                Jx[:, j] *= _from_x(p, x[j])                    # d/d log k
        return Jx

    x0 = np.concatenate([[_to_x(p, initial[p]) for p in params], frames[0].q[bodies, :3].ravel(),
                         frames[0].v[bodies, 3:].ravel()])
    lo = np.full(x0.size, -np.inf)
    for j, p in enumerate(params):
        if p.name != "k":
            lo[j] = 0.0
    sol = least_squares(fun, x0, jac=jac, bounds=(lo, np.inf), method="trf", x_scale="jac",
                        max_nfev=max_nfev, xtol=1e-12, ftol=1e-12, gtol=1e-12)
    objective = float(2 * sol.cost)
    Jx = sol.jac
    dof = max(sol.fun.size - x0.size, 1)
    try:
        cov = np.linalg.pinv(Jx.T @ Jx) * objective / dof
        std_x = np.sqrt(np.maximum(np.diag(cov)[:npar], 0.0))
    except np.linalg.LinAlgError:
        std_x = np.full(npar, np.nan)
    ests = []
    for j, p in enumerate(params):
        val = _from_x(p, sol.x[j])
        std = float(std_x[j] * val) if p.name == "k" else float(std_x[j])
        if np.allclose(Jx[:, j], 0.0):
            std = float("inf")
        ests.append(Estimate("sap", p.label(), val, std, initial[p]))
    pos = run(sol.x).positions()
    notes = [] if sol.status > 0 else [f"least_squares stopped: {sol.message}"]
    return MethodResult("sap", ests, objective, int(sol.nfev), pos, notes=notes)


# --------------------------------------------------------------------------------------------------
# (a) the MPEC
# --------------------------------------------------------------------------------------------------
def mpec_problem(model: Model, frames: list[State], observed: np.ndarray, pairs: list[tuple[str, str]],
                 mu0: float):
    """The scene MPEC and its starting point (one LCP per observed state at μ₀ for the impulses)."""
    from convexsim.lcp.lemke import lemke
    from convexsim.stepping.lcp_stepper import (
        block_inverse,
        build_contact_lcp,
        dense_jacobian,
        friction_directions,
    )

    bodies = dynamics.moving_bodies(model)
    nv = 6 * bodies.size
    dt = model.time_step
    d = int(model.solver.friction_directions)
    P = np.zeros((3 * bodies.size, nv))
    for b in range(bodies.size):
        P[3 * b:3 * b + 3, 6 * b + 3:6 * b + 6] = np.eye(3)
    steps, z0, v_init = [], [], [frames[0].v[bodies].reshape(-1)]
    U = friction_directions(d)
    for s in frames[:-1]:
        kin = contact_kinematics(model, s, margin=contact_margin(model, s) + MPEC_MARGIN)
        A_blocks, v_star = dynamics.free_motion(model, s)
        Ainv = block_inverse(A_blocks)
        J = dense_jacobian(kin, nv)
        m = kin.contacts.count
        v0 = s.v[bodies].reshape(-1)
        Jn = J[:, 2, :]
        D = np.einsum("cki,jk->icj", J[:, :2, :], U).reshape(nv, m * d) if m else np.zeros((nv, 0))
        pair_idx = np.array([pairs.index(pk) for pk in contact_pairs(model, kin.contacts)], dtype=int)
        steps.append(MpecStep(Ainv, (v_star - v0) / dt, Jn, D, kin.contacts.phi.copy(), Jn @ P.T, pair_idx))
        if m:
            M, q, layout = build_contact_lcp(Ainv, v_star, J, np.maximum(kin.contacts.phi, 0.0) / dt,
                                             np.full(m, mu0), d)
            r = lemke(M, q)
            z = r.z if r.z is not None and np.all(np.isfinite(r.z)) else np.zeros(M.shape[0])
            v_init.append(layout.velocity(v_star, z))
            z0.append(z)
        else:
            v_init.append(v_star)
            z0.append(np.zeros(0))
    prob = MpecProblem(dt, observed.reshape(observed.shape[0], -1), P, steps, len(pairs))
    x0 = prob.pack(np.full(len(pairs), mu0), observed.reshape(observed.shape[0], -1), np.array(v_init), z0)
    return prob, x0


def fit_mpec(model: Model, frames: list[State], observed: np.ndarray, pairs, mu0: float) -> MethodResult:
    """The MPEC estimate of μ per pair (module docstring)."""
    prob, x0 = mpec_problem(model, frames, observed, pairs, mu0)
    res = solve_mpec(prob, x0)
    _, p, _, _ = prob.unpack(res.x)
    ests = [Estimate("mpec", Parameter("mu", pk).label(), float(res.theta[j]), float(res.theta_std[j]), mu0)
            for j, pk in enumerate(pairs)]
    notes = ["continuation stages (W, δ, evaluations, μ, violation): " + "; ".join(
        f"({s['W']:g}, {s['delta']:g}, {s['nfev']}, {', '.join(f'{t:.6g}' for t in s['theta'])}, "
        f"{s['violation']:.2g})" for s in res.stages)]
    if not res.success:
        notes.append(res.message)
    return MethodResult("mpec", ests, res.objective, int(sum(s["nfev"] for s in res.stages)),
                        p.reshape(observed.shape), res.violation, notes, converged=res.success,
                        message=res.message)


# --------------------------------------------------------------------------------------------------
def identify(trajectory, params=("mu",), *, methods=("mpec", "sap"), mu0: float = 0.5,
             initial: dict[str, float] | None = None, check: bool = True) -> Identification:
    """Estimate material-pair parameters from a trajectory (a path or a Trajectory).

    Args:
        params: names among ``mu``, ``k``, ``tau_d`` (sap contact model) or ``d`` (lagged/similar); each is
            estimated for every material pair in contact.
        methods: "mpec" (μ only; skipped with a note when other parameters are asked) and/or "sap".
        mu0: initial μ of both methods. initial: initial values of other parameters by name (default: the
            scene's combined values).
        check: raise IdentificationError for a parameter that is not identifiable.
    """
    traj = trajectory if isinstance(trajectory, Trajectory) else load_trajectory(trajectory)
    source = "<trajectory>" if isinstance(trajectory, Trajectory) else str(trajectory)
    try:
        model, frames = model_and_frames(traj)
    except SceneError as exc:       # the stored scene does not load: bad input, named by file and field
        raise TrajectoryFormatError(f"{source}: field 'scene_yaml' does not hold a valid scene: "
                                    f"{exc.problems[0] if exc.problems else exc}") from None
    bodies = dynamics.moving_bodies(model)
    if bodies.size == 0:
        raise IdentificationError("the scene has no moving body")
    observed = np.array([s.q[bodies, :3] for s in frames])
    pairs = observed_pairs(model, frames)
    plist = parameters_for(model, params, pairs)
    init = {p: (mu0 if p.name == "mu" else float((initial or {}).get(p.name, scene_value(model, p))))
            for p in plist}
    results = []
    for method in methods:
        if method == "mpec":
            res = fit_mpec(model, frames, observed, pairs, mu0)
            if any(p.name != "mu" for p in plist):
                res.notes.append("the rigid LCP has no stiffness or dissipation: only μ is estimated by "
                                 "the MPEC")
        elif method == "sap":
            res = fit_sap(model, frames, observed, plist, init)
        else:
            raise IdentificationError(f"unknown method {method!r} (mpec, sap)")
        if check and not res.converged:
            raise IdentificationError(f"{method}: no estimate: {res.message}")
        if check:
            _check_identifiable(method, res.estimates)
        results.append(res)
    return Identification(source, model, np.asarray(traj.time, float), observed,
                          [model.body_names[b] for b in bodies], pairs, results)


__all__ = [
    "MAX_RELATIVE_STD",
    "Estimate",
    "Identification",
    "IdentificationError",
    "MethodResult",
    "fit_mpec",
    "fit_sap",
    "identify",
    "model_and_frames",
    "mpec_problem",
    "observed_pairs",
    "parameters_for",
    "scene_value",
]
