"""Time stepping: ``step(model, state) -> (state, info)`` for the SAP and LCP solvers.

One SAP step (sap-math.md §1.2, DESIGN.md "data path"):

1. contacts = collide(model, q0, margin) — speculative contacts (phi up to ``margin`` > 0) are
   included so that a fast body is caught one step before it penetrates; they only act if the
   step would close the gap.
2. A = M(q0), v* = v0 + dt·M⁻¹(τ_gyro, m·g)                      (convexsim.dynamics.free_motion)
3. J blocks in the contact frames, per-contact combined material parameters.
4. v = argmin ½‖v − v*‖²_A + Σ ℓ_i(J_i v), warm started at v0      (convexsim.sap)
5. q ← q0 + dt·N(q0)·v (symplectic Euler, quaternions renormalized)

Both solvers return impulses γ [N·s] in the contact frame; ``StepInfo.force_world`` is γ/dt rotated to W,
the average force on body B over the step (A receives the opposite).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from convexsim import dynamics
from convexsim.model import Contacts, ContactModel, Model, State


class SimulationError(RuntimeError):
    """A step failed (NaN state, solver failure in strict mode, LCP ray). Carries where and when."""

    def __init__(self, message: str, *, step: int, time: float, contacts: list[int] | None = None):
        super().__init__(f"step {step} (t = {time:.6g} s): {message}")
        self.step = step
        self.time = time
        self.contacts = contacts or []


class ConvergenceWarning(RuntimeWarning):
    """The solver did not reach its tolerance in a step; the step's result was used anyway."""


@dataclass
class StepInfo:
    """What one step did.

    Attributes:
        contacts: the contacts used in the step (detected at the start of the step).
        gamma: impulses in the contact frames [N·s], shape (nc, 3), normal last.
        force_world: average contact force on body B in W (γ/dt rotated) [N], shape (nc, 3).
        iterations: Newton iterations (SAP) or Lemke pivots (LCP).
        converged: whether the solve succeeded.
        status: solver status name.
        momentum_residual: SAP relative momentum residual r/s at exit (0 for LCP).
        line_search_evaluations: SAP line-search evaluations (0 for LCP).
    """

    contacts: Contacts = field(default_factory=Contacts)
    gamma: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    force_world: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    iterations: int = 0
    converged: bool = True
    status: str = "converged"
    momentum_residual: float = 0.0
    line_search_evaluations: int = 0


MARGIN_FLOOR = 1e-3
"""Smallest speculative margin of a pair [m] (added once per pair, half to each body's share)."""


def contact_margin(model: Model, state: State) -> np.ndarray:
    """Per-body speculative-margin shares m_b [m], shape (nbody,); a pair's margin is m_A + m_B.

    m_b = dt·(|v_b| + |ω_b|·r_b) + ½·floor for a moving body (r_b: bounding radius of its geometries
    about the body origin): no point of b moves further than dt·(|v_b| + |ω_b|·r_b) in the step.
    A fixed body has m_b = dt²·|g| + ½·floor: gravity moves every free body by at most dt²·|g| in a
    step relative to the fixed world but not relative to another free body. So every pair that could
    come into contact during the step (at the start-of-step velocities) is reported, while a resting
    pile keeps about its touching set; the constraints act only on contacts the step closes (docs/sap.md).
    """
    dt = model.time_step
    share = np.full(model.nbody, 0.5 * MARGIN_FLOOR)
    share[np.asarray(model.body_fixed, dtype=bool)] += dt * dt * float(np.linalg.norm(model.gravity))
    bodies = dynamics.moving_bodies(model)
    if bodies.size == 0:
        return share
    rb = np.zeros(model.nbody)
    finite = np.isfinite(model.geom_rbound)
    np.maximum.at(rb, model.geom_body[finite],
                  model.geom_rbound[finite] + np.linalg.norm(model.geom_pos[finite], axis=1))
    speed = (np.linalg.norm(state.v[bodies, 3:], axis=1)
             + np.linalg.norm(state.v[bodies, :3], axis=1) * rb[bodies])
    share[bodies] += dt * speed
    return share


@dataclass(frozen=True)
class ContactParameters:
    """Combined material parameters per contact (DESIGN.md combination rules), shapes (nc,)."""

    mu: np.ndarray
    stiffness: np.ndarray
    dissipation_time: np.ndarray
    hc_dissipation: np.ndarray


def combined_parameters(model: Model, contacts: Contacts) -> ContactParameters:
    """k = kA·kB/(kA+kB), τ_d = τA+τB, d = (kB·dA + kA·dB)/(kA+kB), μ = 2μAμB/(μA+μB) per contact."""
    ma = model.geom_material[contacts.geom_a]
    mb = model.geom_material[contacts.geom_b]
    ka, kb = model.material_stiffness[ma], model.material_stiffness[mb]
    mua, mub = model.material_friction[ma], model.material_friction[mb]
    da, db = model.material_hc_dissipation[ma], model.material_hc_dissipation[mb]
    ksum = ka + kb
    musum = mua + mub
    with np.errstate(invalid="ignore", divide="ignore"):
        k = np.where(ksum > 0, ka * kb / np.where(ksum > 0, ksum, 1.0), 0.0)
        d = np.where(ksum > 0, (kb * da + ka * db) / np.where(ksum > 0, ksum, 1.0), 0.0)
        mu = np.where(musum > 0, 2 * mua * mub / np.where(musum > 0, musum, 1.0), 0.0)
    tau = model.material_dissipation_time[ma] + model.material_dissipation_time[mb]
    return ContactParameters(mu=mu, stiffness=k, dissipation_time=tau, hc_dissipation=d)


@dataclass(frozen=True)
class ContactKinematics:
    """Per-step contact kinematics shared by the SAP and LCP steppers."""

    contacts: Contacts
    R_WC: np.ndarray          # (nc, 3, 3)
    clique_a: np.ndarray      # (nc,) clique index of A or -1 (fixed body)
    clique_b: np.ndarray      # (nc,) clique index of B or -1
    J_a: np.ndarray           # (nc, 3, 6)
    J_b: np.ndarray           # (nc, 3, 6)
    params: ContactParameters


def contact_kinematics(model: Model, state: State, *,
                       margin: float | np.ndarray | None = None) -> ContactKinematics:
    """Collide at q0 and build frames, clique indices, Jacobian blocks and combined parameters.

    ``margin``: as in ``geometry.collide`` (default: the per-body shares of :func:`contact_margin`).
    """
    from convexsim.geometry import collide

    if margin is None:
        margin = contact_margin(model, state)
    contacts = collide(model, state.q, margin=margin)
    R_WC = dynamics.contact_frames(contacts.normal)
    J_a, J_b = dynamics.contact_jacobian_blocks(model, state.q, contacts, R_WC)
    clique_of_body = np.where(model.body_dof >= 0, model.body_dof // 6, -1)
    return ContactKinematics(
        contacts=contacts, R_WC=R_WC,
        clique_a=clique_of_body[contacts.body_a], clique_b=clique_of_body[contacts.body_b],
        J_a=J_a, J_b=J_b, params=combined_parameters(model, contacts))


def contact_velocities(kin: ContactKinematics, v_packed: np.ndarray) -> np.ndarray:
    """vc = J_a v_a + J_b v_b for every contact [m/s], shape (nc, 3); v_packed is (6·nmov,)."""
    V = v_packed.reshape(-1, 6)
    vc = np.zeros((kin.contacts.count, 3))
    for J, c in ((kin.J_a, kin.clique_a), (kin.J_b, kin.clique_b)):
        ok = c >= 0
        vc[ok] += np.einsum("nij,nj->ni", J[ok], V[c[ok]])
    return vc


def _check_finite(model: Model, state: State) -> None:
    bad = ~np.isfinite(state.q).all(axis=1) | ~np.isfinite(state.v).all(axis=1)
    if bad.any():
        names = ", ".join(model.body_names[i] for i in np.flatnonzero(bad)[:5])
        raise SimulationError(f"non-finite state of bodies {names}", step=state.step, time=state.t)


def sap_step(model: Model, state: State, *, strict: bool = False) -> tuple[State, StepInfo]:
    """Advance one SAP step (contact model from ``model.contact_model``)."""
    from convexsim import sap

    _check_finite(model, state)
    kin = contact_kinematics(model, state)
    A_blocks, v_star = dynamics.free_motion(model, state)
    bodies = dynamics.moving_bodies(model)
    v0 = state.v[bodies].reshape(-1)
    nc = kin.contacts.count
    if nc == 0:
        return dynamics.integrate(model, state, v_star), StepInfo(contacts=kin.contacts)

    problem = build_sap_problem(model, state, kin, A_blocks, v_star, v0)
    s = model.solver
    params = sap.SapParameters(rel_tolerance=s.rel_tolerance, abs_tolerance=s.abs_tolerance,
                               max_iterations=s.max_iterations, line_search=s.line_search)
    result = sap.solve(problem, v_guess=v0, params=params)
    info = StepInfo(contacts=kin.contacts, gamma=np.asarray(result.gamma),
                    iterations=int(result.iterations), converged=bool(result.converged),
                    status=str(getattr(result.status, "name", result.status)).lower(),
                    momentum_residual=_relative_residual(result),
                    line_search_evaluations=int(result.line_search_evaluations))
    info.force_world = np.einsum("nij,nj->ni", kin.R_WC, info.gamma) / model.time_step
    v_next = np.asarray(result.v)
    if not info.converged:
        msg = f"SAP did not converge ({info.status}) after {info.iterations} iterations"
        if strict or not np.all(np.isfinite(v_next)):
            raise SimulationError(msg, step=state.step, time=state.t)
        warnings.warn(f"step {state.step} (t = {state.t:.6g} s): {msg}", ConvergenceWarning, stacklevel=2)
    new_state = dynamics.integrate(model, state, v_next)
    _check_finite(model, new_state)
    return new_state, info


def _relative_residual(result) -> float:
    r = getattr(result, "momentum_residual", None)
    s = getattr(result, "momentum_scale", None)
    if r is None or len(np.atleast_1d(r)) == 0:
        return 0.0
    r_last = float(np.atleast_1d(r)[-1])
    s_last = float(np.atleast_1d(s)[-1]) if s is not None and len(np.atleast_1d(s)) else 0.0
    return r_last / s_last if s_last > 0 else r_last


def build_sap_problem(model: Model, state: State, kin: ContactKinematics, A_blocks: np.ndarray,
                      v_star: np.ndarray, v0: np.ndarray):
    """The SAP ContactProblem for this step (one 6-dof clique per moving body).

    A contact against a fixed body touches one clique; its Jacobian is that body's block.
    """
    from convexsim import sap

    p = kin.params
    phi0 = kin.contacts.phi
    a_moves = kin.clique_a >= 0
    cliques = np.stack([np.where(a_moves, kin.clique_a, kin.clique_b),
                        np.where(a_moves, kin.clique_b, -1)], axis=1)
    J = np.stack([np.where(a_moves[:, None, None], kin.J_a, kin.J_b), kin.J_b], axis=1)
    common = dict(mu=p.mu, k=p.stiffness, sigma=model.solver.sigma)
    cm = ContactModel(model.contact_model)
    if cm == ContactModel.SAP:
        params = dict(model="sap", tau_d=p.dissipation_time, phi0=phi0, beta=model.solver.beta)
    else:
        vn0 = contact_velocities(kin, v0)[:, 2]
        # Elastic force at the start of the step, fe0 = −k·φ0; negative for a speculative contact
        # (φ0 > 0), so the Hunt–Crossley impulse only appears if the step closes the gap (vn < −φ0/dt).
        params = dict(model=cm.name.lower(), d=p.hc_dissipation, fe0=-p.stiffness * phi0, vn0=vn0,
                      v_s=model.solver.stiction_tolerance)
    return sap.ContactProblem.from_blocks(model.time_step, A_blocks, v_star, cliques, J, **common, **params)


def lcp_step(model: Model, state: State, *, strict: bool = True) -> tuple[State, StepInfo]:
    """Advance one step of the rigid LCP reference stepper (convexsim.lcp.stepper)."""
    from convexsim.lcp import stepper as lcp_stepper

    _check_finite(model, state)
    return lcp_stepper.lcp_step(model, state)


def step(model: Model, state: State, *, strict: bool = False) -> tuple[State, StepInfo]:
    """Advance one step with the solver of ``model.solver.kind`` ("sap" or "lcp")."""
    if model.solver.kind == "lcp":
        return lcp_step(model, state, strict=strict)
    return sap_step(model, state, strict=strict)


__all__ = ["step", "sap_step", "lcp_step", "StepInfo", "SimulationError", "ConvergenceWarning",
           "contact_kinematics", "ContactKinematics", "combined_parameters", "contact_margin",
           "contact_velocities", "build_sap_problem"]
