"""What the LCP stepper can solve: a capacity rule checked before a run's first step.

The LCP stepper solves each step's contacts as one linear complementarity problem by Lemke's method
(10 unknowns per contact with 8 friction directions), with a pivot limit proportional to its size. Its work
grows much faster than the number of contacts that touch at once, and on a pile it meets the limit: pile_100
(100 spheres in three layers, dt = 10 ms, ≈ 270 contacts at rest) stopped at step 16 after 46 s on the
2-core development machine, "pivot limit … 269 contacts, size 2690". A run that cannot finish is refused
before its first step instead, with the reason and the size that does run.

The rule counts the contacts a scene will have once it settles, estimated from its initial configuration:
the geometry pairs (free bodies with each other and with fixed geometry; robot links are not counted) whose
bounding spheres are within the smaller one's radius of touching: bodies placed in a pile settle by about
their own size, bodies dropped from afar are not counted until they arrive. Piles of spheres measured with
the LCP stepper (layers of k × k spheres as in pile_100, 1 s at dt = 10 ms; README, "Which scenes the LCP
stepper handles"):
see :data:`MAX_RESTING_PAIRS` and :data:`MEASURED`.
"""

from __future__ import annotations

import numpy as np

from convexsim.errors import InputError

REACH = 0.5
"""How far apart (in radii of the smaller bounding sphere) two geometries may start and still count as touching."""

MAX_RESTING_PAIRS = 120
"""The most resting contact pairs (:func:`resting_contact_pairs`) a scene may have for an LCP run."""

MEASURED = "a pile of 50 spheres (two layers of 5 × 5, 96 resting pairs) runs to its end"
"""The largest measured pile that the LCP stepper completes, for the refusal message."""


class LcpCapacityError(InputError):
    """A scene beyond the LCP stepper's capacity (an InputError: the command line exits 2 with the message)."""


def resting_contact_pairs(model, state) -> int:
    """Geometry pairs that will touch once the scene settles, estimated from ``state``: pairs of a free
    body's geometry with another free body's or with fixed geometry whose bounding spheres' gap is at most
    the smaller radius (a halfspace: the gap of the other geometry's bounding sphere to its plane)."""
    from convexsim.model import GeomType
    from convexsim.spatial import quat_to_matrix

    free = np.asarray(model.body_dof) >= 0
    fixed = np.asarray(model.body_fixed, bool)
    body = np.asarray(model.geom_body)
    counted = free[body] | fixed[body]
    if not free[body].any():
        return 0
    q = np.asarray(state.q, float)
    rot = quat_to_matrix(q[body, 3:7])
    centre = q[body, :3] + np.einsum("gij,gj->gi", rot, np.asarray(model.geom_pos, float))
    radius = np.asarray(model.geom_rbound, float)
    plane = np.asarray(model.geom_type) == GeomType.HALFSPACE
    pairs = 0
    solid = np.flatnonzero(counted & ~plane)
    c, r, b = centre[solid], radius[solid], body[solid]
    gap = np.linalg.norm(c[:, None, :] - c[None, :, :], axis=-1) - r[:, None] - r[None, :]
    near = gap <= REACH * np.minimum(r[:, None], r[None, :])
    moving = free[b]
    near &= (b[:, None] != b[None, :]) & (moving[:, None] | moving[None, :])
    pairs += int(np.triu(near, 1).sum())
    for g in np.flatnonzero(counted & plane):
        normal = rot[g][:, 2]                                      # a halfspace's outward normal: its frame's z
        height = (c - centre[g]) @ normal - r
        pairs += int(np.sum((height <= REACH * r) & moving & (b != body[g])))
    return pairs


def check_lcp_capacity(model, state) -> None:
    """Refuse (LcpCapacityError) an LCP run of a scene with more resting contact pairs than
    :data:`MAX_RESTING_PAIRS`: the reason, the size that does run, and what to do instead."""
    n = resting_contact_pairs(model, state)
    if n > MAX_RESTING_PAIRS:
        raise LcpCapacityError(
            f"{model.name}: too large for the LCP stepper: about {n} contact pairs once it settles (geometry "
            f"pairs within reach of each other at the start), above its capacity of {MAX_RESTING_PAIRS}: "
            f"Lemke's method on one LCP of that many contacts per step runs into its pivot limit or takes "
            f"minutes per second simulated ({MEASURED}; README, which scenes the LCP stepper handles). "
            f"Run it with --solver sap, or make the scene smaller.")


__all__ = ["MAX_RESTING_PAIRS", "MEASURED", "LcpCapacityError", "resting_contact_pairs", "check_lcp_capacity"]
