"""Contact manifolds of two convex shapes along a known normal: support features, clipped (numba).

With the normal n (A → B) known from GJK/EPA, each core's *support feature* along n (its face, edge or
vertex facing the other shape: the vertices of a box or mesh within a slab of FEATURE_SIN·extent of the
supporting plane, a cylinder's cap as a ring of RING_POINTS rim points, its side line, a capsule's
segment) is projected on the plane ⊥ n, the two are clipped (polygon–polygon by Sutherland–Hodgman,
segment–polygon by Cyrus–Beck, parallel segments by their overlap), and each clipped point x gets the
heights t_A(x), t_B(x) of the two features along the line x + t·n: phi = t_B − t_A − ρ_A − ρ_B. More
than MAX_PAIR_CONTACTS points are reduced (the deepest, then each next the farthest from those kept).
"""

from __future__ import annotations

import math

import numpy as np

from convexsim._jit import jit
from convexsim.geometry.broadphase import BOX, CAPSULE, CYLINDER, SPHERE, bounding_radius
from convexsim.geometry.primitives import MAX_PAIR_CONTACTS
from convexsim.geometry.transforms import any_perpendicular, cross3, dot3

FEATURE_SIN = 0.01
"""A face (or edge) is a support feature along n when it is within ~0.57° of facing n: vertices within
2·FEATURE_SIN·(bounding radius) of the supporting plane; a cylinder cap when |n·axis| >= cos, its side
line when |n·axis| <= FEATURE_SIN; a capsule's segment when |n·axis| <= FEATURE_SIN."""

RING_POINTS = 8
"""Points on a cylinder cap's rim that stand for the cap face in a manifold (a regular octagon)."""

MAX_FEATURE = 32
"""Largest number of points in a support feature (extra slab vertices are dropped)."""


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
    idx = np.empty(k, np.int64)     # insertion sort by (x, y): k <= MAX_FEATURE points
    for i in range(k):
        j = i
        while j > 0 and (P[idx[j - 1], 0] > P[i, 0] or (P[idx[j - 1], 0] == P[i, 0] and P[idx[j - 1], 1] > P[i, 1])):
            idx[j] = idx[j - 1]
            j -= 1
        idx[j] = i
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
def _spread_order(count, keep, phi, point, order):
    """The contacts to keep of ``count`` candidates, at most ``keep`` (into order; returns how many): all of
    them in their order when count <= keep; else the deepest, then greedily the one farthest from those kept
    (spreads the kept points over the contact patch)."""
    if count <= keep:
        for c in range(count):
            order[c] = c
        return count
    chosen = np.zeros(count, np.bool_)
    dmin = np.empty(count)
    for c in range(count):
        dmin[c] = np.inf
    first = 0
    for c in range(1, count):
        if phi[c] < phi[first]:
            first = c
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
            return s + 1
    return keep


@jit
def reduce_into(count, tmp_phi, tmp_pt, tmp_n, phi, point, normal):
    """Write at most MAX_PAIR_CONTACTS of the ``count`` candidate contacts (tmp_*) to the pair's outputs phi,
    point, normal (``_spread_order``); returns the number written."""
    order = np.empty(MAX_PAIR_CONTACTS, np.int64)
    count = _spread_order(count, MAX_PAIR_CONTACTS, tmp_phi, tmp_pt, order)
    for s in range(count):
        k = order[s]
        phi[s] = tmp_phi[k]
        for i in range(3):
            point[s, i] = tmp_pt[k, i]
            normal[s, i] = tmp_n[k, i]
    return count


@jit
def clipped_manifold(ta, pa, Ra, sa, va, tb, pb, Rb, sb, vb, n, ra, rb, margin, phi, point, normal):
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
    return reduce_into(count, tmp_phi, tmp_pt, tmp_n, phi, point, normal)
