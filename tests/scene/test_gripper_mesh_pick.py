"""The shipped mesh gripper (scenes/gripper_mesh_pick.yaml): it is the `convexsim import-mjcf` of
scenes/robots/mesh_gripper/mesh_gripper.xml up to its two edited actuator targets, and it lifts the box
exactly as the statics of its coupled fingers say, or drops it when the servo is too weak."""

from __future__ import annotations

import numpy as np
import pytest

from convexsim.scene import load_scene, scene_from_dict
from convexsim.simulate import simulate

SCENE = "gripper_mesh_pick"


def _constants(spec):
    """(g [m/s²], box mass [kg], the finger servo's force limit F [N], the box–finger friction μ) read from the
    loaded scene: μ by the pair rule μ = 2 μ_A μ_B/(μ_A + μ_B) (docs/scene-format.md)."""
    body = {b.name: b for b in spec.bodies}
    servo = next(a for a in spec.actuators if a.joint == "left")
    mu_a = spec.materials[body["box"].geometries[0].material].friction
    mu_b = spec.materials[body["finger_left"].geometries[0].material].friction
    return -spec.gravity[2], body["box"].mass, servo.effort, 2 * mu_a * mu_b / (mu_a + mu_b)


G, BOX_MASS, SERVO_FORCE, MU = _constants(load_scene(SCENE))


def test_shipped_scene_is_the_import_of_its_mjcf(repo):
    pytest.importorskip("mujoco")
    from convexsim.scene.mjcf import mjcf_to_scene
    imported = scene_from_dict(mjcf_to_scene(repo / "scenes" / "robots" / "mesh_gripper" / "mesh_gripper.xml"))
    shipped = load_scene(SCENE)
    for field in ("time_step", "gravity", "materials", "bodies", "joints", "constraints"):
        assert getattr(shipped, field) == getattr(imported, field), field
    assert [a.model_copy(update={"target": 0.0}) for a in shipped.actuators] == imported.actuators


def _finger_forces(traj, frame: int, finger: str) -> np.ndarray:
    """Sum of the contact forces on the box from one finger at a frame [N], in the world."""
    box, f = traj.body_index("box"), traj.body_index(finger)
    rows = range(traj.contact_offsets[frame], traj.contact_offsets[frame + 1])
    total = np.zeros(3)
    for k in rows:
        a, b = traj.contact_body_a[k], traj.contact_body_b[k]
        if {a, b} == {box, f}:
            total += traj.contact_force[k] if b == f else -traj.contact_force[k]   # force on the finger
    return -total                                                                    # on the box


def test_coupled_fingers_share_the_servo_force_and_lift_the_box():
    """At rest in the air (t = 1 s) the saturated servo's F = 8 N is shared by the coupler: each finger
    presses N = F/2 on the box, and the two fingers' friction carries the box's weight (statics; 0.5 %,
    the residual motion of the end of the lift). Over the lift the box rises with the palm to within 1 mm."""
    traj = simulate(SCENE, duration=1.0, record_every=50)
    assert not traj.failure
    last = len(traj.time) - 1
    left, right = _finger_forces(traj, last, "finger_left"), _finger_forces(traj, last, "finger_right")
    assert left[0] == pytest.approx(SERVO_FORCE / 2, rel=5e-3) and right[0] == pytest.approx(-SERVO_FORCE / 2, rel=5e-3)
    assert left[2] + right[2] == pytest.approx(BOX_MASS * G, rel=5e-3)
    assert 2 * MU * SERVO_FORCE / 2 > BOX_MASS * G                      # the scene's hold condition
    assert load_scene(SCENE).constraints[0].ratio == 1.0               # the coupler mirrors the fingers
    box, palm = traj.body_index("box"), traj.body_index("palm")
    start = int(np.searchsorted(traj.time, 0.5))                 # the lift starts
    rise_box = traj.position[last, box, 2] - traj.position[start, box, 2]
    rise_palm = traj.position[last, palm, 2] - traj.position[start, palm, 2]
    assert rise_box > 0.095 and abs(rise_box - rise_palm) < 1e-3     # measured 0.4 mm


def test_a_weak_servo_cannot_hold_the_box():
    """With forcerange ±2 N the friction limit 2·μ·(F/2) = 2 N is below m·g = 2.94 N: the palm rises
    10 cm and the box stays on the floor (its centre within 1 mm of its start)."""
    weak = ["actuators[1].effort=2.0"]
    g, mass, force, mu = _constants(load_scene(SCENE, overrides=weak))
    assert force == 2.0 and 2 * mu * force / 2 < mass * g                # the scene's drop condition
    traj = simulate(SCENE, duration=1.0, record_every=100, overrides=weak)
    assert not traj.failure
    box, palm = traj.body_index("box"), traj.body_index("palm")
    assert traj.position[-1, palm, 2] - traj.position[0, palm, 2] > 0.095
    assert abs(traj.position[-1, box, 2] - traj.position[0, box, 2]) < 1e-3
