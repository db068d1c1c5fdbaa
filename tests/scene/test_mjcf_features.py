"""MJCF importer features beyond the Menagerie files: velocity servos, mocap bodies, keyframes with a free body's
velocity, against MuJoCo's compiled model and simulation."""

from __future__ import annotations

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from convexsim.scene.mjcf import mjcf_to_scene  # noqa: E402
from convexsim.simulate import simulate  # noqa: E402

VELOCITY = """<mujoco><option timestep="0.001" integrator="implicitfast"/><worldbody>
  <body name="rotor" pos="0 0 1"><joint name="j" type="hinge" axis="0 0 1"/>
    <geom type="box" size="0.2 0.05 0.05" mass="2"/></body></worldbody>
  <actuator><velocity joint="j" kv="0.5" gear="2" ctrlrange="-3 3"/></actuator>
  <keyframe><key name="spin" ctrl="1.5"/></keyframe></mujoco>"""


def test_velocity_servo_drives_the_joint_to_its_target_like_mujoco(tmp_path):
    """<velocity kv gear g> with ctrl c: F = kv (c − g q̇), torque g F, so q̇ → c/g = 0.75 rad/s with the time
    constant I/(kv g²) = 0.014 s: imported as kp = 0, kd = kv g², velocity_target c/g. Both engines treat the
    kv term implicitly (implicitfast), so the spin-up agrees to the O(dt) of the two first-order steps."""
    path = tmp_path / "velocity.xml"
    path.write_text(VELOCITY)
    scene = mjcf_to_scene(path, keyframe="spin")
    (act,) = scene["actuators"]
    assert (act["kp"], act["kd"], act["velocity_target"]) == (0.0, 2.0, 0.75)
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    omega_mj = []
    for _ in range(100):
        mujoco.mj_step(m, d)
        omega_mj.append(d.qvel[0])
    traj = simulate(scene, duration=0.1)
    omega = traj.angular_velocity[1:, traj.body_index("rotor"), 2]
    np.testing.assert_allclose(omega, omega_mj, atol=0.02 * 0.75)      # 2% of the target: O(dt/τ) = 7%·(1 − e⁻¹)
    assert abs(omega[-1] - 0.75) < 1e-3 and abs(omega_mj[-1] - 0.75) < 1e-3


MOCAP = """<mujoco><option timestep="0.001"/><worldbody>
  <body name="paddle" mocap="true" pos="0 0 0.5"><geom type="box" size="0.3 0.3 0.02"/></body>
  <body name="ball" pos="0.1 0 0.7"><freejoint/><geom size="0.05" mass="0.2"/></body></worldbody>
  <keyframe><key name="raised" mpos="0 0 0.6" mquat="1 0 0 0"
     qpos="0.1 0 0.8 1 0 0 0" qvel="0.2 0 0 0 0 3"/></keyframe></mujoco>"""


def test_mocap_body_is_kinematic_at_the_keyframe_pose_and_carries_contact(tmp_path):
    """A mocap body becomes a kinematic body at the keyframe's mocap pose (0.6 m, not the file's 0.5 m), at
    rest; a ball dropped on it lands on its top face (z = 0.62 + 0.05 m) and, launched at v0 = 0.2 m/s without
    rolling, ends rolling at 5/7 v0 (a solid sphere's rolling closed form; 2% for the contact's regularized
    stiction). The ball's keyframe velocity (MuJoCo: origin velocity in the world, ω in the body frame)
    becomes [ω, v_COM] in the world."""
    path = tmp_path / "mocap.xml"
    path.write_text(MOCAP)
    scene = mjcf_to_scene(path, keyframe="raised")
    paddle = next(b for b in scene["bodies"] if b["name"] == "paddle")
    assert paddle["kinematic"] and "fixed" not in paddle and paddle["position"] == [0.0, 0.0, 0.6]
    free = next(j for j in scene["joints"] if j["type"] == "free")
    np.testing.assert_allclose(free["initial_velocity"], [0, 0, 3, 0.2, 0, 0], atol=1e-12)
    traj = simulate(scene, duration=1.0)
    ball = traj.body_index("ball")
    assert abs(traj.position[-1, ball, 2] - 0.67) < 2e-3                 # on the raised paddle
    np.testing.assert_allclose(traj.linear_velocity[-1, ball], [0.2 * 5 / 7, 0, 0], atol=0.02 * 0.2 * 5 / 7)


def test_a_script_lifts_the_mocap_paddle_and_the_ball_rides_on_it(tmp_path):
    """The imported mocap paddle set moving up at 0.2 m/s (``Simulation.set_body_velocity``) lifts the ball
    resting on it: after 0.1 s of lift the ball moves up at the paddle's speed (within 1e-3 m/s: the contact's
    compliance relaxes over the dissipation time) and sits on the paddle's face, z_ball − z_paddle = 0.07 m
    within 0.5 mm (the contact's compliance under the ball's weight and the lift's impulse)."""
    from convexsim.sim import Simulation

    path = tmp_path / "mocap.xml"
    path.write_text(MOCAP)
    scene = mjcf_to_scene(path, keyframe="raised")
    free = next(j for j in scene["joints"] if j["type"] == "free")
    free["initial_velocity"] = [0.0] * 6                         # drop the ball straight onto the paddle
    sim = Simulation(scene)
    sim.step(300)                                                 # landed and at rest
    sim.set_body_velocity("paddle", linear=[0.0, 0.0, 0.2])
    sim.step(100)
    assert abs(sim.body_velocity("ball")[5] - 0.2) < 1e-3
    assert abs(sim.body_pose("ball")[2] - sim.body_pose("paddle")[2] - 0.07) < 5e-4
    assert abs(sim.body_pose("paddle")[2] - (0.6 + 0.1 * 0.2)) < 1e-12
