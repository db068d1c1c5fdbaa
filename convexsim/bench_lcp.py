"""LCP stepper benchmark on contact piles: ms/step with the contact LCP split by islands and as one LCP.

    convexsim bench            (this table follows the scene table)

Each row runs a shipped scene with ``--solver lcp`` cold (no warm start) up to ``start`` [s] (outside the
timing), then times ``steps`` steps twice from the same state: contact islands solved separately
(the default) and the whole contact LCP at once (``stepper.SPLIT_ISLANDS = False``). The windows are
where the bodies land and the LCP is large (dense tableau: O(n²) per pivot, O(n) pivots). Not a test:
wall-clock figures depend on the machine and its load; compare the two columns of one run.
"""

from __future__ import annotations

import time

import numpy as np

LCP_BENCH = (("sphere_pile", 0.16, 3), ("mixed_clutter", 0.32, 10))
"""(scene, start [s], timed steps)."""


def _time_steps(model, state, steps: int, split: bool) -> dict:
    from convexsim.stepping import lcp_stepper as stepper

    old = stepper.SPLIT_ISLANDS
    stepper.SPLIT_ISLANDS = split
    try:
        times, its, contacts, islands = [], [], [], []
        for _ in range(steps):
            t = time.perf_counter()
            state, info = stepper.lcp_step(model, state, warm_start=False)
            times.append(time.perf_counter() - t)
            its.append(info.iterations)
            contacts.append(info.contacts.count)
            islands.append(info.islands)
    finally:
        stepper.SPLIT_ISLANDS = old
    return {"ms_per_step": 1e3 * float(np.mean(times)), "pivots": float(np.mean(its)),
            "contacts": float(np.mean(contacts)), "islands": float(np.mean(islands))}


def run_lcp_bench(cases=LCP_BENCH) -> list[dict]:
    """One row per (scene, start, steps): ms/step and pivots/step split by islands and as one LCP."""
    from convexsim.stepping import lcp_stepper as stepper
    from convexsim.scene import shipped_scene_path
    from convexsim.simulate import prepare

    rows = []
    for name, start, steps in cases:
        model, state, _ = prepare(str(shipped_scene_path(name)), solver="lcp")
        for _ in range(int(round(start / model.time_step))):
            state, _ = stepper.lcp_step(model, state, warm_start=False)
        split = _time_steps(model, state, steps, True)
        whole = _time_steps(model, state, steps, False)
        rows.append({"scene": name, "start": start, "steps": steps, "split": split, "whole": whole})
    return rows


def format_lcp_table(rows: list[dict]) -> str:
    """Text table of ``run_lcp_bench`` rows."""
    lines = [f"{'LCP scene':<16}{'window [s]':>12}{'contacts':>10}{'islands':>9}{'ms/step split':>15}"
             f"{'ms/step whole':>15}{'pivots split':>14}{'pivots whole':>14}"]
    for r in rows:
        s, w = r["split"], r["whole"]
        window = f"{r['start']:.3f}+{r['steps']}"
        lines.append(f"{r['scene']:<16}{window:>12}{s['contacts']:>10.0f}{s['islands']:>9.1f}"
                     f"{s['ms_per_step']:>15.1f}{w['ms_per_step']:>15.1f}{s['pivots']:>14.0f}{w['pivots']:>14.0f}")
    return "\n".join(lines)


def main() -> int:
    print(format_lcp_table(run_lcp_bench()), flush=True)
    return 0


__all__ = ["run_lcp_bench", "format_lcp_table", "LCP_BENCH"]
