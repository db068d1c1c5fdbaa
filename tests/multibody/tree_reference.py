"""Independent numpy references for the tree kernels' stages (forward kinematics, Jacobians, M, the bias
forces, the free motion, the joint rows), written from the definitions and sharing no code with the kernels:

* poses: ``multibody.kinematics.forward_kinematics_reference`` (numpy, Rodrigues through ``quat_exp``; not the
  kernel) and ``integrate_q`` (numpy exponential map per joint; not ``integrate_q_kernel``);
* Jacobians: per joint on the path, ω column = the world joint axis, linear column = axis × (p − joint
  origin) (prismatic: the axis), checked against central differences of the reference poses;
* M = Σ_b J_bᵀ diag(I_b,W, m_b 1₃) J_b + diag(armature), J_b the (ω, v_COM) Jacobian of body b;
* bias h(q, v) = Σ_b J_bᵀ (M_b J̇_b v + (ω_b × I_b,W ω_b, 0)) − Σ_b J_b,linᵀ m_b g (Newton–Euler summed
  over the bodies), J̇_b v by central differences along q(t ± ε) = integrate_q(q, ±v, ε): O(ε²);
* the joint rows' (R, v̂, box) from the closed forms of the SAP paper (convexsim.sap.joint_constraints
  module docstring), evaluated here in plain Python.
"""

from __future__ import annotations

import math

import numpy as np

from convexsim.multibody.kinematics import forward_kinematics_reference, integrate_q
from convexsim.multibody.model import JointType

EPS_FD = 1e-5
"""Central-difference step [rad, m or s]: truncation ~ε²·(third derivative) ≈ 1e-10, round-off ~1e-16/ε."""
BETA = 0.1
"""The near-rigid factor of joint rows (SAP paper §V; Drake's value)."""


def frames(m, q):
    """(R_WB, p_WB, R_WJ) of every body from the reference forward kinematics; R_WJ = R_WP · R_PJ."""
    R_WB, p_WB = forward_kinematics_reference(m, np.asarray(q, float))
    R_WJ = np.array([(np.eye(3) if m.parent[b] < 0 else R_WB[m.parent[b]]) @ m.joint_rot[b]
                     for b in range(m.nbody)])
    return R_WB, p_WB, R_WJ


def jacobian(m, q, body: int, p_W, fr=None) -> np.ndarray:
    """(6, nv): rows 0-2 ω of ``body``, rows 3-5 the velocity of the world point p_W moving with it."""
    R_WB, p_WB, R_WJ = frames(m, q) if fr is None else fr
    J = np.zeros((6, m.nv))
    a = body
    while a >= 0:
        t, d, o = JointType(int(m.joint_type[a])), int(m.joint_dofadr[a]), p_WB[a]
        if t == JointType.REVOLUTE:
            w = R_WJ[a] @ m.joint_axis[a]
            J[:3, d], J[3:, d] = w, np.cross(w, p_W - o)
        elif t == JointType.PRISMATIC:
            J[3:, d] = R_WJ[a] @ m.joint_axis[a]
        elif t in (JointType.BALL, JointType.FREE):
            for k in range(3):
                w = R_WJ[a][:, k]
                J[:3, d + k], J[3:, d + k] = w, np.cross(w, p_W - o)
                if t == JointType.FREE:
                    J[3:, d + 3 + k] = R_WJ[a][:, k]
        a = int(m.parent[a])
    return J


def jacobian_fd(m, q, body: int, p_B) -> np.ndarray:
    """The same (6, nv) Jacobian (point p_B fixed in ``body``) by central differences of the poses."""
    J = np.zeros((6, m.nv))
    for i in range(m.nv):
        e = np.zeros(m.nv)
        e[i] = 1.0
        (Rp, pp, _), (Rm, pm, _) = (frames(m, integrate_q(m, q, s * e, EPS_FD)) for s in (1.0, -1.0))
        dR = (Rp[body] @ Rm[body].T - Rm[body] @ Rp[body].T) / 2.0        # ≈ [2ε ω]ₓ
        J[:3, i] = np.array([dR[2, 1], dR[0, 2], dR[1, 0]]) / (2 * EPS_FD)
        J[3:, i] = ((pp[body] + Rp[body] @ p_B) - (pm[body] + Rm[body] @ p_B)) / (2 * EPS_FD)
    return J


def _com_jacobians(m, q):
    fr = frames(m, q)
    R_WB, p_WB, _ = fr
    return [jacobian(m, q, b, p_WB[b] + R_WB[b] @ m.body_com[b], fr) for b in range(m.nbody)], R_WB


def mass_matrix(m, q) -> np.ndarray:
    """M(q) = Σ_b J_bᵀ diag(R I_c Rᵀ, m 1₃) J_b + diag(armature) [kg·m², kg·m, kg]."""
    Js, R_WB = _com_jacobians(m, q)
    M = np.diag(np.asarray(m.dof_armature, float))
    for b, J in enumerate(Js):
        Mb = np.zeros((6, 6))
        Mb[:3, :3] = R_WB[b] @ m.body_inertia[b] @ R_WB[b].T
        Mb[3:, 3:] = m.body_mass[b] * np.eye(3)
        M += J.T @ Mb @ J
    return M


def bias_forces(m, q, v) -> np.ndarray:
    """h(q, v) with M v̇ + h = τ [N·m or N]: Coriolis/centrifugal (J̇ v by central differences) minus gravity."""
    v = np.asarray(v, float)
    Js, R_WB = _com_jacobians(m, q)
    (Jp, _), (Jm, _) = (_com_jacobians(m, integrate_q(m, q, s * v, EPS_FD)) for s in (1.0, -1.0))
    h = np.zeros(m.nv)
    for b, J in enumerate(Js):
        I_W = R_WB[b] @ m.body_inertia[b] @ R_WB[b].T
        w = J[:3] @ v
        Jdot_v = (Jp[b] - Jm[b]) @ v / (2 * EPS_FD)
        wrench = np.concatenate([I_W @ Jdot_v[:3] + np.cross(w, I_W @ w),
                                 m.body_mass[b] * (Jdot_v[3:] - m.gravity)])
        h += J.T @ wrench
    return h


def free_motion(m, q, v, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """(A, v*) = (M + dt·D, v + dt·A⁻¹(−h − D v)) with D = diag(damping)."""
    D = np.asarray(m.dof_damping, float)
    A = mass_matrix(m, q) + dt * np.diag(D)
    return A, v + dt * np.linalg.solve(A, -bias_forces(m, q, v) - D * v)


# ------------------------------------------------------------------------------------------- joint rows

def _r_near_rigid(w: float) -> float:
    return BETA * BETA * w / (4 * math.pi ** 2)


def holonomic(dt: float, g: float, w: float, k: float, tau: float) -> tuple[float, float]:
    """(R, v̂): R = max(1/(dt (dt + τ) k), β² w/(4π²)) (τ := dt when the second wins), v̂ = −g/(dt + τ)."""
    r_c = 0.0 if math.isinf(k) else 1.0 / (dt * (dt + tau) * k)
    if r_c < _r_near_rigid(w):
        return _r_near_rigid(w), -g / (2 * dt)
    return r_c, -g / (dt + tau)


def pd(dt: float, q0: float, q_d: float, v_d: float, u_ff: float, kp: float, kd: float, w: float):
    """(R, v̂) of a PD row: R = 1/(dt c), v̂ = (−Kp (q0 − q_d) + Kd v_d + u_ff)/c, c = dt Kp + Kd, with both gains
    scaled by one factor when R would fall below the near-rigid R (the ratio Kd/Kp kept)."""
    c = dt * kp + kd
    if 1.0 / (dt * c) < _r_near_rigid(w):
        s = 1.0 / (dt * c * _r_near_rigid(w))
        kp, kd, c = s * kp, s * kd, s * c
    return 1.0 / (dt * c), (-kp * (q0 - q_d) + kd * v_d + u_ff) / c


def joint_rows(tree, q, v, A, v_star, dt: float, t: float, limit_stiffness: float = 1e12):
    """[(kind, J row (nv,), (R, v̂, lo, hi))] of one tree's 1-dof limits (a side enters when q0 is beyond it
    or within 2·dt·max(|v0|, |v*|) of it), PD actuators and couplers, in that order."""
    m = tree.model
    Ad = np.diag(A)
    rows = []

    def unit(joint, scale=1.0, out=None):
        out = np.zeros(m.nv) if out is None else out
        out[int(m.joint_dofadr[joint])] += scale
        return out

    for lim in tree.limits:
        qa, d = int(m.joint_qadr[lim.joint]), int(m.joint_dofadr[lim.joint])
        for side, bound in ((1.0, lim.lower), (-1.0, lim.upper)):
            gap = side * (q[qa] - bound)
            if math.isfinite(bound) and gap <= 2 * dt * max(abs(v[d]), abs(v_star[d])):
                J = unit(lim.joint, side)
                R, vh = holonomic(dt, gap, float(J @ (J / Ad)), limit_stiffness, dt)
                rows.append((10, J, (R, vh, 0.0, math.inf)))
    for a in tree.actuators:
        q_d, v_d = a.target(t)
        J = unit(a.joint)
        R, vh = pd(dt, q[int(m.joint_qadr[a.joint])], q_d, v_d, a.u_ff, a.kp, a.kd, float(J @ (J / Ad)))
        rows.append((12, J, (R, vh, -dt * a.effort, dt * a.effort)))
    for cp in tree.couplers:
        J = unit(cp.joint_j, -cp.rho, unit(cp.joint_i))
        g = q[int(m.joint_qadr[cp.joint_i])] - cp.rho * q[int(m.joint_qadr[cp.joint_j])] - cp.offset
        R, vh = holonomic(dt, g, float(J @ (J / Ad)), math.inf, 0.0)
        rows.append((11, J, (R, vh, -math.inf, math.inf)))
    return rows
