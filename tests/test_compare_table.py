"""Difference tables of many bodies (convexsim.io.compare.format_comparison): the worst bodies listed, the
others counted with a bound on their differences; every body with --all-bodies."""

from __future__ import annotations

import re

import numpy as np

from convexsim.io import Trajectory
from convexsim.io.compare import compare_trajectories, format_comparison


def _drifting_bodies(n: int, shifts: np.ndarray, T: int = 6, dt: float = 0.1) -> Trajectory:
    """``n`` free bodies at rest, body k displaced along x by ``shifts[k]`` at every frame."""
    time = np.arange(T) * dt
    pos = np.zeros((T, n, 3))
    pos[:, :, 0] = shifts[None, :]
    quat = np.zeros((T, n, 4))
    quat[..., 0] = 1.0
    return Trajectory(
        time=time, body_names=np.array([f"b{k}" for k in range(n)]), position=pos, quaternion=quat,
        linear_velocity=np.zeros((T, n, 3)), angular_velocity=np.zeros((T, n, 3)),
        solver_iterations=np.zeros(T, np.int64), solver_converged=np.ones(T, bool), momentum_residual=np.zeros(T),
        line_search_evaluations=np.zeros(T, np.int64), contact_offsets=np.zeros(T + 1, np.int64),
        contact_body_a=np.zeros(0, np.int64), contact_body_b=np.zeros(0, np.int64), contact_point=np.zeros((0, 3)),
        contact_normal=np.zeros((0, 3)), contact_phi=np.zeros(0), contact_force=np.zeros((0, 3)),
        solver_kind="sap", contact_model="sap", time_step=dt)


def test_many_bodies_list_the_worst_and_count_the_rest():
    n = 40
    shifts = np.random.default_rng(3).permutation(np.arange(1, n + 1)) * 1e-3     # body differences 1 … 40 mm
    c = compare_trajectories(_drifting_bodies(n, np.zeros(n)), _drifting_bodies(n, shifts))
    text = format_comparison(c, max_bodies=5, more_hint="--all-bodies lists them")
    listed = re.findall(r"^  (b\d+) ", text, re.M)
    worst = [f"b{k}" for k in np.argsort(-shifts)[:5]]
    assert listed == worst                                 # the 5 largest differences, largest first
    assert "of 40" in text
    # the other 35 are counted, with the largest of their differences (the 6th largest: 35 mm)
    assert re.search(r"… and 35 more bodies, each with a position difference of at most 3\.500e-02 m "
                     r"\(--all-bodies lists them\)", text), text
    every = format_comparison(c, max_bodies=None)
    assert len(re.findall(r"^  (b\d+) ", every, re.M)) == n and "more bodies" not in every


def test_few_bodies_keep_the_scene_order():
    shifts = np.array([1e-3, 5e-3, 2e-3])
    c = compare_trajectories(_drifting_bodies(3, np.zeros(3)), _drifting_bodies(3, shifts))
    text = format_comparison(c)
    assert re.findall(r"^  (b\d+) ", text, re.M) == ["b0", "b1", "b2"] and "more bodies" not in text
