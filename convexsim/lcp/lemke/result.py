"""What a Lemke run returns: ``LemkeStatus`` (how it ended) and ``LemkeResult``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from convexsim.model import StatusCode


class LemkeStatus(StatusCode):
    """How a Lemke run ended."""

    SOLVED = 0
    """z0 left the basis (or q ≥ 0): z solves the LCP and passed the final check."""
    PIVOT_LIMIT = 1
    """max_pivots reached (exponential path or, with broken data, cycling)."""
    SECONDARY_RAY = 2
    """The entering column had no positive entry: the path escapes to infinity. For copositive-plus
    M (PSD included) this proves the LCP infeasible; for general M it proves nothing."""
    NUMERICAL_FAILURE = 3
    """Singular basis on refactorization, non-finite values, or the final check failed."""


@dataclass
class LemkeResult:
    """Outcome of ``lemke``.

    Attributes:
        z: the solution (status SOLVED), else the last basic point, shape (n,).
        w: M z + q, shape (n,).
        status: LemkeStatus.
        pivots: pivots performed, counting the first pivot of z0 into the basis.
        z0: value of the artificial variable at the end (0 when solved).
        basis: basic variable of each tableau row (0..n−1 → w_i, n..2n−1 → z_{i−n}, 2n → z0), shape (n,).
        ray: for SECONDARY_RAY, the z-part of the ray direction (entering z variable = 1, basic z
            variables increase by −c_i); zeros otherwise, shape (n,).
        residual: max of the scaled violations of z ≥ 0, w ≥ 0, z∘w = 0 (after the re-solve).
    """

    z: np.ndarray
    w: np.ndarray
    status: LemkeStatus
    pivots: int
    z0: float
    basis: np.ndarray
    ray: np.ndarray
    residual: float

    @property
    def solved(self) -> bool:
        """status is SOLVED."""
        return self.status == LemkeStatus.SOLVED
