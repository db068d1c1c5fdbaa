"""The numpy reference of the SAP step: ``sap_step(model, state, ctx) -> (state, info)``, one composition for
every model. Free bodies are a forest without joints: a model of free bodies only takes the same stages as
one with trees, with no tree and no row. Each stage's numpy form lives beside its kernels in the stage module
(the LCP reference reads the same ones):

1. start: the state is finite; A, v* and the rows of the step (``free_motion.assemble``: free bodies'
   v* = v0 + dt·M⁻¹(τ_gyro + τ_ext, m·g + f_ext), trees by CRBA/RNEA; joint rows; then the body-constraint
   rows, ``sap_rows.add_body_constraint_rows``);
2. contacts at q0 with speculative margins (φ up to the margin > 0: a fast body is caught one step before
   it penetrates; they only act if the step would close the gap, docs/sap.md), ``contacts.detect_contacts``;
3. the step's problem (:func:`step_problem`): contact frames, Jacobians (``jacobians.contact_jacobian``),
   combined materials, the contact law (:func:`contact_law`), in one of two layouts of the same problem:

   * block (a forest of free bodies only): one 6-dof clique per moving body, the contacts' 3 × 6 blocks
     (:func:`build_sap_problem`), solved with the supernodal factor and the run's symbolic cache: the
     compiled free-body step's layout, which it matches to round-off;
   * dense (trees or rows): one clique over the global v, contacts and rows (``sap.solver.solve_rows``),
     as the compiled tree step's islands;

4. v = argmin ½‖v − v*‖²_A + Σ_i ℓ_i(J_i v) by the SAP Newton loop (``convexsim.sap``), warm started at v0;
5. the end (:func:`finish`): impulses and forces into StepInfo (:func:`row_forces`), then
   q ← q0 + dt·N(q0)·v (symplectic Euler, quaternions renormalized; trees by ``integrate_q``, link rows by
   forward kinematics; ``integration.finish_step``), checked finite
   (a free-body step without contacts, v = v*, is checked at the start of the next step instead).

The impulses γ [N·s] are in the contact frames; ``StepInfo.force_world`` is γ/dt rotated to W, the average
force on body B over the step (A receives the opposite). The rollouts of ``convexsim.inverse`` step through
:func:`step_problem`, :func:`solve` and :func:`finish` too.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable

import numpy as np

from convexsim import dynamics, sap
from convexsim.model import ContactModel, Contacts, Model, State
from convexsim.sap.problem import constraint_kernel_data, delassus_diagonal
from convexsim.sap.solver import solve_rows
from convexsim.stepping import free_motion, integration, jacobians
from convexsim.stepping.contacts import (ContactKinematics, ContactParameters, check_finite_state,
                                         combined_parameters, contact_velocities, detect_contacts, kinematics_of,
                                         model_forest)
from convexsim.stepping.free_motion import ArticulatedSystem
from convexsim.stepping.jacobians import known_velocity
from convexsim.stepping.sap_rows import BodyConstraintError, add_body_constraint_rows, body_constraint_forces
from convexsim.stepping.packing import sap_parameters
from convexsim.stepping.types import ConvergenceWarning, SimulationError, StepInfo

if TYPE_CHECKING:
    from convexsim.stepping.context import StepContext


@dataclass
class StepProblem:
    """One step's SAP problem (module docstring, stage 3).

    Attributes:
        system: A, v*, v0 and the rows of the step (``free_motion.ArticulatedSystem``).
        contacts: the step's contacts; R_WC (nc, 3, 3) their frames; params their combined materials.
        kin: block layout: the contacts' free-body blocks and cliques (None in the dense layout).
        problem: the contacts' ContactProblem (block layout: the whole problem), None without contacts.
        Jc (3 nc, nv), kind (nc,), cpar (nc, 8): dense layout: the contacts' Jacobian and kernel parameters.
    """

    system: ArticulatedSystem
    contacts: Contacts
    R_WC: np.ndarray
    params: ContactParameters
    kin: ContactKinematics | None = None
    problem: sap.ContactProblem | None = None
    Jc: np.ndarray | None = None
    kind: np.ndarray | None = None
    cpar: np.ndarray | None = None

    @property
    def block(self) -> bool:
        """Whether the problem is in the block layout (a forest of free bodies only)."""
        return self.Jc is None

    @property
    def empty(self) -> bool:
        """No contact and no row: v = v*."""
        return self.contacts.count == 0 and self.system.par.shape[0] == 0


def step_problem(model: Model, state: State, ctx: StepContext, *, controls=None, wrench: np.ndarray | None = None,
                 contacts: Contacts | None = None,
                 adjust: Callable[[Contacts, ContactParameters], ContactParameters] | None = None) -> StepProblem:
    """Stages 1–3 of the step from ``state`` (module docstring).

    Args:
        controls: ``multibody.forest.Controls`` of the step (None: none). wrench: (nbody, 6) external
            (τ_W, f_W) at the bodies' COMs [N·m, N] (default: the controls').
        contacts: hold the contact set (default: ``contacts.detect_contacts``).
        adjust: maps the contacts' combined material parameters to the ones the step uses (default: as
            they are; the rollouts of ``convexsim.inverse`` override material pairs).

    Raises:
        SimulationError: a body constraint cannot be evaluated at this state.
    """
    try:
        system = free_motion.assemble(model, state, controls, wrench)
        add_body_constraint_rows(model, state, system)
    except BodyConstraintError as exc:
        raise SimulationError(str(exc), step=state.step, time=state.t) from None
    if contacts is None:
        contacts = detect_contacts(model, state, ctx)
    if not model.has_trees:                                  # block layout
        kin = kinematics_of(model, state, contacts)
        if adjust is not None:
            kin = replace(kin, params=adjust(contacts, kin.params))
        out = StepProblem(system, contacts, kin.R_WC, kin.params, kin=kin)
        if contacts.count:
            A_blocks = np.asarray(system.A_blocks).reshape(-1, 6, 6)
            out.problem = build_sap_problem(model, state, kin, A_blocks, system.v_star, system.v0,
                                            known_velocity(model, state, contacts, kin.R_WC))
        return out
    R_WC = dynamics.contact_frames(contacts.normal)
    params = combined_parameters(model, contacts)
    if adjust is not None:
        params = adjust(contacts, params)
    Jc, cliques, blocks = jacobians.contact_jacobian(model, state, system, contacts, R_WC)
    out = StepProblem(system, contacts, R_WC, params, Jc=Jc)
    if contacts.count:
        out.problem = contact_problem(model, system, contacts, cliques, blocks, Jc, params,
                                      known_velocity(model, state, contacts, R_WC))
        out.kind, out.cpar, _, _ = constraint_kernel_data(out.problem, delassus_diagonal(out.problem))
    return out


def solve(sp: StepProblem, *, params: sap.SapParameters, symbolic=None) -> sap.SapResult | None:
    """Stage 4: the SAP solve of the step's problem warm started at v0 (None when it is empty: v = v*).
    ``symbolic``: the run's symbolic cache (block layout)."""
    if sp.empty:
        return None
    system = sp.system
    if sp.block:
        return sap.solve(sp.problem, v_guess=system.v0, params=params, symbolic_cache=symbolic)
    return solve_rows(system.A, system.v_star, kind=sp.kind, cpar=sp.cpar, Jc=sp.Jc, Jr=system.Jr, par=system.par,
                      v_guess=system.v0, params=params)


def step_info(model: Model, state: State, sp: StepProblem, result: sap.SapResult | None) -> StepInfo:
    """What the step did: contacts, impulses γ (nc, 3) [N·s] and forces γ/dt in W [N], the solver's
    statistics, the actuator, limit and body-constraint forces of the rows."""
    info = StepInfo(contacts=sp.contacts, actuator_names=sp.system.actuator_names)
    gamma_rows = np.zeros(0)
    if result is not None:
        nk = sp.contacts.count
        gamma = np.asarray(result.gamma)
        gamma_rows = gamma[nk:, 0]
        info.gamma = gamma[:nk]
        info.iterations = int(result.iterations)
        info.converged = bool(result.converged)
        info.status = str(getattr(result.status, "name", result.status)).lower()
        info.momentum_residual = _relative_residual(result)
        info.line_search_evaluations = int(result.line_search_evaluations)
        info.force_world = np.einsum("nij,nj->ni", sp.R_WC, info.gamma) / model.time_step
        info.actuator_force = np.array([gamma_rows[r] for _, _, r in sp.system.pd_rows]) / model.time_step
    info.limit_force, info.constraint_force = row_forces(model, state, sp.system, gamma_rows)
    return info


def finish(model: Model, state: State, sp: StepProblem, result: sap.SapResult | None, *,
           strict: bool = False) -> tuple[State, StepInfo]:
    """Stage 5: (the state at t + dt, StepInfo). A solve that did not converge warns (ConvergenceWarning) and
    its last iterate is used, or, with ``strict`` or a non-finite iterate, raises SimulationError."""
    info = step_info(model, state, sp, result)
    v_next = sp.system.v_star if result is None else np.asarray(result.v)
    if not info.converged:
        msg = f"SAP did not converge ({info.status}) after {info.iterations} iterations"
        if strict or not np.all(np.isfinite(v_next)):
            raise SimulationError(msg, step=state.step, time=state.t)
        warnings.warn(f"step {state.step} (t = {state.t:.6g} s): {msg}", ConvergenceWarning, stacklevel=3)
    new_state = integration.finish_step(model, state, sp.system, v_next)
    if result is not None or model.has_trees:   # a free body's v = v* without contacts: checked at the next start
        check_finite_state(model, new_state)
    return new_state, info


def sap_step(model: Model, state: State, ctx: StepContext | None = None, *,
             strict: bool = False) -> tuple[State, StepInfo]:
    """Advance one SAP step of any model (module docstring; contact model from ``model.contact_model``).

    Args:
        ctx: the run's StepContext (buffers, the cached symbolic analysis, the controls); None: a fresh one.
        strict: raise SimulationError when the solver does not converge (default: warn and use the
            last iterate, a ConvergenceWarning). A non-finite result always raises.
    """
    from convexsim.stepping.context import StepContext

    ctx = StepContext() if ctx is None else ctx
    check_finite_state(model, state)
    sp = step_problem(model, state, ctx, controls=ctx.named_controls(model))
    result = solve(sp, params=replace(sap_parameters(model), on_failure="ignore"), symbolic=ctx.symbolic)
    return finish(model, state, sp, result, strict=strict)


articulated_sap_step = sap_step
"""The reference step's former name for models with trees (the same function)."""


def _relative_residual(result) -> float:
    """r/s at the solver's last iteration (r itself when s = 0)."""
    r = np.atleast_1d(result.momentum_residual)
    s = np.atleast_1d(result.momentum_scale)
    if r.size == 0:
        return 0.0
    s_last = float(s[-1]) if s.size else 0.0
    return float(r[-1]) / s_last if s_last > 0 else float(r[-1])


def contact_law(model: Model, p: ContactParameters, phi: np.ndarray, vn0: np.ndarray) -> dict:
    """The contacts' law and its parameters for ``ContactProblem.from_blocks`` (one home for both layouts; the
    compiled form: ``sap_rows.contact_parameters``):
    μ, k, σ and either SAP's (τ_d, φ0, β) or, for the Hunt–Crossley models, (d, fe0 = −k·φ0, vn0, v_s).
    fe0 is the elastic force at the start of the step, negative for a speculative contact (φ0 > 0), so the
    Hunt–Crossley impulse appears only if the step closes the gap (vn < −φ0/dt). ``vn0``: the normal
    velocities at the start of the step (nc,) [m/s] (read by the Hunt–Crossley models only)."""
    common = dict(mu=p.mu, k=p.stiffness, sigma=model.solver.sigma)
    cm = ContactModel(model.contact_model)
    if cm == ContactModel.SAP:
        return dict(common, model="sap", tau_d=p.dissipation_time, phi0=phi, beta=model.solver.beta)
    return dict(common, model=cm.name.lower(), d=p.hc_dissipation, fe0=-p.stiffness * phi, vn0=vn0,
                v_s=model.solver.stiction_tolerance)


def contact_problem(model: Model, system, contacts: Contacts, cliques, blocks, Jc,
                    params: ContactParameters | None = None, v_known=None) -> sap.ContactProblem:
    """The contacts' ContactProblem over the tree and body blocks (``jacobians.contact_jacobian``'s cliques and
    blocks, :func:`contact_law`) in the dense layout (``system``: the step's
    ``free_motion.ArticulatedSystem``); ``params``: the contacts' combined materials (default
    ``combined_parameters``); ``v_known``: the kinematic bodies' known contact velocities (nc, 3) or None
    (``dynamics.known_contact_velocity``)."""
    p = combined_parameters(model, contacts) if params is None else params
    return sap.ContactProblem.from_blocks(model.time_step, system.A_blocks, system.v_star, cliques, blocks,
                                          **contact_law(model, p, contacts.phi, (Jc @ system.v0)[2::3]),
                                          v_known=v_known)


def row_forces(model: Model, state: State, system, gamma_rows: np.ndarray) -> tuple:
    """(limit_force by joint name, constraint_force by constraint name) from the step's joint and body rows'
    impulses γ [N·s] (StepInfo's fields; ``system``: the step's ``free_motion.ArticulatedSystem``):
    a limit row J = ±e_d gives the joint ±γ/dt, a ball joint's cone limit its restoring torque γ/dt [N·m] about
    the swing axis; the body constraints by ``sap_rows.body_constraint_forces``; the compiled form:
    ``post_solve.sap_joint_forces``)."""
    dt = model.time_step
    limit = {name: 0.0 for name in system.limit_names}
    for name, r, d in system.limit_rows:     # d = −1: a cone limit, reported as its restoring torque γ/dt
        limit[name] += float((system.Jr[r, d] if d >= 0 else 1.0) * gamma_rows[r] / dt)
    start, owners = system.body_rows
    cons = {}
    if model_forest(model).constraints:
        cons = body_constraint_forces(model, state, owners, gamma_rows[start:start + len(owners)])
    return limit, cons


def build_sap_problem(model: Model, state: State, kin: ContactKinematics, A_blocks: np.ndarray,
                      v_star: np.ndarray, v0: np.ndarray, v_known: np.ndarray | None = None) -> sap.ContactProblem:
    """The SAP ContactProblem of the block layout (one 6-dof clique per moving body).

    A contact against a fixed body touches one clique; its Jacobian is that body's block. ``v_known``: the
    kinematic bodies' known contact velocities (nc, 3), or None.
    """
    a_moves = kin.clique_a >= 0
    cliques = np.stack([np.where(a_moves, kin.clique_a, kin.clique_b),
                        np.where(a_moves, kin.clique_b, -1)], axis=1)
    J = np.stack([np.where(a_moves[:, None, None], kin.J_a, kin.J_b), kin.J_b], axis=1)
    law = contact_law(model, kin.params, kin.contacts.phi, contact_velocities(kin, v0)[:, 2])
    return sap.ContactProblem.from_blocks(model.time_step, A_blocks, v_star, cliques, J, **law, v_known=v_known)


__all__ = ["StepProblem", "articulated_sap_step", "build_sap_problem", "contact_law", "contact_problem", "finish",
           "row_forces", "sap_step", "solve", "step_info", "step_problem"]
