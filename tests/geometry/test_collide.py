"""Whole-scene collision: broad phase vs brute force, A/B conventions, filters, buffers, errors."""

import numpy as np
import pytest
from geometry_helpers import BOX, CAPSULE, HALFSPACE, IDENTITY, SPHERE, axis_angle_quat, make_model, pair, quat_mul

from convexsim.geometry import CollisionWorkspace, candidate_pairs, collide, geom_world_poses, quat_to_rot

I = IDENTITY


def random_sphere_scene(rng, n=1000, extent=10.0, clustered=False):
    centres = rng.uniform(-extent, extent, size=(n, 3))
    if clustered:  # half of them in a small cube: many overlaps
        centres[: n // 2] *= 0.1
    radii = rng.uniform(0.05, 0.6, n)
    return make_model([(SPHERE, [r, 0, 0], c, I) for r, c in zip(radii, centres)])


def random_solids(rng, n, *, radius, box, capsule, box_lo, box_hi):
    """n random spheres/boxes/capsules (uniform sizes in the given ranges [m]) at random poses in the box
    [box_lo, box_hi] [m]: a list of (type, size, position, quaternion) for make_model."""
    geoms = []
    for _ in range(n):
        t = rng.choice([SPHERE, BOX, CAPSULE])
        size = {SPHERE: [rng.uniform(*radius), 0, 0], BOX: list(rng.uniform(*box, 3)),
                CAPSULE: [rng.uniform(*capsule[0]), rng.uniform(*capsule[1]), 0]}[t]
        quat = rng.normal(size=4)
        geoms.append((t, size, rng.uniform(box_lo, box_hi), quat / np.linalg.norm(quat)))
    return geoms


def pair_set(pairs):
    return {tuple(p) for p in pairs.tolist()}


@pytest.mark.parametrize("seed, clustered, margin", [(0, False, 0.0), (1, True, 0.0), (2, False, 0.05)])
def test_sweep_and_prune_finds_exactly_the_brute_force_pairs_1000_spheres(seed, clustered, margin):
    model, q = random_sphere_scene(np.random.default_rng(seed), clustered=clustered)
    fast = candidate_pairs(model, q, margin=margin)
    slow = candidate_pairs(model, q, margin=margin, brute_force=True)
    assert len(slow) > 50  # the scenes are meant to have overlaps
    assert pair_set(fast) == pair_set(slow)
    assert len(fast) == len(slow)  # no duplicates


def test_broad_phase_mixed_geometries_match_brute_force():
    rng = np.random.default_rng(3)
    geoms = [(HALFSPACE, [0, 0, 0], [0, 0, 0], axis_angle_quat([1, 0, 0], 0.1))]
    geoms += random_solids(rng, 300, radius=(0.1, 0.5), box=(0.05, 0.5), capsule=((0.05, 0.3), (0.1, 0.8)),
                           box_lo=[-5, -5, -0.5], box_hi=[5, 5, 3])
    model, q = make_model(geoms)
    for margin in (0.0, 0.1):
        fast = candidate_pairs(model, q, margin=margin)
        slow = candidate_pairs(model, q, margin=margin, brute_force=True)
        assert pair_set(fast) == pair_set(slow)
        assert any(a == 0 for a, _ in fast)  # some halfspace pairs


def test_collide_equals_all_pairs_narrow_phase_on_a_mixed_scene():
    """collide() must report what testing every pair with collide_geoms reports (broad phase loses nothing)."""
    rng = np.random.default_rng(4)
    geoms = [(HALFSPACE, [0, 0, 0], [0, 0, 0], I)]
    geoms += random_solids(rng, 60, radius=(0.2, 0.5), box=(0.1, 0.5), capsule=((0.1, 0.3), (0.1, 0.6)),
                           box_lo=[-2, -2, -0.2], box_hi=[2, 2, 1.5])
    model, q = make_model(geoms)
    margin = 0.05
    c = collide(model, q, margin=margin)
    expected = []
    for a in range(len(geoms)):
        for b in range(a + 1, len(geoms)):
            ga, gb = (b, a) if geoms[b][0] == HALFSPACE else (a, b)
            phi, _, normal = pair(*geoms[ga], *geoms[gb], margin=margin)
            expected += [(ga, gb, round(p, 12)) for p in phi]
    got = [(int(a), int(b), round(float(p), 12)) for a, b, p in zip(c.geom_a, c.geom_b, c.phi)]
    assert len(got) > 30
    assert sorted(got) == sorted(expected)
    assert np.all(c.phi <= margin)
    np.testing.assert_allclose(np.linalg.norm(c.normal, axis=1), 1.0, atol=1e-12)
    keys = c.geom_a * model.ngeom + c.geom_b  # ordered by pair
    assert np.all(np.diff(keys) >= 0)


def test_sphere_grid_on_ground_contact_count():
    """10×10×10 spheres (r = 0.1) at spacing 0.199 on a plane: every axis-neighbour pair overlaps by 1 mm.

    Expected contacts: 3·9·100 = 2700 neighbour pairs + 100 bottom spheres on the ground; all with
    phi = −1e-3 (tolerance 1e-12 m, round-off). Also exercises buffer growth (default capacity 64).
    """
    r, s = 0.1, 0.199
    idx = np.stack(np.meshgrid(*[np.arange(10)] * 3, indexing="ij"), -1).reshape(-1, 3)
    centres = idx * s + [0, 0, r - 1e-3]
    model, q = make_model([(HALFSPACE, [0, 0, 0], [0, 0, 0], I)] + [(SPHERE, [r, 0, 0], c, I) for c in centres])
    c = collide(model, q, workspace=CollisionWorkspace(1, 1))
    assert c.count == 2800
    np.testing.assert_allclose(c.phi, -1e-3, atol=1e-12)
    ground = c.geom_a == 0
    assert ground.sum() == 100
    np.testing.assert_allclose(c.normal[ground], [[0, 0, 1]] * 100, atol=1e-12)
    # between spheres the lower index is A and the normal points towards B's centre
    d = centres[c.geom_b[~ground] - 1] - centres[c.geom_a[~ground] - 1]
    np.testing.assert_allclose(c.normal[~ground], d / np.linalg.norm(d, axis=1, keepdims=True), atol=1e-12)


def test_halfspace_is_always_a_and_bodies_are_reported():
    model, q = make_model([(SPHERE, [0.5, 0, 0], [0, 0, 0.4], I), (HALFSPACE, [0, 0, 0], [0, 0, 0], I)])
    c = collide(model, q)
    assert c.count == 1
    assert (c.geom_a[0], c.geom_b[0]) == (1, 0)
    assert (c.body_a[0], c.body_b[0]) == (1, 0)
    np.testing.assert_allclose(c.normal, [[0, 0, 1]], atol=1e-12)
    assert c.phi[0] == pytest.approx(-0.1, abs=1e-12)


def test_same_body_and_fixed_pairs_are_excluded():
    geoms = [
        (HALFSPACE, [0, 0, 0], [0, 0, 0], I),  # body 0 fixed
        (BOX, [0.5, 0.5, 0.5], [0, 0, 0.2], I),  # body 1 fixed, overlapping the ground
        (SPHERE, [0.3, 0, 0], [2, 0, 0.2], I),  # body 2 moving: touches the ground
        (SPHERE, [0.3, 0, 0], [2, 0, 0.2], I),  # body 2 as well: overlaps geom 2 fully
    ]
    model, q = make_model(geoms, body_of=[0, 1, 2, 2], body_fixed=[True, True, False],
                          geom_pos=np.zeros((4, 3)))
    c = collide(model, q)
    assert sorted(zip(c.geom_a.tolist(), c.geom_b.tolist())) == [(0, 2), (0, 3)]


def test_geom_world_poses_compose_body_and_geom_frames():
    qb = axis_angle_quat([1, 2, 3], 0.8)
    qg = axis_angle_quat([0, 1, 0], 0.3)
    p_BG = np.array([0.1, -0.2, 0.3])
    model, q = make_model([(BOX, [0.1, 0.2, 0.3], [1, 2, 3], qb)], geom_pos=[p_BG], geom_quat=[qg])
    pos, rot = geom_world_poses(model, q)
    R_WB = quat_to_rot(*qb)
    np.testing.assert_allclose(pos[0], [1, 2, 3] + R_WB @ p_BG, atol=1e-14)
    np.testing.assert_allclose(rot[0], R_WB @ quat_to_rot(*qg), atol=1e-14)
    np.testing.assert_allclose(rot[0], quat_to_rot(*quat_mul(qb, qg)), atol=1e-14)


def test_offset_geometry_collides_at_its_world_pose():
    # body at z = 1 with a sphere hanging 0.9 below it in the body frame, body rotated by pi about x
    qb = axis_angle_quat([1, 0, 0], np.pi)
    model, q = make_model([(HALFSPACE, [0, 0, 0], [0, 0, 0], I), (SPHERE, [0.2, 0, 0], [0, 0, 1.0], qb)],
                          geom_pos=[[0, 0, 0], [0, 0, 0.9]])
    c = collide(model, q)  # R_WB p_BG = (0, 0, -0.9): sphere centre at z = 0.1
    assert c.phi == pytest.approx([-0.1], abs=1e-12)


def test_reused_workspace_gives_fresh_arrays():
    ws = CollisionWorkspace(1, 1)
    model, q = random_sphere_scene(np.random.default_rng(5), n=200, extent=2.0)
    c1 = collide(model, q, workspace=ws)
    c2 = collide(model, q)
    q2 = q.copy()
    q2[:, 2] += 100.0 * np.arange(len(q2))  # spread out: no contacts
    assert collide(model, q2, workspace=ws).count == 0
    assert c1.count == c2.count > 0
    np.testing.assert_array_equal(c1.phi, c2.phi)  # c1 was not overwritten by the later call


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda q: q.__setitem__((1, 0), np.nan), "non-finite"),
        (lambda q: q.__setitem__((1, slice(3, 7)), 0.0), "zero quaternion"),
    ],
)
def test_bad_poses_raise(mutate, message):
    model, q = make_model([(SPHERE, [0.5, 0, 0], [0, 0, 0], I), (SPHERE, [0.5, 0, 0], [0, 0, 2], I)])
    mutate(q)
    with pytest.raises(ValueError, match=message):
        collide(model, q)


def test_bad_arguments_raise():
    model, q = make_model([(SPHERE, [0.5, 0, 0], [0, 0, 0], I), (SPHERE, [0.5, 0, 0], [0, 0, 2], I)])
    with pytest.raises(ValueError, match="shape"):
        collide(model, q[:1])
    with pytest.raises(ValueError, match="margin"):
        collide(model, q, margin=-1.0)
    bad = make_model([(7, [0.5, 0, 0], [0, 0, 0], I), (SPHERE, [0.5, 0, 0], [0, 0, 0.5], I)])
    with pytest.raises(ValueError, match="unknown geometry type"):
        collide(*bad)


def test_empty_and_single_body_scenes():
    model, q = make_model([(SPHERE, [0.5, 0, 0], [0, 0, 0], I)])
    assert collide(model, q).count == 0
