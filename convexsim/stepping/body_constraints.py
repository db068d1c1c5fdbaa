"""SAP rows of the constraints between bodies and joints of different trees, free bodies and the world:
welds, fixed distances and joint couplers (``Forest.constraints``, from a scene's ``constraints:``).

Each constraint is a set of scalar holonomic rows g(q) = 0 with ġ = J v over the articulated step's global
v (convexsim.stepping.articulated), turned into SAP rows (R, v̂, box) by
:func:`convexsim.sap.joint_constraints.holonomic_row` with the row's Delassus estimate w = Σ_k J_k²/A_kk:

* weld of B to A (6 rows): Q = B's centre of mass, P the point of A it must coincide with, R_T = R_WA R_AB
  the orientation B must keep. Position rows g = p_WQ − p_WP (world axes), J = J_Q,B − J_P,A (linear
  point Jacobians); orientation rows g = θ = log(R_WB R_Tᵀ) (a rotation vector in W,
  ``spatial.rotation_log``), and since the error
  rotation moves with Ṙ_err R_errᵀ = [ω_B − R_err ω_A]ₓ, θ̇ = J_l(θ)⁻¹ (ω_B − R_err ω_A) with J_l the left
  Jacobian of SO(3): J = J_l(θ)⁻¹ (J_ω,B − R_err J_ω,A), exact (not only at θ = 0).
* distance (1 row): d = p_WQ − p_WP, g = |d| − L, J = n̂ᵀ (J_Q,B − J_P,A) with n̂ = d/|d|; the points must
  not coincide (the direction is undefined there; the step raises naming the constraint).
* coupler (1 row): g = q_i − ρ q_j − offset, J = e_i − ρ e_j on the two joints' global dofs.

Rows are near-rigid (k = ∞: R = β² w/(4π²), τ = dt) unless the constraint has a finite stiffness k, when
R = max(1/(dt (dt + τ) k), β² w/(4π²)). At rest under a steady load f (the row's generalized force
γ/dt) the row settles where γ = v̂/R, i.e.

    |g| = |f|/k                         (compliant row)
    |g| = 2 dt² R_nr |f| = dt² β² w |f| / (2π²)   (near-rigid row)

which is the compliance the physics tests check.
"""

from __future__ import annotations

import math

import numpy as np

from convexsim.model import Model, State
from convexsim.multibody.forest import Distance, JointCoupler, Weld
from convexsim.multibody.model import JointType
from convexsim.sap.joint_constraints import KIND_COUPLER, KIND_HOLONOMIC, delassus_row, holonomic_row
from convexsim.spatial import quat_to_matrix, rotation_log, skew


class BodyConstraintError(ValueError):
    """A body constraint cannot be evaluated at this state (e.g. a distance whose points coincide)."""


def body_pose(state: State, body: int) -> tuple[np.ndarray, np.ndarray]:
    """(p_W of the body frame origin (its COM), R_WB); the world (−1) is the identity."""
    if body < 0:
        return np.zeros(3), np.eye(3)
    return np.asarray(state.q[body, :3], dtype=float), quat_to_matrix(np.asarray(state.q[body, 3:], dtype=float))


def left_jacobian_inverse(theta: np.ndarray) -> np.ndarray:
    """J_l(θ)⁻¹ = I − ½[θ]ₓ + (1/|θ|² − (1 + cos|θ|)/(2|θ| sin|θ|)) [θ]ₓ² (series below 1e-4 rad)."""
    a = float(np.linalg.norm(theta))
    S = skew(theta)
    if a < 1e-4:
        c = 1.0 / 12.0 + a * a / 720.0
    else:
        c = 1.0 / (a * a) - (1.0 + math.cos(a)) / (2.0 * a * math.sin(a))
    return np.eye(3) - 0.5 * S + c * (S @ S)


class _Addressing:
    """Where each Model body and forest joint lives in the articulated step's global v."""

    def __init__(self, model: Model, state: State, system):
        self.q = state.q
        self.free = {int(b): i for i, b in enumerate(system.free_bodies)}
        self.local = {}
        for k, t in enumerate(model.forest.trees):
            for i, b in enumerate(t.bodies):
                self.local[int(b)] = (k, i)
        self.system = system
        self.model = model

    def jacobians(self, body: int, p_W: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        """(J_ω (3, nv), J_P (3, nv), moves) of body ``body`` and its point at p_W (world)."""
        nv = self.system.nv
        Jw, Jp = np.zeros((3, nv)), np.zeros((3, nv))
        if body in self.free:
            s = self.system.clique_start[self.free[body]]
            r = p_W - self.q[body, :3]
            Jw[:, s:s + 3] = np.eye(3)
            Jp[:, s:s + 3] = -skew(r)
            Jp[:, s + 3:s + 6] = np.eye(3)
            return Jw, Jp, True
        if body in self.local:
            k, i = self.local[body]
            t = self.model.forest.trees[k]
            if t.nv == 0:
                return Jw, Jp, False
            kin = self.system.kins[k]
            p_B = kin.R_WB[i].T @ (p_W - kin.p_WB[i])
            J = kin.spatial_jacobian(i, p_B)
            s = self.system.tree_start[k]
            Jw[:, s:s + t.nv] = J[:3]
            Jp[:, s:s + t.nv] = J[3:]
            return Jw, Jp, bool(np.any(J != 0.0))
        return Jw, Jp, False

    def dof(self, joint: str) -> tuple[int, int, int]:
        """(tree, q address in State.tree_q, global dof) of a 1-dof forest joint."""
        k, n = self.model.forest.joint_index[joint]
        t = self.model.forest.trees[k]
        if t.model.joint_type[n] not in (JointType.REVOLUTE, JointType.PRISMATIC):
            raise BodyConstraintError(f"coupler: joint {joint!r} is not revolute or prismatic")
        return k, t.q_start + int(t.model.joint_qadr[n]), self.system.tree_start[k] + int(t.model.joint_dofadr[n])


def constraint_values(model: Model, state: State, c) -> np.ndarray:
    """g(q) of one constraint at ``state`` (module docstring): weld (6,) position then θ, distance (1,),
    coupler (1,)."""
    if isinstance(c, JointCoupler):
        forest = model.forest
        vals = []
        for name in (c.joint, c.reference):
            k, n = forest.joint_index[name]
            t = forest.trees[k]
            vals.append(float(state.tree_q[t.q_start + int(t.model.joint_qadr[n])]))
        return np.array([vals[0] - c.rho * vals[1] - c.offset])
    pA, RA = body_pose(state, c.body_a)
    pB, RB = body_pose(state, c.body_b)
    P = pA + RA @ c.p_AP
    if isinstance(c, Weld):
        return np.concatenate([pB - P, rotation_log(RB @ (RA @ c.R_AB).T)])
    Q = pB + RB @ c.p_BQ
    return np.array([np.linalg.norm(Q - P) - c.length])


def constraint_jacobian(model: Model, state: State, system, c, addr: _Addressing | None = None) -> np.ndarray:
    """J (nrow, nv) with ġ = J v for one constraint (module docstring)."""
    addr = _Addressing(model, state, system) if addr is None else addr
    nv = system.nv
    if isinstance(c, JointCoupler):
        _, _, di = addr.dof(c.joint)
        _, _, dj = addr.dof(c.reference)
        J = np.zeros((1, nv))
        J[0, di] += 1.0
        J[0, dj] -= c.rho
        return J
    pA, RA = body_pose(state, c.body_a)
    pB, RB = body_pose(state, c.body_b)
    P = pA + RA @ c.p_AP
    if isinstance(c, Weld):
        JwA, JpA, _ = addr.jacobians(c.body_a, P)
        JwB, JpB, _ = addr.jacobians(c.body_b, pB)
        R_err = RB @ (RA @ c.R_AB).T
        Jl_inv = left_jacobian_inverse(rotation_log(R_err))
        return np.vstack([JpB - JpA, Jl_inv @ (JwB - R_err @ JwA)])
    Q = pB + RB @ c.p_BQ
    d = Q - P
    n = np.linalg.norm(d)
    if not n > 1e-12 * max(1.0, c.length):
        raise BodyConstraintError(f"distance constraint {c.name!r}: its two points coincide "
                                  f"(|p_Q − p_P| = {n:g} m), the direction is undefined")
    _, JpA, _ = addr.jacobians(c.body_a, P)
    _, JpB, _ = addr.jacobians(c.body_b, Q)
    return ((d / n) @ (JpB - JpA))[None, :]


def constraint_rows(model: Model, state: State, system, A_diag: np.ndarray):
    """(J (nr, nv), par (nr, 4), kinds, owners) of every body constraint of the model at ``state``.

    ``owners[r]`` = (constraint index, row index within it). Raises BodyConstraintError naming the
    constraint when it cannot be evaluated.
    """
    dt = model.time_step
    addr = _Addressing(model, state, system)
    rows_J, rows_par, kinds, owners = [], [], [], []
    for ci, c in enumerate(model.forest.constraints):
        J = constraint_jacobian(model, state, system, c, addr)
        g = constraint_values(model, state, c)
        for r in range(J.shape[0]):
            w = delassus_row(J[r], A_diag)
            if not w > 0:                   # the row moves no dof (e.g. a slider's rotation): nothing to do
                continue
            if isinstance(c, JointCoupler):
                par = holonomic_row(dt, float(g[0]), w)           # rigid: k = ∞ (coupler_row's row)
                kind = KIND_COUPLER
            else:
                k = c.stiffness
                if isinstance(c, Weld) and r >= 3:
                    k = c.angular_stiffness
                par = holonomic_row(dt, float(g[r]), w, k, c.relaxation_time)
                kind = KIND_HOLONOMIC
            rows_J.append(J[r])
            rows_par.append(par)
            kinds.append(kind)
            owners.append((ci, r))
    nv = system.nv
    return (np.array(rows_J).reshape(-1, nv), np.array(rows_par).reshape(-1, 4), kinds, owners)


def constraint_forces(model: Model, state: State, owners, impulses: np.ndarray) -> dict:
    """What each body constraint transmitted over the step, by name, from its rows' impulses γ [N·s]
    (``owners`` as returned by :func:`constraint_rows`, ``impulses`` aligned with them). The row impulse
    enters the step as Jᵀγ, so with γ/dt the average force:

    * weld: (6,) = (force on B at its COM Q, torque on B) in W [N, N·m]: position rows give f = γ_p/dt
      directly; orientation rows give τ_B = J_l(θ)⁻ᵀ γ_θ/dt (the weld's torque on B; A receives −f at P
      and the matching torque). A row that moves no dof (skipped) contributes 0.
    * distance: (1,) = the force on B along n̂ = (p_Q − p_P)/|p_Q − p_P| [N]: positive pushes the points
      apart, negative pulls them together (a hanging rope reads −m·g); A receives the opposite.
    * coupler: (1,) = the generalized force on ``joint`` [N·m or N]; ``reference`` receives −ρ times it.

    Every constraint of the model has an entry (zeros when none of its rows was active).
    """
    dt = model.time_step
    cons = model.forest.constraints
    raw = {ci: np.zeros(6 if isinstance(c, Weld) else 1) for ci, c in enumerate(cons)}
    for (ci, r), g in zip(owners, np.asarray(impulses, dtype=float)):
        raw[ci][r] += g / dt
    out = {}
    for ci, c in enumerate(cons):
        f = raw[ci]
        if isinstance(c, Weld) and np.any(f[3:]):
            theta = constraint_values(model, state, c)[3:]
            f = np.concatenate([f[:3], left_jacobian_inverse(theta).T @ f[3:]])
        out[c.name] = f
    return out


def constraint_label(c) -> str:
    """'weld 'name'' etc. for messages."""
    what = {Weld: "weld", Distance: "distance", JointCoupler: "coupler"}[type(c)]
    return f"{what} {c.name!r}"


__all__ = ["BodyConstraintError", "body_pose", "constraint_forces", "constraint_jacobian", "constraint_label",
           "constraint_rows",
           "constraint_values", "left_jacobian_inverse"]
