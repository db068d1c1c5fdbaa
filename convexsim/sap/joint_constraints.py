"""SAP constraints of articulated systems: joint limits, implicit PD actuators, couplers, and the
generic box-bounded holonomic row they all reduce to.

Every constraint here is a set of independent scalar *rows*; row r has the kernel parameters
``par[r] = (R, v̂, γ_lo, γ_hi)`` (computed once per step) and the constraint velocity vc = J_r v:

    y = (v̂ − vc) / R,        γ = clamp(y, γ_lo, γ_hi)                                     [N·s]
    ℓ = ½ R y²                             if γ_lo <= y <= γ_hi
        −γ_b (vc − v̂) − ½ R γ_b²          otherwise, γ_b the bound that is active       [J]
    G = −∂γ/∂vc = 1/R  if γ_lo < y < γ_hi,  else 0

(the projection of y onto the box in the R-norm, SAP paper §V; the cost outside the box is the
continuous antiderivative, so ℓ is C¹ and convex). What distinguishes the kinds is only how (R, v̂, box)
are made from the physical parameters (SAP paper; Drake's SapHolonomicConstraint, SapLimitConstraint,
SapCouplerConstraint, SapPdControllerConstraint), with w the Delassus estimate of the row
(w = Σ_k J_rk² / A_kk, the diagonal of A inverted) and the near-rigid factor β = 0.1:

* holonomic row with constraint value g, stiffness k, relaxation time τ:
  R = max(1/(dt (dt + τ) k), β² w / (4π²)); if the second term wins τ := dt (critically damped);
  v̂ = −g / (dt + τ).
* joint limit ql <= q <= qu (one row per finite side): lower g = q0 − ql, J = +e_i; upper g = qu − q0,
  J = −e_i; box [0, ∞); defaults k = 1e12 N/m, τ = dt (so always near-rigid: R = w/(400π²),
  v̂ = −g/(2 dt)).
* coupler q_i = ρ q_j + Δ: g = q_i − ρ q_j − Δ, J = e_i − ρ e_j, k = ∞, box (−∞, ∞).
* joint dry friction on dof i with bound f [N·m or N] (MJCF ``frictionloss``, URDF ``<dynamics friction>``):
  the 1-D friction "cone" of the contact model with the bound μ·γ_n replaced by dt·f: J = e_i, v̂ = 0,
  box [−dt f, dt f], R = β² w/(4π²) (:func:`joint_friction_row`). The impulse opposes the joint velocity
  and is bounded by the friction impulse: γ = clamp(−vc/R, −dt f, dt f), i.e. the joint sticks
  (vc = −R γ ≈ 0) while the other forces on it stay within ±f and slides with the constant force ∓f
  otherwise. It is the PD row below with Kp = 0, v_d = u_ff = 0, effort f and a damping Kd at or above
  the near-rigid bound, so the steppers carry it as such an actuator (:data:`FRICTION_KD`).
* PD actuator on dof i with q = q0 + dt v: ũ = −Kp (q − q_d) − Kd (v − v_d) + u_ff, u = clamp(ũ, −e, e),
  γ = dt u. With R = 1/(dt (dt Kp + Kd)) and v̂ = (−Kp (q0 − q_d) + Kd v_d + u_ff)/(dt Kp + Kd) this is
  exactly the row above with the box [−dt e, dt e] (y = dt ũ). Gains are limited so that R >= β² w/(4π²),
  keeping Kd/Kp (:func:`pd_effective_gains`).
"""

from __future__ import annotations

import math

import numpy as np

from convexsim._jit import jit

KIND_LIMIT = 10
KIND_COUPLER = 11
KIND_PD = 12
KIND_HOLONOMIC = 13
JOINT_KINDS = (KIND_LIMIT, KIND_COUPLER, KIND_PD, KIND_HOLONOMIC)
"""Row kind codes; disjoint from the contact kinds of convexsim.sap.constraints (0, 1, 2) so that one
problem can carry both. They share the row kernel; the code says how (R, v̂, box) were made."""
NPAR_ROW = 4
"""Kernel parameters per row: (R, v̂, γ_lo, γ_hi)."""

BETA_JOINT = 0.1
"""Near-rigid factor of joint constraints (Drake hard-codes 0.1 for all but contact)."""
LIMIT_STIFFNESS = 1e12
"""Default joint-limit stiffness [N/m or N·m/rad] (Drake's MultibodyPlant value)."""
FRICTION_KD = 1e10
"""Damping [N·m·s/rad or N·s/m] of the PD row that carries a joint's dry friction: at or above the near-rigid
bound 1/(dt R_nr) whenever w >= 4π²/(β² dt Kd), i.e. for joint inertias 1/w up to ≈ 2.5e3 kg·m² at dt = 1 ms,
so SAP's gain limit makes the row exactly :func:`joint_friction_row`; the LCP stepper folds it as a damper
that stops the joint unless the force needed exceeds the friction, then applies ∓f (a stiff, finite
value keeps its dense solve well conditioned)."""
LIMIT_WINDOW_FACTOR = 2.0
"""A limit side enters a step only if q0 is within 2·dt·max(|v0|, |v*|) of it (or beyond it)."""


# ---------------------------------------------------------------------------------------------- kernels

@jit
def row_impulse_cost(R, v_hat, lo, hi, vc):
    """(γ, ℓ, G) of one row at constraint velocity vc [m/s or rad/s]."""
    y = (v_hat - vc) / R
    if y < lo:
        return lo, -lo * (vc - v_hat) - 0.5 * R * lo * lo, 0.0
    if y > hi:
        return hi, -hi * (vc - v_hat) - 0.5 * R * hi * hi, 0.0
    G = 1.0 / R if (lo < y < hi) else 0.0
    return y, 0.5 * R * y * y, G


@jit
def eval_rows(par, vc, gamma_out, G_out):
    """γ and G of every row (written); returns Σ ℓ_r. par (nr, 4), vc (nr,)."""
    total = 0.0
    for r in range(par.shape[0]):
        g, ell, G = row_impulse_cost(par[r, 0], par[r, 1], par[r, 2], par[r, 3], vc[r])
        gamma_out[r] = g
        G_out[r] = G
        total += ell
    return total


@jit
def rows_along_ray(par, vc, dvc, alpha):
    """Row part of the cost along v + α dv: (ℓ(α), dℓ/dα = −Σ dvc γ, d²ℓ/dα² = Σ dvc² G)."""
    ell = 0.0
    d1 = 0.0
    d2 = 0.0
    for r in range(par.shape[0]):
        g, e, G = row_impulse_cost(par[r, 0], par[r, 1], par[r, 2], par[r, 3], vc[r] + alpha * dvc[r])
        ell += e
        d1 -= dvc[r] * g
        d2 += dvc[r] * dvc[r] * G
    return ell, d1, d2


def row_impulse(par, vc) -> tuple[float, float, float]:
    """Python convenience for tests: (ℓ, γ, G) of one row with parameters ``par`` (4,)."""
    g, ell, G = row_impulse_cost(float(par[0]), float(par[1]), float(par[2]), float(par[3]), float(vc))
    return ell, g, G


# --------------------------------------------------------------------------- regularization and bias

@jit
def near_rigid_regularization(w, beta=BETA_JOINT):
    """R_nr = β² w / (4π²): the stiffest regularization whose natural period is β·dt."""
    return beta * beta * w / (4.0 * math.pi ** 2)


def delassus_row(J_row, A_diag) -> float:
    """w = Σ_k J_k² / A_kk [1/kg or 1/(kg·m²)] for one row (Drake's diagonal estimate)."""
    J_row = np.asarray(J_row, dtype=float)
    return float(np.sum(J_row * J_row / np.asarray(A_diag, dtype=float)))


@jit
def holonomic_row_kernel(dt, g, w, k, tau, beta):
    """(R, v̂) of one holonomic row (numba; :func:`holonomic_row` validates and calls it):
    R = max(1/(dt (dt + τ) k), β² w/(4π²)) [s/kg or s/(kg·m²)], τ := dt when near-rigid, v̂ = −g/(dt + τ)."""
    R_compliant = 0.0 if math.isinf(k) else 1.0 / (dt * (dt + tau) * k)
    R_nr = near_rigid_regularization(w, beta)
    if R_compliant < R_nr:
        return R_nr, -g / (dt + dt)
    return R_compliant, -g / (dt + tau)


def holonomic_row(dt: float, g: float, w: float, k: float = math.inf, tau: float = 0.0,
                  lo: float = -math.inf, hi: float = math.inf, beta: float = BETA_JOINT) -> np.ndarray:
    """(R, v̂, γ_lo, γ_hi) of one holonomic equation g(q) = 0 with stiffness k and relaxation time τ.

    R = max(1/(dt (dt + τ) k), β² w/(4π²)), τ := dt when near-rigid, v̂ = −g/(dt + τ)
    (:func:`holonomic_row_kernel`).
    """
    if not (dt > 0 and w > 0 and k > 0 and tau >= 0 and lo <= hi):
        raise ValueError(f"holonomic row: need dt > 0, w > 0, k > 0, tau >= 0, lo <= hi "
                         f"(dt={dt}, w={w}, k={k}, tau={tau}, lo={lo}, hi={hi})")
    R, v_hat = holonomic_row_kernel(float(dt), float(g), float(w), float(k), float(tau), float(beta))
    return np.array([R, v_hat, lo, hi])


def limit_rows(dt: float, q0: float, lower: float, upper: float, w: float, k: float = LIMIT_STIFFNESS,
               tau: float | None = None, beta: float = BETA_JOINT) -> list[tuple[float, np.ndarray]]:
    """Rows of a joint limit lower <= q <= upper on one 1-dof joint: [(J sign, par), ...].

    Lower side: g = q0 − lower, J = +1; upper side: g = upper − q0, J = −1; box [0, ∞) (the limit pushes
    only). Infinite sides give no row. ``tau`` defaults to dt (Drake's choice).
    """
    if not lower <= upper:
        raise ValueError(f"joint limit: lower {lower} > upper {upper}")
    tau = dt if tau is None else tau
    rows = []
    if math.isfinite(lower):
        rows.append((1.0, holonomic_row(dt, q0 - lower, w, k, tau, 0.0, math.inf, beta)))
    if math.isfinite(upper):
        rows.append((-1.0, holonomic_row(dt, upper - q0, w, k, tau, 0.0, math.inf, beta)))
    return rows


@jit
def limit_in_window(dt, q0, bound, side, v0, v_star):
    """Whether a limit side enters this step: q0 is beyond it or within 2·dt·max(|v0|, |v*|) of it.

    side = +1 for a lower limit, −1 for an upper one (numba; also called from Python).
    """
    if not math.isfinite(bound):
        return False
    gap = side * (q0 - bound)
    return gap <= LIMIT_WINDOW_FACTOR * dt * max(abs(v0), abs(v_star))


def coupler_row(dt: float, q_i: float, q_j: float, rho: float, offset: float, w: float,
                beta: float = BETA_JOINT) -> np.ndarray:
    """Row of q_i = ρ q_j + Δ: g = q_i − ρ q_j − Δ, J = e_i − ρ e_j; rigid: R = β² w/(4π²), v̂ = −g/(2 dt)."""
    return holonomic_row(dt, q_i - rho * q_j - offset, w, math.inf, 0.0, beta=beta)


@jit
def pd_gains_kernel(dt, kp, kd, w, beta):
    """(Kp', Kd') of :func:`pd_effective_gains` (numba, no validation)."""
    R_nr = near_rigid_regularization(w, beta)
    R = 1.0 / (dt * (dt * kp + kd))
    if R >= R_nr:
        return kp, kd
    if dt * kp > kd:
        kp_eff = 1.0 / (dt * (dt + kd / kp) * R_nr)
        return kp_eff, (kd / kp) * kp_eff
    kd_eff = 1.0 / (dt * (1.0 + dt * kp / kd) * R_nr)
    return (kp / kd) * kd_eff, kd_eff


def pd_effective_gains(dt: float, kp: float, kd: float, w: float,
                       beta: float = BETA_JOINT) -> tuple[float, float]:
    """(Kp', Kd') limited so that R = 1/(dt (dt Kp + Kd)) >= R_nr = β² w/(4π²), keeping Kd/Kp.

    If dt·Kp > Kd: Kp' = 1/(dt (dt + Kd/Kp) R_nr), Kd' = (Kd/Kp) Kp'; else Kd' = 1/(dt (1 + dt Kp/Kd) R_nr),
    Kp' = (Kp/Kd) Kd'. Unchanged when R >= R_nr (:func:`pd_gains_kernel`).
    """
    if not (kp >= 0 and kd >= 0 and kp + kd > 0 and math.isfinite(kp) and math.isfinite(kd)):
        raise ValueError(f"PD gains: need finite Kp, Kd >= 0, not both 0 (Kp={kp}, Kd={kd})")
    return pd_gains_kernel(float(dt), float(kp), float(kd), float(w), float(beta))


@jit
def pd_row_kernel(dt, q0, q_target, v_target, u_ff, kp, kd, w, beta):
    """(R, v̂) of an implicit PD actuator row (numba; :func:`pd_row` validates and adds the box):
    R = 1/(dt c), v̂ = (−Kp' (q0 − q_d) + Kd' v_d + u_ff)/c with c = dt Kp' + Kd' [N·m·s/rad or N·s/m]."""
    kp, kd = pd_gains_kernel(dt, kp, kd, w, beta)
    c = dt * kp + kd
    return 1.0 / (dt * c), (-kp * (q0 - q_target) + kd * v_target + u_ff) / c


@jit(inline="always")
def interp_scalar(t, times, values):
    """``np.interp(t, times, values)`` for a scalar t, without allocating (numba's np.interp builds arrays for a
    scalar): values[0] before times[0] (and for a single sample), values[-1] from times[-1] on, the sample itself at a
    sample time, else v_i + s (t − t_i) on the segment t_i < t < t_(i+1), s = (v_(i+1) − v_i)/(t_(i+1) − t_i);
    numpy's fallbacks where that is NaN (an infinite slope): v_(i+1) + s (t − t_(i+1)), then v_i if v_i = v_(i+1).
    NaN t gives NaN."""
    n = times.shape[0]
    if n == 1:
        return values[0]
    if math.isnan(t):
        return t
    if t < times[0]:
        return values[0]
    if t >= times[n - 1]:
        return values[n - 1]
    for i in range(n - 1):
        if times[i] <= t < times[i + 1]:
            if times[i] == t:
                return values[i]
            slope = (values[i + 1] - values[i]) / (times[i + 1] - times[i])
            q = slope * (t - times[i]) + values[i]
            if math.isnan(q):
                q = slope * (t - times[i + 1]) + values[i + 1]
                if math.isnan(q) and values[i] == values[i + 1]:
                    q = values[i]
            return q
    return values[n - 1]


@jit
def pd_target(t, times, values, velocity):
    """(q_d, v_d) of a piecewise-linear target through (times, values) at time t [s] (numba twin of
    ``multibody.forest.Actuator.target``): q_d by linear interpolation (:func:`interp_scalar`), held outside;
    v_d = ``velocity`` unless it is NaN, else the slope of the current segment (0 outside)."""
    q_d = interp_scalar(t, times, values)
    if not math.isnan(velocity):
        return q_d, velocity
    for i in range(times.shape[0] - 1):
        if times[i] <= t < times[i + 1]:
            return q_d, (values[i + 1] - values[i]) / (times[i + 1] - times[i])
    return q_d, 0.0


@jit
def joint_friction_kernel(dt, friction, w, beta):
    """(R, v̂, γ_lo, γ_hi) of a joint's dry friction (numba; :func:`joint_friction_row` validates):
    R = β² w/(4π²) [s/(kg·m²) or s/kg], v̂ = 0, box [−dt f, dt f] [N·m·s or N·s]."""
    return near_rigid_regularization(w, beta), 0.0, -dt * friction, dt * friction


def joint_friction_row(dt: float, friction: float, w: float, beta: float = BETA_JOINT) -> np.ndarray:
    """Row of the dry (Coulomb) friction of one 1-dof joint, bound ``friction`` f > 0 [N·m or N]: (R, v̂, −dt f, dt f).

    The generalized friction force over the step is u = γ/dt = clamp(−vc/(R dt), −f, f): stick while the
    other forces on the joint stay within ±f, slide against the motion with ∓f otherwise.
    """
    if not (dt > 0 and w > 0 and friction > 0 and math.isfinite(friction)):
        raise ValueError(f"joint friction: need dt > 0, w > 0 and a finite friction > 0 (dt={dt}, w={w}, "
                         f"friction={friction})")
    return np.array(joint_friction_kernel(float(dt), float(friction), float(w), float(beta)))


def pd_row(dt: float, q0: float, q_target: float, v_target: float, u_ff: float, kp: float, kd: float,
           effort: float, w: float, beta: float = BETA_JOINT) -> np.ndarray:
    """Row of an implicit PD actuator (effort limit e > 0, may be inf): (R, v̂, −dt e, dt e).

    The actuator's generalized force over the step is u = γ/dt = clamp(ũ, −e, e).
    """
    if not effort > 0:
        raise ValueError(f"PD actuator: effort limit must be > 0, got {effort}")
    pd_effective_gains(dt, kp, kd, w, beta)          # validates the gains
    R, v_hat = pd_row_kernel(float(dt), float(q0), float(q_target), float(v_target), float(u_ff), float(kp),
                             float(kd), float(w), float(beta))
    return np.array([R, v_hat, -dt * effort, dt * effort])


__all__ = [
    "BETA_JOINT",
    "JOINT_KINDS",
    "FRICTION_KD",
    "KIND_COUPLER",
    "KIND_HOLONOMIC",
    "KIND_LIMIT",
    "KIND_PD",
    "LIMIT_STIFFNESS",
    "LIMIT_WINDOW_FACTOR",
    "NPAR_ROW",
    "coupler_row",
    "delassus_row",
    "eval_rows",
    "holonomic_row",
    "joint_friction_kernel",
    "joint_friction_row",
    "holonomic_row_kernel",
    "limit_in_window",
    "limit_rows",
    "near_rigid_regularization",
    "pd_effective_gains",
    "pd_gains_kernel",
    "pd_row",
    "pd_row_kernel",
    "pd_target",
    "row_impulse",
    "row_impulse_cost",
    "rows_along_ray",
]
