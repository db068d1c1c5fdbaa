"""``convexsim bench --vs drake,mujoco``: the same scenes timed in convexsim, Drake and MuJoCo."""

from __future__ import annotations

import sys
from pathlib import Path

from convexsim.tools.compare_engines.engines import (HEADER, MissingEngine, UntranslatableScene,
                                                     format_side_by_side, require, run_side_by_side,
                                                     translation_problem)

DEFAULT_SCENES = (("sphere_drop", 10.0), ("box_slide", 10.0), ("box_stack", 10.0), ("sphere_pile", 1.0))
"""Scenes and simulated windows [s] timed by default: the small scenes for 10 s (10 000 steps), so that their
steady state (resting, after the first second) dominates the figure and a run's fixed cost (≈ 0.3 ms per
``run_model`` call against ≈ 6 µs per step) stays below 1 %."""


def parse_engines(text: str) -> tuple[str, ...]:
    """"drake,mujoco" -> ("convexsim", "drake", "mujoco"); unknown names raise ValueError."""
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in ("drake", "mujoco")]
    if bad or not names:
        raise ValueError(f"--vs takes a comma-separated list of drake, mujoco; got {text!r}")
    return ("convexsim", *dict.fromkeys(names))


def bench_vs(scenes: list[tuple[Path, str, float | None]], engines_text: str, keyframe: str | None = None) -> int:
    """Print the side-by-side table for (path, label, duration or None) scenes; exit code (2: bad input).

    An MJCF file (``.xml``) is compared with MuJoCo reading the same file (``mjcf_runs``), from ``keyframe``
    if given; other engines are not run on it."""
    from convexsim.simulate import prepare

    try:
        engines = parse_engines(engines_text)
        for e in engines[1:]:
            require(e)
    except (ValueError, MissingEngine) as err:
        print(f"convexsim bench: {err}", file=sys.stderr)
        return 2
    print(HEADER)
    for path, label, duration in scenes:
        if Path(path).suffix.lower() == ".xml":
            _mjcf_rows(Path(path), label, duration, engines, keyframe)
            continue
        model, state, default_duration = prepare(path)
        able = [e for e in engines if e == "convexsim" or not translation_problem(model, e)]
        for e in engines:
            if e not in able:
                print(f"{label:<20}{e}: not compared: {translation_problem(model, e)}", flush=True)
        if len(able) == 1:
            continue
        try:
            runs = run_side_by_side(model, state, duration or default_duration, tuple(able))
        except UntranslatableScene as why:
            print(f"{label:<20}not compared: {why}", flush=True)
            continue
        print("\n".join(format_side_by_side(label, model, runs)), flush=True)
    print("\nms/step after one untimed warm-up (convexsim: a whole untimed window, for the JIT); "
          "'vs ours' = ms/step ÷ convexsim's; 'cpu ms' = this process's CPU time per step and 'cpu vs' its "
          "ratio (the fairer figures on a loaded machine); max |Δp| = largest distance between a body's final "
          "position and convexsim's (docs/performance.md explains the parameter matching).")
    return 0


def _mjcf_rows(path: Path, label: str, duration: float | None, engines: tuple[str, ...], keyframe: str | None):
    """The side-by-side rows of an MJCF file: convexsim and MuJoCo on the same published file."""
    from convexsim.scene.mjcf import MjcfError
    from convexsim.tools.compare_engines.mjcf_runs import mjcf_side_by_side

    for e in engines[1:]:
        if e != "mujoco":
            print(f"{label:<20}{e}: not compared: an MJCF file is compared with MuJoCo reading the same file",
                  flush=True)
    if "mujoco" not in engines:
        return
    try:
        model, runs = mjcf_side_by_side(path, keyframe, duration)
    except (MjcfError, ValueError) as why:
        print(f"{label:<20}not compared: {why}", flush=True)
        return
    print("\n".join(format_side_by_side(label, model, runs)), flush=True)


__all__ = ["bench_vs", "parse_engines", "DEFAULT_SCENES"]
