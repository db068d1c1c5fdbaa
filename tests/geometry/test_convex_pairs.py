"""Cylinder and convex-mesh contacts (GJK/EPA + feature clipping) against closed forms and the primitives.

References that share no code with convex.py, gjk.py, epa.py or manifold.py:
* a box given as its 8 corners (a mesh) against the box primitive's kernels (boxes.py: exact SAT and
  closest-point formulas) on random poses: the deepest contact's phi and normal to 1e-9 m / 1e-9, and
  the whole manifold (points, depths) when faces are parallel;
* sphere–cylinder and halfspace–cylinder distances by their closed forms in the cylinder frame;
* a sphere against a box mesh: the distance to the clamped point (separated), the face depth (inside).
Tolerance 1e-9 (m, relative to unit-size shapes): GJK stops on |v|² − v·w <= 1e-12·|v|², EPA within
1e-9·scale; curved cylinder sides converge slower under EPA (1e-6 there).
"""

from __future__ import annotations

import numpy as np
import pytest

from convexsim.geometry import collide_geoms, quat_to_rot
from convexsim.geometry.collide import collide_shapes
from convexsim.model import GeomType

SPHERE, BOX, CAPSULE, HALFSPACE = (int(GeomType.SPHERE), int(GeomType.BOX), int(GeomType.CAPSULE),
                                   int(GeomType.HALFSPACE))
CYLINDER, MESH = int(GeomType.CYLINDER), int(GeomType.MESH)
NONE = np.zeros((0, 3))
I3 = np.eye(3)


def _buffers():
    return np.empty(8), np.empty((8, 3)), np.empty((8, 3))


def _rot(rng) -> np.ndarray:
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    return np.ascontiguousarray(quat_to_rot(*q))


def corners(half) -> np.ndarray:
    return np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float) * half


def contacts(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, margin=0.0):
    phi, point, normal = _buffers()
    n = collide_shapes(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, margin, phi, point, normal)
    assert n >= 0
    assert np.all(np.isfinite(phi[:n])) and np.all(np.isfinite(point[:n])) and np.all(np.isfinite(normal[:n]))
    return phi[:n].copy(), point[:n].copy(), normal[:n].copy()


def primitive(ta, pa, Ra, sa, tb, pb, Rb, sb, margin=0.0):
    phi, point, normal = _buffers()
    n = collide_geoms(ta, pa, Ra, sa, tb, pb, Rb, sb, margin, phi, point, normal)
    return phi[:n].copy(), point[:n].copy(), normal[:n].copy()


def deepest(c):
    phi, point, normal = c
    k = int(np.argmin(phi))
    return phi[k], normal[k]


HALF_A = np.array([0.3, 0.2, 0.15])
HALF_B = np.array([0.25, 0.35, 0.1])


@pytest.mark.parametrize("seed", range(40))
def test_box_mesh_matches_box_primitive_on_random_poses(seed):
    """Box–box (both as meshes), sphere–box and capsule–box (box as mesh): same contact or none; the deepest
    phi and normal to 1e-9 (box–box: up to the primitive's face preference, see below). Poses: random orientations, centres within reach (separated, touching, deep)."""
    rng = np.random.default_rng(seed)
    Ra, Rb = _rot(rng), _rot(rng)
    pa = np.zeros(3)
    pb = rng.uniform(-0.6, 0.6, 3)
    margin = 0.05
    ref = primitive(BOX, pa, Ra, HALF_A, BOX, pb, Rb, HALF_B, margin)
    got = contacts(MESH, pa, Ra, HALF_A, corners(HALF_A), MESH, pb, Rb, HALF_B, corners(HALF_B), margin)
    assert (ref[0].size > 0) == (got[0].size > 0), (ref, got)
    if ref[0].size:
        # box_box prefers a face axis to an edge axis within boxes.FACE_TOL when the face manifold's deepest
        # point is the edge contact seen along the face normal (phi_face·(n_face·n_edge) = phi_edge); EPA
        # gives the exact minimum-translation axis, so the two agree through that relation to round-off.
        (p1, n1), (p2, n2) = deepest(ref), deepest(got)
        assert p2 == pytest.approx(p1 * min(1.0, float(n1 @ n2)), abs=1e-9)
        assert float(n1 @ n2) > 1.0 - 1e-3
    for ta, sa in ((SPHERE, np.array([0.12, 0, 0])), (CAPSULE, np.array([0.08, 0.2, 0]))):
        ref = primitive(ta, pb, Rb, sa, BOX, pa, Ra, HALF_A, margin)
        got = contacts(ta, pb, Rb, sa, NONE, MESH, pa, Ra, HALF_A, corners(HALF_A), margin)
        assert (ref[0].size > 0) == (got[0].size > 0), (ta, ref, got)
        if ref[0].size:
            (p1, n1), (p2, n2) = deepest(ref), deepest(got)
            assert p2 == pytest.approx(p1, abs=1e-9), ta
            np.testing.assert_allclose(n2, n1, atol=1e-7)


@pytest.mark.parametrize("offset", [(0.1, 0.05, 0.249), (0.0, 0.0, 0.25), (0.4, -0.3, 0.2)])
def test_parallel_faces_give_the_primitive_manifold(offset):
    """Box on box with parallel faces (overlapping, touching, deep): the same set of contacts as box_box."""
    pb = np.array(offset)
    ref = primitive(BOX, np.zeros(3), I3, HALF_A, BOX, pb, I3, HALF_B)
    got = contacts(MESH, np.zeros(3), I3, HALF_A, corners(HALF_A), MESH, pb, I3, HALF_B, corners(HALF_B))
    key = lambda c: np.lexsort(np.round(c[1].T, 9))   # noqa: E731
    assert got[0].size == ref[0].size > 0
    ka, kb = key(ref), key(got)
    np.testing.assert_allclose(got[0][kb], ref[0][ka], atol=1e-12)
    np.testing.assert_allclose(got[1][kb], ref[1][ka], atol=1e-12)
    np.testing.assert_allclose(got[2][kb], ref[2][ka], atol=1e-12)


@pytest.mark.parametrize("seed", range(10))
def test_halfspace_box_mesh_gives_the_corner_contacts(seed):
    rng = np.random.default_rng(100 + seed)
    R = _rot(rng)
    pb = np.array([0.0, 0.0, rng.uniform(0.0, 0.3)])
    ref = primitive(HALFSPACE, np.zeros(3), I3, np.zeros(3), BOX, pb, R, HALF_A, 0.01)
    got = contacts(HALFSPACE, np.zeros(3), I3, np.zeros(3), NONE, MESH, pb, R, HALF_A, corners(HALF_A), 0.01)
    np.testing.assert_allclose(np.sort(got[0]), np.sort(ref[0]), atol=1e-14)


def _sphere_cylinder_phi(c_local, rs, r, h):
    """Closed form: the signed distance of a ball (centre c in the cylinder frame) to the cylinder."""
    rho = np.hypot(c_local[0], c_local[1])
    dr, dz = rho - r, abs(c_local[2]) - h
    if dr <= 0 and dz <= 0:
        return max(dr, dz) - rs
    return np.hypot(max(dr, 0.0), max(dz, 0.0)) - rs


@pytest.mark.parametrize("seed", range(30))
def test_sphere_cylinder_against_the_closed_form(seed):
    """Outside the cylinder GJK is exact (1e-9); a centre inside goes through EPA on the curved side (1e-6)."""
    rng = np.random.default_rng(200 + seed)
    R = _rot(rng)
    pc = rng.normal(size=3) * 0.1
    r, h, rs = 0.2, 0.3, 0.1
    c = pc + rng.uniform(-0.45, 0.45, 3)
    expect = _sphere_cylinder_phi(R.T @ (c - pc), rs, r, h)
    got = contacts(SPHERE, c, I3, np.array([rs, 0, 0]), NONE, CYLINDER, pc, R, np.array([r, h, 0]), NONE, 1.0)
    assert got[0].size == 1
    inside = expect < -rs
    assert got[0][0] == pytest.approx(expect, abs=1e-6 if inside else 1e-9)


@pytest.mark.parametrize("seed", range(10))
def test_halfspace_cylinder_lowest_point(seed):
    """Tilted cylinder on a halfspace: the deepest contact is the rim's lowest point, c_z − h|a_z| − r·sqrt(1 − a_z²)."""
    rng = np.random.default_rng(300 + seed)
    R = _rot(rng)
    r, h = 0.1, 0.25
    pc = np.array([0.1, -0.2, 0.2])
    az = R[2, 2]
    expect = pc[2] - h * abs(az) - r * np.sqrt(max(0.0, 1 - az * az))
    got = contacts(HALFSPACE, np.zeros(3), I3, np.zeros(3), NONE, CYLINDER, pc, R, np.array([r, h, 0]), NONE, 1.0)
    assert got[0].min() == pytest.approx(expect, abs=1e-12)


def test_cylinder_feature_manifolds():
    """Standing: the cap's ring of 8 points, each at the cap height; lying: the 2 ends of the side line."""
    r, h = 0.1, 0.2
    size = np.array([r, h, 0])
    got = contacts(HALFSPACE, np.zeros(3), I3, np.zeros(3), NONE, CYLINDER, np.array([0, 0, h - 1e-4]), I3, size, NONE)
    assert got[0].size == 8
    np.testing.assert_allclose(got[0], -1e-4, atol=1e-15)
    np.testing.assert_allclose(np.hypot(got[1][:, 0], got[1][:, 1]), r, atol=1e-15)
    lying = np.ascontiguousarray(quat_to_rot(np.cos(np.pi / 4), np.sin(np.pi / 4), 0, 0))
    got = contacts(BOX, np.zeros(3), I3, np.array([0.5, 0.5, 0.5]), NONE, CYLINDER, np.array([0, 0, 0.5 + r - 1e-4]),
                   lying, size, NONE)
    assert got[0].size == 2
    np.testing.assert_allclose(got[0], -1e-4, atol=1e-12)
    np.testing.assert_allclose(np.sort(got[1][:, 1]), [-h, h], atol=1e-12)
    np.testing.assert_allclose(got[2], [[0, 0, 1]] * 2, atol=1e-9)


def test_cylinder_on_cylinder_cap_to_cap_and_crossed():
    """Cap on cap (coaxial): a ring manifold at the overlap depth; crossed lying cylinders: 1 contact."""
    size = np.array([0.1, 0.2, 0])
    got = contacts(CYLINDER, np.zeros(3), I3, size, NONE, CYLINDER, np.array([0.02, 0, 0.4 - 1e-3]), I3, size, NONE)
    assert got[0].size >= 3
    np.testing.assert_allclose(got[0], -1e-3, atol=1e-12)
    rx = np.ascontiguousarray(quat_to_rot(np.cos(np.pi / 4), np.sin(np.pi / 4), 0, 0))
    ry = np.ascontiguousarray(quat_to_rot(np.cos(np.pi / 4), 0, np.sin(np.pi / 4), 0))
    got = contacts(CYLINDER, np.zeros(3), rx, size, NONE, CYLINDER, np.array([0, 0, 0.2 - 1e-3]), ry, size, NONE)
    assert got[0].size == 1 and got[0][0] == pytest.approx(-1e-3, abs=1e-9)


def test_degenerate_poses_give_finite_contacts():
    """Coincident centres, touching at exactly zero gap (face on face, corner on corner, cap on face), crossed
    edges: finite contacts with the closed-form deepest phi."""
    hull = corners(HALF_A)
    s2 = np.sqrt(0.5)
    rx = np.ascontiguousarray(quat_to_rot(np.cos(np.pi / 8), np.sin(np.pi / 8), 0, 0))   # 45° about x
    ry = np.ascontiguousarray(quat_to_rot(np.cos(np.pi / 8), 0, np.sin(np.pi / 8), 0))   # 45° about y
    cases = [  # (pose of A, pose of B, expected deepest phi)
        ((np.zeros(3), I3), (np.zeros(3), I3), -0.3),                               # coincident: exit along z
        ((np.zeros(3), I3), (np.array([0, 0, 0.3]), I3), 0.0),                      # face on face, touching
        ((np.zeros(3), I3), (2 * HALF_A, I3), 0.0),                                 # corner on corner
        ((np.zeros(3), rx), (np.array([0, 0, 0.35 * s2 + 0.45 * s2 - 1e-4]), ry), -1e-4),   # crossed edges
    ]
    for (pa, Ra), (pb, Rb), expect in cases:
        got = contacts(MESH, pa, Ra, HALF_A, hull, MESH, pb, Rb, HALF_A, hull, 1e-3)
        assert got[0].size >= 1 and got[0].min() == pytest.approx(expect, abs=1e-9), (pb, got)
    size = np.array([0.1, 0.2, 0])
    got = contacts(MESH, np.zeros(3), I3, HALF_A, hull, CYLINDER, np.array([0, 0, 0.35]), I3, size, NONE, 1e-3)
    assert got[0].size == 8 and np.all(np.abs(got[0]) <= 1e-12)
    got = contacts(MESH, np.zeros(3), I3, HALF_A, hull, CYLINDER, np.zeros(3), I3, size, NONE, 1e-3)
    assert got[0].size >= 1 and got[0].min() == pytest.approx(-0.3, abs=1e-9)   # exit along y: 0.2 + 0.1
