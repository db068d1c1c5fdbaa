"""Collision detection (numba): broad and narrow phase for sphere, box, capsule, halfspace, cylinder, mesh.

``collide(model, q, margin=...)`` is the entry point used by the steppers; the per-pair kernels
(``sphere_sphere``, ``box_box``, ...) and ``collide_geoms`` are exported for tests and tools.
Conventions and the pair table are in docs/collision.md.
"""

from convexsim.geometry.boxes import box_box, capsule_box, halfspace_box, sphere_box
from convexsim.geometry.broadphase import (
    bounding_radius,
    brute_force_pairs,
    support_half_width,
    sweep_and_prune_pairs,
)
from convexsim.geometry.collide import (
    BAD_GEOM_TYPE,
    CollisionWorkspace,
    candidate_pairs,
    collide,
    collide_geoms,
    collide_shapes,
    geometry_table,
    narrow_phase,
)
from convexsim.geometry.convex import convex_convex, halfspace_convex
from convexsim.geometry.primitives import (
    MAX_PAIR_CONTACTS,
    capsule_capsule,
    halfspace_capsule,
    halfspace_sphere,
    sphere_capsule,
    sphere_sphere,
)
from convexsim.geometry.transforms import geom_world_poses, quat_to_rot

__all__ = [
    "collide",
    "candidate_pairs",
    "collide_geoms",
    "collide_shapes",
    "geometry_table",
    "convex_convex",
    "halfspace_convex",
    "narrow_phase",
    "CollisionWorkspace",
    "BAD_GEOM_TYPE",
    "MAX_PAIR_CONTACTS",
    "geom_world_poses",
    "quat_to_rot",
    "bounding_radius",
    "support_half_width",
    "sweep_and_prune_pairs",
    "brute_force_pairs",
    "halfspace_sphere",
    "halfspace_capsule",
    "halfspace_box",
    "sphere_sphere",
    "sphere_capsule",
    "sphere_box",
    "capsule_capsule",
    "capsule_box",
    "box_box",
]
