"""GJK: the distance between two convex cores by their support functions (numba).

A solid shape is a *core* K, a convex set given by its support function s_K(d) = argmax_{x∈K} d·x,
inflated by a radius ρ (``convex.core_radius``). GJK walks a simplex W ⊂ M = K_A − K_B towards the
point v of M closest to the origin: each iteration adds the support point w = s_A(−v) − s_B(v) and
reduces the simplex to the smallest face holding the new closest point (Johnson's sub-algorithm with
Ericson's region tests, Real-Time Collision Detection §5.1.5 and §9.5). δ = |v| is the distance of the
cores; v·w/|v| is a lower bound of it, which ends the search early for pairs out of reach.
"""

from __future__ import annotations

import math

import numpy as np

from convexsim._jit import jit
from convexsim.geometry.broadphase import BOX, CAPSULE, CYLINDER, MESH, bounding_radius
from convexsim.geometry.transforms import cross3, dot3, norm3, sub3

GJK_MAX_ITERATIONS = 64
GJK_REL_TOL = 1e-12
"""GJK stops when |v|² − v·w <= GJK_REL_TOL·|v|² (distance accurate to ~1e-6 relative at worst, far
better in practice: the test is on squared lengths)."""

OVERLAP = -1.0
"""What ``gjk`` returns for overlapping cores (then EPA finds the depth)."""


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
def _edge_dots(ab0, ab1, ab2, ac0, ac1, ac2, p):
    """(−ab·p, −ac·p) = (ab·(0 − p), ac·(0 − p)) for the triangle's edges ab, ac and a vertex p: the region tests'
    dot products."""
    return -(ab0 * p[0] + ab1 * p[1] + ab2 * p[2]), -(ac0 * p[0] + ac1 * p[1] + ac2 * p[2])


@jit
def _on_vertex(idx3, lam3, i):
    """The closest point is vertex i: idx3[0] = i, weight 1; returns 1."""
    idx3[0] = i
    lam3[0] = 1.0
    return 1


@jit
def _on_edge(idx3, lam3, i, j, t):
    """The closest point is (1 − t)·W[i] + t·W[j] on the edge i–j; returns 2."""
    idx3[0] = i
    idx3[1] = j
    lam3[0] = 1.0 - t
    lam3[1] = t
    return 2


@jit
def _closest_triangle(W, ia, ib, ic, lam3, idx3):
    """Closest point of triangle (W[ia], W[ib], W[ic]) to the origin (Ericson, Real-Time Collision
    Detection §5.1.5): writes the supporting vertex indices idx3[:m] and weights lam3[:m]; returns m."""
    a = W[ia]
    b = W[ib]
    c = W[ic]
    ab0, ab1, ab2 = b[0] - a[0], b[1] - a[1], b[2] - a[2]
    ac0, ac1, ac2 = c[0] - a[0], c[1] - a[1], c[2] - a[2]
    d1, d2 = _edge_dots(ab0, ab1, ab2, ac0, ac1, ac2, a)
    if d1 <= 0.0 and d2 <= 0.0:
        return _on_vertex(idx3, lam3, ia)
    d3, d4 = _edge_dots(ab0, ab1, ab2, ac0, ac1, ac2, b)
    if d3 >= 0.0 and d4 <= d3:
        return _on_vertex(idx3, lam3, ib)
    vc = d1 * d4 - d3 * d2
    if vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0:
        return _on_edge(idx3, lam3, ia, ib, d1 / (d1 - d3))
    d5, d6 = _edge_dots(ab0, ab1, ab2, ac0, ac1, ac2, c)
    if d6 >= 0.0 and d5 <= d6:
        return _on_vertex(idx3, lam3, ic)
    vb = d5 * d2 - d1 * d6
    if vb <= 0.0 and d2 >= 0.0 and d6 <= 0.0:
        return _on_edge(idx3, lam3, ia, ic, d2 / (d2 - d6))
    va = d3 * d6 - d5 * d4
    if va <= 0.0 and (d4 - d3) >= 0.0 and (d5 - d6) >= 0.0:
        return _on_edge(idx3, lam3, ib, ic, (d4 - d3) / ((d4 - d3) + (d5 - d6)))
    denom = va + vb + vc
    if not denom > 0.0:   # degenerate (zero-area) triangle: its best edge is found via the vertex cases
        return _on_vertex(idx3, lam3, ia)
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
    e1 = sub3(W[1], W[0])
    e2 = sub3(W[2], W[0])
    e3 = sub3(W[3], W[0])
    size2 = max(dot3(e1, e1), dot3(e2, e2), dot3(e3, e3))
    flat = abs(dot3(cross3(e1, e2), e3)) <= 1e-9 * size2 * math.sqrt(size2)   # no "inside" for a flat tetrahedron
    for f in range(4):
        ia, ib, ic, io = (1, 2, 3, 0) if f == 0 else (0, 2, 3, 1) if f == 1 else (0, 1, 3, 2) if f == 2 else (0, 1, 2, 3)
        e1 = sub3(W[ib], W[ia])
        e2 = sub3(W[ic], W[ia])
        nrm = cross3(e1, e2)
        s_origin = -dot3(nrm, W[ia])
        s_other = dot3(nrm, sub3(W[io], W[ia]))
        if s_origin * s_other > 0.0 and not flat:
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

    Returns (δ, m): δ = |xa − xb| ≥ 0 with xa, xb the closest core points (written), or OVERLAP when the
    cores overlap (origin in the simplex W[:m], m = 1..4, supports WA, WB), or a lower bound > cutoff when
    the cores are farther apart than cutoff (early exit; xa, xb then not meaningful).
    """
    scratch = np.empty((4, 3))     # one allocation: v, d and the two support points
    v = scratch[0]
    d = scratch[1]
    sA = scratch[2]
    sB = scratch[3]
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
            return OVERLAP, n
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
        return OVERLAP, n
    return delta, n
