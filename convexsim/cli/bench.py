"""`convexsim bench` (speed figures) and `convexsim warmup` (compile the numba kernels now)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from convexsim.cli.common import (EXIT_FAILURE, EXIT_OK, EXIT_USAGE, add_command, add_slip_curvature_flag,
                                  resolve_scene)


# ---------------------------------------------------------------------------------------- bench
def add_bench(sub) -> None:
    p = add_command(sub, "bench", cmd_bench, "speed figures on the benchmark scenes and random SAP problems",
                    "Per-step averages over each scene's window (default: sphere_drop and "
                    "box_stack for 0.5 s, pile_100 for its 1 s): ms/step, Newton iterations, "
                    "contacts and those with φ < 0, factorization and analysis ms, fill "
                    "(nonzero blocks of L / of H).")
    p.add_argument("--scenes", "--scene", nargs="*", metavar="SCENE", help="scene names or files (default: a short standard set)")
    p.add_argument("--all", action="store_true", help="the standard set plus pile_500, pile_1000, pile_mixed")
    p.add_argument("--duration", type=float, help="simulated time per scene [s] (default: each scene's window)")
    p.add_argument("--linear-solver", choices=["sparse", "block", "dense"],
                   help="force the SAP linear solver (sparse = supernodal, block = one block at a time)")
    p.add_argument("--prune", action=argparse.BooleanOptionalAction, default=None,
                   help="factor the Newton matrix only in its nonzero blocks (--prune) or in the whole "
                        "clique graph (--no-prune); default: convexsim.sap.linalg.PRUNE_PATTERN")
    add_slip_curvature_flag(p)
    p.add_argument("--no-solver-bench", action="store_true", help="skip the random SAP problem scaling table")
    p.add_argument("--vs", metavar="ENGINES", help="also time the scenes in other engines, e.g. drake,mujoco "
                   "(needs pip install -e '.[compare]'; docs/performance.md)")
    p.add_argument("--keyframe", metavar="NAME", help="with --vs mujoco and MJCF files (.xml) in --scenes: start "
                   "both engines from this <key> of the file (e.g. home; default: qpos0)")
    p.add_argument("--startup", action="store_true",
                   help="only the start-up figures: wall time of --help, scenes, validate and a 10-step run "
                        "in fresh interpreters, and loading a 1000-body scene file (docs/performance.md)")
    p.add_argument("--compiled", action="store_true",
                   help="only the compiled-step table: CPU ms/step of the compiled run loop against the "
                        "reference Python path on the small scenes, or on --scenes (docs/performance.md)")
    p.add_argument("--controls", action="store_true",
                   help="only the controls tables: CPU ms/step with and without per-step controls (run loop, "
                        "run_model(controller), a Simulation step loop; a MuJoCo Python loop when installed) "
                        "and what recording every frame costs (docs/scripting.md)")
    p.add_argument("--stages", action="store_true",
                   help="only the stage profile: CPU ms per step of each stage of the compiled step (collision, "
                        "rows and problem, symbolic analysis, Newton, integration, recording or the Python "
                        "around the kernels) on pile_100 and sphere_drop, or on --scenes (docs/performance.md)")
    p.add_argument("--no-lcp-bench", action="store_true",
                   help="skip the LCP pile table (sphere_pile, mixed_clutter with --solver lcp; minutes; "
                        "only run without --scenes)")


def _label(scene: str) -> str:
    """A table label: the scene name, or for a file its stem ("scene.xml" files: their folder's name)."""
    p = Path(scene)
    if not p.suffix:
        return scene
    return p.parent.name if p.stem == "scene" and p.parent.name else p.stem


def cmd_bench(args) -> int:
    if args.startup:
        from convexsim.tools import bench_startup

        return bench_startup.main()
    if args.controls:
        from convexsim.tools import bench_controls

        return bench_controls.main()
    if args.stages:
        from convexsim.tools import bench_stages

        chosen = bench_stages.STAGE_SCENES
        if args.scenes:
            chosen = [(s, args.duration) for s in args.scenes]
        elif args.duration is not None:
            chosen = [(s, args.duration) for s, _ in chosen]
        return bench_stages.main([(resolve_scene(s), d) for s, d in chosen])
    from convexsim.tools import bench as sap_bench

    if not (args.compiled or args.vs or args.scenes):
        parts = ["the compiled-step table", "four benchmark scenes"]
        parts += [] if args.no_lcp_bench else ["the LCP tables"]
        parts += [] if args.no_solver_bench else ["random SAP problems"]
        print(f"bench: {', '.join(parts)}: several minutes on 2 cores, most of it the LCP tables "
              "(--compiled: the first table alone; --scenes NAME: one scene; --no-lcp-bench, --no-solver-bench "
              "leave parts out)", file=sys.stderr, flush=True)
    if args.compiled or not (args.vs or args.scenes):
        chosen = sap_bench.COMPILED_SCENES
        if args.compiled and args.scenes:
            chosen = [(s, args.duration or 0.5) for s in args.scenes]
        elif args.duration is not None:
            chosen = [(s, args.duration) for s, _ in chosen]
        chosen = [(s if s == "ten_spheres" else resolve_scene(s), d) for s, d in chosen]
        print(sap_bench.format_compiled_table(sap_bench.compiled_comparison(chosen)), flush=True)
        if args.compiled:
            return EXIT_OK
        print()
    if args.vs:
        from convexsim.tools.compare_engines.bench import DEFAULT_SCENES, bench_vs

        chosen = [(s, args.duration) for s in args.scenes] if args.scenes else list(DEFAULT_SCENES)
        return bench_vs([(resolve_scene(s), _label(s), d) for s, d in chosen], args.vs, args.keyframe)
    if args.scenes:
        scenes = [(s, args.duration) for s in args.scenes]
    else:
        scenes = [(s, args.duration if args.duration is not None else d) for s, d in sap_bench.DEFAULT_SCENES]
        if args.all:
            scenes += [(s, args.duration) for s in sap_bench.PILE_SCENES if s != "pile_100"]
    if args.prune is not None:
        from convexsim.sap import linalg

        linalg.PRUNE_PATTERN = args.prune
    print(sap_bench.scene_table_header())
    reasons = {}
    for name, dur in scenes:
        row = sap_bench.scene_benchmark(resolve_scene(name), duration=dur, linear_solver=args.linear_solver,
                                        slip_curvature=args.slip_curvature)
        print(sap_bench.scene_row(row), flush=True)
        if row["path_reasons"]:
            reasons[row["scene"]] = row["path_reasons"]
    print(sap_bench.scene_table_legend(), flush=True)
    for scene, why in reasons.items():
        print(f"  {scene}: steps on the reference path: {'; '.join(why)}", flush=True)
    if not args.scenes:
        from convexsim.tools import bench_lcp

        print()
        print(bench_lcp.format_lcp_small_table(bench_lcp.run_lcp_small_bench()), flush=True)
        if not args.no_lcp_bench:
            print()
            bench_lcp.main()
    if not args.no_solver_bench:
        print()
        sap_bench.main([])
    return EXIT_OK

# ---------------------------------------------------------------------------------------- warmup
def add_warmup(sub) -> None:
    p = add_command(sub, "warmup", cmd_warmup, "compile the numba kernels of every solver path now",
                    "Compile the numba kernels of every solver path (or load them from the "
                    "disk cache) on tiny scenes, so that no later run compiles. (A run compiles "
                    "the kernels of its own step on first use, the same way.) The shared "
                    "kernels (collision, the Newton loop, tree dynamics, Lemke) compile first, "
                    "then the steps, each stage in parallel processes (one per core); a "
                    "progress line every 10 s while they compile. Later calls load them from "
                    "the cache in a few seconds.")
    p.add_argument("--jobs", type=int, default=None,
                   help="processes to compile in (default: one per core)")
    p.add_argument("--only", nargs="+", default=None, metavar="GROUP",
                   help="only these parts: sap-bodies, sap-trees, sap-large, sap-large-trees (islands above "
                        "the dense limit), "
                        "sap-reference, lcp-bodies, lcp-trees")
    p.add_argument("--check", action="store_true",
                   help="then run every shipped scene a few steps with SAP and LCP and fail (exit 1) if any "
                        "compiled a kernel the warm-up missed (`make test` runs this)")


def cmd_warmup(args) -> int:
    from convexsim.errors import InputError
    from convexsim.tools.kernels import uncached_kernels
    from convexsim.tools.warmup import warm_up

    before = set(uncached_kernels())
    if before:
        print(f"warmup: compiling {len(before)} kernels (first run or changed sources; cached for later runs)…",
              file=sys.stderr, flush=True)
    try:
        seconds = warm_up(progress=True, jobs=args.jobs, groups=args.only)
    except InputError as exc:
        print(f"warmup: {exc}", file=sys.stderr)
        return EXIT_USAGE
    compiled = len(before - set(uncached_kernels()))
    what = f"compiled {compiled} kernels" if compiled else "kernels already compiled (loaded from the cache)"
    print(f"warmup: {what} in {seconds:.1f} s")
    if args.check:
        import subprocess

        # A fresh process: kernels this one compiled or loaded are in memory and would hide a miss.
        code = subprocess.call([sys.executable, "-c",
                                "import sys; from convexsim.tools.warmup import check_shipped_scenes; "
                                "sys.exit(check_shipped_scenes())"])
        return EXIT_OK if code == 0 else EXIT_FAILURE
    return EXIT_OK
