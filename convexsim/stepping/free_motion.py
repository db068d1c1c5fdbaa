"""Stage: free motion, A and v* of the step (the velocities without constraints) and the poses it needs.

* free bodies: the spatial masses A = M_b (36 per moving body) and v* = v + dt·M⁻¹(τ_gyro, m·g)
  (``dynamics.free_motion_kernel``; numpy reference ``dynamics.free_motion``), :func:`body_free_motion`;
* trees: poses and motion subspaces at q₀ (:func:`forest_kinematics`: ``kinematics.fk_kernel``,
  ``subspace_kernel``), A = M(q₀) + dt·D and v* by CRBA, RNEA and implicit joint damping
  (``multibody.dynamics.forest_free_motion``; numpy references ``multibody.dynamics.mass_matrix``,
  ``inverse_dynamics``), :func:`free_motion_stage`;
* the step's controls (:func:`applied_forces`): external wrenches w_b = (τ_W, f_W) at the COMs of free bodies,
  v*_b gains dt·M_b⁻¹w_b (:func:`add_body_wrenches`), and on tree links, generalized forces J_bᵀw_b
  (:func:`add_link_wrenches`), which with a controller's joint forces τ make v* gain dt·A⁻¹τ
  (:func:`add_joint_forces`);
* the dense A over v = (free bodies | tree_v) of the LCP (:func:`dense_free_motion`).

The numpy reference of this stage for both reference steps, SAP and LCP (:func:`assemble`, an
:class:`ArticulatedSystem`; free bodies are a forest without joints): v = (free bodies' (ω, v) 6 by 6 | tree 0's
joint velocities | tree 1's | ...); every moving free body is one 6-dof clique (A = its spatial mass, v* as
``dynamics.free_motion``), every tree with dofs one clique with the dense block A = M(q₀) + dt·D and
v* = v₀ + dt A⁻¹(τ − C v₀ − g − D v₀) (CRBA, RNEA; τ: a controller's joint forces and J_bᵀw_b of the links'
wrenches). It also carries the trees' SAP joint rows, which need this A (their Delassus estimates read its
diagonal): limits, implicit PD actuators, couplers (``multibody.forest.tree_step_data``, as
``multibody.reference_step`` builds them); the SAP reference appends the body constraints' rows
(``sap_rows.add_body_constraint_rows``). The LCP reference reads A, v* and the trees' kinematics from it and
builds its own joint rows (``lcp_reference``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from convexsim import dynamics
from convexsim._jit import jit
from convexsim.dynamics import free_motion_kernel, solve3
from convexsim.model import Model, State
from convexsim.multibody.dynamics import forest_free_motion
from convexsim.multibody.kinematics import Kinematics, fk_kernel, subspace_kernel
from convexsim.multibody.model import ConeLimit
from convexsim.sap.blocks import dense_cholesky_solve
from convexsim.sap.joint_constraints import KIND_LIMIT
from convexsim.sap.newton import F_DT
from convexsim.stepping.contacts import model_forest
from convexsim.stepping.types import singular_mass_error


@jit(inline="always")
def _any_nonzero(x):
    """Whether the 1-D array ``x`` has an entry ≠ 0 (a control left at zero changes no free motion)."""
    for i in range(x.shape[0]):
        if x[i] != 0.0:
            return True
    return False


@jit(inline="always")
def body_free_motion(fpar, gravity, body_dof, mass, inertia, q, v, moving, wrench):
    """(A (36 per moving body, row-major 6 × 6), v* (6 per moving body)) of the free bodies under the external
    wrenches ``wrench`` (nbody, 6) (:func:`add_body_wrenches`)."""
    nmov = moving.shape[0]
    A_values = np.empty(36 * nmov)
    v_star = np.empty(6 * nmov)
    free_motion_kernel(fpar, gravity, body_dof, mass, inertia, q, v, moving, A_values, v_star)
    add_body_wrenches(fpar[F_DT], moving, mass, wrench, A_values, v_star)
    return A_values, v_star


@jit
def add_body_wrenches(dt, moving, mass, wrench, A_values, v_star):
    """The free bodies' free motion under external wrenches: for moving body m (body b = ``moving[m]``) with
    w_b = (τ_W [N·m], f_W [N]) at its COM in W (row b of ``wrench`` (nbody, 6); zero rows skipped),
    v*_b += dt·M_b⁻¹w_b, i.e. ω* += dt·I_W⁻¹τ_W with I_W the angular block of A (``A_values``, 36 per body)
    and v*_COM += dt·f_W/m. numpy reference: ``dynamics.free_motion``'s ``wrench``."""
    for m in range(moving.shape[0]):
        b = moving[m]
        if not _any_nonzero(wrench[b]):
            continue
        I_W = np.empty((3, 3))
        for i in range(3):
            for j in range(3):
                I_W[i, j] = A_values[36 * m + 6 * i + j]
        dw = solve3(I_W, np.ascontiguousarray(wrench[b, :3]))
        for i in range(3):
            v_star[6 * m + i] += dt * dw[i]
            v_star[6 * m + 3 + i] += dt * wrench[b, 3 + i] / mass[b]


@jit
def add_link_wrenches(fa, R_WB, p_WB, S, wrench, tau):
    """The generalized forces of external wrenches on tree links added into ``tau`` (nvt,) [N·m or N]:
    τ += J_bᵀw_b for link b with w_b = (τ_W, f_W) at its COM p in W (its Model body's row of ``wrench``
    (nbody, 6); zero rows skipped), J_b its spatial Jacobian (ω_W, v_COM). With S the motion subspaces about
    the world origin O (``forest_kinematics``), column d of J_b on the dofs of the joints from b to the root
    is (S_ang,d, S_lin,d − p × S_ang,d), so J_bᵀw_b = S_angᵀ(τ_W + p × f_W) + S_linᵀ f_W: the wrench moved to O.
    numpy reference: ``multibody.forest.link_wrench_torques``."""
    parent, dofadr, nvj, com, link_body = fa[0], fa[6], fa[7], fa[9], fa[16]
    for l in range(link_body.shape[0]):
        b = link_body[l]
        if not _any_nonzero(wrench[b]):
            continue
        R, c = R_WB[l], com[l]                     # the COM p = p_WB + R_WB com
        p0 = p_WB[l, 0] + R[0, 0] * c[0] + R[0, 1] * c[1] + R[0, 2] * c[2]
        p1 = p_WB[l, 1] + R[1, 0] * c[0] + R[1, 1] * c[1] + R[1, 2] * c[2]
        p2 = p_WB[l, 2] + R[2, 0] * c[0] + R[2, 1] * c[1] + R[2, 2] * c[2]
        f0, f1, f2 = wrench[b, 3], wrench[b, 4], wrench[b, 5]
        n0 = wrench[b, 0] + p1 * f2 - p2 * f1
        n1 = wrench[b, 1] + p2 * f0 - p0 * f2
        n2 = wrench[b, 2] + p0 * f1 - p1 * f0
        j = l
        while j >= 0:
            for d in range(dofadr[j], dofadr[j] + nvj[j]):
                tau[d] += S[0, d] * n0 + S[1, d] * n1 + S[2, d] * n2 + S[3, d] * f0 + S[4, d] * f1 + S[5, d] * f2
            j = parent[j]


@jit(inline="always")
def applied_forces(dt, mb, fa, R_WB, p_WB, S, tau, wrench, A_free, vs_free, A_tree, vs_tree):
    """The step's controls in the free motion (in place): the free bodies' wrenches (:func:`add_body_wrenches`),
    the links' wrenches into the joint forces ``tau`` (nvt,) (:func:`add_link_wrenches`; ``tau`` is the step's
    work array and holds the sum afterwards), then v*_tree += dt·A⁻¹τ (:func:`add_joint_forces`). Poses and
    subspaces at q₀ (:func:`free_motion_stage`)."""
    add_body_wrenches(dt, mb[3], mb[4], wrench, A_free, vs_free)
    add_link_wrenches(fa, R_WB, p_WB, S, wrench, tau)
    add_joint_forces(fa, dt, A_tree, vs_tree, tau)


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
    vs_free, A_tree, vs_tree, S, R_WB, p_WB) with S the forest's motion subspaces at q₀ (for the contact
    Jacobians) and the bodies' poses at q₀ (for the links' wrenches, :func:`applied_forces`)."""
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
    return A_free, vs_free, A_tree, vs_tree, S, R_WB, p_WB


@jit(borrowed=True)
def motor_forces_kernel(dof, torque, effort, tau_in, tau_out):
    """The joint forces after the motors into ``tau_out`` (nvt,) [N·m or N]: ``tau_in`` off the motors' dofs,
    clamp(τ₀ + τ_in, −effort, effort) on motor m's dof ``dof[m]`` (τ₀ = ``torque[m]``); the numpy reference is
    ``multibody.forest.motor_forces``."""
    for i in range(tau_in.shape[0]):
        tau_out[i] = tau_in[i]
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
        if not _any_nonzero(tau[s:s + n]):
            continue
        x = np.empty(n)
        if dense_cholesky_solve(A_tree[s:s + n, s:s + n].copy(), tau[s:s + n], x) != 0:
            x[:] = np.nan                    # M(q) singular to round-off: the step reports it (STEP_SINGULAR_MASS)
        for i in range(n):
            vs_tree[s + i] += dt * x[i]


@jit(inline="always")
def dense_free_motion(fpar, mb, fa, q, v, tq, tv, tau, wrench):
    """(A (nv, nv), v* (nv,), S) over v = (free bodies 6 by 6 | tree_v): the free bodies' spatial masses and
    the forest's A = M(q₀) + dt·D with their v* under the joint forces ``tau`` (nvt,) and the wrenches
    ``wrench`` (nbody, 6) (:func:`free_motion_stage`, :func:`applied_forces`, shared with the SAP tree step)
    in one dense matrix, S the forest's motion subspaces at q₀ (for the contact Jacobians)."""
    nmov = mb[3].shape[0]
    nvt = tv.shape[0]
    nv = 6 * nmov + nvt
    A_free, vs_free, A_tree, vs_tree, S, R_WB, p_WB = free_motion_stage(fpar, mb, fa, q, v, tq, tv)
    applied_forces(fpar[F_DT], mb, fa, R_WB, p_WB, S, tau, wrench, A_free, vs_free, A_tree, vs_tree)
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


# ---- numpy reference

@dataclass
class ArticulatedSystem:
    """One step's unconstrained dynamics and rows over the step's v (module docstring, :func:`assemble`).

    Attributes:
        free_bodies: Model indices of the free moving bodies (clique i = free body i).
        clique_sizes, clique_start: per clique.
        tree_clique: per tree, its clique index (−1 for a tree without dofs); tree_start: its offset in v.
        A_blocks: per clique; A: the dense A (nv, nv) they make (built on first use). v_star, v0: (nv,).
        Jr (nr, nv), par (nr, 4), row_kinds: joint rows; pd_rows: (tree, actuator, row) of each actuator.
        kins: per tree, its Kinematics at q0.
        limit_rows: (joint name, row, global dof or −1 for a cone limit) of each active joint-limit row;
            limit_names: every limited joint's name. body_rows: (first row, owners) of the body-constraint rows
            (``sap_rows.add_body_constraint_rows``; none until it is called). actuator_names: per pd_rows entry.
    """

    free_bodies: np.ndarray
    clique_sizes: list
    clique_start: list
    tree_clique: list
    tree_start: list
    A_blocks: list
    v_star: np.ndarray
    v0: np.ndarray
    Jr: np.ndarray
    par: np.ndarray
    row_kinds: list
    pd_rows: list
    kins: list = field(default_factory=list)
    limit_rows: list = field(default_factory=list)
    limit_names: list = field(default_factory=list)
    body_rows: tuple = (0, [])
    actuator_names: tuple = ()
    _A: np.ndarray | None = field(default=None, repr=False)

    @property
    def nv(self) -> int:
        return int(self.v_star.size)

    @property
    def A(self) -> np.ndarray:
        """The dense A (nv, nv): the clique blocks on the diagonal (built once, on first use)."""
        if self._A is None:
            self._A = np.zeros((self.nv, self.nv))
            for s, n, blk in zip(self.clique_start, self.clique_sizes, self.A_blocks):
                self._A[s:s + n, s:s + n] = blk
        return self._A


def assemble(model: Model, state: State, controls=None,
             wrench: np.ndarray | None = None) -> ArticulatedSystem:
    """A, v*, v0 and the trees' joint rows of this step (module docstring, "the numpy reference"; the SAP reference
    appends the body constraints' rows, ``sap_rows.add_body_constraint_rows``). ``controls``: the step's
    ``multibody.forest.Controls`` (None: none); ``wrench`` (nbody, 6): external (τ_W, f_W) at the bodies' COMs
    [N·m, N] (default: the controls' wrenches)."""
    from convexsim.multibody.forest import link_wrench_torques, tree_step_data, tree_torques

    dt = model.time_step
    forest = model_forest(model)
    if wrench is None and controls is not None:
        wrench = controls.wrench_array(model.body_names)
    A_free, vs_free = dynamics.free_motion(model, state, wrench)
    free = dynamics.moving_bodies(model)
    blocks = [A_free[i] for i in range(free.size)]
    v_star = [vs_free]
    v0 = [state.v[free].reshape(-1)]
    sizes, starts = [6] * free.size, [6 * i for i in range(free.size)]
    off = 6 * free.size
    tree_clique, tree_start, kins = [], [], []
    rows_J, rows_par, kinds, pd_rows = [], [], [], []
    limit_rows, limit_names, act_names = [], [], []
    for k, tree in enumerate(forest.trees):
        q, v = tree.q_of(state.tree_q), tree.v_of(state.tree_v)
        kins.append(Kinematics(tree.model, q))
        tree_start.append(off)
        if tree.nv == 0:
            tree_clique.append(-1)
            continue
        limit_names.extend(tree.joint_names[lim.joint] for lim in tree.limits)
        tau = tree_torques(tree, controls, forest.motors)
        if wrench is not None:
            tau = link_wrench_torques(tree, kins[-1], wrench) + (0.0 if tau is None else tau)
        A, vs, J, par, kd, owners, pdr = tree_step_data(tree, q, v, dt, state.t, tau, controls)
        if not np.all(np.isfinite(vs)) and np.all(np.isfinite(q)) and np.all(np.isfinite(v)):
            raise singular_mass_error(model, off - 6 * free.size, state.step, state.t)
        tree_clique.append(len(blocks))
        blocks.append(A)
        sizes.append(tree.nv)
        starts.append(off)
        v_star.append(vs)
        v0.append(np.asarray(v, dtype=float))
        base = sum(len(p) for p in rows_par)
        for n, r in enumerate(pdr):
            pd_rows.append((k, n, base + r))
            act_names.append(tree.actuators[n].name)
        for r, (kind_r, owner) in enumerate(zip(kd, owners)):
            if kind_r == KIND_LIMIT:
                lim = tree.limits[owner]
                d = -1 if isinstance(lim, ConeLimit) else off + int(tree.model.joint_dofadr[lim.joint])
                limit_rows.append((tree.joint_names[lim.joint], base + r, d))
        rows_J.append((off, J))
        rows_par.append(par)
        kinds.extend(kd)
        off += tree.nv
    nv = off
    nr = sum(p.shape[0] for p in rows_par)
    Jr = np.zeros((nr, nv))
    r0 = 0
    for (o, J), p in zip(rows_J, rows_par):
        Jr[r0:r0 + J.shape[0], o:o + J.shape[1]] = J
        r0 += J.shape[0]
    par = np.concatenate(rows_par) if rows_par else np.zeros((0, 4))
    return ArticulatedSystem(free, sizes, starts, tree_clique, tree_start, blocks,
                             np.concatenate(v_star) if v_star else np.zeros(0),
                             np.concatenate(v0) if v0 else np.zeros(0), Jr, par, kinds, pd_rows, kins,
                             limit_rows, limit_names, (nr, []), tuple(act_names))


__all__ = ["body_free_motion", "forest_kinematics", "free_motion_stage", "add_body_wrenches", "add_link_wrenches",
           "applied_forces", "add_joint_forces", "dense_free_motion", "ArticulatedSystem", "assemble"]
