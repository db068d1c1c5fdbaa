"""The ``convexsim`` command line: a thin layer over the Python API.

    convexsim run SCENE [--duration S] [--time-step S] [--contact-model M] [--solver sap|lcp|both]
                        [--set key=value ...] [--out FILE] [--record-every N] [--html FILE]
                        [--view] [--realtime] [--quiet] [--strict]
    convexsim validate SCENE...          all problems of each file, exit 1 if any
    convexsim scenes                     the shipped scenes with one-line descriptions
    convexsim info TRAJ                  what a trajectory file holds
    convexsim view TRAJ [TRAJ2 ...]      recorded playback in Meshcat (or --html OUT to export)
    convexsim compare TRAJ_A TRAJ_B      per-body differences of two runs of one scene
    convexsim bench                      ms/step, iterations/step, contacts/step on benchmark scenes
    convexsim study SPEC                 parameter sweeps (see docs/studies.md)
    convexsim seeds                      the seed documents' LCP examples
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143


def _print(msg: str = "", *, quiet: bool = False, file=None) -> None:
    if not quiet:
        print(msg, file=file or sys.stdout, flush=True)


def _resolve_scene(arg: str) -> Path:
    """A scene path, or the name of a shipped scene ("box_stack")."""
    path = Path(arg)
    if path.exists():
        return path
    from convexsim.scene import shipped_scene_path

    try:
        return Path(shipped_scene_path(arg))
    except (FileNotFoundError, KeyError, ValueError):
        raise FileNotFoundError(f"scene not found: {arg!r} (neither a file nor a shipped scene; "
                                f"see `convexsim scenes`)") from None


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
                   help="override a scene field by dotted path, e.g. materials.default.stiffness=1e5")
    p.add_argument("--out", help="trajectory file (default: <scene name>.npz in the current folder)")
    p.add_argument("--record-every", type=int, default=1, metavar="N", help="record every N-th step")
    p.add_argument("--html", help="also export a standalone HTML animation to this file")
    p.add_argument("--view", action="store_true",
                   help="stream the simulation to a Meshcat viewer, then serve the recorded playback of "
                        "every run on the same page until Ctrl-C")
    p.add_argument("--realtime", action="store_true", help="with --view: pace the simulation to real time")
    p.add_argument("--no-wait", action="store_true",
                   help="with --view: stop the viewer as soon as the run(s) end instead of waiting for Ctrl-C")
    p.add_argument("--strict", action="store_true", help="stop at the first SAP step that does not converge")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no summary")
    p.set_defaults(func=cmd_run)


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
    exactly like Ctrl-C: the loop ends cleanly, reports the step and time, and nothing is written."""

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
    from convexsim.simulate import _Interrupted, prepare, run_model

    _check_time_flags(args)
    scene_path = _resolve_scene(args.scene)
    kinds = ["sap", "lcp"] if args.solver == "both" else [args.solver]
    out = Path(args.out) if args.out else Path(f"{scene_path.stem}.npz")
    trajectories, status = [], EXIT_OK
    for kind in kinds:
        model, state, duration = prepare(scene_path, duration=args.duration, time_step=args.time_step,
                                         contact_model=args.contact_model, solver=kind,
                                         overrides=args.overrides)
        _, rounding = _step_plan(args, scene_path, model, duration)
        if rounding:
            _print(f"note: {rounding}", file=sys.stderr)
        target = out.with_name(f"{out.stem}_{model.solver.kind}{out.suffix}") if len(kinds) > 1 else out
        callback = viewer.live(model) if viewer is not None else None
        try:
            traj, stats = run_model(model, state, duration=duration, record_every=args.record_every,
                                    progress=not args.quiet, step_callback=callback, strict=args.strict,
                                    metadata={"command": " ".join(sys.argv)})
        except _Interrupted as exc:
            what = "terminated" if exc.terminated is not None else "interrupted"
            _print(f"{what}: {exc}; no output written (a run is saved only when it ends)", file=sys.stderr)
            return EXIT_TERMINATED if exc.terminated is not None else EXIT_INTERRUPTED
        save_trajectory(target, traj)
        trajectories.append(traj)
        _print(_summary(model, traj, stats, target, rounding), quiet=args.quiet)
        if traj.failure:
            _print(f"FAILED: {traj.failure}\n(the {traj.num_frames} frames recorded before it are in {target})",
                   file=sys.stderr)
            status = EXIT_FAILURE
    if len(trajectories) == 2:
        _print(_comparison_text(*trajectories), quiet=args.quiet)
    if args.html:
        from convexsim import viz

        path = viz.export_html(trajectories, args.html)      # labels as on the --view page
        _print(f"HTML animation: {path} ({Path(path).stat().st_size / 1e6:.2f} MB)", quiet=args.quiet)
    if viewer is not None:             # the recorded playback on the same page; Ctrl-C to stop
        viewer.finish(trajectories, wait=not args.no_wait)
    return status


def _run_viewer(args):
    """One viewer for the whole `run --view` command (a context manager; a no-op without --view)."""
    import contextlib

    if not getattr(args, "view", False):
        if getattr(args, "realtime", False):
            raise ValueError("--realtime paces the live viewer: use it together with --view")
        if getattr(args, "no_wait", False):
            raise ValueError("--no-wait only applies to --view")
        return contextlib.nullcontext()
    from convexsim import viz

    return viz.RunViewer(realtime=args.realtime)


def _summary(model, traj, stats, path: Path, rounding: str = "") -> str:
    d = stats.as_dict()
    bodies = int((~model.body_fixed).sum())
    solver = model.solver.kind.upper() + (f" ({traj.contact_model})" if model.solver.kind == "sap" else "")
    it_name = "Newton iterations" if model.solver.kind == "sap" else "LCP pivots+solves"
    lines = [
        f"scene      {model.name}: {bodies} moving bodies, {model.ngeom} geometries",
        f"solver     {solver}, dt = {model.time_step:g} s",
        f"steps      {d['steps']} ({traj.time[-1]:.4g} s simulated) in {d['wall_time_s']:.2f} s wall, "
        f"{d['ms_per_step']:.3f} ms/step" + (f"\n           ({rounding})" if rounding else ""),
        f"{it_name:<18} mean {d['mean_iterations']:.2f}, max {d['max_iterations']}",
        f"contacts   mean {d['mean_contacts']:.1f}, max {d['max_contacts']} per step",
        f"failures   {d['unconverged_steps']} unconverged steps" + (f"; stopped: {traj.failure}" if traj.failure else ""),
        f"output     {path} ({traj.num_frames} frames)",
    ]
    return "\n".join(lines)


def _comparison_text(a, b) -> str:
    try:
        from convexsim.lcp.compare import compare_trajectories, format_comparison
    except ImportError:
        return ""
    return format_comparison(compare_trajectories(a, b))


# ------------------------------------------------------------------------------------- validate
def _add_validate(sub) -> None:
    p = sub.add_parser("validate", help="check scene files and report every problem")
    p.add_argument("scenes", nargs="+")
    p.set_defaults(func=cmd_validate)


def cmd_validate(args) -> int:
    from convexsim.scene import validate_scene_file

    status = EXIT_OK
    for arg in args.scenes:
        try:
            path = _resolve_scene(arg)
        except FileNotFoundError as exc:
            print(f"{arg}: {exc}", file=sys.stderr)
            status = EXIT_FAILURE
            continue
        problems = validate_scene_file(path)
        if problems:
            status = EXIT_FAILURE
            print(f"{path}: {len(problems)} problem(s)", file=sys.stderr)
            for msg in problems:
                print(f"  - {msg}", file=sys.stderr)
        else:
            print(f"{path}: ok")
    return status


# --------------------------------------------------------------------------------------- scenes
def _add_scenes(sub) -> None:
    p = sub.add_parser("scenes", help="list the shipped scenes")
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
    p = sub.add_parser("info", help="describe a trajectory file")
    p.add_argument("trajectory")
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
    if "ms_per_step" in meta:
        lines.append(f"speed       {meta['ms_per_step']:.3f} ms/step over {meta.get('steps', '?')} steps")
    if t.failure:
        lines.append(f"failure     {t.failure}")
    if t.num_frames:
        lines.append("final state (position [m], linear velocity [m/s]):")
        for b in range(min(t.num_bodies, 10)):
            p, v = t.position[-1, b], t.linear_velocity[-1, b]
            lines.append(f"  {t.body_names[b]:<16} p = ({p[0]: .4f}, {p[1]: .4f}, {p[2]: .4f})  "
                         f"v = ({v[0]: .4f}, {v[1]: .4f}, {v[2]: .4f})")
    print("\n".join(lines))
    return EXIT_OK


# ----------------------------------------------------------------------------------------- view
def _add_view(sub) -> None:
    p = sub.add_parser("view", help="play recorded trajectories in Meshcat or export them as HTML")
    p.add_argument("trajectories", nargs="+")
    p.add_argument("--html", help="write a standalone HTML file instead of serving")
    p.add_argument("--layout", choices=["overlay", "offset"], default="overlay",
                   help="with two trajectories: second one translucent in place (overlay) or shifted (offset); "
                        "runs of different scenes need offset")
    p.add_argument("--labels", nargs="+", help="legend labels, one per trajectory")
    p.add_argument("--port", type=int, help="HTTP port of the viewer (default: a free port)")
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
        path = viz.export_html(trajs, args.html, labels=labels, layout=args.layout)
        print(f"HTML animation: {path} ({Path(path).stat().st_size / 1e6:.2f} MB)")
        return EXIT_OK
    viz.serve_trajectories(trajs, labels=labels, layout=args.layout, port=args.port)
    return EXIT_OK


# -------------------------------------------------------------------------------------- compare
def _add_compare(sub) -> None:
    p = sub.add_parser("compare", help="differences between two trajectories of the same scene")
    p.add_argument("a")
    p.add_argument("b")
    p.set_defaults(func=cmd_compare)


def cmd_compare(args) -> int:
    from convexsim.io import load_trajectory

    print(_comparison_text(load_trajectory(args.a), load_trajectory(args.b)))
    return EXIT_OK


# ---------------------------------------------------------------------------------------- bench
BENCH_SCENES = (("sphere_drop", 0.5), ("box_stack", 0.5), ("sphere_pile", 0.2), ("clutter_1000", 0.05))


def _add_bench(sub) -> None:
    p = sub.add_parser("bench", help="speed figures on the benchmark scenes and random SAP problems")
    p.add_argument("--scenes", nargs="*", help="scene names (default: a standard set)")
    p.add_argument("--duration", type=float, help="simulated time per scene [s]")
    p.add_argument("--no-solver-bench", action="store_true", help="skip the random SAP problem scaling table")
    p.add_argument("--no-lcp-bench", action="store_true",
                   help="skip the LCP pile table (sphere_pile, mixed_clutter with --solver lcp; minutes; "
                        "only run without --scenes)")
    p.set_defaults(func=cmd_bench)


def cmd_bench(args) -> int:
    from convexsim.simulate import prepare, run_model

    scenes = [(s, args.duration) for s in args.scenes] if args.scenes else list(BENCH_SCENES)
    print(f"{'scene':<16}{'bodies':>7}{'steps':>7}{'ms/step':>10}{'iter/step':>11}{'contacts/step':>15}"
          f"{'max contacts':>14}")
    for name, dur in scenes:
        model, state, duration = prepare(_resolve_scene(name), duration=dur)
        # The first steps include numba compilation: run one warm-up step outside the timing.
        run_model(model, state, duration=model.time_step)
        traj, stats = run_model(model, state, duration=duration)
        d = stats.as_dict()
        print(f"{name:<16}{int((~model.body_fixed).sum()):>7}{d['steps']:>7}{d['ms_per_step']:>10.3f}"
              f"{d['mean_iterations']:>11.2f}{d['mean_contacts']:>15.1f}{d['max_contacts']:>14}", flush=True)
    if not args.no_lcp_bench and not args.scenes:
        from convexsim.lcp import bench as lcp_bench

        print()
        lcp_bench.main()
    if not args.no_solver_bench:
        try:
            from convexsim.sap import bench as sap_bench
        except ImportError:
            return EXIT_OK
        print()
        sap_bench.main([])
    return EXIT_OK


# ----------------------------------------------------------------------------------------- study
def _add_study(sub) -> None:
    p = sub.add_parser("study", help="run a parameter study (sweeps, metrics, plots, report)",
                       add_help=False)
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_study)


def cmd_study(args) -> int:
    from convexsim.studies import cli_main

    return int(cli_main(list(args.args)) or 0)


# ----------------------------------------------------------------------------------------- seeds
def _add_seeds(sub) -> None:
    p = sub.add_parser("seeds", help="the seed documents' LCP examples", add_help=False)
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_seeds)


def cmd_seeds(args) -> int:
    from convexsim.lcp import seeds

    return int(seeds.main(list(args.args)) or 0)


# ------------------------------------------------------------------------------------------ main
def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``convexsim`` command."""
    import convexsim

    parser = argparse.ArgumentParser(prog="convexsim", description="Convex compliant-contact simulation.")
    parser.add_argument("--version", action="version", version=f"convexsim {convexsim.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in (_add_run, _add_validate, _add_scenes, _add_info, _add_view, _add_compare, _add_bench,
                _add_study, _add_seeds):
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    from convexsim.io import TrajectoryFormatError

    try:
        from convexsim.scene import SceneError
    except ImportError:  # pragma: no cover - scene package always present
        SceneError = ValueError  # type: ignore[misc,assignment]
    try:
        return args.func(args)
    except (SceneError, TrajectoryFormatError, FileNotFoundError, ValueError) as exc:
        print(f"convexsim {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt as exc:
        from convexsim.simulate import TerminationRequest

        if isinstance(exc, TerminationRequest):
            print(f"terminated ({exc.signal_name})", file=sys.stderr)
            return EXIT_TERMINATED
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
