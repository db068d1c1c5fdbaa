"""Fuzzing URDF files (issue 29): the shipped robots with elements and attributes removed or given bad
values, joint-graph cycles, zero and negative masses, meshes whose files do not exist, duplicated and
renamed links and joints, unknown elements.

Property: `convexsim import-urdf` (with and without --floating-base) and `convexsim validate` end with
status 0 or 2 and no traceback, 2 with messages naming the file; a scene the importer wrote validates; a
mutant that validates runs two steps with status 0 or 1, and status 0 wrote a loadable trajectory (finite:
the loader checks it).
"""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from fuzz_kit import check_cli, check_robot_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repo_paths import SCENES

SUPPRESS = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]

FLOATING = """<?xml version="1.0"?>
<robot name="floater">
  <link name="world"/>
  <link name="body">
    <inertial><mass value="2.0"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>
    <collision><geometry><sphere radius="0.1"/></geometry></collision>
  </link>
  <link name="wheel">
    <inertial><origin xyz="0 0 0" rpy="0 0 0"/><mass value="0.5"/>
      <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.001" iyz="0" izz="0.001"/></inertial>
    <visual><geometry><cylinder radius="0.05" length="0.02"/></geometry></visual>
  </link>
  <link name="slider">
    <inertial><mass value="0.1"/><inertia ixx="0.001" ixy="0" ixz="0" iyy="0.001" iyz="0" izz="0.001"/></inertial>
    <collision><geometry><box size="0.05 0.05 0.05"/></geometry></collision>
  </link>
  <joint name="float" type="floating"><parent link="world"/><child link="body"/><origin xyz="0 0 1"/></joint>
  <joint name="spin" type="continuous"><parent link="body"/><child link="wheel"/><origin xyz="0.2 0 0" rpy="1.57 0 0"/>
    <axis xyz="0 0 1"/><dynamics damping="0.1"/></joint>
  <joint name="slide" type="prismatic"><parent link="body"/><child link="slider"/><axis xyz="1 0 0"/>
    <limit lower="-0.1" upper="0.1" effort="1" velocity="1"/><mimic joint="spin" multiplier="0.01" offset="0"/></joint>
</robot>
"""

BASES = {"two_link_arm": (SCENES / "robots" / "two_link_arm.urdf").read_text(encoding="utf-8"),
         "iiwa14": (SCENES / "robots" / "iiwa14.urdf").read_text(encoding="utf-8"),
         "floating": FLOATING}

BAD_TEXT = ["", "nan", "inf", "-inf", "-1", "0", "1e400", "1e-400", "1e300", "a b c", "1 2", "1 2 3 4", "x",
            "0 0 0", "-0.1 0 0", "world", "base", "revolute", "planar", "floating", "fixed", "1e16"]


def _mutate(draw, root: ET.Element) -> str:
    """One mutation of the parsed robot in place; returns what it did."""
    elements = list(root.iter())
    parents = {c: p for p in root.iter() for c in p}
    kind = draw(st.sampled_from(["remove_element", "remove_attribute", "bad_attribute", "bad_attribute",
                                 "cycle", "mass", "mesh", "duplicate", "rename", "unknown", "swap"]))
    el = draw(st.sampled_from(elements))
    if kind == "remove_element" and el in parents:
        parents[el].remove(el)
    elif kind == "remove_attribute" and el.attrib:
        del el.attrib[draw(st.sampled_from(sorted(el.attrib)))]
    elif kind == "bad_attribute" and el.attrib:
        el.set(draw(st.sampled_from(sorted(el.attrib))), draw(st.sampled_from(BAD_TEXT)))
    elif kind == "cycle":
        joints = root.findall("joint")
        links = [lk.get("name") for lk in root.findall("link")]
        if not joints or not links:
            return "none"
        j = draw(st.sampled_from(joints))
        ET.SubElement(root, "joint", name="cycle", type="fixed")
        new = root.findall("joint")[-1]
        child = j.find("parent")
        # an earlier mutation may have removed an attribute: never hand ElementTree a None (it cannot write it)
        ET.SubElement(new, "parent", link=(j.find("child").get("link") if j.find("child") is not None else None)
                      or links[0] or "")
        ET.SubElement(new, "child", link=(child.get("link") if child is not None else None) or links[-1] or "")
    elif kind == "mass":
        masses = root.findall(".//mass")
        if not masses:
            return "none"
        draw(st.sampled_from(masses)).set("value", draw(st.sampled_from(["0", "-1", "0.0", "1e-300", "1e300", "nan"])))
    elif kind == "mesh":
        geoms = root.findall(".//geometry")
        if not geoms:
            return "none"
        g = draw(st.sampled_from(geoms))
        for c in list(g):
            g.remove(c)
        ET.SubElement(g, "mesh", filename=draw(st.sampled_from(["package://robot/missing.stl", "missing.dae",
                                                                "/nonexistent/x.obj", ""])))
    elif kind == "duplicate" and el in parents:
        parents[el].append(copy.deepcopy(el))
    elif kind == "rename" and el.get("name") is not None:
        el.set("name", draw(st.sampled_from(["world", "base", "", "x y", "upper_arm", "shoulder"])))
    elif kind == "unknown":
        ET.SubElement(el, draw(st.sampled_from(["transmission", "gazebo", "foo", "link", "joint", "inertial"])))
    elif kind == "swap":
        joint = root.find("joint")
        if joint is None:
            return "none"
        p, c = joint.find("parent"), joint.find("child")
        if p is None or c is None:
            return "none"
        lp, lc = p.get("link"), c.get("link")
        p.set("link", lc or ""), c.set("link", lp or "")
    else:
        return "none"
    return kind


@st.composite
def mutated_urdfs(draw, max_mutations: int = 2):
    name = draw(st.sampled_from(sorted(BASES)))
    root = ET.fromstring(BASES[name])
    what = [_mutate(draw, root) for _ in range(draw(st.integers(1, max_mutations)))]
    text = ET.tostring(root, encoding="unicode")
    if draw(st.integers(0, 9)) == 0:                   # sometimes broken at the text level as well
        cut = draw(st.integers(0, len(text)))
        text = text[:cut]
    return name, text, what


def check_urdf(text: str, tmp: Path, run: bool) -> None:
    path = tmp / "robot.urdf"
    path.write_text(text, encoding="utf-8")
    check_robot_file(path, tmp, [["import-urdf", path, "--out", tmp / "out.yaml"],
                                 ["import-urdf", path, "--floating-base"]], 0.001, run)


def test_missing_urdf_file_and_directory(tmp_path):
    for argv in (["import-urdf", tmp_path / "none.urdf"], ["validate", tmp_path / "none.urdf"],
                 ["run", tmp_path / "none.urdf", "--duration", "0.001"]):
        status, _, err = check_cli(argv)
        assert status == 2 and "none.urdf" in err, err
    d = tmp_path / "dir.urdf"
    d.mkdir()
    status, _, err = check_cli(["import-urdf", d])
    assert status == 2 and str(d) in err, err


@settings(max_examples=80, deadline=None, suppress_health_check=SUPPRESS)
@given(case=mutated_urdfs())
def test_mutated_urdf_files_import_and_validate_cleanly(case, tmp_path):
    _, text, _ = case
    check_urdf(text, tmp_path, run=False)


@settings(max_examples=10, deadline=None, suppress_health_check=SUPPRESS)
@given(case=mutated_urdfs(max_mutations=1))
def test_mutated_urdf_files_that_validate_run_two_steps(case, tmp_path):
    _, text, _ = case
    check_urdf(text, tmp_path, run=True)


@pytest.mark.long
@settings(max_examples=400, deadline=None, suppress_health_check=SUPPRESS)
@given(case=mutated_urdfs(max_mutations=4))
def test_mutated_urdf_files_many(case, tmp_path):
    _, text, _ = case
    check_urdf(text, tmp_path, run=False)


@pytest.mark.long
@settings(max_examples=60, deadline=None, suppress_health_check=SUPPRESS)
@given(case=mutated_urdfs(max_mutations=2))
def test_mutated_urdf_files_run_many(case, tmp_path):
    _, text, _ = case
    check_urdf(text, tmp_path, run=True)
