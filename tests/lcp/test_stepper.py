"""The contact LCP (hand-built problems with closed forms) and the LCP stepper on small scenes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from convexsim.lcp.lemke import LemkeResult, LemkeStatus, lemke
from convexsim.stepping.lcp_info import LcpStepError
from convexsim.stepping.lcp_problem import build_contact_lcp, friction_directions, gap_bias
from convexsim.stepping.lcp_fallback import ray_contacts
from repo_paths import scene_file

G = 9.81
DATA = Path(__file__).parent / "data"


def particle_on_ground(v, force, m=1.0, dt=1e-3, mu=0.5, d=8, phi=0.0, s=0.2):
    """Point mass (3 dof) on the plane z = 0; contact frame t1 = x, t2 = y, n = z."""
    Ainv = np.eye(3) / m
    v_star = np.asarray(v, float) + dt * (np.asarray(force, float) / m + np.array([0, 0, -G]))
    J = np.eye(3)[None]
    M, q, layout = build_contact_lcp(Ainv, v_star, J, gap_bias([phi], dt, s), [mu], d)
    r = lemke(M, q)
    assert r.status == LemkeStatus.SOLVED
    return layout.velocity(v_star, r.z), layout.impulses(r.z), r


def test_resting_particle_normal_impulse_is_weight():
    v, gamma, _ = particle_on_ground([0, 0, 0], [0, 0, 0])
    # exact: p_n = m g dt cancels gravity; no friction needed
    np.testing.assert_allclose(gamma[0], [0, 0, G * 1e-3], atol=1e-15)
    np.testing.assert_allclose(v, 0.0, atol=1e-15)


@pytest.mark.parametrize("d", [4, 8, 16])
def test_polyhedral_anisotropy_mu_n_cos_pi_over_d(d):
    # sliding exactly between two cone directions (angle π/d) and pushed along the motion with 10 N:
    # friction is μN cos(π/d) (docs/lcp.md §2: d = 4 → a = 6.5316 vs 5.0950 isotropic)
    ang = np.pi / d
    e = np.array([np.cos(ang), np.sin(ang), 0.0])
    dt = 1e-3
    v, gamma, _ = particle_on_ground(2.0 * e, 10.0 * e, dt=dt, d=d)
    a = (v - 2.0 * e) / dt
    expected = 10.0 - 0.5 * G * np.cos(np.pi / d)
    # one step of exact arithmetic on O(1) data: round-off ~1e-16/dt = 1e-13
    np.testing.assert_allclose(a @ e, expected, rtol=1e-10)
    np.testing.assert_allclose(np.cross(a, e), 0.0, atol=1e-9)  # motion stays along the push
    if d == 4:
        assert a @ e == pytest.approx(6.5316, abs=1e-4)


def test_sliding_along_cone_edge_gets_full_coulomb():
    dt = 1e-3
    v, gamma, _ = particle_on_ground([1.0, 0, 0], [0, 0, 0], dt=dt)
    assert (v[0] - 1.0) / dt == pytest.approx(-0.5 * G, rel=1e-10)
    assert gamma[0, 0] == pytest.approx(-0.5 * gamma[0, 2], rel=1e-12)


def test_stick_below_threshold_and_slip_above():
    # push 4 N < μmg = 4.905 N from rest: sticks; 6 N: accelerates at 6 − 4.905 (along a cone edge)
    v, _, _ = particle_on_ground([0, 0, 0], [4.0, 0, 0])
    np.testing.assert_allclose(v, 0.0, atol=1e-15)
    dt = 1e-3
    v, _, _ = particle_on_ground([0, 0, 0], [6.0, 0, 0], dt=dt)
    assert v[0] / dt == pytest.approx(6.0 - 0.5 * G, rel=1e-10)


def test_gap_closes_exactly_within_step_and_stabilization_fraction():
    dt = 1e-3
    # falling at 2 m/s with a 1 mm gap: the step may only close the gap, v_z = −φ/dt = −1 m/s
    v, _, _ = particle_on_ground([0, 0, -2.0], [0, 0, 0], phi=1e-3, dt=dt)
    assert v[2] == pytest.approx(-1.0, rel=1e-12)
    # penetration 1 mm with s = 0.2: pushed out at s·|φ|/dt = 0.2 m/s
    v, _, _ = particle_on_ground([0, 0, 0], [0, 0, 0], phi=-1e-3, dt=dt, s=0.2)
    assert v[2] == pytest.approx(0.2, rel=1e-12)


def test_frictionless_collision_is_plastic_and_conserves_momentum():
    # two point masses on the x axis, contact normal +x from A to B: vn = v_B − v_A
    mA, mB = 1.0, 3.0
    Ainv = np.diag([1 / mA, 1 / mB])
    v_star = np.array([2.0, -1.0])
    J = np.zeros((1, 3, 2))
    J[0, 2] = [-1.0, 1.0]
    M, q, layout = build_contact_lcp(Ainv, v_star, J, np.zeros(1), np.zeros(1), 8)
    assert layout.num_directions == 0  # μ = 0: friction variables dropped
    r = lemke(M, q)
    v = layout.velocity(v_star, r.z)
    vc = (mA * 2.0 + mB * -1.0) / (mA + mB)
    np.testing.assert_allclose(v, [vc, vc], rtol=1e-14)


def test_lcp_matrix_structure_is_copositive_not_psd():
    Ainv = np.eye(3)
    J = np.eye(3)[None]
    M, q, layout = build_contact_lcp(Ainv, np.zeros(3), J, np.zeros(1), [0.5], 4)
    assert M.shape == (6, 6) and layout.size == 6
    # zᵀMz ≥ 0 on random nonnegative z (copositive), symmetric part indefinite (docs/lcp.md §2)
    rng = np.random.default_rng(0)
    Z = rng.random((2000, 6))
    assert np.einsum("ki,ij,kj->k", Z, M, Z).min() >= -1e-12
    assert np.linalg.eigvalsh(M + M.T).min() < -1e-3
    np.testing.assert_allclose(friction_directions(4), [[1, 0], [0, 1], [-1, 0], [0, -1]], atol=1e-15)


def test_jammed_penetrating_particle_ends_on_a_ray():
    # floor (normal +z) and ceiling (normal −z) both penetrate: W·(1, 1) = 0 is an internal force and
    # qᵀz̄ = s(φ1 + φ2)/dt < 0, so no z solves the LCP (v_z ≥ 1 and −v_z ≥ 1); Lemke must not say solved.
    dt, s = 1e-3, 0.2
    J = np.zeros((2, 3, 3))
    J[0] = np.eye(3)
    J[1] = np.diag([1.0, -1.0, -1.0])  # frame (t1, t2, n) = (x, −y, −z)
    v_star = np.array([0, 0, -G * dt])
    M, q, layout = build_contact_lcp(np.eye(3), v_star, J, gap_bias([-5e-3, -5e-3], dt, s), [0.5, 0.5], 4)
    r = lemke(M, q)
    assert r.status == LemkeStatus.SECONDARY_RAY
    assert {layout.contact_of_variable(i) for i in np.flatnonzero(r.ray)} <= {0, 1}


@pytest.mark.roundoff
def test_box_stack_degenerate_step_regression():
    # A 240-variable contact LCP from box_stack (step 52, resting contacts, z0 reaches round-off) on
    # which looser tie tolerances used to end on a false ray / numerical failure. Φ ≥ 0 up to
    # round-off, so a solution exists (docs/lcp.md §2); Lemke must find it.
    data = np.load(DATA / "box_stack_step52_lcp.npz")
    M, q = data["M"], data["q"]
    r = lemke(M, q)
    assert r.status == LemkeStatus.SOLVED
    w = M @ r.z + q
    s = np.abs(M).sum(1).max() * r.z.max() + np.abs(q).max()
    assert r.z.min() >= 0 and w.min() >= -1e-9 * s and np.abs(r.z * w).max() <= 1e-9 * s * r.z.max()


def test_ray_contacts_falls_back_to_the_entering_variable():
    # Two contacts, d = 4: z = (p_n 0..1, β 2..9 (contact 0: 2..5, contact 1: 6..9), λ 10..11), n = 12.
    # A ray whose z-part is all zero (possible only through rounding: in exact arithmetic a secondary
    # ray moves some z) must still name a contact: the entering variable's pair is the one with no
    # basic member. Here pair 7 (β of contact 1) is missing, so contact 1 is named, not both.
    _, _, layout = build_contact_lcp(np.eye(6), np.zeros(6), np.stack([np.eye(3, 6), np.eye(3, 6, 3)]),
                                     np.zeros(2), [0.5, 0.5], 4)
    n = layout.size
    assert n == 12
    basis = np.array([i if i != 7 else 2 * n for i in range(n)])  # z0 took pair 7's row; w_i elsewhere
    basis[3] = n + 3  # a basic z: still one member per pair
    r = LemkeResult(np.zeros(n), np.zeros(n), LemkeStatus.SECONDARY_RAY, 5, 1.0, basis, np.zeros(n), np.inf)
    assert ray_contacts(r, layout) == [1]
    # a nonzero ray names the contacts owning its nonzero entries (here β of contact 0 and λ of 1)
    ray = np.zeros(n)
    ray[[4, 11]] = [1.0, 0.5]
    r.ray = ray
    assert ray_contacts(r, layout) == [0, 1]


def test_bad_friction_directions():
    with pytest.raises(ValueError, match="friction_directions"):
        build_contact_lcp(np.eye(3), np.zeros(3), np.eye(3)[None], np.zeros(1), [0.5], 2)


# --------------------------------------------------------------------------------------------
# scenes (need the full pipeline: scene, collision, dynamics)
# --------------------------------------------------------------------------------------------

SPHERE_BETWEEN_PLATES = {
    "name": "jammed_sphere",
    "time_step": 1e-3,
    "duration": 0.01,
    "solver": {"kind": "lcp", "lcp_stabilization": 0.2},
    "bodies": [
        {"name": "floor", "fixed": True, "geometries": [{"shape": "halfspace"}]},
        {"name": "ceiling", "fixed": True, "position": [0, 0, 0.19], "quaternion": [0, 1, 0, 0],
         "geometries": [{"shape": "halfspace"}]},
        {"name": "ball", "mass": 1.0, "position": [0, 0, 0.095], "geometries": [{"shape": "sphere", "radius": 0.1}]},
    ],
}


def _simulate(scene, **kw):
    from convexsim.simulate import simulate

    return simulate(scene, **kw)


def test_ray_in_a_scene_is_reported_and_run_stops_cleanly():
    from convexsim.simulate import prepare
    from convexsim.stepping import step

    model, state, _ = prepare(SPHERE_BETWEEN_PLATES)
    with pytest.raises(LcpStepError) as exc:
        step(model, state)
    err = exc.value
    assert err.step == 0 and err.time == 0.0 and err.status == LemkeStatus.SECONDARY_RAY
    assert sorted(err.contacts) == [0, 1]
    assert "secondary ray" in str(err) and "floor" in str(err) and "ceiling" in str(err)
    traj = _simulate(SPHERE_BETWEEN_PLATES)
    assert "secondary ray" in traj.failure
    assert traj.num_frames == 1  # the initial frame is kept; nothing half-written


@pytest.mark.roundoff
def test_failure_after_step_zero_reports_where_and_keeps_frames(monkeypatch):
    # (cold path: the warm start solves the impact step without any Lemke pivot)
    from convexsim.stepping import lcp_islands

    monkeypatch.setattr(lcp_islands, "WARM_START_DEFAULT", False)
    # sphere_drop with a pivot limit of 1: a step whose LCP has q ≥ 0 needs 0 pivots, one with
    # q_n < 0 (the gap would close within the step) needs z0 plus at least one more pivot. The ball
    # falls freely (gap φ_k = 0.9 − g·dt²·k(k+1)/2) until the first step k whose free-fall end point
    # is below the ground: (k+1)(k+2) > 2·0.9/(g·dt²), k = 427 (t = 0.427 s). Steps 0..426 succeed,
    # so the run must keep frames 0..427 and name step 427, its time and its one contact.
    from convexsim.simulate import prepare
    from convexsim.stepping import step

    dt = 1e-3
    k = 0
    while (k + 1) * (k + 2) <= 2 * 0.9 / (G * dt**2):
        k += 1
    assert k == 427
    traj = _simulate(scene_file("sphere_drop"), solver="lcp", duration=0.6,
                     overrides={"solver.lcp_max_pivots": 1})
    assert f"step {k} " in traj.failure and "t = 0.427 s" in traj.failure
    assert "pivot limit (1)" in traj.failure and "ground–ball" in traj.failure
    assert traj.num_frames == k + 1 > 1
    assert traj.time[-1] == pytest.approx(k * dt, abs=1e-12)
    model, state, _ = prepare(scene_file("sphere_drop"), solver="lcp", overrides={"solver.lcp_max_pivots": 1})
    with pytest.raises(LcpStepError) as exc:
        for _ in range(k + 1):
            state, _ = step(model, state)
    err = exc.value
    assert err.step == k and err.time == pytest.approx(k * dt, abs=1e-12)
    assert err.status == LemkeStatus.PIVOT_LIMIT and err.pivots == 1
    assert err.contacts == [0]


@pytest.mark.roundoff
def test_sphere_drop_lands_without_penetration_and_rests():
    scene = scene_file("sphere_drop")
    traj = _simulate(scene, solver="lcp", duration=0.5)
    assert traj.failure == ""
    z = traj.position[:, traj.body_index("ball"), 2]
    t = traj.time
    # free fall from 1 m: symplectic Euler z_k = 1 − g dt² k(k+1)/2 until the landing step
    k = np.arange(len(t))
    free = 1.0 - G * 1e-6 * k * (k + 1) / 2
    falling = free > 0.1 + 1e-9
    np.testing.assert_allclose(z[falling], free[falling], atol=1e-12)
    # gap condition closes exactly: no penetration (beyond round-off) at any frame
    assert z.min() >= 0.1 - 1e-12
    # resting: normal force = m g on the last frame
    fz = traj.contact_force[traj.contact_offsets[-2]:traj.contact_offsets[-1], 2].sum()
    assert fz == pytest.approx(G, rel=1e-9)
    assert abs(traj.linear_velocity[-1, traj.body_index("ball"), 2]) < 1e-12


@pytest.mark.roundoff
def test_box_slide_stops_within_discrete_bound():
    traj = _simulate(scene_file("box_slide"), solver="lcp", duration=0.6)
    b = traj.body_index("box")
    dist = traj.position[-1, b, 0]
    v0, mu, dt = 2.0, 0.5, 1e-3
    # implicit Euler Coulomb (sliding along a cone direction: full μN): distance = Σ dt·v_k with
    # v_k = v0 − kμg·dt, which is v0²/(2μg) − v0·dt/2 up to one step's travel v0·dt
    analytic = v0**2 / (2 * mu * G)
    assert abs(dist - analytic) <= v0 * dt
    assert np.abs(traj.linear_velocity[-1, b]).max() < 1e-12
    # flat and no penetration beyond round-off
    assert traj.position[:, b, 2].min() >= 0.1 - 1e-12


@pytest.mark.roundoff
def test_incline_stick_does_not_move():
    # tan θ = 0.4 < μ cos(π/8) = 0.462: inside even the inscribed octagon, so the box sticks exactly
    traj = _simulate(scene_file("incline_stick"), solver="lcp", duration=0.2)
    b = traj.body_index("box")
    assert np.abs(traj.position[:, b] - traj.position[0, b]).max() < 1e-12


def test_restitution_moreau_midpoint_rebound_ratio():
    e = 0.5
    scene = {
        "name": "bounce", "time_step": 1e-3, "duration": 0.5,
        "solver": {"kind": "lcp", "lcp_restitution": e},
        "bodies": [
            {"name": "ground", "fixed": True, "geometries": [{"shape": "halfspace"}]},
            {"name": "ball", "mass": 1.0, "position": [0, 0, 0.3], "geometries": [{"shape": "sphere", "radius": 0.1}]},
        ],
    }
    traj = _simulate(scene)
    assert traj.failure == ""
    vz = traj.linear_velocity[:, 1, 2]
    k = int(np.argmax(vz > 0))  # first frame after the impact step
    # Newton's law on the active contact: v⁺ = −e·v⁻ exactly (frictionless normal, one contact)
    assert vz[k] == pytest.approx(-e * vz[k - 1], rel=1e-12)


# --------------------------------------------------------------------------------------------
# the fallback chain (faults injected into Lemke; the answers are judged on the step's own LCP)
# --------------------------------------------------------------------------------------------


def _failing_first_lemke(monkeypatch, bad_answer=False):
    """Make the stepper's first Lemke run per step report PIVOT_LIMIT; later runs (the fallback rungs)
    are real, or, with bad_answer, claim SOLVED with a wrong z (z = 0 while q has negative entries)."""
    from convexsim.stepping import lcp_fallback

    real = lcp_fallback.lemke
    calls = []

    def fake(M, q, **kw):
        calls.append(kw.get("d") is not None)
        r = real(M, q, **kw)
        if len(calls) == 1:
            return LemkeResult(r.z, r.w, LemkeStatus.PIVOT_LIMIT, 7, 1.0, r.basis, np.zeros_like(r.z), np.inf)
        if bad_answer:
            z = np.zeros_like(r.z)
            return LemkeResult(z, np.asarray(q, float).copy(), LemkeStatus.SOLVED, 3, 0.0, r.basis, z, 0.0)
        return r

    monkeypatch.setattr(lcp_fallback, "lemke", fake)
    # the Python step's Lemke is replaced: keep lcp_step on that path (the compiled kernel calls its own)
    from convexsim.stepping import packing
    monkeypatch.setattr(packing, "lcp_supported_cached", lambda model: (False, "test: reference path"))
    return calls


def test_fallback_rung_solves_and_is_recorded(monkeypatch):
    # sphere_drop resting on the ground: the first Lemke run "fails", the first perturbed-q run solves.
    # The answer must be the resting one (normal impulse m·g·dt, v⁺ = 0), judged on the original data.
    from convexsim.stepping import lcp_step
    from convexsim.simulate import prepare

    model, state, _ = prepare("scenes/sphere_drop.yaml", solver="lcp")
    radius = 0.1
    state.q[1, :3] = [0.0, 0.0, radius]  # ball (body 1) resting on the ground, at rest
    state.v[1] = 0.0
    calls = _failing_first_lemke(monkeypatch)
    new, info = lcp_step(model, state, warm_start=False)
    assert info.rung == "perturbed_q" and info.lemke_runs == 2 and len(calls) == 2
    assert info.pivots >= 7 and info.iterations == info.pivots
    assert info.gamma[:, 2].sum() == pytest.approx(model.body_mass[1] * G * model.time_step, rel=1e-9)
    assert np.abs(new.v[1]).max() <= 1e-12


def test_fallback_answers_are_checked_on_the_original_lcp(monkeypatch):
    # every rung "solves" with a wrong z: none may be accepted; the step fails naming its contact
    from convexsim.stepping import lcp_fallback, lcp_step
    from convexsim.simulate import prepare

    model, state, _ = prepare("scenes/sphere_drop.yaml", solver="lcp")
    state.q[1, :3] = [0.0, 0.0, 0.1]
    state.v[1] = 0.0
    calls = _failing_first_lemke(monkeypatch, bad_answer=True)
    with pytest.raises(LcpStepError) as exc:
        lcp_step(model, state, warm_start=False)
    n_rungs = (lcp_fallback.FALLBACK_Q_TRIES + lcp_fallback.FALLBACK_COVERING_TRIES
               + len(lcp_fallback.FALLBACK_REGULARIZATION))
    assert len(calls) == 1 + n_rungs
    assert sum(calls) == lcp_fallback.FALLBACK_COVERING_TRIES  # the covering rungs pass their own d
    err = exc.value
    assert err.status == LemkeStatus.PIVOT_LIMIT and err.contacts == [0]
    assert f"{n_rungs} fallback attempts" in str(err) and "ground–ball" in str(err)


def test_step_info_reports_rung_and_work(monkeypatch):
    # cold: rung "lemke", iterations = pivots; warm: rung "warm", iterations = the warm run's pivots plus its
    # one factorization (warm_solves); islands below WARM_MIN_SIZE unknowns are never warm-started
    from convexsim.stepping import StepContext, lcp_islands, lcp_step
    from convexsim.simulate import prepare

    from convexsim.stepping import StepContext

    model, state, _ = prepare("scenes/box_stack.yaml", solver="lcp")
    ctx = StepContext()
    s1, i1 = lcp_step(model, state, ctx, warm_start=True)
    assert i1.rung == "lemke" and i1.iterations == i1.pivots > 0 and i1.lemke_runs == 1
    assert 0 < 10 * i1.contacts.count < lcp_islands.WARM_MIN_SIZE and not i1.warm_attempted
    s2, i2 = lcp_step(model, s1, ctx, warm_start=True)
    assert not i2.warm_attempted                    # n = 10·m < WARM_MIN_SIZE: solved cold
    monkeypatch.setattr(lcp_islands, "WARM_MIN_SIZE", 0)
    _, i3 = lcp_step(model, s2, ctx, warm_start=True)
    assert i3.warm_attempted and i3.warm_solves == 1 and i3.iterations == i3.pivots + i3.warm_solves
    if i3.warm_accepted:
        assert i3.rung == "warm" and i3.lemke_runs == 0
    else:
        assert i3.rung == "lemke" and i3.lemke_runs >= 1


# --------------------------------------------------------------------------------------------
# contact islands
# --------------------------------------------------------------------------------------------


def test_contact_islands_connect_moving_bodies_only():
    from convexsim.stepping.lcp_islands import contact_islands

    # cliques: 0–1 touch, 1–2 touch (one island {0, 1, 2}); 3 and 4 only touch the ground (−1): two
    # islands; a ground–ground contact (−1, −1) is its own island
    ca = np.array([0, -1, 1, 3, -1, 4, -1])
    cb = np.array([1, 0, 2, -1, 4, -1, -1])
    islands = contact_islands(ca, cb)
    assert [i.tolist() for i in islands] == [[0, 1, 2], [3], [4, 5], [6]]
    assert contact_islands(np.zeros(0, np.int64), np.zeros(0, np.int64)) == []


TWO_BOXES = {
    "name": "two_boxes", "time_step": 1e-3, "duration": 0.01, "solver": {"kind": "lcp"},
    "materials": {"default": {"friction": 0.5}},
    "bodies": [
        {"name": "ground", "fixed": True, "geometries": [{"shape": "halfspace"}]},
        {"name": "resting", "mass": 1.0, "position": [0, 0, 0.1],
         "geometries": [{"shape": "box", "size": [0.2, 0.2, 0.2]}]},
        {"name": "sliding", "mass": 2.0, "position": [1.0, 0, 0.1], "linear_velocity": [2.0, 0, 0],
         "geometries": [{"shape": "box", "size": [0.2, 0.2, 0.2]}]},
        {"name": "stacked", "mass": 0.5, "position": [0, 0, 0.3],
         "geometries": [{"shape": "box", "size": [0.2, 0.2, 0.2]}]},
    ],
}


@pytest.mark.roundoff
@pytest.mark.parametrize("warm", [False, True])
def test_islands_give_the_same_step_as_one_lcp(warm, monkeypatch):
    # Contacts of different islands share no velocity, so the LCP is block diagonal and solving the
    # blocks separately is exact: the split step must equal the unsplit one. The answers are checked on
    # physics both ways: the resting pair stays at rest (normal impulses carry 1.5 kg·g·dt), the sliding
    # box decelerates by μ·g·dt along a cone direction (x is a friction direction on a flat floor).
    from convexsim.stepping import StepContext, lcp_islands, lcp_step
    from convexsim.simulate import prepare

    out = {}
    for split in (False, True):
        monkeypatch.setattr(lcp_islands, "SPLIT_ISLANDS", split)
        model, state, _ = prepare(TWO_BOXES)
        ctx = StepContext()
        for _ in range(3):
            state, info = lcp_step(model, state, ctx, warm_start=warm)
        out[split] = (state, info)
    (s0, i0), (s1, i1) = out[False], out[True]
    assert i0.islands == 1 and i1.islands == 2
    # one dense solve per island vs one for all: round-off differences only
    np.testing.assert_allclose(s1.v, s0.v, atol=1e-12)
    np.testing.assert_allclose(s1.q, s0.q, atol=1e-14)
    dt = 1e-3
    assert np.abs(s1.v[[1, 3]]).max() <= 1e-12
    assert s1.v[2, 3] == pytest.approx(2.0 - 3 * 0.5 * G * dt, rel=1e-9)  # v = (ω, v_lin)
    c = i1.contacts
    rest = np.isin(c.body_b, [1]) & (c.body_a == 0) | np.isin(c.body_a, [1]) & (c.body_b == 0)
    assert i1.gamma[rest, 2].sum() == pytest.approx(1.5 * G * dt, rel=1e-9)
