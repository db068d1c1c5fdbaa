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

from __future__ import annotations

from typing import TYPE_CHECKING

from convexsim._lazy import lazy_attributes

if TYPE_CHECKING:
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

_LAZY = {
    "contact_regularization": "friction_cone",
    "SymbolicCache": "linalg",
    "ContactProblem": "problem",
    "delassus_diagonal": "problem",
    "solve": "solver",
    "solve_dense": "solver",
    "SapConvergenceWarning": "types",
    "SapParameters": "types",
    "SapResult": "types",
    "SapSolverError": "types",
    "SapStatus": "types",
}
"""Public names -> the submodule that defines them, imported on first use (PEP 562), so that a compiled
kernel importing ``convexsim.sap.blocks`` or ``convexsim.sap.constraints`` does not import the Python
solver, its sparse factorizations and their numba kernels."""


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals())


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
