"""Motors (scene ``motors``; MJCF ``<motor>``, URDF joints without a servo): the joint gets
clamp(τ₀ + τ_c, −effort, effort) every step, τ₀ the scene's constant torque and τ_c a controller's.

Checked against the closed form of a rotor: a 1 kg ball (I = 2/5·m·r² = 1e-3 kg·m² about its centre) on a
vertical revolute joint through its centre, no damping, no contact, gravity along the axis (no torque). A constant
generalized force τ gives ω(t) = τ·t / I, and the implicit-Euler velocity update ω_{k+1} = ω_k + dt·τ/I is exact
for it: the bound is round-off (1e-9 relative). Every path that steps trees applies it: the compiled SAP run
loop, the SAP and LCP reference steps, a Simulation stepping with controls.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from convexsim.sim import Simulation
from convexsim.simulate import SlowPathWarning, prepare, run_model, simulate

I_AXIS = 0.4 * 1.0 * 0.05 ** 2


def rotor(torque: float = 0.0, effort: float | None = None, solver: str = "sap") -> str:
    eff = "" if effort is None else f", effort: {effort}"
    return f"""
gravity: [0, 0, -9.81]
time_step: 1.0e-3
solver: {{kind: {solver}}}
bodies:
  - {{name: ball, mass: 1.0, geometries: [{{shape: sphere, radius: 0.05}}]}}
joints:
  - {{name: spin, type: revolute, child: ball, axis: [0, 0, 1], position: [0, 0, 1]}}
motors:
  - {{joint: spin, torque: {torque}{eff}}}
"""


@pytest.mark.parametrize("solver, path", [("sap", "compiled"), ("sap", "reference"), ("lcp", "reference"),
                                          ("lcp", "auto")])       # auto: the LCP compiled step takes no torques
def test_a_constant_motor_torque_spins_the_rotor_up_at_tau_over_i(solver, path):
    tau, n = 0.01, 100
    model, state, _ = prepare(rotor(tau, solver=solver))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SlowPathWarning)
        traj, _ = run_model(model, state, duration=n * 1e-3, path=path)
    omega = traj.angular_velocity[-1, 0, 2]           # the ball's ω_z is the joint rate
    assert omega == pytest.approx(tau * n * 1e-3 / I_AXIS, rel=1e-9)     # 1 rad/s


@pytest.mark.parametrize("path", ["compiled", "reference"])
def test_a_controller_torque_adds_to_the_motor_and_is_clamped_to_its_effort(path):
    """τ₀ = 0.002, effort 0.005: a controller's 0.001 gives 0.003 (unclamped), its 0.01 gives the effort 0.005,
    its −0.01 gives −0.005; 50 steps each from rest."""
    for tau_c, applied in ((0.001, 0.003), (0.01, 0.005), (-0.01, -0.005)):
        with Simulation(rotor(0.002, 0.005), path=path) as sim, warnings.catch_warnings():
            warnings.simplefilter("ignore", SlowPathWarning)
            sim.set_torque("spin", tau_c)
            sim.step(50)
            assert sim.qvel("spin") == pytest.approx(applied * 0.05 / I_AXIS, rel=1e-9), (tau_c, path)


def test_a_motor_torque_above_its_effort_is_refused_naming_the_field():
    from convexsim.errors import InputError

    with pytest.raises(InputError, match=r"motors\[0\]\.torque.*exceeds effort"):
        simulate(rotor(0.01, 0.005), duration=0.01)


def test_mjcf_motor_from_a_keyframe_ctrl_is_the_constant_torque(tmp_path):
    """<motor gear=2> with the keyframe's ctrl 0.5: τ₀ = 1 N·m (within forcerange·gear = 10), the same rotor spin-up
    as MuJoCo's own run of the file (both exact for constant torque)."""
    mujoco = pytest.importorskip("mujoco")
    from convexsim.scene.mjcf import mjcf_to_scene

    path = tmp_path / "rotor.xml"
    path.write_text("""<mujoco><option timestep="0.001" gravity="0 0 -9.81"/><worldbody>
      <body name="ball" pos="0 0 1"><joint name="spin" type="hinge" axis="0 0 1"/>
        <geom type="sphere" size="0.05" mass="1"/></body></worldbody>
      <actuator><motor joint="spin" gear="2" forcerange="-5 5"/></actuator>
      <keyframe><key name="go" ctrl="0.5"/></keyframe></mujoco>""")
    scene = mjcf_to_scene(path, keyframe="go")
    assert scene["motors"] == [{"joint": "spin", "torque": 1.0, "effort": 10.0}]
    traj = simulate(scene, duration=0.1)
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    for _ in range(100):
        mujoco.mj_step(m, d)
    assert traj.angular_velocity[-1, 0, 2] == pytest.approx(d.qvel[0], rel=1e-9)
    assert d.qvel[0] == pytest.approx(1.0 * 0.1 / I_AXIS, rel=1e-9)
