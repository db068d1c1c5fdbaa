"""The forest stages of the SAP reference step (``stepping.sap_stepper.sap_step``): the step's unconstrained
dynamics and rows, its contacts, the contact Jacobians over the global v, the row forces and the end of the
step, for any model: free bodies are a forest without joints (no trees, no rows).

Generalized velocities, cliques and constraints of the step:

* v = (free bodies' (ω, v) 6 by 6 | tree 0's joint velocities | tree 1's | ...); every free body is one
  6-dof clique (A = its spatial mass, v* as in convexsim.dynamics.free_motion), every tree with dofs is
  one clique with the dense block A = M(q0) + dt·D and v* = v0 + dt A⁻¹(τ − C v0 − g − D v0) (CRBA and
  RNEA, convexsim.multibody; τ from a controller's torques).
* contacts (3 rows each) found at q0 as in the free-body step, except that links of the same tree do not
  collide with each other; a contact point P on link b of a tree has the Jacobian R_WCᵀ J_P with J_P the
  point Jacobian of P in the tree's generalized velocities (Kinematics.spatial_jacobian), on a free body
  the usual 3×6 block.
* joint rows (1 row each): limits, implicit PD actuators, couplers of every tree, built exactly as
  ``convexsim.multibody.reference_step`` builds them (same function).
* body constraints (welds 6 rows, distances and couplers 1 row, ``Forest.constraints``) between bodies
  of different trees, free bodies and the world: convexsim.stepping.body_constraints.
* v = argmin of the SAP cost with all of them (``sap_stepper``); then free bodies are integrated as
  today and the trees by ``integrate_q``; link bodies' rows of State.q/v come from forward kinematics.

With one tree, no contact and no free body the step is ``multibody.reference_step`` exactly (tested to 1e-10).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from convexsim import dynamics
from convexsim.geometry.collide import collide
from convexsim.model import ContactModel, Contacts, Model, State
from convexsim.multibody.forest import (Controls, Forest, link_wrench_torques, tree_step_data, tree_torques,
                                        write_link_rows)
from convexsim.multibody.kinematics import Kinematics, integrate_q
from convexsim.multibody.model import ConeLimit
from convexsim.sap.problem import ContactProblem, constraint_kernel_data, delassus_diagonal
from convexsim.sap.joint_constraints import KIND_LIMIT
from convexsim.stepping.body_constraints import constraint_forces as body_constraint_forces
from convexsim.stepping.body_constraints import constraint_rows as body_constraint_rows
from convexsim.stepping.context import StepContext
from convexsim.stepping.contacts import (ContactParameters, combined_parameters, contact_margin,
                                         geom_sweep_radius, pair_reach, select_contacts)


@dataclass
class ArticulatedSystem:
    """One step's unconstrained dynamics and joint rows over the global v (module docstring).

    Attributes:
        free_bodies: Model indices of the free moving bodies (clique i = free body i).
        clique_sizes, clique_start: per clique.
        tree_clique: per tree, its clique index (−1 for a tree without dofs); tree_start: its offset in v.
        A_blocks: per clique; A: the dense A (nv, nv) they make (built on first use). v_star, v0: (nv,).
        Jr (nr, nv), par (nr, 4), row_kinds: joint rows; pd_rows: (tree, actuator, row) of each actuator.
        kins: per tree, its Kinematics at q0.
        limit_rows: (joint name, row, global dof or −1 for a cone limit) of each active joint-limit row; limit_names: every
            limited joint's name. body_rows: (first row, owners) of the body-constraint rows
            (convexsim.stepping.body_constraints.constraint_rows). actuator_names: per pd_rows entry.
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


def model_forest(model: Model) -> Forest:
    """The model's forest; an empty one (no trees, no constraints) for a model of free bodies only."""
    return model.forest if model.forest is not None else Forest()


def assemble(model: Model, state: State, controls: Controls | None = None,
             wrench: np.ndarray | None = None) -> ArticulatedSystem:
    """A, v*, v0 and the joint rows of this step (module docstring). ``wrench`` (nbody, 6): external
    (τ_W, f_W) at the bodies' COMs [N·m, N] (default: the controls' wrenches)."""
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
    system = ArticulatedSystem(free, sizes, starts, tree_clique, tree_start, blocks,
                               np.concatenate(v_star) if v_star else np.zeros(0),
                               np.concatenate(v0) if v0 else np.zeros(0), Jr, par, kinds, pd_rows, kins,
                               limit_rows, limit_names, (nr, []), tuple(act_names))
    if forest.constraints:                   # welds, distances, couplers across trees and free bodies
        Jb, pb, kb, bown = body_constraint_rows(model, state, system, np.diag(system.A))
        system.Jr = np.vstack([Jr, Jb])
        system.par = np.vstack([par, pb])
        system.row_kinds = kinds + kb
        system.body_rows = (nr, bown)
    return system


def detect_contacts(model: Model, state: State, ctx: StepContext) -> Contacts:
    """Contacts at q0 with speculative margins (as the free-body step; links get their own sweep
    margins dt·(|v| + |ω| ρ)); pairs within one tree, pairs of a tree's link and the fixed body the tree
    hangs from, and pairs of two bodies without dofs never reach the narrow phase (the broad phase's tree-pair
    rule, ``geometry.broadphase.tree_admits``); the pair-reach filter drops the contacts that cannot close."""
    dt = model.time_step
    forest = model_forest(model)
    share = contact_margin(model, state)
    links = forest.link_bodies()
    if links.size:
        rb = np.zeros(model.nbody)
        rho = geom_sweep_radius(model)
        finite = np.isfinite(rho)
        np.maximum.at(rb, model.geom_body[finite], rho[finite])
        share[links] += dt * (np.linalg.norm(state.v[links, 3:], axis=1)
                              + np.linalg.norm(state.v[links, :3], axis=1) * rb[links])
    contacts = collide(model, state.q, margin=share, workspace=ctx.collision)
    if contacts.count == 0:
        return contacts
    drop = contacts.phi > pair_reach(model, state, contacts)
    return select_contacts(contacts, ~drop) if drop.any() else contacts


def contact_jacobian(model: Model, state: State, system: ArticulatedSystem, contacts: Contacts,
                     R_WC: np.ndarray) -> tuple[np.ndarray, np.ndarray, list]:
    """(Jc dense (3 nc, nv), cliques (nc, 2), per-contact block tuples) with vc = Jc v in the contact
    frames (normal last): side B with +, side A with −. A free body's block is
    ``dynamics.contact_jacobian_blocks``'."""
    nc = contacts.count
    nv = system.nv
    J_free = dynamics.contact_jacobian_blocks(model, state.q, contacts, R_WC)     # (J_a, J_b)
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


def contact_law(model: Model, p: ContactParameters, phi: np.ndarray, vn0: np.ndarray) -> dict:
    """The contacts' law and its parameters for ``ContactProblem.from_blocks`` (one home for every layout):
    μ, k, σ and either SAP's (τ_d, φ0, β) or, for the Hunt–Crossley models, (d, fe0 = −k·φ0, vn0, v_s).
    fe0 is the elastic force at the start of the step, negative for a speculative contact (φ0 > 0), so the
    Hunt–Crossley impulse appears only if the step closes the gap (vn < −φ0/dt). ``vn0``: the normal
    velocities at the start of the step (nc,) [m/s] (read by the Hunt–Crossley models only)."""
    common = dict(mu=p.mu, k=p.stiffness, sigma=model.solver.sigma)
    cm = ContactModel(model.contact_model)
    if cm == ContactModel.SAP:
        return dict(common, model="sap", tau_d=p.dissipation_time, phi0=phi, beta=model.solver.beta)
    return dict(common, model=cm.name.lower(), d=p.hc_dissipation, fe0=-p.stiffness * phi, vn0=vn0,
                v_s=model.solver.stiction_tolerance)


def contact_problem(model: Model, system: ArticulatedSystem, contacts: Contacts, cliques, blocks, Jc,
                    params: ContactParameters | None = None, v_known=None) -> ContactProblem:
    """The contacts' ContactProblem over the tree and body blocks (:func:`contact_jacobian`'s cliques and
    blocks, :func:`contact_law`); ``params``: the contacts' combined materials (default
    ``combined_parameters``); ``v_known``: the kinematic bodies' known contact velocities (nc, 3) or None
    (``dynamics.known_contact_velocity``)."""
    p = combined_parameters(model, contacts) if params is None else params
    return ContactProblem.from_blocks(model.time_step, system.A_blocks, system.v_star, cliques, blocks,
                                      **contact_law(model, p, contacts.phi, (Jc @ system.v0)[2::3]), v_known=v_known)


def contact_kernel(model: Model, system: ArticulatedSystem, contacts: Contacts, cliques, blocks, Jc, params=None):
    """(kind (nc,), cpar (nc, 8)) of the contacts: the SAP problem's regularization with the Delassus
    estimate over the tree and body blocks (:func:`contact_problem`, ``sap.problem.constraint_kernel_data``)."""
    problem = contact_problem(model, system, contacts, cliques, blocks, Jc, params)
    kind, cpar, _, _ = constraint_kernel_data(problem, delassus_diagonal(problem))
    return kind, cpar


def row_forces(model: Model, state: State, system: ArticulatedSystem, gamma_rows: np.ndarray) -> tuple:
    """(limit_force by joint name, constraint_force by constraint name) from the joint and body rows'
    impulses γ [N·s] of a step (StepInfo's fields; a limit row J = ±e_d gives the joint ±γ/dt, a ball
    joint's cone limit its restoring torque γ/dt [N·m] about the swing axis)."""
    dt = model.time_step
    limit = {name: 0.0 for name in system.limit_names}
    for name, r, d in system.limit_rows:     # d = −1: a cone limit, reported as its restoring torque γ/dt
        limit[name] += float((system.Jr[r, d] if d >= 0 else 1.0) * gamma_rows[r] / dt)
    start, owners = system.body_rows
    cons = {}
    if model_forest(model).constraints:
        cons = body_constraint_forces(model, state, owners, gamma_rows[start:start + len(owners)])
    return limit, cons


def finish_step(model: Model, state: State, system: ArticulatedSystem, v_next: np.ndarray) -> State:
    """Integrate free bodies and trees with the step's velocities; link rows by forward kinematics."""
    nfree = system.free_bodies.size
    new = dynamics.integrate(model, state, v_next[:6 * nfree])
    if not model.has_trees:
        return new
    forest = model.forest
    tq = np.array(state.tree_q, dtype=float)
    tv = np.array(state.tree_v, dtype=float)
    for k, t in enumerate(forest.trees):
        if t.nv == 0:
            continue
        s = system.tree_start[k]
        vt = v_next[s:s + t.nv]
        tq[t.q_start:t.q_start + t.nq] = integrate_q(t.model, t.q_of(tq), vt, model.time_step)
        tv[t.v_start:t.v_start + t.nv] = vt
    write_link_rows(forest, new.q, new.v, tq, tv)
    new.tree_q, new.tree_v = tq, tv
    return new


__all__ = ["ArticulatedSystem", "assemble", "contact_jacobian", "contact_kernel", "detect_contacts", "finish_step",
           "contact_law", "contact_problem", "model_forest", "row_forces"]
