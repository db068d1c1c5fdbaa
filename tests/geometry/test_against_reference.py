"""Random configurations of every pair checked against an independent solver (Clarabel SOCP).

For each pair type and seed: random sizes and orientations, B placed at a random direction.

* Separated (gap up to 0.2): min phi equals the Clarabel distance (tolerance 1e-6 m: Clarabel's
  interior-point accuracy at the tolerances set in reference_shapes). Box–box uses the SAT
  separation, a lower bound of the distance, so there phi <= distance + 1e-6 is checked, and
  equality on the face-on cases of test_pairs_box.py.
* Shallow penetration (B moved 0.02 m past touching along the closest-point direction): the
  deepest contact is a minimum translation: moving B by (|phi| + δ) n gives a gap δ (Clarabel,
  1e-6 m), and moving it by (|phi| − δ) along n or along 8 random directions leaves the shapes
  overlapping (distance < 1e-7 m), δ = 1e-3 m.
* Swapping A and B gives the same phi and the opposite normals.
"""

import numpy as np
import pytest
from geometry_helpers import BOX, CAPSULE, HALFSPACE, SPHERE, pair
from reference_shapes import assert_minimum_translation, closest_points, moved, shape_distance

from convexsim.geometry import quat_to_rot

TYPES = [SPHERE, CAPSULE, BOX]
PAIRS = [(HALFSPACE, t) for t in TYPES] + [
    (a, b) for i, a in enumerate(TYPES) for b in TYPES[i:]
]
SEEDS = range(6)
DELTA = 1e-3


def random_quat(rng):
    q = rng.normal(size=4)
    return q / np.linalg.norm(q)


def random_shape(rng, gtype, pos):
    if gtype == SPHERE:
        size = [rng.uniform(0.2, 0.6), 0, 0]
    elif gtype == CAPSULE:
        size = [rng.uniform(0.1, 0.4), rng.uniform(0.1, 0.6), 0]
    elif gtype == BOX:
        size = list(rng.uniform(0.15, 0.6, 3))
    else:
        size = [0, 0, 0]
    return (gtype, size, np.asarray(pos, float), random_quat(rng))


def separated_config(rng, ta, tb):
    """A at the origin, B at a random direction with a gap in (0, 0.2]."""
    a = random_shape(rng, ta, [0, 0, 0])
    u = rng.normal(size=3)
    u /= np.linalg.norm(u)
    if ta == HALFSPACE:  # above the plane, anywhere along it
        n = quat_to_rot(*a[3])[:, 2]
        u = n + (u - (u @ n) * n)
    b = random_shape(rng, tb, 3.0 * u)
    d, xa, xb = closest_points(a, b)
    assert d > 0.5
    direction = (xa - xb) / d  # from B towards A
    gap = rng.uniform(0.01, 0.2)
    return a, moved(b, (d - gap) * direction), gap, direction


@pytest.mark.parametrize("ta, tb", PAIRS, ids=lambda t: t.name.lower())
@pytest.mark.parametrize("seed", SEEDS)
def test_separated_distance_matches_reference(ta, tb, seed):
    rng = np.random.default_rng(1000 * seed + 10 * ta + tb)
    a, b, gap, _ = separated_config(rng, ta, tb)
    d_ref = shape_distance(a, b)
    assert d_ref == pytest.approx(gap, abs=1e-6)
    phi, _, normal = pair(*a, *b, margin=0.5)
    assert phi.size >= 1
    np.testing.assert_allclose(np.linalg.norm(normal, axis=1), 1.0, atol=1e-12)
    if ta == BOX and tb == BOX:
        assert phi.min() <= d_ref + 1e-6
    else:
        assert phi.min() == pytest.approx(d_ref, abs=1e-6)


@pytest.mark.parametrize("ta, tb", PAIRS, ids=lambda t: t.name.lower())
@pytest.mark.parametrize("seed", SEEDS)
def test_penetration_is_a_minimum_translation(ta, tb, seed):
    rng = np.random.default_rng(1000 * seed + 10 * ta + tb + 7)
    a, b, gap, direction = separated_config(rng, ta, tb)
    b = moved(b, (gap + 0.02) * direction)  # 0.02 past touching
    phi, _, normal = pair(*a, *b)
    _, n = assert_minimum_translation(a, b, phi, normal, rng, 0.02, DELTA)
    phi_ba, _, normal_ba = pair(*b, *a)
    assert phi_ba.min() == pytest.approx(phi.min(), abs=1e-12)
    np.testing.assert_allclose(normal_ba[np.argmin(phi_ba)], -n, atol=1e-9)
