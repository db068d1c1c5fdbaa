"""Every small shipped scene runs its full duration with the LCP stepper, cold and warm (mixed_clutter, the
longest, in test_lcp_clutter.py so that the parallel suite can run it beside this file); along box_stack every
step's LCP is also solved under bit-level perturbations.

Why: which box_stack step broke the old Lemke depended on the BLAS kernel and thread count (the last
bits of M and q). A scene that runs on one machine proves little; the perturbation test checks that
the answer does not hinge on those bits (docs/lcp.md §1, "Harris ratio test").
"""

from __future__ import annotations

import collections

import numpy as np
import pytest

SMALL_SCENES = ["box_stack", "sphere_drop", "box_slide", "incline_stick", "incline_slip", "capsule_roll"]
LONG = {"box_stack"}
"""Marked slow (not rerun under the BLAS variants): 2000 steps of 20–28 contacts."""


def _run(scene, warm, monkeypatch, duration=None):
    from convexsim.stepping import lcp_islands
    from convexsim.simulate import simulate

    monkeypatch.setattr(lcp_islands, "WARM_START_DEFAULT", warm)
    rungs = collections.Counter()
    zmin = []

    def record(model, state, info):
        rungs[info.rung] += 1
        if info.contacts.count:
            zmin.append(float(info.gamma[:, 2].min()))

    traj = simulate(f"scenes/{scene}.yaml", solver="lcp", step_callback=record, duration=duration)
    return traj, rungs, zmin


@pytest.mark.roundoff
@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
@pytest.mark.parametrize("scene", [pytest.param(s, marks=pytest.mark.slow) if s in LONG else s
                                   for s in SMALL_SCENES])
def test_scene_runs_full_duration_with_lcp(scene, warm, monkeypatch):
    check_full_run(scene, warm, monkeypatch)


def check_full_run(scene, warm, monkeypatch):
    """Run ``scene`` with --solver lcp over its full duration (warm start on or off) and check it: no failure,
    every frame finite, every step solved by some rung (no "warm" rung cold), compressive normal impulses.
    Returns the trajectory."""
    from convexsim.scene import load_scene

    spec = load_scene(f"scenes/{scene}.yaml")
    traj, rungs, zmin = _run(scene, warm, monkeypatch)
    assert traj.failure == ""
    duration = spec.duration
    steps = int(round(duration / spec.time_step))
    assert traj.num_frames == steps + 1 and traj.time[-1] == pytest.approx(duration, abs=1e-9)
    for arr in (traj.position, traj.quaternion, traj.linear_velocity, traj.angular_velocity):
        assert np.all(np.isfinite(arr))
    assert sum(rungs.values()) == steps and set(rungs) <= {"", "warm", "crash", "lemke", "perturbed_q",
                                                          "covering", "regularized"}
    assert warm or rungs["warm"] == 0
    # normal impulses are compressive (z ≥ 0 up to the final check's tolerance)
    assert not zmin or min(zmin) >= -1e-12
    return traj


PERTURBATIONS_PER_STEP = 4
"""K: every box_stack step's LCP is solved K times, perturbed (kinds cycled: ×(1 + 1e-16·r), ×(1 + 1e-15·r)
on q and M's symmetric block, q + 1e-12·‖q‖∞·r). 2000 steps × 4 solves of n ≈ 200–300 keep the test
well under a minute on a quiet 2-core machine."""


BARE_LEMKE_MAX_FAILURES = 8
"""Bare Lemke (Harris rule, no fallback) may fail on at most 0.1 % of the 8000 perturbed LCPs. Measured on
this machine with default BLAS, OPENBLAS_CORETYPE=Prescott and OPENBLAS_NUM_THREADS=1: 5, 2 and 1 of
8000 (always on a few degenerate steps, never the unperturbed problems of the tests), re-measured 0, 1 and
0 (docs/lcp.md §1, "The residual failure mode"); the stepper's fallback chain must solve every one."""


@pytest.mark.roundoff
@pytest.mark.slow
def test_box_stack_every_step_solved_under_perturbations(monkeypatch):
    # Each perturbed answer must pass Lemke's final check on the step's unperturbed LCP (the
    # perturbations are ≥ 100× below that check's tolerance, see test_lcp_regressions). The stepper's
    # solve chain (Lemke, then fallback rungs) must solve 100 %; bare Lemke nearly all.
    from convexsim.stepping import lcp_fallback, lcp_islands, lcp_problem
    from convexsim.lcp.lemke import lemke
    from convexsim.simulate import simulate
    from test_lcp_regressions import independent_check, passes_final_check, perturbed

    kinds = ["rel16", "rel15", "q12"]
    real_build = lcp_problem.build_contact_lcp
    stats = {"steps": 0, "solves": 0, "failed": [], "bare_failed": []}

    def build_and_probe(Ainv, v_star, J, bias, mu, num_directions):
        M, q, layout = real_build(Ainv, v_star, J, bias, mu, num_directions)
        step = stats["steps"]
        stats["steps"] += 1
        nw = layout.num_contacts * (1 + layout.num_directions)
        rng = np.random.default_rng([7, step])
        for k in range(PERTURBATIONS_PER_STEP):
            Mp, qp = perturbed(M, q, nw, kinds[(step + k) % 3], rng)
            stats["solves"] += 1
            r = lemke(Mp, qp)
            if not (r.solved and passes_final_check(M, q, r.z) and independent_check(M, q, r.z)):
                stats["bare_failed"].append((step, k, r.status.name, r.pivots))
                res, _ = lcp_fallback.solve_contact_lcp(Mp, qp, step=step)
                if res is None or not (passes_final_check(M, q, res.z) and independent_check(M, q, res.z)):
                    stats["failed"].append((step, k, r.status.name, r.pivots))
        return M, q, layout

    monkeypatch.setattr(lcp_islands, "build_contact_lcp", build_and_probe)
    from convexsim.stepping import packing   # the probe sits in the Python step's assembly
    monkeypatch.setattr(packing, "lcp_supported_cached", lambda model: (False, "test: reference path"))
    traj = simulate("scenes/box_stack.yaml", solver="lcp")
    assert traj.failure == ""
    assert stats["steps"] == 2000 and stats["solves"] == 2000 * PERTURBATIONS_PER_STEP
    assert not stats["failed"], f"{len(stats['failed'])} of {stats['solves']} failed: {stats['failed'][:5]}"
    assert len(stats["bare_failed"]) <= BARE_LEMKE_MAX_FAILURES, stats["bare_failed"]


def test_lcp_bench_table_smoke():
    # the bench's machinery on a cheap case (sphere_drop resting on the ground: one island, both modes
    # solve the same one-contact LCP); figures are not asserted (wall clock), only their consistency
    from convexsim.tools.bench_lcp import format_lcp_table, run_lcp_bench

    rows = run_lcp_bench((("sphere_drop", 0.45, 3), ("sphere_drop", 0.45, 2, "sap")))
    assert rows[1]["whole"] is None
    for r in rows:
        assert r["split"]["contacts"] >= 1 and r["split"]["islands"] == 1
        if r["whole"]:
            assert r["split"]["contacts"] == r["whole"]["contacts"] and r["split"]["pivots"] == r["whole"]["pivots"]
        # one contact: 10 unknowns, below the warm-start size, so the warm column runs the same cold solves
        assert r["warm"]["pivots"] == r["split"]["pivots"]
    text = format_lcp_table(rows)
    assert "sphere_drop" in text and "ms split" in text and "reached with SAP" in text
