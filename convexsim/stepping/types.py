"""What a step returns and how it fails: ``StepInfo``, ``SimulationError``, ``ConvergenceWarning``."""

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


class ConvergenceWarning(RuntimeWarning):
    """The solver did not reach its tolerance in a step; the step's result was used anyway."""


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
            [N·m or N], in the forest's actuator order (empty without trees).
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


__all__ = ["SimulationError", "ConvergenceWarning", "StepInfo"]
