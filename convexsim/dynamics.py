"""Rigid-body dynamics shared by the SAP and LCP steppers.

Free rigid body b with COM at p_WB, orientation R_WB, generalized velocity v_b = [ω_W; v_W] (6,):

* spatial mass in W, angular first:   M_b = [[I_W, 0], [0, m·1₃]],   I_W = R_WB I_B R_WBᵀ   [kg·m², kg]
* free motion (explicit forces):       v*_b = v_b + dt·M_b⁻¹·(τ_gyro, m·g),   τ_gyro = −ω × (I_W ω)
* point C fixed to b, r = p_WC − p_WB: v_C = v − r × ω = [−[r]ₓ, 1₃]·v_b
* contact velocity in frame C (z = normal from A into B):
      vc = R_WCᵀ (v_Bc − v_Ac) = J_a v_a + J_b v_b,   J_b = R_WCᵀ[−[r_B]ₓ, 1₃],  J_a = −R_WCᵀ[−[r_A]ₓ, 1₃]
* symplectic Euler on SE(3): p ← p + dt·v,  q ← exp(dt·ω/2) ⊗ q  (world-frame ω, left product), renormalized.
* a kinematic body k (no dofs, its velocity v_k an input): the contact velocity gains the known term
  b = ±J_k v_k (its side's block times its velocity), vc = J_a v_a + J_b v_b + b; its pose advances by v_k
  with the same symplectic Euler step (the rotation only when ω_k ≠ 0, so that a body at rest keeps its
  pose to the bit, as a fixed body).

The SAP matrix A is M (no joint damping for free bodies); A is evaluated once per step at q0.
"""

from __future__ import annotations

import numpy as np

import math

from convexsim._jit import jit
from convexsim.geometry.transforms import quat_exp_times, rotation_entries_kernel
from convexsim.model import Contacts, Model, State
from convexsim.sap.newton import F_DT
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


def free_motion(model: Model, state: State, wrench: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """SAP inputs A (= M, per moving body) and the free-motion velocity v*.

    v* = v + dt·M⁻¹·(τ_gyro + τ_ext, m·g + f_ext) with τ_gyro = −ω × (I_W ω) evaluated at the start of the
    step; ``wrench`` (nbody, 6), optional: external (τ_ext, f_ext) in W at each body's COM [N·m, N].

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
    if wrench is not None:
        tau = tau + wrench[bodies, :3]
    w_star = w + dt * np.linalg.solve(I_W, tau[..., None])[..., 0] if bodies.size else w
    v_star = v + dt * model.gravity[None, :]
    if wrench is not None:
        v_star = v_star + dt * wrench[bodies, 3:] / model.body_mass[bodies, None]
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


def side_blocks(q: np.ndarray, bodies: np.ndarray, point: np.ndarray, R_WC: np.ndarray,
                sign: float) -> np.ndarray:
    """sign·R_WCᵀ[−[r]ₓ, 1₃] per contact, r = p_WC − p_WB of the side's body, shape (nc, 3, 6)."""
    Rt = np.swapaxes(R_WC, -1, -2)
    J = np.empty((bodies.shape[0], 3, 6))
    r = point - q[bodies, :3]
    J[:, :, :3] = sign * (Rt @ -skew(r))
    J[:, :, 3:] = sign * Rt
    return J


def contact_jacobian_blocks(model: Model, q: np.ndarray, contacts: Contacts,
                            R_WC: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-contact Jacobian blocks with vc = J_a·v_a + J_b·v_b (contact frame, normal last).

    J_b = R_WCᵀ[−[r_B]ₓ, 1₃], J_a = −R_WCᵀ[−[r_A]ₓ, 1₃], r = p_WC − p_WBo. A block is zero for a body without
    dofs (fixed or kinematic; a kinematic body's known term is :func:`known_contact_velocity`).

    Returns:
        (J_a, J_b), each of shape (nc, 3, 6).
    """
    nc = contacts.count
    if nc == 0:
        return np.zeros((0, 3, 6)), np.zeros((0, 3, 6))
    out = []
    for bodies, sign in ((contacts.body_a, -1.0), (contacts.body_b, 1.0)):
        J = side_blocks(q, bodies, contacts.point, R_WC, sign)
        J[model.body_fixed[bodies]] = 0.0
        out.append(J)
    return out[0], out[1]


def kinematic_mask(model: Model) -> np.ndarray:
    """True for the kinematic bodies, shape (nbody,) (``Model.body_kinematic``, empty when none)."""
    mask = np.zeros(model.nbody, dtype=bool)
    mask[model.kinematic_bodies] = True
    return mask


def known_contact_velocity(model: Model, q: np.ndarray, v: np.ndarray, contacts: Contacts,
                           R_WC: np.ndarray) -> np.ndarray:
    """The known part b of each contact velocity [m/s] (contact frame, normal last), shape (nc, 3): the sides on a
    kinematic body k, b = Σ ±R_WCᵀ[−[r]ₓ, 1₃]·v_k (side B +, side A −), so that vc = J_a v_a + J_b v_b + b;
    zeros for contacts without a kinematic side (the compiled kernel: ``jacobians.known_contact_velocities``)."""
    nc = contacts.count
    b = np.zeros((nc, 3))
    kin = kinematic_mask(model)
    for bodies, sign in ((contacts.body_a, -1.0), (contacts.body_b, 1.0)):
        on = kin[bodies]
        if on.any():
            J = side_blocks(q, bodies[on], contacts.point[on], R_WC[on], sign)
            b[on] += np.einsum("nij,nj->ni", J, v[bodies[on]])
    return b


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
    kin = model.kinematic_bodies                     # their velocity is the input v (module docstring)
    if kin.size:
        q[kin, :3] += dt * v[kin, 3:]
        spin = kin[np.any(v[kin, :3] != 0.0, axis=1)]
        quat = quat_multiply(quat_exp(dt * v[spin, :3]), q[spin, 3:7])
        q[spin, 3:7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    return State(t=state.t + dt, q=q, v=v, step=state.step + 1)




# ---- the compiled stages (numba), each beside its numpy reference above

@jit
def contact_frame(n, R):
    """R_WC (3, 3), columns (t1, t2, n) (``dynamics.contact_frames``)."""
    i = 0
    if abs(n[1]) < abs(n[i]):
        i = 1
    if abs(n[2]) < abs(n[i]):
        i = 2
    j = (i + 1) % 3
    k = (j + 1) % 3
    s = math.sqrt(max(1.0 - n[i] * n[i], 1e-300))
    for r in range(3):                  # t1: −n_k/s at j, n_j/s at k, 0 at i (written into R's first column)
        R[r, 0] = 0.0
    R[j, 0] = -n[k] / s
    R[k, 0] = n[j] / s
    R[0, 1] = n[1] * R[2, 0] - n[2] * R[1, 0]    # t2 = n × t1
    R[1, 1] = n[2] * R[0, 0] - n[0] * R[2, 0]
    R[2, 1] = n[0] * R[1, 0] - n[1] * R[0, 0]
    for r in range(3):
        R[r, 2] = n[r]


@jit
def jacobian_block(R, point, q, body, sign, out, off):
    """J = sign·R_WCᵀ[−[r]ₓ, 1₃] (3 x 6, row-major) at out[off:], r = point − p_WB."""
    r0 = point[0] - q[body, 0]
    r1 = point[1] - q[body, 1]
    r2 = point[2] - q[body, 2]
    for j in range(3):                  # column j of −[r]ₓ = [[−0, r2, −r1], [−r2, −0, r0], [r1, −r0, −0]]
        if j == 0:
            m0, m1, m2 = -0.0, -r2, r1
        elif j == 1:
            m0, m1, m2 = r2, -0.0, -r0
        else:
            m0, m1, m2 = -r1, r0, -0.0
        for i in range(3):
            acc = R[0, i] * m0
            acc += R[1, i] * m1
            acc += R[2, i] * m2
            out[off + 6 * i + j] = sign * acc
            out[off + 6 * i + 3 + j] = sign * R[j, i]


@jit
def solve3(M, b):
    """x = M⁻¹ b for a 3 x 3 M: LU with partial pivoting in LAPACK's unblocked order (dgetf2: pivot = first
    largest |entry|, column scaled by the pivot's reciprocal, rank-1 update; dgetrs: unit-lower forward and
    column-oriented upper back substitution). NaN and inf pass through (no exception)."""
    A = M.copy()
    x = b.copy()
    for j in range(3):
        p = j
        best = abs(A[j, j])
        for i in range(j + 1, 3):
            if abs(A[i, j]) > best:
                best = abs(A[i, j])
                p = i
        if p != j:
            for k in range(3):
                t = A[j, k]
                A[j, k] = A[p, k]
                A[p, k] = t
            t = x[j]
            x[j] = x[p]
            x[p] = t
        if j < 2:
            r = 1.0 / A[j, j]
            for i in range(j + 1, 3):
                A[i, j] *= r
            for k in range(j + 1, 3):
                for i in range(j + 1, 3):
                    A[i, k] -= A[i, j] * A[j, k]
    for k in range(3):           # L y = x (unit diagonal), column by column
        for i in range(k + 1, 3):
            x[i] -= x[k] * A[i, k]
    for k in range(2, -1, -1):   # U x = y, column by column
        x[k] = x[k] / A[k, k]
        for i in range(k):
            x[i] -= x[k] * A[i, k]
    return x


@jit
def free_motion_kernel(fpar, gravity, body_dof, mass, inertia, q, v, moving, A_values, v_star):
    """A blocks (6 x 6 per moving body, angular first) and v* (``dynamics.free_motion``). The 3 × 3 and 3-vector
    work arrays are allocated once per call, not per body (a pile's step calls this for every body)."""
    dt = fpar[F_DT]
    work = np.empty((4, 3, 3))        # R, R·I, I_W and (I_W ω, τ) as rows: one allocation per call
    R = work[0]
    RI = work[1]
    IW = work[2]
    Iw = work[3, 0]
    tau = work[3, 1]
    for m in range(moving.shape[0]):
        b = moving[m]
        w = q[b, 3]
        x = q[b, 4]
        y = q[b, 5]
        z = q[b, 6]
        e = rotation_entries_kernel(w, x, y, z)      # the one quaternion → rotation formula (as stored)
        for i in range(3):
            for j in range(3):
                R[i, j] = e[3 * i + j]
        for i in range(3):
            for j in range(3):
                acc = R[i, 0] * inertia[b, 0, j]
                acc += R[i, 1] * inertia[b, 1, j]
                acc += R[i, 2] * inertia[b, 2, j]
                RI[i, j] = acc
        for i in range(3):
            for j in range(3):
                acc = RI[i, 0] * R[j, 0]
                acc += RI[i, 1] * R[j, 1]
                acc += RI[i, 2] * R[j, 2]
                IW[i, j] = acc
        p = 36 * m
        for i in range(36):
            A_values[p + i] = 0.0
        for i in range(3):
            for j in range(3):
                A_values[p + 6 * i + j] = IW[i, j]
            A_values[p + 6 * (3 + i) + 3 + i] = mass[b]
        for i in range(3):
            acc = IW[i, 0] * v[b, 0]
            acc += IW[i, 1] * v[b, 1]
            acc += IW[i, 2] * v[b, 2]
            Iw[i] = acc
        tau[0] = -(v[b, 1] * Iw[2] - v[b, 2] * Iw[1])
        tau[1] = -(v[b, 2] * Iw[0] - v[b, 0] * Iw[2])
        tau[2] = -(v[b, 0] * Iw[1] - v[b, 1] * Iw[0])
        if tau[0] != 0.0 or tau[1] != 0.0 or tau[2] != 0.0:
            dw = solve3(IW, tau)
            for i in range(3):
                v_star[6 * m + i] = v[b, i] + dt * dw[i]
        else:
            for i in range(3):
                v_star[6 * m + i] = v[b, i]
        for i in range(3):
            v_star[6 * m + 3 + i] = v[b, 3 + i] + dt * gravity[i]


@jit(inline="always")
def advance_pose(dt, b, q, v_out, q_out):
    """q_out[b] = body b's pose q[b] advanced by v_out[b] over dt (symplectic Euler on SE(3))."""
    for i in range(3):
        q_out[b, i] = q[b, i] + dt * v_out[b, 3 + i]
    qw, qx, qy, qz = quat_exp_times(dt * v_out[b, 0], dt * v_out[b, 1], dt * v_out[b, 2], q[b, 3], q[b, 4],
                                    q[b, 5], q[b, 6])
    q_out[b, 3] = qw
    q_out[b, 4] = qx
    q_out[b, 5] = qy
    q_out[b, 6] = qz


@jit
def integrate_kernel(fpar, moving, kinematic, q, v, v_next, q_out, v_out):
    """Symplectic Euler (``dynamics.integrate``): v_out = v with the moving bodies' v_next, q_out advanced; the
    kinematic bodies (``kinematic`` (nbody,) True) advanced by their own velocity v (the rotation only when ω ≠ 0)."""
    dt = fpar[F_DT]
    for b in range(q.shape[0]):
        for i in range(7):
            q_out[b, i] = q[b, i]
        for i in range(6):
            v_out[b, i] = v[b, i]
    for m in range(moving.shape[0]):
        b = moving[m]
        for i in range(6):
            v_out[b, i] = v_next[6 * m + i]
        advance_pose(dt, b, q, v_out, q_out)
    for b in range(kinematic.shape[0]):
        if not kinematic[b]:
            continue
        if v[b, 0] != 0.0 or v[b, 1] != 0.0 or v[b, 2] != 0.0:
            advance_pose(dt, b, q, v_out, q_out)
        else:
            for i in range(3):
                q_out[b, i] = q[b, i] + dt * v[b, 3 + i]


__all__ = [
    "moving_bodies", "world_inertia",
    "mass_blocks", "free_motion", "contact_frames", "contact_jacobian_blocks", "integrate", "side_blocks",
    "kinematic_mask", "known_contact_velocity",
]
