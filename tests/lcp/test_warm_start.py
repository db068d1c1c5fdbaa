"""Warm start of the LCP stepper: ``solve_from_basis`` and ``lcp_step(..., warm_start=True)`` against the cold path."""

from __future__ import annotations


import numpy as np
import pytest

from convexsim.lcp.lemke import LemkeOptions, final_check, lcp_residual, lemke, solve_from_basis
from repo_paths import scene_file



def _spd(n, seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    return A @ A.T + n * np.eye(n), rng.standard_normal(n)


def _passes_check(M, q, z):
    w = np.empty(len(q))
    return final_check(np.ascontiguousarray(M), np.ascontiguousarray(q), np.ascontiguousarray(z), w,
                       LemkeOptions().check_tol) <= 1.0


def test_right_guess_solves_in_one_factorization():
    M, q = _spd(30, 0)
    ref = lemke(M, q)
    r = solve_from_basis(M, q, ref.z > 0)
    assert r.solved and r.solves == 1
    np.testing.assert_allclose(r.z, ref.z, atol=1e-12)
    assert _passes_check(M, q, r.z)


@pytest.mark.parametrize("seed", range(5))
def test_wrong_guess_is_corrected_or_rejected_never_wrong(seed):
    M, q = _spd(40, seed)
    ref = lemke(M, q)
    guess = ref.z > 0
    flip = np.random.default_rng(100 + seed).choice(40, 6, replace=False)
    guess[flip] = ~guess[flip]
    r = solve_from_basis(M, q, guess, max_solves=20)
    # SPD: a P-matrix, the solution is unique; block principal pivoting with Murty's backup finds it
    assert r.solved
    np.testing.assert_allclose(r.z, ref.z, atol=1e-10)
    r1 = solve_from_basis(M, q, guess, max_solves=1)
    assert not r1.solved or _passes_check(M, q, r1.z)


def test_dependent_columns_leave_the_basis():
    # two identical constraints (a redundant contact): M_αα singular when both are guessed basic
    M = np.array([[1.0, 1.0], [1.0, 1.0]])
    q = np.array([-1.0, -1.0])
    r = solve_from_basis(M, q, np.array([True, True]))
    assert r.solved and r.basic.sum() == 1
    assert lcp_residual(M, q, r.z) < 1e-14


def test_infeasible_lcp_is_never_solved():
    # z ≥ 0, w = −z − 1 ≥ 0 has no solution
    M = -np.eye(2)
    q = -np.ones(2)
    for guess in ([True, True], [False, False], [True, False]):
        assert not solve_from_basis(M, q, np.array(guess)).solved


def test_contact_keys_number_points_within_a_pair():
    from convexsim.stepping.lcp_problem import contact_keys
    from convexsim.model import Contacts

    c = Contacts(geom_a=np.array([0, 0, 0, 1, 1, 2]), geom_b=np.array([3, 3, 4, 2, 2, 5]),
                 body_a=np.zeros(6, np.int64), body_b=np.zeros(6, np.int64), phi=np.zeros(6),
                 point=np.zeros((6, 3)), normal=np.zeros((6, 3)))
    np.testing.assert_array_equal(contact_keys(c)[:, 2], [0, 1, 0, 0, 1, 0])
    np.testing.assert_array_equal(contact_keys(c)[:, :2], np.stack([c.geom_a, c.geom_b], 1))


# ---------------------------------------------------------------------------------------------
# trajectories: warm vs cold
#
# Both paths return points that pass the same scaled check (t = 1e4·ε·n ≤ 5.4e-10 for n ≤ 240,
# relative to s_w = ‖M‖‖z‖ + ‖q‖ ≈ 0.1 m/s here); the warm path also demands sign feasibility at
# 10·ε·n. Where the LCP's solution is unique in velocity, a per-step disagreement is then at most
# ~t·s_w ≈ 5e-11 m/s. It is not always unique: the polyhedral-friction LCP has a non-symmetric M, so
# two valid solutions of a degenerate manifold LCP can split friction differently and give
# velocities that differ (only for symmetric PSD M does M(z1 − z2) = 0 follow). Measured on box_stack
# (0.5 s): |Δq| ≤ 2e-13, |Δv| ≤ 5e-11 on one machine; |Δq| = 2.3e-10, |Δv| = 1.0e-7 m/s on another.
# Bounds asserted: 1e-8 m (q) and 1e-6 m/s (v), 10x above the worst measured, far below any
# physical scale of the scene (mm, cm/s), and the step-by-step acceptance counts below are exact.
# ---------------------------------------------------------------------------------------------


def _lockstep(scene, duration, monkeypatch):
    from convexsim.simulate import prepare
    from convexsim.stepping import StepContext, lcp_islands, lcp_step

    accepted_problems = []
    orig = lcp_islands._warm_solve

    def spy(M, q, basic, workspace):
        z, piv, final_basic = orig(M, q, basic, workspace)
        if z is not None:
            accepted_problems.append((M.copy(), q.copy(), z.copy()))
            # what the next step's guess is built from: the final basis' basic z's, a superset of the support
            assert final_basic.shape == z.shape and not np.any(z[~final_basic] != 0.0)
        return z, piv, final_basic

    monkeypatch.setattr(lcp_islands, "_warm_solve", spy)
    monkeypatch.setattr(lcp_islands, "WARM_MIN_SIZE", 0)   # exercise the warm start on every island
    mc, sc, _ = prepare(scene, solver="lcp")
    mw, sw, _ = prepare(scene, solver="lcp")
    n = int(round(duration / mc.time_step))
    dq = dv = 0.0
    infos = []
    ctx_cold, ctx_warm = StepContext(), StepContext()
    for _ in range(n):
        sc, ic = lcp_step(mc, sc, ctx_cold, warm_start=False)
        sw, iw = lcp_step(mw, sw, ctx_warm, warm_start=True)
        assert not ic.warm_attempted and not ic.warm_accepted
        infos.append(iw)
        dq = max(dq, float(np.abs(sc.q - sw.q).max()))
        dv = max(dv, float(np.abs(sc.v - sw.v).max()))
    return dq, dv, infos, accepted_problems


@pytest.mark.roundoff
@pytest.mark.parametrize("scene, duration, min_accepted",
                         [pytest.param("box_stack", 0.5, 0.9, marks=pytest.mark.slow), ("sphere_drop", 0.6, 0.5)])
def test_warm_trajectory_matches_cold(scene, duration, min_accepted, monkeypatch):
    dq, dv, infos, accepted = _lockstep(scene_file(scene), duration, monkeypatch)
    assert dq <= 1e-8 and dv <= 1e-6
    with_contacts = [i for i in infos if i.contacts.count]
    n_acc = sum(i.warm_accepted for i in with_contacts)
    assert n_acc == len(accepted)
    assert n_acc >= min_accepted * len(with_contacts)
    for i in infos:
        # the work is reported: a warm step's factorizations, a failed attempt's plus Lemke's pivots
        assert i.iterations == i.pivots + i.warm_solves
        if i.warm_accepted:
            assert i.warm_attempted and i.rung == "warm" and i.lemke_runs == 0 and i.warm_solves >= 1
        elif i.contacts.count:
            assert i.rung in ("lemke", "perturbed_q", "covering", "regularized") and i.lemke_runs >= 1
    # every accepted warm solution passes Lemke's final check and has a small natural-map residual
    for M, q, z in accepted:
        assert _passes_check(M, q, z)
        assert lcp_residual(M, q, z) <= 1e-9 * (np.abs(M).sum(1).max() * np.abs(z).max() + np.abs(q).max())


def test_stale_previous_solution_is_not_used(monkeypatch):
    """One context shared on purpose: a stored solution is used only for the next step of its own model."""
    from convexsim.simulate import prepare
    from convexsim.stepping import StepContext, lcp_islands, lcp_step

    monkeypatch.setattr(lcp_islands, "WARM_MIN_SIZE", 0)

    m1, s1, _ = prepare(scene_file("box_stack"), solver="lcp")
    m2, s2, _ = prepare(scene_file("box_stack"), solver="lcp")
    ctx = StepContext()
    s1, i1 = lcp_step(m1, s1, ctx, warm_start=True)
    s1, i1 = lcp_step(m1, s1, ctx, warm_start=True)
    assert i1.warm_attempted
    _, i2 = lcp_step(m2, s2, ctx, warm_start=True)  # another model: cold
    assert not i2.warm_attempted
    s1b, _ = lcp_step(m1, s1, ctx, warm_start=True)
    _, i3 = lcp_step(m1, s1, ctx, warm_start=True)  # the same step again: not the next step, cold
    assert not i3.warm_attempted
    _, i4 = lcp_step(m1, s1b, warm_start=True)  # no context: nothing carried over, cold
    assert not i4.warm_attempted


@pytest.mark.roundoff
def test_stored_guess_is_the_final_basis_with_its_basic_zeros():
    # The warm start's guess is the previous step's final Lemke basis, not the support z > 0: on this captured
    # box_stack LCP (degenerate, resting contacts) one basic z is 0; the basis restarts the same LCP with no
    # pivot, and the cache keeps the flags per contact key (a contact missing from the new step: w basic).
    from convexsim.lcp.lemke import lemke_from_basis
    from convexsim.stepping.context import LcpWarmStart
    from convexsim.stepping.lcp_problem import ContactLcpLayout
    from convexsim.stepping.lcp_fallback import basic_of
    from test_lcp_regressions import load_case

    M, q, nw = load_case("fail_warm")
    r = lemke(M, q)
    assert r.solved
    basic = basic_of(r)
    b = np.asarray(r.basis)
    assert basic.sum() == np.count_nonzero((b >= len(q)) & (b < 2 * len(q)))
    assert np.all(r.z[~basic] == 0.0) and np.any(basic & (r.z == 0.0))   # a degenerate basic z
    again = lemke_from_basis(M, q, basic)
    assert again.solved and again.pivots == 0 and _passes_check(M, q, again.z)

    d = 8
    m = len(q) // (d + 2)
    layout = ContactLcpLayout(m, d, np.zeros((d, 2)), np.zeros((0, 0)), np.zeros((0, 0)))
    keys = np.stack([np.arange(m), np.full(m, 99), np.zeros(m, np.int64)], 1)
    cache, model = LcpWarmStart(), object()
    cache.store(model, 5, keys, layout, basic)
    np.testing.assert_array_equal(cache.guess(model, 5, keys, layout), basic)
    assert cache.guess(model, 6, keys, layout) is None and cache.guess(object(), 5, keys, layout) is None
    # the next step sees the contacts in reverse order and contact 0 replaced by a new one
    rev = keys[::-1].copy()
    rev[-1, 1] = 100
    g = cache.guess(model, 5, rev, layout)
    per = lambda a, i: np.concatenate([[a[i]], a[m + i * d:m + (i + 1) * d], [a[m + m * d + i]]])  # noqa: E731
    for i in range(m - 1):
        np.testing.assert_array_equal(per(g, i), per(basic, m - 1 - i))
    assert not per(g, m - 1).any()
