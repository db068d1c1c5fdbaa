"""Small pose helpers for the viewer (float64 throughout; never meshcat.transformations).

meshcat 0.3.2's ``transformations`` uses ``np.array(..., copy=False)``, which raises under NumPy 2
for anything but float64 arrays (docs/viewer.md, "meshcat 0.3.2 traps"). We build every matrix and
quaternion here.

Conventions: quaternions (w, x, y, z) as in convexsim; three.js wants (x, y, z, w).
"""

from __future__ import annotations

import numpy as np

from convexsim.spatial import quat_to_matrix  # the core's formula (also re-exported for the viewer)


def pose_matrix(p, q=(1.0, 0.0, 0.0, 0.0), scale=(1.0, 1.0, 1.0)) -> np.ndarray:
    """Homogeneous 4×4 float64 matrix T = [R·diag(scale), p; 0, 1] from position p [m] and (w, x, y, z)."""
    T = np.eye(4)
    T[:3, :3] = quat_to_matrix(q) * np.asarray(scale, dtype=np.float64)[None, :]
    T[:3, 3] = np.asarray(p, dtype=np.float64)
    return T


def pose_matrices(p, q, scale=None) -> np.ndarray:
    """Vectorized ``pose_matrix``: (n, 4, 4) from positions p (n, 3) [m], unit quaternions q (n, 4)
    (w, x, y, z) and optional scales (n, 3); R by the core's ``quat_to_matrix`` (no normalization)."""
    p = np.asarray(p, dtype=np.float64).reshape(-1, 3)
    q = np.asarray(q, dtype=np.float64).reshape(-1, 4)
    R = quat_to_matrix(q, normalize=False)
    if scale is not None:
        R = R * np.asarray(scale, dtype=np.float64).reshape(-1, 1, 3)
    T = np.zeros((q.shape[0], 4, 4))
    T[:, :3, :3] = R
    T[:, :3, 3] = p
    T[:, 3, 3] = 1.0
    return T


def translation_matrix(p) -> np.ndarray:
    """4×4 float64 translation by p [m]."""
    T = np.eye(4)
    T[:3, 3] = np.asarray(p, dtype=np.float64)
    return T


def wxyz_to_xyzw(q: np.ndarray) -> np.ndarray:
    """Reorder (…, 4) quaternions from (w, x, y, z) to three.js (x, y, z, w), float64."""
    q = np.asarray(q, dtype=np.float64)
    return np.concatenate([q[..., 1:4], q[..., :1]], axis=-1)


def make_sign_continuous(q: np.ndarray) -> np.ndarray:
    """Flip signs along axis 0 so consecutive quaternions have a non-negative dot product (same rotations)."""
    q = np.array(q, dtype=np.float64, copy=True)
    for k in range(1, q.shape[0]):
        flip = np.sum(q[k] * q[k - 1], axis=-1) < 0
        q[k][flip] *= -1
    return q


def quat_from_y_to(d: np.ndarray) -> np.ndarray:
    """Unit quaternions (w, x, y, z) of the shortest rotation taking +y to the unit vectors d, shape (n, 3).

    q ∝ (1 + ŷ·d, ŷ × d); for d ≈ −ŷ (1 + ŷ·d → 0) we use the half-turn about x, (0, 1, 0, 0).
    """
    d = np.asarray(d, dtype=np.float64).reshape(-1, 3)
    n = np.linalg.norm(d, axis=1, keepdims=True)
    d = np.divide(d, n, out=np.tile([0.0, 1.0, 0.0], (d.shape[0], 1)), where=n > 0)
    q = np.empty((d.shape[0], 4))
    q[:, 0] = 1.0 + d[:, 1]
    q[:, 1] = d[:, 2]           # ŷ × d = (d_z, 0, −d_x)
    q[:, 2] = 0.0
    q[:, 3] = -d[:, 0]
    anti = q[:, 0] < 1e-9
    q[anti] = (0.0, 1.0, 0.0, 0.0)
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def rgba_to_hex(rgba) -> int:
    """0xRRGGBB integer from an RGB(A) tuple in [0, 1]."""
    r, g, b = (int(round(255 * float(np.clip(c, 0.0, 1.0)))) for c in tuple(rgba)[:3])
    return (r << 16) | (g << 8) | b
