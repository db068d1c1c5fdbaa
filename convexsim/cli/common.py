"""What the command groups share: exit statuses, printing, scene names, and the flags of several commands."""

from __future__ import annotations

import sys
from pathlib import Path

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143


def say(msg: str = "", *, quiet: bool = False, file=None) -> None:
    """Print ``msg`` (flushed) to stdout or ``file`` unless ``quiet``."""
    if not quiet:
        print(msg, file=file or sys.stdout, flush=True)


def resolve_scene(arg: str) -> Path:
    """A scene path or the name of a shipped scene ("box_stack"); FileNotFoundError with "did you mean"."""
    from convexsim.scene import resolve_scene_path

    return resolve_scene_path(arg)


def add_display_flags(p) -> None:
    """--forces, --force-scale, --contacts of `run` (with --view/--html) and `view`."""
    p.add_argument("--forces", choices=["auto", "capped", "scaled", "top", "off"], default="auto",
                   help="force arrows: capped (every contact, at most the scene radius long), scaled (not "
                        "capped), top (the 12 largest forces of each frame), off (contact points only); "
                        "auto (default): capped, or top when a frame has more than 40 contacts (the legend says so)")
    p.add_argument("--force-scale", type=float, metavar="M_PER_N",
                   help="arrow length per newton [m/N] (default: a quarter of the scene for the heaviest body's weight)")
    p.add_argument("--contacts", choices=["on", "off"], default="on",
                   help="off: no contact points and no force arrows")


def display_kwargs(args) -> dict:
    """export_html / RunViewer / serve_trajectories keywords of the display flags."""
    import math

    scale = getattr(args, "force_scale", None)
    if scale is not None and not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"--force-scale must be a finite number > 0 [m/N], got {scale!r}")
    return {"forces": getattr(args, "forces", "auto"), "force_scale": scale,
            "show_contacts": getattr(args, "contacts", "on") != "off"}


def add_slip_curvature_flag(p) -> None:
    p.add_argument("--slip-curvature", type=float, metavar="KAPPA",
                   help="SAP slip curvature κ >= 0 of the Newton matrix (default: the scene's solver."
                        "slip_curvature, 1); 0 = the exact Hessian. Same optimum; changes the iteration count")


def with_slip_curvature(overrides, kappa):
    """The --set overrides plus solver.slip_curvature=KAPPA when --slip-curvature was given."""
    if kappa is None:
        return overrides
    return list(overrides) + [f"solver.slip_curvature={kappa!r}"]


def add_unit_flag(p) -> None:
    p.add_argument("--no-unit-warnings", action="store_true",
                   help="do not warn about scene values almost surely in the wrong units "
                        "(docs/scene-format.md)")


def error_text(exc: BaseException) -> str:
    """The message of a user-input error; a scene error with one problem is that one line."""
    problems = getattr(exc, "problems", None)
    if isinstance(problems, list) and len(problems) == 1:
        return str(problems[0])
    return str(exc)
