"""EPA: the penetration depth and normal of two overlapping convex cores (numba).

When GJK finds the origin inside M = K_A − K_B, EPA completes its simplex to a tetrahedron around the
origin and expands it towards ∂M: each iteration adds the support point along the normal of the face
closest to the origin and re-triangulates the faces it sees, until that support is within
EPA_REL_TOL·(size of the pair) of the face. The closest face gives the depth and the normal (A → B),
the origin's projection on it, in barycentric coordinates, the witness points.
"""

from __future__ import annotations

import numpy as np

from convexsim._jit import jit
from convexsim.geometry.broadphase import bounding_radius
from convexsim.geometry.gjk import support
from convexsim.geometry.transforms import any_perpendicular, cross3, dot3, gram2, norm3, sub3

EPA_MAX_ITERATIONS = 96
EPA_MAX_VERTS = 104
EPA_MAX_FACES = 2 * EPA_MAX_VERTS
EPA_REL_TOL = 1e-9
"""EPA stops when the support along the closest face normal is within EPA_REL_TOL·scale of that face."""


@jit
def _add_support(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, d, PW, PA, PB, k):
    nd = np.empty(3)
    for i in range(3):
        nd[i] = -d[i]
    sA = PA[k]
    sB = PB[k]
    support(ta, pa, Ra, sa, va, d, sA)
    support(tb, pb, Rb, sb, vb, nd, sB)
    for i in range(3):
        PW[k, i] = sA[i] - sB[i]


@jit
def _face_plane(PW, F, f, FN, FD):
    """Unit outward normal FN[f] and offset FD[f] = n·w of face F[f]; False for a zero-area face."""
    a = PW[F[f, 0]]
    nrm = cross3(sub3(PW[F[f, 1]], a), sub3(PW[F[f, 2]], a))
    ln = norm3(nrm)
    if not ln > 0.0:
        return False
    for i in range(3):
        FN[f, i] = nrm[i] / ln
    FD[f] = dot3(FN[f], a)
    return True


@jit(inline="always")
def _axis_direction(d, ax):
    """d = ±e_(ax mod 3): the six axis directions, + for ax < 3."""
    for i in range(3):
        d[i] = 0.0
    d[ax % 3] = 1.0 if ax < 3 else -1.0


@jit(inline="always")
def _side_direction(d, base, other, lo, s):
    """d = ±base (s < 2) or ±other/lo (s ≥ 2), + for even s: four directions perpendicular to a segment."""
    for i in range(3):
        d[i] = (base[i] if s < 2 else other[i] / lo) * (1.0 if s % 2 == 0 else -1.0)


@jit(inline="always")
def _tetrahedron(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, PW, PA, PB, nv):
    """Complete the simplex PW[:nv] (1 ≤ nv ≤ 4) to a tetrahedron PW[:4] by supports: a point gets the farthest
    of the six axis supports, a segment the support perpendicular to it spanning the largest triangle, a
    triangle the support on the farther side of its plane. The origin stays inside or on the boundary."""
    d = np.empty(3)
    keep = 0
    if nv == 1:
        best = -1.0
        for ax in range(6):
            _axis_direction(d, ax)
            _add_support(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, d, PW, PA, PB, 1)
            e = sub3(PW[1], PW[0])
            if dot3(e, e) > best:
                best = dot3(e, e)
                keep = ax
        _axis_direction(d, keep)
        _add_support(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, d, PW, PA, PB, 1)
        nv = 2
    if nv == 2:
        e = sub3(PW[1], PW[0])
        base = any_perpendicular(e)
        other = cross3(e, base)
        lo = norm3(other)
        best = -1.0
        for s in range(4):
            _side_direction(d, base, other, lo, s)
            _add_support(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, d, PW, PA, PB, 2)
            c = cross3(e, sub3(PW[2], PW[0]))
            if dot3(c, c) > best:
                best = dot3(c, c)
                keep = s
        _side_direction(d, base, other, lo, keep)
        _add_support(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, d, PW, PA, PB, 2)
        nv = 3
    if nv == 3:
        nrm = cross3(sub3(PW[1], PW[0]), sub3(PW[2], PW[0]))
        _add_support(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, nrm, PW, PA, PB, 3)
        h1 = dot3(nrm, sub3(PW[3], PW[0]))
        for i in range(3):
            d[i] = -nrm[i]
        _add_support(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, d, PW, PA, PB, 4)
        h2 = -dot3(nrm, sub3(PW[4], PW[0]))
        if h2 > h1:
            for i in range(3):
                PW[3, i] = PW[4, i]
                PA[3, i] = PA[4, i]
                PB[3, i] = PB[4, i]


@jit(inline="always")
def _initial_faces(PW, F, FN, FD, alive):
    """The four faces of the tetrahedron PW[:4], oriented outwards (normal away from its centroid), with their
    planes; returns False if one has zero area."""
    centre = np.zeros(3)
    for k in range(4):
        for i in range(3):
            centre[i] += 0.25 * PW[k, i]
    for f in range(4):
        ia, ib, ic = (1, 2, 3) if f == 0 else (0, 3, 2) if f == 1 else (0, 1, 3) if f == 2 else (0, 2, 1)
        F[f, 0], F[f, 1], F[f, 2] = ia, ib, ic
        if not _face_plane(PW, F, f, FN, FD):
            return False
        if dot3(FN[f], sub3(PW[ia], centre)) < 0.0:
            F[f, 1], F[f, 2] = ic, ib
            _face_plane(PW, F, f, FN, FD)
        alive[f] = True
    return True


@jit(inline="always")
def _horizon(PW, F, FN, FD, alive, nf, w, tol, edges):
    """Remove the faces that the new vertex PW[w] sees (faces through w within ``tol`` count as seen) and
    collect their boundary, the horizon, as directed edges[:ne] (an edge shared by two removed faces cancels).
    Returns ne."""
    ne = 0
    for f in range(nf):
        if not alive[f] or dot3(FN[f], PW[w]) - FD[f] <= -tol:
            continue   # faces through w (flat caps, box faces) count as visible: re-triangulated with w
        alive[f] = False
        for e in range(3):
            i0 = F[f, e]
            i1 = F[f, (e + 1) % 3]
            found = -1
            for k in range(ne):
                if edges[k, 0] == i1 and edges[k, 1] == i0:
                    found = k
                    break
            if found >= 0:
                ne -= 1
                edges[found, 0] = edges[ne, 0]
                edges[found, 1] = edges[ne, 1]
            else:
                edges[ne, 0] = i0
                edges[ne, 1] = i1
                ne += 1
    return ne


@jit(inline="always")
def _cone(PW, F, FN, FD, alive, nf, w, edges, ne, best_d, tol):
    """Close the hole: one face (horizon edge, w) per edge, in the slots of removed faces first.
    Returns (new face count, broken): broken when round-off broke the polytope (fewer than 3 horizon edges, no
    free slot, a flat face or one closer than the face it replaces)."""
    broken = ne < 3
    slot = 0
    for k in range(ne):
        while slot < nf and alive[slot]:
            slot += 1          # reuse the slots of removed faces
        if slot == EPA_MAX_FACES:
            return nf, True
        F[slot, 0], F[slot, 1], F[slot, 2] = edges[k, 0], edges[k, 1], w
        alive[slot] = _face_plane(PW, F, slot, FN, FD)
        broken = broken or not alive[slot] or FD[slot] < best_d - tol
        if slot == nf:
            nf += 1
    return nf, broken


@jit(inline="always")
def _witness_points(PW, PA, PB, bface, bnormal, bdist, xa, xb):
    """Witness points xa (on A), xb (on B): the origin's projection p = bdist·n on the closest face, in its
    barycentric coordinates (la, lb, lc), applied to the faces' support points on A and on B."""
    a = PW[bface[0]]
    p = np.empty(3)
    for i in range(3):
        p[i] = bdist * bnormal[i]
    d00, d01, d11, d20, d21 = gram2(sub3(PW[bface[1]], a), sub3(PW[bface[2]], a), sub3(p, a))
    den = d00 * d11 - d01 * d01
    lb = (d11 * d20 - d01 * d21) / den if den > 0.0 else 0.0
    lc = (d00 * d21 - d01 * d20) / den if den > 0.0 else 0.0
    la = 1.0 - lb - lc
    for i in range(3):
        xa[i] = la * PA[bface[0], i] + lb * PA[bface[1], i] + lc * PA[bface[2], i]
        xb[i] = la * PB[bface[0], i] + lb * PB[bface[1], i] + lc * PB[bface[2], i]


@jit
def epa(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, W, WA, WB, m, n_out, xa, xb):
    """Penetration depth of overlapping cores: the face of ∂M (M = K_A − K_B) closest to the origin.

    Starts from the GJK simplex W[:m] (origin inside or on it), completed to a tetrahedron by supports.
    Writes the normal n_out (A → B) and the witness points xa, xb (xa − xb = depth·n); returns the depth
    [m] (≥ 0), or −1 when the polytope is degenerate (then nothing is written).
    """
    PW = np.empty((EPA_MAX_VERTS, 3))
    PA = np.empty((EPA_MAX_VERTS, 3))
    PB = np.empty((EPA_MAX_VERTS, 3))
    for k in range(m):
        for i in range(3):
            PW[k, i] = W[k, i]
            PA[k, i] = WA[k, i]
            PB[k, i] = WB[k, i]
    _tetrahedron(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, PW, PA, PB, m)
    nv = 4
    F = np.empty((EPA_MAX_FACES, 3), np.int64)
    FN = np.empty((EPA_MAX_FACES, 3))
    FD = np.empty(EPA_MAX_FACES)
    alive = np.zeros(EPA_MAX_FACES, np.bool_)
    if not _initial_faces(PW, F, FN, FD, alive):
        return -1.0
    nf = 4
    tol = EPA_REL_TOL * (bounding_radius(ta, sa) + bounding_radius(tb, sb))
    edges = np.empty((3 * EPA_MAX_FACES, 2), np.int64)
    bface = np.zeros(3, np.int64)
    bnormal = np.zeros(3)
    bdist = 0.0
    for _ in range(EPA_MAX_ITERATIONS):
        best_f = -1
        best_d = np.inf
        for f in range(nf):
            if alive[f] and FD[f] < best_d:
                best_d = FD[f]
                best_f = f
        if best_f < 0:
            return -1.0
        for i in range(3):     # the result, kept apart: the face's slot may be reused below
            bface[i] = F[best_f, i]
            bnormal[i] = FN[best_f, i]
        bdist = FD[best_f]
        if nv >= EPA_MAX_VERTS - 1:
            break
        _add_support(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, bnormal, PW, PA, PB, nv)
        if dot3(bnormal, PW[nv]) - best_d <= tol:
            break
        w = nv
        nv += 1
        ne = _horizon(PW, F, FN, FD, alive, nf, w, tol, edges)
        nf, broken = _cone(PW, F, FN, FD, alive, nf, w, edges, ne, best_d, tol)
        if broken:   # round-off broke the polytope (a flat or inward face): keep the last good face
            break
    for i in range(3):
        n_out[i] = bnormal[i]
    _witness_points(PW, PA, PB, bface, bnormal, bdist, xa, xb)
    return max(bdist, 0.0)
