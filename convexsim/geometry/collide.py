"""Whole-scene collision detection: world poses, broad phase, narrow phase, ``Contacts``.

Conventions (docs/collision.md):

* A pair is (A, B) with A the halfspace if there is one, otherwise the geometry with the lower
  index. The normal is a unit vector from A into B (moving B along +n separates the pair), ``phi``
  the signed distance [m] (< 0: penetration) and ``point`` the midpoint of the two surface points.
* Contacts are ordered by (A, B) and, within a pair, in the kernel's order.
* Every contact with ``phi <= margin`` is reported; ``margin > 0`` adds speculative contacts. The margin
  is one number for every pair, or per body: a (nbody,) array of shares m_b [m], the margin of a pair
  being m_A + m_B (the steppers pass each body's motion bound over the step, docs/sap.md).
"""

from __future__ import annotations

import threading

import numpy as np

from convexsim._jit import jit
from convexsim.geometry.boxes import box_box, capsule_box, halfspace_box, sphere_box
from convexsim.geometry.convex import convex_convex, halfspace_convex
from convexsim.geometry.broadphase import (
    BOX,
    CAPSULE,
    CYLINDER,
    HALFSPACE,
    MESH,
    SPHERE,
    brute_force_pairs,
    sweep_and_prune_pairs,
)
from convexsim.geometry.primitives import (MAX_PAIR_CONTACTS, capsule_capsule, halfspace_capsule, halfspace_sphere,
                                           sphere_capsule, sphere_sphere)
from convexsim.geometry.transforms import geom_world_poses
from convexsim.model import Contacts

BAD_GEOM_TYPE = -1
"""Status returned by the kernels for a geometry type they do not know."""


RANK_ORDER = (HALFSPACE, SPHERE, CAPSULE, BOX, CYLINDER, MESH)
"""The canonical kernel order of the geometry types: a pair's kernel takes its lower-ranked geometry first."""


@jit
def _rank(gtype: int) -> int:
    """Position of ``gtype`` in :data:`RANK_ORDER` (−1: unknown type)."""
    for k in range(len(RANK_ORDER)):
        if gtype == RANK_ORDER[k]:
            return k
    return -1


@jit(inline="always")
def _collide_canonical(
    t1: int,
    p1: np.ndarray,
    R1: np.ndarray,
    s1: np.ndarray,
    v1: np.ndarray,
    t2: int,
    p2: np.ndarray,
    R2: np.ndarray,
    s2: np.ndarray,
    v2: np.ndarray,
    margin: float,
    phi: np.ndarray,
    point: np.ndarray,
    normal: np.ndarray,
) -> int:
    """Dispatch a pair already in canonical order (rank(t1) <= rank(t2)); normal from 1 into 2."""
    if t2 == CYLINDER or t2 == MESH:
        if t1 == HALFSPACE:
            return halfspace_convex(p1, R1, t2, p2, R2, s2, v2, margin, phi, point, normal)
        return convex_convex(t1, p1, R1, s1, v1, t2, p2, R2, s2, v2, margin, phi, point, normal)
    if t1 == HALFSPACE:
        if t2 == SPHERE:
            return halfspace_sphere(p1, R1, p2, s2[0], margin, phi, point, normal)
        if t2 == CAPSULE:
            return halfspace_capsule(p1, R1, p2, R2, s2[0], s2[1], margin, phi, point, normal)
        if t2 == BOX:
            return halfspace_box(p1, R1, p2, R2, s2, margin, phi, point, normal)
        return 0  # halfspace–halfspace: never in contact
    if t1 == SPHERE:
        if t2 == SPHERE:
            return sphere_sphere(p1, s1[0], p2, s2[0], margin, phi, point, normal)
        if t2 == CAPSULE:
            return sphere_capsule(p1, s1[0], p2, R2, s2[0], s2[1], margin, phi, point, normal)
        return sphere_box(p1, s1[0], p2, R2, s2, margin, phi, point, normal)
    if t1 == CAPSULE:
        if t2 == CAPSULE:
            return capsule_capsule(p1, R1, s1[0], s1[1], p2, R2, s2[0], s2[1], margin, phi, point, normal)
        return capsule_box(p1, R1, s1[0], s1[1], p2, R2, s2, margin, phi, point, normal)
    return box_box(p1, R1, s1, p2, R2, s2, margin, phi, point, normal)


@jit(inline="always")
def collide_shapes(
    ta: int,
    pa: np.ndarray,
    Ra: np.ndarray,
    sa: np.ndarray,
    va: np.ndarray,
    tb: int,
    pb: np.ndarray,
    Rb: np.ndarray,
    sb: np.ndarray,
    vb: np.ndarray,
    margin: float,
    phi: np.ndarray,
    point: np.ndarray,
    normal: np.ndarray,
) -> int:
    """Contacts between geometry A (type, world position, R_WG, size, mesh vertices in G) and B, normal
    from A into B; the vertices of a non-mesh geometry are an empty (0, 3) array.

    Writes n <= MAX_PAIR_CONTACTS rows of ``phi`` (k,), ``point`` (k, 3), ``normal`` (k, 3) and
    returns n, or BAD_GEOM_TYPE for an unknown type or a mesh without vertices.
    """
    ra = _rank(ta)
    rb = _rank(tb)
    if ra < 0 or rb < 0 or (ta == MESH and va.shape[0] < 4) or (tb == MESH and vb.shape[0] < 4):
        return BAD_GEOM_TYPE
    swap = ra > rb                      # one call site: the dispatch is inlined once, in canonical order
    t1, t2 = (tb, ta) if swap else (ta, tb)
    p1, p2 = (pb, pa) if swap else (pa, pb)
    R1, R2 = (Rb, Ra) if swap else (Ra, Rb)
    s1, s2 = (sb, sa) if swap else (sa, sb)
    v1, v2 = (vb, va) if swap else (va, vb)
    n = _collide_canonical(t1, p1, R1, s1, v1, t2, p2, R2, s2, v2, margin, phi, point, normal)
    if swap:
        for k in range(n):
            for i in range(3):
                normal[k, i] = -normal[k, i]
    return n


@jit
def collide_geoms(
    ta: int,
    pa: np.ndarray,
    Ra: np.ndarray,
    sa: np.ndarray,
    tb: int,
    pb: np.ndarray,
    Rb: np.ndarray,
    sb: np.ndarray,
    margin: float,
    phi: np.ndarray,
    point: np.ndarray,
    normal: np.ndarray,
) -> int:
    """``collide_shapes`` for geometries without mesh vertices (every type but mesh)."""
    none = np.zeros((0, 3))
    return collide_shapes(ta, pa, Ra, sa, none, tb, pb, Rb, sb, none, margin, phi, point, normal)


@jit
def _geom_vertices(table: np.ndarray, ngeom: int, g: int) -> np.ndarray:
    """Mesh vertices (in G) of geometry g from a geometry table (``geometry_table``); (0, 3) if none."""
    if table.shape[0] < 2 * ngeom:
        return table[:0]
    start = int(table[ngeom + g, 0])
    return table[start:start + int(table[ngeom + g, 1])]


@jit(inline="always")
def narrow_phase(
    pairs: np.ndarray,
    npairs: int,
    geom_type: np.ndarray,
    geom_size: np.ndarray,
    pos: np.ndarray,
    rot: np.ndarray,
    gmargin: np.ndarray,
    out_geoms: np.ndarray,
    out_phi: np.ndarray,
    out_point: np.ndarray,
    out_normal: np.ndarray,
) -> int:
    """Run ``collide_shapes`` on pairs[:npairs] (A, B) and append the contacts to the out buffers.

    ``geom_size`` is the geometry table of ``geometry_table`` (sizes, then the mesh vertices), or just
    the (ngeom, 3) sizes for a model without meshes. The margin of pair (A, B) is gmargin[A] + gmargin[B] [m] (per-geometry shares, (ngeom,)).

    Returns the total number of contacts (rows beyond the buffer capacity are counted, not
    written: the caller grows the buffers and retries), or BAD_GEOM_TYPE.
    """
    phi = np.empty(MAX_PAIR_CONTACTS)
    point = np.empty((MAX_PAIR_CONTACTS, 3))
    normal = np.empty((MAX_PAIR_CONTACTS, 3))
    cap = out_phi.shape[0]
    ngeom = geom_type.shape[0]
    total = 0
    for k in range(npairs):
        a = pairs[k, 0]
        b = pairs[k, 1]
        n = collide_shapes(
            geom_type[a], pos[a], rot[a], geom_size[a], _geom_vertices(geom_size, ngeom, a),
            geom_type[b], pos[b], rot[b], geom_size[b], _geom_vertices(geom_size, ngeom, b),
            gmargin[a] + gmargin[b], phi, point, normal,
        )  # fmt: skip
        if n < 0:
            return BAD_GEOM_TYPE
        for m in range(n):
            if total < cap:
                out_geoms[total, 0] = a
                out_geoms[total, 1] = b
                out_phi[total] = phi[m]
                out_point[total] = point[m]
                out_normal[total] = normal[m]
            total += 1
    return total


class CollisionWorkspace:
    """Reusable output buffers of the broad and narrow phases; they only grow (never drop rows)."""

    def __init__(self, pair_capacity: int = 64, contact_capacity: int = 64):
        self.pairs = np.empty((pair_capacity, 2), np.int64)
        self._contacts(contact_capacity)

    def _contacts(self, capacity: int) -> None:
        self.geoms = np.empty((capacity, 2), np.int64)
        self.phi = np.empty(capacity)
        self.point = np.empty((capacity, 3))
        self.normal = np.empty((capacity, 3))

    def grow_pairs(self, needed: int) -> None:
        """Make room for at least ``needed`` pairs."""
        self.pairs = np.empty((max(needed, 2 * self.pairs.shape[0]), 2), np.int64)

    def grow_contacts(self, needed: int) -> None:
        """Make room for at least ``needed`` contacts."""
        self._contacts(max(needed, 2 * self.phi.shape[0]))


_THREAD_LOCAL = threading.local()


def _default_workspace() -> CollisionWorkspace:
    """One default workspace per thread (the buffers are reused between calls)."""
    ws = getattr(_THREAD_LOCAL, "workspace", None)
    if ws is None:
        ws = _THREAD_LOCAL.workspace = CollisionWorkspace()
    return ws


def geometry_table(model) -> np.ndarray:
    """The geometry table the kernels take in place of ``geom_size``, shape (2·ngeom + nvert, 3) [m]:
    rows [0, ngeom) are ``Model.geom_size``; row ngeom + g is (first row of g's vertices in this table,
    their count, 0) for a mesh geometry g, zeros otherwise; then the meshes' vertices in G. A model
    without meshes gets its plain (ngeom, 3) sizes."""
    size = np.ascontiguousarray(model.geom_size, dtype=np.float64)
    geom_mesh = np.asarray(getattr(model, "geom_mesh", np.zeros(0, np.int64)), dtype=np.int64)
    if not np.any(geom_mesh >= 0):
        return size
    ngeom = size.shape[0]
    meta = np.zeros((ngeom, 3))
    base = 2 * ngeom
    for g in np.flatnonzero(geom_mesh >= 0):
        m = geom_mesh[g]
        meta[g, 0] = base + model.mesh_vert_adr[m]
        meta[g, 1] = model.mesh_vert_num[m]
    return np.ascontiguousarray(np.vstack([size, meta, np.asarray(model.mesh_vert, dtype=np.float64)]))


def _model_arrays(model) -> tuple[np.ndarray, ...]:
    return (
        np.ascontiguousarray(model.geom_type, dtype=np.int64),
        geometry_table(model),
        np.ascontiguousarray(model.geom_body, dtype=np.int64),
        np.ascontiguousarray(model.body_fixed, dtype=np.bool_),
    )


def tree_filter_of(model) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The broad phase's tree-pair rule arrays of a model with kinematic trees (``broadphase.tree_admits``):
    (body_tree (nbody,) int64, −1 outside trees; body_moves (nbody,) bool, whether the body has a dof on its
    path to the world; tree_base (ntree,) int64, the fixed body each tree hangs from, −1 the world); None
    without trees."""
    forest = getattr(model, "forest", None)
    if forest is None or not forest.trees:
        return None
    body_moves = np.asarray(model.body_dof) >= 0
    for t in forest.trees:
        body_moves[t.bodies] = t.moving_bodies()
    return (np.ascontiguousarray(forest.tree_of_body(model.nbody), dtype=np.int64),
            np.ascontiguousarray(body_moves, dtype=np.bool_),
            np.ascontiguousarray(forest.base_bodies(), dtype=np.int64))


def pair_rule_of(model) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The compiled steps' pair rule, always as arrays (one numba type for every model): (geom_filter (ngeom, 2)
    int64 (group, mask) bits, all ones without a collision filter; tree_filter (body_tree, body_moves,
    tree_base), with body_tree all −1 and no trees without a forest (``broadphase.tree_admits`` then admits
    every pair the bodies' fixedness admits))."""
    geom_filter = model.collision_filter
    if geom_filter is None:
        geom_filter = np.ones((model.ngeom, 2), np.int64)
    trees = tree_filter_of(model)
    if trees is None:
        trees = (-np.ones(model.nbody, np.int64), ~np.asarray(model.body_fixed, dtype=np.bool_),
                 np.zeros(0, np.int64))
    return np.ascontiguousarray(geom_filter, dtype=np.int64), trees


def _check_inputs(model, q: np.ndarray) -> np.ndarray:
    q = np.ascontiguousarray(q, dtype=np.float64)
    if q.shape != (model.nbody, 7):
        raise ValueError(f"collide: q must have shape ({model.nbody}, 7), got {q.shape}")
    if not np.all(np.isfinite(q)):
        bad = sorted({int(b) for b in np.argwhere(~np.isfinite(q))[:, 0]})
        raise ValueError(f"collide: non-finite pose for bodies {bad}")
    qnorm = np.linalg.norm(q[:, 3:], axis=1)
    if np.any(qnorm == 0.0):
        raise ValueError(f"collide: zero quaternion for bodies {np.flatnonzero(qnorm == 0.0).tolist()}")
    types = {int(t) for t in np.asarray(model.geom_type)}
    bad_types = sorted(types - {SPHERE, BOX, CAPSULE, HALFSPACE, CYLINDER, MESH})
    if bad_types:
        raise ValueError(f"collide: unknown geometry type(s) {bad_types}")
    return q


def geom_margins(model, margin) -> np.ndarray:
    """Per-geometry margin shares m_g [m], shape (ngeom,): the margin of pair (A, B) is m_A + m_B.

    ``margin`` is a number (every pair gets it: m_g = margin/2, exact in floating point) or a (nbody,)
    array of per-body shares (m_g = margin[body of g]). Raises ValueError if negative, non-finite or
    of the wrong shape.
    """
    m = np.asarray(margin, dtype=np.float64)
    if m.ndim == 0:
        if not np.isfinite(m) or m < 0.0:
            raise ValueError(f"collide: margin must be finite and >= 0, got {float(m)}")
        return np.full(model.ngeom, 0.5 * float(m))
    if m.shape != (model.nbody,):
        raise ValueError(f"collide: a per-body margin must have shape ({model.nbody},), got {m.shape}")
    bad = np.flatnonzero(~np.isfinite(m) | (m < 0.0))
    if bad.size:
        raise ValueError(f"collide: per-body margins must be finite and >= 0; bodies {bad[:5].tolist()} "
                         f"have {m[bad[:5]].tolist()}")
    return np.ascontiguousarray(m[np.asarray(model.geom_body, dtype=np.int64)])


def candidate_pairs(model, q: np.ndarray, *, margin: float | np.ndarray = 0.0, brute_force: bool = False,
                    workspace: CollisionWorkspace | None = None) -> np.ndarray:
    """Broad-phase pairs (A, B), shape (npairs, 2), sorted by (A, B); ``margin`` as in :func:`collide`.

    ``brute_force=True`` uses the O(n²) reference instead of sort and sweep (same pair rule).
    """
    q = _check_inputs(model, q)
    gmargin = geom_margins(model, margin)
    ws = _default_workspace() if workspace is None else workspace
    pos, rot = geom_world_poses(model, q)
    return _pairs(model, pos, rot, gmargin, brute_force, ws)


def _pairs(model, pos, rot, gmargin: np.ndarray, brute_force: bool, ws: CollisionWorkspace) -> np.ndarray:
    geom_type, geom_size, geom_body, body_fixed = _model_arrays(model)
    geom_filter, tree_filter = pair_rule_of(model)       # always arrays: one compiled variant for every model
    kernel = brute_force_pairs if brute_force else sweep_and_prune_pairs
    while True:
        npairs = kernel(geom_type, geom_size, geom_body, body_fixed, pos, rot, gmargin, ws.pairs,
                        geom_filter, tree_filter)
        if npairs <= ws.pairs.shape[0]:
            break
        ws.grow_pairs(npairs)
    pairs = ws.pairs[:npairs].copy()
    ngeom = max(model.ngeom, 1)
    return pairs[np.argsort(pairs[:, 0] * ngeom + pairs[:, 1], kind="stable")]


def collide(model, q: np.ndarray, *, margin: float | np.ndarray = 0.0,
            workspace: CollisionWorkspace | None = None) -> Contacts:
    """All contacts with phi <= margin between geometries of different, not both fixed, bodies (and, with a
    ``model.collision_filter``, only between geometries it admits; in a model with trees, never between two
    links of one tree, a link and its tree's base, or two bodies without dofs: ``geometry.broadphase``).

    Args:
        model: a ``convexsim.model.Model``.
        q: body poses (x, y, z, qw, qx, qy, qz), shape (nbody, 7) [m, -].
        margin: report contacts with gap phi <= margin [m] (speculative contacts for margin > 0): one
            number for every pair, or a (nbody,) array of per-body shares m_b, pair margin m_A + m_B.
        workspace: buffers to reuse (default: one per thread); they grow as needed.

    Returns:
        ``Contacts`` (normal from A into B, A = halfspace or lower geom index).

    Raises:
        ValueError: bad q shape, non-finite pose, zero quaternion, negative/non-finite/misshaped margin,
            unknown geom type.
    """
    q = _check_inputs(model, q)
    gmargin = geom_margins(model, margin)
    ws = _default_workspace() if workspace is None else workspace
    pos, rot = geom_world_poses(model, q)
    pairs = _pairs(model, pos, rot, gmargin, False, ws)
    geom_type, geom_size, geom_body, _ = _model_arrays(model)
    while True:
        nc = narrow_phase(pairs, pairs.shape[0], geom_type, geom_size, pos, rot, gmargin,
                          ws.geoms, ws.phi, ws.point, ws.normal)
        if nc == BAD_GEOM_TYPE:
            raise ValueError(f"collide: unknown geometry type in {sorted(set(geom_type.tolist()))}")
        if nc <= ws.phi.shape[0]:
            break
        ws.grow_contacts(nc)
    ga = ws.geoms[:nc, 0].copy()
    gb = ws.geoms[:nc, 1].copy()
    return Contacts(
        geom_a=ga,
        geom_b=gb,
        body_a=geom_body[ga],
        body_b=geom_body[gb],
        phi=ws.phi[:nc].copy(),
        point=ws.point[:nc].copy(),
        normal=ws.normal[:nc].copy(),
    )
