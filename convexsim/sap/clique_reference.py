"""Reference SAP solve for ONE articulated clique with joint-constraint rows, dense and unoptimized.

This is the path the integrated solver (mixed contact and joint constraints over many cliques) will be
compared against; it is not used by the steppers. It minimizes

    ℓ(v) = ½ (v − v*)ᵀ A (v − v*) + Σ_r ℓ_r(J_r v)            (A: nv × nv SPD, J: nr × nv)

with the rows of convexsim.sap.joint_constraints, by Newton's method with an exact line search:
gradient ∇ℓ = A (v − v*) − Jᵀ γ, Hessian H = A + Jᵀ diag(G) J (Cholesky), step v ← v + α dv with α
minimizing ℓ(v + α dv) on (0, 1.5] (ℓ is convex and piecewise quadratic along the ray; a safeguarded
Newton–bisection on dℓ/dα). Converged when ‖D ∇ℓ‖ <= εa + εr·max(‖D A v‖, ‖D Jᵀγ‖), D = diag(A)^(−½)
(the SAP paper's scale-invariant optimality criterion).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from convexsim.sap.joint_constraints import NPAR_ROW, eval_rows, rows_along_ray

ALPHA_MAX = 1.5


@dataclass
class CliqueResult:
    """v (nv,), row impulses gamma (nr,) [N·s], Newton iterations, converged flag, final cost ℓ."""

    v: np.ndarray
    gamma: np.ndarray
    iterations: int
    converged: bool
    cost: float


def _cost(A, v_star, J, par, v):
    nr = par.shape[0]
    gamma = np.empty(nr)
    G = np.empty(nr)
    dv = v - v_star
    ell = 0.5 * dv @ A @ dv + eval_rows(par, J @ v, gamma, G)
    return ell, gamma, G


def exact_step(derivs, tol=1e-12, max_eval=100) -> float:
    """The exact line-search step: the root on (0, ALPHA_MAX] of the increasing dℓ/dα, by Newton with a
    bisection safeguard. ``derivs(α)`` returns (dℓ/dα, d²ℓ/dα²). 0 if dℓ/dα(0) ≥ 0 (not a descent
    direction: round-off at the optimum), ALPHA_MAX if ℓ still decreases there."""
    f0, _ = derivs(0.0)
    if f0 >= 0:  # not a descent direction (round-off at the optimum)
        return 0.0
    fmax, _ = derivs(ALPHA_MAX)
    if fmax <= 0:
        return ALPHA_MAX
    lo, hi, alpha = 0.0, ALPHA_MAX, 1.0
    for _ in range(max_eval):
        f, fp = derivs(alpha)
        if abs(f) <= tol * abs(f0):
            return alpha
        if f < 0:
            lo = alpha
        else:
            hi = alpha
        step = alpha - f / fp if fp > 0 else np.inf
        alpha = step if lo < step < hi else 0.5 * (lo + hi)
        if hi - lo <= 1e-15 * ALPHA_MAX:
            break
    return alpha


def _line_search(A, v_star, J, par, v, dv, tol=1e-12, max_eval=100) -> float:
    """argmin_α ℓ(v + α dv) on (0, ALPHA_MAX]: root of the increasing dℓ/dα, Newton with bisection."""
    vc, dvc = J @ v, J @ dv
    Adv = A @ dv
    a2 = float(dv @ Adv)
    a1 = float((v - v_star) @ Adv)

    def derivs(alpha):
        _, d1, d2 = rows_along_ray(par, vc, dvc, alpha)
        return a1 + alpha * a2 + d1, a2 + d2

    return exact_step(derivs, tol, max_eval)


def solve_clique(A, v_star, J, par, v_guess=None, *, abs_tol=1e-14, rel_tol=1e-10,
                 max_iterations=100) -> CliqueResult:
    """Minimize ℓ(v) for one clique (see the module docstring).

    Args:
        A: (nv, nv) SPD [kg, kg·m²]. v_star: (nv,). J: (nr, nv). par: (nr, 4) row parameters.
        v_guess: initial guess (default v*).
    """
    A = np.asarray(A, dtype=float)
    v_star = np.asarray(v_star, dtype=float)
    nv = v_star.size
    J = np.asarray(J, dtype=float).reshape(-1, nv)
    par = np.ascontiguousarray(par, dtype=float).reshape(-1, NPAR_ROW)
    if J.shape[0] != par.shape[0]:
        raise ValueError(f"J has {J.shape[0]} rows but par has {par.shape[0]}")
    D = 1.0 / np.sqrt(np.diag(A))
    v = v_star.copy() if v_guess is None else np.array(v_guess, dtype=float)
    for it in range(max_iterations + 1):
        ell, gamma, G = _cost(A, v_star, J, par, v)
        Av = A @ (v - v_star)
        Jg = J.T @ gamma
        grad = Av - Jg
        scale = max(np.linalg.norm(D * (A @ v)), np.linalg.norm(D * Jg))
        if np.linalg.norm(D * grad) <= abs_tol + rel_tol * scale:
            return CliqueResult(v, gamma, it, True, ell)
        if it == max_iterations:
            break
        H = A + J.T @ (G[:, None] * J)
        dv = -scipy.linalg.cho_solve(scipy.linalg.cho_factor(H), grad)
        alpha = _line_search(A, v_star, J, par, v, dv)
        if alpha == 0.0:
            break
        v = v + alpha * dv
    ell, gamma, _ = _cost(A, v_star, J, par, v)
    return CliqueResult(v, gamma, max_iterations, False, ell)


__all__ = ["ALPHA_MAX", "CliqueResult", "exact_step", "solve_clique"]
