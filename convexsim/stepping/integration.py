"""Stage: integration of the new velocities into the state at t + dt, and the end-of-step finite check.

Free bodies by symplectic Euler on SE(3) (``dynamics.integrate_kernel``; numpy reference
``dynamics.integrate``), kinematic bodies by the same step with their own (input) velocity, the trees' q by ``multibody.kinematics.integrate_q_kernel`` (reference
``multibody.kinematics.integrate_q``), and the links' rows of (q, v) by forward kinematics at the new q
(``kinematics.link_rows_kernel``). The numpy reference of both reference steps, SAP and LCP, is
:func:`finish_step` (the same three parts over the step's ``free_motion.ArticulatedSystem``); they check the new
state with ``contacts.check_finite_state``.
"""

from __future__ import annotations

import numpy as np

from convexsim import dynamics
from convexsim._jit import jit
from convexsim.dynamics import integrate_kernel
from convexsim.model import Model, State
from convexsim.multibody.kinematics import integrate_q, integrate_q_kernel, link_rows_kernel
from convexsim.sap.newton import F_DT
from convexsim.stepping.contacts import first_nonfinite_body
from convexsim.stepping.free_motion import forest_kinematics


@jit(inline="always")
def integrate_bodies(fpar, moving, kinematic, q, v, v_next, q_out, v_out):
    """(q_out, v_out) of a free-body model from v_next (6 per moving body), the kinematic bodies (``kinematic``
    (nbody,) True) advanced by their own velocity; returns the first body whose new state is not finite, or −1."""
    integrate_kernel(fpar, moving, kinematic, q, v, v_next, q_out, v_out)
    return first_nonfinite_body(q_out, v_out)


@jit
def integrate_forest(fpar, fa, moving, kinematic, q, v, tq, v_next, q_out, v_out, tq_out, tv_out):
    """Integration of a model with trees, from the new velocities v_next = (free bodies 6 each | the
    trees' joint velocities): free bodies (and the kinematic bodies, ``kinematic`` (nbody,) True, by their own
    velocity) by ``dynamics.integrate_kernel``, the trees' q by
    ``kinematics.integrate_q_kernel``, the link rows of (q, v) by forward kinematics at the new q
    (``kinematics.link_rows_kernel``). Writes q_out, v_out, tq_out, tv_out; returns the first body whose new
    state is not finite, or −1."""
    parent, jtype, qadr, dofadr, nvj, com, link_body = fa[0], fa[1], fa[5], fa[6], fa[7], fa[9], fa[16]
    nmov = moving.shape[0]
    integrate_kernel(fpar, moving, kinematic, q, v, v_next[:6 * nmov].copy(), q_out, v_out)
    for i in range(tv_out.shape[0]):
        tv_out[i] = v_next[6 * nmov + i]
    integrate_q_kernel(jtype, qadr, dofadr, tq, tv_out, fpar[F_DT], tq_out)
    R1, p1, _, S1 = forest_kinematics(fa, tq_out)
    link_rows_kernel(parent, dofadr, nvj, com, R1, p1, S1, tv_out, link_body, q_out, v_out)
    return first_nonfinite_body(q_out, v_out)


# ---- numpy reference

def finish_step(model: Model, state: State, system, v_next: np.ndarray) -> State:
    """The state at t + dt from the step's velocities v_next over ``system`` (the step's
    ``free_motion.ArticulatedSystem``): free bodies by ``dynamics.integrate``, the trees' q by ``integrate_q``,
    the links' rows of (q, v) by forward kinematics (``multibody.forest.write_link_rows``)."""
    nfree = system.free_bodies.size
    new = dynamics.integrate(model, state, v_next[:6 * nfree])
    if not model.has_trees:
        return new
    from convexsim.multibody.forest import write_link_rows     # a free-body run imports no forest

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


__all__ = ["integrate_bodies", "integrate_forest", "finish_step"]
