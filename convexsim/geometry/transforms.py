"""World poses of geometries and the small vector helpers shared by the collision kernels.

A geometry G is attached to body B with pose (p_BG, R_BG) (``Model.geom_pos``, ``Model.geom_quat``).
With the body pose q_b = (p_WB, R_WB) its world pose is

    p_WG = p_WB + R_WB p_BG,        R_WG = R_WB R_BG.

The columns of R_WG are the geometry's local axes expressed in W.
"""

from __future__ import annotations

import math

import numpy as np

from convexsim._jit import jit
from convexsim.spatial import quat_product_entries, rotation_entries

TINY = 1e-12
"""Lengths [m] (or squared lengths, as noted) below this are treated as zero by the kernels."""


rotation_entries_kernel = jit(inline="always")(rotation_entries)
"""``convexsim.spatial.rotation_entries`` (the one quaternion → rotation formula) compiled for the kernels."""

quat_product_kernel = jit(inline="always")(quat_product_entries)
"""``convexsim.spatial.quat_product_entries`` (the one quaternion product) compiled for the kernels."""


@jit
def quat_to_rot(w: float, x: float, y: float, z: float) -> np.ndarray:
    """Rotation matrix of the quaternion (w, x, y, z), normalized first; shape (3, 3)
    (``spatial.rotation_entries``; numpy callers with many quaternions: ``spatial.quat_to_matrix``).

    A zero quaternion yields the identity (the Python wrapper rejects it before calling).
    """
    R = np.empty((3, 3))
    quat_to_rot_into(w, x, y, z, R)
    return R


@jit(inline="always")
def quat_to_rot_into(w: float, x: float, y: float, z: float, R) -> None:
    """:func:`quat_to_rot` written into R (3, 3): no allocation, for kernels that rotate many bodies per step."""
    n = math.sqrt(w * w + x * x + y * y + z * z)
    if n == 0.0:
        for i in range(3):
            for j in range(3):
                R[i, j] = 1.0 if i == j else 0.0
        return
    e = rotation_entries_kernel(w / n, x / n, y / n, z / n)
    for i in range(3):
        for j in range(3):
            R[i, j] = e[3 * i + j]


@jit
def rot_to_quat(R, out):
    """Unit quaternion (w, x, y, z) of the rotation matrix R into out (4,): Shepperd's method, the largest of
    (tr R, R00, R11, R22) as pivot, then normalized and w >= 0 (numba; ``multibody.forest.matrix_to_quat`` wraps it)."""
    tr = R[0, 0] + R[1, 1] + R[2, 2]
    i = 0
    best = tr
    for k in range(3):
        if R[k, k] > best:
            best = R[k, k]
            i = k + 1
    if i == 0:
        s = 2.0 * math.sqrt(1.0 + tr)
        w, x, y, z = 0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s
    elif i == 1:
        s = 2.0 * math.sqrt(1.0 + R[0, 0] - R[1, 1] - R[2, 2])
        w, x, y, z = (R[2, 1] - R[1, 2]) / s, 0.25 * s, (R[0, 1] + R[1, 0]) / s, (R[0, 2] + R[2, 0]) / s
    elif i == 2:
        s = 2.0 * math.sqrt(1.0 + R[1, 1] - R[0, 0] - R[2, 2])
        w, x, y, z = (R[0, 2] - R[2, 0]) / s, (R[0, 1] + R[1, 0]) / s, 0.25 * s, (R[1, 2] + R[2, 1]) / s
    else:
        s = 2.0 * math.sqrt(1.0 + R[2, 2] - R[0, 0] - R[1, 1])
        w, x, y, z = (R[1, 0] - R[0, 1]) / s, (R[0, 2] + R[2, 0]) / s, (R[1, 2] + R[2, 1]) / s, 0.25 * s
    n = math.sqrt(w * w + x * x + y * y + z * z)
    sign = 1.0 if w / n >= 0.0 else -1.0
    out[0], out[1], out[2], out[3] = sign * w / n, sign * x / n, sign * y / n, sign * z / n


@jit
def quat_exp_times(rx, ry, rz, bw, bx, by, bz):
    """exp(r) ⊗ b renormalized: the unit quaternion of the rotation vector r = θ·u [rad] (cos θ/2, sin(θ/2) u,
    with sin(θ/2)/θ ≈ ½ − θ²/48 below θ = 1e-8, as ``spatial.quat_exp``) times the quaternion b (w, x, y, z),
    divided by its norm (``spatial.quat_product_entries``). Returns (w, x, y, z)."""
    theta = math.sqrt(rx * rx + ry * ry + rz * rz)
    half = 0.5 * theta
    k = 0.5 - theta ** 2 / 48.0 if theta < 1e-8 else math.sin(half) / theta
    aw = math.cos(half)
    ax, ay, az = k * rx, k * ry, k * rz
    qw, qx, qy, qz = quat_product_kernel(aw, ax, ay, az, bw, bx, by, bz)
    n = math.sqrt(qw * qw + qx * qx + qy * qy + qz * qz)
    return qw / n, qx / n, qy / n, qz / n


@jit
def geom_world_poses_kernel(
    q: np.ndarray, geom_body: np.ndarray, geom_pos: np.ndarray, geom_quat: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """World position (ngeom, 3) [m] and rotation R_WG (ngeom, 3, 3) of every geometry."""
    ngeom = geom_body.shape[0]
    pos = np.empty((ngeom, 3))
    rot = np.empty((ngeom, 3, 3))
    work = np.empty((2, 3, 3))
    R_WB = work[0]
    R_BG = work[1]
    for g in range(ngeom):
        b = geom_body[g]
        quat_to_rot_into(q[b, 3], q[b, 4], q[b, 5], q[b, 6], R_WB)
        quat_to_rot_into(geom_quat[g, 0], geom_quat[g, 1], geom_quat[g, 2], geom_quat[g, 3], R_BG)
        for i in range(3):
            s = q[b, i]
            for k in range(3):
                s += R_WB[i, k] * geom_pos[g, k]
            pos[g, i] = s
            for j in range(3):
                r = 0.0
                for k in range(3):
                    r += R_WB[i, k] * R_BG[k, j]
                rot[g, i, j] = r
    return pos, rot


def geom_world_poses(model, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """World poses of all geometries of ``model`` at body poses ``q`` (nbody, 7).

    Returns:
        (pos, rot): positions p_WG [m], shape (ngeom, 3), and rotations R_WG, shape (ngeom, 3, 3).
    """
    q = np.ascontiguousarray(q, dtype=np.float64)
    return geom_world_poses_kernel(
        q,
        np.ascontiguousarray(model.geom_body, dtype=np.int64),
        np.ascontiguousarray(model.geom_pos, dtype=np.float64),
        np.ascontiguousarray(model.geom_quat, dtype=np.float64),
    )


@jit
def dot3(a: np.ndarray, b: np.ndarray) -> float:
    """a·b for 3-vectors."""
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@jit
def cross3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a×b for 3-vectors."""
    out = np.empty(3)
    out[0], out[1], out[2] = cross3t(a, b)
    return out


@jit
def norm3(a: np.ndarray) -> float:
    """Euclidean norm of a 3-vector."""
    return math.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2])


# Small 3-vector helpers. Kernels use these instead of numpy array expressions: numba compiles
# every array expression as a separate function, which multiplies compile time.
#
# Each formula lives in its tuple form (name ending in ``t``): it takes 3-vectors as arrays or tuples and
# returns a tuple (x, y, z), which numba keeps in registers -- no allocation. The array forms (``sub3``,
# ``rot_mul``, ...) copy that tuple into a new array (one allocation each, ~25 ns plus reference counting);
# per-step kernels use the tuple forms.


@jit
def cross3t(a, b) -> tuple[float, float, float]:
    """a×b for 3-vectors, as a tuple (allocation-free form of :func:`cross3`)."""
    return a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]


@jit
def add3t(a, b) -> tuple[float, float, float]:
    """a + b as a tuple (allocation-free form of :func:`add3`)."""
    return a[0] + b[0], a[1] + b[1], a[2] + b[2]


@jit
def sub3t(a, b) -> tuple[float, float, float]:
    """a − b as a tuple (allocation-free form of :func:`sub3`)."""
    return a[0] - b[0], a[1] - b[1], a[2] - b[2]


@jit
def scale3t(a, s: float) -> tuple[float, float, float]:
    """s a as a tuple (allocation-free form of :func:`scale3`)."""
    return s * a[0], s * a[1], s * a[2]


@jit
def axpy3t(a, s: float, d) -> tuple[float, float, float]:
    """a + s d as a tuple (allocation-free form of :func:`axpy3`)."""
    return a[0] + s * d[0], a[1] + s * d[1], a[2] + s * d[2]


@jit
def col3t(R: np.ndarray, j: int) -> tuple[float, float, float]:
    """Column j of a 3×3 matrix as a tuple (allocation-free form of :func:`column3`)."""
    return R[0, j], R[1, j], R[2, j]


@jit
def clamp_to_box_t(p, half) -> tuple[float, float, float]:
    """Componentwise clamp of p into [−half, half], as a tuple (allocation-free form of :func:`clamp_to_box`)."""
    return (min(max(p[0], -half[0]), half[0]), min(max(p[1], -half[1]), half[1]),
            min(max(p[2], -half[2]), half[2]))


@jit
def rot_mul_3t(R: np.ndarray, x) -> tuple[float, float, float]:
    """R x as a tuple (allocation-free form of :func:`rot_mul`)."""
    return (R[0, 0] * x[0] + R[0, 1] * x[1] + R[0, 2] * x[2],
            R[1, 0] * x[0] + R[1, 1] * x[1] + R[1, 2] * x[2],
            R[2, 0] * x[0] + R[2, 1] * x[1] + R[2, 2] * x[2])


@jit
def rot_mul_t_3t(R: np.ndarray, x) -> tuple[float, float, float]:
    """Rᵀ x as a tuple (allocation-free form of :func:`rot_mul_t`)."""
    return (R[0, 0] * x[0] + R[1, 0] * x[1] + R[2, 0] * x[2],
            R[0, 1] * x[0] + R[1, 1] * x[1] + R[2, 1] * x[2],
            R[0, 2] * x[0] + R[1, 2] * x[1] + R[2, 2] * x[2])


@jit
def add3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b."""
    out = np.empty(3)
    out[0], out[1], out[2] = add3t(a, b)
    return out


@jit
def sub3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a − b."""
    out = np.empty(3)
    out[0], out[1], out[2] = sub3t(a, b)
    return out


@jit
def scale3(a: np.ndarray, s: float) -> np.ndarray:
    """s a."""
    out = np.empty(3)
    out[0], out[1], out[2] = scale3t(a, s)
    return out


@jit
def axpy3(a: np.ndarray, s: float, d: np.ndarray) -> np.ndarray:
    """a + s d."""
    out = np.empty(3)
    out[0], out[1], out[2] = axpy3t(a, s, d)
    return out


@jit("float64[::1](float64[:, ::1], int64)")  # explicit: no per-literal specializations
def column3(R: np.ndarray, j: int) -> np.ndarray:
    """Column j of a 3×3 matrix as a new contiguous vector."""
    out = np.empty(3)
    out[0], out[1], out[2] = col3t(R, j)
    return out


@jit("float64[::1](int64, float64)")  # explicit: no per-literal specializations
def unit3(i: int, s: float) -> np.ndarray:
    """s e_i."""
    out = np.empty(3)
    out[0], out[1], out[2] = unit3t(i, s)
    return out


@jit
def unit3t(i: int, s: float) -> tuple[float, float, float]:
    """s e_i as a tuple (allocation-free form of :func:`unit3`)."""
    return s if i == 0 else 0.0, s if i == 1 else 0.0, s if i == 2 else 0.0


@jit
def clamp_to_box(p: np.ndarray, half: np.ndarray) -> np.ndarray:
    """Componentwise clamp of p into [−half, half]."""
    out = np.empty(3)
    out[0], out[1], out[2] = clamp_to_box_t(p, half)
    return out


@jit
def any_perpendicular(d: np.ndarray) -> np.ndarray:
    """A deterministic unit vector perpendicular to d (d need not be unit; d = 0 gives +x).

    Crosses d with the world axis along which |d| is smallest (ties: the lowest index).
    """
    ax = np.zeros(3)
    k = 0
    if abs(d[1]) < abs(d[k]):
        k = 1
    if abs(d[2]) < abs(d[k]):
        k = 2
    ax[k] = 1.0
    p = cross3(d, ax)
    n = norm3(p)
    if n < TINY:
        return unit3(0, 1.0)
    return scale3(p, 1.0 / n)


@jit
def clamp01(s: float) -> float:
    """Clamp to [0, 1]."""
    if s < 0.0:
        return 0.0
    if s > 1.0:
        return 1.0
    return s


@jit(inline="always")
def gram2(u: np.ndarray, v: np.ndarray, w: np.ndarray) -> tuple[float, float, float, float, float]:
    """(u·u, u·v, v·v, u·w, v·w): the entries of the 2 × 2 normal equations [u·u u·v; u·v v·v](s, t) = (u·w, v·w)
    of min |w − s u − t v|² (closest points of segments, barycentric coordinates in a triangle)."""
    return dot3(u, u), dot3(u, v), dot3(v, v), dot3(u, w), dot3(v, w)


@jit
def closest_params_segments(
    p1: np.ndarray, q1: np.ndarray, p2: np.ndarray, q2: np.ndarray
) -> tuple[float, float]:
    """Parameters (s, t) ∈ [0, 1]² of the closest points p1 + s(q1 − p1) and p2 + t(q2 − p2).

    Minimizes |p1 + s d1 − p2 − t d2|² over the unit square (the standard clamped solution of the
    2×2 normal equations). Degenerate segments (zero length) and parallel segments are handled;
    for parallel segments the returned pair is one of the (non-unique) minimizers.
    """
    d1 = sub3t(q1, p1)
    d2 = sub3t(q2, p2)
    a, b, e, c, f = gram2(d1, d2, sub3t(p1, p2))
    eps = TINY * TINY
    if a <= eps and e <= eps:
        return 0.0, 0.0
    if a <= eps:
        return 0.0, clamp01(f / e)
    if e <= eps:
        return clamp01(-c / a), 0.0
    denom = a * e - b * b
    s = 0.0
    if denom > 1e-14 * a * e:
        s = clamp01((b * f - c * e) / denom)
    t = (b * s + f) / e
    if t < 0.0:
        t = 0.0
        s = clamp01(-c / a)
    elif t > 1.0:
        t = 1.0
        s = clamp01((b - c) / a)
    return s, t


@jit("void(int64, float64, UniTuple(float64, 3), UniTuple(float64, 3), UniTuple(float64, 3), float64[::1], float64[:, ::1], float64[:, ::1])")  # explicit: no per-literal specializations
def write_contact_t(k: int, phi_value: float, surface_a, surface_b, n, phi: np.ndarray, point: np.ndarray,
                    normal: np.ndarray) -> None:
    """:func:`write_contact` with the 3-vectors as tuples (allocation-free callers)."""
    phi[k] = phi_value
    for i in range(3):
        point[k, i] = 0.5 * (surface_a[i] + surface_b[i])
        normal[k, i] = n[i]


@jit("void(int64, float64, float64[::1], float64[::1], float64[::1], float64[::1], float64[:, ::1], float64[:, ::1])")  # explicit: no per-literal specializations
def write_contact(
    k: int,
    phi_value: float,
    surface_a: np.ndarray,
    surface_b: np.ndarray,
    n: np.ndarray,
    phi: np.ndarray,
    point: np.ndarray,
    normal: np.ndarray,
) -> None:
    """Store contact k: phi, the midpoint of the two surface points, and the unit normal n (A→B)."""
    write_contact_t(k, phi_value, (surface_a[0], surface_a[1], surface_a[2]), (surface_b[0], surface_b[1], surface_b[2]),
                    (n[0], n[1], n[2]), phi, point, normal)


@jit
def rot_mul(R: np.ndarray, x: np.ndarray) -> np.ndarray:
    """R x for a 3×3 matrix and a 3-vector (no BLAS; works on strided views)."""
    out = np.empty(3)
    out[0], out[1], out[2] = rot_mul_3t(R, x)
    return out


@jit
def rot_mul_t(R: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Rᵀ x for a 3×3 matrix and a 3-vector."""
    out = np.empty(3)
    out[0], out[1], out[2] = rot_mul_t_3t(R, x)
    return out
