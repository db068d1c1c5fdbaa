"""Scene ``joints:`` and ``actuators:`` → the model's kinematic trees (convexsim.multibody.forest).

Every joint whose parent is ``world`` or a fixed body starts a tree; its descendants (joints whose parent
is a link of the tree) join it, parents first. The scene's body frame of a link is at its centre of mass
with the axes of the joint's moving frame B; the tree model's B frame is the joint frame itself, so

    body_com = child_offset,     p_PJ = child_offset_of_parent + position      (parent a link)
    p_PJ = p_WP + R_WP·position, R_PJ = R_WP·R(quaternion)                      (parent fixed or world)

The schema (convexsim.scene.schema.JointSpec, ActuatorSpec, joint_problems) has already checked names,
parents, cycles, limits and gains; :func:`build_forest` raises SceneError naming the joint for what only
the tree builder sees.

A joint's dry ``friction`` f becomes one more forest actuator on it, named ``<joint>:friction``: the PD row with
Kp = 0, zero targets, Kd = ``FRICTION_KD`` and effort f, which is the joint-friction row of
convexsim.sap.joint_constraints (``joint_friction_row``) in both steppers; controller targets never reach it.
"""

from __future__ import annotations

import math

import numpy as np

from convexsim.model import State
from convexsim.multibody.forest import Actuator, Distance, Forest, JointCoupler, Motor, Tree, Weld, write_link_rows
from convexsim.multibody.model import Joint, JointType, MultibodyModelError, build_tree
from convexsim.multibody.model import ConeLimit, JointLimit
from convexsim.sap.joint_constraints import FRICTION_KD
from convexsim.scene.load import SceneError
from convexsim.spatial import quat_to_matrix

_TYPES = {"revolute": JointType.REVOLUTE, "prismatic": JointType.PRISMATIC, "fixed": JointType.FIXED,
          "ball": JointType.BALL, "free": JointType.FREE}


def build_forest(spec, body_index: dict, body_mass: np.ndarray, body_inertia: np.ndarray,
                 gravity) -> tuple[Forest, np.ndarray, np.ndarray]:
    """(Forest, tree_q, tree_v) of a validated scene; ``body_index``: body name -> Model index."""
    joints = list(spec.joints)
    bodies = {b.name: b for b in spec.bodies}
    by_child = {j.child: i for i, j in enumerate(joints)}
    children: dict[str, list[int]] = {}
    for i, j in enumerate(joints):
        children.setdefault(j.parent, []).append(i)
    roots = [i for i, j in enumerate(joints) if j.parent == "world" or j.parent not in by_child]
    trees, joint_index = [], {}
    q_all, v_all = [], []
    q_start = v_start = 0
    for r in roots:
        order = [r]
        k = 0
        while k < len(order):
            order.extend(children.get(joints[order[k]].child, []))
            k += 1
        local = {joints[i].child: n for n, i in enumerate(order)}
        mb_joints = []
        for n, i in enumerate(order):
            j = joints[i]
            R_J = quat_to_matrix(np.asarray(j.quaternion, dtype=float))
            pos = np.asarray(j.position, dtype=float)
            if j.parent in local:
                parent = local[j.parent]
                pos = np.asarray(joints[order[parent]].child_offset, dtype=float) + pos
                rot = R_J
            else:
                parent = -1
                if j.parent != "world":
                    P = bodies[j.parent]
                    R_P = quat_to_matrix(np.asarray(P.quaternion, dtype=float))
                    pos = np.asarray(P.position, dtype=float) + R_P @ pos
                    rot = R_P @ R_J
                else:
                    rot = R_J
            b = body_index[j.child]
            mb_joints.append(Joint(name=j.name, parent=parent, type=_TYPES[j.type], mass=float(body_mass[b]),
                                   inertia=body_inertia[b], com=np.asarray(j.child_offset, dtype=float),
                                   axis=np.asarray(j.axis, dtype=float), pos=pos, rot=rot,
                                   armature=j.armature, damping=j.damping))
        try:
            mb = build_tree(mb_joints, gravity=gravity)
        except MultibodyModelError as exc:
            raise SceneError([f"joints (tree of {joints[r].name!r}): {exc}"]) from None
        names = tuple(joints[i].name for i in order)
        q0 = mb.neutral_q()
        v0 = np.zeros(mb.nv)
        limits = []
        for n, i in enumerate(order):
            j = joints[i]
            if j.type == "fixed":
                continue
            qa, da = mb.joint_qadr[n], mb.joint_dofadr[n]
            if j.type in ("ball", "free"):
                nq, nv = mb.joint_nq(n), mb.joint_nv(n)
                if not isinstance(j.initial_position, float | int):
                    qj = np.asarray(j.initial_position, dtype=float)
                    qj[-4:] /= np.linalg.norm(qj[-4:])
                    q0[qa:qa + nq] = qj
                if not isinstance(j.initial_velocity, float | int):
                    v0[da:da + nv] = np.asarray(j.initial_velocity, dtype=float)
                if j.type == "ball" and j.cone_limit is not None:
                    axis = np.asarray(j.axis, dtype=float)
                    limits.append(ConeLimit(n, tuple(float(x) for x in axis / np.linalg.norm(axis)),
                                            float(j.cone_limit)))
                continue
            q0[qa] = j.initial_position
            v0[da] = j.initial_velocity
            lo = -math.inf if j.lower is None else j.lower
            hi = math.inf if j.upper is None else j.upper
            if math.isfinite(lo) or math.isfinite(hi):
                limits.append(JointLimit(n, lo, hi))
        acts = []
        for a in spec.actuators:
            if a.joint not in names:
                continue
            n = names.index(a.joint)
            if isinstance(a.target, list):
                times = tuple(float(p[0]) for p in a.target)
                values = tuple(float(p[1]) for p in a.target)
            else:
                times, values = (0.0,), (float(a.target),)
            acts.append(Actuator(name=a.joint, joint=n, kp=a.kp, kd=a.kd, times=times, values=values,
                                 velocity=a.velocity_target, u_ff=a.feedforward,
                                 effort=math.inf if a.effort is None else a.effort))
        for n, i in enumerate(order):
            j = joints[i]
            if j.friction > 0:
                acts.append(friction_actuator(j.name, n, j.friction))
        tree_k = len(trees)
        for n, nm in enumerate(names):
            joint_index[nm] = (tree_k, n)
        trees.append(Tree(model=mb, bodies=np.array([body_index[joints[i].child] for i in order], dtype=np.int64),
                          joint_names=names, q_start=q_start, v_start=v_start, limits=tuple(limits),
                          actuators=tuple(acts),
                          base_body=-1 if joints[r].parent == "world" else body_index[joints[r].parent]))
        q_all.append(q0)
        v_all.append(v0)
        q_start += mb.nq
        v_start += mb.nv
    forest = Forest(trees=tuple(trees), joint_index=joint_index, motors=scene_motors(spec, trees, joint_index))
    tq = np.concatenate(q_all) if q_all else np.zeros(0)
    tv = np.concatenate(v_all) if v_all else np.zeros(0)
    return forest, tq, tv


def scene_motors(spec, trees: list, joint_index: dict) -> tuple:
    """The scene's ``motors`` as ``multibody.forest.Motor`` (the joint's index in ``State.tree_v``, the constant
    torque, the effort limit, inf when none)."""
    out = []
    for m in spec.motors:
        k, n = joint_index[m.joint]
        tree = trees[k]
        out.append(Motor(joint=m.joint, dof=tree.v_start + int(tree.model.joint_dofadr[n]), torque=float(m.torque),
                         effort=math.inf if m.effort is None else float(m.effort)))
    return tuple(out)


FRICTION_SUFFIX = ":friction"
"""Name suffix of the actuator that carries a joint's dry friction."""


def friction_actuator(joint: str, index: int, friction: float) -> Actuator:
    """The forest actuator of a joint's dry friction f [N·m or N] (module docstring): Kp = 0, q_d = v_d = 0,
    Kd = FRICTION_KD, effort f."""
    return Actuator(name=joint + FRICTION_SUFFIX, joint=index, kp=0.0, kd=FRICTION_KD, times=(0.0,), values=(0.0,),
                    velocity=0.0, u_ff=0.0, effort=float(friction))


def attach_trees(spec, model, state, body_index: dict):
    """(model, state) with the scene's trees: link bodies lose their free-body dofs (``body_dof = -1``),
    the forest is attached and the link rows of q, v are set by forward kinematics."""
    import dataclasses

    if not spec.joints and not spec.constraints:
        return model, state
    if spec.joints:
        forest, tq, tv = build_forest(spec, body_index, model.body_mass, model.body_inertia, model.gravity)
    else:
        forest, tq, tv = Forest(), np.zeros(0), np.zeros(0)
    body_dof = np.array(model.body_dof, copy=True)
    body_dof[forest.link_bodies()] = -1
    moving = np.flatnonzero(body_dof >= 0)
    body_dof[moving] = 6 * np.arange(moving.size)
    q, v = state.q.copy(), state.v.copy()
    write_link_rows(forest, q, v, tq, tv)
    state = State(t=state.t, q=q, v=v, step=state.step, tree_q=tq, tree_v=tv)
    if spec.constraints:
        forest = dataclasses.replace(forest, constraints=build_constraints(spec, state, body_index))
    model = dataclasses.replace(model, body_dof=body_dof, forest=forest)
    return model, state


def build_constraints(spec, state: State, body_index: dict) -> tuple:
    """The scene's ``constraints`` as forest constraints, with their frames taken from the initial state
    (a weld keeps the relative pose of t = 0; a distance without ``distance`` keeps |PQ| of t = 0)."""
    out = []
    for i, c in enumerate(spec.constraints):
        name = c.name or f"constraints[{i}]"
        if c.type == "coupler":
            out.append(JointCoupler(name, c.joint, c.reference, float(c.ratio), float(c.offset)))
            continue
        a = -1 if c.body_a == "world" else body_index[c.body_a]
        b = body_index[c.body_b]
        pA, RA = _pose(state, a)
        pB, RB = _pose(state, b)
        k = math.inf if c.stiffness is None else float(c.stiffness)
        if c.type == "weld":
            ka = math.inf if c.angular_stiffness is None else float(c.angular_stiffness)
            out.append(Weld(name, a, b, RA.T @ (pB - pA), RA.T @ RB, k, ka, float(c.relaxation_time)))
            continue
        P = pA + RA @ np.asarray(c.point_a, dtype=float)
        Q = pB + RB @ np.asarray(c.point_b, dtype=float)
        d0 = float(np.linalg.norm(Q - P))
        if c.distance is None and not d0 > 1e-9:
            raise SceneError([f"constraints[{i}].point_b: the two points coincide at t = 0 ({d0:g} m apart); a "
                              "distance constraint needs distinct points (or give 'distance' > 0)"])
        length = d0 if c.distance is None else float(c.distance)
        out.append(Distance(name, a, b, np.asarray(c.point_a, dtype=float), np.asarray(c.point_b, dtype=float),
                            length, k, float(c.relaxation_time)))
    return tuple(out)


def _pose(state: State, body: int):
    if body < 0:
        return np.zeros(3), np.eye(3)
    return np.asarray(state.q[body, :3], dtype=float), quat_to_matrix(np.asarray(state.q[body, 3:], dtype=float))


__all__ = ["FRICTION_SUFFIX", "attach_trees", "build_constraints", "build_forest", "friction_actuator"]
