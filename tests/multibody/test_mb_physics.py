"""Articulated physics with the one-tree step of the tests (one_tree_step: the package's tree stage, solved) against
analytic answers: pendulum period, the double pendulum's energy error predicted by the integrator's
truncation error, Drake's joint-limit case, the implicit PD steady state and effort saturation, implicit
joint damping, and a coupler. The derivations are in docs/articulated.md §5."""

from __future__ import annotations

import math

import numpy as np
import pytest

from convexsim.multibody import (
    Joint,
    JointType,
    bias_forces,
    build_tree,
    gravity_forces,
    kinetic_energy,
    mass_matrix,
    potential_energy,
)
from convexsim.multibody.model import Coupler, JointLimit, PdActuator
from convexsim.sap.joint_constraints import pd_effective_gains
from one_tree_step import simulate, step

G = 9.81
NO_INERTIA = np.zeros((3, 3))


def pendulum(L=1.0, m=1.0, damping=0.0, armature=0.0, gravity=(0.0, 0.0, -G)):
    """A point bob at distance L below a revolute joint about y."""
    return build_tree([Joint("bob", -1, JointType.REVOLUTE, mass=m, inertia=NO_INERTIA, com=(0, 0, -L),
                             axis=(0, 1, 0), damping=damping, armature=armature)], gravity=gravity)


def double_pendulum(L1=1.0, L2=1.0, m1=1.0, m2=1.0):
    return build_tree([
        Joint("l1", -1, JointType.REVOLUTE, mass=m1, inertia=NO_INERTIA, com=(0, 0, -L1), axis=(0, 1, 0)),
        Joint("l2", 0, JointType.REVOLUTE, mass=m2, inertia=NO_INERTIA, com=(0, 0, -L2), pos=(0, 0, -L1),
              axis=(0, 1, 0)),
    ])


def slider(m=1.0, axis=(1, 0, 0), gravity=(0.0, 0.0, 0.0)):
    return build_tree([Joint("box", -1, JointType.PRISMATIC, mass=m, inertia=1e-3 * np.eye(3), axis=axis)],
                      gravity=gravity)


def trajectory(model, q0, v0, dt, duration, **kw):
    qs, vs, reps = [np.asarray(q0, float)], [np.asarray(v0, float)], []

    def rec(k, q, v, rep):
        qs.append(q)
        vs.append(v)
        reps.append(rep)

    simulate(model, q0, v0, dt, duration, record=rec, **kw)
    return np.array(qs), np.array(vs), reps


def test_pendulum_small_angle_period():
    """T = 2π√(L/g) within 0.5 % (the criterion); sharper: with the finite-amplitude factor 1 + θ0²/16
    the measured period agrees to 1e-4 (symplectic Euler's period error is O((ω dt)²) ≈ 1e-6 here)."""
    dt, theta0 = 1e-3, 0.05
    qs, _, _ = trajectory(pendulum(), [theta0], [0.0], dt, 4.5)
    th = qs[:, 0]
    i = np.flatnonzero((th[:-1] > 0) & (th[1:] <= 0))  # downward zero crossings, linearly interpolated
    t_cross = (i + th[i] / (th[i] - th[i + 1])) * dt
    assert len(t_cross) >= 2
    period = np.mean(np.diff(t_cross))
    T0 = 2 * math.pi * math.sqrt(1.0 / G)
    assert abs(period / T0 - 1) < 5e-3
    assert abs(period / (T0 * (1 + theta0 ** 2 / 16)) - 1) < 1e-4


def energy(model, q, v):
    return kinetic_energy(model, q, v) + potential_energy(model, q)


def energy_error_rate(model, q, v, h=1e-5):
    """φ(q, v) with E(one step) − E = dt² φ + O(dt³) for symplectic Euler (q̇ = v joints):
    φ = E_q·a + ½ vᵀE_qq v + vᵀE_qv a + ½ aᵀ M a, a = M⁻¹(−h(q, v)); derivatives by central differences
    of M and E (the O(dt) term vanishes: the exact flow conserves E)."""
    M = mass_matrix(model, q)
    a = np.linalg.solve(M, -bias_forces(model, q, v))

    def dM(d):
        return (mass_matrix(model, q + h * d) - mass_matrix(model, q - h * d)) / (2 * h)

    E = lambda qq: energy(model, qq, v)
    Eq_a = 0.5 * v @ dM(a) @ v + gravity_forces(model, q) @ a
    Eqq_vv = (E(q + h * v) - 2 * E(q) + E(q - h * v)) / h ** 2
    return Eq_a + 0.5 * Eqq_vv + v @ dM(v) @ a + 0.5 * a @ M @ a


def test_double_pendulum_energy_error_is_the_predicted_first_order_drift():
    """Symplectic Euler with explicit Coriolis/gravity is first order and (for M(q) ≠ const) not
    symplectic. Taylor expansion of one step gives E_{n+1} − E_n = dt² φ(q_n, v_n) + O(dt³), hence

        E(t) − E(0) = dt ∫₀ᵗ φ dt + O(dt²)      and      |E(t) − E(0)| <= dt ∫₀ᵗ |φ| dt + O(dt²).

    Checked over 2 s from (1, −0.5) rad at rest (E range ≈ 25 J): per-step increments equal dt² φ to 2 % of
    max|dt² φ| (measured 0.5 %: O(dt³)); the accumulated error stays within the bound (measured max 0.021 J
    vs bound 0.075 J at dt = 1 ms) and within 5 % of max|ΔE| of dt ∫φ (measured 0.2 %); halving dt halves
    the error (first order; ratio in [1.8, 2.2])."""
    model = double_pendulum()
    q0, v0 = np.array([1.0, -0.5]), np.zeros(2)
    max_err = {}
    for dt in (1e-3, 5e-4):
        qs, vs, _ = trajectory(model, q0, v0, dt, 2.0)
        E = np.array([energy(model, q, v) for q, v in zip(qs, vs)])
        max_err[dt] = np.abs(E - E[0]).max()
        if dt == 1e-3:
            phi = np.array([energy_error_rate(model, q, v) for q, v in zip(qs[:-1], vs[:-1])])
            inc = np.diff(E)
            assert np.abs(inc - dt * dt * phi).max() <= 0.02 * np.abs(dt * dt * phi).max()
            predicted = np.concatenate([[0.0], np.cumsum(dt * dt * phi)])
            bound = np.concatenate([[0.0], np.cumsum(dt * dt * np.abs(phi))])
            assert np.all(np.abs(E - E[0]) <= bound * 1.02 + 1e-12)
            assert np.abs(E - E[0] - predicted).max() <= 0.05 * max_err[dt]
    assert 1.8 <= max_err[1e-3] / max_err[5e-4] <= 2.2


@pytest.mark.parametrize("dt", [2.5e-4, 5e-4, 1e-3])
@pytest.mark.parametrize("force", [10.0, -10.0])
def test_drakes_prismatic_joint_limit_case(dt, force):
    """1 kg prismatic body, limits [0, 0.1] m, ±10 N, no gravity, from rest at 0.05 m: after 1 s it rests
    on the limit with error < 1100 dt² (Drake's joint_limits_test). Sharper: at rest the limit's impulse
    balances the push, γ = dt F, and the near-rigid row gives γ = v̂/R = −g/(2 dt R), R = w/(400π²), w = 1/m,
    so the limit is exceeded by exactly dt² |F| / (200 π² m) (5.07e-9 m at dt = 1 ms); we check that to
    1e-6 relative and |v| < 1e-10 m/s."""
    m = 1.0
    q, v = simulate(slider(m), [0.05], [0.0], dt, 1.0, tau=[force], limits=[JointLimit(0, 0.0, 0.1)])
    limit = 0.1 if force > 0 else 0.0
    err = q[0] - limit
    assert abs(err) < 1100 * dt ** 2
    assert err * np.sign(force) == pytest.approx(dt ** 2 * abs(force) / (200 * math.pi ** 2 * m), rel=1e-6)
    assert abs(v[0]) < 1e-10


def test_pendulum_rests_on_its_joint_limit_within_the_limits_compliance():
    """A pendulum released at 1 rad onto a lower limit at 0.3 rad: gravity pushes it into the limit with
    τ = |g(q_l)| = m g L sin q_l; at rest it sits beyond the limit by exactly dt² τ / (200 π² A_kk),
    A_kk = m L² (the near-rigid limit's compliance, as in the prismatic case): 1e-4 relative."""
    dt = 1e-3
    model = pendulum()
    q, v = simulate(model, [1.0], [0.0], dt, 3.0, limits=[JointLimit(0, 0.3, 1.5)])
    tau = abs(gravity_forces(model, np.array([0.3]))[0])
    assert tau == pytest.approx(G * math.sin(0.3), rel=1e-12)
    assert 0.3 - q[0] == pytest.approx(dt ** 2 * tau / (200 * math.pi ** 2 * 1.0), rel=1e-4)
    assert abs(v[0]) < 1e-9


def test_implicit_pd_holds_a_pose_with_error_gravity_over_kp():
    """Implicit PD steady state: with v = 0 and q = q_ss every step, A (0 − v*) = γ and v* = −dt A⁻¹ g(q_ss)
    give γ = dt g(q_ss); the actuator gives γ = dt (−Kp (q_ss + dt·0 − q_d) + u_ff). Hence, exactly and
    independently of dt and Kd,

        Kp (q_ss − q_d) = u_ff − g(q_ss)        (the error is the gravity torque over Kp).

    Two-link arm: q_ss solved from that equation by a root finder is a fixed point of the step (held 0.5 s
    to 1e-12), a run from q_d converges to it (3 s: 1e-6 relative, measured 3e-7; the slowest mode decays like
    e^(−6 t)), and the error is 3e-2 rad, not negligible. With u_ff = g(q_d) (gravity compensation) the
    error vanishes."""
    import scipy.optimize

    dt = 1e-3
    model = double_pendulum()
    qd = np.array([0.6, -0.4])
    kp, kd = np.array([400.0, 200.0]), np.array([80.0, 40.0])
    acts = [PdActuator(i, kp[i], kd[i], q_target=qd[i]) for i in range(2)]
    q_ss = scipy.optimize.fsolve(lambda q: kp * (q - qd) + gravity_forces(model, q), qd, xtol=1e-14)
    assert np.abs(q_ss - qd).max() > 1e-2
    q, v = simulate(model, q_ss, np.zeros(2), dt, 0.5, actuators=acts)
    np.testing.assert_allclose(q, q_ss, rtol=0, atol=1e-12)
    assert np.abs(v).max() < 1e-12
    q, v = simulate(model, qd, np.zeros(2), dt, 3.0, actuators=acts)
    np.testing.assert_allclose(q - qd, q_ss - qd, rtol=1e-6, atol=0)
    g_d = gravity_forces(model, qd)
    acts_ff = [PdActuator(i, kp[i], kd[i], q_target=qd[i], u_ff=g_d[i]) for i in range(2)]
    q, _ = simulate(model, qd, np.zeros(2), dt, 0.5, actuators=acts_ff)
    np.testing.assert_allclose(q, qd, rtol=0, atol=1e-12)


def test_gain_limited_pd_steady_state_uses_the_limited_gain():
    """Kp = 1e10, Kd = 2e8 on a 1 kg·m² pendulum are far above the near-rigid clamp: the steady state obeys
    Kp' (q_ss − q_d) = −g(q_ss) with Kp' ≈ 1.9e8 from the gain limiting (w = 1/A_kk), not Kp (1e-6)."""
    dt = 1e-3
    model = pendulum()
    q, _ = simulate(model, [0.5], [0.0], dt, 0.5, actuators=[PdActuator(0, 1e10, 2e8, q_target=0.5)])
    kp_eff, _ = pd_effective_gains(dt, 1e10, 2e8, w=1.0 / mass_matrix(model, q)[0, 0])
    assert kp_eff < 1e10 / 50
    assert kp_eff * (q[0] - 0.5) == pytest.approx(-gravity_forces(model, q)[0], rel=1e-6)


def test_effort_limit_saturates_the_actuator_exactly():
    """A 2 kg vertical slider whose PD actuator (target 1 m up, Kp = 1e3, Kd = 50) can give only e = 5 N
    < m g: the actuator force is exactly +e every step and the slider falls with a = e/m − g, so
    symplectic Euler gives v_n = n dt a and q_n = dt² a n(n+1)/2 (1e-12 relative)."""
    dt, m, e = 1e-3, 2.0, 5.0
    model = slider(m, axis=(0, 0, 1), gravity=(0, 0, -G))
    qs, vs, reps = trajectory(model, [0.0], [0.0], dt, 0.5,
                              actuators=[PdActuator(0, 1e3, 50.0, q_target=1.0, effort=e)])
    u = np.array([r.actuator_force[0] for r in reps])
    np.testing.assert_allclose(u, e, rtol=1e-12, atol=0)
    n = np.arange(len(qs))
    a = e / m - G
    np.testing.assert_allclose(vs[:, 0], n * dt * a, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(qs[:, 0], dt * dt * a * n * (n + 1) / 2, rtol=1e-11, atol=1e-15)


def test_effort_limit_saturates_then_releases():
    """Horizontal 1 kg slider, target 0.1 m, Kp = 100, Kd = 20, e = 2 N: u = clamp(ũ, −e, e) with ũ from the
    END-of-step state (implicit PD, q = q0 + dt v): exactly ±e while |ũ| > e, ũ otherwise (1e-12)."""
    dt, e, kp, kd = 1e-3, 2.0, 100.0, 20.0
    qs, vs, reps = trajectory(slider(), [0.0], [0.0], dt, 2.0,
                              actuators=[PdActuator(0, kp, kd, q_target=0.1, effort=e)])
    u = np.array([r.actuator_force[0] for r in reps])
    u_tilde = -kp * (qs[1:, 0] - 0.1) - kd * vs[1:, 0]
    sat = np.abs(u_tilde) > e
    assert sat.sum() > 50 and (~sat).sum() > 50
    np.testing.assert_allclose(u[sat], e * np.sign(u_tilde[sat]), rtol=1e-12, atol=0)
    np.testing.assert_allclose(u[~sat], u_tilde[~sat], rtol=0, atol=1e-12 * e)


def test_joint_damping_is_implicit_and_armature_adds_inertia():
    """No gravity torque (joint axis along gravity): (M + dt D) v_{n+1} = M v_n, so v_n = (M/(M + dt D))ⁿ v0
    exactly, with M = m L² + armature (1e-12 relative)."""
    dt, D, arm = 1e-3, 3.0, 0.25
    model = build_tree([Joint("bob", -1, JointType.REVOLUTE, mass=1.0, inertia=NO_INERTIA, com=(1, 0, 0),
                              axis=(0, 0, 1), damping=D, armature=arm)])
    _, vs, _ = trajectory(model, [0.0], [2.0], dt, 0.5)
    M = 1.0 + arm
    n = np.arange(len(vs))
    np.testing.assert_allclose(vs[:, 0], 2.0 * (M / (M + dt * D)) ** n, rtol=1e-12, atol=0)


def test_coupler_moves_two_sliders_as_one_geared_body():
    """Sliders m0 = 1 kg, m1 = 3 kg coupled by q0 = 2 q1 + 0.1, a 4 N push on slider 1, no gravity: the
    geared system has inertia m1 + ρ² m0 = 7 kg, so q1 follows a = 4/7 m/s² (symplectic Euler:
    q1_n = dt² a n(n+1)/2) to 1e-4 relative, and |q0 − 2 q1 − 0.1| stays below 1e-8 m (the rigid row's
    compliance: |g| ≈ 2 dt R |γ| ≈ 1e-11 m at rest-like loads)."""
    dt = 1e-3
    model = build_tree([Joint("s0", -1, JointType.PRISMATIC, mass=1.0, inertia=1e-3 * np.eye(3),
                              axis=(1, 0, 0)),
                        Joint("s1", -1, JointType.PRISMATIC, mass=3.0, inertia=1e-3 * np.eye(3),
                              axis=(1, 0, 0), pos=(0, 1, 0))], gravity=(0, 0, 0))
    qs, _, _ = trajectory(model, [0.1, 0.0], [0.0, 0.0], dt, 1.0, tau=[0.0, 4.0],
                          couplers=[Coupler(0, 1, rho=2.0, offset=0.1)])
    n = len(qs) - 1
    assert qs[-1, 1] == pytest.approx(dt * dt * (4.0 / 7.0) * n * (n + 1) / 2, rel=1e-4)
    assert np.abs(qs[:, 0] - 2 * qs[:, 1] - 0.1).max() < 1e-8


def test_reference_step_rejects_constraints_on_multi_dof_joints():
    model = build_tree([Joint("ball", -1, JointType.BALL, mass=1.0, inertia=np.eye(3), com=(0, 0, -1))])
    with pytest.raises(ValueError, match=r"limits\[0\]: joint 0 is BALL"):
        step(model, model.neutral_q(), np.zeros(3), 1e-3, limits=[JointLimit(0, -1.0, 1.0)])
