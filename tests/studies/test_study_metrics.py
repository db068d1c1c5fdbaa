"""Metrics on hand-built trajectories whose answers are known in closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest

from convexsim.io.trajectory import Trajectory
from convexsim.studies import metrics as M

G = 9.81


def _traj(t, pos, vel, *, phi=None, normals=None, iters=None, ls=None, converged=None, failure=""):
    """A one-moving-body trajectory (body 0 fixed ground, body 1 moving); phi[f] = list of contact φ."""
    T = len(t)
    position = np.zeros((T, 2, 3))
    position[:, 1] = pos
    linear = np.zeros((T, 2, 3))
    linear[:, 1] = vel
    quat = np.zeros((T, 2, 4))
    quat[..., 0] = 1.0
    phi = phi if phi is not None else [[] for _ in range(T)]
    counts = [len(p) for p in phi]
    K = sum(counts)
    n = np.tile([0.0, 0.0, 1.0], (K, 1)) if normals is None else np.asarray(normals, float)
    tr = Trajectory(time=np.asarray(t, float), body_names=np.array(["ground", "ball"]), position=position,
                    quaternion=quat, linear_velocity=linear, angular_velocity=np.zeros((T, 2, 3)),
                    solver_iterations=np.asarray(iters if iters is not None else np.zeros(T), np.int64),
                    solver_converged=np.asarray(converged if converged is not None else np.ones(T), bool),
                    momentum_residual=np.zeros(T),
                    line_search_evaluations=np.asarray(ls if ls is not None else np.zeros(T), np.int64),
                    contact_offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
                    contact_body_a=np.zeros(K, np.int64), contact_body_b=np.ones(K, np.int64),
                    contact_point=np.zeros((K, 3)), contact_normal=n,
                    contact_phi=np.asarray([x for p in phi for x in p], float), contact_force=np.zeros((K, 3)),
                    failure=failure)
    tr.validate()
    return tr


def _ctx(**kw):
    inertia = np.stack([np.eye(3), 0.004 * np.eye(3)])
    base = dict(body=1, gravity=np.array([0.0, 0.0, -G]), mass=np.array([0.0, 1.0]), inertia=inertia,
                moving=np.array([False, True]))
    base.update(kw)
    return M.MetricContext(**base)


def test_free_fall_conserves_energy_and_reports_no_contact():
    """Check E = ½mv² + m·g·z is constant along the exact free-fall solution and contact metrics are empty."""
    t = np.linspace(0.0, 0.4, 41)
    z = 1.0 - 0.5 * G * t**2
    pos = np.stack([np.zeros_like(t), np.zeros_like(t), z], axis=1)
    vel = np.stack([np.zeros_like(t), np.zeros_like(t), -G * t], axis=1)
    tr = _traj(t, pos, vel)
    ctx = _ctx()
    # E(t) = m·g·z0 exactly; round-off of ~1e-15 relative is all that may remain.
    assert M.final_energy(tr, ctx) == pytest.approx(1.0 * G * 1.0, rel=1e-12)
    assert abs(M.energy_drift(tr, ctx)) < 1e-12
    assert M.rest_penetration(tr, ctx) == 0.0 and M.max_penetration(tr, ctx) == 0.0
    assert math.isnan(M.bounce_height(tr, ctx))  # never touches
    assert M.hop_height(tr, ctx) == 0.0
    assert M.final_height(tr, ctx) == pytest.approx(-0.5 * G * 0.4**2, rel=1e-12)


def test_rotational_energy_uses_the_world_inertia():
    """Check the ½ωᵀ R I Rᵀ ω term for a body rotated by 90° about x with a non-spherical inertia."""
    t = np.array([0.0, 0.1])
    tr = _traj(t, np.zeros((2, 3)), np.zeros((2, 3)))
    tr.quaternion[:, 1] = [math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0]  # R = Rx(90°)
    tr.angular_velocity[:, 1] = [0.0, 0.0, 2.0]  # spin about world z = body -y after the rotation
    ctx = _ctx(inertia=np.stack([np.eye(3), np.diag([1.0, 3.0, 5.0])]))
    # World z is body ∓y, so I_zz,W = I_yy,B = 3: E = ½·3·2² = 6 J.
    assert M.final_energy(tr, ctx) == pytest.approx(6.0, rel=1e-12)


def test_rest_penetration_averages_the_final_window():
    """Check rest = mean over the last 25% of frames of max(0, −min φ), speculative contacts ignored."""
    t = np.linspace(0.0, 1.0, 11)  # window 0.25 → frames at t >= 0.75: 0.8, 0.9, 1.0
    phi = [[] for _ in range(11)]
    phi[5] = [-3e-3]  # an impact, only in the max
    phi[8] = [-1e-4, 2e-3]  # a speculative contact (φ > 0) next to a real one
    phi[9] = [-2e-4]
    phi[10] = [-3e-4, -1e-4]
    tr = _traj(t, np.zeros((11, 3)), np.zeros((11, 3)), phi=phi)
    ctx = _ctx(window=0.25)
    assert M.rest_penetration(tr, ctx) == pytest.approx((1e-4 + 2e-4 + 3e-4) / 3, rel=1e-12)
    assert M.max_penetration(tr, ctx) == pytest.approx(3e-3)
    assert M.contacts_per_step(tr, ctx) == pytest.approx((1 + 2 + 1 + 2) / 10)


def test_stiction_slip_is_the_tangential_speed_relative_to_the_contact_normal():
    """Check slip removes the normal component for a tilted normal n = (sin a, 0, cos a)."""
    a = 0.3
    n = [math.sin(a), 0.0, math.cos(a)]
    tang = np.array([math.cos(a), 0.0, -math.sin(a)])  # unit vector ⟂ n
    t = np.linspace(0.0, 1.0, 5)
    vel = np.tile(2e-6 * tang + 5e-7 * np.array(n), (5, 1))  # 2e-6 m/s slip plus some normal velocity
    phi = [[-1e-5] for _ in range(5)]
    tr = _traj(t, np.zeros((5, 3)), vel, phi=phi, normals=[n] * 5)
    assert M.stiction_slip(tr, _ctx(window=0.5)) == pytest.approx(2e-6, rel=1e-9)


def test_stop_time_and_distance_of_a_uniform_deceleration():
    """Check stop time v0/a and stop distance v0²/(2a) of x(t) = v0·t − a·t²/2 sampled every 1 ms."""
    v0, a = 2.0, 0.5 * G
    t = np.arange(0.0, 0.6, 1e-3)
    ts = v0 / a
    v = np.clip(v0 - a * t, 0.0, None)
    x = np.where(t < ts, v0 * t - 0.5 * a * t**2, v0**2 / (2 * a))
    pos = np.stack([x, np.zeros_like(t), np.full_like(t, 0.1)], axis=1)
    vel = np.stack([v, np.zeros_like(t), np.zeros_like(t)], axis=1)
    tr = _traj(t, pos, vel, phi=[[-1e-5]] * len(t))
    ctx = _ctx(stop_speed=1e-3)
    # Speed drops below 1e-3 m/s at most 1e-3/a ≈ 2e-4 s (one frame) before v0/a: tolerance one frame.
    assert M.stop_time(tr, ctx) == pytest.approx(ts, abs=1.01e-3)
    assert M.stop_distance(tr, ctx) == pytest.approx(v0**2 / (2 * a), abs=1e-6)
    never = _traj(t, pos, np.tile([1.0, 0, 0], (len(t), 1)), phi=[[-1e-5]] * len(t))
    assert math.isnan(M.stop_time(never, ctx)) and math.isnan(M.stop_distance(never, ctx))


def test_bounce_and_hop_heights():
    """Check bounce = max height after first touch minus the height at touch, hop = max height − start."""
    t = np.linspace(0.0, 1.0, 6)
    z = np.array([0.3, 0.2, 0.1, 0.14, 0.12, 0.1])
    phi = [[], [], [-1e-4], [], [], [-1e-5]]
    tr = _traj(t, np.stack([np.zeros(6), np.zeros(6), z], 1), np.zeros((6, 3)), phi=phi)
    ctx = _ctx()
    assert M.bounce_height(tr, ctx) == pytest.approx(0.04)
    assert M.hop_height(tr, ctx) == 0.0
    z2 = np.array([0.1, 0.1035, 0.1, 0.1, 0.1, 0.1])
    tr2 = _traj(t, np.stack([np.zeros(6), np.zeros(6), z2], 1), np.zeros((6, 3)), phi=[[-1e-5]] * 6)
    assert M.hop_height(tr2, ctx) == pytest.approx(3.5e-3)


def test_solver_statistics_skip_the_initial_frame():
    """Check iteration and line-search statistics are over steps (frames 1..T−1) and failures are counted."""
    t = np.linspace(0.0, 0.3, 4)
    tr = _traj(t, np.zeros((4, 3)), np.zeros((4, 3)), iters=[99, 1, 2, 6], ls=[99, 2, 2, 5],
               converged=[False, True, False, True], failure="step 3: boom")
    ctx = _ctx()
    assert M.newton_iterations_mean(tr, ctx) == pytest.approx(3.0)
    assert M.newton_iterations_max(tr, ctx) == 6
    assert M.line_search_evals_mean(tr, ctx) == pytest.approx(3.0)
    assert M.line_search_evals_max(tr, ctx) == 5
    assert M.solver_failures(tr, ctx) == 2  # one unconverged step + the early stop


def test_compute_metrics_turns_a_broken_metric_into_nan():
    """Check that one metric failing (unknown body index) does not lose the others."""
    t = np.linspace(0.0, 0.3, 4)
    tr = _traj(t, np.zeros((4, 3)), np.zeros((4, 3)))
    out = M.compute_metrics(tr, ["hop_height", "newton_iterations_mean"], _ctx(body=7))
    assert math.isnan(out["hop_height"]) and out["newton_iterations_mean"] == 0.0


def test_sap_lcp_pair_metrics():
    """Check final and max position differences between two sampled runs (with interpolation)."""
    sap = {"time": [0.0, 0.5, 1.0], "position": [[[0, 0, 0], [0, 0, 1.0]], [[0, 0, 0], [0, 0, 0.97]],
                                                  [[0, 0, 0], [0.03, 0, 0.96]]]}
    lcp = {"time": [0.0, 0.25, 1.0], "position": [[[0, 0, 0], [0, 0, 1.0]], [[0, 0, 0], [0, 0, 1.0]],
                                                  [[0, 0, 0], [0, 0, 1.0]]]}
    assert M.sap_lcp_final_position_diff(sap, lcp) == pytest.approx(0.05)  # |(0.03, 0, −0.04)|
    assert M.sap_lcp_max_position_diff(sap, lcp) == pytest.approx(0.05)
    short = {"time": [0.0, 0.5], "position": lcp["position"][:2]}
    assert math.isnan(M.sap_lcp_final_position_diff(sap, short))  # different end times: undefined
