"""Box–box and halfspace–box contacts on many random poses against independent references.

References: Clarabel's distance between the two boxes (reference_shapes, accuracy 1e-6 m at its tolerances),
the boxes' exact signed-distance functions (numpy) and, for halfspace–box, the heights of the 8 vertices
computed in numpy. Half of the box pairs are nearly face-aligned (B's orientation is A's turned by up to
2e-3 rad), the configurations where box_box returns face manifolds of 2–8 points.

* Every contact: unit normal (1e-12), and both surface points implied by (phi, point, normal) on their box's
  boundary (|signed distance| <= 1e-9 m, round-off on O(1) lengths).
* Separated (gap 0.001–0.15 m, margin 0.1 m): contacts exist iff the gap is within the margin, and the
  smallest phi is the Clarabel distance (1e-6 m).
* Penetrating (0.005–0.03 m past touching along the closest-point direction): the deepest contact is a
  minimum translation (reference_shapes.assert_minimum_translation, δ = min(1e-3 m, depth / 2)).
* Halfspace–box: one contact per vertex with height <= margin, phi the vertex heights (1e-12 m), normal the
  plane normal.
"""

import numpy as np
import pytest
from geometry_helpers import BOX, HALFSPACE, axis_angle_quat, pair, quat_mul
from reference_shapes import assert_minimum_translation, assert_on_surfaces, closest_points, moved, shape_distance

from convexsim.geometry import quat_to_rot

MARGIN = 0.1
DELTA = 1e-3
SEEDS = range(24)


def random_quat(rng):
    q = rng.normal(size=4)
    return q / np.linalg.norm(q)


def random_box_pair(rng, aligned):
    """Box A at the origin, box B 3 m away in a random direction (random sizes 0.05–0.6 m)."""
    qa = random_quat(rng)
    qb = quat_mul(qa, axis_angle_quat(rng.normal(size=3), rng.uniform(0.0, 2e-3))) if aligned else random_quat(rng)
    u = rng.normal(size=3)
    u /= np.linalg.norm(u)
    a = (BOX, list(rng.uniform(0.05, 0.6, 3)), np.zeros(3), qa)
    b = (BOX, list(rng.uniform(0.05, 0.6, 3)), 3.0 * u, qb)
    return a, b


def at_gap(a, b, gap):
    """B translated along the closest-point direction so that its distance to A is ``gap`` (negative: past
    touching by −gap along that direction)."""
    d, xa, xb = closest_points(a, b)
    direction = (xa - xb) / d  # from B towards A
    return moved(b, (d - gap) * direction)


def assert_contacts_on_surfaces(a, b, phi, point, normal):
    np.testing.assert_allclose(np.linalg.norm(normal, axis=1), 1.0, atol=1e-12)
    for k in range(phi.size):
        assert_on_surfaces(a, b, phi[k], point[k], normal[k], tol=1e-9)


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("seed", SEEDS)
def test_separated_boxes_give_the_reference_distance(seed, aligned):
    rng = np.random.default_rng(3800 + seed)
    a, b = random_box_pair(rng, aligned)
    gap = rng.uniform(0.001, 0.15)
    if abs(gap - MARGIN) < 1e-4:
        gap += 2e-4
    b = at_gap(a, b, gap)
    d_ref = shape_distance(a, b)
    assert d_ref == pytest.approx(gap, abs=1e-6)
    phi, point, normal = pair(*a, *b, margin=MARGIN)
    if gap > MARGIN:
        assert phi.size == 0
        return
    assert phi.size >= 1
    assert phi.min() == pytest.approx(d_ref, abs=1e-6)
    assert_contacts_on_surfaces(a, b, phi, point, normal)


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("seed", SEEDS)
def test_penetrating_boxes_give_a_minimum_translation(seed, aligned):
    rng = np.random.default_rng(3900 + seed)
    a, b = random_box_pair(rng, aligned)
    overlap = rng.uniform(0.005, 0.03)
    b = at_gap(a, b, -overlap)
    phi, point, normal = pair(*a, *b, margin=0.0)
    assert 1 <= phi.size <= 8
    assert_contacts_on_surfaces(a, b, phi, point, normal)
    # δ below the depth found (the minimum translation can be much shorter than ``overlap`` when B slides past
    # a face of A), so that moving by depth − δ still goes towards A.
    assert_minimum_translation(a, b, phi, normal, rng, overlap, min(DELTA, -0.5 * phi.min()))


@pytest.mark.parametrize("seed", SEEDS)
def test_halfspace_box_gives_every_vertex_within_the_margin(seed):
    rng = np.random.default_rng(4000 + seed)
    qh = random_quat(rng)
    ground = (HALFSPACE, [0, 0, 0], rng.normal(size=3), qh)
    n = quat_to_rot(*qh)[:, 2]
    half = rng.uniform(0.05, 0.6, 3)
    qb = random_quat(rng) if seed % 2 else quat_mul(qh, axis_angle_quat(rng.normal(size=3), 1e-3))
    c = ground[2] + n * rng.uniform(-0.3, 0.7)
    box = (BOX, list(half), c, qb)
    margin = [0.0, 0.05, 0.3][seed % 3]
    R = quat_to_rot(*qb)
    corners = np.array([c + R @ (half * s) for s in np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1])).reshape(3, -1).T])
    heights = (corners - ground[2]) @ n
    phi, point, normal = pair(*ground, *box, margin=margin)
    expected = np.sort(heights[heights <= margin])
    assert phi.size == expected.size
    np.testing.assert_allclose(np.sort(phi), expected, atol=1e-12)
    np.testing.assert_allclose(normal, np.tile(n, (phi.size, 1)), atol=1e-12)
    assert_contacts_on_surfaces(ground, box, phi, point, normal)
