"""MuJoCo Menagerie robots as published (tests/data/menagerie: iiwa 14, Panda with its hand and tendon, A1) import
from their scene.xml and run; without contact their links follow MuJoCo's own simulation of the same file, and
the A1 standing on its home keyframe keeps MuJoCo's trunk height.

The vendored files lack only geometry whose files are not vendored (visual-only geoms everywhere; the Panda's
mesh collision geoms, whose STL files could not be obtained): the comparisons run without contact, or (the
A1) on primitive feet, and every inertia in these files is explicit, so none of that changes the motion.

What "follow" can mean: both engines take dt = 2 ms steps of first-order schemes. MuJoCo's implicitfast
(the arms) treats the velocity terms (damping, servo kv) implicitly and the servo's position term explicitly;
convexsim's PD row is implicit in both (q = q0 + dt v), and its couplers are near-rigid SAP rows where MuJoCo's
equality is soft (solref 5 ms). Those O(dt) differences, not round-off, set the bounds below (stated with the
measured agreement).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from convexsim.cli import EXIT_OK, main  # noqa: E402
from convexsim.scene.mjcf import MjcfError, mjcf_to_scene, model_to_scene, scene_body_members  # noqa: E402
from convexsim.simulate import simulate  # noqa: E402
from convexsim.tools.compare_engines.mjcf_runs import mujoco_coms, mujoco_start  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "menagerie"
IIWA, PANDA, A1 = DATA / "kuka_iiwa_14" / "scene.xml", DATA / "franka_emika_panda" / "scene.xml", DATA / "unitree_a1" / "scene.xml"


def _mujoco_coms(m, key: str | None, duration: float, names: list[str]) -> np.ndarray:
    """(T+1, len(names), 3) world centres of mass of the scene bodies ``names`` over MuJoCo's run."""
    members = scene_body_members(m)
    groups = [members[n] for n in names]
    d = mujoco_start(m, key)
    out = []
    for k in range(int(round(duration / m.opt.timestep)) + 1):
        if k:
            mujoco.mj_step(m, d)
            mujoco.mj_kinematics(m, d)          # mj_step leaves the poses of the step's start in d
        out.append(mujoco_coms(m, d, groups))
    return np.array(out)


def _compare(m, key: str | None, duration: float):
    """(max COM distance [m] over the run and the links, largest COM excursion in MuJoCo's run [m])."""
    scene = model_to_scene(m, "menagerie", keyframe=key)
    moving = [b["name"] for b in scene["bodies"] if not b.get("fixed")]
    ref = _mujoco_coms(m, key, duration, moving)
    traj = simulate(scene, duration=duration)
    ours = traj.position[:, [traj.body_index(n) for n in moving]]
    assert ours.shape == ref.shape
    return float(np.linalg.norm(ours - ref, axis=2).max()), float(np.linalg.norm(ref - ref[0], axis=2).max())


def _a1_legs_hanging(friction_time_constant: float | None = None):
    """a1.xml (no floor) with the trunk welded to the world (its free joint removed) and the leg servos removed,
    legs at the home keyframe: a passive swing under gravity with joint damping (1–2 N·m·s/rad), armature and
    dry friction (0.2 N·m). The legs swing under the trunk and pass through each other: MuJoCo's contacts
    are switched off, and the imported scene's geometry is dropped (masses and inertias are explicit)."""
    spec = mujoco.MjSpec.from_file(str(A1.parent / "a1.xml"))
    for a in list(spec.actuators):
        spec.delete(a)
    for j in list(spec.body("trunk").joints):
        spec.delete(j)
    for k in list(spec.keys):
        k.qpos, k.ctrl = list(k.qpos)[7:], []
    m = spec.compile()
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    if friction_time_constant is not None:
        m.dof_solref[:, 0] = friction_time_constant
    return m


@pytest.mark.parametrize("path", [IIWA, PANDA, A1], ids=["iiwa14", "panda", "a1"])
def test_published_scene_files_import(path):
    """scene.xml (the file Menagerie tells users to load) imports, from qpos0 and from its home keyframe."""
    for key in (None, "home"):
        scene = mjcf_to_scene(path, keyframe=key)
        assert scene["joints"] and scene["actuators"]
        assert ("keyframe 'home'" in scene["description"]) == (key == "home")
        assert any(g["shape"] == "halfspace" for b in scene["bodies"] for g in b["geometries"])   # the floor


def test_panda_fingers_tendon_servo_and_coupler():
    """The finger tendon L = (q1 + q2)/2 with q1 = q2 (the joint equality) is a servo on finger_joint2 with
    gear Σ c_i ρ_i = 1: kp 100, kv 10, effort 100 N, the home target L_d = 0.0157·255/100 = 0.04 m."""
    scene = mjcf_to_scene(PANDA, keyframe="home")
    fingers = [a for a in scene["actuators"] if a["joint"] == "finger_joint2"]
    assert len(fingers) == 1
    f = fingers[0]
    assert (f["kp"], f["kd"], f["effort"]) == (100.0, 10.0, 100.0)
    assert f["target"] == pytest.approx(0.04, rel=1e-9)
    (c,) = scene["constraints"]
    assert (c["joint"], c["reference"], c["ratio"], c["offset"]) == ("finger_joint1", "finger_joint2", 1.0, 0.0)


def test_a1_joint_friction_and_floating_base_from_keyframe():
    scene = mjcf_to_scene(A1, keyframe="home")
    legs = [j for j in scene["joints"] if j["type"] == "revolute"]
    assert len(legs) == 12 and all(j["friction"] == 0.2 for j in legs)
    free = next(j for j in scene["joints"] if j["type"] == "free")
    m = mujoco.MjModel.from_xml_path(str(A1))
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    mujoco.mj_kinematics(m, d)
    trunk = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "trunk")
    np.testing.assert_allclose(free["initial_position"][:3], d.xipos[trunk], atol=1e-12)


def test_import_mjcf_keyframe_cli(tmp_path, capsys):
    out = tmp_path / "iiwa.yaml"
    assert main(["import-mjcf", str(IIWA), "--keyframe", "home", "-o", str(out)]) == EXIT_OK
    assert "starting from keyframe 'home'" in out.read_text(encoding="utf-8").splitlines()[0]
    with pytest.raises(MjcfError, match="the file's keyframes: \\['home'\\]"):
        mjcf_to_scene(IIWA, keyframe="rest")


def test_motors_are_zero_torque_inputs(tmp_path):
    """A <motor> is a torque input (scene ``motors``): zero torque, effort from ctrlrange × gear and
    forcerange; the joint then swings freely as in MuJoCo (ctrl 0)."""
    path = tmp_path / "motor.xml"
    path.write_text("""<mujoco><option timestep="0.001"/><worldbody>
      <body name="arm" pos="0 0 1"><joint name="j" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02"/></body></worldbody>
      <actuator><motor joint="j" gear="2" ctrlrange="-3 3" forcerange="-5 5"/></actuator></mujoco>""")
    scene = mjcf_to_scene(path)
    assert scene["motors"] == [{"joint": "j", "torque": 0.0, "effort": 6.0}]
    err, moved = _compare(mujoco.MjModel.from_xml_path(str(path)), None, 0.3)
    assert moved > 0.05 and err < 1e-9          # free swing: both semi-implicit Euler, round-off apart


def test_a1_legs_swing_with_damping_and_friction_like_mujoco():
    """The A1's legs released from the home pose swing under the trunk against damping and friction, 2 s
    (every link's centre of mass; the legs move 0.14 m). MuJoCo regularizes the friction softly
    (solreffriction 0.02 s by default) where convexsim's row is near-rigid, so the runs part where joints stick
    and slip: 0.58 mm by 1.5 s, 1.3 mm at 2 s (bound 1 mm to 1.5 s, 2 mm to 2 s). With MuJoCo's friction at its
    stiffest (time constant 2·dt) they agree to 0.056 mm over 2 s (bound 0.1 mm), and without friction to
    round-off: the difference is the friction's regularization, nothing else."""
    for tc, bound_mid, bound_end in ((None, 1e-3, 2e-3), (2 * 0.002, 1e-4, 1e-4)):
        m = _a1_legs_hanging(tc)
        scene = model_to_scene(m, "a1 legs", keyframe="home")
        for b in scene["bodies"]:
            b["geometries"] = []
        moving = [b["name"] for b in scene["bodies"] if not b.get("fixed")]
        ref = _mujoco_coms(m, "home", 2.0, moving)
        traj = simulate(scene, duration=2.0)
        err = np.linalg.norm(traj.position[:, [traj.body_index(n) for n in moving]] - ref, axis=2).max(axis=1)
        assert np.linalg.norm(ref - ref[0], axis=2).max() > 0.1
        assert err[traj.time <= 1.5].max() < bound_mid and err.max() < bound_end, (tc, err.max())


def test_arms_hold_the_home_keyframe_like_mujoco():
    """iiwa 14 and Panda from their home keyframe with its ctrl, 2 s of the PD hold (the arms sag 22 mm and 7 mm into the servos' equilibrium): every link's centre of
    mass within 1 mm of MuJoCo's (measured: iiwa 0.19 mm, Panda 0.058 mm)."""
    for path in (IIWA, PANDA):
        err, moved = _compare(mujoco.MjModel.from_xml_path(str(path)), "home", 2.0)
        assert err < 1e-3, (path.parent.name, err, moved)


def test_a1_stands_on_its_home_keyframe_like_mujoco():
    """The A1 on the floor of scene.xml, legs PD-held at the home keyframe with joint friction, 2 s: its trunk
    (centre of mass) stays within 2 cm of MuJoCo's height at every step (measured: 14.9 mm at most; MuJoCo
    settles at 0.250 m, convexsim at 0.260 m, from 0.2695 m). The contact models differ (MuJoCo's soft feet,
    solimp 0.015, against convexsim's compliant point contact with the default material), which is what
    separates the heights; the bound is the issue's 2 cm."""
    m = mujoco.MjModel.from_xml_path(str(A1))
    ref = _mujoco_coms(m, "home", 2.0, ["trunk"])[:, 0, 2]
    traj = simulate(model_to_scene(m, "a1", keyframe="home"), duration=2.0)
    assert not traj.failure
    ours = traj.position[:, traj.body_index("trunk"), 2]
    assert np.max(np.abs(ours - ref)) < 0.02
    assert ours.min() > 0.2                                          # standing, not collapsed


def test_bench_vs_mujoco_reads_the_same_published_file(capsys):
    """`convexsim bench --vs mujoco` on an MJCF file: MuJoCo runs the file itself (no translation) from the same
    keyframe, and the table's final positions agree within the trajectory comparison's 1 mm (iiwa, 0.2 s of the
    PD hold, mid-transient: measured 0.15 mm; at 1 s, in the servos' equilibrium, 3e-5 mm),
    and an unknown keyframe is one line naming the file's keyframes."""
    assert main(["bench", "--vs", "mujoco", "--scenes", str(IIWA), "--keyframe", "home",
                 "--duration", "0.2"]) == EXIT_OK
    out = capsys.readouterr().out
    rows = {ln.split()[1]: ln.split() for ln in out.splitlines() if ln.startswith("kuka_iiwa_14 ")}
    assert set(rows) == {"convexsim", "mujoco"}, out
    assert int(rows["convexsim"][2]) == int(rows["mujoco"][2]) + 1 == 101      # MuJoCo's warm-up step untimed
    assert float(rows["mujoco"][7]) < 1.0                                        # max |Δp| [mm]
    assert main(["bench", "--vs", "mujoco", "--scenes", str(IIWA), "--keyframe", "rest", "--duration", "0.01"]) == EXIT_OK
    assert "not compared: " in (out := capsys.readouterr().out) and "the file's keyframes: ['home']" in out


def test_scene_with_a_mocap_target_imports_it_as_a_kinematic_body(tmp_path):
    """A Menagerie-style scene.xml (the published iiwa14.xml included, a floor, and the mocap ``target`` body
    such scenes carry for teleoperation) imports with the target as a kinematic body at its pose; its geom
    that collides is kept, the visual-only one skipped. A script then moves it: after 10 steps at 0.1 m/s
    along x it is 10·dt·0.1 m further (dt = 2 ms, the file's timestep: its pose integrates the velocity; round-off
    only)."""
    from convexsim.sim import Simulation

    path = tmp_path / "scene.xml"
    path.write_text(f"""<mujoco model="iiwa14 teleop"><include file="{IIWA.parent / 'iiwa14.xml'}"/>
      <worldbody><geom name="floor" size="0 0 0.05" type="plane"/>
        <body name="target" mocap="true" pos="0.5 0 0.6">
          <geom type="box" size=".05 .05 .05" contype="0" conaffinity="0"/>
          <geom type="sphere" size=".03" pos="0 0 0"/></body></worldbody></mujoco>""")
    scene = mjcf_to_scene(path)
    target = next(b for b in scene["bodies"] if b["name"] == "target")
    assert target["kinematic"] and "fixed" not in target and "mass" not in target
    assert target["position"] == [0.5, 0.0, 0.6]
    assert [g["shape"] for g in target["geometries"]] == ["sphere"]
    sim = Simulation(scene)
    sim.set_body_velocity("target", linear=[0.1, 0.0, 0.0])
    sim.step(10)
    assert sim.model.time_step == 0.002
    np.testing.assert_allclose(sim.body_pose("target")[:3], [0.502, 0.0, 0.6], atol=1e-12)
