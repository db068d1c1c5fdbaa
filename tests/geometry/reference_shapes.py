"""Independent references for the collision tests: exact signed-distance functions of each shape
(numpy, closed form) and the distance between two shapes as a second-order cone program solved by
Clarabel (an interior-point solver that knows nothing about our kernels).
"""

from __future__ import annotations

import clarabel
import numpy as np
import pytest
from scipy import sparse

from convexsim.geometry import quat_to_rot
from geometry_helpers import BOX, CAPSULE, CYLINDER, HALFSPACE, MESH, SPHERE


def signed_distance(gtype, size, pos, quat, x) -> float:
    """Exact signed distance [m] from point x to the shape (negative inside)."""
    R = quat_to_rot(*np.asarray(quat, float))
    p = R.T @ (np.asarray(x, float) - np.asarray(pos, float))
    if gtype == SPHERE:
        return float(np.linalg.norm(p) - size[0])
    if gtype == CAPSULE:
        z = np.clip(p[2], -size[1], size[1])
        return float(np.linalg.norm(p - np.array([0.0, 0.0, z])) - size[0])
    if gtype == BOX:
        d = np.abs(p) - np.asarray(size, float)
        return float(np.linalg.norm(np.maximum(d, 0.0)) + min(d.max(), 0.0))
    if gtype == HALFSPACE:
        return float(p[2])
    raise ValueError(gtype)


class _Rows:
    """Accumulates conic rows b − A z ∈ K for Clarabel."""

    def __init__(self, nz: int):
        self.nz = nz
        self.A, self.b, self.cones = [], [], []

    def add(self, A, b, cone):
        self.A.append(np.atleast_2d(A))
        self.b.append(np.atleast_1d(b))
        self.cones.append(cone)


def _shape_rows(rows: _Rows, gtype, size, pos, quat, xs: slice, t_index: int):
    """Constrain the point z[xs] to lie in the shape."""
    R = quat_to_rot(*np.asarray(quat, float))
    c = np.asarray(pos, float)
    nz = rows.nz

    def sel(M):  # M acting on the 3 point coordinates
        A = np.zeros((M.shape[0], nz))
        A[:, xs] = M
        return A

    if gtype == SPHERE:
        A = np.vstack([np.zeros((1, nz)), sel(-np.eye(3))])
        rows.add(A, np.concatenate([[size[0]], -c]), clarabel.SecondOrderConeT(4))
    elif gtype == CAPSULE:
        # x = c + t a + u, |u| <= r, |t| <= h
        a = R[:, 2]
        A = np.vstack([np.zeros((1, nz)), sel(-np.eye(3))])
        A[1:, t_index] = a
        rows.add(A, np.concatenate([[size[0]], -c]), clarabel.SecondOrderConeT(4))
        At = np.zeros((2, nz))
        At[0, t_index] = 1.0
        At[1, t_index] = -1.0
        rows.add(At, [size[1], size[1]], clarabel.NonnegativeConeT(2))
    elif gtype == BOX:
        # -h <= R^T (x - c) <= h
        h = np.asarray(size, float)
        A = np.vstack([sel(R.T), sel(-R.T)])
        b = np.concatenate([h + R.T @ c, h - R.T @ c])
        rows.add(A, b, clarabel.NonnegativeConeT(6))
    elif gtype == HALFSPACE:
        n = R[:, 2]
        rows.add(sel(n[None, :]), [n @ c], clarabel.NonnegativeConeT(1))
    elif gtype == CYLINDER:
        # p = R^T (x - c): |(p_x, p_y)| <= r, |p_z| <= h
        A = np.vstack([np.zeros((1, nz)), sel(-R.T[:2])])
        rows.add(A, np.concatenate([[size[0]], -(R.T @ c)[:2]]), clarabel.SecondOrderConeT(3))
        A = np.vstack([sel(R.T[2:]), sel(-R.T[2:])])
        rows.add(A, [size[1] + R[:, 2] @ c, size[1] - R[:, 2] @ c], clarabel.NonnegativeConeT(2))
    elif gtype == MESH:
        # size holds the vertices in G; the hull's facets n_f·p + d_f <= 0 (Qhull's own equations)
        from scipy.spatial import ConvexHull

        eq = ConvexHull(np.asarray(size, float)).equations
        A = sel(eq[:, :3] @ R.T)
        rows.add(A, -eq[:, 3] + eq[:, :3] @ (R.T @ c), clarabel.NonnegativeConeT(eq.shape[0]))
    else:
        raise ValueError(gtype)


def shape_distance(a, b) -> float:
    """Euclidean distance [m] between shapes a and b = (type, size, pos, quat); 0 if they intersect."""
    return closest_points(a, b)[0]


def closest_points(a, b) -> tuple[float, np.ndarray, np.ndarray]:
    """(distance [m], closest point of a, closest point of b); distance 0 if they intersect.

    SOCP: minimize s subject to |x − y| <= s, x ∈ A, y ∈ B (z = [x, y, s, t_a, t_b]).
    """
    nz = 9
    rows = _Rows(nz)
    A = np.zeros((4, nz))
    A[0, 6] = -1.0
    A[1:, 0:3] = -np.eye(3)
    A[1:, 3:6] = np.eye(3)
    rows.add(A, np.zeros(4), clarabel.SecondOrderConeT(4))
    _shape_rows(rows, *a, xs=slice(0, 3), t_index=7)
    _shape_rows(rows, *b, xs=slice(3, 6), t_index=8)
    Amat = sparse.csc_matrix(np.vstack(rows.A))
    bvec = np.concatenate(rows.b)
    q = np.zeros(nz)
    q[6] = 1.0
    P = sparse.csc_matrix((nz, nz))
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = 1e-11
    settings.tol_gap_rel = 1e-11
    settings.tol_feas = 1e-11
    solver = clarabel.DefaultSolver(P, q, Amat, bvec, rows.cones, settings)
    sol = solver.solve()
    assert str(sol.status) in ("Solved", "AlmostSolved"), sol.status
    x = np.asarray(sol.x)
    return max(float(x[6]), 0.0), x[0:3].copy(), x[3:6].copy()


def surface_points(phi, point, normal):
    """Surface points (on A, on B) implied by a contact: point ∓ (phi/2) n."""
    return point - 0.5 * phi * normal, point + 0.5 * phi * normal


def assert_on_surfaces(a, b, phi, point, normal, tol=1e-9):
    """Both implied surface points lie on their shape's boundary: |sd| <= tol [m]."""
    on_a, on_b = surface_points(phi, point, normal)
    assert abs(signed_distance(*a, on_a)) <= tol, (on_a, signed_distance(*a, on_a))
    assert abs(signed_distance(*b, on_b)) <= tol, (on_b, signed_distance(*b, on_b))


def moved(shape, offset):
    """The shape (type, size, position, quaternion) translated by offset [m]."""
    return (shape[0], shape[1], shape[2] + offset, shape[3])


def assert_minimum_translation(a, b, phi, normal, rng, overlap, delta):
    """The deepest contact of A and B, overlapping by ``overlap`` [m] along some direction, is the minimum
    translation that separates them: its depth d is in (0, overlap]; B moved by d + δ along its normal n
    (A → B) is δ from A (to 1e-6 m), moved by d − δ along n or along 8 random directions it still touches
    A (distance < 1e-7 m). Returns (d, n)."""
    assert phi.size >= 1
    k = int(np.argmin(phi))
    depth, n = -phi[k], normal[k]
    assert 0.0 < depth <= overlap + 1e-9
    assert shape_distance(a, moved(b, (depth + delta) * n)) == pytest.approx(delta, abs=1e-6)
    assert shape_distance(a, moved(b, (depth - delta) * n)) < 1e-7
    for _ in range(8):
        u = rng.normal(size=3)
        u /= np.linalg.norm(u)
        assert shape_distance(a, moved(b, (depth - delta) * u)) < 1e-7
    return depth, n

