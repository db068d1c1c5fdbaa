"""Helpers shared by the scripting tests: a controlled Simulation loop recorded step by step, and the implicit PD
law checked on every step of a sine target."""

from __future__ import annotations

import math

import pytest

from convexsim.sim import Simulation


def drive(scene, steps: int, set_controls, **simulation_options):
    """(states, infos) of ``steps`` steps of ``Simulation(scene, **simulation_options)``, ``set_controls(sim)``
    before each."""
    sim = Simulation(scene, **simulation_options)
    states, infos = [], []
    for _ in range(steps):
        set_controls(sim)
        sim.step()
        states.append(sim.state)
        infos.append(sim.info)
    return states, infos


def assert_follows_implicit_pd(sim: Simulation, joint: str, kp: float, kd: float, *, steps: int, rel: float,
                               abs_: float) -> None:
    """Every step of the target q_d = 0.2 sin 5t, v_d = cos 5t on ``joint``: the step is compiled and the
    actuator's force is the implicit PD law at the step's end velocity, u = −Kp (q₀ + dt v₁ − q_d) − Kd (v₁ − v_d)."""
    dt = sim.model.time_step
    for k in range(steps):
        q0, t = sim.qpos(joint), sim.t
        q_d, v_d = 0.2 * math.sin(5 * t), math.cos(5 * t)
        sim.set_target(joint, q_d, velocity=v_d)
        sim.step()
        assert sim.info.path == "compiled"
        v1 = sim.qvel(joint)
        u = sim.actuator_forces()[joint]
        assert u == pytest.approx(-kp * (q0 + dt * v1 - q_d) - kd * (v1 - v_d), rel=rel, abs=abs_), k
