"""``LemkeWorkspace``: the buffers of the dense kernels, reused across solves (the tableau or B⁻¹, the LU of
the basis, the basis and the result vectors)."""

from __future__ import annotations

import numpy as np


class LemkeWorkspace:
    """Preallocated buffers for ``lemke`` on problems of size n ≤ capacity.

    Reusing one workspace across a stepping loop avoids allocating the O(n²) buffers each step (the
    tableau for ``method="tableau"``, B⁻¹ for ``method="revised"``; each is allocated on first use).
    With a workspace, the returned ``z``, ``w``, ``basis`` and ``ray`` are views into it, valid
    until the next call that uses the same workspace.
    """

    def __init__(self, capacity: int):
        self.capacity = 0
        self.reserve(capacity)

    def reserve(self, n: int) -> None:
        """Grow the buffers (geometrically) so that problems of size n fit."""
        if n <= self.capacity:
            return
        cap = max(int(n), 2 * self.capacity, 4)
        self.capacity = cap
        self.tableau = None
        self.inverse = None
        self.lu = np.zeros(cap * cap)
        self.perm = np.zeros(cap, np.int64)
        self.perm2 = np.zeros(cap, np.int64)
        self.basis = np.zeros(cap, np.int64)
        self.vecs = np.zeros(6 * cap)            # (6, n) views are C-contiguous for every n
        self.ibuf = np.zeros(4 * cap, np.int64)
        self.fbuf = np.zeros(8 * cap)

    def views(self, n: int):
        """Contiguous views sized for n (no data allocation once the tableau exists)."""
        self.reserve(n)
        cap = self.capacity
        if self.tableau is None:
            self.tableau = np.zeros(cap * (2 * cap + 2))
        T = self.tableau[: n * (2 * n + 2)].reshape(n, 2 * n + 2)
        lu = self.lu[: n * n].reshape(n, n)
        return T, lu, self.perm[:n], self.perm2[:n], self.basis[:n], self.vecs[:6 * n].reshape(6, n)

    def revised_views(self, n: int):
        """Views for the revised kernel: ((B⁻¹)ᵀ (n, n), rhs (n,), column (n,), lu, perm, perm2, basis, vecs,
        int buffer (4n), float buffer (4n))."""
        self.reserve(n)
        cap = self.capacity
        if self.inverse is None:
            self.inverse = np.zeros(cap * cap)
        Bt = self.inverse[: n * n].reshape(n, n)
        lu = self.lu[: n * n].reshape(n, n)
        f = self.fbuf
        return (Bt, f[:n], f[cap:cap + n], lu, self.perm[:n], self.perm2[:n], self.basis[:n],
                self.vecs[:6 * n].reshape(6, n), self.ibuf[:4 * n], f[2 * cap:2 * cap + 6 * n])
