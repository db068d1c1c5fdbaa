"""Stage: recording. A run kernel writes frames (the state after a step, its solver statistics, its contact
rows) into preallocated buffers (:func:`record_frame`) and per-step statistics (:func:`count_step`); the
run loops of ``sap_composition`` share them, ``simulate`` turns the buffers into a Trajectory."""

from __future__ import annotations

from convexsim._jit import jit


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


__all__ = ["record_frame", "count_step"]
