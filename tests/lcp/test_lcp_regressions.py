"""Contact LCPs on which Lemke once broke down, solved under bit-level perturbations.

The data (``data/README.md``) are box_stack steps where the textbook ratio test failed (secondary ray,
numerical failure) although a solution exists; which step failed depended on the BLAS kernel and
thread count, i.e. on the last bits of M and q. The default (Harris) ratio test must solve every
perturbed copy, and every answer must pass Lemke's final check on the *unperturbed* data: the
perturbations are far below that check's tolerance (t = 1e4·ε·n ≈ 6e-10 relative for n = 280 against
relative changes ≤ 1e-12), so a right answer for the perturbed problem is a right answer for the
original one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from convexsim.lcp.lemke import LemkeOptions, LemkeStatus, final_check, lemke

pytestmark = pytest.mark.roundoff   # captured contact LCPs: rerun under other BLAS settings (Makefile)

DATA = Path(__file__).parent / "data"
CASES = ["fail_cold", "fail_warm", "z0fail_warm"]
TRIALS = 100


def load_case(name):
    """(M, q, nw): the step's unperturbed LCP and the size of M's symmetric block m(1 + d)."""
    d = np.load(DATA / f"{name}.npz")
    if "M0" in d.files:
        return d["M0"], d["q0"], int(d["m"]) * (1 + int(d["ndir"]))
    return d["M"], d["q"], d["phi"].shape[0] * (1 + int(d["ndir"]))


def passes_final_check(M, q, z):
    w = np.empty(q.shape[0])
    return final_check(M, q, np.ascontiguousarray(z, dtype=float), w, LemkeOptions().check_tol) <= 1.0


def independent_check(M, q, z, tol=1e-9):
    """z ≥ 0, w ≥ 0, z∘w = 0 relative to s = ‖M‖∞‖z‖∞ + ‖q‖∞ (not the solver's own code)."""
    w = M @ z + q
    s = np.abs(M).sum(1).max() * np.abs(z).max() + np.abs(q).max()
    zmax = np.abs(z).max()
    return z.min() >= -tol * zmax and w.min() >= -tol * s and np.abs(z * w).max() <= tol * s * zmax


def perturbed(M, q, nw, kind, rng):
    """A copy of (M, q): 'rel16' / 'rel15' multiply q and M's symmetric block (kept symmetric) entry by
    entry by 1 + 1e-16·r / 1 + 1e-15·r; 'q12' adds 1e-12·‖q‖∞·r to q; r ~ N(0, 1)."""
    M, q = M.copy(), q.copy()
    if kind == "q12":
        return M, q + 1e-12 * np.abs(q).max() * rng.standard_normal(q.shape[0])
    e = {"rel16": 1e-16, "rel15": 1e-15}[kind]
    R = np.triu(rng.standard_normal((nw, nw)))
    M[:nw, :nw] *= 1.0 + e * (R + np.triu(R, 1).T)
    q *= 1.0 + e * rng.standard_normal(q.shape[0])
    return M, q


@pytest.mark.parametrize("kind", ["rel16", "rel15", "q12"])
@pytest.mark.parametrize("name", CASES)
def test_captured_lcp_solved_under_perturbations(name, kind):
    M, q, nw = load_case(name)
    assert np.array_equal(M[:nw, :nw], M[:nw, :nw].T)  # the block being perturbed is the symmetric one
    rng = np.random.default_rng([CASES.index(name), ["rel16", "rel15", "q12"].index(kind)])
    failed = []
    for trial in range(TRIALS):
        Mp, qp = perturbed(M, q, nw, kind, rng)
        r = lemke(Mp, qp)
        if not (r.solved and passes_final_check(M, q, r.z) and independent_check(M, q, r.z)):
            failed.append((trial, r.status.name, r.pivots))
    assert not failed, f"{len(failed)}/{TRIALS} failed: {failed[:5]}"


@pytest.mark.parametrize("name", CASES)
def test_captured_lcp_unperturbed_is_the_resting_stack(name):
    # Physics of the answer: five 1 kg boxes resting on each other and the floor, so the normal impulses
    # carry 5 + 4 + 3 + 2 + 1 = 15 box weights per step, Σ p_n = 15·m·g·dt (dt = 1e-3 s, box_stack's),
    # and where the step's kinematics are stored, v⁺ = v* + A⁻¹W z vanishes (they stay at rest). The
    # solution's error is ~cond·ε relative; 1e-8 and 1e-9 m/s are far above it and far below any
    # wrong basis (a missing contact changes Σ p_n by a whole box weight).
    from convexsim.stepping.lcp_problem import build_contact_lcp

    M, q, nw = load_case(name)
    r = lemke(M, q)
    assert r.solved and passes_final_check(M, q, r.z) and independent_check(M, q, r.z)
    d = np.load(DATA / f"{name}.npz")
    m = int(d["m"]) if "m" in d.files else d["phi"].shape[0]
    assert r.z[:m].sum() == pytest.approx(15 * 1.0 * 9.81 * 1e-3, rel=1e-8)
    if "Ainv" in d.files:
        _, q2, layout = build_contact_lcp(d["Ainv"], d["v_star"], d["J"], d["bias"], d["mu"], int(d["ndir"]))
        # equal to round-off, not bit for bit: the BLAS kernel (OPENBLAS_CORETYPE, threads) changes the last
        # bits of the products (q's entries besides −m·g·dt are ~1e-16 noise, max|q| = 9.81e-3)
        np.testing.assert_allclose(q2, q, rtol=0.0, atol=1e-12 * np.abs(q).max())
        assert np.abs(layout.velocity(d["v_star"], r.z)).max() <= 1e-9


def test_early_exit_stops_at_a_solution_before_z0_leaves():
    # box_stack step 1842 (resting stack, n = 220): the path reaches a point that passes the final check
    # while z0 is still basic at the level the check tolerates (t·‖q‖∞, t = 1e4·ε·n); the Harris variant
    # stops there, the textbook one walks on until z0 leaves. Both answers are solutions and both carry
    # the stack's 15 box weights (impulses are not unique on coplanar manifolds, their sum is).
    d = np.load(DATA / "box_stack_step1842_lcp.npz")
    M, q, m = d["M"], d["q"], int(d["m"])
    h = lemke(M, q)
    t = lemke(M, q, options=LemkeOptions(ratio_test="textbook"))
    assert h.solved and t.solved
    tol = 1e4 * np.finfo(float).eps * q.shape[0] * np.abs(q).max()
    assert 0.0 < h.z0 <= tol and t.z0 == 0.0
    assert h.pivots < t.pivots
    for r in (h, t):
        assert independent_check(M, q, r.z) and passes_final_check(M, q, r.z)
        assert r.z[:m].sum() == pytest.approx(15 * 9.81e-3, rel=1e-8)


def test_both_rules_solve_box_stack_step52():
    d = np.load(DATA / "box_stack_step52_lcp.npz")
    M, q = d["M"], d["q"]
    for rule in ("harris", "textbook"):
        r = lemke(M, q, options=LemkeOptions(ratio_test=rule))
        assert r.solved and independent_check(M, q, r.z)


def test_noise_pivot_after_drift_is_caught_by_the_chain():
    # box_stack step 1951 (OPENBLAS_CORETYPE=Prescott, n = 200) and one ×(1 + 1e-16·r) copy of it (Mp, qp), the
    # one bare Lemke failure of 8000 perturbed solves along that run (data/README.md): 71 pivots without a
    # rebuild, then a pivot on an entry that is zero up to the tableau's accumulated rounding (basis condition
    # 1.5e5 -> 4e16), and 7 pivots later a spurious ray (q·ray = 0). The data are fine: the unperturbed LCP, a
    # rebuild every 20 pivots, or the stepper's chain solve it; every answer passes both checks on (M, q).
    from convexsim.stepping.lcp_fallback import solve_contact_lcp

    d = np.load(DATA / "box_stack_prescott_step1951.npz")
    M, q, Mp, qp = d["M"], d["q"], d["Mp"], d["qp"]
    answers = [lemke(M, q), lemke(Mp, qp, options=LemkeOptions(refactor_every=20))]
    res, _ = solve_contact_lcp(Mp, qp, step=1951)
    assert res is not None
    for z in [r.z for r in answers if r.solved] + [res.z]:
        assert passes_final_check(M, q, z) and independent_check(M, q, z)
    assert all(r.solved for r in answers)


@pytest.mark.roundoff
@pytest.mark.parametrize("case", range(3))
def test_restart_from_last_basis_solves_wall_contact_islands(case):
    """Three small mixed_clutter islands (a body on the floor at two points and against a bin wall at one;
    data/README.md) on which a single Harris run ended on a complementary basis failing the final check (on the
    development machine, at every pivot filter tried). With the restart from that basis (the default) bare
    Lemke solves each, unperturbed and under 50 bit-level perturbations of each kind, every answer passing
    the final check and the independent check on the unperturbed data. The restart takes few pivots: the
    whole solve stays under 3× the single run's pivot count (measured: 21 → 23)."""
    d = np.load(DATA / "mixed_clutter_wall_n30.npz")
    M, q = d[f"M{case}"], d[f"q{case}"]
    nw = 27                                            # 3 contacts × (1 + 8 directions): the symmetric block
    assert np.allclose(M[:nw, :nw], M[:nw, :nw].T, rtol=0, atol=0)
    single = lemke(M, q, options=LemkeOptions(restart=False))
    r = lemke(M, q)
    assert r.solved and passes_final_check(M, q, r.z) and independent_check(M, q, r.z)
    assert r.pivots <= 3 * single.pivots
    rng = np.random.default_rng([7, case])
    failed = []
    for kind in ("rel16", "rel15", "q12"):
        for trial in range(50):
            Mp, qp = perturbed(M, q, nw, kind, rng)
            r = lemke(Mp, qp)
            if not (r.solved and passes_final_check(M, q, r.z) and independent_check(M, q, r.z)):
                failed.append((kind, trial, r.status.name, r.pivots))
    assert not failed, f"{len(failed)}/150 failed: {failed[:5]}"


def test_restart_keeps_a_true_secondary_ray():
    """An infeasible LCP with PSD M (z1 − z2 ≥ 1 and z2 − z1 ≥ 1 cannot both hold): the ray is a certificate, and
    the restart from the last basis must not turn it into an answer (it ends on a ray again, or on a huge z
    refused by the gain bound). The first run's ray is returned."""
    M = np.array([[1.0, -1.0, 0.0], [-1.0, 1.0, 0.0], [0.0, 0.0, 2.0]])
    q = np.array([-1.0, -1.0, -1.0])
    single = lemke(M, q, options=LemkeOptions(restart=False))
    r = lemke(M, q)
    assert single.status == r.status == LemkeStatus.SECONDARY_RAY
    np.testing.assert_array_equal(r.ray, single.ray)
    assert r.pivots >= single.pivots
