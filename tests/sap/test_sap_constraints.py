"""Constraint math: γ = −∂ℓ/∂vc and G = −∂γ/∂vc by central differences, and the friction-cone projection
against an independent conic solver (docs/sap-model.md §3–4)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from convexsim.sap.constraints import KIND_LAGGED, KIND_SAP, KIND_SIMILAR, NPAR, constraint_impulse
from convexsim.sap.friction_cone import (
    NO_CONTACT,
    SLIDING,
    STICTION,
    cone_region,
    contact_regularization,
    regularization,
)
from convexsim.sap.hunt_crossley import hc_step_constants

# The sample data of Drake's friction-cone constraint test (sap_friction_cone_constraint_test).
MU, K, TAU, BETA, SIGMA, DT, W, PHI0 = 0.5, 3e5, 0.02, 1.0, 1e-3, 0.01, 1.0, -2.5e-3
STICTION_VC = [(1e-4, 0, -0.1), (1e-4, 1e-4, -0.1), (-1e-5, 1e-4, -0.05)]
SLIDING_VC = [(0.1, 0, -0.1), (0.1, -0.2, -0.1), (0.1, 0.05, 0)]
# Drake's "no contact" samples (0.1, 0, 0.1) and (1e-4, -2e-3, 0.01) fall in region II with these parameters
# (v̂n = 0.083 m/s and the gliding term); (-0.1, 0.1, 0.2) is region III. We add two more region-III points.
NO_CONTACT_VC = [(-0.1, 0.1, 0.2), (0.0, 0.0, 0.5), (0.01, -0.02, 0.3)]
GLIDING_VC = [(0.1, 0, 0.1), (1e-4, -2e-3, 0.01)]


def sap_par(mu=MU, k=K, tau=TAU, beta=BETA, sigma=SIGMA, dt=DT, w=W, phi0=PHI0):
    Rt, Rn, vn_hat = regularization(dt, k, tau, w, beta, sigma, phi0)
    return np.array([mu, Rt, Rn, 0.0, 0.0, vn_hat, 0.0, 0.0])


def hc_par(mu=0.5, dt=1e-2, k=1e5, d=0.01, fe0=15.0, vn0=-0.1, sigma=1e-3, w=1.0, v_s=1e-4):
    n0, eps_s, v_hat = hc_step_constants(dt, k, d, mu, fe0, vn0, sigma, w, v_s)
    return np.array([mu, dt, k, d, fe0, n0, eps_s, v_hat])


def region_of(par, vc):
    mu, Rt, Rn = par[0], par[1], par[2]
    y = (par[3:6] - np.asarray(vc, float)) / np.array([Rt, Rt, Rn])
    yr = math.sqrt(y[0] ** 2 + y[1] ** 2 + 1e-14)
    return cone_region(mu, mu * Rt / Rn, yr, y[2])


def assert_fd_consistent(kind, par, vc, h, rtol):
    """Central differences with step h [m/s]: −∂ℓ/∂vc vs γ and −∂γ/∂vc vs G, relative to max|γ|, max|G|.

    The truncation error is O(h² ℓ'''), round-off O(ε ℓ / h); with h ≈ 1e-6–1e-8 of the velocity scale both
    stay below ``rtol`` (1e-6) for the smooth pieces sampled here (no region boundary within ±h).
    """
    vc = np.asarray(vc, dtype=float)
    ell, gamma, G = constraint_impulse(kind, par, vc)
    g_fd = np.empty(3)
    G_fd = np.empty((3, 3))
    for j in range(3):
        e = np.zeros(3)
        e[j] = h
        lp, gp, _ = constraint_impulse(kind, par, vc + e)
        lm, gm, _ = constraint_impulse(kind, par, vc - e)
        g_fd[j] = -(lp - lm) / (2 * h)
        G_fd[:, j] = -(gp - gm) / (2 * h)
    g_scale = max(np.max(np.abs(gamma)), 1e-300)
    G_scale = max(np.max(np.abs(G)), 1e-300)
    if np.max(np.abs(gamma)) == 0.0:
        assert np.max(np.abs(g_fd)) == 0.0
    else:
        np.testing.assert_allclose(g_fd, gamma, rtol=0, atol=rtol * g_scale)
    if np.max(np.abs(G)) == 0.0:
        assert np.max(np.abs(G_fd)) == 0.0
    else:
        np.testing.assert_allclose(G_fd, G, rtol=0, atol=rtol * G_scale)
    np.testing.assert_allclose(G, G.T, rtol=0, atol=1e-12 * G_scale)  # G is symmetric
    assert np.min(np.linalg.eigvalsh(0.5 * (G + G.T))) >= -1e-10 * G_scale  # and PSD (convex ℓ)


# ---------------------------------------------------------------------------------------------- regularization
def test_contact_regularization_matches_formulas():
    """Check Rt = σw, Rn = max(β²w/(4π²), 1/(dt k (dt+τ))), v̂n = −φ0/(dt+τ) (soft and near-rigid)."""
    R, v_hat = contact_regularization(DT, [1e3, K], TAU, MU, W, BETA, SIGMA, PHI0)
    np.testing.assert_array_equal(R[:, 0], SIGMA * W)
    np.testing.assert_array_equal(R[:, 1], SIGMA * W)
    assert R[0, 2] == pytest.approx(1.0 / (DT * 1e3 * (DT + TAU)), rel=1e-15)  # compliant branch
    assert R[1, 2] == pytest.approx(BETA**2 * W / (4 * math.pi**2), rel=1e-15)  # near-rigid clamp
    np.testing.assert_allclose(v_hat[:, 2], -PHI0 / (DT + TAU), rtol=1e-15)
    np.testing.assert_array_equal(v_hat[:, :2], 0.0)


@pytest.mark.parametrize("name, value", [("k", -1.0), ("tau_d", -0.1), ("mu", -0.5), ("w", 0.0)])
def test_contact_regularization_rejects_bad_parameters(name, value):
    """Check a negative k/τd/μ or a zero w is a ValueError naming the argument."""
    kwargs = dict(dt=DT, k=K, tau_d=TAU, mu=MU, w=W)
    kwargs[name] = value
    with pytest.raises(ValueError, match=name):
        contact_regularization(**kwargs)


# ---------------------------------------------------------------------------------------------- friction cone
@pytest.mark.parametrize(
    "vc, region",
    [(v, STICTION) for v in STICTION_VC] + [(v, SLIDING) for v in SLIDING_VC + GLIDING_VC]
    + [(v, NO_CONTACT) for v in NO_CONTACT_VC],
)
def test_cone_gradients_at_drake_sample_points(vc, region):
    """Check γ = −∂ℓ/∂vc and G = −∂γ/∂vc at Drake's region I/II/III sample points."""
    par = sap_par()
    assert region_of(par, vc) == region
    assert_fd_consistent(KIND_SAP, par, vc, h=1e-8, rtol=1e-6)


def test_cone_gradients_at_random_points_in_each_region():
    """Check the finite-difference identities at random vc in every region, for random μ, k, τ, φ0."""
    rng = np.random.default_rng(1)
    seen = set()
    for _ in range(300):
        par = sap_par(
            mu=rng.uniform(0.0, 1.5), k=10 ** rng.uniform(3, 8), tau=rng.uniform(0, 0.1),
            phi0=rng.uniform(-1e-3, 1e-3), w=10 ** rng.uniform(-1, 1),
        )
        # Sample the un-projected impulse y, so that all regions occur: ‖yt‖ ∈ (0, 2), yn ∈ (−1, 1) [N·s].
        theta = rng.uniform(0, 2 * np.pi)
        y = np.array([*(rng.uniform(0, 2) * np.array([np.cos(theta), np.sin(theta)])), rng.uniform(-1, 1)])
        vc = par[3:6] - np.array([par[1], par[1], par[2]]) * y
        region = region_of(par, vc)
        seen.add(region)
        # Step 1e-7 of the velocity scale R‖y‖; skip the rare points within 10 h of a region boundary (G jumps there).
        h = 1e-7 * max(np.abs(vc - par[3:6]).max(), 1e-12)
        if any(region_of(par, vc + s * 10 * h * e) != region for e in np.eye(3) for s in (-1, 1)):
            continue
        assert_fd_consistent(KIND_SAP, par, vc, h=h, rtol=2e-6)
    assert seen == {STICTION, SLIDING, NO_CONTACT}


def _point_near_boundary(par, which, offset):
    """vc at relative distance ``offset`` inside the stated region from the I/II or II/III boundary."""
    mu, Rt, Rn, vn_hat = par[0], par[1], par[2], par[5]
    mu_hat = mu * Rt / Rn
    yt = 40.0  # N·s, ‖yt‖ along t1
    if which == "I/II":  # yr = μ yn
        yn = yt / mu * (1.0 + offset)  # offset > 0: inside stiction
    else:  # yn = −μ̂ yr
        yn = -mu_hat * yt * (1.0 - offset)  # offset > 0: inside sliding
    return np.array([-Rt * yt, 0.0, vn_hat - Rn * yn])


@pytest.mark.parametrize("which", ["I/II", "II/III"])
@pytest.mark.parametrize("side", [+1, -1])
def test_cone_gradients_near_region_boundaries(which, side):
    """Check the identities at relative distance 1e-5 on both sides of each region boundary.

    h = 1e-12 m/s keeps the ±h stencil (relative 1e-11 of |vc| ≈ 0.04 m/s) on one side of the boundary;
    round-off then limits the agreement to ≈ ε·|ℓ|/h relative, so the bound is 1e-4.
    """
    par = sap_par()
    vc = _point_near_boundary(par, which, side * 1e-5)
    expected = {("I/II", 1): STICTION, ("I/II", -1): SLIDING, ("II/III", 1): SLIDING, ("II/III", -1): NO_CONTACT}
    assert region_of(par, vc) == expected[(which, side)]
    assert_fd_consistent(KIND_SAP, par, vc, h=1e-12 * max(1.0, np.abs(vc).max()), rtol=1e-4)


def test_cone_cost_and_impulse_are_continuous_across_boundaries():
    """Check ℓ and γ are continuous across both region boundaries (ℓ is C¹ up to the soft norm)."""
    par = sap_par()
    for which in ("I/II", "II/III"):
        l_in, g_in, _ = constraint_impulse(KIND_SAP, par, _point_near_boundary(par, which, +1e-12))
        l_out, g_out, _ = constraint_impulse(KIND_SAP, par, _point_near_boundary(par, which, -1e-12))
        assert l_in == pytest.approx(l_out, rel=1e-9, abs=1e-15)
        # γ jumps by at most O(offset · ‖y‖) = 1e-12 · 40 N·s across a boundary: a 1e-9 N·s bound shows continuity.
        np.testing.assert_allclose(g_in, g_out, rtol=0, atol=1e-9)


def _conic_projection(mu, R, y):
    """min ½(γ−y)ᵀR(γ−y) s.t. ‖γt‖ ≤ μγn, solved by Clarabel (interior point, tight tolerances)."""
    clarabel = pytest.importorskip("clarabel")
    from scipy import sparse

    P = sparse.csc_matrix(np.diag(R))
    q = -R * y
    # s = b − A x ∈ SOC(3):  s = (μ γn, γt1, γt2)
    A = sparse.csc_matrix(-np.array([[0.0, 0.0, mu], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = 1e-14
    settings.tol_ktratio = 1e-12
    solver = clarabel.DefaultSolver(P, q, A, np.zeros(3), [clarabel.SecondOrderConeT(3)], settings)
    sol = solver.solve()
    return np.array(sol.x)


@pytest.mark.parametrize("vc", STICTION_VC + SLIDING_VC + GLIDING_VC + NO_CONTACT_VC)
def test_cone_projection_matches_conic_solver(vc):
    """Check P_F(y) equals Clarabel's solution of the R-norm projection to 1e-8 (relative to ‖γ‖)."""
    par = sap_par()
    R = np.array([par[1], par[1], par[2]])
    y = (par[3:6] - np.asarray(vc, float)) / R
    _, gamma, _ = constraint_impulse(KIND_SAP, par, vc)
    reference = _conic_projection(MU, R, y)
    # Interior-point accuracy ~1e-10 relative with the tolerances above; the soft norm changes γ by
    # O(ε²/‖yt‖) ≈ 1e-16: a 1e-8 bound (Drake's kTolerance) has margin on both.
    # Scaled by the answer, not by ‖y‖ (up to 224 here, which would allow 2e-6): measured ≤ 3.5e-12.
    np.testing.assert_allclose(gamma, reference, rtol=0, atol=1e-8 * max(1.0, np.linalg.norm(reference)))
    # KKT: γ ∈ F and ⟨R(y − γ), γ⟩ = 0.
    assert np.hypot(gamma[0], gamma[1]) <= MU * gamma[2] * (1 + 1e-12) + 1e-12
    assert abs(np.dot(R * (y - gamma), gamma)) <= 1e-9 * max(1.0, np.dot(R * y, y))


# ---------------------------------------------------------------------------------------------- Hunt–Crossley
def test_hc_friction_regularization_speed():
    """Check εs = v_s for σ = 0 and 1e-4, εs = μσw n0 for σ = 1e-2 (Drake's test data)."""
    n0_expected = 1e-2 * 15.0 * (1 + 0.01 * 0.1)
    for sigma, eps_expected in [(0.0, 1e-4), (1e-4, 1e-4), (1e-2, 0.5 * 1e-2 * 1.0 * n0_expected)]:
        p = hc_par(sigma=sigma)
        assert p[5] == pytest.approx(n0_expected, rel=1e-15)
        assert p[6] == pytest.approx(eps_expected, rel=1e-15)


HC_POINTS = (
    [("stiction", vn, 1e-6) for vn in (-0.1, -0.15, -0.05)]  # |vt| = v_s/100
    + [("sliding", vn, 1e-2) for vn in (-0.1, -0.15, -0.05)]  # |vt| = 100 v_s
    + [("breaking", vn, 1e-2) for vn in (0.1, 0.01, 0.2)]
)


@pytest.mark.parametrize("kind", [KIND_LAGGED, KIND_SIMILAR])
@pytest.mark.parametrize("label, vn, vt", HC_POINTS)
def test_hc_gradients_at_drake_sample_points(kind, label, vn, vt):
    """Check γ = −∂ℓ/∂vc and G = −∂γ/∂vc (stiction, sliding, breaking contact; Drake's H&C cases)."""
    par = hc_par()
    vc = np.array([vt * 0.6, -vt * 0.8, vn])
    _, gamma, _ = constraint_impulse(kind, par, vc)
    if label == "breaking" and kind == KIND_LAGGED:
        assert (gamma[2] == 0.0) == (vn >= 0.015)  # n(vn) = 0 beyond v̂ = min(fe0/(dt k), 1/d) = 0.015 m/s
    # h = 1e-3 |vt| keeps the stencil inside the same smooth piece; the bound covers O(h²) truncation.
    assert_fd_consistent(kind, par, vc, h=min(1e-3 * vt, 1e-7), rtol=1e-6)


@pytest.mark.parametrize("kind", [KIND_LAGGED, KIND_SIMILAR])
def test_hc_gradients_at_random_points(kind):
    """Check the identities at random (vc, k, d, fe0, vn0, μ), including near-zero slip and separation."""
    rng = np.random.default_rng(2)
    for _ in range(200):
        par = hc_par(
            mu=rng.uniform(0, 1.2), k=10 ** rng.uniform(3, 7), d=rng.uniform(0, 50), fe0=rng.uniform(0, 50),
            vn0=rng.uniform(-0.5, 0.5), sigma=10 ** rng.uniform(-4, -2),
        )
        vc = np.array([*(rng.normal(scale=10 ** rng.uniform(-6, -1), size=2)), rng.uniform(-0.2, 0.05)])
        h = 1e-9
        v_hat = par[7]
        z = vc[2] if kind == KIND_LAGGED else None
        if z is not None and abs(z - v_hat) < 100 * h:
            continue  # G has a jump where n(z) reaches 0
        if kind == KIND_SIMILAR:
            s = math.sqrt(vc[0] ** 2 + vc[1] ** 2 + par[6] ** 2) - par[6]
            if abs(vc[2] - par[0] * s - v_hat) < 100 * h * (1 + par[0]):
                continue
        assert_fd_consistent(kind, par, vc, h=h, rtol=2e-5)


def test_hc_impulse_laws():
    """Check the normal impulse is the discrete H&C law and friction obeys |γt| ≤ μ n (lagged: μ n0)."""
    par = hc_par()
    mu, dt, k, d, fe0, n0 = par[:6]
    vn = -0.05
    n_expected = dt * (fe0 - dt * k * vn) * (1 - d * vn)
    _, g_lag, _ = constraint_impulse(KIND_LAGGED, par, [1.0, 0.0, vn])
    assert g_lag[2] == pytest.approx(n_expected, rel=1e-14)
    assert np.hypot(*g_lag[:2]) <= mu * n0 * (1 + 1e-14)
    assert np.hypot(*g_lag[:2]) == pytest.approx(mu * n0, rel=1e-8)  # |vt| = 1 m/s ≫ εs: full sliding
    _, g_sim, _ = constraint_impulse(KIND_SIMILAR, par, [1e-3, 0.0, vn])
    assert np.hypot(*g_sim[:2]) <= mu * g_sim[2] * (1 + 1e-14)
    assert g_sim[2] > n_expected  # "similar" raises the normal impulse while sliding (z < vn)


def test_kernel_parameter_rows_are_the_ones_the_solver_builds():
    """Check the hand-built rows used by these tests, sap_par() and hc_par(), equal the rows that
    ContactProblem builds for the solver from the same parameters and Delassus estimate, so the identities
    checked here hold for what the solver evaluates. Tolerance 1e-14 relative: the solver's rows come from
    the vectorized numpy path, these from the scalar kernels (same formulas, round-off only)."""
    from convexsim.sap.problem import ContactProblem, constraint_kernel_data

    A, v_star, J = np.eye(3), np.zeros(3), np.eye(3)
    sap = ContactProblem.from_dense(A, v_star, J, dt=DT, model="sap", mu=MU, k=K, tau_d=TAU, phi0=PHI0,
                                    beta=BETA, sigma=SIGMA)
    kind, cpar, _, _ = constraint_kernel_data(sap, np.array([W]))
    assert kind.tolist() == [KIND_SAP] and cpar.shape == (1, NPAR)
    np.testing.assert_allclose(cpar[0], sap_par(), rtol=1e-14, atol=0)
    for model, code in (("lagged", KIND_LAGGED), ("similar", KIND_SIMILAR)):
        hc = ContactProblem.from_dense(A, v_star, J, dt=1e-2, model=model, mu=0.5, k=1e5, d=0.01, fe0=15.0,
                                       vn0=-0.1, sigma=1e-3, v_s=1e-4)
        kind, cpar, _, _ = constraint_kernel_data(hc, np.array([1.0]))
        assert kind.tolist() == [code]
        np.testing.assert_allclose(cpar[0], hc_par(), rtol=1e-14, atol=0)


@pytest.mark.parametrize("kind", [KIND_LAGGED, KIND_SIMILAR])
@pytest.mark.parametrize("side", [+1, -1])
@pytest.mark.parametrize("slip", [1e-6, 1e-4, 1e-2])  # |vt| below, at and above εs = v_s = 1e-4 m/s
def test_hc_gradients_near_the_contact_breaking_boundary(kind, side, slip):
    """Check the identities at relative distance 1e-5 on both sides of z = v̂, where n(z) vanishes.

    h = 1e-8 m/s keeps the stencil on one side of the kink (the offset is 1e-5·v̂ = 1.5e-7 m/s = 15 h); the
    round-off of differencing ℓ ≈ N(v̂) ≈ 2e-3 J is ε·2e-3/h ≈ 4e-11 N·s against γn ≈ 1.5e-6 N·s, hence 1e-4.
    """
    par = hc_par()
    mu, v_hat, eps_s = par[0], par[7], par[6]
    vt = np.array([0.6, -0.8]) * slip
    soft = math.sqrt(slip**2 + eps_s**2) - eps_s
    z_target = v_hat * (1 - side * 1e-5)  # side +1: n > 0 (in contact), −1: n = 0
    vn = z_target if kind == KIND_LAGGED else z_target + mu * soft
    vc = np.array([vt[0], vt[1], vn])
    _, gamma, _ = constraint_impulse(kind, par, vc)
    assert (gamma[2] > 0) == (side > 0)
    assert_fd_consistent(kind, par, vc, h=1e-8, rtol=1e-4)
