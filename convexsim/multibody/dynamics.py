"""Mass matrix (composite-rigid-body algorithm) and inverse dynamics (recursive Newton–Euler) of a tree.

Both follow Featherstone, *Rigid Body Dynamics Algorithms* (2008), ch. 5–6, in one fixed frame: all
spatial quantities are world Plücker coordinates about the origin O (see kinematics.py), so bodies
need no coordinate transforms. Body b's spatial inertia about O (COM c, mass m, I_c about the COM, all in
W) is

    I_b = [[I_c + m [c]ₓ[c]ₓᵀ, m [c]ₓ], [m [c]ₓᵀ, m 1₃]]          (Featherstone eq. 2.63)

* CRBA: composite inertias I^c_b = I_b + Σ_children I^c; F = I^c_b S_b; M_bb = S_bᵀ F and M_jb = S_jᵀ F
  for every ancestor j of b. Rotor armature is added to the diagonal.
* RNEA (with gravity as a base acceleration −g): V_b = V_p + S_b v_b,
  A_b = A_p + S_b a_b + Ṡ_b v_b, f_b = I_b A_b + V_b ×* I_b V_b, τ_b = S_bᵀ f_b, f_p += f_b.
  Ṡ_b v_b = V_p ×ₘ (S_b v_b) for REVOLUTE/PRISMATIC/BALL (subspaces fixed in the parent) and
  (0, ṗ_WB × ω) for FREE (whose angular columns are attached to the moving origin).
  The result is τ = M(q) a + C(q, v) v + g(q) where M here excludes armature; the armature torque
  armature·a is added by :func:`inverse_dynamics`.

The reference for M is Σ_b J_bᵀ M_b J_b with the per-body Jacobians (:func:`mass_matrix_reference`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from convexsim._jit import jit
from convexsim.multibody.kinematics import BALL, FREE, PRISMATIC, REVOLUTE, Kinematics
from convexsim.multibody.model import JOINT_NV, MultibodyModel
from convexsim.sap.blocks import dense_cholesky_solve


@jit
def spatial_inertia_kernel(R_WB, p_WB, mass, com, inertia, out):
    """Spatial inertia about O in W of every body into out (nbody, 6, 6): with c = p + R·com and I_c = R I Rᵀ,
    [[I_c + m [c]×[c]×ᵀ, m [c]×], [m [c]×ᵀ, m 1]]. Scalar loops over two 3 × 3 work arrays (no allocation per
    body: the step calls this for every link)."""
    RI = np.empty((3, 3))
    cx = np.empty((3, 3))
    for b in range(mass.shape[0]):
        R = R_WB[b]
        c0 = p_WB[b, 0] + (R[0, 0] * com[b, 0] + R[0, 1] * com[b, 1] + R[0, 2] * com[b, 2])
        c1 = p_WB[b, 1] + (R[1, 0] * com[b, 0] + R[1, 1] * com[b, 1] + R[1, 2] * com[b, 2])
        c2 = p_WB[b, 2] + (R[2, 0] * com[b, 0] + R[2, 1] * com[b, 1] + R[2, 2] * com[b, 2])
        for r in range(3):
            for k in range(3):
                RI[r, k] = R[r, 0] * inertia[b, 0, k] + R[r, 1] * inertia[b, 1, k] + R[r, 2] * inertia[b, 2, k]
        cx[0, 0], cx[0, 1], cx[0, 2] = 0.0, -c2, c1
        cx[1, 0], cx[1, 1], cx[1, 2] = c2, 0.0, -c0
        cx[2, 0], cx[2, 1], cx[2, 2] = -c1, c0, 0.0
        m = mass[b]
        for r in range(3):
            for k in range(3):
                Ic = RI[r, 0] * R[k, 0] + RI[r, 1] * R[k, 1] + RI[r, 2] * R[k, 2]
                cc = cx[r, 0] * cx[k, 0] + cx[r, 1] * cx[k, 1] + cx[r, 2] * cx[k, 2]
                out[b, r, k] = Ic + m * cc
                out[b, r, 3 + k] = m * cx[r, k]
                out[b, 3 + r, k] = m * cx[k, r]
                out[b, 3 + r, 3 + k] = m if r == k else 0.0


@jit
def crba_kernel(parent, dofadr, nvj, S, Ib, M):
    """Composite-rigid-body algorithm: M (nv, nv) written (armature not included). Ib is overwritten
    with the composite inertias. F = I_b S_b and the blocks S_jᵀ F by scalar loops into one work array (no
    allocation per body)."""
    nb = parent.shape[0]
    M[:, :] = 0.0
    F = np.empty((6, 6))
    for b in range(nb - 1, -1, -1):
        n = nvj[b]
        if n > 0:
            d = dofadr[b]
            for r in range(6):
                for k in range(n):
                    acc = 0.0
                    for m in range(6):
                        acc += Ib[b, r, m] * S[m, d + k]
                    F[r, k] = acc
            for r in range(n):
                for k in range(r, n):      # the diagonal block, exactly symmetric: ½(Mbb + Mbbᵀ)
                    a_rk, a_kr = 0.0, 0.0
                    for m in range(6):
                        a_rk += S[m, d + r] * F[m, k]
                        a_kr += S[m, d + k] * F[m, r]
                    M[d + r, d + k] = 0.5 * (a_rk + a_kr)
                    M[d + k, d + r] = 0.5 * (a_kr + a_rk)
            j = parent[b]
            while j >= 0:
                nj = nvj[j]
                dj = dofadr[j]
                for r in range(nj):
                    for k in range(n):
                        acc = 0.0
                        for m in range(6):
                            acc += S[m, dj + r] * F[m, k]
                        M[dj + r, d + k] = acc
                        M[d + k, dj + r] = acc
                j = parent[j]
        p = parent[b]
        if p >= 0:
            for r in range(6):
                for k in range(6):
                    Ib[p, r, k] += Ib[b, r, k]


@jit(inline="always")
def _cross_motion_into(V, X, out):
    """out = V ×ₘ X for spatial motions (ω, v): (ω × ω₂, ω × v₂ + v × ω₂)."""
    out[0] = V[1] * X[2] - V[2] * X[1]
    out[1] = V[2] * X[0] - V[0] * X[2]
    out[2] = V[0] * X[1] - V[1] * X[0]
    out[3] = (V[1] * X[5] - V[2] * X[4]) + (V[4] * X[2] - V[5] * X[1])
    out[4] = (V[2] * X[3] - V[0] * X[5]) + (V[5] * X[0] - V[3] * X[2])
    out[5] = (V[0] * X[4] - V[1] * X[3]) + (V[3] * X[1] - V[4] * X[0])


@jit(inline="always")
def _cross_force_into(V, F, out):
    """out = V ×* F for a spatial force F = (n, f): (ω × n + v × f, ω × f)."""
    out[0] = (V[1] * F[2] - V[2] * F[1]) + (V[4] * F[5] - V[5] * F[4])
    out[1] = (V[2] * F[0] - V[0] * F[2]) + (V[5] * F[3] - V[3] * F[5])
    out[2] = (V[0] * F[1] - V[1] * F[0]) + (V[3] * F[4] - V[4] * F[3])
    out[3] = V[1] * F[5] - V[2] * F[4]
    out[4] = V[2] * F[3] - V[0] * F[5]
    out[5] = V[0] * F[4] - V[1] * F[3]


@jit
def rnea_kernel(parent, jtype, dofadr, nvj, S, Ib, v, a, gravity, f_ext, tau):
    """Recursive Newton–Euler: τ = M a + C v + g − Σ J_bᵀ f_ext,b, written into tau (nv,).

    f_ext (nbody, 6): external spatial forces on the bodies (world Plücker about O: (moment about O, force)).
    Per body, spatial motions (ω, v) and forces (n, f): V_b = V_p + S_b q̇_b, A_b = A_p + S_b q̈_b + c_b with
    c_b = V_p ×ₘ S_b q̇_b (revolute, prismatic, ball) or (0, v_b × ω_b) (a free joint's twist in its own
    coordinates), the root's A_p = (0, −g); f_b = I_b A_b + V_b ×* (I_b V_b) − f_ext,b; then τ_b = S_bᵀ f_b
    and f_p += f_b from the leaves to the root. Scalar loops over work arrays allocated once per call."""
    nb = parent.shape[0]
    V = np.zeros((nb, 6))
    A = np.zeros((nb, 6))
    f = np.zeros((nb, 6))
    Vp = np.zeros(6)
    vJ = np.empty(6)
    c = np.empty(6)
    IV = np.empty(6)
    for b in range(nb):
        p = parent[b]
        n = nvj[b]
        d = dofadr[b]
        t = jtype[b]
        for r in range(6):
            Vp[r] = V[p, r] if p >= 0 else 0.0
            acc = 0.0
            for k in range(n):
                acc += S[r, d + k] * v[d + k]
            vJ[r] = acc
            V[b, r] = Vp[r] + acc
        c[:] = 0.0
        if t == FREE:
            c[3] = v[d + 4] * v[d + 2] - v[d + 5] * v[d + 1]
            c[4] = v[d + 5] * v[d + 0] - v[d + 3] * v[d + 2]
            c[5] = v[d + 3] * v[d + 1] - v[d + 4] * v[d + 0]
        elif t == REVOLUTE or t == PRISMATIC or t == BALL:
            _cross_motion_into(Vp, vJ, c)
        for r in range(6):
            acc = 0.0
            for k in range(n):
                acc += S[r, d + k] * a[d + k]
            if p >= 0:
                ap = A[p, r]
            else:
                ap = -gravity[r - 3] if r >= 3 else 0.0
            A[b, r] = ap + acc + c[r]
        for r in range(6):
            acc = 0.0
            for k in range(6):
                acc += Ib[b, r, k] * V[b, k]
            IV[r] = acc
        _cross_force_into(V[b], IV, c)
        for r in range(6):
            acc = 0.0
            for k in range(6):
                acc += Ib[b, r, k] * A[b, k]
            f[b, r] = acc + c[r] - f_ext[b, r]
    for b in range(nb - 1, -1, -1):
        n = nvj[b]
        d = dofadr[b]
        for k in range(n):
            acc = 0.0
            for r in range(6):
                acc += S[r, d + k] * f[b, r]
            tau[d + k] = acc
        p = parent[b]
        if p >= 0:
            for r in range(6):
                f[p, r] += f[b, r]


@jit
def forest_free_motion(parent, jtype, dofadr, nvj, S, R_WB, p_WB, mass, com, inertia, armature, damping,
                       gravity, v, dt, tree_vstart, tree_nv, A, v_star):
    """A = M(q) + dt·D (nv, nv) and v* = v + dt·A⁻¹ (−C(q, v) v − g(q) − D v) of a forest, written
    (numba twin of ``reference_step.free_motion``; no applied torques). Several trees in one set of
    arrays (parents first, parent −1 = world) give a block-diagonal M; v* is solved tree by tree on
    the blocks ``tree_vstart[k] : tree_vstart[k] + tree_nv[k]``. Units: M [kg, kg·m, kg·m²], v [rad/s, m/s]."""
    nb = parent.shape[0]
    nv = v.shape[0]
    Ib = np.empty((nb, 6, 6))
    spatial_inertia_kernel(R_WB, p_WB, mass, com, inertia, Ib)
    Ic = Ib.copy()
    crba_kernel(parent, dofadr, nvj, S, Ic, A)
    for d in range(nv):
        A[d, d] += armature[d]
    for d in range(nv):
        A[d, d] += dt * damping[d]
    zero = np.zeros(nv)
    tau = np.empty(nv)
    rnea_kernel(parent, jtype, dofadr, nvj, S, Ib, v, zero, gravity, np.zeros((nb, 6)), tau)
    force = np.empty(nv)
    for d in range(nv):
        force[d] = -(tau[d] + armature[d] * 0.0) - damping[d] * v[d]
    x = np.empty(nv)
    solve_tree_blocks(A, force, tree_vstart, tree_nv, x)
    for d in range(nv):
        v_star[d] = v[d] + dt * x[d]


@jit
def solve_tree_blocks(A, rhs, tree_vstart, tree_nv, x):
    """x = A⁻¹ rhs (nv,) on the trees' diagonal blocks ``tree_vstart[k] : tree_vstart[k] + tree_nv[k]`` of the
    symmetric positive definite A = M(q) + dt·D (nv, nv) (zero off the blocks), by a Cholesky factor of each
    block (A is not written). A block that is not positive definite in double precision (its links' masses,
    inertias and lever arms spanning ~16 orders of magnitude: M is then singular to round-off) gets NaN in x,
    which the step reports (``stepping.status.STEP_SINGULAR_MASS``). Returns the first such tree, or −1. The
    numpy reference is ``numpy.linalg.solve`` on each block."""
    failed = -1
    for k in range(tree_nv.shape[0]):
        s, n = tree_vstart[k], tree_nv[k]
        if dense_cholesky_solve(A[s:s + n, s:s + n].copy(), rhs[s:s + n], x[s:s + n]) != 0:
            x[s:s + n] = np.nan
            if failed < 0:
                failed = k
    return failed


def spatial_inertias(model: MultibodyModel, kin: Kinematics) -> np.ndarray:
    """Spatial inertias about O in W, shape (nbody, 6, 6)."""
    out = np.empty((model.nbody, 6, 6))
    spatial_inertia_kernel(kin.R_WB, kin.p_WB, model.body_mass, model.body_com, model.body_inertia, out)
    return out


def _nvj(model: MultibodyModel) -> np.ndarray:
    return JOINT_NV[model.joint_type]


def mass_matrix(model: MultibodyModel, q, kin: Kinematics | None = None) -> np.ndarray:
    """M(q) (nv, nv) [kg, kg·m, kg·m²] by the composite-rigid-body algorithm, rotor armature included."""
    kin = kin or Kinematics(model, q)
    Ib = spatial_inertias(model, kin)
    M = np.empty((model.nv, model.nv))
    crba_kernel(model.parent, model.joint_dofadr, _nvj(model), kin.S, Ib, M)
    M[np.diag_indices(model.nv)] += model.dof_armature
    return M


def inverse_dynamics(model: MultibodyModel, q, v, a, f_ext=None, kin: Kinematics | None = None) -> np.ndarray:
    """τ = M(q) a + C(q, v) v + g(q) − Σ_b J_bᵀ f_ext,b [N·m or N] (RNEA; armature included, damping not).

    Args:
        f_ext: optional (nbody, 6) external spatial forces in world Plücker coordinates about O.
    """
    kin = kin or Kinematics(model, q)
    Ib = spatial_inertias(model, kin)
    v = np.ascontiguousarray(v, dtype=float)
    a = np.ascontiguousarray(a, dtype=float)
    fe = np.zeros((model.nbody, 6)) if f_ext is None else np.ascontiguousarray(f_ext, dtype=float)
    tau = np.empty(model.nv)
    rnea_kernel(model.parent, model.joint_type, model.joint_dofadr, _nvj(model), kin.S, Ib, v, a,
                np.ascontiguousarray(model.gravity, dtype=float), fe, tau)
    return tau + model.dof_armature * a


def bias_forces(model: MultibodyModel, q, v, kin: Kinematics | None = None) -> np.ndarray:
    """h(q, v) = C(q, v) v + g(q): inverse dynamics at zero acceleration."""
    return inverse_dynamics(model, q, v, np.zeros(model.nv), kin=kin)


def gravity_forces(model: MultibodyModel, q, kin: Kinematics | None = None) -> np.ndarray:
    """g(q) = ∂V/∂q in generalized forces: inverse dynamics at zero velocity and acceleration."""
    z = np.zeros(model.nv)
    return inverse_dynamics(model, q, z, z, kin=kin)


def unit_mass_model(model: MultibodyModel, b: int) -> MultibodyModel:
    """The model whose M and h are ∂M/∂m_b and ∂h/∂m_b of a mass change of body b at its fixed COM with its
    rotational inertia about the COM unchanged (a payload): body b alone with mass 1 kg, zero I_c, no other
    body, no armature. I_b (above) is linear in (m, I_c) at fixed c, and CRBA and RNEA are linear in the
    I_b, so :func:`mass_matrix` and :func:`bias_forces` of this model are the exact partials [m², m, 1;
    N·m/kg or N/kg]."""
    mass = np.zeros(model.nbody)
    mass[b] = 1.0
    return replace(model, body_mass=mass, body_inertia=np.zeros_like(model.body_inertia),
                   dof_armature=np.zeros(model.nv))


def body_spatial_mass(model: MultibodyModel, kin: Kinematics, b: int) -> np.ndarray:
    """M_b (6, 6) = diag(I_c,W, m·1₃) for the body's (ω, v_COM)."""
    R = kin.R_WB[b]
    M = np.zeros((6, 6))
    M[:3, :3] = R @ model.body_inertia[b] @ R.T
    M[3:, 3:] = model.body_mass[b] * np.eye(3)
    return M


def mass_matrix_reference(model: MultibodyModel, q) -> np.ndarray:
    """Σ_b J_bᵀ M_b J_b with J_b the (ω, v_COM) Jacobian of body b, plus armature (numpy reference)."""
    kin = Kinematics(model, q)
    M = np.diag(model.dof_armature.astype(float))
    for b in range(model.nbody):
        J = kin.spatial_jacobian(b, model.body_com[b])
        M += J.T @ body_spatial_mass(model, kin, b) @ J
    return M


def kinetic_energy(model: MultibodyModel, q, v) -> float:
    """T = ½ vᵀ M(q) v [J] (armature included)."""
    v = np.asarray(v, dtype=float)
    return 0.5 * float(v @ mass_matrix(model, q) @ v)


def potential_energy(model: MultibodyModel, q) -> float:
    """V = −Σ_b m_b gᵀ c_b [J] (gravity potential, zero at the world origin)."""
    kin = Kinematics(model, q)
    return -sum(float(model.body_mass[b] * model.gravity @ kin.com_position(b)) for b in range(model.nbody))


__all__ = [
    "bias_forces",
    "forest_free_motion",
    "solve_tree_blocks",
    "body_spatial_mass",
    "gravity_forces",
    "inverse_dynamics",
    "kinetic_energy",
    "mass_matrix",
    "mass_matrix_reference",
    "potential_energy",
    "spatial_inertias",
    "unit_mass_model",
]
