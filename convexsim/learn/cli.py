"""``convexsim learn``: generate training data and fit a mixture of experts to it (docs/learn.md).

convexsim learn DATA [--experts K] [--objective em|seed|both] [--seed S] [--restarts R]
                     [--test-fraction F] --out DIR
convexsim learn generate block|particle --out FILE [--episodes E] [--steps T] [--seed S]
                     [--formulation direct|lcp] [--dt S] [--mu MU] [--hold N]
"""

from __future__ import annotations

import argparse
import sys
import time

from convexsim.errors import InputError


def add_parser(subparsers) -> None:
    """Register ``learn`` on the ``convexsim`` sub-command parser (arguments are parsed in ``run``)."""
    p = subparsers.add_parser(
        "learn", help="learn hybrid dynamics (mixture of experts) from simulated data", add_help=False
    )
    p.add_argument("-h", "--help", action="store_true", dest="learn_help")  # REMAINDER cannot start with "-"
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.set_defaults(func=run)


def _fit_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="convexsim learn",
        description="Fit a mixture of affine experts with a linear-softmax gate to a data file and write a "
        "report (metrics, gate partition, rollout). Make data with `convexsim learn generate`.",
    )
    p.add_argument("data", help="learning data file (npz from `convexsim learn generate`)")
    p.add_argument("--experts", type=int, default=3, help="number of experts K (default 3)")
    p.add_argument(
        "--objective",
        choices=["em", "seed", "both"],
        default="both",
        help="training objective: em (mixture likelihood), seed (gate-weighted squared error) or "
        "both, reported side by side (default both)",
    )
    p.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    p.add_argument("--restarts", type=int, default=5, help="random restarts per objective (default 5)")
    p.add_argument(
        "--test-fraction",
        type=float,
        default=1 / 3,
        help="fraction of the episodes held out for testing (default 1/3)",
    )
    p.add_argument("--out", required=True, help="report folder")
    return p


def _generate_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="convexsim learn generate",
        description="Simulate random piecewise-constant forcing and write a learning data file (npz) with "
        "ground-truth modes.",
    )
    p.add_argument(
        "system",
        choices=["block", "particle"],
        help="block: 1D sliding block (stick, slide±); particle: 2D particle over a floor "
        "(flight, stick, slide±)",
    )
    p.add_argument("--out", required=True, help="data file to write (npz)")
    p.add_argument("--episodes", type=int, help="episodes (default: block 9, particle 40)")
    p.add_argument("--steps", type=int, help="steps per episode (default: block 1000, particle 200)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument(
        "--formulation",
        choices=["direct", "lcp"],
        default="direct",
        help="block only: closed-form direct formulation or Lemke on the friction LCP "
        "(the particle always uses Lemke)",
    )
    p.add_argument("--dt", type=float, default=0.01, help="time step [s] (default 0.01)")
    p.add_argument("--mu", type=float, default=0.3, help="friction coefficient (default 0.3)")
    p.add_argument("--hold", type=int, default=25, help="steps each random force is held (default 25)")
    return p


def run(args) -> int:
    """Body of ``convexsim learn``; returns the exit status."""
    argv = list(args.args)
    if getattr(args, "learn_help", False):
        argv = ["--help"]
    if argv and argv[0] == "generate":
        return _generate(_generate_parser().parse_args(argv[1:]))
    return _fit(_fit_parser().parse_args(argv))


def _generate(a) -> int:
    from convexsim.learn.data import make_block_data, make_particle_data, save_data

    if not 0 < a.dt < float("inf"):
        raise InputError(f"--dt must be finite and > 0; got {a.dt}")
    if not 0 <= a.mu < float("inf"):
        raise InputError(f"--mu must be finite and ≥ 0; got {a.mu}")
    kw = {k: v for k, v in (("episodes", a.episodes), ("steps", a.steps)) if v is not None}
    kw.update(seed=a.seed, dt=a.dt, mu=a.mu, hold=a.hold)
    if a.system == "block":
        data = make_block_data(formulation=a.formulation, **kw)
    else:
        if a.formulation != "direct":
            print(
                "note: the particle is always simulated with Lemke (--formulation ignored)", file=sys.stderr
            )
        data = make_particle_data(**kw)
    path = save_data(a.out, data)
    counts = ", ".join(
        f"{n} {c}"
        for n, c in zip(data.mode_names, [int((data.modes == i).sum()) for i in range(len(data.mode_names))])
    )
    print(f"wrote {path}: {len(data.X)} samples, {len(data.episodes())} episodes ({counts})")
    return 0


def _fit(a) -> int:
    from convexsim.learn.data import load_data
    from convexsim.learn.moe import fit
    from convexsim.learn.report import evaluate, write_report

    if a.experts < 1:
        raise InputError(f"--experts must be ≥ 1; got {a.experts}")
    if a.restarts < 1:
        raise InputError(f"--restarts must be ≥ 1; got {a.restarts}")
    data = load_data(a.data)
    train, test = data.split_episodes(a.test_fraction)
    objectives = ["em", "seed"] if a.objective == "both" else [a.objective]
    models, results = [], []
    for obj in objectives:
        t0 = time.perf_counter()
        model = fit(
            train.X, train.Y, a.experts, a.seed, obj, restarts=a.restarts, gate_columns=data.gate_columns
        )
        res = evaluate(model, train, test)
        res["fit_seconds"] = time.perf_counter() - t0
        models.append(model)
        results.append(res)
        line = (
            f"{obj}: one-step RMSE {res['rmse']:.3g} (single affine {res['baseline_rmse']:.3g}), "
            f"mode accuracy {100 * res['mode_accuracy']:.2f} %"
        )
        if "mu_hat" in res:
            line += f", mu_hat {res['mu_hat']:.6f}"
        print(line)
    path = write_report(a.out, a.data, data, train, test, models, results)
    print(f"report: {path}")
    return 0
