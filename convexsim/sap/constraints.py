"""Per-constraint dispatch: impulses γ, costs ℓ and Hessian blocks G for all constraints at once.

Every constraint i has a kind code ``kind[i]`` (values of :class:`convexsim.model.ContactModel`) and a row of
kernel parameters ``cpar[i, :8]`` computed once per step:

* SAP (0):              (μ, Rt, Rn, v̂t1, v̂t2, v̂n, 0, 0)           see friction_cone.py
* LAGGED (1) / SIMILAR (2): (μ, dt, k, d, fe0, n0, εs, v̂)           see hunt_crossley.py
* joint rows (limit 10, coupler 11, PD 12, holonomic 13; codes ≥ :data:`KIND_ROW_MIN`):
  (R, v̂, γ_lo, γ_hi, 0, 0, 0, 0), see joint_constraints.py. A row is a constraint whose Jacobian
  block has the row's J in its first row and zeros in the other two, so vc = (J v, 0, 0),
  γ = (γ_row, 0, 0) and G = diag(G_row, 0, 0): the Newton loop, Hessian assembly and line searches
  treat contacts and scalar rows alike.

The batch kernels loop over constraints (O(nk)); the ray kernel is what the exact line search calls.
"""

from __future__ import annotations

import numpy as np

from convexsim._jit import jit
from convexsim.sap.friction_cone import (cone_hessian, cone_impulse_and_cost, stiction_linearization,
                                         stiction_predicted)
from convexsim.sap.hunt_crossley import hc_hessian, hc_impulse_and_cost
from convexsim.sap.joint_constraints import KIND_LIMIT, row_impulse_cost

KIND_SAP = 0
KIND_LAGGED = 1
KIND_SIMILAR = 2
KIND_ROW_MIN = KIND_LIMIT
"""Kind codes from here up are scalar joint rows (convexsim.sap.joint_constraints)."""
NPAR = 8
"""Number of kernel parameters per constraint (columns of ``cpar``)."""


@jit
def impulse_and_cost(kind, p, vc0, vc1, vc2, gamma_out):
    """γ of one constraint into gamma_out (3,); returns ℓ."""
    if kind == KIND_SAP:
        cost, region = cone_impulse_and_cost(p[0], p[1], p[2], p[3], p[4], p[5], vc0, vc1, vc2, gamma_out)
        return cost
    if kind >= KIND_ROW_MIN:
        g, cost, _ = row_impulse_cost(p[0], p[1], p[2], p[3], vc0)
        gamma_out[0] = g
        gamma_out[1] = 0.0
        gamma_out[2] = 0.0
        return cost
    return hc_impulse_and_cost(
        kind == KIND_SIMILAR, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], vc0, vc1, vc2, gamma_out
    )


@jit
def hessian_block(kind, p, vc0, vc1, vc2, G_out, kappa=0.0):
    """G = −∂γ/∂vc of one constraint into G_out (3, 3); kappa > 0: the slip-curvature Newton matrix."""
    if kind == KIND_SAP:
        cone_hessian(p[0], p[1], p[2], p[3], p[4], p[5], vc0, vc1, vc2, G_out, kappa)
    elif kind >= KIND_ROW_MIN:
        G_out[:, :] = 0.0
        G_out[0, 0] = row_impulse_cost(p[0], p[1], p[2], p[3], vc0)[2]
    else:
        hc_hessian(kind == KIND_SIMILAR, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], vc0, vc1, vc2, G_out,
                   kappa)


@jit
def eval_constraints(kind, cpar, vc, gamma_out, G_out, with_hessian, kappa=0.0):
    """Impulses (and optionally Hessian blocks) of all constraints; returns Σ ℓ_i.

    Args:
        kind: (nk,) int64. cpar: (nk, 8). vc: (nk, 3) [m/s].
        gamma_out: (nk, 3) [N·s], written. G_out: (nk, 3, 3), written if ``with_hessian``.
        kappa: slip curvature κ ≥ 0 of the blocks written to G_out (0: the exact −∂γ/∂vc; docs/sap.md).
    """
    total = 0.0
    for i in range(kind.shape[0]):
        total += impulse_and_cost(kind[i], cpar[i], vc[i, 0], vc[i, 1], vc[i, 2], gamma_out[i])
        if with_hessian:
            hessian_block(kind[i], cpar[i], vc[i, 0], vc[i, 1], vc[i, 2], G_out[i], kappa)
    return total


@jit
def relinearize_predicted_stiction(kind, cpar, vc, dvc, gamma, G):
    """Where the full step dvc would bring a sliding "sap" contact into stiction or reverse its slip
    (``friction_cone.stiction_predicted``), overwrite its γ_i and G_i (at vc) by the stiction branch's
    linear model (``friction_cone.stiction_linearization``); other constraints keep theirs. Returns how many
    were changed. O(nk)."""
    n = 0
    for i in range(kind.shape[0]):
        if kind[i] != KIND_SAP:
            continue
        p = cpar[i]
        if stiction_predicted(p[0], p[1], p[2], p[3], p[4], p[5], vc[i, 0], vc[i, 1], vc[i, 2], dvc[i, 0],
                              dvc[i, 1], dvc[i, 2]):
            stiction_linearization(p[1], p[2], p[3], p[4], p[5], vc[i, 0], vc[i, 1], vc[i, 2], gamma[i], G[i])
            n += 1
    return n


@jit
def _along_ray(vc, dvc, i, alpha):
    """Constraint i's velocity vc_i + α dvc_i [m/s] along the search ray."""
    return vc[i, 0] + alpha * dvc[i, 0], vc[i, 1] + alpha * dvc[i, 1], vc[i, 2] + alpha * dvc[i, 2]


@jit
def eval_along_ray(kind, cpar, vc, dvc, alpha, work):
    """Constraint part of the cost along v + α dv: (ℓ_R(α), dℓ_R/dα, d²ℓ_R/dα²).

    ℓ_R(α) = Σ ℓ_i(vc_i + α dvc_i),  dℓ_R/dα = −Σ dvc_iᵀ γ_i,  d²ℓ_R/dα² = Σ dvc_iᵀ G_i dvc_i.  O(nk).
    ``work`` (>= 12,): one constraint's γ (its first 3) and G (the next 9), so that an evaluation allocates nothing.
    """
    gamma = work[:3]
    G = work[3:12].reshape(3, 3)
    ell = 0.0
    d1 = 0.0
    d2 = 0.0
    for i in range(kind.shape[0]):
        a0, a1, a2 = _along_ray(vc, dvc, i, alpha)
        ell += impulse_and_cost(kind[i], cpar[i], a0, a1, a2, gamma)
        hessian_block(kind[i], cpar[i], a0, a1, a2, G)
        for r in range(3):
            d1 -= dvc[i, r] * gamma[r]
            for c in range(3):
                d2 += dvc[i, r] * G[r, c] * dvc[i, c]
    return ell, d1, d2


@jit
def cost_along_ray(kind, cpar, vc, dvc, alpha, work):
    """ℓ_R(α) and dℓ_R/dα only (no Hessian blocks), for the backtracking line search; ``work`` (>= 3,): one
    constraint's γ."""
    gamma = work[:3]
    ell = 0.0
    d1 = 0.0
    for i in range(kind.shape[0]):
        a0, a1, a2 = _along_ray(vc, dvc, i, alpha)
        ell += impulse_and_cost(kind[i], cpar[i], a0, a1, a2, gamma)
        for r in range(3):
            d1 -= dvc[i, r] * gamma[r]
    return ell, d1


def constraint_impulse(kind: int, par, vc, kappa: float = 0.0) -> tuple[float, np.ndarray, np.ndarray]:
    """Python convenience for tests: (ℓ, γ (3,), G (3,3)) of one constraint with kernel parameters ``par``
    (G with slip curvature ``kappa``; 0: exact)."""
    par = np.ascontiguousarray(par, dtype=float)
    kinds = np.array([kind], dtype=np.int64)
    gamma = np.empty((1, 3))
    G = np.empty((1, 3, 3))
    vc = np.ascontiguousarray(vc, dtype=float).reshape(1, 3)
    ell = eval_constraints(kinds, par.reshape(1, NPAR), vc, gamma, G, True, float(kappa))
    return ell, gamma[0], G[0]
