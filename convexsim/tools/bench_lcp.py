"""LCP stepper benchmark on contact piles: ms/step split by islands (cold and warm) and as one LCP.

    convexsim bench            (the small-scene table follows the scene table, the pile table follows it)

Each row runs a shipped scene up to ``start`` [s] (outside the timing; with ``--solver lcp`` cold, or for
the ``heap`` rows with SAP, which reaches a landed heap in seconds where the LCP stepper would take
minutes), then times ``steps`` steps three times from the same state: contact islands solved separately
and cold (the split column), the same with the warm start on (the previous step's basis carried in a
StepContext; one untimed step first, so the warm column's steps start one step later), and the whole
contact LCP at once, cold
(``lcp_islands.SPLIT_ISLANDS = False``; not for the heap rows, one island). The windows are where the LCP is
large (revised Lemke: O(n·k) per pivot, k the basic z's; ``LemkeOptions.method="tableau"``: O(n²) per
pivot). Times are CPU time of the process (``time.process_time``: on a shared machine the load inflates wall
clock, much less CPU time; set ``OPENBLAS_NUM_THREADS=1`` so that BLAS threads do not add theirs). Not a
test: the figures depend on the machine; compare the columns of one run.
"""

from __future__ import annotations

import time

import numpy as np

LCP_BENCH = (("sphere_pile", 0.16, 3, "lcp"), ("mixed_clutter", 0.32, 10, "lcp"),
             ("mixed_clutter", 0.9, 4, "sap"), ("mixed_clutter", 1.4, 4, "sap"))
"""(scene, start [s], timed steps, solver that reaches the start)."""


def _time_steps(model, state, steps: int, split: bool, warm: bool = False) -> dict:
    """Mean CPU ms and solver work per step over ``steps`` steps from ``state``. With ``warm`` one untimed step
    runs first, so that every timed step has a previous basis to start from."""
    from convexsim.stepping import StepContext
    from convexsim.stepping import lcp_islands, lcp_step

    old = lcp_islands.SPLIT_ISLANDS
    lcp_islands.SPLIT_ISLANDS = split
    ctx = StepContext()
    try:
        if warm:
            state, _ = lcp_step(model, state, ctx, warm_start=True)
        times, its, contacts, islands = [], [], [], []
        for _ in range(steps):
            t = time.process_time()
            state, info = lcp_step(model, state, ctx, warm_start=warm)
            times.append(time.process_time() - t)
            its.append(info.iterations)
            contacts.append(info.contacts.count)
            islands.append(info.islands)
    finally:
        lcp_islands.SPLIT_ISLANDS = old
    return {"ms_per_step": 1e3 * float(np.mean(times)), "pivots": float(np.mean(its)),
            "contacts": float(np.mean(contacts)), "islands": float(np.mean(islands))}


def _advance(name: str, start: float, solver: str):
    from convexsim.scene import shipped_scene_path
    from convexsim.simulate import prepare
    from convexsim.stepping import StepContext, sap_step
    from convexsim.stepping import lcp_step

    model, state, _ = prepare(str(shipped_scene_path(name)), solver="lcp")
    ctx = StepContext()
    for _ in range(int(round(start / model.time_step))):
        if solver == "sap":
            state, _ = sap_step(model, state, ctx)
        else:
            state, _ = lcp_step(model, state, warm_start=False)
    return model, state


def run_lcp_bench(cases=LCP_BENCH, whole: bool = True) -> list[dict]:
    """One row per (scene, start, steps[, solver]): ms/step and pivots/step split by islands (cold, warm) and as
    one LCP (cold; skipped with ``whole=False``)."""
    rows = []
    for case in cases:
        name, start, steps = case[:3]
        solver = case[3] if len(case) > 3 else "lcp"
        model, state = _advance(name, start, solver)
        split = _time_steps(model, state, steps, True)
        warm = _time_steps(model, state, steps, True, warm=True)
        # the heap is one island: its whole-LCP column would repeat the split one
        one = _time_steps(model, state, steps, False) if whole and solver != "sap" else None
        rows.append({"scene": name, "start": start, "steps": steps, "reached_with": solver, "split": split,
                     "warm": warm, "whole": one})
    return rows


def format_lcp_table(rows: list[dict]) -> str:
    """Text table of ``run_lcp_bench`` rows."""
    head = (f"{'LCP scene':<16}{'window [s]':>14}{'contacts':>10}{'islands':>9}{'ms split':>11}"
            f"{'ms warm':>10}{'ms whole':>11}{'piv split':>11}{'piv warm':>10}{'piv whole':>11}")
    lines = [head]
    for r in rows:
        s, wm, w = r["split"], r["warm"], r["whole"]
        window = f"{r['start']:.3f}+{r['steps']}" + ("*" if r.get("reached_with") == "sap" else "")
        whole_ms = f"{w['ms_per_step']:>11.1f}" if w else f"{'-':>11}"
        whole_piv = f"{w['pivots']:>11.0f}" if w else f"{'-':>11}"
        lines.append(f"{r['scene']:<16}{window:>14}{s['contacts']:>10.0f}{s['islands']:>9.1f}"
                     f"{s['ms_per_step']:>11.1f}{wm['ms_per_step']:>10.1f}{whole_ms}"
                     f"{s['pivots']:>11.0f}{wm['pivots']:>10.0f}{whole_piv}")
    if any(r.get("reached_with") == "sap" for r in rows):
        lines.append("* start state reached with SAP (a landed heap); the timed steps use the LCP stepper")
    lines.append("ms: CPU time per step (process time, not wall clock)")
    return "\n".join(lines)


LCP_SMALL = (("sphere_drop", 1.0), ("box_slide", 0.5), ("box_stack", 0.5))
"""(scene, duration [s]) of the small-scene LCP table (``run_lcp_small_bench``)."""


def run_lcp_small_bench(cases=LCP_SMALL) -> list[dict]:
    """CPU ms/step of the LCP stepper (defaults: warm start on, islands split) over each scene's first
    ``duration`` seconds from its initial state, one StepContext per run, as ``convexsim run --solver lcp``
    steps. Small scenes: the per-step cost here is mostly orchestration, not Lemke."""
    from convexsim.scene import shipped_scene_path
    from convexsim.simulate import prepare
    from convexsim.stepping import StepContext
    from convexsim.stepping import lcp_step

    rows = []
    for name, duration in cases:
        model, state, _ = prepare(str(shipped_scene_path(name)), solver="lcp")
        n = int(round(duration / model.time_step))
        warm_state, ctx = state, StepContext()
        for _ in range(n):                                      # the same window untimed: compile / load kernels
            warm_state, _ = lcp_step(model, warm_state, ctx)
        ctx = StepContext()
        pivots = contacts = 0
        t = time.process_time()
        for _ in range(n):
            state, info = lcp_step(model, state, ctx)
            pivots += info.pivots
            contacts += info.contacts.count
        rows.append({"scene": name, "duration": duration, "steps": n,
                     "ms_per_step": 1e3 * (time.process_time() - t) / n, "pivots": pivots / n,
                     "contacts": contacts / n})
    return rows


def format_lcp_small_table(rows: list[dict]) -> str:
    """Text table of ``run_lcp_small_bench`` rows."""
    lines = [f"{'LCP small scene':<16}{'steps':>7}{'contacts':>10}{'pivots':>8}{'LCP ms/step':>13}"]
    for r in rows:
        lines.append(f"{r['scene']:<16}{r['steps']:>7d}{r['contacts']:>10.1f}{r['pivots']:>8.1f}"
                     f"{r['ms_per_step']:>13.2f}")
    lines.append("LCP ms/step: CPU time per step of lcp_step from t = 0 (process time, not wall clock)")
    return "\n".join(lines)


def main() -> int:
    print(format_lcp_table(run_lcp_bench()), flush=True)
    return 0


__all__ = ["run_lcp_bench", "format_lcp_table", "LCP_BENCH", "run_lcp_small_bench", "format_lcp_small_table",
           "LCP_SMALL"]
