"""Random kinematic trees and states for the multibody tests (seeded, every joint type present)."""

from __future__ import annotations

import numpy as np

from convexsim.multibody import Joint, JointType, build_tree
from convexsim.spatial import quat_exp, quat_to_matrix


def random_rotation(rng) -> np.ndarray:
    return quat_to_matrix(quat_exp(rng.normal(size=3)))


def random_inertia(rng) -> np.ndarray:
    """A physical rotational inertia [kg·m²]: principal moments obeying the triangle inequality, rotated."""
    a, b, c = rng.uniform(0.05, 0.5, size=3)  # semi-axes of a solid ellipsoid, mass 1
    d = np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) / 5.0
    R = random_rotation(rng)
    return R @ d @ R.T


def random_tree(rng, nbody: int = 6, free_root: bool | None = None, types=None, armature=True):
    """A random tree with ``nbody`` bodies; by default every joint type appears (root FREE or not)."""
    if types is None:
        pool = [JointType.REVOLUTE, JointType.PRISMATIC, JointType.BALL, JointType.FIXED]
        types = list(rng.permutation(pool * (nbody // len(pool) + 1)))[: nbody - 1]
        root = JointType.FREE if (free_root if free_root is not None else rng.random() < 0.5) else \
            JointType.REVOLUTE
        types = [root] + types
    joints = []
    for i, t in enumerate(types):
        free = t == JointType.FREE
        parent = -1 if (free or i == 0) else int(rng.integers(-1, i)) if rng.random() < 0.2 else int(
            rng.integers(0, i))
        joints.append(Joint(
            name=f"b{i}", parent=parent, type=t,
            mass=float(rng.uniform(0.5, 3.0)), inertia=random_inertia(rng) * rng.uniform(0.5, 3.0),
            com=np.zeros(3) if free else rng.normal(scale=0.2, size=3),
            axis=rng.normal(size=3),
            pos=np.zeros(3) if free else rng.normal(scale=0.4, size=3),
            rot=np.eye(3) if free else random_rotation(rng),
            armature=float(rng.uniform(0, 0.1)) if armature else 0.0,
            damping=float(rng.uniform(0, 0.5)),
        ))
    return build_tree(joints, gravity=(0.3, -0.2, -9.81))


def random_q(model, rng) -> np.ndarray:
    q = np.zeros(model.nq)
    for b in range(model.nbody):
        t, a = model.joint_type[b], model.joint_qadr[b]
        if t in (JointType.REVOLUTE, JointType.PRISMATIC):
            q[a] = rng.uniform(-np.pi, np.pi) if t == JointType.REVOLUTE else rng.uniform(-0.5, 0.5)
        elif t == JointType.BALL:
            quat = rng.normal(size=4)
            q[a:a + 4] = quat / np.linalg.norm(quat)
        elif t == JointType.FREE:
            q[a:a + 3] = rng.normal(size=3)
            quat = rng.normal(size=4)
            q[a + 3:a + 7] = quat / np.linalg.norm(quat)
    return q
