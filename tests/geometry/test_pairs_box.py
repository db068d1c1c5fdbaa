"""Analytic cases for the pairs with a box: halfspace, sphere, capsule and box.

Expected values are closed-form; tolerance 1e-12 m (round-off on O(1) numbers) unless stated.
"""

import itertools

import numpy as np
import pytest
from geometry_helpers import BOX, CAPSULE, HALFSPACE, IDENTITY, SPHERE, axis_angle_quat, pair, quat_mul
from reference_shapes import assert_on_surfaces

from convexsim.geometry import quat_to_rot

TOL = 1e-12
I = IDENTITY
S2 = np.sqrt(2.0)
ALONG_X = axis_angle_quat([0, 1, 0], np.pi / 2)
ALONG_Y = axis_angle_quat([1, 0, 0], -np.pi / 2)
GROUND = (HALFSPACE, [0, 0, 0], [0, 0, 0], I)


def box(half, c, q=I):
    return (BOX, list(half), list(c), q)


def run(a, b, margin=0.0):
    return pair(*a, *b, margin=margin)


def sorted_rows(x):
    return x[np.lexsort(np.round(x, 9).T[::-1])]


# ---------------------------------------------------------------- halfspace–box


def test_box_resting_flat_gives_four_corners():
    phi, point, normal = run(GROUND, box([0.5, 0.3, 0.2], [1, 2, 0.19]))
    assert phi == pytest.approx([-0.01] * 4, abs=TOL)
    expected = [[1 + sx * 0.5, 2 + sy * 0.3, -0.005] for sx, sy in itertools.product([-1, 1], [-1, 1])]
    np.testing.assert_allclose(sorted_rows(point), sorted_rows(np.array(expected)), atol=TOL)
    np.testing.assert_allclose(normal, [[0, 0, 1]] * 4, atol=TOL)


def test_box_on_edge_gives_two_contacts():
    half = [0.5, 0.2, 0.2]
    zc = 0.2 * S2 - 0.01  # lowest edge (along x) 0.01 below the plane
    phi, point, _ = run(GROUND, box(half, [0, 0, zc], axis_angle_quat([1, 0, 0], np.pi / 4)))
    assert phi == pytest.approx([-0.01] * 2, abs=TOL)
    np.testing.assert_allclose(sorted_rows(point), [[-0.5, 0, -0.005], [0.5, 0, -0.005]], atol=TOL)


@pytest.mark.parametrize("margin", [0.0, 0.3])
def test_tilted_box_on_tilted_halfspace_reports_every_vertex_within_margin(margin):
    qh = axis_angle_quat([0.3, -1, 0.2], 0.4)
    qb = axis_angle_quat([1, 1, 0.3], 0.9)
    half = np.array([0.4, 0.3, 0.2])
    c = np.array([0.2, 0.1, 0.25])
    phi, point, normal = run((HALFSPACE, [0, 0, 0], [0, 0, 0.05], qh), box(half, c, qb), margin)
    n = quat_to_rot(*qh)[:, 2]
    R = quat_to_rot(*qb)
    verts = np.array([c + R @ (np.array(s) * half) for s in itertools.product([-1, 1], repeat=3)])
    heights = (verts - [0, 0, 0.05]) @ n
    inside = heights <= margin
    assert 1 <= inside.sum() < 8  # the case is meant to be partial
    np.testing.assert_allclose(np.sort(phi), np.sort(heights[inside]), atol=TOL)
    np.testing.assert_allclose(sorted_rows(point), sorted_rows(verts[inside] - 0.5 * heights[inside, None] * n),
                               atol=TOL)
    np.testing.assert_allclose(normal, np.tile(n, (len(phi), 1)), atol=TOL)


def test_sunk_box_gives_all_eight_vertices():
    phi, _, _ = run(GROUND, box([0.5, 0.5, 0.5], [0, 0, -1.0], axis_angle_quat([1, 1, 0], 0.3)))
    assert phi.size == 8 and np.all(phi < 0)


# ---------------------------------------------------------------- sphere–box


@pytest.mark.parametrize(
    "c, r, phi_expected, n_expected, point_expected",
    [
        # face: closest box point (0,0,1), sphere surface (0,0,0.9)
        ([0, 0, 1.4], 0.5, -0.1, [0, 0, -1], [0, 0, 0.95]),
        # edge: closest (1,0,1), offset (0.3,0,0.4) of length 0.5
        ([1.3, 0, 1.4], 0.6, -0.1, [-0.6, 0, -0.8], [1.3 - 0.6 * 0.6 + 0.05 * 0.6, 0, 1.4 - 0.6 * 0.8 + 0.05 * 0.8]),
        # corner, separated: distance sqrt(3) to (1,1,1)
        ([2, 2, 2], 1.0, np.sqrt(3) - 1, -np.ones(3) / np.sqrt(3), None),
        # centre inside, nearest face +z at 0.3: exit normal +z, i.e. -z from sphere into box
        ([0.2, 0.1, 0.7], 0.1, -0.4, [0, 0, -1], [0.2, 0.1, 0.8]),
    ],
    ids=["face", "edge", "corner-separated", "centre-inside"],
)
def test_sphere_box(c, r, phi_expected, n_expected, point_expected):
    s, b = (SPHERE, [r, 0, 0], c, I), box([1, 1, 1], [0, 0, 0])
    phi, point, normal = run(s, b, margin=1.0)
    assert phi == pytest.approx([phi_expected], abs=TOL)
    np.testing.assert_allclose(normal[0], n_expected, atol=TOL)
    if point_expected is not None:
        np.testing.assert_allclose(point[0], point_expected, atol=TOL)
    assert_on_surfaces(s, b, phi[0], point[0], normal[0])


def test_sphere_at_box_centre_exits_through_the_nearest_face():
    phi, _, normal = run((SPHERE, [0.1, 0, 0], [0, 0, 0], I), box([1, 0.5, 2], [0, 0, 0]))
    assert phi == pytest.approx([-0.6], abs=TOL)
    np.testing.assert_allclose(np.abs(normal), [[0, 1, 0]], atol=TOL)


def test_sphere_rotated_box():
    q = axis_angle_quat([0, 0, 1], np.pi / 6)
    ex = quat_to_rot(*q)[:, 0]
    c = np.array([1, 2, 3]) + 1.3 * ex  # 0.3 outside the +x face of the rotated box
    phi, point, normal = run((SPHERE, [0.5, 0, 0], c, I), box([1, 0.5, 0.5], [1, 2, 3], q))
    assert phi == pytest.approx([-0.2], abs=TOL)
    np.testing.assert_allclose(normal[0], -ex, atol=TOL)


# ---------------------------------------------------------------- capsule–box


def cap(r, h, c, q=I):
    return (CAPSULE, [r, h, 0], list(c), q)


UNIT_BOX = box([1, 1, 1], [0, 0, 0])


@pytest.mark.parametrize("z, margin", [(1.08, 0.0), (1.3, 0.5), (0.95, 0.0)],
                         ids=["penetrating", "separated-in-margin", "axis-inside-box"])
def test_capsule_lying_on_box_face_gives_two_contacts(z, margin):
    c = cap(0.1, 0.5, [0.2, 0.3, z], ALONG_X)
    phi, point, normal = run(c, UNIT_BOX, margin)
    expected_phi = z - 1.0 - 0.1
    assert phi == pytest.approx([expected_phi] * 2, abs=TOL)
    np.testing.assert_allclose(sorted_rows(point), [[-0.3, 0.3, 1 + expected_phi / 2], [0.7, 0.3, 1 + expected_phi / 2]],
                               atol=TOL)
    np.testing.assert_allclose(normal, [[0, 0, -1]] * 2, atol=TOL)


def test_capsule_hanging_over_box_edge_is_clipped_to_the_face():
    phi, point, _ = run(cap(0.1, 0.5, [0.8, 0, 1.08], ALONG_X), UNIT_BOX)
    assert phi == pytest.approx([-0.02] * 2, abs=TOL)
    np.testing.assert_allclose(np.sort(point[:, 0]), [0.3, 1.0], atol=TOL)


def test_upright_capsule_on_box_face():
    c = cap(0.1, 0.5, [0.3, -0.2, 1.55], I)
    phi, point, normal = run(c, UNIT_BOX)
    assert phi == pytest.approx([-0.05], abs=TOL)
    np.testing.assert_allclose(point, [[0.3, -0.2, 1 - 0.025]], atol=TOL)
    np.testing.assert_allclose(normal, [[0, 0, -1]], atol=TOL)
    assert_on_surfaces(c, UNIT_BOX, phi[0], point[0], normal[0])


def test_capsule_through_box_face_deep():
    phi, _, normal = run(cap(0.1, 0.5, [0, 0, 1.2], I), UNIT_BOX)  # segment z in [0.7, 1.7]
    assert phi == pytest.approx([-0.4], abs=TOL)
    np.testing.assert_allclose(normal, [[0, 0, -1]], atol=TOL)


@pytest.mark.parametrize("e", [0.02, -0.03], ids=["segment-crosses-edge", "segment-near-edge"])
def test_capsule_skew_to_box_edge(e):
    """Segment along (0, 1, −1)/√2 crossing the box edge {y = z = 1} at depth e (negative: gap)."""
    r = 0.05
    q = axis_angle_quat([1, 0, 0], np.pi / 4)  # local z -> (0, -1, 1)/√2
    centre = np.array([0.1, 1 - e / S2, 1 - e / S2])
    c = cap(r, 0.5, centre, q)
    phi, point, normal = run(c, UNIT_BOX)
    assert phi == pytest.approx([-e - r], abs=TOL)
    np.testing.assert_allclose(normal, [[0, -1 / S2, -1 / S2]], atol=TOL)
    # box edge point (0.1, 1, 1), capsule surface point centre - r (0,1,1)/√2
    on_capsule = centre - r * np.array([0, 1, 1]) / S2
    np.testing.assert_allclose(point[0], 0.5 * (on_capsule + [0.1, 1, 1]), atol=TOL)


def test_capsule_parallel_to_box_edge():
    """Capsule along y beside the edge {x = z = 1}: normal along the diagonal, 1 contact."""
    phi, _, normal = run(cap(0.1, 0.5, [1.05, 0.2, 1.05], ALONG_Y), UNIT_BOX)
    assert phi == pytest.approx([0.05 * S2 - 0.1], abs=TOL)
    np.testing.assert_allclose(normal, [[-1 / S2, 0, -1 / S2]], atol=TOL)


# ---------------------------------------------------------------- box–box


def test_face_on_boxes_give_the_four_corners_of_the_smaller_face():
    a, b = box([1, 1, 0.5], [0, 0, 0]), box([0.5, 0.5, 0.5], [0.2, 0.1, 0.99])
    phi, point, normal = run(a, b)
    assert phi == pytest.approx([-0.01] * 4, abs=TOL)
    expected = [[0.2 + sx * 0.5, 0.1 + sy * 0.5, 0.495] for sx, sy in itertools.product([-1, 1], [-1, 1])]
    np.testing.assert_allclose(sorted_rows(point), sorted_rows(np.array(expected)), atol=TOL)
    np.testing.assert_allclose(normal, [[0, 0, 1]] * 4, atol=TOL)
    for k in range(4):
        assert_on_surfaces(a, b, phi[k], point[k], normal[k])
    # B below A: normal from A into B is -z
    phi, _, normal = run(a, box([0.5, 0.5, 0.5], [0.2, 0.1, -0.99]))
    np.testing.assert_allclose(normal, [[0, 0, -1]] * 4, atol=TOL)


def test_identical_aligned_boxes_stacked():
    phi, point, _ = run(box([0.5, 0.5, 0.5], [0, 0, 0]), box([0.5, 0.5, 0.5], [0, 0, 0.99]))
    assert phi == pytest.approx([-0.01] * 4, abs=TOL)
    np.testing.assert_allclose(np.abs(point[:, :2]), 0.5, atol=TOL)


def test_offset_boxes_overlap_rectangle():
    phi, point, _ = run(box([0.5, 0.5, 0.5], [0, 0, 0]), box([0.5, 0.5, 0.5], [0.7, 0, 0.99]))
    assert phi.size == 4
    np.testing.assert_allclose(np.sort(np.unique(np.round(point[:, 0], 12))), [0.2, 0.5], atol=TOL)


def test_boxes_rotated_45_degrees_give_an_octagon():
    q = axis_angle_quat([0, 0, 1], np.pi / 4)
    phi, point, normal = run(box([0.5, 0.5, 0.5], [0, 0, 0]), box([0.5, 0.5, 0.5], [0, 0, 0.99], q))
    assert phi == pytest.approx([-0.01] * 8, abs=TOL)
    # octagon of the two squares: every vertex on a side of one of them
    x, y = point[:, 0], point[:, 1]
    on_a = np.isclose(np.maximum(abs(x), abs(y)), 0.5, atol=1e-12)
    on_b = np.isclose(np.maximum(abs(x + y), abs(x - y)) / S2, 0.5, atol=1e-12)
    assert np.all(on_a & on_b)
    np.testing.assert_allclose(normal, [[0, 0, 1]] * 8, atol=TOL)


def test_edge_on_box_gives_two_contacts():
    zc = 0.5 + 0.5 * S2 - 0.01
    b = box([0.5, 0.5, 0.5], [0, 0.1, zc], axis_angle_quat([1, 0, 0], np.pi / 4))
    phi, point, normal = run(box([1, 1, 0.5], [0, 0, 0]), b)
    assert phi == pytest.approx([-0.01] * 2, abs=TOL)
    np.testing.assert_allclose(sorted_rows(point), [[-0.5, 0.1, 0.495], [0.5, 0.1, 0.495]], atol=TOL)
    np.testing.assert_allclose(normal, [[0, 0, 1]] * 2, atol=TOL)


def test_crossed_edges_give_one_edge_edge_contact():
    a = box([0.5, 0.5, 0.5], [0, 0, 0], axis_angle_quat([1, 0, 0], np.pi / 4))  # top edge along x
    b = box([0.5, 0.5, 0.5], [0, 0, S2 - 0.01], axis_angle_quat([0, 1, 0], np.pi / 4))  # bottom edge along y
    phi, point, normal = run(a, b)
    assert phi == pytest.approx([-0.01], abs=TOL)
    np.testing.assert_allclose(normal, [[0, 0, 1]], atol=TOL)
    np.testing.assert_allclose(point, [[0, 0, 0.5 * S2 - 0.005]], atol=TOL)
    assert_on_surfaces(a, b, phi[0], point[0], normal[0])


def test_separated_boxes_only_within_margin():
    a, b = box([0.5, 0.5, 0.5], [0, 0, 0]), box([0.3, 0.3, 0.3], [0.1, 0, 0.9])
    assert run(a, b)[0].size == 0
    phi, _, normal = run(a, b, margin=0.2)
    assert phi == pytest.approx([0.1] * 4, abs=TOL)
    np.testing.assert_allclose(normal, [[0, 0, 1]] * 4, atol=TOL)


def test_concentric_boxes_push_out_along_the_thinnest_axis():
    phi, _, normal = run(box([1, 2, 3], [0, 0, 0]), box([0.5, 0.2, 0.5], [0, 0, 0]))
    # overlaps: x 1.5, y 2.2, z 3.5 -> x
    assert phi.min() == pytest.approx(-1.5, abs=TOL)
    np.testing.assert_allclose(np.abs(normal[np.argmin(phi)]), [1, 0, 0], atol=TOL)


# -------------------------------------------- nearly face-aligned boxes: the face manifold, not an edge point

CUBE = [0.05, 0.05, 0.05]
PLATE = [0.01, 0.06, 0.03]          # 2 x 12 x 6 cm, wider than the cube: its top edge spans the cube's face
LEAN = np.radians(0.8)              # top edge forward (towards the cube), as a PD-held arm's paddle sags


def _plate_pose(yaw, depth=2e-5, lean=LEAN):
    """Plate behind the cube's −x face, leaning by ``lean`` about y and yawed by ``yaw`` about z, its top
    edge's midpoint ``depth`` inside the cube's face plane x = −0.05, at height z = 0.03."""
    q = quat_mul(axis_angle_quat([0, 0, 1], yaw), axis_angle_quat([0, 1, 0], lean))
    R = quat_to_rot(*q)
    top_front = R @ np.array([PLATE[0], 0.0, PLATE[2]])   # top edge's midpoint, from the plate's centre
    c = np.array([-0.05 + depth, 0.0, 0.03]) - top_front
    return c, q, R


def _top_edge_x(c, R, y):
    """x of the plate's top front edge where it crosses the plane y (the edge is along R[:, 1])."""
    p0 = c + R @ np.array([PLATE[0], 0.0, PLATE[2]])
    s = (y - p0[1]) / R[1, 1]
    return p0 + s * R[:, 1]


@pytest.mark.parametrize("yaw", [0.0, 1e-4, -1e-4, 3e-4])
def test_leaning_plate_pushing_a_face_gives_the_two_ends_of_the_contact_segment(yaw):
    """A plate leaning 0.8° pushes its top edge 20 µm into a cube's face. The contact is the segment of that
    edge over the face: 2 points at its ends y = ±0.05 (clipped by the cube's side planes), normal the face
    normal, phi the depth of each end. With a yaw of 1e-4 rad an edge–edge axis (cube z × plate y, 0.006° off
    the face normal) separates by ~1e-7 m more than the face axis; it used to win and return 1 point at one
    end of the segment."""
    c, q, R = _plate_pose(yaw)
    phi, point, normal = run(box(CUBE, [0, 0, 0]), box(PLATE, c, q))
    assert phi.size == 2
    np.testing.assert_allclose(normal, [[-1, 0, 0]] * 2, atol=1e-12)
    order = np.argsort(point[:, 1])
    for k, y in zip(order, (-0.05, 0.05)):
        end = _top_edge_x(c, R, y)
        assert point[k, 1] == pytest.approx(y, abs=1e-12)
        assert point[k, 2] == pytest.approx(end[2], abs=1e-12)
        assert phi[k] == pytest.approx(-(end[0] + 0.05), abs=1e-12)
        assert abs(phi[k] + 2e-5) <= abs(yaw) * 0.05 * (1 + 1e-6) + 1e-12    # the ends straddle the midpoint's depth


def test_face_push_contacts_mirror_with_the_configuration():
    """Mirroring the configuration in the plane y = 0 (yaw → −yaw) mirrors the contacts: same phi, y → −y."""
    c, q, _ = _plate_pose(2e-4)
    cm, qm, _ = _plate_pose(-2e-4)
    phi, point, normal = run(box(CUBE, [0, 0, 0]), box(PLATE, c, q))
    phim, pointm, normalm = run(box(CUBE, [0, 0, 0]), box(PLATE, cm, qm))
    flip = np.array([1.0, -1.0, 1.0])
    np.testing.assert_allclose(sorted_rows(np.c_[point * flip, phi]), sorted_rows(np.c_[pointm, phim]), atol=1e-12)
    np.testing.assert_allclose(normal * flip, normalm, atol=1e-12)


def test_face_push_contacts_are_invariant_under_a_rigid_motion_of_both_boxes():
    """Rotating and translating both boxes by the same rigid motion moves the contacts with it (phi unchanged)."""
    c, q, _ = _plate_pose(1e-4)
    g = axis_angle_quat([0.3, -0.8, 0.5], 1.1)
    Rg = quat_to_rot(*g)
    shift = np.array([0.4, -1.2, 0.7])
    phi, point, normal = run(box(CUBE, [0, 0, 0]), box(PLATE, c, q))
    phig, pointg, normalg = run(box(CUBE, shift, g), box(PLATE, Rg @ c + shift, quat_mul(g, q)))
    moved = point @ Rg.T + shift
    np.testing.assert_allclose(sorted_rows(np.c_[moved, phi]), sorted_rows(np.c_[pointg, phig]), atol=1e-12)
    np.testing.assert_allclose(normalg, normal @ Rg.T, atol=1e-12)


@pytest.mark.parametrize("axis", [[0, 0, 1], [0, 1, 0], [1, 0, 0], [0.6, -0.3, 0.74]])
def test_face_push_contacts_are_continuous_under_tiny_rotations(axis):
    """Rotating the plate by ±1e-9 rad about any axis keeps both points (no jump to 1 edge point) and moves
    them by less than 1e-9 m (the plate is 0.07 m across)."""
    for yaw in (0.0, 1e-4):
        c, q, _ = _plate_pose(yaw)
        phi, point, _ = run(box(CUBE, [0, 0, 0]), box(PLATE, c, q))
        for angle in (1e-9, -1e-9):
            qt = quat_mul(axis_angle_quat(axis, angle), q)
            phit, pointt, _ = run(box(CUBE, [0, 0, 0]), box(PLATE, c, qt))
            assert phit.size == phi.size == 2
            np.testing.assert_allclose(sorted_rows(pointt), sorted_rows(point), atol=1e-9)
            np.testing.assert_allclose(np.sort(phit), np.sort(phi), atol=1e-9)



def _sat_penetration(ca, Ra, ha, cb, Rb, hb):
    """Independent reference: (overlap [m], unit axis A → B) of the separating-axis test over the 15 axes of
    two boxes (3 + 3 face normals, 9 edge crosses). For penetrating boxes the smallest overlap is the exact
    penetration depth (minimum translation distance)."""
    axes = [Ra[:, i] for i in range(3)] + [Rb[:, j] for j in range(3)]
    axes += [np.cross(Ra[:, i], Rb[:, j]) for i in range(3) for j in range(3)]
    t = np.asarray(cb, float) - np.asarray(ca, float)
    best = (np.inf, None)
    for L in axes:
        if np.linalg.norm(L) < 1e-6:
            continue
        L = L / np.linalg.norm(L)
        overlap = np.sum(ha * np.abs(Ra.T @ L)) + np.sum(hb * np.abs(Rb.T @ L)) - abs(t @ L)
        if overlap < best[0]:
            best = (overlap, L * np.sign(t @ L))
    return best


def test_box_corner_dipping_beside_a_face_edge_keeps_the_exact_edge_contact():
    """A box (4 × 3 × 2 cm half extents) turned by the rotation vector (1.2, −2.2, 1.2) rad, i.e. tilted
    steeply away from a cube's top face, has its lowest corner 3e-5 m beyond the cube's top edge x = +0.05 and
    2e-4 m below the face plane. One of its edges at that corner crosses the cube's edge ~1.1e-4 m deep: the
    edge–edge axis (~42° off the face normal) is the minimum-overlap axis, and the face axis z (overlap 2e-4)
    is within FACE_TOL · h_min = 2e-4 m of it. The face manifold (the box's downward face clipped to the top
    face) lies above the face plane there; it used to replace the exact contact (phi = +1.6e-5 instead of
    −1.1e-4). Expected: phi = −(SAT overlap) and normal = the SAT axis (independent 15-axis SAT, tolerance
    1e-12 m / 1e-9 on round-off of O(0.1) numbers), both implied surface points on the boxes (1e-9 m)."""
    ha, hb = np.array(CUBE), np.array([0.04, 0.03, 0.02])
    rotvec = np.array([1.2, -2.2, 1.2])
    q = axis_angle_quat(rotvec, np.linalg.norm(rotvec))
    R = quat_to_rot(*q)
    corner = R @ (np.array([-1.0, 1.0, 1.0]) * hb)                  # the box's lowest corner, from its centre
    c = np.array([0.05 + 3e-5, 0.0, 0.05 - 2e-4]) - corner
    overlap, axis = _sat_penetration(np.zeros(3), np.eye(3), ha, c, R, hb)
    face_overlap = min(np.sum(ha * np.abs(L)) + np.sum(hb * np.abs(R.T @ L)) - abs(c @ L)
                       for L in [*np.eye(3), *R.T])
    assert abs(axis[2]) < 0.9 and 0.0 < face_overlap - overlap <= 1e-2 * 0.02   # precondition: the case above
    a, b = box(CUBE, [0, 0, 0]), box(hb, c, q)
    phi, point, normal = run(a, b, margin=0.01)
    k = np.argmin(phi)
    assert phi[k] == pytest.approx(-overlap, abs=1e-12)
    assert overlap == pytest.approx(1.1e-4, abs=1e-5)
    np.testing.assert_allclose(normal[k], axis, atol=1e-9)
    assert_on_surfaces(a, b, phi[k], point[k], normal[k])
