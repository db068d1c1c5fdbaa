"""MJCF import (convexsim.scene.mjcf) against MuJoCo's own compiled model: masses, inertias, joint frames,
axes and limits; contact-free motion of an imported free body and pendulum against MuJoCo's simulation of
the same file; default classes and <include>; actuators and equalities; refusals, one message per problem
naming the element."""

from __future__ import annotations

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from convexsim.cli import EXIT_OK, EXIT_USAGE, main  # noqa: E402
from convexsim.scene import SceneError, SceneWarning, load_scene  # noqa: E402
from convexsim.scene.mjcf import MjcfError, mjcf_to_scene  # noqa: E402
from convexsim.simulate import simulate  # noqa: E402
from convexsim.spatial import quat_to_matrix  # noqa: E402

# A tree with every joint kind: a hinge (limited, damped, class default) carrying a slide carrying a ball,
# a jointless body welded to the hinge's link (merged into it), a free body, a static body, all masses and
# inertias from geoms at MuJoCo's density, the arm in a second file included from the first.
ARM = """<mujoco>
  <body name="upper" pos="0 0 1.2" euler="0 20 10">
    <joint name="shoulder" type="hinge" axis="0 1 0.2" pos="0 0 0.05" class="arm" range="-60 45"/>
    <geom type="capsule" size="0.04 0.15" pos="0 0 -0.15"/>
    <geom type="sphere" size="0.3" contype="0" conaffinity="0" mass="0"/>
    <body name="bracket" pos="0.05 0 -0.3" euler="30 0 0">
      <geom type="box" size="0.05 0.02 0.03" pos="0.02 0 0"/>
    </body>
    <body name="slider" pos="0 0 -0.35">
      <joint name="extend" type="slide" axis="1 0 0" range="-0.1 0.2" damping="0.3" armature="0.01"/>
      <geom type="cylinder" size="0.03 0.05" euler="90 0 0"/>
      <body name="hand" pos="0 0 -0.1">
        <joint name="wrist" type="ball"/>
        <geom type="box" size="0.03 0.04 0.05" pos="0.01 0 -0.03"/>
      </body>
    </body>
  </body>
</mujoco>"""

MAIN = """<mujoco model="tree">
  <option timestep="0.001" gravity="0 0 -9.81"/>
  <default><default class="arm"><joint damping="0.05"/></default></default>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1" friction="0.8"/>
    <body name="post" pos="0.5 0.5 0.2"><geom type="box" size="0.05 0.05 0.2"/></body>
    <include file="arm.xml"/>
    <body name="ball" pos="1 0 2" euler="10 20 30"><freejoint name="float"/>
      <geom type="sphere" size="0.1" pos="0.02 0 0"/><geom type="box" size="0.05 0.05 0.05" pos="-0.05 0 0"/>
    </body>
  </worldbody>
</mujoco>"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mjcf")
    (folder / "arm.xml").write_text(ARM, encoding="utf-8")
    (folder / "tree.xml").write_text(MAIN, encoding="utf-8")
    path = folder / "tree.xml"
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)
    return path, m, d


def _body(m, name):
    return mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, name)


def test_masses_inertias_axes_and_limits_equal_mujocos(tree):
    """Each link's mass, world-frame centre of mass and inertia at t = 0 (convexsim's kinematics of the
    imported joints) equal MuJoCo's compiled model at qpos0 to round-off (1e-12 relative); the body welded
    without a joint is merged (mass sum, parallel-axis inertia); joint axes in the world and limits equal
    MuJoCo's (degrees converted by MuJoCo's compiler)."""
    path, m, d = tree
    spec = load_scene(path)
    traj = simulate(spec, duration=spec.time_step)             # frame 0: the imported initial pose
    byname = {b.name: b for b in spec.bodies}
    for name, members in (("upper", ["upper", "bracket"]), ("slider", ["slider"]), ("hand", ["hand"]),
                          ("ball", ["ball"])):
        ids = [_body(m, n) for n in members]
        mass = sum(m.body_mass[i] for i in ids)
        com = sum(m.body_mass[i] * d.xipos[i] for i in ids) / mass
        I_w = np.zeros((3, 3))
        for i in ids:
            R, r = d.ximat[i].reshape(3, 3), d.xipos[i] - com
            I_w += R @ np.diag(m.body_inertia[i]) @ R.T + m.body_mass[i] * (r @ r * np.eye(3) - np.outer(r, r))
        k = traj.body_index(name)
        R_wb = quat_to_matrix(traj.quaternion[0, k])
        assert byname[name].mass == pytest.approx(mass, rel=1e-12)
        np.testing.assert_allclose(traj.position[0, k], com, atol=1e-12)
        I_imported = R_wb @ np.asarray(byname[name].inertia) @ R_wb.T
        np.testing.assert_allclose(I_imported, I_w, atol=1e-12 * np.abs(I_w).max())
        if name == "upper":        # the merged body really adds something
            assert mass > m.body_mass[ids[0]] * 1.01
    post = byname["post"]
    assert post.fixed and np.allclose(post.position, d.xpos[_body(m, "post")])
    joints = {j.name: j for j in spec.joints}
    for jname in ("shoulder", "extend"):
        j = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, jname)
        child = traj.body_index(joints[jname].child)
        R_wb = quat_to_matrix(traj.quaternion[0, child])
        axis = np.asarray(joints[jname].axis) / np.linalg.norm(joints[jname].axis)
        np.testing.assert_allclose(R_wb @ axis, d.xaxis[j], atol=1e-12)
        assert (joints[jname].lower, joints[jname].upper) == tuple(m.jnt_range[j])
        assert joints[jname].damping == m.dof_damping[m.jnt_dofadr[j]]
    assert joints["shoulder"].damping == 0.05                 # from the default class
    assert joints["shoulder"].lower == pytest.approx(-np.pi / 3, rel=1e-15)
    assert joints["extend"].armature == 0.01
    assert joints["wrist"].type == "ball" and joints["float"].type == "free"
    shapes = sorted(g.shape for b in spec.bodies for g in b.geometries)
    assert shapes.count("halfspace") == 1 and spec.materials["friction_0p8"].friction == 0.8
    assert "sphere" not in [g.shape for g in byname["upper"].geometries]        # the visual-only geom is skipped


def _run_mujoco(m, d, steps):
    out = np.empty((steps + 1, m.nbody, 3))
    out[0] = d.xipos
    for k in range(steps):
        mujoco.mj_step(m, d)
        mujoco.mj_kinematics(m, d)
        out[k + 1] = d.xipos
    return out


PENDULUM = """<mujoco model="pendulum">
  <option timestep="0.001"/>
  <worldbody>
    <body name="link" pos="0 0 1" euler="0 50 0">
      <joint name="hinge" type="hinge" axis="0 1 0"/>
      <geom type="capsule" size="0.03 0.25" pos="0.02 0 -0.25"/>
      <geom type="box" size="0.05 0.05 0.05" pos="0 0.01 -0.5"/>
    </body>
    <body name="rock" pos="1 0 2" euler="10 20 30"><freejoint/>
      <geom type="box" size="0.1 0.05 0.02" pos="0.03 0 0"/>
    </body>
  </worldbody>
</mujoco>"""


def test_pendulum_and_free_fall_match_mujoco(tmp_path):
    """Released from the file's pose, the imported pendulum (off-axis centre of mass, two geoms) and a free
    body follow MuJoCo's contact-free motion of the same file over 0.5 s at dt = 1 ms. Both steps are
    semi-implicit Euler for an unconstrained tree (v⁺ = v + dt·M⁻¹(τ − h), q⁺ = q ⊕ dt·v⁺; MuJoCo's default
    integrator), so they differ by round-off only, not by O(dt) (measured: 3e-16 m; bound 1e-10 m for other
    machines' round-off over 500 steps). The O(dt) difference to the exact motion is much larger: against
    MuJoCo at dt = 0.1 ms the bob is 4.6e-4 m away after 0.5 s (asserted between 1e-5 and 1e-2 m), so the
    bound would catch a step that is not the same first-order scheme."""
    path = tmp_path / "pendulum.xml"
    path.write_text(PENDULUM, encoding="utf-8")
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)
    steps = 500
    ref = _run_mujoco(m, d, steps)
    traj = simulate(str(path), duration=steps * 1e-3)
    for name in ("link", "rock"):
        b, k = _body(m, name), traj.body_index(name)
        np.testing.assert_allclose(traj.position[:, k], ref[:, b], atol=1e-10)
    link = _body(m, "link")
    assert np.linalg.norm(ref[-1, link] - ref[0, link]) > 0.3                 # it swings
    fine = mujoco.MjModel.from_xml_path(str(path))
    fine.opt.timestep = 1e-4
    dfine = mujoco.MjData(fine)
    exact = _run_mujoco(fine, dfine, 10 * steps)[-1, link]
    err = np.linalg.norm(traj.position[-1, traj.body_index("link")] - exact)
    assert 1e-5 < err < 1e-2                                                   # O(dt) away from the exact motion
    rock, n = traj.body_index("rock"), steps          # the discrete free fall of semi-implicit Euler
    assert len(traj.time) == n + 1
    np.testing.assert_allclose(traj.position[-1, rock, 2] - traj.position[0, rock, 2],
                               -9.81 * 1e-6 * n * (n + 1) / 2, atol=1e-9)


ACTUATED = """<mujoco model="act">
  <worldbody>
    <body name="a" pos="0 0 1"><joint name="ja" type="hinge" axis="0 0 1"/><geom type="box" size="0.1 0.02 0.02"/>
      <body name="b" pos="0.2 0 0"><joint name="jb" type="hinge" axis="0 0 1"/><geom type="box" size="0.1 0.02 0.02"/>
      </body>
    </body>
    <body name="c" pos="1 0 1"><freejoint/><geom type="sphere" size="0.05"/></body>
  </worldbody>
  <equality><joint joint1="jb" joint2="ja" polycoef="0.1 -2 0 0 0"/><weld body1="c"/></equality>
  <actuator>
    <position joint="ja" kp="50" kv="2" forcerange="-4 4" ctrlrange="0.2 1" gear="2"/>
  </actuator>
</mujoco>"""


def test_actuators_and_equalities(tmp_path):
    """A geared position servo → a PD actuator on the joint (kp·g², kv·g², target clamp(0, ctrlrange)/g,
    effort g·F); a linear joint equality → a coupler q_jb = 0.1 − 2 q_ja; a weld to the world → a weld;
    and the PD holds the joint where MuJoCo's servo would: at its target (the hinges are vertical, so gravity
    loads neither joint and the coupler none at rest), while the coupler holds q_jb = 0.1 − 2 q_ja."""
    path = tmp_path / "act.xml"
    path.write_text(ACTUATED, encoding="utf-8")
    scene = mjcf_to_scene(path)
    assert scene["actuators"] == [{"joint": "ja", "kp": 200.0, "kd": 8.0, "target": 0.1, "effort": 8.0}]
    assert scene["constraints"][0] == {"type": "coupler", "name": "coupler0", "joint": "jb", "reference": "ja",
                                       "ratio": -2.0, "offset": 0.1}
    assert scene["constraints"][1] == {"type": "weld", "name": "weld1", "body_a": "world", "body_b": "c"}
    traj = simulate(str(path), duration=0.5)
    assert not traj.failure
    c = traj.body_index("c")
    np.testing.assert_allclose(traj.position[-1, c], traj.position[0, c], atol=1e-4)   # welded: does not fall
    q_a, q_b = _hinge_angles(traj, "a"), _hinge_angles(traj, "b") - _hinge_angles(traj, "a")
    # Measured at t = 0.5 s: q_ja − 0.1 = −2.9e-7 (the servo's decay, kp = 200, kv = 8 on ≈ 1e-3 kg·m²) and
    # a coupler residual of 5.5e-13 rad (it starts violated by 0.1 rad); bounds ≈ 30x and 200x that.
    assert abs(q_a[-1] - 0.1) < 1e-5                                   # the PD holds its target
    assert abs(q_b[-1] - (0.1 - 2.0 * q_a[-1])) < 1e-10                # the coupler holds
    assert abs(q_b[0] - (0.1 - 2.0 * q_a[0])) > 0.05                   # ... which the initial state violated


def _hinge_angles(traj, body: str) -> np.ndarray:
    """World rotation angle [rad] about z of a body turning about vertical hinges (every frame)."""
    quat = traj.quaternion[:, traj.body_index(body)]
    return 2.0 * np.arctan2(quat[:, 3], quat[:, 0])


REFUSED = {
    "ellipsoid": ('<body><freejoint/><geom type="ellipsoid" size="0.1 0.2 0.3"/></body>', "ellipsoid"),
    "two joints": ('<body><joint type="hinge"/><joint type="slide"/><geom size="0.1"/></body>', "2 joints in one body"),
    "activation dynamics": ('<body><joint name="j" type="hinge"/><geom size="0.1"/></body>', "only motors",
                            '<actuator><general joint="j" dyntype="integrator"/></actuator>'),
    "ref": ('<body><joint type="hinge" ref="10"/><geom size="0.1"/></body>', "ref = 0.174533"),
    "frictionloss": ('<body><joint type="ball" frictionloss="1"/><geom size="0.1"/></body>', "frictionloss on a ball"),
    "connect": ('<body name="x"><freejoint/><geom size="0.1"/></body>', "connect equality constraints",
                '<equality><connect body1="x" anchor="0 0 0"/></equality>'),
    "plane on a moving body": ('<body><freejoint/><geom type="plane" size="1 1 1"/><geom size="0.1"/></body>',
                               "plane only allowed in static bodies"),       # MuJoCo's compiler says it
    "asymmetric force": ('<body><joint name="j" type="hinge"/><geom size="0.1"/></body>', "not symmetric",
                         '<actuator><position joint="j" kp="1" forcerange="-1 2"/></actuator>'),
    "weld relpose": ('<body name="x"><freejoint/><geom size="0.1"/></body>', "relpose differs",
                     '<equality><weld body1="x" relpose="0 0 1 1 0 0 0"/></equality>'),
    "exclude": ('<body name="a"><freejoint/><geom size="0.1"/></body><body name="b" pos="1 0 0"><freejoint/>'
                '<geom size="0.1"/></body>', "contact exclusions between different trees",
                '<contact><exclude body1="a" body2="b"/></contact>'),
    "tendon": ('<body><joint name="j" type="hinge"/><geom size="0.1"/></body>', "on a fixed tendon are not imported",
               '<tendon><fixed name="t" stiffness="1"><joint joint="j" coef="1"/></fixed></tendon>'),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refusals_name_the_element_and_the_fix(tmp_path, case):
    body, needle, *extra = REFUSED[case]
    path = tmp_path / "bad.xml"
    path.write_text(f"<mujoco><worldbody>{body}</worldbody>{''.join(extra)}</mujoco>", encoding="utf-8")
    with pytest.raises(MjcfError) as err:
        mjcf_to_scene(path)
    assert len(err.value.problems) == 1 and needle in err.value.problems[0]
    assert err.value.problems[0].startswith(f"{path}: ")


def test_mesh_geom_is_its_convex_hull(tmp_path):
    """A mesh geom becomes the convex hull of MuJoCo's scaled mesh (an interior vertex dropped), posed so
    that the hull's volume times MuJoCo's density is the body mass MuJoCo computed (1e-7 relative: MuJoCo keeps
    mesh vertices in float32) and its
    centroid is the body's centre of mass."""
    from scipy.spatial import ConvexHull
    (tmp_path / "wedge.obj").write_text(
        "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nv 1 1 0\nv 0.1 0.1 0.1\n"
        "f 1 3 5\nf 1 5 2\nf 1 2 4\nf 1 4 3\nf 2 5 4\nf 3 4 5\n", encoding="utf-8")
    path = tmp_path / "mesh.xml"
    path.write_text('<mujoco><asset><mesh name="w" file="wedge.obj" scale="0.1 0.2 0.3"/></asset><worldbody>'
                    '<body name="w" pos="0 0 1" euler="10 0 0"><freejoint/><geom type="mesh" mesh="w" density="700"/>'
                    '</body></worldbody></mujoco>', encoding="utf-8")
    scene = mjcf_to_scene(path)
    m = mujoco.MjModel.from_xml_path(str(path))
    body = scene["bodies"][0]
    g = body["geometries"][0]
    assert g["shape"] == "mesh" and len(g["vertices"]) == 5
    R = quat_to_matrix(np.array(g["quaternion"]))
    pts = np.asarray(g["vertices"]) @ R.T + g["position"]             # in the body (COM) frame
    hull = ConvexHull(pts)
    assert body["mass"] == m.body_mass[1]
    assert hull.volume * 700 == pytest.approx(m.body_mass[1], rel=1e-7)   # MuJoCo stores vertices in float32
    apex = pts.mean(axis=0)                  # the centroid of the hull: a cone of tetrahedra from an inner point
    vols = np.array([abs(np.linalg.det(pts[f] - apex)) / 6 for f in hull.simplices])
    cents = np.array([(pts[f].sum(axis=0) + apex) / 4 for f in hull.simplices])
    np.testing.assert_allclose(vols @ cents / vols.sum(), 0.0, atol=1e-8)    # float32 vertices of a 0.3 m mesh


def test_import_mjcf_cli(tmp_path, capsys, tree):
    """`convexsim import-mjcf FILE -o scene.yaml` writes a scene that validates without MuJoCo's help;
    a file that cannot be imported is one message and exit 2."""
    path = tree[0]
    out = tmp_path / "tree.yaml"
    assert main(["import-mjcf", str(path), "-o", str(out)]) == EXIT_OK
    assert main(["validate", str(out)]) == EXIT_OK
    assert "mujoco" not in out.read_text(encoding="utf-8").split("\n", 1)[1].lower()
    bad = tmp_path / "bad.xml"
    bad.write_text('<mujoco><worldbody><body><freejoint/><geom type="ellipsoid" size="1 2 3"/></body>'
                   '</worldbody></mujoco>', encoding="utf-8")
    capsys.readouterr()
    assert main(["import-mjcf", str(bad)]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ellipsoid" in err[0]
    with pytest.raises(SceneError):
        load_scene(bad)
    # MuJoCo's compiler error spans lines (message, element and line, blank lines): one line here as well
    # (found by tests/fuzz/test_fuzz_mjcf.py: an actuator naming a default class that was removed).
    bad.write_text('<mujoco><worldbody><body><joint name="j"/><geom size="0.1"/></body></worldbody>'
                   '<actuator><position class="gone" joint="j"/></actuator></mujoco>', encoding="utf-8")
    assert main(["import-mjcf", str(bad)]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "MuJoCo cannot compile" in err[0] and "'gone'" in err[0] and "line 1" in err[0], err


SERVO = """<mujoco model="servo">
  <option timestep="0.001"/>
  <worldbody>
    <body name="arm" pos="0 0 1" euler="0 70 0">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.05"/>
      <geom type="capsule" size="0.02 0.2" pos="0 0 -0.2" mass="0.5"/>
    </body>
  </worldbody>
  <actuator><position joint="hinge" kp="4" kv="0.5" gear="1.5" ctrlrange="0.2 1" forcerange="-5 5"/></actuator>
</mujoco>"""


def test_position_servo_settles_where_mujocos_does(tmp_path):
    """A geared position servo holding a tilted arm against gravity: MuJoCo clamps ctrl = 0 into ctrlrange
    (0.2) and applies g·kp·(ctrl − g·q) − g²·kv·q̇; the imported PD (kp·g², kv·g², target 0.2/g) must come to
    the same equilibrium kp·g·(ctrl − g·q) = τ_gravity(q). The equilibrium does not depend on the integrator,
    so after 3 s of settling both agree to 1e-6 rad (measured 9e-8: 0.029840 rad), and the angle is really
    deflected (0.10 rad from the target 0.133 rad)."""
    path = tmp_path / "servo.xml"
    path.write_text(SERVO, encoding="utf-8")
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    for _ in range(3000):
        mujoco.mj_step(m, d)
    traj = simulate(str(path), duration=3.0, record_every=3000)
    q_mj = float(d.qpos[0])
    # convexsim's joint angle from the arm's orientation: rotation about y relative to the start
    R0, R1 = (quat_to_matrix(traj.quaternion[i, traj.body_index("arm")]) for i in (0, -1))
    rel = R0.T @ R1
    q_cs = float(np.arctan2(rel[0, 2], rel[0, 0]))
    assert abs(q_cs - q_mj) < 1e-6
    assert abs(q_mj - 0.2 / 1.5) > 0.05


def test_mujocos_compile_warnings_are_scene_warnings_not_a_log_file(tmp_path, monkeypatch):
    """MuJoCo's default warning handler appends to MUJOCO_LOG.TXT in the working folder; the importer routes what
    MuJoCo warns while compiling (here: a hinge whose own inertia, 1e-5, is lost to round-off beside its child's
    1e12 about the same axis, so M's pivot at qpos0 is below mjMINVAL) to a SceneWarning naming the file, and
    restores MuJoCo's handler."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "heavy.xml"
    path.write_text('<mujoco><worldbody><body><joint name="a" axis="0 0 1"/>'
                    '<inertial pos="0 0 0" mass="1e-5" diaginertia="1e-5 1e-5 1e-5"/>'
                    '<body><joint name="b" axis="0 0 1"/>'
                    '<inertial pos="0 0 0" mass="1e12" diaginertia="1e12 1e12 1e12"/>'
                    '</body></body></worldbody></mujoco>', encoding="utf-8")
    before = mujoco.get_mju_user_warning()
    with pytest.warns(SceneWarning, match=r"heavy\.xml: MuJoCo warned while compiling it: Inertia matrix"):
        mjcf_to_scene(path)
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
    assert mujoco.get_mju_user_warning() is before
