"""Commands built on runs and worked examples: `study`, `learn`, `identify`, `examples lcp` (and the
deprecated `seeds`)."""

from __future__ import annotations

import sys

from convexsim.cli.common import EXIT_OK, add_command


# ----------------------------------------------------------------------------------------- study
def add_study(sub) -> None:
    from convexsim.studies.cli import DESCRIPTION, add_arguments

    p = add_command(sub, "study", cmd_study, "run a parameter study (sweeps, metrics, plots, report)",
                    DESCRIPTION)
    add_arguments(p)


def cmd_study(args) -> int:
    from convexsim.studies.cli import run

    return int(run(args) or 0)


# -------------------------------------------------------------------------------------- examples
def add_examples(sub) -> None:
    p = sub.add_parser("examples", help="small worked examples with known answers (LCP)",
                       description="Small worked examples whose answers are known in closed form.")
    which = p.add_subparsers(dest="example", metavar="EXAMPLE", required=True)
    add_command(which, "lcp", cmd_examples_lcp, "textbook LCP examples solved by Lemke's algorithm (docs/lcp.md)",
                "Falling and sliding blocks, the Berard–Trinkle particle and a bouncing particle (Moreau "
                "midpoint), each one LCP per step solved by Lemke's algorithm (convexsim.lcp.seeds; docs/lcp.md).")


def cmd_examples_lcp(args) -> int:
    from convexsim.lcp import seeds

    print(seeds.report())
    return EXIT_OK


def add_seeds(sub) -> None:
    add_command(sub, "seeds", cmd_seeds, "deprecated: use `convexsim examples lcp`",
                "Deprecated alias of `convexsim examples lcp` (kept for one release).")


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
