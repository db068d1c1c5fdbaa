"""Rigid-body dynamics shared by the SAP and LCP steppers.

Free rigid body b with COM at p_WB, orientation R_WB, generalized velocity v_b = [ω_W; v_W] (6,):

* spatial mass in W, angular first:   M_b = [[I_W, 0], [0, m·1₃]],   I_W = R_WB I_B R_WBᵀ   [kg·m², kg]
* free motion (explicit forces):       v*_b = v_b + dt·M_b⁻¹·(τ_gyro, m·g),   τ_gyro = −ω × (I_W ω)
* point C fixed to b, r = p_WC − p_WB: v_C = v − r × ω = [−[r]ₓ, 1₃]·v_b
* contact velocity in frame C (z = normal from A into B):
      vc = R_WCᵀ (v_Bc − v_Ac) = J_a v_a + J_b v_b,   J_b = R_WCᵀ[−[r_B]ₓ, 1₃],  J_a = −R_WCᵀ[−[r_A]ₓ, 1₃]
* symplectic Euler on SE(3): p ← p + dt·v,  q ← exp(dt·ω/2) ⊗ q  (world-frame ω, left product), renormalized.

The SAP matrix A is M (no joint damping for free bodies); A is evaluated once per step at q0.
"""

from __future__ import annotations

import numpy as np

from convexsim.model import Contacts, Model, State
from convexsim.spatial import quat_exp, quat_multiply, quat_to_matrix, skew


def moving_bodies(model: Model) -> np.ndarray:
    """Indices of the bodies that own degrees of freedom, in the order of their cliques."""
    return np.flatnonzero(model.body_dof >= 0)


def world_inertia(model: Model, q: np.ndarray, bodies: np.ndarray) -> np.ndarray:
    """I_W = R_WB I_B R_WBᵀ [kg·m²] of the given bodies, shape (n, 3, 3)."""
    R = quat_to_matrix(q[bodies, 3:7], normalize=False)
    return R @ model.body_inertia[bodies] @ np.swapaxes(R, -1, -2)


def mass_blocks(model: Model, q: np.ndarray) -> np.ndarray:
    """Spatial mass matrices M_b in W (angular first) of the moving bodies, shape (nmov, 6, 6)."""
    bodies = moving_bodies(model)
    M = np.zeros((bodies.size, 6, 6))
    M[:, :3, :3] = world_inertia(model, q, bodies)
    M[:, 3:, 3:] = model.body_mass[bodies, None, None] * np.eye(3)
    return M


def free_motion(model: Model, state: State) -> tuple[np.ndarray, np.ndarray]:
    """SAP inputs A (= M, per moving body) and the free-motion velocity v*.

    v* = v + dt·M⁻¹·(τ_gyro, m·g) with τ_gyro = −ω × (I_W ω) evaluated at the start of the step.

    Returns:
        A_blocks: (nmov, 6, 6) [kg·m², kg]; v_star: (6·nmov,) packed [ω; v] per moving body.
    """
    bodies = moving_bodies(model)
    dt = model.time_step
    I_W = world_inertia(model, state.q, bodies)
    A = np.zeros((bodies.size, 6, 6))
    A[:, :3, :3] = I_W
    A[:, 3:, 3:] = model.body_mass[bodies, None, None] * np.eye(3)
    w = state.v[bodies, :3]
    v = state.v[bodies, 3:]
    tau = -np.cross(w, np.einsum("nij,nj->ni", I_W, w))
    w_star = w + dt * np.linalg.solve(I_W, tau[..., None])[..., 0] if bodies.size else w
    v_star = v + dt * model.gravity[None, :]
    return A, np.concatenate([w_star, v_star], axis=1).reshape(-1)


def contact_frames(normal: np.ndarray) -> np.ndarray:
    """Contact frames R_WC with columns (t1, t2, n), z = normal; shape (nc, 3) -> (nc, 3, 3).

    Built as Drake's RotationMatrix::MakeFromOneVector: with i = argmin |n_i|, j = i+1, k = i+2 (mod 3)
    and s = sqrt(1 − n_i²): t1_i = 0, t1_j = −n_k/s, t1_k = n_j/s; t2 = n × t1. For n = +z this is
    t1 = (0, −1, 0), t2 = (1, 0, 0).
    """
    n = np.asarray(normal, dtype=float)
    nc = n.shape[0]
    R = np.zeros((nc, 3, 3))
    if nc == 0:
        return R
    i = np.argmin(np.abs(n), axis=1)
    j = (i + 1) % 3
    k = (j + 1) % 3
    rows = np.arange(nc)
    s = np.sqrt(np.maximum(1.0 - n[rows, i] ** 2, 1e-300))
    t1 = np.zeros((nc, 3))
    t1[rows, j] = -n[rows, k] / s
    t1[rows, k] = n[rows, j] / s
    t2 = np.cross(n, t1)
    R[:, :, 0], R[:, :, 1], R[:, :, 2] = t1, t2, n
    return R


def contact_jacobian_blocks(model: Model, q: np.ndarray, contacts: Contacts,
                            R_WC: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-contact Jacobian blocks with vc = J_a·v_a + J_b·v_b (contact frame, normal last).

    J_b = R_WCᵀ[−[r_B]ₓ, 1₃], J_a = −R_WCᵀ[−[r_A]ₓ, 1₃], r = p_WC − p_WBo. A block is zero for a fixed body.

    Returns:
        (J_a, J_b), each of shape (nc, 3, 6).
    """
    nc = contacts.count
    Ja = np.zeros((nc, 3, 6))
    Jb = np.zeros((nc, 3, 6))
    if nc == 0:
        return Ja, Jb
    Rt = np.swapaxes(R_WC, -1, -2)
    for J, bodies, sign in ((Ja, contacts.body_a, -1.0), (Jb, contacts.body_b, 1.0)):
        r = contacts.point - q[bodies, :3]
        J[:, :, :3] = sign * (Rt @ -skew(r))
        J[:, :, 3:] = sign * Rt
        J[model.body_fixed[bodies]] = 0.0
    return Ja, Jb


def integrate(model: Model, state: State, v_next: np.ndarray) -> State:
    """Symplectic Euler: positions and orientations advanced with the new velocities.

    Args:
        v_next: packed velocities of the moving bodies, shape (6·nmov,), or per-body (nbody, 6).
    """
    bodies = moving_bodies(model)
    v = state.v.copy()
    if v_next.ndim == 1:
        v[bodies] = v_next.reshape(-1, 6)
    else:
        v[bodies] = v_next[bodies]
    dt = model.time_step
    q = state.q.copy()
    q[bodies, :3] += dt * v[bodies, 3:]
    quat = quat_multiply(quat_exp(dt * v[bodies, :3]), q[bodies, 3:7])
    q[bodies, 3:7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    return State(t=state.t + dt, q=q, v=v, step=state.step + 1)


__all__ = [
    "moving_bodies", "world_inertia",
    "mass_blocks", "free_motion", "contact_frames", "contact_jacobian_blocks", "integrate",
]
