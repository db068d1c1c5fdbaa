"""What the command groups share: exit statuses, printing, scene names, and the flags of several commands."""

from __future__ import annotations

import sys
from pathlib import Path

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143
EXIT_INTERNAL = 70
"""An internal error: an exception that is not a refusal of the input escaped a command (70 = EX_SOFTWARE of
sysexits.h). The message says what was raised, where (module:function:line) and in which command."""

TRACEBACK_ENV = "CONVEXSIM_TRACEBACK"
"""Set to 1 to get the full Python traceback of an internal error as well."""


def say(msg: str = "", *, quiet: bool = False, file=None) -> None:
    """Print ``msg`` (flushed) to stdout or ``file`` unless ``quiet``."""
    if not quiet:
        print(msg, file=file or sys.stdout, flush=True)


def resolve_scene(arg: str) -> Path:
    """A scene path or the name of a shipped scene ("box_stack"); FileNotFoundError with "did you mean"."""
    from convexsim.scene import resolve_scene_path

    return resolve_scene_path(arg)


def add_command(sub, name: str, func, summary: str, description: str):
    """The parser of command ``name`` (``sub``: the subparsers it joins), run by ``func(args) -> exit status``;
    ``summary`` is its line in the command list, ``description`` the text of its --help."""
    p = sub.add_parser(name, help=summary, description=description)
    p.set_defaults(func=func)
    return p


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

    from convexsim.errors import InputError

    scale = getattr(args, "force_scale", None)
    if scale is not None and not (scale > 0 and math.isfinite(scale)):
        raise InputError(f"--force-scale must be a finite number > 0 [m/N], got {scale!r}")
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


def is_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` refuses the user's input (exit 2) rather than reports a failure of convexsim's own code:
    an :class:`~convexsim.errors.InputError` (scene, trajectory, study, data or mesh file, field, option), a
    pydantic ``ValidationError`` (a scene or spec field), a missing file, or an ``OSError`` naming its file
    (unreadable, not writable, a directory)."""
    from convexsim.errors import InputError

    if isinstance(exc, (InputError, FileNotFoundError)):
        return True
    if isinstance(exc, OSError):
        return exc.filename is not None
    kind = type(exc)
    return kind.__name__ == "ValidationError" and kind.__module__.split(".")[0] in ("pydantic", "pydantic_core")


def internal_error_text(exc: BaseException, command: str) -> str:
    """The short report of an internal error: what was raised, where (``module:function:line`` of the
    raising frame, and of the innermost convexsim frame when the raise happened in a library), in which
    command, and how to get the full traceback."""
    import os
    import traceback

    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(f"{tb.tb_frame.f_globals.get('__name__', '?')}:{tb.tb_frame.f_code.co_name}:{tb.tb_lineno}")
        tb = tb.tb_next
    where = frames[-1] if frames else "?"
    ours = [f for f in frames if f.startswith("convexsim.") and not f.startswith("convexsim.cli")]
    if ours and ours[-1] != where:
        where += f", called from {ours[-1]}"
    text = (f"convexsim {command}: internal error (a bug in convexsim, not a problem with the input): "
            f"{type(exc).__name__}: {exc}\n  where: {where}")
    if os.environ.get(TRACEBACK_ENV, "") not in ("", "0"):
        return text + "\n" + "".join(traceback.format_exception(exc)).rstrip()
    return text + f"\n  (exit {EXIT_INTERNAL}; {TRACEBACK_ENV}=1 for the full traceback)"


def error_text(exc: BaseException) -> str:
    """The message of a user-input error; a scene error with one problem is that one line."""
    problems = getattr(exc, "problems", None)
    if isinstance(problems, list) and len(problems) == 1:
        return str(problems[0])
    return str(exc)
