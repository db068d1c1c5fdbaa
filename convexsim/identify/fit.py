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
from convexsim.identify.mpec import MpecProblem, MpecStep, frozen_rollout, seam, solve_mpec
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


MISMATCH_RATIO = 2.0
"""A fit whose RMS misfit exceeds this multiple of the noise level is a model mismatch (the misfit is not
noise): for Gaussian noise the RMS of the residuals of a correct model is ≈ σ·√(1 − unknowns/observations),
and a factor 2 is far outside its sampling scatter at these sizes (relative scatter ≈ 1/√(2·observations))."""
DISAGREE_SIGMAS = 3.0
"""Two methods whose estimates of a parameter differ by more than this many combined standard deviations
disagree (a mismatch of at least one of the models)."""
CORRELATION_LAGS = 5
"""Lags k = 1..CORRELATION_LAGS of the residuals' autocorrelation summed by :func:`residual_correlation`."""
CORRELATION_SIGMAS = 4.0
"""A fit whose residuals' summed autocorrelation exceeds this many of its standard deviations under white
noise is a model mismatch (one-sided normal tail 3e-5): the misfit has a smooth, systematic part."""
NOISE_FLOOR = 1e-6
"""Smallest noise level [m] assumed when judging a misfit: 1 µm, below any position measurement; a fit
within it is never a mismatch (noise-free synthetic data has a data scatter at round-off)."""


def noise_from_scatter(*observed: np.ndarray) -> float:
    """Noise level σ [m] estimated from the data's own scatter: the third differences of every position
    channel, Δ³p_l = p_{l+3} − 3p_{l+2} + 3p_{l+1} − p_l, are dt³·(jerk) for a smooth motion and have
    variance 20σ² for independent noise of deviation σ; the median absolute value (MAD/0.6745) is
    robust to the few frames where a contact changes the acceleration. observed: one array (T, ..., 3) per
    trajectory (pooled)."""
    d3 = []
    for o in observed:
        obs = np.asarray(o, float).reshape(o.shape[0], -1)
        if obs.shape[0] >= 4:
            d3.append(np.ravel(obs[3:] - 3 * obs[2:-1] + 3 * obs[1:-2] - obs[:-3]))
    if not d3:
        return float("nan")
    return float(np.median(np.abs(np.concatenate(d3))) / 0.6745 / np.sqrt(20.0))


def residual_correlation(residuals: list[np.ndarray], lags: int = CORRELATION_LAGS) -> float:
    """How far the residuals of a fit are from white noise, in standard deviations: with r (T, channels) the
    fit's positions minus the data of one trajectory and ρ_k = Σ r_l·r_{l+k} / Σ r_l² pooled over channels
    and trajectories, S = Σ_{k=1..lags} ρ_k has mean ≈ 0 and variance ≈ lags/N for independent noise (N
    residuals; Bartlett), so the result is S·√(N/lags). A model that cannot follow the motion leaves a
    smooth misfit, correlated over many frames: S → lags·(systematic share of the misfit), growing as √N.
    (Least squares makes the residuals of a correct model slightly anti-correlated, of order
    unknowns/frames: the statistic is then a little below 0, never above.)"""
    num = den = 0.0
    n = 0
    for r in residuals:
        r = np.asarray(r, float).reshape(r.shape[0], -1)
        den += float(np.sum(r * r))
        n += r.size
        num += sum(float(np.sum(r[k:] * r[:-k])) for k in range(1, min(lags, r.shape[0] - 1) + 1))
    if den <= 0.0 or n <= lags:
        return 0.0
    return num / den * np.sqrt(n / lags)


@dataclass
class Verdict:
    """Is the best fit explained by the noise? ``mismatch`` and the sentences saying why (or that it is)."""

    mismatch: bool
    noise: float                  # the noise level used [m]
    noise_source: str             # "supplied" or "estimated from the data's scatter"
    lines: list[str]

    def first_line(self) -> str:
        """The report's first line."""
        if self.mismatch:
            return "MODEL MISMATCH: " + " ".join(self.lines)
        return "Fit consistent with the noise: " + " ".join(self.lines)


def judge(results: list, n_obs: int, noise: float | None = None, scatter: float = float("nan"),
          observed: list[np.ndarray] | None = None) -> Verdict:
    """Compare every method's RMS misfit with the noise level (``noise`` [m] if given, else ``scatter``,
    :func:`noise_from_scatter` of the data; at least :data:`NOISE_FLOOR`), the whiteness of its residuals
    (:func:`residual_correlation`, when ``observed``, the data of each trajectory (T, ...), is given and the
    misfit is above the noise floor), and the methods' common estimates with each other
    (:data:`MISMATCH_RATIO`, :data:`CORRELATION_SIGMAS`, :data:`DISAGREE_SIGMAS`)."""
    if noise is not None:
        sigma, source = float(noise), "supplied"
    else:
        sigma, source = scatter, "estimated from the data's scatter"
    used = max(sigma, NOISE_FLOOR) if np.isfinite(sigma) else NOISE_FLOOR
    bad, good = [], []
    for res in results:
        rms = float(np.sqrt(res.objective / max(n_obs, 1)))
        text = f"{res.method}: RMS misfit {rms:.3g} m = {rms / used:.3g} × the noise level {used:.3g} m ({source})"
        corr = _correlation_of(res, observed) if observed is not None and rms > NOISE_FLOOR else 0.0
        if rms > MISMATCH_RATIO * used:
            bad.append(text + ".")
        elif corr > CORRELATION_SIGMAS:
            bad.append(text + f", but its residuals are correlated over frames ({corr:.1f} σ of white noise): "
                       "the misfit is systematic.")
        else:
            good.append(text + ".")
    by_param: dict[str, list] = {}
    for res in results:
        for e in res.estimates:
            by_param.setdefault(e.parameter, []).append(e)
    for name, es in by_param.items():
        for i in range(len(es)):
            for j in range(i + 1, len(es)):
                a, b = es[i], es[j]
                sd = float(np.hypot(a.std, b.std))
                gap = abs(a.value - b.value)
                if np.isfinite(sd) and gap > DISAGREE_SIGMAS * sd:
                    bad.append(f"{a.method} and {b.method} disagree on {name}: {a.value:.4g} ± {a.std:.2g} against "
                               f"{b.value:.4g} ± {b.std:.2g} ({gap / sd:.1f} combined σ).")
    if bad:
        bad.append("The estimates are those of a model that does not explain this motion "
                   "(docs/identify.md, 'Which method for which data').")
        return Verdict(True, used, source, bad)
    return Verdict(False, used, source, good)


def _correlation_of(res, observed: list[np.ndarray]) -> float:
    """:func:`residual_correlation` of one method's fitted positions against the trajectories' data."""
    cuts = np.cumsum([o.shape[0] for o in observed])[:-1]
    return residual_correlation([p - o for p, o in zip(np.split(res.positions, cuts), observed)])


@dataclass
class Identification:
    """All results for one trajectory (or several fitted together)."""

    source: str
    model: Model
    time: np.ndarray
    observed: np.ndarray           # (T, nmov, 3)
    body_names: list[str]
    pairs: list[tuple[str, str]]
    results: list[MethodResult]
    verdict: Verdict | None = None


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


@dataclass
class Segment:
    """One trajectory of a fit: its compiled scene, states per frame, observed COM positions (T, nmov, 3),
    times and file name."""

    model: Model
    frames: list[State]
    observed: np.ndarray
    time: np.ndarray
    source: str


def fit_sap(segments: list[Segment], params: list[Parameter], initial: dict[Parameter, float], *,
            max_nfev: int = 30) -> MethodResult:
    """Least squares on SAP rollouts over θ (shared by all trajectories) and every trajectory's initial
    COM positions and velocities (module docstring)."""
    npar = len(params)
    layout = []                                   # (segment, first column of its x⁰, translational dofs)
    col = npar
    for seg in segments:
        nb = dynamics.moving_bodies(seg.model).size
        trans = np.array([6 * b + 3 + k for b in range(nb) for k in range(3)])
        layout.append((seg, col, trans))
        col += 2 * trans.size
    cache = {}

    def run(x):
        key = x.tobytes()
        if key not in cache:
            cache.clear()
            over = {p: _from_x(p, x[j]) for j, p in enumerate(params)}
            ros = []
            for seg, c0, trans in layout:
                bodies = dynamics.moving_bodies(seg.model)
                s0 = seg.frames[0].copy()
                s0.q[bodies, :3] = x[c0:c0 + trans.size].reshape(-1, 3)
                s0.v[bodies, 3:] = x[c0 + trans.size:c0 + 2 * trans.size].reshape(-1, 3)
                ros.append(rollout(seg.model, s0, seg.observed.shape[0] - 1, overrides=over, parameters=params,
                                   linearize=True))
            cache[key] = ros
        return cache[key]

    def fun(x):
        return np.concatenate([np.ravel(ro.positions() - seg.observed) for ro, (seg, _, _) in zip(run(x), layout)])

    def jac(x):
        blocks = []
        for ro, (seg, c0, trans) in zip(run(x), layout):
            T = seg.observed.shape[0]
            nv = 6 * dynamics.moving_bodies(seg.model).size
            Sq, _ = tangents(ro, initial=True)                      # (T, nv, npar + 2nv)
            Jx = np.zeros((T * trans.size, x.size))
            Jx[:, :npar] = Sq[:, trans, :npar].reshape(T * trans.size, npar)
            cols = list(npar + trans) + list(npar + nv + trans)
            Jx[:, c0:c0 + 2 * trans.size] = Sq[:, trans, :][:, :, cols].reshape(T * trans.size, len(cols))
            blocks.append(Jx)
        Jx = np.vstack(blocks)
        for j, p in enumerate(params):
            if p.name == "k":
                Jx[:, j] *= _from_x(p, x[j])                    # d/d log k
        return Jx

    x0 = [[_to_x(p, initial[p]) for p in params]]
    for seg, _, _ in layout:
        bodies = dynamics.moving_bodies(seg.model)
        x0 += [seg.frames[0].q[bodies, :3].ravel(), seg.frames[0].v[bodies, 3:].ravel()]
    x0 = np.concatenate(x0)
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
    pos = np.concatenate([ro.positions() for ro in run(sol.x)])
    notes = [] if sol.status > 0 else [f"least_squares stopped: {sol.message}"]
    return MethodResult("sap", ests, objective, int(sol.nfev), pos, notes=notes)


# --------------------------------------------------------------------------------------------------
# (a) the MPEC
# --------------------------------------------------------------------------------------------------
def mpec_steps(model: Model, frames: list[State], pairs: list[tuple[str, str]]) -> tuple[np.ndarray, list]:
    """(P, one MpecStep per step) of a trajectory: contact data frozen at the observed frames."""
    from convexsim.stepping.lcp_problem import block_inverse, dense_jacobian, friction_directions

    bodies = dynamics.moving_bodies(model)
    nv = 6 * bodies.size
    dt = model.time_step
    d = int(model.solver.friction_directions)
    P = np.zeros((3 * bodies.size, nv))
    for b in range(bodies.size):
        P[3 * b:3 * b + 3, 6 * b + 3:6 * b + 6] = np.eye(3)
    U = friction_directions(d)
    steps = []
    for s in frames[:-1]:
        kin = contact_kinematics(model, s, margin=contact_margin(model, s) + MPEC_MARGIN)
        A_blocks, v_star = dynamics.free_motion(model, s)
        J = dense_jacobian(kin, nv)
        m = kin.contacts.count
        Jn = J[:, 2, :]
        D = np.einsum("cki,jk->icj", J[:, :2, :], U).reshape(nv, m * d) if m else np.zeros((nv, 0))
        pair_idx = np.array([pairs.index(pk) for pk in contact_pairs(model, kin.contacts)], dtype=int)
        steps.append(MpecStep(block_inverse(A_blocks), (v_star - s.v[bodies].reshape(-1)) / dt, Jn, D,
                              kin.contacts.phi.copy(), Jn @ P.T, pair_idx))
    return P, steps


def mpec_problem(segments: list[Segment], pairs: list[tuple[str, str]], mu0: float):
    """The MPEC of one or several trajectories (joined by :func:`~convexsim.identify.mpec.seam` steps, one θ
    for all) and its start: :func:`frozen_rollout` at μ₀ from each trajectory's first observed frame
    (positions, and the recorded velocities)."""
    dts = {seg.model.time_step for seg in segments}
    if len(dts) > 1:
        raise IdentificationError(f"the trajectories have different time steps ({sorted(dts)} s); the MPEC "
                                  "fits trajectories of one time step together")
    steps, starts = [], []
    P = None
    for k, seg in enumerate(segments):
        P, seg_steps = mpec_steps(seg.model, seg.frames, pairs)
        if k:
            steps.append(seam(P.shape[1], P.shape[0], len(pairs)))
        starts.append(len(steps))
        steps += seg_steps
    observed = np.concatenate([seg.observed.reshape(seg.observed.shape[0], -1) for seg in segments])
    prob = MpecProblem(segments[0].model.time_step, observed, P, steps, len(pairs))
    theta0 = np.full(len(pairs), mu0)
    ps, vs, zs = [], [], []
    for k, seg in enumerate(segments):
        bodies = dynamics.moving_bodies(seg.model)
        first = starts[k]
        ro = frozen_rollout(prob, theta0, prob.observed[first], seg.frames[0].v[bodies].reshape(-1), first,
                            first + seg.observed.shape[0] - 1)
        ps.append(ro.p)
        vs.append(ro.v)
        zs += ro.z + ([np.zeros(0)] if k < len(segments) - 1 else [])
    return prob, prob.pack(theta0, np.concatenate(ps), np.concatenate(vs), zs)


def fit_mpec(segments: list[Segment], pairs, mu0: float) -> MethodResult:
    """The MPEC estimate of μ per pair (module docstring)."""
    prob, x0 = mpec_problem(segments, pairs, mu0)
    res = solve_mpec(prob, x0)
    _, p, _, _ = prob.unpack(res.x)
    ests = [Estimate("mpec", Parameter("mu", pk).label(), float(res.theta[j]), float(res.theta_std[j]), mu0)
            for j, pk in enumerate(pairs)]
    if res.stages and res.stages[0].get("implicit"):
        st = res.stages[0]
        notes = [f"implicit solve (the LCP variables eliminated through each step's LCP): {st['nfev']} "
                 f"evaluations, violation {st['violation']:.2g} m/s"]
    else:
        notes = ["solver stages (W, δ, evaluations, μ, violation): " + "; ".join(
            f"({s['W']:g}, {s['delta']:g}, {s['nfev']}, {', '.join(f'{t:.6g}' for t in s['theta'])}, "
            f"{s['violation']:.2g})" for s in res.stages)]
    if not res.success:
        notes.append(res.message)
    return MethodResult("mpec", ests, res.objective, int(sum(s["nfev"] for s in res.stages)),
                        p.reshape(-1, *segments[0].observed.shape[1:]), res.violation, notes,
                        converged=res.success,
                        message=res.message)


# --------------------------------------------------------------------------------------------------
def load_segment(trajectory) -> Segment:
    """A trajectory (path or Trajectory) as a :class:`Segment`; errors name the file and field."""
    traj = trajectory if isinstance(trajectory, Trajectory) else load_trajectory(trajectory)
    source = "<trajectory>" if isinstance(trajectory, Trajectory) else str(trajectory)
    try:
        model, frames = model_and_frames(traj)
    except SceneError as exc:       # the stored scene does not load: bad input, named by file and field
        raise TrajectoryFormatError(f"{source}: field 'scene_yaml' does not hold a valid scene: "
                                    f"{exc.problems[0] if exc.problems else exc}") from None
    bodies = dynamics.moving_bodies(model)
    if bodies.size == 0:
        raise IdentificationError(f"{source}: the scene has no moving body")
    observed = np.array([s.q[bodies, :3] for s in frames])
    return Segment(model, frames, observed, np.asarray(traj.time, float), source)


def identify(trajectory, params=("mu",), *, methods=("mpec", "sap"), mu0: float = 0.5,
             initial: dict[str, float] | None = None, check: bool = True,
             noise: float | None = None) -> Identification:
    """Estimate material-pair parameters from a trajectory (a path or a Trajectory), or from several at once
    (a list: one parameter set fitted to all, e.g. several pushes of the same object; their moving bodies
    must have the same names).

    Args:
        params: names among ``mu``, ``k``, ``tau_d`` (sap contact model) or ``d`` (lagged/similar); each is
            estimated for every material pair in contact.
        methods: "mpec" (μ only; skipped with a note when other parameters are asked) and/or "sap".
        mu0: initial μ of both methods. initial: initial values of other parameters by name (default: the
            scene's combined values).
        check: raise IdentificationError for a parameter that is not identifiable.
        noise: the noise level of the positions [m], if known; otherwise it is estimated from the data's
            scatter (:func:`noise_from_scatter`). The result's ``verdict`` says whether the fits are
            explained by it (:func:`judge`).
    """
    many = isinstance(trajectory, (list, tuple))
    segments = [load_segment(t) for t in (trajectory if many else [trajectory])]
    if not segments:
        raise IdentificationError("no trajectory given")
    names = [[seg.model.body_names[b] for b in dynamics.moving_bodies(seg.model)] for seg in segments]
    for seg, n in zip(segments[1:], names[1:]):
        if n != names[0]:
            raise IdentificationError(f"{seg.source}: moving bodies {n} differ from {segments[0].source}'s "
                                      f"{names[0]}; trajectories fitted together must record the same bodies")
    pairs = sorted({pk for seg in segments for pk in observed_pairs(seg.model, seg.frames)})
    plist = parameters_for(segments[0].model, params, pairs)
    for seg in segments[1:]:
        parameters_for(seg.model, params, pairs)
    model = segments[0].model
    init = {p: (mu0 if p.name == "mu" else float((initial or {}).get(p.name, scene_value(model, p))))
            for p in plist}
    results = []
    for method in methods:
        if method == "mpec":
            res = fit_mpec(segments, pairs, mu0)
            if any(p.name != "mu" for p in plist):
                res.notes.append("the rigid LCP has no stiffness or dissipation: only μ is estimated by "
                                 "the MPEC")
        elif method == "sap":
            res = fit_sap(segments, plist, init)
        else:
            raise IdentificationError(f"unknown method {method!r} (mpec, sap)")
        if check and not res.converged:
            raise IdentificationError(f"{method}: no estimate: {res.message}")
        if check:
            _check_identifiable(method, res.estimates)
        results.append(res)
    observed = np.concatenate([seg.observed for seg in segments])
    time, offset = [], 0.0
    for seg in segments:                            # one time axis: each trajectory after the previous one
        time.append(seg.time - seg.time[0] + offset)
        offset = time[-1][-1] + model.time_step
    verdict = judge(results, observed.size, noise, scatter=noise_from_scatter(*(seg.observed for seg in segments)),
                    observed=[seg.observed for seg in segments])
    return Identification(", ".join(seg.source for seg in segments), model, np.concatenate(time), observed,
                          names[0], pairs, results, verdict)


__all__ = [
    "CORRELATION_LAGS",
    "CORRELATION_SIGMAS",
    "DISAGREE_SIGMAS",
    "MAX_RELATIVE_STD",
    "MISMATCH_RATIO",
    "NOISE_FLOOR",
    "Estimate",
    "Identification",
    "IdentificationError",
    "MethodResult",
    "Segment",
    "Verdict",
    "fit_mpec",
    "fit_sap",
    "identify",
    "judge",
    "load_segment",
    "model_and_frames",
    "mpec_problem",
    "mpec_steps",
    "noise_from_scatter",
    "observed_pairs",
    "parameters_for",
    "residual_correlation",
    "scene_value",
]
