"""Kinematic trees into Drake: links, joints, limits, PD actuators and joint couplers of a convexsim forest as
the same MultibodyPlant elements, so that ``bench --vs drake`` times the robot, not loose links.

Correspondence (docs/performance.md):

* link b of a tree: a RigidBody whose frame is the joint's moving frame B, with the link's mass, its centre
  of mass ``body_com`` (in B) and its central inertia; joint b: a FixedOffsetFrame X_PJ = (joint_rot,
  joint_pos) on the parent (the world for a root: convexsim stores a root's X_PJ in world coordinates)
  and the joint (revolute, prismatic, weld, quaternion floating) from it to B, with the joint's damping;
* joint limits: the joint's position limits (Drake's SAP enforces them as limit constraints);
* actuators: a JointActuator with PdControllerGains (Kp, Kd) and the effort limit; each tree is a model
  instance whose desired-state port is fed the scene's targets (a piecewise-linear trajectory source
  when a target moves, a constant otherwise) and whose actuation port the feedforward u_ff;
* couplers q_i = ρ q_j + offset: Drake's coupler constraint;
* a link's collision geometries: on the link's body, posed in B as X_B,Bcm · X_Bcm,G (convexsim poses them
  in the link's COM frame, whose axes are B's).

Not translated (``tree_problem`` says why): ball joints (Drake's ball joint is parameterized by roll-pitch-
yaw, not a quaternion), rotor armature, welds and distance constraints.
"""

from __future__ import annotations

import math

import numpy as np

from convexsim.model import Model, State
from convexsim.multibody.model import JointType


def tree_problem(model: Model) -> str:
    """Why a tree scene cannot be given to Drake ("" if it can)."""
    forest = getattr(model, "forest", None)
    for tree in getattr(forest, "trees", ()):
        m = tree.model
        for b, name in enumerate(tree.joint_names):
            if int(m.joint_type[b]) == JointType.BALL:
                return (f"joint {name!r} is a ball joint, which the Drake translation lacks (Drake's ball joint "
                        "is roll-pitch-yaw, not a quaternion)")
        if np.any(np.asarray(m.dof_armature) != 0.0):
            return "the scene has rotor armature, which the Drake translation lacks"
    from convexsim.multibody.forest import JointCoupler

    if any(not isinstance(c, JointCoupler) for c in getattr(forest, "constraints", ())):
        return "the scene has welds or distance constraints, which the Drake translation lacks"
    return ""


def link_bodies(model: Model) -> set[int]:
    """Model body indices of every tree link."""
    forest = getattr(model, "forest", None)
    return {int(b) for t in getattr(forest, "trees", ()) for b in t.bodies}


class DrakeTrees:
    """The forest's Drake elements: per tree its model instance, link bodies and joints; per Model link body
    its Drake body and the pose of its COM frame in the link frame (for geometries and positions)."""

    def __init__(self, plant, model: Model):
        from pydrake.math import RigidTransform, RotationMatrix
        from pydrake.multibody.tree import (FixedOffsetFrame, PrismaticJoint, QuaternionFloatingJoint,
                                            RevoluteJoint, RotationalInertia, SpatialInertia, WeldJoint)

        self.plant, self.model = plant, model
        self.instances, self.joints, self.body_of = [], [], {}
        self.com_of: dict[int, np.ndarray] = {}
        for k, tree in enumerate(model.forest.trees):
            m = tree.model
            inst = plant.AddModelInstance(f"tree{k}")
            links, joints = [], []
            for b in range(m.nbody):
                I = np.asarray(m.body_inertia[b], float)
                M = SpatialInertia.MakeFromCentralInertia(
                    float(m.body_mass[b]), np.asarray(m.body_com[b], float),
                    RotationalInertia(I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2]))
                links.append(plant.AddRigidBody(f"t{k}_{tree.joint_names[b]}_link", inst, M))
            for b in range(m.nbody):
                parent = plant.world_frame() if m.parent[b] < 0 else links[m.parent[b]].body_frame()
                X_PJ = RigidTransform(RotationMatrix(np.asarray(m.joint_rot[b], float)),
                                      np.asarray(m.joint_pos[b], float))
                frame = plant.AddFrame(FixedOffsetFrame(f"t{k}_{tree.joint_names[b]}_J", parent, X_PJ))
                child = links[b].body_frame()
                jt, name = int(m.joint_type[b]), tree.joint_names[b]
                damping = float(m.dof_damping[m.joint_dofadr[b]]) if m.joint_nv(b) else 0.0
                if jt == JointType.REVOLUTE:
                    joint = RevoluteJoint(name, frame, child, np.asarray(m.joint_axis[b], float), damping)
                elif jt == JointType.PRISMATIC:
                    joint = PrismaticJoint(name, frame, child, np.asarray(m.joint_axis[b], float),
                                           -math.inf, math.inf, damping)
                elif jt == JointType.FREE:
                    joint = QuaternionFloatingJoint(name, frame, child)
                else:
                    joint = WeldJoint(name, frame, child, RigidTransform())
                joints.append(plant.AddJoint(joint))
            for lim in tree.limits:
                joints[lim.joint].set_position_limits([lim.lower], [lim.upper])
            self._add_actuators(plant, tree, joints)
            for b, body in enumerate(tree.bodies):
                self.body_of[int(body)] = links[b]
                self.com_of[int(body)] = np.asarray(m.body_com[b], float)
            self.instances.append(inst)
            self.joints.append(joints)
        self._add_couplers(plant, model)

    @staticmethod
    def _add_actuators(plant, tree, joints) -> None:
        from pydrake.multibody.tree import PdControllerGains

        for a in tree.actuators:
            act = plant.AddJointActuator(f"{tree.joint_names[a.joint]}_actuator", joints[a.joint], a.effort)
            act.set_controller_gains(PdControllerGains(p=a.kp, d=a.kd))

    def _add_couplers(self, plant, model: Model) -> None:
        from convexsim.multibody.forest import JointCoupler

        for c in model.forest.constraints:
            if isinstance(c, JointCoupler):
                ki, bi = model.forest.joint_index[c.joint]
                kj, bj = model.forest.joint_index[c.reference]
                plant.AddCouplerConstraint(self.joints[ki][bi], self.joints[kj][bj], c.rho, c.offset)

    def geometry_frame(self, b: int):
        """(Drake body, X_B,Bcm) of Model link body b: geometries posed in its COM frame go on the link."""
        from pydrake.math import RigidTransform

        return self.body_of[b], RigidTransform(self.com_of[b])

    def connect_targets(self, builder, duration: float) -> None:
        """Feed every tree's desired-state port (targets q_d, v_d of its actuators, in actuator order) and
        actuation port (feedforward u_ff): constants, or a first-order-hold trajectory through the union of the
        actuators' knots, held flat before the first and after the last (as ``Actuator.target``), so that v_d
        is each segment's slope."""
        from pydrake.systems.primitives import ConstantVectorSource, TrajectorySource
        from pydrake.trajectories import PiecewisePolynomial

        plant = self.plant
        for inst, tree in zip(self.instances, self.model.forest.trees):
            acts = tree.actuators
            if not acts:
                continue
            plant_port = plant.get_desired_state_input_port(inst)
            moving = any(len(a.times) > 1 for a in acts) and all(a.velocity is None for a in acts)
            if moving:
                knots = sorted({0.0, float(duration) + 1.0, *(t for a in acts for t in a.times)})
                values = np.array([[a.target(t)[0] for t in knots] for a in acts])
                traj = PiecewisePolynomial.FirstOrderHold(knots, values)
                source = builder.AddSystem(TrajectorySource(traj, output_derivative_order=1))
            else:
                x_d = np.array([a.target(0.0)[0] for a in acts] + [a.target(0.0)[1] for a in acts])
                source = builder.AddSystem(ConstantVectorSource(x_d))
            builder.Connect(source.get_output_port(0), plant_port)
            u_ff = builder.AddSystem(ConstantVectorSource(np.array([a.u_ff for a in acts])))
            builder.Connect(u_ff.get_output_port(0), plant.get_actuation_input_port(inst))

    def set_state(self, ctx, state: State) -> None:
        """The trees' joint positions and velocities from ``state.tree_q``/``tree_v`` (a free joint's
        (p, quaternion) reordered to Drake's (quaternion, p))."""
        plant = self.plant
        for tree, joints in zip(self.model.forest.trees, self.joints):
            m = tree.model
            q, v = tree.q_of(state.tree_q), tree.v_of(state.tree_v)
            for b, joint in enumerate(joints):
                qa, da, nq, nv = m.joint_qadr[b], m.joint_dofadr[b], m.joint_nq(b), m.joint_nv(b)
                if nq == 0:
                    continue
                qb = np.asarray(q[qa:qa + nq], float)
                if int(m.joint_type[b]) == JointType.FREE:
                    qb = np.concatenate([qb[3:], qb[:3]])
                _set_joint(plant, ctx, joint, qb, np.asarray(v[da:da + nv], float))

    def com_position(self, ctx, b: int) -> np.ndarray:
        """World position [m] of Model link body b's centre of mass."""
        X = self.plant.EvalBodyPoseInWorld(ctx, self.body_of[b])
        return np.asarray(X.multiply(self.com_of[b]), float)


def _set_joint(plant, ctx, joint, q: np.ndarray, v: np.ndarray) -> None:
    """Write one joint's q and v into the plant context through the plant's state vectors."""
    x_q = plant.GetPositions(ctx)
    x_v = plant.GetVelocities(ctx)
    x_q[joint.position_start():joint.position_start() + joint.num_positions()] = q
    x_v[joint.velocity_start():joint.velocity_start() + joint.num_velocities()] = v
    plant.SetPositions(ctx, x_q)
    plant.SetVelocities(ctx, x_v)


__all__ = ["DrakeTrees", "link_bodies", "tree_problem"]
