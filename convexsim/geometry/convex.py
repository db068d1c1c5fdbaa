"""Narrow phase of general convex shapes by support functions: cylinders and convex meshes (numba).

Every solid shape is a *core* K (a convex set given by its support function s_K(d) = argmax_{x∈K} d·x)
inflated by a radius ρ: sphere = point ⊕ ball(r), capsule = segment ⊕ ball(r); box, cylinder and
mesh have ρ = 0. For two shapes A, B the pair's contacts come from three stages, one module each:

1. ``gjk``: the distance δ = min |a − b| of the cores and their closest points on the Minkowski
   difference M = K_A − K_B. The pair is out of reach when a lower bound of δ exceeds
   margin + ρ_A + ρ_B (early exit).
2. ``epa``: when the cores overlap (δ ≈ 0), the face of ∂M closest to the origin: penetration depth
   d and normal n (A → B).
3. ``manifold``: along n, the two support features clipped against each other, a contact per clipped
   point. A point contact (a vertex or a round shape on either side, crossed edges) is the exact
   GJK/EPA contact alone, and so is a manifold whose deepest phi strays from the exact one.

Kernels have the form of primitives.py: normal from the first shape into the second, ≤ MAX_PAIR_CONTACTS
contacts with phi <= margin. A shape is (gtype, p, R, size, verts) with verts the mesh's vertices in
its geometry frame (an empty (0, 3) array for the other types).
"""


from __future__ import annotations

import numpy as np

from convexsim._jit import jit
from convexsim.geometry.broadphase import CAPSULE, MESH, SPHERE, bounding_radius
from convexsim.geometry.epa import epa
from convexsim.geometry.gjk import gjk
from convexsim.geometry.manifold import MAX_FEATURE, clipped_manifold, feature, reduce_into
from convexsim.geometry.transforms import column3

MANIFOLD_TOL = 1e-3
"""A manifold is kept only if its deepest point's phi is within MANIFOLD_TOL·(smaller bounding radius) of
the exact GJK/EPA phi; otherwise the exact single contact is reported."""


@jit
def core_radius(gtype: int, size: np.ndarray) -> float:
    """Inflation radius ρ of a shape's core [m]: sphere and capsule r, others 0."""
    if gtype == SPHERE or gtype == CAPSULE:
        return size[0]
    return 0.0


@jit
def convex_convex(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, margin, phi, point, normal):
    """Contacts between two solid shapes by GJK/EPA and feature clipping (module docstring); normal from A
    into B. Returns the number of contacts written (phi <= margin)."""
    ra = core_radius(ta, sa)
    rb = core_radius(tb, sb)
    scratch = np.empty((15, 3))    # one allocation: simplex, supports, witness points, normal
    W = scratch[0:4]
    WA = scratch[4:8]
    WB = scratch[8:12]
    xa = scratch[12]
    xb = scratch[13]
    n = scratch[14]
    lam = np.empty(4)
    reach = margin + ra + rb
    delta, m = gjk(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, reach, W, WA, WB, lam, xa, xb)
    if delta > reach:
        return 0
    if delta >= 0.0:
        for i in range(3):
            n[i] = (xb[i] - xa[i]) / delta
        exact = delta - ra - rb
    else:
        depth = epa(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, W, WA, WB, m, n, xa, xb)
        if depth < 0.0:
            return 0
        exact = -depth - ra - rb
    count = clipped_manifold(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, n, ra, rb, margin, phi, point, normal)
    if count > 0:
        lowest = phi[0]
        for c in range(1, count):
            lowest = min(lowest, phi[c])
        scale = min(bounding_radius(ta, sa), bounding_radius(tb, sb))
        if abs(lowest - exact) <= MANIFOLD_TOL * scale:
            return count
    if exact > margin:
        return 0
    phi[0] = exact
    for i in range(3):
        point[0, i] = 0.5 * (xa[i] + ra * n[i] + xb[i] - rb * n[i])
        normal[0, i] = n[i]
    return 1


@jit
def halfspace_convex(ph, Rh, tb, pb, Rb, sb, vb, margin, phi, point, normal):
    """Halfspace vs cylinder or mesh: the shape's support feature along −n (n = Rh[:, 2]) for a cylinder
    (its cap ring, side line or lowest rim point), every vertex for a mesh; a contact per point with
    height <= margin, reduced to MAX_PAIR_CONTACTS (deepest first, then spread)."""
    n = column3(Rh, 2)
    mn = np.empty(3)
    for i in range(3):
        mn[i] = -n[i]
    if tb == MESH:
        k = vb.shape[0]
    else:
        FB = np.empty((MAX_FEATURE, 3))
        k = feature(tb, pb, Rb, sb, vb, mn, FB)
    tmp_phi = np.empty(max(k, 1))
    tmp_pt = np.empty((max(k, 1), 3))
    tmp_n = np.empty((max(k, 1), 3))
    count = 0
    x = np.empty(3)
    for e in range(k):
        if tb == MESH:
            for i in range(3):
                x[i] = pb[i] + Rb[i, 0] * vb[e, 0] + Rb[i, 1] * vb[e, 1] + Rb[i, 2] * vb[e, 2]
        else:
            for i in range(3):
                x[i] = FB[e, i]
        height = (x[0] - ph[0]) * n[0] + (x[1] - ph[1]) * n[1] + (x[2] - ph[2]) * n[2]
        if height > margin:
            continue
        tmp_phi[count] = height
        for i in range(3):
            tmp_pt[count, i] = x[i] - 0.5 * height * n[i]
            tmp_n[count, i] = n[i]
        count += 1
    return reduce_into(count, tmp_phi, tmp_pt, tmp_n, phi, point, normal)
