"""The dense contact-LCP assembly kernel of small islands, shared by the reference LCP step
(``lcp_stepper.build_contact_lcp``) and the compiled one (``lcp_compiled_kernels``): one kernel, so the two
paths build the same (M, q) bit for bit."""

from __future__ import annotations

import numpy as np

from convexsim._jit import jit


@jit
def _assemble_dense(Ainv, v_star, J, bias, mu, U, d):
    """(M, q, W, A⁻¹W) of ``build_contact_lcp`` by dense products: W = [J_nᵀ D], A⁻¹W, M's impulse block
    Wᵀ A⁻¹ W symmetrized, E, −Eᵀ and μ; q = Wᵀ v* (+ b on the normal rows)."""
    m = J.shape[0]
    nv = J.shape[2]
    nw = m * (d + 1)
    nz = m * (d + 2) if d else m
    W = np.zeros((nv, nw))
    for c in range(m):
        for k in range(nv):
            W[k, c] = J[c, 2, k]
            for j in range(d):
                W[k, m + c * d + j] = J[c, 0, k] * U[j, 0] + J[c, 1, k] * U[j, 1]
    AinvW = np.zeros((nv, nw))
    for i in range(nv):
        for k in range(nv):
            a = Ainv[i, k]
            if a != 0.0:
                for col in range(nw):
                    AinvW[i, col] += a * W[k, col]
    M = np.zeros((nz, nz))
    q = np.zeros(nz)
    rows = np.zeros((nw, nv), np.int64)                    # W's nonzero rows per column (≤ 12 for a contact)
    count = np.zeros(nw, np.int64)
    for a in range(nw):
        for k in range(nv):
            if W[k, a] != 0.0:
                rows[a, count[a]] = k
                count[a] += 1
    for a in range(nw):
        for b in range(a, nw):
            s = 0.0
            for i in range(count[a]):
                k = rows[a, i]
                s += W[k, a] * AinvW[k, b]
            t = 0.0
            for i in range(count[b]):
                k = rows[b, i]
                t += W[k, b] * AinvW[k, a]
            v = 0.5 * (s + t)
            M[a, b] = v
            M[b, a] = v
        s = 0.0
        for k in range(nv):
            s += W[k, a] * v_star[k]
        q[a] = s
    for c in range(m):
        q[c] += bias[c]
    if d:
        for c in range(m):
            for j in range(d):
                r = m + c * d + j
                M[r, nw + c] = 1.0
                M[nw + c, r] = -1.0
            M[nw + c, c] = mu[c]
    return M, q, W, AinvW
