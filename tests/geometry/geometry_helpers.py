"""Hand-built Models for the collision tests (no scene package needed)."""

from __future__ import annotations

import numpy as np

from convexsim.geometry import MAX_PAIR_CONTACTS, collide_geoms, quat_to_rot
from convexsim.model import GeomType, Model
from model_builder import build_model

SPHERE, BOX, CAPSULE, HALFSPACE = GeomType.SPHERE, GeomType.BOX, GeomType.CAPSULE, GeomType.HALFSPACE
CYLINDER, MESH = GeomType.CYLINDER, GeomType.MESH
IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])


def axis_angle_quat(axis, angle: float) -> np.ndarray:
    """Unit quaternion (w, x, y, z) of a rotation by ``angle`` [rad] about ``axis``."""
    axis = np.asarray(axis, float)
    axis = axis / np.linalg.norm(axis)
    return np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * axis])


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product a ⊗ b (w, x, y, z)."""
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([
        w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
        w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
        w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
        w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
    ])


def rbound(gtype, size) -> float:
    if gtype == SPHERE:
        return float(size[0])
    if gtype == BOX:
        return float(np.linalg.norm(size))
    if gtype == CAPSULE:
        return float(size[0] + size[1])
    return float("inf")


def make_model(geoms, body_fixed=None, body_of=None, geom_pos=None, geom_quat=None) -> tuple[Model, np.ndarray]:
    """Model with one body per entry of ``geoms`` = [(type, size(3), position(3), quat(4)), ...].

    By default body b carries geometry b at its origin (geom_pos 0, geom_quat identity) and
    q[b] = (position, quat). ``body_of`` maps geometries to bodies (then the pose of a body is taken
    from its first geometry and ``geom_pos``/``geom_quat`` give the geometries' poses in the body).
    Halfspaces are put on fixed bodies. Unused arrays are zeros.
    """
    ngeom = len(geoms)
    body_of = np.arange(ngeom) if body_of is None else np.asarray(body_of)
    nbody = int(body_of.max()) + 1 if ngeom else 0
    q = np.zeros((nbody, 7))
    q[:, 3] = 1.0
    seen = set()
    for g, (gtype, size, position, quat) in enumerate(geoms):
        b = body_of[g]
        if b not in seen:
            seen.add(b)
            q[b, :3] = position
            q[b, 3:] = quat
    fixed = np.zeros(nbody, bool)
    for g, (gtype, *_rest) in enumerate(geoms):
        if gtype == HALFSPACE:
            fixed[body_of[g]] = True
    if body_fixed is not None:
        fixed = np.asarray(body_fixed, bool)
    gpos = np.zeros((ngeom, 3)) if geom_pos is None else np.asarray(geom_pos, float)
    gquat = np.tile(IDENTITY, (ngeom, 1)) if geom_quat is None else np.asarray(geom_quat, float)
    model = build_model(
        nbody, ngeom, nmat=1,
        body_fixed=fixed,
        geom_body=body_of.astype(np.int64),
        geom_type=np.array([int(g[0]) for g in geoms], np.int64),
        geom_size=np.array([np.asarray(g[1], float) for g in geoms]).reshape(ngeom, 3),
        geom_pos=gpos,
        geom_quat=gquat,
        geom_rbound=np.array([rbound(g[0], g[1]) for g in geoms]),
        material_hc_dissipation=np.array([0.0]),
    )
    return model, q


def pair(ta, sa, pa, qa, tb, sb, pb, qb, margin=0.0):
    """Contacts of one pair via ``collide_geoms``: (phi (n,), point (n, 3), normal (n, 3)), A→B."""
    phi = np.empty(MAX_PAIR_CONTACTS)
    point = np.empty((MAX_PAIR_CONTACTS, 3))
    normal = np.empty((MAX_PAIR_CONTACTS, 3))
    Ra = quat_to_rot(*np.asarray(qa, float))
    Rb = quat_to_rot(*np.asarray(qb, float))
    n = collide_geoms(int(ta), np.asarray(pa, float), Ra, np.asarray(sa, float),
                      int(tb), np.asarray(pb, float), Rb, np.asarray(sb, float),
                      float(margin), phi, point, normal)
    assert n >= 0
    return phi[:n].copy(), point[:n].copy(), normal[:n].copy()
