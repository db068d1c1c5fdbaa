"""A cylinder on the ground, simulated (compiled SAP step): analytic rest penetrations and rolling.

Soft contacts (material k = 2e4 N/m on both sides, combined k = 1e4 N/m, τ_d = 0.01 s: critically damped
as in tests/verification/test_physics.py), so at rest each of the N contact points carries m·g/N and
penetrates δ = m·g/(N·k): N = 8 for the cap ring (manifold.RING_POINTS), N = 2 for the side line.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from convexsim.simulate import simulate

G = 9.81
K_COMBINED = 1e4
R, L, M = 0.05, 0.2, 1.0
LYING = [math.sqrt(0.5), -math.sqrt(0.5), 0.0, 0.0]          # local z -> world y


def scene(position, quaternion, ground_quat=(1.0, 0.0, 0.0, 0.0), duration=0.6, stiffness=2e4, tau=0.01):
    return {
        "name": "cylinder", "time_step": 1e-3, "duration": duration,
        "materials": {"default": {"friction": 0.5, "stiffness": stiffness, "dissipation_time": tau}},
        "bodies": [
            {"name": "ground", "fixed": True, "geometries": [{"shape": "halfspace", "quaternion": list(ground_quat)}]},
            {"name": "can", "mass": M, "position": list(position), "quaternion": list(quaternion),
             "geometries": [{"shape": "cylinder", "radius": R, "length": L}]},
        ],
    }


def test_standing_on_its_cap_sinks_mg_over_8k():
    traj = simulate(scene([0, 0, L / 2], [1, 0, 0, 0]))
    assert not traj.failure
    depth = L / 2 - traj.position[-1, 1, 2]
    assert depth == pytest.approx(M * G / (8 * K_COMBINED), rel=1e-2)
    last = traj.contacts_at(traj.num_frames - 1)
    assert last["force"].shape[0] == 8
    np.testing.assert_allclose(last["force"][:, 2], M * G / 8, rtol=1e-2)


def test_lying_on_its_side_is_a_line_contact_without_rocking():
    """Two contacts (the ends of the bottom line) share the weight; the cylinder neither rocks nor rolls."""
    traj = simulate(scene([0, 0, R], LYING))
    assert not traj.failure
    depth = R - traj.position[-1, 1, 2]
    assert depth == pytest.approx(M * G / (2 * K_COMBINED), rel=1e-2)
    last = traj.contacts_at(traj.num_frames - 1)
    np.testing.assert_allclose(last["force"][:, 2], M * G / 2, rtol=1e-2)
    assert np.abs(traj.angular_velocity[:, 1]).max() < 1e-6     # [rad/s] over the whole run


def test_rolls_down_an_incline_at_two_thirds_g_sin_theta():
    """Rolling without slip (μ = 0.5 > tanθ/3): a = g·sinθ/(1 + I/(m r²)) = (2/3)·g·sinθ. Stiff contact
    (k = 2e6 N/m); the 1 % tolerance covers the compliant start (the first ms of settling)."""
    theta = 0.2
    n = np.array([math.sin(theta), 0.0, math.cos(theta)])
    qg = (math.cos(theta / 2), 0.0, math.sin(theta / 2), 0.0)
    T = 0.4
    traj = simulate(scene(list(R * n), LYING, ground_quat=qg, duration=T, stiffness=2e6, tau=0.005))
    assert not traj.failure
    down = np.array([math.cos(theta), 0.0, -math.sin(theta)])
    s = float((traj.position[-1, 1] - traj.position[0, 1]) @ down)
    assert s == pytest.approx(0.5 * (2.0 / 3.0) * G * math.sin(theta) * T * T, rel=1e-2)
    omega = traj.angular_velocity[-1, 1, 1]                  # about world y
    v = float(traj.linear_velocity[-1, 1] @ down)
    assert omega * R == pytest.approx(v, rel=1e-2)            # no slip


@pytest.mark.roundoff
def test_box_stack_with_boxes_as_meshes_follows_the_box_trajectory():
    """box_stack (5 boxes, 2 s) with every box given as its 8 corners: the face–face manifolds of the hull path
    equal box_box's (same points, depths, normals; test_convex_pairs), so the trajectories agree to 1e-9 m
    (0 on the development machine, also with numba generating code for a generic x86-64 CPU, checked once:
    the generic-target rerun of `make test` would compile the whole compiled step again, ≈ 70 s)."""
    from convexsim.scene import load_scene

    spec = load_scene("box_stack")
    data = spec.model_dump(mode="json", exclude_none=True)
    corners = [[x, y, z] for x in (-0.05, 0.05) for y in (-0.05, 0.05) for z in (-0.05, 0.05)]
    for body in data["bodies"][1:]:
        assert body["geometries"] == [{**body["geometries"][0], "shape": "box", "size": [0.1, 0.1, 0.1]}]
        body["geometries"] = [{"shape": "mesh", "vertices": corners}]
    boxes, meshes = simulate(spec), simulate(data)
    assert not boxes.failure and not meshes.failure
    np.testing.assert_allclose(meshes.position, boxes.position, atol=1e-9)
    np.testing.assert_allclose(meshes.quaternion, boxes.quaternion, atol=1e-9)
