"""Line searches of the SAP Newton solver (docs/sap.md, "The solver"), numba kernels returning status codes.

Along the ray v(α) = v + α dv the cost is evaluated in O(nk) from cached quantities:

    ℓ(α)   = ℓ_A(0) + α a1 + ½ α² a2 + Σ_i ℓ_i(vc_i + α dvc_i),   a1 = dpᵀ(v − v*), a2 = dvᵀ dp, dp = A dv
    ℓ'(α)  = a1 + α a2 − Σ_i dvc_iᵀ γ_i(α)
    ℓ''(α) = a2 + Σ_i dvc_iᵀ G_i(α) dvc_i

Status codes: 0 success, 1 not a descent direction, 2 non-finite value, 3 no convergence within the budget.
"""

from __future__ import annotations

import math

from convexsim._jit import jit
from convexsim.sap.constraints import cost_along_ray, eval_along_ray

LS_OK = 0
LS_NOT_DESCENT = 1
LS_NOT_FINITE = 2
LS_MAX_ITERATIONS = 3


@jit
def _derivs(kind, cpar, vc, dvc, ell_a0, a1, a2, alpha, work):
    ell_r, d1, d2 = eval_along_ray(kind, cpar, vc, dvc, alpha, work)
    return ell_a0 + alpha * a1 + 0.5 * alpha * alpha * a2 + ell_r, a1 + alpha * a2 + d1, a2 + d2


@jit
def exact_line_search(kind, cpar, vc, dvc, ell0, ell_a0, a1, a2, dell0, alpha_max, max_evaluations, cost_abs_tol,
                      cost_rel_tol, work):
    """Minimize the convex ℓ(α) on [0, α_max] by Newton's method with bisection safeguard on ℓ'(α) = 0.

    The root of f(α) = ℓ'(α)/(−ℓ'(0)) is bracketed by [0, α_max] (unless ℓ'(α_max) ≤ 0, then α_max is
    returned). Start α0 = min(−ℓ'(0)/ℓ''(α_max), α_max); stop when |f| < 1e-8 or the step < 1e-8 α0.

    ``work`` (>= 12,): the per-constraint γ and G of each evaluation (``constraints.eval_along_ray``).
    ``ell0`` = ℓ(v) and ``dell0`` = ∇ℓ(v)·dv are passed in: the solver has them already (and ∇ℓ·dv is
    computed without the cancellation of a1 − dvcᵀγ near the optimum), so α = 0 costs no evaluation.

    Returns:
        (alpha, evaluations, status). ``evaluations`` counts root-finder evaluations (1 for the early exits).
    """
    if not (math.isfinite(ell0) and math.isfinite(dell0)):
        return 0.0, 1, LS_NOT_FINITE
    if dell0 >= 0.0:
        return 0.0, 1, LS_NOT_DESCENT
    ell_m, dell_m, d2ell_m = _derivs(kind, cpar, vc, dvc, ell_a0, a1, a2, alpha_max, work)
    if not (math.isfinite(ell_m) and math.isfinite(dell_m) and math.isfinite(d2ell_m)):
        return 0.0, 1, LS_NOT_FINITE
    if dell_m <= 0.0:
        return alpha_max, 1, LS_OK
    if -dell0 < cost_abs_tol + cost_rel_tol * abs(ell_m):
        return 1.0, 1, LS_OK  # gradient at round-off level: the full Newton step
    scale = -dell0
    alpha = min(scale / d2ell_m, alpha_max) if d2ell_m > 0.0 else 0.5 * alpha_max
    alpha_tol = 1e-8 * alpha
    lo = 0.0
    hi = alpha_max
    dx_old = hi - lo
    dx = dx_old
    for it in range(1, max_evaluations + 1):
        ell, dell, d2ell = _derivs(kind, cpar, vc, dvc, ell_a0, a1, a2, alpha, work)
        f = dell / scale
        df = d2ell / scale
        if not (math.isfinite(f) and math.isfinite(df)) or df < 0.0:
            return alpha, it, LS_NOT_FINITE
        if abs(f) < 1e-8:
            return alpha, it, LS_OK
        if f < 0.0:
            lo = alpha
        else:
            hi = alpha
        newton_leaves = ((alpha - hi) * df - f) * ((alpha - lo) * df - f) > 0.0
        if newton_leaves or abs(2.0 * f) > abs(dx_old * df):
            dx_old = dx
            dx = 0.5 * (hi - lo)
            alpha = lo + dx
        else:
            dx_old = dx
            dx = f / df
            alpha -= dx
        if abs(dx) < alpha_tol:
            return alpha, it, LS_OK
    return alpha, max_evaluations, LS_MAX_ITERATIONS


@jit
def _cost(kind, cpar, vc, dvc, ell_a0, a1, a2, alpha, work):
    ell_r, d1 = cost_along_ray(kind, cpar, vc, dvc, alpha, work)
    return ell_a0 + alpha * a1 + 0.5 * alpha * alpha * a2 + ell_r, a1 + alpha * a2 + d1


@jit
def backtracking_line_search(kind, cpar, vc, dvc, ell0, ell_a0, a1, a2, dell0, alpha_max, max_iterations, armijo,
                             rho, relative_slop, work):
    """Armijo backtracking α = α_max ρ^m (docs/sap.md), exploiting convexity of ℓ(α); dell0 = ∇ℓ·dv; ``work``
    (>= 3,): the per-constraint γ of each evaluation (``constraints.cost_along_ray``).

    Returns:
        (alpha, evaluations, status).
    """
    if not (math.isfinite(ell0) and math.isfinite(dell0)):
        return 0.0, 1, LS_NOT_FINITE
    if dell0 >= 0.0:
        return 0.0, 1, LS_NOT_DESCENT
    alpha = alpha_max
    ell, dell = _cost(kind, cpar, vc, dvc, ell_a0, a1, a2, alpha, work)
    if not math.isfinite(ell):
        return 0.0, 1, LS_NOT_FINITE
    slop = 0.1 * relative_slop * max(1.0, 0.5 * (abs(ell) + abs(ell0)))
    if dell < slop:
        return alpha, 1, LS_OK  # still descending (or flat) at the largest step
    ell_prev = ell
    alpha_prev = alpha
    for it in range(2, max_iterations + 2):
        alpha = rho * alpha
        ell, dell = _cost(kind, cpar, vc, dvc, ell_a0, a1, a2, alpha, work)
        if not math.isfinite(ell):
            return 0.0, it, LS_NOT_FINITE
        if abs((ell - ell_prev) / (alpha - alpha_prev)) < slop:
            return alpha, it, LS_OK
        satisfies_armijo = ell < ell0 + armijo * alpha * dell0
        if ell > ell_prev and satisfies_armijo:
            if ell_prev < ell0 + armijo * alpha_prev * dell0:
                return alpha_prev, it, LS_OK
            return alpha, it, LS_OK
        ell_prev = ell
        alpha_prev = alpha
    if ell < ell0 + armijo * alpha * dell0:
        return alpha, max_iterations + 1, LS_OK
    return alpha, max_iterations + 1, LS_MAX_ITERATIONS
