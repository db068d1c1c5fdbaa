"""Derivatives of SAP steps and rollouts of models with kinematic trees (docs/identify.md, "Robots").

A tree step (convexsim.stepping, compiled or reference) returns the minimizer v of the SAP cost with the
contacts, joint limits, couplers and implicit PD actuators on one Newton matrix. At v the momentum
residual of the step's own stages (``sap_stepper.step_problem``: ``free_motion.assemble``,
``contacts.detect_contacts``, ``jacobians.contact_jacobian``, ``sap_stepper.contact_problem``) vanishes,

    g(v; q0, v0, θ) = A (v − v*) − J_cᵀ γ_c(J_c v) − J_rᵀ γ_r(J_r v) = 0,

so for any input x

    H dv = −∂g/∂x dx,      H = ∂g/∂v = A + J_cᵀ G_c J_c + J_rᵀ diag(G_r) J_r,

G_c = −∂γ_c/∂vc from ``gradients.impulse_partials`` (exact, not the solver's slip-curvature blocks) and
G_r = 1/R inside a row's box, 0 outside. H is assembled once at the step's solution and factored
(dense Cholesky: tree islands have tens of dofs); every right-hand side is one pair of triangular
solves. No Newton iteration happens here: v is the step's.

Right-hand sides −∂g/∂x at fixed v (q0, v0 and the contact set fixed):

* PD targets (analytic): the actuator row's impulse is γ = clamp(dt (−Kp'(q0 + dt vc − q̄) − Kd'(vc − v̄)
  + u_ff)) (Kp', Kd' after gain limiting, docs/articulated.md §4), so ∂g/∂q̄ = −J_rᵀ dt Kp' and
  ∂g/∂v̄ = −J_rᵀ dt Kd' while the row is inside its effort box, 0 when saturated (the saturated side's
  one-sided derivative, as for the contact boundaries).
* robot parameters (analytic, :func:`parameter_columns`): with A (v − v*) = (M + dt D)(v − v0) + dt (h + D v0
  − τ), a joint's damping d_i gives dt v_i e_i, a link's mass (a payload at the link's COM, its rotational
  inertia about the COM unchanged) gives ∂M/∂m (v − v0) + dt ∂h/∂m by CRBA and RNEA of the link alone at
  unit mass (``multibody.dynamics.unit_mass_model``). Both also move diag(A), hence every Delassus estimate
  w: the contacts' Rt = σ w, near-rigid Rn and Hunt–Crossley εs (``gradients.delassus_partials``), the
  near-rigid limit rows' R = β² w/(4π²) and the limited actuator gains (:func:`pd_row_partials`). Kp and
  Kd enter the actuator row's R and v̂ (:func:`pd_row_partials`, the gain limit included); a material's
  μ the pair's μ = 2 μa μb/(μa + μb) and the contact parameters (``gradients.kernel_parameter_partials``),
  chained through ``gradients.impulse_partials``. Rows outside their box (saturated actuators) contribute
  nothing, the saturated side's derivative.
* the previous joint and free-body configuration and velocity: central differences of the residual above
  (the step's own stages at x ± h, contact set held fixed), the same treatment as the contact kinematics'
  Mq in ``rollout``; these enter g smoothly, so the difference is O(h²) accurate; the implicit solve
  stays analytic.

Coordinates (the step's v layout): per free moving body (δrotation about W axes [rad], δposition [m]),
then every tree's joint coordinates. Only 1-dof joints (revolute, prismatic) are supported, where
q_{l+1} = q_l + dt v_{l+1} is exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from convexsim import dynamics
from convexsim.inverse.gradients import impulse_partials
from convexsim.model import ContactModel, Model, State
from convexsim.multibody.forest import Controls, write_link_rows
from convexsim.multibody.model import JointType
from convexsim.sap.constraints import eval_constraints
from convexsim.sap.joint_constraints import BETA_JOINT, delassus_row, eval_rows, pd_gains_kernel

ROBOT_KINDS = ("damping", "kp", "kd", "mass", "mu")
"""Robot (and material) parameters: ``damping:JOINT`` [N·m·s/rad or N·s/m], ``kp:ACTUATOR`` [N·m/rad or
N/m], ``kd:ACTUATOR`` [N·m·s/rad or N·s/m], ``mass:LINK`` [kg], ``mu:MATERIAL`` (the material's friction,
combined with the other side's by the scene rule)."""

Q_STEP = 1e-8
"""Central-difference step [rad, m] of the residual in the configuration."""
V_STEP = 1e-6
"""Central-difference step [rad/s, m/s] of the residual in the previous velocity (g is quadratic in it)."""
RESIDUAL_TOL = 1e-6
"""Largest relative momentum residual ‖g(v)‖/‖A (v − v*)‖ accepted at the step's solution (the
linearization holds only at the optimum; tighten the scene's solver tolerances otherwise)."""


class TreeGradientError(ValueError):
    """A parameter, model or step the tree gradients cannot handle (named)."""


# --------------------------------------------------------------------------------------------------
# parameters
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RobotParameter:
    """One robot parameter: ``kind`` in :data:`ROBOT_KINDS`, ``target`` the joint, actuator, link or
    material it belongs to."""

    kind: str
    target: str

    def label(self) -> str:
        """e.g. ``mass:iiwa_link_7``."""
        return f"{self.kind}:{self.target}"

    @staticmethod
    def parse(text: str) -> "RobotParameter":
        """``KIND:NAME`` -> RobotParameter (ValueError naming the syntax)."""
        kind, sep, target = text.strip().partition(":")
        if not sep or not target or kind not in ROBOT_KINDS:
            raise TreeGradientError(f"robot parameter {text!r}: expected KIND:NAME with KIND one of "
                                    f"{', '.join(ROBOT_KINDS)} (e.g. mass:iiwa_link_7)")
        return RobotParameter(kind, target.strip())


def _joint(model: Model, name: str, what: str):
    forest = model.forest
    if forest is None or name not in forest.joint_index:
        known = sorted(forest.joint_index) if forest is not None else []
        raise TreeGradientError(f"{what}: no joint {name!r} in the scene (joints: {', '.join(known)})")
    return forest.joint_index[name]


def _actuator(model: Model, name: str, what: str):
    k, j = _joint(model, name, what)
    for n, a in enumerate(model.forest.trees[k].actuators):
        if a.name == name:
            return k, n
    raise TreeGradientError(f"{what}: joint {name!r} has no actuator")


def _link(model: Model, name: str, what: str):
    if name not in model.body_names:
        raise TreeGradientError(f"{what}: no body {name!r} in the scene")
    b = model.body_names.index(name)
    for k, t in enumerate(model.forest.trees if model.forest is not None else ()):
        hit = np.nonzero(t.bodies == b)[0]
        if hit.size:
            return k, int(hit[0]), b
    raise TreeGradientError(f"{what}: body {name!r} is not a link of a tree (a free body's mass is not a "
                            "robot parameter)")


def robot_value(model: Model, p: RobotParameter) -> float:
    """The scene's value of ``p``."""
    what = p.label()
    if p.kind == "damping":
        k, j = _joint(model, p.target, what)
        t = model.forest.trees[k]
        return float(t.model.dof_damping[t.model.joint_dofadr[j]])
    if p.kind in ("kp", "kd"):
        k, n = _actuator(model, p.target, what)
        return float(getattr(model.forest.trees[k].actuators[n], p.kind))
    if p.kind == "mass":
        k, i, _ = _link(model, p.target, what)
        return float(model.forest.trees[k].model.body_mass[i])
    if p.target not in model.material_names:
        raise TreeGradientError(f"{what}: no material {p.target!r} "
                                f"(materials: {', '.join(model.material_names)})")
    return float(model.material_friction[model.material_names.index(p.target)])


def check_tree_model(model: Model) -> None:
    """Raise TreeGradientError unless every tree joint is 1-dof or fixed and there are no body
    constraints (welds, distances, couplers between bodies)."""
    if not model.has_trees:
        raise TreeGradientError("the model has no kinematic tree (use convexsim.inverse.rollout)")
    if model.forest.constraints:
        raise TreeGradientError("tree gradients: body constraints (welds, distances, couplers between "
                                "bodies) are not supported")
    for t in model.forest.trees:
        for j, name in enumerate(t.joint_names):
            if t.model.joint_type[j] not in (JointType.REVOLUTE, JointType.PRISMATIC, JointType.FIXED):
                raise TreeGradientError(f"tree gradients: joint {name!r} is "
                                        f"{JointType(t.model.joint_type[j]).name}; only revolute, prismatic "
                                        "and fixed joints are supported")


def with_robot_parameters(model: Model, values: dict) -> Model:
    """The model with the robot parameters ``values`` (RobotParameter -> value) replaced."""
    if not values:
        return model
    trees = list(model.forest.trees)
    body_mass = model.body_mass.copy()
    friction = model.material_friction.copy()
    for p, value in values.items():
        robot_value(model, p)                                   # validates the name
        value = float(value)
        if p.kind == "damping":
            k, j = _joint(model, p.target, p.label())
            m = trees[k].model
            damping = m.dof_damping.copy()
            damping[m.joint_dofadr[j]] = value
            trees[k] = replace(trees[k], model=replace(m, dof_damping=damping))
        elif p.kind in ("kp", "kd"):
            k, n = _actuator(model, p.target, p.label())
            acts = list(trees[k].actuators)
            acts[n] = replace(acts[n], **{p.kind: value})
            trees[k] = replace(trees[k], actuators=tuple(acts))
        elif p.kind == "mass":
            k, i, b = _link(model, p.target, p.label())
            m = trees[k].model
            mass = m.body_mass.copy()
            mass[i] = value
            trees[k] = replace(trees[k], model=replace(m, body_mass=mass))
            body_mass[b] = value
        else:
            friction[model.material_names.index(p.target)] = value
    return replace(model, forest=replace(model.forest, trees=tuple(trees)), body_mass=body_mass,
                   material_friction=friction)


# --------------------------------------------------------------------------------------------------
# coordinates
# --------------------------------------------------------------------------------------------------
def velocity_vector(model: Model, state: State) -> np.ndarray:
    """The step's v: free moving bodies' (ω, v) then the trees' joint velocities."""
    free = dynamics.moving_bodies(model)
    return np.concatenate([state.v[free].reshape(-1), np.asarray(state.tree_v, float)])


def _shift(model: Model, state: State, dq=None, dv=None, links: bool = True) -> State:
    """The state moved by dq (tangent coordinates) and dv (v layout); link rows rewritten (``links``)."""
    from convexsim.spatial import quat_exp, quat_multiply

    s = state.copy()
    free = dynamics.moving_bodies(model)
    nf = 6 * free.size
    if dq is not None:
        dq = np.asarray(dq, float)
        for i, b in enumerate(free):
            s.q[b, :3] += dq[6 * i + 3:6 * i + 6]
            quat = quat_multiply(quat_exp(dq[None, 6 * i:6 * i + 3]), s.q[b:b + 1, 3:7])[0]
            s.q[b, 3:7] = quat / np.linalg.norm(quat)
        s.tree_q = s.tree_q + dq[nf:]
    if dv is not None:
        dv = np.asarray(dv, float)
        s.v[free] += dv[:nf].reshape(-1, 6)
        s.tree_v = s.tree_v + dv[nf:]
    if links:
        write_link_rows(model.forest, s.q, s.v, s.tree_q, s.tree_v)
    return s


# --------------------------------------------------------------------------------------------------
# one step
# --------------------------------------------------------------------------------------------------
@dataclass
class StepStages:
    """The step's stages at one (model, state): A, v*, rows and contacts, the reference step's own problem
    (``stepping.sap_stepper.step_problem``, dense layout) and its contacts' Delassus estimates."""

    system: object
    contacts: object
    Jc: np.ndarray          # (3 nc, nv)
    kind: np.ndarray | None
    cpar: np.ndarray | None
    problem: object = None  # the contacts' ContactProblem (None without contacts)
    w: np.ndarray | None = None   # its Delassus estimates [1/kg]


def step_stages(model: Model, state: State, controls: Controls | None = None, contacts=None) -> StepStages:
    """The reference step's stages 1–3 (``sap_stepper.step_problem``); ``contacts`` (a Contacts) holds the
    contact set fixed (re-evaluated at this state's configuration when given by geometry pairs, see
    :func:`_same_contacts`)."""
    from convexsim.sap.problem import delassus_diagonal
    from convexsim.stepping.context import StepContext
    from convexsim.stepping.sap_stepper import step_problem

    sp = step_problem(model, state, StepContext(), controls=controls, contacts=contacts)
    w = delassus_diagonal(sp.problem) if sp.problem is not None else None
    return StepStages(sp.system, sp.contacts, sp.Jc, sp.kind, sp.cpar, sp.problem, w)


def free_velocity(model: Model, state: State) -> np.ndarray:
    """v* of the step without controls (the reference step's ``free_motion.assemble``: free bodies' free
    motion, then every tree's v0 + dt A⁻¹(−h − D v0))."""
    from convexsim.stepping.free_motion import assemble

    return assemble(model, state).v_star


def residual(st: StepStages, v: np.ndarray) -> np.ndarray:
    """g(v) = A (v − v*) − J_cᵀ γ_c(J_c v) − J_rᵀ γ_r(J_r v) [N·s] of the stages ``st``."""
    sys_ = st.system
    g = sys_.A @ (v - sys_.v_star)
    if st.contacts.count:
        vc = np.ascontiguousarray((st.Jc @ v).reshape(-1, 3))
        gam = np.empty_like(vc)
        eval_constraints(st.kind, np.ascontiguousarray(st.cpar), vc, gam, np.empty((vc.shape[0], 3, 3)), False,
                         0.0)
        g -= st.Jc.T @ gam.reshape(-1)
    if sys_.par.shape[0]:
        gr = np.empty(sys_.par.shape[0])
        eval_rows(np.ascontiguousarray(sys_.par), np.ascontiguousarray(sys_.Jr @ v), gr, np.empty_like(gr))
        g -= sys_.Jr.T @ gr
    return g


def newton_matrix(st: StepStages, v: np.ndarray) -> np.ndarray:
    """H = A + J_cᵀ G_c J_c + J_rᵀ diag(G_r) J_r at v (dense; G_c = −∂γ/∂vc exact)."""
    sys_ = st.system
    H = sys_.A.copy()
    nc = st.contacts.count
    if nc:
        vc = (st.Jc @ v).reshape(-1, 3)
        G = np.zeros((3 * nc, 3 * nc))
        for i in range(nc):
            G[3 * i:3 * i + 3, 3 * i:3 * i + 3] = -impulse_partials(int(st.kind[i]), st.cpar[i], vc[i])[1]
        H += st.Jc.T @ G @ st.Jc
    if sys_.par.shape[0]:
        gr = np.empty(sys_.par.shape[0])
        Gr = np.empty_like(gr)
        eval_rows(np.ascontiguousarray(sys_.par), np.ascontiguousarray(sys_.Jr @ v), gr, Gr)
        H += sys_.Jr.T @ (Gr[:, None] * sys_.Jr)
    return H


# --------------------------------------------------------------------------------------------------
# analytic partials of the residual in the parameters and the PD targets
# --------------------------------------------------------------------------------------------------
def row_gamma_partials(par: np.ndarray, vc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(∂γ/∂R, ∂γ/∂v̂) of every joint row (γ = clamp(y), y = (v̂ − vc)/R, ``sap.joint_constraints``) at vc:
    (−y/R, 1/R) inside the open box, 0 at or outside it (the saturated side's derivative) [γ/R, 1/R]."""
    R, v_hat, lo, hi = par[:, 0], par[:, 1], par[:, 2], par[:, 3]
    y = (v_hat - vc) / R
    inside = (lo < y) & (y < hi)
    return np.where(inside, -y / R, 0.0), np.where(inside, 1.0 / R, 0.0)


def pd_row_partials(dt: float, act, q0: float, w: float, d_kp: float = 0.0, d_kd: float = 0.0,
                    d_w: float = 0.0, d_qd: float = 0.0, d_vd: float = 0.0) -> tuple[float, float]:
    """(dR, dv̂) of an actuator row (``joint_constraints.pd_row_kernel``) for changes of Kp, Kd, the row's
    Delassus estimate w and the targets (q̄, v̄); ``act`` a PdActuator, q0 its joint's coordinate.

    The gain limit keeps Kd/Kp: (Kp', Kd') = s (Kp, Kd) with s = min(1, R0/R_nr), R0 = 1/(dt (dt Kp + Kd)),
    R_nr = β² w/(4π²), so ds = −s ((dt dKp + dKd)/(dt Kp + Kd) + dw/w) where limited (s < 1), 0 otherwise
    (the unlimited side at a tie, the kernel's branch). With c = dt Kp' + Kd', R = 1/(dt c) and
    v̂ = (−Kp' (q0 − q̄) + Kd' v̄ + u_ff)/c: dR = −R dc/c,
    dv̂ = (−dKp' (q0 − q̄) + Kp' dq̄ + dKd' v̄ + Kd' dv̄ − v̂ dc)/c.
    """
    kp, kd = act.kp, act.kd
    kp_e, kd_e = pd_gains_kernel(dt, kp, kd, w, BETA_JOINT)
    s = (kp_e + kd_e) / (kp + kd)
    ds = -s * ((dt * d_kp + d_kd) / (dt * kp + kd) + d_w / w) if s < 1.0 else 0.0
    dkp_e, dkd_e = ds * kp + s * d_kp, ds * kd + s * d_kd
    c = dt * kp_e + kd_e
    dc = dt * dkp_e + dkd_e
    e_q = q0 - act.q_target
    v_hat = (-kp_e * e_q + kd_e * act.v_target + act.u_ff) / c
    dv_hat = (-dkp_e * e_q + kp_e * d_qd + dkd_e * act.v_target + kd_e * d_vd - v_hat * dc) / c
    return -dc / (dt * c * c), dv_hat


def actuator_rows(model: Model, state: State, st: StepStages, controls: Controls | None):
    """Per pd_rows entry: (row, PdActuator as the step built it, q0 of its joint, its w)."""
    from convexsim.multibody.forest import current_actuators

    sys_ = st.system
    A_diag = np.diag(sys_.A)
    acts = {}
    out = []
    for k, n, r in sys_.pd_rows:
        tree = model.forest.trees[k]
        if k not in acts:
            acts[k] = current_actuators(tree, state.t, controls)
        act = acts[k][n]
        q0 = float(tree.q_of(state.tree_q)[tree.model.joint_qadr[act.joint]])
        out.append((r, act, q0, delassus_row(sys_.Jr[r], A_diag)))
    return out


def target_columns(model: Model, st: StepStages, v: np.ndarray, state: State, controls: Controls | None = None,
                   pd=None) -> np.ndarray:
    """−∂g/∂(q̄, v̄) of every actuator, shape (nv, nact, 2): J_rᵀ dt (Kp', Kd') inside the effort box,
    0 when saturated (:func:`pd_row_partials` with dq̄ or dv̄ = 1; module docstring). ``pd`` is
    :func:`actuator_rows` (computed from ``state``, ``controls`` when not given)."""
    sys_ = st.system
    dt = model.time_step
    pd = actuator_rows(model, state, st, controls) if pd is None else pd
    _, dg_dvhat = row_gamma_partials(sys_.par, sys_.Jr @ v) if sys_.par.shape[0] else (None, None)
    out = np.zeros((sys_.nv, len(pd), 2))
    for n, (r, act, q0, w) in enumerate(pd):
        for k, kw in enumerate(({"d_qd": 1.0}, {"d_vd": 1.0})):
            out[:, n, k] = sys_.Jr[r] * dg_dvhat[r] * pd_row_partials(dt, act, q0, w, **kw)[1]
    return out


@dataclass
class _Direct:
    """A parameter's direct effects at fixed v: on A (v − v*) [N·s], on diag(A) [kg, kg·m²], on the actuator
    gains {row: (dKp, dKd)} and on the contacts' μ (nc,)."""

    momentum: np.ndarray
    A_diag: np.ndarray
    gains: dict
    mu: np.ndarray | None = None


def _direct_effects(model: Model, state: State, st: StepStages, v: np.ndarray, p: RobotParameter) -> _Direct:
    """The direct effects of ``p`` (module docstring, "Right-hand sides")."""
    from convexsim.multibody.dynamics import bias_forces, mass_matrix, unit_mass_model

    sys_ = st.system
    dt = model.time_step
    d = _Direct(np.zeros(sys_.nv), np.zeros(sys_.nv), {})
    what = p.label()
    if p.kind == "damping":              # A = M + dt D, A (v − v*) = M (v − v0) + dt (h + D v − τ)
        k, j = _joint(model, p.target, what)
        i = sys_.tree_start[k] + int(model.forest.trees[k].model.joint_dofadr[j])
        d.momentum[i] = dt * v[i]
        d.A_diag[i] = dt
    elif p.kind == "mass":               # ∂M/∂m, ∂h/∂m: CRBA and RNEA of the link alone at unit mass
        k, b, _ = _link(model, p.target, what)
        tree = model.forest.trees[k]
        unit = unit_mass_model(tree.model, b)
        q, v0 = tree.q_of(state.tree_q), tree.v_of(state.tree_v)
        dM = mass_matrix(unit, q, kin=sys_.kins[k])
        sl = slice(sys_.tree_start[k], sys_.tree_start[k] + tree.nv)
        d.momentum[sl] = dM @ (v[sl] - v0) + dt * bias_forces(unit, q, v0, kin=sys_.kins[k])
        d.A_diag[sl] = np.diag(dM)
    elif p.kind in ("kp", "kd"):
        k, n = _actuator(model, p.target, what)
        r = next(r for kk, nn, r in sys_.pd_rows if (kk, nn) == (k, n))
        d.gains[r] = (1.0, 0.0) if p.kind == "kp" else (0.0, 1.0)
    elif st.contacts.count:              # μ = 2 μa μb/(μa + μb) per contact (stepping.contacts)
        m = model.material_names.index(p.target)
        ma = model.geom_material[st.contacts.geom_a]
        mb = model.geom_material[st.contacts.geom_b]
        mua, mub = model.material_friction[ma], model.material_friction[mb]
        den = np.where(mua + mub > 0, (mua + mub) ** 2, 1.0)
        d.mu = np.where(mua + mub > 0, 2 * ((ma == m) * mub ** 2 + (mb == m) * mua ** 2) / den, 0.0)
    return d


def _contact_delassus_change(st: StepStages, dA_diag: np.ndarray) -> np.ndarray:
    """dw of every contact for a change dA_diag of diag(A): w = ‖W‖_F/3, W = J_i diag(A)⁻¹ J_iᵀ, so
    dw = ⟨W, dW⟩_F/(9 w) with dW = −J_i diag(dA/A²) J_iᵀ (``sap.blocks.delassus_estimate``; 0 where w = 0)."""
    a = np.diag(st.system.A)
    J = st.Jc.reshape(-1, 3, a.size)
    W = np.einsum("irk,k,iqk->irq", J, 1.0 / a, J)
    dW = -np.einsum("irk,k,iqk->irq", J, dA_diag / a ** 2, J)
    w = st.w
    return np.where(w > 0, np.einsum("irq,irq->i", W, dW) / (9.0 * np.where(w > 0, w, 1.0)), 0.0)


def parameter_columns(model: Model, state: State, st: StepStages, v: np.ndarray, parameters,
                      controls: Controls | None = None, pd=None) -> np.ndarray:
    """Mθ = −∂g/∂θ at fixed v (q0, v0, contact set fixed), shape (nv, len(parameters)), analytically:

    ∂g/∂θ = ∂[A (v − v*)]/∂θ − J_cᵀ ∂γ_c/∂p (∂p/∂μ dμ + ∂p/∂w dw_c) − J_rᵀ (∂γ_r/∂R dR + ∂γ_r/∂v̂ dv̂),

    with the direct effects of :func:`_direct_effects`, the contacts' and rows' Delassus estimates w moving
    with diag(A) (a link's mass, a joint's damping), ∂γ_c/∂p from ``gradients.impulse_partials``, ∂p/∂μ
    and ∂p/∂w from ``gradients.kernel_parameter_partials`` and ``gradients.delassus_partials``, and the
    rows' (dR, dv̂) from :func:`pd_row_partials` (actuators) or dR = β²/(4π²) dw (near-rigid limit and
    coupler rows; 0 on a compliant limit).
    """
    from convexsim.inverse.gradients import PHYSICAL, delassus_partials, kernel_parameter_partials

    sys_ = st.system
    dt = model.time_step
    nc, nr = st.contacts.count, sys_.par.shape[0]
    pd = actuator_rows(model, state, st, controls) if pd is None else pd
    A_diag = np.diag(sys_.A)
    dg_dR, dg_dvhat = row_gamma_partials(sys_.par, sys_.Jr @ v) if nr else (np.zeros(0), np.zeros(0))
    if nc:
        vc = (st.Jc @ v).reshape(-1, 3)
        dgamma_dp = np.array([impulse_partials(int(st.kind[i]), st.cpar[i], vc[i])[2] for i in range(nc)])
        dp_dw = delassus_partials(st.problem, st.w)
        dp_dmu = kernel_parameter_partials(st.problem, st.w)[:, :, PHYSICAL.index("mu")]
    r_nr_per_w = BETA_JOINT ** 2 / (4.0 * np.pi ** 2)
    out = np.zeros((sys_.nv, len(parameters)))
    for j, p in enumerate(parameters):
        d = _direct_effects(model, state, st, v, p)
        dg = d.momentum.copy()
        moves_w = bool(np.any(d.A_diag))
        if nr and (moves_w or d.gains):
            dw = -(sys_.Jr ** 2) @ (d.A_diag / A_diag ** 2)
            dR, dvh = np.zeros(nr), np.zeros(nr)
            near = sys_.par[:, 0] <= r_nr_per_w * np.sum(sys_.Jr ** 2 / A_diag, axis=1) * (1.0 + 1e-12)
            dR[near] = r_nr_per_w * dw[near]             # limits and couplers (rewritten for actuators)
            for r, act, q0, w in pd:
                dR[r], dvh[r] = pd_row_partials(dt, act, q0, w, *d.gains.get(r, (0.0, 0.0)), d_w=dw[r])
            dg -= sys_.Jr.T @ (dg_dR * dR + dg_dvhat * dvh)
        if nc and (moves_w or d.mu is not None):
            dp = np.zeros((nc, 8))
            if moves_w:
                dp += dp_dw * _contact_delassus_change(st, d.A_diag)[:, None]
            if d.mu is not None:
                dp += dp_dmu * d.mu[:, None]
            dg -= st.Jc.T @ np.einsum("irp,ip->ir", dgamma_dp, dp).reshape(-1)
        out[:, j] = -dg
    return out


@dataclass
class TreeStepRecord:
    """Linearization of one tree step: H dv_{l+1} = Mv dv_l + Mq dq_l + Mθ dθ + Mtarget d(q̄, v̄)_l."""

    H: np.ndarray
    Mv: np.ndarray
    Mq: np.ndarray
    Mtheta: np.ndarray
    Mtarget: np.ndarray      # (nv, nact, 2)
    v_next: np.ndarray
    residual: float          # ‖g(v)‖ / ‖A (v − v*)‖ at the step's solution
    _factor: tuple = field(default=(), repr=False)

    def solve(self, rhs) -> np.ndarray:
        """H⁻¹ rhs (Cholesky factor of H, computed once)."""
        if not self._factor:
            try:
                self._factor = cho_factor(self.H)
            except np.linalg.LinAlgError as exc:
                raise TreeGradientError(f"the Newton matrix at the step's solution is not SPD: {exc}") \
                    from None
        return cho_solve(self._factor, rhs)


def _same_contacts(a, b) -> bool:
    return (a.count == b.count and np.array_equal(a.geom_a, b.geom_a) and np.array_equal(a.geom_b, b.geom_b))


def _central(fun, n: int, step: float) -> np.ndarray:
    """Columns (fun(+h e_j) − fun(−h e_j))/2h for j < n, fun(dx) → (nv,) or None (not comparable): one
    side only then; both None raises."""
    cols = []
    for j in range(n):
        e = np.zeros(n)
        e[j] = step
        plus, minus = fun(e), fun(-e)
        if plus is not None and minus is not None:
            cols.append((plus - minus) / (2 * step))
        elif plus is not None or minus is not None:
            base = fun(np.zeros(n))
            cols.append((plus - base) / step if plus is not None else (base - minus) / step)
        else:
            raise TreeGradientError("the contact set changes within the configuration difference step")
    return np.array(cols).T if cols else np.zeros((0, 0))


def linearize_step(model: Model, state: State, v_next: np.ndarray, parameters=(),
                   controls: Controls | None = None) -> TreeStepRecord:
    """The step of ``model`` from ``state`` whose solution is ``v_next``, linearized
    (module docstring). Raises TreeGradientError when v_next is not the step's optimum."""
    ref = step_stages(model, state, controls)
    nv = ref.system.nv
    g0 = residual(ref, v_next)
    scale = np.linalg.norm(ref.system.A @ (v_next - ref.system.v_star)) + 1e-300
    rel = float(np.linalg.norm(g0) / scale)
    if rel > RESIDUAL_TOL:
        raise TreeGradientError(f"step {state.step} (t = {state.t:.6g} s): momentum residual {rel:.2g} at the "
                                f"step's solution (> {RESIDUAL_TOL:g}): tighten the solver tolerances")
    H = newton_matrix(ref, v_next)
    nrows = ref.system.par.shape[0]
    # with SAP contacts only v* reads v0 (lagged/similar contacts read vn0; a joint limit's window reads v0
    # too, but only its presence, a jump no derivative sees)
    sap_contacts = ContactModel(model.contact_model) == ContactModel.SAP

    def rows_same(st):
        return st.system.par.shape[0] == nrows

    def g_of_v(dv):
        if sap_contacts:                   # only v* depends on v0: g = A (v − v*(v0)) + (terms free of v0)
            return -ref.system.A @ free_velocity(model, _shift(model, state, dv=dv, links=False))
        st = step_stages(model, _shift(model, state, dv=dv), controls, ref.contacts)
        return residual(st, v_next) if rows_same(st) else None

    def g_of_q(dq):
        s = _shift(model, state, dq=dq)
        st = step_stages(model, s, controls)
        if not (_same_contacts(st.contacts, ref.contacts) and rows_same(st)):
            return None
        return residual(st, v_next)

    Mv = -_central(g_of_v, nv, V_STEP)
    Mq = -_central(g_of_q, nv, Q_STEP)
    pd = actuator_rows(model, state, ref, controls)
    Mtheta = parameter_columns(model, state, ref, v_next, parameters, controls, pd)
    return TreeStepRecord(H, Mv, Mq, Mtheta, target_columns(model, ref, v_next, state, pd=pd), np.array(v_next), rel)


# --------------------------------------------------------------------------------------------------
# rollouts
# --------------------------------------------------------------------------------------------------
@dataclass
class TreeRollout:
    """States of a tree rollout (frame 0 = initial) and, if linearized, one TreeStepRecord per step."""

    model: Model
    parameters: tuple
    states: list
    records: list = field(default_factory=list)

    @property
    def nv(self) -> int:
        return int(velocity_vector(self.model, self.states[0]).size)

    @property
    def q(self):
        """Trees' joint coordinates per frame, shape (T, nq)."""
        return np.array([s.tree_q for s in self.states])

    def joint_angles(self) -> np.ndarray:
        """Alias of :attr:`q` [rad or m], shape (T, nq)."""
        return self.q

    def positions(self) -> np.ndarray:
        """COM positions of the free moving bodies, shape (T, nfree, 3) [m]."""
        free = dynamics.moving_bodies(self.model)
        return np.array([s.q[free, :3] for s in self.states])


def gradient_model(model: Model, rel_tolerance: float = 1e-12) -> Model:
    """The model with SAP tolerances tight enough for gradients (the linearization is exact only at the
    optimum; its error is of the order of the momentum residual)."""
    s = model.solver
    return replace(model, solver=replace(s, kind="sap", rel_tolerance=min(s.rel_tolerance, rel_tolerance),
                                         abs_tolerance=min(s.abs_tolerance, 1e-15),
                                         max_iterations=max(s.max_iterations, 200)))


def target_controls(model: Model, targets, l: int) -> Controls | None:
    """The Controls of step l of a rollout with PD ``targets`` (steps, nact, 2) (None: the scene's)."""
    if targets is None:
        return None
    names = [a.name for t in model.forest.trees for a in t.actuators]
    return Controls(targets={n: (float(targets[l, i, 0]), float(targets[l, i, 1]))
                             for i, n in enumerate(names)})


def tree_rollout(model: Model, state0: State, steps: int, *, values=None, parameters=(), targets=None,
                 linearize: bool = False, path: str = "auto") -> TreeRollout:
    """``steps`` SAP steps of a tree model from ``state0`` by ``convexsim.stepping.step`` (compiled where
    the model allows it) with robot parameters ``values`` (RobotParameter -> value) replaced.

    Args:
        parameters: RobotParameters to differentiate with respect to (the Mθ columns).
        targets: PD targets (q̄, v̄) per step and actuator (forest order), shape (steps, nact, 2); None: the
            scene's schedules. Given, they are the step's controller targets.
        linearize: keep every step's TreeStepRecord (for :func:`convexsim.inverse.rollout.tangents` and
            :func:`convexsim.inverse.rollout.adjoint`, which take tree rollouts too).
    """
    from convexsim.stepping import StepContext, step

    check_tree_model(model)
    values = dict(values or {})
    parameters = tuple(parameters)
    for p in list(values) + list(parameters):
        robot_value(model, p)
    m = with_robot_parameters(model, values)
    nact = sum(len(t.actuators) for t in m.forest.trees)
    if targets is not None:
        targets = np.asarray(targets, float)
        if targets.shape != (steps, nact, 2):
            raise TreeGradientError(f"targets: expected shape (steps, actuators, 2) = ({steps}, {nact}, 2), "
                                    f"got {targets.shape}")
    ctx = StepContext()
    states, records = [state0.copy()], []
    state = state0.copy()
    for l in range(int(steps)):
        ctx.controls = target_controls(m, targets, l)
        new, _ = step(m, state, ctx, strict=True, path=path)
        if linearize:
            records.append(linearize_step(m, state, velocity_vector(m, new), parameters, ctx.controls))
        state = new
        states.append(state.copy())
    return TreeRollout(m, parameters, states, records)


def target_gradient(ro: TreeRollout, multipliers: np.ndarray) -> np.ndarray:
    """dL/d(q̄, v̄) of every step and actuator, shape (steps, nact, 2), from the adjoint's per-step
    multipliers u_l = H_l⁻¹ a_l (``adjoint(..., step_multipliers=True)``): dL/dtarget_l = Mtarget_lᵀ u_l."""
    return np.array([np.einsum("nak,n->ak", rec.Mtarget, u) for rec, u in zip(ro.records, multipliers)])


def joint_coordinate_rows(model: Model) -> np.ndarray:
    """Indices of the trees' joint coordinates in the v (and tangent q) layout."""
    nf = 6 * dynamics.moving_bodies(model).size
    return nf + np.arange(model.forest.nv)


def free_position_rows(model: Model) -> np.ndarray:
    """Indices of the free bodies' COM positions in the tangent q layout."""
    free = dynamics.moving_bodies(model)
    return np.array([6 * b + 3 + k for b in range(free.size) for k in range(3)], dtype=int)


__all__ = [
    "ROBOT_KINDS",
    "RobotParameter",
    "StepStages",
    "TreeGradientError",
    "TreeRollout",
    "TreeStepRecord",
    "actuator_rows",
    "check_tree_model",
    "free_position_rows",
    "gradient_model",
    "joint_coordinate_rows",
    "linearize_step",
    "newton_matrix",
    "parameter_columns",
    "pd_row_partials",
    "residual",
    "row_gamma_partials",
    "robot_value",
    "step_stages",
    "target_columns",
    "target_controls",
    "target_gradient",
    "tree_rollout",
    "velocity_vector",
    "with_robot_parameters",
]
