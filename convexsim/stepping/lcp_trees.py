"""The rigid LCP reference step for models with kinematic trees (``Model.has_trees``, ``solver.kind: lcp``).

The same Anitescu–Potra / Stewart–Trinkle LCP as ``lcp_stepper`` (docs/lcp.md §2), over the generalized
velocities of convexsim.stepping.articulated (free bodies 6 by 6, then each tree's joint velocities):

* A = blkdiag(free-body spatial masses, M_k(q0) + dt·D_k per tree); v* = v0 + dt A⁻¹(τ − h − D v0);
* contacts: the articulated step's contact set and Jacobians (point Jacobians of links in v), polyhedral
  friction with ``friction_directions``, the gap term b = max(φ, 0)/dt + s·min(φ, 0)/dt;
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

* body constraints (``constraints:`` welds, distances, couplers; convexsim.stepping.body_constraints):
  each scalar row g(q) = 0 with ġ = J v becomes a **bilateral** pair of frictionless rows, +J with the
  gap term b(g) and −J with b(−g): 0 ≤ p₊ ⊥ J v + b(g) ≥ 0, 0 ≤ p₋ ⊥ −J v + b(−g) ≥ 0, so
  −b(g) ≤ J v ≤ b(−g) and the net impulse p₊ − p₋ has either sign. With stabilization s ≤ 1 the interval is
  never empty (for g > 0 it is [−g/dt, −s·g/dt]); with s = 1 it is the single value J v = −g/dt. These rows
  are rigid: a constraint with a finite ``stiffness``/``angular_stiffness`` is refused (naming it), since
  the LCP has no compliant form of it.

* contact normal rows are regularized: M_ii ← (1 + ε) M_ii on each contact's normal row, ε =
  ``NORMAL_REGULARIZATION`` = 1e-3. The rigid LCP's normal loads on several coplanar points are not unique
  and Lemke returns a vertex of the solution set, which can leave a face supported at one point: a finger
  pressing a box face at one corner is a hinge, and in ``gripper_lift`` the box turned about the grip axis
  and slid out (docs/articulated.md §8.6). With ε > 0 the normal block is positive definite on those rows
  and the loads spread (motivation: for a monotone LCP the Tikhonov-regularized solutions tend to its
  least-norm solution as ε → 0; the friction LCP is not monotone, so the evidence is the measurements). The price is a compliance: a resting contact's row reads J v + b = −ε M_ii p,
  i.e. a steady penetration ε M_ii p dt/s (s = ``lcp_stabilization``), 0.05 µm for a 0.1 m, 0.3 kg box
  resting on four corners at dt = 1 ms (with s = 0 nothing removes it: that box sinks 1e-5 m/s). Limit and
  body-constraint rows stay rigid.

Tree couplers given in Python (``Tree.couplers``) and Newton restitution are not supported with trees (the
step raises, naming them).

This is the reference of the compiled step (``lcp_compiled_trees``, kernel
``lcp_composition.lcp_tree_step_kernel``), which ``stepping.dispatch`` takes for the models it accepts. The
PD fold (``lcp_rows.pd_terms``, ``fold_pd``), the normal-row regularization (``regularize_normals``)
and the dense (M, q) (``lcp_rows.assemble_dense``) are the same kernels on both paths.
"""

from __future__ import annotations

import numpy as np

from convexsim.model import Model, State
from convexsim.multibody.forest import current_actuators
from convexsim.multibody.model import ConeLimit
from convexsim.multibody.reference_step import cone_swing
from convexsim.sap.joint_constraints import limit_in_window
from convexsim.stepping.body_constraints import BodyConstraintError, constraint_label, constraint_values
from convexsim.stepping.body_constraints import constraint_forces as body_constraint_forces
from convexsim.stepping.body_constraints import constraint_rows as body_constraint_rows
from convexsim.stepping.articulated import assemble, contact_jacobian, detect_contacts, finish_step
from convexsim.stepping.contacts import check_finite_state, combined_parameters, select_contacts
from convexsim.stepping.context import StepContext
from convexsim.stepping.types import SimulationError
from convexsim.stepping.lcp_stepper import (LcpStepError, LcpStepInfo, build_contact_lcp, gap_bias,
                                            solve_contact_lcp)
from convexsim import dynamics
from convexsim.stepping.lcp_rows import fold_pd, pd_terms, regularize_normals


NORMAL_REGULARIZATION = 1e-3
"""ε of the contact normal rows' regularization M_ii ← (1 + ε) M_ii (module docstring)."""


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


def _bilateral_rows(model: Model, state: State, system) -> list:
    """[(J row (nv,), ±1, ±g, (constraint, row))] of every body constraint, two per scalar row (module
    docstring)."""
    cons = model.forest.constraints
    if not cons:
        return []
    for c in cons:
        for f in ("stiffness", "angular_stiffness"):
            if np.isfinite(getattr(c, f, np.inf)):
                raise ValueError(f"LCP stepper: {constraint_label(c)} has a finite {f}; the LCP's constraint "
                                 "rows are rigid (remove the stiffness or use the SAP solver)")
    try:
        J, _, _, owners = body_constraint_rows(model, state, system, np.diag(system.A))
    except BodyConstraintError as exc:
        raise SimulationError(f"LCP (articulated): {exc}", step=state.step, time=state.t) from None
    values = {}
    out = []
    for r, (ci, k) in enumerate(owners):
        if ci not in values:
            values[ci] = constraint_values(model, state, cons[ci])
        g = float(values[ci][k])
        out.append((J[r], 1.0, g, (ci, k)))
        out.append((J[r], -1.0, -g, (ci, k)))
    return out


def lcp_trees_step(model: Model, state: State, ctx: StepContext | None = None) -> tuple[State, LcpStepInfo]:
    """One LCP step of a model with trees (module docstring)."""
    ctx = StepContext() if ctx is None else ctx
    check_finite_state(model, state)
    s = model.solver
    if s.lcp_restitution > 0:
        raise ValueError("LCP stepper: Newton restitution (solver.lcp_restitution > 0) is not supported with joints")
    controls = ctx.named_controls(model)
    system = assemble(model, state, controls)
    A, v_star, pds, limits = pd_and_limit_rows(model, state, system, controls)
    contacts = detect_contacts(model, state, ctx)
    R_WC = dynamics.contact_frames(contacts.normal)
    Jc, _, _ = contact_jacobian(model, state, system, contacts, R_WC)
    nc, nv, dt = contacts.count, system.nv, model.time_step
    idle = ~np.any(Jc.reshape(nc, 3, nv)[:, 2] != 0.0, axis=1)   # a normal row that moves nothing
    if idle.any():
        contacts = select_contacts(contacts, ~idle)
        R_WC = R_WC[~idle]
        Jc = Jc.reshape(nc, 3, nv)[~idle].reshape(-1, nv)
        nc = contacts.count
    limits.extend(_bilateral_rows(model, state, system))
    nl = len(limits)
    J = np.zeros((nc + nl, 3, nv))
    J[:nc] = Jc.reshape(nc, 3, nv)
    bias = np.zeros(nc + nl)
    mu = np.zeros(nc + nl)
    if nc:
        bias[:nc] = gap_bias(contacts.phi, dt, s.lcp_stabilization)
        mu[:nc] = combined_parameters(model, contacts).mu
    for i, (d, sign, gap, _) in enumerate(limits):
        if isinstance(d, np.ndarray):        # a bilateral row: d is the whole row J (nv,)
            J[nc + i, 2] = sign * d
        else:
            J[nc + i, 2, d] = sign
        bias[nc + i] = gap_bias(np.array([gap]), dt, s.lcp_stabilization)[0]
    info = LcpStepInfo(contacts=contacts)
    p_rows = np.zeros(nl)                    # the limit and bilateral rows' impulses p >= 0
    if nc + nl == 0:
        v = v_star
    else:
        Ainv = np.linalg.inv(A)
        M, q, layout = build_contact_lcp(Ainv, v_star, J, bias, mu, s.friction_directions)
        regularize_normals(M, nc, NORMAL_REGULARIZATION)   # unique normal loads on coplanar points (docstring)
        res, first = solve_contact_lcp(M, q, step=state.step, max_pivots=s.lcp_max_pivots or None,
                                       workspace=ctx.lemke)
        if res is None:
            raise LcpStepError(f"LCP (articulated): Lemke failed ({first.status.name})", step=state.step,
                               time=state.t, contacts=list(range(nc)), status=first.status, pivots=first.pivots)
        v = v_star + layout.AinvW @ res.z[:layout.AinvW.shape[1]]
        gamma = layout.impulses(res.z)
        info.gamma = gamma[:nc]
        p_rows = gamma[nc:, 2]
        info.force_world = np.einsum("nij,nj->ni", R_WC, info.gamma) / dt
        info.iterations = info.pivots = int(res.pivots)
        info.rung, info.lemke_runs = res.rung, int(res.attempts)
    info.actuator_force = np.array([f0 - c * v[d] if sat is None else sat for d, c, f0, sat in pds])
    info.actuator_names = system.actuator_names
    info.limit_force = {name: 0.0 for name in system.limit_names}
    owners, impulses = [], []
    for (d, sign, _, label), p in zip(limits, p_rows):
        if isinstance(label, str):           # a limit row: J = sign·e_d gives the joint sign·p; a cone
            info.limit_force[label] += float(sign * p / dt)   # row its restoring torque p/dt (sign = +1)
        else:                                # a bilateral pair: net impulse p₊ − p₋ of the row +J
            owners.append(label)
            impulses.append(sign * p)
    if model.forest.constraints:
        info.constraint_force = body_constraint_forces(model, state, owners, np.array(impulses))
    new_state = finish_step(model, state, system, v)
    check_finite_state(model, new_state)
    return new_state, info


__all__ = ["NORMAL_REGULARIZATION", "lcp_trees_step", "pd_and_limit_rows"]
