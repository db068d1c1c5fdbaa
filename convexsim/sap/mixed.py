"""SAP with mixed constraint kinds: 3-row contact constraints and 1-row joint constraints in one problem.

    ℓ(v) = ½ (v − v*)ᵀ A (v − v*) + Σ_i ℓ_i(J_i v) + Σ_r ℓ_r(J_r v)

* contacts i (kinds 0–2 of convexsim.sap.constraints; kernel parameters ``cpar`` (nk, 8) from
  :func:`convexsim.sap.problem.constraint_kernel_data`), Jacobian rows J_c (3 nk, nv), rows (t1, t2, n);
* joint rows r (limits, PD actuators, couplers: kinds 10–13 of convexsim.sap.joint_constraints, parameters
  ``par`` (nr, 4)), Jacobian J_r (nr, nv).

Each kind brings its own impulse, cost and Hessian (G is a 3×3 block per contact, a scalar per joint row);
the Newton matrix is H = A + J_cᵀ blkdiag(G_i) J_c + J_rᵀ diag(G_r) J_r, factored densely (Cholesky). The
step length is the exact line search of the SAP paper: the root of the increasing dℓ/dα on (0, 1.5],
safeguarded Newton–bisection, with both kinds contributing to dℓ/dα and d²ℓ/dα². Converged when

    ‖D ∇ℓ‖ <= εa + εr·max(‖D A v‖, ‖D Jᵀγ‖),   D = diag(A)^(−½)

(the SAP paper's scale-invariant criterion over every constraint of every kind). The matrices are dense:
this path serves scenes with kinematic trees (tens of dofs); free-body piles keep the block-sparse solver
of convexsim.sap.solver. With no contact rows it is the same iteration as
:func:`convexsim.sap.clique_reference.solve_clique`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from convexsim.sap.clique_reference import exact_step
from convexsim.sap.constraints import eval_along_ray, eval_constraints
from convexsim.sap.joint_constraints import NPAR_ROW, eval_rows, rows_along_ray



@dataclass
class MixedResult:
    """v (nv,), contact impulses (nk, 3) [N·s], joint-row impulses (nr,) [N·s], Newton iterations,
    converged flag, final cost ℓ [J]."""

    v: np.ndarray
    gamma_contact: np.ndarray
    gamma_rows: np.ndarray
    iterations: int
    converged: bool
    cost: float


class _Mixed:
    def __init__(self, A, v_star, kind, cpar, Jc, Jr, par):
        self.A, self.v_star = A, v_star
        self.kind, self.cpar, self.Jc = kind, cpar, Jc
        self.Jr, self.par = Jr, par
        self.nk, self.nr = kind.shape[0], par.shape[0]

    def evaluate(self, v, with_hessian=True):
        dv = v - self.v_star
        ell = 0.5 * dv @ self.A @ dv
        gc = np.zeros((self.nk, 3))
        Gc = np.zeros((self.nk, 3, 3))
        if self.nk:
            vc = np.ascontiguousarray((self.Jc @ v).reshape(self.nk, 3))
            ell += eval_constraints(self.kind, self.cpar, vc, gc, Gc, with_hessian, 0.0)
        gr = np.zeros(self.nr)
        Gr = np.zeros(self.nr)
        if self.nr:
            ell += eval_rows(self.par, np.ascontiguousarray(self.Jr @ v), gr, Gr)
        return ell, gc, Gc, gr, Gr

    def jt_gamma(self, gc, gr):
        return self.Jc.T @ gc.reshape(-1) + self.Jr.T @ gr

    def hessian(self, Gc, Gr):
        H = self.A.copy()
        if self.nk:
            nv = self.A.shape[0]
            Jb = self.Jc.reshape(self.nk, 3, nv)
            GJ = np.einsum("kij,kjn->kin", Gc, Jb).reshape(3 * self.nk, nv)
            H += self.Jc.T @ GJ
        if self.nr:
            H += self.Jr.T @ (Gr[:, None] * self.Jr)
        return H

    def line_search(self, v, dv, tol=1e-12, max_eval=100) -> float:
        Adv = self.A @ dv
        a2 = float(dv @ Adv)
        a1 = float((v - self.v_star) @ Adv)
        vc = dvc = vr = dvr = None
        if self.nk:
            vc = np.ascontiguousarray((self.Jc @ v).reshape(self.nk, 3))
            dvc = np.ascontiguousarray((self.Jc @ dv).reshape(self.nk, 3))
        if self.nr:
            vr, dvr = np.ascontiguousarray(self.Jr @ v), np.ascontiguousarray(self.Jr @ dv)

        def derivs(alpha):
            d1, d2 = a1 + alpha * a2, a2
            if self.nk:
                _, c1, c2 = eval_along_ray(self.kind, self.cpar, vc, dvc, alpha)
                d1, d2 = d1 + c1, d2 + c2
            if self.nr:
                _, r1, r2 = rows_along_ray(self.par, vr, dvr, alpha)
                d1, d2 = d1 + r1, d2 + r2
            return d1, d2

        return exact_step(derivs, tol, max_eval)


def solve_mixed(A, v_star, *, kind=None, cpar=None, Jc=None, Jr=None, par=None, v_guess=None,
                abs_tol: float = 1e-14, rel_tol: float = 1e-10, max_iterations: int = 100) -> MixedResult:
    """Minimize ℓ(v) (module docstring) by Newton's method with the exact line search.

    Args:
        A: (nv, nv) SPD. v_star: (nv,). kind (nk,), cpar (nk, 8), Jc (3 nk, nv): the contacts (optional).
        Jr (nr, nv), par (nr, 4): the joint rows (optional). v_guess: initial iterate (default v*).
    """
    A = np.asarray(A, dtype=float)
    v_star = np.asarray(v_star, dtype=float)
    nv = v_star.size
    kind = np.zeros(0, np.int64) if kind is None else np.ascontiguousarray(kind, dtype=np.int64)
    nk = kind.size
    cpar = np.zeros((0, 8)) if cpar is None else np.ascontiguousarray(cpar, dtype=float).reshape(nk, -1)
    Jc = np.zeros((0, nv)) if Jc is None else np.asarray(Jc, dtype=float).reshape(3 * nk, nv)
    par = np.zeros((0, NPAR_ROW)) if par is None else np.ascontiguousarray(par, dtype=float).reshape(-1, NPAR_ROW)
    Jr = np.zeros((0, nv)) if Jr is None else np.asarray(Jr, dtype=float).reshape(-1, nv)
    if Jr.shape[0] != par.shape[0]:
        raise ValueError(f"Jr has {Jr.shape[0]} rows but par has {par.shape[0]}")
    prob = _Mixed(A, v_star, kind, cpar, Jc, Jr, par)
    D = 1.0 / np.sqrt(np.diag(A))
    v = v_star.copy() if v_guess is None else np.array(v_guess, dtype=float)
    for it in range(max_iterations + 1):
        ell, gc, Gc, gr, Gr = prob.evaluate(v)
        Jg = prob.jt_gamma(gc, gr)
        grad = A @ (v - v_star) - Jg
        scale = max(np.linalg.norm(D * (A @ v)), np.linalg.norm(D * Jg))
        if np.linalg.norm(D * grad) <= abs_tol + rel_tol * scale:
            return MixedResult(v, gc, gr, it, True, ell)
        if it == max_iterations:
            break
        H = prob.hessian(Gc, Gr)
        try:
            dv = -scipy.linalg.cho_solve(scipy.linalg.cho_factor(H), grad)
        except np.linalg.LinAlgError:
            dv = -np.linalg.solve(H, grad)
        alpha = prob.line_search(v, dv)
        if alpha == 0.0:
            break
        v = v + alpha * dv
    ell, gc, _, gr, _ = prob.evaluate(v, with_hessian=False)
    return MixedResult(v, gc, gr, it, False, ell)


__all__ = ["MixedResult", "solve_mixed"]
