"""Narrow-phase kernels for pairs that involve a box: halfspace, sphere, capsule and box.

Same calling convention as ``primitives.py``: ``first_second(..., margin, phi, point, normal) -> n``,
normal from the first geometry into the second one. A box is (c, R, half) with centre c, rotation
R (columns are the box axes in W) and half extents ``half`` (3,).

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
  2 contacts, otherwise 1 contact.
* box–box: separating-axis test over 15 axes (3 + 3 face normals, 9 edge–edge crosses). Face axis:
  the incident face (the face of the other box most anti-parallel to the reference normal) is
  clipped against the 4 side planes of the reference face (Sutherland–Hodgman), and every clipped
  vertex with depth <= margin along the reference normal is a contact (≤ 8). Edge axis: 1 contact
  at the closest points of the two supporting edges. Face axes win ties (relative bias 1e-6).
  For separated boxes phi is the SAT separation, a lower bound of the distance (exact for
  face–face and edge–edge closest features).
"""

from __future__ import annotations

import numpy as np

from convexsim._jit import jit
from convexsim.geometry.primitives import MIN_OVERLAP
from convexsim.geometry.transforms import (
    TINY,
    closest_params_segments,
    cross3,
    dot3,
    norm3,
    rot_mul,
    rot_mul_t,
    write_contact,
)

FACE_BIAS = 1e-6
"""An edge axis replaces the best face axis only if its overlap is smaller by this relative amount."""

FACE_NORMAL_COS = 1.0 - 1e-9
"""A contact normal with |n·e_i| above this is treated as the normal of box face i."""


@jit
def _sign(x: float) -> float:
    """+1 for x >= 0, else −1 (zero is positive, for deterministic degenerate cases)."""
    return 1.0 if x >= 0.0 else -1.0


@jit
def halfspace_box(
    ph: np.ndarray,
    Rh: np.ndarray,
    c: np.ndarray,
    R: np.ndarray,
    half: np.ndarray,
    margin: float,
    phi: np.ndarray,
    point: np.ndarray,
    normal: np.ndarray,
) -> int:
    """Halfspace vs box: one contact per box vertex v with n·(v − ph) <= margin (≤ 8)."""
    n = Rh[:, 2].copy()
    count = 0
    for corner in range(8):
        v = c.copy()
        for i in range(3):
            s = 1.0 if (corner >> i) & 1 else -1.0
            v += (s * half[i]) * R[:, i]
        height = dot3(n, v - ph)
        if height <= margin:
            write_contact(count, height, v - height * n, v, n, phi, point, normal)
            count += 1
    return count


@jit
def sphere_box(
    c: np.ndarray,
    r: float,
    cb: np.ndarray,
    Rb: np.ndarray,
    half: np.ndarray,
    margin: float,
    phi: np.ndarray,
    point: np.ndarray,
    normal: np.ndarray,
) -> int:
    """Sphere vs box, normal from the sphere into the box; ≤ 1 contact.

    Centre outside: n = (q − p)/|q − p| with q the closest box point, phi = |p − q| − r.
    Centre inside (or on the surface): exit through the face i minimizing h_i − |p_i| (lowest i
    on ties, p_i = 0 exits through +e_i), phi = −(h_i − |p_i|) − r.
    """
    p = rot_mul_t(Rb, c - cb)
    q = np.minimum(np.maximum(p, -half), half)
    diff = p - q
    dist = norm3(diff)
    n_local = np.zeros(3)  # box -> sphere, box frame
    if dist > TINY:
        n_local = diff / dist
        value = dist - r
    else:
        best = 0
        for i in range(1, 3):
            if half[i] - abs(p[i]) < half[best] - abs(p[best]):
                best = i
        s = _sign(p[best])
        n_local[best] = s
        depth = half[best] - abs(p[best])
        q = p.copy()
        q[best] = s * half[best]
        value = -depth - r
    if value > margin:
        return 0
    n = -(rot_mul(Rb, n_local))  # sphere -> box, world
    on_box = cb + rot_mul(Rb, q)
    on_sphere = c + r * n
    write_contact(0, value, on_sphere, on_box, n, phi, point, normal)
    return 1


@jit
def _segment_hits_box(P0: np.ndarray, d: np.ndarray, half: np.ndarray) -> bool:
    """True if the segment P0 + t d, t ∈ [0, 1], meets the closed box [−half, half] (box frame)."""
    t0 = 0.0
    t1 = 1.0
    for i in range(3):
        if abs(d[i]) < TINY:
            if abs(P0[i]) > half[i]:
                return False
        else:
            ta = (-half[i] - P0[i]) / d[i]
            tb = (half[i] - P0[i]) / d[i]
            if ta > tb:
                ta, tb = tb, ta
            t0 = max(t0, ta)
            t1 = min(t1, tb)
            if t0 > t1:
                return False
    return True


@jit
def _segment_box_closest(
    P0: np.ndarray, P1: np.ndarray, half: np.ndarray
) -> tuple[float, np.ndarray, np.ndarray]:
    """Distance and closest points (segment, box) for a segment that does not meet the box.

    Box frame. The minimum is attained at a segment end (vs its clamp into the box) or between the
    segment and one of the 12 box edges (a segment parallel to a face has an equally close point
    on an edge of that face), so these 14 candidates give the exact distance.
    """
    best_d2 = np.inf
    best_seg = P0.copy()
    best_box = P0.copy()
    for P in (P0, P1):
        q = np.minimum(np.maximum(P, -half), half)
        d2 = dot3(P - q, P - q)
        if d2 < best_d2:
            best_d2 = d2
            best_seg = P.copy()
            best_box = q
    for j in range(3):
        k1 = (j + 1) % 3
        k2 = (j + 2) % 3
        for corner in range(4):
            e0 = np.zeros(3)
            e0[k1] = half[k1] if corner & 1 else -half[k1]
            e0[k2] = half[k2] if corner & 2 else -half[k2]
            e1 = e0.copy()
            e0[j] = -half[j]
            e1[j] = half[j]
            s, t = closest_params_segments(P0, P1, e0, e1)
            xs = P0 + s * (P1 - P0)
            xb = e0 + t * (e1 - e0)
            d2 = dot3(xs - xb, xs - xb)
            if d2 < best_d2:
                best_d2 = d2
                best_seg = xs
                best_box = xb
    return np.sqrt(best_d2), best_seg, best_box


@jit
def _capsule_face_contacts(
    P0: np.ndarray,
    d: np.ndarray,
    half: np.ndarray,
    face: int,
    s: float,
    r: float,
    cb: np.ndarray,
    Rb: np.ndarray,
    margin: float,
    phi: np.ndarray,
    point: np.ndarray,
    normal: np.ndarray,
) -> int:
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
            ta = (-half[k] - P0[k]) / d[k]
            tb = (half[k] - P0[k]) / d[k]
            if ta > tb:
                ta, tb = tb, ta
            t0 = max(t0, ta)
            t1 = min(t1, tb)
    if t0 > t1:
        return -1
    n_local = np.zeros(3)
    n_local[face] = s
    n = -(rot_mul(Rb, n_local))  # capsule -> box, world
    nends = 2 if (t1 - t0) * norm3(d) > MIN_OVERLAP else 1
    count = 0
    for e in range(nends):
        t = t0 if e == 0 else t1
        P = P0 + t * d
        height = s * P[face] - half[face]
        value = height - r
        if value <= margin:
            on_box = P - (height * s) * n_local
            on_capsule = P - (r * s) * n_local
            write_contact(count, value, cb + rot_mul(Rb, on_capsule), cb + rot_mul(Rb, on_box), n, phi, point, normal)
            count += 1
    return count


@jit
def capsule_box(
    cc: np.ndarray,
    Rc: np.ndarray,
    r: float,
    h: float,
    cb: np.ndarray,
    Rb: np.ndarray,
    half: np.ndarray,
    margin: float,
    phi: np.ndarray,
    point: np.ndarray,
    normal: np.ndarray,
) -> int:
    """Capsule vs box, normal from the capsule into the box; ≤ 2 contacts (see module docstring)."""
    axis_local = rot_mul_t(Rb, Rc[:, 2])
    P0 = rot_mul_t(Rb, cc - cb) - h * axis_local
    P1 = P0 + (2.0 * h) * axis_local
    d = P1 - P0
    if not _segment_hits_box(P0, d, half):
        dist, xs, xb = _segment_box_closest(P0, P1, half)
        if dist > TINY:
            if dist - r > margin:
                return 0
            n_local = (xs - xb) / dist  # box -> capsule
            for i in range(3):
                if abs(n_local[i]) >= FACE_NORMAL_COS:
                    count = _capsule_face_contacts(
                        P0, d, half, i, _sign(n_local[i]), r, cb, Rb, margin, phi, point, normal
                    )
                    if count > 0:
                        return count
            n = -(rot_mul(Rb, n_local))
            on_capsule = cb + rot_mul(Rb, xs - r * n_local)
            write_contact(0, dist - r, on_capsule, cb + rot_mul(Rb, xb), n, phi, point, normal)
            return 1
    # The segment meets the box: separating-axis test, minimum overlap over face and edge axes.
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
    best_edge = -1
    best_edge_overlap = best_face_overlap * (1.0 - FACE_BIAS) - TINY
    edge_normal = np.zeros(3)
    dn = norm3(d)
    for j in range(3):
        if dn < TINY:
            break
        L = np.zeros(3)  # d × e_j
        L[(j + 1) % 3] = d[(j + 2) % 3]
        L[(j + 2) % 3] = -d[(j + 1) % 3]
        ln = norm3(L)
        if ln < 1e-6 * dn:
            continue
        L /= ln
        rb = half[0] * abs(L[0]) + half[1] * abs(L[1]) + half[2] * abs(L[2])
        a = dot3(P0, L)
        b = dot3(P1, L)
        up = rb - min(a, b)
        down = max(a, b) + rb
        ov = min(up, down)
        if ov < best_edge_overlap:
            best_edge_overlap = ov
            best_edge = j
            edge_normal = L if up <= down else -L
    if best_edge < 0:
        count = _capsule_face_contacts(
            P0, d, half, best_face, best_face_sign, r, cb, Rb, margin, phi, point, normal
        )
        if count >= 0:
            return count
        # Unreachable for a segment meeting the box; fall back to the face axis at the deepest end.
        n_local = np.zeros(3)
        n_local[best_face] = best_face_sign
        xs = P0 if best_face_sign * P0[best_face] <= best_face_sign * P1[best_face] else P1
        xb = xs + best_face_overlap * n_local
        value = -best_face_overlap - r
        if value > margin:
            return 0
        write_contact(0, value, cb + rot_mul(Rb, xs - r * n_local), cb + rot_mul(Rb, xb), -(rot_mul(Rb, n_local)), phi, point, normal)
        return 1
    # Edge axis: closest points between the segment and the box edge (along e_j) supporting n.
    e0 = np.zeros(3)
    for k in range(3):
        e0[k] = _sign(edge_normal[k]) * half[k]
    e1 = e0.copy()
    e0[best_edge] = -half[best_edge]
    e1[best_edge] = half[best_edge]
    s, t = closest_params_segments(P0, P1, e0, e1)
    xs = P0 + s * d
    xb = e0 + t * (e1 - e0)
    value = -best_edge_overlap - r
    if value > margin:
        return 0
    n = -(rot_mul(Rb, edge_normal))
    write_contact(0, value, cb + rot_mul(Rb, xs - r * edge_normal), cb + rot_mul(Rb, xb), n, phi, point, normal)
    return 1


@jit
def _clip_polygon(
    poly: np.ndarray, count: int, n: np.ndarray, offset: float, out: np.ndarray
) -> int:
    """Sutherland–Hodgman: keep the part of polygon poly[:count] with n·x <= offset; returns size."""
    m = 0
    for i in range(count):
        a = poly[i]
        b = poly[(i + 1) % count]
        da = dot3(n, a) - offset
        db = dot3(n, b) - offset
        if da <= 0.0:
            out[m] = a
            m += 1
        if (da < 0.0 < db) or (db < 0.0 < da):
            t = da / (da - db)
            out[m] = a + t * (b - a)
            m += 1
    return m


@jit
def _box_radius(R: np.ndarray, half: np.ndarray, L: np.ndarray) -> float:
    """Half-width Σ h_i |R[:, i]·L| of a box projected on the unit axis L."""
    return (
        half[0] * abs(dot3(R[:, 0], L))
        + half[1] * abs(dot3(R[:, 1], L))
        + half[2] * abs(dot3(R[:, 2], L))
    )


@jit
def _box_box_faces(
    cr: np.ndarray,
    Rr: np.ndarray,
    hr: np.ndarray,
    ci: np.ndarray,
    Ri: np.ndarray,
    hi: np.ndarray,
    axis: int,
    ref_is_a: bool,
    margin: float,
    phi: np.ndarray,
    point: np.ndarray,
    normal: np.ndarray,
) -> int:
    """Face contact: clip the incident box's face against reference face ``axis`` of box (cr, Rr, hr)."""
    nr = Rr[:, axis] * _sign(dot3(ci - cr, Rr[:, axis]))  # reference -> incident
    # Incident face: outward normal most anti-parallel to nr.
    k = 0
    for j in range(1, 3):
        if abs(dot3(Ri[:, j], nr)) > abs(dot3(Ri[:, k], nr)):
            k = j
    s = -_sign(dot3(Ri[:, k], nr))
    u = (k + 1) % 3
    v = (k + 2) % 3
    face_c = ci + (s * hi[k]) * Ri[:, k]
    poly = np.empty((8, 3))
    for corner in range(4):
        su = 1.0 if corner == 0 or corner == 3 else -1.0
        sv = 1.0 if corner < 2 else -1.0
        poly[corner] = face_c + (su * hi[u]) * Ri[:, u] + (sv * hi[v]) * Ri[:, v]
    scratch = np.empty((8, 3))
    count = 4
    for j in range(3):
        if j == axis:
            continue
        side = Rr[:, j].copy()
        for sgn in (1.0, -1.0):
            count = _clip_polygon(poly, count, sgn * side, sgn * dot3(side, cr) + hr[j], scratch)
            poly, scratch = scratch, poly
            if count == 0:
                return 0
    ref_c = cr + hr[axis] * nr
    out = 0
    for m in range(count):
        p = poly[m]
        depth = dot3(nr, p - ref_c)
        if depth <= margin:
            on_ref = p - depth * nr
            if ref_is_a:
                write_contact(out, depth, on_ref, p, nr, phi, point, normal)
            else:
                write_contact(out, depth, p, on_ref, -nr, phi, point, normal)
            out += 1
    return out


@jit
def box_box(
    ca: np.ndarray,
    Ra: np.ndarray,
    ha: np.ndarray,
    cb: np.ndarray,
    Rb: np.ndarray,
    hb: np.ndarray,
    margin: float,
    phi: np.ndarray,
    point: np.ndarray,
    normal: np.ndarray,
) -> int:
    """Box vs box by the separating-axis test and face clipping; ≤ 8 contacts (module docstring)."""
    t = cb - ca
    # Face axes: 0..2 of A, 3..5 of B. Separation along L: |t·L| − rA(L) − rB(L).
    best_face = 0
    best_face_sep = -np.inf
    for f in range(6):
        L = Ra[:, f].copy() if f < 3 else Rb[:, f - 3].copy()
        sep = abs(dot3(t, L)) - _box_radius(Ra, ha, L) - _box_radius(Rb, hb, L)
        if f == 0 or sep > best_face_sep + FACE_BIAS * abs(best_face_sep) + TINY:
            best_face_sep = sep
            best_face = f
    if best_face_sep > margin:
        return 0
    best_edge_sep = best_face_sep + FACE_BIAS * abs(best_face_sep) + TINY
    best_i = -1
    best_j = -1
    best_L = np.zeros(3)
    for i in range(3):
        for j in range(3):
            L = cross3(Ra[:, i], Rb[:, j])
            ln = norm3(L)
            if ln < 1e-6:
                continue  # parallel edges: covered by the face axes
            L /= ln
            sep = abs(dot3(t, L)) - _box_radius(Ra, ha, L) - _box_radius(Rb, hb, L)
            if sep > best_edge_sep:
                best_edge_sep = sep
                best_i, best_j = i, j
                best_L = L * _sign(dot3(t, L))  # A -> B
    if best_i < 0:
        if best_face < 3:
            return _box_box_faces(ca, Ra, ha, cb, Rb, hb, best_face, True, margin, phi, point, normal)
        return _box_box_faces(cb, Rb, hb, ca, Ra, ha, best_face - 3, False, margin, phi, point, normal)
    if best_edge_sep > margin:
        return 0
    # Edge–edge: A's edge along A_i supporting +n, B's edge along B_j supporting −n.
    pa0 = ca.copy()
    pb0 = cb.copy()
    for k in range(3):
        if k != best_i:
            pa0 += (_sign(dot3(Ra[:, k], best_L)) * ha[k]) * Ra[:, k]
        if k != best_j:
            pb0 -= (_sign(dot3(Rb[:, k], best_L)) * hb[k]) * Rb[:, k]
    pa1 = pa0 + ha[best_i] * Ra[:, best_i]
    pa0 = pa0 - ha[best_i] * Ra[:, best_i]
    pb1 = pb0 + hb[best_j] * Rb[:, best_j]
    pb0 = pb0 - hb[best_j] * Rb[:, best_j]
    s, u = closest_params_segments(pa0, pa1, pb0, pb1)
    xa = pa0 + s * (pa1 - pa0)
    xb = pb0 + u * (pb1 - pb0)
    write_contact(0, best_edge_sep, xa, xb, best_L, phi, point, normal)
    return 1
