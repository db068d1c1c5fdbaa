"""The crash basis for cold contact LCPs (``convexsim.lcp.crash``) and the stepper's "crash" rung.

What must hold:

* on tiny contact LCPs whose solution is known analytically (one point contact at a body's centre of mass:
  sliding, sticking, separating) the guess is exactly the solution's basic set, and Lemke from it makes no
  pivot;
* on a box resting on four coplanar corners (redundant contacts: 12 impulse directions on 6 dofs) the guess's
  M_αα is nonsingular and Lemke from it solves the LCP;
* on the captured cold heap LCPs (tests/lcp/data/README.md) Lemke from the guess solves the LCP, exact and
  under bit-level perturbations of q, with every answer passing Lemke's final check and an independent check
  on the *unperturbed* data, in fewer than half the pivots of the stepper's cold chain on the same LCP
  (measured: 8–120× fewer; docs/lcp.md §6);
* the guess is the same for a dense and a CSR M;
* the stepper takes the crash rung on cold large islands, and its trajectory equals the one without it up
  to the final check's tolerance.
"""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse

from convexsim.lcp.crash import contact_state, crash_guess
from convexsim.lcp.lemke import lemke_from_basis
from convexsim.stepping import lcp_fallback, lcp_islands, lcp_problem, lcp_step
from convexsim.stepping.lcp_problem import build_contact_lcp
from convexsim.stepping.lcp_fallback import solve_contact_lcp
from repo_paths import scene_file
from test_lcp_regressions import independent_check, passes_final_check

DATA = Path(__file__).parent / "data"
HEAPS = ["mixed_clutter_heap_t09", "mixed_clutter_heap_t10_cold", "mixed_clutter_heap_t052_cold",
         "mixed_clutter_heap_t064_cycling"]
D = 8
MASS, G, DT, MU = 2.0, 9.81, 1e-3, 0.3


def _heap(name):
    d = np.load(DATA / f"{name}.npz")
    n = d["q"].shape[0]
    Ms = scipy.sparse.csr_matrix((d["data"], d["indices"], d["indptr"]), shape=(n, n))
    return Ms, d["q"], n // (D + 2)


def _body(points, v_star, bias, mu=MU):
    """(M, q) of one free body (mass MASS, inertia diag(0.01, 0.02, 0.03)) with contacts at ``points``
    (relative to its centre of mass, world frame = body frame) on the ground (normal +z, tangents x, y)."""
    Ainv = np.diag(np.r_[1.0 / np.array([0.01, 0.02, 0.03]), np.full(3, 1.0 / MASS)])
    frame = np.eye(3)                                    # rows t1, t2, n
    J = np.array([[np.r_[np.cross(r, e), e] for e in frame] for r in np.atleast_2d(points)])
    m = J.shape[0]
    M, q, layout = build_contact_lcp(Ainv, np.asarray(v_star, float), J, np.full(m, bias), np.full(m, mu), D)
    return M, q, layout


def _basic(*idx, n):
    out = np.zeros(n, bool)
    out[list(idx)] = True
    return out


# z = (p_n, β_0..β_7, λ) for one contact: indices 0, 1..8, 9; u_j at 45°·j
@pytest.mark.parametrize("case", ["sliding", "sticking", "separating"])
def test_single_contact_guess_is_the_analytic_basis(case):
    # A point contact at the centre of mass: the Delassus matrix is I/MASS, so the step's answer is analytic.
    # Pressing (v*_n = −g·dt) with a tangential velocity 1 m/s along u_0 the friction saturates
    # (MASS·|v_t| ≫ μ·p_n): p_n = MASS·g·dt, β_4 = μ·p_n (u_4 = −u_0 opposes the slip), λ = |v_t⁺| =
    # 1 − μ·p_n/MASS > 0: basic {p_n, β_4, λ}. With |v*_t| = 1 mm/s at 20° it sticks
    # (MASS·|v*_t| < μ·p_n·cos 22.5°, the octagon's inradius): f = −MASS·v*_t at 200°, between u_4 (180°) and
    # u_5 (225°): basic {p_n, β_4, β_5}, λ = 0. Moving apart (v*_n = +0.5 m/s) with slip 1 m/s: p_n = 0,
    # λ = 1 m/s, which needs a basic β_4 (at 0)
    # to keep M_αα nonsingular: basic {β_4, λ}.
    vt = {"sliding": (1.0, 0.0), "sticking": 1e-3 * np.array([np.cos(np.pi / 9), np.sin(np.pi / 9)]),
          "separating": (1.0, 0.0)}[case]
    vn = 0.5 if case == "separating" else -G * DT
    M, q, layout = _body([0.0, 0.0, 0.0], np.r_[0.0, 0.0, 0.0, vt[0], vt[1], vn], 0.0)
    n = q.shape[0]
    pn = MASS * G * DT
    want = {"sliding": _basic(0, 5, 9, n=n), "sticking": _basic(0, 5, 6, n=n),
            "separating": _basic(5, 9, n=n)}[case]
    guess = crash_guess(M, q, 1, D)
    np.testing.assert_array_equal(guess, want)
    r = lemke_from_basis(M, q, guess)
    assert r.solved and r.pivots == 0
    assert passes_final_check(M, q, r.z) and independent_check(M, q, r.z)
    z = r.z
    if case == "sliding":
        np.testing.assert_allclose([z[0], z[5], z[9]], [pn, MU * pn, 1.0 - MU * pn / MASS], rtol=1e-12)
    elif case == "sticking":
        u = np.array([[np.cos(np.pi), np.sin(np.pi)], [np.cos(1.25 * np.pi), np.sin(1.25 * np.pi)]])
        np.testing.assert_allclose(z[0], pn, rtol=1e-12)
        np.testing.assert_allclose(z[5:7] @ u, -MASS * np.asarray(vt), rtol=1e-10)
        assert z[9] == 0.0
    else:
        np.testing.assert_allclose(z[9], 1.0, rtol=1e-12)
        assert z[0] == 0.0 and z[5] == 0.0


def test_box_on_four_corners_guess_is_nonsingular():
    # A box resting on its four bottom corners: 4 normals and 8 sticking friction directions would be basic,
    # but 12 impulse directions on one body's 6 dofs are dependent (the PGS impulses are one of many force
    # distributions). The guess keeps at most 6 of them (rank of J A⁻¹ Jᵀ), M_αα is nonsingular, and Lemke
    # from it solves the LCP.
    corners = np.array([[sx * 0.2, sy * 0.1, -0.05] for sx in (-1, 1) for sy in (-1, 1)])
    M, q, layout = _body(corners, [0.0, 0.0, 0.0, 1e-4, 0.0, -G * DT], 0.0)
    m = 4
    guess = crash_guess(M, q, m, D)
    impulse_part = guess[:m * (D + 1)]
    assert 1 <= impulse_part.sum() <= 6
    a = np.flatnonzero(guess)
    assert np.linalg.cond(M[np.ix_(a, a)]) < 1e8
    r = lemke_from_basis(M, q, guess)
    assert r.solved and passes_final_check(M, q, r.z) and independent_check(M, q, r.z)
    # the box stays at rest: Σ p_n carries its weight per step
    np.testing.assert_allclose(r.z[:m].sum(), MASS * G * DT, rtol=1e-9)


def test_pgs_impulses_carry_the_weight():
    # contact_state's PGS estimate on the same box: the normal impulses carry the weight, the contact
    # velocities vanish (to the estimate's accuracy: 200 sweeps on a 4-contact problem converge far below
    # 1e-6 relative)
    corners = np.array([[sx * 0.2, sy * 0.1, -0.05] for sx in (-1, 1) for sy in (-1, 1)])
    M, q, _ = _body(corners, [0.0, 0.0, 0.0, 1e-4, 0.0, -G * DT], 0.0)
    gamma, vel = contact_state(M, q, 4, D)
    np.testing.assert_allclose(gamma[:, 2].sum(), MASS * G * DT, rtol=1e-6)
    assert np.abs(vel).max() <= 1e-6 * G * DT
    assert gamma[:, 2].min() >= 0.0


@pytest.mark.roundoff
@pytest.mark.parametrize("name", HEAPS)
def test_crash_guess_solves_heap_lcps_in_few_pivots(name):
    Ms, q, m = _heap(name)
    M = Ms.toarray()
    n = q.shape[0]
    guess = crash_guess(Ms, q, m, D)
    np.testing.assert_array_equal(crash_guess(M, q, m, D), guess)      # dense and CSR M: the same guess
    # the stepper's cold chain on the same LCP (the first Lemke run, then the fallback rungs if needed)
    res, first = solve_contact_lcp(M, q)
    assert res is not None
    cold_pivots = res.pivots
    cap = max(50, int(lcp_islands.CRASH_PIVOT_FRACTION * n))           # the stepper's crash pivot cap
    rng = np.random.default_rng(HEAPS.index(name))
    for trial in range(4):
        qp = q if trial == 0 else q * (1.0 + 1e-15 * rng.standard_normal(n))
        r = lemke_from_basis(M, qp, crash_guess(Ms, qp, m, D), max_pivots=cap)
        assert r.solved, (trial, r.status.name, r.pivots)
        # perturbations of 1e-15 relative are far below the final check's tolerance t = 1e4·ε·n relative
        # (3.3e-9 at n = 1490); the independent check at that level (the cold chain's own answers reach
        # w ≈ −3e-9·s here, so 1e-9 would reject them too)
        tol = 1e4 * np.finfo(float).eps * n
        assert passes_final_check(M, q, r.z) and independent_check(M, q, r.z, tol=tol), trial
        assert r.pivots < 0.5 * cold_pivots, (trial, r.pivots, cold_pivots)


@pytest.mark.roundoff
def test_crash_retry_without_lambdas_on_an_early_ray():
    """A cold heap island (t ≈ 1.0 s, n = 2590; data/README.md) on which Lemke from the full crash guess ended on
    a secondary ray after 1–3 pivots on the development machine (the same with six random covering vectors).
    The stepper's crash start then tries the same guess without its λ's: solved, the answer passing the final
    check and the independent check on (M, q), in under half the pivots of the cold chain on the same LCP
    (measured: 991 against 2459)."""
    Ms, q, m = _heap("mixed_clutter_heap_t10_crash_ray")
    n = q.shape[0]
    layout = lcp_problem.ContactLcpLayout(m, D, np.zeros((D, 2)), np.zeros((0, 0)), np.zeros((0, 0)))
    z, pivots, basic = lcp_islands._crash_solve(Ms, q, layout, None)
    M = Ms.toarray()
    assert z is not None and basic is not None
    tol = 1e4 * np.finfo(float).eps * n
    assert passes_final_check(M, q, z) and independent_check(M, q, z, tol=tol)
    res, _ = solve_contact_lcp(Ms, q)
    assert res is not None and pivots < 0.5 * res.pivots, (pivots, res.pivots)


@pytest.mark.roundoff
def test_stepper_takes_the_crash_rung_on_large_islands(monkeypatch):
    # box_stack's island (n = 200–280) made "large" for the test: cold steps with the crash on take the rung
    # "crash" (Lemke from the island's crash basis), report its work, and follow the trajectory of the cold
    # chain: both answers pass Lemke's final check on the same LCPs (relative tolerance 1e4·ε·n ≈ 6e-10
    # in velocity), so over 100 steps of 1 ms positions agree to ≪ 1e-7 m (measured 1e-9 m after 300 steps).
    from convexsim.simulate import prepare
    from convexsim.stepping import StepContext

    model, state0, _ = prepare(scene_file("box_stack"), solver="lcp")
    monkeypatch.setattr(lcp_fallback, "LARGE_ISLAND_SIZE", 100)
    runs = {}
    for crash in (False, True):
        monkeypatch.setattr(lcp_islands, "CRASH_START", crash)
        state, ctx = state0, StepContext()
        rungs, qs, vs = collections.Counter(), [], []
        for _ in range(100):
            state, info = lcp_step(model, state, ctx, warm_start=False, path="reference")
            rungs[info.rung] += 1
            qs.append(state.q.copy())
            vs.append(state.v.copy())
            assert info.iterations == info.pivots + info.warm_solves
            if info.rung == "crash":
                assert info.warm_solves >= 1 and info.lemke_runs == 0 and not info.warm_accepted
        runs[crash] = (rungs, np.array(qs), np.array(vs))
    assert runs[False][0]["crash"] == 0
    assert runs[True][0]["crash"] >= 90, runs[True][0]
    assert np.abs(runs[True][1] - runs[False][1]).max() <= 1e-7
    assert np.abs(runs[True][2] - runs[False][2]).max() <= 1e-5


def test_frictionless_guess():
    # μ = 0: the LCP is the normal block alone (z = p_n, d = 0). Box on four corners pressed by gravity: the
    # normal rows of four coplanar corners have rank 3 (vertical force, two tilting torques), so at most 3
    # normals are kept, and Lemke from the guess carries the weight per step.
    corners = np.array([[sx * 0.2, sy * 0.1, -0.05] for sx in (-1, 1) for sy in (-1, 1)])
    M, q, layout = _body(corners, [0.0, 0.0, 0.0, 0.0, 0.0, -G * DT], 0.0, mu=0.0)
    assert layout.num_directions == 0 and q.shape[0] == 4
    guess = crash_guess(scipy.sparse.csr_matrix(M), q, 4, 0)
    assert 1 <= guess.sum() <= 3
    r = lemke_from_basis(M, q, guess)
    assert r.solved and passes_final_check(M, q, r.z) and independent_check(M, q, r.z)
    np.testing.assert_allclose(r.z.sum(), MASS * G * DT, rtol=1e-9)


def test_crash_backoff_after_failures():
    # A failed crash run skips the crash start for 1, 2, 4, … steps (up to CRASH_BACKOFF_MAX) while failures
    # continue in a row; a success resets it. Steps where it is tried, always failing from step 0, with the
    # maximum 16: 0, 2, 5, 10, 19, 36 (skips 1, 2, 4, 8, 16), then every 17 steps; with 4: 0, 2, 5, 10, 15, …
    from convexsim.stepping import StepContext

    for cap, expected in ((16, [0, 2, 5, 10, 19, 36, 53, 70]), (4, [0, 2, 5] + list(range(10, 80, 5)))):
        stepper_cap = lcp_islands.CRASH_BACKOFF_MAX
        lcp_islands.CRASH_BACKOFF_MAX = cap
        try:
            ctx = StepContext()
            tried = []
            for step in range(80):
                if lcp_islands._crash_allowed(ctx, step):
                    tried.append(step)
                    lcp_islands._crash_outcome(ctx, step, solved=False)
        finally:
            lcp_islands.CRASH_BACKOFF_MAX = stepper_cap
        assert tried == expected, cap
    lcp_islands._crash_outcome(ctx, 80, solved=True)
    assert all(lcp_islands._crash_allowed(ctx, s) for s in range(81, 90))
    # a context reused from an earlier step (the step index went back) is not held back
    lcp_islands._crash_outcome(ctx, 90, solved=False)
    assert lcp_islands._crash_allowed(ctx, 10)
