"""The SAP friction-cone constraint (the "sap" contact model), docs/sap.md.

One contact with constraint velocity vc = (vt1, vt2, vn) [m/s] (contact frame, normal last) and impulse
γ = (γt1, γt2, γn) [N·s]. With the diagonal regularization R = diag(Rt, Rt, Rn) [m/(N·s²)·s = s/kg] and the
bias v̂ = (0, 0, v̂n) [m/s] (computed once per step by :func:`contact_regularization`):

    y = R⁻¹ (v̂ − vc),                γ = P_F(y)   (projection in the R-norm onto the cone ‖γt‖ ≤ μ γn)
    ℓ(vc) = ½ ‖P_F(y)‖²_R  (convex),  γ = −∂ℓ/∂vc,  G = −∂γ/∂vc = (∂P/∂y) R⁻¹  (symmetric PSD)

With the soft norm yr = sqrt(‖yt‖² + ε²), ε = 1e-7 N·s, t̂ = yt / yr, μ̂ = μ Rt/Rn, μ̃² = μ μ̂, the projection
has three regions, tested in this order (Castro, Permenter & Han, T-RO 2023, arXiv:2110.10107, §V):

    I   stiction    yr ≤ μ yn           γ = y,                         ℓ = ½ (Rt yr² + Rn yn²)
    II  sliding     yn > −μ̂ yr          γn = (yn + μ̂ yr)/(1 + μ̃²),    ℓ = Rn/(2(1+μ̃²)) (yn + μ̂ yr)²
                                        γt = μ γn t̂
    III no contact  otherwise           γ = 0,                         ℓ = 0

The per-region costs are the paper's; they are continuous across both region boundaries also with the soft
norm, and their gradients are exactly −γ. (Drake evaluates ½ γᵀRγ, which differs from these by O(Rt ε²).)

Speculative contacts (gap φ0 > 0 at the start of the step) have the bias v̂n = −φ0/dt: without slip
γn = (−(φ0 + dt vn))₊/(dt Rn), the law of a contact that starts touching applied to the gap at the end of
the step, so they push only if the step closes the gap; while sliding the cone's gliding band widens
that to φ0 + dt vn < dt μ ‖vt‖ (docs/sap.md, "Speculative contacts").

All functions on one contact are numba kernels on scalars / 3-vectors; :func:`contact_regularization` is the
vectorized Python entry point.
"""

from __future__ import annotations

import math

import numpy as np

from convexsim._jit import jit

SOFT_NORM_EPSILON = 1e-7
"""ε of the soft norm ‖yt‖ₛ = sqrt(‖yt‖² + ε²) [N·s] (Drake's hard-coded value)."""

STICTION = 1
SLIDING = 2
NO_CONTACT = 3
"""Region codes returned by :func:`cone_region`."""


@jit
def normal_bias(dt, tau_d, phi0):
    """v̂n [m/s]: −φ0/(dt + τd) for a touching contact (φ0 ≤ 0), −φ0/dt for a speculative one (φ0 > 0).

    Continuous in φ0 (both are 0 at φ0 = 0). For φ0 > 0, γn ∝ (v̂n − vn)₊ is positive exactly when the
    step closes the gap, φ0 + dt·vn < 0 (with −φ0/(dt + τd) it would be whenever vn < −φ0/(dt + τd)).
    """
    if phi0 > 0.0:
        return -phi0 / dt
    return -phi0 / (dt + tau_d)


@jit
def regularization(dt, k, tau_d, w, beta, sigma, phi0):
    """Regularization and bias of one contact (docs/sap.md).

    Rt = σ w,  Rn = max(β²/(4π²) w, 1/(dt k (dt + τd))),  v̂n = :func:`normal_bias` (dt, τd, φ0).

    Args:
        dt: time step [s]. k: stiffness [N/m] (> 0). tau_d: dissipation time scale [s] (≥ 0).
        w: Delassus diagonal estimate [1/kg]. beta: near-rigid threshold (dimensionless).
        sigma: friction regularization (dimensionless). phi0: signed distance at the previous step [m].

    Returns:
        (Rt, Rn, vn_hat).
    """
    r_near_rigid = beta * beta / (4.0 * math.pi * math.pi) * w
    r_compliant = 1.0 / (dt * k * (dt + tau_d))
    return sigma * w, max(r_near_rigid, r_compliant), normal_bias(dt, tau_d, phi0)


@jit
def cone_region(mu, mu_hat, yr, yn):
    """Region code (STICTION, SLIDING, NO_CONTACT) of the un-projected impulse (yr, yn)."""
    if yr <= mu * yn:
        return STICTION
    if yn > -mu_hat * yr:
        return SLIDING
    return NO_CONTACT


@jit
def unprojected_impulse(Rt, Rn, vh0, vh1, vh2, vc0, vc1, vc2):
    """y = R⁻¹(v̂ − vc) and the soft norm yr = sqrt(yt1² + yt2² + ε²). Returns (y0, y1, y2, yr)."""
    y0 = (vh0 - vc0) / Rt
    y1 = (vh1 - vc1) / Rt
    y2 = (vh2 - vc2) / Rn
    yr = math.sqrt(y0 * y0 + y1 * y1 + SOFT_NORM_EPSILON * SOFT_NORM_EPSILON)
    return y0, y1, y2, yr


@jit
def cone_impulse_and_cost(mu, Rt, Rn, vh0, vh1, vh2, vc0, vc1, vc2, gamma_out):
    """Write γ = P_F(y) into gamma_out (3,) and return (ℓ, region)."""
    y0, y1, y2, yr = unprojected_impulse(Rt, Rn, vh0, vh1, vh2, vc0, vc1, vc2)
    mu_hat = mu * Rt / Rn
    region = cone_region(mu, mu_hat, yr, y2)
    if region == STICTION:
        gamma_out[0] = y0
        gamma_out[1] = y1
        gamma_out[2] = y2
        return 0.5 * (Rt * yr * yr + Rn * y2 * y2), region
    if region == SLIDING:
        factor = 1.0 / (1.0 + mu * mu_hat)
        s = y2 + mu_hat * yr
        gn = s * factor
        gamma_out[0] = mu * gn * y0 / yr
        gamma_out[1] = mu * gn * y1 / yr
        gamma_out[2] = gn
        return 0.5 * Rn * factor * s * s, region
    gamma_out[0] = 0.0
    gamma_out[1] = 0.0
    gamma_out[2] = 0.0
    return 0.0, region


@jit
def slip_curvature_factor(kappa, r, s):
    """θ = min(1, κ r/s): the weight of the slip-curvature term of a sliding contact (docs/sap.md).

    r is the radius of the contact's stiction disc and s its slip, in the same units (r, s > 0);
    kappa = κ ≥ 0 (0: θ = 0, the exact Hessian).
    """
    if kappa <= 0.0:
        return 0.0
    return min(1.0, kappa * r / s)


@jit
def cone_hessian(mu, Rt, Rn, vh0, vh1, vh2, vc0, vc1, vc2, G_out, kappa=0.0):
    """Write G = −∂γ/∂vc = (∂P/∂y) R⁻¹ (3x3, symmetric PSD) into G_out.

    ``kappa`` = κ > 0 (the slip curvature, docs/sap.md): in the sliding region the coefficient of t̂t̂ᵀ
    gains θ·(c⊥ − c∥)₊ with θ = :func:`slip_curvature_factor` (κ, μγn, ‖yt‖ₛ) — the matrix the Newton
    step uses, still symmetric PSD, exact as the slip grows; kappa = 0 (the default) is the exact
    −∂γ/∂vc (the line search and the optimality test always use the exact γ).
    """
    y0, y1, y2, yr = unprojected_impulse(Rt, Rn, vh0, vh1, vh2, vc0, vc1, vc2)
    mu_hat = mu * Rt / Rn
    region = cone_region(mu, mu_hat, yr, y2)
    for i in range(3):
        for j in range(3):
            G_out[i, j] = 0.0
    if region == STICTION:
        G_out[0, 0] = 1.0 / Rt
        G_out[1, 1] = 1.0 / Rt
        G_out[2, 2] = 1.0 / Rn
    elif region == SLIDING:
        f = 1.0 / (1.0 + mu * mu_hat)
        gn = (y2 + mu_hat * yr) * f
        t0 = y0 / yr
        t1 = y1 / yr
        that = (t0, t1)
        c_perp = mu * gn / yr  # coefficient of Pperp = I − t̂t̂ᵀ in ∂γt/∂yt
        c_par = mu * mu_hat * f  # coefficient of P = t̂t̂ᵀ
        if kappa > 0.0:  # slip curvature: along t̂ add θ (c_perp − c_par)₊, θ = min(1, κ μγn/‖yt‖ₛ)
            c_par += slip_curvature_factor(kappa, mu * gn, yr) * max(c_perp - c_par, 0.0)
        for i in range(2):
            for j in range(2):
                delta = 1.0 if i == j else 0.0
                p_ij = that[i] * that[j]
                G_out[i, j] = (c_perp * (delta - p_ij) + c_par * p_ij) / Rt
            G_out[i, 2] = mu * f * that[i] / Rn
            G_out[2, i] = mu * f * that[i] / Rn  # = μ̂ f t̂ / Rt
        G_out[2, 2] = f / Rn


@jit
def stiction_predicted(mu, Rt, Rn, vh0, vh1, vh2, vc0, vc1, vc2, dv0, dv1, dv2):
    """True if the contact slides at vc and the full Newton step dvc [m/s] would put it in stiction or make
    it slide the opposite way (t̂(vc)ᵀ t̂(vc + dvc) < 0): the exact block's model, a constant friction force
    along the slip, did not hold over the step (docs/sap.md, "Stiction prediction")."""
    y0, y1, y2, yr = unprojected_impulse(Rt, Rn, vh0, vh1, vh2, vc0, vc1, vc2)
    mu_hat = mu * Rt / Rn
    if cone_region(mu, mu_hat, yr, y2) != SLIDING:
        return False
    z0, z1, z2, zr = unprojected_impulse(Rt, Rn, vh0, vh1, vh2, vc0 + dv0, vc1 + dv1, vc2 + dv2)
    region = cone_region(mu, mu_hat, zr, z2)
    return region == STICTION or (region == SLIDING and y0 * z0 + y1 * z1 < 0.0)


@jit
def stiction_linearization(Rt, Rn, vh0, vh1, vh2, vc0, vc1, vc2, gamma_out, G_out):
    """The stiction branch continued past the cone: γ = y = R⁻¹(v̂ − vc) into gamma_out (3,) and its
    G = R⁻¹ = diag(1/Rt, 1/Rt, 1/Rn) into G_out (3, 3): the linear model of a contact that sticks."""
    y0, y1, y2, _ = unprojected_impulse(Rt, Rn, vh0, vh1, vh2, vc0, vc1, vc2)
    gamma_out[0] = y0
    gamma_out[1] = y1
    gamma_out[2] = y2
    for i in range(3):
        for j in range(3):
            G_out[i, j] = 0.0
    G_out[0, 0] = 1.0 / Rt
    G_out[1, 1] = 1.0 / Rt
    G_out[2, 2] = 1.0 / Rn


def contact_regularization(dt, k, tau_d, mu, w, beta=1.0, sigma=1e-3, phi0=0.0):
    """Regularization R and bias v̂ of friction-cone contacts (docs/sap.md).

    Rt = σ w,  Rn = max(β² w/(4π²), 1/(dt k (dt + τd))),  v̂ = (0, 0, v̂n),
    v̂n = −φ0/(dt + τd) for φ0 ≤ 0 and −φ0/dt for a speculative contact (φ0 > 0).

    Args:
        dt: time step [s], > 0.
        k: contact stiffness [N/m], > 0, scalar or shape (nc,).
        tau_d: dissipation time scale [s], ≥ 0, scalar or (nc,).
        mu: friction coefficient (dimensionless), ≥ 0, scalar or (nc,); only validated (R does not depend on μ).
        w: Delassus diagonal estimate [1/kg], > 0, scalar or (nc,) (see :func:`convexsim.sap.delassus_diagonal`).
        beta: near-rigid threshold β (dimensionless), ≥ 0.
        sigma: friction regularization σ (dimensionless), > 0.
        phi0: signed distance at the previous step [m] (< 0 penetration), scalar or (nc,).

    Returns:
        (R, v_hat): arrays of shape (nc, 3); R rows are (Rt, Rt, Rn) [s/kg], v_hat rows (0, 0, v̂n) [m/s].

    Raises:
        ValueError: naming the first invalid argument.
    """
    from convexsim.sap._validate import check_nonneg, check_positive, check_finite

    dt = float(dt)
    if not (np.isfinite(dt) and dt > 0.0):
        raise ValueError(f"dt must be a positive finite time step [s], got {dt!r}")
    k, tau_d, mu, w, phi0 = np.broadcast_arrays(
        *(np.atleast_1d(np.asarray(a, dtype=float)) for a in (k, tau_d, mu, w, phi0))
    )
    check_positive("k", k)
    check_nonneg("tau_d", tau_d)
    check_nonneg("mu", mu)
    check_positive("w", w)
    check_finite("phi0", phi0)
    check_nonneg("beta", np.asarray(float(beta)))
    check_positive("sigma", np.asarray(float(sigma)))
    Rt = sigma * w
    Rn = np.maximum(beta**2 / (4.0 * np.pi**2) * w, 1.0 / (dt * k * (dt + tau_d)))
    R = np.stack([Rt, Rt, Rn], axis=1)
    v_hat = np.zeros_like(R)
    v_hat[:, 2] = np.where(phi0 > 0.0, -phi0 / dt, -phi0 / (dt + tau_d))
    return R, v_hat


__all__ = [
    "SOFT_NORM_EPSILON",
    "STICTION",
    "SLIDING",
    "NO_CONTACT",
    "normal_bias",
    "regularization",
    "cone_region",
    "cone_impulse_and_cost",
    "cone_hessian",
    "slip_curvature_factor",
    "stiction_predicted",
    "stiction_linearization",
    "contact_regularization",
]
