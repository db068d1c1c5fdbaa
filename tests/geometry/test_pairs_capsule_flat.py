"""A capsule lying flat or nearly flat on a box face, on another capsule, or on a halfspace.

The contact of a capsule resting on a flat support is a segment; the collider must report its two ends
(2 contacts) with their depths, not 1 point that jumps between the ends when the capsule tilts by a
hair. Tilts 0, ±1e-9, ±1e-6, ±1e-3 rad about several axes; capsules separated by a small gap (within
the margin), penetrating by a small depth (core segment above the support: the realistic resting
case) and penetrating deeply (core segment inside the box).

Expected values are closed-form from the segment ends: depth of an end along the face normal
(phi = height − r), points at the midpoint between the capsule surface and the face. Tolerance 1e-12 m
(round-off on O(1) numbers) unless stated; continuity under a 1e-9 rad rotation is checked at 1e-8 m
(rotation × lever arm ≤ 1e-9 m, plus round-off), and mirror/rigid-motion invariance at 1e-12 m.
"""

import numpy as np
import pytest
from geometry_helpers import BOX, CAPSULE, HALFSPACE, IDENTITY, axis_angle_quat, pair, quat_mul

from convexsim.geometry import quat_to_rot

TOL = 1e-12
MARGIN = 0.01                      # > gap + tilt × capsule length: both ends are within the margin
HALF = np.array([0.5, 0.4, 0.3])    # box half extents; top face z = 0.3
R_CAP = 0.05
TILTS = [0.0, 1e-9, -1e-9, 1e-6, -1e-6, 1e-3, -1e-3]
TILT_AXES = {"y": [0, 1, 0], "z": [0, 0, 1], "x": [1, 0, 0], "oblique": [0.3, 0.8, 0.5]}
# capsule half length and centre x: over the face interior, overhanging one side, overhanging both sides
LAYOUTS = {"inside": (0.3, 0.05), "overhang-one": (0.3, 0.4), "overhang-both": (0.7, 0.02)}
# capsule centre height above the top face minus r: gap (in margin), shallow penetration, deep (segment inside)
OFFSETS = {"gap": 1e-4, "shallow": -2e-4, "deep": -0.08}


def quat_z_to(axis):
    """A unit quaternion rotating e_z onto the unit vector ``axis``."""
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    c = np.cross([0.0, 0.0, 1.0], axis)
    s = np.linalg.norm(c)
    angle = np.arctan2(s, axis[2])
    return IDENTITY.copy() if s < 1e-300 else axis_angle_quat(c, angle)


def capsule(p0, p1, r=R_CAP):
    """Capsule geometry with core segment p0–p1 (world)."""
    p0, p1 = np.asarray(p0, float), np.asarray(p1, float)
    return (CAPSULE, [r, 0.5 * np.linalg.norm(p1 - p0), 0], list(0.5 * (p0 + p1)), quat_z_to(p1 - p0))


def box(c=(0, 0, 0), q=IDENTITY, half=HALF):
    return (BOX, list(half), list(c), q)


def sorted_rows(x):
    return x[np.lexsort(np.round(x, 9).T[::-1])]


def tilted_segment(layout, offset, axis, tilt):
    """Ends of the capsule's core segment (along x) rotated by ``tilt`` about ``axis`` around its centre."""
    h, cx = LAYOUTS[layout]
    centre = np.array([cx, 0.1, HALF[2] + R_CAP + OFFSETS[offset]])
    R = quat_to_rot(*axis_angle_quat(TILT_AXES[axis], tilt))
    return centre - h * R[:, 0], centre + h * R[:, 0]


def clipped_face_ends(p0, p1):
    """Ends of the segment p0–p1 clipped to the slab |x| <= hx, |y| <= hy of the top face (box frame)."""
    t0, t1 = 0.0, 1.0
    d = p1 - p0
    for k in range(2):
        if abs(d[k]) > 0:
            ta, tb = sorted(((-HALF[k] - p0[k]) / d[k], (HALF[k] - p0[k]) / d[k]))
            t0, t1 = max(t0, ta), min(t1, tb)
    return np.array([p0 + t0 * d, p0 + t1 * d])


def expected_face_contacts(p0, p1):
    """phi (2,) and points (2, 3) of the two clipped ends on the top face, box at the origin."""
    ends = clipped_face_ends(p0, p1)
    phi = ends[:, 2] - HALF[2] - R_CAP
    points = ends.copy()
    points[:, 2] = 0.5 * (ends[:, 2] - R_CAP + HALF[2])
    return phi, points


# ---------------------------------------------------------------- capsule–box


CASES = [(layout, offset, axis, tilt) for layout in LAYOUTS for offset in OFFSETS for axis in TILT_AXES
         for tilt in TILTS]


@pytest.mark.parametrize("layout, offset, axis, tilt", CASES)
def test_flat_capsule_on_box_face_gives_the_two_ends_of_the_segment(layout, offset, axis, tilt):
    """Two contacts at the ends of the core segment clipped to the top face, normal −z (capsule into box),
    phi = height of the end above the face − r. Near-flat means the face manifold is the contact segment;
    for the overhanging layouts tilted down to an edge the exact (SAT) depth over the box edge is the
    clipped end's face depth times cos(tilt), a relative O(tilt²) ≤ 1e-6 difference."""
    p0, p1 = tilted_segment(layout, offset, axis, tilt)
    phi, point, normal = pair(*capsule(p0, p1), *box(), margin=MARGIN)
    phi_e, point_e = expected_face_contacts(p0, p1)
    assert phi.size == 2, (phi, point)
    np.testing.assert_allclose(normal, [[0, 0, -1]] * 2, atol=TOL)
    order, order_e = np.lexsort(point.T[::-1]), np.lexsort(np.round(point_e, 9).T[::-1])
    np.testing.assert_allclose(point[order], point_e[order_e], atol=TOL)
    np.testing.assert_allclose(phi[order], phi_e[order_e], atol=TOL)


MIRROR_CASES = [(layout, offset, axis, tilt) for layout in LAYOUTS for offset in OFFSETS
                for axis in ("y", "oblique") for tilt in (1e-6, 1e-3)]


@pytest.mark.parametrize("layout, offset, axis, tilt", MIRROR_CASES)
def test_flat_capsule_on_box_contacts_mirror_with_the_configuration(layout, offset, axis, tilt):
    """Mirroring the capsule in the plane x = 0 (the box is symmetric) mirrors the contacts: same phi, x → −x."""
    p0, p1 = tilted_segment(layout, offset, axis, tilt)
    flip = np.array([-1.0, 1.0, 1.0])
    phi, point, normal = pair(*capsule(p0, p1), *box(), margin=MARGIN)
    phim, pointm, normalm = pair(*capsule(p1 * flip, p0 * flip), *box(), margin=MARGIN)
    assert phi.size == phim.size
    np.testing.assert_allclose(sorted_rows(np.c_[point * flip, phi]), sorted_rows(np.c_[pointm, phim]), atol=TOL)
    np.testing.assert_allclose(sorted_rows(normal * flip), sorted_rows(normalm), atol=TOL)


@pytest.mark.parametrize("layout, offset, axis, tilt", MIRROR_CASES)
def test_flat_capsule_on_box_contacts_are_invariant_under_a_rigid_motion(layout, offset, axis, tilt):
    """Rotating and translating the capsule and the box by the same rigid motion moves the contacts with it."""
    p0, p1 = tilted_segment(layout, offset, axis, tilt)
    g = axis_angle_quat([0.3, -0.8, 0.5], 1.1)
    Rg = quat_to_rot(*g)
    shift = np.array([0.4, -1.2, 0.7])
    phi, point, normal = pair(*capsule(p0, p1), *box(), margin=MARGIN)
    phig, pointg, normalg = pair(*capsule(Rg @ p0 + shift, Rg @ p1 + shift), *box(shift, g), margin=MARGIN)
    assert phi.size == phig.size
    np.testing.assert_allclose(sorted_rows(np.c_[point @ Rg.T + shift, phi]), sorted_rows(np.c_[pointg, phig]),
                               atol=TOL)
    np.testing.assert_allclose(sorted_rows(normalg), sorted_rows(normal @ Rg.T), atol=TOL)


def rotate_about_centre(p0, p1, axis, angle):
    R = quat_to_rot(*axis_angle_quat(axis, angle))
    c = 0.5 * (p0 + p1)
    return c + R @ (p0 - c), c + R @ (p1 - c)


CONTINUITY_CASES = [(layout, offset, tilt) for layout in LAYOUTS for offset in OFFSETS for tilt in (0.0, 1e-6, 1e-3)]
NUDGE_AXES = [[0, 0, 1], [0, 1, 0], [1, 0, 0], [0.6, -0.3, 0.74]]


@pytest.mark.parametrize("layout, offset, tilt", CONTINUITY_CASES)
def test_flat_capsule_on_box_contacts_are_continuous_under_tiny_rotations(layout, offset, tilt):
    """A further ±1e-9 rad rotation about any axis keeps the number of contacts and moves them by < 1e-8 m."""
    p0, p1 = tilted_segment(layout, offset, "y", tilt)
    phi, point, _ = pair(*capsule(p0, p1), *box(), margin=MARGIN)
    for axis in NUDGE_AXES:
        for angle in (1e-9, -1e-9):
            a, b = rotate_about_centre(p0, p1, axis, angle)
            phit, pointt, _ = pair(*capsule(a, b), *box(), margin=MARGIN)
            assert phit.size == phi.size == 2
            np.testing.assert_allclose(sorted_rows(pointt), sorted_rows(point), atol=1e-8)
            np.testing.assert_allclose(np.sort(phit), np.sort(phi), atol=1e-8)


def test_capsule_tilted_steeply_over_a_box_edge_keeps_one_edge_contact():
    """Control: a capsule tilted 0.3 rad across the edge {x = 0.5, z = 0.3} touches the edge only; the face
    manifold (its clipped end is 0.3 · overhang deeper than the SAT depth... ) must not replace it. One contact,
    normal ⊥ to the capsule axis in the xz plane."""
    tilt = 0.3
    u = np.array([np.cos(tilt), 0.0, -np.sin(tilt)])  # down towards +x
    edge = np.array([0.5, 0.1, HALF[2]])
    n_up = np.array([np.sin(tilt), 0.0, np.cos(tilt)])  # from the edge to the core segment
    for gap in (1e-4, -0.02):
        centre = edge + (R_CAP + gap) * n_up
        phi, _, normal = pair(*capsule(centre - 0.4 * u, centre + 0.4 * u), *box(), margin=MARGIN)
        assert phi == pytest.approx([gap], abs=TOL)
        np.testing.assert_allclose(normal, [-n_up], atol=TOL)


# ---------------------------------------------------------------- capsule–capsule


RA, RB = 0.04, 0.05
CC_OFFSETS = {"gap": 1e-4, "shallow": -2e-4, "moderate": -0.03}


def upper_segment(offset, axis, tilt, h=0.3, cx=0.1):
    """Capsule A (along x, centre x = cx) lying on capsule B (along x, |x| <= 0.5, at the origin)."""
    centre = np.array([cx, 0.0, RA + RB + CC_OFFSETS[offset]])
    R = quat_to_rot(*axis_angle_quat(TILT_AXES[axis], tilt))
    return centre - h * R[:, 0], centre + h * R[:, 0]


LOWER = (np.array([-0.5, 0.0, 0.0]), np.array([0.5, 0.0, 0.0]))


def segment_distance(p0, p1, q0, q1, n=20001):
    """Reference distance between two segments by dense sampling of the first plus exact projection."""
    s = np.linspace(0.0, 1.0, n)[:, None]
    x = p0 + s * (p1 - p0)
    d = q1 - q0
    t = np.clip((x - q0) @ d / (d @ d), 0.0, 1.0)[:, None]
    return np.min(np.linalg.norm(x - (q0 + t * d), axis=1))


def ball_contact_at(x1, q0, q1):
    """phi of A's ball at x1 against B's segment."""
    d = q1 - q0
    t = np.clip((x1 - q0) @ d / (d @ d), 0.0, 1.0)
    return np.linalg.norm(x1 - (q0 + t * d)) - RA - RB


CC_CASES = [(offset, axis, tilt) for offset in CC_OFFSETS for axis in TILT_AXES for tilt in TILTS]


@pytest.mark.parametrize("offset, axis, tilt", CC_CASES)
def test_nearly_parallel_capsules_give_the_two_ends_of_the_overlap(offset, axis, tilt):
    """Capsule A (h = 0.3) lying on capsule B (h = 0.5) along x, tilted: 2 contacts at A's segment ends (the
    overlap interval), each with the exact ball–segment phi of that end; the deepest is within 1 % of
    min(ra, rb) of the exact segment distance (sampled reference, error ≤ 1e-9 m at 2e4 samples)."""
    p0, p1 = upper_segment(offset, axis, tilt)
    phi, point, normal = pair(*capsule(p0, p1, RA), *capsule(*LOWER, RB), margin=MARGIN)
    assert phi.size == 2, (phi, point)
    expected = sorted([ball_contact_at(p0, *LOWER), ball_contact_at(p1, *LOWER)])
    np.testing.assert_allclose(np.sort(phi), expected, atol=TOL)
    exact = segment_distance(p0, p1, *LOWER) - RA - RB
    assert exact - 1e-9 <= phi.min() <= exact + 1e-2 * RA
    assert np.all(normal[:, 2] < -0.99)  # A above B: normals point down


@pytest.mark.parametrize("offset", list(CC_OFFSETS))
@pytest.mark.parametrize("tilt", [0.0, 1e-6, 1e-3])
def test_nearly_parallel_capsules_are_continuous_mirror_symmetric_and_invariant(offset, tilt):
    """±1e-9 rad nudges keep 2 contacts (moving < 1e-8 m); mirroring in x = 0 mirrors them; a rigid motion
    of both capsules moves them along."""
    p0, p1 = upper_segment(offset, "y", tilt, cx=0.0)
    phi, point, _ = pair(*capsule(p0, p1, RA), *capsule(*LOWER, RB), margin=MARGIN)
    assert phi.size == 2
    for axis in NUDGE_AXES:
        for angle in (1e-9, -1e-9):
            a, b = rotate_about_centre(p0, p1, axis, angle)
            phit, pointt, _ = pair(*capsule(a, b, RA), *capsule(*LOWER, RB), margin=MARGIN)
            assert phit.size == 2
            np.testing.assert_allclose(sorted_rows(pointt), sorted_rows(point), atol=1e-8)
    flip = np.array([-1.0, 1.0, 1.0])
    phim, pointm, _ = pair(*capsule(p1 * flip, p0 * flip, RA), *capsule(LOWER[1] * flip, LOWER[0] * flip, RB),
                           margin=MARGIN)
    np.testing.assert_allclose(sorted_rows(np.c_[point * flip, phi]), sorted_rows(np.c_[pointm, phim]), atol=TOL)
    g = axis_angle_quat([0.3, -0.8, 0.5], 1.1)
    Rg = quat_to_rot(*g)
    shift = np.array([0.4, -1.2, 0.7])
    phig, pointg, _ = pair(*capsule(Rg @ p0 + shift, Rg @ p1 + shift, RA),
                           *capsule(Rg @ LOWER[0] + shift, Rg @ LOWER[1] + shift, RB), margin=MARGIN)
    np.testing.assert_allclose(sorted_rows(np.c_[point @ Rg.T + shift, phi]), sorted_rows(np.c_[pointg, phig]),
                               atol=TOL)


def test_crossing_capsules_keep_one_contact():
    """Control: capsules crossing at 0.3 rad (an X seen from above) touch at one point over the crossing."""
    p0, p1 = upper_segment("shallow", "z", 0.3, cx=0.0)
    phi, point, normal = pair(*capsule(p0, p1, RA), *capsule(*LOWER, RB), margin=MARGIN)
    assert phi == pytest.approx([-2e-4], abs=TOL)
    np.testing.assert_allclose(normal, [[0, 0, -1]], atol=TOL)


# ---------------------------------------------------------------- halfspace–capsule


@pytest.mark.parametrize("offset", ["gap", "shallow"])
@pytest.mark.parametrize("axis", list(TILT_AXES))
@pytest.mark.parametrize("tilt", TILTS)
def test_capsule_on_halfspace_gives_both_ends_and_is_continuous(offset, axis, tilt):
    """Both cap centres within the margin give 2 contacts with phi = height − r; a ±1e-9 rad nudge keeps both."""
    p0, p1 = tilted_segment("inside", offset, axis, tilt)
    ground = (HALFSPACE, [0, 0, 0], [0, 0, HALF[2]], IDENTITY)
    phi, point, normal = pair(*ground, *capsule(p0, p1), margin=MARGIN)
    assert phi.size == 2
    np.testing.assert_allclose(np.sort(phi), np.sort([p0[2], p1[2]]) - HALF[2] - R_CAP, atol=TOL)
    np.testing.assert_allclose(normal, [[0, 0, 1]] * 2, atol=TOL)
    for nudge in NUDGE_AXES:
        a, b = rotate_about_centre(p0, p1, nudge, 1e-9)
        phit, pointt, _ = pair(*ground, *capsule(a, b), margin=MARGIN)
        assert phit.size == 2
        np.testing.assert_allclose(sorted_rows(pointt), sorted_rows(point), atol=1e-8)


@pytest.mark.parametrize("gap", [-1e-4, 1e-5])
def test_capsule_end_near_a_box_edge_pointing_away_keeps_the_exact_contact(gap):
    """Control (a configuration met in mixed_clutter): a capsule whose lower end hangs 0.45° off the −x face
    normal beside the edge {x = −hx, z = −hz} while its axis points steeply away. The gap direction is nearly
    the face normal, but the segment clipped to the face starts above the edge's end, ~1e-4 m shallower than
    the exact contact: the exact end–edge contact (phi = gap, normal from the end's centre to the edge) must
    be kept, not replaced by that shallower face point."""
    half = np.array([0.04, 0.03, 0.02])
    r, theta = 0.025, np.radians(0.45)
    n_out = np.array([-np.cos(theta), 0.0, -np.sin(theta)])          # box -> capsule end
    p1 = np.array([-0.04, -0.004, -0.02]) + (r + gap) * n_out
    u = np.array([-0.35, 0.66, 0.67])
    p0 = p1 + 0.08 * u / np.linalg.norm(u)
    phi, _, normal = pair(*capsule(p0, p1, r), *box(half=half), margin=MARGIN)
    assert phi == pytest.approx([gap], abs=TOL)
    np.testing.assert_allclose(normal, [-n_out], atol=1e-12)
