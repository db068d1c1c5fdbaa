"""The numpy reference of the LCP step, for every model: free bodies are a forest without joints.

The rigid Anitescu–Potra / Stewart–Trinkle time step with a polyhedral friction cone (``lcp_problem``;
docs/lcp.md §2) over the step's velocities v (free bodies 6 by 6, then each tree's joint velocities), one
composition of stages (:func:`reference_lcp_step`), each with its free-body and its tree variant side by side:

1. start checks and the LCP settings (``lcp_info.validate_settings``);
2. free motion: A and v* (free bodies: A block diagonal, one 6 × 6 block per moving body,
   ``dynamics.free_motion``; trees: A = blkdiag(free-body spatial masses, M_k(q0) + dt·D_k per tree),
   v* = v0 + dt A⁻¹(τ − h − D v0), with the PD actuators folded in and the joint-limit rows, below);
3. contacts and their Jacobian rows (free bodies: the per-body blocks of ``contacts.contact_kinematics``; trees:
   the link point Jacobians, contacts whose normal row moves nothing dropped), the gap terms, combined μ, and
   the body-constraint rows of trees;
4. the LCP solve: with A block diagonal island by island with warm and crash starts (``lcp_islands``), else one
   dense LCP with regularized contact normals; the fallback chain after a failed Lemke run (``lcp_fallback``);
5. impulses, contact forces, the joints' forces, and the integration.

Joint rows of trees:

* joint limits: unilateral frictionless rows on the joint velocity, J = ±e_i, gap g = q0 − lower or
  upper − q0 with the same gap term (0 ≤ p ⊥ J v + b(g) ≥ 0), entering a step in the same window as SAP's;
  a ball joint's cone limit is one such row on its swing angle θ, J = −∂θ/∂ω, g = angle − θ;
* PD actuators, stated form: **implicit, linear, folded into A and v*** —
  u = −Kp (q0 + dt v − q_d) − Kd (v − v_d) + u_ff, i.e. A ← A + dt (dt Kp + Kd) e eᵀ and
  A v* ← A v* + dt (−Kp (q0 − q_d) + Kd v_d + u_ff) e. The effort limit is applied explicitly: if the
  implicit force of the free motion (no contact) exceeds ±effort, that actuator instead applies the constant
  force ±effort over the step. Without saturation this is the same PD as SAP's row (which also clamps inside
  the solve); the two differ only while an actuator saturates under changing contact forces. SAP's gain
  limiting (near-rigid clamp) is not applied here.
* body constraints (``constraints:`` welds, distances, couplers; their rows ``sap_rows.body_constraint_rows``):
  each scalar row g(q) = 0 with ġ = J v becomes a **bilateral** pair of frictionless rows, +J with the
  gap term b(g) and −J with b(−g): 0 ≤ p₊ ⊥ J v + b(g) ≥ 0, 0 ≤ p₋ ⊥ −J v + b(−g) ≥ 0, so
  −b(g) ≤ J v ≤ b(−g) and the net impulse p₊ − p₋ has either sign. With stabilization s ≤ 1 the interval is
  never empty (for g > 0 it is [−g/dt, −s·g/dt]); with s = 1 it is the single value J v = −g/dt. These rows
  are rigid: a constraint with a finite ``stiffness``/``angular_stiffness`` is refused (naming it), since
  the LCP has no compliant form of it.
* contact normal rows of trees are regularized: M_ii ← (1 + ε) M_ii on each contact's normal row, ε =
  ``NORMAL_REGULARIZATION`` = 1e-3. The rigid LCP's normal loads on several coplanar points are not unique
  and Lemke returns a vertex of the solution set, which can leave a face supported at one point: a finger
  pressing a box face at one corner is a hinge, and in ``gripper_lift`` the box turned about the grip axis
  and slid out (docs/articulated.md §8.6). With ε > 0 the normal block is positive definite on those rows
  and the loads spread (motivation: for a monotone LCP the Tikhonov-regularized solutions tend to its
  least-norm solution as ε → 0; the friction LCP is not monotone, so the evidence is the measurements). The
  price is a compliance: a resting contact's row reads J v + b = −ε M_ii p, i.e. a steady penetration
  ε M_ii p dt/s (s = ``lcp_stabilization``), 0.05 µm for a 0.1 m, 0.3 kg box resting on four corners at
  dt = 1 ms (with s = 0 nothing removes it: that box sinks 1e-5 m/s). Limit and body-constraint rows stay rigid.

Newton restitution (``lcp_restitution`` = e > 0; free bodies only, with trees the step raises) uses Moreau's
midpoint scheme (Glocker–Studer 2005): q_M = q + (dt/2)v, contacts detected at q_M; active ones (φ_M ≤ 0)
get the law 0 ≤ p_n ⊥ v_n⁺ + e·v_n⁻; inactive ones keep the gap condition b = φ_M/(dt/2); then
q⁺ = q_M + (dt/2)v⁺. No stabilization is applied in this mode (it would change the rebound velocity). Tree
couplers given in Python (``Tree.couplers``) are not supported (the step raises, naming them).

This is the reference of the compiled step (``lcp_compiled``, kernel ``lcp_composition.lcp_step_kernel``),
which ``stepping.dispatch`` takes for the models it accepts and which hands it the steps it does not take. The
dense (M, q) (``lcp_rows.assemble_dense``), the PD fold (``lcp_rows.pd_terms``, ``fold_pd``) and the
normal-row regularization (``regularize_normals``) are the same kernels on both paths. With trees the stages it
shares with the SAP reference are the numpy forms in the stage modules (``free_motion.assemble``,
``contacts.detect_contacts``, ``jacobians.contact_jacobian``, ``integration.finish_step``, and the body
constraints' rows of ``sap_rows``); it imports no other step.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from convexsim import dynamics
from convexsim.model import Contacts, Model, State
from convexsim.multibody.forest import current_actuators
from convexsim.multibody.model import ConeLimit
from convexsim.multibody.reference_step import cone_swing
from convexsim.sap.joint_constraints import limit_in_window
from convexsim.stepping import lcp_islands
from convexsim.stepping.contacts import (check_finite_state, combined_parameters, contact_kinematics,
                                         contact_velocities, detect_contacts, select_contacts)
from convexsim.stepping.context import StepContext
from convexsim.stepping.free_motion import assemble
from convexsim.stepping.integration import finish_step
from convexsim.stepping.jacobians import contact_jacobian, known_velocity
from convexsim.stepping.lcp_fallback import solve_contact_lcp
from convexsim.stepping.lcp_info import LcpStepError, LcpStepInfo, validate_settings
from convexsim.stepping.lcp_problem import build_contact_lcp, contact_bias, gap_bias
from convexsim.stepping.lcp_rows import NORMAL_REGULARIZATION, fold_pd, pd_terms, regularize_normals
from convexsim.stepping.sap_rows import (BodyConstraintError, body_constraint_forces, body_constraint_label,
                                         body_constraint_rows, body_constraint_values)
from convexsim.stepping.types import SimulationError

def pd_and_limit_rows(model: Model, state: State, system, controls):
    """(A', v*', pd list (global dof, c, f₀, saturated force or None) with u = f₀ − c v when implicit
    (``lcp_rows.pd_terms``, ``fold_pd``), limit rows [(global dof, sign, gap, joint name)])."""
    dt = model.time_step
    A = system.A.copy()
    v_star = system.v_star.copy()
    pds, limits = [], []
    for k, tree in enumerate(model.forest.trees):
        if tree.nv == 0:
            continue
        if tree.couplers:
            raise ValueError(f"LCP stepper: couplers (tree of joint {tree.joint_names[0]!r}) are not supported; "
                             "use the SAP solver")
        s, n = system.tree_start[k], tree.nv
        q0 = tree.q_of(state.tree_q)
        v0 = tree.v_of(state.tree_v)
        acts = current_actuators(tree, state.t, controls)
        dof = np.array([int(tree.model.joint_dofadr[a.joint]) for a in acts], dtype=np.int64)
        terms = np.array([pd_terms(dt, float(a.kp), float(a.kd), float(q0[int(tree.model.joint_qadr[a.joint])]),
                                   float(a.q_target), float(a.v_target), float(a.u_ff)) for a in acts]).reshape(-1, 2)
        effort = np.array([float(a.effort) for a in acts])
        Ablk, vs, sat, saturated = fold_pd(np.ascontiguousarray(A[s:s + n, s:s + n]),
                                           np.ascontiguousarray(v_star[s:s + n]), dof,
                                           np.ascontiguousarray(terms[:, 0]), np.ascontiguousarray(terms[:, 1]),
                                           effort, float(dt))
        A[s:s + n, s:s + n] = Ablk
        v_star[s:s + n] = vs
        for i in range(len(acts)):
            pds.append((s + int(dof[i]), terms[i, 0], terms[i, 1], float(sat[i]) if saturated[i] else None))
        for lim in tree.limits:
            if isinstance(lim, ConeLimit):
                limits.extend(_cone_limit_rows(tree, lim, q0, v0, vs, s, system.nv, dt))
                continue
            d = int(tree.model.joint_dofadr[lim.joint])
            qa = int(tree.model.joint_qadr[lim.joint])
            for sign, bound in ((1.0, lim.lower), (-1.0, lim.upper)):
                if limit_in_window(dt, q0[qa], bound, int(sign), v0[d], vs[d]):
                    limits.append((s + d, sign, sign * (q0[qa] - bound), tree.joint_names[lim.joint]))
    return A, v_star, pds, limits


def _cone_limit_rows(tree, lim, q0, v0, vs, start: int, nv: int, dt: float) -> list:
    """[(row (nv,), +1, gap = angle − θ, joint name)] of a ball joint's cone limit entering this step (the
    window of the 1-dof limits): a unilateral frictionless row like a limit's, on the swing rate: row·v =
    −θ̇, with row = −∂θ/∂ω = n on the joint's three dofs (convexsim.multibody.reference_step.cone_swing)."""
    theta, dtheta = cone_swing(tree.model, q0, lim)
    if dtheta is None:
        return []
    d = int(tree.model.joint_dofadr[lim.joint])
    rate0, rate_star = float(dtheta @ v0[d:d + 3]), float(dtheta @ vs[d:d + 3])
    if not limit_in_window(dt, theta, lim.angle, -1, rate0, rate_star):
        return []
    row = np.zeros(nv)
    row[start + d:start + d + 3] = -dtheta
    return [(row, 1.0, lim.angle - theta, tree.joint_names[lim.joint])]


def bilateral_rows(model: Model, state: State, system) -> list:
    """[(J row (nv,), ±1, ±g, (constraint, row))] of every body constraint, two per scalar row (module
    docstring)."""
    cons = model.forest.constraints
    if not cons:
        return []
    for c in cons:
        for f in ("stiffness", "angular_stiffness"):
            if np.isfinite(getattr(c, f, np.inf)):
                raise ValueError(f"LCP stepper: {body_constraint_label(c)} has a finite {f}; the LCP's constraint "
                                 "rows are rigid (remove the stiffness or use the SAP solver)")
    try:
        J, _, _, owners = body_constraint_rows(model, state, system, np.diag(system.A))
    except BodyConstraintError as exc:
        raise SimulationError(f"LCP (articulated): {exc}", step=state.step, time=state.t) from None
    values = {}
    out = []
    for r, (ci, k) in enumerate(owners):
        if ci not in values:
            values[ci] = body_constraint_values(model, state, cons[ci])
        g = float(values[ci][k])
        out.append((J[r], 1.0, g, (ci, k)))
        out.append((J[r], -1.0, -g, (ci, k)))
    return out



@dataclass
class _Motion:
    """Stage 2, the free motion: v* and A over the step's velocities, with what the joints of trees add."""
    v_star: np.ndarray
    A_blocks: np.ndarray | None = None
    """Free bodies: A as one 6 × 6 block per moving body (block diagonal)."""
    A: np.ndarray | None = None
    """Trees: the dense A with the PD actuators folded in."""
    system: object = None
    """Trees: the assembled system (``free_motion.assemble``)."""
    pds: list = field(default_factory=list)
    """Trees: per actuator (global dof, c, f₀, saturated force or None), u = f₀ − c v when implicit."""
    limits: list = field(default_factory=list)
    """Trees: the joint rows (limit sides, cone limits, then the body-constraint pairs)."""


@dataclass
class _Rows:
    """Stage 3, the LCP's rows: the contacts (at the midpoint with restitution) and their Jacobians, gap terms
    and μ, then the joint rows of trees."""
    contacts: Contacts
    R_WC: np.ndarray
    bias: np.ndarray
    kin: object = None
    """Free bodies: the contact kinematics (per-body Jacobian blocks, cliques, materials)."""
    J: np.ndarray | None = None
    """Trees: the dense rows (contacts, then joint rows), shape (nc + nl, 3, n_v)."""
    mu: np.ndarray | None = None
    mid: State | None = None
    """Free bodies with restitution: the midpoint state q + (dt/2) v at which the contacts are detected."""


def _free_motion(model: Model, state: State, ctx: StepContext) -> _Motion:
    """A and v* (free bodies: per-body blocks; trees: the dense system with the PD fold and the limit rows)."""
    if not model.has_trees:
        A_blocks, v_star = dynamics.free_motion(model, state, ctx.body_wrench(model))
        return _Motion(v_star, A_blocks=A_blocks)
    controls = ctx.named_controls(model)
    system = assemble(model, state, controls)
    A, v_star, pds, limits = pd_and_limit_rows(model, state, system, controls)
    return _Motion(v_star, A=A, system=system, pds=pds, limits=limits)


def _midpoint(model: Model, state: State) -> State:
    """Moreau's midpoint q + (dt/2) v (restitution, module docstring)."""
    half = replace(model, time_step=0.5 * model.time_step)
    return dynamics.integrate(half, state, state.v[dynamics.moving_bodies(model)].reshape(-1))


def _rows(model: Model, state: State, motion: _Motion, ctx: StepContext) -> _Rows:
    """The contacts, their Jacobians and gap terms (module docstring, stage 3)."""
    s, dt = model.solver, model.time_step
    if not model.has_trees:
        mid = _midpoint(model, state) if s.lcp_restitution > 0.0 else None
        kin = contact_kinematics(model, state if mid is None else mid, workspace=ctx.collision)
        phi = kin.contacts.phi
        known = known_velocity(model, state if mid is None else mid, kin.contacts, kin.R_WC)
        if kin.contacts.count == 0:
            bias = np.zeros(0)
        elif mid is not None:
            bodies = dynamics.moving_bodies(model)
            vn_before = contact_velocities(kin, state.v[bodies].reshape(-1))[:, 2]
            if known is not None:
                vn_before = vn_before + known[:, 2]
            bias = contact_bias(np.where(phi <= 0.0, s.lcp_restitution * vn_before, phi / (0.5 * dt)), known)
        else:
            bias = contact_bias(gap_bias(phi, dt, s.lcp_stabilization), known)
        return _Rows(kin.contacts, kin.R_WC, bias, kin=kin, mid=mid)
    system = motion.system
    contacts = detect_contacts(model, state, ctx)
    R_WC = dynamics.contact_frames(contacts.normal)
    Jc, _, _ = contact_jacobian(model, state, system, contacts, R_WC)
    nc, nv = contacts.count, system.nv
    idle = ~np.any(Jc.reshape(nc, 3, nv)[:, 2] != 0.0, axis=1)   # a normal row that moves nothing
    if idle.any():
        contacts = select_contacts(contacts, ~idle)
        R_WC = R_WC[~idle]
        Jc = Jc.reshape(nc, 3, nv)[~idle].reshape(-1, nv)
        nc = contacts.count
    motion.limits.extend(bilateral_rows(model, state, system))
    nl = len(motion.limits)
    J = np.zeros((nc + nl, 3, nv))
    J[:nc] = Jc.reshape(nc, 3, nv)
    bias = np.zeros(nc + nl)
    mu = np.zeros(nc + nl)
    if nc:
        bias[:nc] = gap_bias(contacts.phi, dt, s.lcp_stabilization)
        mu[:nc] = combined_parameters(model, contacts).mu
    for i, (d, sign, gap, _) in enumerate(motion.limits):
        if isinstance(d, np.ndarray):        # a bilateral row: d is the whole row J (nv,)
            J[nc + i, 2] = sign * d
        else:
            J[nc + i, 2, d] = sign
        bias[nc + i] = gap_bias(np.array([gap]), dt, s.lcp_stabilization)[0]
    known = known_velocity(model, state, contacts, R_WC)
    if known is not None:
        bias = contact_bias(bias, np.concatenate((known, np.zeros((nl, 3)))))
    return _Rows(contacts, R_WC, bias, J=J, mu=mu)


def _solve_dense(model: Model, state: State, motion: _Motion, rows: _Rows, ctx: StepContext, info: LcpStepInfo):
    """One dense LCP over all rows (trees): A⁻¹, (M, q) with the normals regularized, the solve chain. Returns
    (v⁺, the joint rows' impulses p ≥ 0); the contacts' impulses, forces and the work done go into ``info``."""
    nc, dt = rows.contacts.count, model.time_step
    nl = len(motion.limits)
    if nc + nl == 0:
        return motion.v_star, np.zeros(0)
    Ainv = np.linalg.inv(motion.A)
    M, q, layout = build_contact_lcp(Ainv, motion.v_star, rows.J, rows.bias, rows.mu, model.solver.friction_directions)
    regularize_normals(M, nc, NORMAL_REGULARIZATION)   # unique normal loads on coplanar points (docstring)
    res, first = solve_contact_lcp(M, q, step=state.step, max_pivots=model.solver.lcp_max_pivots or None,
                                   workspace=ctx.lemke)
    if res is None:
        raise LcpStepError(f"LCP (articulated): Lemke failed ({first.status.name})", step=state.step,
                           time=state.t, contacts=list(range(nc)), status=first.status, pivots=first.pivots)
    v = motion.v_star + layout.AinvW @ res.z[:layout.AinvW.shape[1]]
    gamma = layout.impulses(res.z)
    info.gamma = gamma[:nc]
    info.force_world = np.einsum("nij,nj->ni", rows.R_WC, info.gamma) / dt
    info.iterations = info.pivots = int(res.pivots)
    info.rung, info.lemke_runs = res.rung, int(res.attempts)
    return v, gamma[nc:, 2]


def _solve_blocks(model: Model, state: State, motion: _Motion, rows: _Rows, warm: bool, ctx: StepContext,
                  info: LcpStepInfo) -> np.ndarray:
    """The contact LCP with A block diagonal (free bodies), island by island (``lcp_islands``). Returns v⁺;
    the impulses, forces and the work done go into ``info``."""
    if rows.contacts.count == 0:
        info.status = "solved"
        return motion.v_star
    sol = lcp_islands.solve_islands(model, state, rows.kin, motion.A_blocks, motion.v_star, None, rows.bias, warm,
                                    ctx)
    info.gamma = sol.gamma
    info.force_world = np.einsum("nij,nj->ni", rows.R_WC, sol.gamma) / model.time_step
    info.iterations = sol.pivots + sol.warm_solves
    info.converged, info.status = True, "solved"
    info.warm_attempted, info.warm_accepted, info.warm_solves = sol.warm_attempted, sol.warm_accepted, sol.warm_solves
    info.pivots, info.rung, info.lemke_runs, info.islands = sol.pivots, sol.rung, sol.lemke_runs, sol.islands
    return sol.v_next


def _joint_forces(model: Model, state: State, motion: _Motion, v: np.ndarray, p_rows: np.ndarray,
                  info: LcpStepInfo) -> None:
    """The actuators' forces (after saturation), the limits' and the body constraints' forces of trees [N·m or
    N] into ``info``."""
    dt = model.time_step
    info.actuator_force = np.array([f0 - c * v[d] if sat is None else sat for d, c, f0, sat in motion.pds])
    info.actuator_names = motion.system.actuator_names
    info.limit_force = {name: 0.0 for name in motion.system.limit_names}
    owners, impulses = [], []
    for (d, sign, _, label), p in zip(motion.limits, p_rows):
        if isinstance(label, str):           # a limit row: J = sign·e_d gives the joint sign·p; a cone
            info.limit_force[label] += float(sign * p / dt)   # row its restoring torque p/dt (sign = +1)
        else:                                # a bilateral pair: net impulse p₊ − p₋ of the row +J
            owners.append(label)
            impulses.append(sign * p)
    if model.forest.constraints:
        info.constraint_force = body_constraint_forces(model, state, owners, np.array(impulses))


def _integrate(model: Model, state: State, motion: _Motion, rows: _Rows, v: np.ndarray) -> State:
    """q⁺ from v⁺ (free bodies: from the midpoint with restitution; trees: ``integration.finish_step`` and the
    end-of-step check)."""
    if not model.has_trees:
        if rows.mid is None:
            return dynamics.integrate(model, state, v)
        new = dynamics.integrate(replace(model, time_step=0.5 * model.time_step), rows.mid, v)
        return State(state.t + model.time_step, new.q, new.v, state.step + 1)
    new = finish_step(model, state, motion.system, v)
    check_finite_state(model, new)
    return new


def _check_start(model: Model, state: State) -> None:
    """The LCP settings (ValueError); with trees also a finite start state and no restitution."""
    validate_settings(model)
    if model.has_trees:
        check_finite_state(model, state)
        if model.solver.lcp_restitution > 0:
            raise ValueError("LCP stepper: Newton restitution (solver.lcp_restitution > 0) is not supported with "
                             "joints")


def reference_lcp_step(model: Model, state: State, ctx: StepContext | None = None, *,
                       warm_start: bool | None = None) -> tuple[State, LcpStepInfo]:
    """One LCP step of any model by the numpy stages (module docstring; arguments and result as
    ``stepping.lcp_step``; ``warm_start`` acts on the islands of free bodies)."""
    ctx = StepContext() if ctx is None else ctx
    _check_start(model, state)
    warm = lcp_islands.WARM_START_DEFAULT if warm_start is None else bool(warm_start)
    motion = _free_motion(model, state, ctx)
    rows = _rows(model, state, motion, ctx)
    info = LcpStepInfo(contacts=rows.contacts)
    if model.has_trees:
        v, p_rows = _solve_dense(model, state, motion, rows, ctx, info)
        _joint_forces(model, state, motion, v, p_rows, info)
    else:
        v = _solve_blocks(model, state, motion, rows, warm, ctx, info)
    return _integrate(model, state, motion, rows, v), info


__all__ = ["reference_lcp_step", "pd_and_limit_rows", "bilateral_rows"]
