"""Cylinder and convex-mesh shapes: scene fields, validation errors, Model arrays and mass properties.

Mass properties of hulls (divergence theorem) are checked against closed forms that share no code with
them: a box given as 8 vertices (a·b·c and (b²+c²)/12 ...), a right tetrahedron (V = 1/6, centroid 1/4,
the moments of the simplex), and the cylinder formula against the hull of a fine regular prism (the
prism's inertia converges to the cylinder's as O(1/N²): tolerance 1e-3 relative for N = 256).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from convexsim.geometry.hull import (
    MeshError,
    convex_hull,
    cylinder_mass_properties,
    mesh_mass_properties,
)
from convexsim.model import GeomType
from convexsim.scene import SceneError, compile_scene, load_scene, scene_from_yaml
from convexsim.spatial import quat_to_matrix

BOX_CORNERS = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)


def _random_rotation(rng) -> np.ndarray:
    q = rng.normal(size=4)
    return quat_to_matrix(q / np.linalg.norm(q))


def test_box_as_eight_vertices_has_the_box_mass_properties():
    """A rotated, shifted box hull: V = abc, centroid = shift, inertia R·diag((b²+c²)/12, ...)·Rᵀ (1e-12 rel)."""
    rng = np.random.default_rng(3)
    half = np.array([0.3, 0.1, 0.45])
    R = _random_rotation(rng)
    shift = np.array([0.2, -0.5, 1.0])
    verts, faces = convex_hull(BOX_CORNERS * half @ R.T + shift)
    assert verts.shape == (8, 3) and faces.shape == (12, 3)
    volume, centroid, inertia = mesh_mass_properties(verts, faces)
    a, b, c = 2 * half
    assert volume == pytest.approx(a * b * c, rel=1e-12)
    np.testing.assert_allclose(centroid, shift, atol=1e-12)
    expected = R @ np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) @ R.T / 12.0
    np.testing.assert_allclose(inertia, expected, atol=1e-12 * np.abs(expected).max())


def test_right_tetrahedron_moments():
    """Tetrahedron (0, e1, e2, e3): V = 1/6, centroid (1/4)(1, 1, 1); ∫x² dV = 1/60, ∫xy dV = 1/120."""
    verts, faces = convex_hull(np.vstack([np.zeros(3), np.eye(3)]))
    volume, centroid, inertia = mesh_mass_properties(verts, faces)
    assert volume == pytest.approx(1 / 6, rel=1e-14)
    np.testing.assert_allclose(centroid, 0.25, atol=1e-15)
    second = np.full((3, 3), 1 / 120) + np.eye(3) / 120    # about the origin
    cc = second - volume * np.outer(centroid, centroid)
    np.testing.assert_allclose(inertia, (np.trace(cc) * np.eye(3) - cc) / volume, atol=1e-14)


def test_cylinder_formula_matches_a_fine_prism_hull():
    r, length, n = 0.2, 0.5, 256
    ang = 2 * np.pi * np.arange(n) / n
    ring = np.stack([r * np.cos(ang), r * np.sin(ang)], 1)
    pts = np.vstack([np.column_stack([ring, np.full(n, z)]) for z in (-length / 2, length / 2)])
    volume, centroid, inertia = mesh_mass_properties(*convex_hull(pts))
    v_cyl, i_cyl = cylinder_mass_properties(r, length)
    assert volume == pytest.approx(v_cyl, rel=1e-3)          # prism/cylinder area ratio 1 − O(1/N²)
    np.testing.assert_allclose(centroid, 0.0, atol=1e-12)
    np.testing.assert_allclose(np.diag(inertia), np.diag(i_cyl), rtol=1e-3)


def test_hull_faces_point_outward_and_drop_interior_points():
    rng = np.random.default_rng(0)
    pts = np.vstack([BOX_CORNERS, rng.uniform(-0.9, 0.9, (20, 3))])   # interior points are not vertices
    verts, faces = convex_hull(pts)
    assert verts.shape[0] == 8
    a, b, c = verts[faces[:, 0]], verts[faces[:, 1]], verts[faces[:, 2]]
    outward = np.einsum("ij,ij->i", np.cross(b - a, c - a), (a + b + c) / 3.0)
    assert np.all(outward > 0)


@pytest.mark.parametrize("points, words", [
    (BOX_CORNERS[:3], "at least 4 points"),
    (np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0], [0.5, 0.2, 0]], float), "one plane"),
])
def test_degenerate_point_sets_are_refused(points, words):
    with pytest.raises(MeshError, match=words):
        convex_hull(points)


SCENE = """
bodies:
  - {name: ground, fixed: true, geometries: [{shape: halfspace}]}
  - name: thing
    mass: 2.0
    position: [0, 0, 1]
    geometries: [GEOM]
"""


def _scene(geom: str):
    return scene_from_yaml(SCENE.replace("GEOM", geom))


def test_cylinder_compiles_with_radius_and_half_length_and_its_inertia():
    model, _ = compile_scene(_scene("{shape: cylinder, radius: 0.1, length: 0.4}"))
    assert model.geom_type[1] == GeomType.CYLINDER
    np.testing.assert_allclose(model.geom_size[1], [0.1, 0.2, 0.0])
    np.testing.assert_allclose(np.diag(model.body_inertia[1]), 2.0 * np.array([(0.03 + 0.16) / 12] * 2 + [0.005]))
    assert model.geom_rbound[1] == pytest.approx(np.hypot(0.1, 0.2))


def test_mesh_compiles_into_flat_arrays_with_scale():
    verts = "[[-1,-1,-1],[1,-1,-1],[-1,1,-1],[1,1,-1],[-1,-1,1],[1,-1,1],[-1,1,1],[1,1,1]]"
    model, _ = compile_scene(_scene(f"{{shape: mesh, vertices: {verts}, scale: [0.1, 0.2, 0.3]}}"))
    assert model.geom_type[1] == GeomType.MESH and model.geom_mesh.tolist() == [-1, 0]
    v, f = model.mesh_of(1)
    assert v.shape == (8, 3) and f.shape == (12, 3) and f.max() < 8
    np.testing.assert_allclose(np.abs(v).max(0), [0.1, 0.2, 0.3])
    np.testing.assert_allclose(model.geom_size[1], [0.1, 0.2, 0.3])
    a, b, c = 0.2, 0.4, 0.6
    np.testing.assert_allclose(np.diag(model.body_inertia[1]), 2.0 * np.array([b*b + c*c, a*a + c*c, a*a + b*b]) / 12)


@pytest.mark.parametrize("geom, field, words", [
    ("{shape: cylinder, radius: 0.1}", "length", "required"),
    ("{shape: cylinder, radius: 0.1, length: 0}", "length", "full height"),
    ("{shape: mesh}", "vertices", "neither"),
    ("{shape: mesh, vertices: [[0,0,0],[1,0,0],[0,1,0]], file: a.obj}", "vertices", "both"),
    ("{shape: mesh, vertices: [[0,0,0],[1,0,0],[0,1,0]]}", "vertices", "at least 4 points"),
    ("{shape: mesh, vertices: [[0,0,0],[1,0,0],[0,1,0],[1,1,0]]}", "vertices", "one plane"),
    ("{shape: mesh, file: /nonexistent/part.stl}", "file", "not found"),
    ("{shape: mesh, file: part.step}", "file", "unknown format"),
    ("{shape: box, size: [1, 1, 1], scale: [1, 1, 1]}", "scale", "not used"),
])
def test_bad_shape_fields_name_the_field(geom, field, words):
    with pytest.raises(SceneError) as err:
        _scene(geom)
    text = str(err.value)
    assert f"geometries[0].{field}" in text and words in text, text


def test_off_centre_mesh_asks_for_the_shift():
    """A hull whose centroid is off the body origin is refused, with the shift in the message."""
    with pytest.raises(SceneError, match=r"shift the geometry positions by \(-0\.5, 0, 0\)"):
        _scene("{shape: mesh, vertices: [[0,0,0],[1,0,0],[0,1,0],[1,1,0],[0,0,1],[1,0,1],[0,1,1],[1,1,1]], "
               "position: [0, -0.5, -0.5]}")


CUBE_OBJ = "".join(f"v {x} {y} {z}\n" for x, y, z in BOX_CORNERS * 0.5) + """
f 1 3 4 2
f 5 6 8 7
f 1 2 6 5
f 3 7 8 4
f 1 5 7 3
f 2 4 8 6
"""


def test_mesh_file_is_read_relative_to_the_scene_folder(tmp_path: Path):
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "cube.obj").write_text(CUBE_OBJ)
    scene = tmp_path / "s.yaml"
    scene.write_text(SCENE.replace("GEOM", "{shape: mesh, file: parts/cube.obj, scale: [0.2, 0.2, 0.2]}"))
    model, _ = compile_scene(load_scene(scene))
    v, _ = model.mesh_of(1)
    np.testing.assert_allclose(np.abs(v), 0.1)
    np.testing.assert_allclose(np.diag(model.body_inertia[1]), 2.0 * (2 * 0.2**2) / 12)


def test_non_convex_file_warns_once_naming_the_file(tmp_path: Path):
    """Three unit cubes in an L (volume 3, hull 3.5): the warning names the file and says the hull is used."""
    import trimesh

    blocks = [trimesh.creation.box(extents=(1, 1, 1), transform=trimesh.transformations.translation_matrix(t))
              for t in ((0, 0, 0), (1, 0, 0), (0, 1, 0))]
    path = tmp_path / "ell.stl"
    trimesh.util.concatenate(blocks).export(path)
    from convexsim.geometry.hull import read_mesh_points

    with pytest.warns(UserWarning, match="ell.stl.*convex hull"):
        read_mesh_points(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_mesh_points(path)     # once per file

