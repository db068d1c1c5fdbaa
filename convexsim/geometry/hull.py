"""Convex hulls and mass properties of closed triangle meshes (numpy; scene compile time only).

* :func:`convex_hull` — the hull of a point set (scipy's Qhull) as vertices and outward triangles.
* :func:`mesh_mass_properties` — volume, centroid and inertia of a closed, outward-oriented triangle
  mesh by the divergence theorem (a sum over the signed tetrahedra (0, a, b, c) of its triangles).
* :func:`cylinder_mass_properties` — the closed forms of a solid cylinder.
* :func:`read_mesh_points` — the vertices of an OBJ/STL/PLY file (trimesh), with a one-time warning
  when the file's mesh is not convex (its convex hull is used).
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache
from pathlib import Path

import numpy as np

from convexsim.errors import InputError

MESH_FILE_SUFFIXES = (".obj", ".stl", ".ply")
"""Mesh file formats read for ``shape: mesh`` with ``file:``."""

FLAT_HULL_RELATIVE_VOLUME = 1e-9
"""A hull whose volume is below this fraction of (its bounding-box diagonal)³ is flat (coplanar points)."""

NONCONVEX_RELATIVE_VOLUME = 1e-3
"""A file mesh whose closed volume is below its hull's by more than this fraction is reported non-convex."""


class MeshError(InputError):
    """A mesh that cannot be used: too few points, coplanar points, unreadable or unknown file."""


def convex_hull(points) -> tuple[np.ndarray, np.ndarray]:
    """Convex hull of ``points`` (n, 3) [m]: (vertices (nv, 3), faces (nf, 3) int64).

    The vertices are the hull's extreme points in input order; every face is a triangle of vertex
    indices ordered counter-clockwise seen from outside (normal (b−a)×(c−a) points out). Coplanar
    facets are triangulated. Raises MeshError for fewer than 4 points, non-finite or coplanar points.
    """
    from scipy.spatial import ConvexHull, QhullError

    p = np.asarray(points, dtype=float)
    if p.ndim != 2 or p.shape[1] != 3:
        raise MeshError(f"mesh vertices must be a list of [x, y, z] points, got an array of shape {p.shape}")
    if p.shape[0] < 4:
        raise MeshError(f"a convex mesh needs at least 4 points not in one plane, got {p.shape[0]}")
    if not np.all(np.isfinite(p)):
        raise MeshError("mesh vertices must be finite numbers")
    diag = float(np.linalg.norm(p.max(0) - p.min(0)))
    try:
        hull = ConvexHull(p)
    except QhullError:
        raise MeshError(f"the {p.shape[0]} mesh points lie in one plane (or on a line): no volume; "
                        "give at least 4 points not in one plane") from None
    if hull.volume <= FLAT_HULL_RELATIVE_VOLUME * diag**3:
        raise MeshError(f"the {p.shape[0]} mesh points are (nearly) in one plane: hull volume "
                        f"{hull.volume:.3g} m³ for a {diag:.3g} m extent")
    keep = np.sort(hull.vertices)
    remap = np.full(p.shape[0], -1, np.int64)
    remap[keep] = np.arange(keep.size)
    faces = remap[np.asarray(hull.simplices, dtype=np.int64)]
    verts = p[keep]
    a, b, c = verts[faces[:, 0]], verts[faces[:, 1]], verts[faces[:, 2]]
    inward = np.einsum("ij,ij->i", np.cross(b - a, c - a), hull.equations[:, :3]) < 0.0
    faces[inward] = faces[inward][:, [0, 2, 1]]
    return np.ascontiguousarray(verts), np.ascontiguousarray(faces)


def mesh_mass_properties(vertices, faces) -> tuple[float, np.ndarray, np.ndarray]:
    """(volume V [m³], centroid c [m] (3,), inertia per unit mass about c [m²] (3, 3)) of a solid.

    Divergence theorem over the signed tetrahedra (0, a, b, c) of the outward triangles, D = a·(b×c):
    V = Σ D/6, V·c = Σ D/24·(a + b + c), second moment C = ∫ x xᵀ dV = Σ D/120·(a aᵀ + b bᵀ + c cᵀ + s sᵀ)
    with s = a + b + c; about the centroid C_c = C − V c cᵀ, inertia per unit mass (tr(C_c)·1 − C_c)/V.
    """
    v = np.asarray(vertices, dtype=float)
    f = np.asarray(faces, dtype=np.int64)
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    d = np.einsum("ij,ij->i", a, np.cross(b, c))
    volume = float(d.sum() / 6.0)
    if not volume > 0.0:
        raise MeshError(f"the mesh encloses no positive volume ({volume:.3g} m³): not closed or faces inward")
    s = a + b + c
    centroid = (d[:, None] * s).sum(0) / 24.0 / volume
    second = np.einsum("k,ki,kj->ij", d, a, a) + np.einsum("k,ki,kj->ij", d, b, b)
    second += np.einsum("k,ki,kj->ij", d, c, c) + np.einsum("k,ki,kj->ij", d, s, s)
    second /= 120.0
    cc = second - volume * np.outer(centroid, centroid)
    inertia = (np.trace(cc) * np.eye(3) - cc) / volume
    return volume, centroid, 0.5 * (inertia + inertia.T)


def cylinder_mass_properties(radius: float, length: float) -> tuple[float, np.ndarray]:
    """(volume [m³], inertia per unit mass about the centre [m²] (3, 3)) of a solid cylinder of radius r and
    full length L along z: V = π r² L, I_zz = r²/2, I_xx = I_yy = (3 r² + L²)/12."""
    r, length = float(radius), float(length)
    ixx = (3.0 * r * r + length * length) / 12.0
    return math.pi * r * r * length, np.diag([ixx, ixx, 0.5 * r * r])


_WARNED_NONCONVEX: set[str] = set()


@lru_cache(maxsize=256)
def _read_mesh_file(path: str, mtime_ns: int) -> tuple[np.ndarray, float, float]:
    """(vertices, mesh volume, hull volume) of a mesh file (cached by path and modification time)."""
    try:
        import trimesh
    except ImportError as exc:  # a core dependency; only a broken install lands here
        raise MeshError(f"reading mesh file {path} needs the 'trimesh' package (pip install trimesh)") from exc
    try:
        mesh = trimesh.load(path, force="mesh", process=True)
    except Exception as exc:  # trimesh raises many types for a bad file
        raise MeshError(f"cannot read mesh file {path}: {type(exc).__name__}: {exc}") from None
    verts = np.asarray(getattr(mesh, "vertices", np.zeros((0, 3))), dtype=float)
    if verts.shape[0] == 0:
        raise MeshError(f"mesh file {path} has no vertices")
    closed_volume = float(abs(mesh.volume)) if getattr(mesh, "is_watertight", False) else math.nan
    hull_volume = float(mesh.convex_hull.volume) if verts.shape[0] >= 4 else 0.0
    return verts, closed_volume, hull_volume


def read_mesh_points(path: str | Path) -> np.ndarray:
    """Vertices (n, 3) of an OBJ/STL/PLY file [file units]; the caller takes their convex hull.

    Warns once per file (UserWarning) when the mesh is not convex (closed volume below the hull's by
    more than NONCONVEX_RELATIVE_VOLUME, or not closed): the simulation then uses its convex hull.
    Raises MeshError for a missing file, an unknown suffix or an unreadable file.
    """
    p = Path(path)
    if p.suffix.lower() not in MESH_FILE_SUFFIXES:
        raise MeshError(f"mesh file {p}: unknown format '{p.suffix}'; use one of {', '.join(MESH_FILE_SUFFIXES)}")
    if not p.is_file():
        raise MeshError(f"mesh file {p} not found (a relative path is taken from the scene file's folder)")
    resolved = str(p.resolve())
    verts, closed, hull = _read_mesh_file(resolved, p.stat().st_mtime_ns)
    nonconvex = not (closed >= (1.0 - NONCONVEX_RELATIVE_VOLUME) * hull)   # NaN (open mesh) counts too
    if nonconvex and resolved not in _WARNED_NONCONVEX:
        _WARNED_NONCONVEX.add(resolved)
        what = (f"encloses {closed:.4g} m³ against its convex hull's {hull:.4g} m³" if closed == closed
                else "is not a closed surface")
        warnings.warn(f"mesh file {p}: the mesh {what}; convexsim simulates its convex hull (split the "
                      "part into convex pieces, one `shape: mesh` each, to keep its concavities)", stacklevel=2)
    return verts.copy()


__all__ = [
    "MeshError",
    "MESH_FILE_SUFFIXES",
    "convex_hull",
    "mesh_mass_properties",
    "cylinder_mass_properties",
    "read_mesh_points",
]
