"""Forward kinematics, motion subspaces, Jacobians and configuration arithmetic of a tree.

Spatial vectors are Plücker coordinates in the world frame W about the world origin O
(Featherstone, *Rigid Body Dynamics Algorithms*, ch. 2): a motion V = (ω, v_O) with v_O the velocity of
the body-fixed point that is momentarily at O, so the velocity of a body point at p is v_O + ω × p.
Working in one fixed frame, no coordinate transforms are needed between bodies: the velocity of body b
is V_b = V_parent(b) + S_b v_b with the joint's motion subspace S_b (6 × nv_b, world coordinates):

    REVOLUTE   S = (u, p_WB × u),  u = R_WJ a   (the axis line passes through B's origin)
    PRISMATIC  S = (0, R_WJ a)
    BALL       S_k = (u_k, p_WB × u_k),  u_k = R_WJ e_k   (k = 1, 2, 3; ω expressed in J)
    FREE       S = [(e_k, p_WB × e_k) for ω_k] + [(0, e_k) for the origin velocity]   (J = W)

so the Jacobian of body b is J_b = Σ over the joints on its path to the world of S_j in j's columns.
The numba kernels here are checked against the numpy reference :func:`forward_kinematics_reference`.
"""

from __future__ import annotations

import math

import numpy as np

from convexsim._jit import jit
from convexsim.geometry.transforms import quat_exp_times, quat_to_rot, rot_to_quat
from convexsim.multibody.model import JointType, MultibodyModel
from convexsim.spatial import quat_exp, quat_log, quat_multiply, quat_to_matrix, skew

FIXED, REVOLUTE, PRISMATIC, BALL, FREE = (int(t) for t in JointType)


@jit(inline="always")
def _axis_rotation_into(ax: float, ay: float, az: float, theta: float, R) -> None:
    """Rodrigues: R (3, 3) = the rotation by θ [rad] about the unit axis (ax, ay, az), written."""
    c, s = math.cos(theta), math.sin(theta)
    C = 1.0 - c
    R[0, 0], R[0, 1], R[0, 2] = c + ax * ax * C, ax * ay * C - az * s, ax * az * C + ay * s
    R[1, 0], R[1, 1], R[1, 2] = ay * ax * C + az * s, c + ay * ay * C, ay * az * C - ax * s
    R[2, 0], R[2, 1], R[2, 2] = az * ax * C - ay * s, az * ay * C + ax * s, c + az * az * C


@jit(inline="always")
def _matmul3_into(A, B, out) -> None:
    """out = A B for 3 × 3 matrices by explicit loops (k ascending; a numba ``@`` calls BLAS, whose call costs more
    than the product at this size); out must not alias A or B."""
    for i in range(3):
        for j in range(3):
            acc = 0.0
            for k in range(3):
                acc += A[i, k] * B[k, j]
            out[i, j] = acc


@jit
def fk_kernel(parent, jtype, axis, jpos, jrot, qadr, q, R_WB, p_WB, R_WJ):
    """World poses of every body (R_WB, p_WB) and joint frame orientations R_WJ, written in place.

    X_WB = X_WP · X_PJ · X_JB(q_b), parents first (the world's pose for a root: identity). Products by scalar
    loops into work arrays allocated once per call (ball and free joints: one rotation matrix each)."""
    eye = np.eye(3)
    zero = np.zeros(3)
    Rq = np.empty((3, 3))
    for b in range(parent.shape[0]):
        p = parent[b]
        RP = eye if p < 0 else R_WB[p]
        pP = zero if p < 0 else p_WB[p]
        RJ = R_WJ[b]
        _matmul3_into(RP, jrot[b], RJ)
        pj0 = pP[0] + (RP[0, 0] * jpos[b, 0] + RP[0, 1] * jpos[b, 1] + RP[0, 2] * jpos[b, 2])
        pj1 = pP[1] + (RP[1, 0] * jpos[b, 0] + RP[1, 1] * jpos[b, 1] + RP[1, 2] * jpos[b, 2])
        pj2 = pP[2] + (RP[2, 0] * jpos[b, 0] + RP[2, 1] * jpos[b, 1] + RP[2, 2] * jpos[b, 2])
        t = jtype[b]
        a = qadr[b]
        if t == REVOLUTE:
            _axis_rotation_into(axis[b, 0], axis[b, 1], axis[b, 2], q[a], Rq)
            _matmul3_into(RJ, Rq, R_WB[b])
        elif t == BALL:
            _matmul3_into(RJ, quat_to_rot(q[a], q[a + 1], q[a + 2], q[a + 3]), R_WB[b])
        elif t == FREE:
            _matmul3_into(RJ, quat_to_rot(q[a + 3], q[a + 4], q[a + 5], q[a + 6]), R_WB[b])
        else:
            R_WB[b, :, :] = RJ
        if t == PRISMATIC:
            x = q[a]
            pj0 += x * (RJ[0, 0] * axis[b, 0] + RJ[0, 1] * axis[b, 1] + RJ[0, 2] * axis[b, 2])
            pj1 += x * (RJ[1, 0] * axis[b, 0] + RJ[1, 1] * axis[b, 1] + RJ[1, 2] * axis[b, 2])
            pj2 += x * (RJ[2, 0] * axis[b, 0] + RJ[2, 1] * axis[b, 1] + RJ[2, 2] * axis[b, 2])
        elif t == FREE:
            pj0 += RJ[0, 0] * q[a] + RJ[0, 1] * q[a + 1] + RJ[0, 2] * q[a + 2]
            pj1 += RJ[1, 0] * q[a] + RJ[1, 1] * q[a + 1] + RJ[1, 2] * q[a + 2]
            pj2 += RJ[2, 0] * q[a] + RJ[2, 1] * q[a + 1] + RJ[2, 2] * q[a + 2]
        p_WB[b, 0], p_WB[b, 1], p_WB[b, 2] = pj0, pj1, pj2


@jit
def _cross_into(a0, a1, a2, b0, b1, b2, out, k):
    out[k] = a1 * b2 - a2 * b1
    out[k + 1] = a2 * b0 - a0 * b2
    out[k + 2] = a0 * b1 - a1 * b0


@jit
def subspace_kernel(jtype, axis, dofadr, R_WJ, p_WB, S):
    """Motion subspaces of all joints into the columns of S (6, nv), world Plücker coordinates about O."""
    col = np.empty(6)
    for b in range(jtype.shape[0]):
        t = jtype[b]
        d = dofadr[b]
        p = p_WB[b]
        if t == REVOLUTE or t == PRISMATIC:
            R = R_WJ[b]
            u0 = R[0, 0] * axis[b, 0] + R[0, 1] * axis[b, 1] + R[0, 2] * axis[b, 2]
            u1 = R[1, 0] * axis[b, 0] + R[1, 1] * axis[b, 1] + R[1, 2] * axis[b, 2]
            u2 = R[2, 0] * axis[b, 0] + R[2, 1] * axis[b, 1] + R[2, 2] * axis[b, 2]
            if t == REVOLUTE:
                col[0], col[1], col[2] = u0, u1, u2
                _cross_into(p[0], p[1], p[2], u0, u1, u2, col, 3)
            else:
                col[0] = col[1] = col[2] = 0.0
                col[3], col[4], col[5] = u0, u1, u2
            S[:, d] = col
        elif t == BALL or t == FREE:
            for k in range(3):
                if t == BALL:
                    u0, u1, u2 = R_WJ[b, 0, k], R_WJ[b, 1, k], R_WJ[b, 2, k]
                else:
                    u0, u1, u2 = (1.0 if k == 0 else 0.0), (1.0 if k == 1 else 0.0), (1.0 if k == 2 else 0.0)
                col[0], col[1], col[2] = u0, u1, u2
                _cross_into(p[0], p[1], p[2], u0, u1, u2, col, 3)
                S[:, d + k] = col
            if t == FREE:
                for k in range(3):
                    for r in range(6):
                        S[r, d + 3 + k] = 0.0
                    S[3 + k, d + 3 + k] = 1.0


@jit
def path_point_jacobian(parent, dofadr, nvj, S, body, px, py, pz, dof0, out):
    """J (3, n) with v_P = J v[dof0:dof0 + n] for the point momentarily at p = (px, py, pz) [m] (world) and
    fixed in ``body``: column d = S_lin,d − p × S_ang,d over the dofs of the joints on the body's path to
    the world, zero elsewhere (:meth:`Kinematics.spatial_jacobian`, linear rows). ``out`` is written."""
    out[:, :] = 0.0
    b = body
    while b >= 0:
        d = dofadr[b]
        for k in range(nvj[b]):
            col = d + k
            a0, a1, a2 = S[0, col], S[1, col], S[2, col]
            c = col - dof0
            out[0, c] = S[3, col] - (py * a2 - pz * a1)
            out[1, c] = S[4, col] - (pz * a0 - px * a2)
            out[2, c] = S[5, col] - (px * a1 - py * a0)
        b = parent[b]


@jit
def integrate_q_kernel(jtype, qadr, dofadr, q, v, dt, q_out):
    """q_out = q advanced by dt at constant v (numba twin of :func:`integrate_q`): 1-dof joints q + dt v;
    quaternions exp(dt ω) ⊗ quat renormalized (``geometry.transforms.quat_exp_times``); FREE positions p + dt ṗ."""
    for i in range(q.shape[0]):
        q_out[i] = q[i]
    for b in range(jtype.shape[0]):
        t, a, d = jtype[b], qadr[b], dofadr[b]
        if t == REVOLUTE or t == PRISMATIC:
            q_out[a] = q[a] + dt * v[d]
        elif t == BALL or t == FREE:
            qa = a + 3 if t == FREE else a
            w, x, y, z = quat_exp_times(dt * v[d], dt * v[d + 1], dt * v[d + 2], q[qa], q[qa + 1], q[qa + 2],
                                        q[qa + 3])
            q_out[qa], q_out[qa + 1], q_out[qa + 2], q_out[qa + 3] = w, x, y, z
            if t == FREE:
                for k in range(3):
                    q_out[a + k] = q[a + k] + dt * v[d + 3 + k]


@jit
def link_rows_kernel(parent, dofadr, nvj, com, R_WB, p_WB, S, v, link_body, body_q, body_v):
    """Every forest body's row of body_q (COM position, quaternion of R_WB) and body_v (ω_W, v_COM,W) from
    the forest's kinematics at q (R_WB, p_WB, S) and its velocities v; row ``link_body[b]`` for forest body b
    (the numba twin of ``multibody.forest.link_rows``)."""
    J = np.empty((3, v.shape[0]))
    quat = np.empty(4)
    for b in range(parent.shape[0]):
        m = link_body[b]
        R = R_WB[b]
        for i in range(3):                # the COM c = p_WB + R_WB com (scalar loops: no BLAS call per body)
            body_q[m, i] = p_WB[b, i] + (R[i, 0] * com[b, 0] + R[i, 1] * com[b, 1] + R[i, 2] * com[b, 2])
        c0, c1, c2 = body_q[m, 0], body_q[m, 1], body_q[m, 2]
        rot_to_quat(R, quat)
        for i in range(4):
            body_q[m, 3 + i] = quat[i]
        w0 = 0.0
        w1 = 0.0
        w2 = 0.0
        j = b
        while j >= 0:
            for k in range(nvj[j]):
                col = dofadr[j] + k
                w0 += S[0, col] * v[col]
                w1 += S[1, col] * v[col]
                w2 += S[2, col] * v[col]
            j = parent[j]
        path_point_jacobian(parent, dofadr, nvj, S, b, c0, c1, c2, 0, J)
        body_v[m, 0], body_v[m, 1], body_v[m, 2] = w0, w1, w2
        for i in range(3):
            acc = 0.0
            for col in range(v.shape[0]):
                acc += J[i, col] * v[col]
            body_v[m, 3 + i] = acc


class Kinematics:
    """Poses and motion subspaces of every body of a tree at one configuration q.

    Attributes: ``R_WB`` (nbody, 3, 3), ``p_WB`` (nbody, 3) [m] (body frame origins), ``R_WJ`` (nbody, 3, 3),
    ``S`` (6, nv) motion subspaces (world Plücker about O), ``q`` (nq,).
    """

    def __init__(self, model: MultibodyModel, q):
        q = np.ascontiguousarray(q, dtype=float)
        if q.shape != (model.nq,):
            raise ValueError(f"q has shape {q.shape}, the model has nq = {model.nq}")
        nb = model.nbody
        self.model = model
        self.q = q
        self.R_WB = np.empty((nb, 3, 3))
        self.p_WB = np.empty((nb, 3))
        self.R_WJ = np.empty((nb, 3, 3))
        fk_kernel(model.parent, model.joint_type, model.joint_axis, model.joint_pos, model.joint_rot,
                  model.joint_qadr, q, self.R_WB, self.p_WB, self.R_WJ)
        self.S = np.zeros((6, model.nv))
        subspace_kernel(model.joint_type, model.joint_axis, model.joint_dofadr, self.R_WJ, self.p_WB, self.S)

    def point_position(self, body: int, p_BP) -> np.ndarray:
        """p_WP [m] of the point fixed in ``body`` at p_BP (in B)."""
        return self.p_WB[body] + self.R_WB[body] @ np.asarray(p_BP, dtype=float)

    def com_position(self, body: int) -> np.ndarray:
        return self.point_position(body, self.model.body_com[body])

    def body_plucker_jacobian(self, body: int) -> np.ndarray:
        """J (6, nv) with V_body = (ω, v_O) = J v in world Plücker coordinates about O."""
        J = np.zeros((6, self.model.nv))
        m = self.model
        b = body
        while b >= 0:
            d, n = m.joint_dofadr[b], m.joint_nv(b)
            J[:, d:d + n] = self.S[:, d:d + n]
            b = m.parent[b]
        return J

    def spatial_jacobian(self, body: int, p_BP=(0.0, 0.0, 0.0)) -> np.ndarray:
        """J (6, nv) with (ω_W, v_P_W) = J v: angular velocity of ``body`` and velocity of its point P.

        v_P = v_O + ω × p_WP = J_lin v − [p_WP]ₓ J_ang v.
        """
        J = self.body_plucker_jacobian(body)
        p = self.point_position(body, p_BP)
        J[3:] -= skew(p) @ J[:3]
        return J

    def point_jacobian(self, body: int, p_BP=(0.0, 0.0, 0.0)) -> np.ndarray:
        """J (3, nv) with v_P_W = J v for the point P fixed in ``body`` at p_BP (in B)."""
        return self.spatial_jacobian(body, p_BP)[3:]


def forward_kinematics(model: MultibodyModel, q) -> tuple[np.ndarray, np.ndarray]:
    """World poses of the body frames: (R_WB (nbody, 3, 3), p_WB (nbody, 3) [m])."""
    k = Kinematics(model, q)
    return k.R_WB, k.p_WB


def joint_transform_reference(model: MultibodyModel, b: int, q) -> tuple[np.ndarray, np.ndarray]:
    """(R_JB, p_JB) of joint b at q, numpy (reference for the kernel)."""
    t, a = model.joint_type[b], model.joint_qadr[b]
    if t == REVOLUTE:
        return quat_to_matrix(quat_exp(q[a] * model.joint_axis[b])), np.zeros(3)
    if t == PRISMATIC:
        return np.eye(3), q[a] * model.joint_axis[b]
    if t == BALL:
        return quat_to_matrix(q[a:a + 4]), np.zeros(3)
    if t == FREE:
        return quat_to_matrix(q[a + 3:a + 7]), np.asarray(q[a:a + 3], dtype=float)
    return np.eye(3), np.zeros(3)


def forward_kinematics_reference(model: MultibodyModel, q) -> tuple[np.ndarray, np.ndarray]:
    """numpy twin of the forward-kinematics kernel (Rodrigues through ``quat_exp``)."""
    nb = model.nbody
    R_WB, p_WB = np.empty((nb, 3, 3)), np.empty((nb, 3))
    for b in range(nb):
        p = model.parent[b]
        RP, pP = (np.eye(3), np.zeros(3)) if p < 0 else (R_WB[p], p_WB[p])
        R_JB, p_JB = joint_transform_reference(model, b, q)
        RJ = RP @ model.joint_rot[b]
        R_WB[b] = RJ @ R_JB
        p_WB[b] = pP + RP @ model.joint_pos[b] + RJ @ p_JB
    return R_WB, p_WB


# ------------------------------------------------------------------------------ configuration arithmetic

def _quat_conj(quat) -> np.ndarray:
    return np.array([quat[0], -quat[1], -quat[2], -quat[3]])


def _joint_coordinates(model: MultibodyModel):
    """The configuration layout joint by joint: (a, d, qa, free) with a, d the joint's first q and v index, qa the
    index of its quaternion (−1 for a 1-dof joint: q[a] pairs with v[d]) and free whether a FREE joint's position
    q[a:a+3] (paired with v[d+3:d+6]) precedes it; ω = v[d:d+3]. Fixed joints are skipped."""
    for b in range(model.nbody):
        t, a, d = model.joint_type[b], model.joint_qadr[b], model.joint_dofadr[b]
        if t in (REVOLUTE, PRISMATIC):
            yield a, d, -1, False
        elif t in (BALL, FREE):
            yield a, d, a + (3 if t == FREE else 0), t == FREE


def integrate_q(model: MultibodyModel, q, v, dt: float) -> np.ndarray:
    """q advanced by dt with constant generalized velocity v (the exponential map per joint).

    1-dof joints: q ← q + dt·v. Quaternions: quat ← exp(dt·ω/2) ⊗ quat with ω in J (left product, as for
    convexsim's free bodies), then renormalized. FREE positions: p ← p + dt·ṗ.
    """
    q_new = np.array(q, dtype=float)
    v = np.asarray(v, dtype=float)
    for a, d, qa, free in _joint_coordinates(model):
        if qa < 0:
            q_new[a] += dt * v[d]
            continue
        quat = quat_multiply(quat_exp(dt * v[d:d + 3]), q_new[qa:qa + 4])
        q_new[qa:qa + 4] = quat / np.linalg.norm(quat)
        if free:
            q_new[a:a + 3] += dt * v[d + 3:d + 6]
    return q_new


def qdot(model: MultibodyModel, q, v) -> np.ndarray:
    """q̇ = N(q)·v: 1-dof joints q̇ = v; quaternions q̇uat = ½ (0, ω) ⊗ quat; FREE ṗ = v_lin."""
    q = np.asarray(q, dtype=float)
    v = np.asarray(v, dtype=float)
    out = np.zeros(model.nq)
    for a, d, qa, free in _joint_coordinates(model):
        if qa < 0:
            out[a] = v[d]
            continue
        out[qa:qa + 4] = 0.5 * quat_multiply(np.concatenate([[0.0], v[d:d + 3]]), q[qa:qa + 4])
        if free:
            out[a:a + 3] = v[d + 3:d + 6]
    return out


def difference(model: MultibodyModel, q0, q1) -> np.ndarray:
    """The velocity v (nv,) with integrate_q(q0, v, 1) = q1: per quaternion ω = log(quat1 ⊗ quat0⁻¹)."""
    q0 = np.asarray(q0, dtype=float)
    q1 = np.asarray(q1, dtype=float)
    v = np.zeros(model.nv)
    for a, d, qa, free in _joint_coordinates(model):
        if qa < 0:
            v[d] = q1[a] - q0[a]
            continue
        v[d:d + 3] = quat_log(quat_multiply(q1[qa:qa + 4], _quat_conj(q0[qa:qa + 4])))
        if free:
            v[d + 3:d + 6] = q1[a:a + 3] - q0[a:a + 3]
    return v


def normalize_q(model: MultibodyModel, q) -> np.ndarray:
    """q with every quaternion scaled to unit norm."""
    q = np.array(q, dtype=float)
    for _, _, qa, _ in _joint_coordinates(model):
        if qa >= 0:
            q[qa:qa + 4] /= np.linalg.norm(q[qa:qa + 4])
    return q


__all__ = [
    "Kinematics",
    "difference",
    "fk_kernel",
    "forward_kinematics",
    "forward_kinematics_reference",
    "integrate_q",
    "integrate_q_kernel",
    "path_point_jacobian",
    "joint_transform_reference",
    "link_rows_kernel",
    "normalize_q",
    "qdot",
    "subspace_kernel",
]
