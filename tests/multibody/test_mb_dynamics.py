"""Kinematics and dynamics of trees in reduced coordinates against things that cannot be tuned:
an independent numpy forward kinematics, Σ Jᵀ M J, finite differences of positions, of the potential
energy and of the Jacobians (Kane's equations), Lagrange's equations, and convexsim's free body."""

from __future__ import annotations

import numpy as np
import pytest
from mb_trees import random_q, random_tree
from model_builder import build_model

from convexsim.dynamics import free_motion
from convexsim.dynamics import integrate as free_integrate
from convexsim.model import State
from convexsim.multibody import (
    Joint,
    JointType,
    Kinematics,
    MultibodyModelError,
    bias_forces,
    build_tree,
    difference,
    gravity_forces,
    integrate_q,
    inverse_dynamics,
    mass_matrix,
    mass_matrix_reference,
    potential_energy,
    qdot,
)
from convexsim.multibody.dynamics import body_spatial_mass
from convexsim.multibody.kinematics import forward_kinematics, forward_kinematics_reference
from convexsim.spatial import quat_to_matrix

TREE_SEEDS = range(10)
"""10 random 7-body trees (every joint type in each: revolute, prismatic, ball, fixed, and a free or
revolute root), 10 configurations each: the 100 random configurations of the acceptance criterion."""


def trees_and_states(n_config=10, nbody=7):
    for seed in TREE_SEEDS:
        rng = np.random.default_rng(seed)
        model = random_tree(rng, nbody, free_root=bool(seed % 2))
        for _ in range(n_config):
            yield model, random_q(model, rng), rng.normal(size=model.nv), rng


def test_random_trees_cover_every_joint_type():
    seen = set()
    for seed in TREE_SEEDS:
        seen |= set(random_tree(np.random.default_rng(seed), 7, free_root=bool(seed % 2)).joint_type.tolist())
    assert seen == {int(t) for t in JointType}


def test_forward_kinematics_kernel_matches_numpy_reference():
    for model, q, _, _ in trees_and_states(3):
        R, p = forward_kinematics(model, q)
        R_ref, p_ref = forward_kinematics_reference(model, q)
        np.testing.assert_allclose(R, R_ref, rtol=0, atol=1e-13)
        np.testing.assert_allclose(p, p_ref, rtol=0, atol=1e-13)
        np.testing.assert_allclose(R @ np.swapaxes(R, 1, 2), np.broadcast_to(np.eye(3), R.shape), atol=1e-13)


def test_mass_matrix_is_spd_and_equals_sum_of_body_terms():
    """CRBA M(q) = Σ_b J_bᵀ diag(I_W, m) J_b + diag(armature), symmetric, positive definite.

    Tolerance 1e-12 relative to max|M|: both sides are sums of O(10) products of O(1) numbers."""
    count = 0
    for model, q, _, _ in trees_and_states(10):
        M = mass_matrix(model, q)
        scale = np.abs(M).max()
        np.testing.assert_allclose(M, mass_matrix_reference(model, q), rtol=0, atol=1e-12 * scale)
        assert np.array_equal(M, M.T)
        assert np.linalg.eigvalsh(M).min() > 0
        count += 1
    assert count == 100


def test_armature_adds_to_the_diagonal_only():
    rng = np.random.default_rng(3)
    model = random_tree(rng, 6)
    q = random_q(model, rng)
    bare = build_tree_without_armature(model)
    np.testing.assert_allclose(mass_matrix(model, q) - mass_matrix(bare, q), np.diag(model.dof_armature),
                               rtol=0, atol=1e-13)


def build_tree_without_armature(model):
    import dataclasses
    return dataclasses.replace(model, dof_armature=np.zeros(model.nv))


def _fd_along(model, q, v, f, h):
    """Central difference of f(q(s)) at s = 0 along q(s) = integrate_q(q, v, s)."""
    return (f(integrate_q(model, q, v, h)) - f(integrate_q(model, q, v, -h))) / (2 * h)


def test_point_jacobians_equal_finite_differences_of_positions_and_orientations():
    """J_P v = d/ds p_WP(q(s)) and J_ω v = d/ds of the body rotation, along the exponential-map curve
    q(s) = integrate_q(q, v, s) (whose tangent is N(q) v). Central differences with h = 1e-6: truncation
    O(h²) ≈ 1e-12, round-off O(ε/h) ≈ 1e-10, so 1e-8 absolute on O(1) velocities."""
    h = 1e-6
    for model, q, v, rng in trees_and_states(5):
        kin = Kinematics(model, q)
        for b in range(model.nbody):
            p_BP = rng.normal(scale=0.3, size=3)
            J = kin.spatial_jacobian(b, p_BP)
            fd_p = _fd_along(model, q, v, lambda qq: Kinematics(model, qq).point_position(b, p_BP), h)
            np.testing.assert_allclose(J[3:] @ v, fd_p, rtol=0, atol=1e-8)
            np.testing.assert_allclose(kin.point_jacobian(b, p_BP), J[3:], rtol=0, atol=0)
            Rp = forward_kinematics(model, integrate_q(model, q, v, h))[0][b]
            Rm = forward_kinematics(model, integrate_q(model, q, v, -h))[0][b]
            W = (Rp - Rm) / (2 * h) @ kin.R_WB[b].T  # = [ω]ₓ
            np.testing.assert_allclose(J[:3] @ v, [W[2, 1], W[0, 2], W[1, 0]], rtol=0, atol=1e-8)


def test_qdot_is_the_tangent_of_integration_and_difference_inverts_it():
    h = 1e-6
    for model, q, v, _ in trees_and_states(2):
        fd = (integrate_q(model, q, v, h) - integrate_q(model, q, v, -h)) / (2 * h)
        np.testing.assert_allclose(qdot(model, q, v), fd, rtol=0, atol=1e-8)
        q1 = integrate_q(model, q, v, 0.3)
        np.testing.assert_allclose(difference(model, q, q1), 0.3 * v, rtol=0, atol=1e-12)


def test_rnea_is_linear_in_acceleration_with_the_crba_mass_matrix():
    """τ(q, v, a) = M(q) a + τ(q, v, 0): the RNEA and the CRBA agree on M (1e-11 relative)."""
    for model, q, v, rng in trees_and_states(3):
        a = rng.normal(size=model.nv)
        M = mass_matrix(model, q)
        tau = inverse_dynamics(model, q, v, a)
        ref = M @ a + bias_forces(model, q, v)
        np.testing.assert_allclose(tau, ref, rtol=0, atol=1e-11 * np.abs(ref).max())


def test_gravity_forces_are_the_gradient_of_the_potential_energy():
    """g_k(q) = dV/ds along q(s) = integrate_q(q, e_k, s): the generalized force of gravity is the
    derivative of V = −Σ m gᵀc along each velocity direction (h = 1e-6; 1e-7 absolute on O(10) N)."""
    h = 1e-6
    for model, q, _, _ in trees_and_states(2):
        g = gravity_forces(model, q)
        fd = np.array([_fd_along(model, q, np.eye(model.nv)[k], lambda qq: potential_energy(model, qq), h)
                       for k in range(model.nv)])
        np.testing.assert_allclose(g, fd, rtol=0, atol=1e-7)


def kane_inverse_dynamics(model, q, v, a, h=1e-5):
    """τ = Σ_b J_cᵀ m (a_c − g) + J_ωᵀ (I ω̇ + ω × I ω) (Kane's / Jourdain's principle), with
    a_c = J_c a + J̇_c v and J̇ v by central differences along q(s) = integrate_q(q, v, s)."""
    kin = Kinematics(model, q)
    tau = model.dof_armature * a
    for b in range(model.nbody):
        c = model.body_com[b]
        J = kin.spatial_jacobian(b, c)
        Jdot_v = _fd_along(model, q, v, lambda qq: Kinematics(model, qq).spatial_jacobian(b, c) @ v, h)
        acc = J @ a + Jdot_v
        Mb = body_spatial_mass(model, kin, b)
        w = J[:3] @ v
        wrench = Mb @ acc
        wrench[:3] += np.cross(w, Mb[:3, :3] @ w)
        wrench[3:] -= model.body_mass[b] * model.gravity
        tau = tau + J.T @ wrench
    return tau


def test_rnea_equals_kane_equations_with_finite_difference_jacobian_rates():
    """M a + C v + g from the RNEA equals Newton–Euler per body projected by the Jacobians (Kane), the
    velocity-product terms from finite differences of J (h = 1e-5: truncation O(h²·|v|³) ≈ 1e-9,
    round-off ≈ 1e-11/h; 1e-7 relative to max|τ|)."""
    for model, q, v, rng in trees_and_states(3):
        a = rng.normal(size=model.nv)
        tau = inverse_dynamics(model, q, v, a)
        ref = kane_inverse_dynamics(model, q, v, a)
        np.testing.assert_allclose(tau, ref, rtol=0, atol=1e-7 * np.abs(ref).max())


def test_coriolis_from_lagranges_equations_for_one_dof_joints():
    """With q̇ = v (revolute and prismatic joints only), Lagrange: C(q, v) v = Ṁ v − ½ ∂(vᵀ M v)/∂q,
    both by central differences of M (h = 1e-6; 1e-7 relative)."""
    h = 1e-6
    for seed in range(5):
        rng = np.random.default_rng(100 + seed)
        types = [JointType.REVOLUTE, JointType.PRISMATIC, JointType.REVOLUTE, JointType.FIXED,
                 JointType.REVOLUTE, JointType.PRISMATIC]
        model = random_tree(rng, types=types)
        for _ in range(5):
            q = random_q(model, rng)
            v = rng.normal(size=model.nv)
            Mdot = (mass_matrix(model, q + h * v) - mass_matrix(model, q - h * v)) / (2 * h)
            dT = np.array([(v @ mass_matrix(model, q + h * e) @ v - v @ mass_matrix(model, q - h * e) @ v)
                           / (4 * h) for e in np.eye(model.nq)])
            Cv = bias_forces(model, q, v) - gravity_forces(model, q)
            ref = Mdot @ v - dT
            np.testing.assert_allclose(Cv, ref, rtol=0, atol=1e-7 * max(np.abs(ref).max(), 1.0))


def test_power_balance_of_the_unforced_dynamics():
    """Along a¹ = M⁻¹(τ − h): dE/dt = vᵀ τ (gyroscopic/Coriolis terms do no work). E = ½vᵀMv + V by
    central differences along (q(s), v + s a) with h = 1e-6 (1e-6 relative)."""
    from convexsim.multibody import kinetic_energy
    h = 1e-6
    for model, q, v, rng in trees_and_states(2):
        tau = rng.normal(size=model.nv)
        a = np.linalg.solve(mass_matrix(model, q), tau - bias_forces(model, q, v))

        def energy(s):
            qs = integrate_q(model, q, v, s)
            return kinetic_energy(model, qs, v + s * a) + potential_energy(model, qs)

        dE = (energy(h) - energy(-h)) / (2 * h)
        assert abs(dE - v @ tau) <= 1e-6 * max(abs(v @ tau), np.abs(v).max() * np.abs(tau).max())


def test_a_free_joint_is_convexsims_free_body():
    """One FREE joint with the COM at the body origin: M = diag(I_W, m), the bias is the gyroscopic
    torque and gravity exactly as convexsim.dynamics.free_motion uses, and integration matches
    convexsim.dynamics.integrate."""
    rng = np.random.default_rng(7)
    inertia = np.diag([0.1, 0.2, 0.25])
    model = build_tree([Joint("box", -1, JointType.FREE, mass=2.0, inertia=inertia)], gravity=(0, 0, -9.81))
    q = np.concatenate([rng.normal(size=3), rng.normal(size=4)])
    q[3:] /= np.linalg.norm(q[3:])
    v = rng.normal(size=6)
    R = quat_to_matrix(q[3:])
    M = mass_matrix(model, q)
    np.testing.assert_allclose(M[:3, :3], R @ inertia @ R.T, atol=1e-15)
    np.testing.assert_allclose(M[3:, 3:], 2.0 * np.eye(3), atol=1e-15)
    np.testing.assert_allclose(M[:3, 3:], 0.0, atol=1e-15)
    dt = 1e-3
    fm = build_model(1, time_step=dt, body_mass=np.array([2.0]), body_inertia=inertia[None],
                     gravity=np.array([0.0, 0.0, -9.81]))
    state = State(t=0.0, q=q[None].copy(), v=v[None].copy(), step=0)
    A, v_star = free_motion(fm, state)
    np.testing.assert_allclose(A[0], M, atol=1e-15)
    np.testing.assert_allclose(v + dt * np.linalg.solve(M, -bias_forces(model, q, v)), v_star, atol=1e-14)
    v_next = rng.normal(size=6)
    np.testing.assert_allclose(integrate_q(model, q, v_next, dt), free_integrate(fm, state, v_next).q[0],
                               atol=1e-15)


@pytest.mark.parametrize("joint, field, message", [
    (dict(parent=3), "parent", "earlier body"),
    (dict(axis=(0, 0, 0)), "axis", "nonzero"),
    (dict(mass=-1.0), "mass", "> 0"),
    (dict(mass=float("nan")), "mass", "> 0"),
    (dict(inertia=-np.eye(3)), "inertia", "semidefinite"),
    (dict(type=JointType.FREE, parent=0), "type", "free joint"),
    (dict(damping=-1.0), "damping", ">= 0"),
    (dict(name="base"), "name", "duplicate"),
])
def test_bad_trees_give_one_field_path_error(joint, field, message):
    base = Joint("base", -1, JointType.REVOLUTE, mass=1.0, inertia=np.eye(3))
    spec = dict(name="link", parent=0, type=JointType.REVOLUTE, mass=1.0, inertia=np.eye(3))
    spec.update(joint)
    with pytest.raises(MultibodyModelError, match=rf"joints\[1\]\.{field}: .*{message}"):
        build_tree([base, Joint(**spec)])
