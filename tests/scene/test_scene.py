"""Scene loading, dumping, overrides, grids, mass properties and compilation to Model/State."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate

from convexsim.model import ContactModel, GeomType, Model, SolverSettings, State
from convexsim.scene import (
    SceneError,
    apply_overrides,
    compile_scene,
    dump_scene,
    dump_scene_compact,
    expand_bodies,
    list_scenes,
    load_scene,
    scene_from_dict,
    scene_from_yaml,
    shipped_scene_path,
    validate_scene_file,
    with_overrides,
)
from convexsim.scene.compile import inertia_from_shapes
from convexsim.spatial import quat_to_matrix
from convexsim.scene.schema import GeometrySpec

SHIPPED = [
    "sphere_drop",
    "box_slide",
    "incline_stick",
    "incline_slip",
    "box_stack",
    "capsule_roll",
    "sphere_pile",
    "clutter_1000",
    "mixed_clutter",
    "cylinder_roll",
]

FULL = """\
name: full
time_step: 2.0e-3
duration: 0.75
gravity: [0, 0, -1.62]
contact_model: lagged
solver: {kind: sap, sigma: 1e-4, max_iterations: 50, line_search: backtracking}
materials:
  rubber: {friction: 0.9, stiffness: 5e5}
bodies:
  - {name: ground, fixed: true, geometries: [{shape: halfspace, material: rubber}]}
  - name: ball
    mass: 2.0
    position: [0.1, 0.2, 1.0]
    quaternion: [0.7071067811865476, 0, 0, 0.7071067811865476]
    linear_velocity: [1, 2, 3]
    angular_velocity: [4, 5, 6]
    color: [1, 0, 0]
    geometries: [{shape: sphere, radius: 0.1, color: [0, 1, 0, 0.5]}]
  - name: cap
    mass: 1.0
    inertia: [[0.3, 0.0, 0.0], [0.0, 0.2, 0.0], [0.0, 0.0, 0.15]]
    position: [1, 0, 0.5]
    geometries: [{shape: capsule, radius: 0.05, length: 0.3, position: [0, 0, 0.01]}]
grids:
  - name: cube
    counts: [3, 2, 2]
    spacing: [0.5, 0.4, 0.3]
    origin: [-1, -1, 0.2]
    template: {mass: 0.5, geometries: [{shape: box, size: [0.2, 0.1, 0.05]}]}
"""


# ---------------------------------------------------------------------------------------------
# Loading, dumping and round trips
# ---------------------------------------------------------------------------------------------


def test_full_scene_loads_with_values_as_written():
    spec = scene_from_yaml(FULL)
    assert spec.time_step == 2e-3 and spec.gravity == (0.0, 0.0, -1.62)
    assert spec.solver.sigma == 1e-4 and spec.solver.line_search == "backtracking"
    assert spec.materials["rubber"].stiffness == 5e5  # '5e5' without a dot is a float (YAML 1.2)
    assert list(spec.materials) == ["default", "rubber"]  # 'default' exists implicitly
    assert spec.materials["default"].friction == 0.5 and spec.materials["default"].stiffness == 1e6


@pytest.mark.parametrize("name", SHIPPED + ["<full>"])
def test_dump_then_load_gives_an_equal_spec(name):
    spec = scene_from_yaml(FULL) if name == "<full>" else load_scene(shipped_scene_path(name))
    text = dump_scene(spec)
    again = scene_from_yaml(text)
    assert again == spec
    assert dump_scene(again) == text  # dumping is a fixed point


def test_dump_quotes_names_the_loader_would_read_as_numbers():
    """The loader reads ``1e3`` (no dot) as a float, YAML 1.1's dumper writes the string unquoted: a body named
    ``1e400`` (found by the MJCF fuzzer: an imported scene that did not load) must come back a name."""
    spec = scene_from_yaml('bodies: [{name: "1e400", mass: 1, geometries: [{shape: sphere, radius: 1}]}, '
                           '{name: "-2E-3", fixed: true}, {name: "3e+07", fixed: true}]')
    text = dump_scene(spec)
    assert scene_from_yaml(text) == spec
    assert [b.name for b in scene_from_yaml(text).bodies] == ["1e400", "-2E-3", "3e+07"]


def test_dump_is_fully_resolved():
    d = yaml.safe_load(dump_scene(scene_from_yaml("bodies: [{name: b, mass: 1, geometries: [{shape: sphere, radius: 1}]}]")))
    # Every default is written out, so the file does not depend on the defaults of the reading version.
    assert d["solver"] == {k: getattr(SolverSettings(), k) for k in d["solver"]}
    assert set(d["solver"]) == set(SolverSettings.__dataclass_fields__)
    assert d["materials"]["default"] == {"friction": 0.5, "stiffness": 1e6, "dissipation_time": 0.1, "hunt_crossley_dissipation": 50.0}
    assert d["bodies"][0]["quaternion"] == [1.0, 0.0, 0.0, 0.0] and d["contact_model"] == "sap"


def test_scene_name_defaults_to_file_stem(tmp_path):
    path = tmp_path / "my_scene.yaml"
    path.write_text("duration: 2\n", encoding="utf-8")
    assert load_scene(path).name == "my_scene"
    assert validate_scene_file(path) == []


def test_scene_from_dict_matches_yaml():
    assert scene_from_dict(yaml.safe_load(FULL.replace("5e5", "5.0e5"))) == scene_from_yaml(FULL)


# ---------------------------------------------------------------------------------------------
# Overrides
# ---------------------------------------------------------------------------------------------


def test_overrides_by_name_index_and_brackets():
    raw = yaml.safe_load(FULL.replace("5e5", "5.0e5"))
    out = apply_overrides(
        raw,
        [
            "bodies.ball.mass=3",
            "bodies[2].geometries.0.radius=0.07",
            "bodies.2.position=[0, 0, 2]",
            "solver.kind=lcp",
            "materials.default.stiffness=1e5",
            "grids.cube.counts=[1, 1, 1]",
            "contact_model=similar",
        ],
    )
    assert raw["bodies"][1]["mass"] == 2.0  # the input is not modified
    spec = scene_from_dict(out)
    assert spec.bodies[1].mass == 3.0
    assert spec.bodies[2].geometries[0].radius == 0.07 and spec.bodies[2].position == (0.0, 0.0, 2.0)
    assert spec.solver.kind == "lcp" and spec.contact_model == "similar"
    assert spec.materials["default"].stiffness == 1e5 and spec.materials["default"].friction == 0.5
    assert spec.grids[0].counts == (1, 1, 1)


def test_overrides_as_mapping_and_through_load_scene(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(FULL, encoding="utf-8")
    spec = load_scene(path, overrides={"bodies.ball.linear_velocity": [0, 0, 0], "duration": 3})
    assert spec.bodies[1].linear_velocity == (0.0, 0.0, 0.0) and spec.duration == 3.0
    # A new material can be created by override, then used.
    spec = load_scene(path, overrides=["materials.steel.friction=0.2", "bodies.ball.geometries.0.material=steel"])
    assert spec.materials["steel"].friction == 0.2 and spec.materials["steel"].stiffness == 1e6


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("bodies.bal.mass=1", "no element named 'bal' in bodies (did you mean 'ball'?)"),
        ("bodies.ball.mas=1", "unknown key 'mas' in bodies[1] (did you mean 'mass'?)"),
        ("solver.sigmaa=1", "unknown key 'sigmaa' in solver"),
        ("nonsense=1", "unknown key 'nonsense' in the scene"),
        ("bodies.7.mass=1", "index 7 out of range for bodies (4 elements)"),
        ("bodies.cube_0.mass=1", "grids.<grid>.template"),
        ("bodies.ball.mass.x=1", "holds 2.0, which has no element 'x'"),
        ("bodies.ball.mass", "expected 'dotted.path=value'"),
        ("a..b=1", "not a dotted path"),
    ],
)
def test_bad_override_paths_are_clear_errors(override, needle):
    raw = yaml.safe_load(FULL.replace("5e5", "5.0e5"))
    raw["bodies"].append({"name": "extra", "mass": 1.0, "geometries": [{"shape": "sphere", "radius": 0.1}]})
    with pytest.raises(SceneError) as info:
        apply_overrides(raw, [override])
    assert needle in str(info.value)


def test_override_values_are_validated_like_the_file():
    with pytest.raises(SceneError, match=r"bodies\[1\]\.mass .*greater than 0"):
        scene_from_yaml(FULL, overrides=["bodies.ball.mass=-1"])


# ---------------------------------------------------------------------------------------------
# Grids
# ---------------------------------------------------------------------------------------------


def test_grid_expansion_names_order_and_positions():
    spec = scene_from_yaml(FULL)
    bodies = expand_bodies(spec)
    assert [b.name for b in bodies[:3]] == ["ground", "ball", "cap"]
    grid = bodies[3:]
    assert [b.name for b in grid] == [f"cube_{i}" for i in range(12)]
    # Body i = ix + nx*(iy + ny*iz) sits at origin + (ix*sx, iy*sy, iz*sz) (no jitter here).
    for i, b in enumerate(grid):
        ix, iy, iz = i % 3, (i // 3) % 2, i // 6
        np.testing.assert_allclose(b.position, (-1 + 0.5 * ix, -1 + 0.4 * iy, 0.2 + 0.3 * iz), atol=1e-15)
        assert b.mass == 0.5 and b.geometries[0].size == (0.2, 0.1, 0.05)


def _grid_scene(seed=7, jitter=0.01, random_orientation=True):
    return scene_from_dict(
        {
            "grids": [
                {
                    "name": "g",
                    "counts": [4, 5, 6],
                    "spacing": [1.0, 1.0, 1.0],
                    "jitter": jitter,
                    "seed": seed,
                    "random_orientation": random_orientation,
                    "template": {"mass": 1.0, "position": [0, 0, 10], "geometries": [{"shape": "box", "size": [0.1, 0.2, 0.3]}]},
                }
            ]
        }
    )


def test_grid_jitter_is_bounded_seeded_and_reproducible():
    a = np.array([b.position for b in expand_bodies(_grid_scene())])
    lattice = np.array([(i % 4, (i // 4) % 5, i // 20 + 10.0) for i in range(120)])
    offset = a - lattice
    assert np.all(np.abs(offset) <= 0.01) and np.abs(offset).max() > 0.005  # uniform in [-jitter, jitter]
    np.testing.assert_array_equal(a, np.array([b.position for b in expand_bodies(_grid_scene())]))
    assert not np.array_equal(a, np.array([b.position for b in expand_bodies(_grid_scene(seed=8))]))
    quats = np.array([b.quaternion for b in expand_bodies(_grid_scene())])
    np.testing.assert_allclose(np.linalg.norm(quats, axis=1), 1.0, atol=1e-12)
    assert np.ptp(quats, axis=0).min() > 0.5  # orientations are spread, not one repeated value


def test_grid_of_1000_is_a_short_file():
    spec = load_scene(shipped_scene_path("clutter_1000"))
    assert len(expand_bodies(spec)) == 1001
    assert len(shipped_scene_path("clutter_1000").read_text().splitlines()) < 60
    assert len(dump_scene(spec).splitlines()) < 80  # grids stay compact in the resolved scene


# ---------------------------------------------------------------------------------------------
# Mass properties against closed forms
# ---------------------------------------------------------------------------------------------


def _geom(**kw) -> GeometrySpec:
    return GeometrySpec(**kw)


def test_sphere_inertia_is_two_fifths_m_r_squared():
    m, r = 3.0, 0.2
    np.testing.assert_allclose(inertia_from_shapes(m, [_geom(shape="sphere", radius=r)]), 0.4 * m * r * r * np.eye(3), rtol=1e-14)


def test_box_inertia_closed_form():
    m, (a, b, c) = 2.0, (0.3, 0.2, 0.1)
    expected = m / 12.0 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    np.testing.assert_allclose(inertia_from_shapes(m, [_geom(shape="box", size=(a, b, c))]), expected, rtol=1e-14)


def _solid_of_revolution_inertia(radius_at, z_half: float, density: float) -> tuple[float, float, float]:
    """(mass, I_xx, I_zz) of a solid of revolution about z by slicing into discs (numerical quadrature).

    A disc of radius ρ and thickness dz at height z contributes dm = ρ_m·π·ρ²·dz,
    dI_zz = dm·ρ²/2 and dI_xx = dm·(ρ²/4 + z²).
    """
    def quad(f):
        return integrate.quad(f, -z_half, z_half, epsabs=0, epsrel=1e-13, limit=200, points=[])[0]

    mass = quad(lambda z: density * math.pi * radius_at(z) ** 2)
    izz = quad(lambda z: density * math.pi * radius_at(z) ** 4 / 2.0)
    ixx = quad(lambda z: density * math.pi * radius_at(z) ** 2 * (radius_at(z) ** 2 / 4.0 + z * z))
    return mass, ixx, izz


@pytest.mark.parametrize(("r", "length"), [(0.05, 0.2), (0.1, 0.0), (0.02, 1.0)])
def test_capsule_inertia_matches_slicing_integral(r, length):
    h = length / 2.0

    def radius_at(z):  # cylinder for |z| <= h, hemispherical caps beyond
        dz = max(abs(z) - h, 0.0)
        return math.sqrt(max(r * r - dz * dz, 0.0))

    mass1, ixx1, izz1 = _solid_of_revolution_inertia(radius_at, h + r, 1.0)
    m = 1.7
    got = inertia_from_shapes(m, [_geom(shape="capsule", radius=r, length=length)])
    # Quadrature of a smooth-by-pieces integrand to rel 1e-13; 1e-9 leaves room for the kink at |z| = h.
    np.testing.assert_allclose(np.diag(got), m / mass1 * np.array([ixx1, ixx1, izz1]), rtol=1e-9)
    # And the textbook form: cylinder m_c(L²/12 + r²/4) + hemispheres m_h(2r²/5 + L²/4 + 3Lr/8).
    vc, vh = math.pi * r * r * length, 4.0 / 3.0 * math.pi * r**3
    mc, mh = m * vc / (vc + vh), m * vh / (vc + vh)
    ixx = mc * (length**2 / 12 + r * r / 4) + mh * (0.4 * r * r + length**2 / 4 + 3 * length * r / 8)
    np.testing.assert_allclose(got[0, 0], ixx, rtol=1e-12)


def test_offset_rotated_shapes_use_rotation_and_parallel_axis():
    m, (a, b, c) = 2.0, (0.3, 0.2, 0.1)
    p = np.array([0.1, -0.2, 0.3])
    q = (math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4))  # 90° about z swaps the x and y moments
    got = inertia_from_shapes(m, [_geom(shape="box", size=(a, b, c), position=tuple(p), quaternion=q)])
    centroidal = m / 12.0 * np.diag([a * a + c * c, b * b + c * c, a * a + b * b])
    np.testing.assert_allclose(got, centroidal + m * (p @ p * np.eye(3) - np.outer(p, p)), rtol=1e-12, atol=1e-15)


def test_two_spheres_share_mass_by_volume():
    # A dumbbell of spheres r1 = 0.1 and r2 = 0.2 at ±x: masses split as r³, i.e. 1 : 8.
    m, r1, r2, d = 9.0, 0.1, 0.2, 0.5
    got = inertia_from_shapes(m, [_geom(shape="sphere", radius=r1, position=(-d, 0, 0)), _geom(shape="sphere", radius=r2, position=(d, 0, 0))])
    m1, m2 = 1.0, 8.0
    ixx = 0.4 * (m1 * r1**2 + m2 * r2**2)
    iyy = ixx + (m1 + m2) * d * d
    np.testing.assert_allclose(got, np.diag([ixx, iyy, iyy]), rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# The body frame is at the centre of mass
# ---------------------------------------------------------------------------------------------


def _body_yaml(geometries: str, extra: str = "") -> str:
    return f"bodies: [{{name: hammer, mass: 2, {extra}geometries: [{geometries}]}}]"


def test_centred_composite_body_is_accepted():
    """A dumbbell (two equal spheres at ±0.3 m) and a box-plus-spheres body with volume-weighted
    centroid exactly at the origin compile; the dumbbell's inertia has the parallel-axis term."""
    dumbbell = _body_yaml("{shape: sphere, radius: 0.1, position: [-0.3, 0, 0]}, {shape: sphere, radius: 0.1, position: [0.3, 0, 0]}")
    model, _ = compile_scene(scene_from_yaml(dumbbell))
    m, r, d = 2.0, 0.1, 0.3
    np.testing.assert_allclose(np.diag(model.body_inertia[0]), [0.4 * m * r * r, 0.4 * m * r * r + m * d * d, 0.4 * m * r * r + m * d * d], rtol=1e-12)
    # Unequal volumes balanced by the lever arms: V_box·0.1 = 2·V_sphere·x  →  centroid at 0.
    v_box, v_sphere = 0.2 * 0.1 * 0.1, 4.0 / 3.0 * math.pi * 0.05**3
    x = v_box * 0.1 / (2 * v_sphere)
    mixed = _body_yaml(f"{{shape: box, size: [0.2, 0.1, 0.1], position: [-0.1, 0, 0]}}, {{shape: sphere, radius: 0.05, position: [{x!r}, 0.2, 0]}}, {{shape: sphere, radius: 0.05, position: [{x!r}, -0.2, 0]}}")
    compile_scene(scene_from_yaml(mixed))


def test_off_centre_shapes_are_rejected_with_the_shift_to_apply():
    """One sphere at (0.3, 0, 0): the error names the field path, the centroid and the shift."""
    with pytest.raises(SceneError) as info:
        scene_from_yaml(_body_yaml("{shape: sphere, radius: 0.1, position: [0.3, 0, 0]}"), source="h.yaml")
    (problem,) = info.value.problems
    assert problem.startswith("h.yaml:1: bodies[0].geometries (body 'hammer'): ")
    assert "centroid is at (0.3, 0, 0) m" in problem and "by (-0.3, 0, 0) m" in problem
    assert "give mass and inertia explicitly" in problem
    # Grid templates are checked the same way (a template's geometries are posed in its body frame).
    grid = "grids: [{name: g, counts: [2, 1, 1], spacing: [1, 1, 1], template: {mass: 1, geometries: [{shape: box, size: [0.1, 0.1, 0.1], position: [0, 0, 0.05]}]}}]"
    with pytest.raises(SceneError, match=r"grids\[0\]\.template\.geometries \(grid 'g'\): the shapes' centroid is at \(0, 0, 0\.05\)"):
        scene_from_yaml(grid)


def test_centroid_tolerance_is_relative_to_body_size():
    """An offset of 1e-12 m on a 0.4 m body (1e-9·size = 4e-10 m) is round-off and accepted; 1e-6 m is not."""
    ok = _body_yaml("{shape: sphere, radius: 0.1, position: [1.0e-12, 0, 0]}")
    compile_scene(scene_from_yaml(ok))
    with pytest.raises(SceneError, match="centroid"):
        scene_from_yaml(_body_yaml("{shape: sphere, radius: 0.1, position: [1.0e-6, 0, 0]}"))


def test_explicit_inertia_asserts_the_origin_is_the_centre_of_mass():
    """With mass and inertia given, the shapes are only collision geometry and may sit anywhere
    (docs/scene-format.md: the user then asserts the body origin is the centre of mass); fixed bodies
    are not checked either (they do not move)."""
    text = _body_yaml("{shape: sphere, radius: 0.1, position: [0.3, 0, 0]}", extra="inertia: [0.1, 0.1, 0.1], ")
    model, _ = compile_scene(scene_from_yaml(text))
    np.testing.assert_array_equal(model.body_inertia[0], np.diag([0.1, 0.1, 0.1]))
    fixed = "bodies: [{name: wall, fixed: true, geometries: [{shape: box, size: [1, 1, 1], position: [2, 0, 0]}]}]"
    compile_scene(scene_from_yaml(fixed))


# ---------------------------------------------------------------------------------------------
# Compile
# ---------------------------------------------------------------------------------------------


def test_compile_full_scene_arrays():
    model, state = compile_scene(scene_from_yaml(FULL))
    assert isinstance(model, Model) and isinstance(state, State)
    assert model.nbody == 15 and model.ngeom == 15 and model.nv == 6 * 14
    assert model.contact_model == ContactModel.LAGGED and model.time_step == 2e-3 and model.duration == 0.75
    assert model.solver == SolverSettings(sigma=1e-4, max_iterations=50, line_search="backtracking")
    np.testing.assert_array_equal(model.gravity, [0, 0, -1.62])
    np.testing.assert_array_equal(model.body_fixed[:3], [True, False, False])
    np.testing.assert_array_equal(model.body_dof[:4], [-1, 0, 6, 12])
    # Geometry sizes: box half extents, capsule (r, length/2, 0).
    assert list(model.geom_type[:4]) == [GeomType.HALFSPACE, GeomType.SPHERE, GeomType.CAPSULE, GeomType.BOX]
    np.testing.assert_array_equal(model.geom_size[1], [0.1, 0, 0])
    np.testing.assert_array_equal(model.geom_size[2], [0.05, 0.15, 0])
    np.testing.assert_array_equal(model.geom_size[3], [0.1, 0.05, 0.025])
    np.testing.assert_allclose(model.geom_rbound[1:4], [0.1, 0.2, math.sqrt(0.1**2 + 0.05**2 + 0.025**2)])
    assert math.isinf(model.geom_rbound[0])
    np.testing.assert_array_equal(model.geom_pos[2], [0, 0, 0.01])
    # Inertia: given 3x3 as is; sphere from its shape.
    np.testing.assert_array_equal(model.body_inertia[2], np.diag([0.3, 0.2, 0.15]))
    np.testing.assert_allclose(model.body_inertia[1], 0.4 * 2.0 * 0.01 * np.eye(3))
    assert model.body_mass[0] == 0.0 and model.body_mass[1] == 2.0
    # State: q = (p, quat), v = (ω, v) angular first.
    np.testing.assert_allclose(state.q[1], [0.1, 0.2, 1.0, 0.7071067811865476, 0, 0, 0.7071067811865476])
    np.testing.assert_array_equal(state.v[1], [4, 5, 6, 1, 2, 3])
    assert state.t == 0.0 and state.step == 0 and not state.v[0].any()
    # Materials: index by name; colors: geometry overrides body, body overrides default.
    assert model.material_names == ("default", "rubber") and model.geom_material[0] == 1
    np.testing.assert_array_equal(model.material_stiffness, [1e6, 5e5])
    np.testing.assert_array_equal(model.geom_color[1], [0, 1, 0, 0.5])
    assert model.body_names[3:5] == ("cube_0", "cube_1")
    assert scene_from_yaml(model.scene_yaml) == scene_from_yaml(FULL)


def test_default_colors_are_distinct_per_moving_body():
    model, _ = compile_scene(load_scene(shipped_scene_path("box_stack")))
    colors = model.geom_color[~model.body_fixed[model.geom_body]]
    assert len({tuple(np.round(c, 3)) for c in colors}) == len(colors) == 5
    assert np.all((model.geom_color >= 0) & (model.geom_color <= 1))


def test_compiled_quaternions_are_unit():
    spec = scene_from_yaml("bodies: [{name: b, mass: 1, quaternion: [1, 0.0004, 0, 0], geometries: [{shape: sphere, radius: 1, quaternion: [0, 0, 0, 1.0009]}]}]")
    model, state = compile_scene(spec)
    assert abs(np.linalg.norm(state.q[0, 3:]) - 1.0) < 1e-15 and abs(np.linalg.norm(model.geom_quat[0]) - 1.0) < 1e-15


# ---------------------------------------------------------------------------------------------
# Shipped scenes
# ---------------------------------------------------------------------------------------------


def test_list_scenes_has_every_shipped_scene_with_a_description():
    listed = {name: (desc, path) for name, desc, path in list_scenes()}
    for name in SHIPPED:
        desc, path = listed[name]
        assert desc and not desc.startswith("#"), name
        assert path.read_text(encoding="utf-8").startswith("# "), f"{name}: comment header first"
        assert shipped_scene_path(name) == path
    with pytest.raises(FileNotFoundError, match="shipped scenes: .*box_stack"):
        shipped_scene_path("no_such_scene")


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_scene_loads_and_compiles(name):
    spec = load_scene(shipped_scene_path(name))
    assert spec.name == name and spec.time_step == 1e-3
    model, state = compile_scene(spec)
    assert np.all(np.isfinite(state.q)) and np.all(np.isfinite(model.body_inertia))
    moving = ~model.body_fixed
    assert np.all(model.body_mass[moving] > 0)
    assert np.all(np.linalg.eigvalsh(model.body_inertia[moving]) > 0)
    assert np.any(model.geom_type == GeomType.HALFSPACE)
    assert validate_scene_file(shipped_scene_path(name)) == []


def _world_points(model, state, g, local):
    """World coordinates of points given in the frame of geometry g, shape (n, 3)."""
    b = model.geom_body[g]
    R_WB, R_BG = quat_to_matrix(state.q[b, 3:]), quat_to_matrix(model.geom_quat[g])
    p_BG = model.geom_pos[g][:, None]
    return state.q[b, :3] + (R_WB @ (p_BG + R_BG @ np.asarray(local).T)).T


@pytest.mark.parametrize(("name", "tan_theta"), [("incline_stick", 0.4), ("incline_slip", 0.6)])
def test_incline_scenes_have_the_stated_slope_and_box_resting_on_it(name, tan_theta):
    model, state = compile_scene(load_scene(shipped_scene_path(name)))
    (plane,) = np.flatnonzero(model.geom_type == GeomType.HALFSPACE)
    (box,) = np.flatnonzero(model.geom_type == GeomType.BOX)
    n = quat_to_matrix(state.q[model.geom_body[plane], 3:]) @ quat_to_matrix(model.geom_quat[plane])[:, 2]
    assert math.isclose(n[0] / n[2], tan_theta, rel_tol=1e-12)  # slope angle: tan θ = n_x / n_z
    hx, hy, hz = model.geom_size[box]
    corners = np.array([(sx * hx, sy * hy, sz * hz) for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
    heights = _world_points(model, state, box, corners) @ n  # signed distance of each corner to the plane
    np.testing.assert_allclose(np.sort(heights)[:4], 0.0, atol=1e-12)  # bottom face touches the incline


def test_box_slide_scene_matches_its_header():
    spec = load_scene(shipped_scene_path("box_slide"))
    model, state = compile_scene(spec)
    assert state.v[1, 3] == 2.0
    # Pair friction of the box and ground materials by the combination rule: 2μAμB/(μA+μB) = 0.5.
    mu = model.material_friction[model.geom_material]
    assert math.isclose(2 * mu[0] * mu[1] / (mu[0] + mu[1]), 0.5)


def test_with_overrides_returns_a_new_validated_spec_and_specs_are_immutable():
    spec = load_scene(shipped_scene_path("sphere_drop"))
    heavier = with_overrides(spec, ["bodies.ball.mass=5", "materials.default.stiffness=2e5"])
    assert heavier.bodies[1].mass == 5.0 and heavier.materials["default"].stiffness == 2e5
    assert spec.bodies[1].mass == 1.0  # the original is unchanged
    assert with_overrides(spec, None) is spec
    with pytest.raises(SceneError, match=r"bodies\[1\]\.mass"):
        with_overrides(spec, {"bodies.ball.mass": 0})
    with pytest.raises(Exception, match="frozen"):
        spec.duration = 2.0  # type: ignore[misc]


def test_examples_in_docs_scene_format_load():
    """The YAML examples of docs/scene-format.md are valid scenes (so the documentation stays true)."""
    import re

    from repo_paths import DOCS

    doc = DOCS / "scene-format.md"
    blocks = re.findall(r"```yaml\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) >= 2
    for text in blocks:
        model, _ = compile_scene(scene_from_yaml(text, source="docs/scene-format.md"))
        assert model.nbody >= 2


def test_every_schema_field_is_documented_with_a_unit():
    """Each field has a description; each numeric field states its unit ([...]) or 'dimensionless'."""
    from convexsim.scene import schema

    models = [schema.SceneSpec, schema.SolverSpec, schema.MaterialSpec, schema.BodySpec, schema.GeometrySpec, schema.GridSpec,
              schema.JointSpec, schema.ActuatorSpec, schema.ConstraintSpec]
    unitless_ok = {"kind", "line_search", "contact_model", "shape", "fixed", "name", "description", "material",
                   "color", "seed", "random_orientation", "max_iterations", "friction_directions", "lcp_max_pivots",
                   "counts", "geometries", "bodies", "grids", "materials", "solver", "template", "quaternion",
                   "unit_warnings", "kinematic", "joints", "actuators", "type", "parent", "child", "joint",
                   "constraints", "body_a", "body_b", "reference"}
    for model in models:
        for fname, info in model.model_fields.items():
            assert info.description, f"{model.__name__}.{fname} has no description"
            if fname not in unitless_ok:
                assert re.search(r"\[[^\]]+\]|dimensionless|in \[0, 1\]", info.description), f"{model.__name__}.{fname}: no unit"


def test_bounding_radius_encloses_every_shape():
    """geom_rbound (used by the broad phase) is the farthest surface point from the geometry origin."""
    spec = scene_from_yaml(
        "bodies: [{name: b, mass: 1, geometries: [{shape: box, size: [0.3, 0.2, 0.1]},"
        " {shape: capsule, radius: 0.05, length: 0.4}, {shape: sphere, radius: 0.07}]}]"
    )
    model, _ = compile_scene(spec)
    farthest = [np.linalg.norm([0.15, 0.1, 0.05]), 0.2 + 0.05, 0.07]  # box corner, capsule tip, sphere
    np.testing.assert_allclose(model.geom_rbound, farthest, rtol=1e-15)


finite = dict(allow_nan=False, allow_infinity=False)


@settings(max_examples=40, deadline=None, derandomize=True)  # deterministic in CI
@given(
    mass=st.floats(1e-6, 1e6, **finite),
    pos=st.lists(st.floats(-1e3, 1e3, **finite), min_size=3, max_size=3),
    vel=st.lists(st.floats(-1e3, 1e3, **finite), min_size=3, max_size=3),
    quat=st.lists(st.floats(-1, 1, **finite), min_size=4, max_size=4).filter(lambda q: np.linalg.norm(q) > 1e-3),
    radius=st.floats(1e-4, 10, **finite),
    stiffness=st.floats(1.0, 1e12, **finite),
)
def test_dump_load_round_trip_property(mass, pos, vel, quat, radius, stiffness):
    q = list(np.asarray(quat) / np.linalg.norm(quat))
    spec = scene_from_dict(
        {
            "materials": {"m": {"stiffness": stiffness}},
            "bodies": [{"name": "b", "mass": mass, "position": pos, "linear_velocity": vel, "quaternion": q,
                        "geometries": [{"shape": "sphere", "radius": radius, "material": "m"}]}],
        }
    )
    assert scene_from_yaml(dump_scene(spec)) == spec
    compact = dump_scene_compact(spec)            # the trajectory header: exact, and plain YAML 1.1 floats
    assert scene_from_yaml(compact) == spec
    assert yaml.safe_load(compact) == spec.model_dump(mode="json", exclude_none=True)


def test_docs_scene_format_lists_every_field():
    """Every schema field appears as `name` in docs/scene-format.md (the docs cannot silently fall behind)."""
    from convexsim.scene import schema
    from repo_paths import DOCS

    doc = (DOCS / "scene-format.md").read_text(encoding="utf-8")
    for model in (schema.SceneSpec, schema.SolverSpec, schema.MaterialSpec, schema.BodySpec, schema.GeometrySpec, schema.GridSpec):
        for fname in model.model_fields:
            assert f"`{fname}`" in doc or f"{fname}:" in doc, f"{model.__name__}.{fname} is not documented"


def test_shipped_scene_headers_describe_what_they_show():
    for name, _, path in list_scenes():
        header = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.startswith("#"):
                break
            header.append(line)
        assert len(header) >= 3 and any(h.startswith("# Shows:") for h in header), f"{name}: header {header}"
