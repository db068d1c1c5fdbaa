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

The commands live by group in this package: ``run`` (run, view), ``files`` (validate, scenes, info,
compare), ``importers`` (import-urdf, import-mjcf), ``bench`` (bench, warmup), ``analysis`` (study, learn,
identify, examples, seeds); ``common`` holds what several share.

A SCENE is a YAML file (relative paths against the working directory, then the shipped scenes folder)
or a shipped scene name (``box_stack``). Options may come before or after the positional arguments.

Exit status: 0 ok; 1 the simulation failed (or ``compare --tol`` / ``study --strict`` found a
difference or a failed run); 2 bad usage or bad input (a scene or trajectory file that is missing or
broken, a bad option value; the message names the file or option); 3 ``identify`` found a model mismatch;
70 internal error (an exception that is not a refusal of the input: a bug; the message says what was raised,
where and in which command; CONVEXSIM_TRACEBACK=1 adds the full traceback); 130 interrupted (Ctrl-C); 143
terminated (SIGTERM); an interrupted `run` writes the frames recorded so far, marked interrupted.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Sequence

from convexsim.cli.analysis import add_examples, add_identify, add_learn, add_seeds, add_study
from convexsim.cli.bench import add_bench, add_warmup
from convexsim.cli.common import (EXIT_FAILURE, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK,  # noqa: F401
                                  EXIT_TERMINATED, EXIT_USAGE, error_text, internal_error_text, is_refusal)
from convexsim.cli.files import add_compare, add_info, add_scenes, add_validate
from convexsim.cli.importers import add_import_mjcf, add_import_urdf
from convexsim.cli.run import add_run, add_view


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``convexsim`` command."""
    import convexsim

    parser = argparse.ArgumentParser(prog="convexsim", description="Convex compliant-contact simulation of "
                                     "rigid bodies (SAP) with an LCP reference. `convexsim COMMAND --help` "
                                     "for each command.", epilog="Exit status: 0 ok, 1 simulation failed or "
                                     "check not passed, 2 bad usage or input (the message names the file or "
                                     "option), 3 identify found a model mismatch, 70 internal error (a bug: what, "
                                     "where, which command; CONVEXSIM_TRACEBACK=1 for the traceback), 130 "
                                     "interrupted, 143 terminated.")
    parser.add_argument("--version", action="version", version=f"convexsim {convexsim.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in (add_run, add_validate, add_scenes, add_info, add_view, add_compare, add_bench,
                add_study, add_examples, add_warmup, add_seeds, add_learn, add_identify, add_import_urdf,
                add_import_mjcf):
        add(sub)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Scene and slow-path warnings as one plain line on stderr ("warning: …"), other warnings as Python
    shows them."""
    from convexsim.scene import SceneWarning
    from convexsim.simulate import SlowPathWarning

    if issubclass(category, (SceneWarning, SlowPathWarning)):
        print(f"warning: {message}", file=sys.stderr, flush=True)
    else:
        _PYTHON_SHOWWARNING(message, category, filename, lineno, file, line)


_PYTHON_SHOWWARNING = warnings.showwarning


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
        except KeyboardInterrupt as exc:
            from convexsim.simulate import TerminationRequest

            if isinstance(exc, TerminationRequest):
                print(f"terminated ({exc.signal_name})", file=sys.stderr)
                return EXIT_TERMINATED
            print("interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        except Exception as exc:         # a refusal of the input (2), or a bug: a short report (70)
            if is_refusal(exc):
                print(f"convexsim {args.command}: error: {error_text(exc)}", file=sys.stderr)
                return EXIT_USAGE
            print(internal_error_text(exc, args.command), file=sys.stderr)
            return EXIT_INTERNAL

