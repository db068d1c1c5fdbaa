"""URDF import (convexsim.scene.urdf): the mapping to a scene, the same physics as the equivalent scene
file, and bad files rejected with one message naming the element."""

from __future__ import annotations

import math

import numpy as np
import pytest

from convexsim.scene import SceneError, load_scene, validate_scene_file
from convexsim.scene.urdf import rpy_to_matrix, urdf_to_scene
from convexsim.simulate import simulate
from convexsim.spatial import quat_to_matrix

ARM = "robots/two_link_arm.urdf"

EQUIVALENT_YAML = """
name: arm_yaml
bodies:
  - {name: base, fixed: true, geometries: [{shape: box, size: [0.3, 0.3, 0.05], position: [0, -0.15, 0.025]},
                                            {shape: box, size: [0.08, 0.08, 1.55], position: [0, -0.15, 0.775]}]}
  - name: upper_arm
    mass: 1.0
    inertia: [0.021, 0.021, 0.0013]
    geometries: [{shape: cylinder, radius: 0.05, length: 0.5}]
  - name: forearm
    mass: 0.5
    inertia: [0.0068, 0.0068, 0.0004]
    geometries: [{shape: cylinder, radius: 0.04, length: 0.4}]
joints:
  - {name: shoulder, type: revolute, child: upper_arm, parent: base, axis: [0, 1, 0], position: [0, 0, 1.5],
     child_offset: [0, 0, -0.25], lower: -2.0, upper: 2.0, damping: 0.05, initial_position: 1.0}
  - {name: elbow, type: revolute, parent: upper_arm, child: forearm, axis: [0, 1, 0], position: [0, 0, -0.25],
     child_offset: [0, 0, -0.2], initial_position: -0.5}
"""


def test_urdf_arm_moves_exactly_like_the_equivalent_scene(repo):
    """The imported two-link arm (cylinders stay cylinders, COM frames, the elbow's
    origin moved into the upper arm's COM frame) gives the same trajectory as the scene written by hand."""
    path = repo / "scenes" / ARM
    over = ["joints.shoulder.initial_position=1.0", "joints.elbow.initial_position=-0.5"]
    a = simulate(str(path), duration=0.3, overrides=over)
    b = simulate(EQUIVALENT_YAML, duration=0.3)
    assert not a.failure and not b.failure
    np.testing.assert_allclose(a.position, b.position, atol=1e-12)
    np.testing.assert_allclose(a.quaternion, b.quaternion, atol=1e-12)
    assert np.ptp(a.position[:, 2, 0]) > 0.1        # it really swings


def test_rpy_and_geometry_mapping(tmp_path):
    """rpy is fixed-axis R = Rz(y) Ry(p) Rx(r); geometry and joint positions are shifted into COM frames;
    a cylinder stays a cylinder of the same radius and full length."""
    R = rpy_to_matrix(0.3, -0.2, 1.1)
    Rx = np.array([[1, 0, 0], [0, math.cos(0.3), -math.sin(0.3)], [0, math.sin(0.3), math.cos(0.3)]])
    Ry = np.array([[math.cos(-0.2), 0, math.sin(-0.2)], [0, 1, 0], [-math.sin(-0.2), 0, math.cos(-0.2)]])
    Rz = np.array([[math.cos(1.1), -math.sin(1.1), 0], [math.sin(1.1), math.cos(1.1), 0], [0, 0, 1]])
    np.testing.assert_allclose(R, Rz @ Ry @ Rx, atol=1e-15)
    f = tmp_path / "r.urdf"
    f.write_text(URDF.format(**{**GOOD, "geom": '<cylinder radius="0.1" length="0.15"/>',
                                "origin": 'xyz="0 0 1" rpy="0.3 -0.2 1.1"'}), encoding="utf-8")
    scene = urdf_to_scene(f)
    g = scene["bodies"][1]["geometries"][0]
    assert g["shape"] == "cylinder" and g["radius"] == 0.1 and g["length"] == 0.15
    np.testing.assert_allclose(g["position"], [0.0, 0.0, 0.1 - (-0.2)], atol=1e-15)   # origin − COM
    j = scene["joints"][0]
    np.testing.assert_allclose(quat_to_matrix(np.array(j["quaternion"])), R, atol=1e-12)
    assert j["child_offset"] == [0.0, 0.0, -0.2]


URDF = """<robot name="r">
  <link name="base"/>
  <link name="l1">{inertial}
    <collision><origin xyz="0 0 0.1"/><geometry>{geom}</geometry></collision>
  </link>
  <joint name="j1" type="{jtype}">
    <parent link="{parent}"/><child link="l1"/><origin {origin}/><axis xyz="{axis}"/>{joint_extra}
  </joint>
</robot>"""
INERTIAL = ('<inertial><origin xyz="0 0 -0.2"/><mass value="1"/>'
            '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>')
GOOD = dict(geom='<box size="0.1 0.1 0.1"/>', joint_extra='', jtype="revolute", origin='xyz="0 0 1"', inertial=INERTIAL,
            parent="base", axis="0 1 0")

BAD = {
    "mesh": (dict(geom='<mesh filename="arm.stl"/>'), "<mesh>: mesh file 'arm.stl' not found"),
    "dae": (dict(geom='<mesh filename="arm.dae"/>'), "only OBJ, STL and PLY mesh files are read"),
    "unknown_link": (dict(parent="nowhere"), "<parent>: unknown link 'nowhere'"),
    "floating": (dict(jtype="floating"), "a floating joint must hang from the root link 'world'"),
    "unknown_type": (dict(jtype="hinge"), "type 'hinge' is not supported"),
    "limits": (dict(joint_extra='<limit lower="1" upper="0"/>'), "lower 1.0 > upper 0.0"),
    "no_inertial": (dict(inertial=""), "a moving link needs <inertial>"),
    "zero_axis": (dict(axis="0 0 0"), "joint 'j1' <axis>: xyz must be a nonzero vector"),
    "nan_origin": (dict(origin='xyz="0 nan 1"'), "xyz must be 3 finite numbers"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_urdf_gives_one_error_naming_the_element(tmp_path, case):
    change, message = BAD[case]
    text = URDF.format(**{**GOOD, **change})
    f = tmp_path / f"{case}.urdf"
    f.write_text(text, encoding="utf-8")
    problems = validate_scene_file(f)
    assert len(problems) == 1, problems
    assert str(f) in problems[0] and message in problems[0]


def test_good_urdf_loads_and_invalid_xml_is_one_error(tmp_path):
    f = tmp_path / "good.urdf"
    f.write_text(URDF.format(**GOOD), encoding="utf-8")
    spec = load_scene(f)
    assert [b.name for b in spec.bodies] == ["base", "l1"] and spec.bodies[0].fixed
    bad = tmp_path / "broken.urdf"
    bad.write_text("<robot><link name='a'>", encoding="utf-8")
    with pytest.raises(SceneError) as info:
        load_scene(bad)
    assert len(info.value.problems) == 1 and "invalid XML" in info.value.problems[0]
