"""SAP solver parameters, statuses and results (docs/sap.md)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from convexsim.model import StatusCode


class SapStatus(StatusCode):
    """Outcome of a SAP solve (kernels return these codes as ints)."""

    CONVERGED = 0
    MAX_ITERATIONS = 1
    LINE_SEARCH_FAILED = 2
    FACTORIZATION_FAILED = 3
    NUMERICAL_FAILURE = 4
    """Non-finite cost or momentum residual at an iterate (e.g. a guess or v* of absurd size)."""


class SapSolverError(RuntimeError):
    """Raised when a solve fails and ``SapParameters.on_failure == "raise"``."""


class SapConvergenceWarning(RuntimeWarning):
    """Warned when a solve fails and ``SapParameters.on_failure == "warn"`` (the default)."""


@dataclass(frozen=True)
class SapParameters:
    """Parameters of the SAP Newton solver (defaults as Drake's SapSolverParameters).

    Attributes:
        rel_tolerance: ε_r (dimensionless): stop when r ≤ ε_a + ε_r·s, r = ‖D(A(v−v*) − Jᵀγ)‖,
            s = max(‖D A v‖, ‖D Jᵀγ‖), D = diag(A)^(−1/2).
        abs_tolerance: ε_a [sqrt(J)] of the same rule.
        cost_abs_tolerance: [J] cost-stall rule: stop when |Δℓ| < cost_abs + cost_rel·(|ℓ|+|ℓ_prev|)/2 and α > 0.5.
        cost_rel_tolerance: dimensionless, see cost_abs_tolerance.
        max_iterations: Newton iterations (factorizations) allowed; 0 only checks the guess.
        line_search: "exact" (Newton–bisection on dℓ/dα, default) or "backtracking" (Armijo).
        exact_max_iterations: line-search evaluations allowed in the exact search.
        exact_alpha_max: largest step of the exact search (1.5).
        backtracking_max_iterations: trials allowed in the backtracking search.
        armijo: Armijo parameter c of the backtracking search.
        rho: step reduction factor of the backtracking search; its first trial is α = 1/ρ.
        relative_slop: monotonicity slop (≈ 1000 machine ε).
        linear_solver: "sparse" (supernodal block-sparse Cholesky, ``convexsim.sap.supernodal``), "block"
            (the one-block-at-a-time factor of ``convexsim.sap.block_sparse``, kept for comparison), "dense"
            (dense H, the test oracle), or "auto" (the same as "sparse").
        on_failure: "warn" (SapConvergenceWarning), "raise" (SapSolverError) or "ignore"; the status is always
            in the result.
        slip_curvature: κ ≥ 0 (dimensionless). In the Newton matrix only, a sliding contact's Hessian block
            gains θ·(c⊥ − c∥)₊ along the slip direction, θ = min(1, κ·r/s) (r: the radius of its stiction
            disc, s: its slip; docs/sap.md, "Slip curvature"): still symmetric PSD, exact as the slip
            grows. Cost, impulses, line search and stopping rule stay exact, so the optimum is the same;
            only the Newton direction (and the iteration count) changes. 0 is the exact Hessian.
        slip_curvature_residual: ε_κ (dimensionless): once r ≤ ε_κ·s (the momentum residual of the
            stopping rule) the solve switches to the exact Hessian for its remaining iterations, so the
            last iterations converge like Newton's method (quadratically) rather than linearly.
        stiction_prediction: after a Newton step damped to α < ½, factor once more with the sliding
            contacts that the full step would bring into stiction (or through it) linearized as sticking, and
            take that direction if its line search reaches a lower cost (exact line search only; docs/sap.md,
            "Stiction prediction"). Each factorization counts as an iteration; the optimum and the stopping
            rule are unchanged.
    """

    rel_tolerance: float = 1e-6
    abs_tolerance: float = 1e-14
    cost_abs_tolerance: float = 1e-30
    cost_rel_tolerance: float = 1e-15
    max_iterations: int = 100
    line_search: str = "exact"
    exact_max_iterations: int = 100
    exact_alpha_max: float = 1.5
    backtracking_max_iterations: int = 40
    armijo: float = 1e-4
    rho: float = 0.8
    relative_slop: float = 1000 * float(np.finfo(float).eps)
    linear_solver: str = "auto"
    on_failure: str = "warn"
    slip_curvature: float = 1.0
    slip_curvature_residual: float = 1e-2
    stiction_prediction: bool = True

    def __post_init__(self):
        for name in ("rel_tolerance", "abs_tolerance", "cost_abs_tolerance", "cost_rel_tolerance",
                     "slip_curvature_residual"):
            x = getattr(self, name)
            if not (np.isfinite(x) and x >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {x!r}")
        if int(self.max_iterations) != self.max_iterations or self.max_iterations < 0:
            raise ValueError(f"max_iterations must be an integer >= 0, got {self.max_iterations!r}")
        if self.line_search not in ("exact", "backtracking"):
            raise ValueError(f"line_search must be 'exact' or 'backtracking', got {self.line_search!r}")
        if self.linear_solver not in ("auto", "sparse", "block", "dense"):
            raise ValueError(
                f"linear_solver must be 'auto', 'sparse', 'block' or 'dense', got {self.linear_solver!r}")
        if self.on_failure not in ("warn", "raise", "ignore"):
            raise ValueError(f"on_failure must be 'warn', 'raise' or 'ignore', got {self.on_failure!r}")
        if not (np.isfinite(self.slip_curvature) and self.slip_curvature >= 0):
            raise ValueError(f"slip_curvature must be a finite number >= 0, got {self.slip_curvature!r}")
        if not (self.exact_alpha_max > 0 and 0 < self.rho < 1 and 0 < self.armijo < 1):
            raise ValueError("need exact_alpha_max > 0, 0 < rho < 1 and 0 < armijo < 1")


@dataclass(frozen=True)
class SapResult:
    """Result of one SAP solve.

    Attributes:
        v: next generalized velocities [m/s, rad/s], shape (nv,).
        gamma: impulses per constraint in the contact frame, normal last [N·s], shape (nk, 3).
        vc: constraint velocities J v, normal last [m/s], shape (nk, 3).
        j: generalized impulses Jᵀγ [N·s, N·m·s], shape (nv,); generalized contact forces are j/dt.
        status: SapStatus.
        iterations: Newton iterations (factorizations) performed.
        line_search_evaluations: total cost evaluations of the line searches.
        cost: ℓ(v) at the returned v [J].
        cost_history: ℓ at the start of every iteration and at the end, shape (iterations + 1,).
        alpha: step length per iteration (alpha[0] = 1 by convention), shape (iterations + 1,).
        momentum_residual: r = ‖D(A(v−v*) − Jᵀγ)‖ per iteration [sqrt(J)], shape (iterations + 1,).
        momentum_scale: s = max(‖D A v‖, ‖D Jᵀγ‖) per iteration [sqrt(J)], shape (iterations + 1,).
        line_search_history: line-search evaluations of each iteration (entry 0 is 0), shape (iterations + 1,).
        optimality_reached: the momentum-residual criterion was met.
        nonmonotonic_iterations: iterations whose cost rose by more than the slop
            ``relative_slop·max(1, (|ℓ| + |ℓ_prev|)/2)`` (Drake's sanity check, docs/sap.md); the
            cost of a convex problem under an exact or Armijo line search never rises, so a nonzero
            count means round-off dominates (a badly scaled problem).
        cost_criterion_reached: the cost-stall criterion was met.
        w: Delassus diagonal estimate per constraint [1/kg], shape (nk,).
        R: regularization (Rt, Rt, Rn) of "sap" constraints (zeros for Hunt–Crossley ones), shape (nk, 3).
        v_hat: bias velocity of "sap" constraints [m/s], shape (nk, 3).
        message: empty on success, else what went wrong.
    """

    v: np.ndarray
    gamma: np.ndarray
    vc: np.ndarray
    j: np.ndarray
    status: SapStatus
    iterations: int
    line_search_evaluations: int
    cost: float
    cost_history: np.ndarray
    alpha: np.ndarray
    momentum_residual: np.ndarray
    momentum_scale: np.ndarray
    line_search_history: np.ndarray
    optimality_reached: bool
    cost_criterion_reached: bool
    w: np.ndarray
    R: np.ndarray
    v_hat: np.ndarray
    message: str = ""
    nonmonotonic_iterations: int = 0

    @property
    def converged(self) -> bool:
        """True iff status is CONVERGED."""
        return self.status == SapStatus.CONVERGED
