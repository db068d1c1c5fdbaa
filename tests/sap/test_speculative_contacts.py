"""Speculative contacts (gap φ0 > 0 at the start of the step) push only if the step closes the gap.

Rule (docs/sap.md, "Speculative contacts"): a contact with φ0 > 0 has γ = 0 unless the step closes the gap,
φ0 + dt·vn < 0 (every model, no slip); while sliding, "sap" and "similar" widen that by their gliding band
dt·μ·‖vt‖ (exactly: sap dt μ √(‖vt‖² + (Rt ε)²), similar dt μ (s − εs)), "lagged" does not (n0 = 0: no
friction). Checked on the constraint kernels as the solver sees them (parameters from ContactProblem ->
constraint_kernel_data), with the finite-difference identities γ = −∂ℓ/∂vc, G = −∂γ/∂vc on each piece.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_sap_constraints import assert_fd_consistent

from convexsim.sap import ContactProblem, delassus_diagonal
from convexsim.sap.constraints import constraint_impulse
from convexsim.sap.friction_cone import contact_regularization, normal_bias, regularization
from convexsim.sap.problem import constraint_kernel_data

DT, K, TAU, MU, D = 0.01, 1e5, 0.01, 0.5, 10.0
MODELS = ["sap", "lagged", "similar"]


def one_contact(model, phi0, *, k=K, beta=1.0, vn0=0.0):
    """Kernel (kind, parameters) of one contact of a 1 kg point mass (A = I, J = I), gap φ0 [m]."""
    extra = (dict(tau_d=TAU, phi0=phi0, beta=beta) if model == "sap"
             else dict(d=D, fe0=-k * phi0, vn0=vn0))
    problem = ContactProblem.from_dense(np.eye(3), np.zeros(3), np.eye(3), dt=DT, mu=MU, k=k, model=model,
                                        **extra)
    kind, cpar, _, _ = constraint_kernel_data(problem, delassus_diagonal(problem))
    return int(kind[0]), cpar[0]


def test_bias_is_minus_phi0_over_dt_for_a_gap_and_continuous_at_contact():
    """Check v̂n = −φ0/dt for φ0 > 0, −φ0/(dt+τd) for φ0 ≤ 0 (vectorized and kernel), both → 0 at φ0 = 0."""
    phi0 = np.array([4e-3, 1e-12, 0.0, -1e-12, -2.5e-3])
    _, v_hat = contact_regularization(DT, K, TAU, MU, 1.0, phi0=phi0)
    expected = np.where(phi0 > 0, -phi0 / DT, -phi0 / (DT + TAU))
    np.testing.assert_array_equal(v_hat[:, 2], expected)
    for p, e in zip(phi0, expected):
        assert normal_bias(DT, TAU, p) == e
        assert regularization(DT, K, TAU, 1.0, 1.0, 1e-3, p)[2] == e
    assert abs(v_hat[1, 2] - v_hat[3, 2]) < 1e-9  # continuous: 1e-10 and 5e-11 m/s either side of φ0 = 0


def push_band(model, par, vt):
    """dt·b [m]: the kernel pushes (γn > 0) exactly when φ0 + dt·vn < dt·b, for slip speed ‖vt‖ = vt."""
    mu = par[0]
    if model == "sap":
        return DT * mu * np.hypot(vt, par[1] * 1e-7)  # Rt·yr = √(‖vt‖² + (Rt ε)²), ε = 1e-7 N·s
    if model == "similar":
        eps_s = par[6]
        return DT * mu * (np.hypot(vt, eps_s) - eps_s)
    return 0.0


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("phi0", [4e-3, 1e-6, 0.2])
def test_no_impulse_unless_the_step_closes_the_gap(model, phi0):
    """Check γ = 0 exactly when the end-of-step gap φ0 + dt vn is at least the model's band dt·b(‖vt‖)
    (b = 0 without slip: exactly "the step closes the gap"), and γn > 0 below it, for slip 0 to 20 m/s.

    Sampled at end gaps dt·b + (−1, −1e-6, +1e-6, +1, +3)·φ0 (relative offsets far above round-off).
    Before the rule, "sap" pushed for vn < −φ0/(dt+τd) + μ‖vt‖, i.e. at end gaps up to φ0/2 + dt μ ‖vt‖.
    """
    kind, par = one_contact(model, phi0)
    for vt in (0.0, 1e-3, 0.3, 20.0):
        band = push_band(model, par, vt)
        if vt == 0.0:
            assert band < 1e-12  # no slip: the rule itself (sap's soft norm leaves dt μ Rt ε ≈ 5e-13 m)
        for frac in (-1.0, -1e-6, 1e-6, 1.0, 3.0):
            end_gap = band + frac * phi0
            vn = (end_gap - phi0) / DT
            _, gamma, _ = constraint_impulse(kind, par, np.array([0.6 * vt, -0.8 * vt, vn]))
            if frac > 0:
                np.testing.assert_array_equal(gamma, 0.0)
            else:
                assert gamma[2] > 0.0, (vt, vn, gamma)
            if model == "lagged":
                np.testing.assert_array_equal(gamma[:2], 0.0)  # n0 = 0: no friction


@pytest.mark.parametrize("k, beta", [(K, 1.0), (1e9, 1.0)])
def test_sap_speculative_law_is_the_touching_law_on_the_end_of_step_gap(k, beta):
    """Check "sap" with gap φ0 > 0 and velocity vn gives the impulse of a frictionless contact starting at
    φ0 = 0 with the same end-of-step gap φ = φ0 + dt vn, γn = −φ/(dt Rn) (compliant and near-rigid Rn)."""
    phi0 = 4e-3
    kind_s, par_s = one_contact("sap", phi0, k=k, beta=beta)
    kind_0, par_0 = one_contact("sap", 0.0, k=k, beta=beta)
    par_0[0] = 0.0  # frictionless reference
    Rn = par_s[2]
    for vn in (-0.5, -0.41, -1.0, -20.0):
        _, g_s, _ = constraint_impulse(kind_s, par_s, [0.0, 0.0, vn])
        _, g_0, _ = constraint_impulse(kind_0, par_0, [0.0, 0.0, vn + phi0 / DT])
        phi_end = phi0 + DT * vn
        assert g_s[2] == pytest.approx(-phi_end / (DT * Rn), rel=1e-12)
        assert g_s[2] == pytest.approx(g_0[2], rel=1e-12)


@pytest.mark.parametrize("model", MODELS)
def test_speculative_gradients_by_finite_differences_in_each_region(model):
    """Check γ = −∂ℓ/∂vc and G = −∂γ/∂vc (symmetric PSD) at random speculative points, both regions
    (pushing: γn > 0; not: γ = 0), slip from 1e-3 to 10 m/s.

    h = 1e-7 m/s with slip ‖vt‖ ≳ 1e-3 m/s (the friction direction varies on the scale ‖vt‖, so the
    truncation is O((h/‖vt‖)²) ≲ 1e-8 relative; tiny slip is covered by test_sap_constraints); points with a piece boundary (contact/no contact,
    stiction/sliding) within 1e-5 m/s are skipped, so the stencil stays on one smooth piece; the relative
    bound 1e-6 covers truncation and O(ε ℓ/h) round-off, as in test_sap_constraints.
    """
    rng = np.random.default_rng(7)
    seen = set()
    for _ in range(300):
        phi0 = 10 ** rng.uniform(-6, -1)
        kind, par = one_contact(model, phi0, k=10 ** rng.uniform(3, 8), vn0=rng.uniform(-1, 1))
        vn = -phi0 / DT * rng.uniform(-1, 3)
        vt = rng.normal(size=2) * 10 ** rng.uniform(-3, 1)
        vc = np.array([vt[0], vt[1], vn])
        if not _one_piece(kind, par, vc, 1e-5):
            continue
        _, gamma, _ = constraint_impulse(kind, par, vc)
        seen.add(bool(gamma[2] > 0))
        assert_fd_consistent(kind, par, vc, h=1e-7, rtol=1e-6)
    assert seen == {True, False}


def _one_piece(kind, par, vc, delta):
    """True if γn > 0 and (for "sap") the cone region are the same at vc and vc ± delta·e_j."""
    from test_sap_constraints import region_of

    def key(v):
        _, g, _ = constraint_impulse(kind, par, v)
        return (g[2] > 0, region_of(par, v) if kind == 0 else 0)

    k0 = key(vc)
    return all(key(vc + s * delta * e) == k0 for e in np.eye(3) for s in (-1, 1))
