"""Narrow-phase kernels for the round primitives: halfspace, sphere and capsule pairs.

Every kernel has the form ``first_second(<first pose/size>, <second pose/size>, margin, phi, point,
normal) -> n``: it writes n contacts (0 ≤ n ≤ MAX_PAIR_CONTACTS) with ``phi <= margin`` into rows
0..n−1 of the output buffers ``phi`` (k,), ``point`` (k, 3), ``normal`` (k, 3), k ≥ MAX_PAIR_CONTACTS.
The normal is a unit vector from the *first* geometry into the *second* one, ``phi`` the signed
distance [m] (< 0: penetration) and ``point`` the midpoint of the two surface points.

Shapes are given in world coordinates:

* halfspace (p, R): surface through p, outward normal R[:, 2], solid below;
* sphere (c, r);
* capsule (c, R, r, h): the segment c ± h R[:, 2] swept by a ball of radius r.
"""

from __future__ import annotations

import numpy as np

from convexsim._jit import jit
from convexsim.geometry.transforms import (
    TINY,
    any_perpendicular,
    axpy3,
    closest_params_segments,
    column3,
    cross3,
    dot3,
    norm3,
    scale3,
    sub3,
    write_contact,
)

MAX_PAIR_CONTACTS = 8
"""Largest number of contacts one pair can produce (box–box clipping and box–halfspace vertices)."""

PARALLEL_SIN2 = 1e-12
"""Two segments are parallel when sin²(angle between them) is below this."""

MIN_OVERLAP = 1e-9
"""Overlap length [m] of parallel segments below which one contact (not two) is produced."""

NEAR_PARALLEL_SIN2 = 2e-4
"""Capsule–capsule: segments within this sin² (~0.8°) of parallel may take the 2-point overlap manifold."""

PARALLEL_TOL = 1e-2
"""Capsule–capsule, nearly parallel: the 2 contacts at the ends of the overlap interval replace the single
closest-point contact when the deeper of them is within PARALLEL_TOL · min(ra, rb) of the exact distance.
A capsule lying on another one tilted by a hair (1e-6..1e-3 rad) then keeps both ends of its contact line
instead of 1 point that jumps between them; the deepest reported phi errs by at most that length."""


@jit("int64(float64[::1], float64, float64[::1], float64, float64[::1], float64, int64, float64[::1], float64[:, ::1], float64[:, ::1])")  # explicit: no per-literal specializations
def sphere_pair(
    ca: np.ndarray,
    ra: float,
    cb: np.ndarray,
    rb: float,
    fallback_normal: np.ndarray,
    margin: float,
    k: int,
    phi: np.ndarray,
    point: np.ndarray,
    normal: np.ndarray,
) -> int:
    """Contact between balls (ca, ra) and (cb, rb) written at row k; returns 1 if phi <= margin.

    phi = |cb − ca| − ra − rb, n = (cb − ca)/|cb − ca|; when the centres coincide (|cb − ca| < TINY)
    n = ``fallback_normal`` (the caller's choice for the degenerate case).
    """
    diff = sub3(cb, ca)
    dist = norm3(diff)
    if dist > TINY:
        n = scale3(diff, 1.0 / dist)
    else:
        n = fallback_normal
    value = dist - ra - rb
    if value > margin:
        return 0
    write_contact(k, value, axpy3(ca, ra, n), axpy3(cb, -rb, n), n, phi, point, normal)
    return 1


@jit
def halfspace_sphere(
    ph: np.ndarray,
    Rh: np.ndarray,
    c: np.ndarray,
    r: float,
    margin: float,
    phi: np.ndarray,
    point: np.ndarray,
    normal: np.ndarray,
) -> int:
    """Halfspace (ph, Rh) vs sphere (c, r): phi = n·(c − ph) − r with n = Rh[:, 2]; ≤ 1 contact."""
    n = column3(Rh, 2)
    height = dot3(n, sub3(c, ph))
    value = height - r
    if value > margin:
        return 0
    write_contact(0, value, axpy3(c, -height, n), axpy3(c, -r, n), n, phi, point, normal)
    return 1


@jit
def halfspace_capsule(
    ph: np.ndarray,
    Rh: np.ndarray,
    c: np.ndarray,
    R: np.ndarray,
    r: float,
    h: float,
    margin: float,
    phi: np.ndarray,
    point: np.ndarray,
    normal: np.ndarray,
) -> int:
    """Halfspace vs capsule: one contact per cap centre c ∓ h·axis whose ball has phi <= margin.

    A capsule lying on the plane gets 2 contacts (both caps), a tilted one the lower cap (and the
    upper one too if it is within the margin); h = 0 gives one contact. Order: −h end first.
    """
    n = column3(Rh, 2)
    axis = column3(R, 2)
    count = 0
    nends = 2 if h > 0.0 else 1
    for e in range(nends):
        sign = -1.0 if e == 0 else 1.0
        end = axpy3(c, sign * h, axis)
        height = dot3(n, sub3(end, ph))
        value = height - r
        if value <= margin:
            write_contact(count, value, axpy3(end, -height, n), axpy3(end, -r, n), n, phi, point, normal)
            count += 1
    return count


@jit
def sphere_sphere(
    ca: np.ndarray,
    ra: float,
    cb: np.ndarray,
    rb: float,
    margin: float,
    phi: np.ndarray,
    point: np.ndarray,
    normal: np.ndarray,
) -> int:
    """Sphere vs sphere; concentric spheres get the normal +z (W). ≤ 1 contact."""
    up = np.zeros(3)
    up[2] = 1.0  # fallback normal for concentric spheres
    return sphere_pair(ca, ra, cb, rb, up, margin, 0, phi, point, normal)


@jit
def sphere_capsule(
    c: np.ndarray,
    r: float,
    cc: np.ndarray,
    R: np.ndarray,
    rc: float,
    hc: float,
    margin: float,
    phi: np.ndarray,
    point: np.ndarray,
    normal: np.ndarray,
) -> int:
    """Sphere vs capsule: the sphere against the ball at the closest point of the capsule segment.

    A sphere centre on the capsule axis gets a normal perpendicular to the axis (any_perpendicular).
    """
    axis = column3(R, 2)
    p0 = axpy3(cc, -hc, axis)
    s = 0.0
    if hc > 0.0:
        s = dot3(sub3(c, p0), axis) / (2.0 * hc)
        s = min(max(s, 0.0), 1.0)
    closest = axpy3(p0, 2.0 * hc * s, axis)
    fallback = any_perpendicular(axis)
    return sphere_pair(c, r, closest, rc, fallback, margin, 0, phi, point, normal)


@jit
def _overlap_end_contacts(
    p1: np.ndarray,
    d1: np.ndarray,
    ra: float,
    p2: np.ndarray,
    d2: np.ndarray,
    rb: float,
    fallback: np.ndarray,
    margin: float,
    phi: np.ndarray,
    point: np.ndarray,
    normal: np.ndarray,
) -> int:
    """Ball contacts at the two ends of the overlap of (nearly) parallel segments p1 + s d1, p2 + t d2.

    The overlap is s ∈ [lo, hi], the projection of segment 2 onto segment 1 clamped to [0, 1]; at each
    end x1 = p1 + s d1 the ball of radius ra meets the ball rb at x1's closest point on segment 2.
    Returns 0 when the overlap is shorter than MIN_OVERLAP (no manifold), else the contacts with
    phi <= margin.
    """
    a = dot3(d1, d1)
    e = dot3(d2, d2)
    s_p = dot3(sub3(p2, p1), d1) / a
    s_q = dot3(sub3(axpy3(p2, 1.0, d2), p1), d1) / a
    lo = max(0.0, min(s_p, s_q))
    hi = min(1.0, max(s_p, s_q))
    if (hi - lo) * np.sqrt(a) <= MIN_OVERLAP:
        return 0
    count = 0
    for end in range(2):
        s = lo if end == 0 else hi
        x1 = axpy3(p1, s, d1)
        t = min(max(dot3(sub3(x1, p2), d2) / e, 0.0), 1.0)
        x2 = axpy3(p2, t, d2)
        count += sphere_pair(x1, ra, x2, rb, fallback, margin, count, phi, point, normal)
    return count


@jit
def capsule_capsule(
    ca: np.ndarray,
    Ra: np.ndarray,
    ra: float,
    ha: float,
    cb: np.ndarray,
    Rb: np.ndarray,
    rb: float,
    hb: float,
    margin: float,
    phi: np.ndarray,
    point: np.ndarray,
    normal: np.ndarray,
) -> int:
    """Capsule vs capsule via the closest points of the two segments.

    Parallel segments whose projections overlap by more than MIN_OVERLAP give 2 contacts, at the
    two ends of the overlap interval; so do nearly parallel ones (sin² < NEAR_PARALLEL_SIN2) when the
    deeper of these 2 is within PARALLEL_TOL · min(ra, rb) of the exact distance; otherwise 1 contact
    between the balls at the closest points.
    When the segments intersect (closest points coincide) the normal is ±(d_a × d_b)/|d_a × d_b|,
    or a perpendicular of the axis if they are collinear, with the sign making n·(cb − ca) ≥ 0.
    """
    ax_a = column3(Ra, 2)
    ax_b = column3(Rb, 2)
    p1 = axpy3(ca, -ha, ax_a)
    q1 = axpy3(ca, ha, ax_a)
    p2 = axpy3(cb, -hb, ax_b)
    q2 = axpy3(cb, hb, ax_b)
    d1 = sub3(q1, p1)
    d2 = sub3(q2, p2)
    a = dot3(d1, d1)
    e = dot3(d2, d2)
    cr = cross3(d1, d2)
    cr2 = dot3(cr, cr)
    # Degenerate-case normal: perpendicular to both axes, pointing from A's centre towards B's.
    if cr2 > PARALLEL_SIN2 * a * e and cr2 > 0.0:
        fallback = scale3(cr, 1.0 / np.sqrt(cr2))
    elif a > 0.0:
        fallback = any_perpendicular(d1)
    else:
        fallback = any_perpendicular(d2)
    if dot3(fallback, sub3(cb, ca)) < 0.0:
        fallback = scale3(fallback, -1.0)
    s, t = closest_params_segments(p1, q1, p2, q2)
    x1 = axpy3(p1, s, d1)
    x2 = axpy3(p2, t, d2)
    if a > 0.0 and e > 0.0 and cr2 <= NEAR_PARALLEL_SIN2 * a * e:
        exact = norm3(sub3(x2, x1)) - ra - rb
        tol = PARALLEL_TOL * min(ra, rb)
        if cr2 <= PARALLEL_SIN2 * a * e:
            tol = np.inf  # parallel: the overlap ends are the contact line's ends
        count = _overlap_end_contacts(p1, d1, ra, p2, d2, rb, fallback, margin, phi, point, normal)
        if count > 0:
            lowest = phi[0]
            for k in range(1, count):
                lowest = min(lowest, phi[k])
            if lowest <= exact + tol:
                return count
    return sphere_pair(x1, ra, x2, rb, fallback, margin, 0, phi, point, normal)

