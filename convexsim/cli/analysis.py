"""Commands built on runs and worked examples: `study`, `learn`, `identify`, `examples lcp` (and the
deprecated `seeds`)."""

from __future__ import annotations

import sys

from convexsim.cli.common import EXIT_OK


# ----------------------------------------------------------------------------------------- study
def add_study(sub) -> None:
    from convexsim.studies.cli import DESCRIPTION, add_arguments

    p = sub.add_parser("study", help="run a parameter study (sweeps, metrics, plots, report)",
                       description=DESCRIPTION)
    add_arguments(p)
    p.set_defaults(func=cmd_study)


def cmd_study(args) -> int:
    from convexsim.studies.cli import run

    return int(run(args) or 0)


# -------------------------------------------------------------------------------------- examples
def add_examples(sub) -> None:
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


def add_seeds(sub) -> None:
    p = sub.add_parser("seeds", help="deprecated: use `convexsim examples lcp`",
                       description="Deprecated alias of `convexsim examples lcp` (kept for one release).")
    p.set_defaults(func=cmd_seeds)


def cmd_seeds(args) -> int:
    print("convexsim seeds: deprecated, use `convexsim examples lcp` (same output)", file=sys.stderr)
    return cmd_examples_lcp(args)

def add_learn(sub) -> None:
    from convexsim.learn.cli import add_parser

    add_parser(sub)


# ------------------------------------------------------------------------------------------ main
def add_identify(sub) -> None:
    from convexsim.identify.cli import add_parser  # convexsim identify (docs/identify.md)

    add_parser(sub)
