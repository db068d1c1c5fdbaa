"""Physics verification of the whole pipeline (scene -> collision -> SAP/LCP -> integration).

Rules (as in Newton's verification suite): every test names its reference equation in the docstring,
derives its tolerance from dt, σ or the model, and would fail if the behaviour broke.
"""

import math

import numpy as np
import pytest

from convexsim import dynamics
from convexsim.sap import delassus_diagonal
from convexsim.simulate import prepare, run_model, simulate
from convexsim.stepping import build_sap_problem, contact_kinematics

G = 9.81


def ground(material="default", quaternion=(1.0, 0.0, 0.0, 0.0)):
    return {"name": "ground", "fixed": True,
            "geometries": [{"shape": "halfspace", "material": material, "quaternion": list(quaternion)}]}


def sphere_on_ground(*, contact_model="sap", k_mat=2e4, tau_mat=0.01, d_mat=10.0, mu=0.5, m=1.0, r=0.1,
                     dt=1e-3, duration=0.6, beta=1.0, z0=None, v0=(0, 0, 0)):
    return {
        "name": "sphere_rest", "time_step": dt, "duration": duration, "contact_model": contact_model,
        "solver": {"beta": beta},
        "materials": {"default": {"friction": mu, "stiffness": k_mat, "dissipation_time": tau_mat,
                                  "hunt_crossley_dissipation": d_mat}},
        "bodies": [ground(), {"name": "ball", "mass": m, "position": [0, 0, r if z0 is None else z0],
                              "linear_velocity": list(v0),
                              "geometries": [{"shape": "sphere", "radius": r}]}],
    }


def box_on_ground(*, contact_model="lagged", v0=(0, 0, 0), mu=0.5, tilt=0.0, duration=1.0, dt=1e-3,
                  k_mat=2e6, tau_mat=0.005, d_mat=20.0, sigma=1e-3, v_s=1e-4, size=(0.2, 0.2, 0.1)):
    """A box resting on a halfspace tilted by ``tilt`` about the world y axis (slope down towards +x)."""
    qg = (math.cos(tilt / 2), 0.0, math.sin(tilt / 2), 0.0)
    h = size[2] / 2
    n = np.array([math.sin(tilt), 0.0, math.cos(tilt)])
    return {
        "name": "box", "time_step": dt, "duration": duration, "contact_model": contact_model,
        "solver": {"sigma": sigma, "stiction_tolerance": v_s},
        "materials": {"default": {"friction": mu, "stiffness": k_mat, "dissipation_time": tau_mat,
                                  "hunt_crossley_dissipation": d_mat}},
        "bodies": [ground(quaternion=qg), {
            "name": "box", "mass": 1.0, "position": list(h * n), "quaternion": list(qg),
            "linear_velocity": list(v0), "geometries": [{"shape": "box", "size": list(size)}]}],
    }


@pytest.mark.parametrize("contact_model", ["sap", "lagged"])
def test_rest_penetration_is_mg_over_k_in_the_soft_regime(contact_model):
    """Check a resting sphere penetrates δ = m·g/k (combined k = 1e4 N/m) within 1%.

    Soft regime for sap: k = 1e4 < 4π²/(β²·w·dt·(dt+τ_d)) ≈ 1.1e6 N/m (w ≈ 1.68 /kg), so R_n is not
    clamped; at rest γ_n = −dt·k·φ = m·g·dt exactly, so the 1% tolerance only absorbs the unsettled
    oscillation (critically damped: τ_d·ω/2 = 0.02·100/2 = 1 for sap; d·m·g/(2√(k·m)) ≈ 0.5 for lagged).
    """
    traj = simulate(sphere_on_ground(contact_model=contact_model))
    assert not traj.failure, traj.failure
    k, m, r = 1e4, 1.0, 0.1
    penetration = r - traj.position[-1, traj.body_index("ball"), 2]
    assert penetration == pytest.approx(m * G / k, rel=1e-2)
    # The recorded contact force balances gravity (same 1%).
    last = traj.contacts_at(traj.num_frames - 1)
    assert last["force"][:, 2].sum() == pytest.approx(m * G, rel=1e-2)


def test_free_fall_is_exact_symplectic_euler():
    """Check a body far from the ground follows v_n = v0 + n·dt·g, z_n = z0 + dt²·g·n(n+1)/2 to round-off."""
    scene = sphere_on_ground(z0=10.0, duration=0.3)
    traj = simulate(scene)
    n = np.arange(traj.num_frames)
    dt = 1e-3
    z = 10.0 - G * dt**2 * n * (n + 1) / 2
    np.testing.assert_allclose(traj.position[:, 1, 2], z, rtol=0, atol=1e-12)
    np.testing.assert_allclose(traj.linear_velocity[:, 1, 2], -G * dt * n, rtol=0, atol=1e-12)
    assert traj.contact_offsets[-1] == 0


def test_box_sliding_stops_at_v0_squared_over_2_mu_g_lagged():
    """Check a box launched at 2 m/s with μ = 0.5 stops after v0²/(2μg) = 0.4077 m within 3% (lagged).

    The lagged model bounds friction by μ·n0 with the previous step's normal impulse, so it decelerates
    at μ·g once the contact is established (the first step has n0 = 0: 2 mm extra, 0.5%).
    """
    traj = simulate(box_on_ground(contact_model="lagged", v0=(2.0, 0, 0), duration=0.7))
    assert not traj.failure, traj.failure
    b = traj.body_index("box")
    x_stop = traj.position[-1, b, 0]
    assert abs(traj.linear_velocity[-1, b, 0]) < 1e-3
    assert x_stop == pytest.approx(2.0**2 / (2 * 0.5 * G), rel=0.03)


def test_incline_sticks_below_atan_mu_lagged():
    """Check a box on a slope with tan θ = 0.4 < μ = 0.5 sticks (lagged).

    Stiction slip |v_t| = v_s·r/√(1−r²) with r = tanθ/μ = 0.8 → 1.33·v_s (sap-math.md §5.4); bound 2·v_s.
    """
    traj = simulate(box_on_ground(contact_model="lagged", tilt=math.atan(0.4), duration=0.5))
    assert not traj.failure, traj.failure
    slip = np.linalg.norm(traj.linear_velocity[-100:, traj.body_index("box")], axis=1).max()
    assert slip < 2 * 1e-4, f"slip {slip:.3g} m/s exceeds 2·v_s"


def test_incline_sticks_below_atan_mu_sap_with_delassus_slip_bound():
    """Check a box on a slope with tan θ = 0.4 < μ = 0.5 sticks (sap), creeping at the regularized slip.

    Reference (sap-math.md §2.2, paper Eq. slip_estimation): in the stiction region of the regularized
    cone γ_t = −v_t/R_t with R_t = σ·w, so each contact slips at exactly |v_t,c| = σ·w_c·|γ_t,c|, where
    w_c is the Delassus diagonal estimate the solver uses (here ≈ 2.63 /kg for a corner of the box)
    and γ_t,c the contact's tangential impulse of that step. A box that does not rotate moves with its
    contact points, so its speed along the slope is max_c σ·w_c·|γ_t,c| (rocking would add |ω|·r).
    Asserted for each of the last 100 steps: speed ≤ 1.05 × that bound (5% for rocking and the Newton
    tolerance ε_r = 1e-6; measured ratio 1.00001) and ≥ 0.95 × it (the box really creeps at the
    regularized rate rather than being held by some other mechanism). The bound itself is ≈ 2.4e-6 m/s,
    about half of σ·μ·g·dt = 4.9e-6 m/s (four corners share γ_t, but w·m ≈ 2.6 > 1).
    """
    theta = math.atan(0.4)
    n = np.array([math.sin(theta), 0.0, math.cos(theta)])
    model, state, duration = prepare(box_on_ground(contact_model="sap", tilt=theta, duration=0.5))
    n_steps = int(round(duration / model.time_step))
    b = model.body_names.index("box")
    ratios, bounds = [], []
    previous = [state]

    def check(m, new_state, info):
        before, previous[0] = previous[0], new_state
        if new_state.step <= n_steps - 100:
            return
        kin = contact_kinematics(m, before)
        A, v_star = dynamics.free_motion(m, before)
        v0 = before.v[dynamics.moving_bodies(m)].reshape(-1)
        w = delassus_diagonal(build_sap_problem(m, before, kin, A, v_star, v0))
        gamma_t = np.linalg.norm(info.gamma.reshape(-1, 3)[:, :2], axis=1)
        bound = float((m.solver.sigma * w * gamma_t).max())
        v = new_state.v[b, 3:]
        ratios.append(np.linalg.norm(v - (v @ n) * n) / bound)
        bounds.append(bound)

    traj, _ = run_model(model, state, duration=duration, step_callback=check)
    assert not traj.failure, traj.failure
    assert len(ratios) == 100
    assert max(ratios) <= 1.05, f"slip exceeds σ·w·|γ_t| by {max(ratios):.4g}x"
    assert min(ratios) >= 0.95, f"slip is only {min(ratios):.4g} of σ·w·|γ_t|"
    assert max(bounds) < 1e-3 * 0.5 * G * 1e-3  # and the creep is below σ·μ·g·dt, as docs state


def test_incline_slides_above_atan_mu_with_coulomb_acceleration_lagged():
    """Check tan θ = 0.6 > μ = 0.5: the box accelerates at g(sin θ − μ cos θ) = 0.8417 m/s² within 2%."""
    theta = math.atan(0.6)
    traj = simulate(box_on_ground(contact_model="lagged", tilt=theta, duration=0.6))
    assert not traj.failure, traj.failure
    b = traj.body_index("box")
    t = traj.time
    speed = np.linalg.norm(traj.linear_velocity[:, b], axis=1)
    sel = t > 0.2
    a = np.polyfit(t[sel], speed[sel], 1)[0]
    assert a == pytest.approx(G * (math.sin(theta) - 0.5 * math.cos(theta)), rel=0.02)


def test_frictionless_collision_conserves_linear_momentum():
    """Check two spheres colliding head-on and off-centre in zero gravity keep Σm·v to 1e-9 (equal and
    opposite contact impulses), and separate (the contact is dissipative but not adhesive)."""
    scene = {
        "name": "collide", "time_step": 1e-3, "duration": 0.3, "gravity": [0, 0, 0],
        "materials": {"default": {"friction": 0.0, "stiffness": 1e5, "dissipation_time": 0.001}},
        "bodies": [
            {"name": "a", "mass": 1.0, "position": [0, 0, 0], "linear_velocity": [1.0, 0, 0],
             "geometries": [{"shape": "sphere", "radius": 0.1}]},
            {"name": "b", "mass": 3.0, "position": [0.3, 0.05, 0.02], "linear_velocity": [-0.5, 0, 0],
             "geometries": [{"shape": "sphere", "radius": 0.1}]},
        ],
    }
    traj = simulate(scene)
    assert not traj.failure, traj.failure
    p = 1.0 * traj.linear_velocity[:, 0] + 3.0 * traj.linear_velocity[:, 1]
    np.testing.assert_allclose(p, np.broadcast_to(p[0], p.shape), rtol=0, atol=1e-9)
    assert traj.contact_offsets[-1] > 0, "the spheres never touched"
    rel = traj.linear_velocity[-1, 1] - traj.linear_velocity[-1, 0]
    d = traj.position[-1, 1] - traj.position[-1, 0]
    assert rel @ d > 0, "the spheres must be separating at the end"


def test_box_sliding_sap_stop_time_and_distance_despite_gliding():
    """Check the sap model's sliding box (v0 = 2 m/s, μ = 0.5) against Coulomb, within its gliding bound.

    Reference: in sliding (region II) the friction impulse is exactly μ·γ_n, and the box starts and ends
    at rest vertically, so Σγ_n = m·g·T and the stopping time is T = v0/(μ·g) = 0.408 s whatever the
    hop; tolerance 2% (20 steps of ~1 ms settle). The distance v0²/(2μg) additionally depends on how the
    normal impulse is spread in time: the gliding offset (dt+τ_d)·μ·|v_t| = 11 mm makes the box hop
    (docs/physics-verification.md), which redistributes deceleration; measured 0.3% off, tolerance 5%.
    The hop itself is asserted too: it is the documented artifact (> 5 mm), absent in the lagged model.
    """
    traj = simulate(box_on_ground(contact_model="sap", tau_mat=0.005, v0=(2.0, 0, 0), duration=0.7))
    assert not traj.failure, traj.failure
    b = traj.body_index("box")
    vx = traj.linear_velocity[:, b, 0]
    t_stop = traj.time[np.argmax(np.abs(vx) < 1e-3)]
    assert t_stop == pytest.approx(2.0 / (0.5 * G), rel=0.02)
    assert traj.position[-1, b, 0] == pytest.approx(2.0**2 / (2 * 0.5 * G), rel=0.05)
    assert traj.position[:, b, 2].max() - 0.05 > 5e-3, "the sap model's gliding hop is expected"
    lagged = simulate(box_on_ground(contact_model="lagged", v0=(2.0, 0, 0), duration=0.7))
    assert lagged.position[:, b, 2].max() - 0.05 < 1e-4, "lagged slides without hopping"


def test_box_stack_stays_within_a_millimetre_for_five_seconds():
    """Check the shipped 5-box stack (SAP, box–box manifolds) moves less than 1 mm in 5 s.

    Reference: a stack at rest. Settling under the near-rigid clamp compresses each contact layer by
    ≈ N_above·m·g·dt·(dt+τ_d)·β²·w/(4π²) (sap-math.md §9.1), < 0.2 mm per layer here, and no body may
    drift sideways (symmetric manifold: 1e-6 m).
    """
    traj = simulate("scenes/box_stack.yaml", duration=5.0, record_every=10)
    assert not traj.failure, traj.failure
    moving = [i for i, n in enumerate(traj.body_names) if n != "ground"]
    d = traj.position[:, moving] - traj.position[0, moving]
    assert np.abs(d).max() < 1e-3, np.abs(d).max(axis=0)
    assert np.abs(d[..., :2]).max() < 1e-6
    assert traj.solver_converged.all()
