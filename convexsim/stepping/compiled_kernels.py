"""The whole SAP step of a free-body model as numba code (the compiled path of ``convexsim.stepping``).

Two calls, :func:`step_prepare` (stages 1–4) and :func:`step_finish` (stages 5–6), do what
``sap_stepper.sap_step`` does with numpy and Python objects, in the same order and with the same kernels wherever
the reference path has one:

1. finite start state, per-body margin shares (``contacts.contact_margin``),
2. world poses, broad phase (``sweep_and_prune_pairs``), pairs sorted by (A, B), narrow phase
   (``narrow_phase``), the per-pair reach filter (``contacts.pair_reach``),
3. contact frames, Jacobian blocks, combined material parameters (``contacts.combined_parameters``),
4. free motion v*, the SAP problem of the participating cliques in the flat block layout of
   ``sap.ContactProblem``, Delassus estimate (``blocks.delassus_estimate``), kernel parameters
   (``friction_cone.regularization``, ``hunt_crossley.hc_kernel_parameters``),
5. Newton with the stopping rules of ``sap.solver`` (``constraints.eval_constraints``, the exact or
   backtracking line search of ``sap.linesearch``), the Hessian assembled by
   ``blocks.assemble_hessian_blocks`` and factored by a dense Cholesky per island (connected component
   of the contact graph),
6. symplectic Euler (``dynamics.integrate``) and a finite check of the new state.

An island larger than ``ipar[I_ISLAND_MAX_DOFS]`` dofs is not factored by the dense Cholesky: the run loop
returns STEP_TOO_LARGE before taking that step, and the caller takes it with :func:`step_finish` on the
supernodal Cholesky of ``sap.supernodal``, from a symbolic analysis made in Python between the two calls
(``stepping.compiled``).
So does a step whose margin shares are not finite (STEP_BAD_MARGIN, e.g. |g| overflowing): the reference
step then raises its ValueError.

:func:`run_kernel` advances many steps per call and records frames into preallocated buffers. There is no
separately compiled one-step kernel: numba emits the machine code of a kernel's whole call tree into every
kernel compiled on its own, so each extra entry point repeats the cost of compiling the step (≈ 7 s of a
first run's CPU); a single step is the two calls above.

The stages' kernels live in the modules that own their math: margins, collision and the pair-reach filter in
``stepping.contacts``; contact frames, Jacobian blocks, free motion and integration in ``dynamics``; the Newton
loop and the settings' slots (``fpar``, ``ipar``: F_* / I_*) in ``sap.newton``. This module composes them
(:func:`step_prepare`, :func:`step_finish`) and runs many steps per call (:func:`run_kernel`; :func:`record_frame` and :func:`count_step` are shared with ``tree_kernels.tree_run_kernel``).
"""

from __future__ import annotations

import math

import numpy as np

from convexsim._jit import jit
from convexsim.dynamics import contact_frame, free_motion_kernel, integrate_kernel, jacobian_block
from convexsim.sap import blocks
from convexsim.sap.constraints import KIND_SAP, NPAR
from convexsim.sap.friction_cone import regularization
from convexsim.sap.hunt_crossley import hc_kernel_parameters
from convexsim.sap.newton import (F_BETA, F_DT, F_SIGMA, F_VS, I_CONTACT_KIND, I_ISLAND_MAX_DOFS, I_STRICT,
                                  SAP_CONVERGED, clique_graph, islands, newton_solve, no_supernodal)
from convexsim.stepping.contacts import collide_and_filter, margin_shares

# ---- step status codes
STEP_OK = 0
STEP_NONFINITE_START = 1
STEP_NONFINITE_END = 2
STEP_TOO_LARGE = 3
STEP_SOLVER_FAILED = 4     # not converged and strict, or not converged with a non-finite v
STEP_BAD_MARGIN = 5        # a margin share is not finite (the reference path raises its ValueError)
STEP_STATUS_NAMES = ("ok", "non-finite start state", "non-finite end state",
                     "an island above the dense limit (compiled.ISLAND_MAX_DOFS)", "solver failed",
                     "a margin share is not finite")
# ---- extra run_kernel codes
RUN_DONE = 0
RUN_NEED_CONTACT_SPACE = 10
RUN_CHUNK_END = 11





@jit
def _finite_body(q, v, b):
    for i in range(q.shape[1]):
        if not math.isfinite(q[b, i]):
            return False
    for i in range(v.shape[1]):
        if not math.isfinite(v[b, i]):
            return False
    return True


@jit
def first_nonfinite_body(q, v):
    for b in range(q.shape[0]):
        if not _finite_body(q, v, b):
            return b
    return -1






























@jit
def contact_parameters(fpar, ipar, geoms, phi, w, vn0, geom_k, geom_mu, geom_tau, geom_d):
    """(kind (nc,), cpar (nc, NPAR)) of the contacts: combined materials (``contacts.combined_parameters``)
    and the contact model's kernel parameters (``friction_cone.regularization`` for SAP with the Delassus
    estimate w [1/kg], ``hunt_crossley.hc_kernel_parameters`` with the normal velocities vn0 [m/s] at v0)."""
    dt = fpar[F_DT]
    nc = phi.shape[0]
    kind_code = ipar[I_CONTACT_KIND]
    kind = np.full(nc, kind_code, np.int64)
    cpar = np.zeros((nc, NPAR))
    k_arr = np.empty(nc)
    mu_arr = np.empty(nc)
    tau_arr = np.empty(nc)
    d_arr = np.empty(nc)
    for c in range(nc):
        ga = geoms[c, 0]
        gb = geoms[c, 1]
        ka = geom_k[ga]
        kb = geom_k[gb]
        ksum = ka + kb
        musum = geom_mu[ga] + geom_mu[gb]
        k_arr[c] = ka * kb / ksum if ksum > 0 else 0.0
        d_arr[c] = (kb * geom_d[ga] + ka * geom_d[gb]) / ksum if ksum > 0 else 0.0
        mu_arr[c] = 2 * geom_mu[ga] * geom_mu[gb] / musum if musum > 0 else 0.0
        tau_arr[c] = geom_tau[ga] + geom_tau[gb]
    if kind_code == KIND_SAP:
        for c in range(nc):
            Rt, Rn, vn_hat = regularization(dt, k_arr[c], tau_arr[c], w[c], fpar[F_BETA], fpar[F_SIGMA],
                                            phi[c])
            cpar[c, 0] = mu_arr[c]
            cpar[c, 1] = Rt
            cpar[c, 2] = Rn
            cpar[c, 5] = vn_hat
    else:
        fe0 = np.empty(nc)
        for c in range(nc):
            fe0[c] = -k_arr[c] * phi[c]
        hc_kernel_parameters(dt, k_arr, d_arr, mu_arr, fe0, vn0, fpar[F_SIGMA], w, fpar[F_VS], cpar)
    return kind, cpar


@jit
def no_prepared(status, bad, nmov):
    """What :func:`step_prepare` returns for a step that stops before collision."""
    e0 = np.zeros(0)
    ei = np.zeros(0, np.int64)
    e2 = np.zeros((0, 2), np.int64)
    e3 = np.zeros((0, 3))
    prep = (e2, e0, e3, e3, np.zeros((0, 3, 3)), np.zeros(6 * nmov), -np.ones(nmov, np.int64), ei, ei, ei, e0,
            e0, e2, e2, e0, ei, np.zeros((0, NPAR)), e0, e2, ei)
    return status, bad, 0, prep


@jit
def step_prepare(fpar, ipar, gravity, fixed, body_dof, moving, mass, inertia, body_rb, geom_type, geom_size,
                 geom_body, geom_pos, geom_quat, geom_rho, geom_k, geom_mu, geom_tau, geom_d, q, v):
    """Stages 1–4 of a step (module docstring): everything before Newton.

    Returns (status, bad_body, largest island in dofs, prepared) with status STEP_OK, STEP_NONFINITE_START
    or STEP_BAD_MARGIN, and prepared = (geoms, phi, point, normal, R_WC, v_star (6 nmov), new_index (nmov),
    clique_start, clique_sizes, A_ptr, A_values, v_star of the cliques, cliques (nc, 2), J_ptr, J_values,
    kind, cpar, v0 of the cliques, edges (ne, 2), constraint_edge) — the participating problem in the flat
    layout of ``sap.ContactProblem`` and its clique graph, as :func:`step_finish` takes it."""
    nmov = moving.shape[0]
    bad = first_nonfinite_body(q, v)
    if bad >= 0:
        return no_prepared(STEP_NONFINITE_START, bad, nmov)
    dt = fpar[F_DT]
    share = np.empty(fixed.shape[0])
    margin_shares(fpar, fixed, body_dof, body_rb, v, share)
    for b in range(share.shape[0]):
        if not math.isfinite(share[b]):
            return no_prepared(STEP_BAD_MARGIN, b, nmov)
    geoms, phi, point, normal = collide_and_filter(fpar, fixed, body_dof, body_rb, geom_type, geom_size,
                                                   geom_body, geom_pos, geom_quat, geom_rho, q, v)
    nc = phi.shape[0]
    A_values = np.empty(36 * nmov)
    v_star = np.empty(6 * nmov)
    free_motion_kernel(fpar, gravity, body_dof, mass, inertia, q, v, moving, A_values, v_star)
    # frames, Jacobians, cliques
    R_WC = np.empty((nc, 3, 3))
    cliques = np.empty((nc, 2), np.int64)
    nside = 0
    for c in range(nc):
        contact_frame(normal[c], R_WC[c])
        a = geom_body[geoms[c, 0]]
        b = geom_body[geoms[c, 1]]
        if body_dof[a] >= 0:
            cliques[c, 0] = body_dof[a] // 6
            cliques[c, 1] = body_dof[b] // 6 if body_dof[b] >= 0 else -1
        else:
            cliques[c, 0] = body_dof[b] // 6
            cliques[c, 1] = -1
        nside += 1 if cliques[c, 1] < 0 else 2
    J_values = np.empty(18 * nside)
    J_full_ptr = np.empty((nc, 2), np.int64)
    off = 0
    for c in range(nc):
        a = geom_body[geoms[c, 0]]
        b = geom_body[geoms[c, 1]]
        J_full_ptr[c, 0] = off
        if body_dof[a] >= 0:
            jacobian_block(R_WC[c], point[c], q, a, -1.0, J_values, off)
            off += 18
            if cliques[c, 1] >= 0:
                J_full_ptr[c, 1] = off
                jacobian_block(R_WC[c], point[c], q, b, 1.0, J_values, off)
                off += 18
            else:
                J_full_ptr[c, 1] = -1
        else:
            jacobian_block(R_WC[c], point[c], q, b, 1.0, J_values, off)
            off += 18
            J_full_ptr[c, 1] = -1
    # participating cliques
    used = np.zeros(nmov, np.bool_)
    for c in range(nc):
        used[cliques[c, 0]] = True
        if cliques[c, 1] >= 0:
            used[cliques[c, 1]] = True
    new_index = -np.ones(nmov, np.int64)
    ncl = 0
    for m in range(nmov):
        if used[m]:
            new_index[m] = ncl
            ncl += 1
    sizes = np.full(ncl, 6, np.int64)
    cstart = np.empty(ncl, np.int64)
    A_ptr = np.empty(ncl, np.int64)
    A_red = np.empty(36 * ncl)
    vs_red = np.empty(6 * ncl)
    v_red = np.empty(6 * ncl)
    for m in range(nmov):
        k = new_index[m]
        if k < 0:
            continue
        cstart[k] = 6 * k
        A_ptr[k] = 36 * k
        for i in range(36):
            A_red[36 * k + i] = A_values[36 * m + i]
        b = moving[m]
        for i in range(6):
            vs_red[6 * k + i] = v_star[6 * m + i]
            v_red[6 * k + i] = v[b, i]
    cl_red = np.empty((nc, 2), np.int64)
    for c in range(nc):
        cl_red[c, 0] = new_index[cliques[c, 0]]
        cl_red[c, 1] = new_index[cliques[c, 1]] if cliques[c, 1] >= 0 else -1
    # per-contact parameters and kernel data
    w = np.empty(nc)
    blocks.delassus_estimate(cstart, sizes, A_ptr, A_red, cl_red, J_full_ptr, J_values, w)
    for c in range(nc):
        if not w[c] > 0.0:
            w[c] = 1.0
    kind_code = ipar[I_CONTACT_KIND]
    vn0 = np.empty(nc if kind_code != KIND_SAP else 0)
    if kind_code != KIND_SAP:
        for c in range(nc):
            acc = 0.0
            p0 = J_full_ptr[c, 0]
            m0 = body_dof[geom_body[geoms[c, 0]]]
            b0 = geom_body[geoms[c, 0]] if m0 >= 0 else geom_body[geoms[c, 1]]
            t = 0.0
            for j in range(6):
                t += J_values[p0 + 12 + j] * v[b0, j]
            acc = 0.0 + t
            if J_full_ptr[c, 1] >= 0:
                t = 0.0
                for j in range(6):
                    t += J_values[J_full_ptr[c, 1] + 12 + j] * v[geom_body[geoms[c, 1]], j]
                acc += t
            vn0[c] = acc
    kind, cpar = contact_parameters(fpar, ipar, geoms, phi, w, vn0, geom_k, geom_mu, geom_tau, geom_d)
    edges, constraint_edge = clique_graph(cl_red)
    island, nisl = islands(ncl, edges)
    isl_size = np.zeros(nisl, np.int64)
    for c in range(ncl):
        isl_size[island[c]] += sizes[c]
    max_n = 0
    for i in range(nisl):
        max_n = max(max_n, isl_size[i])
    prep = (geoms, phi, point, normal, R_WC, v_star, new_index, cstart, sizes, A_ptr, A_red, vs_red, cl_red,
            J_full_ptr, J_values, kind, cpar, v_red, edges, constraint_edge)
    return STEP_OK, -1, max_n, prep




@jit
def step_finish(fpar, ipar, moving, q, v, q_out, v_out, prep, use_sn, sn, sn_edges):
    """Stages 5–6 of a step on what :func:`step_prepare` returned: Newton (dense Cholesky per island, or
    with ``use_sn`` the supernodal factor of the analysis ``sn`` of the pattern ``sn_edges``; see
    :func:`newton_solve`), impulses to world forces, integration.

    Returns (status, bad_body, sap_status, iterations, ls_evaluations, relative residual, gamma (nc, 3),
    force_world (nc, 3)); status STEP_TOO_LARGE: nothing was solved (island above the dense limit without
    ``use_sn``, or ``sn_edges`` misses an edge of the graph)."""
    (geoms, phi, point, normal, R_WC, v_star, new_index, cstart, sizes, A_ptr, A_red, vs_red, cl_red,
     J_full_ptr, J_values, kind, cpar, v_red, edges, constraint_edge) = prep
    dt = fpar[F_DT]
    nc = phi.shape[0]
    nmov = moving.shape[0]
    gamma = np.zeros((nc, 3))
    force = np.zeros((nc, 3))
    if nc == 0:
        integrate_kernel(fpar, moving, q, v, v_star, q_out, v_out)
        bad = first_nonfinite_body(q_out, v_out)
        if bad >= 0:
            return STEP_NONFINITE_END, bad, 0, 0, 0, 0.0, gamma, force
        return STEP_OK, -1, 0, 0, 0, 0.0, gamma, force
    v_red = v_red.copy()
    status, iterations, ls_evals, r, s, gamma_s, too_large = newton_solve(
        fpar, ipar, cstart, sizes, A_ptr, A_red, vs_red, cl_red, J_full_ptr, J_values, kind, cpar, v_red,
        edges, constraint_edge, use_sn, sn, sn_edges)
    if too_large:
        return STEP_TOO_LARGE, -1, 0, 0, 0, 0.0, gamma, force
    resid = r / s if s > 0 else r
    for c in range(nc):
        for i in range(3):
            gamma[c, i] = gamma_s[c, i]
        for i in range(3):
            force[c, i] = (R_WC[c, i, 0] * gamma[c, 0] + R_WC[c, i, 1] * gamma[c, 1]
                           + R_WC[c, i, 2] * gamma[c, 2]) / dt
    v_next = v_star.copy()
    for m in range(nmov):
        k = new_index[m]
        if k >= 0:
            for i in range(6):
                v_next[6 * m + i] = v_red[6 * k + i]
    if status != SAP_CONVERGED:
        finite = True
        for i in range(v_next.shape[0]):
            if not math.isfinite(v_next[i]):
                finite = False
        if ipar[I_STRICT] != 0 or not finite:
            return STEP_SOLVER_FAILED, -1, status, iterations, ls_evals, resid, gamma, force
    integrate_kernel(fpar, moving, q, v, v_next, q_out, v_out)
    bad = first_nonfinite_body(q_out, v_out)
    if bad >= 0:
        return STEP_NONFINITE_END, bad, status, iterations, ls_evals, resid, gamma, force
    return STEP_OK, -1, status, iterations, ls_evals, resid, gamma, force


@jit(inline="always")
def record_frame(nf, ncr, k, q_new, v_new, quiet, iterations, sap_status, ls_evals, resid, geoms, phi, point,
                 normal, gamma, force, geom_body, fr_step, fr_q, fr_v, fr_stat, fr_resid, fr_nc, c_body, c_geom,
                 c_point, c_normal, c_phi, c_gamma, c_force):
    """Write frame ``nf`` of a run kernel: the state after step k, its solver statistics (``quiet``: no problem
    was solved, StepInfo's defaults, and sap status −1) and its contact rows from row ``ncr`` on (bodies,
    geometries, point, normal, φ, impulse γ in the contact frame [N·s], world force [N]). Returns the next free
    row."""
    nc = phi.shape[0]
    fr_step[nf] = k + 1
    for b in range(q_new.shape[0]):
        for i in range(7):
            fr_q[nf, b, i] = q_new[b, i]
        for i in range(6):
            fr_v[nf, b, i] = v_new[b, i]
    fr_stat[nf, 0] = 0 if quiet else iterations
    fr_stat[nf, 1] = 1 if (quiet or sap_status == 0) else 0
    fr_stat[nf, 2] = 0 if quiet else ls_evals
    fr_stat[nf, 3] = -1 if quiet else sap_status
    fr_resid[nf] = 0.0 if quiet else resid
    fr_nc[nf] = nc
    for c in range(nc):
        c_body[ncr + c, 0] = geom_body[geoms[c, 0]]
        c_body[ncr + c, 1] = geom_body[geoms[c, 1]]
        c_geom[ncr + c, 0] = geoms[c, 0]
        c_geom[ncr + c, 1] = geoms[c, 1]
        c_phi[ncr + c] = phi[c]
        for i in range(3):
            c_point[ncr + c, i] = point[c, i]
            c_normal[ncr + c, i] = normal[c, i]
            c_force[ncr + c, i] = force[c, i]
            c_gamma[ncr + c, i] = gamma[c, i]
    return ncr + nc


@jit(inline="always")
def count_step(st, taken, quiet, iterations, nc, sap_status, ls_evals, q, v, q_new, v_new):
    """A run kernel's per-step statistics row ``taken`` of ``st`` (iterations, contacts, converged,
    line-search evaluations; ``quiet`` as :func:`record_frame`), and (q, v) ← (q_new, v_new)."""
    for b in range(q.shape[0]):
        for i in range(7):
            q[b, i] = q_new[b, i]
        for i in range(6):
            v[b, i] = v_new[b, i]
    st[taken, 0] = 0 if quiet else iterations
    st[taken, 1] = nc
    st[taken, 2] = 1 if (quiet or sap_status == 0) else 0
    st[taken, 3] = 0 if quiet else ls_evals


@jit
def run_kernel(fpar, ipar, gravity, fixed, body_dof, moving, mass, inertia, body_rb, geom_type, geom_size,
               geom_body, geom_pos, geom_quat, geom_rho, geom_k, geom_mu, geom_tau, geom_d,
               q, v, k0, n_total, max_steps, record_every,
               fr_step, fr_q, fr_v, fr_stat, fr_resid, fr_nc, st,
               c_body, c_geom, c_point, c_normal, c_phi, c_gamma, c_force):
    """Advance (q, v) in place from step index k0 by up to ``max_steps`` steps (never past ``n_total``),
    recording a frame after step k when (k + 1) % record_every == 0 or k + 1 == n_total.

    Frame buffers (one row per frame): fr_step (step index after the step), fr_q, fr_v, fr_stat
    (iterations, converged, line-search evaluations, sap status), fr_resid, fr_nc (contacts); contact
    rows: c_body (body_a, body_b), c_geom (geom_a, geom_b), c_point, c_normal, c_phi, c_gamma, c_force. Per step taken (row ``taken``):
    st = (iterations, contacts, converged, line-search evaluations); st has at least max_steps rows.

    Returns (code, steps taken, frames written, contact rows written, bad_body, sap_status, iterations):
    code RUN_DONE (n_total reached), RUN_CHUNK_END (max_steps taken or the frame buffer full),
    RUN_NEED_CONTACT_SPACE (the next frame's contacts do not fit: that step was not taken), or a STEP_*
    failure code of the step after the ones taken (which was not taken)."""
    nf = 0
    ncr = 0
    taken = 0
    q_new = np.empty_like(q)
    v_new = np.empty_like(v)
    sn, sn_edges = no_supernodal()
    while taken < max_steps and k0 + taken < n_total:
        k = k0 + taken
        record = (k + 1) % record_every == 0 or k + 1 == n_total
        if record and nf >= fr_step.shape[0]:
            return RUN_CHUNK_END, taken, nf, ncr, -1, 0, 0
        status, bad, max_n, prep = step_prepare(fpar, ipar, gravity, fixed, body_dof, moving, mass, inertia,
                                                body_rb, geom_type, geom_size, geom_body, geom_pos, geom_quat,
                                                geom_rho, geom_k, geom_mu, geom_tau, geom_d, q, v)
        if status != STEP_OK:
            return status, taken, nf, ncr, bad, 0, 0
        if max_n > ipar[I_ISLAND_MAX_DOFS]:       # the caller takes this step with the supernodal factor
            return STEP_TOO_LARGE, taken, nf, ncr, -1, 0, 0
        geoms, phi, point, normal = prep[0], prep[1], prep[2], prep[3]
        (status, bad, sap_status, iterations, ls_evals, resid, gamma,
         force) = step_finish(fpar, ipar, moving, q, v, q_new, v_new, prep, False, sn, sn_edges)
        if status != STEP_OK:
            return status, taken, nf, ncr, bad, sap_status, iterations
        nc = phi.shape[0]
        if record:
            if ncr + nc > c_phi.shape[0]:
                return RUN_NEED_CONTACT_SPACE, taken, nf, ncr, -1, 0, nc
            ncr = record_frame(nf, ncr, k, q_new, v_new, False, iterations, sap_status, ls_evals, resid, geoms,
                               phi, point, normal, gamma, force, geom_body, fr_step, fr_q, fr_v, fr_stat, fr_resid,
                               fr_nc, c_body, c_geom, c_point, c_normal, c_phi, c_gamma, c_force)
            nf += 1
        count_step(st, taken, False, iterations, nc, sap_status, ls_evals, q, v, q_new, v_new)
        taken += 1
    code = RUN_DONE if k0 + taken >= n_total else RUN_CHUNK_END
    return code, taken, nf, ncr, -1, 0, 0
