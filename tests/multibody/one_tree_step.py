"""The one-tree SAP step of the tests: the package's tree stage (``convexsim.multibody.reference_step``: free
motion and joint rows) solved by ``sap.solver.solve_rows`` and integrated by ``multibody.kinematics.integrate_q``,
on a bare MultibodyModel (no scene, no contact):

    v = argmin ½ (v − v*)ᵀ A (v − v*) + Σ_r ℓ_r(J_r v),   q = integrate_q(q0, v, dt)

with tighter Newton tolerances than a scene's. The physics tests hold it to analytic answers; the integrated
steps (scene → Model → ``stepping.step``) are held to it.
"""

from __future__ import annotations

import numpy as np

from convexsim.multibody.kinematics import integrate_q
from convexsim.multibody.model import MultibodyModel
from convexsim.multibody.reference_step import StepReport, constraint_rows, free_motion
from convexsim.sap.solver import solve_rows
from convexsim.sap.types import SapParameters

SOLVE_PARAMETERS = SapParameters(rel_tolerance=1e-10, abs_tolerance=1e-14, on_failure="ignore")
"""The reference step's Newton tolerances (tighter than a scene's default ε_r = 1e-6: a reference)."""


def step(model: MultibodyModel, q, v, dt: float, *, tau=None, limits=(), actuators=(), couplers=(),
         v_guess=None) -> tuple[np.ndarray, np.ndarray, StepReport]:
    """One time step (module docstring): returns (q_next, v_next, report).

    Args:
        tau: optional applied generalized forces (nv,) [N·m or N], constant over the step.
        limits, actuators, couplers: sequences of JointLimit, PdActuator, Coupler.
    """
    q = np.asarray(q, dtype=float)
    v = np.asarray(v, dtype=float)
    A, v_star = free_motion(model, q, v, dt, tau)
    J, par, report, pd_rows = constraint_rows(model, q, v, v_star, np.diag(A), dt, limits, actuators, couplers)
    res = solve_rows(A, v_star, Jr=J, par=par, v_guess=v if v_guess is None else v_guess, params=SOLVE_PARAMETERS)
    if not res.converged:
        raise RuntimeError(f"reference step at q = {q.tolist()}: the clique solve did not converge in "
                           f"{res.iterations} iterations")
    gamma = res.gamma[:, 0]
    report.gamma = gamma
    report.actuator_force = gamma[pd_rows] / dt if pd_rows else np.zeros(0)
    report.iterations = res.iterations
    report.converged = res.converged
    return integrate_q(model, q, res.v, dt), res.v, report


def simulate(model: MultibodyModel, q0, v0, dt: float, duration: float, *, record=None, **step_args):
    """Run :func:`step` for round(duration/dt) steps; ``record(k, q, v, report)`` is called after each.

    Returns the final (q, v).
    """
    q, v = np.asarray(q0, dtype=float), np.asarray(v0, dtype=float)
    for k in range(round(duration / dt)):
        q, v, rep = step(model, q, v, dt, **step_args)
        if record is not None:
            record(k, q, v, rep)
    return q, v
