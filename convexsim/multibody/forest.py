"""The kinematic trees of a scene (a forest), living next to its free bodies.

A scene's bodies stay what they are in ``convexsim.model.Model``: free bodies own 6 dofs each; the links
of a tree are bodies too (for collision, trajectories and viewers) but their motion comes from the tree's
joint coordinates. ``State.tree_q``/``State.tree_v`` hold the trees' coordinates, tree after tree (tree
``k`` at ``q_start``/``v_start``), and the link bodies' rows of ``State.q``/``State.v`` are written by
forward kinematics (:func:`write_link_rows`): the pose of the link's centre of mass and R_WB, the COM
velocity and the angular velocity in W, exactly the free-body convention.

Each tree carries its joint limits, PD actuators (targets constant or piecewise linear in time) and
couplers; :func:`tree_step_data` gives one step's (A, v*, joint rows) of a tree with
``reference_step``'s formulas (A = M(q0) + dt·D, v* = v0 + dt A⁻¹(τ − h − D v0)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from convexsim.geometry.transforms import rot_to_quat
from convexsim.multibody.kinematics import Kinematics
from convexsim.multibody.model import Coupler, JointLimit, MultibodyModel, PdActuator
from convexsim.multibody.reference_step import constraint_rows, free_motion


@dataclass(frozen=True)
class Actuator:
    """An implicit PD actuator on a 1-dof joint of a tree (``joint``: body index in the tree).

    The position target is piecewise linear through (``times``, ``values``) (a constant: one point),
    held constant outside; the velocity target is ``velocity`` if given, else the slope of the current
    segment (0 outside). u = clamp(−Kp (q − q_d) − Kd (v − v_d) + u_ff, −effort, effort).
    """

    name: str
    joint: int
    kp: float
    kd: float
    times: tuple = (0.0,)
    values: tuple = (0.0,)
    velocity: float | None = None
    u_ff: float = 0.0
    effort: float = math.inf

    def target(self, t: float) -> tuple[float, float]:
        """(q_d, v_d) at time t [s]."""
        ts, vs = self.times, self.values
        q_d = float(np.interp(t, ts, vs))
        if self.velocity is not None:
            return q_d, float(self.velocity)
        v_d = 0.0
        for i in range(len(ts) - 1):
            if ts[i] <= t < ts[i + 1]:
                v_d = (vs[i + 1] - vs[i]) / (ts[i + 1] - ts[i])
                break
        return q_d, v_d


@dataclass(frozen=True)
class Tree:
    """One kinematic tree: its MultibodyModel, the Model body index of each of its bodies, joint names,
    its slice of the forest's q and v, and its joint limits, actuators and couplers."""

    model: MultibodyModel
    bodies: np.ndarray
    joint_names: tuple
    q_start: int
    v_start: int
    limits: tuple = ()
    actuators: tuple = ()
    couplers: tuple = ()
    base_body: int = -1          # the fixed Model body the tree hangs from (−1: the world)

    @property
    def nq(self) -> int:
        return self.model.nq

    @property
    def nv(self) -> int:
        return self.model.nv

    def q_of(self, tree_q: np.ndarray) -> np.ndarray:
        return tree_q[self.q_start:self.q_start + self.nq]

    def v_of(self, tree_v: np.ndarray) -> np.ndarray:
        return tree_v[self.v_start:self.v_start + self.nv]

    def moving_bodies(self) -> np.ndarray:
        """Per tree body: True if some joint on its path to the root has a dof."""
        m = self.model
        out = np.zeros(m.nbody, dtype=bool)
        for b in range(m.nbody):
            p = m.parent[b]
            out[b] = m.joint_nv(b) > 0 or (p >= 0 and out[p])
        return out


@dataclass
class Controls:
    """What a controller commands for one step: by joint name, position targets (a number, or a pair
    (q_d, v_d)) that replace the actuator's scene targets, and generalized forces τ [N·m or N] added to the
    joint; by body name, external wrenches (τ_W [N·m], f_W [N]) at the body's centre of mass, in W (a
    6-vector, torque first, the order of ``State.v``). Returned by ``simulate(..., controller=fn)``'s
    callback as a dict {"targets": ..., "torques": ..., "wrenches": ...}."""

    targets: dict = field(default_factory=dict)
    torques: dict = field(default_factory=dict)
    wrenches: dict = field(default_factory=dict)

    @staticmethod
    def from_output(out, forest: "Forest | None", body_names: tuple = ()) -> "Controls":
        """Checked Controls from a controller's output (None, a dict or Controls); ValueError naming
        the unknown key, joint or body or the non-finite value."""
        if out is None:
            return Controls()
        if isinstance(out, Controls):
            c = out
        elif isinstance(out, dict):
            unknown = set(out) - {"targets", "torques", "wrenches"}
            if unknown:
                raise ValueError(f"controller: unknown keys {sorted(unknown)} "
                                 "(expected 'targets', 'torques' and/or 'wrenches')")
            c = Controls(dict(out.get("targets") or {}), dict(out.get("torques") or {}),
                         dict(out.get("wrenches") or {}))
        else:
            raise ValueError("controller: must return a dict with 'targets', 'torques' and/or 'wrenches', "
                             f"got {type(out).__name__}")
        joints = forest.joint_index if forest is not None else {}
        for what, d, names in (("targets", c.targets, joints), ("torques", c.torques, joints),
                               ("wrenches", c.wrenches, body_names)):
            for name, val in d.items():
                if name not in names:
                    kind = "body" if what == "wrenches" else "joint"
                    raise ValueError(f"controller.{what}: unknown {kind} {name!r}; {kind}s: {sorted(names)}")
                vals = np.atleast_1d(np.asarray(val, dtype=float))
                if not np.all(np.isfinite(vals)):
                    raise ValueError(f"controller.{what}.{name}: must be finite, got {val!r}")
                if what == "wrenches" and vals.shape != (6,):
                    raise ValueError(f"controller.wrenches.{name}: must be 6 numbers (torque, force), got {val!r}")
        for name in c.targets:
            k, j = forest.joint_index[name]
            if not any(a.joint == j and a.name == name for a in forest.trees[k].actuators):   # not its friction
                raise ValueError(f"controller.targets.{name}: joint {name!r} has no actuator")
        return c

    def wrench_array(self, body_names) -> np.ndarray | None:
        """(nbody, 6) external wrenches (τ_W, f_W) [N·m, N] by Model body index, or None without any."""
        if not self.wrenches:
            return None
        index = {n: i for i, n in enumerate(body_names)}
        W = np.zeros((len(body_names), 6))
        for name, val in self.wrenches.items():
            W[index[name]] += np.asarray(val, dtype=float)
        return W


def link_wrench_torques(tree: "Tree", kin: Kinematics, wrench: np.ndarray) -> np.ndarray:
    """Generalized forces (nv,) of external wrenches on the tree's links: τ = Σ_b J_bᵀ w_b, J_b the
    spatial Jacobian (ω_W, v_COM) of link b and w_b = (τ_W, f_W) [N·m, N] its row of ``wrench`` (nbody, 6)."""
    tau = np.zeros(tree.nv)
    for b, body in enumerate(tree.bodies):
        w = wrench[body]
        if np.any(w != 0.0):
            tau += kin.spatial_jacobian(b, tree.model.body_com[b]).T @ w
    return tau


@dataclass(frozen=True)
class Motor:
    """A torque input on a 1-dof joint (MJCF ``<motor>``, a URDF joint without a servo): the joint's generalized
    force is clamp(τ₀ + τ_in, −effort, effort) [N·m or N], τ₀ the scene's constant torque and τ_in what a
    controller commands that step (0 without one). ``dof``: the joint's index in ``State.tree_v``."""

    joint: str
    dof: int
    torque: float = 0.0
    effort: float = math.inf


def motor_forces(motors: tuple, tau: np.ndarray, v_start: int = 0) -> np.ndarray:
    """Generalized forces (n,) [N·m or N] on dofs v_start … v_start + n − 1 after the motors: τ unchanged off the
    motors' dofs; on a motor's dof clamp(τ₀ + τ, −effort, effort) (:class:`Motor`). ``tau`` is not modified."""
    out = np.array(tau, dtype=float, copy=True)
    for m in motors:
        i = m.dof - v_start
        if 0 <= i < out.shape[0]:
            out[i] = min(max(out[i] + m.torque, -m.effort), m.effort)
    return out


@dataclass(frozen=True)
class Weld:
    """Body ``body_b`` held at a fixed pose relative to ``body_a`` (a Model body index, −1 for the world).

    ``p_AP`` is the point P fixed in A's body frame (COM and axes, the free-body convention; world
    coordinates for the world) that B's centre of mass Q must coincide with, and ``R_AB`` the rotation of
    B's frame in A's that it must keep. ``stiffness`` [N/m] and ``angular_stiffness`` [N·m/rad] are
    infinite for a near-rigid weld; ``relaxation_time`` τ [s] (0: dt when near-rigid)."""

    name: str
    body_a: int
    body_b: int
    p_AP: np.ndarray
    R_AB: np.ndarray
    stiffness: float = math.inf
    angular_stiffness: float = math.inf
    relaxation_time: float = 0.0


@dataclass(frozen=True)
class Distance:
    """|p_Q − p_P| = ``length`` [m] between the point P fixed in ``body_a`` (``p_AP`` in A's body frame,
    world coordinates for the world, −1) and the point Q fixed in ``body_b`` (``p_BQ``)."""

    name: str
    body_a: int
    body_b: int
    p_AP: np.ndarray
    p_BQ: np.ndarray
    length: float
    stiffness: float = math.inf
    relaxation_time: float = 0.0


@dataclass(frozen=True)
class JointCoupler:
    """q_i = ρ q_j + offset between two 1-dof joints of any trees (forest joint names)."""

    name: str
    joint: str
    reference: str
    rho: float = 1.0
    offset: float = 0.0


@dataclass(frozen=True)
class Forest:
    """The trees of a model; ``nq``/``nv`` are the sizes of ``State.tree_q``/``State.tree_v``.

    ``constraints`` are the scene's welds, distances and couplers between bodies and joints of any trees
    or free bodies (:class:`Weld`, :class:`Distance`, :class:`JointCoupler`)."""

    trees: tuple = ()
    joint_index: dict = field(default_factory=dict)   # joint name -> (tree, body index in the tree)
    constraints: tuple = ()
    motors: tuple = ()                                 # :class:`Motor` torque inputs

    @property
    def nq(self) -> int:
        return sum(t.nq for t in self.trees)

    @property
    def nv(self) -> int:
        return sum(t.nv for t in self.trees)

    def link_bodies(self) -> np.ndarray:
        """Model body indices of all links."""
        if not self.trees:
            return np.zeros(0, np.int64)
        return np.concatenate([t.bodies for t in self.trees]).astype(np.int64)

    def base_bodies(self) -> np.ndarray:
        """(ntree,) the fixed Model body each tree hangs from, −1 for the world."""
        return np.array([t.base_body for t in self.trees], dtype=np.int64)

    def tree_of_body(self, nbody: int) -> np.ndarray:
        """(nbody,) tree index of each Model body, −1 for bodies outside trees."""
        out = np.full(nbody, -1, dtype=np.int64)
        for k, t in enumerate(self.trees):
            out[t.bodies] = k
        return out


def matrix_to_quat(R: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z) of a rotation matrix (Shepperd's method, the largest pivot; w >= 0;
    ``geometry.transforms.rot_to_quat``)."""
    out = np.empty(4)
    rot_to_quat(np.ascontiguousarray(R, dtype=float), out)     # convexsim.geometry.transforms
    return out


def link_rows(tree: Tree, q: np.ndarray, v: np.ndarray, kin: Kinematics | None = None):
    """(poses (n, 7), velocities (n, 6)) of the tree's bodies in the free-body convention: COM position
    and R_WB (body axes = the joint's moving frame B), (ω_W, v_COM,W)."""
    m = tree.model
    kin = Kinematics(m, q) if kin is None else kin
    poses = np.zeros((m.nbody, 7))
    vels = np.zeros((m.nbody, 6))
    for b in range(m.nbody):
        poses[b, :3] = kin.com_position(b)
        poses[b, 3:] = matrix_to_quat(kin.R_WB[b])
        if m.nv:
            vels[b] = kin.spatial_jacobian(b, m.body_com[b]) @ v
    return poses, vels


def write_link_rows(forest: Forest, body_q: np.ndarray, body_v: np.ndarray, tree_q: np.ndarray,
                    tree_v: np.ndarray) -> None:
    """Write every link body's row of body_q (nbody, 7) and body_v (nbody, 6) from the trees' q, v."""
    for t in forest.trees:
        poses, vels = link_rows(t, t.q_of(tree_q), t.v_of(tree_v))
        body_q[t.bodies] = poses
        body_v[t.bodies] = vels


def current_actuators(tree: Tree, t: float, controls: Controls | None = None) -> list[PdActuator]:
    """The tree's actuators as PdActuator rows at time t (controller targets override the scene's)."""
    out = []
    for a in tree.actuators:
        q_d, v_d = a.target(t)
        if controls is not None and a.name in controls.targets:
            val = np.atleast_1d(np.asarray(controls.targets[a.name], dtype=float))
            q_d = float(val[0])
            v_d = float(val[1]) if val.size > 1 else 0.0
        out.append(PdActuator(a.joint, a.kp, a.kd, q_d, v_d, a.u_ff, a.effort))
    return out


def tree_torques(tree: Tree, controls: Controls | None, motors: tuple = ()) -> np.ndarray | None:
    """Generalized forces (nv,) [N·m or N] on the tree's joints: what a controller applies, through the
    ``motors`` (:func:`motor_forces`: constant torques, effort clamps), or None when there are none."""
    tau = np.zeros(tree.nv)
    hit = False
    for name, val in (controls.torques.items() if controls is not None else ()):
        if name not in tree.joint_names:
            continue
        j = tree.joint_names.index(name)
        d, n = int(tree.model.joint_dofadr[j]), tree.model.joint_nv(j)
        tau[d:d + n] += np.atleast_1d(np.asarray(val, dtype=float))[:n]
        hit = hit or n > 0
    if any(tree.v_start <= m.dof < tree.v_start + tree.nv for m in motors):
        tau = motor_forces(motors, tau, tree.v_start)
        hit = hit or bool(tau.any())
    return tau if hit else None


def tree_step_data(tree: Tree, q: np.ndarray, v: np.ndarray, dt: float, t: float, tau=None,
                   controls: Controls | None = None):
    """(A, v*, J_rows (nr, nv), par (nr, 4), kinds, owners, pd_rows) of one step of one tree."""
    A, v_star = free_motion(tree.model, q, v, dt, tau)
    acts = current_actuators(tree, t, controls)
    J, par, report, pd_rows = constraint_rows(tree.model, q, v, v_star, np.diag(A), dt, tree.limits, acts,
                                              tree.couplers)
    return A, v_star, J, par, report.kinds, report.owners, pd_rows


__all__ = ["Actuator", "Controls", "Coupler", "Distance", "Forest", "JointCoupler", "Motor", "Weld", "JointLimit", "Tree",
           "current_actuators", "motor_forces",
           "link_rows", "link_wrench_torques", "matrix_to_quat", "tree_step_data", "tree_torques", "write_link_rows"]
