"""The dense contact-LCP assembly kernel of small islands, shared by the reference LCP step
(``lcp_stepper.build_contact_lcp``) and the compiled one (``lcp_compiled_kernels``): one kernel, so the two
paths build the same (M, q) bit for bit."""

from __future__ import annotations

import numpy as np

from convexsim._jit import jit


@jit
def _shares_body(body, a, b):
    """Whether columns a and b of W may touch a common body (``body``: up to two body indices per column,
    −1 none, −2 in the first slot: any body)."""
    if body[a, 0] == -2 or body[b, 0] == -2:
        return True
    for i in range(2):
        x = body[a, i]
        if x >= 0 and (x == body[b, 0] or x == body[b, 1]):
            return True
    return False


@jit
def assemble_dense(Ainv, v_star, J, bias, mu, U, d):
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
    # bodies (6-dof blocks of W's rows) of each column. When A⁻¹ is block diagonal by 6 × 6 (free bodies), a
    # pair of columns on disjoint bodies has an exact zero in M (A⁻¹W is +0.0 on the other bodies' rows, so
    # both sums below would be +0.0), which M already holds: skipped. Otherwise (trees: A⁻¹ couples dofs)
    # every pair is computed.
    blockdiag = True
    for i in range(nv):
        for k in range(nv):
            if i // 6 != k // 6 and Ainv[i, k] != 0.0:
                blockdiag = False
    body = -np.ones((nw, 2), np.int64)
    for a in range(nw):
        for i in range(count[a]):
            k = rows[a, i] // 6
            if not blockdiag:
                body[a, 0] = -2
            elif body[a, 0] == -2:
                pass
            elif body[a, 0] < 0 or body[a, 0] == k:
                body[a, 0] = k
            elif body[a, 1] < 0 or body[a, 1] == k:
                body[a, 1] = k
            else:
                body[a, 0] = -2                        # a third body: pair it with every column
    for a in range(nw):
        for b in range(a, nw):
            if not (_shares_body(body, a, b)):
                continue
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
