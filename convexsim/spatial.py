"""Rotations and cross products: the one home of this math.

``rotation_entries`` is the package's one quaternion → rotation formula and ``quat_product_entries`` its one
quaternion product: plain arithmetic, so the same code serves numpy arrays (``quat_to_matrix``,
``quat_multiply``) and numba kernels (``convexsim.geometry.transforms`` compiles them into ``quat_to_rot`` and
``quat_exp_times``). ``rotation_log`` is its one rotation log (``quat_log`` goes through it). This module
itself imports no numba.

Quaternions are (w, x, y, z), scalar first; every function broadcasts over leading axes.
"""

from __future__ import annotations

import math

import numpy as np


def rotation_entries(w, x, y, z):
    """The nine entries of the rotation matrix of the unit quaternion (w, x, y, z), row by row:
    R = I + 2w[u]ₓ + 2[u]ₓ² with u = (x, y, z).

    The package's one quaternion → rotation formula. Scalars or arrays of one shape (entries of that shape);
    numba compiles it as it stands (``geometry.transforms.quat_to_rot``), so keep it plain arithmetic. Its
    file is in the cache fingerprint of every kernel module that imports it (``convexsim._jit``)."""
    return (1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y))


def quat_to_matrix(quat, normalize: bool = True) -> np.ndarray:
    """Rotation matrices R of quaternions (w, x, y, z): shape (..., 4) -> (..., 3, 3) (``rotation_entries``).

    ``normalize=False`` skips the normalization for quaternions already of unit norm (the simulation state's,
    renormalized every step).
    """
    q = np.asarray(quat, dtype=np.float64)
    if normalize:
        q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack(rotation_entries(w, x, y, z), axis=-1).reshape(q.shape[:-1] + (3, 3))


def quat_product_entries(aw, ax, ay, az, bw, bx, by, bz):
    """The four entries (w, x, y, z) of the Hamilton product a ⊗ b, R(a ⊗ b) = R(a)·R(b):
    (a_w b_w − a_u·b_u, a_w b_u + b_w a_u + a_u × b_u) with a_u = (a_x, a_y, a_z).

    The package's one quaternion product. Scalars or arrays of one shape; numba compiles it as it stands
    (``geometry.transforms.quat_product_kernel``), so keep it plain arithmetic."""
    return (aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw)


def quat_multiply(a, b) -> np.ndarray:
    """Hamilton product a ⊗ b of quaternions (w, x, y, z), shape (..., 4) (``quat_product_entries``)."""
    aw, ax, ay, az = np.moveaxis(np.asarray(a, dtype=np.float64), -1, 0)
    bw, bx, by, bz = np.moveaxis(np.asarray(b, dtype=np.float64), -1, 0)
    return np.stack(quat_product_entries(aw, ax, ay, az, bw, bx, by, bz), axis=-1)


def quat_exp(rotvec) -> np.ndarray:
    """Unit quaternion of the rotation vector θ·u [rad]: (cos θ/2, sin(θ/2)·u), shape (..., 3) -> (..., 4)."""
    rotvec = np.asarray(rotvec, dtype=np.float64)
    theta = np.linalg.norm(rotvec, axis=-1, keepdims=True)
    half = 0.5 * theta
    small = theta < 1e-8  # sin(θ/2)/θ by its Taylor series near 0 (avoids 0/0)
    k = np.where(small, 0.5 - theta**2 / 48.0, np.sin(half) / np.where(small, 1.0, theta))
    return np.concatenate([np.cos(half), k * rotvec], axis=-1)


def rotation_log(R) -> np.ndarray:
    """Rotation vector θ = angle·u [rad], |θ| <= π, with exp([θ]ₓ) = R (the inverse of Rodrigues' formula):
    with w = (R₂₁ − R₁₂, R₀₂ − R₂₀, R₁₀ − R₀₁) = 2 sin(angle)·u and tr R = 1 + 2 cos(angle),
    angle = atan2(|w|/2, (tr R − 1)/2) and θ = angle·w/|w| (θ = w/2 below 1e-8 rad). Within 1e-6 rad of π,
    where w vanishes, the axis comes from the symmetric part ½(R + I) = cos²(angle/2)·I + sin²(angle/2)·u uᵀ
    (its largest column), signed by w.

    The package's one rotation log (``quat_log`` goes through it). One matrix (3, 3) -> (3,)."""
    R = np.asarray(R, dtype=np.float64)
    w = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    s = float(np.linalg.norm(w))
    angle = math.atan2(0.5 * s, 0.5 * (float(np.trace(R)) - 1.0))
    if angle < 1e-8:
        return 0.5 * w
    if math.pi - angle < 1e-6:                           # near π: the symmetric part gives the axis
        B = 0.5 * (R + np.eye(3))
        axis = np.sqrt(np.maximum(np.diag(B), 0.0))
        k = int(np.argmax(axis))
        axis = B[k] / max(axis[k], 1e-300)
        axis /= np.linalg.norm(axis)
        if axis @ w < 0:
            axis = -axis
        return angle * axis
    return angle / s * w


def quat_log(quat) -> np.ndarray:
    """Rotation vector θ·u [rad], |θ| <= π, of a unit quaternion (w, x, y, z): the inverse of ``quat_exp``
    (q and −q give the same θ); ``rotation_log`` of its rotation matrix. One quaternion (4,) -> (3,)."""
    return rotation_log(quat_to_matrix(quat))


def skew(r) -> np.ndarray:
    """Cross-product matrices [r]ₓ with [r]ₓ·u = r × u: shape (..., 3) -> (..., 3, 3)."""
    r = np.asarray(r, dtype=np.float64)
    S = np.zeros(r.shape[:-1] + (3, 3))
    S[..., 0, 1], S[..., 0, 2] = -r[..., 2], r[..., 1]
    S[..., 1, 0], S[..., 1, 2] = r[..., 2], -r[..., 0]
    S[..., 2, 0], S[..., 2, 1] = -r[..., 1], r[..., 0]
    return S


__all__ = ["rotation_entries", "quat_to_matrix", "quat_product_entries", "quat_multiply", "quat_exp", "quat_log",
           "rotation_log", "skew"]
