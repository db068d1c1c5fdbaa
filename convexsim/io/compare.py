"""Compare two trajectories of the same scene (typically SAP vs LCP): per-body differences over time.

For every body b and common frame f:

* position error  e_p(f) = ‖p_a(f) − p_b(f)‖ [m]
* orientation error e_R(f) = rotation angle of R_a R_bᵀ [rad] = 2·acos|⟨q_a, q_b⟩|
* velocity errors ‖v_a − v_b‖ [m/s] and ‖ω_a − ω_b‖ [rad/s]
* net contact force error ‖F_a − F_b‖ [N], with F(f) = Σ (force on b as body B) − Σ (force on b as body A)
  over the contacts of frame f: the resultant contact force on the body, which does not depend on how
  each solver split it between contact points.

Each series is summarized by its maximum (and the time it happened), RMS and final value. Frames are
matched by time (both runs must share dt; a run that stopped early is compared over the common frames).
``check_tolerance`` turns a comparison into a pass/fail verdict (``convexsim compare --tol``).
"""

from __future__ import annotations

import numpy as np

from convexsim.errors import InputError
from convexsim.io import QUANTITIES, UNITS, Trajectory


def net_contact_force(traj: Trajectory) -> np.ndarray:
    """Resultant contact force on each body per frame [N], shape (T, B) + (3,)."""
    T, B = traj.num_frames, traj.num_bodies
    F = np.zeros((T, B, 3))
    off = traj.contact_offsets
    frame_of = np.repeat(np.arange(T), np.diff(off)) if T else np.zeros(0, np.int64)
    np.add.at(F, (frame_of, traj.contact_body_b), traj.contact_force)
    np.add.at(F, (frame_of, traj.contact_body_a), -traj.contact_force)
    return F


def _common_frames(ta: np.ndarray, tb: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    ia, ib = [], []
    j = 0
    for i, t in enumerate(ta):
        while j < len(tb) and tb[j] < t - tol:
            j += 1
        if j < len(tb) and abs(tb[j] - t) <= tol:
            ia.append(i)
            ib.append(j)
    return np.asarray(ia, np.int64), np.asarray(ib, np.int64)


def _summary(e: np.ndarray, t: np.ndarray) -> dict[str, float]:
    """max, the time of the (first) max [s], RMS and final value of one error series."""
    if e.size == 0:
        return {"max": float("nan"), "t_max": float("nan"), "rms": float("nan"), "final": float("nan")}
    k = int(np.argmax(e))
    return {"max": float(e[k]), "t_max": float(t[k]), "rms": float(np.sqrt(np.mean(e * e))),
            "final": float(e[-1])}


def run_label(traj: Trajectory) -> str:
    """A readable name of the run that made ``traj``: "SAP solver, 'lagged' contact model" or
    "LCP solver (rigid contact)"."""
    if traj.solver_kind == "lcp":
        return "LCP solver (rigid contact)"
    return f"{traj.solver_kind.upper()} solver, '{traj.contact_model}' contact model"


def compare_trajectories(traj_a: Trajectory, traj_b: Trajectory, *,
                         names: tuple[str, str] | None = None) -> dict:
    """Per-body differences between two trajectories of the same scene.

    Args:
        names: how to call the two runs in the text (e.g. their file names); default "A", "B".

    Returns:
        dict with keys
          ``labels``: (solver_kind/contact_model of a, of b);
          ``descriptions``: ("name: readable run label" of a, of b), e.g.
          "run_sap.npz: SAP solver, 'sap' contact model";
          ``time``: the common frame times [s], shape (T,);
          ``bodies``: {name: {quantity: {"max", "t_max", "rms", "final"}}} for QUANTITIES (t_max [s]: the
          time of the largest difference);
          ``series``: {name: {quantity: per-frame error, shape (T,)}};
          ``failures``: the runs' failure messages (empty if none).

    Raises:
        ValueError: different body sets or no common frame.
    """
    names_a = [str(n) for n in traj_a.body_names]
    names_b = [str(n) for n in traj_b.body_names]
    if names_a != names_b:
        raise InputError(f"the trajectories have different bodies: {names_a} vs {names_b}")
    dt = traj_a.time_step or traj_b.time_step or 1.0
    ia, ib = _common_frames(traj_a.time, traj_b.time, 1e-6 * dt)
    if ia.size == 0:
        raise InputError("the trajectories have no frame time in common")
    Fa = net_contact_force(traj_a)[ia]
    Fb = net_contact_force(traj_b)[ib]
    qa, qb = traj_a.quaternion[ia], traj_b.quaternion[ib]
    dot = np.clip(np.abs(np.sum(qa * qb, axis=-1)), 0.0, 1.0)
    errors = {
        "position": np.linalg.norm(traj_a.position[ia] - traj_b.position[ib], axis=-1),
        "orientation": 2.0 * np.arccos(dot),
        "velocity": np.linalg.norm(traj_a.linear_velocity[ia] - traj_b.linear_velocity[ib], axis=-1),
        "angular_velocity": np.linalg.norm(traj_a.angular_velocity[ia] - traj_b.angular_velocity[ib], axis=-1),
        "contact_force": np.linalg.norm(Fa - Fb, axis=-1),
    }
    bodies, series = {}, {}
    for k, name in enumerate(names_a):
        series[name] = {q: errors[q][:, k] for q in QUANTITIES}
        bodies[name] = {q: _summary(errors[q][:, k], traj_a.time[ia]) for q in QUANTITIES}
    na, nb = names or ("A", "B")
    return {
        "labels": (f"{traj_a.solver_kind}/{traj_a.contact_model}", f"{traj_b.solver_kind}/{traj_b.contact_model}"),
        "descriptions": (f"{na}: {run_label(traj_a)}", f"{nb}: {run_label(traj_b)}"),
        "time": traj_a.time[ia],
        "bodies": bodies,
        "series": series,
        "failures": [f for f in (traj_a.failure, traj_b.failure) if f],
    }


MAX_BODIES = 10
"""Bodies listed by default in a difference table (the worst ones; the rest are counted)."""


def _severity(qs: dict) -> tuple:
    """Sort key of a body's differences: its largest position difference, then the other quantities'."""
    return tuple(-qs[q]["max"] if np.isfinite(qs[q]["max"]) else -np.inf for q in QUANTITIES)


def format_comparison(comparison: dict, *, include_fixed: bool = False, max_bodies: int | None = MAX_BODIES,
                      more_hint: str = "") -> str:
    """A plain-text table of ``compare_trajectories`` output (max, its time, RMS, final per body and
    quantity).

    Bodies whose every error is exactly zero (fixed bodies with no contact) are left out unless
    ``include_fixed``. With more than ``max_bodies`` bodies left (None: no limit), the table lists the
    ``max_bodies`` worst ones (largest position difference first, then the other quantities') and one line
    counts the others, with their largest position difference, and says ``more_hint`` (how to list them).
    """
    da, db = comparison.get("descriptions") or comparison["labels"]
    t = comparison["time"]
    span = f"{len(t)} common frames, t = {t[0]:.4g} … {t[-1]:.4g} s"
    lines = [f"{da}", f"{db}", f"differences A − B over {span}"]
    for f in comparison["failures"]:
        lines.append(f"  note: a run stopped early: {f}")
    shown = [(name, qs) for name, qs in comparison["bodies"].items()
             if include_fixed or not all(v["max"] == 0.0 for v in qs.values())]
    rest = []
    if max_bodies is not None and len(shown) > max_bodies:
        ranked = sorted(shown, key=lambda kv: _severity(kv[1]))
        shown, rest = ranked[:max_bodies], ranked[max_bodies:]
        lines.append(f"  the {len(shown)} bodies with the largest differences, of {len(shown) + len(rest)}:")
    header = f"  {'body':<16} {'quantity':<24} {'max':>11} {'at t [s]':>9} {'rms':>11} {'final':>11}"
    lines.append(header)
    for name, qs in shown:
        for i, q in enumerate(QUANTITIES):
            s = qs[q]
            label = name if i == 0 else ""
            lines.append(f"  {label:<16} {q + ' [' + UNITS[q] + ']':<24} {s['max']:11.3e} {s['t_max']:9.4g} "
                         f"{s['rms']:11.3e} {s['final']:11.3e}")
    if rest:
        worst = max(qs["position"]["max"] for _, qs in rest)
        lines.append(f"  … and {len(rest)} more bodies, each with a position difference of at most "
                     f"{worst:.3e} {UNITS['position']}" + (f" ({more_hint})" if more_hint else ""))
    return "\n".join(lines)


def check_tolerance(comparison: dict, tol: float, quantity: str = "position") -> tuple[bool, str]:
    """(passed, one-line verdict): whether the largest ``quantity`` difference over all bodies and common
    frames is <= ``tol`` (in UNITS[quantity]), naming the body and time of that difference."""
    if quantity not in QUANTITIES:
        raise InputError(f"unknown quantity {quantity!r}; one of {', '.join(QUANTITIES)}")
    if not (tol >= 0.0 and np.isfinite(tol)):
        raise InputError(f"--tol must be a finite number >= 0 (got {tol:g})")
    worst = max(comparison["bodies"].items(), key=lambda kv: kv[1][quantity]["max"], default=None)
    if worst is None:
        return True, f"PASS: no bodies to compare (tolerance {tol:g} {UNITS[quantity]})"
    body, qs = worst
    s = qs[quantity]
    ok = bool(s["max"] <= tol)
    rel = "<=" if ok else ">"
    return ok, (f"{'PASS' if ok else 'FAIL'}: largest {quantity} difference {s['max']:.3e} {UNITS[quantity]} "
                f"(body {body!r}, t = {s['t_max']:.4g} s) {rel} tolerance {tol:g} {UNITS[quantity]}")


__all__ = ["compare_trajectories", "format_comparison", "MAX_BODIES", "check_tolerance", "run_label", "net_contact_force",
           "QUANTITIES", "UNITS"]
