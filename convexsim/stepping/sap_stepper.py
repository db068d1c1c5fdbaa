"""One SAP step: ``sap_step(model, state, ctx) -> (state, info)``.

1. contacts = collide(model, q0, margin) — speculative contacts (φ up to the margin > 0) are
   included so that a fast body is caught one step before it penetrates; they only act if the
   step would close the gap (docs/sap.md).
2. A = M(q0), v* = v0 + dt·M⁻¹(τ_gyro, m·g)                      (convexsim.dynamics.free_motion)
3. J blocks in the contact frames, per-contact combined material parameters (stepping.contacts).
4. v = argmin ½‖v − v*‖²_A + Σ_i ℓ_i(J_i v), warm started at v0      (convexsim.sap)
5. q ← q0 + dt·N(q0)·v (symplectic Euler, quaternions renormalized)

The impulses γ [N·s] are in the contact frames; ``StepInfo.force_world`` is γ/dt rotated to W,
the average force on body B over the step (A receives the opposite).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from convexsim import dynamics, sap
from convexsim.model import ContactModel, Model, State
from convexsim.stepping.contacts import (ContactKinematics, check_finite_state, contact_kinematics,
                                         contact_velocities)
from convexsim.stepping.packing import sap_parameters
from convexsim.stepping.types import ConvergenceWarning, SimulationError, StepInfo

if TYPE_CHECKING:   # imported by sap_step: the compiled path reads sap_parameters without the LCP workspace
    from convexsim.stepping.context import StepContext


def sap_step(model: Model, state: State, ctx: StepContext | None = None, *,
             strict: bool = False) -> tuple[State, StepInfo]:
    """Advance one SAP step (contact model from ``model.contact_model``).

    Args:
        ctx: the run's StepContext (buffers and the cached symbolic analysis); None uses a fresh one.
        strict: raise SimulationError when the solver does not converge (default: warn and use the
            last iterate, a ConvergenceWarning). A non-finite result always raises.
    """
    from convexsim.stepping.context import StepContext

    ctx = StepContext() if ctx is None else ctx
    if model.has_trees:
        raise ValueError("sap_step is the free-body reference step; a model with kinematic trees steps by "
                         "stepping.step (its reference: articulated.articulated_sap_step)")
    check_finite_state(model, state)
    kin = contact_kinematics(model, state, workspace=ctx.collision)
    A_blocks, v_star = dynamics.free_motion(model, state, ctx.body_wrench(model))
    bodies = dynamics.moving_bodies(model)
    v0 = state.v[bodies].reshape(-1)
    if kin.contacts.count == 0:
        return dynamics.integrate(model, state, v_star), StepInfo(contacts=kin.contacts)

    problem = build_sap_problem(model, state, kin, A_blocks, v_star, v0)
    result = sap.solve(problem, v_guess=v0, params=sap_parameters(model), symbolic_cache=ctx.symbolic)
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
    check_finite_state(model, new_state)
    return new_state, info


def _relative_residual(result) -> float:
    """r/s at the solver's last iteration (r itself when s = 0)."""
    r = np.atleast_1d(result.momentum_residual)
    s = np.atleast_1d(result.momentum_scale)
    if r.size == 0:
        return 0.0
    s_last = float(s[-1]) if s.size else 0.0
    return float(r[-1]) / s_last if s_last > 0 else float(r[-1])


def build_sap_problem(model: Model, state: State, kin: ContactKinematics, A_blocks: np.ndarray,
                      v_star: np.ndarray, v0: np.ndarray) -> sap.ContactProblem:
    """The SAP ContactProblem for this step (one 6-dof clique per moving body).

    A contact against a fixed body touches one clique; its Jacobian is that body's block.
    """
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


__all__ = ["sap_step", "build_sap_problem"]
