"""What an LCP step reports: ``LcpStepInfo`` (the solve path and the work done), ``LcpStepError`` (no rung of
the solve chain solved the step), the rungs' names, and the check of the LCP settings in ``model.solver``.
"""

from __future__ import annotations

from dataclasses import dataclass

from convexsim.lcp.lemke import LemkeStatus
from convexsim.model import Model
from convexsim.stepping.types import SimulationError, StepInfo

RUNGS = ("warm", "crash", "lemke", "perturbed_q", "covering", "regularized")
"""What solved a step's LCP, in the order tried (``LcpStepInfo.rung``; "" for a step without contacts)."""


class LcpStepError(SimulationError):
    """Lemke did not solve a step's contact LCP (secondary ray, pivot limit or numerical failure).

    Attributes:
        step, time: where it happened (from SimulationError).
        contacts: indices (into the step's contact list) of the contacts involved: for a ray those
            carrying the ray direction (``ray_contacts``: the entering variable's contact if the ray's
            z-part is all zero), otherwise, or if no contact is identified, all contacts of the step.
        status: the LemkeStatus.
        pivots: pivots performed.
    """

    def __init__(self, message: str, *, step: int, time: float, contacts: list[int], status: LemkeStatus,
                 pivots: int):
        super().__init__(message, step=step, time=time, contacts=contacts)
        self.status = status
        self.pivots = pivots




@dataclass
class LcpStepInfo(StepInfo):
    """StepInfo of the LCP stepper, with the solve path and the work done.

    Attributes (besides StepInfo's; ``iterations`` = ``pivots`` + ``warm_solves``, all the step's solver
    work: the warm runs' pivots and factorizations, then the cold runs' pivots):
        warm_attempted: a previous basis was available and tried on some island (warm start on, an
            island of ≥ WARM_MIN_SIZE unknowns).
        warm_accepted: the step's solution came from the warm start (it passed Lemke's final check).
        warm_solves: islands tried warm or from a crash basis (one factorization of M_αα each).
        pivots: Lemke pivots over every Lemke run of the step (fallback rungs included).
        rung: what solved the LCP (``RUNGS``): "warm", "crash" (Lemke from the island's crash basis), "lemke",
            "perturbed_q", "covering", "regularized";
            "" for a step without contacts. With several contact islands, the furthest rung any needed.
        lemke_runs: cold Lemke runs (1 + fallback attempts per island not solved warm).
        islands: contact islands solved separately (``contact_islands``; 1 with SPLIT_ISLANDS off).
    """

    warm_attempted: bool = False
    warm_accepted: bool = False
    warm_solves: int = 0
    pivots: int = 0
    rung: str = ""
    lemke_runs: int = 0
    islands: int = 0
    path: str = "reference"
    """Which path took the step: "compiled" (``stepping.lcp_compiled``), "reference", or "reference: <why>"
    when the compiled path handed the step to the reference (e.g. its first Lemke run failed)."""




def validate_settings(model: Model) -> None:
    s = model.solver
    if not 0.0 <= s.lcp_stabilization <= 1.0:
        raise ValueError(f"solver.lcp_stabilization must be in [0, 1]; got {s.lcp_stabilization}")
    if not 0.0 <= s.lcp_restitution <= 1.0:
        raise ValueError(f"solver.lcp_restitution must be in [0, 1]; got {s.lcp_restitution}")
    if s.friction_directions != 0 and s.friction_directions < 3:
        raise ValueError(f"solver.friction_directions must be ≥ 3; got {s.friction_directions}")



__all__ = ["RUNGS", "LcpStepError", "LcpStepInfo", "validate_settings"]
