"""Narrow-phase kernels for pairs that involve a box: halfspace, sphere, capsule and box.

Same calling convention as ``primitives.py``: ``first_second(..., margin, phi, point, normal) -> n``,
normal from the first geometry into the second one. A box is (c, R, half) with centre c, rotation
R (columns are the box axes in W) and half extents ``half`` (3,).
The kernels allocate nothing per call: 3-vectors are tuples (x, y, z) (``transforms``' tuple forms ``sub3t``,
``rot_mul_3t``, ...), and the box–box face clipping builds its polygon in the pair's 8-row ``point``/``normal``
output (MAX_PAIR_CONTACTS rows; with fewer it allocates one work array).

Methods:

* halfspace–box: every vertex whose height above the plane is <= margin (0 to 8 contacts; a box
  resting on a face gives 4, one on an edge 2, a deeply sunk box up to 8).
* sphere–box: closest point of the box to the centre; a centre inside the box exits through the
  nearest face (phi = −(distance to that face) − r).
* capsule–box: the box against the capsule's segment. Separated segment: exact closest points over
  the 2 segment ends and the 12 box edges. Intersecting segment: separating-axis test over the 3
  box face normals and the 3 axes d × e_j (exact penetration depth of the segment, plus r). When
  the contact normal is a box face normal, the segment is clipped to that face's rectangle and both
  ends of the clipped piece are reported (those with phi <= margin): a capsule lying on a face gets
  2 contacts, otherwise 1 contact. Nearly face-aligned capsules keep the face manifold (separated:
  gap direction n within ~0.8° of a face normal e_i; penetrating: an edge axis L beating the best
  face axis by at most FACE_TOL · min(r, smallest half extent)) when its deepest clipped end is the
  exact contact seen along e_i (its height or depth times |n·e_i| or |L·e_i| equals the exact
  distance or SAT overlap, as it does for the end clipped over the supporting edge): a capsule across
  a face overhanging an edge, tilted by a hair, gets the 2 clipped ends, not 1 point at the box edge,
  while a capsule end merely hanging beside an edge keeps its exact contact.
* box–box: separating-axis test over 15 axes (3 + 3 face normals, 9 edge–edge crosses). Face axis:
  the incident face (the face of the other box most anti-parallel to the reference normal) is
  clipped against the 4 side planes of the reference face (Sutherland–Hodgman), and every clipped
  vertex with depth <= margin along the reference normal is a contact (≤ 8). Edge axis: 1 contact
  at the closest points of the two supporting edges. Face axes win ties (relative bias 1e-6), and
  an edge axis L that beats the best face axis e_f by at most FACE_TOL · (smallest half extent)
  keeps the face manifold when its deepest point is the edge contact seen along e_f (depth·|L·e_f|
  = SAT overlap, as for the point clipped over the supporting edge): nearly face-aligned boxes get
  2–8 points, not 1 point jumping between the ends of the contact segment, while a corner dipping
  beside a face's edge keeps its exact edge–edge contact.
  Separated boxes (within the margin): exact distance from the 8 + 8 vertex–box and 144 edge–edge
  candidates; if the gap direction is within ~0.8° of a face normal the clipped face manifold is
  returned (its smallest phi is the exact distance), else 1 contact at the closest points.
"""

from __future__ import annotations

import numpy as np

from convexsim._jit import jit
from convexsim.geometry.primitives import MIN_OVERLAP
from convexsim.geometry.transforms import (
    TINY,
    add3t,
    axpy3t,
    clamp_to_box_t,
    closest_params_segments,
    col3t,
    cross3t,
    dot3,
    norm3,
    rot_mul_3t,
    rot_mul_t_3t,
    scale3t,
    sub3t,
    unit3t,
    write_contact_t,
)

FACE_BIAS = 1e-6
"""An edge axis replaces the best face axis only if its overlap is smaller by this relative amount."""

FACE_TOL = 1e-2
"""Box–box, penetrating: the face manifold is tried when the best edge axis L separates by at most
FACE_TOL · h_min more than the best face axis e_f (h_min the smallest half extent of the two boxes), and
kept only if its deepest clipped point is the edge contact seen along e_f (depth · |L·e_f| = edge overlap
to 1e-9 relative). Nearly face-aligned boxes then get their 2–8 clipped points instead of 1 edge–edge
point at an edge end (an edge axis within a few hundredths of a degree of a face normal otherwise wins by
~1e-7 m and the point jumps between the ends of the contact segment from step to step), while a corner
dipping beside a face's edge keeps its exact edge contact. This length only selects the axis to try."""

FACE_NORMAL_COS = 1.0 - 1e-4
"""Capsule–box, separated: a gap direction n with |n·e_i| above this (within ~0.8° of the normal of box
face i) takes face i's clipped segment when its deepest end is the closest contact seen along e_i
(height · |n·e_i| = exact distance)."""


@jit
def _capsule_box_tol(r: float, half: np.ndarray) -> float:
    """Face-preference length [m] of capsule–box: FACE_TOL · min(r, smallest half extent) (r = 0: box only)."""
    size = _min3(half)
    if r > 0.0:
        size = min(size, r)
    return FACE_TOL * size


@jit
def _lowest(phi: np.ndarray, count: int) -> float:
    """Smallest of phi[0..count−1]."""
    lowest = phi[0]
    for k in range(1, count):
        lowest = min(lowest, phi[k])
    return lowest


@jit
def _sign(x: float) -> float:
    """+1 for x >= 0, else −1 (zero is positive, for deterministic degenerate cases)."""
    return 1.0 if x >= 0.0 else -1.0


@jit
def halfspace_box(ph: np.ndarray, Rh: np.ndarray, c: np.ndarray, R: np.ndarray, half: np.ndarray,
                  margin: float, phi: np.ndarray, point: np.ndarray, normal: np.ndarray) -> int:
    """Halfspace vs box: one contact per box vertex v with n·(v − ph) <= margin (≤ 8)."""
    n = col3t(Rh, 2)
    count = 0
    for corner in range(8):
        v = _box_vertex(c, R, half, corner)
        height = dot3(n, sub3t(v, ph))
        if height <= margin:
            write_contact_t(count, height, axpy3t(v, -height, n), v, n, phi, point, normal)
            count += 1
    return count


@jit
def sphere_box(c: np.ndarray, r: float, cb: np.ndarray, Rb: np.ndarray, half: np.ndarray, margin: float,
               phi: np.ndarray, point: np.ndarray, normal: np.ndarray) -> int:
    """Sphere vs box, normal from the sphere into the box; ≤ 1 contact.

    Centre outside: n = (q − p)/|q − p| with q the closest box point, phi = |p − q| − r.
    Centre inside (or on the surface): exit through the face i minimizing h_i − |p_i| (lowest i
    on ties, p_i = 0 exits through +e_i), phi = −(h_i − |p_i|) − r.
    """
    p = rot_mul_t_3t(Rb, sub3t(c, cb))
    q = clamp_to_box_t(p, half)
    diff = sub3t(p, q)
    dist = norm3(diff)
    if dist > TINY:
        n_local = scale3t(diff, 1.0 / dist)  # box -> sphere, box frame
        value = dist - r
    else:
        best = 0
        for i in range(1, 3):
            if half[i] - abs(p[i]) < half[best] - abs(p[best]):
                best = i
        s = _sign(p[best])
        n_local = unit3t(best, s)
        depth = half[best] - abs(p[best])
        q = _with3(p, best, s * half[best])
        value = -depth - r
    if value > margin:
        return 0
    n = rot_mul_3t(Rb, scale3t(n_local, -1.0))  # sphere -> box, world
    on_box = add3t(cb, rot_mul_3t(Rb, q))
    on_sphere = axpy3t(c, r, n)
    write_contact_t(0, value, on_sphere, on_box, n, phi, point, normal)
    return 1


@jit(inline="always")
def _with3(p, i: int, x: float) -> tuple[float, float, float]:
    """The 3-vector p with component i replaced by x, as a tuple."""
    return x if i == 0 else p[0], x if i == 1 else p[1], x if i == 2 else p[2]


@jit
def _slab_clip(p: float, dk: float, h: float, t0: float, t1: float) -> tuple[float, float]:
    """[t0, t1] ∩ {t : |p + t·dk| <= h}, the parameters of a line p + t·dk (dk ≠ 0) inside the slab of
    half width h along one box axis."""
    ta = (-h - p) / dk
    tb = (h - p) / dk
    if ta > tb:
        ta, tb = tb, ta
    return max(t0, ta), min(t1, tb)


@jit
def _segment_hits_box(P0: tuple, d: tuple, half: np.ndarray) -> bool:
    """True if the segment P0 + t d, t ∈ [0, 1], meets the closed box [−half, half] (box frame)."""
    t0 = 0.0
    t1 = 1.0
    for i in range(3):
        if abs(d[i]) < TINY:
            if abs(P0[i]) > half[i]:
                return False
        else:
            t0, t1 = _slab_clip(P0[i], d[i], half[i], t0, t1)
            if t0 > t1:
                return False
    return True


@jit(inline="always")
def _closer_pair(best_d2: float, xa: tuple, xb: tuple, pa: tuple, pb: tuple) -> tuple[float, tuple, tuple]:
    """The closer of two candidate pairs of closest points: (|pa − pb|², pa, pb) if |pa − pb|² < best_d2, else
    (best_d2, xa, xb) (the earlier candidate wins ties). Vectors as arrays or tuples (all four of one kind)."""
    diff = sub3t(pa, pb)
    d2 = dot3(diff, diff)
    if d2 < best_d2:
        return d2, pa, pb
    return best_d2, xa, xb


@jit(inline="always")
def _segment_box_candidate(P0: tuple, P1: tuple, half: np.ndarray, c: int) -> tuple[tuple, tuple]:
    """Candidate c of :func:`_segment_box_closest` (box frame), as tuples: c = 0, 1 the segment end P0 or P1 and its
    clamp into the box; c = 2 + 4j + corner the closest points of the segment and the box edge along e_j at
    ``corner`` (bit 0: +h along e_(j+1), bit 1: +h along e_(j+2))."""
    if c < 2:
        P = P0 if c == 0 else P1
        return (P[0], P[1], P[2]), clamp_to_box_t(P, half)
    j = (c - 2) // 4
    corner = (c - 2) % 4
    k1 = (j + 1) % 3
    k2 = (j + 2) % 3
    x1 = half[k1] if corner & 1 else -half[k1]
    x2 = half[k2] if corner & 2 else -half[k2]
    mid = _with3(unit3t(k1, x1), k2, x2)  # the edge's midpoint
    e0 = _with3(mid, j, -half[j])
    e1 = _with3(mid, j, half[j])
    s, t = closest_params_segments(P0, P1, e0, e1)
    return axpy3t(P0, s, sub3t(P1, P0)), axpy3t(e0, t, sub3t(e1, e0))



@jit
def _segment_box_closest(P0: tuple, P1: tuple, half: np.ndarray
                         ) -> tuple[float, tuple, tuple]:
    """Distance and closest points (segment, box; tuples) for a segment that does not meet the box.

    Box frame. The minimum is attained at a segment end (vs its clamp into the box) or between the
    segment and one of the 12 box edges (a segment parallel to a face has an equally close point
    on an edge of that face), so these 14 candidates give the exact distance.
    """
    best_d2 = np.inf
    best_seg = (P0[0], P0[1], P0[2])
    best_box = best_seg
    for c in range(14):
        xs, xb = _segment_box_candidate(P0, P1, half, c)
        best_d2, best_seg, best_box = _closer_pair(best_d2, best_seg, best_box, xs, xb)
    return np.sqrt(best_d2), best_seg, best_box


@jit("int64(UniTuple(float64, 3), UniTuple(float64, 3), float64[::1], int64, float64, float64, float64[::1], float64[:, ::1], float64, float64[::1], float64[:, ::1], float64[:, ::1])")  # explicit: no per-literal specializations
def _capsule_face_contacts(P0: tuple, d: tuple, half: np.ndarray, face: int, s: float, r: float,
                           cb: np.ndarray, Rb: np.ndarray, margin: float, phi: np.ndarray, point: np.ndarray,
                           normal: np.ndarray) -> int:
    """Contacts of a capsule segment against box face s·e_face (box frame in, world out).

    The segment is clipped to the face rectangle (the slabs |x_k| <= h_k, k ≠ face); each end P of
    the clipped piece with phi = s·P_face − h_face − r <= margin is a contact, normal −s·e_face
    (capsule into box). Returns −1 if the clipped piece is empty (caller falls back).
    """
    t0 = 0.0
    t1 = 1.0
    for k in range(3):
        if k == face:
            continue
        if abs(d[k]) < TINY:
            if abs(P0[k]) > half[k] * (1.0 + 1e-12) + TINY:
                return -1
        else:
            t0, t1 = _slab_clip(P0[k], d[k], half[k], t0, t1)
    if t0 > t1:
        return -1
    n_local = unit3t(face, s)
    n = rot_mul_3t(Rb, unit3t(face, -s))  # capsule -> box, world
    nends = 2 if (t1 - t0) * norm3(d) > MIN_OVERLAP else 1
    count = 0
    for e in range(nends):
        t = t0 if e == 0 else t1
        P = axpy3t(P0, t, d)
        height = s * P[face] - half[face]
        value = height - r
        if value <= margin:
            on_box = add3t(cb, rot_mul_3t(Rb, axpy3t(P, -height, n_local)))
            on_capsule = add3t(cb, rot_mul_3t(Rb, axpy3t(P, -r, n_local)))
            write_contact_t(count, value, on_capsule, on_box, n, phi, point, normal)
            count += 1
    return count


@jit(inline="always")
def _segment_contact(value: float, xs: tuple, xb: tuple, n_local: tuple, r: float, cb: np.ndarray,
                     Rb: np.ndarray, margin: float, phi: np.ndarray, point: np.ndarray, normal: np.ndarray) -> int:
    """One capsule–box contact from box-frame closest points xs (on the segment) and xb (on the box) and the unit
    normal n_local (box → capsule, box frame): phi = ``value``, the capsule's witness xs − r·n_local, the world
    normal −R_b·n_local (capsule into box). Returns 1, or 0 (nothing written) if ``value`` > ``margin``."""
    if value > margin:
        return 0
    n = rot_mul_3t(Rb, scale3t(n_local, -1.0))
    on_capsule = add3t(cb, rot_mul_3t(Rb, axpy3t(xs, -r, n_local)))
    write_contact_t(0, value, on_capsule, add3t(cb, rot_mul_3t(Rb, xb)), n, phi, point, normal)
    return 1


@jit(inline="always")
def _capsule_box_apart(P0: tuple, P1: tuple, d: tuple, half: np.ndarray, r: float, cb: np.ndarray,
                       Rb: np.ndarray, margin: float, phi: np.ndarray, point: np.ndarray, normal: np.ndarray) -> int:
    """Contacts of a segment that misses the box (box frame): the closest points, or the clipped face segment when
    their normal is nearly a face normal and its deepest end is as close. Returns the count, or −1 when the
    segment touches the box within TINY (the caller's overlap test decides)."""
    dist, xs, xb = _segment_box_closest(P0, P1, half)
    if not dist > TINY:
        return -1
    if dist - r > margin:
        return 0
    n_local = scale3t(sub3t(xs, xb), 1.0 / dist)  # box -> capsule
    i = 0
    for k in range(1, 3):
        if abs(n_local[k]) > abs(n_local[i]):
            i = k
    if abs(n_local[i]) >= FACE_NORMAL_COS:  # nearly a face normal: the clipped face segment if it holds
        count = _capsule_face_contacts(P0, d, half, i, _sign(n_local[i]), r, cb, Rb, margin, phi, point, normal)
        # Kept if its deepest end is the closest contact seen along e_i: height·|n_i| = dist (exact
        # for a segment ⊥ n; a segment end that merely hangs near the face's edge is rejected).
        if count > 0 and (_lowest(phi, count) + r) * abs(n_local[i]) <= dist * (1.0 + 1e-9) + TINY:
            return count
    return _segment_contact(dist - r, xs, xb, n_local, r, cb, Rb, margin, phi, point, normal)


@jit(inline="always")
def _segment_face_axis(P0: tuple, P1: tuple, half: np.ndarray) -> tuple[int, float, float]:
    """The face axis of least overlap of a segment meeting the box (box frame): (axis i, sign ±1 of the push
    ±e_i that separates the segment, overlap [m])."""
    best_face = 0
    best_face_sign = 1.0
    best_face_overlap = np.inf
    for i in range(3):
        lo = min(P0[i], P1[i])
        hi = max(P0[i], P1[i])
        up = half[i] - lo  # push the segment along +e_i
        down = hi + half[i]  # push it along −e_i
        if up <= down and up < best_face_overlap:
            best_face, best_face_sign, best_face_overlap = i, 1.0, up
        elif down < up and down < best_face_overlap:
            best_face, best_face_sign, best_face_overlap = i, -1.0, down
    return best_face, best_face_sign, best_face_overlap


@jit(inline="always")
def _segment_edge_axis(P0: tuple, P1: tuple, d: tuple, half: np.ndarray, limit: float
                       ) -> tuple[int, float, tuple]:
    """The edge axis L ∝ d × e_j of least overlap below ``limit`` (box frame): (j, or −1 if none is below,
    overlap [m], unit L oriented box → segment)."""
    best_edge = -1
    best_edge_overlap = limit
    edge_normal = (0.0, 0.0, 0.0)
    dn = norm3(d)
    for j in range(3):
        if dn < TINY:
            break
        L = _with3(unit3t((j + 1) % 3, d[(j + 2) % 3]), (j + 2) % 3, -d[(j + 1) % 3])  # d × e_j
        ln = norm3(L)
        if ln < 1e-6 * dn:
            continue
        L = scale3t(L, 1.0 / ln)
        rb = half[0] * abs(L[0]) + half[1] * abs(L[1]) + half[2] * abs(L[2])
        a = dot3(P0, L)
        b = dot3(P1, L)
        up = rb - min(a, b)
        down = max(a, b) + rb
        ov = min(up, down)
        if ov < best_edge_overlap:
            best_edge_overlap = ov
            best_edge = j
            edge_normal = L if up <= down else scale3t(L, -1.0)
    return best_edge, best_edge_overlap, edge_normal


@jit(inline="always")
def _capsule_box_face_fallback(P0: tuple, P1: tuple, half: np.ndarray, face: int, sign: float,
                               overlap: float, r: float, cb: np.ndarray, Rb: np.ndarray, margin: float,
                               phi: np.ndarray, point: np.ndarray, normal: np.ndarray) -> int:
    """One contact along the face axis at the segment's deepest end (for a clipped face segment that came out
    empty: unreachable for a segment meeting the box, kept as a guard)."""
    n_local = unit3t(face, sign)
    xs = P0 if sign * P0[face] <= sign * P1[face] else P1
    return _segment_contact(-overlap - r, xs, axpy3t(xs, overlap, n_local), n_local, r, cb, Rb, margin, phi, point,
                            normal)


@jit(inline="always")
def _capsule_box_edge_contact(P0: tuple, P1: tuple, d: tuple, half: np.ndarray, edge: int,
                              overlap: float, edge_normal: tuple, r: float, cb: np.ndarray, Rb: np.ndarray,
                              margin: float, phi: np.ndarray, point: np.ndarray, normal: np.ndarray) -> int:
    """One contact on the edge axis: closest points between the segment and the box edge along e_edge that
    supports the edge normal (box frame)."""
    corner = (_sign(edge_normal[0]) * half[0], _sign(edge_normal[1]) * half[1], _sign(edge_normal[2]) * half[2])
    e0 = _with3(corner, edge, -half[edge])
    e1 = _with3(corner, edge, half[edge])
    s, t = closest_params_segments(P0, P1, e0, e1)
    return _segment_contact(-overlap - r, axpy3t(P0, s, d), axpy3t(e0, t, sub3t(e1, e0)), edge_normal, r, cb, Rb,
                            margin, phi, point, normal)


@jit
def capsule_box(cc: np.ndarray, Rc: np.ndarray, r: float, h: float, cb: np.ndarray, Rb: np.ndarray,
                half: np.ndarray, margin: float, phi: np.ndarray, point: np.ndarray, normal: np.ndarray
                ) -> int:
    """Capsule vs box, normal from the capsule into the box; ≤ 2 contacts (see module docstring)."""
    axis_local = rot_mul_t_3t(Rb, col3t(Rc, 2))
    P0 = axpy3t(rot_mul_t_3t(Rb, sub3t(cc, cb)), -h, axis_local)
    P1 = axpy3t(P0, 2.0 * h, axis_local)
    d = sub3t(P1, P0)
    if not _segment_hits_box(P0, d, half):
        count = _capsule_box_apart(P0, P1, d, half, r, cb, Rb, margin, phi, point, normal)
        if count >= 0:
            return count
    # The segment meets the box: separating-axis test, minimum overlap over face and edge axes.
    face, sign, face_overlap = _segment_face_axis(P0, P1, half)
    edge, edge_overlap, edge_normal = _segment_edge_axis(P0, P1, d, half, face_overlap * (1.0 - FACE_BIAS) - TINY)
    if edge < 0:
        count = _capsule_face_contacts(P0, d, half, face, sign, r, cb, Rb, margin, phi, point, normal)
        if count >= 0:
            return count
        return _capsule_box_face_fallback(P0, P1, half, face, sign, face_overlap, r, cb, Rb, margin, phi, point,
                                          normal)
    if face_overlap - edge_overlap <= _capsule_box_tol(r, half):  # nearly face-aligned: the face segment if it holds
        count = _capsule_face_contacts(P0, d, half, face, sign, r, cb, Rb, margin, phi, point, normal)
        # Kept if its deepest end reaches the edge axis's depth seen along e_face: depth·|L·e_face| >=
        # overlap (equality for the clipped end over the supporting edge, since L ⊥ d).
        depth = -_lowest(phi, count) - r if count > 0 else -np.inf
        if count > 0 and depth * abs(edge_normal[face]) >= edge_overlap * (1.0 - 1e-9) - TINY:
            return count
    return _capsule_box_edge_contact(P0, P1, d, half, edge, edge_overlap, edge_normal, r, cb, Rb, margin, phi, point,
                                     normal)


@jit("int64(float64[:, ::1], int64, UniTuple(float64, 3), float64, float64[:, ::1])")  # explicit: no per-literal specializations
def _clip_polygon(poly: np.ndarray, count: int, n: tuple, offset: float, out: np.ndarray) -> int:
    """Sutherland–Hodgman: keep the part of polygon poly[:count] with n·x <= offset; returns size."""
    m = 0
    for i in range(count):
        j = (i + 1) % count
        da = n[0] * poly[i, 0] + n[1] * poly[i, 1] + n[2] * poly[i, 2] - offset
        db = n[0] * poly[j, 0] + n[1] * poly[j, 1] + n[2] * poly[j, 2] - offset
        if da <= 0.0:
            for k in range(3):
                out[m, k] = poly[i, k]
            m += 1
        if (da < 0.0 < db) or (db < 0.0 < da):
            t = da / (da - db)
            for k in range(3):
                out[m, k] = poly[i, k] + t * (poly[j, k] - poly[i, k])
            m += 1
    return m


@jit
def _box_radius(R: np.ndarray, half: np.ndarray, L: tuple) -> float:
    """Half-width Σ h_i |R[:, i]·L| of a box projected on the unit axis L."""
    total = 0.0
    for i in range(3):
        total += half[i] * abs(R[0, i] * L[0] + R[1, i] * L[1] + R[2, i] * L[2])
    return total


@jit("int64(float64[::1], float64[:, ::1], float64[::1], float64[::1], float64[:, ::1], float64[::1], int64, UniTuple(float64, 3), boolean, float64, float64[::1], float64[:, ::1], float64[:, ::1])")  # explicit: no per-literal specializations
def _box_box_faces(cr: np.ndarray, Rr: np.ndarray, hr: np.ndarray, ci: np.ndarray, Ri: np.ndarray,
                   hi: np.ndarray, axis: int, nr: tuple, ref_is_a: bool, margin: float, phi: np.ndarray,
                   point: np.ndarray, normal: np.ndarray) -> int:
    """Face contacts: clip the incident box's face against face ``axis`` of the reference box.

    ``nr`` = ±Rr[:, axis] is the reference face's outward normal (pointing towards the incident box).
    The polygon being clipped (≤ 8 vertices) and the clipper's output live in ``point`` and ``normal`` (8 rows,
    room for the ≤ 8 contacts), which receive the contacts only after the clipping (contact out from vertex
    m >= out, read before it is written): a call allocates nothing (a work array if they have < 8 rows).
    """
    # Incident face: outward normal most anti-parallel to nr.
    k = 0
    cos_k = dot3(col3t(Ri, 0), nr)
    for j in range(1, 3):
        cosine = dot3(col3t(Ri, j), nr)
        if abs(cosine) > abs(cos_k):
            k, cos_k = j, cosine
    s = -_sign(cos_k)
    u = (k + 1) % 3
    v = (k + 2) % 3
    face_c = axpy3t(ci, s * hi[k], col3t(Ri, k))
    if point.shape[0] >= 8 and normal.shape[0] >= 8:
        poly = point
        scratch = normal
    else:
        work = np.empty((2, 8, 3))
        poly = work[0]
        scratch = work[1]
    for corner in range(4):
        su = 1.0 if corner == 0 or corner == 3 else -1.0
        sv = 1.0 if corner < 2 else -1.0
        for i in range(3):
            poly[corner, i] = face_c[i] + su * hi[u] * Ri[i, u] + sv * hi[v] * Ri[i, v]
    count = 4
    for j in range(3):
        if j == axis:
            continue
        side = col3t(Rr, j)
        offset = dot3(side, cr)
        for sgn_index in range(2):
            sgn = 1.0 if sgn_index == 0 else -1.0
            count = _clip_polygon(poly, count, scale3t(side, sgn), sgn * offset + hr[j], scratch)
            poly, scratch = scratch, poly
            if count == 0:
                return 0
    ref_c = axpy3t(cr, hr[axis], nr)
    n_out = nr if ref_is_a else scale3t(nr, -1.0)
    out = 0
    for m in range(count):
        p = (poly[m, 0], poly[m, 1], poly[m, 2])
        depth = dot3(nr, sub3t(p, ref_c))
        if depth <= margin:
            on_ref = axpy3t(p, -depth, nr)
            if ref_is_a:
                write_contact_t(out, depth, on_ref, p, n_out, phi, point, normal)
            else:
                write_contact_t(out, depth, p, on_ref, n_out, phi, point, normal)
            out += 1
    return out


@jit
def _box_vertex(c: np.ndarray, R: np.ndarray, half: np.ndarray, corner: int) -> tuple[float, float, float]:
    """Vertex ``corner`` (bit i set: +half[i]) of a box, world frame: c + Σ_j ±h_j R[:, j], as a tuple."""
    x, y, z = c[0], c[1], c[2]
    for j in range(3):
        s = half[j] if (corner >> j) & 1 else -half[j]
        x += s * R[0, j]
        y += s * R[1, j]
        z += s * R[2, j]
    return x, y, z


@jit
def _closest_point_on_box(c: np.ndarray, R: np.ndarray, half: np.ndarray, x) -> tuple[float, float, float]:
    """Closest point of the solid box to x (world frame), as a tuple."""
    return add3t(c, rot_mul_3t(R, clamp_to_box_t(rot_mul_t_3t(R, sub3t(x, c)), half)))


@jit
def _box_box_closest(ca: np.ndarray, Ra: np.ndarray, ha: np.ndarray, cb: np.ndarray, Rb: np.ndarray,
                     hb: np.ndarray) -> tuple[float, tuple, tuple]:
    """Distance and closest points (on A, on B, as tuples) of two disjoint boxes.

    The minimum over two disjoint convex polytopes is attained vertex–solid or edge–edge: the 8
    vertices of each box against the other (clamped into it) and the 12 × 12 edge pairs.
    """
    best = np.inf
    xa = (ca[0], ca[1], ca[2])
    xb = (cb[0], cb[1], cb[2])
    for corner in range(8):
        va = _box_vertex(ca, Ra, ha, corner)
        best, xa, xb = _closer_pair(best, xa, xb, va, _closest_point_on_box(cb, Rb, hb, va))
        vb = _box_vertex(cb, Rb, hb, corner)
        best, xa, xb = _closer_pair(best, xa, xb, _closest_point_on_box(ca, Ra, ha, vb), vb)
    for ea in range(12):
        ia = ea // 4
        a0 = _box_vertex(ca, Ra, ha, _edge_corner(ia, ea % 4))
        da = scale3t(col3t(Ra, ia), 2.0 * ha[ia])
        a1 = add3t(a0, da)
        for eb in range(12):
            ib = eb // 4
            b0 = _box_vertex(cb, Rb, hb, _edge_corner(ib, eb % 4))
            db = scale3t(col3t(Rb, ib), 2.0 * hb[ib])
            s, u = closest_params_segments(a0, a1, b0, add3t(b0, db))
            best, xa, xb = _closer_pair(best, xa, xb, axpy3t(a0, s, da), axpy3t(b0, u, db))
    return np.sqrt(best), xa, xb


@jit
def _edge_corner(axis: int, k: int) -> int:
    """Corner index of the −axis end of edge k (0..3) along ``axis``: the 2 other bits are k's bits."""
    lo = (axis + 1) % 3
    hi = (axis + 2) % 3
    return ((k & 1) << lo) | (((k >> 1) & 1) << hi)


FACE_MANIFOLD_COS = 1.0 - 1e-4
"""Separated boxes get a face manifold when the closest direction is within ~0.8° of a face normal."""


@jit
def _box_box_separated(ca: np.ndarray, Ra: np.ndarray, ha: np.ndarray, cb: np.ndarray, Rb: np.ndarray,
                       hb: np.ndarray, margin: float, phi: np.ndarray, point: np.ndarray, normal: np.ndarray
                       ) -> int:
    """Disjoint boxes: exact distance; face manifold when the gap direction is nearly a face normal.

    If the closest direction n is within FACE_MANIFOLD_COS of a face normal (of A or B) and the
    clipped face contacts include the exact distance, they are returned; otherwise 1 contact at
    the closest points.
    """
    dist, xa, xb = _box_box_closest(ca, Ra, ha, cb, Rb, hb)
    if dist > margin:
        return 0
    if dist < TINY:  # touching: the SAT normal would be needed; use the centre line
        n = sub3t(cb, ca)
        n = scale3t(n, 1.0 / max(norm3(n), TINY))
    else:
        n = scale3t(sub3t(xb, xa), 1.0 / dist)
    best_cos = -1.0
    best_f = 0
    for f in range(6):
        axis = col3t(Ra, f) if f < 3 else col3t(Rb, f - 3)
        cosine = abs(dot3(axis, n))
        if cosine > best_cos:
            best_cos, best_f = cosine, f
    if best_cos >= FACE_MANIFOLD_COS:
        count = _box_box_face_axis(ca, Ra, ha, cb, Rb, hb, n, best_f, margin, phi, point, normal)
        if count > 0 and _lowest(phi, count) <= dist * (1.0 + 1e-9) + TINY:
            return count
    write_contact_t(0, dist, xa, xb, n, phi, point, normal)
    return 1


@jit
def _min3(h: np.ndarray) -> float:
    """Smallest of three half extents."""
    return min(h[0], min(h[1], h[2]))


@jit
def _box_box_face_axis(ca: np.ndarray, Ra: np.ndarray, ha: np.ndarray, cb: np.ndarray, Rb: np.ndarray,
                       hb: np.ndarray, t: tuple, face: int, margin: float, phi: np.ndarray,
                       point: np.ndarray, normal: np.ndarray) -> int:
    """Clipped face contacts for face axis ``face`` (0..2 of A, 3..5 of B), the face normal oriented along
    t (the centre line cb − ca, or the gap direction of separated boxes)."""
    if face < 3:
        axis = col3t(Ra, face)
        nr = scale3t(axis, _sign(dot3(t, axis)))
        return _box_box_faces(ca, Ra, ha, cb, Rb, hb, face, nr, True, margin, phi, point, normal)
    axis = col3t(Rb, face - 3)
    nr = scale3t(axis, -_sign(dot3(t, axis)))
    return _box_box_faces(cb, Rb, hb, ca, Ra, ha, face - 3, nr, False, margin, phi, point, normal)


@jit
def box_box(ca: np.ndarray, Ra: np.ndarray, ha: np.ndarray, cb: np.ndarray, Rb: np.ndarray, hb: np.ndarray,
            margin: float, phi: np.ndarray, point: np.ndarray, normal: np.ndarray) -> int:
    """Box vs box by the separating-axis test and face clipping; ≤ 8 contacts (module docstring)."""
    t = sub3t(cb, ca)
    # Face axes: 0..2 of A, 3..5 of B. Separation along L: |t·L| − rA(L) − rB(L).
    best_face = 0
    best_face_sep = -np.inf
    for f in range(6):
        L = col3t(Ra, f) if f < 3 else col3t(Rb, f - 3)
        sep = abs(dot3(t, L)) - _box_radius(Ra, ha, L) - _box_radius(Rb, hb, L)
        if f == 0 or sep > best_face_sep + FACE_BIAS * abs(best_face_sep) + TINY:
            best_face_sep = sep
            best_face = f
    if best_face_sep > margin:
        return 0
    best_edge_sep = best_face_sep + FACE_BIAS * abs(best_face_sep) + TINY
    best_i = -1
    best_j = -1
    best_L = (0.0, 0.0, 0.0)
    for i in range(3):
        for j in range(3):
            L = cross3t(col3t(Ra, i), col3t(Rb, j))
            ln = norm3(L)
            if ln < 1e-6:
                continue  # parallel edges: covered by the face axes
            L = scale3t(L, 1.0 / ln)
            sep = abs(dot3(t, L)) - _box_radius(Ra, ha, L) - _box_radius(Rb, hb, L)
            if sep > best_edge_sep:
                best_edge_sep = sep
                best_i, best_j = i, j
                best_L = scale3t(L, _sign(dot3(t, L)))  # A -> B
    if (best_edge_sep if best_i >= 0 else best_face_sep) > 0.0:
        return _box_box_separated(ca, Ra, ha, cb, Rb, hb, margin, phi, point, normal)
    if best_i < 0:
        return _box_box_face_axis(ca, Ra, ha, cb, Rb, hb, t, best_face, margin, phi, point, normal)
    tol = FACE_TOL * min(_min3(ha), _min3(hb))
    if best_edge_sep - best_face_sep <= tol:  # nearly face-aligned: keep the face manifold if it holds
        count = _box_box_face_axis(ca, Ra, ha, cb, Rb, hb, t, best_face, margin, phi, point, normal)
        # Kept if its deepest point is the edge contact seen along the face normal e_f: depth·|L·e_f| >=
        # overlap (equality for the point clipped over the supporting edge, since L ⊥ that edge); a face
        # whose clipped points lie above the supporting edge (a corner dipping beside an edge) is rejected.
        face_axis = col3t(Ra, best_face) if best_face < 3 else col3t(Rb, best_face - 3)
        depth = -_lowest(phi, count) if count > 0 else -np.inf
        if count > 0 and depth * abs(dot3(best_L, face_axis)) >= -best_edge_sep * (1.0 - 1e-9) - TINY:
            return count
    # Edge–edge: A's edge along A_i supporting +n, B's edge along B_j supporting −n.
    pa = (ca[0], ca[1], ca[2])
    pb = (cb[0], cb[1], cb[2])
    for k in range(3):
        axis_a = col3t(Ra, k)
        axis_b = col3t(Rb, k)
        if k != best_i:
            pa = axpy3t(pa, _sign(dot3(axis_a, best_L)) * ha[k], axis_a)
        if k != best_j:
            pb = axpy3t(pb, -_sign(dot3(axis_b, best_L)) * hb[k], axis_b)
    da = scale3t(col3t(Ra, best_i), 2.0 * ha[best_i])
    db = scale3t(col3t(Rb, best_j), 2.0 * hb[best_j])
    pa0 = axpy3t(pa, -0.5, da)
    pb0 = axpy3t(pb, -0.5, db)
    s, u = closest_params_segments(pa0, add3t(pa0, da), pb0, add3t(pb0, db))
    xa = axpy3t(pa0, s, da)
    xb = axpy3t(pb0, u, db)
    write_contact_t(0, best_edge_sep, xa, xb, best_L, phi, point, normal)
    return 1
