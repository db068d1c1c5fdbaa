"""Pose helpers and shape meshes of the viewer, against independent references (scipy, closed forms)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from convexsim.viz._math import pose_matrix, quat_from_y_to, quat_to_matrix, wxyz_to_xyzw
from convexsim.viz.draw import capsule_mesh, cylinder_mesh, nice_step


def test_quat_to_matrix_matches_scipy():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(50, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    ref = Rotation.from_quat(wxyz_to_xyzw(q)).as_matrix()
    # Both are exact formulas in float64: agreement to a few ulps of O(1) entries.
    np.testing.assert_allclose(quat_to_matrix(q), ref, atol=1e-14)


def test_pose_matrix_is_float64_and_applies_scale_before_rotation():
    T = pose_matrix([1, 2, 3], [np.cos(0.5), 0, 0, np.sin(0.5)], scale=[1, 4, 1])
    assert T.dtype == np.float64            # meshcat.transformations trap under NumPy 2 (docs/viewer.md "meshcat 0.3.2 traps")
    y_tip = T @ np.array([0, 1, 0, 1.0])    # unit +y, scaled to 4, rotated by 1 rad about z
    np.testing.assert_allclose(y_tip[:3], [1 - 4 * np.sin(1.0), 2 + 4 * np.cos(1.0), 3], atol=1e-14)


def test_quat_from_y_to_rotates_y_onto_the_direction():
    rng = np.random.default_rng(1)
    d = np.vstack([rng.normal(size=(40, 3)), [[0, 1, 0], [0, -1, 0], [0, -1, 1e-12], [3, 0, 0]]])
    q = quat_from_y_to(d)
    got = Rotation.from_quat(wxyz_to_xyzw(q)).apply([0.0, 1.0, 0.0])
    # Unit quaternions built in float64: the image of ŷ matches d/|d| to rounding (1e-12).
    np.testing.assert_allclose(got, d / np.linalg.norm(d, axis=1, keepdims=True), atol=1e-12)


def test_capsule_mesh_is_a_closed_outward_capsule():
    r, h, n = 0.05, 0.1, 24
    v, f = capsule_mesh(r, h, n_around=n, n_cap=6)
    # Every vertex lies on the capsule surface: distance r from the segment z ∈ [−h, h].
    closest = np.column_stack([np.zeros(len(v)), np.zeros(len(v)), np.clip(v[:, 2], -h, h)])
    np.testing.assert_allclose(np.linalg.norm(v - closest, axis=1), r, rtol=1e-12)
    # Closed surface of genus 0: V − E + F = 2.
    edges = {tuple(sorted(e)) for tri in f for e in ((tri[0], tri[1]), (tri[1], tri[2]), (tri[2], tri[0]))}
    assert len(v) - len(edges) + len(f) == 2
    # Outward winding: the signed volume is positive and close to π r² (2h) + 4/3 π r³. The inscribed
    # polyhedron is smaller: the 24-gon keeps n sin(2π/n)/(2π) = 98.9 % of the disc area, and 6
    # latitude bands lose about another 2 % on the caps, so allow 4 % below and nothing above.
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    vol = np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6.0
    exact = np.pi * r**2 * 2 * h + 4.0 / 3.0 * np.pi * r**3
    assert 0.96 * exact < vol < exact


def test_cylinder_mesh_is_a_closed_outward_prism():
    """Rim vertices at radius r on z = ±h; closed (V − E + F = 2); volume of the inscribed n-gon prism,
    n·sin(2π/n)/2·r²·2h, to round-off (outward winding makes it positive)."""
    r, h, n = 0.05, 0.1, 32
    v, f = cylinder_mesh(r, h, n_around=n)
    np.testing.assert_allclose(np.hypot(v[:2 * n, 0], v[:2 * n, 1]), r, rtol=1e-12)
    np.testing.assert_allclose(np.abs(v[:, 2]), h)
    edges = {tuple(sorted(e)) for tri in f for e in ((tri[0], tri[1]), (tri[1], tri[2]), (tri[2], tri[0]))}
    assert len(v) - len(edges) + len(f) == 2
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    vol = np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6.0
    assert vol == pytest.approx(n * np.sin(2 * np.pi / n) / 2 * r * r * 2 * h, rel=1e-12)


def test_mesh_geometry_is_drawn_as_its_hull():
    from convexsim.scene import compile_scene, scene_from_yaml
    from convexsim.viz.draw import geom_objects

    model, _ = compile_scene(scene_from_yaml(
        "bodies: [{name: b, mass: 1, geometries: [{shape: mesh, vertices: [[0.1,0.1,0.1],[-0.1,-0.1,0.1],"
        "[-0.1,0.1,-0.1],[0.1,-0.1,-0.1],[0,0,0]]}, {shape: cylinder, radius: 0.1, length: 0.2}]}]"))
    hull = geom_objects(model, 0, 1.0).geometry
    assert hull.vertices.shape == (4, 3) and hull.faces.shape == (4, 3)      # the hull drops the inner point
    np.testing.assert_allclose(np.sort(np.abs(hull.vertices), axis=0), 0.1, rtol=1e-6)
    assert geom_objects(model, 1, 1.0).geometry.vertices.shape == (2 * 32 + 2, 3)


def test_grid_spacing_is_1_2_5():
    for span, step in [(1.0, 0.1), (2.0, 0.2), (4.0, 0.5), (7.0, 1.0), (0.3, 0.05), (150.0, 20.0)]:
        assert np.isclose(nice_step(span), step)


def test_pose_matrices_match_pose_matrix_one_by_one():
    from convexsim.viz._math import pose_matrices, pose_matrix

    rng = np.random.default_rng(3)
    q = rng.normal(size=(20, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    p, s = rng.normal(size=(20, 3)), rng.uniform(0.1, 2.0, size=(20, 3))
    Ts = pose_matrices(p, q, s)
    for k in range(20):
        np.testing.assert_allclose(Ts[k], pose_matrix(p[k], q[k], s[k]), atol=1e-14)
