"""The convex Hunt–Crossley contact constraints "lagged" and "similar" (docs/sap.md).

Castro, Han & Masterjohn, "A Theory of Irrotational Contact Fields" (arXiv:2312.03908), as implemented in
Drake's SapHuntCrossleyConstraint. One contact, vc = (vt1, vt2, vn) [m/s], normal last.

Discrete Hunt–Crossley normal impulse (penetration x = x0 − dt vn, elastic force fe0 = k x0 at the
previous step, dissipation d [s/m]):

    n(v)  = dt (fe0 − dt k v)₊ (1 − d v)₊                                           [N·s]
    n'(v) = −dt [k dt (1 − d v) + d (fe0 − dt k v)]   where n(v) > 0, else 0
    N(v)  = N₊(min(v, v̂)),  N₊(v) = dt [v (fe0 + df/2) − d v²/2 (fe0 + 2 df/3)],  df = −dt k v
    v̂     = min(fe0/(dt k), 1/d)     (the velocity at which n vanishes; N' = n)

Regularized friction (constants of the step): Rt = σ w, n0 = dt (fe0)₊ (1 − d vn0)₊,
εs = max(v_s, μ Rt n0), s = sqrt(‖vt‖² + εs²), ‖vt‖ₛ = s − εs, t̂s = vt / s.

    similar:  z = vn − μ ‖vt‖ₛ,  ℓ = −N(z),                γn = n(z),   γt = −μ n(z) t̂s
    lagged:   z = vn,            ℓ = −N(vn) + μ n0 ‖vt‖ₛ,  γn = n(vn),  γt = −μ n0 t̂s

G = −∂γ/∂vc (PSD):
    similar:  Gnn = −n'(z),  Gtn = μ n'(z) t̂s,  Gtt = −μ² n'(z) t̂s t̂sᵀ + μ n(z) (I − t̂s t̂sᵀ)/s
    lagged:   Gnn = −n'(vn), Gtn = 0,           Gtt = μ n0 (I − t̂s t̂sᵀ)/s

With the slip curvature κ > 0 the Newton matrix adds θ (c⊥ − c∥)₊ t̂s t̂sᵀ to Gtt, θ = min(1, κ εs/s),
c⊥ = μ n/s (μ n0/s lagged), c∥ = −μ² n' (0 lagged) (docs/sap.md, "Slip curvature").

Speculative contacts (fe0 = −k φ0 < 0: a gap at the start of the step): v̂ = fe0/(dt k) = −φ0/dt, so
"lagged" (n0 = 0: no friction) pushes exactly when the step closes the gap, φ0 + dt vn < 0, and
"similar" when φ0 + dt (vn − μ‖vt‖ₛ) < 0: exactly that rule without slip, widened by its gliding band
dt μ ‖vt‖ₛ while sliding (docs/sap.md, "Speculative contacts").

Kernel parameter layout (one row of 8 floats per constraint): (μ, dt, k, d, fe0, n0, εs, v̂).
"""

from __future__ import annotations

import math

from convexsim._jit import jit
from convexsim.sap.friction_cone import slip_curvature_factor


@jit
def hc_step_constants(dt, k, d, mu, fe0, vn0, sigma, w, v_s):
    """Constants of one Hunt–Crossley contact for one step.

    Args:
        dt [s], k [N/m] (> 0), d [s/m] (≥ 0), mu (≥ 0), fe0 previous elastic force [N], vn0 previous normal
        velocity [m/s], sigma (dimensionless), w Delassus estimate [1/kg], v_s stiction tolerance [m/s] (> 0).

    Returns:
        (n0, eps_s, v_hat): previous impulse [N·s], friction regularization speed [m/s], cut-off velocity [m/s].
    """
    n0 = dt * max(fe0, 0.0) * max(1.0 - d * vn0, 0.0)
    eps_s = max(v_s, mu * sigma * w * n0)
    v_hat = min(fe0 / (dt * (k + 1e-20)), 1.0 / (d + 1e-20))
    return n0, eps_s, v_hat


@jit
def hc_kernel_parameters(dt, k, d, mu, fe0, vn0, sigma, w, v_s, cpar_out):
    """Rows (μ, dt, k, d, fe0, n0, εs, v̂) of all Hunt–Crossley constraints into cpar_out (nk, 8)."""
    for i in range(k.shape[0]):
        n0, eps_s, v_hat = hc_step_constants(dt, k[i], d[i], mu[i], fe0[i], vn0[i], sigma, w[i], v_s)
        cpar_out[i, 0] = mu[i]
        cpar_out[i, 1] = dt
        cpar_out[i, 2] = k[i]
        cpar_out[i, 3] = d[i]
        cpar_out[i, 4] = fe0[i]
        cpar_out[i, 5] = n0
        cpar_out[i, 6] = eps_s
        cpar_out[i, 7] = v_hat


@jit
def hc_normal(dt, k, d, fe0, v_hat, v):
    """(N(v), n(v), n'(v)): antiderivative, impulse and its derivative of the discrete H&C law."""
    x = min(v, v_hat)
    df = -dt * k * x
    big_n = dt * (x * (fe0 + 0.5 * df) - 0.5 * d * x * x * (fe0 + 2.0 * df / 3.0))
    if v >= v_hat:
        return big_n, 0.0, 0.0
    n = dt * (fe0 - dt * k * v) * (1.0 - d * v)
    dn = -dt * (k * dt * (1.0 - d * v) + d * (fe0 - dt * k * v))
    return big_n, n, dn


@jit
def hc_impulse_and_cost(similar, mu, dt, k, d, fe0, n0, eps_s, v_hat, vc0, vc1, vc2, gamma_out):
    """Write γ into gamma_out (3,) and return ℓ (similar=True: "similar", False: "lagged")."""
    s = math.sqrt(vc0 * vc0 + vc1 * vc1 + eps_s * eps_s)
    soft_norm = s - eps_s
    t0 = vc0 / s
    t1 = vc1 / s
    if similar:
        big_n, n, dn = hc_normal(dt, k, d, fe0, v_hat, vc2 - mu * soft_norm)
        gamma_out[0] = -mu * n * t0
        gamma_out[1] = -mu * n * t1
        gamma_out[2] = n
        return -big_n
    big_n, n, dn = hc_normal(dt, k, d, fe0, v_hat, vc2)
    gamma_out[0] = -mu * n0 * t0
    gamma_out[1] = -mu * n0 * t1
    gamma_out[2] = n
    return -big_n + mu * n0 * soft_norm


@jit
def hc_hessian(similar, mu, dt, k, d, fe0, n0, eps_s, v_hat, vc0, vc1, vc2, G_out, kappa=0.0):
    """Write G = −∂γ/∂vc (3x3, symmetric PSD) into G_out.

    ``kappa`` = κ > 0 (the slip curvature, docs/sap.md): the coefficient of t̂s t̂sᵀ gains θ·(c⊥ − c∥)₊ with
    θ = min(1, κ εs/s) — the matrix the Newton step uses, still symmetric PSD, exact as the slip grows;
    kappa = 0 (the default) is the exact −∂γ/∂vc.
    """
    s = math.sqrt(vc0 * vc0 + vc1 * vc1 + eps_s * eps_s)
    t = (vc0 / s, vc1 / s)
    if similar:
        big_n, n, dn = hc_normal(dt, k, d, fe0, v_hat, vc2 - mu * (s - eps_s))
        c_par = -mu * mu * dn
        c_perp = mu * n / s
        tn = mu * dn
    else:
        big_n, n, dn = hc_normal(dt, k, d, fe0, v_hat, vc2)
        c_par = 0.0
        c_perp = mu * n0 / s
        tn = 0.0
    if kappa > 0.0:  # slip curvature (as friction_cone.cone_hessian): radius εs, slip s
        c_par += slip_curvature_factor(kappa, eps_s, s) * max(c_perp - c_par, 0.0)
    for i in range(2):
        for j in range(2):
            delta = 1.0 if i == j else 0.0
            G_out[i, j] = c_par * t[i] * t[j] + c_perp * (delta - t[i] * t[j])
        G_out[i, 2] = tn * t[i]
        G_out[2, i] = tn * t[i]
    G_out[2, 2] = -dn
