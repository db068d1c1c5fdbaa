"""Study metrics: pure functions of a recorded ``Trajectory`` and the run's context.

Notation (docs/studies.md has the full list with formulas): frames f = 0..T-1 at times t_f; frame 0 is
the initial state, the solver statistics and contacts of frame f belong to the step that produced it.
The *window* W is the final fraction ``window`` of the run, W = {f : t_f >= t_end - window·(t_end - t_0)}.
The *up* direction is u = -g/|g| (z when g = (0, 0, -9.81)). For body b, the contacts of frame f are the
rows of that frame with body_a = b or body_b = b; penetration p_f = max(0, max_k -φ_k) over them (0 without
contacts; speculative contacts have φ > 0 and do not count). The tangential velocity of b is
v_t = v - (v·n̄)n̄ with n̄ the normalized mean contact normal of the frame (u when the frame has no contact).

Each metric is ``f(traj, ctx) -> float`` and returns NaN when it is undefined for the run (for example a
stop time when the body never stops).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from convexsim.io.trajectory import Trajectory


@dataclass
class MetricContext:
    """What metrics need besides the trajectory.

    Attributes:
        body: index of the body the body metrics look at.
        gravity: gravity in W [m/s²], shape (3,).
        mass: body masses [kg], shape (B,) (fixed bodies: their nominal mass, ignored).
        inertia: rotational inertia about the COM in B [kg·m²], shape (B, 3, 3).
        moving: True for moving bodies, shape (B,).
        window: final fraction of the run averaged by the rest metrics.
        stop_speed: tangential speed below which the body is stopped [m/s].
        params: the run's swept parameter values (by dotted path).
    """

    body: int
    gravity: np.ndarray
    mass: np.ndarray
    inertia: np.ndarray
    moving: np.ndarray
    window: float = 0.25
    stop_speed: float = 1e-3
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def up(self) -> np.ndarray:
        """u = -g/|g| (z when there is no gravity)."""
        n = float(np.linalg.norm(self.gravity))
        return -self.gravity / n if n > 0 else np.array([0.0, 0.0, 1.0])


def make_context(traj: Trajectory, *, body: str | None = None, window: float = 0.25, stop_speed: float = 1e-3,
                 params: dict[str, Any] | None = None) -> MetricContext:
    """Build the context from the trajectory's resolved scene (compiled once for masses and inertias)."""
    from convexsim.scene import compile_scene, scene_from_yaml

    model, _ = compile_scene(scene_from_yaml(traj.scene_yaml))
    moving = ~np.asarray(model.body_fixed, bool)
    if body is not None:
        b = traj.body_index(body)
    else:
        idx = np.flatnonzero(moving)
        b = int(idx[0]) if idx.size else 0
    return MetricContext(body=b, gravity=np.asarray(model.gravity, float), mass=np.asarray(model.body_mass, float),
                         inertia=np.asarray(model.body_inertia, float), moving=moving, window=window,
                         stop_speed=stop_speed, params=dict(params or {}))


# ---------------------------------------------------------------------------------------------------------
# Per-frame helpers


def window_frames(traj: Trajectory, window: float) -> np.ndarray:
    """Indices of the frames in the final ``window`` fraction of the run (at least the last frame)."""
    t = traj.time
    if t.size == 0:
        return np.zeros(0, np.int64)
    t0, t1 = float(t[0]), float(t[-1])
    sel = np.flatnonzero(t >= t1 - window * (t1 - t0) - 1e-12)
    return sel if sel.size else np.array([t.size - 1])


def _body_rows(traj: Trajectory, frame: int, body: int | None) -> slice | np.ndarray:
    a, b = int(traj.contact_offsets[frame]), int(traj.contact_offsets[frame + 1])
    if body is None:
        return np.arange(a, b)
    rows = np.arange(a, b)
    mask = (traj.contact_body_a[a:b] == body) | (traj.contact_body_b[a:b] == body)
    return rows[mask]


def penetration_per_frame(traj: Trajectory, body: int | None = None) -> np.ndarray:
    """p_f = max(0, max_k -φ_k) over the contacts of frame f (of ``body``, or all) [m], shape (T,)."""
    out = np.zeros(traj.num_frames)
    for f in range(traj.num_frames):
        rows = _body_rows(traj, f, body)
        if len(rows):
            out[f] = max(0.0, float(-traj.contact_phi[rows].min()))
    return out


def touching_per_frame(traj: Trajectory, body: int | None = None) -> np.ndarray:
    """True for frames with at least one contact of ``body`` at φ <= 0, shape (T,)."""
    out = np.zeros(traj.num_frames, bool)
    for f in range(traj.num_frames):
        rows = _body_rows(traj, f, body)
        out[f] = bool(len(rows)) and bool((traj.contact_phi[rows] <= 0.0).any())
    return out


def contact_normal_per_frame(traj: Trajectory, body: int, fallback: np.ndarray) -> np.ndarray:
    """n̄_f: normalized mean normal of the body's contacts of frame f, ``fallback`` without contacts, (T, 3).

    Normals point from A into B; for contacts where the body is A they are flipped so n̄ points into it.
    """
    out = np.tile(np.asarray(fallback, float), (traj.num_frames, 1))
    for f in range(traj.num_frames):
        rows = _body_rows(traj, f, body)
        if len(rows) == 0:
            continue
        n = traj.contact_normal[rows].copy()
        n[traj.contact_body_a[rows] == body] *= -1.0
        m = n.sum(axis=0)
        norm = float(np.linalg.norm(m))
        if norm > 0:
            out[f] = m / norm
    return out


def tangential_speed(traj: Trajectory, ctx: MetricContext) -> np.ndarray:
    """|v_t,f| = |v - (v·n̄_f) n̄_f| of the body's COM [m/s], shape (T,)."""
    v = traj.linear_velocity[:, ctx.body, :]
    n = contact_normal_per_frame(traj, ctx.body, ctx.up)
    vt = v - np.sum(v * n, axis=1, keepdims=True) * n
    return np.linalg.norm(vt, axis=1)


def energy_per_frame(traj: Trajectory, ctx: MetricContext) -> np.ndarray:
    """E_f = Σ_b [½ m_b |v_b|² + ½ ω_bᵀ R_b I_b R_bᵀ ω_b - m_b g·p_b] over moving bodies [J], shape (T,)."""
    from convexsim.spatial import quat_to_matrix

    E = np.zeros(traj.num_frames)
    for b in np.flatnonzero(ctx.moving):
        m = ctx.mass[b]
        v = traj.linear_velocity[:, b, :]
        w = traj.angular_velocity[:, b, :]
        R = quat_to_matrix(traj.quaternion[:, b, :])
        Iw = R @ ctx.inertia[b] @ np.transpose(R, (0, 2, 1))
        rot = 0.5 * np.einsum("ti,tij,tj->t", w, Iw, w)
        E += 0.5 * m * np.sum(v * v, axis=1) + rot - m * traj.position[:, b, :] @ ctx.gravity
    return E


def height(traj: Trajectory, ctx: MetricContext) -> np.ndarray:
    """h_f = p_f·u of the body's COM [m], shape (T,)."""
    return traj.position[:, ctx.body, :] @ ctx.up


# ---------------------------------------------------------------------------------------------------------
# Metrics


def rest_penetration(traj: Trajectory, ctx: MetricContext) -> float:
    """mean_{f∈W} p_f [m] over all contacts (the body at rest: m·g/k in the soft regime)."""
    p = penetration_per_frame(traj)
    return float(p[window_frames(traj, ctx.window)].mean()) if traj.num_frames else math.nan


def max_penetration(traj: Trajectory, ctx: MetricContext) -> float:
    """max_f p_f [m] over all contacts."""
    p = penetration_per_frame(traj)
    return float(p.max()) if p.size else math.nan


def stiction_slip(traj: Trajectory, ctx: MetricContext) -> float:
    """mean_{f∈W, in contact} |v_t,f| of the body [m/s] (sticking body: ≈ σ·μ·dt·g order)."""
    touching = touching_per_frame(traj, ctx.body)
    sel = [f for f in window_frames(traj, ctx.window) if touching[f]]
    if not sel:
        return math.nan
    return float(tangential_speed(traj, ctx)[sel].mean())


def _stop_frame(traj: Trajectory, ctx: MetricContext) -> int | None:
    s = tangential_speed(traj, ctx)
    moving = np.flatnonzero(s >= ctx.stop_speed)
    if moving.size == 0:
        return 0
    f = int(moving[-1]) + 1
    return f if f < traj.num_frames else None


def stop_time(traj: Trajectory, ctx: MetricContext) -> float:
    """t_s - t_0 [s], t_s the first frame time after which |v_t| < stop_speed for good (NaN if never)."""
    f = _stop_frame(traj, ctx)
    return math.nan if f is None else float(traj.time[f] - traj.time[0])


def stop_distance(traj: Trajectory, ctx: MetricContext) -> float:
    """|(I - u uᵀ)(p(t_s) - p(t_0))| of the body [m] (v0²/(2μg) on flat ground; NaN if it never stops)."""
    f = _stop_frame(traj, ctx)
    if f is None:
        return math.nan
    d = traj.position[f, ctx.body] - traj.position[0, ctx.body]
    u = ctx.up
    return float(np.linalg.norm(d - (d @ u) * u))


def final_energy(traj: Trajectory, ctx: MetricContext) -> float:
    """E_{T-1} [J] (kinetic + rotational + gravitational potential, moving bodies)."""
    return float(energy_per_frame(traj, ctx)[-1]) if traj.num_frames else math.nan


def energy_drift(traj: Trajectory, ctx: MetricContext) -> float:
    """E_{T-1} - E_0 [J] (negative: dissipated)."""
    E = energy_per_frame(traj, ctx)
    return float(E[-1] - E[0]) if E.size else math.nan


def bounce_height(traj: Trajectory, ctx: MetricContext) -> float:
    """max_{f>f_c} h_f - h_{f_c} [m], f_c the first frame where the body touches (φ <= 0); NaN if never."""
    touch = np.flatnonzero(touching_per_frame(traj, ctx.body))
    if touch.size == 0:
        return math.nan
    h = height(traj, ctx)
    fc = int(touch[0])
    return float(max(0.0, h[fc:].max() - h[fc]))


def hop_height(traj: Trajectory, ctx: MetricContext) -> float:
    """max_f h_f - h_0 [m]: how far a body started in contact lifts off (the sap gliding artifact)."""
    h = height(traj, ctx)
    return float(max(0.0, h.max() - h[0])) if h.size else math.nan


def _steps(a: np.ndarray) -> np.ndarray:
    return a[1:] if a.size > 1 else a[:0]


def _over_steps(a: np.ndarray, reduce) -> float:
    """reduce (np.mean, np.max) of a per-frame series over the steps (frame 0, the initial state, left out);
    NaN without steps."""
    s = _steps(a)
    return float(reduce(s)) if s.size else math.nan


def newton_iterations_mean(traj: Trajectory, ctx: MetricContext) -> float:
    """mean over steps of the Newton iterations (Lemke pivots for LCP)."""
    return _over_steps(traj.solver_iterations, np.mean)


def newton_iterations_max(traj: Trajectory, ctx: MetricContext) -> float:
    """max over steps of the Newton iterations (Lemke pivots for LCP)."""
    return _over_steps(traj.solver_iterations, np.max)


def line_search_evals_mean(traj: Trajectory, ctx: MetricContext) -> float:
    """mean over steps of the line-search cost evaluations (0 for LCP)."""
    return _over_steps(traj.line_search_evaluations, np.mean)


def line_search_evals_max(traj: Trajectory, ctx: MetricContext) -> float:
    """max over steps of the line-search cost evaluations (0 for LCP)."""
    return _over_steps(traj.line_search_evaluations, np.max)


def contacts_per_step(traj: Trajectory, ctx: MetricContext) -> float:
    """mean over steps of the number of contacts (speculative ones included)."""
    return _over_steps(np.diff(traj.contact_offsets), np.mean)


def solver_failures(traj: Trajectory, ctx: MetricContext) -> float:
    """number of steps whose solve did not converge (+1 if the run stopped early)."""
    return float(np.count_nonzero(~_steps(traj.solver_converged)) + (1 if traj.failure else 0))


def ms_per_step(traj: Trajectory, ctx: MetricContext) -> float:
    """wall time per step [ms] (a timing column: differs between machines and runs)."""
    v = traj.metadata.get("ms_per_step")
    return float(v) if v is not None else math.nan


def final_height(traj: Trajectory, ctx: MetricContext) -> float:
    """h_{T-1} - h_0 [m] of the body."""
    h = height(traj, ctx)
    return float(h[-1] - h[0]) if h.size else math.nan


MetricFn = Callable[[Trajectory, MetricContext], float]

METRICS: dict[str, tuple[MetricFn, str]] = {
    "rest_penetration": (rest_penetration, "m"),
    "max_penetration": (max_penetration, "m"),
    "stiction_slip": (stiction_slip, "m/s"),
    "stop_time": (stop_time, "s"),
    "stop_distance": (stop_distance, "m"),
    "final_energy": (final_energy, "J"),
    "energy_drift": (energy_drift, "J"),
    "bounce_height": (bounce_height, "m"),
    "hop_height": (hop_height, "m"),
    "final_height": (final_height, "m"),
    "newton_iterations_mean": (newton_iterations_mean, "1"),
    "newton_iterations_max": (newton_iterations_max, "1"),
    "line_search_evals_mean": (line_search_evals_mean, "1"),
    "line_search_evals_max": (line_search_evals_max, "1"),
    "contacts_per_step": (contacts_per_step, "1"),
    "solver_failures": (solver_failures, "1"),
    "ms_per_step": (ms_per_step, "ms"),
}
"""Per-run metrics: name -> (function, unit)."""

TIMING_METRICS = frozenset({"ms_per_step"})
"""Metrics that measure the machine, not the physics (left out when comparing result tables)."""


# ---------------------------------------------------------------------------------------------------------
# SAP-vs-LCP difference metrics (computed across pairs of runs that differ only in solver.kind)


def position_samples(traj: Trajectory, count: int = 51) -> dict[str, Any]:
    """A compact summary kept in each run record: positions at ``count`` evenly spaced frames.

    Returns {"time": [...], "position": [[[x, y, z] per body] per sample], "body_names": [...]}.
    """
    T = traj.num_frames
    if T == 0:
        return {"time": [], "position": [], "body_names": [str(b) for b in traj.body_names]}
    idx = np.unique(np.linspace(0, T - 1, min(count, T)).round().astype(int))
    return {"time": traj.time[idx].tolist(), "position": traj.position[idx].tolist(),
            "body_names": [str(b) for b in traj.body_names]}


def _interp_positions(samples: dict[str, Any], times: np.ndarray) -> np.ndarray:
    t = np.asarray(samples["time"], float)
    p = np.asarray(samples["position"], float)
    out = np.empty((times.size, p.shape[1], 3))
    for b in range(p.shape[1]):
        for k in range(3):
            out[:, b, k] = np.interp(times, t, p[:, b, k])
    return out


def sap_lcp_final_position_diff(sap: dict[str, Any], lcp: dict[str, Any]) -> float:
    """max_b |p_b^SAP(t_end) - p_b^LCP(t_end)| [m] (both runs must reach the same end time)."""
    ps, pl = np.asarray(sap["position"], float), np.asarray(lcp["position"], float)
    if ps.size == 0 or pl.size == 0 or ps.shape[1:] != pl.shape[1:]:
        return math.nan
    if not math.isclose(sap["time"][-1], lcp["time"][-1], rel_tol=1e-9, abs_tol=1e-12):
        return math.nan
    return float(np.linalg.norm(ps[-1] - pl[-1], axis=1).max())


def sap_lcp_max_position_diff(sap: dict[str, Any], lcp: dict[str, Any]) -> float:
    """max_t max_b |p_b^SAP(t) - p_b^LCP(t)| [m] over the sampled times (linear interpolation)."""
    ps, pl = np.asarray(sap["position"], float), np.asarray(lcp["position"], float)
    if ps.size == 0 or pl.size == 0 or ps.shape[1:] != pl.shape[1:]:
        return math.nan
    t_end = min(sap["time"][-1], lcp["time"][-1])
    times = np.asarray([t for t in sap["time"] if t <= t_end + 1e-12], float)
    d = _interp_positions(sap, times) - _interp_positions(lcp, times)
    return float(np.linalg.norm(d, axis=2).max())


PAIR_METRICS: dict[str, tuple[Callable[[dict, dict], float], str]] = {
    "sap_lcp_final_position_diff": (sap_lcp_final_position_diff, "m"),
    "sap_lcp_max_position_diff": (sap_lcp_max_position_diff, "m"),
}
"""Metrics of a SAP run and the LCP run with the same other parameters: name -> (function, unit)."""


def compute_metrics(traj: Trajectory, names: Iterable[str], ctx: MetricContext) -> dict[str, float]:
    """Evaluate the per-run metrics in ``names`` (pair metrics are skipped); a metric that raises gives NaN."""
    out: dict[str, float] = {}
    for name in names:
        if name not in METRICS:
            continue
        fn, _ = METRICS[name]
        try:
            out[name] = float(fn(traj, ctx))
        except Exception:  # noqa: BLE001 - a broken metric must not lose the run's other results
            out[name] = math.nan
    return out


def unit_of(name: str) -> str:
    """Unit of a metric ("1" for counts)."""
    if name in METRICS:
        return METRICS[name][1]
    if name in PAIR_METRICS:
        return PAIR_METRICS[name][1]
    raise KeyError(name)


__all__ = ["METRICS", "PAIR_METRICS", "TIMING_METRICS", "MetricContext", "make_context", "compute_metrics",
           "position_samples", "unit_of", "window_frames", "penetration_per_frame", "tangential_speed",
           "energy_per_frame"] + [n for n in METRICS] + [n for n in PAIR_METRICS]
