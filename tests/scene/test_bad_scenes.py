"""Malformed scene files are rejected with messages that name the file, the field path and the value.

Each file in tests/scene/bad/ says in its header (``# expect: <field path>``) which field path the
error must name.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from convexsim.scene import SceneError, load_scene, scene_from_yaml, validate_scene_file

BAD_DIR = Path(__file__).parent / "bad"
BAD_FILES = sorted(BAD_DIR.glob("*.yaml"))


def expected_path(path: Path) -> str:
    """The field path named by the file's '# expect:' header line."""
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"#\s*expect:\s*(\S+)", line)
        if m:
            return m.group(1)
    raise AssertionError(f"{path} has no '# expect: <field path>' header line")


def names_path(message: str, field_path: str) -> bool:
    """True when ``message`` names exactly ``field_path`` (not a longer path that starts with it)."""
    return re.search(r"(^|[\s:])" + re.escape(field_path) + r"($|[\s:])", message) is not None


# Every check that docs/scene-format.md lists under "Checked:", the bad files that exercise it, and the
# field each of those files must be rejected at (a regular expression on its '# expect:' path).
DOCUMENTED_CHECKS = [
    ("unknown keys", {"unknown_top_key": r"time_stpe", "unknown_body_key": r"bodies\[\d+\]\.masss",
                      "unknown_geometry_key": r".*geometries\[\d+\]\.radiuss",
                      "unknown_material_key": r"materials\.\w+\.frction",
                      "unknown_solver_key": r"solver\.max_iteration"}),
    ("wrong types", {"string_for_number": r"duration", "wrong_type_bodies": r"bodies"}),
    ("non-positive mass, radius and box sizes", {"zero_mass": r".*\.mass", "negative_mass": r".*\.mass",
                                                 "negative_radius": r".*\.radius",
                                                 "zero_box_size": r".*\.size\[\d\]"}),
    ("negative capsule length, friction, dissipation", {
        "negative_capsule_length": r".*\.length", "negative_friction": r"materials\.\w+\.friction",
        "negative_dissipation_time": r"materials\.\w+\.dissipation_time",
        "negative_hunt_crossley_dissipation": r"materials\.\w+\.hunt_crossley_dissipation"}),
    ("NaN/inf anywhere", {"nan_position": r".*\.position\[\d\]", "nan_stiffness": r".*\.stiffness",
                          "inf_time_step": r"time_step", "inf_velocity": r".*_velocity\[\d\]"}),
    ("zero or non-unit quaternions", {"zero_quaternion": r".*\.quaternion",
                                      "non_unit_quaternion": r".*\.quaternion"}),
    ("inertia that is not symmetric, not positive definite or violates the triangle inequality", {
        "inertia_not_symmetric": r".*\.inertia", "inertia_negative": r".*\.inertia",
        "inertia_triangle": r".*\.inertia", "inertia_matrix_triangle": r".*\.inertia"}),
    ("duplicate body names", {"duplicate_body_names": r"bodies\[\d+\]\.name"}),
    ("unknown materials", {"unknown_material": r".*\.material"}),
    ("halfspaces on moving bodies", {"halfspace_on_moving_body": r".*\.shape"}),
    ("velocities on fixed bodies", {"moving_fixed_body": r".*_velocity"}),
    ("kinematic bodies with `fixed`, `mass`, `inertia` or a halfspace", {
        "kinematic_and_fixed": r"bodies\[\d+\]\.kinematic", "kinematic_with_mass": r"bodies\[\d+\]\.mass",
        "kinematic_halfspace": r".*\.shape", "kinematic_lagged_contact": r"bodies\[\d+\]\.kinematic",
        "joint_kinematic_child": r"joints\[\d+\]\.child", "joint_kinematic_root": r"joints\[\d+\]\.parent",
        "constraint_weld_to_kinematic": r"constraints\[\d+\]\.body_a"}),
    ("centroid is off the body origin", {"off_centre_geometry": r"bodies\[\d+\]\.geometries"}),
    ("shape keys that do not belong to the shape", {"box_with_radius": r".*\.radius"}),
    ("colors outside [0, 1]", {"bad_color": r".*\.color"}),
    ("joints with an unknown parent, two parents, a cycle, lower > upper or a zero axis", {
        "joint_unknown_parent": r"joints\[\d+\]\.parent", "joint_two_parents": r"joints\[\d+\]\.child",
        "joint_cycle": r"joints\[\d+\]\.parent", "joint_lower_above_upper": r"joints\[\d+\]\.lower",
        "joint_zero_axis": r"joints\[\d+\]\.axis"}),
    ("actuators with NaN gains or an unknown joint", {"actuator_nan_gain": r"actuators\[\d+\]\.kp",
                                                      "actuator_unknown_joint": r"actuators\[\d+\]\.joint"}),
    ("constraints with an unknown body or joint, a coupler on a joint that is not 1-dof, NaN or non-positive "
     "parameters, a zero distance, or a field of another constraint type", {
        "constraint_unknown_body": r"constraints\[\d+\]\.body_b",
        "constraint_unknown_joint": r"constraints\[\d+\]\.(joint|reference)",
        "constraint_coupler_fixed_joint": r"constraints\[\d+\]\.joint",
        "constraint_nan_stiffness": r"constraints\[\d+\]\.stiffness",
        "constraint_zero_distance": r"constraints\[\d+\]\.distance",
        "constraint_field_of_other_type": r"constraints\[\d+\]\.distance"}),
]


@pytest.mark.parametrize("path", [p for p in BAD_FILES if p.stem.startswith(("joint_", "actuator_", "constraint_"))],
                         ids=lambda p: p.stem)
def test_bad_joint_and_actuator_scenes_give_exactly_one_error(path: Path):
    problems = validate_scene_file(path)
    assert len(problems) == 1, problems


@pytest.mark.parametrize("check, files", DOCUMENTED_CHECKS, ids=[c.split()[0] + "-" + next(iter(f))
                                                                  for c, f in DOCUMENTED_CHECKS])
def test_every_documented_check_has_a_bad_file_rejected_at_its_field(check, files, repo):
    """Check docs/scene-format.md lists the check, each named bad file exists, and its '# expect:' field is
    the one the check is about (the parametrized test above then proves the file is rejected there)."""
    checked = (repo / "docs" / "scene-format.md").read_text(encoding="utf-8").split("Checked:", 1)[1]
    assert check in " ".join(checked.split()), f"docs no longer list {check!r}"
    stems = {p.stem: p for p in BAD_FILES}
    for stem, field in files.items():
        assert stem in stems, f"no bad file {stem}.yaml for the documented check {check!r}"
        assert re.fullmatch(field, expected_path(stems[stem])), (stem, expected_path(stems[stem]), field)


@pytest.mark.parametrize("path", BAD_FILES, ids=[p.stem for p in BAD_FILES])
def test_bad_scene_is_rejected_naming_the_field_path(path: Path):
    field_path = expected_path(path)
    problems = validate_scene_file(path)
    assert problems, f"{path.name} was accepted"
    assert all(p.startswith(str(path)) for p in problems), problems  # every message names the file
    assert any(names_path(p, field_path) for p in problems), f"no message names {field_path!r}: {problems}"
    with pytest.raises(SceneError) as info:
        load_scene(path)
    assert names_path(str(info.value), field_path)


def test_names_path_is_exact():
    # The matcher itself must be able to fail: a longer path is not the expected one.
    assert names_path("f.yaml:3: bodies[0].mass (body 'b'): bad", "bodies[0].mass")
    assert not names_path("f.yaml:3: bodies[0].masss: bad", "bodies[0].mass")
    assert not names_path("f.yaml:3: bodies[10].mass: bad", "bodies[1].mass")


MANY_PROBLEMS = """\
name: many
time_step: -1
gravity: [0, 0, .nan]
contact_model: soft
solver: {sigmaa: 1}
materials:
  rubber: {friction: -1}
bodies:
  - {name: ground, fixed: true, linear_velocity: [1, 0, 0], geometries: [{shape: halfspace}]}
  - {name: ball, mass: 0, quaternion: [0, 0, 0, 0], geometries: [{shape: sphere, radius: -0.1}]}
  - {name: ball, mass: 1, inertia: [1, 1, 3], geometries: [{shape: sphere, size: [1, 1, 1], material: steel}]}
  - {name: box, mass: 1, geometries: [{shape: box}, {shape: halfspace}]}
grids:
  - {name: pile, counts: [2, 0, 1], spacing: [1, 1, 1], template: {mass: 1, geometries: [{shape: sphere, radius: 0.1}]}}
"""


def test_all_problems_are_reported_at_once():
    with pytest.raises(SceneError) as info:
        scene_from_yaml(MANY_PROBLEMS, source="many.yaml")
    problems = info.value.problems
    expected = [
        "time_step",
        "gravity[2]",
        "contact_model",
        "solver.sigmaa",
        "materials.rubber.friction",
        "bodies[0].linear_velocity",
        "bodies[1].mass",
        "bodies[1].quaternion",
        "bodies[1].geometries[0].radius",
        "bodies[2].name",
        "bodies[2].inertia",
        "bodies[2].geometries[0].radius",
        "bodies[2].geometries[0].size",
        "bodies[2].geometries[0].material",
        "bodies[3].geometries[0].size",
        "bodies[3].geometries[1].shape",
        "grids[0].counts[1]",
    ]
    for field_path in expected:
        assert any(names_path(p, field_path) for p in problems), f"{field_path} missing from {problems}"
    assert len(problems) == len(expected), problems


def test_messages_give_value_and_allowed_values():
    with pytest.raises(SceneError) as info:
        scene_from_yaml("contact_model: soft\nsolver: {sigmaa: 1}\ntime_step: -1\n", source="s.yaml")
    text = str(info.value)
    assert "'soft'" in text and "'sap', 'lagged' or 'similar'" in text  # bad value and the allowed set
    assert "did you mean 'sigma'?" in text and "allowed keys here:" in text
    assert "(got -1)" in text and "[s]" in text  # value and unit of time_step
    assert "s.yaml:1: contact_model" in text  # file and line number


def test_unreadable_and_invalid_yaml_files(tmp_path):
    assert "cannot read" in validate_scene_file(tmp_path / "missing.yaml")[0]
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nbodies: [\n  {name: a\n", encoding="utf-8")
    (problem,) = validate_scene_file(broken)
    assert problem.startswith(f"{broken}:") and "invalid YAML" in problem
    top = tmp_path / "list.yaml"
    top.write_text("- 1\n- 2\n", encoding="utf-8")
    assert "mapping" in validate_scene_file(top)[0]


def test_near_unit_quaternion_is_normalized_and_far_one_rejected():
    ok = scene_from_yaml("bodies: [{name: b, mass: 1, quaternion: [1.0005, 0, 0, 0], geometries: [{shape: sphere, radius: 1}]}]")
    assert ok.bodies[0].quaternion == (1.0, 0.0, 0.0, 0.0)
    with pytest.raises(SceneError, match=r"bodies\[0\]\.quaternion"):
        scene_from_yaml("bodies: [{name: b, mass: 1, quaternion: [1.002, 0, 0, 0], geometries: [{shape: sphere, radius: 1}]}]")


def test_tree_hanging_from_a_free_body_points_to_a_free_joint():
    """A joint whose parent is a free body (not a link, not fixed) is refused at the joint's parent field,
    and the message says how a floating base is written (a 'free' joint from the world)."""
    text = """
bodies:
  - {name: base, mass: 1.0, inertia: [0.01, 0.01, 0.01]}
  - {name: arm, mass: 0.5, inertia: [0.01, 0.01, 0.01]}
joints:
  - {name: elbow, type: revolute, parent: base, child: arm, axis: [0, 1, 0]}
"""
    with pytest.raises(SceneError) as err:
        scene_from_yaml(text)
    msg = str(err.value)
    assert "joints[0].parent" in msg and "free body" in msg and "type 'free'" in msg
