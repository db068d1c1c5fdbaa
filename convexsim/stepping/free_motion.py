"""Stage: free motion, A and v* of the step (the velocities without constraints) and the poses it needs.

* free bodies: the spatial masses A = M_b (36 per moving body) and v* = v + dt·M⁻¹(τ_gyro, m·g)
  (``dynamics.free_motion_kernel``; numpy reference ``dynamics.free_motion``), :func:`body_free_motion`;
* trees: poses and motion subspaces at q₀ (:func:`forest_kinematics`: ``kinematics.fk_kernel``,
  ``subspace_kernel``), A = M(q₀) + dt·D and v* by CRBA, RNEA and implicit joint damping
  (``multibody.dynamics.forest_free_motion``; numpy references ``multibody.dynamics.mass_matrix``,
  ``inverse_dynamics``), :func:`free_motion_stage`;
* a controller's joint forces τ: v* gains dt·A⁻¹τ (:func:`add_joint_forces`);
* the dense A over v = (free bodies | tree_v) of the LCP (:func:`dense_free_motion`).
"""

from __future__ import annotations

import numpy as np

from convexsim._jit import jit
from convexsim.dynamics import free_motion_kernel
from convexsim.multibody.dynamics import forest_free_motion
from convexsim.multibody.kinematics import fk_kernel, subspace_kernel
from convexsim.sap.newton import F_DT


@jit(inline="always")
def body_free_motion(fpar, gravity, body_dof, mass, inertia, q, v, moving):
    """(A (36 per moving body, row-major 6 × 6), v* (6 per moving body)) of the free bodies."""
    nmov = moving.shape[0]
    A_values = np.empty(36 * nmov)
    v_star = np.empty(6 * nmov)
    free_motion_kernel(fpar, gravity, body_dof, mass, inertia, q, v, moving, A_values, v_star)
    return A_values, v_star


@jit
def forest_kinematics(fa, tq):
    """(R_WB, p_WB, R_WJ, S) of the packed forest ``fa`` at tree_q ``tq`` (fk_kernel, subspace_kernel)."""
    parent, jtype, axis, jpos, jrot, qadr, dofadr = fa[0], fa[1], fa[2], fa[3], fa[4], fa[5], fa[6]
    nb = parent.shape[0]
    R_WB = np.empty((nb, 3, 3))
    p_WB = np.empty((nb, 3))
    R_WJ = np.empty((nb, 3, 3))
    fk_kernel(parent, jtype, axis, jpos, jrot, qadr, tq, R_WB, p_WB, R_WJ)
    S = np.zeros((6, fa[11].shape[0]))
    subspace_kernel(jtype, axis, dofadr, R_WJ, p_WB, S)
    return R_WB, p_WB, R_WJ, S


@jit
def free_motion_stage(fpar, mb, fa, q, v, tq, tv):
    """Stage 3 of a step of a model with trees: the free bodies' spatial masses (36 per body) and v* (6 per
    body) by ``dynamics.free_motion_kernel``; the forest's A = M(q₀) + dt·D (nvt, nvt) and v* (nvt,) by
    ``multibody.dynamics.forest_free_motion`` at the poses of :func:`forest_kinematics`. Returns (A_free,
    vs_free, A_tree, vs_tree, S) with S the forest's motion subspaces at q₀ (for the contact Jacobians)."""
    gravity, body_dof, moving, mass, inertia = mb[0], mb[2], mb[3], mb[4], mb[5]
    nmov = moving.shape[0]
    nvt = tv.shape[0]
    A_free = np.empty(36 * nmov)
    vs_free = np.empty(6 * nmov)
    free_motion_kernel(fpar, gravity, body_dof, mass, inertia, q, v, moving, A_free, vs_free)
    R_WB, p_WB, _, S = forest_kinematics(fa, tq)
    A_tree = np.empty((nvt, nvt))
    vs_tree = np.empty(nvt)
    forest_free_motion(fa[0], fa[1], fa[6], fa[7], S, R_WB, p_WB, fa[8], fa[9], fa[10], fa[11], fa[12], fa[13],
                       tv, fpar[F_DT], fa[14], fa[15], A_tree, vs_tree)
    return A_free, vs_free, A_tree, vs_tree, S


@jit
def motor_forces_kernel(dof, torque, effort, tau_in, tau_out):
    """The joint forces after the motors into ``tau_out`` (nvt,) [N·m or N]: ``tau_in`` off the motors' dofs,
    clamp(τ₀ + τ_in, −effort, effort) on motor m's dof ``dof[m]`` (τ₀ = ``torque[m]``); the numpy reference is
    ``multibody.forest.motor_forces``."""
    tau_out[:] = tau_in
    for m in range(dof.shape[0]):
        i = dof[m]
        tau_out[i] = min(max(tau_in[i] + torque[m], -effort[m]), effort[m])


@jit
def add_joint_forces(fa, dt, A_tree, vs_tree, tau):
    """The free motion under applied joint forces τ (nvt,) [N·m or N] (a controller's torques): v* gains
    dt·A⁻¹τ, tree by tree on the blocks of A = M(q₀) + dt·D (``multibody.forest.tree_step_data``'s v* =
    v₀ + dt·A⁻¹(τ − h − D v₀), to round-off)."""
    tree_vstart, tree_nv = fa[14], fa[15]
    for k in range(tree_vstart.shape[0]):
        s, n = tree_vstart[k], tree_nv[k]
        hit = False
        for i in range(n):
            hit = hit or tau[s + i] != 0.0
        if not hit:
            continue
        x = np.linalg.solve(np.ascontiguousarray(A_tree[s:s + n, s:s + n]), np.ascontiguousarray(tau[s:s + n]))
        for i in range(n):
            vs_tree[s + i] += dt * x[i]


@jit(inline="always")
def dense_free_motion(fpar, mb, fa, q, v, tq, tv):
    """(A (nv, nv), v* (nv,), S) over v = (free bodies 6 by 6 | tree_v): the free bodies' spatial masses and
    the forest's A = M(q₀) + dt·D with their v* (:func:`free_motion_stage`, shared with the SAP tree
    step) in one dense matrix, S the forest's motion subspaces at q₀ (for the contact Jacobians)."""
    nmov = mb[3].shape[0]
    nvt = tv.shape[0]
    nv = 6 * nmov + nvt
    A_free, vs_free, A_tree, vs_tree, S = free_motion_stage(fpar, mb, fa, q, v, tq, tv)
    A = np.zeros((nv, nv))
    v_star = np.empty(nv)
    for m in range(nmov):
        for i in range(6):
            v_star[6 * m + i] = vs_free[6 * m + i]
            for j in range(6):
                A[6 * m + i, 6 * m + j] = A_free[36 * m + 6 * i + j]
    for i in range(nvt):
        v_star[6 * nmov + i] = vs_tree[i]
        for j in range(nvt):
            A[6 * nmov + i, 6 * nmov + j] = A_tree[i, j]
    return A, v_star, S


__all__ = ["body_free_motion", "forest_kinematics", "free_motion_stage", "add_joint_forces", "dense_free_motion"]
