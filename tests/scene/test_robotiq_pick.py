"""The shipped Robotiq 2F-85 scene (scenes/robotiq_pick.yaml): its robot is `convexsim import-urdf` of the
vendored, unmodified URDF (up to the stated edits), and the box it lifts obeys the statics of a friction grip:
held when 2·μ·N > m·g, left on the floor when not."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from convexsim.scene import load_scene, scene_from_dict, shipped_scenes_dir
from convexsim.scene.urdf import urdf_to_scene
from convexsim.simulate import simulate

SCENE = "robotiq_pick"
URDF = Path("robots") / "robotiq_2f_85" / "urdf" / "robotiq_2f_85.urdf"
LIFT = "base_link_to_base_link_inertia"
G, BOX_MASS = 9.81, 0.1


def test_shipped_robot_is_the_import_of_the_published_urdf():
    """Bodies (masses, inertias, mesh files, scales, poses), joints and couplers equal the import, except the
    edits the header lists: the base's pose and the lift joint's type and axis."""
    root = shipped_scenes_dir()
    imported = scene_from_dict(urdf_to_scene(root / URDF))
    shipped = load_scene(SCENE)
    bodies = {b.name: b for b in shipped.bodies}
    for b in imported.bodies:
        s = bodies[b.name]
        if b.name == "base_link":
            assert s.fixed and s.position == (0.0, 0.0, 0.172) and s.quaternion == (0.0, 1.0, 0.0, 0.0)
            s = s.model_copy(update={"position": b.position, "quaternion": b.quaternion})
        geoms = [g.model_copy(update={"file": str((root / g.file).resolve())}) if g.file else g for g in s.geometries]
        assert s.model_copy(update={"geometries": geoms}) == b, b.name
    joints = {j.name: j for j in shipped.joints}
    for j in imported.joints:
        if j.name == LIFT:
            assert (joints[j.name].type, joints[j.name].axis) == ("prismatic", (0.0, 0.0, -1.0))
            continue
        assert joints[j.name] == j
    assert shipped.constraints == imported.constraints and len(shipped.constraints) == 5
    assert sum(g.shape == "mesh" for b in shipped.bodies for g in b.geometries) == 9


def _grip(traj, frame: int) -> dict[str, np.ndarray]:
    """Total contact force on the box from each body touching it at a frame [N], in the world."""
    names, box = list(traj.body_names), traj.body_index("box")
    out: dict[str, np.ndarray] = {}
    for k in range(traj.contact_offsets[frame], traj.contact_offsets[frame + 1]):
        a, b = traj.contact_body_a[k], traj.contact_body_b[k]
        if box in (a, b):
            other, sign = (a, 1.0) if b == box else (b, -1.0)
            out[names[other]] = out.get(names[other], 0.0) + sign * traj.contact_force[k]
    return out


def test_the_gripper_lifts_the_box_by_friction():
    """Held in the air (t = 1.2 s) the box touches only the two inner fingers (pads and fingers' hulls; the
    knuckles clear it); their friction carries m·g (0.5 %, the end of the lift's settling), within the
    Coulomb limit 2·μ·N of the pad normal forces N; the box rose with the hand to within 1 mm."""
    traj = simulate(SCENE, duration=1.2, record_every=50)
    assert not traj.failure
    last = len(traj.time) - 1
    grip = _grip(traj, last)
    assert set(grip) == {"left_inner_finger", "right_inner_finger"}
    left, right = grip["left_inner_finger"], grip["right_inner_finger"]
    assert left[2] + right[2] == pytest.approx(BOX_MASS * G, rel=5e-3)
    mu = 2 * 0.5 * 1.0 / (0.5 + 1.0)                       # pair friction: default material (0.5) and box (1.0)
    normal = min(abs(left[0]), abs(right[0]))
    assert 2 * mu * normal > BOX_MASS * G
    box, hand = traj.body_index("box"), traj.body_index("base_link_inertia")
    start = int(np.searchsorted(traj.time, 0.6))
    rise_box = traj.position[last, box, 2] - traj.position[start, box, 2]
    rise_hand = traj.position[last, hand, 2] - traj.position[start, hand, 2]
    assert rise_box > 0.075 and abs(rise_box - rise_hand) < 1e-3


def test_a_slippery_box_stays_on_the_floor():
    """With the box's friction at 0.03 (pair μ = 0.057) the grip's limit 2·μ·N ≈ 0.6 N is below m·g: the
    hand rises 8 cm, the box stays within 1 mm of its start."""
    traj = simulate(SCENE, duration=1.2, record_every=100, overrides=["materials.box.friction=0.03"])
    assert not traj.failure
    box, hand = traj.body_index("box"), traj.body_index("base_link_inertia")
    assert traj.position[-1, hand, 2] - traj.position[0, hand, 2] > 0.075
    assert abs(traj.position[-1, box, 2] - traj.position[0, box, 2]) < 1e-3
