"""compare_trajectories on synthetic trajectories with known differences."""

from __future__ import annotations

import numpy as np
import pytest

from convexsim.io import Trajectory
from convexsim.io.compare import compare_trajectories, format_comparison, net_contact_force


def make_traj(T=11, dt=0.1, shift=0.0, vshift=0.0, force=1.0, angle=0.0, kind="sap"):
    B = 2
    time = np.arange(T) * dt
    pos = np.zeros((T, B, 3))
    pos[:, 1, 2] = 1.0 + shift * time
    quat = np.zeros((T, B, 4))
    quat[..., 0] = 1.0
    quat[:, 1] = [np.cos(angle / 2), 0.0, 0.0, np.sin(angle / 2)]
    vel = np.zeros((T, B, 3))
    vel[:, 1, 0] = vshift
    # one contact per frame after frame 0: ground (A, body 0) pushes the ball (B, body 1) up
    offsets = np.concatenate([[0], np.arange(T)])
    K = T - 1
    return Trajectory(
        time=time, body_names=np.array(["ground", "ball"]), position=pos, quaternion=quat, linear_velocity=vel,
        angular_velocity=np.zeros((T, B, 3)), solver_iterations=np.zeros(T, np.int64),
        solver_converged=np.ones(T, bool), momentum_residual=np.zeros(T), line_search_evaluations=np.zeros(T, np.int64),
        contact_offsets=offsets, contact_body_a=np.zeros(K, np.int64), contact_body_b=np.ones(K, np.int64),
        contact_point=np.zeros((K, 3)), contact_normal=np.tile([0, 0, 1.0], (K, 1)), contact_phi=np.zeros(K),
        contact_force=np.tile([0, 0, force], (K, 1)), solver_kind=kind, contact_model="rigid", time_step=dt)


def test_known_differences_are_reported():
    a = make_traj()
    b = make_traj(shift=0.5, vshift=0.25, force=3.0, angle=0.2, kind="lcp")
    c = compare_trajectories(a, b)
    ball = c["bodies"]["ball"]
    # position error grows linearly 0.5·t: max = final = 0.5, RMS = 0.5·sqrt(mean(t²))
    t = np.arange(11) * 0.1
    assert ball["position"]["final"] == pytest.approx(0.5, rel=1e-12)
    assert ball["position"]["rms"] == pytest.approx(0.5 * np.sqrt(np.mean(t**2)), rel=1e-12)
    assert ball["velocity"]["max"] == pytest.approx(0.25, rel=1e-12)
    assert ball["orientation"]["max"] == pytest.approx(0.2, rel=1e-7)
    # net contact force on the ball differs by 2 N on frames 1..10 (frame 0 has no contacts); the
    # ground feels the opposite
    assert ball["contact_force"]["max"] == pytest.approx(2.0)
    assert ball["contact_force"]["rms"] == pytest.approx(2.0 * np.sqrt(10 / 11))
    assert c["bodies"]["ground"]["contact_force"]["final"] == pytest.approx(2.0)
    assert c["bodies"]["ground"]["position"]["max"] == 0.0
    text = format_comparison(c)
    assert c["labels"] == ("sap/rigid", "lcp/rigid") and "LCP solver (rigid contact)" in text
    assert "ball" in text and "5.000e-01" in text


def test_identical_runs_compare_to_zero_and_early_stop_uses_common_frames():
    a = make_traj()
    c = compare_trajectories(a, make_traj())
    assert all(v["max"] == 0.0 for q in c["bodies"].values() for v in q.values())
    short = make_traj(T=5)
    short.failure = "step 4: stopped"
    c = compare_trajectories(a, short)
    assert len(c["time"]) == 5 and c["failures"] == ["step 4: stopped"]
    assert "stopped early" in format_comparison(c)


def test_net_contact_force_signs():
    F = net_contact_force(make_traj(force=2.0))
    np.testing.assert_allclose(F[1:, 1], [[0, 0, 2.0]] * 10)
    np.testing.assert_allclose(F[1:, 0], [[0, 0, -2.0]] * 10)
    np.testing.assert_allclose(F[0], 0.0)


def test_mismatched_bodies_raise():
    a = make_traj()
    b = make_traj()
    b.body_names = np.array(["ground", "other"])
    with pytest.raises(ValueError, match="different bodies"):
        compare_trajectories(a, b)
