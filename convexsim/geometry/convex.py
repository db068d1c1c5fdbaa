"""Narrow phase of general convex shapes by support functions: cylinders and convex meshes (numba).

Every solid shape is a *core* K (a convex set given by its support function s_K(d) = argmax_{x∈K} d·x)
inflated by a radius ρ: sphere = point ⊕ ball(r), capsule = segment ⊕ ball(r); box, cylinder and
mesh have ρ = 0. For two shapes A, B:

1. GJK on the Minkowski difference M = K_A − K_B gives the distance δ = min |a − b| and the closest
   points (Johnson's sub-algorithm on the simplex, Ericson's region tests). The pair is out of reach when
   a lower bound of δ exceeds margin + ρ_A + ρ_B (early exit).
2. When the cores overlap (δ ≈ 0) EPA expands the GJK simplex into a polytope inside M and finds the
   face of ∂M closest to the origin: penetration depth d and normal n (A → B).
3. Manifold: with n known, each core's *support feature* along n (its face, edge or vertex facing the
   other shape: the vertices of a box or mesh within a slab of FEATURE_SIN·extent of the supporting
   plane, a cylinder's cap as a ring of RING_POINTS rim points, its side line, a capsule's segment) is
   projected on the plane ⊥ n, the two are clipped (polygon–polygon by Sutherland–Hodgman, segment–
   polygon, parallel segments by their overlap), and each clipped point x gets the heights t_A(x),
   t_B(x) of the two features along the line x + t·n: phi = t_B − t_A − ρ_A − ρ_B. A point contact
   (a vertex or a round shape on either side, crossed edges) is the exact GJK/EPA contact alone.

Kernels have the form of primitives.py: normal from the first shape into the second, ≤ MAX_PAIR_CONTACTS
contacts with phi <= margin. A shape is (gtype, p, R, size, verts) with verts the mesh's vertices in
its geometry frame (an empty (0, 3) array for the other types).
"""

from __future__ import annotations

import math

import numpy as np

from convexsim._jit import jit
from convexsim.geometry.broadphase import BOX, CAPSULE, CYLINDER, MESH, SPHERE, bounding_radius
from convexsim.geometry.primitives import MAX_PAIR_CONTACTS
from convexsim.geometry.transforms import any_perpendicular, column3, cross3, dot3, norm3

FEATURE_SIN = 0.01
"""A face (or edge) is a support feature along n when it is within ~0.57° of facing n: vertices within
2·FEATURE_SIN·(bounding radius) of the supporting plane; a cylinder cap when |n·axis| >= cos, its side
line when |n·axis| <= FEATURE_SIN; a capsule's segment when |n·axis| <= FEATURE_SIN."""

RING_POINTS = 8
"""Points on a cylinder cap's rim that stand for the cap face in a manifold (a regular octagon)."""

MANIFOLD_TOL = 1e-3
"""A manifold is kept only if its deepest point's phi is within MANIFOLD_TOL·(smaller bounding radius) of
the exact GJK/EPA phi; otherwise the exact single contact is reported."""

GJK_MAX_ITERATIONS = 64
EPA_MAX_ITERATIONS = 96
EPA_MAX_VERTS = 104
EPA_MAX_FACES = 2 * EPA_MAX_VERTS
GJK_REL_TOL = 1e-12
"""GJK stops when |v|² − v·w <= GJK_REL_TOL·|v|² (distance accurate to ~1e-6 relative at worst, far
better in practice: the test is on squared lengths)."""

EPA_REL_TOL = 1e-9
"""EPA stops when the support along the closest face normal is within EPA_REL_TOL·scale of that face."""

MAX_FEATURE = 32
"""Largest number of points in a support feature (extra slab vertices are dropped)."""

_OVERLAP = -1.0


# ---------------------------------------------------------------------------------------------
# Support functions
# ---------------------------------------------------------------------------------------------


@jit
def core_radius(gtype: int, size: np.ndarray) -> float:
    """Inflation radius ρ of a shape's core [m]: sphere and capsule r, others 0."""
    if gtype == SPHERE or gtype == CAPSULE:
        return size[0]
    return 0.0


@jit
def support(gtype: int, p: np.ndarray, R: np.ndarray, size: np.ndarray, verts: np.ndarray,
            d: np.ndarray, out: np.ndarray) -> None:
    """out = a point of the core maximizing d·x (world frame; d need not be unit)."""
    dl0 = R[0, 0] * d[0] + R[1, 0] * d[1] + R[2, 0] * d[2]   # d in the geometry frame: Rᵀ d
    dl1 = R[0, 1] * d[0] + R[1, 1] * d[1] + R[2, 1] * d[2]
    dl2 = R[0, 2] * d[0] + R[1, 2] * d[1] + R[2, 2] * d[2]
    x0 = 0.0
    x1 = 0.0
    x2 = 0.0
    if gtype == BOX:
        x0 = size[0] if dl0 >= 0.0 else -size[0]
        x1 = size[1] if dl1 >= 0.0 else -size[1]
        x2 = size[2] if dl2 >= 0.0 else -size[2]
    elif gtype == CAPSULE:
        x2 = size[1] if dl2 >= 0.0 else -size[1]
    elif gtype == CYLINDER:
        x2 = size[1] if dl2 >= 0.0 else -size[1]
        rho = math.sqrt(dl0 * dl0 + dl1 * dl1)
        if rho > 0.0:
            x0 = size[0] * dl0 / rho
            x1 = size[0] * dl1 / rho
    elif gtype == MESH:
        best = -np.inf
        for i in range(verts.shape[0]):
            s = verts[i, 0] * dl0 + verts[i, 1] * dl1 + verts[i, 2] * dl2
            if s > best:
                best = s
                x0 = verts[i, 0]
                x1 = verts[i, 1]
                x2 = verts[i, 2]
    for i in range(3):
        out[i] = p[i] + R[i, 0] * x0 + R[i, 1] * x1 + R[i, 2] * x2


# ---------------------------------------------------------------------------------------------
# GJK
# ---------------------------------------------------------------------------------------------


@jit
def _keep(W, WA, WB, lam, idx, m):
    """Reduce the simplex to the vertices idx[:m] (increasing, so in place) with barycentric weights lam[:m]."""
    for k in range(m):
        j = idx[k]
        if j != k:
            for i in range(3):
                W[k, i] = W[j, i]
                WA[k, i] = WA[j, i]
                WB[k, i] = WB[j, i]
    return m


@jit
def _closest_triangle(W, ia, ib, ic, lam3, idx3):
    """Closest point of triangle (W[ia], W[ib], W[ic]) to the origin (Ericson, Real-Time Collision
    Detection §5.1.5): writes the supporting vertex indices idx3[:m] and weights lam3[:m]; returns m."""
    a = W[ia]
    b = W[ib]
    c = W[ic]
    ab0, ab1, ab2 = b[0] - a[0], b[1] - a[1], b[2] - a[2]
    ac0, ac1, ac2 = c[0] - a[0], c[1] - a[1], c[2] - a[2]
    d1 = -(ab0 * a[0] + ab1 * a[1] + ab2 * a[2])
    d2 = -(ac0 * a[0] + ac1 * a[1] + ac2 * a[2])
    if d1 <= 0.0 and d2 <= 0.0:
        idx3[0] = ia
        lam3[0] = 1.0
        return 1
    d3 = -(ab0 * b[0] + ab1 * b[1] + ab2 * b[2])
    d4 = -(ac0 * b[0] + ac1 * b[1] + ac2 * b[2])
    if d3 >= 0.0 and d4 <= d3:
        idx3[0] = ib
        lam3[0] = 1.0
        return 1
    vc = d1 * d4 - d3 * d2
    if vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0:
        v = d1 / (d1 - d3)
        idx3[0] = ia
        idx3[1] = ib
        lam3[0] = 1.0 - v
        lam3[1] = v
        return 2
    d5 = -(ab0 * c[0] + ab1 * c[1] + ab2 * c[2])
    d6 = -(ac0 * c[0] + ac1 * c[1] + ac2 * c[2])
    if d6 >= 0.0 and d5 <= d6:
        idx3[0] = ic
        lam3[0] = 1.0
        return 1
    vb = d5 * d2 - d1 * d6
    if vb <= 0.0 and d2 >= 0.0 and d6 <= 0.0:
        w = d2 / (d2 - d6)
        idx3[0] = ia
        idx3[1] = ic
        lam3[0] = 1.0 - w
        lam3[1] = w
        return 2
    va = d3 * d6 - d5 * d4
    if va <= 0.0 and (d4 - d3) >= 0.0 and (d5 - d6) >= 0.0:
        w = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        idx3[0] = ib
        idx3[1] = ic
        lam3[0] = 1.0 - w
        lam3[1] = w
        return 2
    denom = va + vb + vc
    if not denom > 0.0:   # degenerate (zero-area) triangle: its best edge is found via the vertex cases
        idx3[0] = ia
        lam3[0] = 1.0
        return 1
    v = vb / denom
    w = vc / denom
    idx3[0] = ia
    idx3[1] = ib
    idx3[2] = ic
    lam3[0] = 1.0 - v - w
    lam3[1] = v
    lam3[2] = w
    return 3


@jit
def _combine(W, idx, lam, m, out):
    for i in range(3):
        s = 0.0
        for k in range(m):
            s += lam[k] * W[idx[k], i]
        out[i] = s


@jit
def _closest_simplex(W, WA, WB, n, lam, v):
    """Replace the simplex W[:n] by its smallest subset whose hull holds the point v closest to the origin;
    lam[:m] are v's barycentric weights. Returns m (4: the origin is inside the tetrahedron)."""
    idx = np.empty(4, np.int64)
    if n == 1:
        lam[0] = 1.0
        for i in range(3):
            v[i] = W[0, i]
        return 1
    if n == 2:
        ab0, ab1, ab2 = W[1, 0] - W[0, 0], W[1, 1] - W[0, 1], W[1, 2] - W[0, 2]
        den = ab0 * ab0 + ab1 * ab1 + ab2 * ab2
        t = -(W[0, 0] * ab0 + W[0, 1] * ab1 + W[0, 2] * ab2) / den if den > 0.0 else 0.0
        if t <= 0.0:
            idx[0] = 0
            lam[0] = 1.0
            m = 1
        elif t >= 1.0:
            idx[0] = 1
            lam[0] = 1.0
            m = 1
        else:
            idx[0] = 0
            idx[1] = 1
            lam[0] = 1.0 - t
            lam[1] = t
            m = 2
        _combine(W, idx, lam, m, v)
        return _keep(W, WA, WB, lam, idx, m)
    if n == 3:
        m = _closest_triangle(W, 0, 1, 2, lam, idx)
        _combine(W, idx, lam, m, v)
        return _keep(W, WA, WB, lam, idx, m)
    # tetrahedron: the closest point over the faces the origin is outside of
    best = np.inf
    bm = 0
    bidx = np.empty(4, np.int64)
    blam = np.empty(4)
    lam3 = np.empty(4)
    idx3 = np.empty(4, np.int64)
    tmp = np.empty(3)
    inside = True
    for f in range(4):
        ia, ib, ic, io = (1, 2, 3, 0) if f == 0 else (0, 2, 3, 1) if f == 1 else (0, 1, 3, 2) if f == 2 else (0, 1, 2, 3)
        e1 = W[ib] - W[ia]
        e2 = W[ic] - W[ia]
        nrm = cross3(e1, e2)
        s_origin = -dot3(nrm, W[ia])
        s_other = dot3(nrm, W[io] - W[ia])
        if s_origin * s_other > 0.0:
            continue   # origin on the same side as the opposite vertex
        inside = False
        m3 = _closest_triangle(W, ia, ib, ic, lam3, idx3)
        _combine(W, idx3, lam3, m3, tmp)
        d2 = dot3(tmp, tmp)
        if d2 < best:
            best = d2
            bm = m3
            for k in range(m3):
                bidx[k] = idx3[k]
                blam[k] = lam3[k]
    if inside:
        for i in range(3):
            v[i] = 0.0
        return 4
    for k in range(bm):
        lam[k] = blam[k]
    _combine(W, bidx, blam, bm, v)
    return _keep(W, WA, WB, lam, bidx, bm)


@jit
def gjk(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, cutoff, W, WA, WB, lam, xa, xb):
    """GJK distance between the cores of A and B.

    Returns (δ, m): δ = |xa − xb| ≥ 0 with xa, xb the closest core points (written), or _OVERLAP when the
    cores overlap (origin in the simplex W[:m], m = 1..4, supports WA, WB), or a lower bound > cutoff when
    the cores are farther apart than cutoff (early exit; xa, xb then not meaningful).
    """
    v = np.empty(3)
    d = np.empty(3)
    sA = np.empty(3)
    sB = np.empty(3)
    for i in range(3):
        v[i] = pa[i] - pb[i]
    if dot3(v, v) == 0.0:
        v[0] = 1.0
    n = 0
    scale = bounding_radius(ta, sa) + bounding_radius(tb, sb)
    tiny2 = (1e-12 * scale) ** 2
    for _ in range(GJK_MAX_ITERATIONS):
        for i in range(3):
            d[i] = -v[i]
        support(ta, pa, Ra, sa, va, d, sA)
        support(tb, pb, Rb, sb, vb, v, sB)
        w0, w1, w2 = sA[0] - sB[0], sA[1] - sB[1], sA[2] - sB[2]
        vv = dot3(v, v)
        vw = v[0] * w0 + v[1] * w1 + v[2] * w2
        if vw > 0.0 and vw * vw > cutoff * cutoff * vv and cutoff >= 0.0:
            return vw / math.sqrt(vv), n    # separating plane: the gap is at least v·w/|v| > cutoff
        if n > 0 and vv - vw <= GJK_REL_TOL * vv:
            break
        duplicate = False
        for k in range(n):
            if W[k, 0] == w0 and W[k, 1] == w1 and W[k, 2] == w2:
                duplicate = True
        if duplicate:
            break
        W[n, 0], W[n, 1], W[n, 2] = w0, w1, w2
        for i in range(3):
            WA[n, i] = sA[i]
            WB[n, i] = sB[i]
        n += 1
        n = _closest_simplex(W, WA, WB, n, lam, v)
        if n == 4 or dot3(v, v) <= tiny2:
            return _OVERLAP, n
    for i in range(3):
        s = 0.0
        t = 0.0
        for k in range(n):
            s += lam[k] * WA[k, i]
            t += lam[k] * WB[k, i]
        xa[i] = s
        xb[i] = t
    delta = norm3(v)
    if delta <= 1e-12 * scale:
        return _OVERLAP, n
    return delta, n


# ---------------------------------------------------------------------------------------------
# EPA
# ---------------------------------------------------------------------------------------------


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
    nrm = cross3(PW[F[f, 1]] - a, PW[F[f, 2]] - a)
    ln = norm3(nrm)
    if not ln > 0.0:
        return False
    for i in range(3):
        FN[f, i] = nrm[i] / ln
    FD[f] = dot3(FN[f], a)
    return True


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
    nv = m
    d = np.empty(3)
    keep = 0
    # complete the simplex to a tetrahedron (the origin stays inside or on its boundary)
    if nv == 1:
        best = -1.0
        for ax in range(6):
            for i in range(3):
                d[i] = 0.0
            d[ax % 3] = 1.0 if ax < 3 else -1.0
            _add_support(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, d, PW, PA, PB, 1)
            e = PW[1] - PW[0]
            if dot3(e, e) > best:
                best = dot3(e, e)
                keep = ax
        for i in range(3):
            d[i] = 0.0
        d[keep % 3] = 1.0 if keep < 3 else -1.0
        _add_support(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, d, PW, PA, PB, 1)
        nv = 2
    if nv == 2:
        e = PW[1] - PW[0]
        base = any_perpendicular(e)
        other = cross3(e, base)
        lo = norm3(other)
        best = -1.0
        for s in range(4):
            for i in range(3):
                d[i] = (base[i] if s < 2 else other[i] / lo) * (1.0 if s % 2 == 0 else -1.0)
            _add_support(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, d, PW, PA, PB, 2)
            c = cross3(e, PW[2] - PW[0])
            if dot3(c, c) > best:
                best = dot3(c, c)
                keep = s
        for i in range(3):
            d[i] = (base[i] if keep < 2 else other[i] / lo) * (1.0 if keep % 2 == 0 else -1.0)
        _add_support(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, d, PW, PA, PB, 2)
        nv = 3
    if nv == 3:
        nrm = cross3(PW[1] - PW[0], PW[2] - PW[0])
        _add_support(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, nrm, PW, PA, PB, 3)
        h1 = dot3(nrm, PW[3] - PW[0])
        for i in range(3):
            d[i] = -nrm[i]
        _add_support(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, d, PW, PA, PB, 4)
        h2 = -dot3(nrm, PW[4] - PW[0])
        if h2 > h1:
            for i in range(3):
                PW[3, i] = PW[4, i]
                PA[3, i] = PA[4, i]
                PB[3, i] = PB[4, i]
        nv = 4
    F = np.empty((EPA_MAX_FACES, 3), np.int64)
    FN = np.empty((EPA_MAX_FACES, 3))
    FD = np.empty(EPA_MAX_FACES)
    alive = np.zeros(EPA_MAX_FACES, np.bool_)
    centre = np.zeros(3)
    for k in range(4):
        for i in range(3):
            centre[i] += 0.25 * PW[k, i]
    nf = 0
    for f in range(4):
        ia, ib, ic = (1, 2, 3) if f == 0 else (0, 3, 2) if f == 1 else (0, 1, 3) if f == 2 else (0, 2, 1)
        F[nf, 0], F[nf, 1], F[nf, 2] = ia, ib, ic
        if not _face_plane(PW, F, nf, FN, FD):
            return -1.0
        if dot3(FN[nf], PW[ia] - centre) < 0.0:
            F[nf, 1], F[nf, 2] = ic, ib
            _face_plane(PW, F, nf, FN, FD)
        alive[nf] = True
        nf += 1
    scale = bounding_radius(ta, sa) + bounding_radius(tb, sb)
    tol = EPA_REL_TOL * scale
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
        broken = ne < 3
        slot = 0
        for k in range(ne):
            while slot < nf and alive[slot]:
                slot += 1          # reuse the slots of removed faces
            if slot == EPA_MAX_FACES:
                broken = True
                break
            F[slot, 0], F[slot, 1], F[slot, 2] = edges[k, 0], edges[k, 1], w
            alive[slot] = _face_plane(PW, F, slot, FN, FD)
            broken = broken or not alive[slot] or FD[slot] < best_d - tol
            if slot == nf:
                nf += 1
        if broken:   # round-off broke the polytope (a flat or inward face): keep the last good face
            break
    # witness points: the origin's projection on the closest face, in barycentric coordinates
    for i in range(3):
        n_out[i] = bnormal[i]
    depth = max(bdist, 0.0)
    a = PW[bface[0]]
    p = np.empty(3)
    for i in range(3):
        p[i] = bdist * bnormal[i]
    v0 = PW[bface[1]] - a
    v1 = PW[bface[2]] - a
    v2 = p - a
    d00 = dot3(v0, v0)
    d01 = dot3(v0, v1)
    d11 = dot3(v1, v1)
    d20 = dot3(v2, v0)
    d21 = dot3(v2, v1)
    den = d00 * d11 - d01 * d01
    lb = (d11 * d20 - d01 * d21) / den if den > 0.0 else 0.0
    lc = (d00 * d21 - d01 * d20) / den if den > 0.0 else 0.0
    la = 1.0 - lb - lc
    for i in range(3):
        xa[i] = la * PA[bface[0], i] + lb * PA[bface[1], i] + lc * PA[bface[2], i]
        xb[i] = la * PB[bface[0], i] + lb * PB[bface[1], i] + lc * PB[bface[2], i]
    return depth


# ---------------------------------------------------------------------------------------------
# Support features and manifolds
# ---------------------------------------------------------------------------------------------


@jit
def feature(gtype, p, R, size, verts, d, out):
    """Support feature of a core along the unit direction d (world): writes its points into out[:k] and
    returns k (1: vertex, 2: edge/segment, >= 3: face points, unordered). See FEATURE_SIN."""
    if gtype == SPHERE:
        for i in range(3):
            out[0, i] = p[i]
        return 1
    dl0 = R[0, 0] * d[0] + R[1, 0] * d[1] + R[2, 0] * d[2]
    dl1 = R[0, 1] * d[0] + R[1, 1] * d[1] + R[2, 1] * d[2]
    dl2 = R[0, 2] * d[0] + R[1, 2] * d[1] + R[2, 2] * d[2]
    k = 0
    local = np.empty((MAX_FEATURE, 3))
    if gtype == CAPSULE or gtype == CYLINDER:
        h = size[1]
        r = size[0] if gtype == CYLINDER else 0.0
        rho = math.sqrt(dl0 * dl0 + dl1 * dl1)
        ex = dl0 / rho if rho > 0.0 else 1.0
        ey = dl1 / rho if rho > 0.0 else 0.0
        if abs(dl2) <= FEATURE_SIN:                      # side line (capsule: its segment)
            for e in range(2):
                local[e, 0] = r * ex
                local[e, 1] = r * ey
                local[e, 2] = -h if e == 0 else h
            k = 2
        elif gtype == CYLINDER and abs(dl2) >= math.sqrt(1.0 - FEATURE_SIN * FEATURE_SIN):   # cap face
            z = h if dl2 > 0.0 else -h
            for e in range(RING_POINTS):
                ang = 2.0 * math.pi * e / RING_POINTS
                local[e, 0] = r * math.cos(ang)
                local[e, 1] = r * math.sin(ang)
                local[e, 2] = z
            k = RING_POINTS
        else:
            local[0, 0] = r * ex
            local[0, 1] = r * ey
            local[0, 2] = h if dl2 > 0.0 else -h
            k = 1
    else:
        nvert = 8 if gtype == BOX else verts.shape[0]
        best = -np.inf
        for i in range(nvert):
            x0, x1, x2 = _vertex(gtype, size, verts, i)
            best = max(best, x0 * dl0 + x1 * dl1 + x2 * dl2)
        slab = 2.0 * FEATURE_SIN * bounding_radius(gtype, size)
        for i in range(nvert):
            x0, x1, x2 = _vertex(gtype, size, verts, i)
            if x0 * dl0 + x1 * dl1 + x2 * dl2 >= best - slab and k < MAX_FEATURE:
                local[k, 0] = x0
                local[k, 1] = x1
                local[k, 2] = x2
                k += 1
    for e in range(k):
        for i in range(3):
            out[e, i] = p[i] + R[i, 0] * local[e, 0] + R[i, 1] * local[e, 1] + R[i, 2] * local[e, 2]
    return k


@jit
def _vertex(gtype, size, verts, i):
    """Vertex i of a box (corner signs from the bits of i) or a mesh, in the geometry frame."""
    if gtype == BOX:
        return (size[0] if i & 1 else -size[0], size[1] if i & 2 else -size[1], size[2] if i & 4 else -size[2])
    return verts[i, 0], verts[i, 1], verts[i, 2]


@jit
def _hull2d(P, k, order):
    """Indices (into P[:k, :2]) of the 2-D convex hull, counter-clockwise (monotone chain); returns its
    size (collinear points dropped)."""
    idx = np.argsort(P[:k, 0] + 1e-12 * P[:k, 1])
    stack = np.empty(2 * k + 1, np.int64)
    m = 0
    for rep in range(2):
        start = m
        for jj in range(k):
            j = idx[jj] if rep == 0 else idx[k - 1 - jj]
            while m >= start + 2:
                o = stack[m - 2]
                a = stack[m - 1]
                cr = (P[a, 0] - P[o, 0]) * (P[j, 1] - P[o, 1]) - (P[a, 1] - P[o, 1]) * (P[j, 0] - P[o, 0])
                if cr > 0.0:
                    break
                m -= 1
            stack[m] = j
            m += 1
        m -= 1   # the last point is the first of the other chain
    for i in range(m):
        order[i] = stack[i]
    return m


@jit
def _project(F, k, u, w, n, P, H):
    """2-D coordinates P[:, :2] = (u·x, w·x) and heights H = n·x of feature points F[:k]."""
    for e in range(k):
        P[e, 0] = dot3(u, F[e])
        P[e, 1] = dot3(w, F[e])
        H[e] = dot3(n, F[e])


@jit
def _height(P, H, order, m, x, y):
    """Height along n, at the 2-D point (x, y), of the feature with hull order[:m] (plane through the
    polygon for m >= 3, linear along the segment for m = 2, the point for m = 1)."""
    if m == 1:
        return H[order[0]]
    if m == 2:
        a = order[0]
        b = order[1]
        dx = P[b, 0] - P[a, 0]
        dy = P[b, 1] - P[a, 1]
        den = dx * dx + dy * dy
        t = ((x - P[a, 0]) * dx + (y - P[a, 1]) * dy) / den if den > 0.0 else 0.0
        t = min(max(t, 0.0), 1.0)
        return H[a] + t * (H[b] - H[a])
    # Newell normal of the polygon (2-D coordinates + height), plane through its centroid
    nx = 0.0
    ny = 0.0
    nz = 0.0
    cx = 0.0
    cy = 0.0
    cz = 0.0
    for i in range(m):
        a = order[i]
        b = order[(i + 1) % m]
        nx += (P[a, 1] - P[b, 1]) * (H[a] + H[b])
        ny += (H[a] - H[b]) * (P[a, 0] + P[b, 0])
        nz += (P[a, 0] - P[b, 0]) * (P[a, 1] + P[b, 1])
        cx += P[a, 0]
        cy += P[a, 1]
        cz += H[a]
    cx /= m
    cy /= m
    cz /= m
    if abs(nz) <= 1e-300:
        return cz
    return cz - (nx * (x - cx) + ny * (y - cy)) / nz


@jit
def _clip_polygon(Q, nq, P, order, m, out):
    """Sutherland–Hodgman: the convex polygon Q[:nq] (2-D, CCW) clipped by the convex CCW polygon
    P[order[:m]]; returns the number of points written to out."""
    cur = np.empty((MAX_FEATURE * 3, 2))
    nxt = np.empty((MAX_FEATURE * 3, 2))
    nc = nq
    for i in range(nq):
        cur[i, 0] = Q[i, 0]
        cur[i, 1] = Q[i, 1]
    for e in range(m):
        a = order[e]
        b = order[(e + 1) % m]
        ex = P[b, 0] - P[a, 0]
        ey = P[b, 1] - P[a, 1]
        nn = 0
        for i in range(nc):
            j = (i + 1) % nc
            si = ex * (cur[i, 1] - P[a, 1]) - ey * (cur[i, 0] - P[a, 0])   # >= 0: inside (left of a→b)
            sj = ex * (cur[j, 1] - P[a, 1]) - ey * (cur[j, 0] - P[a, 0])
            if si >= 0.0 and nn < cur.shape[0]:
                nxt[nn, 0] = cur[i, 0]
                nxt[nn, 1] = cur[i, 1]
                nn += 1
            if (si >= 0.0) != (sj >= 0.0) and nn < cur.shape[0]:
                t = si / (si - sj)
                nxt[nn, 0] = cur[i, 0] + t * (cur[j, 0] - cur[i, 0])
                nxt[nn, 1] = cur[i, 1] + t * (cur[j, 1] - cur[i, 1])
                nn += 1
        nc = nn
        for i in range(nc):
            cur[i, 0] = nxt[i, 0]
            cur[i, 1] = nxt[i, 1]
        if nc == 0:
            break
    for i in range(nc):
        out[i, 0] = cur[i, 0]
        out[i, 1] = cur[i, 1]
    return nc


@jit
def _clip_segment(P, order, m, x0, y0, x1, y1, out):
    """The 2-D segment (x0, y0)–(x1, y1) clipped by the convex CCW polygon P[order[:m]] (Cyrus–Beck);
    returns the number of end points written to out (0 or 2)."""
    lo = 0.0
    hi = 1.0
    dx = x1 - x0
    dy = y1 - y0
    for e in range(m):
        a = order[e]
        b = order[(e + 1) % m]
        ex = P[b, 0] - P[a, 0]
        ey = P[b, 1] - P[a, 1]
        s0 = ex * (y0 - P[a, 1]) - ey * (x0 - P[a, 0])      # inside >= 0
        ds = ex * dy - ey * dx
        if ds == 0.0:
            if s0 < 0.0:
                return 0
            continue
        t = -s0 / ds
        if ds > 0.0:
            lo = max(lo, t)
        else:
            hi = min(hi, t)
        if lo > hi:
            return 0
    out[0, 0] = x0 + lo * dx
    out[0, 1] = y0 + lo * dy
    out[1, 0] = x0 + hi * dx
    out[1, 1] = y0 + hi * dy
    return 2


@jit
def _segment_overlap(PA_, oa, PB_, ob, out):
    """Overlap of two (nearly) parallel 2-D segments, as the 2 ends of A's segment clipped to B's extent
    along A's direction; returns 0 when they are not parallel within FEATURE_SIN or do not overlap."""
    a0 = oa[0]
    a1 = oa[1]
    b0 = ob[0]
    b1 = ob[1]
    dx = PA_[a1, 0] - PA_[a0, 0]
    dy = PA_[a1, 1] - PA_[a0, 1]
    ex = PB_[b1, 0] - PB_[b0, 0]
    ey = PB_[b1, 1] - PB_[b0, 1]
    la = math.sqrt(dx * dx + dy * dy)
    lb = math.sqrt(ex * ex + ey * ey)
    if not (la > 0.0 and lb > 0.0) or abs(dx * ey - dy * ex) > FEATURE_SIN * la * lb:
        return 0
    s0 = ((PB_[b0, 0] - PA_[a0, 0]) * dx + (PB_[b0, 1] - PA_[a0, 1]) * dy) / (la * la)
    s1 = ((PB_[b1, 0] - PA_[a0, 0]) * dx + (PB_[b1, 1] - PA_[a0, 1]) * dy) / (la * la)
    lo = max(0.0, min(s0, s1))
    hi = min(1.0, max(s0, s1))
    if hi <= lo:
        return 0
    for e in range(2):
        s = lo if e == 0 else hi
        out[e, 0] = PA_[a0, 0] + s * dx
        out[e, 1] = PA_[a0, 1] + s * dy
    return 2


@jit
def _reduce(count, keep, phi, point, normal):
    """Keep ``keep`` of the ``count`` contacts (in place): the deepest, then greedily the one farthest from
    those kept (spreads the kept points over the contact patch). Returns the new count."""
    if count <= keep:
        return count
    chosen = np.zeros(count, np.bool_)
    dmin = np.full(count, np.inf)
    first = 0
    for c in range(1, count):
        if phi[c] < phi[first]:
            first = c
    order = np.empty(keep, np.int64)
    cur = first
    for s in range(keep):
        order[s] = cur
        chosen[cur] = True
        best = -1.0
        nxt = -1
        for c in range(count):
            if chosen[c]:
                continue
            d = 0.0
            for i in range(3):
                d += (point[c, i] - point[cur, i]) ** 2
            dmin[c] = min(dmin[c], d)
            if dmin[c] > best:
                best = dmin[c]
                nxt = c
        cur = nxt
        if cur < 0:
            keep = s + 1
            break
    tp = np.empty(keep)
    tx = np.empty((keep, 3))
    tn = np.empty((keep, 3))
    for s in range(keep):
        tp[s] = phi[order[s]]
        for i in range(3):
            tx[s, i] = point[order[s], i]
            tn[s, i] = normal[order[s], i]
    for s in range(keep):
        phi[s] = tp[s]
        for i in range(3):
            point[s, i] = tx[s, i]
            normal[s, i] = tn[s, i]
    return keep


@jit
def _manifold(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, n, ra, rb, margin, phi, point, normal):
    """Face/edge manifold along the normal n (A → B): clip A's support feature along +n with B's along −n
    (module docstring). Returns the contacts written (phi <= margin), 0 if the features meet in a point."""
    FA = np.empty((MAX_FEATURE, 3))
    FB = np.empty((MAX_FEATURE, 3))
    mn = np.empty(3)
    for i in range(3):
        mn[i] = -n[i]
    ka = feature(ta, pa, Ra, sa, va, n, FA)
    kb = feature(tb, pb, Rb, sb, vb, mn, FB)
    if ka == 1 or kb == 1:
        return 0
    u = any_perpendicular(n)
    w = cross3(n, u)
    PA_ = np.empty((MAX_FEATURE, 2))
    PB_ = np.empty((MAX_FEATURE, 2))
    HA = np.empty(MAX_FEATURE)
    HB = np.empty(MAX_FEATURE)
    _project(FA, ka, u, w, n, PA_, HA)
    _project(FB, kb, u, w, n, PB_, HB)
    oa = np.empty(2 * MAX_FEATURE + 1, np.int64)
    ob = np.empty(2 * MAX_FEATURE + 1, np.int64)
    ma = _hull2d(PA_, ka, oa) if ka >= 3 else ka
    mb = _hull2d(PB_, kb, ob) if kb >= 3 else kb
    if ka == 2:
        oa[0], oa[1] = 0, 1
    if kb == 2:
        ob[0], ob[1] = 0, 1
    if ma < 2 or mb < 2:
        return 0
    X = np.empty((MAX_FEATURE * 3, 2))
    if ma >= 3 and mb >= 3:
        Q = np.empty((MAX_FEATURE, 2))
        for i in range(mb):
            Q[i, 0] = PB_[ob[i], 0]
            Q[i, 1] = PB_[ob[i], 1]
        nx = _clip_polygon(Q, mb, PA_, oa, ma, X)
    elif ma >= 3:
        nx = _clip_segment(PA_, oa, ma, PB_[ob[0], 0], PB_[ob[0], 1], PB_[ob[1], 0], PB_[ob[1], 1], X)
    elif mb >= 3:
        nx = _clip_segment(PB_, ob, mb, PA_[oa[0], 0], PA_[oa[0], 1], PA_[oa[1], 0], PA_[oa[1], 1], X)
    else:
        nx = _segment_overlap(PA_, oa, PB_, ob, X)
    count = 0
    tmp_phi = np.empty(MAX_FEATURE * 3)
    tmp_pt = np.empty((MAX_FEATURE * 3, 3))
    tmp_n = np.empty((MAX_FEATURE * 3, 3))
    for e in range(nx):
        x = X[e, 0]
        y = X[e, 1]
        ha = _height(PA_, HA, oa, ma, x, y)
        hb = _height(PB_, HB, ob, mb, x, y)
        value = hb - ha - ra - rb
        if value > margin:
            continue
        for i in range(3):
            base = x * u[i] + y * w[i]
            tmp_pt[count, i] = base + 0.5 * (ha + ra + hb - rb) * n[i]
            tmp_n[count, i] = n[i]
        tmp_phi[count] = value
        count += 1
    count = _reduce(count, MAX_PAIR_CONTACTS, tmp_phi, tmp_pt, tmp_n)
    for c in range(count):
        phi[c] = tmp_phi[c]
        for i in range(3):
            point[c, i] = tmp_pt[c, i]
            normal[c, i] = tmp_n[c, i]
    return count


@jit
def convex_convex(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, margin, phi, point, normal):
    """Contacts between two solid shapes by GJK/EPA and feature clipping (module docstring); normal from A
    into B. Returns the number of contacts written (phi <= margin)."""
    ra = core_radius(ta, sa)
    rb = core_radius(tb, sb)
    W = np.empty((4, 3))
    WA = np.empty((4, 3))
    WB = np.empty((4, 3))
    lam = np.empty(4)
    xa = np.empty(3)
    xb = np.empty(3)
    n = np.empty(3)
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
    count = _manifold(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, n, ra, rb, margin, phi, point, normal)
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
    count = _reduce(count, MAX_PAIR_CONTACTS, tmp_phi, tmp_pt, tmp_n)
    for c in range(count):
        phi[c] = tmp_phi[c]
        for i in range(3):
            point[c, i] = tmp_pt[c, i]
            normal[c, i] = tmp_n[c, i]
    return count
