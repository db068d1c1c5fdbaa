"""Model, State and Contacts: the flat-array contract between scene, collision, dynamics and solvers.

A ``Model`` is what ``compile_scene`` produces from a validated scene: numpy arrays, indices and
plain settings, no names in hot paths. A ``State`` is replaced every step. ``Contacts`` is what
collision detection produces for one configuration.

Conventions (docs/conventions.md):

* SI units, z up, right-handed frames.
* Body frame B has its origin at the body's centre of mass (COM).
* Pose of body b: ``q[b] = (x, y, z, qw, qx, qy, qz)``: position of the COM in world W [m] and the
  unit quaternion R_WB, scalar first.
* Velocity of body b: ``v[b] = (wx, wy, wz, vx, vy, vz)``: angular velocity of B in W, expressed in W
  [rad/s], then translational velocity of the COM in W [m/s] (angular first, as Drake and MuJoCo).
* Fixed bodies keep their pose and have zero velocity; they own no degrees of freedom.
* Kinematic bodies own no degrees of freedom either (infinite mass: contacts never move them); their
  velocity v[b] is an input (a script sets it) and each step advances their pose by it, as a free body's.
* Contact normal points from body A into body B; ``phi > 0`` gap, ``phi < 0`` penetration.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np


class StatusCode(enum.IntEnum):
    """An IntEnum of solver outcomes (kernels return them as ints) that prints and formats as its name
    (``SapStatus``, ``LemkeStatus``)."""

    def __str__(self) -> str:
        return self.name

    def __format__(self, spec: str) -> str:
        return format(self.name, spec)


class GeomType(enum.IntEnum):
    """Geometry primitive kinds (values are stored in ``Model.geom_type``)."""

    SPHERE = 0
    BOX = 1
    CAPSULE = 2
    HALFSPACE = 3
    CYLINDER = 4
    MESH = 5


class ContactModel(enum.IntEnum):
    """Compliant contact models solved by SAP (docs/sap-model.md §2–4)."""

    SAP = 0
    LAGGED = 1
    SIMILAR = 2


@dataclass(frozen=True)
class SolverSettings:
    """Solver choice and parameters, resolved from the scene's ``solver`` block.

    Attributes:
        kind: "sap" or "lcp".
        rel_tolerance: SAP ε_r (dimensionless), momentum-residual stopping rule.
        abs_tolerance: SAP ε_a [sqrt(J)], absolute stopping rule.
        max_iterations: SAP Newton iteration limit.
        sigma: SAP friction regularization σ (dimensionless); stiction slip ≈ σ·μ·dt·g.
        beta: SAP near-rigid threshold β (dimensionless).
        line_search: "exact" or "backtracking".
        stiction_tolerance: v_s [m/s] of the Hunt–Crossley models (lagged / similar).
        slip_curvature: SAP slip curvature κ (dimensionless) of the Newton matrix (SapParameters); 0: exact.
        friction_directions: LCP: number of directions of the polyhedral friction cone.
        lcp_stabilization: LCP: fraction of the penetration removed per step (Baumgarte-like, in [0, 1]).
        lcp_restitution: LCP: Newton restitution coefficient e_N (0 = plastic impact).
        lcp_max_pivots: LCP: Lemke pivot limit (0 = automatic).
    """

    kind: str = "sap"
    rel_tolerance: float = 1e-6
    abs_tolerance: float = 1e-14
    max_iterations: int = 100
    sigma: float = 1e-3
    beta: float = 1.0
    line_search: str = "exact"
    stiction_tolerance: float = 1e-4
    slip_curvature: float = 1.0
    friction_directions: int = 8
    lcp_stabilization: float = 0.2
    lcp_restitution: float = 0.0
    lcp_max_pivots: int = 0


@dataclass(frozen=True)
class Model:
    """A compiled scene: flat arrays in SI units. Built by ``convexsim.scene.compile_scene``.

    Attributes:
        name: scene name.
        time_step: dt [s].
        duration: default simulated duration [s].
        gravity: gravity acceleration in W [m/s²], shape (3,).
        contact_model: ContactModel used by the SAP stepper.
        solver: SolverSettings.
        body_names: body names, length nbody.
        body_mass: mass [kg], shape (nbody,).
        body_inertia: rotational inertia about the COM in body frame B [kg·m²], shape (nbody, 3, 3).
        body_fixed: True for bodies without degrees of freedom: fixed (world-welded) and kinematic ones, shape
            (nbody,).
        body_dof: index of the body's first generalized velocity in the packed vector of moving bodies
            (multiple of 6), or -1 for fixed bodies, shape (nbody,).
        geom_body: owning body index, shape (ngeom,).
        geom_type: GeomType value, shape (ngeom,).
        geom_size: shape parameters [m], shape (ngeom, 3): sphere (r, 0, 0); box half extents
            (hx, hy, hz); capsule (r, h, 0) with h = half the distance between cap centres along local z;
            cylinder (r, h, 0) with h = half its height (flat caps at local z = ±h); mesh: the half extents
            of its hull about the geometry origin (max |x|, max |y|, max |z| of its vertices); halfspace
            (0, 0, 0) (surface through the geom origin, outward normal = local +z).
        geom_pos: geometry origin in body frame B [m], shape (ngeom, 3).
        geom_quat: geometry orientation R_BG, (w, x, y, z), shape (ngeom, 4).
        geom_material: material index, shape (ngeom,).
        geom_rbound: bounding-sphere radius about the geom origin [m] (inf for halfspace), shape (ngeom,).
        geom_color: RGBA in [0, 1] for viewers, shape (ngeom, 4).
        material_names: material names, length nmat.
        material_friction: Coulomb friction μ (dimensionless), shape (nmat,).
        material_stiffness: point-contact stiffness k [N/m], shape (nmat,).
        material_dissipation_time: SAP dissipation time scale τ_d [s], shape (nmat,).
        material_hc_dissipation: Hunt–Crossley dissipation d [s/m], shape (nmat,).
        scene_yaml: the fully resolved scene as YAML text (stored in trajectory files).
        forest: the kinematic trees of the scene (a ``convexsim.multibody.forest.Forest``), or None. A
            tree's link bodies are ordinary bodies here (not fixed, ``body_dof = -1``): collision, the
            viewer and trajectories see them as bodies; their poses come from the tree's joint
            coordinates (``State.tree_q``/``State.tree_v``) by forward kinematics (docs/articulated.md).
        geom_mesh: index of the geometry's convex mesh (MESH geometries), else -1, shape (ngeom,).
        mesh_vert_adr, mesh_vert_num: first row in ``mesh_vert`` and vertex count of each mesh, shapes (nmesh,).
        mesh_vert: the meshes' hull vertices in their geometry frame G [m] (scale applied), shape (nvert, 3).
        mesh_face_adr, mesh_face_num: first row in ``mesh_face`` and triangle count of each mesh, (nmesh,).
        mesh_face: hull triangles, vertex indices local to their mesh, counter-clockwise seen from outside
            (outward normal (b−a)×(c−a)), shape (nface, 3).
        collision_filter: the geometries' collision filter, (group, mask) bits per geometry, shape (ngeom, 2), or
            None when every pair may collide: i and j collide only if (group_i & mask_j) | (group_j & mask_i) ≠ 0
            (``geometry.broadphase``).
        body_kinematic: True for kinematic bodies (also ``body_fixed``, ``body_dof = -1``): their pose advances
            by their velocity ``State.v[b]`` each step and contacts with them use that velocity, shape (nbody,)
            (the default, an empty array, also means none).
    """

    name: str
    time_step: float
    duration: float
    gravity: np.ndarray
    contact_model: ContactModel
    solver: SolverSettings
    body_names: tuple[str, ...]
    body_mass: np.ndarray
    body_inertia: np.ndarray
    body_fixed: np.ndarray
    body_dof: np.ndarray
    geom_body: np.ndarray
    geom_type: np.ndarray
    geom_size: np.ndarray
    geom_pos: np.ndarray
    geom_quat: np.ndarray
    geom_material: np.ndarray
    geom_rbound: np.ndarray
    geom_color: np.ndarray
    material_names: tuple[str, ...]
    material_friction: np.ndarray
    material_stiffness: np.ndarray
    material_dissipation_time: np.ndarray
    material_hc_dissipation: np.ndarray
    scene_yaml: str = ""
    forest: Any = None
    geom_mesh: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    mesh_vert_adr: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    mesh_vert_num: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    mesh_vert: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    mesh_face_adr: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    mesh_face_num: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    collision_filter: np.ndarray | None = None
    mesh_face: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int64))
    body_kinematic: np.ndarray = field(default_factory=lambda: np.zeros(0, np.bool_))

    def mesh_of(self, g: int) -> tuple[np.ndarray, np.ndarray]:
        """(vertices (nv, 3) in G [m], triangles (nf, 3)) of mesh geometry g."""
        m = int(self.geom_mesh[g])
        if m < 0:
            raise ValueError(f"geometry {g} is not a mesh (type {int(self.geom_type[g])})")
        va, vn = int(self.mesh_vert_adr[m]), int(self.mesh_vert_num[m])
        fa, fn = int(self.mesh_face_adr[m]), int(self.mesh_face_num[m])
        return self.mesh_vert[va:va + vn], self.mesh_face[fa:fa + fn]

    @property
    def has_trees(self) -> bool:
        """True when the scene has kinematic trees (joints) or body constraints (welds, distances,
        couplers); such models take the articulated step."""
        return self.forest is not None and (len(self.forest.trees) > 0 or len(self.forest.constraints) > 0)

    @property
    def kinematic_bodies(self) -> np.ndarray:
        """Indices of the kinematic bodies (int64, ascending; empty when there are none)."""
        return np.flatnonzero(np.asarray(self.body_kinematic, dtype=bool)).astype(np.int64)

    @property
    def nbody(self) -> int:
        """Number of bodies (fixed ones included)."""
        return len(self.body_names)

    @property
    def ngeom(self) -> int:
        """Number of geometries."""
        return int(self.geom_type.shape[0])

    @property
    def nv(self) -> int:
        """Number of generalized velocities (6 per free moving body, plus the trees' joint velocities)."""
        return 6 * int(np.count_nonzero(self.body_dof >= 0)) + (self.forest.nv if self.has_trees else 0)


@dataclass
class State:
    """The simulation state at time t.

    Attributes:
        t: time [s].
        q: body poses (x, y, z, qw, qx, qy, qz): COM position in W [m] and R_WB, shape (nbody, 7).
        v: body velocities (ωx, ωy, ωz, vx, vy, vz) in W [rad/s, m/s], shape (nbody, 6).
        step: number of steps taken.
        tree_q, tree_v: the joint coordinates and velocities of the model's kinematic trees, concatenated
            tree by tree (``Model.forest``), shapes (nq,), (nv,); None without trees. The link bodies'
            rows of ``q``/``v`` are their forward kinematics.
    """

    t: float
    q: np.ndarray
    v: np.ndarray
    step: int = 0
    tree_q: np.ndarray | None = None
    tree_v: np.ndarray | None = None

    def copy(self) -> "State":
        """Deep copy."""
        return State(self.t, self.q.copy(), self.v.copy(), self.step,
                     None if self.tree_q is None else self.tree_q.copy(),
                     None if self.tree_v is None else self.tree_v.copy())


@dataclass
class Contacts:
    """Contact pairs for one configuration (output of ``convexsim.geometry.collide``).

    Attributes:
        geom_a: geometry index of A, shape (nc,).
        geom_b: geometry index of B, shape (nc,).
        body_a: body index of A, shape (nc,).
        body_b: body index of B, shape (nc,).
        phi: signed distance [m] (> 0 gap, < 0 penetration), shape (nc,).
        point: contact point in W [m], midway between the closest surface points of A and B, shape (nc, 3).
        normal: unit contact normal in W, pointing from A into B, shape (nc, 3).
    """

    geom_a: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    geom_b: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    body_a: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    body_b: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    phi: np.ndarray = field(default_factory=lambda: np.zeros(0))
    point: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    normal: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))

    @property
    def count(self) -> int:
        """Number of contacts nc."""
        return int(self.phi.shape[0])


__all__ = [
    "GeomType",
    "ContactModel",
    "SolverSettings",
    "Model",
    "State",
    "Contacts",
]
