"""``convexsim identify TRAJ [TRAJ ...] --params mu[,k,tau_d] --out DIR`` and
``convexsim identify --study SPEC --out DIR``: parsing and running (docs/identify.md)."""

from __future__ import annotations

import argparse
import sys

from convexsim.errors import InputError


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``identify`` subcommand."""
    p = subparsers.add_parser(
        "identify", help="estimate friction (and stiffness, dissipation) per material pair from a trajectory",
        description="Estimate material-pair parameters from the COM positions recorded in TRAJ (an .npz "
                    "trajectory, every step recorded) and write a report (Markdown, PNG, CSV) to DIR.")
    p.add_argument("trajectory", metavar="TRAJ", nargs="*",
                   help="trajectory file(s) (.npz); several: one parameter set fitted to all; omit with --study")
    p.add_argument("--study", metavar="SPEC", default=None,
                   help="run an identification study file instead (noise sweep, e.g. "
                        "scenes/studies/identification/mu_vs_noise.yaml)")
    p.add_argument("--reduced", action="store_true", help="with --study: its reduced sweep (tests, demos)")
    p.add_argument("--params", default="mu", help="comma-separated: mu, k, tau_d (sap model) or d "
                                                  "(lagged/similar); default mu. Tree scenes: robot "
                                                  "parameters KIND:NAME, KIND one of damping, kp, kd, mass, "
                                                  "mu (e.g. mass:iiwa_link_7,mu:box; docs/identify.md)")
    p.add_argument("--frames", default=None, metavar="START:STOP",
                   help="robot parameters: fit frames START..STOP-1 of TRAJ only (default all)")
    p.add_argument("--out", required=True, metavar="DIR", help="report folder (created)")
    p.add_argument("--method", choices=["both", "mpec", "sap"], default="both",
                   help="mpec (Berard–Trinkle, μ only), sap (least squares on SAP rollouts) or both")
    p.add_argument("--mu0", type=float, default=0.5, help="initial μ of both methods (default 0.5)")
    p.add_argument("--initial", default="", metavar="NAME=VALUE,...",
                   help="initial values of k, tau_d, d (default: the scene's combined values)")
    p.add_argument("--noise", type=float, default=None, metavar="SIGMA",
                   help="noise level of the recorded positions [m] (default: estimated from the data's scatter)")
    p.add_argument("--accept-mismatch", action="store_true",
                   help=f"exit 0 even when the fit is a model mismatch (default: exit {MISMATCH_EXIT})")
    p.set_defaults(func=run)
    return p


MISMATCH_EXIT = 3
"""Exit status of ``identify`` when the best fit is a model mismatch (docs/identify.md)."""


def _initial(text: str) -> dict[str, float]:
    out = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep:
            raise InputError(f"--initial: expected NAME=VALUE, got {item!r}")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise InputError(f"--initial: {name.strip()}: not a number: {value!r}") from None
    return out


def run(args) -> int:
    """Run the identification; 0 on success, 1 with a one-line message on bad input."""
    from convexsim.identify.fit import IdentificationError, identify
    from convexsim.identify.report import write_report

    if args.study is not None:
        return run_study(args)
    if not args.trajectory:
        print("convexsim identify: error: give a trajectory file TRAJ or --study SPEC", file=sys.stderr)
        return 1
    params = tuple(filter(None, (t.strip() for t in args.params.split(","))))
    if any(":" in t for t in params):                   # robot parameters KIND:NAME of a tree scene
        from convexsim.identify.robot import run_robot
        return run_robot(args, params, _initial(args.initial))
    methods = ("mpec", "sap") if args.method == "both" else (args.method,)
    try:
        source = args.trajectory[0] if len(args.trajectory) == 1 else list(args.trajectory)
        ident = identify(source, params, methods=methods, mu0=args.mu0, initial=_initial(args.initial),
                         noise=args.noise)
    except IdentificationError as exc:
        print(f"convexsim identify: error: {exc}", file=sys.stderr)
        return 1
    path = write_report(ident, args.out)
    print(ident.verdict.first_line())
    for res in ident.results:
        for e in res.estimates:
            print(f"{res.method:5s} {e.parameter:24s} {e.value:.6g} ± {e.std:.2g}")
    print(f"report: {path}")
    if ident.verdict.mismatch and not args.accept_mismatch:
        print(f"convexsim identify: model mismatch (exit {MISMATCH_EXIT}; --accept-mismatch to accept)",
              file=sys.stderr)
        return MISMATCH_EXIT
    return 0


def run_study(args) -> int:
    """``--study SPEC``: 0 when the study ran, 1 for a bad file or a TRAJ given as well."""
    from convexsim.identify.study import IdentifyStudyError, run_identify_study

    if args.trajectory:
        print("convexsim identify: error: give either TRAJ or --study, not both", file=sys.stderr)
        return 1

    def progress(r):
        print(f"ε = {r['eps']:<8g} seed {r['seed']:<3d} {r['method']:8s} μ̂ = {r['mu_hat']:.6f} "
              f"|μ̂ − μ| = {r['error']:.2e} σ = {r['std']:.2e} ({r['seconds']:.1f} s)", flush=True)

    try:
        out = run_identify_study(args.study, args.out, reduced=args.reduced, progress=progress)
    except IdentifyStudyError as exc:
        print(f"convexsim identify: error: {exc}", file=sys.stderr)
        return 1
    for line in out.verdict:
        print(line)
    print(f"report: {out.files[-1]}")
    return 0


__all__ = ["MISMATCH_EXIT", "add_parser", "run", "run_study"]
