"""URDF as published (convexsim.scene.urdf): cylinders stay cylinders, <mesh> collision geometry read from
OBJ/STL/PLY files found through package:// and relative names, collision preferred over visual, and the
import command writing mesh paths relative to the scene file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from convexsim.cli import EXIT_OK, EXIT_USAGE, main
from convexsim.scene import load_scene
from convexsim.scene.urdf import UrdfError, urdf_to_scene

CUBE_OBJ = "".join(f"v {x} {y} {z}\n" for x in (-0.05, 0.05) for y in (-0.05, 0.05) for z in (-0.05, 0.05)) + \
    "f 1 3 4 2\nf 5 6 8 7\nf 1 2 6 5\nf 3 7 8 4\nf 1 5 7 3\nf 2 4 8 6\n"

ROBOT = """<robot name="r">
  <link name="base"><collision><geometry><cylinder radius="0.1" length="0.3"/></geometry></collision></link>
  <link name="hand">
    <inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>
    <visual><geometry><sphere radius="0.5"/></geometry></visual>
    <collision><origin xyz="0 0 0.1"/><geometry><mesh filename="package://robot_description/meshes/cube.obj"
      scale="1 2 0.5"/></geometry></collision>
    <collision><origin xyz="0 0 -0.1"/><geometry><mesh filename="meshes/cube.obj"/></geometry></collision>
  </link>
  <joint name="j" type="revolute"><parent link="base"/><child link="hand"/><origin xyz="0 0 1"/>
    <axis xyz="0 1 0"/><limit lower="-1" upper="1"/></joint>
</robot>"""


@pytest.fixture
def robot(tmp_path) -> Path:
    """A package folder <tmp>/robot_description with urdf/ and meshes/, as ROS packages are laid out."""
    pkg = tmp_path / "robot_description"
    (pkg / "meshes").mkdir(parents=True)
    (pkg / "urdf" / "meshes").mkdir(parents=True)
    (pkg / "meshes" / "cube.obj").write_text(CUBE_OBJ, encoding="utf-8")
    (pkg / "urdf" / "meshes" / "cube.obj").write_text(CUBE_OBJ, encoding="utf-8")
    (pkg / "urdf" / "r.urdf").write_text(ROBOT, encoding="utf-8")
    return pkg / "urdf" / "r.urdf"


def test_cylinder_and_meshes_map_to_the_scene_shapes(robot):
    """The cylinder keeps radius and full length; package:// is found under the package root, a relative
    name next to the URDF; scale is carried; collision geometry wins over the visual sphere."""
    scene = urdf_to_scene(robot, package_root=robot.parents[2])
    base, hand = scene["bodies"]
    assert base["geometries"] == [{"shape": "cylinder", "radius": 0.1, "length": 0.3, "position": [0.0, 0.0, 0.0],
                                   "quaternion": [1.0, 0.0, 0.0, 0.0]}]
    g0, g1 = hand["geometries"]
    assert g0["shape"] == g1["shape"] == "mesh" and len(hand["geometries"]) == 2
    assert Path(g0["file"]) == (robot.parents[1] / "meshes" / "cube.obj").resolve() and g0["scale"] == [1.0, 2.0, 0.5]
    assert Path(g1["file"]) == (robot.parent / "meshes" / "cube.obj").resolve() and "scale" not in g1
    np.testing.assert_allclose([g0["position"], g1["position"]], [[0, 0, 0.1], [0, 0, -0.1]])
    # the package root may also be the package folder itself
    again = urdf_to_scene(robot, package_root=robot.parents[1])
    assert again["bodies"][1]["geometries"][0]["file"] == g0["file"]


def test_missing_package_root_and_files_are_refused_by_name(robot, tmp_path, monkeypatch):
    monkeypatch.delenv("ROS_PACKAGE_PATH", raising=False)
    with pytest.raises(UrdfError) as err:
        urdf_to_scene(robot)
    assert len(err.value.problems) == 1
    assert "link 'hand' <collision>[0] <geometry> <mesh>" in err.value.problems[0]
    assert "needs a package root: pass --package-root DIR" in err.value.problems[0]
    with pytest.raises(UrdfError) as err:
        urdf_to_scene(robot, package_root=tmp_path / "elsewhere")
    assert "not found (tried" in err.value.problems[0]


def test_import_urdf_with_package_root_writes_relative_mesh_paths(robot, tmp_path, capsys, monkeypatch):
    """`convexsim import-urdf --package-root DIR --out scene.yaml`: the scene names its mesh files
    relative to its own folder, so it loads from there (and from anywhere else it is run)."""
    out = tmp_path / "scenes" / "r.yaml"
    out.parent.mkdir()
    root = str(robot.parents[2])
    assert main(["import-urdf", str(robot), "--package-root", root, "--out", str(out)]) == EXIT_OK
    text = out.read_text(encoding="utf-8")
    assert "file: ../robot_description/meshes/cube.obj" in text and str(tmp_path) not in text
    spec = load_scene(out)
    assert [g.shape for g in spec.bodies[1].geometries] == ["mesh", "mesh"]
    assert spec.bodies[0].geometries[0].shape == "cylinder"
    capsys.readouterr()
    monkeypatch.delenv("ROS_PACKAGE_PATH", raising=False)
    assert main(["import-urdf", str(robot)]) == EXIT_USAGE           # package:// without a root
    assert "--package-root" in capsys.readouterr().err


def test_rpy_round_trip():
    """matrix_to_rpy inverts rpy_to_matrix (away from pitch = ±π/2, and at it up to the roll/yaw split)."""
    from convexsim.scene.urdf import matrix_to_rpy, rpy_to_matrix
    rng = np.random.default_rng(3)
    for rpy in list(rng.uniform(-3, 3, (20, 3)) * [1, 0.5, 1]) + [np.array([0.3, np.pi / 2, -0.2])]:
        R = rpy_to_matrix(*rpy)
        np.testing.assert_allclose(rpy_to_matrix(*matrix_to_rpy(R)), R, atol=1e-12)


PADDED = """<robot name="p">
  <link name="base"/>
  <link name="finger">
    <inertial><mass value="0.2"/><inertia ixx="1e-4" ixy="0" ixz="0" iyy="1e-4" iyz="0" izz="1e-4"/></inertial>
    <collision><origin xyz="0 0 -0.02"/><geometry><box size="0.02 0.02 0.04"/></geometry></collision>
  </link>
  <link name="pad"><collision><origin xyz="0.01 0 0" rpy="0 0.2 0"/>
    <geometry><box size="0.004 0.02 0.03"/></geometry></collision></link>
  <link name="tip">
    <inertial><mass value="0.05"/><inertia ixx="1e-5" ixy="0" ixz="0" iyy="1e-5" iyz="0" izz="1e-5"/></inertial>
    <collision><geometry><sphere radius="0.005"/></geometry></collision>
  </link>
  <joint name="slide" type="prismatic"><parent link="base"/><child link="finger"/><origin xyz="0 0 0.5"/>
    <axis xyz="1 0 0"/><limit lower="0" upper="0.05"/></joint>
  <joint name="pad_joint" type="fixed"><parent link="finger"/><child link="pad"/>
    <origin xyz="0.01 0 -0.03" rpy="0.3 0 1.5707963267948966"/></joint>
  <joint name="tip_joint" type="revolute"><parent link="pad"/><child link="tip"/><origin xyz="0 0 -0.02" rpy="0 0.1 0"/>
    <axis xyz="0 1 0"/></joint>
</robot>"""


def test_massless_fixed_links_merge_into_their_parent(tmp_path):
    """A pad link without <inertial> on a fixed joint (common in published grippers) is merged into its
    parent: its box and the joint hanging from it are where they were in the world (forward kinematics of
    the imported scene against the URDF's own chain of origins, 1e-12 m)."""
    from convexsim.scene.urdf import rpy_to_matrix
    f = tmp_path / "p.urdf"
    f.write_text(PADDED, encoding="utf-8")
    spec = load_scene(f)
    assert [b.name for b in spec.bodies] == ["base", "finger", "tip"]
    assert [j.name for j in spec.joints] == ["slide", "tip_joint"]
    finger = spec.bodies[1]
    assert [g.shape for g in finger.geometries] == ["box", "box"]
    # the pad box centre in the finger link frame: T_pad_joint · (0.01, 0, 0); the finger's COM is its origin
    R_pj = rpy_to_matrix(0.3, 0, np.pi / 2)
    expected = np.array([0.01, 0, -0.03]) + R_pj @ [0.01, 0, 0]
    np.testing.assert_allclose(finger.geometries[1].position, expected, atol=1e-12)
    from convexsim.spatial import quat_to_matrix
    np.testing.assert_allclose(quat_to_matrix(np.array(finger.geometries[1].quaternion)),
                               R_pj @ rpy_to_matrix(0, 0.2, 0), atol=1e-12)
    tip = spec.joints[1]
    assert tip.parent == "finger"
    np.testing.assert_allclose(tip.position, np.array([0.01, 0, -0.03]) + R_pj @ [0, 0, -0.02], atol=1e-12)
    np.testing.assert_allclose(quat_to_matrix(np.array(tip.quaternion)), R_pj @ rpy_to_matrix(0, 0.1, 0), atol=1e-12)


def test_undeclared_simulator_prefixes_are_ignored(tmp_path):
    """Published URDFs carry simulator extensions with undeclared prefixes (<drake:collision_filter_group>),
    which a strict XML parser refuses; they are declared and ignored like other unknown elements."""
    text = PADDED.replace("</robot>", '<drake:collision_filter_group name="g"><drake:member link="tip"/>'
                          "</drake:collision_filter_group></robot>")
    f = tmp_path / "d.urdf"
    f.write_text(text, encoding="utf-8")
    assert [b.name for b in load_scene(f).bodies] == ["base", "finger", "tip"]


def test_ros_package_path_finds_packages_without_a_root(robot, monkeypatch):
    """Without --package-root, package:// names are looked up under each folder of ROS_PACKAGE_PATH."""
    monkeypatch.setenv("ROS_PACKAGE_PATH", f"/nonexistent:{robot.parents[2]}")
    g = urdf_to_scene(robot)["bodies"][1]["geometries"][0]
    assert Path(g["file"]) == (robot.parents[1] / "meshes" / "cube.obj").resolve()
