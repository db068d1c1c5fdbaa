"""Solid shapes of scene geometries: volume, centroid and enclosing radius of each shape, and the convex hull
and mass properties of a ``shape: mesh`` (cached by the geometry's fields). Used by the schema's centre-of-
mass check and by the scene compiler's inertias; numpy only (the hull math is ``geometry.hull``)."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from convexsim.spatial import quat_to_matrix


def mesh_hull(geom: Any) -> tuple[np.ndarray, np.ndarray]:
    """(vertices (nv, 3) [m], outward triangles (nf, 3)) of a ``shape: mesh`` geometry's convex hull in its
    geometry frame, ``scale`` applied (cached by the geometry's fields). Raises MeshError (a ValueError)."""
    return _mesh_hull(geom.vertices, geom.file, geom.scale)


@functools.lru_cache(maxsize=1024)
def _mesh_hull(vertices, file, scale) -> tuple[np.ndarray, np.ndarray]:
    from convexsim.geometry.hull import convex_hull, read_mesh_points   # numpy only; lazy: keeps numba out

    points = np.asarray(vertices, dtype=float) if vertices is not None else read_mesh_points(file)
    if scale is not None:
        points = points * np.asarray(scale, dtype=float)
    verts, faces = convex_hull(points)
    verts.setflags(write=False)
    faces.setflags(write=False)
    return verts, faces


@functools.lru_cache(maxsize=1024)
def _mesh_mass(vertices, file, scale) -> tuple[float, np.ndarray, np.ndarray]:
    from convexsim.geometry.hull import mesh_mass_properties

    return mesh_mass_properties(*_mesh_hull(vertices, file, scale))


def mesh_mass(geom: Any) -> tuple[float, np.ndarray, np.ndarray]:
    """(volume [m³], centroid in G [m], inertia per unit mass about the centroid in G [m²]) of a mesh's hull."""
    return _mesh_mass(geom.vertices, geom.file, geom.scale)


def shape_volume(geom: Any) -> float:
    """Volume [m³] of a geometry: sphere 4/3·π·r³; box a·b·c; capsule π·r²·L + 4/3·π·r³; cylinder π·r²·L;
    mesh: its convex hull's (divergence theorem); halfspace 0."""
    if geom.shape == "sphere":
        return 4.0 / 3.0 * math.pi * geom.radius**3
    if geom.shape == "box":
        a, b, c = geom.size
        return a * b * c
    if geom.shape == "capsule":
        r, length = geom.radius, geom.length
        return math.pi * r * r * length + 4.0 / 3.0 * math.pi * r**3
    if geom.shape == "cylinder":
        return math.pi * geom.radius**2 * geom.length
    if geom.shape == "mesh":
        return mesh_mass(geom)[0]
    return 0.0


def shape_center(geom: Any) -> np.ndarray:
    """Centroid of a geometry's solid in its geometry frame G [m]: the origin for the point-symmetric
    primitives, the hull's centroid for a mesh."""
    if geom.shape == "mesh":
        return np.asarray(mesh_mass(geom)[1])
    return np.zeros(3)


def shape_extent(geom: Any) -> float:
    """Radius [m] of a sphere about the geometry origin that encloses the shape (0 for a halfspace)."""
    if geom.shape == "sphere":
        return float(geom.radius)
    if geom.shape == "box":
        return 0.5 * math.sqrt(sum(s * s for s in geom.size))
    if geom.shape == "capsule":
        return float(geom.radius + 0.5 * geom.length)
    if geom.shape == "cylinder":
        return math.hypot(geom.radius, 0.5 * geom.length)
    if geom.shape == "mesh":
        return float(np.max(np.linalg.norm(mesh_hull(geom)[0], axis=1)))
    return 0.0


def geom_centroid_in_body(geom: Any) -> np.ndarray:
    """Centroid of a geometry's solid in the body frame B [m]: p_g + R_BG·c_G."""
    c = shape_center(geom)
    p = np.asarray(geom.position, dtype=float)
    if not c.any():
        return p
    return p + quat_to_matrix(np.asarray(geom.quaternion, dtype=float)) @ c


def shapes_centroid(geometries: list[Any]) -> tuple[np.ndarray, float]:
    """(centroid [m], body size [m]) of the solid geometries in the body frame at uniform density.

    centroid = Σ V_g·c_g / Σ V_g with c_g the geometry's centroid in B (its origin p_g for the point-symmetric
    primitives, p_g + R_BG·(hull centroid) for a mesh; overlaps are counted twice, as in the inertia); size =
    max_g (|p_g| + enclosing radius of g). Halfspaces are ignored. (zeros, 0) without solids.
    """
    solids = [g for g in geometries if g.shape != "halfspace"]
    if not solids:
        return np.zeros(3), 0.0
    volumes = np.array([shape_volume(g) for g in solids])
    centroids = np.array([geom_centroid_in_body(g) for g in solids], dtype=float)
    centroid = volumes @ centroids / volumes.sum()
    size = max(float(np.linalg.norm(g.position)) + shape_extent(g) for g in solids)
    return centroid, size


__all__ = ["mesh_hull", "mesh_mass", "shape_volume", "shape_center", "shape_extent", "geom_centroid_in_body",
           "shapes_centroid"]
