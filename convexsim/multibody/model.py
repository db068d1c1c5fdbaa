"""Kinematic trees in reduced (generalized) coordinates: the model arrays and their validation.

A tree has ``nbody`` bodies, numbered so that every parent precedes its children; ``parent[b] = -1``
means the world. Every body has exactly one inboard joint (joint index = body index), connecting a
joint frame J fixed in the parent to the body frame B:

    X_PB(q) = X_PJ · X_JB(q_b),        X_PJ = (R_PJ, p_PJ) constant,

so the body frame B coincides with the joint's moving frame (Featherstone, *Rigid Body Dynamics
Algorithms*, §4.1; the URDF convention). The body's centre of mass is at ``body_com`` (in B) and its
rotational inertia ``body_inertia`` is about the COM, in B.

Joint types and their coordinates (q: configuration, v: generalized velocity):

=========  ==  ==  =====================================================================
type       nq  nv  q  →  X_JB(q);  v
=========  ==  ==  =====================================================================
FIXED       0   0  identity (a weld)
REVOLUTE    1   1  θ [rad]: rotation by θ about the unit axis a (in J); v = θ̇
PRISMATIC   1   1  s [m]: translation s·a (a unit, in J); v = ṡ
BALL        4   3  quaternion (w, x, y, z) of R_JB; v = ω of B relative to P, expressed in J
FREE        7   6  (p_JB, quaternion of R_JB); v = (ω, ṗ_JB) expressed in J
=========  ==  ==  =====================================================================

A FREE joint must hang from the world with X_PJ = identity, so J = W and q = (p_WB, quat_WB),
v = (ω_W, v_W): exactly convexsim's free body (conventions.md) when ``body_com`` is zero. The
coordinates of joint b occupy ``q[joint_qadr[b] : joint_qadr[b] + nq]`` and
``v[joint_dofadr[b] : joint_dofadr[b] + nv]`` (MuJoCo's qpos/dof addresses); nq ≠ nv in general.
Joint damping D [N·m·s/rad or N·s/m] and rotor armature [kg·m² or kg] are per degree of freedom;
armature is added to the mass matrix's diagonal, damping enters the implicit step as A = M + dt·D.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

import numpy as np


class JointType(enum.IntEnum):
    """Joint type codes (the values stored in ``MultibodyModel.joint_type``)."""

    FIXED = 0
    REVOLUTE = 1
    PRISMATIC = 2
    BALL = 3
    FREE = 4


JOINT_NQ = np.array([0, 1, 1, 4, 7], dtype=np.int64)
"""Configuration size per joint type (indexed by ``JointType``)."""
JOINT_NV = np.array([0, 1, 1, 3, 6], dtype=np.int64)
"""Velocity size per joint type (indexed by ``JointType``)."""


class MultibodyModelError(ValueError):
    """A tree description is invalid; the message names the field path (``joints[3].axis``)."""


@dataclass(frozen=True)
class MultibodyModel:
    """One kinematic tree (or a forest hanging from the world), flat arrays, SI units.

    Per body/joint b (nbody,): ``parent`` (-1 = world), ``joint_type``, ``joint_axis`` (unit, in J; unused
    for FIXED/BALL/FREE), ``joint_pos`` p_PJ [m] and ``joint_rot`` R_PJ (3, 3) in the parent frame,
    ``body_mass`` [kg], ``body_com`` [m] in B, ``body_inertia`` [kg·m²] about the COM in B.
    Per dof (nv,): ``dof_armature``, ``dof_damping``. Derived: ``joint_qadr``, ``joint_dofadr``, ``nq``,
    ``nv``, ``dof_body`` (the body whose joint owns each dof).
    """

    parent: np.ndarray
    joint_type: np.ndarray
    joint_axis: np.ndarray
    joint_pos: np.ndarray
    joint_rot: np.ndarray
    body_mass: np.ndarray
    body_com: np.ndarray
    body_inertia: np.ndarray
    dof_armature: np.ndarray
    dof_damping: np.ndarray
    gravity: np.ndarray
    body_names: tuple[str, ...] = ()
    joint_qadr: np.ndarray = field(init=False)
    joint_dofadr: np.ndarray = field(init=False)
    nq: int = field(init=False)
    nv: int = field(init=False)
    dof_body: np.ndarray = field(init=False)

    def __post_init__(self):
        jt = self.joint_type
        nq_j, nv_j = JOINT_NQ[jt], JOINT_NV[jt]
        object.__setattr__(self, "joint_qadr", np.concatenate([[0], np.cumsum(nq_j)[:-1]]).astype(np.int64))
        object.__setattr__(self, "joint_dofadr", np.concatenate([[0], np.cumsum(nv_j)[:-1]]).astype(np.int64))
        object.__setattr__(self, "nq", int(nq_j.sum()))
        object.__setattr__(self, "nv", int(nv_j.sum()))
        object.__setattr__(self, "dof_body", np.repeat(np.arange(jt.size), nv_j).astype(np.int64))

    @property
    def nbody(self) -> int:
        return int(self.parent.size)

    def joint_nq(self, b: int) -> int:
        return int(JOINT_NQ[self.joint_type[b]])

    def joint_nv(self, b: int) -> int:
        return int(JOINT_NV[self.joint_type[b]])

    def neutral_q(self) -> np.ndarray:
        """The zero configuration: angles and offsets 0, quaternions (1, 0, 0, 0), free positions 0."""
        q = np.zeros(self.nq)
        for b in range(self.nbody):
            t, a = self.joint_type[b], self.joint_qadr[b]
            if t == JointType.BALL:
                q[a] = 1.0
            elif t == JointType.FREE:
                q[a + 3] = 1.0
        return q

    def subtree_mass(self) -> float:
        return float(self.body_mass.sum())


@dataclass
class Joint:
    """One body and its inboard joint, as a user describes it (the input of :func:`build_tree`)."""

    name: str
    parent: int
    type: JointType
    mass: float
    inertia: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))
    com: np.ndarray = field(default_factory=lambda: np.zeros(3))
    axis: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 1.0]))
    pos: np.ndarray = field(default_factory=lambda: np.zeros(3))
    rot: np.ndarray = field(default_factory=lambda: np.eye(3))
    armature: float = 0.0
    damping: float = 0.0


def _fail(i: int, fieldname: str, msg: str):
    raise MultibodyModelError(f"joints[{i}].{fieldname}: {msg}")


def _check_joint(i: int, j: Joint, seen: set) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate one joint; returns (axis normalized, R_PJ, inertia)."""
    if j.name in seen:
        _fail(i, "name", f"duplicate name {j.name!r}")
    seen.add(j.name)
    if not -1 <= j.parent < i:
        _fail(i, "parent", f"{j.parent} must be -1 (world) or an earlier body (0..{i - 1}); "
                           "list parents before children (a cycle or an unknown parent otherwise)")
    try:
        jtype = JointType(j.type)
    except ValueError:
        _fail(i, "type", f"unknown joint type {j.type!r}")
    if not (np.isfinite(j.mass) and j.mass > 0):
        _fail(i, "mass", f"must be finite and > 0, got {j.mass}")
    inertia = np.asarray(j.inertia, dtype=float)
    if inertia.shape != (3, 3) or not np.all(np.isfinite(inertia)) or not np.allclose(inertia, inertia.T):
        _fail(i, "inertia", "must be a finite symmetric 3×3 matrix")
    if np.min(np.linalg.eigvalsh(inertia)) < -1e-12 * max(1.0, np.abs(inertia).max()):
        _fail(i, "inertia", "must be positive semidefinite")
    axis = np.asarray(j.axis, dtype=float)
    n = np.linalg.norm(axis)
    if jtype in (JointType.REVOLUTE, JointType.PRISMATIC) and not (np.isfinite(n) and n > 1e-9):
        _fail(i, "axis", f"must be a finite nonzero 3-vector, got {axis.tolist()}")
    axis = axis / n if n > 0 else np.array([0.0, 0.0, 1.0])
    R = np.asarray(j.rot, dtype=float)
    if R.shape != (3, 3) or not np.allclose(R @ R.T, np.eye(3), atol=1e-9) or np.linalg.det(R) < 0:
        _fail(i, "rot", "must be a proper rotation matrix")
    pos = np.asarray(j.pos, dtype=float)
    if pos.shape != (3,) or not np.all(np.isfinite(pos)):
        _fail(i, "pos", "must be a finite 3-vector")
    if jtype == JointType.FREE and (j.parent != -1 or np.any(pos != 0) or np.any(R != np.eye(3))):
        _fail(i, "type", "a free joint must hang from the world (parent -1) with the identity joint frame")
    for name in ("armature", "damping"):
        val = getattr(j, name)
        if not (np.isfinite(val) and val >= 0):
            _fail(i, name, f"must be finite and >= 0, got {val}")
    return axis, R, inertia


def build_tree(joints: list[Joint], gravity=(0.0, 0.0, -9.81)) -> MultibodyModel:
    """A validated :class:`MultibodyModel` from a list of joints (parents first).

    Raises:
        MultibodyModelError: with the field path of the first bad entry.
    """
    if not joints:
        raise MultibodyModelError("joints: a tree needs at least one body")
    seen: set = set()
    axes, rots, inertias = [], [], []
    for i, j in enumerate(joints):
        a, R, inertia = _check_joint(i, j, seen)
        axes.append(a)
        rots.append(R)
        inertias.append(inertia)
    types = np.array([int(j.type) for j in joints], dtype=np.int64)
    nv_j = JOINT_NV[types]
    arm = np.repeat([j.armature for j in joints], nv_j)
    damp = np.repeat([j.damping for j in joints], nv_j)
    g = np.asarray(gravity, dtype=float)
    if g.shape != (3,) or not np.all(np.isfinite(g)):
        raise MultibodyModelError("gravity: must be a finite 3-vector")
    return MultibodyModel(
        parent=np.array([j.parent for j in joints], dtype=np.int64),
        joint_type=types,
        joint_axis=np.array(axes),
        joint_pos=np.array([np.asarray(j.pos, float) for j in joints]),
        joint_rot=np.array(rots),
        body_mass=np.array([float(j.mass) for j in joints]),
        body_com=np.array([np.asarray(j.com, float) for j in joints]),
        body_inertia=np.array(inertias),
        dof_armature=arm.astype(float),
        dof_damping=damp.astype(float),
        gravity=g,
        body_names=tuple(j.name for j in joints),
    )


# ---- the joint rows' descriptions of a tree (limits, cone limits, PD actuators, couplers), read by the
# packing of the compiled steps and by the reference steps

@dataclass(frozen=True)
class JointLimit:
    """lower <= q_joint <= upper [rad or m] on a 1-dof joint (an infinite side is absent)."""

    joint: int
    lower: float = -math.inf
    upper: float = math.inf


@dataclass(frozen=True)
class ConeLimit:
    """Swing limit θ <= angle [rad] of a ball joint: θ is the angle between the unit ``axis`` a (in J) and
    its image R_JB·a in the child, so the child's copy of a stays in a cone of half-angle ``angle`` about a;
    twist about a is free."""

    joint: int
    axis: tuple
    angle: float


@dataclass(frozen=True)
class PdActuator:
    """u = clamp(−Kp (q − q_target) − Kd (v − v_target) + u_ff, −effort, effort) on a 1-dof joint."""

    joint: int
    kp: float
    kd: float
    q_target: float = 0.0
    v_target: float = 0.0
    u_ff: float = 0.0
    effort: float = math.inf


@dataclass(frozen=True)
class Coupler:
    """q_i = ρ q_j + offset between two 1-dof joints."""

    joint_i: int
    joint_j: int
    rho: float = 1.0
    offset: float = 0.0


__all__ = [
    "ConeLimit",
    "Coupler",
    "JOINT_NQ",
    "JOINT_NV",
    "Joint",
    "JointLimit",
    "JointType",
    "MultibodyModel",
    "MultibodyModelError",
    "PdActuator",
    "build_tree",
]
