"""Scene file schema: pydantic v2 models of what a user writes in a scene YAML file.

Every model forbids unknown keys and non-finite numbers (NaN, ±inf). Units are SI and stated in
every field's description (docs/scene-format.md is the user-facing version of this file).

Checks that involve several fields (a sphere needs a ``radius``, a halfspace only on a fixed body,
duplicate body names, unknown materials) are model validators that raise :class:`FieldProblems`,
a ``ValueError`` carrying ``(relative field path, message, bad value)`` triples, so that
``convexsim.scene.load`` can report each one at its full field path.
"""

from __future__ import annotations

import difflib
import math
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from convexsim.errors import InputError
from convexsim.scene.solids import mesh_hull, shape_volume, shapes_centroid

QUATERNION_NORM_TOLERANCE = 1e-3
"""Quaternions with |1 - |q|| below this are normalized silently; others are rejected."""

INERTIA_RELATIVE_TOLERANCE = 1e-9
"""Relative slack in the inertia checks (symmetry, triangle inequality) for round-off."""

MAX_GRID_BODIES = 1_000_000
"""Largest number of bodies one grid may expand to (a typo in ``counts`` should fail, not exhaust memory)."""

DEFAULT_MATERIAL = "default"
"""Name of the material every geometry uses unless it names another one."""

Loc = tuple[str | int, ...]

HALFSPACE_ON_MOVING_BODY = "a halfspace is only allowed on a fixed body (set fixed: true on the body, or use a box)"


KINEMATIC_AND_FIXED = ("a body is either fixed (welded to the world) or kinematic (moved by its velocity, which a "
                       "script sets); remove one of the two")


class FieldProblems(InputError):
    """One or more problems found by a cross-field check, each at a path relative to the model.

    Attributes:
        problems: list of ``(loc, message, value)``; ``loc`` is a tuple of keys and list indices
            relative to the model whose validator raised.
    """

    def __init__(self, problems: list[tuple[Loc, str, Any]]):
        self.problems = list(problems)
        super().__init__("; ".join(f"{'.'.join(map(str, loc))}: {msg}" for loc, msg, _ in self.problems))


# ---------------------------------------------------------------------------------------------
# Value types
# ---------------------------------------------------------------------------------------------


def _normalize_quaternion(q: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
    """Return q/|q| when |1 - |q|| < QUATERNION_NORM_TOLERANCE (q itself when it is unit to round-off);
    otherwise raise ValueError."""
    norm = math.sqrt(sum(c * c for c in q))
    if norm == 0.0:
        raise ValueError("quaternion (w, x, y, z) must be a unit quaternion; the zero quaternion is not a rotation")
    if abs(1.0 - norm) <= 8.0 * np.finfo(float).eps:
        return tuple(q)  # unit to round-off: unchanged, so loading a dumped scene is exact (idempotent)
    if abs(1.0 - norm) >= QUATERNION_NORM_TOLERANCE:
        raise ValueError(
            f"quaternion (w, x, y, z) must be a unit quaternion (|q| within {QUATERNION_NORM_TOLERANCE:g} "
            f"of 1 is normalized); got |q| = {norm:.6g}"
        )
    return tuple(c / norm for c in q)  # type: ignore[return-value]


def _did_you_mean(name: str, known) -> str:
    """' (did you mean 'x'?)' with the closest of ``known`` to ``name``, or '' when none is close."""
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _check_name(name: str) -> str:
    """Names are non-empty and free of '.', '=', '[', ']' and whitespace (they appear in dotted paths)."""
    if not name or any(c in name for c in ".=[]") or any(c.isspace() for c in name):
        raise ValueError(
            "name must be non-empty without '.', '=', '[', ']' or whitespace (it is used in dotted "
            "override paths)"
        )
    return name


def _check_color(c: tuple[float, ...]) -> tuple[float, ...]:
    """Colors are RGB or RGBA with components in [0, 1]."""
    if len(c) not in (3, 4) or any(not 0.0 <= x <= 1.0 for x in c):
        raise ValueError("color must be RGB or RGBA with components in [0, 1]")
    return c


Vec3 = tuple[float, float, float]
Quaternion = Annotated[tuple[float, float, float, float], AfterValidator(_normalize_quaternion)]
Name = Annotated[str, AfterValidator(_check_name)]
Color = Annotated[tuple[float, ...], AfterValidator(_check_color)]
Inertia = tuple[float, float, float] | tuple[Vec3, Vec3, Vec3]


def _parse_inertia(value: Any) -> Any:
    """Accept 3 principal moments or a 3x3 nested list of finite numbers [kg·m²]; one clear error otherwise."""
    if value is None:
        return None
    msg = "inertia must be 3 principal moments [I1, I2, I3] or a 3x3 matrix [[...], [...], [...]] of finite numbers [kg·m²]"
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(msg) from None
    if isinstance(value, (str, bytes)) or arr.shape not in ((3,), (3, 3)) or not np.all(np.isfinite(arr)):
        raise ValueError(msg)
    if np.max(np.abs(arr)) > SCENE_NUMBER_LIMIT:
        raise ValueError(f"inertia entries are within ±{SCENE_NUMBER_LIMIT:g} kg·m² (is it in the right unit?)")
    if arr.shape == (3,):
        return tuple(float(x) for x in arr)
    return tuple(tuple(float(x) for x in row) for row in arr)


def inertia_matrix(inertia: Inertia) -> np.ndarray:
    """3x3 inertia matrix [kg·m²] from 3 principal moments or a 3x3 nested tuple."""
    arr = np.asarray(inertia, dtype=float)
    return np.diag(arr) if arr.shape == (3,) else arr


def check_inertia(inertia_3x3: np.ndarray) -> str | None:
    """Why a rotational inertia about the COM is not physical, or None when it is.

    Requires symmetry, positive principal moments I1, I2, I3 and the triangle inequality
    I1 + I2 >= I3 (for each permutation), all with relative slack INERTIA_RELATIVE_TOLERANCE.
    """
    m = np.asarray(inertia_3x3, dtype=float)
    scale = max(float(np.max(np.abs(m))), np.finfo(float).tiny)
    slack = INERTIA_RELATIVE_TOLERANCE * scale
    if np.max(np.abs(m - m.T)) > slack:
        return "inertia must be a symmetric 3x3 matrix [kg·m²]"
    moments = np.linalg.eigvalsh(m)
    if moments[0] <= 0.0:
        return f"inertia must be positive definite [kg·m²]; principal moments are {moments.tolist()}"
    if moments[0] < SMALLEST_INERTIA:
        return (f"inertia's smallest principal moment {moments[0]:.3g} kg·m² is below {SMALLEST_INERTIA:g} "
                "kg·m² (is it in the right unit?)")
    i1, i2, i3 = moments
    if i1 + i2 < i3 - slack:
        return (
            "inertia violates the triangle inequality I1 + I2 >= I3 of its principal moments "
            f"(I1, I2, I3) = ({i1:.6g}, {i2:.6g}, {i3:.6g}) [kg·m²]; no rigid body has this inertia"
        )
    return None


CENTROID_RELATIVE_TOLERANCE = 1e-9
"""A moving body whose inertia is computed from its shapes must have the shapes' centroid at the body
origin to within this fraction of the body's size (the largest |geometry position| + shape extent)."""


def _fmt_vec(v: np.ndarray) -> str:
    return "(" + ", ".join(f"{x:.6g}" if abs(x) > 0 else "0" for x in v) + ")"


SCENE_NUMBER_LIMIT = 1e15
"""Every number in a scene has |x| <= this (SI units: 1e15 m, kg, s, N/m, ...), so that the products taken
from them (volumes r³, densities m/V, inertias m·r², step counts) stay far inside the float range."""

SMALLEST_SCALE = 1e-15
"""Radii, box edges, masses, the time step and the duration are >= this: a 1e-300 m radius would make its
volume underflow to 0 (and the density m/V infinite)."""

SMALLEST_INERTIA = 1e-60
"""Principal moments of an explicit inertia are >= this [kg·m²] (the smallest shapes and masses allowed give
about 4e-46)."""


def _numbers(value: Any, loc: Loc):
    """(loc, number) of every int/float in a field value (tuples and lists of them, nested); not bools and
    not the values of nested models (they are checked by their own model)."""
    if isinstance(value, bool) or value is None or isinstance(value, BaseModel):
        return
    if isinstance(value, (int, float)):
        yield loc, value
    elif isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            yield from _numbers(item, loc + (i,))


def range_problems(spec: BaseModel) -> list[tuple[Loc, str, Any]]:
    """The numbers of one scene model outside the allowed range: |x| > SCENE_NUMBER_LIMIT anywhere, or a
    scale field (``_scale_fields``: radius, box size, mass, time step, duration) below SMALLEST_SCALE.
    Checked before any arithmetic on the values (volumes, densities, inertias)."""
    out: list[tuple[Loc, str, Any]] = []
    scale = getattr(type(spec), "_scale_fields", ())
    for name in type(spec).model_fields:
        for loc, x in _numbers(getattr(spec, name), (name,)):
            if abs(x) > SCENE_NUMBER_LIMIT:
                out.append((loc, f"{x:g} is too large: scene numbers are within ±{SCENE_NUMBER_LIMIT:g} (SI units; "
                            "is it in the right unit?)", x))
                break
            if name in scale and 0 < x < SMALLEST_SCALE:
                out.append((loc, f"{x:g} is too small: a {name.replace('_', ' ')} is at least {SMALLEST_SCALE:g} "
                            "(SI units; is it in the right unit?)", x))
                break
    return out


class _Spec(BaseModel):
    """Base of all scene models: unknown keys and NaN/inf are errors; instances are immutable
    (change a scene with ``convexsim.scene.with_overrides`` or ``model_copy(update=...)``).
    Numbers are range-checked (:func:`range_problems`) before the models' own checks compute with them."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, validate_default=True, frozen=True)
    _scale_fields: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="after")
    def _check_ranges(self):
        problems = range_problems(self)
        if problems:
            raise FieldProblems(problems)
        return self


# ---------------------------------------------------------------------------------------------
# Materials and solver settings
# ---------------------------------------------------------------------------------------------


class MaterialSpec(_Spec):
    """Contact material of a geometry. Pair values follow the combination rules in convexsim.model."""

    friction: float = Field(
        0.5, ge=0.0, description="Coulomb friction coefficient μ (dimensionless, >= 0). Pair: 2μAμB/(μA+μB)."
    )
    stiffness: float = Field(
        1e6, gt=0.0, description="Point-contact stiffness k [N/m] (> 0). Pair: in series kAkB/(kA+kB)."
    )
    dissipation_time: float = Field(
        0.1, ge=0.0, description="SAP dissipation time scale τ_d [s] (>= 0). Pair: τA + τB."
    )
    hunt_crossley_dissipation: float = Field(
        50.0,
        ge=0.0,
        description="Hunt–Crossley dissipation d [s/m] (>= 0), lagged/similar models. Pair: (kB·dA+kA·dB)/(kA+kB).",
    )


class SolverSpec(_Spec):
    """Solver choice and parameters (mirrors convexsim.model.SolverSettings)."""

    kind: Literal["sap", "lcp"] = Field("sap", description="Solver: 'sap' (convex, compliant) or 'lcp' (Lemke, rigid).")
    rel_tolerance: float = Field(1e-6, gt=0.0, description="SAP relative momentum-residual tolerance ε_r (dimensionless, > 0).")
    abs_tolerance: float = Field(1e-14, ge=0.0, description="SAP absolute tolerance ε_a [sqrt(J)] (>= 0).")
    max_iterations: int = Field(100, ge=1, description="SAP Newton iteration limit (>= 1).")
    sigma: float = Field(1e-3, gt=0.0, description="SAP friction regularization σ (dimensionless, > 0); stiction slip ≈ σ·μ·dt·g.")
    beta: float = Field(1.0, gt=0.0, description="SAP near-rigid threshold β (dimensionless, > 0).")
    line_search: Literal["exact", "backtracking"] = Field("exact", description="SAP line search: 'exact' or 'backtracking'.")
    stiction_tolerance: float = Field(
        1e-4, gt=0.0, description="Stiction tolerance v_s [m/s] (> 0) of the Hunt–Crossley models (lagged, similar)."
    )
    slip_curvature: float = Field(
        1.0, ge=0.0, description="SAP slip curvature κ (dimensionless, >= 0) of the Newton matrix; 0: exact Hessian."
    )
    friction_directions: int = Field(8, ge=3, le=360, description="LCP: directions of the polyhedral friction cone (3 .. 360).")
    lcp_stabilization: float = Field(
        0.2, ge=0.0, le=1.0, description="LCP: fraction of the penetration removed per step, in [0, 1]."
    )
    lcp_restitution: float = Field(0.0, ge=0.0, le=1.0, description="LCP: Newton restitution coefficient e_N, in [0, 1].")
    lcp_max_pivots: int = Field(0, ge=0, description="LCP: Lemke pivot limit (>= 0; 0 = automatic).")


# ---------------------------------------------------------------------------------------------
# Geometry and bodies
# ---------------------------------------------------------------------------------------------

_SHAPE_FIELDS = {"sphere": ("radius",), "box": ("size",), "capsule": ("radius", "length"), "halfspace": (),
                 "cylinder": ("radius", "length"), "mesh": ("vertices", "file", "scale")}
_SHAPE_FIELD_HELP = {
    "radius": "a radius [m] > 0",
    "size": "full edge lengths (x, y, z) [m], each > 0",
    "length": "the distance between the cap centres along local z [m], >= 0",
}
_CYLINDER_LENGTH_HELP = "the full height along local z [m] > 0 (flat caps at z = ±length/2)"
_MESH_SOURCE_HELP = ("either `vertices: [[x, y, z], ...]` (at least 4 points not in one plane; their convex hull "
                     "is used) or `file: path` (OBJ, STL or PLY, relative to the scene file's folder)")
_OPTIONAL_SHAPE_FIELDS = {"mesh": ("scale",)}


class GeometrySpec(_Spec):
    """A collision/visual geometry rigidly attached to a body, posed in the body frame B."""

    _scale_fields: ClassVar[tuple[str, ...]] = ("radius", "size")

    shape: Literal["sphere", "box", "capsule", "cylinder", "mesh", "halfspace"] = Field(
        description="'sphere', 'box', 'capsule', 'cylinder', 'mesh' (convex hull of points or of a mesh file) or "
                    "'halfspace' (halfspace: fixed bodies only, outward normal = local +z)."
    )
    radius: float | None = Field(None, gt=0.0, description="Sphere, capsule or cylinder radius [m] (> 0).")
    size: tuple[Annotated[float, Field(gt=0.0)], Annotated[float, Field(gt=0.0)], Annotated[float, Field(gt=0.0)]] | None = Field(
        None, description="Box full edge lengths (x, y, z) along the geometry axes [m] (each > 0)."
    )
    length: float | None = Field(None, ge=0.0, description="Capsule: distance between the cap centres along local z "
                                 "[m] (>= 0). Cylinder: full height along local z [m] (> 0), caps at z = ±length/2.")
    vertices: tuple[Vec3, ...] | None = Field(None, description="Mesh: points in the geometry frame [m] (>= 4, not "
                                              "coplanar); the shape is their convex hull.")
    file: str | None = Field(None, description="Mesh: an OBJ, STL or PLY file path [file units are m] (relative: from the scene file's "
                             "folder); the shape is the convex hull of its vertices.")
    scale: tuple[Annotated[float, Field(gt=0.0)], Annotated[float, Field(gt=0.0)], Annotated[float, Field(gt=0.0)]] | None = Field(
        None, description="Mesh: scale factors (sx, sy, sz), dimensionless, applied to the points in the geometry frame (default 1, 1, 1)."
    )
    position: Vec3 = Field((0.0, 0.0, 0.0), description="Geometry origin in the body frame B [m].")
    quaternion: Quaternion = Field(
        (1.0, 0.0, 0.0, 0.0), description="Orientation R_BG (w, x, y, z), unit norm (near-unit values are normalized)."
    )
    material: Name = Field(DEFAULT_MATERIAL, description="Name of a material in the scene's `materials`.")
    color: Color | None = Field(None, description="RGB or RGBA in [0, 1] for viewers (default: the body's color).")
    collision_group: int = Field(1, ge=0, lt=2 ** 31, description="Collision filter: bit mask (dimensionless) of the "
                                 "groups this geometry belongs to (MJCF contype). Geometries i and j collide only if "
                                 "(group_i & mask_j) | (group_j & mask_i) != 0; 0 and 0: never collides.")
    collision_mask: int = Field(1, ge=0, lt=2 ** 31, description="Collision filter: bit mask (dimensionless) of the "
                                "groups this geometry collides with (MJCF conaffinity).")

    @model_validator(mode="after")
    def _check_shape_fields(self) -> "GeometrySpec":
        problems: list[tuple[Loc, str, Any]] = []
        needed = _SHAPE_FIELDS[self.shape]
        for fname in ("radius", "size", "length", "vertices", "file", "scale"):
            value = getattr(self, fname)
            if fname in needed and value is None and self.shape != "mesh":
                problems.append(((fname,), f"required for shape '{self.shape}': {_SHAPE_FIELD_HELP[fname]}", None))
            elif fname not in needed and value is not None:
                uses = ", ".join(needed) if needed else "no size parameters"
                problems.append(((fname,), f"not used by shape '{self.shape}' (it takes {uses}); remove it", value))
        if self.shape == "cylinder" and self.length is not None and self.length <= 0.0:
            problems.append((("length",), f"a cylinder's length is {_CYLINDER_LENGTH_HELP}", self.length))
        if self.shape == "mesh":
            problems += self._mesh_problems()
        if problems:
            raise FieldProblems(problems)
        return self

    def _mesh_problems(self) -> list[tuple[Loc, str, Any]]:
        """A mesh has exactly one of vertices / file, and its hull has a volume."""
        if (self.vertices is None) == (self.file is None):
            both = "both" if self.vertices is not None else "neither"
            return [(("vertices",), f"shape 'mesh' needs {_MESH_SOURCE_HELP}; got {both}", None)]
        try:
            mesh_hull(self)
        except ValueError as exc:   # MeshError
            where = "vertices" if self.vertices is not None else "file"
            return [((where,), str(exc), None)]
        return []


class BodyTemplate(_Spec):
    """Everything about a rigid body except its name (also the template of a grid)."""

    _scale_fields: ClassVar[tuple[str, ...]] = ("mass",)

    mass: float | None = Field(None, gt=0.0, description="Mass [kg] (> 0); required unless the body is fixed.")
    inertia: Annotated[Any, BeforeValidator(_parse_inertia)] = Field(
        None,
        description=(
            "Rotational inertia about the COM in the body frame [kg·m²]: 3 principal values or a 3x3 matrix; "
            "symmetric, positive definite, triangle inequality. Default: from the shapes at uniform density."
        ),
    )
    fixed: bool = Field(False, description="True: welded to the world (no degrees of freedom).")
    kinematic: bool = Field(False, description="True: a kinematic body (no degrees of freedom, infinite mass): its "
                            "pose advances by its velocity each step and a script sets both; contacts push other "
                            "bodies with its velocity and never move it. Its initial velocity is linear_velocity "
                            "and angular_velocity; it has no mass or inertia.")
    position: Vec3 = Field((0.0, 0.0, 0.0), description="COM position in the world frame W [m].")
    quaternion: Quaternion = Field(
        (1.0, 0.0, 0.0, 0.0), description="Orientation R_WB (w, x, y, z), unit norm (near-unit values are normalized)."
    )
    linear_velocity: Vec3 = Field((0.0, 0.0, 0.0), description="COM velocity in W [m/s].")
    angular_velocity: Vec3 = Field((0.0, 0.0, 0.0), description="Angular velocity in W [rad/s] (world frame).")
    geometries: list[GeometrySpec] = Field(default_factory=list, description="Geometries, posed in the body frame.")
    color: Color | None = Field(None, description="RGB or RGBA in [0, 1] for viewers (default: a distinct color per body).")

    @field_validator("inertia")
    @classmethod
    def _check_inertia(cls, value: Inertia | None) -> Inertia | None:
        if value is not None:
            why = check_inertia(inertia_matrix(value))
            if why:
                raise ValueError(why)
        return value

    @model_validator(mode="after")
    def _check_body(self) -> "BodyTemplate":
        problems: list[tuple[Loc, str, Any]] = []
        if self.fixed and self.kinematic:
            problems.append((("kinematic",), KINEMATIC_AND_FIXED, True))
        elif self.fixed:
            for fname in ("linear_velocity", "angular_velocity"):
                if any(getattr(self, fname)):
                    problems.append(((fname,), "a fixed body cannot move; set it to [0, 0, 0] or fixed: false", getattr(self, fname)))
        elif self.kinematic:
            problems += kinematic_body_problems(self)
        else:
            if self.mass is None:
                problems.append((("mass",), "required for a moving body: mass [kg] > 0 (or set fixed: true)", None))
            for i, geom in enumerate(self.geometries):
                if geom.shape == "halfspace":
                    problems.append((("geometries", i, "shape"), HALFSPACE_ON_MOVING_BODY, "halfspace"))
            solid = [g for g in self.geometries if g.shape != "halfspace"]
            if self.inertia is None and not solid and self.mass is not None:
                problems.append(
                    (("inertia",), "required for a moving body without solid geometries "
                     "(3 principal values or a 3x3 matrix [kg·m²])", None)
                )
            if self.inertia is None and solid:
                # Mass properties come from the shapes: the body frame must be at their centroid,
                # because gravity acts and the inertia is taken at the body origin.
                centroid, size = shapes_centroid(solid)
                if np.linalg.norm(centroid) > CENTROID_RELATIVE_TOLERANCE * size:
                    problems.append(
                        (("geometries",),
                         f"the shapes' centroid is at {_fmt_vec(centroid)} m in the body frame; the body frame "
                         f"must be at the centre of mass — shift the geometry positions by {_fmt_vec(-centroid)} m "
                         f"(and the body position by R_WB·{_fmt_vec(centroid)} m to keep the shapes in place), "
                         "or give mass and inertia explicitly (the body origin is then taken as the centre of mass)",
                         None)
                    )
        if problems:
            raise FieldProblems(problems)
        return self


def kinematic_body_problems(body: "BodyTemplate") -> list[tuple[Loc, str, Any]]:
    """A kinematic body has no mass or inertia (its motion is prescribed: infinite mass) and no halfspace (an
    unbounded plane that moves; use a large box)."""
    problems: list[tuple[Loc, str, Any]] = []
    for fname in ("mass", "inertia"):
        if getattr(body, fname) is not None:
            problems.append(((fname,), f"a kinematic body has no {fname}: its motion is prescribed (infinite mass, "
                             "contacts never move it); remove it, or set kinematic: false", getattr(body, fname)))
    for i, geom in enumerate(body.geometries):
        if geom.shape == "halfspace":
            problems.append((("geometries", i, "shape"), "a halfspace is only allowed on a fixed body; give the "
                             "kinematic body a large box instead", "halfspace"))
    return problems


class BodySpec(BodyTemplate):
    """A named rigid body. Its frame B has its origin at the centre of mass (by convention)."""

    name: Name = Field(description="Unique body name (no '.', '=', '[', ']' or whitespace).")


class GridSpec(_Spec):
    """Many identical bodies on a regular lattice: body (ix, iy, iz) is named ``<name>_<i>``,
    i = ix + nx·(iy + ny·iz), at origin + (ix·sx, iy·sy, iz·sz) + template.position + jitter."""

    name: Name = Field(description="Grid name; bodies are named '<name>_<i>', i = 0 .. nx·ny·nz - 1.")
    template: BodyTemplate = Field(description="The body every grid cell gets (its position is an offset).")
    counts: tuple[Annotated[int, Field(ge=1)], Annotated[int, Field(ge=1)], Annotated[int, Field(ge=1)]] = Field(
        description="Number of bodies along x, y, z (each >= 1)."
    )
    spacing: tuple[Annotated[float, Field(ge=0.0)], Annotated[float, Field(ge=0.0)], Annotated[float, Field(ge=0.0)]] = Field(
        description="Distance between neighbouring lattice points along x, y, z [m] (each >= 0)."
    )
    origin: Vec3 = Field((0.0, 0.0, 0.0), description="World position of lattice point (0, 0, 0) [m].")
    jitter: float = Field(0.0, ge=0.0, description="Each position coordinate is offset by a uniform value in [-jitter, jitter] [m].")
    random_orientation: bool = Field(False, description="Give each body a uniformly random orientation (from the seed).")
    seed: int = Field(0, ge=0, description="Seed of the jitter and orientation random numbers (numpy default_rng).")

    @model_validator(mode="after")
    def _check_size(self) -> "GridSpec":
        n = math.prod(self.counts)
        if n > MAX_GRID_BODIES:
            raise FieldProblems([(("counts",), f"a grid holds at most {MAX_GRID_BODIES} bodies; this one has {n}", list(self.counts))])
        return self


# ---------------------------------------------------------------------------------------------
# Joints and actuators (kinematic trees; docs/articulated.md, compiled by convexsim.scene.articulated)
# ---------------------------------------------------------------------------------------------


class JointSpec(_Spec):
    """A joint connecting a child body (a link) to its parent body or the world.

    The joint frame J is posed in the parent's body frame (the world frame for ``world``); at q = 0 the
    child's body frame has J's axes and its centre of mass at ``child_offset`` in J. Coordinates:
    revolute θ [rad] about ``axis``, prismatic s [m] along ``axis``, fixed none (a weld), ball the
    quaternion (w, x, y, z) of the child's frame in J, free (a floating base, parent ``world``) the
    position [m] and quaternion of the child's frame in the world."""

    name: Name = Field(description="Unique joint name (controllers and actuators refer to it).")
    type: Literal["revolute", "prismatic", "fixed", "ball", "free"] = Field(
        description="'revolute', 'prismatic', 'fixed', 'ball' or 'free'.")
    parent: Name = Field("world", description="Parent body name, or 'world' (a fixed body is also allowed).")
    child: Name = Field(description="The child body (a link: not fixed, with mass; its pose comes from the joint).")
    axis: Vec3 = Field((0.0, 0.0, 1.0), description="Joint axis in J, dimensionless (normalized; must be nonzero).")
    position: Vec3 = Field((0.0, 0.0, 0.0), description="Origin of J in the parent's body frame [m].")
    quaternion: Quaternion = Field((1.0, 0.0, 0.0, 0.0), description="Orientation of J in the parent's frame (w, x, y, z).")
    child_offset: Vec3 = Field((0.0, 0.0, 0.0), description="Child's centre of mass in J at q = 0 [m].")
    lower: float | None = Field(None, description="Lower joint limit [rad or m] (none: unlimited).")
    upper: float | None = Field(None, description="Upper joint limit [rad or m] (none: unlimited).")
    cone_limit: float | None = Field(
        None, description="Ball joints: the largest swing angle [rad] in (0, π) between `axis` and its image in "
        "the child, i.e. the child's copy of the axis stays in a cone of this half-angle (twist is free).")
    damping: float = Field(0.0, ge=0.0, description="Joint damping [N·m·s/rad or N·s/m] (>= 0), implicit.")
    armature: float = Field(0.0, ge=0.0, description="Rotor armature [kg·m² or kg] (>= 0), added to M's diagonal.")
    friction: float = Field(0.0, ge=0.0, description="Dry (Coulomb) joint friction [N·m or N] (>= 0; revolute and "
                            "prismatic joints): the joint sticks while the other forces on it stay within ±friction "
                            "and slides against the motion with ±friction otherwise (a SAP constraint, implicit).")
    initial_position: float | tuple[float, ...] = Field(
        0.0, description="q at t = 0: a number [rad or m] (revolute, prismatic); a unit quaternion (w, x, y, z) "
        "(ball); [x, y, z, w, qx, qy, qz] position [m] and quaternion (free).")
    initial_velocity: float | tuple[float, ...] = Field(
        0.0, description="q̇ at t = 0: a number [rad/s or m/s] (revolute, prismatic); ω [rad/s] in J (ball); "
        "[ωx, ωy, ωz, vx, vy, vz] in the world [rad/s, m/s] (free).")

    @model_validator(mode="after")
    def _check_joint(self) -> "JointSpec":
        problems: list[tuple[Loc, str, Any]] = []
        if self.type in ("revolute", "prismatic") and math.sqrt(sum(a * a for a in self.axis)) < 1e-9:
            problems.append((("axis",), "must be a nonzero 3-vector", list(self.axis)))
        if self.lower is not None and self.upper is not None and self.lower > self.upper:
            problems.append((("lower",), f"lower limit {self.lower} > upper limit {self.upper}", self.lower))
        if self.type in ("fixed", "ball", "free"):
            for f in ("lower", "upper"):
                if getattr(self, f) is not None:
                    problems.append(((f,), f"a {self.type} joint takes no limits (limits act on revolute and "
                                     "prismatic joints; a ball joint takes cone_limit); remove it", getattr(self, f)))
        if self.cone_limit is not None:
            if self.type != "ball":
                problems.append((("cone_limit",), f"a cone limit applies to ball joints, not {self.type} joints "
                                 "(use lower/upper on revolute and prismatic joints)", self.cone_limit))
            elif not 0.0 < self.cone_limit < math.pi:
                problems.append((("cone_limit",), "must be an angle in (0, π) [rad]", self.cone_limit))
            elif math.sqrt(sum(a * a for a in self.axis)) < 1e-9:
                problems.append((("axis",), "a cone limit's axis must be a nonzero 3-vector", list(self.axis)))
        if self.type == "free":
            if self.parent != "world":
                problems.append((("parent",), "a free joint (floating base) hangs from 'world'", self.parent))
            for f, default in (("position", (0.0, 0.0, 0.0)), ("quaternion", (1.0, 0.0, 0.0, 0.0))):
                if tuple(getattr(self, f)) != default:
                    problems.append(((f,), "a free joint's frame is the world frame; give the base's pose in "
                                     "initial_position", list(getattr(self, f))))
        sizes = {"revolute": (1, 1), "prismatic": (1, 1), "fixed": (1, 1), "ball": (4, 3), "free": (7, 6)}[self.type]
        for f, n, what in (("initial_position", sizes[0], {4: "a unit quaternion (w, x, y, z)",
                                                           7: "[x, y, z, w, qx, qy, qz]"}),
                           ("initial_velocity", sizes[1], {3: "ω = [ωx, ωy, ωz] in J",
                                                           6: "[ωx, ωy, ωz, vx, vy, vz]"})):
            val = getattr(self, f)
            if n == 1:
                if not isinstance(val, float | int):
                    problems.append(((f,), f"a {self.type} joint takes one number", list(val)))
            elif isinstance(val, float | int):
                if val != 0.0:                      # 0 (the default, kept by dumps) means the neutral q / rest
                    problems.append(((f,), f"a {self.type} joint takes {what[n]}", val))
            elif len(val) != n:
                problems.append(((f,), f"a {self.type} joint takes {n} numbers: {what[n]}", list(val)))
        if self.type in ("ball", "free") and isinstance(self.initial_position, tuple) and \
                len(self.initial_position) == sizes[0]:
            quat = self.initial_position[-4:]
            norm = math.sqrt(sum(c * c for c in quat))
            if abs(norm - 1.0) >= QUATERNION_NORM_TOLERANCE:
                problems.append((("initial_position",), f"the quaternion part must be a unit quaternion (|q| = "
                                 f"{norm:.6g})", list(self.initial_position)))
        if self.friction > 0 and self.type not in ("revolute", "prismatic"):
            problems.append((("friction",), f"dry friction acts on revolute and prismatic joints, not {self.type} "
                             "joints; remove it", self.friction))
        if self.parent == self.child:
            problems.append((("child",), "a body cannot be its own parent", self.child))
        if problems:
            raise FieldProblems(problems)
        return self


class ActuatorSpec(_Spec):
    """An implicit PD actuator on a revolute or prismatic joint (SAP constraint; docs/articulated.md):

    u = clamp(−kp (q − q_d(t)) − kd (q̇ − v_d(t)) + feedforward, −effort, effort)."""

    joint: Name = Field(description="Name of the actuated joint (revolute or prismatic).")
    kp: float = Field(ge=0.0, description="Position gain Kp [N·m/rad or N/m] (>= 0).")
    kd: float = Field(0.0, ge=0.0, description="Velocity gain Kd [N·m·s/rad or N·s/m] (>= 0); kp + kd > 0.")
    target: float | list[tuple[float, float]] = Field(
        0.0, description="Position target q_d [rad or m]: a number, or [[t0, q0], [t1, q1], ...] piecewise "
        "linear in t [s] (times strictly increasing; held constant outside).")
    velocity_target: float | None = Field(
        None, description="Velocity target v_d [rad/s or m/s] (default: the slope of the target, 0 for a constant).")
    feedforward: float = Field(0.0, description="Feed-forward force u_ff [N·m or N].")
    effort: float | None = Field(None, gt=0.0, description="Effort limit |u| <= effort [N·m or N] (> 0; none: unlimited).")

    @model_validator(mode="after")
    def _check_actuator(self) -> "ActuatorSpec":
        problems: list[tuple[Loc, str, Any]] = []
        if self.kp + self.kd <= 0:
            problems.append((("kp",), "kp and kd cannot both be 0", self.kp))
        if isinstance(self.target, list):
            if not self.target:
                problems.append((("target",), "a trajectory needs at least one [t, q] point", []))
            ts = [p[0] for p in self.target]
            for i in range(1, len(ts)):
                if not ts[i] > ts[i - 1]:
                    problems.append((("target", i, 0), f"times must be strictly increasing ({ts[i]} after {ts[i - 1]})", ts[i]))
                    break
        if problems:
            raise FieldProblems(problems)
        return self


class MotorSpec(_Spec):
    """A torque input on a revolute or prismatic joint (MJCF ``<motor>``, a URDF joint without a servo): the joint
    gets clamp(torque + τ_controller, −effort, effort) every step, ``torque`` a constant (default 0) and
    τ_controller what a controller commands (0 without one)."""

    joint: Name = Field(description="Name of the driven joint (revolute or prismatic).")
    torque: float = Field(0.0, description="Constant generalized force τ [N·m or N] added to "
                          "what a controller commands (default 0: the joint is free unless a controller sets its "
                          "torque).")
    effort: float | None = Field(None, gt=0.0, description="Limit |τ| <= effort [N·m or N] (> 0; none: unlimited).")

    @model_validator(mode="after")
    def _check_motor(self) -> "MotorSpec":
        problems: list[tuple[Loc, str, Any]] = []
        if self.effort is not None and abs(self.torque) > self.effort:
            problems.append((("torque",), f"|torque| exceeds effort {self.effort}", self.torque))
        if problems:
            raise FieldProblems(problems)
        return self


class ConstraintSpec(_Spec):
    """A weld, fixed distance or joint coupler between bodies of different trees, free bodies and the world
    (SAP constraints; docs/articulated.md). Body frames are at the body's centre of mass with its axes."""

    type: Literal["weld", "distance", "coupler"] = Field(description="'weld', 'distance' or 'coupler'.")
    name: Name | None = Field(None, description="Name used in messages (default: constraints[i]).")
    body_a: Name = Field("world", description="weld/distance: first body, or 'world'.")
    body_b: Name | None = Field(None, description="weld/distance: second body (required).")
    point_a: Vec3 = Field((0.0, 0.0, 0.0), description="distance: point P in body_a's frame (world coordinates for 'world') [m].")
    point_b: Vec3 = Field((0.0, 0.0, 0.0), description="distance: point Q in body_b's frame [m].")
    distance: float | None = Field(None, gt=0.0, description="distance: |PQ| to keep [m] (> 0; default: |PQ| at t = 0).")
    stiffness: float | None = Field(None, gt=0.0, description="weld/distance: stiffness [N/m] (> 0; none: near-rigid).")
    angular_stiffness: float | None = Field(None, gt=0.0, description="weld: angular stiffness [N·m/rad] (> 0; none: near-rigid).")
    relaxation_time: float = Field(0.0, ge=0.0, description="weld/distance: relaxation time τ [s] of a compliant constraint (damping k·τ).")
    joint: Name | None = Field(None, description="coupler: the driven joint q_i (revolute or prismatic).")
    reference: Name | None = Field(None, description="coupler: the reference joint q_j (revolute or prismatic).")
    ratio: float = Field(1.0, description="coupler: ρ in q_i = ρ q_j + offset (dimensionless, or m/rad).")
    offset: float = Field(0.0, description="coupler: offset [rad or m].")

    @model_validator(mode="after")
    def _check_constraint(self) -> "ConstraintSpec":
        problems: list[tuple[Loc, str, Any]] = []
        defaults = {name: f.default for name, f in type(self).model_fields.items()}
        set_fields = {f for f in self.model_fields_set if getattr(self, f) != defaults[f]}   # dumps keep defaults
        if self.type == "coupler":
            for f in ("joint", "reference"):
                if getattr(self, f) is None:
                    problems.append(((f,), f"a coupler needs '{f}' (a joint name)", None))
            for f in ("body_a", "body_b", "point_a", "point_b", "distance", "stiffness", "angular_stiffness",
                      "relaxation_time"):
                if f in set_fields:
                    problems.append(((f,), f"'{f}' does not apply to a coupler; remove it", getattr(self, f)))
            if self.joint is not None and self.joint == self.reference:
                problems.append((("reference",), "a joint cannot be coupled to itself", self.reference))
        else:
            if self.body_b is None:
                problems.append((("body_b",), f"a {self.type} needs 'body_b' (a body name)", None))
            for f in ("joint", "reference", "ratio", "offset"):
                if f in set_fields:
                    problems.append(((f,), f"'{f}' applies to couplers only; remove it", getattr(self, f)))
            if self.type == "weld":
                for f in ("point_a", "point_b", "distance"):
                    if f in set_fields:
                        problems.append(((f,), f"'{f}' applies to distance constraints; a weld keeps the relative "
                                         "pose of t = 0", getattr(self, f)))
            elif "angular_stiffness" in set_fields:
                problems.append((("angular_stiffness",), "'angular_stiffness' applies to welds only", self.angular_stiffness))
            if self.body_b is not None and self.body_a == self.body_b:
                problems.append((("body_b",), "a body cannot be constrained to itself", self.body_b))
        if problems:
            raise FieldProblems(problems)
        return self


def constraint_problems(data: Any) -> list[tuple[Loc, str, Any]]:
    """Scene-wide checks of ``constraints``: unknown bodies and joints, couplers on joints without exactly
    one dof, constraints between two bodies that cannot move (world or fixed)."""
    problems: list[tuple[Loc, str, Any]] = []
    cons = data.get("constraints") or []
    if not cons:
        return problems
    bodies = {b["name"]: b for b in data.get("bodies") or []}
    for grid in data.get("grids") or []:
        n = int(np.prod(grid["counts"]))
        for k in range(n if n <= MAX_GRID_BODIES else 0):
            bodies[f"{grid['name']}_{k}"] = grid["template"]
    joints = {j["name"]: j for j in data.get("joints") or []}

    def unknown(what, name, known):
        mean = _did_you_mean(name, known)
        return f"unknown {what} {name!r}{mean}"

    for i, c in enumerate(cons):
        if c["type"] == "coupler":
            for f in ("joint", "reference"):
                jn = c[f]
                if jn not in joints:
                    problems.append((("constraints", i, f), unknown("joint", jn, joints), jn))
                elif joints[jn]["type"] not in ("revolute", "prismatic"):
                    problems.append((("constraints", i, f), f"joint {jn!r} is {joints[jn]['type']}; couplers tie "
                                     "revolute or prismatic joints", jn))
            continue
        fixed = []
        for f in ("body_a", "body_b"):
            b = c[f]
            if b == "world":
                if f == "body_b":
                    problems.append((("constraints", i, f), "body_b must be a body; put 'world' in body_a", b))
                fixed.append(True)
            elif b not in bodies:
                problems.append((("constraints", i, f), unknown("body", b, bodies) + "; use a body name or 'world'", b))
                fixed.append(False)
            elif bodies[b].get("kinematic") and c["type"] in ("weld", "distance"):
                problems.append((("constraints", i, f), f"body {b!r} is kinematic: welds and distances to kinematic "
                                 "bodies are not supported yet (the constraint would miss the body's velocity); "
                                 "push bodies through contact instead", b))
                fixed.append(False)
            else:
                fixed.append(bool(bodies[b].get("fixed")))
        if all(fixed):
            problems.append((("constraints", i, "body_b"), "both bodies are fixed (or the world); the constraint "
                             "would move nothing", c["body_b"]))
    return problems


def joint_problems(data: Any) -> list[tuple[Loc, str, Any]]:
    """Scene-wide checks of ``joints`` and ``actuators`` on a validated scene dump: unknown parent/child,
    a body with two parents, cycles, links that are fixed or have their own pose, duplicate joint names,
    actuators on unknown or non-1-dof joints, two actuators on one joint."""
    problems: list[tuple[Loc, str, Any]] = []
    joints = data.get("joints") or []
    if not joints:
        for what in ("actuators", "motors"):
            if data.get(what):
                problems.append(((what,), f"{what} need joints (the scene has no 'joints')", None))
        return problems
    bodies = {b["name"]: b for b in data.get("bodies") or []}
    names: dict[str, int] = {}
    child_of: dict[str, int] = {}
    for i, j in enumerate(joints):
        if j["name"] in names:
            problems.append((("joints", i, "name"), f"duplicate joint name {j['name']!r} (joints[{names[j['name']]}])", j["name"]))
        names.setdefault(j["name"], i)
        if j["parent"] != "world" and j["parent"] not in bodies:
            mean = _did_you_mean(j["parent"], bodies)
            problems.append((("joints", i, "parent"), f"unknown body {j['parent']!r}{mean}; use a body name or 'world'", j["parent"]))
        c = j["child"]
        if c not in bodies:
            mean = _did_you_mean(c, bodies)
            problems.append((("joints", i, "child"), f"unknown body {c!r}{mean}", c))
            continue
        if c in child_of:
            problems.append((("joints", i, "child"), f"body {c!r} already has a parent joint (joints[{child_of[c]}]); "
                             "a body has at most one parent", c))
            continue
        child_of[c] = i
        b = bodies[c]
        if b.get("fixed") or b.get("kinematic"):
            what = "fixed" if b.get("fixed") else "kinematic"
            problems.append((("joints", i, "child"), f"body {c!r} is {what}; a joint's child must be a moving body", c))
        for f, default in (("position", (0.0, 0.0, 0.0)), ("quaternion", (1.0, 0.0, 0.0, 0.0)),
                          ("linear_velocity", (0.0, 0.0, 0.0)), ("angular_velocity", (0.0, 0.0, 0.0))):
            if tuple(b.get(f, default)) != default:
                problems.append((("joints", i, "child"), f"body {c!r} is a link: its {f} comes from its joints "
                                 f"(remove bodies.{c}.{f}; use the joint's initial_position/initial_velocity)", c))
                break
    # parents that are links must eventually reach the world or a fixed body: no cycles
    in_cycle: set = set()
    for i, j in enumerate(joints):
        if child_of.get(j["child"]) != i or j["child"] in in_cycle:
            continue                                    # already reported (two parents, same cycle)
        seen, p = {j["child"]}, j["parent"]
        while p != "world" and p in child_of:
            if p in seen:
                problems.append((("joints", i, "parent"), f"joints form a cycle through body {p!r}", j["parent"]))
                in_cycle |= seen
                break
            seen.add(p)
            p = joints[child_of[p]]["parent"]
        else:
            if p != "world" and p in bodies and bodies[p].get("kinematic"):
                problems.append((("joints", i, "parent"), f"the tree's root body {p!r} is kinematic; a tree hangs from "
                                 "the world or a fixed body (a moving base would need its motion in the tree's "
                                 "dynamics, which convexsim does not model yet)", j["parent"]))
            elif p != "world" and p in bodies and not bodies[p].get("fixed"):
                problems.append((("joints", i, "parent"), f"the tree's root body {p!r} is a free body; a tree must hang "
                                 "from the world or a fixed body (for a floating base, give the root body a joint of type "
                                 "'free' from the world)", j["parent"]))
    for section, one in (("actuators", "an actuator"), ("motors", "a motor")):
        seen: dict[str, int] = {}
        for a, drive in enumerate(data.get(section) or []):
            jn = drive["joint"]
            if jn not in names:
                problems.append(((section, a, "joint"), f"unknown joint {jn!r}{_did_you_mean(jn, names)}", jn))
                continue
            if joints[names[jn]]["type"] not in ("revolute", "prismatic"):
                problems.append(((section, a, "joint"), f"joint {jn!r} is {joints[names[jn]]['type']}; {section} "
                                 "drive revolute or prismatic joints", jn))
            if jn in seen:
                problems.append(((section, a, "joint"), f"joint {jn!r} already has {one} ({section}[{seen[jn]}])", jn))
            seen.setdefault(jn, a)
    return problems


class SceneSpec(_Spec):
    """A scene: global settings, materials, bodies and grids of bodies."""

    _scale_fields: ClassVar[tuple[str, ...]] = ("time_step", "duration")

    name: Name = Field("scene", description="Scene name (default: the file name without extension).")
    description: str = Field("", description="Free text; shipped scenes describe themselves in a comment header instead.")
    time_step: float = Field(1e-3, gt=0.0, description="Time step dt [s] (> 0).")
    duration: float = Field(1.0, gt=0.0, description="Default simulated duration [s] (> 0).")
    gravity: Vec3 = Field((0.0, 0.0, -9.81), description="Gravity acceleration in W [m/s²].")
    contact_model: Literal["sap", "lagged", "similar"] = Field(
        "sap", description="Compliant contact model of the SAP solver: 'sap', 'lagged' or 'similar'."
    )
    solver: SolverSpec = Field(default_factory=SolverSpec, description="Solver kind and parameters.")
    materials: dict[Name, MaterialSpec] = Field(
        default_factory=dict, description="Materials by name; 'default' exists implicitly with the default values."
    )
    bodies: list[BodySpec] = Field(default_factory=list, description="Rigid bodies.")
    grids: list[GridSpec] = Field(default_factory=list, description="Lattices of identical bodies.")
    joints: list[JointSpec] = Field(default_factory=list, description="Joints making kinematic trees of the bodies.")
    actuators: list[ActuatorSpec] = Field(default_factory=list, description="PD actuators on joints.")
    motors: list[MotorSpec] = Field(default_factory=list, description="Torque inputs [N·m or N] on joints: a constant "
                                    "torque plus what a controller gives, clamped to the effort limit.")
    constraints: list[ConstraintSpec] = Field(
        default_factory=list, description="Welds, fixed distances and joint couplers between bodies of any trees, "
        "free bodies and the world.")
    unit_warnings: bool | None = Field(
        None, description="false silences the warnings about values almost surely in the wrong units "
        "(UNIT_RANGES; default: warn)."
    )

    @field_validator("materials")
    @classmethod
    def _add_default_material(cls, value: dict[str, MaterialSpec]) -> dict[str, MaterialSpec]:
        if DEFAULT_MATERIAL not in value:
            value = {DEFAULT_MATERIAL: MaterialSpec(), **value}
        return value

    @model_validator(mode="after")
    def _check_references(self) -> "SceneSpec":
        dump = self.model_dump()
        problems = (cross_reference_problems(dump) + joint_problems(dump) + constraint_problems(dump)
                    + kinematic_scene_problems(dump))
        if problems:
            raise FieldProblems(problems)
        return self


def kinematic_scene_problems(data: Any) -> list[tuple[Loc, str, Any]]:
    """Scene-wide check of kinematic bodies: contacts with a moving kinematic body need the 'sap' contact model
    (the constraint velocity gains the body's known velocity, a shift of the cone constraint's bias velocity;
    the Hunt–Crossley models 'lagged' and 'similar' have no such term)."""
    if data.get("contact_model", "sap") == "sap":
        return []
    for i, b in enumerate(data.get("bodies") or []):
        if b.get("kinematic"):
            return [(("bodies", i, "kinematic"), f"a kinematic body needs contact_model 'sap' (the scene has "
                     f"{data.get('contact_model')!r}, whose contact law cannot take the body's velocity)", True)]
    for g, grid in enumerate(data.get("grids") or []):
        if (grid.get("template") or {}).get("kinematic"):
            return [(("grids", g, "template", "kinematic"), f"a kinematic body needs contact_model 'sap' (the scene "
                     f"has {data.get('contact_model')!r})", True)]
    return []


def cross_reference_problems(data: Any) -> list[tuple[Loc, str, Any]]:
    """Scene-wide checks on a (possibly invalid) raw scene mapping: duplicate body names (grid bodies
    included), unknown material names and halfspaces on moving bodies. Tolerates any structure;
    skips what it cannot read."""
    problems: list[tuple[Loc, str, Any]] = []
    if not isinstance(data, dict):
        return problems
    materials = data.get("materials") or {}
    known = set(materials) if isinstance(materials, dict) else set()
    known.add(DEFAULT_MATERIAL)
    seen: dict[str, Loc] = {}

    def claim(name: Any, loc: Loc) -> bool:
        """Record a body name; report and return False when it is taken."""
        if not isinstance(name, str):
            return True
        if name in seen:
            where = format_loc(seen[name])
            problems.append((loc, f"duplicate body name {name!r} (already used by {where}); body names must be unique", name))
            return False
        seen[name] = loc
        return True

    def check_geometries(body: Any, loc: Loc) -> None:
        geoms = body.get("geometries") if isinstance(body, dict) else None
        if not isinstance(geoms, list):
            return
        moving = body.get("fixed", False) is not True and body.get("kinematic", False) is not True  # kinematic: its own check
        for j, geom in enumerate(geoms):
            if moving and isinstance(geom, dict) and geom.get("shape") == "halfspace":
                problems.append((loc + ("geometries", j, "shape"), HALFSPACE_ON_MOVING_BODY, "halfspace"))
            mat = geom.get("material") if isinstance(geom, dict) else None
            if isinstance(mat, str) and mat not in known:
                allowed = ", ".join(sorted(known))
                mean = _did_you_mean(mat, known)
                problems.append((loc + ("geometries", j, "material"),
                                 f"unknown material {mat!r}{mean}; defined materials: {allowed}", mat))

    bodies = data.get("bodies")
    if isinstance(bodies, list):
        for i, body in enumerate(bodies):
            if isinstance(body, dict):
                claim(body.get("name"), ("bodies", i, "name"))
                check_geometries(body, ("bodies", i))
    grids = data.get("grids")
    if isinstance(grids, list):
        for g, grid in enumerate(grids):
            if not isinstance(grid, dict):
                continue
            check_geometries(grid.get("template"), ("grids", g, "template"))
            name, counts = grid.get("name"), grid.get("counts")
            if isinstance(name, str) and isinstance(counts, (list, tuple)) and len(counts) == 3 and all(
                isinstance(c, int) and c >= 1 for c in counts
            ) and math.prod(counts) <= MAX_GRID_BODIES:
                for k in range(int(np.prod(counts))):
                    if not claim(f"{name}_{k}", ("grids", g, "name")):
                        break  # one report per grid is enough
    return problems


UNIT_RANGES = {
    "time_step": (0.0, 0.05),          # [s]: rigid-body scenes use 1e-4 .. 1e-2 s
    "gravity": (0.0, 100.0),            # [m/s²], |g|: Earth 9.81; 981 is cm/s²
    "size": (1e-4, 10.0),               # [m]: radius, box edge, capsule length of a moving body
    "density": (0.1, 1e5),              # [kg/m³]: mass / shape volume; beach ball ~1.5, osmium 22 590
    "mass": (1e-5, 1e5),                # [kg]: bodies without solid shapes (explicit inertia)
    "speed": (0.0, 100.0),              # [m/s], |v| of a body's initial velocity
    "spin": (0.0, 1000.0),              # [rad/s], |ω| of a body's initial angular velocity
    "position": (0.0, 1e4),             # [m], |p| of a body's initial position
}
"""Plausible ranges of values in a rigid-body scene (SI units). A value outside is almost surely in the
wrong unit (ms for s, cm or mm for m, g for kg, cm/s² for m/s²): loading warns (:func:`unit_problems`)
and still accepts it. ``unit_warnings: false`` in the scene silences the warnings."""


def _outside(key: str, value: float) -> bool:
    """True when ``value`` is outside ``UNIT_RANGES[key]``."""
    low, high = UNIT_RANGES[key]
    return not low <= value <= high


def unit_problems(spec: "SceneSpec") -> list[tuple[Loc, str, Any]]:
    """Values of a valid scene outside :data:`UNIT_RANGES`, as (field path, message, value) triples.

    Checks dt, |g|, the shape sizes of moving bodies (sphere/capsule radius, box edges, capsule length),
    their density m / Σ V (or the mass of a body without solid shapes), the initial |p|, |v|, |ω|, and the
    joints' offsets (|position|, |child_offset| against the |p| range).
    Returns [] when ``spec.unit_warnings`` is False.
    """
    if spec.unit_warnings is False:
        return []
    out: list[tuple[Loc, str, Any]] = []
    dt = spec.time_step
    if _outside("time_step", dt):
        unit = " (is it in ms?)" if dt >= 0.5 else ""
        out.append((("time_step",), f"dt = {dt:g} s is far above the {UNIT_RANGES['time_step'][1]:g} s "
                    f"a rigid-body scene uses (typically 1e-4 .. 1e-2 s){unit}", dt))
    g = math.hypot(*spec.gravity)          # no overflow for huge components
    if _outside("gravity", g):
        out.append((("gravity",), f"|g| = {g:g} m/s² is more than 10x Earth's 9.81 m/s² (is it in cm/s²?)",
                    list(spec.gravity)))
    for i, body in enumerate(spec.bodies):
        out += [(("bodies", i) + loc, msg, value) for loc, msg, value in _body_unit_problems(body)]
    for g_i, grid in enumerate(spec.grids):
        out += [(("grids", g_i, "template") + loc, msg, value)
                for loc, msg, value in _body_unit_problems(grid.template)]
    for j, joint in enumerate(getattr(spec, "joints", ())):
        for fname in ("position", "child_offset"):
            d = math.hypot(*getattr(joint, fname))
            if _outside("position", d):
                out.append((("joints", j, fname), f"a lever of {d:g} m in one joint (is it in mm?); beyond ~1e8 "
                            "times a link's size its mass matrix is singular in double precision",
                            list(getattr(joint, fname))))
    return out


def _body_unit_problems(body: "BodyTemplate") -> list[tuple[Loc, str, Any]]:
    """The unit-range problems of one body (relative paths); fixed bodies are only checked for |p|."""
    out: list[tuple[Loc, str, Any]] = []
    p = math.hypot(*body.position)
    if _outside("position", p):
        out.append((("position",), f"|p| = {p:g} m from the origin (is it in mm?)", list(body.position)))
    if body.fixed or body.kinematic:
        return out
    low, high = UNIT_RANGES["size"]
    for j, geom in enumerate(body.geometries):
        for fname in ("radius", "length", "size"):
            value = getattr(geom, fname)
            if value is None:
                continue
            for x in (value if isinstance(value, tuple) else (value,)):
                if x > high or 0 < x < low:
                    guess = "cm or mm" if x > high else "km"
                    msg = (f"{x:g} m is outside the {low:g} .. {high:g} m of a moving rigid body's shape "
                           f"(is it in {guess}?)")
                    out.append((("geometries", j, fname), msg, value))
                    break
    solids = [g for g in body.geometries if g.shape != "halfspace"]
    if body.mass is not None and solids:
        volume = sum(shape_volume(g) for g in solids)
        rho = body.mass / volume if volume > 0 else math.inf    # volume > 0 by the scale limits
        low, high = UNIT_RANGES["density"]
        if not low <= rho <= high:
            why = ("far above any solid (osmium: 22 590 kg/m³); is the mass in grams, or the size in cm?"
                   if rho > high else "far below a hollow ball (~1.5 kg/m³); is the size in cm or mm?")
            out.append((("mass",), f"{body.mass:g} kg in {volume:.3g} m³ of shapes is a density of "
                        f"{rho:.3g} kg/m³, " + why, body.mass))
    elif body.mass is not None and _outside("mass", body.mass):
        low, high = UNIT_RANGES["mass"]
        out.append((("mass",), f"{body.mass:g} kg is outside the {low:g} .. {high:g} kg of a rigid body here "
                    "(is it in grams?)", body.mass))
    v, w = math.hypot(*body.linear_velocity), math.hypot(*body.angular_velocity)
    if _outside("speed", v):
        out.append((("linear_velocity",), f"|v| = {v:g} m/s (is it in cm/s or mm/s?)",
                    list(body.linear_velocity)))
    if _outside("spin", w):
        out.append((("angular_velocity",), f"|ω| = {w:g} rad/s, over 150 turns per second (is it in deg/s?)",
                    list(body.angular_velocity)))
    return out


def format_loc(loc: Loc) -> str:
    """('bodies', 2, 'geometries', 0, 'radius') -> 'bodies[2].geometries[0].radius'."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


__all__ = [
    "SceneSpec",
    "BodySpec",
    "ConstraintSpec",
    "MotorSpec",
    "BodyTemplate",
    "GeometrySpec",
    "GridSpec",
    "MaterialSpec",
    "SolverSpec",
    "FieldProblems",
    "DEFAULT_MATERIAL",
    "QUATERNION_NORM_TOLERANCE",
    "check_inertia",
    "inertia_matrix",
    "CENTROID_RELATIVE_TOLERANCE",
    "cross_reference_problems",
    "format_loc",
    "unit_problems",
    "UNIT_RANGES",
    "SCENE_NUMBER_LIMIT",
    "SMALLEST_SCALE",
    "range_problems",
]
