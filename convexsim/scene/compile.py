"""Compile a validated SceneSpec into the flat-array Model and the initial State (convexsim.model).

This is the only place where pydantic objects become numpy arrays. Conventions:

* Body order: ``bodies`` in file order, then each grid's bodies in grid order (``<grid>_<i>``).
* ``geom_size``: sphere (r, 0, 0); box half extents (file ``size`` is full edge lengths); capsule and
  cylinder (r, length/2, 0); mesh: its hull's half extents about the geometry origin; halfspace (0, 0, 0).
* Meshes: each ``shape: mesh`` geometry's convex hull (vertices in G, scale applied, and outward
  triangles) is stored once per distinct hull in ``Model.mesh_*`` (``geom_mesh`` points to it).
* Inertia, when not given, is computed from the shapes at uniform density ρ = m / Σ V_g over the
  body's solid geometries (overlaps are not subtracted; halfspaces have no volume), each shape's
  inertia rotated into B and moved to the body origin by the parallel-axis theorem. The body origin
  is the centre of mass: the schema rejects a moving body whose shapes' volume-weighted centroid is
  off its origin (solids.shapes_centroid); with an explicit ``inertia`` the user asserts it.
* Fixed bodies have mass 0 and inertia 0 in the Model unless given, and zero velocity.
"""

from __future__ import annotations

import colorsys
import math

import numpy as np

from convexsim.model import ContactModel, GeomType, Model, SolverSettings, State
from convexsim.spatial import quat_multiply, quat_to_matrix
from convexsim.scene.load import SceneError, dump_scene_compact
from convexsim.scene.schema import (
    BodySpec,
    BodyTemplate,
    GeometrySpec,
    GridSpec,
    SceneSpec,
    check_inertia,
    inertia_matrix,
)
from convexsim.scene.solids import geom_centroid_in_body, mesh_hull, mesh_mass, shape_extent, shape_volume

FIXED_BODY_COLOR = (0.62, 0.64, 0.66, 1.0)
"""Default RGBA of fixed bodies (ground, walls)."""
KINEMATIC_BODY_COLOR = (0.85, 0.55, 0.20, 1.0)
"""Default RGBA of a kinematic body (a body a script moves)."""

_GEOM_TYPES = {"sphere": GeomType.SPHERE, "box": GeomType.BOX, "capsule": GeomType.CAPSULE, "halfspace": GeomType.HALFSPACE,
               "cylinder": GeomType.CYLINDER, "mesh": GeomType.MESH}


# ---------------------------------------------------------------------------------------------
# Rotations
# ---------------------------------------------------------------------------------------------


def _random_quaternions(rng: np.random.Generator, n: int) -> np.ndarray:
    """n uniformly distributed unit quaternions (w, x, y, z) (Shoemake's method), shape (n, 4)."""
    u1, u2, u3 = rng.random((3, n))
    a, b = np.sqrt(1.0 - u1), np.sqrt(u1)
    q = np.stack([b * np.cos(2 * np.pi * u3), a * np.sin(2 * np.pi * u2), a * np.cos(2 * np.pi * u2), b * np.sin(2 * np.pi * u3)], 1)
    q *= np.where(q[:, :1] < 0.0, -1.0, 1.0)  # w >= 0
    return q


# ---------------------------------------------------------------------------------------------
# Grids
# ---------------------------------------------------------------------------------------------


def expand_grid(grid: GridSpec) -> list[BodySpec]:
    """The bodies of a grid: body i = ix + nx·(iy + ny·iz) named '<grid>_<i>' at
    origin + (ix·sx, iy·sy, iz·sz) + template.position + U(-jitter, jitter)³, orientation
    template.quaternion (pre-multiplied by a uniform random rotation when random_orientation)."""
    nx, ny, nz = grid.counts
    n = nx * ny * nz
    rng = np.random.default_rng(grid.seed)
    offsets = rng.uniform(-grid.jitter, grid.jitter, (n, 3)) if grid.jitter > 0 else np.zeros((n, 3))
    rotations = _random_quaternions(rng, n) if grid.random_orientation else None
    template = grid.template
    base = {f: getattr(template, f) for f in type(template).model_fields}
    origin = np.asarray(grid.origin) + np.asarray(template.position)
    ix, iy, iz = np.arange(n) % nx, (np.arange(n) // nx) % ny, np.arange(n) // (nx * ny)
    positions = origin + np.asarray(grid.spacing) * np.stack([ix, iy, iz], 1) + offsets
    bodies = []
    for i in range(n):
        quat = template.quaternion
        if rotations is not None:
            quat = quat_multiply(rotations[i], template.quaternion)
            quat = tuple(float(c) for c in quat / np.linalg.norm(quat))
        fields = dict(base, name=f"{grid.name}_{i}", position=tuple(float(c) for c in positions[i]), quaternion=quat)
        # The template is validated; the computed fields are finite with unit quaternions, so no re-validation.
        # Grid bodies share the template's geometry list (compile_scene caches their inertia by it).
        bodies.append(BodySpec.model_construct(**fields))
    return bodies


def expand_bodies(spec: SceneSpec) -> list[BodySpec]:
    """All bodies of a scene in Model order: ``bodies`` then every grid's bodies."""
    out = list(spec.bodies)
    for grid in spec.grids:
        out.extend(expand_grid(grid))
    return out


# ---------------------------------------------------------------------------------------------
# Mass properties
# ---------------------------------------------------------------------------------------------


def shape_unit_inertia(geom: GeometrySpec) -> np.ndarray:
    """Inertia per unit mass about the shape's centroid in the geometry frame G [m²], shape (3, 3).

    Sphere: 2/5·r² (each axis). Box with edges (a, b, c): ((b²+c²), (a²+c²), (a²+b²))/12.
    Capsule (radius r, cylinder length L along z), with cylinder mass fraction f_c and hemispheres
    f_h = 1 - f_c: I_zz = f_c·r²/2 + f_h·2r²/5;
    I_xx = I_yy = f_c·(L²/12 + r²/4) + f_h·(2r²/5 + L²/4 + 3Lr/8).
    """
    if geom.shape == "sphere":
        return np.eye(3) * 0.4 * geom.radius**2
    if geom.shape == "box":
        a, b, c = geom.size
        return np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) / 12.0
    if geom.shape == "capsule":
        r, length = geom.radius, geom.length
        v_cyl, v_caps = math.pi * r * r * length, 4.0 / 3.0 * math.pi * r**3
        f_c = v_cyl / (v_cyl + v_caps)
        f_h = 1.0 - f_c
        izz = f_c * r * r / 2.0 + f_h * 0.4 * r * r
        ixx = f_c * (length**2 / 12.0 + r * r / 4.0) + f_h * (0.4 * r * r + length**2 / 4.0 + 3.0 * length * r / 8.0)
        return np.diag([ixx, ixx, izz])
    if geom.shape == "cylinder":
        from convexsim.geometry.hull import cylinder_mass_properties   # numpy only
        return cylinder_mass_properties(geom.radius, geom.length)[1]
    if geom.shape == "mesh":
        return np.asarray(mesh_mass(geom)[2])
    return np.zeros((3, 3))


def inertia_from_shapes(mass: float, geometries: list[GeometrySpec]) -> np.ndarray:
    """Rotational inertia about the body origin in B [kg·m²] of ``mass`` spread uniformly over the shapes.

    I = Σ_g m_g·(R_g·Î_g·R_gᵀ + |c_g|²·1 − c_g·c_gᵀ), m_g = mass·V_g/ΣV (overlaps counted twice), c_g the
    geometry's centroid in B (its origin, or p_g + R_g·(hull centroid) for a mesh).
    """
    solids = [g for g in geometries if g.shape != "halfspace"]
    volumes = np.array([shape_volume(g) for g in solids])
    total = float(volumes.sum())
    inertia = np.zeros((3, 3))
    for g, vol in zip(solids, volumes):
        m_g = mass * vol / total
        rot = quat_to_matrix(g.quaternion)
        p = geom_centroid_in_body(g)
        inertia += m_g * (rot @ shape_unit_inertia(g) @ rot.T + (p @ p) * np.eye(3) - np.outer(p, p))
    return 0.5 * (inertia + inertia.T)


def collision_filter(geometries: list[GeometrySpec]) -> np.ndarray | None:
    """Model.collision_filter: (collision_group, collision_mask) per geometry, (ngeom, 2) int64; None when every
    geometry keeps the default (1, 1), i.e. every pair may collide."""
    rows = [(g.collision_group, g.collision_mask) for g in geometries]
    if all(r == (1, 1) for r in rows):
        return None
    return np.array(rows, dtype=np.int64).reshape(len(rows), 2)


def geom_bound_radius(geom: GeometrySpec) -> float:
    """Radius [m] of a sphere about the geometry origin enclosing the shape (inf for a halfspace)."""
    return math.inf if geom.shape == "halfspace" else shape_extent(geom)


def geom_size(geom: GeometrySpec) -> tuple[float, float, float]:
    """Model.geom_size row: sphere (r, 0, 0); box half extents; capsule and cylinder (r, length/2, 0); mesh: the
    half extents of its hull's bounding box in G about the G origin (max |x|, max |y|, max |z|); halfspace 0."""
    if geom.shape == "mesh":
        return tuple(float(x) for x in np.abs(mesh_hull(geom)[0]).max(0))  # type: ignore[return-value]
    if geom.shape == "cylinder":
        return (geom.radius, 0.5 * geom.length, 0.0)
    if geom.shape == "sphere":
        return (geom.radius, 0.0, 0.0)
    if geom.shape == "box":
        return tuple(0.5 * s for s in geom.size)  # type: ignore[return-value]
    if geom.shape == "capsule":
        return (geom.radius, 0.5 * geom.length, 0.0)
    return (0.0, 0.0, 0.0)


def _rgba(color) -> tuple[float, float, float, float]:
    return (*color, 1.0) if len(color) == 3 else tuple(color)  # type: ignore[return-value]


def default_body_color(k: int) -> tuple[float, float, float, float]:
    """Distinct color of the k-th moving body: golden-ratio hue steps at fixed saturation/value."""
    hue = (0.08 + 0.618033988749895 * k) % 1.0
    return (*colorsys.hsv_to_rgb(hue, 0.55, 0.9), 1.0)


# ---------------------------------------------------------------------------------------------
# Compile
# ---------------------------------------------------------------------------------------------


def _body_inertia(body: BodyTemplate, where: str) -> np.ndarray:
    """Inertia of a body [kg·m²] (given, or from the shapes), checked; zeros for a massless fixed body."""
    if body.inertia is not None:
        return inertia_matrix(body.inertia)
    if body.mass is None:
        return np.zeros((3, 3))
    if not any(g.shape != "halfspace" for g in body.geometries):
        if body.fixed:
            return np.zeros((3, 3))
        raise SceneError([f"{where}.inertia: required for a moving body without solid geometries"])
    inertia = inertia_from_shapes(body.mass, body.geometries)
    why = check_inertia(inertia)
    if why:
        raise SceneError([f"{where}: inertia computed from the shapes is not physical: {why}"])
    return inertia


def _mesh_arrays(geometries: list[GeometrySpec]) -> dict[str, np.ndarray]:
    """Model.geom_mesh and the flat mesh storage: one entry per distinct hull (grids share theirs)."""
    geom_mesh = np.full(len(geometries), -1, np.int64)
    index: dict[tuple, int] = {}
    verts: list[np.ndarray] = []
    faces: list[np.ndarray] = []
    for i, g in enumerate(geometries):
        if g.shape != "mesh":
            continue
        key = (g.vertices, g.file, g.scale)
        if key not in index:
            index[key] = len(verts)
            v, f = mesh_hull(g)
            verts.append(v)
            faces.append(f)
        geom_mesh[i] = index[key]
    nv = np.array([v.shape[0] for v in verts], np.int64)
    nf = np.array([f.shape[0] for f in faces], np.int64)
    return dict(
        geom_mesh=geom_mesh,
        mesh_vert_adr=np.concatenate([[0], np.cumsum(nv)[:-1]]).astype(np.int64) if verts else np.zeros(0, np.int64),
        mesh_vert_num=nv,
        mesh_vert=np.concatenate(verts).reshape(-1, 3) if verts else np.zeros((0, 3)),
        mesh_face_adr=np.concatenate([[0], np.cumsum(nf)[:-1]]).astype(np.int64) if faces else np.zeros(0, np.int64),
        mesh_face_num=nf,
        mesh_face=np.concatenate(faces).reshape(-1, 3).astype(np.int64) if faces else np.zeros((0, 3), np.int64),
    )


def compile_scene(spec: SceneSpec) -> tuple[Model, State]:
    """Compile a validated scene into (Model, State) at t = 0 (see the module docstring for conventions)."""
    bodies = expand_bodies(spec)
    nbody = len(bodies)
    material_names = tuple(spec.materials)
    material_index = {name: i for i, name in enumerate(material_names)}
    mats = [spec.materials[n] for n in material_names]

    body_mass = np.zeros(nbody)
    body_inertia = np.zeros((nbody, 3, 3))
    body_fixed = np.zeros(nbody, dtype=bool)
    body_kinematic = np.zeros(nbody, dtype=bool)
    body_dof = np.full(nbody, -1, dtype=np.int64)
    q = np.zeros((nbody, 7))
    v = np.zeros((nbody, 6))
    geoms: list[tuple[int, GeometrySpec, tuple[float, float, float, float]]] = []
    inertia_cache: dict[tuple, np.ndarray] = {}  # by (mass, inertia, geometries): equal specs, equal inertia
    n_moving = 0
    for b, body in enumerate(bodies):
        where = f"bodies '{body.name}'"
        body_fixed[b] = body.fixed or body.kinematic       # kinematic: no dofs, its velocity an input
        body_kinematic[b] = body.kinematic
        body_mass[b] = body.mass if body.mass is not None else 0.0
        key = (body.mass, body.inertia, tuple(body.geometries))   # frozen specs hash by value
        if key not in inertia_cache:
            inertia_cache[key] = _body_inertia(body, where)
        body_inertia[b] = inertia_cache[key]
        q[b, :3] = body.position
        q[b, 3:] = body.quaternion
        if body.fixed:
            default_color = FIXED_BODY_COLOR
        elif body.kinematic:
            default_color = KINEMATIC_BODY_COLOR
            v[b, :3] = body.angular_velocity
            v[b, 3:] = body.linear_velocity
        else:
            body_dof[b] = 6 * n_moving
            default_color = default_body_color(n_moving)
            n_moving += 1
            v[b, :3] = body.angular_velocity
            v[b, 3:] = body.linear_velocity
        body_color = _rgba(body.color) if body.color is not None else default_color
        for g in body.geometries:
            geoms.append((b, g, _rgba(g.color) if g.color is not None else body_color))

    missing = sorted({g.material for _, g, _ in geoms if g.material not in material_index})
    if missing:
        raise SceneError([f"unknown material(s) {missing}; defined: {list(material_names)}"])

    ngeom = len(geoms)
    meshes = _mesh_arrays([g for _, g, _ in geoms])
    model = Model(
        name=spec.name,
        time_step=float(spec.time_step),
        duration=float(spec.duration),
        gravity=np.asarray(spec.gravity, dtype=float),
        contact_model=ContactModel[spec.contact_model.upper()],
        solver=SolverSettings(**spec.solver.model_dump()),
        body_names=tuple(b.name for b in bodies),
        body_mass=body_mass,
        body_inertia=body_inertia,
        body_fixed=body_fixed,
        body_dof=body_dof,
        body_kinematic=body_kinematic,
        geom_body=np.array([b for b, _, _ in geoms], dtype=np.int64),
        geom_type=np.array([int(_GEOM_TYPES[g.shape]) for _, g, _ in geoms], dtype=np.int64),
        geom_size=np.array([geom_size(g) for _, g, _ in geoms], dtype=float).reshape(ngeom, 3),
        geom_pos=np.array([g.position for _, g, _ in geoms], dtype=float).reshape(ngeom, 3),
        geom_quat=np.array([g.quaternion for _, g, _ in geoms], dtype=float).reshape(ngeom, 4),
        geom_material=np.array([material_index[g.material] for _, g, _ in geoms], dtype=np.int64),
        geom_rbound=np.array([geom_bound_radius(g) for _, g, _ in geoms], dtype=float),
        geom_color=np.array([c for _, _, c in geoms], dtype=float).reshape(ngeom, 4),
        collision_filter=collision_filter([g for _, g, _ in geoms]),
        material_names=material_names,
        material_friction=np.array([m.friction for m in mats], dtype=float),
        material_stiffness=np.array([m.stiffness for m in mats], dtype=float),
        material_dissipation_time=np.array([m.dissipation_time for m in mats], dtype=float),
        material_hc_dissipation=np.array([m.hunt_crossley_dissipation for m in mats], dtype=float),
        scene_yaml=dump_scene_compact(spec),
        **meshes,
    )
    state = State(t=0.0, q=q, v=v, step=0)
    if spec.joints or spec.constraints:        # kinematic trees, body constraints (convexsim.scene.articulated)
        from convexsim.scene.articulated import attach_trees   # numba kernels only for scenes with joints
        model, state = attach_trees(spec, model, state, {b.name: i for i, b in enumerate(bodies)})
    return model, state


__all__ = [
    "compile_scene",
    "expand_bodies",
    "expand_grid",
    "inertia_from_shapes",
    "shape_volume",
    "shape_unit_inertia",
    "geom_bound_radius",
    "geom_size",
    "default_body_color",
]
