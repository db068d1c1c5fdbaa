"""Collision filter (geometries' collision_group / collision_mask; MJCF contype / conaffinity): the broad phase
reports exactly the pairs its bit rule admits, and the importer carries the masks over."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from convexsim.geometry.broadphase import HALFSPACE, SPHERE, brute_force_pairs, sweep_and_prune_pairs


def _pairs(kernel, gtype, size, body, fixed, pos, geom_filter, tree_filter=None):
    rot = np.tile(np.eye(3), (gtype.shape[0], 1, 1))
    out = np.empty((256, 2), np.int64)
    n = kernel(gtype, size, body, fixed, pos, rot, np.zeros(gtype.shape[0]), out, geom_filter, tree_filter)
    return {tuple(p) for p in out[:n]}


def _crowd(rng, n: int, spread: float):
    """A floor (geometry 0) and n spheres of radius 0.3 m at random in a cube of half-width ``spread`` [m]:
    (geom types, sizes, positions)."""
    gtype = np.array([HALFSPACE] + [SPHERE] * n, np.int64)
    size = np.zeros((n + 1, 3))
    size[1:, 0] = 0.3
    pos = np.zeros((n + 1, 3))
    pos[1:] = rng.uniform(-spread, spread, (n, 3)) + [0.0, 0.0, 0.2]
    return gtype, size, pos


def test_broad_phase_reports_exactly_the_admitted_pairs():
    """Twelve crowded spheres with random (group, mask) bits and a floor: with the filter both broad phases
    report the unfiltered pairs for which (group_i & mask_j) | (group_j & mask_i) != 0, and no others."""
    rng = np.random.default_rng(7)
    n = 12
    gtype, size, pos = _crowd(rng, n, 0.3)
    body = np.arange(n + 1, dtype=np.int64)
    fixed = np.zeros(n + 1, np.bool_)
    fixed[0] = True
    filt = rng.integers(0, 4, (n + 1, 2)).astype(np.int64)
    for kernel in (sweep_and_prune_pairs, brute_force_pairs):
        everything = _pairs(kernel, gtype, size, body, fixed, pos, None)
        assert len(everything) > 2 * n                          # crowded: most spheres overlap, many touch the floor
        admitted = {(i, j) for i, j in everything if (filt[i, 0] & filt[j, 1]) | (filt[j, 0] & filt[i, 1])}
        assert 0 < len(admitted) < len(everything)
        assert _pairs(kernel, gtype, size, body, fixed, pos, filt) == admitted
        assert _pairs(kernel, gtype, size, body, fixed, pos, np.ones((n + 1, 2), np.int64)) == everything


def test_broad_phase_applies_the_tree_pair_rule():
    """Ten crowded spheres on ten bodies: bodies 1-4 links of tree 0 hanging from fixed body 9, bodies 5-6 links of
    tree 1 hanging from the world (body 6 without dofs on its path: a link welded to the world), 7-8 free, 9 a
    fixed base, and a floor (body 0). Both broad phases report exactly the unfiltered pairs the rule admits (no
    pair within one tree, none between tree 0's links and body 9, none between two bodies without dofs), and
    combine it with the bit filter."""
    rng = np.random.default_rng(3)
    n = 10
    gtype, size, pos = _crowd(rng, n, 0.25)
    body = np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9], np.int64)      # two geometries on the base body 9
    nbody = 10
    fixed = np.zeros(nbody, np.bool_)
    fixed[[0, 9]] = True
    body_tree = np.array([-1, 0, 0, 0, 0, 1, 1, -1, -1, -1], np.int64)
    moves = np.array([False, True, True, True, True, True, False, True, True, False])
    tree_base = np.array([9, -1], np.int64)
    trees = (body_tree, moves, tree_base)

    def admitted(i, j):
        bi, bj = body[i], body[j]
        ti, tj = body_tree[bi], body_tree[bj]
        same_tree = ti >= 0 and ti == tj
        on_base = (tj >= 0 and tree_base[tj] == bi) or (ti >= 0 and tree_base[ti] == bj)
        return not (same_tree or on_base or not (moves[bi] or moves[bj]))

    filt = rng.integers(0, 4, (n + 1, 2)).astype(np.int64)
    for kernel in (sweep_and_prune_pairs, brute_force_pairs):
        everything = _pairs(kernel, gtype, size, body, fixed, pos, None)
        kept = {p for p in everything if admitted(*p)}
        assert 0 < len(kept) < len(everything) - 10             # the rule removes many candidate pairs
        assert _pairs(kernel, gtype, size, body, fixed, pos, None, trees) == kept
        both = {(i, j) for i, j in kept if (filt[i, 0] & filt[j, 1]) | (filt[j, 0] & filt[i, 1])}
        assert _pairs(kernel, gtype, size, body, fixed, pos, filt, trees) == both


def test_a_lone_tree_on_its_base_has_no_pair_but_its_floor_and_a_visitor_brings_them_back():
    """The sweep's early-out (``broadphase._one_tree_only``): crowded spheres on the links of one tree and on its
    fixed base give no pair but the floor's, as the brute force says; a free body or a second fixed body among
    them brings back exactly the brute force's pairs."""
    rng = np.random.default_rng(11)
    n = 8
    gtype, size, pos = _crowd(rng, n, 0.25)
    body = np.array([0, 1, 1, 2, 3, 4, 5, 6, 7], np.int64)        # body 1: the tree's fixed base (two geometries)
    nbody = 8
    fixed = np.zeros(nbody, np.bool_)
    fixed[[0, 1]] = True
    body_tree = np.array([-1, -1, 0, 0, 0, 0, 0, 0], np.int64)
    moves = np.array([False, False, True, True, True, True, True, True])
    trees = (body_tree, moves, np.array([1], np.int64))
    lone = _pairs(sweep_and_prune_pairs, gtype, size, body, fixed, pos, None, trees)
    assert lone == _pairs(brute_force_pairs, gtype, size, body, fixed, pos, None, trees)
    assert lone and all(i == 0 for i, _ in lone)                   # only floor pairs
    for visitor_moves in (True, False):                            # body 7 leaves the tree: free, or fixed
        bt, mv, fx = body_tree.copy(), moves.copy(), fixed.copy()
        bt[7], mv[7], fx[7] = -1, visitor_moves, not visitor_moves
        t2 = (bt, mv, np.array([1], np.int64))
        swept = _pairs(sweep_and_prune_pairs, gtype, size, body, fx, pos, None, t2)
        assert swept == _pairs(brute_force_pairs, gtype, size, body, fx, pos, None, t2)
        assert any(i != 0 for i, _ in swept)                       # the visitor touches links again


def test_mjcf_contype_conaffinity_become_the_collision_filter(tmp_path):
    pytest.importorskip("mujoco")
    from convexsim.scene import scene_from_dict
    from convexsim.scene.mjcf import mjcf_to_scene
    from convexsim.simulate import prepare

    path = tmp_path / "masks.xml"
    path.write_text("""<mujoco><worldbody><geom type="plane" size="1 1 1"/>
      <body name="a" pos="0 0 1"><freejoint/><geom size="0.1" contype="2" conaffinity="4"/></body>
      <body name="b" pos="1 0 1"><freejoint/><geom size="0.1"/></body></worldbody></mujoco>""")
    scene = mjcf_to_scene(path)
    ga = next(b for b in scene["bodies"] if b["name"] == "a")["geometries"][0]
    gb = next(b for b in scene["bodies"] if b["name"] == "b")["geometries"][0]
    assert (ga["collision_group"], ga["collision_mask"]) == (2, 4)
    assert "collision_group" not in gb
    model, _, _ = prepare(scene_from_dict(scene, str(path)))
    rows = {tuple(r) for r in model.collision_filter}
    assert rows == {(1, 1), (2, 4)}
    for i, j in itertools.combinations(range(3), 2):     # a (2, 4) never meets a (1, 1): neither bit matches
        f = model.collision_filter
        assert bool((f[i, 0] & f[j, 1]) | (f[j, 0] & f[i, 1])) == ((2, 4) not in {tuple(f[i]), tuple(f[j])})


@pytest.mark.parametrize("solver", ["sap", "lcp"])
def test_filtered_geometries_pass_through_each_other(solver):
    """Two balls dropped on a floor: the one whose mask admits the floor's group rests on it (z = r), the one
    whose group and mask share no bit with the floor's falls through it, in free fall z = z0 − g t²/2 (to the
    O(dt) of the discrete scheme); the compiled step applies the filter in its broad phase (and the reference
    step, path="reference", the same)."""
    from convexsim.simulate import simulate

    scene = {"name": "filter", "time_step": 1e-3, "duration": 0.5,
             "bodies": [{"name": "floor", "fixed": True,
                         "geometries": [{"shape": "halfspace", "collision_group": 1, "collision_mask": 1}]},
                        {"name": "kept", "mass": 0.5, "position": [0, 0, 0.1],
                         "geometries": [{"shape": "sphere", "radius": 0.05}]},
                        {"name": "ghost", "mass": 0.5, "position": [1, 0, 0.1],
                         "geometries": [{"shape": "sphere", "radius": 0.05, "collision_group": 2,
                                         "collision_mask": 2}]}]}
    from convexsim.simulate import prepare, run_model

    model, state, _ = prepare(scene, solver=solver)
    for path in ("compiled", "reference"):
        traj, _ = run_model(model, state, duration=0.5, path=path)
        assert traj.metadata["path"].startswith(path if path == "compiled" else "Python"), traj.metadata["path"]
        z_kept, z_ghost = traj.position[-1, 1, 2], traj.position[-1, 2, 2]
        assert abs(z_kept - 0.05) < 1e-3
        assert abs(z_ghost - (0.1 - 9.81 * 0.5 ** 2 / 2)) < 9.81 * 0.5 * 1e-3
