"""Derivatives of one SAP step by implicit differentiation (docs/identify.md, "Gradients").

At the solution v of a SAP problem the momentum residual vanishes,

    g(v; θ) = A (v − v*(θ)) − Jᵀ γ(J v; p(θ)) = 0,

so for any input θ (previous velocity, gap, μ, k, τ_d, d, σ, dt)

    H dv/dθ = A ∂v*/∂θ + Jᵀ ∂γ/∂p · ∂p/∂θ,        H = ∂g/∂v = A + Jᵀ G J,   G = −∂γ/∂vc,

the Newton matrix of the solver, assembled once at the converged v and factored by the solver's
block-sparse Cholesky; every right-hand side then costs one solve. p are the per-contact kernel
parameters (``convexsim.sap.constraints``): (μ, Rt, Rn, v̂t1, v̂t2, v̂n) for "sap", (μ, dt, k, d, fe0,
n0, εs, v̂) for "lagged"/"similar". This module gives ∂γ/∂vc and ∂γ/∂p analytically for every model,
the chain ∂p/∂θ from the physical parameters, and the step sensitivities.

One-sided points (where the step map v(θ) has a kink) and what is returned there:

* "sap", stick/slip boundary ‖y_t‖ = μ y_n: the stiction derivative (the solver's kernel puts the
  boundary in stiction), i.e. the one-sided derivative towards the side where the contact sticks;
* "sap", contact/no-contact boundary y_n = −μ̂ ‖y_t‖, and "lagged"/"similar" at the cut-off v = v̂ of
  the Hunt–Crossley law: zero, the derivative from the side where the contact carries no impulse;
* Rn = max(β²w/(4π²), 1/(dt k (dt + τ_d))) at a tie: the near-rigid branch (∂Rn/∂k = ∂Rn/∂τ_d = 0),
  the right derivative in k;
* Hunt–Crossley εs = max(v_s, μ σ w n0) at a tie: v_s (zero derivative in μ, σ, n0).

A contact lying within ``BOUNDARY_TOL`` (relative) of the stick/slip or no-contact boundary is
treated as on it, so the rule above does not depend on the round-off of the converged v.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from convexsim.sap.constraints import KIND_SAP, KIND_SIMILAR, eval_constraints
from convexsim.sap.friction_cone import SOFT_NORM_EPSILON
from convexsim.sap.linalg import SparseHessian
from convexsim.sap.problem import ContactProblem, constraint_kernel_data, delassus_diagonal
from convexsim.sap.solver import solve
from convexsim.sap.types import SapParameters, SapResult

BOUNDARY_TOL = 1e-9
"""Relative band around the stick/slip and contact/no-contact boundaries treated as on them."""

PHYSICAL = ("mu", "k", "tau_d", "d", "sigma", "dt", "phi0", "vn0")
"""Per-contact inputs θ of ∂p/∂θ: μ, stiffness k [N/m], SAP dissipation time τ_d [s], Hunt–Crossley
dissipation d [s/m], σ, dt [s], previous gap φ0 [m], previous normal velocity vn0 [m/s]."""

GRADIENT_PARAMETERS = SapParameters(rel_tolerance=1e-12, abs_tolerance=1e-15, max_iterations=200,
                                    on_failure="raise")
"""Solver settings used when a gradient needs a solve: the implicit derivative is exact only at the
optimum, and its error is of the order of the momentum residual."""


# --------------------------------------------------------------------------------------------------
# per-contact partials
# --------------------------------------------------------------------------------------------------
def sap_impulse_partials(par, vc) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """γ, ∂γ/∂vc (3×3) and ∂γ/∂p (3×8) of one "sap" friction-cone contact.

    p = (μ, Rt, Rn, v̂t1, v̂t2, v̂n, ·, ·); y = R⁻¹(v̂ − vc), yr = sqrt(‖yt‖² + ε²), μ̂ = μRt/Rn,
    regions as in ``convexsim.sap.friction_cone``. In sliding, with f = 1/(1 + μμ̂), s = yn + μ̂ yr:
    γn = s f, ∂γn/∂μ|μ̂ = −s f² μ̂, ∂γn/∂μ̂ = f (yr − μγn), γt = μ γn t̂.
    """
    mu, Rt, Rn, vh0, vh1, vh2 = (float(x) for x in par[:6])
    y = np.array([(vh0 - vc[0]) / Rt, (vh1 - vc[1]) / Rt, (vh2 - vc[2]) / Rn])
    yr = math.sqrt(y[0] ** 2 + y[1] ** 2 + SOFT_NORM_EPSILON ** 2)
    mu_hat = mu * Rt / Rn
    scale = abs(yr) + abs(y[2]) + SOFT_NORM_EPSILON
    gamma = np.zeros(3)
    dPdy = np.zeros((3, 3))
    dP_dmu = np.zeros(3)      # at fixed y and μ̂
    dP_dmuhat = np.zeros(3)   # at fixed y and μ
    if yr - mu * y[2] <= BOUNDARY_TOL * scale:                          # stiction (boundary included)
        gamma[:] = y
        dPdy[:] = np.eye(3)
    elif y[2] + mu_hat * yr > BOUNDARY_TOL * scale:                     # sliding
        f = 1.0 / (1.0 + mu * mu_hat)
        s = y[2] + mu_hat * yr
        gn = s * f
        t = y[:2] / yr
        gamma[:2] = mu * gn * t
        gamma[2] = gn
        dgn_dyt = f * mu_hat * t
        dPdy[2, :2] = dgn_dyt
        dPdy[2, 2] = f
        P = np.outer(t, t)
        dPdy[:2, :2] = mu * (gn / yr) * (np.eye(2) - P) + mu * np.outer(t, dgn_dyt)
        dPdy[:2, 2] = mu * f * t
        dgn_dmu = -s * f * f * mu_hat
        dgn_dmuhat = f * (yr - mu * gn)
        dP_dmu[2] = dgn_dmu
        dP_dmu[:2] = (gn + mu * dgn_dmu) * t
        dP_dmuhat[2] = dgn_dmuhat
        dP_dmuhat[:2] = mu * dgn_dmuhat * t
    # no contact (boundary included): everything stays zero
    R = np.array([Rt, Rt, Rn])
    dgdvc = -dPdy / R[None, :]
    dgdp = np.zeros((3, 8))
    dgdp[:, 0] = dP_dmu + dP_dmuhat * Rt / Rn
    dgdp[:, 1] = dPdy[:, :2] @ (-y[:2] / Rt) + dP_dmuhat * mu / Rn
    dgdp[:, 2] = dPdy[:, 2] * (-y[2] / Rn) - dP_dmuhat * mu * Rt / (Rn * Rn)
    dgdp[:, 3:6] = dPdy / R[None, :]
    return gamma, dgdvc, dgdp


def _hc_normal_partials(dt, k, d, fe0, v_hat, v):
    """(n, ∂n/∂v, ∂n/∂(dt, k, d, fe0)) of the discrete Hunt–Crossley law; zero at and beyond v̂."""
    if v >= v_hat - BOUNDARY_TOL * (abs(v_hat) + abs(v) + 1e-300):
        return 0.0, 0.0, np.zeros(4)
    fe = fe0 - dt * k * v
    damp = 1.0 - d * v
    n = dt * fe * damp
    dn_dv = -dt * (k * dt * damp + d * fe)
    dn_dpar = np.array([(fe0 - 2.0 * dt * k * v) * damp, -dt * dt * v * damp, -dt * fe * v, dt * damp])
    return n, dn_dv, dn_dpar


def hc_impulse_partials(similar: bool, par, vc) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """γ, ∂γ/∂vc (3×3) and ∂γ/∂p (3×8) of one Hunt–Crossley contact ("similar" or "lagged").

    p = (μ, dt, k, d, fe0, n0, εs, v̂); s = sqrt(‖vt‖² + εs²), t̂ = vt/s;
    lagged: γ = (−μ n0 t̂, n(vn)); similar: z = vn − μ(s − εs), γ = (−μ n(z) t̂, n(z)).
    ∂γ/∂v̂ = 0 (v̂ is where n vanishes, so γ is continuous in it).
    """
    mu, dt, k, d, fe0, n0, eps_s, v_hat = (float(x) for x in par[:8])
    vt = np.array([vc[0], vc[1]], dtype=float)
    s = math.sqrt(vt @ vt + eps_s * eps_s)
    t = vt / s
    dt_dvt = (np.eye(2) - np.outer(t, t)) / s
    dt_deps = -vt * eps_s / s ** 3
    gamma = np.zeros(3)
    dgdvc = np.zeros((3, 3))
    dgdp = np.zeros((3, 8))
    if similar:
        z = vc[2] - mu * (s - eps_s)
        n, dn, dn_dpar = _hc_normal_partials(dt, k, d, fe0, v_hat, z)
        dz_dvt = -mu * t
        dz_dmu = -(s - eps_s)
        dz_deps = mu * (1.0 - eps_s / s)
        gamma[:2] = -mu * n * t
        gamma[2] = n
        dgdvc[2, :2] = dn * dz_dvt
        dgdvc[2, 2] = dn
        dgdvc[:2, :2] = -mu * (np.outer(t, dn * dz_dvt) + n * dt_dvt)
        dgdvc[:2, 2] = -mu * dn * t
        dgdp[2, 0] = dn * dz_dmu
        dgdp[2, 1:5] = dn_dpar
        dgdp[2, 6] = dn * dz_deps
        dgdp[:2, 0] = -n * t - mu * dgdp[2, 0] * t
        dgdp[:2, 1:5] = -mu * np.outer(t, dn_dpar)
        dgdp[:2, 6] = -mu * dgdp[2, 6] * t - mu * n * dt_deps
        return gamma, dgdvc, dgdp
    n, dn, dn_dpar = _hc_normal_partials(dt, k, d, fe0, v_hat, vc[2])
    gamma[:2] = -mu * n0 * t
    gamma[2] = n
    dgdvc[:2, :2] = -mu * n0 * dt_dvt
    dgdvc[2, 2] = dn
    dgdp[:2, 0] = -n0 * t
    dgdp[:2, 5] = -mu * t
    dgdp[:2, 6] = -mu * n0 * dt_deps
    dgdp[2, 1:5] = dn_dpar
    return gamma, dgdvc, dgdp


def impulse_partials(kind: int, par, vc) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(γ, ∂γ/∂vc, ∂γ/∂p) of one contact of constraint kind ``kind`` (0 sap, 1 lagged, 2 similar)."""
    if kind == KIND_SAP:
        return sap_impulse_partials(par, vc)
    return hc_impulse_partials(kind == KIND_SIMILAR, par, vc)


def _hc_previous_impulse(problem: ContactProblem):
    """((fe0)₊ [N], (1 − d vn0)₊, n0 = dt (fe0)₊ (1 − d vn0)₊ [N·s]) of the Hunt–Crossley contacts."""
    fe_pos = np.maximum(problem.fe0, 0.0)
    damp = np.maximum(1.0 - problem.d * problem.vn0, 0.0)
    return fe_pos, damp, problem.dt * fe_pos * damp


def kernel_parameter_partials(problem: ContactProblem, w: np.ndarray) -> np.ndarray:
    """∂p/∂θ per contact, shape (nk, 8, len(PHYSICAL)), θ in the order of :data:`PHYSICAL`.

    "sap": Rt = σw, Rn = max(β²w/(4π²), 1/(dt k (dt+τd))), v̂n = −φ0/(dt+τd) (φ0 ≤ 0) or −φ0/dt (φ0 > 0).
    Hunt–Crossley (as the stepper builds it, fe0 = −k φ0): n0 = dt (fe0)₊ (1 − d vn0)₊,
    εs = max(v_s, μ σ w n0). w (Delassus estimate) depends on A and J only.
    """
    nk = problem.nk
    col = {name: i for i, name in enumerate(PHYSICAL)}
    out = np.zeros((nk, 8, len(PHYSICAL)))
    w = np.where(w > 0.0, w, 1.0)
    dt, sigma = problem.dt, problem.sigma
    if problem.model == "sap":
        k, tau, phi0 = problem.k, problem.tau_d, problem.phi0
        out[:, 0, col["mu"]] = 1.0
        out[:, 1, col["sigma"]] = w
        r_near = problem.beta ** 2 / (4.0 * math.pi ** 2) * w
        r_comp = 1.0 / (dt * k * (dt + tau))
        comp = r_comp > r_near
        out[:, 2, col["k"]] = np.where(comp, -r_comp / k, 0.0)
        out[:, 2, col["tau_d"]] = np.where(comp, -r_comp / (dt + tau), 0.0)
        out[:, 2, col["dt"]] = np.where(comp, -r_comp * (1.0 / dt + 1.0 / (dt + tau)), 0.0)
        # v̂n = −φ0/(dt + τd) when touching (φ0 ≤ 0), −φ0/dt for a speculative contact (φ0 > 0); at
        # φ0 = 0 both are 0 and the touching side's derivative is returned
        spec = phi0 > 0.0
        out[:, 5, col["phi0"]] = np.where(spec, -1.0 / dt, -1.0 / (dt + tau))
        out[:, 5, col["tau_d"]] = np.where(spec, 0.0, phi0 / (dt + tau) ** 2)
        out[:, 5, col["dt"]] = np.where(spec, phi0 / dt ** 2, phi0 / (dt + tau) ** 2)
        return out
    k, d, mu, fe0, vn0 = problem.k, problem.d, problem.mu, problem.fe0, problem.vn0
    phi0 = -fe0 / k
    fe_pos, damp, n0 = _hc_previous_impulse(problem)
    # fe0 = −k φ0
    dfe = np.zeros((nk, len(PHYSICAL)))
    dfe[:, col["k"]] = -phi0
    dfe[:, col["phi0"]] = -k
    dn0 = np.zeros((nk, len(PHYSICAL)))
    dn0[:, col["dt"]] = fe_pos * damp
    dn0 += (dt * (fe0 > 0) * damp)[:, None] * dfe
    dn0[:, col["d"]] += -dt * fe_pos * vn0 * (1.0 - d * vn0 > 0)
    dn0[:, col["vn0"]] += -dt * fe_pos * d * (1.0 - d * vn0 > 0)
    out[:, 0, col["mu"]] = 1.0
    out[:, 1, col["dt"]] = 1.0
    out[:, 2, col["k"]] = 1.0
    out[:, 3, col["d"]] = 1.0
    out[:, 4, :] = dfe
    out[:, 5, :] = dn0
    friction_active = mu * sigma * w * n0 > problem.v_s
    deps = np.zeros((nk, len(PHYSICAL)))
    deps[:, col["mu"]] = sigma * w * n0
    deps[:, col["sigma"]] = mu * w * n0
    deps += (mu * sigma * w)[:, None] * dn0
    out[:, 6, :] = np.where(friction_active[:, None], deps, 0.0)
    return out


def delassus_partials(problem: ContactProblem, w: np.ndarray) -> np.ndarray:
    """∂p/∂w per contact, shape (nk, 8): the kernel parameters' dependence on the Delassus estimate w [1/kg]
    (which moves with A, e.g. with a link's mass or a joint's damping).

    "sap": ∂Rt/∂w = σ; ∂Rn/∂w = β²/(4π²) on the near-rigid branch (Rn = max(β²w/(4π²), 1/(dt k (dt+τd))),
    the compliant branch at a tie, as :func:`kernel_parameter_partials`), 0 otherwise; v̂ does not read w.
    Hunt–Crossley: ∂εs/∂w = μ σ n0 where εs = max(v_s, μ σ w n0) is not v_s, 0 otherwise.
    Constraints with w = 0 (a zero Jacobian, w replaced by 1) get 0.
    """
    out = np.zeros((problem.nk, 8))
    live = w > 0.0
    if problem.model == "sap":
        r_near = problem.beta ** 2 / (4.0 * math.pi ** 2) * w
        r_comp = 1.0 / (problem.dt * problem.k * (problem.dt + problem.tau_d))
        out[:, 1] = np.where(live, problem.sigma, 0.0)
        out[:, 2] = np.where(live & ~(r_comp > r_near), problem.beta ** 2 / (4.0 * math.pi ** 2), 0.0)
        return out
    n0 = _hc_previous_impulse(problem)[2]
    active = problem.mu * problem.sigma * w * n0 > problem.v_s
    out[:, 6] = np.where(live & active, problem.mu * problem.sigma * n0, 0.0)
    return out


# --------------------------------------------------------------------------------------------------
# one step
# --------------------------------------------------------------------------------------------------
@dataclass
class StepSensitivity:
    """The linearization of one solved SAP problem (see module docstring).

    Attributes:
        problem: the ContactProblem; result: its SapResult (v, γ at the optimum).
        dgamma_dvc: ∂γ_i/∂vc_i, shape (nk, 3, 3) (= −G_i).
        dgamma_dtheta: ∂γ_i/∂θ_i at fixed vc for θ in :data:`PHYSICAL`, shape (nk, 3, len(PHYSICAL)).
        J: dense contact Jacobian, shape (nk, 3, nv). A: dense A, shape (nv, nv).
    """

    problem: ContactProblem
    result: SapResult
    dgamma_dvc: np.ndarray
    dgamma_dtheta: np.ndarray
    J: np.ndarray
    A: np.ndarray
    _hessian: SparseHessian
    _factor: object

    def solve(self, rhs) -> np.ndarray:
        """H⁻¹ rhs for rhs of shape (nv,) or (nv, m) (one triangular solve pair per column)."""
        return np.asarray(self._hessian.module.solve(self._hessian.sym, self._factor, rhs), dtype=float)

    def hessian(self) -> np.ndarray:
        """Dense H = A + Jᵀ G J at the solution (for tests)."""
        return self._hessian.dense()

    def contact_columns(self, name: str) -> np.ndarray:
        """Jᵀ_i ∂γ_i/∂θ_i for θ = ``name`` of each contact separately, shape (nv, nk)."""
        j = PHYSICAL.index(name)
        return np.einsum("irn,ir->ni", self.J, self.dgamma_dtheta[:, :, j])

    def dv_dvstar(self) -> np.ndarray:
        """dv/dv* = H⁻¹ A, shape (nv, nv)."""
        return self.solve(self.A)

    def dv_dparameter(self, name: str, per_contact: bool = False) -> np.ndarray:
        """dv/dθ for θ = ``name`` in :data:`PHYSICAL` at fixed v*: shape (nv,) for a parameter shared by
        all contacts, or (nv, nk) with ``per_contact`` (column i: θ of contact i alone).

        For dt, also d v*/d dt matters; :meth:`dv_ddt` adds it given the free-motion acceleration.
        """
        cols = self.contact_columns(name)
        return self.solve(cols if per_contact else cols.sum(axis=1))

    def dv_dapplied(self, mass=None) -> np.ndarray:
        """dv/du for an applied generalized impulse rate u [N, N·m] (per dof, the B·u term) entering the free
        motion as v* = v0 + dt M⁻¹(f + u): H dv/du = A ∂v*/∂u = dt A M⁻¹, shape (nv, nv).

        ``mass`` is M (nv, nv); by default M = A (rigid bodies: A is the mass matrix), so dv/du = dt H⁻¹.
        """
        dt = self.problem.dt
        if mass is None:
            return dt * self.solve(np.eye(self.A.shape[0]))
        return dt * self.solve(self.A @ np.linalg.inv(np.asarray(mass, float)))

    def dv_ddt(self, dvstar_ddt) -> np.ndarray:
        """dv/d dt with v* changing as ``dvstar_ddt`` (= (v* − v0)/dt for v* = v0 + dt·a)."""
        return self.solve(self.A @ np.asarray(dvstar_ddt, float) + self.contact_columns("dt").sum(axis=1))


def step_sensitivity(problem: ContactProblem, result: SapResult | None = None, *,
                     params: SapParameters = GRADIENT_PARAMETERS) -> StepSensitivity:
    """Solve ``problem`` (unless ``result`` is given) and linearize it at the optimum.

    Raises:
        ValueError: the problem has no constraints (then dv/dv* = I and nothing else moves v), or H is
            not SPD.
    """
    if problem.nk == 0:
        raise ValueError("the problem has no contact constraints: v = v*, nothing to differentiate")
    if result is None:
        result = solve(problem, params=params)
    w = delassus_diagonal(problem)
    kind, cpar, _, _ = constraint_kernel_data(problem, w)
    nk, nv = problem.nk, problem.nv
    vc = problem.constraint_velocities(result.v)
    dgdvc = np.empty((nk, 3, 3))
    dgdp = np.empty((nk, 3, 8))
    for i in range(nk):
        _, dgdvc[i], dgdp[i] = impulse_partials(int(kind[i]), cpar[i], vc[i])
    dgdtheta = np.einsum("irp,ipt->irt", dgdp, kernel_parameter_partials(problem, w))
    G = np.ascontiguousarray(-dgdvc)
    G = 0.5 * (G + np.swapaxes(G, 1, 2))  # symmetric by theory; remove round-off
    hess = SparseHessian(problem)
    hess.assemble(G)
    try:
        fac = hess.module.factor(hess.sym, hess.diag_values, hess.edge_values)
    except np.linalg.LinAlgError as exc:
        raise ValueError(f"the Newton matrix at the solution is not SPD: {exc}") from None
    J = problem.J_dense().reshape(nk, 3, nv)
    return StepSensitivity(problem, result, dgdvc, dgdtheta, J, problem.A_dense(), hess, fac)


def check_kernel_consistency(problem: ContactProblem, v) -> float:
    """max |γ(this module) − γ(solver kernels)| at v [N·s]: the partials describe the solver's γ."""
    w = delassus_diagonal(problem)
    kind, cpar, _, _ = constraint_kernel_data(problem, w)
    vc = problem.constraint_velocities(v)
    g_ref = np.empty((problem.nk, 3))
    eval_constraints(kind, np.ascontiguousarray(cpar), vc, g_ref, np.empty((problem.nk, 3, 3)), False, 0.0)
    ours = np.array([impulse_partials(int(kind[i]), cpar[i], vc[i])[0] for i in range(problem.nk)])
    return float(np.max(np.abs(ours - g_ref))) if problem.nk else 0.0


__all__ = [
    "BOUNDARY_TOL",
    "GRADIENT_PARAMETERS",
    "PHYSICAL",
    "StepSensitivity",
    "check_kernel_consistency",
    "delassus_partials",
    "hc_impulse_partials",
    "impulse_partials",
    "kernel_parameter_partials",
    "sap_impulse_partials",
    "step_sensitivity",
]
