"""Joint frames in the viewer (``--joint-frames``): each link's triad sits at its inboard joint.

The check cannot be tuned: along a simulated double pendulum the drawn shoulder frame must stay at the
fixed pivot, the drawn elbow frame must stay at the upper bob's centre (where the scene puts the elbow),
and a revolute axis drawn in the link must stay the world's y axis (the motion is planar). The poses
composed here are exactly what the page composes: the body node's recorded pose times the static
joint-node transform. Tolerance 1e-9 m: float64 composition of poses of size ~1 m (the recorded poses
come from forward kinematics, exact to round-off).
"""

from __future__ import annotations

import numpy as np
import pytest

from convexsim.simulate import simulate
from convexsim.spatial import quat_to_matrix
from convexsim.viz.playback import PlaybackOptions, build_playback

SHOULDER = np.array([0.0, 0.0, 2.5])          # scenes/double_pendulum.yaml: the shoulder joint's position


@pytest.fixture(scope="module")
def pendulum_traj():
    traj = simulate("double_pendulum", duration=0.3)
    assert not traj.failure
    return traj


def _matrix(cmd) -> np.ndarray:
    return np.asarray(cmd["matrix"], dtype=np.float64).reshape(4, 4).T    # sent column-major


def _joint_nodes(pb, label: str) -> dict:
    prefix = f"/meshcat/{label}/bodies/"
    return {c["path"][len(prefix):-len("/joint")]: _matrix(c) for c in pb.commands
            if c["type"] == "set_transform" and c["path"].startswith(prefix) and c["path"].endswith("/joint")}


def _world_joint_frames(traj, body: str, T_BJ: np.ndarray):
    b = traj.body_index(body)
    origins, y_axes = [], []
    for p, q in zip(traj.position[:, b], traj.quaternion[:, b]):
        T_WB = np.eye(4)
        T_WB[:3, :3], T_WB[:3, 3] = quat_to_matrix(q), p
        T_WJ = T_WB @ T_BJ
        origins.append(T_WJ[:3, 3])
        y_axes.append(T_WJ[:3, :3] @ np.array([0.0, 1.0, 0.0]))
    return np.array(origins), np.array(y_axes)


def test_joint_frames_sit_on_the_joints_along_the_motion(pendulum_traj):
    traj = pendulum_traj
    pb = build_playback([traj], PlaybackOptions(labels=["run"], joint_frames=True))
    nodes = _joint_nodes(pb, "run")
    assert set(nodes) == {"ball1", "ball2"}                 # links only: the floor has no joint
    shoulder, axis1 = _world_joint_frames(traj, "ball1", nodes["ball1"])
    elbow, axis2 = _world_joint_frames(traj, "ball2", nodes["ball2"])
    assert np.ptp(traj.position[:, traj.body_index("ball1"), 0]) > 0.1     # the links really swing
    np.testing.assert_allclose(shoulder, np.broadcast_to(SHOULDER, shoulder.shape), atol=1e-9)
    np.testing.assert_allclose(elbow, traj.position[:, traj.body_index("ball1")], atol=1e-9)
    for axes in (axis1, axis2):
        np.testing.assert_allclose(axes, np.broadcast_to([0.0, 1.0, 0.0], axes.shape), atol=1e-9)
    drawn = {c["path"] for c in pb.commands if c["type"] == "set_object"}
    for link in ("ball1", "ball2"):
        assert {f"/meshcat/run/bodies/{link}/joint/triad", f"/meshcat/run/bodies/{link}/joint/axis"} <= drawn


def test_joint_frames_are_off_by_default_and_absent_without_joints(pendulum_traj):
    pb = build_playback([pendulum_traj], PlaybackOptions(labels=["run"]))
    assert not _joint_nodes(pb, "run")
    free = simulate("sphere_drop", duration=0.01)
    pb = build_playback([free], PlaybackOptions(labels=["run"], joint_frames=True))
    assert not _joint_nodes(pb, "run")


def test_cli_joint_frames_need_a_viewer_or_a_page(tmp_path, capsys):
    from viz_helpers import commands_in_page

    from convexsim.cli import main

    out = tmp_path / "p.npz"
    assert main(["run", "pendulum", "--duration", "0.01", "--quiet", "--out", str(out), "--joint-frames"]) != 0
    assert "--joint-frames" in capsys.readouterr().err
    html = tmp_path / "p.html"
    assert main(["run", "pendulum", "--duration", "0.01", "--quiet", "--out", str(out), "--html", str(html),
                 "--joint-frames"]) == 0
    paths = {c.get("path") for c in commands_in_page(html.read_text())}
    assert "/meshcat/SAP (sap)/bodies/rod/joint/triad" in paths or any(
        str(p).endswith("/joint/triad") for p in paths)
    view_html = tmp_path / "v.html"
    assert main(["view", str(out), "--html", str(view_html)]) == 0
    assert not any(str(p).endswith("/joint/triad") for p in commands_in_page(view_html.read_text()))
    assert main(["view", str(out), "--html", str(view_html), "--joint-frames"]) == 0
    got = {str(c.get("path")) for c in commands_in_page(view_html.read_text())}
    assert any(p.endswith("/joint/triad") for p in got), sorted(got)
