"""Analytic cases for the halfspace / sphere / capsule pairs.

Expected values are closed-form; tolerance 1e-12 m (or 1e-12 on unit vectors): the kernels do a few
flops on O(1) numbers, so only round-off separates them from the exact answer.
"""

import numpy as np
import pytest
from geometry_helpers import CAPSULE, HALFSPACE, IDENTITY, SPHERE, axis_angle_quat, pair
from reference_shapes import assert_on_surfaces

TOL = 1e-12
I = IDENTITY
ALONG_X = axis_angle_quat([0, 1, 0], np.pi / 2)  # capsule axis (local z) -> world x
ALONG_Y = axis_angle_quat([1, 0, 0], -np.pi / 2)  # capsule axis -> world y


def sph(r, c):
    return (SPHERE, [r, 0, 0], c, I)


def cap(r, h, c, q=I):
    return (CAPSULE, [r, h, 0], c, q)


def run(a, b, margin=0.0):
    return pair(*a, *b, margin=margin)


# ---------------------------------------------------------------- sphere–sphere


@pytest.mark.parametrize(
    "xb, phi_expected",
    [(1.2, -0.3), (1.5, 0.0), (3.0, 1.5)],
    ids=["penetrating", "touching", "separated"],
)
def test_sphere_sphere_distance_normal_point(xb, phi_expected):
    a, b = sph(1.0, [0, 0, 0]), sph(0.5, [xb, 0, 0])
    phi, point, normal = run(a, b, margin=2.0)
    assert phi == pytest.approx([phi_expected], abs=TOL)
    np.testing.assert_allclose(normal, [[1, 0, 0]], atol=TOL)
    # midpoint of the surface points (1, 0, 0) and (xb - 0.5, 0, 0)
    np.testing.assert_allclose(point, [[(1.0 + xb - 0.5) / 2, 0, 0]], atol=TOL)
    assert_on_surfaces(a, b, phi[0], point[0], normal[0])


def test_sphere_sphere_margin_filters_separated_pairs():
    a, b = sph(1.0, [0, 0, 0]), sph(0.5, [0, 3.0, 0])  # gap 1.5
    assert run(a, b, margin=0.0)[0].size == 0
    assert run(a, b, margin=1.49)[0].size == 0
    assert run(a, b, margin=1.51)[0].size == 1


def test_sphere_sphere_concentric_uses_plus_z():
    phi, point, normal = run(sph(1.0, [1, 2, 3]), sph(0.5, [1, 2, 3]))
    assert phi == pytest.approx([-1.5], abs=TOL)
    np.testing.assert_allclose(normal, [[0, 0, 1]], atol=TOL)
    # surface points (1,2,4) and (1,2,2.5) -> midpoint
    np.testing.assert_allclose(point, [[1, 2, 3.25]], atol=TOL)


def test_swapping_a_and_b_flips_the_normal_only():
    a, b = sph(1.0, [0, 0, 0]), cap(0.3, 0.5, [0.2, 1.1, 0.4], ALONG_X)
    phi_ab, point_ab, n_ab = run(a, b)
    phi_ba, point_ba, n_ba = run(b, a)
    np.testing.assert_allclose(phi_ab, phi_ba, atol=TOL)
    np.testing.assert_allclose(point_ab, point_ba, atol=TOL)
    np.testing.assert_allclose(n_ab, -n_ba, atol=TOL)


# ---------------------------------------------------------------- halfspace–sphere


def test_halfspace_sphere_tilted_plane():
    qh = axis_angle_quat([1, 2, 0.5], 0.7)
    hs = (HALFSPACE, [0, 0, 0], [0.1, -0.2, 1.0], qh)
    n = _rot(qh)[:, 2]
    t = np.cross(n, [1.0, 0, 0])  # a tangent direction
    c = np.array([0.1, -0.2, 1.0]) + 0.3 * n + 2.0 * t
    b = sph(0.5, c)
    phi, point, normal = run(hs, b)
    assert phi == pytest.approx([-0.2], abs=TOL)
    np.testing.assert_allclose(normal[0], n, atol=TOL)
    np.testing.assert_allclose(point[0], c - 0.4 * n, atol=TOL)  # between c - 0.3n (plane) and c - 0.5n
    assert_on_surfaces(hs, b, phi[0], point[0], normal[0])
    # halfspace as B: same contact, normal from the sphere into the halfspace
    phi2, _, normal2 = run(b, hs)
    np.testing.assert_allclose(phi2, phi, atol=TOL)
    np.testing.assert_allclose(normal2, -normal, atol=TOL)


def test_halfspace_sphere_separated_and_touching():
    hs = (HALFSPACE, [0, 0, 0], [0, 0, 0], I)
    assert run(hs, sph(0.5, [0, 0, 0.7]))[0].size == 0
    phi, _, _ = run(hs, sph(0.5, [0, 0, 0.7]), margin=0.25)
    assert phi == pytest.approx([0.2], abs=TOL)
    phi, point, _ = run(hs, sph(0.5, [3, 4, 0.5]))
    assert phi == pytest.approx([0.0], abs=TOL)
    np.testing.assert_allclose(point, [[3, 4, 0]], atol=TOL)


# ---------------------------------------------------------------- halfspace–capsule


def test_capsule_lying_on_halfspace_gives_both_caps():
    hs = (HALFSPACE, [0, 0, 0], [0, 0, 0], I)
    phi, point, normal = run(hs, cap(0.1, 0.5, [1.0, 2.0, 0.08], ALONG_X))
    assert phi == pytest.approx([-0.02, -0.02], abs=TOL)
    np.testing.assert_allclose(point, [[0.5, 2, -0.01], [1.5, 2, -0.01]], atol=TOL)
    np.testing.assert_allclose(normal, [[0, 0, 1]] * 2, atol=TOL)


@pytest.mark.parametrize("theta", [0.0, 0.3, 1.2])
def test_tilted_capsule_on_halfspace_gives_lower_cap(theta):
    hs = (HALFSPACE, [0, 0, 0], [0, 0, 0], I)
    q = axis_angle_quat([0, 1, 0], theta)  # axis (sin θ, 0, cos θ)
    r, h = 0.1, 0.5
    zc = r + h * np.cos(theta) - 0.01  # lower cap 0.01 deep, upper cap well above the plane
    phi, point, normal = run(hs, cap(r, h, [0, 0, zc], q))
    low = np.array([-h * np.sin(theta), 0, zc - h * np.cos(theta)])
    assert phi == pytest.approx([low[2] - r], abs=TOL)
    np.testing.assert_allclose(point[0], [low[0], 0, (low[2] - r) / 2], atol=TOL)
    np.testing.assert_allclose(normal, [[0, 0, 1]], atol=TOL)


# ---------------------------------------------------------------- sphere–capsule


def test_sphere_capsule_side_and_cap():
    c = cap(0.2, 1.0, [0, 0, 0])
    s = sph(0.3, [0.4, 0, 0.5])
    phi, point, normal = run(s, c)
    assert phi == pytest.approx([-0.1], abs=TOL)
    np.testing.assert_allclose(normal, [[-1, 0, 0]], atol=TOL)
    np.testing.assert_allclose(point, [[0.15, 0, 0.5]], atol=TOL)  # between x = 0.1 and x = 0.2
    assert_on_surfaces(s, c, phi[0], point[0], normal[0])
    s = sph(0.3, [0, 0, 1.6])  # beyond the +h cap: distance to the cap centre 0.6
    phi, point, normal = run(s, c, margin=0.2)
    assert phi == pytest.approx([0.1], abs=TOL)
    np.testing.assert_allclose(normal, [[0, 0, -1]], atol=TOL)


def test_sphere_centre_on_capsule_axis():
    phi, _, normal = run(sph(0.3, [0, 0, 0.3]), cap(0.2, 1.0, [0, 0, 0]))
    assert phi == pytest.approx([-0.5], abs=TOL)
    assert np.linalg.norm(normal[0]) == pytest.approx(1.0, abs=TOL)
    assert normal[0, 2] == pytest.approx(0.0, abs=TOL)  # perpendicular to the axis


# ---------------------------------------------------------------- capsule–capsule


def test_crossed_capsules():
    a, b = cap(0.2, 1.0, [0, 0, 0], ALONG_X), cap(0.2, 1.0, [0, 0, 0.3], ALONG_Y)
    phi, point, normal = run(a, b)
    assert phi == pytest.approx([-0.1], abs=TOL)
    np.testing.assert_allclose(normal, [[0, 0, 1]], atol=TOL)
    np.testing.assert_allclose(point, [[0, 0, 0.15]], atol=TOL)
    assert_on_surfaces(a, b, phi[0], point[0], normal[0])


def test_crossed_capsules_with_intersecting_axes_use_the_common_perpendicular():
    phi, _, normal = run(cap(0.2, 1.0, [0, 0, 0], ALONG_X), cap(0.3, 1.0, [0, 0, 0], ALONG_Y))
    assert phi == pytest.approx([-0.5], abs=TOL)
    np.testing.assert_allclose(np.abs(normal), [[0, 0, 1]], atol=TOL)


def test_skew_separated_capsules():
    phi, point, normal = run(cap(0.2, 1.0, [0, 0, 0], ALONG_X), cap(0.2, 1.0, [0.3, -0.2, 1.0], ALONG_Y),
                             margin=1.0)
    assert phi == pytest.approx([0.6], abs=TOL)
    np.testing.assert_allclose(normal, [[0, 0, 1]], atol=TOL)
    np.testing.assert_allclose(point, [[0.3, 0, 0.5]], atol=TOL)


@pytest.mark.parametrize("flip", [False, True], ids=["parallel", "antiparallel"])
def test_parallel_overlapping_capsules_give_two_contacts(flip):
    qb = axis_angle_quat([0, 1, 0], -np.pi / 2) if flip else ALONG_X
    a, b = cap(0.2, 1.0, [0, 0, 0], ALONG_X), cap(0.2, 1.0, [0.5, 0, 0.3], qb)
    phi, point, normal = run(a, b)
    # overlap of the x-intervals [-1, 1] and [-0.5, 1.5] is [-0.5, 1]
    assert phi == pytest.approx([-0.1, -0.1], abs=TOL)
    np.testing.assert_allclose(np.sort(point[:, 0]), [-0.5, 1.0], atol=TOL)
    np.testing.assert_allclose(point[:, 1:], [[0, 0.15]] * 2, atol=TOL)
    np.testing.assert_allclose(normal, [[0, 0, 1]] * 2, atol=TOL)


def test_parallel_capsules_end_to_end_give_one_contact():
    phi, point, normal = run(cap(0.2, 1.0, [0, 0, 0], ALONG_X), cap(0.2, 1.0, [2.5, 0, 0], ALONG_X),
                             margin=0.2)
    assert phi == pytest.approx([0.1], abs=TOL)
    np.testing.assert_allclose(normal, [[1, 0, 0]], atol=TOL)
    np.testing.assert_allclose(point, [[1.25, 0, 0]], atol=TOL)


def test_collinear_overlapping_capsules():
    phi, _, normal = run(cap(0.2, 1.0, [0, 0, 0], ALONG_X), cap(0.2, 1.0, [0.5, 0, 0], ALONG_X))
    assert phi == pytest.approx([-0.4, -0.4], abs=TOL)
    np.testing.assert_allclose(normal[:, 0], 0.0, atol=TOL)  # perpendicular to the common axis
    np.testing.assert_allclose(np.linalg.norm(normal, axis=1), 1.0, atol=TOL)


def test_zero_length_capsules_behave_as_spheres():
    phi, point, normal = run(cap(0.5, 0.0, [0, 0, 0]), cap(0.5, 0.0, [0.6, 0.8, 0]))
    assert phi == pytest.approx([0.0], abs=TOL)
    np.testing.assert_allclose(normal, [[0.6, 0.8, 0]], atol=TOL)


def _rot(q):
    from convexsim.geometry import quat_to_rot

    return quat_to_rot(*q)
