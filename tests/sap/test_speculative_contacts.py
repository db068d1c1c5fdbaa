"""Speculative contacts (gap φ0 > 0 at the start of the step) push only if the step closes the gap.

Rule (docs/sap.md, "Speculative contacts"): for every contact model, a contact with φ0 > 0 has γ = 0 unless
φ0 + dt·vn < 0, and then only a normal impulse (no friction). Checked here on the constraint kernels as
the solver sees them (parameters from ContactProblem -> constraint_kernel_data), together with the
finite-difference identities γ = −∂ℓ/∂vc, G = −∂γ/∂vc in each region of the speculative law.
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


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("phi0", [4e-3, 1e-6, 0.2])
def test_no_impulse_unless_the_step_closes_the_gap_at_any_slip(model, phi0):
    """Check γ = 0 exactly for φ0 + dt vn ≥ 0 and γ = (0, 0, γn > 0) below, slip up to 20 m/s.

    Before the rule, "sap" pushed for vn < −φ0/(dt+τd) (half the closing speed here) and "sap"/"similar"
    pushed while sliding for vn < −φ0/dt + μ‖vt‖ (the gliding term); both are sampled.
    """
    kind, par = one_contact(model, phi0)
    v_close = -phi0 / DT
    for vt in (0.0, 1e-3, 0.3, 20.0):
        for frac in (-1.0, -0.5, 0.0, 0.5, 0.999, 1.0, 1.001, 1.5, 3.0):
            vn = frac * v_close if v_close != 0 else frac
            vc = np.array([0.6 * vt, -0.8 * vt, vn])
            _, gamma, _ = constraint_impulse(kind, par, vc)
            np.testing.assert_array_equal(gamma[:2], 0.0)
            if phi0 + DT * vn >= 0.0:
                assert gamma[2] == 0.0, (vt, vn, gamma)
            else:
                assert gamma[2] > 0.0, (vt, vn, gamma)


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
    (closing: γn > 0; not closing: γ = 0), slip from 0 to 10 m/s.

    h = 1e-7 m/s against distances to the kink φ0 + dt vn = 0 of at least 1e-4 m/s (points nearer are
    skipped): the stencil stays on one smooth piece; relative bound 1e-6 covers O(h²) truncation and
    O(ε ℓ/h) round-off, as in test_sap_constraints.
    """
    rng = np.random.default_rng(7)
    seen = set()
    for _ in range(300):
        phi0 = 10 ** rng.uniform(-6, -1)
        kind, par = one_contact(model, phi0, k=10 ** rng.uniform(3, 8), vn0=rng.uniform(-1, 1))
        v_close = -phi0 / DT
        vn = v_close * rng.uniform(-1, 3)
        if abs(vn - v_close) < 1e-4:
            continue
        vt = rng.normal(size=2) * 10 ** rng.uniform(-6, 1)
        vc = np.array([vt[0], vt[1], vn])
        _, gamma, _ = constraint_impulse(kind, par, vc)
        seen.add(bool(gamma[2] > 0))
        assert_fd_consistent(kind, par, vc, h=1e-7, rtol=1e-6)
    assert seen == {True, False}
