"""The tree stage of the SAP step in numpy: the free motion and the joint rows of one tree (limits, implicit
PD actuators, couplers), with the same discretization as Drake's MultibodyPlant with SAP:

    A  = M(q0) + dt·D                                    (armature inside M, joint damping D implicit)
    v* = v0 + dt·A⁻¹ (τ − C(q0, v0) v0 − g(q0) − D v0)     (explicit forces at the start of the step)
    rows: ℓ_r(J_r v) of every limit, PD actuator and coupler,

so that the step's v = argmin ½ (v − v*)ᵀ A (v − v*) + Σ_r ℓ_r(J_r v) gives A (v − v*) = Jᵀ γ: limit, PD and
coupler impulses are implicit in v. Limits and PD actuators act on 1-dof joints (revolute, prismatic) given by
joint (body) index, cone (swing) limits on ball joints; a limit side enters a step only inside the window of
:func:`convexsim.sap.joint_constraints.limit_in_window`. The SAP reference step (``stepping.sap_stepper``,
through ``multibody.forest.tree_step_data``) and the LCP tree step build their trees' rows here. The joint
rows' descriptions (``JointLimit``, ``ConeLimit``, ``PdActuator``, ``Coupler``) live in ``multibody.model``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from convexsim.multibody.dynamics import bias_forces, mass_matrix
from convexsim.multibody.kinematics import Kinematics
from convexsim.multibody.model import ConeLimit, Coupler, JointLimit, JointType, MultibodyModel, PdActuator
from convexsim.sap.joint_constraints import (
    KIND_COUPLER,
    KIND_LIMIT,
    KIND_PD,
    coupler_row,
    delassus_row,
    limit_in_window,
    limit_rows,
    pd_row,
)


def cone_swing(model: MultibodyModel, q, lim: ConeLimit) -> tuple[float, np.ndarray | None]:
    """(θ, ∂θ/∂ω) of a ball joint's cone limit at q: θ = atan2(|b × a|, a·b) with b = R_JB a, and, since
    ḃ = ω × b (ω in J), θ̇ = −n·ω with n = (b × a)/|b × a|. The row is None where sin θ < 1e-12 (the axis
    direction: θ̇ is not differentiable there, and θ = 0 is far inside any cone)."""
    from convexsim.spatial import quat_to_matrix

    qa = int(model.joint_qadr[lim.joint])
    quat = np.asarray(q[qa:qa + 4], dtype=float)
    a = np.asarray(lim.axis, dtype=float)
    b = quat_to_matrix(quat / np.linalg.norm(quat)) @ a
    c = np.cross(b, a)
    s = float(np.linalg.norm(c))
    theta = math.atan2(s, float(a @ b))
    return theta, (None if s < 1e-12 else -c / s)


def _cone_rows(model: MultibodyModel, q, v, v_star, A_diag, dt: float, lim: ConeLimit):
    """[(J row (nv,), par)] of a cone limit entering this step: one unilateral row on g = angle − θ,
    J = −∂θ/∂v = n on the joint's three dofs (limit_rows' upper side, with the same near-rigid defaults)."""
    theta, dtheta = cone_swing(model, q, lim)
    if dtheta is None:
        return []
    d = int(model.joint_dofadr[lim.joint])
    e = np.zeros(model.nv)
    e[d:d + 3] = dtheta
    w = delassus_row(e, A_diag)
    out = []
    for sign, par in limit_rows(dt, theta, -math.inf, lim.angle, w):
        if limit_in_window(dt, theta, lim.angle, int(sign), float(e @ v), float(e @ v_star)):
            out.append((sign * e, par))
    return out


@dataclass
class StepReport:
    """The rows of one step (kind, owner index) and, filled in by a step that solves them, their impulses
    [N·s], the PD actuators' generalized forces u = γ/dt [N·m or N] in actuator order and solver statistics."""

    kinds: list = field(default_factory=list)
    owners: list = field(default_factory=list)
    gamma: np.ndarray = field(default_factory=lambda: np.zeros(0))
    actuator_force: np.ndarray = field(default_factory=lambda: np.zeros(0))
    iterations: int = 0
    converged: bool = True


def _one_dof(model: MultibodyModel, joint: int, what: str) -> tuple[int, int]:
    if not 0 <= joint < model.nbody:
        raise ValueError(f"{what}: joint {joint} does not exist (nbody = {model.nbody})")
    if model.joint_type[joint] not in (JointType.REVOLUTE, JointType.PRISMATIC):
        raise ValueError(f"{what}: joint {joint} is {JointType(model.joint_type[joint]).name}, "
                         "only revolute and prismatic joints take limits, PD actuators and couplers")
    return int(model.joint_qadr[joint]), int(model.joint_dofadr[joint])


def free_motion(model: MultibodyModel, q, v, dt: float, tau=None) -> tuple[np.ndarray, np.ndarray]:
    """(A, v*) of the step: A = M(q) + dt·D, v* = v + dt·A⁻¹ (τ − h(q, v) − D v); v* is NaN where A is singular to
    round-off (the step reports it, as the compiled ``multibody.dynamics.solve_tree_blocks``)."""
    kin = Kinematics(model, q)
    A = mass_matrix(model, q, kin=kin)
    A[np.diag_indices(model.nv)] += dt * model.dof_damping
    force = -bias_forces(model, q, v, kin=kin) - model.dof_damping * v
    if tau is not None:
        force = force + np.asarray(tau, dtype=float)
    try:
        x = np.linalg.solve(A, force)
    except np.linalg.LinAlgError:       # M(q) singular to round-off: NaN, which the step reports (STEP_SINGULAR_MASS)
        x = np.full(model.nv, np.nan)
    return A, v + dt * x


def constraint_rows(model: MultibodyModel, q, v, v_star, A_diag, dt: float, limits=(), actuators=(),
                    couplers=()) -> tuple[np.ndarray, np.ndarray, StepReport, list]:
    """The joint-constraint rows of one step: (J (nr, nv), par (nr, 4), report with kinds/owners, pd_rows).

    ``pd_rows`` lists the row index of each actuator (in actuator order). Every step builds its trees' rows
    here (``multibody.forest.tree_step_data``).
    """
    rows_J, rows_par, report = [], [], StepReport()

    def add(kind, owner, J_row, par):
        rows_J.append(J_row)
        rows_par.append(par)
        report.kinds.append(kind)
        report.owners.append(owner)

    for n, lim in enumerate(limits):
        if isinstance(lim, ConeLimit):
            for J_row, par in _cone_rows(model, q, v, v_star, A_diag, dt, lim):
                add(KIND_LIMIT, n, J_row, par)
            continue
        qa, d = _one_dof(model, lim.joint, f"limits[{n}]")
        e = np.zeros(model.nv)
        e[d] = 1.0
        w = delassus_row(e, A_diag)
        for sign, par in limit_rows(dt, q[qa], lim.lower, lim.upper, w):
            bound = lim.lower if sign > 0 else lim.upper
            if limit_in_window(dt, q[qa], bound, int(sign), v[d], v_star[d]):
                add(KIND_LIMIT, n, sign * e, par)
    pd_rows = []
    for n, act in enumerate(actuators):
        qa, d = _one_dof(model, act.joint, f"actuators[{n}]")
        e = np.zeros(model.nv)
        e[d] = 1.0
        pd_rows.append(len(rows_par))
        add(KIND_PD, n, e, pd_row(dt, q[qa], act.q_target, act.v_target, act.u_ff, act.kp, act.kd, act.effort,
                                  delassus_row(e, A_diag)))
    for n, cp in enumerate(couplers):
        qi, di = _one_dof(model, cp.joint_i, f"couplers[{n}]")
        qj, dj = _one_dof(model, cp.joint_j, f"couplers[{n}]")
        J_row = np.zeros(model.nv)
        J_row[di] += 1.0
        J_row[dj] -= cp.rho
        w = delassus_row(J_row, A_diag)
        add(KIND_COUPLER, n, J_row, coupler_row(dt, q[qi], q[qj], cp.rho, cp.offset, w))
    J = np.array(rows_J).reshape(-1, model.nv)
    par = np.array(rows_par).reshape(-1, 4)
    return J, par, report, pd_rows


__all__ = ["ConeLimit", "Coupler", "JointLimit", "PdActuator", "StepReport", "cone_swing", "constraint_rows", "free_motion"]
