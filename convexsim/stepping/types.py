"""What a step returns and how it fails: ``StepInfo``, ``SimulationError``, ``ConvergenceWarning``, ``Handoff``."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from convexsim.model import Contacts


class SimulationError(RuntimeError):
    """A step failed (NaN state, solver failure in strict mode, LCP ray). Carries where and when."""

    def __init__(self, message: str, *, step: int, time: float, contacts: list[int] | None = None):
        super().__init__(f"step {step} (t = {time:.6g} s): {message}")
        self.step = step
        self.time = time
        self.contacts = contacts or []


SINGULAR_MASS_CAUSE = "joint-space mass matrix"
"""A phrase of :func:`singular_mass_error`'s message (the CLI's hint after a failed run looks for it)."""


def singular_mass_error(model, dof: int, step: int, t: float) -> SimulationError:
    """The error of a step whose free motion of a tree is not finite from a finite state (``STEP_SINGULAR_MASS``;
    ``dof``: an index into ``State.tree_v`` in that tree): its joint-space A = M(q) + dt·D was not positive
    definite in double precision, or its forces overflowed."""
    trees, k, start = model.forest.trees, 0, 0
    while k + 1 < len(trees) and dof >= start + trees[k].nv:
        start += trees[k].nv
        k += 1
    joints = [name for name, (tree, _) in model.forest.joint_index.items() if tree == k]
    return SimulationError(
        f"the free motion of the tree with joints {', '.join(joints)} is not finite: its {SINGULAR_MASS_CAUSE} "
        "M(q) + dt·D is singular in double precision (link masses, inertias and lever arms spanning ~16 orders of "
        "magnitude: check the joints' offsets and the links' masses for a wrong unit) or its forces overflow",
        step=step, time=t)


class ConvergenceWarning(RuntimeWarning):
    """The solver did not reach its tolerance in a step; the step's result was used anyway."""


@dataclass(frozen=True)
class Handoff:
    """What a compiled runner returns for a step it does not take: the dispatcher (``stepping.dispatch``)
    takes that step with the reference runner. ``reason``: why (reported in ``LcpStepInfo.path``)."""
    reason: str


@dataclass
class StepInfo:
    """What one step did.

    Attributes:
        contacts: the contacts used in the step (detected at the start of the step).
        gamma: impulses in the contact frames [N·s], shape (nc, 3), normal last.
        force_world: average contact force on body B in W (γ/dt rotated) [N], shape (nc, 3).
        iterations: Newton iterations (SAP) or Lemke pivots (LCP).
        converged: whether the solve succeeded.
        status: solver status name.
        momentum_residual: SAP relative momentum residual r/s at the last iteration (0 for LCP).
        line_search_evaluations: SAP line-search evaluations (0 for LCP).
        actuator_force: generalized force of every PD actuator of the model's trees over the step
            [N·m or N], in the forest's actuator order (empty without trees), after effort saturation.
        actuator_names: the actuator (joint) name of each entry of ``actuator_force``.
        limit_force: per joint with a limit, by joint name, the generalized force its limit applied over
            the step (γ/dt) [N·m or N]: positive pushes q up (resting on the lower limit), negative down
            (on the upper limit), 0 when the limit was not active.
        constraint_force: per body constraint (scene ``constraints:``), by name, what it transmitted
            (convexsim.stepping.sap_rows.body_constraint_forces): a weld (6,) = force on body_b at
            its COM and torque on body_b, in W [N, N·m]; a distance (1,) = force on body_b along
            p_Q − p_P [N] (negative: tension); a coupler (1,) = generalized force on its joint.
    """

    contacts: Contacts = field(default_factory=Contacts)
    gamma: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    force_world: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    iterations: int = 0
    converged: bool = True
    status: str = "converged"
    momentum_residual: float = 0.0
    line_search_evaluations: int = 0
    actuator_force: np.ndarray = field(default_factory=lambda: np.zeros(0))
    actuator_names: tuple = ()
    limit_force: dict = field(default_factory=dict)
    constraint_force: dict = field(default_factory=dict)
    path: str = ""
    """Which runner took the step (set by ``stepping.dispatch.step``): "compiled", "reference", or
    "reference: <why>" when the compiled runner handed the step over."""

    def named_forces(self) -> dict[str, np.ndarray]:
        """Every joint and body-constraint force of the step in one flat dict: ``actuator:<joint>`` (1,),
        ``limit:<joint>`` (1,), ``constraint:<name>`` ((6,) weld, (1,) distance and coupler)."""
        out = {f"actuator:{n}": np.array([f]) for n, f in zip(self.actuator_names, self.actuator_force)}
        out.update({f"limit:{n}": np.array([f]) for n, f in self.limit_force.items()})
        out.update({f"constraint:{n}": np.asarray(f, dtype=float) for n, f in self.constraint_force.items()})
        return out


__all__ = ["SimulationError", "SINGULAR_MASS_CAUSE", "singular_mass_error", "ConvergenceWarning", "StepInfo", "Handoff"]
