"""Stage: the bookkeeping after a solve (SAP Newton or Lemke), one home for every step.

* the contacts' impulses γ (nc, 3) in their frames [N·s] and world forces f = R_WC γ / dt [N]
  (:func:`world_forces`);
* the new velocities v⁺ of the cliques scattered back over the full v = (free bodies | trees), v* where no
  constraint acted (:func:`scatter_cliques`);
* whether an unconverged SAP solve fails the step (:func:`solve_failed`: strict, or v⁺ not finite);
* the joint rows' forces [N·m or N] (γ/dt on their joint): SAP (:func:`sap_joint_forces`) and LCP
  (:func:`lcp_joint_forces`, :func:`actuator_forces`), and the LCP's contact impulses from z
  (:func:`lcp_contact_impulses`).
"""

from __future__ import annotations

import math

from convexsim._jit import jit
from convexsim.sap.joint_constraints import KIND_LIMIT, KIND_PD
from convexsim.sap.newton import SAP_CONVERGED

ROW_LIMIT = 0
"""An LCP joint row of a limit side (``lcp_rows.joint_rows``)."""
ROW_COUPLER = 1
"""An LCP joint row of a joint coupler's bilateral pair (``lcp_rows.joint_rows``)."""


@jit(inline="always")
def world_forces(R_WC, gamma, dt, force):
    """force[c] = R_WC[c] γ[c] / dt [N] for every contact (written)."""
    for c in range(gamma.shape[0]):
        for i in range(3):
            force[c, i] = (R_WC[c, i, 0] * gamma[c, 0] + R_WC[c, i, 1] * gamma[c, 1]
                           + R_WC[c, i, 2] * gamma[c, 2]) / dt


@jit(inline="always")
def contact_impulses(R_WC, gamma_all, dt, gamma, force):
    """The contacts' rows of a solve's impulses γ (the first nc rows of gamma_all) into gamma (nc, 3), and
    their world forces (:func:`world_forces`)."""
    for c in range(gamma.shape[0]):
        for i in range(3):
            gamma[c, i] = gamma_all[c, i]
    world_forces(R_WC, gamma, dt, force)


@jit(inline="always")
def scatter_cliques(new_index, size_all, start_all, cstart, v_red, v_next):
    """v_next[start_all[m]:+size_all[m]] ← the solved velocities of participating clique m (v_red at
    cstart[new_index[m]]); the others keep what v_next holds (v*)."""
    for m in range(new_index.shape[0]):
        k = new_index[m]
        if k < 0:
            continue
        for i in range(size_all[m]):
            v_next[start_all[m] + i] = v_red[cstart[k] + i]


@jit(inline="always")
def solve_failed(status, v_next, strict):
    """Whether a SAP solve that ended with ``status`` fails the step: not converged, and strict (nonzero) or v⁺
    not finite (an unconverged finite answer is kept with a warning)."""
    if status == SAP_CONVERGED:
        return False
    finite = True
    for i in range(v_next.shape[0]):
        if not math.isfinite(v_next[i]):
            finite = False
    return strict != 0 or not finite


@jit(inline="always")
def sap_joint_forces(gamma_all, nc, nr, row_kind, row_owner, row_J, njr, jr_index, dt, act_force, lim_force,
                     con_force):
    """The joint rows' forces from the solve's impulses (rows nc.. of gamma_all): an actuator's γ/dt, a limit
    side's ±γ/dt summed per limit, a joint coupler's γ/dt (written into act_force, lim_force, con_force)."""
    for r in range(nr):
        g = gamma_all[nc + r, 0]
        if row_kind[r] == KIND_PD:
            act_force[row_owner[r]] = g / dt
        elif row_kind[r] == KIND_LIMIT:
            d = 0
            for j in range(row_J.shape[1]):
                if row_J[r, j] != 0.0:
                    d = j
            lim_force[row_owner[r]] += row_J[r, d] * g / dt
    for r in range(njr):
        con_force[jr_index[r]] = gamma_all[nc + nr + r, 0] / dt


@jit(inline="always")
def lcp_contact_impulses(z, nc, m, d, U, gamma):
    """The contacts' impulses of an LCP solution z with m normal rows (the first nc are contacts) and d
    friction directions U (d, 2) per contact: γ_n = z_c, γ_t = Σ_j β_cj U_j (gamma (nc, 3), zeros on entry)."""
    for c in range(nc):
        gamma[c, 2] = z[c]
        for j in range(d):
            beta = z[m + c * d + j]
            gamma[c, 0] += beta * U[j, 0]
            gamma[c, 1] += beta * U[j, 1]


@jit(inline="always")
def lcp_joint_forces(z, nc, nl, row_type, row_owner, row_sign, dt, lim_force, con_force):
    """The LCP joint rows' forces ±z/dt, summed per limit or coupler (``lcp_rows.joint_rows``)."""
    for r in range(nl):
        p = z[nc + r]
        if row_type[r] == ROW_LIMIT:
            lim_force[row_owner[r]] += row_sign[r] * p / dt
        else:
            con_force[row_owner[r]] += row_sign[r] * p / dt


@jit(inline="always")
def actuator_forces(act_dof, nmov, act_c, act_f0, act_sat, act_saturated, v_next, act_force):
    """An implicit PD actuator's force f₀ − c·v⁺_d, or its saturated ±effort (``lcp_rows.fold_pd``)."""
    for a in range(act_force.shape[0]):
        if act_saturated[a]:
            act_force[a] = act_sat[a]
        else:
            act_force[a] = act_f0[a] - act_c[a] * v_next[6 * nmov + act_dof[a]]


__all__ = ["ROW_LIMIT", "ROW_COUPLER", "world_forces", "contact_impulses", "scatter_cliques", "solve_failed",
           "sap_joint_forces", "lcp_contact_impulses", "lcp_joint_forces", "actuator_forces"]
