"""What the LCP stepper can solve: a capacity rule checked before a run's first step.

The LCP stepper solves each step's contacts as one linear complementarity problem by Lemke's method
(10 unknowns per contact with 8 friction directions), warm-started from the previous step, with a pivot limit
proportional to its size. The pivots a step needs grow with the contacts that change state during it, so
with the number of contacts touching at once and with the time step; on a pile at dt = 10 ms they meet the
limit: pile_100 (100 spheres in three layers, ≈ 270 contacts at rest) stopped at step 16 after 46 s on the
2-core development machine ("pivot limit … 269 contacts, size 2690"). Such a run is refused before its first
step instead, with the reason and the size that does run.

The rule: the contacts a scene will have once it settles, estimated from its initial configuration
(:func:`resting_contacts`), may be at most :data:`CONTACTS_AT_10_MS` × (10 ms / dt). Measured on the 2-core
machine with the LCP stepper, 1 s at dt = 10 ms of piles of spheres laid out as in pile_100 (two layers of
k × k): 18 spheres (33 estimated contacts) 4.5 s, 32 (64) 26 s, 50 (105) 18 s, 72 (156) 73 s of wall time
(9.7 s of CPU; the machine was loaded), all complete; pile_100 (201) stops at step 16; hull_pile (200 hulls,
≈ 450) had not ended after 15 minutes. At dt = 1 ms the warm start carries runs further: mixed_clutter (96
spheres, boxes and capsules dropped into a bin, 177) completes in 1–3 minutes. The 1/dt scaling between
the two is the model stated above (the state changes per step scale with dt), anchored by these runs.
"""

from __future__ import annotations

import numpy as np

from convexsim.errors import InputError

REACH = 0.5
"""How far apart two geometries may start and still count as touching at rest: this fraction of the smaller
bounding sphere's radius (bodies laid out in a pile settle by about half their size)."""

CONTACTS_AT_10_MS = 180
"""The most resting contacts (:func:`resting_contacts`) for an LCP run at dt = 10 ms (scaled by 10 ms / dt):
between the largest measured pile that completes (72 spheres, 156) and pile_100 (201), which does not."""

MEASURED = "at dt = 10 ms a pile of 72 spheres (156 contacts) runs to its end, pile_100 (201) does not"
"""The measurement behind the rule, for the refusal message."""


class LcpCapacityError(InputError):
    """A scene beyond the LCP stepper's capacity (an InputError: the command line exits 2 with the message)."""


def _contacts_per_pair(type_a, type_b):
    """Contact points a resting pair makes: 1 when a sphere is involved, 2 for a capsule or cylinder on
    anything but a sphere (a line contact), else 4 (a face: boxes, meshes, halfspaces)."""
    from convexsim.model import GeomType

    a, b = np.asarray(type_a), np.asarray(type_b)
    sphere = (a == GeomType.SPHERE) | (b == GeomType.SPHERE)
    line = np.isin(a, (GeomType.CAPSULE, GeomType.CYLINDER)) | np.isin(b, (GeomType.CAPSULE, GeomType.CYLINDER))
    return np.where(sphere, 1, np.where(line, 2, 4))


def resting_contacts(model, state) -> int:
    """The contacts the scene will have once it settles, estimated from ``state``: pairs of a free body's
    geometry with another free body's or with fixed geometry whose bounding spheres start at most
    :data:`REACH` × the smaller radius apart (a halfspace: the other bounding sphere's gap to its plane),
    each counted with its contact points (:func:`_contacts_per_pair`). Robot links are not counted."""
    from convexsim.model import GeomType
    from convexsim.spatial import quat_to_matrix

    free = np.asarray(model.body_dof) >= 0
    fixed = np.asarray(model.body_fixed, bool)
    body = np.asarray(model.geom_body)
    gtype = np.asarray(model.geom_type)
    if not free[body].any():
        return 0
    q = np.asarray(state.q, float)
    rot = quat_to_matrix(q[body, 3:7])
    centre = q[body, :3] + np.einsum("gij,gj->gi", rot, np.asarray(model.geom_pos, float))
    radius = np.asarray(model.geom_rbound, float)
    counted = free[body] | fixed[body]
    plane = gtype == GeomType.HALFSPACE
    solid = np.flatnonzero(counted & ~plane)
    c, r, b, t = centre[solid], radius[solid], body[solid], gtype[solid]
    gap = np.linalg.norm(c[:, None, :] - c[None, :, :], axis=-1) - r[:, None] - r[None, :]
    near = gap <= REACH * np.minimum(r[:, None], r[None, :])
    moving = free[b]
    near &= (b[:, None] != b[None, :]) & (moving[:, None] | moving[None, :])
    i, j = np.nonzero(np.triu(near, 1))
    total = int(_contacts_per_pair(t[i], t[j]).sum())
    for g in np.flatnonzero(counted & plane):
        normal = rot[g][:, 2]                                      # a halfspace's outward normal: its frame's z
        touching = ((c - centre[g]) @ normal - r <= REACH * r) & moving & (b != body[g])
        total += int(_contacts_per_pair(t[touching], gtype[g]).sum())
    return total


def capacity(time_step: float) -> int:
    """The most resting contacts an LCP run with this time step [s] may have."""
    return int(CONTACTS_AT_10_MS * 1e-2 / time_step)


def check_lcp_capacity(model, state) -> None:
    """Refuse (LcpCapacityError) an LCP run of a scene with more resting contacts than :func:`capacity`
    allows: the reason, the size that does run, and what to do instead."""
    n, cap = resting_contacts(model, state), capacity(model.time_step)
    if n > cap:
        raise LcpCapacityError(
            f"{model.name}: too large for the LCP stepper: about {n} contacts once it settles (estimated from "
            f"the geometry within reach of each other at the start), above its capacity of {cap} at "
            f"dt = {model.time_step:g} s: Lemke's method would run into its pivot limit or take minutes per "
            f"simulated second ({MEASURED}; README, which scenes the LCP stepper handles). "
            f"Run it with --solver sap, or make the scene smaller.")


__all__ = ["REACH", "CONTACTS_AT_10_MS", "MEASURED", "LcpCapacityError", "resting_contacts", "capacity",
           "check_lcp_capacity"]
