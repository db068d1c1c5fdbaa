"""The SAP contact problem: one time step's (dt, A, v*, constraints), stored as flat block arrays.

    min_v  ℓ(v) = ½ (v − v*)ᵀ A (v − v*) + Σ_i ℓ_i(J_i v)                                  (docs/sap.md)

A = blkdiag(A_c) has one SPD block per clique (a body or a kinematic tree); every constraint i touches one or
two cliques and has one 3 x n_c Jacobian block per clique, in its contact frame (normal last). The problem
knows nothing of scenes: build it with :meth:`ContactProblem.from_blocks` or :meth:`ContactProblem.from_dense`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from convexsim.sap import blocks
from convexsim.sap._validate import check_finite, check_nonneg, check_positive, per_constraint
from convexsim.sap.constraints import KIND_LAGGED, KIND_SAP, KIND_SIMILAR, NPAR
from convexsim.sap.friction_cone import contact_regularization
from convexsim.sap.hunt_crossley import hc_kernel_parameters

MODELS = {"sap": KIND_SAP, "lagged": KIND_LAGGED, "similar": KIND_SIMILAR}
"""Contact model name -> constraint kind code (same values as convexsim.model.ContactModel)."""


@dataclass(frozen=True, eq=False)
class ContactProblem:
    """One SAP problem in flat block layout (all arrays float64 / int64, SI units).

    Attributes:
        dt: time step [s].
        clique_sizes: dofs per clique n_c, shape (ncl,); clique c owns v[clique_start[c] : + n_c].
        A_values: blocks A_c (n_c x n_c, row-major) concatenated in clique order [kg, kg·m, kg·m²], flat.
        v_star: free-motion velocities v* [m/s, rad/s], shape (nv,).
        constraint_cliques: cliques of each constraint, shape (nk, 2); second entry −1 for one clique.
        J_values: Jacobian blocks (3 x n_c, row-major; rows t1, t2, n) per constraint and side, concatenated
            in constraint order, side 0 then side 1, flat.
        model: contact model, "sap", "lagged" or "similar".
        mu: friction coefficients (dimensionless), shape (nk,).
        k: stiffness [N/m], shape (nk,).
        tau_d: "sap" dissipation time scale τd [s], shape (nk,).
        phi0: "sap" signed distance at the previous step [m] (< 0 penetration), shape (nk,).
        d: Hunt–Crossley dissipation [s/m], shape (nk,).
        fe0: Hunt–Crossley elastic force at the previous step [N] (k·depth), shape (nk,).
        vn0: Hunt–Crossley normal velocity at the previous step [m/s], shape (nk,).
        sigma: friction regularization σ (dimensionless).
        beta: "sap" near-rigid threshold β (dimensionless).
        v_s: Hunt–Crossley stiction tolerance [m/s].
        v_known: the known part b of each constraint velocity, vc = J v + b [m/s], shape (nk, 3), or None (zero):
            the motion of a kinematic body at a contact. The "sap" model shifts its bias v̂ by −b (its cost is a
            function of v̂ − vc); the Hunt–Crossley models have no such term and refuse it.
    """

    dt: float
    clique_sizes: np.ndarray
    A_values: np.ndarray
    v_star: np.ndarray
    constraint_cliques: np.ndarray
    J_values: np.ndarray
    model: str
    mu: np.ndarray
    k: np.ndarray
    tau_d: np.ndarray
    phi0: np.ndarray
    d: np.ndarray
    fe0: np.ndarray
    vn0: np.ndarray
    sigma: float = 1e-3
    beta: float = 1.0
    v_s: float = 1e-4
    v_known: np.ndarray | None = None
    clique_start: np.ndarray = field(init=False, repr=False)
    A_ptr: np.ndarray = field(init=False, repr=False)
    J_ptr: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        sizes = np.ascontiguousarray(self.clique_sizes, dtype=np.int64).reshape(-1)
        if np.any(sizes <= 0):
            raise ValueError(f"clique_sizes must be positive, got {sizes}")
        start = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        a_ptr = np.concatenate([[0], np.cumsum(sizes * sizes)[:-1]]).astype(np.int64)
        cliques = np.ascontiguousarray(self.constraint_cliques, dtype=np.int64).reshape(-1, 2)
        _check_cliques(cliques, len(sizes))
        side_sizes = np.where(cliques >= 0, sizes[np.maximum(cliques, 0)], 0)
        flat = (3 * side_sizes).reshape(-1)
        j_ptr = (np.cumsum(flat) - flat).astype(np.int64).reshape(-1, 2)
        j_ptr[cliques < 0] = -1
        set_ = object.__setattr__
        set_(self, "dt", float(self.dt))
        set_(self, "clique_sizes", sizes)
        set_(self, "constraint_cliques", cliques)
        set_(self, "clique_start", start)
        set_(self, "A_ptr", a_ptr)
        set_(self, "J_ptr", j_ptr)
        set_(self, "A_values", np.ascontiguousarray(self.A_values, dtype=float).reshape(-1))
        set_(self, "J_values", np.ascontiguousarray(self.J_values, dtype=float).reshape(-1))
        set_(self, "v_star", np.ascontiguousarray(self.v_star, dtype=float).reshape(-1))
        nk = cliques.shape[0]
        for name in ("mu", "k", "tau_d", "phi0", "d", "fe0", "vn0"):
            set_(self, name, per_constraint(name, getattr(self, name), nk))
        if self.v_known is not None:
            b = check_finite("v_known", np.ascontiguousarray(self.v_known, dtype=float))
            if b.shape != (nk, 3):
                raise ValueError(f"v_known must have shape ({nk}, 3), got {b.shape}")
            if self.model != "sap" and np.any(b != 0.0):
                raise ValueError(f"a known constraint velocity (a moving kinematic body) needs the 'sap' contact "
                                 f"model; the {self.model!r} contact law has no term for it")
            set_(self, "v_known", b)
        self._validate(int(flat.sum()))

    def _validate(self, j_len: int) -> None:
        if not (np.isfinite(self.dt) and self.dt > 0):
            raise ValueError(f"dt must be a positive finite time step [s], got {self.dt!r}")
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {sorted(MODELS)}, got {self.model!r}")
        sizes = self.clique_sizes
        if self.A_values.size != int(np.sum(sizes * sizes)):
            raise ValueError(f"A_values must hold {int(np.sum(sizes * sizes))} numbers, got {self.A_values.size}")
        if self.v_star.size != self.nv:
            raise ValueError(f"v_star must have shape ({self.nv},), got ({self.v_star.size},)")
        if self.J_values.size != j_len:
            raise ValueError(f"J_values must hold {j_len} numbers, got {self.J_values.size}")
        check_finite("A", self.A_values)
        check_finite("v_star", self.v_star)
        check_finite("J", self.J_values)
        bad = blocks.first_non_spd_block(sizes, self.A_ptr, self.A_values)
        if bad >= 0:
            raise ValueError(f"A must be symmetric positive definite: block A_c of clique {bad} is not")
        check_nonneg("mu", self.mu)
        check_positive("k", self.k)
        check_positive("sigma", self.sigma)
        if self.model == "sap":
            check_nonneg("tau_d", self.tau_d)
            check_finite("phi0", self.phi0)
            check_nonneg("beta", self.beta)
        else:
            check_nonneg("d", self.d)
            check_finite("fe0", self.fe0)
            check_finite("vn0", self.vn0)
            check_positive("v_s", self.v_s)

    # ------------------------------------------------------------------ sizes
    @property
    def nv(self) -> int:
        """Number of generalized velocities."""
        return int(self.clique_sizes.sum())

    @property
    def ncliques(self) -> int:
        """Number of cliques (diagonal blocks of A)."""
        return int(self.clique_sizes.shape[0])

    @property
    def nk(self) -> int:
        """Number of constraints (contacts)."""
        return int(self.constraint_cliques.shape[0])

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_blocks(
        cls,
        dt: float,
        A_blocks,
        v_star,
        constraint_cliques,
        J_blocks,
        *,
        model: str = "sap",
        mu=None,
        k=None,
        tau_d=0.0,
        phi0=0.0,
        d=0.0,
        fe0=0.0,
        vn0=0.0,
        sigma: float = 1e-3,
        beta: float = 1.0,
        v_s: float = 1e-4,
        v_known=None,
    ) -> "ContactProblem":
        """Build a problem from per-clique A blocks and per-constraint Jacobian blocks.

        Args:
            dt: time step [s].
            A_blocks: sequence of SPD (n_c, n_c) arrays, or an array (ncl, n, n).
            v_star: free-motion velocities, shape (nv,) with nv = Σ n_c.
            constraint_cliques: (nk, 2) ints; second entry −1 for a constraint on one clique (e.g. against a
                fixed body). A pair (c, c) is merged into one side (J = J0 + J1).
            J_blocks: for each constraint, a (3, n_c0) array or a pair of (3, n_c0), (3, n_c1) arrays; or an
                array (nk, 2, 3, n) (side 1 ignored where the clique is −1), or (nk, 3, n) for one-clique
                constraints. Rows (t1, t2, n) of the contact frame.
            model: "sap" (uses mu, k, tau_d, phi0, sigma, beta) or "lagged"/"similar" (mu, k, d, fe0, vn0,
                sigma, v_s). Parameters are scalars or (nk,) arrays.
            v_known: the known part of the constraint velocities (nk, 3) [m/s], or None (class docstring).

        Returns:
            The validated ContactProblem.

        Raises:
            ValueError: naming the offending argument (shapes, NaN, non-SPD A, negative μ, k, τd, d, ...).
        """
        if mu is None or k is None:
            raise ValueError("mu and k are required (per-constraint friction and stiffness)")
        if isinstance(A_blocks, np.ndarray) and A_blocks.ndim == 3:
            A_list = list(A_blocks.astype(float, copy=False))
        else:
            A_list = [np.asarray(a, dtype=float) for a in A_blocks]
        for c, a in enumerate(A_list):
            if a.ndim != 2 or a.shape[0] != a.shape[1]:
                raise ValueError(f"A_blocks[{c}] must be square, got shape {a.shape}")
        sizes = np.array([a.shape[0] for a in A_list], dtype=np.int64)
        cliques = np.array(constraint_cliques, dtype=np.int64).reshape(-1, 2)
        _check_cliques(cliques, len(sizes), normalize=False)
        packed = _pack_uniform_jacobians(cliques, J_blocks, sizes)
        if packed is None:
            sides = _jacobian_sides(J_blocks, cliques.shape[0])
            packed = _pack_jacobians(cliques, sides, sizes)
        cliques, J_flat = packed
        if isinstance(A_blocks, np.ndarray) and A_blocks.ndim == 3:
            A_flat = np.ascontiguousarray(A_blocks, dtype=float).reshape(-1)
        else:
            A_flat = np.concatenate([a.reshape(-1) for a in A_list]) if A_list else np.zeros(0)
        return cls(
            dt, sizes, A_flat, v_star, cliques, J_flat, model, mu, k, tau_d, phi0, d, fe0, vn0,
            sigma=float(sigma), beta=float(beta), v_s=float(v_s), v_known=v_known,
        )

    @classmethod
    def from_dense(cls, A, v_star, J, *, dt: float = 1.0, clique_sizes=None, **params) -> "ContactProblem":
        """Build a problem from dense A (nv, nv), v* (nv,) and J (3 nk, nv) (rows t1, t2, n per constraint).

        ``clique_sizes`` splits the dofs into cliques (default: a single clique); A must be block diagonal
        with those blocks and every constraint must touch at most two cliques. Other keyword arguments as in
        :meth:`from_blocks`.
        """
        A = check_finite("A", A)
        J = check_finite("J", J)
        v_star = np.asarray(v_star, dtype=float)
        nv = v_star.shape[0]
        if A.shape != (nv, nv):
            raise ValueError(f"A must have shape ({nv}, {nv}), got {A.shape}")
        if J.ndim != 2 or J.shape[1] != nv or J.shape[0] % 3:
            raise ValueError(f"J must have shape (3 nk, {nv}), got {J.shape}")
        sizes = np.array([nv] if clique_sizes is None else clique_sizes, dtype=np.int64)
        if sizes.sum() != nv:
            raise ValueError(f"clique_sizes must sum to nv = {nv}, got {sizes.sum()}")
        start = np.concatenate([[0], np.cumsum(sizes)])
        mask = np.zeros_like(A, dtype=bool)
        for c in range(len(sizes)):
            mask[start[c] : start[c + 1], start[c] : start[c + 1]] = True
        if np.any(A[~mask] != 0.0):
            raise ValueError("A must be block diagonal with the blocks given by clique_sizes")
        A_blocks = [A[start[c] : start[c + 1], start[c] : start[c + 1]] for c in range(len(sizes))]
        nk = J.shape[0] // 3
        cliques = -np.ones((nk, 2), dtype=np.int64)
        J_blocks = []
        for i in range(nk):
            Ji = J[3 * i : 3 * i + 3]
            touched = [c for c in range(len(sizes)) if np.any(Ji[:, start[c] : start[c + 1]] != 0.0)]
            if len(touched) > 2:
                raise ValueError(f"J: constraint {i} touches {len(touched)} cliques (at most 2 allowed)")
            touched = touched or [0]
            cliques[i, : len(touched)] = touched
            J_blocks.append(tuple(Ji[:, start[c] : start[c + 1]] for c in touched))
        return cls.from_blocks(dt, A_blocks, v_star, cliques, J_blocks, **params)

    # ------------------------------------------------------------------ dense views and products
    def A_blocks(self) -> list[np.ndarray]:
        """The diagonal blocks A_c as a list of (n_c, n_c) arrays (views)."""
        return [
            self.A_values[p : p + n * n].reshape(n, n) for p, n in zip(self.A_ptr, self.clique_sizes)
        ]

    def A_dense(self) -> np.ndarray:
        """Dense A (nv, nv)."""
        A = np.zeros((self.nv, self.nv))
        for s, n, blk in zip(self.clique_start, self.clique_sizes, self.A_blocks()):
            A[s : s + n, s : s + n] = blk
        return A

    def J_dense(self) -> np.ndarray:
        """Dense J (3 nk, nv), rows (t1, t2, n) per constraint."""
        J = np.zeros((3 * self.nk, self.nv))
        for i in range(self.nk):
            for side in range(2):
                c = self.constraint_cliques[i, side]
                if c < 0:
                    continue
                n, s, p = self.clique_sizes[c], self.clique_start[c], self.J_ptr[i, side]
                J[3 * i : 3 * i + 3, s : s + n] += self.J_values[p : p + 3 * n].reshape(3, n)
        return J

    def constraint_velocities(self, v) -> np.ndarray:
        """vc = J v, shape (nk, 3) [m/s]."""
        vc = np.empty((self.nk, 3))
        blocks.constraint_velocities(
            self.clique_start, self.clique_sizes, self.constraint_cliques, self.J_ptr, self.J_values,
            np.ascontiguousarray(v, dtype=float), vc,
        )
        return vc

    def generalized_impulses(self, gamma) -> np.ndarray:
        """j = Jᵀγ, shape (nv,), for impulses γ (nk, 3) [N·s]."""
        out = np.empty(self.nv)
        blocks.generalized_impulses(
            self.clique_start, self.clique_sizes, self.constraint_cliques, self.J_ptr, self.J_values,
            np.ascontiguousarray(gamma, dtype=float).reshape(self.nk, 3), out,
        )
        return out


def delassus_diagonal(problem: ContactProblem) -> np.ndarray:
    """Delassus diagonal estimate w_i [1/kg] per constraint, shape (nk,) (docs/sap.md, Drake's variant).

    W_ii ≈ Σ_c J_i,c diag(A_c)⁻¹ J_i,cᵀ (only the diagonal of A_c is inverted),  w_i = ‖W_ii‖_F / 3.
    """
    w = np.empty(problem.nk)
    blocks.delassus_estimate(
        problem.clique_start, problem.clique_sizes, problem.A_ptr, problem.A_values,
        problem.constraint_cliques, problem.J_ptr, problem.J_values, w,
    )
    return w


def constraint_kernel_data(problem: ContactProblem, w: np.ndarray):
    """Kernel parameters of every constraint for one step: (kind (nk,), cpar (nk, 8), R (nk, 3), v_hat (nk, 3)).

    "sap": R and v̂ from :func:`contact_regularization` (v̂n = −φ0/dt for a speculative contact, φ0 > 0), v̂
    shifted by −``v_known`` when given;
    Hunt–Crossley: n0, εs, v̂ from ``hc_step_constants``
    (R, v_hat rows are zero for them). Constraints with w = 0 (a zero Jacobian) get w = 1 so R stays finite.
    """
    nk = problem.nk
    w = np.where(w > 0.0, w, 1.0)
    kind = np.full(nk, MODELS[problem.model], dtype=np.int64)
    cpar = np.zeros((nk, NPAR))
    R = np.zeros((nk, 3))
    v_hat = np.zeros((nk, 3))
    if nk == 0:
        return kind, cpar, R, v_hat
    if problem.model == "sap":
        R, v_hat = contact_regularization(
            problem.dt, problem.k, problem.tau_d, problem.mu, w, problem.beta, problem.sigma, problem.phi0
        )
        cpar[:, 0] = problem.mu
        cpar[:, 1] = R[:, 0]
        cpar[:, 2] = R[:, 2]
        if problem.v_known is not None:
            v_hat = v_hat - problem.v_known                 # vc = J v + b: v̂ − vc = (v̂ − b) − J v
        cpar[:, 3:6] = v_hat
        return kind, cpar, R, v_hat
    hc_kernel_parameters(
        problem.dt, problem.k, problem.d, problem.mu, problem.fe0, problem.vn0, problem.sigma, w, problem.v_s, cpar
    )
    return kind, cpar, R, v_hat


def _check_cliques(cliques: np.ndarray, ncl: int, normalize: bool = True) -> None:
    if cliques.size and (cliques.max() >= ncl or cliques.min() < -1):
        raise ValueError(f"constraint_cliques must hold clique indices in [0, {ncl}) or -1")
    if np.any(cliques[:, 0] < 0):
        raise ValueError("constraint_cliques: the first clique of every constraint must be >= 0")
    if normalize and np.any(cliques[:, 0] == cliques[:, 1]):
        raise ValueError("constraint_cliques: a constraint's two cliques must differ (use -1 for one)")


def _jacobian_sides(J_blocks, nk: int) -> list[list[np.ndarray]]:
    """Normalize the accepted J_blocks formats into a list (per constraint) of 1–2 arrays."""
    if isinstance(J_blocks, np.ndarray):
        if J_blocks.ndim == 4 and J_blocks.shape[:3] == (nk, 2, 3):
            return [[J_blocks[i, 0], J_blocks[i, 1]] for i in range(nk)]
        if J_blocks.ndim == 3 and J_blocks.shape[:2] == (nk, 3):
            return [[J_blocks[i]] for i in range(nk)]
        raise ValueError(f"J_blocks array must have shape ({nk}, 2, 3, n) or ({nk}, 3, n), got {J_blocks.shape}")
    if len(J_blocks) != nk:
        raise ValueError(f"J_blocks must have one entry per constraint ({nk}), got {len(J_blocks)}")
    out = []
    for item in J_blocks:
        if isinstance(item, np.ndarray) and item.ndim == 2:
            out.append([item])
        else:
            out.append([np.asarray(x, dtype=float) for x in item])
    return out


def _pack_uniform_jacobians(cliques: np.ndarray, J_blocks, sizes: np.ndarray):
    """Vectorized packing for an array J_blocks (nk, 2, 3, n) or (nk, 3, n) when every clique has n dofs."""
    nk = cliques.shape[0]
    if not isinstance(J_blocks, np.ndarray) or nk == 0 or np.any(sizes != sizes[0]):
        return None
    n = int(sizes[0])
    if J_blocks.shape == (nk, 3, n):
        if np.any(cliques[:, 1] >= 0):
            raise ValueError("J_blocks of shape (nk, 3, n) need every constraint on a single clique")
        return cliques.copy(), np.ascontiguousarray(J_blocks, dtype=float).reshape(-1)
    if J_blocks.shape != (nk, 2, 3, n):
        return None
    cliques = cliques.copy()
    J = np.array(J_blocks, dtype=float)
    same = cliques[:, 1] == cliques[:, 0]
    J[same, 0] += J[same, 1]
    cliques[same, 1] = -1
    used = np.stack([np.ones(nk, dtype=bool), cliques[:, 1] >= 0], axis=1)
    return cliques, J.reshape(nk, 2, 3 * n)[used].reshape(-1)


def _pack_jacobians(cliques: np.ndarray, sides: Sequence, sizes: np.ndarray):
    """Flat J values in (constraint, side) order; merges a (c, c) pair into one side."""
    cliques = cliques.copy()
    chunks = []
    for i, blocks_i in enumerate(sides):
        c0, c1 = cliques[i]
        used = [0] if c1 < 0 else [0, 1]
        if len(blocks_i) < len(used):
            raise ValueError(f"J_blocks[{i}]: expected {len(used)} blocks for cliques {tuple(cliques[i])}")
        mats = []
        for side in used:
            Jb = np.asarray(blocks_i[side], dtype=float)
            n = sizes[cliques[i, side]]
            if Jb.shape != (3, n):
                raise ValueError(f"J_blocks[{i}][{side}] must have shape (3, {n}), got {Jb.shape}")
            mats.append(Jb)
        if c1 == c0:
            mats = [mats[0] + mats[1]]
            cliques[i, 1] = -1
        chunks.extend(m.reshape(-1) for m in mats)
    J_flat = np.concatenate(chunks) if chunks else np.zeros(0)
    return cliques, J_flat
