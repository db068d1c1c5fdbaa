"""The ``convexsim`` command line: a thin layer over the Python API. ``convexsim COMMAND --help`` for each.

    convexsim run SCENE [--duration S] [--time-step S] [--contact-model M] [--solver sap|lcp|both]
                        [--set key=value ...] [--out FILE] [--record-every N] [--html FILE]
                        [--view] [--realtime] [--no-wait] [--quiet] [--strict] [--no-unit-warnings]
    convexsim validate SCENE...          every problem of each file
    convexsim scenes                     the shipped scenes with one-line descriptions
    convexsim info TRAJ                  what a trajectory file holds
    convexsim view TRAJ [TRAJ2 ...]      recorded playback in Meshcat (or --html OUT to export)
    convexsim compare TRAJ_A TRAJ_B      per-body differences of two runs of one scene [--tol X]
    convexsim bench                      ms/step, iterations/step, contacts/step on benchmark scenes
    convexsim study SPEC                 parameter sweeps (docs/studies.md)
    convexsim examples lcp               the small textbook LCP examples (docs/lcp.md)
    convexsim learn DATA --out DIR       learn hybrid dynamics from simulated data (docs/learn.md)
    convexsim identify TRAJ --params mu --out DIR   material parameters from a trajectory (docs/identify.md)
    convexsim warmup                     compile the numba kernels now (first run), not during a run
    convexsim seeds                      deprecated alias of `convexsim examples lcp`

A SCENE is a YAML file (relative paths against the working directory, then the shipped scenes folder)
or a shipped scene name (``box_stack``). Options may come before or after the positional arguments.

Exit status: 0 ok; 1 the simulation failed (or ``compare --tol`` / ``study --strict`` found a
difference or a failed run); 2 bad usage or bad input (a scene or trajectory file that is missing or
broken, a bad option value); 130 interrupted (Ctrl-C); 143 terminated (SIGTERM); an interrupted `run`
writes the frames recorded so far, marked interrupted.
"""

from __future__ import annotations

import argparse
import io
import sys
import warnings
from pathlib import Path
from typing import Sequence

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143


def _print(msg: str = "", *, quiet: bool = False, file=None) -> None:
    if not quiet:
        print(msg, file=file or sys.stdout, flush=True)


def _resolve_scene(arg: str) -> Path:
    """A scene path or the name of a shipped scene ("box_stack"); FileNotFoundError with "did you mean"."""
    from convexsim.scene import resolve_scene_path

    return resolve_scene_path(arg)


# ----------------------------------------------------------------------------------------- run
def _add_run(sub) -> None:
    p = sub.add_parser("run", help="simulate a scene and write a trajectory file",
                       description="Simulate SCENE (a YAML file or a shipped scene name) and write the "
                                   "trajectory (npz, docs/trajectory-format.md).")
    p.add_argument("scene")
    p.add_argument("--duration", type=float, help="simulated time [s] (default: the scene's)")
    p.add_argument("--time-step", type=float, help="time step dt [s] (default: the scene's)")
    p.add_argument("--contact-model", choices=["sap", "lagged", "similar"], help="SAP contact model")
    p.add_argument("--solver", choices=["sap", "lcp", "both"],
                   help="solver (default: the scene's); 'both' runs SAP and LCP and writes two files")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a scene field by dotted path, e.g. bodies.ball.mass=2 or "
                        "materials.<name>.friction=0.3 (the material the geometries use)")
    p.add_argument("--out", help="trajectory file (default: <scene name>.npz in the current folder)")
    p.add_argument("--record-every", type=int, default=1, metavar="N", help="record every N-th step")
    p.add_argument("--html", help="also export a standalone HTML animation to this file")
    p.add_argument("--view", action="store_true",
                   help="stream the simulation to a Meshcat viewer, then serve the recorded playback of "
                        "every run on the same page until Ctrl-C")
    p.add_argument("--layout", choices=["auto", "offset", "overlay"], default="auto",
                   help="--solver both: runs side by side (offset; 'auto' when they agree to the eye) "
                        "or in place (overlay)")
    p.add_argument("--realtime", action="store_true", help="with --view: pace the simulation to real time")
    p.add_argument("--joint-frames", action="store_true",
                   help="with --view/--html: draw each link's joint frame and axis (scenes with joints)")
    p.add_argument("--no-wait", action="store_true",
                   help="with --view: stop the viewer as soon as the run(s) end instead of waiting for Ctrl-C")
    _add_display_flags(p)
    p.add_argument("--strict", action="store_true", help="stop at the first SAP step that does not converge")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no summary")
    _add_slip_curvature_flag(p)
    _add_unit_flag(p)
    p.set_defaults(func=cmd_run)


def _add_display_flags(p) -> None:
    """--forces, --force-scale, --contacts of `run` (with --view/--html) and `view`."""
    p.add_argument("--forces", choices=["auto", "capped", "scaled", "top", "off"], default="auto",
                   help="force arrows: capped (every contact, at most the scene radius long), scaled (not "
                        "capped), top (the 12 largest forces of each frame), off (contact points only); "
                        "auto (default): capped, or top when a frame has more than 40 contacts (the legend says so)")
    p.add_argument("--force-scale", type=float, metavar="M_PER_N",
                   help="arrow length per newton [m/N] (default: a quarter of the scene for the heaviest body's weight)")
    p.add_argument("--contacts", choices=["on", "off"], default="on",
                   help="off: no contact points and no force arrows")


def _display_kwargs(args) -> dict:
    """export_html / RunViewer / serve_trajectories keywords of the display flags."""
    import math

    scale = getattr(args, "force_scale", None)
    if scale is not None and not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"--force-scale must be a finite number > 0 [m/N], got {scale!r}")
    return {"forces": getattr(args, "forces", "auto"), "force_scale": scale,
            "show_contacts": getattr(args, "contacts", "on") != "off"}


def _add_slip_curvature_flag(p) -> None:
    p.add_argument("--slip-curvature", type=float, metavar="KAPPA",
                   help="SAP slip curvature κ >= 0 of the Newton matrix (default: the scene's solver."
                        "slip_curvature, 1); 0 = the exact Hessian. Same optimum; changes the iteration count")


def _with_slip_curvature(overrides, kappa):
    """The --set overrides plus solver.slip_curvature=KAPPA when --slip-curvature was given."""
    if kappa is None:
        return overrides
    return list(overrides) + [f"solver.slip_curvature={kappa!r}"]


def _add_unit_flag(p) -> None:
    p.add_argument("--no-unit-warnings", action="store_true",
                   help="do not warn about scene values almost surely in the wrong units "
                        "(docs/scene-format.md)")


def _check_time_flags(args) -> None:
    """--duration and --time-step must be finite and > 0; errors name the flag, not the scene file."""
    from convexsim.simulate import check_times

    check_times({"--duration": args.duration, "--time-step": args.time_step})


def _step_plan(args, scene_path: Path, model, duration: float) -> tuple[int, str]:
    """(number of steps, note about rounding or ''); ValueError when the run would take no step."""
    from convexsim.simulate import plan_steps

    source = "--duration" if args.duration is not None else f"{scene_path}: duration"
    return plan_steps(duration, model.time_step, source, "--time-step" if args.time_step is not None else "")


class _TerminateOnSigterm:
    """While active, SIGTERM raises TerminationRequest (a KeyboardInterrupt) so that it stops a run
    exactly like Ctrl-C: the loop ends cleanly, reports the step and time, and the frames recorded so far
    are written, marked interrupted."""

    def __enter__(self):
        import signal
        import threading

        from convexsim.simulate import TerminationRequest

        self._old = None
        if threading.current_thread() is threading.main_thread():
            def handler(signum, frame):
                raise TerminationRequest("SIGTERM")

            self._old = signal.signal(signal.SIGTERM, handler)
        return self

    def __exit__(self, *exc):
        import signal

        if self._old is not None:
            signal.signal(signal.SIGTERM, self._old)
        return False


def cmd_run(args) -> int:
    with _TerminateOnSigterm(), _run_viewer(args) as viewer:
        return _cmd_run(args, viewer)


def _cmd_run(args, viewer=None) -> int:
    from convexsim.io import save_trajectory
    from convexsim.simulate import RunInterrupted, prepare, run_model

    _check_time_flags(args)
    scene_path = _resolve_scene(args.scene)
    kinds = ["sap", "lcp"] if args.solver == "both" else [args.solver]
    out = Path(args.out) if args.out else Path(f"{scene_path.stem}.npz")
    metadata = {"command": " ".join(sys.argv)}
    trajectories, status = [], EXIT_OK

    def prepared(kind):
        model, state, duration = prepare(scene_path, duration=args.duration, time_step=args.time_step,
                                         contact_model=args.contact_model, solver=kind,
                                         overrides=_with_slip_curvature(args.overrides, args.slip_curvature))
        _, rounding = _step_plan(args, scene_path, model, duration)
        if rounding:
            _print(f"note: {rounding}", file=sys.stderr)
        from convexsim.tools.warmup import ensure_warm

        ensure_warm(model, model.solver.kind)     # a first run compiles its own step's kernels, in parallel processes
        target = out.with_name(f"{out.stem}_{model.solver.kind}{out.suffix}") if len(kinds) > 1 else out
        return model, state, duration, rounding, target

    def runner(model, state, duration, progress=not args.quiet):
        """The run as a function of its step callback (the lockstep run calls it with its own)."""
        return lambda callback: run_model(model, state, duration=duration, record_every=args.record_every,
                                          progress=progress, step_callback=callback, strict=args.strict,
                                          metadata=metadata)

    def keep(run, result):
        nonlocal status
        model, _, _, rounding, target = run
        traj, stats = result
        save_trajectory(target, traj)
        trajectories.append(traj)
        _print(_summary(model, traj, stats, target, rounding), quiet=args.quiet)
        if traj.failure:
            _print(f"FAILED: {traj.failure}\n(the {traj.num_frames} frames recorded before it are in {target})",
                   file=sys.stderr)
            status = EXIT_FAILURE

    if viewer is not None and len(kinds) > 1:     # side by side on one page, in lockstep, as they run
        from convexsim import viz

        runs = [prepared(kind) for kind in kinds]
        live = viz.open_lockstep(viewer, [r[0] for r in runs], [r[1] for r in runs], duration=runs[0][2],
                                 layout=args.layout)
        results = viz.run_lockstep([runner(*r[:3], progress=not args.quiet and i == 0) for i, r in enumerate(runs)],
                                   [r[0].time_step for r in runs], on_step=[live.on_step(i) for i in range(len(runs))])
        codes = [_save_interrupted(r[0], res.error, r[4], metadata) for r, res in zip(runs, results)
                 if isinstance(res.error, RunInterrupted)]
        if codes:                                 # Ctrl-C / SIGTERM: a run that had ended is kept too
            for r, res in zip(runs, results):
                if res.error is None:
                    keep(r, res.value)
            return codes[0]
        for r, res in zip(runs, results):
            if res.error is not None:
                raise res.error
            keep(r, res.value)
    else:
        for kind in kinds:
            run = prepared(kind)
            callback = viewer.live(run[0]) if viewer is not None else None
            try:
                result = runner(*run[:3])(callback)
            except RunInterrupted as exc:
                return _save_interrupted(run[0], exc, run[4], metadata)
            keep(run, result)
    if len(trajectories) == 2:
        _print(_comparison_text(*trajectories, names=("SAP run", "LCP run")), quiet=args.quiet)
    if args.html:
        from convexsim import viz

        path = viz.export_html(trajectories, args.html, layout=args.layout,   # labels as on the --view page
                               joint_frames=args.joint_frames, **_display_kwargs(args))
        _print(f"HTML animation: {path} ({Path(path).stat().st_size / 1e6:.2f} MB)", quiet=args.quiet)
    if viewer is not None:
        if args.no_wait:               # publish the playback (for scripts), but announce no URL about to die
            viewer.out, out_stream = io.StringIO(), viewer.out
            try:
                viewer.finish(trajectories, wait=False, layout=args.layout)
            finally:
                viewer.out = out_stream
            _print("viewer stopped (--no-wait)", quiet=args.quiet)
        else:                          # the recorded playback on the same page; Ctrl-C to stop
            viewer.finish(trajectories, wait=True, layout=args.layout)
    return status


def _save_interrupted(model, exc, target: Path, metadata: dict) -> int:
    """Write the frames an interrupted run recorded (atomically, ``failure`` and metadata ``interrupted``
    say so) and return 143 (SIGTERM) or 130 (Ctrl-C). A second signal during the write leaves no file."""
    from convexsim.io import save_trajectory
    from convexsim.simulate import interrupted_trajectory

    what = "terminated" if exc.terminated is not None else "interrupted"
    traj = interrupted_trajectory(model, exc, metadata)
    save_trajectory(target, traj)
    _print(f"{what}: {exc}; the {traj.num_frames} frames recorded so far are in {target} "
           "(marked interrupted)", file=sys.stderr)
    return EXIT_TERMINATED if exc.terminated is not None else EXIT_INTERRUPTED


def _run_viewer(args):
    """One viewer for the whole `run --view` command (a context manager; a no-op without --view)."""
    import contextlib

    if not getattr(args, "view", False):
        if getattr(args, "realtime", False):
            raise ValueError("--realtime paces the live viewer: use it together with --view")
        if getattr(args, "no_wait", False):
            raise ValueError("--no-wait only applies to --view")
        if getattr(args, "joint_frames", False) and not getattr(args, "html", None):
            raise ValueError("--joint-frames draws in the viewer: use it together with --view or --html")
        drawn = [f for f, on in (("--forces", getattr(args, "forces", "auto") != "auto"),
                                 ("--force-scale", getattr(args, "force_scale", None) is not None),
                                 ("--contacts", getattr(args, "contacts", "on") != "on")) if on]
        if drawn and not getattr(args, "html", None):
            raise ValueError(f"{drawn[0]} changes what the viewer draws: use it together with --view or --html")
        _display_kwargs(args)
        return contextlib.nullcontext()
    from convexsim import viz

    return viz.RunViewer(realtime=args.realtime, joint_frames=args.joint_frames, **_display_kwargs(args))


def _summary(model, traj, stats, path: Path, rounding: str = "") -> str:
    """The run summary: what ran, how fast (warm-up apart), solver effort, contacts, and how it ended."""
    d = stats.as_dict()
    bodies = int((~model.body_fixed).sum())
    sap = model.solver.kind == "sap"
    solver = model.solver.kind.upper() + (f" ({traj.contact_model})" if sap else "")
    # The compilation time is part of the wall time: say so, and that ms/step leaves it out.
    warm = (f"{d['warmup_s']:.2f} s of it compiling/loading kernels, not in ms/step"
            if d["warmup_s"] >= 0.005 else "")
    lines = [
        f"scene      {model.name}: {bodies} moving bodies, {model.ngeom} geometries",
        f"solver     {solver}, dt = {model.time_step:g} s",
        f"steps      {d['steps']} ({traj.time[-1]:.4g} s simulated) in {d['wall_time_s']:.2f} s wall, "
        f"{d['ms_per_step']:.3f} ms/step" + (f"\n           ({rounding})" if rounding else "")
        + (f"\n           ({warm})" if warm else ""),
    ] + ([f"path       {stats.path}"] if getattr(stats, "path", "") else []) + [
        _effort_line(d, sap),
        f"contacts   mean {d['mean_contacts']:.1f}, max {d['max_contacts']} per step",
        _result_line(d, traj, sap, stats),
        f"output     {path} ({traj.num_frames} frames)",
    ]
    return "\n".join(lines)


def _effort_line(d: dict, sap: bool) -> str:
    """Newton iterations (SAP) or the LCP stepper's work per step: Lemke pivots (fallback runs included)
    plus the warm start's factorizations, and how many steps the warm start solved."""
    if sap:
        return f"Newton iterations  mean {d['mean_iterations']:.2f}, max {d['max_iterations']}"
    line = (f"LCP work           mean {d['mean_iterations']:.2f}, max {d['max_iterations']} per step "
            "(Lemke pivots + warm-start factorizations)")
    warm = d.get("warm_started_steps", 0)
    return line + (f"; {warm} of {d['steps']} steps solved by the warm start" if warm else "")


def _result_line(d: dict, traj, sap: bool, stats=None) -> str:
    """How the run ended, in words that cannot contradict each other; non-converged steps in one line
    (count, first step, worst residual)."""
    n = d["unconverged_steps"]
    unconverged = (stats.unconverged_text() if hasattr(stats, "unconverged_text") else "") or \
        f"{n} step{'s' if n != 1 else ''} did not converge"
    if traj.failure:
        return f"result     STOPPED EARLY: {traj.failure}" + (f" ({unconverged} before)" if n else "")
    if n:
        hint = "; the run went on with the last iterate (--strict stops at the first)" if sap else ""
        return f"result     completed; {unconverged}{hint}"
    return "result     completed, every step converged"


def _comparison_text(a, b, names=None) -> str:
    from convexsim.io.compare import compare_trajectories, format_comparison

    return format_comparison(compare_trajectories(a, b, names=names))


# ------------------------------------------------------------------------------------- validate
def _add_validate(sub) -> None:
    p = sub.add_parser("validate", help="check scene files and report every problem",
                       description="Load and compile each SCENE and report every problem (file, line, field "
                                   "path, value, what is allowed). Exit 2 if any scene has a problem.")
    p.add_argument("scenes", nargs="+", metavar="SCENE", help="scene file or shipped scene name")
    _add_unit_flag(p)
    p.set_defaults(func=cmd_validate)


def cmd_validate(args) -> int:
    from convexsim.scene import validate_scene_file

    status = EXIT_OK
    for arg in args.scenes:
        try:
            path = _resolve_scene(arg)
        except FileNotFoundError as exc:
            print(f"{arg}: {exc}", file=sys.stderr)
            status = EXIT_USAGE
            continue
        problems = validate_scene_file(path)
        if len(problems) == 1:
            status = EXIT_USAGE
            line = problems[0] if problems[0].startswith(str(path)) else f"{path}: {problems[0]}"
            print(line, file=sys.stderr)
        elif problems:
            status = EXIT_USAGE
            print(f"{path}: {len(problems)} problems", file=sys.stderr)
            for msg in problems:
                print(f"  - {msg}", file=sys.stderr)
        else:
            print(f"{path}: ok")
    return status


# ---------------------------------------------------------------------------------- import-urdf
def _add_import_urdf(sub) -> None:
    p = sub.add_parser("import-urdf", help="convert a URDF robot into a scene file",
                       description="Convert URDF (links, joints, collision geometry: primitives and OBJ/STL/PLY meshes) into "
                                   "a scene (docs/importing-models.md) and print it, or write it with --out. "
                                   "`convexsim run robot.urdf` runs a URDF file directly. Exit 2 on a bad file.")
    p.add_argument("urdf", metavar="URDF", help="the .urdf file")
    p.add_argument("--out", "-o", help="scene file to write (default: print to stdout)")
    p.add_argument("--floating-base", action="store_true",
                   help="the root link is a free body (a 'free' joint from the world) instead of welded to it")
    p.add_argument("--package-root", metavar="DIR",
                   help="folder that package:// mesh names resolve against (DIR/pkg/file, then DIR/file); "
                        "relative mesh names are tried against the URDF's folder first")
    p.set_defaults(func=cmd_import_urdf)


def cmd_import_urdf(args) -> int:
    from convexsim.scene import SceneError, load_scene, scene_from_dict
    from convexsim.scene.urdf import UrdfError, urdf_to_scene

    path = Path(args.urdf)
    if path.suffix.lower() != ".urdf":
        print(f"{path}: expected a .urdf file", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.floating_base or args.package_root:
            try:
                data = urdf_to_scene(_shipped_or_given(args.urdf), floating_base=args.floating_base,
                                     package_root=args.package_root)
            except UrdfError as exc:
                raise SceneError(exc.problems, str(path)) from None
            spec = scene_from_dict(data, str(path))
        else:
            spec = load_scene(path)
    except SceneError as exc:
        print(_error_text(exc), file=sys.stderr)
        return EXIT_USAGE
    return _write_imported(spec, f"# {spec.name}: imported from {path.name} by `convexsim import-urdf`.\n", args.out)


# ---------------------------------------------------------------------------------- import-mjcf
def _add_import_mjcf(sub) -> None:
    p = sub.add_parser("import-mjcf", help="convert a MuJoCo (MJCF) model into a scene file",
                       description="Compile an MJCF file with MuJoCo (pip install 'convexsim[mjcf]'), convert its "
                                   "bodies, joints, colliding geoms, position actuators and welds/joint couplings "
                                   "into a scene (docs/importing-models.md) and print it, or write it with --out. "
                                   "The scene runs without MuJoCo. Exit 2 on a file that cannot be imported.")
    p.add_argument("mjcf", metavar="MJCF", help="the MuJoCo .xml file")
    p.add_argument("--out", "-o", help="scene file to write (default: print to stdout)")
    p.add_argument("--keyframe", metavar="NAME", help="start from this <key>'s qpos, qvel and ctrl (default: qpos0, "
                   "at rest, ctrl 0)")
    p.set_defaults(func=cmd_import_mjcf)


def cmd_import_mjcf(args) -> int:
    from convexsim.scene import SceneError, scene_from_dict
    from convexsim.scene.mjcf import MjcfError, mjcf_to_scene

    path = _shipped_or_given(args.mjcf)
    try:
        try:
            data = mjcf_to_scene(path, keyframe=args.keyframe)
        except MjcfError as exc:
            raise SceneError(exc.problems, str(path)) from None
        spec = scene_from_dict(data, str(path))
    except SceneError as exc:
        print(_error_text(exc), file=sys.stderr)
        return EXIT_USAGE
    start = f"keyframe {args.keyframe!r}" if args.keyframe else "qpos0 (no keyframe)"
    return _write_imported(spec, f"# {spec.name}: imported from {path.name} by `convexsim import-mjcf`, starting "
                           f"from {start}.\n", args.out)


def _shipped_or_given(name: str) -> Path:
    """The file a user means (a path, or one under the shipped scenes folder: ``scenes/robots/...`` works
    from any directory), or the path as given when there is none (the importer reports it)."""
    from convexsim.scene import resolve_scene_path

    try:
        return resolve_scene_path(name)
    except FileNotFoundError:
        return Path(name)


def _write_imported(spec, header: str, out: str | None) -> int:
    """Print an imported scene, or write it to ``out`` with mesh file paths made relative to its folder."""
    from convexsim.scene import dump_scene

    if out:
        spec = _mesh_files_relative_to(spec, Path(out).resolve().parent)
        Path(out).write_text(header + dump_scene(spec), encoding="utf-8")
        print(f"wrote {out}")
    else:
        sys.stdout.write(header + dump_scene(spec))
    return EXIT_OK


def _mesh_files_relative_to(spec, folder: Path):
    """The scene with every mesh ``file`` (absolute after an import) written relative to ``folder``
    (a scene's mesh files are found relative to the scene file's folder)."""
    import os

    bodies = []
    for body in spec.bodies:
        geoms = [g.model_copy(update={"file": os.path.relpath(g.file, folder)})
                 if getattr(g, "file", None) and Path(g.file).is_absolute() else g for g in body.geometries]
        bodies.append(body.model_copy(update={"geometries": geoms}))
    return spec.model_copy(update={"bodies": bodies})


# --------------------------------------------------------------------------------------- scenes
def _add_scenes(sub) -> None:
    p = sub.add_parser("scenes", help="list the shipped scenes",
                       description="The shipped scenes (usable by name: `convexsim run box_stack`).")
    p.set_defaults(func=cmd_scenes)


def cmd_scenes(args) -> int:
    from convexsim.scene import list_scenes

    rows = list_scenes()
    width = max((len(r[0]) for r in rows), default=10)
    for name, description, path in rows:
        print(f"{name:<{width}}  {description}")
    return EXIT_OK


# ----------------------------------------------------------------------------------------- info
def _add_info(sub) -> None:
    p = sub.add_parser("info", help="describe a trajectory file",
                       description="What a trajectory file (.npz, docs/trajectory-format.md) holds.")
    p.add_argument("trajectory", metavar="TRAJ")
    p.set_defaults(func=cmd_info)


def cmd_info(args) -> int:
    import numpy as np

    from convexsim.io import load_trajectory

    t = load_trajectory(args.trajectory)
    n_contacts = np.diff(t.contact_offsets)
    meta = t.metadata
    lines = [
        f"file        {args.trajectory}",
        f"solver      {t.solver_kind} ({t.contact_model}), dt = {t.time_step:g} s",
        f"frames      {t.num_frames}, t = {t.time[0]:.4g} .. {t.time[-1]:.4g} s",
        f"bodies      {t.num_bodies}: {', '.join(map(str, t.body_names[:8]))}"
        + (" ..." if t.num_bodies > 8 else ""),
        f"iterations  mean {t.solver_iterations[1:].mean() if t.num_frames > 1 else 0:.2f}, "
        f"max {t.solver_iterations.max() if t.num_frames else 0}; "
        f"unconverged frames {int((~t.solver_converged).sum())}",
        f"contacts    {int(t.contact_offsets[-1])} in all, max {int(n_contacts.max()) if n_contacts.size else 0} per frame",
    ]
    number = lambda x: isinstance(x, (int, float)) and not isinstance(x, bool)   # noqa: E731 (metadata is free-form)
    if number(meta.get("ms_per_step")):
        warmup = meta.get("warmup_s", 0)
        warm = f" (plus {warmup:.2f} s kernel warm-up)" if number(warmup) and warmup >= 0.005 else ""
        steps = meta.get("steps", "?")
        lines.append(f"speed       {meta['ms_per_step']:.3f} ms/step over {steps if number(steps) else '?'} steps{warm}")
    if t.failure:
        status = "interrupted" if meta.get("interrupted") else "failure"
        lines.append(f"{status:<12}{t.failure}")
    if t.num_frames:
        lines.append("final state (position [m], linear velocity [m/s]):")
        for b in range(min(t.num_bodies, 10)):
            p, v = t.position[-1, b], t.linear_velocity[-1, b]
            lines.append(f"  {t.body_names[b]:<16} p = ({p[0]: .4f}, {p[1]: .4f}, {p[2]: .4f})  "
                         f"v = ({v[0]: .4f}, {v[1]: .4f}, {v[2]: .4f})")
    if t.num_frames and t.constraint_force_names.size:
        lines.append("joint and constraint forces of the last step ([N·m] or [N]; welds: force on body_b "
                     "[N] and torque [N·m] in W):")
        names = [str(n) for n in t.constraint_force_names]
        for i, name in enumerate(names[:20]):
            f = t.constraint_force[-1, i]
            val = (f"f = ({f[0]: .4g}, {f[1]: .4g}, {f[2]: .4g})  τ = ({f[3]: .4g}, {f[4]: .4g}, {f[5]: .4g})"
                   if np.any(f[1:]) else f"{f[0]: .6g}")
            lines.append(f"  {name:<24} {val}")
        if len(names) > 20:
            lines.append(f"  ... {len(names) - 20} more (Trajectory.forces_of)")
    print("\n".join(lines))
    return EXIT_OK


# ----------------------------------------------------------------------------------------- view
def _add_view(sub) -> None:
    p = sub.add_parser("view", help="play recorded trajectories in Meshcat or export them as HTML",
                       description="Play TRAJ files in a Meshcat page (127.0.0.1 only; Ctrl-C to stop), or "
                                   "write a standalone HTML animation with --html (docs/viewer.md).")
    p.add_argument("trajectories", nargs="+", metavar="TRAJ")
    p.add_argument("--html", help="write a standalone HTML file instead of serving")
    p.add_argument("--layout", choices=["auto", "overlay", "offset"], default="auto",
                   help="with two trajectories: second one translucent in place (overlay) or shifted (offset); "
                        "auto: offset when they agree to the eye or are different scenes")
    p.add_argument("--labels", nargs="+", help="legend labels, one per trajectory")
    p.add_argument("--port", type=int, help="HTTP port of the viewer (default: a free port)")
    p.add_argument("--joint-frames", action="store_true",
                   help="draw each link's joint frame and axis (scenes with joints)")
    _add_display_flags(p)
    p.set_defaults(func=cmd_view)


def cmd_view(args) -> int:
    from convexsim import viz
    from convexsim.io import load_trajectory

    trajs = [load_trajectory(p) for p in args.trajectories]
    # Runs of different scenes are refused unless --layout offset (the error names the files).
    from convexsim.viz.playback import check_comparable

    check_comparable(trajs, list(args.trajectories), args.layout)
    labels = args.labels           # None: the playback's labels ("SAP (sap)", "LCP", …)
    if args.html:
        path = viz.export_html(trajs, args.html, labels=labels, layout=args.layout, joint_frames=args.joint_frames,
                               **_display_kwargs(args))
        print(f"HTML animation: {path} ({Path(path).stat().st_size / 1e6:.2f} MB)")
        return EXIT_OK
    viz.serve_trajectories(trajs, labels=labels, layout=args.layout, port=args.port,
                           joint_frames=args.joint_frames, **_display_kwargs(args))
    return EXIT_OK


# -------------------------------------------------------------------------------------- compare
def _add_compare(sub) -> None:
    from convexsim.io import QUANTITIES

    p = sub.add_parser("compare", help="differences between two trajectories of the same scene",
                       description="Per-body differences A − B of two runs of the same scene (position, "
                                   "orientation, velocities, net contact force): max and when it happened, "
                                   "RMS, final. With --tol: exit 0 when the largest difference of --quantity "
                                   "is within the tolerance, 1 when not (2: bad input).")
    p.add_argument("a", metavar="TRAJ_A")
    p.add_argument("b", metavar="TRAJ_B")
    p.add_argument("--tol", type=float, metavar="X",
                   help="pass/fail tolerance on the largest difference, in the quantity's unit (position: m)")
    p.add_argument("--quantity", choices=QUANTITIES, default="position",
                   help="the quantity --tol applies to (default: position [m])")
    p.add_argument("--all-bodies", action="store_true", help="also list bodies with no difference at all")
    p.set_defaults(func=cmd_compare)


def cmd_compare(args) -> int:
    from convexsim.io import load_trajectory
    from convexsim.io.compare import check_tolerance, compare_trajectories, format_comparison

    a, b = load_trajectory(args.a), load_trajectory(args.b)
    try:
        comparison = compare_trajectories(a, b, names=(args.a, args.b))
    except ValueError as exc:
        raise ValueError(f"{args.a} and {args.b}: {exc}") from None
    print(format_comparison(comparison, include_fixed=args.all_bodies))
    if args.tol is None:
        return EXIT_OK
    ok, verdict = check_tolerance(comparison, args.tol, args.quantity)
    print(verdict)
    return EXIT_OK if ok else EXIT_FAILURE


# ---------------------------------------------------------------------------------------- bench
def _add_bench(sub) -> None:
    p = sub.add_parser("bench", help="speed figures on the benchmark scenes and random SAP problems",
                       description="Per-step averages over each scene's window (default: sphere_drop and "
                                   "box_stack for 0.5 s, pile_100 for its 1 s): ms/step, Newton iterations, "
                                   "contacts and those with φ < 0, factorization and analysis ms, fill "
                                   "(nonzero blocks of L / of H).")
    p.add_argument("--scenes", "--scene", nargs="*", metavar="SCENE", help="scene names or files (default: a short standard set)")
    p.add_argument("--all", action="store_true", help="the standard set plus pile_500, pile_1000, pile_mixed")
    p.add_argument("--duration", type=float, help="simulated time per scene [s] (default: each scene's window)")
    p.add_argument("--linear-solver", choices=["sparse", "block", "dense"],
                   help="force the SAP linear solver (sparse = supernodal, block = one block at a time)")
    p.add_argument("--prune", action=argparse.BooleanOptionalAction, default=None,
                   help="factor the Newton matrix only in its nonzero blocks (--prune) or in the whole "
                        "clique graph (--no-prune); default: convexsim.sap.linalg.PRUNE_PATTERN")
    _add_slip_curvature_flag(p)
    p.add_argument("--no-solver-bench", action="store_true", help="skip the random SAP problem scaling table")
    p.add_argument("--vs", metavar="ENGINES", help="also time the scenes in other engines, e.g. drake,mujoco "
                   "(needs pip install -e '.[compare]'; docs/performance.md)")
    p.add_argument("--startup", action="store_true",
                   help="only the start-up figures: wall time of --help, scenes, validate and a 10-step run "
                        "in fresh interpreters, and loading a 1000-body scene file (docs/performance.md)")
    p.add_argument("--compiled", action="store_true",
                   help="only the compiled-step table: CPU ms/step of the compiled run loop against the "
                        "reference Python path on the small scenes, or on --scenes (docs/performance.md)")
    p.add_argument("--no-lcp-bench", action="store_true",
                   help="skip the LCP pile table (sphere_pile, mixed_clutter with --solver lcp; minutes; "
                        "only run without --scenes)")
    p.set_defaults(func=cmd_bench)


def cmd_bench(args) -> int:
    if args.startup:
        from convexsim.tools import bench_startup

        return bench_startup.main()
    from convexsim.tools import bench as sap_bench

    if args.compiled or not (args.vs or args.scenes):
        chosen = sap_bench.COMPILED_SCENES
        if args.compiled and args.scenes:
            chosen = [(s, args.duration or 0.5) for s in args.scenes]
        elif args.duration is not None:
            chosen = [(s, args.duration) for s, _ in chosen]
        chosen = [(s if s == "ten_spheres" else _resolve_scene(s), d) for s, d in chosen]
        print(sap_bench.format_compiled_table(sap_bench.compiled_comparison(chosen)), flush=True)
        if args.compiled:
            return EXIT_OK
        print()
    if args.vs:
        from convexsim.tools.compare_engines.bench import DEFAULT_SCENES, bench_vs

        chosen = [(s, args.duration) for s in args.scenes] if args.scenes else list(DEFAULT_SCENES)
        return bench_vs([(_resolve_scene(s), s, d) for s, d in chosen], args.vs)
    if args.scenes:
        scenes = [(s, args.duration) for s in args.scenes]
    else:
        scenes = [(s, args.duration if args.duration is not None else d) for s, d in sap_bench.DEFAULT_SCENES]
        if args.all:
            scenes += [(s, args.duration) for s in sap_bench.PILE_SCENES if s != "pile_100"]
    if args.prune is not None:
        from convexsim.sap import linalg

        linalg.PRUNE_PATTERN = args.prune
    print(sap_bench.scene_table_header())
    reasons = {}
    for name, dur in scenes:
        row = sap_bench.scene_benchmark(_resolve_scene(name), duration=dur, linear_solver=args.linear_solver,
                                        slip_curvature=args.slip_curvature)
        print(sap_bench.scene_row(row), flush=True)
        if row["path_reasons"]:
            reasons[row["scene"]] = row["path_reasons"]
    print(sap_bench.scene_table_legend(), flush=True)
    for scene, why in reasons.items():
        print(f"  {scene}: steps on the reference path: {'; '.join(why)}", flush=True)
    if not args.scenes:
        from convexsim.tools import bench_lcp

        print()
        print(bench_lcp.format_lcp_small_table(bench_lcp.run_lcp_small_bench()), flush=True)
        if not args.no_lcp_bench:
            print()
            bench_lcp.main()
    if not args.no_solver_bench:
        print()
        sap_bench.main([])
    return EXIT_OK


# ----------------------------------------------------------------------------------------- study
def _add_study(sub) -> None:
    from convexsim.studies.cli import DESCRIPTION, add_arguments

    p = sub.add_parser("study", help="run a parameter study (sweeps, metrics, plots, report)",
                       description=DESCRIPTION)
    add_arguments(p)
    p.set_defaults(func=cmd_study)


def cmd_study(args) -> int:
    from convexsim.studies.cli import run

    return int(run(args) or 0)


# -------------------------------------------------------------------------------------- examples
def _add_examples(sub) -> None:
    p = sub.add_parser("examples", help="small worked examples with known answers (LCP)",
                       description="Small worked examples whose answers are known in closed form.")
    which = p.add_subparsers(dest="example", metavar="EXAMPLE", required=True)
    lcp = which.add_parser("lcp", help="textbook LCP examples solved by Lemke's algorithm (docs/lcp.md)",
                           description="Falling and sliding blocks, the Berard–Trinkle particle and a "
                                       "bouncing particle (Moreau midpoint), each one LCP per step solved by Lemke's "
                                       "algorithm (convexsim.lcp.seeds; docs/lcp.md).")
    lcp.set_defaults(func=cmd_examples_lcp)


def cmd_examples_lcp(args) -> int:
    from convexsim.lcp import seeds

    print(seeds.report())
    return EXIT_OK


def _add_seeds(sub) -> None:
    p = sub.add_parser("seeds", help="deprecated: use `convexsim examples lcp`",
                       description="Deprecated alias of `convexsim examples lcp` (kept for one release).")
    p.set_defaults(func=cmd_seeds)


def cmd_seeds(args) -> int:
    print("convexsim seeds: deprecated, use `convexsim examples lcp` (same output)", file=sys.stderr)
    return cmd_examples_lcp(args)


# ---------------------------------------------------------------------------------------- warmup
def _add_warmup(sub) -> None:
    p = sub.add_parser("warmup", help="compile the numba kernels of every solver path now",
                       description="Compile the numba kernels of every solver path (or load them from the "
                                   "disk cache) on tiny scenes, so that no later run compiles. (A run compiles "
                                   "the kernels of its own step on first use, the same way.) The shared "
                                   "kernels (collision, the Newton loop, tree dynamics, Lemke) compile first, "
                                   "then the steps, each stage in parallel processes (one per core); a "
                                   "progress line every 10 s while they compile. Later calls load them from "
                                   "the cache in a few seconds.")
    p.add_argument("--jobs", type=int, default=None,
                   help="processes to compile in (default: one per core)")
    p.add_argument("--only", nargs="+", default=None, metavar="GROUP",
                   help="only these parts: sap-bodies, sap-trees, sap-reference, lcp-bodies, lcp-trees")
    p.add_argument("--check", action="store_true",
                   help="then run every shipped scene a few steps with SAP and LCP and fail (exit 1) if any "
                        "compiled a kernel the warm-up missed (`make test` runs this)")
    p.set_defaults(func=cmd_warmup)


def cmd_warmup(args) -> int:
    from convexsim.tools.kernels import uncached_kernels
    from convexsim.tools.warmup import warm_up

    before = set(uncached_kernels())
    if before:
        print(f"warmup: compiling {len(before)} kernels (first run or changed sources; cached for later runs)…",
              file=sys.stderr, flush=True)
    try:
        seconds = warm_up(progress=True, jobs=args.jobs, groups=args.only)
    except ValueError as exc:
        print(f"warmup: {exc}", file=sys.stderr)
        return EXIT_USAGE
    compiled = len(before - set(uncached_kernels()))
    what = f"compiled {compiled} kernels" if compiled else "kernels already compiled (loaded from the cache)"
    print(f"warmup: {what} in {seconds:.1f} s")
    if args.check:
        import subprocess

        # A fresh process: kernels this one compiled or loaded are in memory and would hide a miss.
        code = subprocess.call([sys.executable, "-c",
                                "import sys; from convexsim.tools.warmup import check_shipped_scenes; "
                                "sys.exit(check_shipped_scenes())"])
        return EXIT_OK if code == 0 else EXIT_FAILURE
    return EXIT_OK


def _add_learn(sub) -> None:
    from convexsim.learn.cli import add_parser

    add_parser(sub)


# ------------------------------------------------------------------------------------------ main
def _add_identify(sub) -> None:
    from convexsim.identify.cli import add_parser  # convexsim identify (docs/identify.md)

    add_parser(sub)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``convexsim`` command."""
    import convexsim

    parser = argparse.ArgumentParser(prog="convexsim", description="Convex compliant-contact simulation of "
                                     "rigid bodies (SAP) with an LCP reference. `convexsim COMMAND --help` "
                                     "for each command.", epilog="Exit status: 0 ok, 1 simulation failed or "
                                     "check not passed, 2 bad usage or input, 130 interrupted.")
    parser.add_argument("--version", action="version", version=f"convexsim {convexsim.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in (_add_run, _add_validate, _add_scenes, _add_info, _add_view, _add_compare, _add_bench,
                _add_study, _add_examples, _add_warmup, _add_seeds, _add_learn, _add_identify, _add_import_urdf,
                _add_import_mjcf):
        add(sub)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Scene warnings as one plain line on stderr ("warning: …"), other warnings as Python shows them."""
    from convexsim.scene import SceneWarning

    if issubclass(category, SceneWarning):
        print(f"warning: {message}", file=sys.stderr, flush=True)
    else:
        _PYTHON_SHOWWARNING(message, category, filename, lineno, file, line)


_PYTHON_SHOWWARNING = warnings.showwarning


def _error_text(exc: BaseException) -> str:
    """The message of a user-input error; a scene error with one problem is that one line."""
    problems = getattr(exc, "problems", None)
    if isinstance(problems, list) and len(problems) == 1:
        return str(problems[0])
    return str(exc)


def _skip_final_collection() -> None:
    """At interpreter exit, freeze the objects alive (``gc.freeze``) so that the final garbage collection
    does not traverse the hundreds of thousands numba creates: ~0.2 s CPU less at the end of a `run`. Exit
    handlers and weakref finalizers still run; only cycles still alive at exit are left to the OS."""
    import atexit
    import gc

    if not getattr(_skip_final_collection, "done", False):
        atexit.register(gc.freeze)
        _skip_final_collection.done = True   # type: ignore[attr-defined]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status (see the module docstring)."""
    _skip_final_collection()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:            # --help, --version (0) and usage errors (2)
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USAGE
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        if getattr(args, "no_unit_warnings", False):
            from convexsim.scene import UnitWarning

            warnings.simplefilter("ignore", UnitWarning)
        try:
            return args.func(args)
        except SystemExit as exc:        # a verb that parses its own arguments (learn): --help or usage
            return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USAGE
        except BrokenPipeError:          # `convexsim … | head`: the reader is gone; stop quietly
            import os

            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_OK
        except (FileNotFoundError, ValueError, OSError) as exc:   # SceneError, TrajectoryFormatError too
            print(f"convexsim {args.command}: error: {_error_text(exc)}", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt as exc:
            from convexsim.simulate import TerminationRequest

            if isinstance(exc, TerminationRequest):
                print(f"terminated ({exc.signal_name})", file=sys.stderr)
                return EXIT_TERMINATED
            print("interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
