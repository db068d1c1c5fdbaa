"""The SAP solver: Newton's method with exact line search on the strictly convex cost (docs/sap.md).

    min_v ℓ(v) = ½ (v − v*)ᵀ A (v − v*) + Σ_i ℓ_i(J_i v)
    ∇ℓ = A (v − v*) − Jᵀ γ(v)        (the momentum residual),      H = A + Jᵀ G J,   G = blkdiag(G_i)

Each iteration: evaluate γ_i, G_i (numba, O(nk)); stop if ‖D ∇ℓ‖ ≤ ε_a + ε_r max(‖D A v‖, ‖D Jᵀγ‖) with
D = diag(A)^(−1/2) (checked before any factorization, so an optimal guess costs 0 iterations) or if the cost
stalled in the previous step with α > 0.5; else solve H dv = −∇ℓ (supernodal block-sparse Cholesky; while
r > ε_κ s the blocks G_i of sliding contacts carry the slip curvature κ, SapParameters.slip_curvature), line-search α
along dv in O(nk) per evaluation, v ← v + α dv. Castro, Permenter & Han, IEEE T-RO 2023, arXiv:2110.10107.

The loop is Python orchestrating numba kernels (one call per stage, each looping over constraints or
blocks); failures are statuses in the result, turned into a warning or exception by :func:`solve`.
"""

from __future__ import annotations

import warnings

import numpy as np

from convexsim.sap import blocks, linalg
from convexsim.sap._validate import check_finite, check_positive
from convexsim.sap.constraints import (KIND_SAP, NPAR, cost_along_ray, eval_constraints,
                                      relinearize_predicted_stiction)
from convexsim.sap.linalg import DenseHessian, SparseHessian, SymbolicCache
from convexsim.sap.linesearch import LS_OK, backtracking_line_search, exact_line_search
from convexsim.sap.problem import ContactProblem, constraint_kernel_data, delassus_diagonal
from convexsim.sap.types import SapConvergenceWarning, SapParameters, SapResult, SapSolverError, SapStatus

_LS_MESSAGES = {1: "not a descent direction", 2: "non-finite cost or derivative", 3: "no convergence"}


def solve(problem: ContactProblem, v_guess=None, *, params: SapParameters | None = None,
          symbolic_cache: SymbolicCache | None = None) -> SapResult:
    """Solve one SAP problem.

    Args:
        problem: the ContactProblem (validated at construction).
        v_guess: initial velocities (nv,), e.g. the previous step's v; default v*.
        params: SapParameters (defaults as Drake's).
        symbolic_cache: reuse the Hessian's symbolic analysis across solves with the same clique graph
            (a step context owns one); None analyses once per solve. The result is the same either way.

    Returns:
        SapResult with v, gamma (nk, 3) in contact frames (normal last), vc, j = Jᵀγ, status, statistics.
        On failure the last iterate is returned with a non-CONVERGED status and, depending on
        ``params.on_failure``, a SapConvergenceWarning or a SapSolverError.

    Example:
        >>> import numpy as np
        >>> from convexsim.sap import ContactProblem, solve
        >>> # 1 kg point mass resting on the ground for one step, dt = 0.01 s, k = 1e4 N/m
        >>> p = ContactProblem.from_dense(np.eye(3), [0, 0, -0.0981], np.eye(3), dt=0.01, mu=0.5, k=1e4,
        ...                               tau_d=0.01, phi0=-9.81e-4, beta=0.0)
        >>> r = solve(p)
        >>> bool(r.converged), round(float(r.gamma[0, 2]), 4)
        (True, 0.0981)
    """
    params = params or SapParameters()
    w = delassus_diagonal(problem)
    kind, cpar, R, v_hat = constraint_kernel_data(problem, w)
    return _solve_kernel_data(problem, kind, cpar, w, R, v_hat, v_guess, params, symbolic_cache)


def solve_dense(
    A,
    v_star,
    J,
    mu,
    R,
    v_hat,
    *,
    v_guess=None,
    rel_tolerance: float = 1e-6,
    abs_tolerance: float = 1e-14,
    max_iterations: int = 100,
    line_search: str = "exact",
) -> SapResult:
    """Solve a SAP problem with friction-cone constraints given directly by their regularization.

    min_v ½ (v − v*)ᵀ A (v − v*) + Σ_i ½ ‖P_F(R_i⁻¹(v̂_i − J_i v))‖²_{R_i}   (dense linear algebra)

    Args:
        A: SPD matrix (nv, nv) [kg, kg·m, kg·m²].
        v_star: free-motion velocities (nv,).
        J: constraint Jacobian (3 nc, nv), rows (t1, t2, n) per contact.
        mu: friction coefficients, scalar or (nc,), ≥ 0.
        R: regularization rows (Rt, Rt, Rn) > 0, shape (nc, 3) (see :func:`contact_regularization`).
        v_hat: bias velocities (nc, 3) [m/s].
        v_guess: initial guess (nv,), default v*.
        rel_tolerance, abs_tolerance, max_iterations, line_search: as in SapParameters.

    Returns:
        SapResult (``.v``, ``.gamma`` (nc, 3), ``.converged``, ``.iterations``, ...). Failures warn.
    """
    problem = ContactProblem.from_dense(A, v_star, J, mu=mu, k=1.0, model="sap")
    nk = problem.nk
    R = check_positive("R", np.asarray(R, dtype=float))
    v_hat = check_finite("v_hat", np.asarray(v_hat, dtype=float))
    for name, a in (("R", R), ("v_hat", v_hat)):
        if a.shape != (nk, 3):
            raise ValueError(f"{name} must have shape ({nk}, 3), got {a.shape}")
    if np.any(R[:, 0] != R[:, 1]):
        raise ValueError("R: the two tangential entries R[:, 0] and R[:, 1] must be equal (isotropic friction)")
    cpar = np.zeros((nk, NPAR))
    cpar[:, 0] = problem.mu
    cpar[:, 1] = R[:, 0]
    cpar[:, 2] = R[:, 2]
    cpar[:, 3:6] = v_hat
    kind = np.full(nk, KIND_SAP, dtype=np.int64)
    params = SapParameters(
        rel_tolerance=rel_tolerance, abs_tolerance=abs_tolerance, max_iterations=max_iterations,
        line_search=line_search, linear_solver="dense",
    )
    return _solve_kernel_data(problem, kind, cpar, delassus_diagonal(problem), R, v_hat, v_guess, params)


def solve_rows(A, v_star, *, kind=None, cpar=None, Jc=None, Jr=None, par=None, v_guess=None,
               params: SapParameters | None = None) -> SapResult:
    """Solve a SAP problem with contacts and scalar joint rows on one dense clique, by the same Newton loop
    as :func:`solve` (the numpy reference of the compiled ``newton_solve``):

        min_v ½ (v − v*)ᵀ A (v − v*) + Σ_i ℓ_i(J_i v) + Σ_r ℓ_r(J_r v)

    A row r (limits, PD actuators, couplers, holonomic rows: ``sap.joint_constraints``) is a constraint of
    kind ≥ ``constraints.KIND_ROW_MIN`` whose Jacobian block holds J_r in its first row and zeros in the other
    two (``sap.constraints``), as in the compiled step.

    Args:
        A: (nv, nv) SPD [kg, kg·m²]. v_star: (nv,) [m/s, rad/s].
        kind (nk,), cpar (nk, 8), Jc (3 nk, nv): the contacts (optional; rows t1, t2, n).
        Jr (nr, nv), par (nr, 4): the joint rows (optional; parameters (R, v̂, γ_lo, γ_hi)).
        v_guess: initial iterate (default v*). params: SapParameters (linear_solver is "dense" here).

    Returns:
        SapResult; ``gamma[:nk]`` are the contact impulses (nk, 3), ``gamma[nk:, 0]`` the row impulses (nr,)
        [N·s or N·m·s].
    """
    from dataclasses import replace

    from convexsim.sap.constraints import KIND_ROW_MIN

    A = np.asarray(A, dtype=float)
    v_star = np.asarray(v_star, dtype=float)
    nv = v_star.size
    kind = np.zeros(0, np.int64) if kind is None else np.ascontiguousarray(kind, dtype=np.int64).reshape(-1)
    nk = kind.size
    cpar = np.zeros((0, NPAR)) if cpar is None else np.asarray(cpar, dtype=float).reshape(nk, NPAR)
    Jc = np.zeros((0, nv)) if Jc is None else np.asarray(Jc, dtype=float).reshape(3 * nk, nv)
    par = np.zeros((0, 4)) if par is None else np.asarray(par, dtype=float).reshape(-1, 4)
    Jr = np.zeros((0, nv)) if Jr is None else np.asarray(Jr, dtype=float).reshape(-1, nv)
    nr = par.shape[0]
    if Jr.shape[0] != nr:
        raise ValueError(f"Jr has {Jr.shape[0]} rows but par has {nr}")
    J = np.zeros((3 * (nk + nr), nv))
    J[:3 * nk] = Jc
    J[3 * nk::3] = Jr
    all_kind = np.concatenate([kind, np.full(nr, KIND_ROW_MIN, np.int64)])
    all_par = np.zeros((nk + nr, NPAR))
    all_par[:nk] = cpar
    all_par[nk:, :4] = par
    problem = ContactProblem.from_dense(A, v_star, J, mu=0.0, k=1.0, model="sap")
    params = replace(params or SapParameters(), linear_solver="dense")
    return _solve_kernel_data(problem, all_kind, all_par, delassus_diagonal(problem), np.zeros((nk + nr, 3)),
                              np.zeros((nk + nr, 3)), v_guess, params)


def _make_hessian(problem: ContactProblem, params: SapParameters, symbolic_cache: SymbolicCache | None):
    if params.linear_solver == "dense":
        return DenseHessian(problem)
    factorization = "block" if params.linear_solver == "block" else "supernodal"
    return SparseHessian(problem, symbolic_cache, factorization=factorization, prune=linalg.PRUNE_PATTERN)


def _initial_guess(problem: ContactProblem, v_guess) -> np.ndarray:
    if v_guess is None:
        return problem.v_star.copy()
    v = np.array(v_guess, dtype=float).reshape(-1)
    if v.shape != (problem.nv,):
        raise ValueError(f"v_guess must have shape ({problem.nv},), got {v.shape}")
    return check_finite("v_guess", v).copy()


def _solve_kernel_data(problem, kind, cpar, w, R, v_hat, v_guess, params: SapParameters,
                       symbolic_cache: SymbolicCache | None = None) -> SapResult:
    v = _initial_guess(problem, v_guess)
    if problem.nk == 0:  # no constraints: v = v*, nothing to iterate
        z = np.zeros(0)
        return SapResult(
            problem.v_star.copy(), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(problem.nv), SapStatus.CONVERGED,
            0, 0, 0.0, np.zeros(1), np.ones(1), np.zeros(1), np.zeros(1), np.zeros(1, dtype=np.int64), True,
            False, z, np.zeros((0, 3)),
            np.zeros((0, 3)),
        )
    reduced, dofs = _participating_problem(problem)
    run = _NewtonRun(reduced, kind, cpar, params, symbolic_cache)
    status, message = run.iterate(v[dofs] if dofs is not None else v)
    v_out, j_out = run.v, run.jc.copy()
    if dofs is not None:  # cliques without constraints keep v = v*, j = 0
        v_out = problem.v_star.copy()
        v_out[dofs] = run.v
        j_out = np.zeros(problem.nv)
        j_out[dofs] = run.jc
    result = SapResult(
        v=v_out, gamma=run.gamma.copy(), vc=run.vc.copy(), j=j_out, status=status,
        iterations=run.iterations, line_search_evaluations=run.ls_evaluations, cost=run.cost[-1],
        cost_history=np.array(run.cost), alpha=np.array(run.alpha), momentum_residual=np.array(run.residual),
        momentum_scale=np.array(run.scale), line_search_history=np.array(run.ls_history, dtype=np.int64),
        optimality_reached=run.optimality_reached,
        cost_criterion_reached=run.cost_criterion_reached, w=w, R=R, v_hat=v_hat, message=message,
        nonmonotonic_iterations=run.nonmonotonic,
    )
    _report_failure(result, params)
    return result


def _participating_problem(problem: ContactProblem):
    """(problem restricted to the cliques touched by some constraint, their dof mask), or (problem, None).

    Untouched cliques decouple: their optimum is v = v* exactly, so they are left out of the Newton solve (as
    Drake does); this keeps the cost proportional to the contact graph, not to the number of bodies.
    """
    sizes = problem.clique_sizes
    used = np.zeros(problem.ncliques, dtype=bool)
    cl = problem.constraint_cliques
    used[cl[cl >= 0]] = True
    if used.all():
        return problem, None
    new_index = np.cumsum(used) - 1
    cliques = np.where(cl >= 0, new_index[np.maximum(cl, 0)], -1)
    a_mask = np.repeat(used, sizes * sizes)
    dofs = np.repeat(used, sizes)
    reduced = ContactProblem(
        problem.dt, sizes[used], problem.A_values[a_mask], problem.v_star[dofs], cliques, problem.J_values,
        problem.model, problem.mu, problem.k, problem.tau_d, problem.phi0, problem.d, problem.fe0, problem.vn0,
        sigma=problem.sigma, beta=problem.beta, v_s=problem.v_s,
    )
    return reduced, dofs


def _report_failure(result: SapResult, params: SapParameters) -> None:
    if result.converged or params.on_failure == "ignore":
        return
    text = f"SAP solver failed ({result.status.name}) after {result.iterations} iterations: {result.message}"
    if params.on_failure == "raise":
        raise SapSolverError(text)
    warnings.warn(text, SapConvergenceWarning, stacklevel=3)


class _NewtonRun:
    """Work arrays and statistics of one Newton solve (internal)."""

    def __init__(self, problem: ContactProblem, kind, cpar, params: SapParameters,
                 symbolic_cache: SymbolicCache | None = None):
        self.p = problem
        self.symbolic_cache = symbolic_cache
        self.kind = kind
        self.cpar = np.ascontiguousarray(cpar)
        self.params = params
        nv, nk = problem.nv, problem.nk
        self.vc = np.empty((nk, 3))
        self.dvc = np.empty((nk, 3))
        self.gamma = np.empty((nk, 3))
        self.G = np.empty((nk, 3, 3))
        self._ls_work = np.empty(12)       # the line searches' per-constraint γ and G
        self.Av = np.empty(nv)
        self.jc = np.empty(nv)
        self.dp = np.empty(nv)
        self.p_star = self._A(problem.v_star, np.empty(nv))
        sizes = problem.clique_sizes
        owner = np.repeat(np.arange(problem.ncliques), sizes)  # clique of every dof
        local = np.arange(nv) - problem.clique_start[owner]
        diag_idx = problem.A_ptr[owner] + local * (sizes[owner] + 1)
        self.D = 1.0 / np.sqrt(problem.A_values[diag_idx])
        self.hessian = None
        self.cost, self.alpha, self.residual, self.scale, self.ls_history = [], [1.0], [], [], [0]
        self.iterations = 0
        self.ls_evaluations = 0
        self.optimality_reached = False
        self.cost_criterion_reached = False
        self.nonmonotonic = 0
        self.kappa = float(params.slip_curvature)  # set to 0 (exact Hessian) once near the optimum

    def _A(self, x, out):
        p = self.p
        blocks.block_diag_matvec(p.clique_start, p.clique_sizes, p.A_ptr, p.A_values, x, out)
        return out

    def _J(self, x, out):
        p = self.p
        blocks.constraint_velocities(p.clique_start, p.clique_sizes, p.constraint_cliques, p.J_ptr, p.J_values, x, out)
        return out

    def _evaluate(self, v):
        """γ, G, ∇ℓ and ℓ at v; returns (ell, ell_A, grad)."""
        p = self.p
        self._J(v, self.vc)
        ell_r = eval_constraints(self.kind, self.cpar, self.vc, self.gamma, self.G, True, self.kappa)
        self._A(v, self.Av)
        blocks.generalized_impulses(
            p.clique_start, p.clique_sizes, p.constraint_cliques, p.J_ptr, p.J_values, self.gamma, self.jc
        )
        grad = self.Av - self.p_star - self.jc
        ell_a = 0.5 * float(np.dot(v - p.v_star, self.Av - self.p_star))
        return ell_a + ell_r, ell_a, grad

    def _cost_stalled(self, ell, ell_prev) -> bool:
        prm = self.params
        tol = prm.cost_abs_tolerance + prm.cost_rel_tolerance * 0.5 * (abs(ell) + abs(ell_prev))
        return abs(ell_prev - ell) < tol and self.alpha[-1] > 0.5

    def iterate(self, v: np.ndarray) -> tuple[SapStatus, str]:
        """Run Newton from v (modified in place); returns (status, message)."""
        prm = self.params
        self.v = v
        ell_prev = np.inf
        while True:
            ell, ell_a, grad = self._evaluate(v)
            r = float(np.linalg.norm(self.D * grad))
            s = max(float(np.linalg.norm(self.D * self.Av)), float(np.linalg.norm(self.D * self.jc)))
            self.cost.append(ell)
            self.residual.append(r)
            self.scale.append(s)
            if not (np.isfinite(ell) and np.isfinite(r)):
                where = "at the guess" if self.iterations == 0 else f"after iteration {self.iterations}"
                return SapStatus.NUMERICAL_FAILURE, f"non-finite cost or momentum residual {where}"
            self.optimality_reached = r <= prm.abs_tolerance + prm.rel_tolerance * s
            if self.iterations > 0:
                self.cost_criterion_reached = self._cost_stalled(ell, ell_prev)
                if ell > ell_prev + prm.relative_slop * max(1.0, 0.5 * (abs(ell) + abs(ell_prev))):
                    self.nonmonotonic += 1  # round-off dominates; reported in the result (§4.2b)
            if self.optimality_reached or self.cost_criterion_reached:
                return SapStatus.CONVERGED, ""
            if self.kappa > 0.0 and r <= prm.slip_curvature_residual * s:
                self.kappa = 0.0  # near the optimum: exact Hessian blocks from here on (one O(nk) pass)
                eval_constraints(self.kind, self.cpar, self.vc, self.gamma, self.G, True, 0.0)
            if self.iterations >= prm.max_iterations:
                return SapStatus.MAX_ITERATIONS, (
                    f"momentum residual {r:.3e} > {prm.abs_tolerance:.1e} + {prm.rel_tolerance:.1e} * {s:.3e}"
                )
            status, message = self._newton_step(v, grad, ell, ell_a)
            if status != SapStatus.CONVERGED:  # v unchanged: repeat its statistics so arrays stay aligned
                if self.iterations + 1 > len(self.alpha):
                    self.alpha.append(0.0)
                    self.ls_history.append(self.ls_evaluations - sum(self.ls_history))
                    self.cost.append(ell)
                    self.residual.append(r)
                    self.scale.append(s)
                return status, message
            ell_prev = ell

    def _newton_step(self, v, grad, ell, ell_a) -> tuple[SapStatus, str]:
        prm = self.params
        if self.hessian is None:  # ordering / symbolic analysis once per solve, only if needed
            self.hessian = _make_hessian(self.p, prm, self.symbolic_cache)
        dv, ok = self.hessian.factor_and_solve(self.G, -grad)
        if not ok:
            return SapStatus.FACTORIZATION_FAILED, "the Hessian A + Jᵀ G J is not numerically SPD"
        self._A(dv, self.dp)
        self._J(dv, self.dvc)
        a2 = float(np.dot(dv, self.dp))
        if not a2 > 0.0:
            return SapStatus.FACTORIZATION_FAILED, f"dvᵀ A dv = {a2!r} is not positive"
        a1 = float(np.dot(self.dp, v - self.p.v_star))
        dell0 = float(np.dot(grad, dv))  # = −∇ℓᵀH⁻¹∇ℓ < 0
        alpha, nev, code = self._line_search(self.dvc, ell, ell_a, a1, a2, dell0)
        self.ls_evaluations += int(nev)
        self.iterations += 1
        if code != LS_OK:
            return SapStatus.LINE_SEARCH_FAILED, f"{prm.line_search} line search: {_LS_MESSAGES[int(code)]}"
        if (prm.stiction_prediction and prm.line_search == "exact" and alpha < 0.5
                and self.iterations < prm.max_iterations
                and relinearize_predicted_stiction(self.kind, self.cpar, self.vc, self.dvc, self.gamma,
                                                   self.G) > 0):
            self.alpha.append(0.0)  # two factorizations at this v, one step: the first is recorded as α = 0
            self.ls_history.append(int(nev))
            self.cost.append(ell)
            self.residual.append(self.residual[-1])
            self.scale.append(self.scale[-1])
            alpha, nev, dv = self._stiction_step(v, grad, ell, ell_a, dv, a1, a2, alpha)
        v += alpha * dv
        self.alpha.append(float(alpha))
        self.ls_history.append(int(nev))
        return SapStatus.CONVERGED, ""

    def _stiction_step(self, v, grad, ell, ell_a, dv, a1, a2, alpha):
        """After a damped step (α < ½): a second direction with the constraints' γ, G at v where the
        contacts the full step would stop (or reverse) are linearized as sticking
        (``relinearize_predicted_stiction`` has written them into self.gamma, self.G); it replaces dv if its
        line search reaches a lower cost. One more factorization (an iteration). Returns (α, line-search
        evaluations, direction)."""
        p, prm = self.p, self.params
        jc = np.empty(p.nv)
        blocks.generalized_impulses(p.clique_start, p.clique_sizes, p.constraint_cliques, p.J_ptr, p.J_values,
                                    self.gamma, jc)
        self.iterations += 1
        dv2, ok = self.hessian.factor_and_solve(self.G, -(self.Av - self.p_star - jc))
        if not ok:
            return alpha, 0, dv
        dell0 = float(np.dot(grad, dv2))
        if not dell0 < 0.0:
            return alpha, 0, dv
        dp2 = self._A(dv2, np.empty(p.nv))
        dvc2 = self._J(dv2, np.empty((p.nk, 3)))
        b1 = float(np.dot(dp2, v - p.v_star))
        b2 = float(np.dot(dv2, dp2))
        if not b2 > 0.0:
            return alpha, 0, dv
        alpha2, nev, code = self._line_search(dvc2, ell, ell_a, b1, b2, dell0)
        self.ls_evaluations += int(nev)
        if code != LS_OK:
            return alpha, nev, dv
        self.ls_evaluations += 2
        if self._ray_cost(dvc2, ell_a, b1, b2, alpha2) < self._ray_cost(self.dvc, ell_a, a1, a2, alpha):
            return alpha2, nev + 2, dv2
        return alpha, nev + 2, dv

    def _ray_cost(self, dvc, ell_a, a1, a2, alpha):
        """ℓ(v + α dv) from the ray's terms (``sap.linesearch``)."""
        ell_r, _ = cost_along_ray(self.kind, self.cpar, self.vc, dvc, alpha, self._ls_work)
        return ell_a + alpha * a1 + 0.5 * alpha * alpha * a2 + ell_r

    def _line_search(self, dvc, ell, ell_a, a1, a2, dell0):
        prm = self.params
        if prm.line_search == "exact":
            return exact_line_search(
                self.kind, self.cpar, self.vc, dvc, ell, ell_a, a1, a2, dell0, prm.exact_alpha_max,
                prm.exact_max_iterations, prm.cost_abs_tolerance, prm.cost_rel_tolerance, self._ls_work,
            )
        return backtracking_line_search(
            self.kind, self.cpar, self.vc, dvc, ell, ell_a, a1, a2, dell0, 1.0 / prm.rho,
            prm.backtracking_max_iterations, prm.armijo, prm.rho, prm.relative_slop, self._ls_work,
        )
