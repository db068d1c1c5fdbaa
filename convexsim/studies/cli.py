"""``convexsim study SPEC [--jobs N] [--scheduler tcp://HOST:PORT] [--out DIR] [--reduced] [--quiet]``.

The main CLI's ``study`` subcommand takes the arguments of ``add_arguments`` (options in any order,
``--help``) and calls ``run``; ``python -m convexsim.studies`` runs ``cli_main`` directly.

Exit status: 0 when the study completed (failed runs are data and are listed; ``--strict`` makes them
exit 1), 2 for a malformed study file, bad arguments or an unreachable ``--scheduler``, 130 when
interrupted (finished runs are kept: run the same command again to resume).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the study command's arguments to ``p`` (the main CLI's ``study`` subparser, or a parser of
    its own); returns ``p``."""
    p.add_argument("spec", help="study file (YAML), e.g. scenes/studies/rest_penetration_vs_stiffness.yaml")
    p.add_argument("--jobs", "-j", type=int, default=None, help="local worker processes (default: CPU count; "
                   "1 runs in this process)")
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                   help="run on this Dask scheduler instead of the local pool (needs convexsim[cluster])")
    p.add_argument("--out", default=None, metavar="DIR", help="output folder (default out/studies/<name>)")
    p.add_argument("--reduced", action="store_true", help="run the spec's reduced version (fewer, shorter runs)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG/SVG plots")
    p.add_argument("--strict", action="store_true", help="exit 1 when any run failed")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar, only errors")
    return p


DESCRIPTION = ("Run (or resume) a parameter study: sweeps, metrics, CSV/JSONL results, plots and a Markdown "
               "report (docs/studies.md).")


def build_parser(prog: str = "convexsim study") -> argparse.ArgumentParser:
    """The argument parser of the study command."""
    return add_arguments(argparse.ArgumentParser(prog=prog, description=DESCRIPTION))


def cli_main(argv: Sequence[str] | None = None) -> int:
    """Run the study command with ``argv`` (without the program and subcommand names); return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:  # argparse exits on --help and on usage errors
        return int(exc.code or 0)
    return run(args)


def run(args: argparse.Namespace) -> int:
    """Run the study described by parsed arguments (see ``add_arguments``); return the exit code."""
    if args.jobs is not None and args.jobs < 1:
        print(f"convexsim study: --jobs must be >= 1, got {args.jobs}", file=sys.stderr)
        return 2
    from convexsim.studies.runner import SchedulerUnreachable, run_study
    from convexsim.studies.spec import StudyError, load_study

    try:
        spec = load_study(resolve_study_path(args.spec))
    except FileNotFoundError as exc:
        print(f"convexsim study: {exc}", file=sys.stderr)
        return 2
    except StudyError as exc:
        print(f"convexsim study: invalid study file\n{exc}", file=sys.stderr)
        return 2
    try:
        res = run_study(spec, jobs=args.jobs, scheduler=args.scheduler, out_dir=args.out,
                        progress=not args.quiet, reduced=args.reduced, plots=not args.no_plots)
    except KeyboardInterrupt:
        print("\nconvexsim study: interrupted; finished runs are saved, run the same command again to resume",
              file=sys.stderr)
        return 130
    except (StudyError, SchedulerUnreachable) as exc:       # a refused spec or --scheduler; bugs propagate
        print(f"convexsim study: {exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        _print_summary(res)
    return 1 if (args.strict and (res.failed or res.retryable)) else 0


def resolve_study_path(arg: str) -> Path:
    """The study file ``arg`` names: a path as given (relative to the working directory), else the same
    path under the shipped scenes folder (a leading ``scenes/`` dropped), else a shipped study name
    (``scenes/studies/<arg>.yaml``). FileNotFoundError naming the closest study file otherwise."""
    from convexsim.scene import did_you_mean, shipped_scenes_dir

    path = Path(arg)
    if path.exists():
        return path
    root = shipped_scenes_dir()
    tails = [path] + ([Path(*path.parts[1:])] if len(path.parts) > 1 and path.parts[0] == root.name else [])
    # Like a scene name: "sliding_hop", "sliding_hop.yaml", "studies/sliding_hop",
    # "identification/mu_vs_noise" (a study in a subfolder of scenes/studies).
    for tail in list(tails):
        named = tail if tail.suffix in (".yaml", ".yml") else tail.with_name(tail.name + ".yaml")
        tails += [named] + ([Path("studies") / named] if not named.parts[0] == "studies" else [])
    for tail in tails:
        if not path.is_absolute() and (root / tail).is_file():
            return root / tail
    folder = path.parent if len(path.parts) > 1 and path.parent.is_dir() else root / "studies"
    names = [p.name for p in folder.glob("*.y*ml")]
    hint = did_you_mean(path.name if path.suffix else f"{path.name}.yaml", names)
    listing = f"; study files in {folder}: {', '.join(sorted(names))}" if names else ""
    raise FileNotFoundError(f"study file not found: {arg}{hint}{listing}")


def _print_summary(res) -> None:
    retry = f", {res.retryable} retryable (worker lost; run again to retry)" if res.retryable else ""
    print(f"study {res.spec.name}: {res.total} runs ({res.executed} executed, {res.skipped} resumed, "
          f"{res.failed} failed{retry})")
    print(f"  table:   {res.csv}")
    print(f"  records: {res.jsonl}")
    if res.report is not None:
        print(f"  report:  {res.report}")
    if res.plots:
        print(f"  plots:   {len(res.plots)} files in {res.plots[0].parent}")
    for r in res.records:
        if r.get("status") != "ok":
            print(f"  {r.get('status')} run {r['index']} {r.get('params')}: {str(r.get('error', ''))[:160]}")


__all__ = ["cli_main", "build_parser", "add_arguments", "run", "DESCRIPTION", "resolve_study_path"]
