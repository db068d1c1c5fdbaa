"""URDF import of floating robots and mimic joints (convexsim.scene.urdf): a root link named 'world',
`floating` joints, the floating_base option, `<mimic>` as a coupler, and the refusals (planar joints,
floating joints away from the root) as one message naming the element."""

from __future__ import annotations

import numpy as np
import pytest

from convexsim.cli import EXIT_OK, main
from convexsim.scene import load_scene, validate_scene_file
from convexsim.scene.urdf import urdf_to_scene
from convexsim.simulate import prepare
from convexsim.spatial import quat_to_matrix
from convexsim.stepping import StepContext, step

G = 9.81

BASE_INERTIAL = ('<inertial><origin xyz="0 0 0.01"/><mass value="3"/>'
                 '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.02"/></inertial>')


def _arm_text(repo, base_inertial: bool = True) -> str:
    text = (repo / "scenes" / "robots" / "two_link_arm.urdf").read_text(encoding="utf-8")
    return text.replace('<link name="base">', '<link name="base">' + BASE_INERTIAL) if base_inertial else text


def _run(scene, duration: float, solver: str | None = None):
    model, state, _ = prepare(scene, solver=solver)
    ctx = StepContext()
    states = [state]
    for _ in range(round(duration / model.time_step)):
        state, _info = step(model, state, ctx, strict=True)
        states.append(state)
    return model, states


def _joint(scene: dict, name: str) -> dict:
    return next(j for j in scene["joints"] if j["name"] == name)


def test_floating_base_falls_freely_and_its_joints_keep_their_angles(repo):
    """Equivalence principle: a floating robot with no contacts and no initial velocity falls as one rigid
    body: every body accelerates at g, so gravity exerts no torque about any joint and the bent arm keeps
    its joint angles (to round-off: 1e-10 rad over 0.5 s). The base's height follows the discrete free fall
    of the symplectic Euler step, z_n = z_0 − g·dt²·n(n+1)/2, to 1e-9 m (round-off only)."""
    scene = urdf_to_scene("arm.urdf", text=_arm_text(repo), floating_base=True)
    free = scene["joints"][0]
    assert free["type"] == "free" and free["parent"] == "world" and free["child"] == "base"
    assert free["initial_position"] == [0.0, 0.0, 0.01, 1.0, 0.0, 0.0, 0.0]      # base COM, link frame at 0
    _joint(scene, "shoulder")["initial_position"] = 0.7
    _joint(scene, "elbow")["initial_position"] = -0.4
    model, states = _run(scene, 0.5)
    dt = model.time_step
    q = np.array([s.tree_q for s in states])
    tree = model.forest.trees[0].model
    free_adr, sh_adr, el_adr = (int(a) for a in tree.joint_qadr)
    np.testing.assert_allclose(q[:, sh_adr], 0.7, atol=1e-10)
    np.testing.assert_allclose(q[:, el_adr], -0.4, atol=1e-10)
    n = np.arange(len(states))
    np.testing.assert_allclose(q[:, free_adr + 2], 0.01 - G * dt * dt * n * (n + 1) / 2, atol=1e-9)
    assert q[-1, free_adr + 2] < -1.0                                              # it did fall


def test_world_link_fixed_joint_welds_the_base_like_the_default(repo):
    """A root link 'world' is the world: 'base' attached to it by a fixed joint at the origin is the same
    fixed body as the default import of the same robot, and the arm swings identically (to round-off)."""
    text = _arm_text(repo, base_inertial=False)
    with_world = text.replace('<link name="base">', '<link name="world"/>\n  <joint name="weld" type="fixed">'
                              '<parent link="world"/><child link="base"/></joint>\n  <link name="base">')
    scene = urdf_to_scene("w.urdf", text=with_world)
    assert [b["name"] for b in scene["bodies"]] == ["base", "upper_arm", "forearm"]
    assert scene["bodies"][0]["fixed"] and "weld" not in [j["name"] for j in scene["joints"]]
    default = urdf_to_scene("d.urdf", text=text)
    for s in (scene, default):
        _joint(s, "shoulder")["initial_position"] = 1.0
    _, a = _run(scene, 0.2)
    _, b = _run(default, 0.2)
    np.testing.assert_allclose(a[-1].tree_q, b[-1].tree_q, atol=1e-12)
    assert abs(a[-1].tree_q[0] - 1.0) > 0.05                                        # it swung


def test_world_link_floating_joint_starts_the_free_base_at_the_joint_pose(repo):
    """A floating joint from 'world' (origin xyz, rpy) makes 'base' a free body whose COM starts at
    p + R·c (c: the inertial origin in the link frame) with orientation R."""
    text = _arm_text(repo).replace('<link name="base">', '<link name="world"/>\n  <joint name="float" '
                                   'type="floating"><parent link="world"/><child link="base"/>'
                                   '<origin xyz="0.3 -0.2 2.0" rpy="0.1 0.2 0.5"/></joint>\n  <link name="base">')
    scene = urdf_to_scene("f.urdf", text=text)
    free = _joint(scene, "float")
    assert free["type"] == "free" and free["parent"] == "world"
    p, quat = np.array(free["initial_position"][:3]), np.array(free["initial_position"][3:])
    from convexsim.scene.urdf import rpy_to_matrix
    R = rpy_to_matrix(0.1, 0.2, 0.5)
    np.testing.assert_allclose(quat_to_matrix(quat), R, atol=1e-12)
    np.testing.assert_allclose(p, np.array([0.3, -0.2, 2.0]) + R @ np.array([0.0, 0.0, 0.01]), atol=1e-12)
    model, states = _run(scene, 0.05)
    base = model.body_names.index("base")
    np.testing.assert_allclose(states[0].q[base, :3], p, atol=1e-12)


def test_mimic_joint_is_a_coupler_the_lcp_holds_rigidly(repo):
    """<mimic joint='shoulder' multiplier='-0.5' offset='0.1'/> on the elbow becomes the coupler
    q_elbow = −0.5·q_shoulder + 0.1. The LCP stepper treats couplers as rigid equalities, so along a swing
    the relation holds to the solver's round-off (1e-9 rad) while the shoulder moves by tenths of a radian."""
    text = _arm_text(repo, base_inertial=False).replace(
        '<axis xyz="0 1 0"/>\n  </joint>\n</robot>',
        '<axis xyz="0 1 0"/>\n    <mimic joint="shoulder" multiplier="-0.5" offset="0.1"/>\n  </joint>\n</robot>')
    scene = urdf_to_scene("m.urdf", text=text)
    assert scene["constraints"] == [{"type": "coupler", "name": "elbow_mimic", "joint": "elbow",
                                     "reference": "shoulder", "ratio": -0.5, "offset": 0.1}]
    _joint(scene, "shoulder")["initial_position"] = 1.0
    _joint(scene, "elbow")["initial_position"] = -0.4
    model, states = _run(scene, 0.3, solver="lcp")
    tree = model.forest.trees[0].model
    sh, el = (int(a) for a in tree.joint_qadr)
    q = np.array([s.tree_q for s in states[1:]])
    np.testing.assert_allclose(q[:, el], -0.5 * q[:, sh] + 0.1, atol=1e-9)
    assert np.ptp(q[:, sh]) > 0.1


FLOAT_BAD = {
    "planar": ('type="revolute"', 'type="planar"', "planar joints are not imported; model one as two prismatic"),
    "floating_off_root": ('type="continuous"', 'type="floating"', "a floating joint must hang from the root link"),
    "mimic_unknown": ('<axis xyz="0 1 0"/>\n  </joint>\n</robot>',
                      '<axis xyz="0 1 0"/><mimic joint="wrist"/>\n  </joint>\n</robot>',
                      "<mimic>: joint must name a joint of the robot, got 'wrist'"),
    "world_geometry": ('<link name="base">',
                       '<link name="world"><collision><geometry><sphere radius="1"/></geometry></collision></link>'
                       '<joint name="w" type="fixed"><parent link="world"/><child link="base"/></joint>'
                       '<link name="base">', "the root link 'world' is the world and carries no geometry"),
}


@pytest.mark.parametrize("case", sorted(FLOAT_BAD))
def test_bad_floating_and_mimic_urdf_is_one_error_naming_the_element(repo, tmp_path, case):
    old, new, message = FLOAT_BAD[case]
    text = _arm_text(repo, base_inertial=False)
    assert old in text
    f = tmp_path / f"{case}.urdf"
    f.write_text(text.replace(old, new, 1), encoding="utf-8")
    problems = validate_scene_file(f)
    assert len(problems) == 1, problems
    assert str(f) in problems[0] and message in problems[0], problems


def test_floating_base_needs_the_root_inertia_and_not_a_world_root(repo):
    with pytest.raises(ValueError, match="link 'base' <inertial>: a moving link needs <inertial>"):
        urdf_to_scene("a.urdf", text=_arm_text(repo, base_inertial=False), floating_base=True)
    text = _arm_text(repo).replace('<link name="base">', '<link name="world"/><joint name="w" type="fixed">'
                                   '<parent link="world"/><child link="base"/></joint><link name="base">')
    with pytest.raises(ValueError, match="floating_base does not apply: the root link is the world"):
        urdf_to_scene("b.urdf", text=text, floating_base=True)


def test_import_urdf_floating_base_option_writes_a_free_base(repo, tmp_path):
    src = tmp_path / "arm.urdf"
    src.write_text(_arm_text(repo), encoding="utf-8")
    out = tmp_path / "arm.yaml"
    assert main(["import-urdf", str(src), "--floating-base", "--out", str(out)]) == EXIT_OK
    spec = load_scene(out)
    assert spec.joints[0].type == "free" and spec.joints[0].child == "base"
    assert not next(b for b in spec.bodies if b.name == "base").fixed
