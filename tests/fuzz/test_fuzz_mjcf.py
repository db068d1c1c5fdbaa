"""Fuzzing MJCF files: three vendored Menagerie robots (iiwa 14, Panda, A1) and a small model with every joint
kind, a default class, a geared position servo and joint/weld equalities, with elements and attributes removed,
given bad values (non-finite, huge, tiny, wrong arity, words), duplicated, renamed, or with unknown children.

Property: `convexsim import-mjcf` (from qpos0 and from the `home` keyframe) and `convexsim validate` end with
status 0 or 2 and no traceback (MuJoCo's compiler refuses most mutants; what it accepts reaches the
conversion), 2 with messages naming the file; a scene the importer wrote validates; a mutant that validates
runs two steps with status 0 or 1, and status 0 wrote a loadable trajectory.
"""

from __future__ import annotations

import copy
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest.importorskip("mujoco")

from fuzz_kit import check_robot_file  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

SUPPRESS = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
MENAGERIE = Path(__file__).resolve().parents[1] / "data" / "menagerie"

SMALL = """<mujoco model="small">
  <option timestep="0.002"/>
  <default><default class="arm"><joint damping="0.05" armature="0.01"/></default></default>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1" friction="0.8"/>
    <body name="upper" pos="0 0 1.2" euler="0 20 10">
      <joint name="shoulder" type="hinge" axis="0 1 0.2" class="arm" range="-60 45"/>
      <geom type="capsule" size="0.04 0.15" pos="0 0 -0.15"/>
      <body name="slider" pos="0 0 -0.35">
        <joint name="extend" type="slide" axis="1 0 0" range="-0.1 0.2" frictionloss="0.1"/>
        <geom type="cylinder" size="0.03 0.05" euler="90 0 0"/>
        <body name="hand" pos="0 0 -0.1"><joint name="wrist" type="ball"/>
          <geom type="box" size="0.03 0.04 0.05" pos="0.01 0 -0.03"/>
        </body>
      </body>
    </body>
    <body name="twin" pos="0.5 0 1.2"><joint name="follow" type="hinge" axis="0 1 0"/>
      <geom type="capsule" size="0.04 0.15" pos="0 0 -0.15"/>
    </body>
    <body name="ball" pos="1 0 2"><freejoint name="float"/><geom type="sphere" size="0.1"/></body>
  </worldbody>
  <equality><joint joint1="follow" joint2="shoulder" polycoef="0.1 -2 0 0 0"/></equality>
  <actuator><position joint="shoulder" kp="50" kv="2" forcerange="-4 4" ctrlrange="-1 1" gear="2"/></actuator>
  <keyframe><key name="home" qpos="0.2 0.05 1 0 0 0 -0.3 1 0 2 1 0 0 0"/></keyframe>
</mujoco>"""

ROBOTS = {"iiwa14": "kuka_iiwa_14/iiwa14.xml", "panda": "franka_emika_panda/panda.xml", "a1": "unitree_a1/a1.xml"}
BASES = {"small": SMALL, **{k: (MENAGERIE / v).read_text(encoding="utf-8") for k, v in ROBOTS.items()}}

BAD_TEXT = ["", "nan", "inf", "-inf", "-1", "0", "1e400", "1e-300", "1e300", "a b c", "1 2", "1 2 3 4", "x",
            "0 0 0", "0 0 0 0", "-0.1 0 0", "world", "hinge", "slide", "ball", "free", "1e16", "1e15 0 0",
            "true", "home"]


def _mutate(draw, root: ET.Element) -> str:
    """One mutation of the parsed model in place; returns what it did."""
    elements = list(root.iter())
    parents = {c: p for p in root.iter() for c in p}
    kind = draw(st.sampled_from(["remove_element", "remove_attribute", "bad_attribute", "bad_attribute",
                                 "bad_attribute", "duplicate", "rename", "unknown"]))
    el = draw(st.sampled_from(elements))
    if kind == "remove_element" and el in parents:
        parents[el].remove(el)
    elif kind == "remove_attribute" and el.attrib:
        del el.attrib[draw(st.sampled_from(sorted(el.attrib)))]
    elif kind == "bad_attribute" and el.attrib:
        el.set(draw(st.sampled_from(sorted(el.attrib))), draw(st.sampled_from(BAD_TEXT)))
    elif kind == "duplicate" and el in parents:
        parents[el].append(copy.deepcopy(el))
    elif kind == "rename" and el.get("name") is not None:
        el.set("name", draw(st.sampled_from(["world", "", "x y", "shoulder", "link1", "home"])))
    elif kind == "unknown":
        ET.SubElement(el, draw(st.sampled_from(["joint", "geom", "site", "inertial", "freejoint", "body", "foo"])))
    else:
        return "none"
    return kind


@st.composite
def mutated_mjcfs(draw, max_mutations: int = 2):
    name = draw(st.sampled_from(sorted(BASES)))
    root = ET.fromstring(BASES[name])
    what = [_mutate(draw, root) for _ in range(draw(st.integers(1, max_mutations)))]
    return name, ET.tostring(root, encoding="unicode"), what


def check_mjcf(name: str, text: str, tmp: Path, run: bool) -> None:
    if name in ROBOTS:               # the robot's own folder (its assets, if any), the mutant beside them
        shutil.copytree(MENAGERIE / Path(ROBOTS[name]).parent, tmp / "robot", dirs_exist_ok=True)
        tmp = tmp / "robot"
    path = tmp / "mutant.xml"
    path.write_text(text, encoding="utf-8")
    check_robot_file(path, tmp, [["import-mjcf", path, *extra, "--out", tmp / "out.yaml"]
                                 for extra in ([], ["--keyframe", "home"])], 0.002, run)


@settings(max_examples=60, deadline=None, suppress_health_check=SUPPRESS)
@given(case=mutated_mjcfs())
def test_mutated_mjcf_files_import_and_validate_cleanly(case, tmp_path):
    name, text, _ = case
    check_mjcf(name, text, tmp_path, run=False)


@settings(max_examples=10, deadline=None, suppress_health_check=SUPPRESS)
@given(case=mutated_mjcfs(max_mutations=1))
def test_mutated_mjcf_files_that_validate_run_two_steps(case, tmp_path):
    name, text, _ = case
    check_mjcf(name, text, tmp_path, run=True)


@pytest.mark.long
@settings(max_examples=300, deadline=None, suppress_health_check=SUPPRESS)
@given(case=mutated_mjcfs(max_mutations=3))
def test_mutated_mjcf_files_run_many(case, tmp_path):
    name, text, _ = case
    check_mjcf(name, text, tmp_path, run=True)
