"""`convexsim run` (simulate a scene, write its trajectory, optionally stream it to a viewer) and
`convexsim view` (play recorded trajectories or export them as HTML)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

from convexsim.cli.common import (EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED, add_command,
                                  add_display_flags, add_slip_curvature_flag, add_unit_flag, display_kwargs,
                                  resolve_scene, say, with_slip_curvature)
from convexsim.errors import InputError


# ----------------------------------------------------------------------------------------- run
def add_run(sub) -> None:
    p = add_command(sub, "run", cmd_run, "simulate a scene and write a trajectory file",
                    "Simulate SCENE (a YAML file or a shipped scene name) and write the "
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
    add_display_flags(p)
    p.add_argument("--strict", action="store_true", help="stop at the first SAP step that does not converge")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no summary")
    add_slip_curvature_flag(p)
    add_unit_flag(p)

def _check_time_flags(args) -> None:
    """--duration and --time-step must be finite and > 0; errors name the flag, not the scene file."""
    from convexsim.simulate import check_times

    check_times({"--duration": args.duration, "--time-step": args.time_step})


def _step_plan(args, scene_path: Path, model, duration: float) -> tuple[int, str]:
    """(number of steps, note about rounding or ''); InputError when the run would take no step."""
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
    scene_path = resolve_scene(args.scene)
    kinds = ["sap", "lcp"] if args.solver == "both" else [args.solver]
    out = Path(args.out) if args.out else Path(f"{scene_path.stem}.npz")
    metadata = {"command": " ".join(sys.argv)}
    trajectories, status = [], EXIT_OK

    if "lcp" in kinds:          # a scene beyond the LCP stepper is refused before anything runs (or compiles)
        from convexsim.lcp.capacity import check_lcp_capacity

        check_lcp_capacity(*prepare(scene_path, duration=args.duration, time_step=args.time_step, solver="lcp",
                                    overrides=with_slip_curvature(args.overrides, args.slip_curvature))[:2])

    def prepared(kind):
        model, state, duration = prepare(scene_path, duration=args.duration, time_step=args.time_step,
                                         contact_model=args.contact_model, solver=kind,
                                         overrides=with_slip_curvature(args.overrides, args.slip_curvature))
        _, rounding = _step_plan(args, scene_path, model, duration)
        if rounding:
            say(f"note: {rounding}", file=sys.stderr)
        from convexsim.tools.background_warmup import wait_for_background_warmup
        from convexsim.tools.warmup import ensure_warm

        waited = wait_for_background_warmup(model, model.solver.kind)   # `make demo`'s warm-up of the others
        compiled = ensure_warm(model, model.solver.kind)   # a first run compiles its own step's kernels, in parallel
        compiled = ((waited or 0.0) + (compiled or 0.0)) or None
        target = out.with_name(f"{out.stem}_{model.solver.kind}{out.suffix}") if len(kinds) > 1 else out
        return model, state, duration, rounding, target, compiled

    def runner(model, state, duration, progress=not args.quiet):
        """The run as a function of its step callback (the lockstep run calls it with its own)."""
        return lambda callback: run_model(model, state, duration=duration, record_every=args.record_every,
                                          progress=progress, step_callback=callback, strict=args.strict,
                                          metadata=metadata)

    def keep(run, result):
        nonlocal status
        model, _, _, rounding, target, compiled = run
        traj, stats = result
        save_trajectory(target, traj)
        trajectories.append(traj)
        say(_summary(model, traj, stats, target, rounding, compiled), quiet=args.quiet)
        if traj.failure:        # the cause is in the summary's result line: said once, here what to do
            say(f"FAILED: the {model.solver.kind.upper()} run stopped early (the summary's result line says why); "
                f"the {traj.num_frames} frames recorded before it are in {target}.\n"
                f"{failure_hint(model, traj.failure)}", file=sys.stderr)
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
        say(_comparison_text(*trajectories, names=("SAP run", "LCP run")), quiet=args.quiet)
    if args.html:
        from convexsim import viz

        path = viz.export_html(trajectories, args.html, layout=args.layout,   # labels as on the --view page
                               joint_frames=args.joint_frames, **display_kwargs(args))
        say(f"HTML animation: {path} ({Path(path).stat().st_size / 1e6:.2f} MB)", quiet=args.quiet)
    if viewer is not None:
        if args.no_wait:               # publish the playback (for scripts), but announce no URL about to die
            viewer.out, out_stream = io.StringIO(), viewer.out
            try:
                viewer.finish(trajectories, wait=False, layout=args.layout)
            finally:
                viewer.out = out_stream
            say("viewer stopped (--no-wait)", quiet=args.quiet)
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
    say(f"{what}: {exc}; the {traj.num_frames} frames recorded so far are in {target} "
           "(marked interrupted)", file=sys.stderr)
    return EXIT_TERMINATED if exc.terminated is not None else EXIT_INTERRUPTED


def _run_viewer(args):
    """One viewer for the whole `run --view` command (a context manager; a no-op without --view)."""
    import contextlib

    if not getattr(args, "view", False):
        if getattr(args, "realtime", False):
            raise InputError("--realtime paces the live viewer: use it together with --view")
        if getattr(args, "no_wait", False):
            raise InputError("--no-wait only applies to --view")
        if getattr(args, "joint_frames", False) and not getattr(args, "html", None):
            raise InputError("--joint-frames draws in the viewer: use it together with --view or --html")
        drawn = [f for f, on in (("--forces", getattr(args, "forces", "auto") != "auto"),
                                 ("--force-scale", getattr(args, "force_scale", None) is not None),
                                 ("--contacts", getattr(args, "contacts", "on") != "on")) if on]
        if drawn and not getattr(args, "html", None):
            raise InputError(f"{drawn[0]} changes what the viewer draws: use it together with --view or --html")
        display_kwargs(args)
        return contextlib.nullcontext()
    from convexsim import viz

    return viz.RunViewer(realtime=args.realtime, joint_frames=args.joint_frames, **display_kwargs(args))


def failure_hint(model, failure: str = "") -> str:
    """What to try after a run that stopped early (``failure``: the trajectory's failure message)."""
    from convexsim.stepping.types import SINGULAR_MASS_CAUSE

    if SINGULAR_MASS_CAUSE in failure:
        return ("Try: check the named joints' offsets and their links' masses and inertias for a wrong unit "
                "(scenes are in m, kg, kg·m²); a smaller --time-step does not help here.")
    if model.solver.kind == "lcp":
        return ("Try: --solver sap (one convex problem per step, whatever the number of contacts), a smaller "
                "scene (README: which scenes the LCP stepper handles), or a smaller --time-step.")
    return "Try: a smaller --time-step (the result line names the step and the cause)."


def _kernel_time_text(warmup_s: float, compiled_s: float | None) -> str:
    """How the kernels' time relates to this run's wall time, in one statement that cannot contradict the
    "compiled in N s" line printed before the run: that compilation came before the run (not in its wall
    time); what the run itself spent loading (or compiling) kernels is part of its wall time, not of ms/step."""
    if not compiled_s:
        return f"{warmup_s:.2f} s of it compiling/loading kernels, not in ms/step" if warmup_s >= 0.005 else ""
    text = f"{compiled_s:.1f} s compiling kernels before the run, not in this wall time"
    return text + (f"; {warmup_s:.2f} s of this wall time loading them, not in ms/step" if warmup_s >= 0.005 else "")


def _summary(model, traj, stats, path: Path, rounding: str = "", compiled_s: float | None = None) -> str:
    """The run summary: what ran, how fast (warm-up apart), solver effort, contacts, and how it ended."""
    d = stats.as_dict()
    bodies = int((~model.body_fixed).sum())
    sap = model.solver.kind == "sap"
    solver = model.solver.kind.upper() + (f" ({traj.contact_model})" if sap else "")
    warm = _kernel_time_text(d["warmup_s"], compiled_s)
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

    return format_comparison(compare_trajectories(a, b, names=names),
                             more_hint="`convexsim compare A.npz B.npz --all-bodies` lists them")

# ----------------------------------------------------------------------------------------- view
def add_view(sub) -> None:
    p = add_command(sub, "view", cmd_view, "play recorded trajectories in Meshcat or export them as HTML",
                    "Play TRAJ files in a Meshcat page (127.0.0.1 only; Ctrl-C to stop), or "
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
    add_display_flags(p)


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
                               **display_kwargs(args))
        print(f"HTML animation: {path} ({Path(path).stat().st_size / 1e6:.2f} MB)")
        return EXIT_OK
    viz.serve_trajectories(trajs, labels=labels, layout=args.layout, port=args.port,
                           joint_frames=args.joint_frames, **display_kwargs(args))
    return EXIT_OK
