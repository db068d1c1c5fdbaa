"""Stage: collision and contact frames, shared by every step (SAP and LCP, free bodies and trees).

For the contacts found at the start of a step: the start-of-step checks, the speculative margins, collision
and the pair-reach filter, the tree-pair filter, the contact frames R_WC (z = normal from A into B), the
clique (moving body) of each side and the combined material parameters (docs/scene-format.md):

    k = kA·kB/(kA + kB),  τ_d = τA + τB,  d = (kB·dA + kA·dB)/(kA + kB),  μ = 2·μA·μB/(μA + μB).

This module is the one home of these combination rules (:func:`combine_materials`, called by the numpy
reference :func:`combined_parameters` and by the compiled stages). Numpy references first (the contact set of
both reference steps, :func:`detect_contacts`, with :func:`model_forest`, the forest they step), then the
compiled stage (numba) below them. The Jacobian blocks of the contacts are the next stage (``jacobians``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from convexsim import dynamics
import math

from convexsim._jit import jit
from convexsim.geometry.broadphase import sweep_and_prune_pairs
from convexsim.geometry.collide import CollisionWorkspace, collide, narrow_phase
from convexsim.dynamics import contact_frame
from convexsim.geometry.transforms import geom_world_poses_kernel
from convexsim.sap.newton import F_DT, F_GNORM, F_MARGIN_FLOOR
from convexsim.model import Contacts, GeomType, Model, State
from convexsim.stepping.types import SimulationError


MARGIN_FLOOR = 1e-3
"""Smallest speculative margin of a pair [m] (added once per pair, half to each body's share)."""


def geom_sweep_radius(model: Model) -> np.ndarray:
    """ρ_g [m] per geometry: no point of geometry g's surface set moves further than |v_b| + |ω_b|·ρ_g per
    second under a rigid motion of its body b (body-origin velocity v_b, angular velocity ω_b).

    ρ_g = |p_g| + r_g (p_g: geometry origin in the body frame, r_g: bounding radius about it), except for a
    sphere, whose surface set is invariant under rotations about its centre: ρ_g = |p_g| (a centred
    sphere's rotation does not move its surface, so a rolling ball gets no margin for its spin).
    Halfspaces (r_g = inf) give inf and belong to fixed bodies only."""
    rho = np.linalg.norm(model.geom_pos, axis=1) + model.geom_rbound
    sphere = np.asarray(model.geom_type) == int(GeomType.SPHERE)
    rho[sphere] = np.linalg.norm(model.geom_pos[sphere], axis=1)
    return rho


def contact_margin(model: Model, state: State) -> np.ndarray:
    """Per-body speculative-margin shares m_b [m], shape (nbody,); a pair's margin is m_A + m_B.

    m_b = dt·(|v_b| + |ω_b|·ρ_b) + ½·floor for a moving body (ρ_b: the largest sweep radius of its
    geometries, :func:`geom_sweep_radius`): no point of b's surface moves further than
    dt·(|v_b| + |ω_b|·ρ_b) in the step. A fixed body has m_b = dt²·|g| + ½·floor; a kinematic body both terms
    (its velocity is known, and it does not fall): gravity moves every free
    body by at most dt²·|g| in a step relative to the fixed world but not relative to another free body.
    The broad phase reports the pairs within m_A + m_B; :func:`pair_reach` then keeps those that can close
    (the relative motion of the two bodies), so that a resting pile keeps about its touching set; the
    constraints act only on contacts the step closes (docs/sap.md).
    """
    dt = model.time_step
    share = np.full(model.nbody, 0.5 * MARGIN_FLOOR)
    share[np.asarray(model.body_fixed, dtype=bool)] += dt * dt * float(np.linalg.norm(model.gravity))
    bodies = np.concatenate((dynamics.moving_bodies(model), model.kinematic_bodies))
    if bodies.size == 0:
        return share
    rb = np.zeros(model.nbody)
    rho = geom_sweep_radius(model)
    finite = np.isfinite(rho)
    np.maximum.at(rb, model.geom_body[finite], rho[finite])
    speed = (np.linalg.norm(state.v[bodies, 3:], axis=1)
             + np.linalg.norm(state.v[bodies, :3], axis=1) * rb[bodies])
    share[bodies] += dt * speed
    return share


def pair_reach(model: Model, state: State, contacts: Contacts) -> np.ndarray:
    """How far each contact's gap can close in one step [m], shape (nc,):

        reach = dt·(|v_A − v_B| + |ω_A|·ρ_a + |ω_B|·ρ_b) + dt²·|g| + floor      A or B fixed
        reach = dt·(|v_A − v_B| + |ω_A|·ρ_a + |ω_B|·ρ_b) + max(dt²·|g|, floor) two free bodies

    (v: body-origin velocities in W, ρ: the geometries' sweep radii; "fixed" is a body without dofs, a
    kinematic one included, whose ρ counts as for a moving body). The relative displacement of a
    point of A and a point of B over the step at the start-of-step velocities is at most
    dt·(|v_A − v_B| + |ω_A| ρ_a + |ω_B| ρ_b), so their distance cannot fall by more. Gravity adds dt²|g|
    against the fixed world, and as much between two free bodies when one of them is held by other
    contacts (a ball resting on a supported ball); the floor covers velocity picked up from contacts in
    the step (as in :func:`contact_margin`). Never larger than the pair margin m_A + m_B of
    :func:`contact_margin`, which bounds the same motion body by body, except by the max(dt²|g|, floor)
    term of two free bodies when dt²|g| exceeds the floor (dt > 10 ms at 1 g)."""
    dt = model.time_step
    v, w = state.v[:, 3:], state.v[:, :3]
    a, b = contacts.body_a, contacts.body_b
    rho = geom_sweep_radius(model)
    fixed = np.asarray(model.body_fixed, dtype=bool)
    still = fixed & ~dynamics.kinematic_mask(model)
    spin = [np.linalg.norm(w[body], axis=1) * np.where(still[body], 0.0, rho[geom])  # fixed: ρ may be inf
            for body, geom in ((a, contacts.geom_a), (b, contacts.geom_b))]
    fall = dt * dt * float(np.linalg.norm(model.gravity))
    reach = dt * (np.linalg.norm(v[a] - v[b], axis=1) + spin[0] + spin[1])
    return reach + np.where(fixed[a] | fixed[b], fall + MARGIN_FLOOR, max(fall, MARGIN_FLOOR))


def select_contacts(contacts: Contacts, keep: np.ndarray) -> Contacts:
    """The contacts where keep (nc,) is True, in their order."""
    return Contacts(geom_a=contacts.geom_a[keep], geom_b=contacts.geom_b[keep], body_a=contacts.body_a[keep],
                    body_b=contacts.body_b[keep], phi=contacts.phi[keep], point=contacts.point[keep],
                    normal=contacts.normal[keep])


@dataclass(frozen=True)
class ContactParameters:
    """Combined material parameters per contact (module docstring), shapes (nc,).

    Attributes:
        mu: Coulomb friction (dimensionless).
        stiffness: k [N/m].
        dissipation_time: SAP τ_d [s].
        hc_dissipation: Hunt–Crossley d [s/m].
    """

    mu: np.ndarray
    stiffness: np.ndarray
    dissipation_time: np.ndarray
    hc_dissipation: np.ndarray


def combined_parameters(model: Model, contacts: Contacts) -> ContactParameters:
    """k = kA·kB/(kA+kB), τ_d = τA+τB, d = (kB·dA + kA·dB)/(kA+kB), μ = 2μAμB/(μA+μB) per contact.

    A pair whose stiffnesses (or friction coefficients) are both 0 gets k = d = 0 (μ = 0).
    """
    ma = model.geom_material[contacts.geom_a]
    mb = model.geom_material[contacts.geom_b]
    f = lambda a, m: np.ascontiguousarray(np.asarray(a, dtype=np.float64)[m])  # noqa: E731
    k, mu, tau, d = combine_material_arrays(
        f(model.material_stiffness, ma), f(model.material_stiffness, mb), f(model.material_friction, ma),
        f(model.material_friction, mb), f(model.material_dissipation_time, ma),
        f(model.material_dissipation_time, mb), f(model.material_hc_dissipation, ma),
        f(model.material_hc_dissipation, mb))
    return ContactParameters(mu=mu, stiffness=k, dissipation_time=tau, hc_dissipation=d)


@dataclass(frozen=True)
class ContactKinematics:
    """Per-step contact kinematics shared by the SAP and LCP steppers.

    Attributes:
        contacts: the contacts (nc of them).
        R_WC: contact frames, columns (t1, t2, n), shape (nc, 3, 3).
        clique_a, clique_b: clique (moving-body) index of each side, −1 for a fixed body, shape (nc,).
        J_a, J_b: Jacobian blocks of each side in the contact frame, shape (nc, 3, 6).
        params: combined material parameters.
    """

    contacts: Contacts
    R_WC: np.ndarray
    clique_a: np.ndarray
    clique_b: np.ndarray
    J_a: np.ndarray
    J_b: np.ndarray
    params: ContactParameters


def contact_kinematics(model: Model, state: State, *, margin: float | np.ndarray | None = None,
                       workspace: CollisionWorkspace | None = None) -> ContactKinematics:
    """Collide at q0 and build frames, clique indices, Jacobian blocks and combined parameters.

    Args:
        margin: speculative distance [m], one for every pair or per-body shares (as in
            ``geometry.collide``); default: the per-body shares of :func:`contact_margin`, then only
            the contacts whose gap is within :func:`pair_reach` (those that can close in the step).
        workspace: collision buffers to reuse (a step context's); default: fresh buffers.
    """
    ws = CollisionWorkspace() if workspace is None else workspace
    if margin is None:
        contacts = collide(model, state.q, margin=contact_margin(model, state), workspace=ws)
        far = contacts.phi > pair_reach(model, state, contacts)
        if far.any():
            contacts = select_contacts(contacts, ~far)
    else:
        contacts = collide(model, state.q, margin=margin, workspace=ws)
    return kinematics_of(model, state, contacts)


def kinematics_of(model: Model, state: State, contacts: Contacts) -> ContactKinematics:
    """The frames, clique indices, free-body Jacobian blocks and combined parameters of ``contacts``."""
    R_WC = dynamics.contact_frames(contacts.normal)
    J_a, J_b = dynamics.contact_jacobian_blocks(model, state.q, contacts, R_WC)
    clique_of_body = np.where(model.body_dof >= 0, model.body_dof // 6, -1)
    return ContactKinematics(
        contacts=contacts, R_WC=R_WC,
        clique_a=clique_of_body[contacts.body_a], clique_b=clique_of_body[contacts.body_b],
        J_a=J_a, J_b=J_b, params=combined_parameters(model, contacts))


def contact_velocities(kin: ContactKinematics, v_packed: np.ndarray) -> np.ndarray:
    """vc = J_a v_a + J_b v_b for every contact [m/s], shape (nc, 3); v_packed is (6·nmov,)."""
    V = v_packed.reshape(-1, 6)
    vc = np.zeros((kin.contacts.count, 3))
    for J, c in ((kin.J_a, kin.clique_a), (kin.J_b, kin.clique_b)):
        ok = c >= 0
        vc[ok] += np.einsum("nij,nj->ni", J[ok], V[c[ok]])
    return vc


def model_forest(model: Model):
    """The model's ``multibody.forest.Forest``; an empty one (no trees, no constraints) for a model of free
    bodies only, which the numpy references step as a forest without joints."""
    from convexsim.multibody.forest import Forest      # a free-body run imports no forest

    return model.forest if model.forest is not None else Forest()


def detect_contacts(model: Model, state: State, ctx) -> Contacts:
    """The contacts of the numpy reference steps (SAP and LCP), at q0 with speculative margins: the shares of
    :func:`contact_margin`, and links of trees get their own sweep margins dt·(|v| + |ω| ρ); pairs within one
    tree, pairs of a tree's link and the fixed body the tree hangs from, and pairs of two bodies without dofs
    never reach the narrow phase (the broad phase's tree-pair rule, ``geometry.broadphase.tree_admits``); the
    pair-reach filter drops the contacts that cannot close. ``ctx``: the step's StepContext (its collision
    buffers). The compiled form: :func:`margin_shares`, :func:`collide_and_filter`."""
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


def check_finite_state(model: Model, state: State) -> None:
    """Raise SimulationError naming the bodies whose pose or velocity is not finite."""
    bad = ~np.isfinite(state.q).all(axis=1) | ~np.isfinite(state.v).all(axis=1)
    if bad.any():
        names = ", ".join(model.body_names[i] for i in np.flatnonzero(bad)[:5])
        raise SimulationError(f"non-finite state of bodies {names}", step=state.step, time=state.t)


# ---- the combination rules (numba; the numpy reference above calls them too)

@jit
def combined_friction_pair(mua, mub):
    """μ = 2 μ_a μ_b / (μ_a + μ_b), 0 when both are 0 (the harmonic mean of the two coefficients)."""
    musum = mua + mub
    return 2 * mua * mub / musum if musum > 0 else 0.0


@jit
def combine_materials(ka, kb, mua, mub, taua, taub, da, db):
    """(k [N/m], μ, τ_d [s], d [s/m]) of a pair of materials (module docstring): springs in series
    k = kA·kB/(kA + kB), the dissipation of the combined spring d = (kB·dA + kA·dB)/(kA + kB), τ_d = τA + τB,
    μ by :func:`combined_friction_pair`. A pair whose stiffnesses are both 0 gets k = d = 0."""
    ksum = ka + kb
    k = ka * kb / ksum if ksum > 0 else 0.0
    d = (kb * da + ka * db) / ksum if ksum > 0 else 0.0
    return k, combined_friction_pair(mua, mub), taua + taub, d


@jit
def combine_material_arrays(ka, kb, mua, mub, taua, taub, da, db):
    """:func:`combine_materials` over arrays of pairs (nc,): (k, μ, τ_d, d), each (nc,)."""
    n = ka.shape[0]
    k, mu, tau, d = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    for c in range(n):
        k[c], mu[c], tau[c], d[c] = combine_materials(ka[c], kb[c], mua[c], mub[c], taua[c], taub[c], da[c], db[c])
    return k, mu, tau, d


@jit
def combined_friction(geom_mu, geoms):
    """μ per contact (nc,) from the friction of each geometry ``geom_mu`` and the contacts' geometries."""
    nc = geoms.shape[0]
    mu = np.empty(nc)
    for c in range(nc):
        mu[c] = combined_friction_pair(geom_mu[geoms[c, 0]], geom_mu[geoms[c, 1]])
    return mu


# ---- the compiled stage (numba): start checks, margins, collision, the pair-reach and tree-pair filters,
# contact frames

@jit
def _norm3_seq(x0, x1, x2):
    """sqrt((x0² + x1²) + x2²): numpy's ``norm(axis=1)`` of a row of 3."""
    return math.sqrt(x0 * x0 + x1 * x1 + x2 * x2)


@jit
def margin_shares(fpar, fixed, body_dof, body_rb, v, share):
    """Per-body speculative-margin shares m_b [m] (``contacts.contact_margin``) into share (nbody,); a body's
    velocity enters its share where ``body_dof`` ≥ 0 (the packed sweep flag: free bodies, links, kinematic
    bodies)."""
    dt = fpar[F_DT]
    fall = dt * dt * fpar[F_GNORM]
    for b in range(fixed.shape[0]):
        share[b] = 0.5 * fpar[F_MARGIN_FLOOR]
        if fixed[b]:
            share[b] += fall
    for b in range(fixed.shape[0]):
        if body_dof[b] < 0:
            continue
        speed = _norm3_seq(v[b, 3], v[b, 4], v[b, 5]) + _norm3_seq(v[b, 0], v[b, 1], v[b, 2]) * body_rb[b]
        share[b] += dt * speed


@jit
def move_contact_row(geoms, phi, point, normal, src, dst):
    """Copy contact row ``src`` (geometries, φ, point, normal) to row ``dst`` of the same arrays: the compaction
    step of the contact filters (dst ≤ src)."""
    geoms[dst, 0] = geoms[src, 0]
    geoms[dst, 1] = geoms[src, 1]
    phi[dst] = phi[src]
    for i in range(3):
        point[dst, i] = point[src, i]
        normal[dst, i] = normal[src, i]


@jit
def collide_and_filter(fpar, fixed, body_dof, body_rb, geom_type, geom_size, geom_body, geom_pos, geom_quat,
                       geom_rho, q, v, geom_filter, tree_filter):
    """Contacts of the step: collision with the margin shares, then the pair-reach filter. Only the pairs the
    pair rule admits reach the narrow phase: ``geom_filter`` (ngeom, 2) the (group, mask) bits and
    ``tree_filter`` (body_tree, body_moves, tree_base) the tree-pair rule (``geometry.broadphase``;
    ``geometry.collide.pair_rule_of`` packs both for a model). ``body_dof``: the sweep flag of
    :func:`margin_shares`; a fixed body with a flag ≥ 0 (kinematic) counts its spin in the pair reach.

    Returns (geoms (nc, 2), phi (nc,), point (nc, 3), normal (nc, 3)).
    """
    nbody = fixed.shape[0]
    ngeom = geom_type.shape[0]
    margins = np.empty(nbody + ngeom)      # the bodies' shares, then the geometries' margins
    share = margins[:nbody]
    margin_shares(fpar, fixed, body_dof, body_rb, v, share)
    gmargin = margins[nbody:]
    for g in range(ngeom):
        gmargin[g] = share[geom_body[g]]
    pos, rot = geom_world_poses_kernel(q, geom_body, geom_pos, geom_quat)
    cap = max(16, 2 * ngeom)
    pairs = np.empty((cap, 2), np.int64)
    while True:
        npairs = sweep_and_prune_pairs(geom_type, geom_size, geom_body, fixed, pos, rot, gmargin, pairs, geom_filter,
                                       tree_filter)
        if npairs <= pairs.shape[0]:
            break
        pairs = np.empty((max(npairs, 2 * pairs.shape[0]), 2), np.int64)
    sorted_pairs = pairs                  # one pair (a sphere on the ground) is in order: nothing to sort
    if npairs > 1:
        key = np.empty(npairs, np.int64)
        ng = max(ngeom, 1)
        for k in range(npairs):
            key[k] = pairs[k, 0] * ng + pairs[k, 1]
        order = np.argsort(key, kind="mergesort")
        sorted_pairs = np.empty((npairs, 2), np.int64)
        for k in range(npairs):
            sorted_pairs[k, 0] = pairs[order[k], 0]
            sorted_pairs[k, 1] = pairs[order[k], 1]
    ccap = max(16, 4 * npairs)
    while True:
        geoms = np.empty((ccap, 2), np.int64)
        rows = np.empty(7 * ccap)          # φ, then the points, then the normals
        phi = rows[:ccap]
        point = rows[ccap:4 * ccap].reshape(ccap, 3)
        normal = rows[4 * ccap:].reshape(ccap, 3)
        nc = narrow_phase(sorted_pairs, npairs, geom_type, geom_size, pos, rot, gmargin, geoms, phi, point,
                          normal)
        if nc <= ccap:
            break
        ccap = nc
    # pair reach: keep the contacts whose gap can close in the step
    dt = fpar[F_DT]
    fall = dt * dt * fpar[F_GNORM]
    floor = fpar[F_MARGIN_FLOOR]
    keep = 0
    for c in range(nc):
        ga = geoms[c, 0]
        gb = geoms[c, 1]
        a = geom_body[ga]
        b = geom_body[gb]
        rel = _norm3_seq(v[a, 3] - v[b, 3], v[a, 4] - v[b, 4], v[a, 5] - v[b, 5])
        spin_a = _norm3_seq(v[a, 0], v[a, 1], v[a, 2]) * (0.0 if fixed[a] and body_dof[a] < 0 else geom_rho[ga])
        spin_b = _norm3_seq(v[b, 0], v[b, 1], v[b, 2]) * (0.0 if fixed[b] and body_dof[b] < 0 else geom_rho[gb])
        reach = dt * (rel + spin_a + spin_b)
        if fixed[a] or fixed[b]:
            reach = reach + (fall + floor)
        else:
            reach = reach + max(fall, floor)
        if phi[c] > reach:
            continue
        move_contact_row(geoms, phi, point, normal, c, keep)
        keep += 1
    return geoms[:keep], phi[:keep], point[:keep], normal[:keep]


@jit(borrowed=True)
def _finite_body(q, v, b):
    for i in range(q.shape[1]):
        if not math.isfinite(q[b, i]):
            return False
    for i in range(v.shape[1]):
        if not math.isfinite(v[b, i]):
            return False
    return True


@jit(borrowed=True)
def first_nonfinite_body(q, v):
    """The first body whose pose q[b] or velocity v[b] has an entry that is not finite, or −1 (the compiled
    twin of :func:`check_finite_state`; the steps check their start and end states with it)."""
    for b in range(q.shape[0]):
        if not _finite_body(q, v, b):
            return b
    return -1


@jit(inline="always")
def start_check(fpar, fixed, body_sweep, body_rb, q, v):
    """The checks before collision: (the first body whose state is not finite, the first body whose margin
    share (:func:`margin_shares`) is not finite), each −1 when there is none; the margin is checked only for a
    finite state."""
    bad = first_nonfinite_body(q, v)
    if bad >= 0:
        return bad, -1
    share = np.empty(fixed.shape[0])
    margin_shares(fpar, fixed, body_sweep, body_rb, v, share)
    for b in range(share.shape[0]):
        if not math.isfinite(share[b]):
            return -1, b
    return -1, -1


@jit(inline="always")
def contact_frames_kernel(normal):
    """The contact frames R_WC (nc, 3, 3) of the normals (nc, 3) (``dynamics.contact_frame``; the numpy
    reference is ``dynamics.contact_frames``)."""
    nc = normal.shape[0]
    R_WC = np.empty((nc, 3, 3))
    for c in range(nc):
        contact_frame(normal[c], R_WC[c])
    return R_WC


__all__ = ["MARGIN_FLOOR", "combine_materials", "combined_friction", "first_nonfinite_body", "start_check",
           "contact_frames_kernel", "collide_and_filter", "margin_shares", "move_contact_row", "contact_margin", "pair_reach", "geom_sweep_radius",
           "select_contacts", "ContactParameters", "combined_parameters", "ContactKinematics",
           "contact_kinematics", "contact_velocities", "check_finite_state", "kinematics_of", "model_forest",
           "detect_contacts"]
