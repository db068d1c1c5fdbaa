"""Rigid-body kinematics and dynamics shared by the steppers (convexsim/dynamics.py)."""

import dataclasses

import numpy as np
import pytest

from convexsim import dynamics, spatial
from convexsim.geometry.transforms import quat_to_rot
from convexsim.model import Contacts, State
from model_builder import build_model


def make_model(n_moving=2, fixed_ground=True, dt=1e-3, inertia=None):
    """A Model of n_moving free bodies (+ optional fixed ground), built without the scene package."""
    nb = n_moving + int(fixed_ground)
    fixed = np.zeros(nb, bool)
    if fixed_ground:
        fixed[0] = True
    I = np.tile(np.diag([0.1, 0.2, 0.3]) if inertia is None else inertia, (nb, 1, 1))
    return build_model(nb, ngeom=0, nmat=0, name="t", time_step=dt, body_mass=np.full(nb, 2.0),
                       body_inertia=I, body_fixed=fixed)


def random_quat(rng, n):
    q = rng.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def test_quat_to_matrix_is_a_rotation_and_matches_axis_angle():
    """Check R(q) is orthonormal with det 1, and a z-rotation by θ has the textbook form."""
    rng = np.random.default_rng(0)
    R = spatial.quat_to_matrix(random_quat(rng, 50))
    np.testing.assert_allclose(R @ np.swapaxes(R, 1, 2), np.broadcast_to(np.eye(3), R.shape), atol=1e-14)
    np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=1e-14)
    th = 0.7
    Rz = spatial.quat_to_matrix(spatial.quat_exp(np.array([0, 0, th])))
    np.testing.assert_allclose(Rz, [[np.cos(th), -np.sin(th), 0], [np.sin(th), np.cos(th), 0], [0, 0, 1]],
                               atol=1e-15)


def test_quat_multiply_composes_rotations():
    """Check R(a ⊗ b) = R(a) R(b)."""
    rng = np.random.default_rng(1)
    a, b = random_quat(rng, 20), random_quat(rng, 20)
    np.testing.assert_allclose(spatial.quat_to_matrix(spatial.quat_multiply(a, b)),
                               spatial.quat_to_matrix(a) @ spatial.quat_to_matrix(b), atol=1e-14)


def test_kernel_rotation_twin_equals_numpy_rotation():
    """The numba kernels' scalar quat_to_rot and spatial.quat_to_matrix agree on unnormalized input."""
    rng = np.random.default_rng(3)
    q = rng.normal(size=(30, 4)) * 3.0
    R = spatial.quat_to_matrix(q)
    for i in range(q.shape[0]):
        np.testing.assert_allclose(quat_to_rot(*q[i]), R[i], atol=1e-14)


def test_skew_is_the_cross_product():
    """[r]ₓ u = r × u for random r, u."""
    rng = np.random.default_rng(4)
    r, u = rng.normal(size=(2, 40, 3))
    np.testing.assert_allclose(np.einsum("nij,nj->ni", spatial.skew(r), u), np.cross(r, u), atol=1e-14)


def test_contact_frames_orthonormal_right_handed_normal_last():
    """Check the frame columns (t1, t2, n): orthonormal, det +1, third column = normal; Drake's +z case."""
    rng = np.random.default_rng(2)
    n = rng.normal(size=(100, 3))
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    n[:3] = np.eye(3)
    R = dynamics.contact_frames(n)
    np.testing.assert_allclose(np.swapaxes(R, 1, 2) @ R, np.broadcast_to(np.eye(3), R.shape), atol=1e-14)
    np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=1e-14)
    np.testing.assert_allclose(R[:, :, 2], n, atol=0)
    # docs/conventions.md, contact frame C: for n = +z Drake's frame has x_C = (0, -1, 0), y_C = (1, 0, 0).
    Rz = dynamics.contact_frames(np.array([[0.0, 0, 1]]))[0]
    np.testing.assert_allclose(Rz[:, 0], [0, -1, 0], atol=0)
    np.testing.assert_allclose(Rz[:, 1], [1, 0, 0], atol=0)


def test_contact_jacobian_gives_relative_point_velocity():
    """Check vc = R_WCᵀ(v_Bc − v_Ac) with v_C = v + ω × (p_C − p_Bo), computed independently."""
    rng = np.random.default_rng(3)
    model = make_model(n_moving=2)
    q = np.zeros((3, 7))
    q[:, :3] = rng.normal(size=(3, 3))
    q[:, 3:] = random_quat(rng, 3)
    v = rng.normal(size=(3, 6))
    v[0] = 0
    c = Contacts(geom_a=np.array([0, 0, 1]), geom_b=np.array([0, 0, 0]), body_a=np.array([0, 1, 1]),
                 body_b=np.array([1, 2, 2]), phi=np.zeros(3), point=rng.normal(size=(3, 3)),
                 normal=np.eye(3))
    R = dynamics.contact_frames(c.normal)
    Ja, Jb = dynamics.contact_jacobian_blocks(model, q, c, R)
    for i in range(3):
        def point_vel(b):
            return v[b, 3:] + np.cross(v[b, :3], c.point[i] - q[b, :3])
        expect = R[i].T @ (point_vel(c.body_b[i]) - point_vel(c.body_a[i]))
        got = Ja[i] @ v[c.body_a[i]] + Jb[i] @ v[c.body_b[i]]
        np.testing.assert_allclose(got, expect, atol=1e-13)
    assert not Ja[0].any(), "a fixed body must have a zero Jacobian block"


def test_free_fall_matches_symplectic_euler_closed_form():
    """Check free fall: v_n = v0 + n·dt·g, x_n = x0 + n·dt·v0 + dt²·g·n(n+1)/2 (exact to round-off)."""
    model = make_model(n_moving=1, fixed_ground=False, dt=1e-3)
    state = State(0.0, np.array([[0, 0, 1.0, 1, 0, 0, 0]]), np.array([[0, 0, 0, 0.3, 0, 2.0]]))
    n = 500
    for _ in range(n):
        _, v_star = dynamics.free_motion(model, state)
        state = dynamics.integrate(model, state, v_star)
    g, dt = model.gravity, model.time_step
    v0 = np.array([0.3, 0, 2.0])
    np.testing.assert_allclose(state.v[0, 3:], v0 + n * dt * g, rtol=0, atol=1e-12)
    np.testing.assert_allclose(state.q[0, :3], [0, 0, 1.0] + n * dt * v0 + dt**2 * g * n * (n + 1) / 2,
                               rtol=0, atol=1e-12)
    assert state.t == pytest.approx(n * dt, abs=1e-12)


def test_integrate_rotation_about_fixed_axis_is_exact():
    """Check constant ω about a principal axis of a symmetric body turns by ω·t exactly (exp map)."""
    model = make_model(n_moving=1, fixed_ground=False, inertia=np.eye(3) * 0.1)
    model = dataclasses.replace(model, gravity=np.zeros(3))
    state = State(0.0, np.array([[0, 0, 0, 1.0, 0, 0, 0]]), np.array([[0, 0, 2.0, 0, 0, 0]]))
    for _ in range(1000):
        _, v_star = dynamics.free_motion(model, state)
        state = dynamics.integrate(model, state, v_star)
    np.testing.assert_allclose(state.q[0, 3:], [np.cos(1.0), 0, 0, np.sin(1.0)], atol=1e-12)
    assert abs(np.linalg.norm(state.q[0, 3:]) - 1) < 1e-14


def test_gyroscopic_term_conserves_angular_momentum_direction_approximately():
    """Check torque-free tumbling: |L_W| = |I_W ω| stays within O(dt) of its start over 1 s."""
    model = make_model(n_moving=1, fixed_ground=False, inertia=np.diag([0.1, 0.2, 0.3]))
    model = dataclasses.replace(model, gravity=np.zeros(3), time_step=1e-4)
    state = State(0.0, np.array([[0, 0, 0, 1.0, 0, 0, 0]]), np.array([[0.1, 3.0, 0.1, 0, 0, 0]]))

    def L(s):
        return dynamics.world_inertia(model, s.q, np.array([0]))[0] @ s.v[0, :3]

    L0 = L(state)
    for _ in range(10000):
        _, v_star = dynamics.free_motion(model, state)
        state = dynamics.integrate(model, state, v_star)
    # Explicit gyroscopic term: first-order drift; tolerance 1% for dt = 1e-4 over 1 s (near the
    # intermediate-axis rotation, the most sensitive case).
    np.testing.assert_allclose(L(state), L0, rtol=0, atol=1e-2 * np.linalg.norm(L0))
