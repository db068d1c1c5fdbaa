"""The shipped articulated scenes do what their headers say: pendulum period, double-pendulum energy
drift bound, resting on a joint limit, the gripper's friction hold and slip, the arm's PD hold and the
SAP-vs-LCP agreement of the pushed box."""

from __future__ import annotations

import math

import numpy as np
import pytest

from convexsim.multibody import bias_forces, gravity_forces, kinetic_energy, mass_matrix, potential_energy
from convexsim.simulate import prepare, simulate
from convexsim.spatial import quat_to_matrix
from convexsim.stepping import StepContext, step

G = 9.81


def run(scene, duration, **kw):
    model, state, _ = prepare(scene, **kw)
    ctx = StepContext()
    states = [state]
    for _ in range(round(duration / model.time_step)):
        state, _ = step(model, state, ctx, strict=True)
        states.append(state)
    return model, states


def test_pendulum_period():
    """T = 2π√(L/g)·√(1 + 2r²/(5L²))·(1 + θ0²/16) within 1e-4 (physical pendulum, finite amplitude)."""
    model, states = run("pendulum", 4.5)
    dt = model.time_step
    th = np.array([s.tree_q[0] for s in states])
    i = np.flatnonzero((th[:-1] > 0) & (th[1:] <= 0))
    period = np.mean(np.diff((i + th[i] / (th[i] - th[i + 1])) * dt))
    T = 2 * math.pi * math.sqrt(1.0 / G) * math.sqrt(1 + 2 * 0.02 ** 2 / 5) * (1 + 0.1 ** 2 / 16)
    assert abs(period / (2 * math.pi * math.sqrt(1 / G)) - 1) < 5e-3
    assert abs(period / T - 1) < 1e-4


def test_double_pendulum_energy_drift_within_the_integrator_bound():
    """|E(t) − E(0)| <= dt ∫|φ| dt (+2 % for the O(dt³) remainder), φ the per-step energy error rate of the
    semi-implicit step (E_{n+1} − E_n = dt² φ + O(dt³), docs/articulated.md §5); φ by central differences."""
    model, states = run("double_pendulum", 2.0)
    tree = model.forest.trees[0].model
    dt = model.time_step
    q = np.array([s.tree_q for s in states])
    v = np.array([s.tree_v for s in states])
    E = np.array([kinetic_energy(tree, a, b) + potential_energy(tree, a) for a, b in zip(q, v)])

    def phi(qq, vv, h=1e-5):
        M = mass_matrix(tree, qq)
        a = np.linalg.solve(M, -bias_forces(tree, qq, vv))
        dM = lambda d: (mass_matrix(tree, qq + h * d) - mass_matrix(tree, qq - h * d)) / (2 * h)
        En = lambda x: kinetic_energy(tree, x, vv) + potential_energy(tree, x)
        Eqq = (En(qq + h * vv) - 2 * En(qq) + En(qq - h * vv)) / h ** 2
        return (0.5 * vv @ dM(a) @ vv + gravity_forces(tree, qq) @ a + 0.5 * Eqq + vv @ dM(vv) @ a
                + 0.5 * a @ M @ a)

    rates = np.array([phi(a, b) for a, b in zip(q[:-1], v[:-1])])
    bound = np.concatenate([[0.0], np.cumsum(dt * dt * np.abs(rates))])
    drift = np.abs(E - E[0])
    assert np.all(drift <= 1.02 * bound + 1e-12)
    assert drift.max() < 0.05 and np.ptp(q[:, 1]) > 1.0     # small drift of a large motion


def test_pendulum_rests_on_its_limit_within_the_limit_compliance():
    """Beyond the limit by dt² τ / (200 π² A), τ = m g L sin 0.3, A = m L² + 2/5 m r²: 1e-4 relative."""
    model, states = run("pendulum_limit", 3.0)
    dt = model.time_step
    tau = G * math.sin(0.3)
    A = 1.0 + 0.4 * 0.02 ** 2
    assert 0.3 - states[-1].tree_q[0] == pytest.approx(dt ** 2 * tau / (200 * math.pi ** 2 * A), rel=1e-4)


def _grip(effort, solver="sap"):
    tr = simulate("gripper_lift", solver=solver,
                  overrides=[f"actuators[1].effort={effort}", f"actuators[2].effort={effort}"])
    assert not tr.failure, tr.failure
    b, p = tr.body_index("box"), tr.body_index("palm")
    rel = tr.position[:, b, 2] - tr.position[:, p, 2]
    i1 = np.searchsorted(tr.time, 1.0)                 # the lift ends at t = 1 s; 2 s hold follows
    return tr.position[:, b, 2], rel[-1] - rel[i1]


def test_gripper_holds_when_friction_exceeds_the_weight():
    """2 μ F = 6 N > m g (1 + margin) = 2.94 N × 2: the box is lifted with the palm (≥ 9.5 cm of the 10 cm)
    and slips < 1 mm relative to the palm over the 2 s hold."""
    m, mu, F = 0.3, 1.0, 3.0
    assert 2 * mu * F > m * G * (1 + 1.0)
    z, slip = _grip(F)
    assert z[-1] - z[0] > 0.095
    assert abs(slip) < 1e-3


def test_lcp_gripper_holds_with_the_regularized_normal_rows():
    """The same hold with the LCP stepper: with its contact normal rows regularized (convexsim.stepping.
    lcp_trees.NORMAL_REGULARIZATION) each finger's load is spread over the face's contact points, the box
    does not turn about the grip axis and slips < 1 mm over the hold (measured 0.08 mm; without the
    regularization Lemke loaded one corner per finger, the grip was a hinge and the box dropped 20 mm while
    turning, docs/articulated.md §8.6)."""
    z, slip = _grip(3.0, "lcp")
    assert z[-1] - z[0] > 0.095
    assert abs(slip) < 1e-3


def test_gripper_drops_the_box_when_friction_is_below_the_weight():
    """2 μ F = 2.4 N < m g = 2.94 N: the fingers cannot hold the box, it stays on the floor (z < 1 cm above
    its start) while the palm rises 10 cm."""
    m, mu, F = 0.3, 1.0, 1.2
    assert 2 * mu * F < m * G
    z, _ = _grip(F)
    assert z.max() - z[0] < 0.01


def test_arm_holds_its_pose_with_gravity_over_kp():
    """At t = 1 s (before the push) every joint obeys Kp (q − q_d) = −g(q) (implicit PD) to 1e-6 relative
    of the largest gravity torque."""
    model, states = run("iiwa_push", 1.0)
    tree = model.forest.trees[0]
    q = states[-1].tree_q
    g = gravity_forces(tree.model, q)
    err = np.array([a.kp * (q[a.joint] - a.target(1.0)[0]) for a in tree.actuators])
    assert np.abs(err + g).max() <= 1e-6 * np.abs(g).max()
    assert np.abs(g).max() > 10.0                       # a real load: tens of N·m at the shoulder


def _yaw(quat):
    R = quat_to_matrix(np.asarray(quat))
    return math.atan2(R[1, 0], R[0, 0])


def test_sap_and_lcp_push_the_box_to_the_same_place_within_the_derived_bound():
    """Both solvers move the box with the PD-tracked paddle (same targets, same gains, sliding friction
    μ m g in both), so the final box centres differ only by (docs/articulated.md §8):
    the box's yaw θ (a flat paddle on a yawed box's face holds its centre (w/2)(|sin θ| + 1 − cos θ) off
    the unyawed position, per solver), the SAP contact compliance (≤ 1 mm with these stiffnesses: the push
    force 4.9 N over the near-rigid paddle–box and floor contacts), and nothing else to first order.
    Measured: |Δx| = 0.07 mm, |Δy| = 12.3 mm with the LCP's yaw of 14° (bound 14.6 mm)."""
    w = 0.1
    out = {}
    for solver in ("sap", "lcp"):
        tr = simulate("iiwa_push", solver=solver)
        assert not tr.failure, tr.failure
        b = tr.body_index("box")
        out[solver] = (tr.position[-1, b], _yaw(tr.quaternion[-1, b]))
    bound = 1e-3 + sum(0.5 * w * (abs(math.sin(th)) + 1 - math.cos(th)) for _, th in out.values())
    d = out["sap"][0] - out["lcp"][0]
    assert abs(d[0]) <= bound and abs(d[1]) <= bound, (d, bound)
    assert out["sap"][0][0] - 0.52 > 0.25                 # it was pushed about 0.3 m
