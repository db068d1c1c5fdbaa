"""Stage: the contact Jacobians, for free bodies and tree links, in the block and the dense layouts (one home).

With vc = (vt1, vt2, vn) the velocity of B relative to A at a contact, in its frame R_WC (normal last), a side
contributes ±J: side B with +, side A with −. The two side blocks, each one formula:

* a free body b (6 dofs, angular first): J = sign·R_WCᵀ[−[r]ₓ, 1₃], r = p − p_WB (``dynamics.jacobian_block``;
  numpy reference ``dynamics.contact_jacobian_blocks``);
* a link of a tree (the tree's n dofs): J = sign·R_WCᵀ J_P with J_P the point Jacobian of the link at p
  (``multibody.kinematics.path_point_jacobian``), :func:`link_jacobian_block`; numpy reference
  :func:`contact_jacobian` (both sides, the dense layout of the reference steps, SAP and LCP).

Layouts: the block layout of the SAP problem (``sap.ContactProblem``: per contact one 3 × n block per
participating clique, row-major, at ``J_ptr``), :func:`body_contact_blocks` for free-body models and
:func:`forest_contact_blocks` for models with trees; the dense layout of the LCP (J (m, 3, nv) over
v = (free bodies 6 by 6 | tree_v)), :func:`dense_contact_jacobian` for both LCP steps (numpy reference
``lcp_problem.dense_jacobian``).

A side on a kinematic body has no dofs; its block times the body's known velocity is a constant term of the
contact velocity, :func:`known_contact_velocities` (numpy reference ``dynamics.known_contact_velocity``).
"""

from __future__ import annotations

import numpy as np

from convexsim._jit import jit
from convexsim.dynamics import contact_frame, contact_jacobian_blocks, jacobian_block, known_contact_velocity
from convexsim.model import Contacts, Model, State
from convexsim.multibody.kinematics import path_point_jacobian
from convexsim.stepping.contacts import model_forest


@jit(inline="always")
def link_jacobian_block(R, Jp, sign, n, out, off):
    """J = sign·R_WCᵀ J_P (3 × n, row-major) at out[off:]: a link's contact Jacobian in the contact frame R
    (3, 3) from the point Jacobian Jp (3, ≥ n) of the link at the contact point."""
    for r in range(3):
        for j in range(n):
            acc = R[0, r] * Jp[0, j] + R[1, r] * Jp[1, j] + R[2, r] * Jp[2, j]
            out[off + r * n + j] = sign * acc


@jit(inline="always")
def known_contact_velocities(R_WC, geoms, point, q, v, geom_body, kinematic):
    """The known part b (nc, 3) of the contact velocities [m/s] (frame C, normal last): a side on a kinematic body
    k (``kinematic`` (nbody,) True) contributes ±R_WCᵀ[−[r]ₓ, 1₃]·v_k (side B +, side A −; the body block
    ``dynamics.jacobian_block`` times its velocity), so vc = J v + b; zeros elsewhere (numpy reference
    ``dynamics.known_contact_velocity``). The SAP rows shift their bias velocity v̂ by −b
    (``sap_rows.shift_known_velocity``), the LCP rows add b to q (``lcp_rows``)."""
    nc = geoms.shape[0]
    b = np.zeros((nc, 3))
    blk = np.empty(18)
    for c in range(nc):
        for s in range(2):
            body = geom_body[geoms[c, s]]
            if not kinematic[body]:
                continue
            jacobian_block(R_WC[c], point[c], q, body, 1.0 if s == 1 else -1.0, blk, 0)
            for r in range(3):
                acc = 0.0
                for j in range(6):
                    acc += blk[6 * r + j] * v[body, j]
                b[c, r] += acc
    return b


@jit(inline="always")
def body_contact_blocks(R_WC, geoms, point, q, geom_body, body_dof):
    """The block layout of the contacts of a free-body model: (cliques (nc, 2), J_ptr (nc, 2), J_values).

    A contact's first clique is body A's when A moves (block −J_A, then +J_B when B moves too), else body
    B's (+J_B); cliques are body_dof // 6, −1 for a side without one (and J_ptr −1)."""
    nc = geoms.shape[0]
    cliques = np.empty((nc, 2), np.int64)
    nside = 0
    for c in range(nc):
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
    J_ptr = np.empty((nc, 2), np.int64)
    off = 0
    for c in range(nc):
        a = geom_body[geoms[c, 0]]
        b = geom_body[geoms[c, 1]]
        J_ptr[c, 0] = off
        if body_dof[a] >= 0:
            jacobian_block(R_WC[c], point[c], q, a, -1.0, J_values, off)
            off += 18
            if cliques[c, 1] >= 0:
                J_ptr[c, 1] = off
                jacobian_block(R_WC[c], point[c], q, b, 1.0, J_values, off)
                off += 18
            else:
                J_ptr[c, 1] = -1
        else:
            jacobian_block(R_WC[c], point[c], q, b, 1.0, J_values, off)
            off += 18
            J_ptr[c, 1] = -1
    return cliques, J_ptr, J_values


@jit(inline="always")
def forest_contact_sides(geoms, geom_body, body_dof, body_tree, tree_clique, size_all):
    """The sides of each contact of a model with trees: (clique (nc, 2), body, sign, number of Jacobian
    entries). Side B (+) before side A (−), as the reference; a side without dofs is skipped; the two sides
    sorted by clique. Cliques: free bodies body_dof // 6, a tree's ``tree_clique``; ``size_all``: dofs per
    clique."""
    nc = geoms.shape[0]
    side_cl = -np.ones((nc, 2), np.int64)
    side_body = -np.ones((nc, 2), np.int64)
    side_sign = np.zeros((nc, 2))
    nJ = 0
    for c in range(nc):
        ns = 0
        for s in range(2):
            body = geom_body[geoms[c, 1 - s]]           # side B (+) first, then A (−), as the reference
            sign = 1.0 if s == 0 else -1.0
            cl = -1
            if body_dof[body] >= 0:
                cl = body_dof[body] // 6
            elif body_tree[body] >= 0:
                cl = tree_clique[body_tree[body]]
            if cl < 0:
                continue
            side_cl[c, ns], side_body[c, ns], side_sign[c, ns] = cl, body, sign
            nJ += 3 * size_all[cl]
            ns += 1
        if ns == 2 and side_cl[c, 1] < side_cl[c, 0]:
            x = side_cl[c, 0]
            side_cl[c, 0] = side_cl[c, 1]
            side_cl[c, 1] = x
            x = side_body[c, 0]
            side_body[c, 0] = side_body[c, 1]
            side_body[c, 1] = x
            x2 = side_sign[c, 0]
            side_sign[c, 0] = side_sign[c, 1]
            side_sign[c, 1] = x2
    return side_cl, side_body, side_sign, nJ


@jit(inline="always")
def forest_contact_blocks(fa, nmov, q, S, R_WC, point, side_cl, side_body, side_sign, new_index, J_values,
                          J_ptr, cl_red):
    """The block layout of the contacts of a model with trees over the sides of :func:`forest_contact_sides`:
    writes J_ptr[c], cl_red[c] (the participating clique, ``new_index``) and the blocks into J_values from 0;
    free bodies (cliques < nmov) by ``dynamics.jacobian_block``, links by :func:`link_jacobian_block` at the
    forest's motion subspaces S. Returns the next free offset of J_values."""
    parent, dofadr, nvj = fa[0], fa[6], fa[7]
    tree_vstart, tree_nv, body_tree, body_local = fa[14], fa[15], fa[17], fa[20]
    max_tree = 1
    for k in range(tree_nv.shape[0]):
        max_tree = max(max_tree, tree_nv[k])
    Jp = np.empty((3, max_tree))
    off = 0
    for c in range(side_cl.shape[0]):
        for s in range(2):
            cl = side_cl[c, s]
            if cl < 0:
                continue
            J_ptr[c, s] = off
            cl_red[c, s] = new_index[cl]
            body = side_body[c, s]
            sign = side_sign[c, s]
            if cl < nmov:
                jacobian_block(R_WC[c], point[c], q, body, sign, J_values, off)
                off += 18
            else:
                k = body_tree[body]
                n = tree_nv[k]
                path_point_jacobian(parent, dofadr, nvj, S, body_local[body], point[c, 0], point[c, 1],
                                    point[c, 2], tree_vstart[k], Jp)
                link_jacobian_block(R_WC[c], Jp, sign, n, J_values, off)
                off += 3 * n
    return off


@jit(inline="always")
def dense_contact_jacobian(R_WC, geoms, point, q, geom_body, body_dof, parent, dofadr, nvj, tree_vstart,
                           tree_nv, body_tree, body_local, S, nmov, J):
    """The dense layout: J[c] (3, nv) over v = (free bodies 6 by 6 | tree_v) added into J (zeros on entry):
    side B with +, side A with −; a side on a tree without dofs or on a fixed body contributes nothing
    (:func:`contact_jacobian`, ``lcp_problem.dense_jacobian``). A free-body model passes empty forest
    arrays and body_tree = −1."""
    max_tree = 1
    for k in range(tree_nv.shape[0]):
        max_tree = max(max_tree, tree_nv[k])
    Jp = np.empty((3, max_tree))
    blk = np.empty(max(18, 3 * max_tree))
    for c in range(geoms.shape[0]):
        for s in range(2):
            body = geom_body[geoms[c, 1 - s]]
            sign = 1.0 if s == 0 else -1.0
            if body_dof[body] >= 0:
                col0 = body_dof[body]
                jacobian_block(R_WC[c], point[c], q, body, sign, blk, 0)
                for r in range(3):
                    for j in range(6):
                        J[c, r, col0 + j] += blk[6 * r + j]
            elif body_tree[body] >= 0 and tree_nv[body_tree[body]] > 0:
                k = body_tree[body]
                n = tree_nv[k]
                path_point_jacobian(parent, dofadr, nvj, S, body_local[body], point[c, 0], point[c, 1],
                                    point[c, 2], tree_vstart[k], Jp)
                link_jacobian_block(R_WC[c], Jp, sign, n, blk, 0)
                col0 = 6 * nmov + tree_vstart[k]
                for r in range(3):
                    for j in range(n):
                        J[c, r, col0 + j] += blk[r * n + j]


@jit(inline="always")
def dense_contact_rows(mb, fa, nmov, q, S, geoms, point, normal, R_WC, J):
    """The contact frames R_WC (written, ``dynamics.contact_frame``) and the dense layout J (zeros on entry) of
    the contacts of a model with trees (``packing.PackedModel.model_arrays`` mb, ``PackedForest.fa`` fa, the
    forest's motion subspaces S at q₀): :func:`dense_contact_jacobian`."""
    for c in range(geoms.shape[0]):
        contact_frame(normal[c], R_WC[c])
    dense_contact_jacobian(R_WC, geoms, point, q, mb[9], mb[2], fa[0], fa[6], fa[7], fa[14], fa[15], fa[17],
                           fa[20], S, nmov, J)


# ---- numpy reference

def contact_jacobian(model: Model, state: State, system, contacts: Contacts,
                     R_WC: np.ndarray) -> tuple[np.ndarray, np.ndarray, list]:
    """(Jc dense (3 nc, nv), cliques (nc, 2), per-contact block tuples) of the reference steps, with vc = Jc v in
    the contact frames (normal last) over the step's v (``system``: the step's ``free_motion.ArticulatedSystem``):
    side B with +, side A with −. A free body's block is ``dynamics.contact_jacobian_blocks``'; a link's is
    R_WCᵀ J_P with J_P its point Jacobian (``Kinematics.spatial_jacobian``); a side on a fixed body or a tree
    without dofs has none."""
    nc = contacts.count
    nv = system.nv
    J_free = contact_jacobian_blocks(model, state.q, contacts, R_WC)     # (J_a, J_b)
    Jc = np.zeros((3 * nc, nv))
    cliques = -np.ones((nc, 2), dtype=np.int64)
    blocks = []
    free_index = {int(b): i for i, b in enumerate(system.free_bodies)}
    forest = model_forest(model)
    tree_of = forest.tree_of_body(model.nbody)
    local = {}
    for k, t in enumerate(forest.trees):
        for i, b in enumerate(t.bodies):
            local[int(b)] = (k, i)
    for c in range(nc):
        sides = []
        for body, sign, side in ((int(contacts.body_b[c]), 1.0, 1), (int(contacts.body_a[c]), -1.0, 0)):
            Rt = R_WC[c].T
            p = contacts.point[c]
            if body in free_index:
                blk = J_free[side][c]
                cl = free_index[body]
            elif tree_of[body] >= 0:
                k, i = local[body]
                cl = system.tree_clique[k]
                if cl < 0:
                    continue
                kin = system.kins[k]
                p_B = kin.R_WB[i].T @ (p - kin.p_WB[i])
                blk = sign * (Rt @ kin.spatial_jacobian(i, p_B)[3:])
            else:
                continue
            sides.append((cl, blk))
        sides.sort(key=lambda s: s[0])
        for j, (cl, blk) in enumerate(sides):
            cliques[c, j] = cl
            s0 = system.clique_start[cl]
            Jc[3 * c:3 * c + 3, s0:s0 + blk.shape[1]] += blk
        blocks.append(tuple(blk for _, blk in sides))
    return Jc, cliques, blocks


def known_velocity(model: Model, state: State, contacts: Contacts, R_WC: np.ndarray) -> np.ndarray | None:
    """The kinematic bodies' known contact velocities b (nc, 3) [m/s] of the reference steps
    (``dynamics.known_contact_velocity``; the compiled form :func:`known_contact_velocities`), None for a model
    without kinematic bodies."""
    if not model.kinematic_bodies.size:
        return None
    return known_contact_velocity(model, state.q, state.v, contacts, R_WC)


__all__ = ["known_contact_velocities", "link_jacobian_block", "dense_contact_rows", "body_contact_blocks", "forest_contact_sides", "forest_contact_blocks",
           "dense_contact_jacobian", "contact_jacobian", "known_velocity"]
