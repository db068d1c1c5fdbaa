"""convexsim.sap: the SAP convex contact solver, array in / array out (docs/sap.md, docs/sap-model.md).

Each time step is the strictly convex, unconstrained problem

    min_v  ½ (v − v*)ᵀ A (v − v*) + Σ_i ℓ_i(J_i v)

solved by Newton's method with an exact line search (Castro, Permenter & Han, IEEE T-RO 2023,
arXiv:2110.10107). Constraint kinds: the "sap" friction cone and the convex Hunt–Crossley models
"lagged" and "similar".

Public API:
    ContactProblem.from_blocks(...), ContactProblem.from_dense(...)   build a problem
    solve(problem, v_guess=None, *, params=SapParameters()) -> SapResult
    solve_dense(A, v_star, J, mu, R, v_hat, ...) -> SapResult          friction cones given by R, v̂
    contact_regularization(dt, k, tau_d, mu, w, beta, sigma, phi0) -> (R, v_hat)
    delassus_diagonal(problem) -> w
"""

from convexsim.sap.friction_cone import contact_regularization
from convexsim.sap.linalg import SymbolicCache
from convexsim.sap.problem import ContactProblem, delassus_diagonal
from convexsim.sap.solver import solve, solve_dense
from convexsim.sap.types import (
    SapConvergenceWarning,
    SapParameters,
    SapResult,
    SapSolverError,
    SapStatus,
)

__all__ = [
    "ContactProblem",
    "SapParameters",
    "SapResult",
    "SapStatus",
    "SapSolverError",
    "SapConvergenceWarning",
    "solve",
    "solve_dense",
    "contact_regularization",
    "delassus_diagonal",
    "SymbolicCache",
]
