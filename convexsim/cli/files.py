"""Commands that read scene and trajectory files: `validate`, `scenes`, `info` and `compare`."""

from __future__ import annotations

import sys

from convexsim.cli.common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, add_command, add_unit_flag, resolve_scene


# ------------------------------------------------------------------------------------- validate
def add_validate(sub) -> None:
    p = add_command(sub, "validate", cmd_validate, "check scene files and report every problem",
                    "Load and compile each SCENE and report every problem (file, line, field "
                    "path, value, what is allowed). Exit 2 if any scene has a problem.")
    p.add_argument("scenes", nargs="+", metavar="SCENE", help="scene file or shipped scene name")
    add_unit_flag(p)


def cmd_validate(args) -> int:
    from convexsim.scene import validate_scene_file

    status = EXIT_OK
    for arg in args.scenes:
        try:
            path = resolve_scene(arg)
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

# --------------------------------------------------------------------------------------- scenes
def add_scenes(sub) -> None:
    add_command(sub, "scenes", cmd_scenes, "list the shipped scenes",
                "The shipped scenes (usable by name: `convexsim run box_stack`).")


def cmd_scenes(args) -> int:
    from convexsim.scene import list_scenes

    rows = list_scenes()
    width = max((len(r[0]) for r in rows), default=10)
    for name, description, path in rows:
        print(f"{name:<{width}}  {description}")
    return EXIT_OK


# ----------------------------------------------------------------------------------------- info
def add_info(sub) -> None:
    p = add_command(sub, "info", cmd_info, "describe a trajectory file",
                    "What a trajectory file (.npz, docs/trajectory-format.md) holds.")
    p.add_argument("trajectory", metavar="TRAJ")


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
    if meta.get("path"):
        lines.append(f"path        {meta['path']}")       # which stepper ran (RunStats.path)
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

# -------------------------------------------------------------------------------------- compare
def add_compare(sub) -> None:
    from convexsim.io import QUANTITIES

    p = add_command(sub, "compare", cmd_compare, "differences between two trajectories of the same scene",
                    "Per-body differences A − B of two runs of the same scene (position, "
                    "orientation, velocities, net contact force): max and when it happened, "
                    "RMS, final. With --tol: exit 0 when the largest difference of --quantity "
                    "is within the tolerance, 1 when not (2: bad input).")
    p.add_argument("a", metavar="TRAJ_A")
    p.add_argument("b", metavar="TRAJ_B")
    p.add_argument("--tol", type=float, metavar="X",
                   help="pass/fail tolerance on the largest difference, in the quantity's unit (position: m)")
    p.add_argument("--quantity", choices=QUANTITIES, default="position",
                   help="the quantity --tol applies to (default: position [m])")
    p.add_argument("--all-bodies", action="store_true",
                   help="list every body (by default the 10 with the largest differences, the rest counted), "
                        "also those with no difference at all")


def cmd_compare(args) -> int:
    from convexsim.errors import InputError
    from convexsim.io import load_trajectory
    from convexsim.io.compare import MAX_BODIES, check_tolerance, compare_trajectories, format_comparison

    a, b = load_trajectory(args.a), load_trajectory(args.b)
    try:
        comparison = compare_trajectories(a, b, names=(args.a, args.b))
    except InputError as exc:
        raise InputError(f"{args.a} and {args.b}: {exc}") from None
    print(format_comparison(comparison, include_fixed=args.all_bodies,
                            max_bodies=None if args.all_bodies else MAX_BODIES, more_hint="--all-bodies lists them"))
    if args.tol is None:
        return EXIT_OK
    ok, verdict = check_tolerance(comparison, args.tol, args.quantity)
    print(verdict)
    return EXIT_OK if ok else EXIT_FAILURE
