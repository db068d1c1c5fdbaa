"""``convexsim study SPEC [--jobs N] [--scheduler tcp://HOST:PORT] [--out DIR] [--quiet]``.

The main CLI delegates the ``study`` subcommand's arguments to ``cli_main``; ``python -m
convexsim.studies`` runs it directly. Exit status: 0 when the study completed (failed runs are data and
are listed; ``--strict`` makes them exit 1), 2 for a malformed study file, bad arguments or an unreachable
``--scheduler``, 130 when
interrupted (finished runs are kept: run the same command again to resume).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser(prog: str = "convexsim study") -> argparse.ArgumentParser:
    """The argument parser of the study command."""
    p = argparse.ArgumentParser(prog=prog, description="Run (or resume) a parameter study: sweeps, metrics, "
                                "CSV/JSONL results, plots and a Markdown report.")
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


def cli_main(argv: Sequence[str] | None = None) -> int:
    """Run the study command with ``argv`` (without the program and subcommand names); return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:  # argparse exits on --help and on usage errors
        return int(exc.code or 0)
    if args.jobs is not None and args.jobs < 1:
        print(f"convexsim study: --jobs must be >= 1, got {args.jobs}", file=sys.stderr)
        return 2
    from convexsim.studies.runner import run_study
    from convexsim.studies.spec import StudyError, load_study

    try:
        spec = load_study(args.spec)
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
    except (OSError, RuntimeError, ValueError) as exc:
        print(f"convexsim study: {exc}", file=sys.stderr)
        return 2
    if not args.quiet:
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
    return 1 if (args.strict and (res.failed or res.retryable)) else 0


__all__ = ["cli_main", "build_parser"]
