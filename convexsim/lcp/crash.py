"""A crash basis for a cold contact LCP: a guess of its basic z's from an iterative solve of the same step.

Lemke started from a guessed complementary basis (``lemke_from_basis``) needs roughly as many pivots as the
guess has wrong indices. Without a previous step (a cold step) the guess must come from the LCP itself. For
the Stewart–Trinkle contact LCP (layout ``ContactLcpLayout``: z = (p_n (m), β (m·d, contact-major), λ (m)),

    M = [[G_nn, G_nβ, 0], [G_βn, G_ββ, E], [μ, −Eᵀ, 0]],   q = (q_n, q_β, 0),

the friction part of the basis is what costs (each contact's stick/slip state and which directions carry
the impulse), so the guess comes from a projected block Gauss–Seidel (PGS) solve of the contact problem:

1. Reduction to contact coordinates. With u_j = (cos 2πj/d, sin 2πj/d) (d ≥ 3 uniform directions,
   Σ_j u_j u_jᵀ = (d/2)·I), the β columns of M depend on β only through the tangential impulse
   f = Σ_j β_j u_j, and row j of the β block of M z + q is u_j · v_t (v_t the tangential velocity). So
   with R = blockdiag per contact of [(2/d)·Uᵀ (on β), 1 (on p_n)], the 3m × 3m Delassus matrix
   G₃ = R G Rᵀ (G the impulse block of M) and q₃ = R q give the contact velocities
   (v_t1, v_t2, v_n) = G₃ γ + q₃ of the impulses γ = (f, p_n) exactly. G₃ is kept as 3 × 3 blocks per
   pair of contacts sharing a body (block CSR).
2. PGS over contacts: with the other contacts fixed, p_n ← max(0, p_n − v_n/G_nn), then f ← the minimizer
   of ½ fᵀ W f + gᵀ f over the polygon μ p_n · conv{u_j} (W the contact's tangential 2 × 2 block; the
   minimum of a convex quadratic over a polygon: the unconstrained one if inside, else the best of the d
   edges). Its fixed points solve the LCP: the edge/vertex minimizer is the maximum-dissipation law
   (f minimizes f · v_t over the polygon), which is what the β and λ rows express.
3. Classification per contact (``_classify``): p_n basic where p_n > ``normal_tol``·max p_n; sliding
   (|v_t| above ``slip_tol`` of the velocity scale, and f on the polygon's boundary, or no normal impulse):
   λ basic and β_j basic for the direction(s) u_j minimizing u_j·v_t (λ = −min_j u_j·v_t), w_λ nonbasic;
   sticking (or no slip): λ nonbasic (w_λ basic), and if f ≠ 0 the two adjacent directions whose sector
   contains f (f = β_j u_j + β_j+1 u_j+1, both ≥ 0: a representation that keeps M_αα nonsingular;
   the other representations of a sticking f differ by null-space moves of the β's).
4. A nonsingular M_αα (``_nonsingular``): redundant contacts (four coplanar corners, more sticking directions
   than a body pair's relative dofs) make the guessed M_αα singular; an elimination with diagonal pivots in
   priority order (normals by decreasing p_n, sticking β's, each sliding contact's β then its λ, tried as a
   2 × 2 pivot when the β alone depends on the kept ones) drops the dependent candidates.

The guess is only a guess: ``lemke_from_basis`` repairs wrong indices by pivoting and its answer passes
Lemke's final check on the original (M, q) either way. The guess depends only on (M, q) (no history).
Cost: one pass over M's impulse block (reduction), ``sweeps`` passes over G₃'s blocks (≈ 9·nnz/d² work per
sweep) and the elimination on the guessed set: 6–30 ms at n = 1500–3100 with a CSR M (a dense M adds one
O(n²) read, ≈ 15 ms at n = 3100).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse

from convexsim._jit import jit

CRASH_SWEEPS = 200
"""PGS sweeps over the contacts (docs/lcp.md §6, "Crash basis for cold large islands")."""

NORMAL_TOL = 1e-6
"""p_n is guessed basic when p_n > NORMAL_TOL·max p_n."""

SLIP_TOL = 1e-4
"""A contact is guessed sliding when |v_t| > SLIP_TOL·max(‖q‖∞, tiny) (and its friction is saturated)."""

PRINCIPAL_TOL = 1e-7
"""A guessed basic z is dropped when its elimination pivot is ≤ PRINCIPAL_TOL times the magnitude of the terms
it came from (``_principal_subset``): its column of M_αα depends on the ones kept before it."""

SATURATION_TOL = 1e-3
"""Friction is saturated when the polygon gauge of f (1 on the boundary) is ≥ 1 − SATURATION_TOL."""


# ---------------------------------------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------------------------------------

@jit
def _dense_to_csr(M, nrow):
    """CSR arrays (indptr, indices, data) of the first ``nrow`` rows and columns of a dense M (one pass; the
    output arrays grow by doubling)."""
    cap = max(16 * nrow, 16)
    indptr = np.zeros(nrow + 1, np.int64)
    indices = np.empty(cap, np.int64)
    data = np.empty(cap)
    k = 0
    for i in range(nrow):
        if k + nrow > cap:
            cap = max(2 * cap, k + nrow)
            grown_i = np.empty(cap, np.int64)
            grown_d = np.empty(cap)
            grown_i[:k] = indices[:k]
            grown_d[:k] = data[:k]
            indices, data = grown_i, grown_d
        for j in range(nrow):
            v = M[i, j]
            if v != 0.0:
                indices[k] = j
                data[k] = v
                k += 1
        indptr[i + 1] = k
    return indptr, indices[:k].copy(), data[:k].copy()


@jit
def _var_weights(m, d, U):
    """Per impulse variable (normal i, then β (i, j)): its contact and weights on (t1, t2, n), R's columns."""
    nw = m * (d + 1)
    contact = np.empty(nw, np.int64)
    wt = np.zeros((nw, 3))
    for i in range(m):
        contact[i] = i
        wt[i, 2] = 1.0
    s = 2.0 / d if d > 0 else 0.0
    for i in range(m):
        for j in range(d):
            a = m + i * d + j
            contact[a] = i
            wt[a, 0] = s * U[j, 0]
            wt[a, 1] = s * U[j, 1]
    return contact, wt


@jit
def _reduce(indptr, indices, data, q, m, d, U):
    """G₃ = R G Rᵀ as 3 × 3 blocks in block-CSR form (bptr (m+1), bcol, bval (nb, 3, 3)) and q₃ = R q (m, 3).

    G is M's impulse block (rows and columns < m(d+1)); R as in the module docstring."""
    nw = m * (d + 1)
    contact, wt = _var_weights(m, d, U)
    # rows of each contact: its normal row and its d β rows
    rows = np.empty((m, d + 1), np.int64)
    for i in range(m):
        rows[i, 0] = i
        for j in range(d):
            rows[i, 1 + j] = m + i * d + j
    mark = np.full(m, -1, np.int64)
    bptr = np.zeros(m + 1, np.int64)
    for i in range(m):                                  # pass 1: count blocks per block row
        c = 0
        for r in range(d + 1):
            a = rows[i, r]
            for p in range(indptr[a], indptr[a + 1]):
                b = indices[p]
                if b < nw:
                    k = contact[b]
                    if mark[k] != i:
                        mark[k] = i
                        c += 1
        bptr[i + 1] = bptr[i] + c
    nb = bptr[m]
    bcol = np.empty(nb, np.int64)
    bval = np.zeros((nb, 3, 3))
    slot = np.full(m, -1, np.int64)
    mark[:] = -1
    for i in range(m):                                  # pass 2: accumulate w_a[c] · M_ab · w_b[c']
        nxt = bptr[i]
        for r in range(d + 1):
            a = rows[i, r]
            for p in range(indptr[a], indptr[a + 1]):
                b = indices[p]
                if b >= nw:
                    continue
                k = contact[b]
                if mark[k] != i:
                    mark[k] = i
                    slot[k] = nxt
                    bcol[nxt] = k
                    nxt += 1
                s = slot[k]
                v = data[p]
                for c in range(3):
                    wa = wt[a, c]
                    if wa == 0.0:
                        continue
                    for c2 in range(3):
                        bval[s, c, c2] += wa * v * wt[b, c2]
    q3 = np.zeros((m, 3))
    for a in range(nw):
        i = contact[a]
        for c in range(3):
            q3[i, c] += wt[a, c] * q[a]
    return bptr, bcol, bval, q3


@jit
def _polygon_min(W, g, r, U):
    """argmin of ½ fᵀ W f + gᵀ f over the polygon r · conv{u_j} (r ≥ 0, W 2 × 2 symmetric PSD), shape (2,)."""
    d = U.shape[0]
    f = np.zeros(2)
    if r <= 0.0:
        return f
    det = W[0, 0] * W[1, 1] - W[0, 1] * W[1, 0]
    tr = W[0, 0] + W[1, 1]
    if det > 1e-12 * tr * tr:                           # unconstrained minimizer, if inside the polygon
        f0 = -(W[1, 1] * g[0] - W[0, 1] * g[1]) / det
        f1 = -(-W[1, 0] * g[0] + W[0, 0] * g[1]) / det
        inside = True
        cosh = np.cos(np.pi / d)
        for e in range(d):
            ang = 2.0 * np.pi * (e + 0.5) / d
            if f0 * np.cos(ang) + f1 * np.sin(ang) > r * cosh:
                inside = False
                break
        if inside:
            f[0], f[1] = f0, f1
            return f
    best = np.inf
    for e in range(d):                                  # else the best point on the d edges
        a0, a1 = r * U[e, 0], r * U[e, 1]
        e2 = (e + 1) % d
        s0, s1 = r * U[e2, 0] - a0, r * U[e2, 1] - a1
        ga0 = W[0, 0] * a0 + W[0, 1] * a1 + g[0]
        ga1 = W[1, 0] * a0 + W[1, 1] * a1 + g[1]
        num = -(ga0 * s0 + ga1 * s1)
        den = s0 * (W[0, 0] * s0 + W[0, 1] * s1) + s1 * (W[1, 0] * s0 + W[1, 1] * s1)
        t = 0.0
        if den > 0.0:
            t = min(max(num / den, 0.0), 1.0)
        elif num > 0.0:
            t = 1.0
        x0, x1 = a0 + t * s0, a1 + t * s1
        val = (0.5 * (x0 * (W[0, 0] * x0 + W[0, 1] * x1) + x1 * (W[1, 0] * x0 + W[1, 1] * x1))
               + g[0] * x0 + g[1] * x1)
        if val < best:
            best = val
            f[0], f[1] = x0, x1
    return f


@jit
def _contact_velocity(i, bptr, bcol, bval, q3, gamma, y):
    """y = (G₃ γ + q₃)_i, the contact's velocity (v_t1, v_t2, v_n)."""
    for c in range(3):
        y[c] = q3[i, c]
    for s in range(bptr[i], bptr[i + 1]):
        k = bcol[s]
        for c in range(3):
            y[c] += bval[s, c, 0] * gamma[k, 0] + bval[s, c, 1] * gamma[k, 1] + bval[s, c, 2] * gamma[k, 2]


@jit
def _pgs(bptr, bcol, bval, q3, mu, U, sweeps):
    """Projected block Gauss–Seidel on the reduced contact problem; returns γ (m, 3) = (f_t1, f_t2, p_n)."""
    m = q3.shape[0]
    gamma = np.zeros((m, 3))
    diag = np.full(m, -1, np.int64)
    for i in range(m):
        for s in range(bptr[i], bptr[i + 1]):
            if bcol[s] == i:
                diag[i] = s
    y = np.zeros(3)
    W = np.zeros((2, 2))
    g = np.zeros(2)
    for _ in range(sweeps):
        for i in range(m):
            s = diag[i]
            if s < 0 or bval[s, 2, 2] <= 0.0:
                continue
            B = bval[s]
            _contact_velocity(i, bptr, bcol, bval, q3, gamma, y)
            pn = max(0.0, gamma[i, 2] - y[2] / B[2, 2])
            dp = pn - gamma[i, 2]
            gamma[i, 2] = pn
            for c in range(2):
                y[c] += B[c, 2] * dp
            W[0, 0], W[0, 1], W[1, 0], W[1, 1] = B[0, 0], B[0, 1], B[1, 0], B[1, 1]
            g[0] = y[0] - (W[0, 0] * gamma[i, 0] + W[0, 1] * gamma[i, 1])
            g[1] = y[1] - (W[1, 0] * gamma[i, 0] + W[1, 1] * gamma[i, 1])
            f = _polygon_min(W, g, mu[i] * pn, U)
            gamma[i, 0], gamma[i, 1] = f[0], f[1]
    return gamma


@jit
def _classify(bptr, bcol, bval, q3, gamma, mu, U, normal_tol, slip_tol, sat_tol, vscale):
    """The basic z's of the guessed basis (module docstring, step 3), shape (m(d + 2),) bool."""
    m = q3.shape[0]
    d = U.shape[0]
    nw = m * (d + 1)
    basic = np.zeros(m * (d + 2), np.bool_)
    pmax = 0.0
    for i in range(m):
        pmax = max(pmax, gamma[i, 2])
    y = np.zeros(3)
    cosh = np.cos(np.pi / d)
    for i in range(m):
        _contact_velocity(i, bptr, bcol, bval, q3, gamma, y)
        pn = gamma[i, 2]
        normal = pn > normal_tol * pmax and pn > 0.0
        basic[i] = normal
        f0, f1 = gamma[i, 0], gamma[i, 1]
        r = mu[i] * pn
        gauge = 0.0                                     # polygon gauge of f: 1 on the boundary of r·conv{u_j}
        for e in range(d):
            ang = 2.0 * np.pi * (e + 0.5) / d
            gauge = max(gauge, (f0 * np.cos(ang) + f1 * np.sin(ang)) / cosh)
        saturated = (not normal) or gauge >= (1.0 - sat_tol) * r
        vt = np.sqrt(y[0] * y[0] + y[1] * y[1])
        if vt > slip_tol * vscale and saturated:        # sliding: λ = −min_j u_j·v_t > 0
            jmin = 0
            smin = np.inf
            for j in range(d):
                sj = U[j, 0] * y[0] + U[j, 1] * y[1]
                if sj < smin:
                    smin = sj
                    jmin = j
            basic[nw + i] = True
            basic[m + i * d + jmin] = True
            if normal:                                  # f on an edge (not at the vertex): both ends
                jn = -1
                for jj in ((jmin + 1) % d, (jmin + d - 1) % d):
                    sj = U[jj, 0] * y[0] + U[jj, 1] * y[1]
                    if sj - smin <= 1e-3 * vt:
                        jn = jj
                if jn >= 0:
                    basic[m + i * d + jn] = True
        elif normal and f0 * f0 + f1 * f1 > (normal_tol * r) ** 2 and r > 0.0:   # sticking: f's sector
            ang = np.arctan2(f1, f0)
            if ang < 0.0:
                ang += 2.0 * np.pi
            j = int(np.floor(ang / (2.0 * np.pi / d))) % d
            basic[m + i * d + j] = True
            basic[m + i * d + (j + 1) % d] = True
    return basic


@jit
def _eliminate(A, S, t, w, k, rows, cols):
    """Eliminate the w (1 or 2) pivot rows/columns t..t+w−1 from the trailing rows and columns ≥ t + w of
    A (in place), tracking the magnitudes of the terms in S."""
    e = t + w
    a, b, c, dd = A[t, t], 0.0, 0.0, 1.0
    if w == 2:
        b, c, dd = A[t, t + 1], A[t + 1, t], A[t + 1, t + 1]
    det = a * dd - b * c
    nr = 0
    nc = 0
    for u in range(e, k):
        if A[u, t] != 0.0 or (w == 2 and A[u, t + 1] != 0.0):
            rows[nr] = u
            nr += 1
        if A[t, u] != 0.0 or (w == 2 and A[t + 1, u] != 0.0):
            cols[nc] = u
            nc += 1
    for x in range(nr):
        u = rows[x]
        if w == 1:
            f0, f1 = A[u, t] / a, 0.0
        else:                                           # [f0 f1] = A[u, t:t+2] · P⁻¹
            f0 = (A[u, t] * dd - A[u, t + 1] * c) / det
            f1 = (-A[u, t] * b + A[u, t + 1] * a) / det
        for y in range(nc):
            v = cols[y]
            upd = f0 * A[t, v]
            mag = abs(f0 * A[t, v])
            if w == 2:
                upd += f1 * A[t + 1, v]
                mag += abs(f1 * A[t + 1, v])
            A[u, v] -= upd
            S[u, v] += mag


@jit
def _principal_subset(indptr, indices, data, cand, partner, tol):
    """The candidates (indices into M, in priority order) whose principal submatrix M_αα is nonsingular,
    chosen greedily: Gaussian elimination on M restricted to the candidates with diagonal pivots in the given
    order, skipping a candidate whose pivot is ≤ tol times the magnitude of the terms it was computed from
    (cancellation: its row and column depend on the kept ones). A candidate flagged ``partner`` (a λ after
    its contact's β) whose predecessor failed is tried with it as a 2 × 2 pivot block (λ's diagonal is 0 and
    a sliding contact's β column may depend on the kept ones, yet the pair's block [[G_jj, 1], [−1, 0]] is
    nonsingular). Returns a bool mask over cand."""
    k = cand.shape[0]
    n = indptr.shape[0] - 1
    pos = np.full(n, -1, np.int64)
    for t in range(k):
        pos[cand[t]] = t
    A = np.zeros((k, k))
    S = np.zeros((k, k))
    for t in range(k):
        i = cand[t]
        for p in range(indptr[i], indptr[i + 1]):
            u = pos[indices[p]]
            if u >= 0:
                A[t, u] = data[p]
                S[t, u] = abs(data[p])
    keep = np.zeros(k, np.bool_)
    rows = np.empty(k, np.int64)
    cols = np.empty(k, np.int64)
    t = 0
    while t < k:
        piv = A[t, t]
        if abs(piv) > tol * S[t, t] and abs(piv) > 0.0:
            keep[t] = True
            _eliminate(A, S, t, 1, k, rows, cols)
            t += 1
            continue
        if t + 1 < k and partner[t + 1]:
            det = A[t, t] * A[t + 1, t + 1] - A[t, t + 1] * A[t + 1, t]
            mag = S[t, t] * S[t + 1, t + 1] + S[t, t + 1] * S[t + 1, t]
            if abs(det) > tol * mag and abs(det) > 0.0:
                keep[t] = True
                keep[t + 1] = True
                _eliminate(A, S, t, 2, k, rows, cols)
                t += 2
                continue
        t += 1
    return keep


# ---------------------------------------------------------------------------------------------------------
# Python entry
# ---------------------------------------------------------------------------------------------------------

def _csr_arrays(M, nrow: int):
    """(indptr, indices, data) of M (dense ndarray or scipy.sparse) as int64/float64 CSR arrays (a dense M's
    first ``nrow`` rows and columns: all of them here)."""
    if scipy.sparse.issparse(M):
        A = scipy.sparse.csr_matrix(M)
        return (np.ascontiguousarray(A.indptr, np.int64), np.ascontiguousarray(A.indices, np.int64),
                np.ascontiguousarray(A.data, np.float64))
    return _dense_to_csr(np.ascontiguousarray(M, dtype=np.float64), nrow)


def _friction_coefficients(M, m: int, d: int) -> np.ndarray:
    """μ_i = M[m(d+1) + i, i] (the λ rows' normal entries), shape (m,)."""
    rows = m * (d + 1) + np.arange(m)
    if scipy.sparse.issparse(M):
        return np.asarray(scipy.sparse.csr_matrix(M)[rows, np.arange(m)]).ravel().astype(float)
    return np.asarray(M, float)[rows, np.arange(m)].copy()


def _reduced(csr, M, q, m: int, d: int):
    """(bptr, bcol, bval, q₃, μ, U): G₃ in block CSR, q₃, the friction coefficients and directions."""
    U = _directions(d)
    bptr, bcol, bval, q3 = _reduce(*csr, q, m, d, U)
    mu = _friction_coefficients(M, m, d) if d else np.zeros(m)
    return bptr, bcol, bval, q3, mu, (U if d else np.zeros((1, 2)))


def contact_state(M, q, num_contacts: int, num_directions: int, *, sweeps: int = CRASH_SWEEPS):
    """The PGS estimate of the contact impulses and velocities (module docstring, steps 1–2).

    Returns:
        (gamma, velocity): γ = (f_t1, f_t2, p_n) [N·s] and (v_t1, v_t2, v_n) = G₃γ + q₃ [m/s], shape (m, 3)
        each, in the tangent basis of the LCP's directions u_j.
    """
    m, d = int(num_contacts), int(num_directions)
    q = np.ascontiguousarray(q, dtype=np.float64)
    bptr, bcol, bval, q3, mu, U = _reduced(_csr_arrays(M, q.shape[0]), M, q, m, d)
    gamma = _pgs(bptr, bcol, bval, q3, mu, U, int(sweeps))
    return gamma, _velocities(bptr, bcol, bval, q3, gamma)


@jit
def _velocities(bptr, bcol, bval, q3, gamma):
    """G₃γ + q₃, shape (m, 3)."""
    m = q3.shape[0]
    vel = np.empty((m, 3))
    y = np.zeros(3)
    for i in range(m):
        _contact_velocity(i, bptr, bcol, bval, q3, gamma, y)
        vel[i] = y
    return vel


def _directions(d: int) -> np.ndarray:
    """u_j = (cos 2πj/d, sin 2πj/d), shape (d, 2) (the contact LCP's friction directions)."""
    a = 2.0 * np.pi * np.arange(d) / max(d, 1)
    return np.ascontiguousarray(np.stack([np.cos(a), np.sin(a)], axis=1))


def crash_guess(M, q, num_contacts: int, num_directions: int, *, sweeps: int = CRASH_SWEEPS,
                normal_tol: float = NORMAL_TOL, slip_tol: float = SLIP_TOL,
                saturation_tol: float = SATURATION_TOL) -> np.ndarray:
    """Guess of the basic z's of the contact LCP(M, q) from the LCP alone (module docstring), for
    ``lemke_from_basis``.

    Args:
        M: the contact LCP's matrix, dense ndarray or scipy.sparse, shape (n, n), n = m(d + 2) (m if d = 0).
        q: shape (n,).
        num_contacts, num_directions: m and d (d = 0: frictionless, z = p_n; else d ≥ 3 uniform directions).
        sweeps: PGS sweeps; normal_tol, slip_tol, saturation_tol: the classification thresholds
            (``NORMAL_TOL``, ``SLIP_TOL``, ``SATURATION_TOL``).

    Returns:
        bool mask of the guessed basic z's, shape (n,).
    """
    m, d = int(num_contacts), int(num_directions)
    q = np.ascontiguousarray(q, dtype=np.float64)
    n = q.shape[0]
    if n != (m * (d + 2) if d else m):
        raise ValueError(f"crash_guess: q has {n} entries; m = {m} contacts with d = {d} directions need "
                         f"{m * (d + 2) if d else m}")
    if m == 0:
        return np.zeros(n, bool)
    csr = _csr_arrays(M, n)
    bptr, bcol, bval, q3, mu, U = _reduced(csr, M, q, m, d)
    gamma = _pgs(bptr, bcol, bval, q3, mu, U, int(sweeps))
    if not d:
        pmax = float(gamma[:, 2].max())
        guess = (gamma[:, 2] > normal_tol * pmax) & (gamma[:, 2] > 0.0)
    else:
        vscale = max(float(np.abs(q).max()), 1e-300)
        guess = _classify(bptr, bcol, bval, q3, gamma, mu, U, float(normal_tol), float(slip_tol),
                          float(saturation_tol), vscale)
    return _nonsingular(guess, csr, gamma[:, 2], m, d)


def _nonsingular(guess: np.ndarray, csr, pn: np.ndarray, m: int, d: int) -> np.ndarray:
    """The guess reduced to a subset whose M_αα is nonsingular (``_principal_subset``), in the priority order:
    normal impulses (largest p_n first), the friction directions of contacts without a basic λ (sticking),
    then per contact with a basic λ (sliding or separating) its β's followed by λ (2 × 2 partner of the last
    β); contacts by decreasing p_n within each group. Redundant contacts (a fourth coplanar corner, more sticking
    contacts than a body pair's relative dofs) thus keep their largest impulses."""
    n = guess.shape[0]
    if d:
        contact = np.concatenate([np.arange(m), np.repeat(np.arange(m), d), np.arange(m)])
        sliding = guess[m * (d + 1):]
        group = np.concatenate([np.zeros(m), np.where(sliding[np.repeat(np.arange(m), d)], 2.0, 1.0),
                                np.full(m, 2.0)])
        within = np.concatenate([np.zeros(m), np.zeros(m * d), np.ones(m)])   # λ after its contact's β's
    else:
        contact, group, within = np.arange(m), np.zeros(m), np.zeros(m)
    cand = np.flatnonzero(guess)
    order = np.lexsort((cand, within[cand], contact[cand], -pn[contact[cand]], group[cand]))
    cand = np.ascontiguousarray(cand[order], np.int64)
    partner = np.zeros(cand.size, bool)
    if d:
        partner[1:] = (cand[1:] >= m * (d + 1)) & (contact[cand[:-1]] == contact[cand[1:]])
    keep = _principal_subset(*csr, cand, partner, PRINCIPAL_TOL)
    out = np.zeros(n, bool)
    out[cand[keep]] = True
    return out


__all__ = ["crash_guess", "contact_state", "CRASH_SWEEPS"]
