"""Kinematic (mocap) bodies: a body without degrees of freedom whose pose advances by its velocity, which a
script sets; contacts with it use that velocity (the known term of the contact velocity, vc = J v + b).

Physics checked against what cannot be tuned: a paddle at constant speed u carries a box at u with a
penetration of the order of the contact's compliance (estimated from SAP's near-rigid regularization), where
teleporting the same paddle without telling the contacts leaves the box behind by centimetres; a belt
drags a box at μg until the box moves with it (closed form); a kinematic body at rest is a fixed body to the
bit; constant (ω, v) gives the closed-form pose; the compiled steps agree with their numpy references to
round-off (SAP and LCP, free bodies and a tree link).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from convexsim.scene import compile_scene, scene_from_dict
from convexsim.sim import Simulation
from convexsim.stepping import StepContext, step

DT = 1e-3
U = 0.5            # paddle speed [m/s]
MASS = 1.0         # box mass [kg]
EDGE = 0.2         # box edge [m]


def paddle_scene(paddle_velocity=(U, 0.0, 0.0), gap=0.005, solver="sap") -> dict:
    """A 1 kg, 0.2 m box at rest on frictionless ground and a kinematic paddle ``gap`` behind its −x face."""
    return {
        "name": "paddle", "time_step": DT, "duration": 0.3, "solver": {"kind": solver},
        "materials": {"ice": {"friction": 0.0}},
        "bodies": [
            {"name": "ground", "fixed": True, "geometries": [{"shape": "halfspace", "material": "ice"}]},
            {"name": "box", "mass": MASS, "position": [0.0, 0.0, EDGE / 2],
             "geometries": [{"shape": "box", "size": [EDGE] * 3, "material": "ice"}]},
            {"name": "paddle", "kinematic": True, "position": [-EDGE / 2 - 0.01 - gap, 0.0, EDGE / 2],
             "linear_velocity": list(paddle_velocity),
             "geometries": [{"shape": "box", "size": [0.02, 0.4, 0.15], "material": "ice"}]},
        ],
    }


def compiled(scene: dict):
    return compile_scene(scene_from_dict(scene))


def face_gap(sim: Simulation) -> float:
    """Distance from the paddle's +x face to the box's −x face [m] (< 0: penetration)."""
    return (sim.body_pose("box")[0] - EDGE / 2) - (sim.body_pose("paddle")[0] + 0.01)


def test_paddle_carries_the_box_at_its_speed_with_compliance_sized_penetration():
    """A paddle at u = 0.5 m/s reaches the resting box after 10 ms and carries it at u.

    Penetration: the impact is taken in one step by the speculative contact (its bias −φ0/dt closes the gap),
    leaving the near-rigid compliance's penetration dt·Rn·γn with Rn = β²/(4π²)·w (β = 1) and γn ≤ m·u; the
    Delassus estimate of a point on the box's face is w ≤ 1/m + r²/I (r = 0.17 m to a corner, I = m·a²/6), so
    δ ≤ dt·β²/(4π²)·(1/m + r²/I)·m·u = 7.0e-5 m. The box then leaves the paddle at the speed that relaxes that
    penetration over the dissipation time (τd = 0.2 s for the pair): |v − u| ≤ δ/τd = 3.5e-4 m/s. If the
    paddle were teleported by u·dt per step without its velocity (fixed to the contacts), the contact would
    only push once overlapped and the box would trail by u·(dt + τd)-sized overlaps; that contrast is measured
    below (a documented contrast, ≥ 50× the kinematic penetration)."""
    model, state = compiled(paddle_scene())
    sim = Simulation.from_model(model, state)
    gaps, speeds = [], []
    for _ in range(300):
        sim.step()
        gaps.append(face_gap(sim))
        speeds.append(sim.body_velocity("box")[3])
    gaps, speeds = np.array(gaps), np.array(speeds)
    w_max = 1.0 / MASS + (3 * (EDGE / 2) ** 2) / (MASS * EDGE ** 2 / 6)
    delta = DT / (4 * math.pi ** 2) * w_max * MASS * U
    assert delta == pytest.approx(7.0e-5, rel=0.02)
    assert -gaps.min() <= delta
    touching = np.arange(300) >= 20                                  # contact begins at step 10 (5 mm at u)
    assert np.all(np.abs(speeds[touching] - U) <= delta / 0.2)
    # the paddle itself moved exactly u·t (its pose integrates its velocity)
    assert sim.body_pose("paddle")[0] == pytest.approx(-0.115 + 300 * DT * U, abs=1e-12)

    teleport = Simulation.from_model(model, state)           # contrast: pose set by script, velocity zero
    teleport.set_body_velocity("paddle")
    x0 = teleport.body_pose("paddle")[0]
    worst = 0.0
    for k in range(300):
        teleport.set_body_pose("paddle", [x0 + (k + 1) * DT * U, 0.0, EDGE / 2])
        teleport.step()
        worst = min(worst, face_gap(teleport))
    assert -worst >= 50 * -gaps.min()


def test_a_fast_paddle_is_caught_by_the_speculative_margin():
    """At u = 5 m/s the paddle moves 5 mm per step, five times the margin floor: its speed enters its margin
    share (dt·|v|), so the contact is found a step before it closes and the impact is taken by the speculative
    contact as at 0.5 m/s, with the same bound scaled by u: δ ≤ dt·β²/(4π²)·(1/m + r²/I)·m·u = 7.0e-4 m (the
    paddle's 5 mm per step would be the penetration if the contact were found only once overlapped)."""
    fast = 5.0
    model, state = compiled(paddle_scene(paddle_velocity=(fast, 0.0, 0.0), gap=0.012))
    sim = Simulation.from_model(model, state)
    gaps, speeds = [], []
    for _ in range(30):
        sim.step()
        gaps.append(face_gap(sim))
        speeds.append(sim.body_velocity("box")[3])
    w_max = 1.0 / MASS + (3 * (EDGE / 2) ** 2) / (MASS * EDGE ** 2 / 6)
    delta = DT / (4 * math.pi ** 2) * w_max * MASS * fast
    assert -min(gaps) <= delta
    assert abs(speeds[-1] - fast) <= delta / 0.2


def belt_scene(solver: str, moving_belt: bool) -> dict:
    """A box on a long belt (μ = 0.5 for the pair, τd = 0): the belt kinematic at u with the box at rest, or
    the belt fixed with the box launched at −u (the same relative motion, seen from the belt)."""
    belt = {"name": "belt", "position": [0.0, 0.0, -0.05],
            "geometries": [{"shape": "box", "size": [4.0, 1.0, 0.1], "material": "rubber"}]}
    box = {"name": "box", "mass": MASS, "position": [0.0, 0.0, EDGE / 2],
           "geometries": [{"shape": "box", "size": [EDGE] * 3, "material": "rubber"}]}
    if moving_belt:
        belt.update(kinematic=True, linear_velocity=[U, 0.0, 0.0])
    else:
        belt.update(fixed=True)
        box.update(linear_velocity=[-U, 0.0, 0.0])
    return {"name": "belt", "time_step": DT, "duration": 0.3, "solver": {"kind": solver},
            "materials": {"rubber": {"friction": 0.5, "dissipation_time": 0.0}}, "bodies": [belt, box]}


@pytest.mark.parametrize("solver", ["sap", "lcp"])
def test_belt_drags_a_box_as_a_fixed_belt_brakes_it_seen_from_the_belt(solver):
    """Galilean invariance: a box at rest on a belt moving at u = 0.5 m/s has, relative to the belt, the motion
    of a box launched at −u on the belt held fixed. The moving belt's velocity reaches the contacts only as the
    tangential known term b_t (SAP's bias, the LCP's friction rows), so the two runs agree to the solver's
    tolerance: SAP 1e-6 m/s (Newton's relative tolerance 1e-6 on 0.5 m/s; SAP's regularized cone lifts the
    sliding box by its gliding band in both frames alike), the LCP 1e-9. The LCP is Coulomb's law exactly
    (the belt moves along one of its 8 cone directions): the box gains μ·g = 4.905 m/s² while it slides,
    measured between 20 and 80 ms (after the box settles on the belt) within 0.5%, and then moves with the
    belt, |v − u| < 1e-9."""
    runs = []
    for moving in (True, False):
        model, state = compiled(belt_scene(solver, moving))
        sim = Simulation.from_model(model, state)
        v = []
        for _ in range(200):
            sim.step()
            v.append(sim.body_velocity("box")[3] + (0.0 if moving else U))     # in the ground's frame
        runs.append(np.array(v))
    np.testing.assert_allclose(runs[0], runs[1], rtol=0, atol=1e-6 if solver == "sap" else 1e-9)
    v = runs[0]
    assert abs(v[-1] - U) < (1e-5 if solver == "sap" else 1e-9)
    assert v[49] < 0.8 * U                                      # it slid for a while: t = u/(μg) = 0.102 s
    if solver == "lcp":
        assert (v[79] - v[19]) / (60 * DT) == pytest.approx(0.5 * 9.81, rel=0.005)


def _run(model, state, n, path):
    ctx = StepContext()
    out = [state]
    for _ in range(n):
        state, info = step(model, state, ctx, path=path)
        out.append(state)
    return out


def drop_scene(kinematic: bool) -> dict:
    """A ball dropped on a slab tilted 10° about x that is fixed, or kinematic at rest (it lands after ≈ 19 ms
    and slides and rolls down along −y)."""
    slab = {"name": "slab", "position": [0.0, 0.0, 0.0], "quaternion": [0.9961947, 0.0871557, 0.0, 0.0],
            "geometries": [{"shape": "box", "size": [1.0, 1.0, 0.1]}]}
    slab["kinematic" if kinematic else "fixed"] = True
    return {"name": "drop", "time_step": DT, "duration": 0.1,
            "bodies": [slab, {"name": "ball", "mass": 0.2, "position": [0.1, 0.0, 0.1025],
                              "geometries": [{"shape": "sphere", "radius": 0.05}]}]}


@pytest.mark.parametrize("path", ["auto", "reference"])
def test_kinematic_body_at_rest_is_a_fixed_body_to_the_bit(path):
    """Zero velocity: the known contact velocity is zero and the pose is not touched (no renormalization), so
    a ball bouncing and sliding on a kinematic slab follows the fixed-slab trajectory exactly."""
    n = 120 if path == "auto" else 40
    a = _run(*compiled(drop_scene(False)), n, path)
    b = _run(*compiled(drop_scene(True)), n, path)
    assert abs(a[-1].v[1, 4]) > 1e-3                          # the ball reached the slab and moves down it
    for sa, sb in zip(a, b):
        np.testing.assert_array_equal(sa.q, sb.q)
        np.testing.assert_array_equal(sa.v, sb.v)


def test_pose_integration_matches_the_closed_form():
    """Constant ω and v: p(t) = p0 + v·t, R(t) = exp(t·[ω]×)·R0 (world-frame ω, exact for a constant axis),
    on the compiled and the reference step; 1e-12 for the round-off of 500 steps."""
    omega = np.array([0.3, -0.4, 1.2])
    vel = np.array([0.2, -0.1, 0.05])
    q0 = np.array([0.9238795325112867, 0.0, 0.3826834323650898, 0.0])
    scene = {"name": "spin", "time_step": DT, "gravity": [0, 0, 0],
             "bodies": [{"name": "k", "kinematic": True, "position": [0.1, 0.2, 0.3], "quaternion": q0.tolist(),
                         "linear_velocity": vel.tolist(), "angular_velocity": omega.tolist(),
                         "geometries": [{"shape": "box", "size": [0.1, 0.2, 0.3]}]}]}
    from convexsim.spatial import quat_exp, quat_multiply

    n = 500
    expected_q = quat_multiply(quat_exp(n * DT * omega), q0)
    for path in ("auto", "reference"):
        model, state = compiled(scene)
        end = _run(model, state, n if path == "auto" else 100, path)[-1]
        steps = n if path == "auto" else 100
        np.testing.assert_allclose(end.q[0, :3], [0.1, 0.2, 0.3] + steps * DT * vel, atol=1e-12)
        want = expected_q if steps == n else quat_multiply(quat_exp(steps * DT * omega), q0)
        np.testing.assert_allclose(end.q[0, 3:], want, atol=1e-12)
        np.testing.assert_array_equal(end.v[0], np.concatenate([omega, vel]))


def tree_scene() -> dict:
    """A pendulum (a link on a revolute joint) struck by a kinematic paddle moving at u."""
    return {"name": "strike", "time_step": DT, "duration": 0.1,
            "bodies": [{"name": "bob", "mass": 0.5, "geometries": [{"shape": "sphere", "radius": 0.05}]},
                       {"name": "paddle", "kinematic": True, "position": [-0.062, 0.0, 0.5],
                        "linear_velocity": [U, 0.0, 0.1],
                        "geometries": [{"shape": "box", "size": [0.02, 0.3, 0.3]}]}],
            "joints": [{"name": "hinge", "type": "revolute", "parent": "world", "child": "bob",
                        "position": [0.0, 0.0, 1.0], "axis": [0.0, 1.0, 0.0], "child_offset": [0.0, 0.0, -0.5]}]}


@pytest.mark.roundoff
@pytest.mark.parametrize("solver", ["sap", "lcp"])
@pytest.mark.parametrize("which", ["bodies", "tree"])
def test_compiled_steps_agree_with_the_references_on_kinematic_contacts(solver, which):
    """The compiled SAP and LCP steps against their numpy references on scenes whose contacts carry a moving
    kinematic body's velocity (free bodies: the paddle scene with a sliding component; a tree: a pendulum
    struck by a paddle): states within 1e-9 (SAP: Newton to rel. tolerance 1e-6 from the same iterates;
    the LCP: the same pivots) over 40 steps of contact."""
    if which == "bodies":
        scene = paddle_scene(paddle_velocity=(U, 0.1, 0.0), gap=0.0005, solver=solver)
    else:
        scene = tree_scene()
        scene["solver"] = {"kind": solver}
    model, state = compiled(scene)
    a = _run(model, state, 40, "compiled")
    b = _run(model, state, 40, "reference")
    moved = False
    for sa, sb in zip(a, b):
        np.testing.assert_allclose(sa.q, sb.q, rtol=0, atol=1e-9)
        np.testing.assert_allclose(sa.v, sb.v, rtol=0, atol=1e-9)
        if sa.tree_q is not None and sa.tree_q.size:
            np.testing.assert_allclose(sa.tree_q, sb.tree_q, rtol=0, atol=1e-9)
            moved = moved or abs(sa.tree_v[0]) > 0.1
        else:
            moved = moved or abs(sa.v[1, 3]) > 0.1
    assert moved                                             # the paddle hit something


def test_scripting_refuses_dynamic_bodies_and_bad_values():
    model, state = compiled(paddle_scene())
    sim = Simulation.from_model(model, state)
    with pytest.raises(ValueError, match="'box' is not kinematic"):
        sim.set_body_velocity("box", linear=[1, 0, 0])
    with pytest.raises(ValueError, match="'ground' is not kinematic"):
        sim.set_body_pose("ground", [0, 0, 0])
    with pytest.raises(KeyError, match="unknown body"):
        sim.set_body_pose("nope", [0, 0, 0])
    with pytest.raises(ValueError, match="finite"):
        sim.set_body_velocity("paddle", linear=[math.nan, 0, 0])
    sim.set_body_pose("paddle", [1.0, 2.0, 3.0], [2.0, 0.0, 0.0, 0.0])        # normalized
    np.testing.assert_array_equal(sim.body_pose("paddle"), [1, 2, 3, 1, 0, 0, 0])
    sim.set_body_velocity("paddle", linear=[0.1, 0, 0], angular=[0, 0, 0.5])
    np.testing.assert_array_equal(sim.body_velocity("paddle"), [0, 0, 0.5, 0.1, 0, 0])


def test_known_contact_velocity_is_the_kinematic_points_velocity_in_the_contact_frame():
    """b = ±R_WCᵀ(ω × r + v) of the kinematic side (B +, A −), r from its COM to the contact point: checked against
    the rigid-body point velocity computed directly, for a kinematic body on either side and a free body (no
    term), numpy reference and compiled kernel to round-off."""
    from convexsim import dynamics
    from convexsim.model import Contacts
    from convexsim.stepping.jacobians import known_contact_velocities

    rng = np.random.default_rng(7)
    model, state = compiled(paddle_scene())
    box, paddle = model.body_names.index("box"), model.body_names.index("paddle")
    v = state.v.copy()
    v[paddle] = rng.normal(size=6)
    v[box] = rng.normal(size=6)                         # a free body's velocity is not a known term
    geom_of = {b: int(np.flatnonzero(model.geom_body == b)[0]) for b in (box, paddle)}
    pts = rng.normal(size=(2, 3))
    n = rng.normal(size=(2, 3))
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    pairs = [(paddle, box), (box, paddle)]
    contacts = Contacts(geom_a=np.array([geom_of[a] for a, _ in pairs]), geom_b=np.array([geom_of[b] for _, b in pairs]),
                        body_a=np.array([a for a, _ in pairs]), body_b=np.array([b for _, b in pairs]),
                        phi=np.zeros(2), point=pts, normal=n)
    R = dynamics.contact_frames(n)
    b = dynamics.known_contact_velocity(model, state.q, v, contacts, R)
    point_velocity = v[paddle, 3:] + np.cross(v[paddle, :3], pts - state.q[paddle, :3])
    np.testing.assert_allclose(b[0], -R[0].T @ point_velocity[0], atol=1e-14)      # paddle is side A
    np.testing.assert_allclose(b[1], R[1].T @ point_velocity[1], atol=1e-14)       # paddle is side B
    geoms = np.stack([contacts.geom_a, contacts.geom_b], axis=1).astype(np.int64)
    kin = np.zeros(model.nbody, np.bool_)
    kin[paddle] = True
    np.testing.assert_allclose(known_contact_velocities(R, geoms, pts, state.q, v, model.geom_body, kin), b,
                               atol=1e-15)
