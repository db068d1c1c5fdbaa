"""Joint dry friction (scene ``joints[].friction``; MJCF ``frictionloss``): the SAP row against its definition and
closed-form motions of a rotor and a pendulum, with both steppers.

Closed forms (rigid body about a fixed axis, moment of inertia I about it, friction bound f):
* spinning down with no other torque, the joint decelerates at α = f/I and stops at t* = ω0/α, after turning
  θ* = ω0²/(2α); semi-implicit Euler removes exactly dt·f/I per step while sliding, so ω(t) = ω0 − α t holds at
  every frame before t* to round-off, and the discrete θ* differs from the continuous one by less than ω0·dt;
* a pendulum (mass m, centre of mass at L below the axis) released at θ0 stays put when m g L sin θ0 <= f,
  starts with α0 = (m g L sin θ0 − f)/I_O when it exceeds f, and comes to rest where |m g L sin θ| <= f.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from convexsim.sap.joint_constraints import (FRICTION_KD, joint_friction_row, near_rigid_regularization,
                                             pd_row)
from convexsim.simulate import simulate

DT = 1e-3
G = 9.81


def test_friction_row_is_the_saturating_pd_row():
    """The steppers carry the friction as the PD row Kp = 0, zero targets, Kd = FRICTION_KD, effort f; SAP's
    near-rigid gain limit makes it exactly (R_nr, 0, ∓dt f) for joint inertias 1/w up to 2.5e3 kg·m²."""
    for w in (1e3, 1.0, 1e-3, 4.1e-4):
        row = joint_friction_row(DT, 0.7, w)
        np.testing.assert_allclose(row, [near_rigid_regularization(w), 0.0, -DT * 0.7, DT * 0.7], rtol=1e-15)
        np.testing.assert_allclose(pd_row(DT, 0.3, 0.0, 0.0, 0.0, 0.0, FRICTION_KD, 0.7, w), row, rtol=1e-12)
    with pytest.raises(ValueError, match="friction"):
        joint_friction_row(DT, 0.0, 1.0)


def _scene(axis, child_offset, q0, v0, friction, inertia, gravity=(0.0, 0.0, -G)):
    return {"name": "friction", "time_step": DT, "gravity": list(gravity), "unit_warnings": False,
            "bodies": [{"name": "link", "mass": 1.0, "inertia": list(inertia),
                        "geometries": [{"shape": "sphere", "radius": 0.01}]}],
            "joints": [{"name": "j", "type": "revolute", "parent": "world", "child": "link", "axis": list(axis),
                        "position": [0.0, 0.0, 1.0], "child_offset": list(child_offset),
                        "initial_position": q0, "initial_velocity": v0, "friction": friction}]}


def _angle_about_y(traj):
    q = traj.quaternion[:, 0]
    return 2.0 * np.arctan2(q[:, 2], q[:, 0])


@pytest.mark.parametrize("solver", ["sap", "lcp"])
def test_rotor_spins_down_at_f_over_I_and_stops(solver):
    """ω0 = 2 rad/s, I = 0.1 kg·m², f = 0.5 N·m: α = 5 rad/s², t* = 0.4 s, θ* = 0.4 rad."""
    I, f, w0 = 0.1, 0.5, 2.0
    traj = simulate(_scene((0, 0, 1), (0, 0, 0), 0.0, w0, f, (0.1, 0.1, I)), duration=0.6, solver=solver)
    omega = traj.angular_velocity[:, 0, 2]
    t = traj.time
    sliding = t < 0.4 - 2 * DT
    np.testing.assert_allclose(omega[sliding], w0 - f / I * t[sliding], atol=1e-9)   # exact while sliding
    assert np.all(np.abs(omega[t > 0.4 + 2 * DT]) < 1e-9)                              # stopped, stays stopped
    q = traj.quaternion[-1, 0]
    theta = 2.0 * math.atan2(q[3], q[0])
    assert abs(theta - w0 ** 2 * I / (2 * f)) < w0 * DT                               # O(dt) of the closed form


@pytest.mark.parametrize("solver", ["sap", "lcp"])
def test_pendulum_below_the_bound_does_not_move(solver):
    """m g L sin θ0 = 1.45 N·m < f = 2 N·m: the pendulum holds at θ0. The regularized stiction lets SAP's joint
    creep at vc = R·dt·τ_g (R = β² w/(4π²), w = 1/I_O): 1.4e-6 rad over 1 s, bounded here by twice that; the
    LCP's fold stops it to round-off. Without friction it would fall 0.3 rad within 0.4 s."""
    L, th0, Ic = 0.5, 0.3, 0.01
    I_O = Ic + L * L
    traj = simulate(_scene((0, 1, 0), (0, 0, -L), th0, 0.0, 2.0, (Ic, Ic, Ic)), duration=1.0, solver=solver)
    creep = near_rigid_regularization(1.0 / I_O) * DT * G * L * math.sin(th0) * 1.0
    assert np.max(np.abs(_angle_about_y(traj) - th0)) < 2.0 * creep


@pytest.mark.parametrize("solver", ["sap", "lcp"])
def test_pendulum_above_the_bound_accelerates_at_the_predicted_rate_and_sticks_where_the_bound_holds(solver):
    """f = 0.3 N·m < m g L sin θ0 = 1.45 N·m: over the first 20 ms the joint slides at α0 = (m g L sin θ0 − f)/I_O,
    θ_n − θ0 = −α0 dt² n(n+1)/2 after n semi-implicit Euler steps (0.1%: sin θ changes by 2e-4 relative over
    that time); the pendulum then swings,
    loses energy to the friction and comes to rest where m g L |sin θ| <= f (1% for the regularization)."""
    L, th0, f, Ic = 0.5, 0.3, 0.3, 0.01
    I_O = Ic + 1.0 * L * L
    traj = simulate(_scene((0, 1, 0), (0, 0, -L), th0, 0.0, f, (Ic, Ic, Ic)), duration=4.0, solver=solver)
    theta = _angle_about_y(traj)
    alpha0 = (1.0 * G * L * math.sin(th0) - f) / I_O
    early = (traj.time > 0.005) & (traj.time <= 0.02)
    n = np.round(traj.time[early] / DT)
    np.testing.assert_allclose(theta[early] - th0, -alpha0 * DT * DT * n * (n + 1) / 2, rtol=1e-3)
    assert np.min(theta) < 0.0                                                  # it swung through the bottom
    tail = traj.time > 3.5
    assert np.max(np.abs(traj.angular_velocity[tail, 0, 1])) < 1e-6             # at rest
    assert 1.0 * G * L * abs(math.sin(theta[-1])) <= f * 1.01                   # where the bound holds it


def test_friction_is_no_actuator_for_a_controller():
    """A joint's friction rides on the actuator machinery but is not an actuator: a controller target for a joint
    that has only friction is refused like one for any joint without an actuator."""
    scene = _scene((0, 0, 1), (0, 0, 0), 0.0, 1.0, 0.5, (0.1, 0.1, 0.1))
    with pytest.raises(ValueError, match="has no actuator"):
        simulate(scene, duration=0.01, controller=lambda model, state: {"targets": {"j": 0.3}})
