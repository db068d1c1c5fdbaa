"""``convexsim bench --controls``: what driving a robot from a program costs per step.

For each scene (iiwa_push, gripper_lift, iiwa_push_10) the CPU ms per simulated step of

* ``run loop``: ``run_model`` without controls (the compiled run loop, recording the last step only),
* ``run_model(controller)``: the same run with a Python controller that moves the first actuator's target
  along a sine (amplitude 0.05 rad or m, 1 Hz) every step,
* ``Simulation loop``: a Python loop of ``Simulation.set_target`` + ``Simulation.step()`` doing the same,

and, where ``mujoco`` is installed, a MuJoCo Python loop (``data.ctrl[0] = …; mj_step``) on a comparable arm
built here (:data:`MUJOCO_ARM`: seven hinges, the iiwa 14's link masses, position actuators with the same
gains, a 1 kg box on the floor, dt = 1 ms). A second table gives what recording every frame costs against
recording every 100th (iiwa_push, pile_100).

Times are process CPU time after an untimed warm-up run of the same length (kernel compilation and
loading excluded); not a test:
they depend on the machine and its load.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

CONTROL_SCENES = (("iiwa_push", 1.0, 0.2), ("gripper_lift", 1.0, 0.2), ("iiwa_push_10", 0.5, 0.05))
"""(scene, simulated seconds uncontrolled, simulated seconds with controls)."""

RECORDING_SCENES = (("iiwa_push", 2.0), ("pile_100", 0.5))
"""(scene, simulated seconds) of the recording table."""

AMPLITUDE, FREQUENCY = 0.05, 1.0
"""The sine on the first actuator's target: amplitude [rad or m] and frequency [Hz]."""


def _cpu_ms_per_step(fn, steps: int) -> float:
    c0 = time.process_time()
    fn()
    return 1e3 * (time.process_time() - c0) / steps


def control_row(scene: str, duration: float, controlled_duration: float) -> dict:
    """CPU ms/step of the run loop, run_model(controller) and a Simulation loop on ``scene``; and the path
    each controlled variant took."""
    from convexsim.sim import Simulation
    from convexsim.simulate import prepare, run_model

    model, state, _ = prepare(scene)
    name = model.forest.trees[0].actuators[0].name if model.has_trees else None
    joint_q = Simulation.from_model(model, state).qpos(name)
    n, nc = round(duration / model.time_step), round(controlled_duration / model.time_step)

    def controller(m, s):
        return {"targets": {name: joint_q + AMPLITUDE * math.sin(2 * math.pi * FREQUENCY * s.t)}}

    run_model(model, state, duration=duration, record_every=n)      # warm-up: every kernel the run loads
    bare = _cpu_ms_per_step(lambda: run_model(model, state, duration=duration, record_every=n), n)
    out = {"scene": scene, "run_loop_ms": bare}
    with warnings.catch_warnings():
        from convexsim.simulate import SlowPathWarning

        warnings.simplefilter("ignore", SlowPathWarning)
        run_model(model, state, duration=3 * model.time_step, controller=controller)
        stats = {}
        out["controller_ms"] = _cpu_ms_per_step(
            lambda: stats.update(s=run_model(model, state, duration=controlled_duration, record_every=nc,
                                             controller=controller)[1]), nc)
        out["controller_path"] = stats["s"].path
        sim = Simulation.from_model(model, state)

        def loop():
            for _ in range(nc):
                sim.set_target(name, joint_q + AMPLITUDE * math.sin(2 * math.pi * FREQUENCY * sim.t))
                sim.step()

        sim.step(2)
        sim.reset()
        out["simulation_ms"] = _cpu_ms_per_step(loop, nc)
        out["simulation_path"] = sim.info.path
    law = _sine_law().with_params([joint_q, AMPLITUDE, 2 * math.pi * FREQUENCY])
    run_model(model, state, duration=3 * model.time_step, controller=law)
    out["compiled_ms"] = _cpu_ms_per_step(lambda: run_model(model, state, duration=duration, record_every=n,
                                                            controller=law), n)
    return out


def _sine_law():
    """The compiled controller of the bench: the first actuator's target q0 + A·sin(ω t), v_d its slope
    (params = q0, A, ω)."""
    from convexsim.controllers import compiled_controller

    def sine(t, q, v, tree_q, tree_v, target, target_velocity, torque, wrench, params):
        target[0] = params[0] + params[1] * np.sin(params[2] * t)
        target_velocity[0] = params[1] * params[2] * np.cos(params[2] * t)
    return compiled_controller(sine)


MUJOCO_ARM = """
<mujoco model="seven_hinge_arm">
  <option timestep="0.001" integrator="implicitfast"/>
  <worldbody>
    <geom type="plane" size="2 2 0.1"/>
    <body name="box" pos="0.56 0 0.05"><freejoint/><geom type="box" size="0.05 0.05 0.05" mass="1"/></body>
    <body name="l1" pos="0 0 0.1575"><joint name="j1" axis="0 0 1"/>
      <geom type="capsule" fromto="0 0 0 0 0 0.2" size="0.075" mass="5.76"/>
      <body name="l2" pos="0 0 0.2025"><joint name="j2" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 0.2" size="0.075" mass="6.35"/>
        <body name="l3" pos="0 0 0.2045"><joint name="j3" axis="0 0 1"/>
          <geom type="capsule" fromto="0 0 0 0 0 0.2" size="0.07" mass="3.5"/>
          <body name="l4" pos="0 0 0.2155"><joint name="j4" axis="0 -1 0"/>
            <geom type="capsule" fromto="0 0 0 0 0 0.18" size="0.07" mass="3.5"/>
            <body name="l5" pos="0 0 0.1845"><joint name="j5" axis="0 0 1"/>
              <geom type="capsule" fromto="0 0 0 0 0 0.2" size="0.06" mass="3.5"/>
              <body name="l6" pos="0 0 0.2155"><joint name="j6" axis="0 1 0"/>
                <geom type="sphere" size="0.07" mass="1.8"/>
                <body name="l7" pos="0 0 0.081"><joint name="j7" axis="0 0 1"/>
                  <geom type="box" size="0.05 0.06 0.03" pos="0 0 0.05" mass="1.2"/>
                </body></body></body></body></body></body></body>
  </worldbody>
  <actuator>
    <position joint="j1" kp="4000" kv="200"/><position joint="j2" kp="4000" kv="200"/>
    <position joint="j3" kp="4000" kv="200"/><position joint="j4" kp="4000" kv="200"/>
    <position joint="j5" kp="1000" kv="50"/><position joint="j6" kp="1000" kv="50"/>
    <position joint="j7" kp="1000" kv="50"/>
  </actuator>
</mujoco>
"""
"""A seven-hinge arm of the iiwa 14's link masses with the iiwa_push gains, next to a 1 kg box on a floor."""


def mujoco_row(seconds: float = 1.0) -> dict | None:
    """CPU ms/step of a MuJoCo Python loop (set ``ctrl[0]`` along the sine, ``mj_step``) on
    :data:`MUJOCO_ARM`; None without mujoco."""
    try:
        import mujoco
    except ImportError:
        return None
    m = mujoco.MjModel.from_xml_string(MUJOCO_ARM)
    d = mujoco.MjData(m)
    n = round(seconds / m.opt.timestep)

    def loop():
        for _ in range(n):
            d.ctrl[0] = AMPLITUDE * math.sin(2 * math.pi * FREQUENCY * d.time)
            mujoco.mj_step(m, d)

    mujoco.mj_step(m, d)
    return {"scene": "MuJoCo 7-hinge arm", "mujoco_ms": _cpu_ms_per_step(loop, n), "version": mujoco.__version__}


def recording_row(scene: str, duration: float) -> dict:
    """CPU ms/step of the compiled run loop recording every step and every 100th."""
    from convexsim.simulate import prepare, run_model

    model, state, _ = prepare(scene)
    n = round(duration / model.time_step)
    run_model(model, state, duration=duration, record_every=n)      # warm-up: every kernel the run loads
    every = {k: _cpu_ms_per_step(lambda k=k: run_model(model, state, duration=duration, record_every=k), n)
             for k in (1, 100)}
    return {"scene": scene, "every_1_ms": every[1], "every_100_ms": every[100]}


def format_controls(rows: list[dict], mujoco: dict | None, recording: list[dict]) -> str:
    """The two tables and their legend."""
    lines = [f"{'scene':<16}{'run loop':>10}{'run_model(ctrl)':>17}{'Simulation loop':>17}{'compiled ctrl':>15}"
             f"{'loop / run loop':>17}"]
    for r in rows:
        lines.append(f"{r['scene']:<16}{r['run_loop_ms']:>10.4f}{r['controller_ms']:>17.3f}"
                     f"{r['simulation_ms']:>17.3f}{r['compiled_ms']:>15.4f}"
                     f"{r['simulation_ms'] / r['run_loop_ms']:>16.1f}×")
    if mujoco is not None:
        lines.append(f"{mujoco['scene']:<16}{'':>10}{'':>17}{mujoco['mujoco_ms']:>17.4f}"
                     f"   (MuJoCo {mujoco['version']} Python loop: ctrl, mj_step)")
    else:
        lines.append("(mujoco not installed: no MuJoCo row)")
    paths = {f"{r['scene']}: {r['simulation_path']}" for r in rows}
    lines.append("CPU ms per simulated step. run loop: run_model without controls; run_model(ctrl): a Python "
                 "controller moving the first actuator's target along a sine every step; Simulation loop: "
                 "set_target + step() in Python; compiled ctrl: the same sine as a compiled controller "
                 "(convexsim.controllers) inside the run loop. Controlled steps took: " + "; ".join(sorted(paths)))
    lines.append("")
    lines.append(f"{'scene':<16}{'every step':>12}{'every 100th':>13}{'ratio':>8}")
    for r in recording:
        lines.append(f"{r['scene']:<16}{r['every_1_ms']:>12.4f}{r['every_100_ms']:>13.4f}"
                     f"{r['every_1_ms'] / r['every_100_ms']:>8.2f}")
    lines.append("CPU ms/step of the compiled run loop recording a frame every step and every 100th step.")
    return "\n".join(lines)


def main(scenes=CONTROL_SCENES, recording=RECORDING_SCENES) -> int:
    rows = []
    for scene, duration, controlled in scenes:
        rows.append(control_row(scene, duration, controlled))
        print(f"  {scene}: done", flush=True)
    rec = [recording_row(s, d) for s, d in recording]
    print(format_controls(rows, mujoco_row(), rec), flush=True)
    return 0


__all__ = ["CONTROL_SCENES", "RECORDING_SCENES", "MUJOCO_ARM", "control_row", "mujoco_row", "recording_row",
           "format_controls", "main"]
