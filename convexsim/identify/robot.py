"""Identify robot parameters (joint damping, PD gains, a link's payload mass, a material's friction) from
recorded joint trajectories of a tree scene (docs/identify.md, "Robots").

Least squares on SAP rollouts of the scene (``convexsim.inverse.trees``):

    r(θ, x⁰) = (joint coordinates of the rollout − observed ones; free bodies' COM positions − observed),

over the parameters θ (``KIND:NAME``, :data:`convexsim.inverse.trees.ROBOT_KINDS`) and the initial state
x⁰ (joint coordinates and velocities, free bodies' COM positions and linear velocities; their orientations
and angular velocities from the data). The Jacobian is the forward sensitivity of the tree rollout (the
step's solution and its Newton matrix, no finite differences of rollouts). Standard deviations are
Gauss–Newton ones, s²(JᵀJ)⁻¹ with s² = misfit/(observations − unknowns), and a parameter whose standard
deviation exceeds half its estimate is refused (``fit.MAX_RELATIVE_STD``), as for the contact fits.
Joint coordinates [rad or m] and positions [m] enter the misfit unweighted.

A trajectory file stores link poses, not joint coordinates: :func:`joint_coordinates` recovers them (a
revolute joint's angle from the relative rotation of its link and its parent, a prismatic joint's offset
from their relative position).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from convexsim import dynamics
from convexsim.identify.fit import (MAX_RELATIVE_STD, Estimate, IdentificationError, MethodResult,
                                    noise_from_scatter)
from convexsim.inverse.rollout import tangents
from convexsim.inverse.trees import (RobotParameter, TreeGradientError, check_tree_model, free_position_rows,
                                     gradient_model, joint_coordinate_rows, robot_value, tree_rollout)
from convexsim.model import Model, State
from convexsim.multibody.model import JointType
from convexsim.spatial import quat_to_matrix, rotation_log
from convexsim.stepping.types import SimulationError


@dataclass
class RobotData:
    """What a robot fit reads: the scene, the state of the first frame (orientations and angular
    velocities of free bodies are used as recorded), observed joint coordinates (T, nq) and free-body COM
    positions (T, nfree, 3), frame times (T,)."""

    model: Model
    state0: State
    joints: np.ndarray
    positions: np.ndarray
    time: np.ndarray


@dataclass
class RobotFit:
    """The fit: estimates (with Gauss–Newton standard deviations), the misfit Σ r² [rad², m²], the number of
    observations, evaluations, the fitted joint coordinates and positions, notes."""

    result: MethodResult
    observations: int
    joints: np.ndarray
    positions: np.ndarray
    data: RobotData


def joint_coordinates(model: Model, q_bodies: np.ndarray) -> np.ndarray:
    """The trees' joint coordinates (nq,) from the bodies' recorded poses (nbody, 7) (COM position, then
    quaternion R_WB in the free-body convention of the link rows).

    X_WB = X_WP X_PJ X_JB(q): with R_WJ = R_WP R_PJ, a revolute joint's R_JB = Rot(a, θ) gives
    θ = aᵀ log(R_JB) (``spatial.rotation_log``); a prismatic joint's offset is
    aᵀ R_WJᵀ (p_WB − p_WJ). Parent −1 is the world (the tree's fixed base folded into X_PJ).
    """
    out = np.zeros(model.forest.nq)
    for t in model.forest.trees:
        m = t.model
        R_WB = np.array([quat_to_matrix(q_bodies[b, 3:7]) for b in t.bodies])
        p_WB = np.array([q_bodies[b, :3] for b in t.bodies]) - np.einsum("bij,bj->bi", R_WB, m.body_com)
        for j in range(m.nbody):
            jt = m.joint_type[j]
            if jt == JointType.FIXED:
                continue
            p = m.parent[j]
            R_WP, p_WP = (np.eye(3), np.zeros(3)) if p < 0 else (R_WB[p], p_WB[p])
            R_WJ = R_WP @ m.joint_rot[j]
            a = m.joint_axis[j] / np.linalg.norm(m.joint_axis[j])
            if jt == JointType.REVOLUTE:
                value = float(a @ rotation_log(R_WJ.T @ R_WB[j]))
            elif jt == JointType.PRISMATIC:
                value = float(a @ (R_WJ.T @ (p_WB[j] - (p_WP + R_WP @ m.joint_pos[j]))))
            else:
                raise IdentificationError(f"joint {t.joint_names[j]!r} is {JointType(jt).name}: robot fits "
                                          "take revolute, prismatic and fixed joints")
            out[t.q_start + int(m.joint_qadr[j])] = value
    return out


def robot_data(traj, window: tuple[int, int] | None = None) -> RobotData:
    """The scene, first state and observations of a recorded trajectory (frames ``window`` = (start, stop),
    default all), joint coordinates recovered by :func:`joint_coordinates`, joint velocities by the
    recorded link velocities' least-squares fit (tree Jacobians) — used only as the fit's start."""
    from convexsim.identify.fit import model_and_frames

    model, frames = model_and_frames(traj)
    if not model.has_trees:
        raise IdentificationError("the scene has no kinematic tree: robot parameters need joints (for "
                                  "material parameters of free bodies use --params mu,k,...)")
    try:
        check_tree_model(model)
    except TreeGradientError as exc:
        raise IdentificationError(str(exc)) from None
    if window is not None:
        a, b = window
        if not 0 <= a < b <= len(frames) or b - a < 3:
            raise IdentificationError(f"frame window {a}:{b} is not inside the trajectory's {len(frames)} "
                                      "frames (at least 3 frames)")
        frames = frames[a:b]
    joints = np.array([joint_coordinates(model, s.q) for s in frames])
    dt = model.time_step
    free = dynamics.moving_bodies(model)
    s0 = frames[0].copy()
    s0.tree_q = joints[0].copy()
    s0.tree_v = (joints[1] - joints[0]) / dt
    from convexsim.multibody.forest import write_link_rows

    write_link_rows(model.forest, s0.q, s0.v, s0.tree_q, s0.tree_v)
    return RobotData(model, s0, joints, np.array([s.q[free, :3] for s in frames]),
                     np.array([s.t for s in frames]))


def parse_parameters(model: Model, names) -> list[RobotParameter]:
    """``KIND:NAME`` strings -> RobotParameters, each checked against the scene (IdentificationError)."""
    out = []
    for n in names:
        try:
            p = RobotParameter.parse(n)
            robot_value(model, p)
        except TreeGradientError as exc:
            raise IdentificationError(str(exc)) from None
        out.append(p)
    if len(set(out)) != len(out):
        raise IdentificationError(f"a parameter is listed twice: {', '.join(names)}")
    return out


def fit_robot(data: RobotData, params: list[RobotParameter], initial: dict | None = None, *,
              max_nfev: int = 50, check: bool = True, accept_mismatch: bool = False) -> RobotFit:
    """Least squares on tree rollouts over (θ, x⁰) (module docstring).

    Args:
        initial: start values by RobotParameter (default: the scene's).
        check: raise IdentificationError for a parameter that is not identifiable, and for a model
            mismatch (rms residual above MISMATCH_FACTOR × the data's noise estimate) unless
            ``accept_mismatch`` (then it is a note).
    """
    model = gradient_model(data.model)
    free = dynamics.moving_bodies(model)
    T = data.joints.shape[0]
    npar = len(params)
    jrows = joint_coordinate_rows(model)
    prows = free_position_rows(model)
    vrows = prows                                           # linear velocities: the same slots of v
    nq, npos = jrows.size, prows.size
    nv = 6 * free.size + nq
    initial = {p: float(robot_value(model, p) if initial is None or p not in initial else initial[p])
               for p in params}
    observed = np.concatenate([data.joints.reshape(T, -1), data.positions.reshape(T, -1)], axis=1)
    cache = {}

    def state_of(x):
        s = data.state0.copy()
        o = npar
        s.tree_q = x[o:o + nq].copy()
        s.tree_v = x[o + nq:o + 2 * nq].copy()
        o += 2 * nq
        s.q[free, :3] = x[o:o + npos].reshape(-1, 3)
        s.v[free, 3:] = x[o + npos:o + 2 * npos].reshape(-1, 3)
        from convexsim.multibody.forest import write_link_rows

        write_link_rows(model.forest, s.q, s.v, s.tree_q, s.tree_v)
        return s

    def run(x, linearize=False):
        key = (x.tobytes(), linearize)
        if key not in cache:
            if len(cache) > 4:
                cache.clear()
            values = {p: float(x[j]) for j, p in enumerate(params)}
            try:
                cache[key] = tree_rollout(model, state_of(x), T - 1, values=values, parameters=params,
                                          linearize=linearize)
            except (SimulationError, TreeGradientError) as exc:     # a step that fails at these values
                at = ", ".join(f"{p.label()}={values[p]:.6g}" for p in params)
                raise IdentificationError(f"robot fit: the rollout failed at {at}: {exc}") from None
        return cache[key]

    def predicted(ro):
        return np.concatenate([ro.q.reshape(T, -1), ro.positions().reshape(T, -1)], axis=1)

    def fun(x):
        return np.ravel(predicted(run(x)) - observed)

    def jac(x):
        Sq, _ = tangents(run(x, linearize=True), initial=True)           # (T, nv, npar + 2 nv)
        rows = np.r_[jrows, prows]
        cols = np.r_[np.arange(npar), npar + jrows, npar + nv + jrows, npar + prows, npar + nv + vrows]
        return Sq[:, rows, :][:, :, cols].reshape(T * rows.size, cols.size)

    x0 = np.concatenate([[initial[p] for p in params], data.state0.tree_q, data.state0.tree_v,
                         data.state0.q[free, :3].ravel(), data.state0.v[free, 3:].ravel()])
    lo = np.full(x0.size, -np.inf)
    lo[:npar] = 0.0
    sol = least_squares(fun, x0, jac=jac, bounds=(lo, np.inf), method="trf", x_scale="jac", max_nfev=max_nfev,
                        xtol=1e-6, ftol=1e-8, gtol=1e-10)
    objective = float(2 * sol.cost)
    std = gauss_newton_std(sol.jac, objective, npar)
    ests = [Estimate("sap", p.label(), float(sol.x[j]), float(std[j]), initial[p])
            for j, p in enumerate(params)]
    pred = predicted(run(sol.x))
    notes = [] if sol.status > 0 else [f"least_squares stopped: {sol.message}"]
    rms, noise = math.sqrt(objective / sol.fun.size), noise_from_scatter(observed)
    if rms > MISMATCH_FACTOR * noise:
        msg = (f"model mismatch: the fit's rms residual {rms:.3g} is {rms / max(noise, 1e-300):.3g} times the "
               f"noise the data show ({noise:.3g}, from their third differences): the scene does not describe "
               "this motion with any value of the fitted parameters (fit more of them, or check the scene)")
        if check and not accept_mismatch:
            raise IdentificationError(f"robot fit: {msg}")
        notes.insert(0, msg)
    res = MethodResult("sap", ests, objective, int(sol.nfev), pred[:, nq:].reshape(T, -1, 3), notes=notes)
    if check:
        for e in ests:
            if not np.isfinite(e.std) or e.std > MAX_RELATIVE_STD * max(abs(e.value), 1e-12):
                raise IdentificationError(
                    f"robot fit: {e.parameter} is not identifiable from this data: estimate {e.value:.4g} "
                    f"with standard deviation {e.std:.3g} (> {MAX_RELATIVE_STD:.0%} of it); too much noise, "
                    "too short a window, or motion that does not depend on it")
    return RobotFit(res, int(sol.fun.size), pred[:, :nq], pred[:, nq:].reshape(T, -1, 3), data)


MISMATCH_FACTOR = 3.0
"""A fit whose rms residual exceeds this multiple of the data's own noise estimate (``fit.noise_from_scatter``:
third differences, median-based) is a model mismatch: refused unless accepted."""


RANK_TOL = 1e-10
"""Singular values of the column-scaled Jacobian below this fraction of the largest are directions the data
do not determine: a parameter with weight in one has an infinite standard deviation."""


def gauss_newton_std(J: np.ndarray, objective: float, n: int) -> np.ndarray:
    """Standard deviations of the first ``n`` unknowns, sqrt(diag s²(JᵀJ)⁻¹), s² = objective/(rows − cols).

    Computed from the SVD of J with unit-norm columns; an unknown with weight (> 1e-6) in a direction whose
    singular value is below RANK_TOL of the largest is not determined (inf), instead of the small number a
    pseudo-inverse would give it."""
    norms = np.linalg.norm(J, axis=0)
    out = np.full(n, np.inf)
    ok = norms > 0
    _, s, Vt = np.linalg.svd(J[:, ok] / norms[ok], full_matrices=False)
    s2 = objective / max(J.shape[0] - J.shape[1], 1)
    weak = s < RANK_TOL * s[0]
    var = (Vt[~weak].T ** 2) @ (1.0 / s[~weak] ** 2) * s2
    undetermined = np.any(np.abs(Vt[weak]) > 1e-6, axis=0) if weak.any() else np.zeros(var.size, bool)
    full = np.full(J.shape[1], np.inf)
    full[np.flatnonzero(ok)] = np.where(undetermined, np.inf, np.sqrt(var) / norms[ok])
    out[:] = full[:n]
    return out


def write_robot_report(fit: RobotFit, out_dir) -> Path:
    """report.md and estimates.csv in ``out_dir`` (created), each written atomically."""
    from convexsim.io.atomic import atomic_write_text

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    res = fit.result
    T = fit.joints.shape[0]
    rms = math.sqrt(res.objective / max(fit.observations, 1))
    lines = ["# Robot parameters", "",
             f"Least squares on SAP rollouts of the scene over {T} frames ({fit.observations} observations: "
             "joint coordinates and free-body positions), initial state fitted.", "",
             "| parameter | estimate | std | initial |", "|---|---|---|---|"]
    lines += [f"| {e.parameter} | {e.value:.6g} | {e.std:.2g} | {e.initial:.6g} |" for e in res.estimates]
    lines += ["", f"Misfit Σr² = {res.objective:.4g} (rms {rms:.3g}), {res.evaluations} evaluations.", ""]
    lines += [f"Note: {n}" for n in res.notes]
    md = out / "report.md"
    atomic_write_text(md, "\n".join(lines) + "\n")
    csv = "parameter,estimate,std,initial\n" + "".join(
        f"{e.parameter},{e.value:.10g},{e.std:.6g},{e.initial:.10g}\n" for e in res.estimates)
    atomic_write_text(out / "estimates.csv", csv)
    return md


def parse_window(text: str | None) -> tuple[int, int] | None:
    """``START:STOP`` (frame indices) -> (start, stop); None for none."""
    if not text:
        return None
    a, sep, b = text.partition(":")
    try:
        return int(a), int(b)
    except ValueError:
        raise IdentificationError(f"--frames: expected START:STOP frame indices, got {text!r}") from None


def run_robot(args, names, initial: dict[str, float]) -> int:
    """``convexsim identify TRAJ --params KIND:NAME,...`` (``initial``: the parsed ``--initial``, by
    ``KIND:NAME``): 0 on success, 1 with a message on bad input."""
    import sys

    from convexsim.io import load_trajectory

    paths = args.trajectory if isinstance(args.trajectory, (list, tuple)) else [args.trajectory]
    try:
        if len(paths) != 1:
            raise IdentificationError(f"robot parameters are fitted to one trajectory at a time, got {len(paths)}")
        data = robot_data(load_trajectory(paths[0]), parse_window(getattr(args, "frames", None)))
        params = parse_parameters(data.model, names)
        init = {RobotParameter.parse(k): v for k, v in initial.items()}
        unknown = [p.label() for p in init if p not in params]
        if unknown:
            raise IdentificationError(f"--initial: {', '.join(unknown)} not among --params")
        fit = fit_robot(data, params, init, accept_mismatch=getattr(args, "accept_mismatch", False))
    except (IdentificationError, TreeGradientError) as exc:
        print(f"convexsim identify: error: {exc}", file=sys.stderr)
        return 1
    path = write_robot_report(fit, args.out)
    for e in fit.result.estimates:
        print(f"sap   {e.parameter:24s} {e.value:.6g} ± {e.std:.2g}")
    print(f"report: {path}")
    return 0


__all__ = ["RobotData", "RobotFit", "fit_robot", "joint_coordinates", "parse_parameters", "parse_window",
           "robot_data", "run_robot", "write_robot_report"]
