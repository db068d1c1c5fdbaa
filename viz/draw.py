"""Scene drawing: a compiled ``Model`` as lowered meshcat commands (dicts), plus camera framing.

Scene tree (``prefix`` is e.g. ``/meshcat/SAP``)::

    prefix/bodies/<body>            body frame B (transform = pose of B in W, or an animation)
    prefix/bodies/<body>/<geom>     geometry frame G in B (geom_pos, geom_quat), object at <geom>/<object>
    prefix/bodies/<body>/joint      optional (``joint_frames``): the inboard joint's moving frame of a link
    prefix/contacts/c<k>            contact slot k (see playback.py / live.py)

Shapes: sphere -> Sphere(r); box -> Box(2·half extents); capsule -> one triangle mesh (cylinder of
half length h along local z with two hemispherical caps); halfspace -> a ground slab (thin box whose
top face is the plane z_G = 0) with grid lines, sized from the scene's bounds; a halfspace whose
normal is not within ~25° of +z (a wall) is drawn as a faint translucent slab without grid.

Joint frames (optional): a link's body frame in the viewer is its centre of mass with the axes of its
inboard joint's moving frame J (convexsim.scene.articulated), so J sits at −body_com in that node with no
rotation; it is drawn as a triad (x red, y green, z blue) of length JOINT_FRAME_SCALE·R plus, for a revolute
or prismatic joint, the joint axis as a grey line through the origin (length 2·JOINT_FRAME_SCALE·R). The
triad moves with the link, so live, recorded and HTML views need no extra animation.

Camera (meshcat 0.3.2 cannot move the orbit target, docs/viewer.md "Drawing and camera"): the content
root ``/meshcat`` is translated by −c so that the scene centre c sits at the origin the camera orbits,
the stock grid and axes follow (both are hidden when a ground slab with its own grid is drawn), and the
eye is put at distance 1.8·R (R: bounding radius; the vertical field of view is 75°, so
R/sin(37.5°) = 1.64·R just fits the bounding sphere) along a fixed oblique direction. Following the
bodies moves that root over time (live.py, playback.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from convexsim.model import GeomType, Model

from ._math import pose_matrix, rgba_to_hex, translation_matrix

CAMERA_DIRECTION = np.array([0.55, -1.0, 0.6]) / np.linalg.norm([0.55, -1.0, 0.6])
"""Unit vector from the scene centre to the eye (z-up world)."""

CAMERA_DISTANCE_FACTOR = 1.8
"""Eye distance in bounding radii."""

WALL_OPACITY = 0.15
"""Opacity of halfspaces that are not floors (walls must not hide the scene from the camera)."""

JOINT_FRAME_SCALE = 0.08
"""Joint-frame triad length in scene bounding radii."""


# ----------------------------------------------------------------------------- command helpers
def cmd_object(path: str, obj) -> dict:
    """set_object for a meshcat ``Object`` (Mesh, LineSegments, …)."""
    return {"type": "set_object", "path": path, "object": obj.lower()}


def cmd_transform(path: str, T: np.ndarray) -> dict:
    """set_transform with a 4×4 matrix (sent column-major, float64 -> Python floats)."""
    return {"type": "set_transform", "path": path, "matrix": np.asarray(T, dtype=np.float64).T.ravel().tolist()}


def cmd_property(path: str, key: str, value) -> dict:
    """set_property (``value``: bool, number, list or dict)."""
    return {"type": "set_property", "path": path, "property": key, "value": value}


def cmd_delete(path: str) -> dict:
    """delete a subtree."""
    return {"type": "delete", "path": path}


def node_name(name: str) -> str:
    """A scene-tree node name: '/' (path separator) and control characters replaced by '_'."""
    s = re.sub(r"[/\x00-\x1f]", "_", str(name)).strip()
    return s or "_"


def geom_node_name(model: Model, g: int) -> str:
    """Node name of geometry g, e.g. ``sphere3`` (type name + geometry index)."""
    return f"{GeomType(int(model.geom_type[g])).name.lower()}{g}"


# ------------------------------------------------------------------------------------ bounds
@dataclass(frozen=True)
class Bounds:
    """Axis-aligned bounds of what is drawn [m]: lo, hi (3,); centre and bounding radius derived."""

    lo: np.ndarray
    hi: np.ndarray

    @property
    def center(self) -> np.ndarray:
        return 0.5 * (self.lo + self.hi)

    @property
    def radius(self) -> float:
        """Half the box diagonal, at least 5 cm so an empty or tiny scene still gets a sane camera."""
        return max(0.5 * float(np.linalg.norm(self.hi - self.lo)), 0.05)

    def union(self, other: "Bounds") -> "Bounds":
        return Bounds(np.minimum(self.lo, other.lo), np.maximum(self.hi, other.hi))

    def shifted(self, d) -> "Bounds":
        d = np.asarray(d, dtype=np.float64)
        return Bounds(self.lo + d, self.hi + d)


def body_reach(model: Model) -> np.ndarray:
    """Per body: max over its finite geometries of |geom_pos| + bounding radius [m] (-1: none), (nbody,)."""
    reach = np.full(model.nbody, -1.0)
    for g in range(model.ngeom):
        if int(model.geom_type[g]) == GeomType.HALFSPACE:
            continue
        b = int(model.geom_body[g])
        reach[b] = max(reach[b], float(np.linalg.norm(model.geom_pos[g]) + model.geom_rbound[g]))
    return reach


def bounds_of_positions(model: Model, positions: np.ndarray) -> Bounds:
    """Bounds of every finite geometry over body positions of shape (T, nbody, 3) or (nbody, 3)."""
    p = np.asarray(positions, dtype=np.float64).reshape(-1, model.nbody, 3)
    reach = body_reach(model)
    has = reach >= 0
    if not np.any(has):
        return Bounds(np.full(3, -0.5), np.full(3, 0.5))
    lo = (p[:, has, :] - reach[has, None]).min(axis=(0, 1))
    hi = (p[:, has, :] + reach[has, None]).max(axis=(0, 1))
    return Bounds(lo, hi)


# -------------------------------------------------------------------------------- geometry
def capsule_mesh(radius: float, half_length: float, n_around: int = 24, n_cap: int = 6):
    """Triangle mesh of a capsule along z: vertices (N, 3) and faces (M, 3), closed, shared vertices.

    Rings of latitude: the top cap (z = h + r·sinφ), then the bottom cap (z = −h + r·sinφ); the
    cylinder is the band between the two equator rings. Poles are single vertices.
    """
    ring_z, ring_r = [], []
    for k in range(n_cap - 1, -1, -1):           # top cap, from just below the pole to the equator
        phi = 0.5 * np.pi * k / n_cap
        ring_z.append(half_length + radius * np.sin(phi))
        ring_r.append(radius * np.cos(phi))
    for k in range(0, n_cap):                    # bottom cap, from the equator down
        phi = 0.5 * np.pi * k / n_cap
        ring_z.append(-half_length - radius * np.sin(phi))
        ring_r.append(radius * np.cos(phi))
    ang = 2 * np.pi * np.arange(n_around) / n_around
    verts = [[0.0, 0.0, half_length + radius]]
    for z, r in zip(ring_z, ring_r):
        verts += [[r * np.cos(a), r * np.sin(a), z] for a in ang]
    verts.append([0.0, 0.0, -half_length - radius])
    verts = np.array(verts)
    n_rings = len(ring_z)
    faces = []
    top, bottom = 0, len(verts) - 1

    def v(ring, i):
        return 1 + ring * n_around + (i % n_around)

    for i in range(n_around):
        faces.append([top, v(0, i), v(0, i + 1)])
    for ring in range(n_rings - 1):
        for i in range(n_around):
            a, b, c, d = v(ring, i), v(ring, i + 1), v(ring + 1, i), v(ring + 1, i + 1)
            faces += [[a, c, b], [b, c, d]]
    for i in range(n_around):
        faces.append([bottom, v(n_rings - 1, i + 1), v(n_rings - 1, i)])
    return verts, np.array(faces, dtype=np.int64)


def cylinder_mesh(radius: float, half_length: float, n_around: int = 32):
    """Triangle mesh of a cylinder along z (flat caps at z = ±h): vertices (N, 3) and faces (M, 3), closed.

    Two rims of ``n_around`` vertices each (bottom first, then top) and one centre vertex per cap; the caps
    and the side have their own faces, counter-clockwise seen from outside.
    """
    ang = 2 * np.pi * np.arange(n_around) / n_around
    ring = np.stack([radius * np.cos(ang), radius * np.sin(ang)], 1)
    verts = np.vstack([np.column_stack([ring, np.full(n_around, -half_length)]),
                       np.column_stack([ring, np.full(n_around, half_length)]),
                       [[0.0, 0.0, -half_length], [0.0, 0.0, half_length]]])
    bottom_c, top_c = 2 * n_around, 2 * n_around + 1
    faces = []
    for i in range(n_around):
        j = (i + 1) % n_around
        faces += [[i, j, n_around + j], [i, n_around + j, n_around + i]]      # side
        faces += [[bottom_c, j, i], [top_c, n_around + i, n_around + j]]      # caps
    return verts, np.array(faces, dtype=np.int64)


def tinted(rgba, tint, weight: float):
    """``rgba`` with its RGB blended toward ``tint`` (RGB in [0, 1] or None) by ``weight`` in [0, 1]."""
    rgba = np.asarray(rgba, dtype=np.float64).copy()
    if tint is not None and weight > 0:
        rgba[:3] = (1.0 - weight) * rgba[:3] + weight * np.asarray(tint, dtype=np.float64)[:3]
    return rgba


def _material(rgba, opacity_factor: float):
    import meshcat.geometry as mg

    alpha = float(rgba[3]) * float(opacity_factor)
    return mg.MeshLambertMaterial(color=rgba_to_hex(rgba), opacity=alpha,
                                  **({"depthWrite": False} if alpha < 1.0 else {}))


def nice_step(span: float) -> float:
    """A 1-2-5 grid spacing giving about 10 cells over ``span``."""
    raw = max(span / 10.0, 1e-6)
    e = 10.0 ** np.floor(np.log10(raw))
    for m in (1.0, 2.0, 5.0, 10.0):
        if raw <= m * e:
            return m * e
    return 10.0 * e


GROUND_HALF_RANGE = (0.25, 1.0e4)
"""Smallest and largest half size of a drawn ground slab [m]."""


def ground_size(span: float, center_xy) -> tuple[float, np.ndarray]:
    """(half size, centre) of a ground slab covering ``span`` [m] around ``center_xy``, within GROUND_HALF_RANGE;
    a span or centre that is not finite (a trajectory whose bodies flew off to 1e300 m) gives the smallest slab
    at the origin instead of a grid of infinitely many lines."""
    lo, hi = GROUND_HALF_RANGE
    c = np.asarray(center_xy, dtype=np.float64)
    if not np.all(np.isfinite(c)) or np.any(np.abs(c) > 1e12):
        c = np.zeros(2)
    half = float(span) if math.isfinite(span) else lo
    return min(max(half, lo), hi), c


def ground_objects(rgba, opacity_factor: float, center_xy, half_size: float):
    """(name, object, T_G_node) for a ground slab with grid lines, in the halfspace frame G (top at z = 0)."""
    import meshcat.geometry as mg

    cx, cy = float(center_xy[0]), float(center_xy[1])
    thick = 0.02 * half_size
    slab = mg.Mesh(mg.Box([2 * half_size, 2 * half_size, thick]), _material(rgba, opacity_factor))
    step = nice_step(2 * half_size)
    n = int(np.floor(half_size / step))
    xs = np.arange(-n, n + 1) * step
    x0, y0 = np.round(cx / step) * step, np.round(cy / step) * step
    z = 0.002 * half_size
    seg = []
    for x in xs:
        seg += [[x0 + x, y0 - n * step, z], [x0 + x, y0 + n * step, z]]
        seg += [[x0 - n * step, y0 + x, z], [x0 + n * step, y0 + x, z]]
    line_color = rgba_to_hex(np.asarray(rgba[:3]) * 0.55)
    grid = mg.LineSegments(mg.PointsGeometry(np.array(seg, dtype=np.float32).T),
                           mg.LineBasicMaterial(color=line_color))
    return [("slab", slab, translation_matrix([cx, cy, -0.5 * thick])),
            ("grid", grid, np.eye(4))]


def geom_objects(model: Model, g: int, opacity_factor: float, tint=None, tint_weight: float = 0.0):
    """(object) of a finite geometry in its own frame G (colour blended toward ``tint``)."""
    import meshcat.geometry as mg

    kind = int(model.geom_type[g])
    size = model.geom_size[g]
    mat = _material(tinted(model.geom_color[g], tint, tint_weight), opacity_factor)
    if kind == GeomType.SPHERE:
        return mg.Mesh(mg.Sphere(float(size[0])), mat)
    if kind == GeomType.BOX:
        return mg.Mesh(mg.Box((2.0 * np.asarray(size, dtype=np.float64)).tolist()), mat)
    if kind == GeomType.CAPSULE:
        verts, faces = capsule_mesh(float(size[0]), float(size[1]))
    elif kind == GeomType.CYLINDER:
        verts, faces = cylinder_mesh(float(size[0]), float(size[1]))
    elif kind == GeomType.MESH:
        verts, faces = model.mesh_of(g)          # the convex hull the simulation uses
    else:
        raise ValueError(f"geometry {g}: no drawing for type {kind}")
    return mg.Mesh(mg.TriangularMeshGeometry(np.asarray(verts, np.float32), np.asarray(faces, np.uint32)), mat)


def joint_frame_poses(model: Model) -> list[tuple[int, np.ndarray, int, np.ndarray]]:
    """Per link of the model's trees: (Model body index, T_BJ (4, 4) — the joint's moving frame in the
    viewer's body frame, i.e. a translation by −body_com —, joint type code, joint axis in J (3,))."""
    forest = getattr(model, "forest", None)
    out = []
    for tree in (forest.trees if forest is not None else ()):
        m = tree.model
        for b in range(m.nbody):
            out.append((int(tree.bodies[b]), translation_matrix(-np.asarray(m.body_com[b], dtype=np.float64)),
                        int(m.joint_type[b]), np.asarray(m.joint_axis[b], dtype=np.float64)))
    return out


def joint_frame_commands(model: Model, prefix: str, length: float) -> list[dict]:
    """A triad of ``length`` [m] at every link's inboard joint frame, plus the axis of revolute and
    prismatic joints (see the module docstring)."""
    import meshcat.geometry as mg

    from convexsim.multibody.model import JointType

    cmds: list[dict] = []
    for body, T_BJ, jtype, axis in joint_frame_poses(model):
        path = f"{prefix}/bodies/{node_name(model.body_names[body])}/joint"
        cmds.append(cmd_object(f"{path}/triad", mg.triad(length)))
        if jtype in (JointType.REVOLUTE, JointType.PRISMATIC):
            ends = np.stack([-length * axis, length * axis], axis=1).astype(np.float32)
            cmds.append(cmd_object(f"{path}/axis", mg.LineSegments(
                mg.PointsGeometry(ends), mg.LineBasicMaterial(color=0x808080))))
        cmds.append(cmd_transform(path, T_BJ))
    return cmds


def model_commands(model: Model, prefix: str, q0: np.ndarray, *, opacity: float = 1.0,
                   draw_halfspaces: bool = True, bounds: Bounds | None = None, tint=None,
                   tint_weight: float = 0.0, joint_frames: bool = False) -> list[dict]:
    """Objects and static transforms of every body and geometry of ``model`` under ``prefix``.

    Args:
        model: compiled scene.
        prefix: scene path, e.g. ``/meshcat/SAP``.
        q0: body poses (x, y, z, qw, qx, qy, qz), shape (nbody, 7), used for the initial transforms
            and to centre the ground slab.
        opacity: factor on every geometry's alpha (e.g. 0.35 for the overlaid second trajectory).
        draw_halfspaces: draw halfspaces as ground slabs (off for overlaid copies: no z-fighting).
        bounds: scene bounds in W sizing the ground slabs (default: from q0).
        tint, tint_weight: RGB in [0, 1] toward which the finite geometries' colours are blended by
            ``tint_weight`` (tells an overlaid run's bodies apart; halfspaces keep their colour).
        joint_frames: also draw each link's inboard joint frame (:func:`joint_frame_commands`).
    """
    q0 = np.asarray(q0, dtype=np.float64).reshape(model.nbody, 7)
    if bounds is None:
        bounds = bounds_of_positions(model, q0[:, :3])
    cmds: list[dict] = []
    for b, name in enumerate(model.body_names):
        bpath = f"{prefix}/bodies/{node_name(name)}"
        cmds.append(cmd_transform(bpath, pose_matrix(q0[b, :3], q0[b, 3:7])))
    for g in range(model.ngeom):
        b = int(model.geom_body[g])
        gpath = f"{prefix}/bodies/{node_name(model.body_names[b])}/{geom_node_name(model, g)}"
        if int(model.geom_type[g]) == GeomType.HALFSPACE:
            if not draw_halfspaces:
                continue
            T_WG = pose_matrix(q0[b, :3], q0[b, 3:7]) @ pose_matrix(model.geom_pos[g], model.geom_quat[g])
            c_G = T_WG[:3, :3].T @ (bounds.center - T_WG[:3, 3])
            half, c_xy = ground_size(2.0 * bounds.radius, c_G[:2])
            floor = T_WG[2, 2] > 0.9          # outward normal within ~25° of +z: a floor
            cmds.append(cmd_transform(gpath, pose_matrix(model.geom_pos[g], model.geom_quat[g])))
            parts = ground_objects(model.geom_color[g], opacity if floor else WALL_OPACITY * opacity,
                                   c_xy, half)
            for part, obj, T in (parts if floor else parts[:1]):
                cmds.append(cmd_object(f"{gpath}/{part}", obj))
                cmds.append(cmd_transform(f"{gpath}/{part}", T))
            continue
        cmds.append(cmd_object(gpath, geom_objects(model, g, opacity, tint, tint_weight)))
        cmds.append(cmd_transform(gpath, pose_matrix(model.geom_pos[g], model.geom_quat[g])))
    if joint_frames:
        cmds += joint_frame_commands(model, prefix, JOINT_FRAME_SCALE * bounds.radius)
    return cmds


def has_halfspace(model: Model) -> bool:
    return bool(np.any(np.asarray(model.geom_type) == GeomType.HALFSPACE))


def camera_commands(bounds: Bounds, *, hide_stock_grid: bool) -> list[dict]:
    """Frame ``bounds``: shift the content by −centre, put the eye at 1.8·R along CAMERA_DIRECTION."""
    c, R = bounds.center, bounds.radius
    shift = translation_matrix(-c)
    cmds = [cmd_transform("/meshcat", shift), cmd_transform("/Axes", shift)]
    if hide_stock_grid:                 # our ground has its own grid; the axes would z-fight with it
        cmds.append(cmd_property("/Grid", "visible", False))
        cmds.append(cmd_property("/Axes", "visible", False))
    else:
        cmds.append(cmd_transform("/Grid", shift))
    e = CAMERA_DISTANCE_FACTOR * R * CAMERA_DIRECTION
    # The camera lives in the y-up "rotated" frame: world (x, y, z) -> (x, z, -y).
    cmds.append(cmd_property("/Cameras/default/rotated/<object>", "position", [float(e[0]), float(e[2]), float(-e[1])]))
    if CAMERA_DISTANCE_FACTOR * R + 2 * R > 90.0:
        import meshcat.geometry as mg

        cam = mg.PerspectiveCamera(fov=75, aspect=1, near=0.01 * R, far=10.0 * R)
        cmds.insert(0, {"type": "set_object", "path": "/Cameras/default/rotated", "object": cam.lower()})
    return cmds

