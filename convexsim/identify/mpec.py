"""Berard–Trinkle MPEC over a whole trajectory (docs/identify.md): solved by default by implicit programming
(:func:`solve_implicit`: states and LCP variables eliminated through every step's LCP), or in all its
unknowns as a smoothed least-squares problem.

Unknowns: the friction coefficients θ (one per material pair), positions p_l and velocities v_l of every
frame l = 0..N, and every step's LCP variables z_l = (p_n, β, λ) (normal impulses, impulses along the d
friction directions, sliding-speed multipliers). Per step, with the contact data frozen at the observed
configuration (Jacobians, directions D = [D_1 … D_m], gaps φ̃ and their position gradient):

    dynamics      v_{l+1} − v_l − dt a_l − A⁻¹ (J_nᵀ p_n + D β) = 0                    [m/s]
    kinematics    (p_{l+1} − p_l)/dt − P v_{l+1} = 0                                      [m/s]
    normal        0 ≤ s p_n  ⊥  J_n v_{l+1} + (φ̃ + ∇φ·(p_l − p̃_l))/dt ≥ 0              (gap at l+1, /dt)
    friction      0 ≤ s β_ij ⊥  D_ijᵀ v_{l+1} + λ_i ≥ 0
    cone          0 ≤ λ_i    ⊥  s (μ_i p_n,i − Σ_j β_ij) ≥ 0

(s_i = J_n,i A⁻¹ J_n,iᵀ turns impulses into velocities so that both sides of a pair are in m/s), and the
objective is the observation misfit Σ_l ‖p_l − p̃_l‖² (the seed's Σ nᵀn; the first term plays the role of
its (x⁰ − x̄⁰) prior).

All-unknowns solution method (``solve_mpec(method="continuation")``): each complementarity pair (a, b) becomes the smoothed Fischer–Burmeister residual
a + b − sqrt(a² + b² + 2δ²) (zero iff a, b ≥ 0 and ab = δ²), the equalities and these residuals are
weighted by W, and ``scipy.optimize.least_squares`` (trust-region reflective, sparse analytic Jacobian,
bounds θ ∈ [0, θ_max]) minimizes ‖misfit‖² + W²‖constraints‖² along the continuation
(W, δ) = (1, 1e-2) → (10, 1e-3) → (1e2, 1e-4) → (1e3, 1e-8), each stage run to convergence (at most
1000 evaluations, 3000 in the last), then an active-set polish with every pair's branch fixed
(:func:`active_set_polish`). Why Fischer–Burmeister and not a Scholtes
relaxation (a b ≤ t): the smoothed FB function keeps the problem a nonlinear least-squares one, which
SciPy solves with sparse Jacobians at this size (hundreds to thousands of variables); Scholtes needs an
NLP solver with many inequality constraints, which SciPy only offers densely (SLSQP) or slowly
(trust-constr).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from convexsim.stepping.lcp_problem import friction_cone_rows, lcp_from_impulse_block

CONTINUATION = ((1.0, 1e-2), (10.0, 1e-3), (1e2, 1e-4), (1e3, 1e-8))
"""(W, δ) stages of the continuation."""


@dataclass
class MpecStep:
    """Contact data of one step l (frozen at the observed configuration of frame l).

    Attributes:
        Ainv: A⁻¹ (nv, nv). accel: free acceleration a_l, v* = v_l + dt a_l (nv,).
        Jn: normal rows (m, nv). D: friction direction columns (nv, m·d), contact-major.
        phi: observed gaps φ̃ (m,) [m]. dphi_dp: gradient of the gaps in the free positions (m, np).
        pair: parameter index (into θ) of each contact (m,).
        link: False for the seam between two trajectories fitted together: no constraint joins frame l to
            l + 1 (and the step has no contacts).
    """

    Ainv: np.ndarray
    accel: np.ndarray
    Jn: np.ndarray
    D: np.ndarray
    phi: np.ndarray
    dphi_dp: np.ndarray
    pair: np.ndarray
    link: bool = True

    @property
    def m(self) -> int:
        return int(self.Jn.shape[0])

    @property
    def d(self) -> int:
        return int(self.D.shape[1] // self.m) if self.m else 0


@dataclass
class MpecProblem:
    """The whole MPEC: dt, observed positions (N+1, np), the position-rate map P (np, nv), the steps."""

    dt: float
    observed: np.ndarray
    P: np.ndarray
    steps: list[MpecStep]
    n_params: int
    offsets: np.ndarray = field(init=False)
    structure: object = field(init=False, repr=False)
    lcp_parts: dict = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self):
        N1, npos = self.observed.shape
        if len(self.steps) != N1 - 1:
            raise ValueError(f"{len(self.steps)} steps for {N1} observed frames (need frames − 1)")
        self.npos = npos
        self.nv = self.P.shape[1]
        sizes = [s.m * (s.d + 2) for s in self.steps]
        base = self.n_params + N1 * (npos + self.nv)
        self.offsets = base + np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        self.structure = _structure(self)

    @property
    def n_frames(self) -> int:
        return int(self.observed.shape[0])

    @property
    def size(self) -> int:
        return int(self.offsets[-1])

    def p_index(self, l: int) -> int:
        return self.n_params + l * self.npos

    def v_index(self, l: int) -> int:
        return self.n_params + self.n_frames * self.npos + l * self.nv

    def unpack(self, x):
        """(θ, p (N+1, np), v (N+1, nv), [z_l])."""
        N1 = self.n_frames
        th = x[:self.n_params]
        p = x[self.p_index(0):self.p_index(N1)].reshape(N1, self.npos)
        v = x[self.v_index(0):self.v_index(N1)].reshape(N1, self.nv)
        z = [x[self.offsets[l]:self.offsets[l + 1]] for l in range(N1 - 1)]
        return th, p, v, z

    def pack(self, theta, p, v, z) -> np.ndarray:
        parts = [np.asarray(theta, float), np.ravel(p), np.ravel(v)]
        return np.concatenate(parts + [np.ravel(zl) for zl in z])


class _Coo:
    """COO accumulator for constant sparse matrices."""

    def __init__(self):
        self.r, self.c, self.v = [], [], []

    def add(self, rows, cols, vals):
        rows, cols = np.asarray(rows).ravel(), np.asarray(cols).ravel()
        vals = np.broadcast_to(np.asarray(vals, float), rows.shape).ravel()
        self.r.append(rows)
        self.c.append(cols)
        self.v.append(vals)

    def block(self, row0, col0, M):
        M = np.asarray(M, float)
        rr, cc = np.nonzero(M)
        self.add(row0 + rr, col0 + cc, M[rr, cc])

    def matrix(self, shape):
        if not self.r:
            return sp.csr_matrix(shape)
        return sp.csr_matrix((np.concatenate(self.v), (np.concatenate(self.r), np.concatenate(self.c))),
                             shape=shape)


@dataclass
class _Structure:
    """Everything of the residual that does not depend on x (built once per problem).

    r_obs = S x − obs;  r_eq = L x − c;  complementarity pairs a = Pa x,  b = Pb x + cb + s_k θ[i_k] x[j_k]
    on the cone rows k (the one bilinear term, μ p_n).
    """

    S: sp.csr_matrix
    obs: np.ndarray
    L: sp.csr_matrix
    c: np.ndarray
    Pa: sp.csr_matrix
    Pb: sp.csr_matrix
    cb: np.ndarray
    cone_rows: np.ndarray
    cone_theta: np.ndarray
    cone_pn: np.ndarray
    cone_s: np.ndarray


def _structure(prob: MpecProblem) -> _Structure:
    dt, npos, nv, n = prob.dt, prob.npos, prob.nv, prob.size
    N1 = prob.n_frames
    S = sp.csr_matrix((np.ones(N1 * npos), (np.arange(N1 * npos), prob.p_index(0) + np.arange(N1 * npos))),
                      shape=(N1 * npos, n))
    L, c = _Coo(), []
    Pa, Pb, cb = _Coo(), _Coo(), []
    cone_rows, cone_theta, cone_pn, cone_s = [], [], [], []
    row = prow = 0
    for l, st in enumerate(prob.steps):
        m, d = st.m, st.d
        if not st.link:
            continue
        vi, vj, zi = prob.v_index(l), prob.v_index(l + 1), prob.offsets[l]
        # dynamics: v_{l+1} − v_l − A⁻¹[Jnᵀ D] z = dt a
        L.block(row, vj, np.eye(nv))
        L.block(row, vi, -np.eye(nv))
        if m:
            L.block(row, zi, -(st.Ainv @ np.hstack([st.Jn.T, st.D])))
        c.append(dt * st.accel)
        row += nv
        # kinematics: (p_{l+1} − p_l)/dt − P v_{l+1} = 0
        L.block(row, prob.p_index(l + 1), np.eye(npos) / dt)
        L.block(row, prob.p_index(l), -np.eye(npos) / dt)
        L.block(row, vj, -prob.P)
        c.append(np.zeros(npos))
        row += npos
        if not m:
            continue
        s = np.einsum("in,nk,ik->i", st.Jn, st.Ainv, st.Jn)
        # normal: a = s p_n, b = Jn v_{l+1} + ∇φ·p_l/dt + (φ̃ − ∇φ·p̃_l)/dt
        Pa.add(prow + np.arange(m), zi + np.arange(m), s)
        Pb.block(prow, vj, st.Jn)
        Pb.block(prow, prob.p_index(l), st.dphi_dp / dt)
        cb.append((st.phi - st.dphi_dp @ prob.observed[l]) / dt)
        prow += m
        if d:
            ci = np.repeat(np.arange(m), d)
            Pa.add(prow + np.arange(m * d), zi + m + np.arange(m * d), s[ci])
            Pb.block(prow, vj, st.D.T)
            Pb.add(prow + np.arange(m * d), zi + m + m * d + ci, 1.0)
            cb.append(np.zeros(m * d))
            prow += m * d
            rr = prow + np.arange(m)
            Pa.add(rr, zi + m + m * d + np.arange(m), 1.0)
            Pb.add(np.repeat(rr, d), zi + m + np.arange(m * d), np.repeat(-s, d))
            cb.append(np.zeros(m))
            cone_rows.append(rr)
            cone_theta.append(st.pair)
            cone_pn.append(zi + np.arange(m))
            cone_s.append(s)
            prow += m
    cat = (lambda xs, dtype=float: np.concatenate(xs).astype(dtype) if xs else np.zeros(0, dtype))
    return _Structure(S, np.ravel(prob.observed), L.matrix((row, n)), cat(c), Pa.matrix((prow, n)),
                      Pb.matrix((prow, n)), cat(cb), cat(cone_rows, int), cat(cone_theta, int),
                      cat(cone_pn, int), cat(cone_s))


def _fb(a, b, delta):
    r = np.sqrt(a * a + b * b + 2.0 * delta * delta)
    r_safe = np.where(r > 0, r, 1.0)
    return a + b - r, np.where(r > 0, 1.0 - a / r_safe, 1.0), np.where(r > 0, 1.0 - b / r_safe, 1.0)


def residuals(prob: MpecProblem, x: np.ndarray, W: float, delta: float, jac: bool = True):
    """(r, J): observation misfit, W·(dynamics and kinematics), W·(smoothed Fischer–Burmeister pairs)."""
    st = prob.structure
    a = st.Pa @ x
    b = st.Pb @ x + st.cb
    b[st.cone_rows] += st.cone_s * x[st.cone_theta] * x[st.cone_pn]
    f, da, db = _fb(a, b, delta)
    r = np.concatenate([st.S @ x - st.obs, W * (st.L @ x - st.c), W * f])
    if not jac:
        return r, None
    bil = sp.csr_matrix((np.concatenate([st.cone_s * x[st.cone_pn], st.cone_s * x[st.cone_theta]]),
                         (np.concatenate([st.cone_rows, st.cone_rows]),
                          np.concatenate([st.cone_theta, st.cone_pn]))), shape=st.Pb.shape)
    Jfb = sp.diags(W * da) @ st.Pa + sp.diags(W * db) @ (st.Pb + bil)
    return r, sp.vstack([st.S, W * st.L, Jfb]).tocsr()


@dataclass
class MpecResult:
    """Estimates and diagnostics of :func:`solve_mpec`."""

    theta: np.ndarray
    x: np.ndarray
    objective: float            # Σ ‖p_l − p̃_l‖² at the end [m²]
    violation: float            # max |constraint residual| (dynamics, kinematics, FB with δ = 0) [m/s]
    stages: list[dict]
    theta_std: np.ndarray
    success: bool
    message: str


def constraint_violation(prob: MpecProblem, x) -> float:
    """Largest |residual| of dynamics, kinematics and complementarity (plain FB, δ = 0) [m/s]."""
    r, _ = residuals(prob, x, 1.0, 0.0, jac=False)
    n_obs = prob.n_frames * prob.npos
    return float(np.max(np.abs(r[n_obs:]))) if r.size > n_obs else 0.0


FEASIBLE_VIOLATION = 1e-3
"""Largest constraint violation [m/s] of a point reported as a solution of the MPEC."""


@dataclass
class LsqResult:
    """What :func:`sparse_least_squares` returns (the fields of SciPy's result that the MPEC uses)."""

    x: np.ndarray
    cost: float             # ½‖r‖²
    nfev: int
    status: int             # 1: converged, 0: evaluation budget used
    message: str


def sparse_least_squares(fun, x0: np.ndarray, lo: np.ndarray, hi: np.ndarray, *, tol: float = 1e-10,
                         max_nfev: int = 200) -> LsqResult:
    """Levenberg–Marquardt on min ½‖r(x)‖², lo ≤ x ≤ hi, with one sparse direct factorization per step.

    ``fun(x)`` returns (r, J) with J sparse. The step solves min ‖J δ + r‖² + λ‖D δ‖² (D² = diag(JᵀJ),
    Marquardt's scaling) through the augmented system

        [ I    J    ] [s]   [−r]
        [ Jᵀ  −λD²  ] [δ] = [ 0]

    (sparse LU), which keeps the conditioning of J rather than of JᵀJ: the continuation's last stage weighs
    the dynamics rows 1e3 × 1/dt above the observation rows. The MPEC's J is banded in time (each step
    couples frames l and l + 1 and its own LCP variables; θ is the one dense column set), so a
    factorization costs O(frames). Bounds are enforced by projection (only θ carries them). λ follows
    Nielsen's rule on the ratio of actual to predicted decrease. Converged when an accepted step changes
    the cost by less than ``tol``·cost or x by less than ``tol``·(‖x‖ + tol).
    """
    from scipy.sparse.linalg import splu

    x = np.clip(np.asarray(x0, float), lo, hi)
    r, J = fun(x)
    cost, nfev, lam, nu = 0.5 * float(r @ r), 1, 1e-3, 2.0
    n = x.size
    while nfev < max_nfev:
        J = J.tocsc()
        D2 = np.asarray(J.multiply(J).sum(axis=0)).ravel()
        D2 = np.maximum(D2, 1e-12 * max(D2.max(initial=0.0), 1.0))
        K = sp.bmat([[sp.identity(r.size), J], [J.T, sp.diags(-lam * D2)]], format="csc")
        try:
            sol = splu(K, permc_spec="COLAMD").solve(np.concatenate([-r, np.zeros(n)]))
        except RuntimeError:                    # singular: damp more
            lam, nu = lam * nu, nu * 2.0
            continue
        step = np.clip(x + sol[r.size:], lo, hi) - x
        x_new = x + step
        r_new, J_new = fun(x_new)
        nfev += 1
        cost_new = 0.5 * float(r_new @ r_new)
        lin = r + J @ step
        predicted = cost - 0.5 * float(lin @ lin)
        rho = (cost - cost_new) / predicted if predicted > 0 else -1.0
        if rho > 1e-4 and np.isfinite(cost_new):
            small = (cost - cost_new <= tol * cost
                     or np.linalg.norm(step) <= tol * (np.linalg.norm(x) + tol))
            x, r, J, cost = x_new, r_new, J_new, cost_new
            lam *= max(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3)
            nu = 2.0
            if small:
                return LsqResult(x, cost, nfev, 1, "converged: relative change of cost and step below tol")
        else:
            lam, nu = lam * nu, nu * 2.0
            if lam > 1e16:
                return LsqResult(x, cost, nfev, 2, "converged: no decrease along any damped step")
    return LsqResult(x, cost, nfev, 0, f"evaluation budget of {max_nfev} used")


ACTIVE_SET_W = 1e3
"""Weight of the equalities in the active-set solve (the continuation's last W)."""
FLIP_TOL = 1e-7
"""A complementarity pair whose free side is below −FLIP_TOL [m/s] after an active-set solve changes branch."""
MAX_FLIPS = 8
"""Rounds of branch changes of the active-set solve before it falls back to the continuation."""
BRANCH_NFEV = 200
"""Evaluations of one active-set round: a branch problem that is right converges in tens; one that has not
within this budget is not settling (measured on a four-contact box), and the rounds fall back sooner."""


def solve_mpec(prob: MpecProblem, x0: np.ndarray, *, theta_max: float = 2.0, method: str = "implicit",
               continuation=CONTINUATION, max_nfev: int = 1000, stage_tol: float = 1e-8,
               final_tol: float = 1e-10, polish: bool = True) -> MpecResult:
    """Solve the MPEC from x0 (a start whose LCP variables satisfy complementarity, e.g. one LCP solve per
    observed frame); θ bounded to [0, theta_max].

    ``method="implicit"`` (default): :func:`solve_implicit`, the MPEC in the initial states and θ with
    the states and LCP variables eliminated through every step's LCP (x0 gives the start: θ and the first
    frame's p and v of every trajectory).

    ``method="active_set"``: :func:`solve_active_set` — every pair's branch is taken from x0,
    the smooth branch problem is solved by sparse Levenberg–Marquardt, pairs whose free side ended negative
    change branch, repeated until none does (a few rounds). When it does not settle within
    :data:`MAX_FLIPS` rounds (:data:`BRANCH_NFEV` evaluations each) or ends infeasible, the continuation below runs from x0 instead and the
    better point is kept.

    ``method="continuation"``: the Fischer–Burmeister continuation. Every stage runs to convergence
    (``stage_tol`` on cost and step in the intermediate stages, ``final_tol`` for the last) within
    ``max_nfev`` evaluations (3× in the last stage); then (``polish``) :func:`active_set_polish` from the
    smoothed point, kept when its constraint violation is smaller.

    ``success`` is False when the violation exceeds :data:`FEASIBLE_VIOLATION` (no estimate is a feasible
    point then); ``message`` says so, or that the last stage used its whole budget.

    The standard deviation of θ is the Gauss–Newton one of the final problem, s²[(JᵀJ)⁻¹]_θθ with
    s² = misfit/(observations − free parameters), the constraints acting as heavily weighted rows.
    """
    if method not in ("implicit", "active_set", "continuation"):
        raise ValueError(f"unknown MPEC method {method!r} (implicit, active_set, continuation)")
    if method == "implicit":
        return solve_implicit(prob, x0, theta_max=theta_max)
    lo = np.full(prob.size, -np.inf)
    hi = np.full(prob.size, np.inf)
    lo[:prob.n_params] = 0.0
    hi[:prob.n_params] = theta_max
    x0 = np.clip(np.asarray(x0, float), lo, hi)
    stages: list[dict] = []
    if method == "active_set" and prob.structure.Pa.shape[0]:
        x, J, ok = solve_active_set(prob, x0, (lo, hi), stages, max_nfev=max_nfev)
        if ok:
            return _result(prob, x, J, stages, f"active set settled after {len(stages)} round(s)")
    xc, Jc, sol = _continuation(prob, x0, (lo, hi), stages, continuation, max_nfev, stage_tol, final_tol,
                                polish)
    if method == "active_set" and prob.structure.Pa.shape[0] \
            and constraint_violation(prob, x) < constraint_violation(prob, xc):
        xc, Jc = x, J
    res = _result(prob, xc, Jc, stages, f"converged ({sol.message})")
    if res.success and sol.status == 0:
        res.message = (f"feasible to {res.violation:.2g} m/s; the last continuation stage stopped at its "
                       f"budget of {sol.nfev} evaluations before its {final_tol:g} tolerance")
    return res


def _result(prob: MpecProblem, x, J, stages, message) -> MpecResult:
    violation = constraint_violation(prob, x)
    _, p, _, _ = prob.unpack(x)
    objective = float(np.sum((p - prob.observed) ** 2))
    ok = violation <= FEASIBLE_VIOLATION
    if not ok:
        message = (f"not a feasible point of the MPEC: constraint violation {violation:.2g} m/s > "
                   f"{FEASIBLE_VIOLATION:g} m/s")
    return MpecResult(x[:prob.n_params].copy(), x, objective, violation, stages,
                      theta_std(prob, J, objective), ok, message)


def _continuation(prob, x, bounds, stages, continuation, max_nfev, stage_tol, final_tol, polish):
    """The Fischer–Burmeister continuation and polish (:func:`solve_mpec`); returns (x, J, last stage)."""
    sol = None
    for stage, (W, delta) in enumerate(continuation):
        final = stage == len(continuation) - 1
        tol = final_tol if final else stage_tol
        sol = sparse_least_squares(lambda y, W=W, delta=delta: residuals(prob, y, W, delta), x, *bounds,
                                   tol=tol, max_nfev=3 * max_nfev if final else max_nfev)
        x = sol.x
        stages.append({"W": W, "delta": delta, "nfev": int(sol.nfev), "cost": float(2 * sol.cost),
                       "theta": x[:prob.n_params].copy(), "violation": constraint_violation(prob, x),
                       "converged": bool(sol.status > 0)})
    W, delta = continuation[-1]
    J = residuals(prob, x, W, delta)[1]
    violation = constraint_violation(prob, x)
    if polish and prob.structure.Pa.shape[0]:
        pick_a = _smaller_side(prob.structure, x)
        ps = branch_solve(prob, x, pick_a, W, bounds, max_nfev=max_nfev)
        vp = constraint_violation(prob, ps.x)
        stages.append({"W": W, "delta": 0.0, "nfev": ps.nfev, "cost": float(2 * ps.cost),
                       "theta": ps.x[:prob.n_params].copy(), "violation": vp, "converged": vp < violation,
                       "polish": True})
        if vp < violation:
            x, J = ps.x, _branch_residuals(prob, ps.x, pick_a, W)[1]
    return x, J, sol


def _smaller_side(st: "_Structure", x) -> np.ndarray:
    """1.0 where a pair's a side is the smaller (branch a = 0), else 0.0 (branch b = 0)."""
    return (st.Pa @ x <= _b(st, x)).astype(float)


def _branch_residuals(prob: MpecProblem, y, pick_a, W: float, jac: bool = True):
    """(r, J) of the branch problem: misfit, W·(dynamics, kinematics), W·(the chosen side of every pair)."""
    st = prob.structure
    pick_b = 1.0 - pick_a
    c = pick_a * (st.Pa @ y) + pick_b * _b(st, y)
    r = np.concatenate([st.S @ y - st.obs, W * (st.L @ y - st.c), W * c])
    if not jac:
        return r, None
    Jc = sp.diags(W * pick_a) @ st.Pa + sp.diags(W * pick_b) @ (st.Pb + _bilinear(st, y))
    return r, sp.vstack([st.S, W * st.L, Jc]).tocsr()


def branch_solve(prob: MpecProblem, x, pick_a, W: float, bounds, *, max_nfev: int = 1000) -> LsqResult:
    """Minimize ‖misfit‖² + W²(‖dynamics, kinematics‖² + ‖chosen sides‖²) with every pair's branch fixed
    (``pick_a`` = 1: a = 0, else b = 0): smooth, linear but for the cone rows' μ p_n."""
    return sparse_least_squares(lambda y: _branch_residuals(prob, y, pick_a, W), x, *bounds, tol=1e-12,
                                max_nfev=max_nfev)


def solve_active_set(prob: MpecProblem, x0, bounds, stages: list, *, W: float = ACTIVE_SET_W,
                     max_nfev: int = 1000):
    """Active-set solve of the MPEC: branches from x0 (the smaller side of every pair), then
    :func:`branch_solve`; a pair whose free side ends below −:data:`FLIP_TOL` changes branch and the
    branch problem is solved again from there, until no pair changes (or :data:`MAX_FLIPS` rounds).
    Appends one record per round to ``stages``. Returns (x, J, settled and feasible).

    Why: the branch problem is smooth and almost linear, so Levenberg–Marquardt with sparse direct steps
    converges in a few evaluations, while the smoothed Fischer–Burmeister residuals make it crawl along
    curved valleys (hundreds of evaluations per stage on a four-contact box). A start from one LCP solve
    per observed frame has the branches of the motion (sliding, sticking, separated) unless μ₀ is far
    enough from μ to change them, which the flips repair.
    """
    st = prob.structure
    x = x0
    pick_a = _smaller_side(st, x0)
    for rnd in range(MAX_FLIPS):
        sol = branch_solve(prob, x, pick_a, W, bounds, max_nfev=min(max_nfev, BRANCH_NFEV))
        x = sol.x
        a, b = st.Pa @ x, _b(st, x)
        free = np.where(pick_a > 0, b, a)
        flip = free < -FLIP_TOL
        stages.append({"W": W, "delta": 0.0, "nfev": int(sol.nfev), "cost": float(2 * sol.cost),
                       "theta": x[:prob.n_params].copy(), "violation": constraint_violation(prob, x),
                       "converged": bool(sol.status > 0), "active_set": True, "flipped": int(flip.sum())})
        if not flip.any() and sol.status == 0:      # the branches are right but the round ran out: finish it
            sol = branch_solve(prob, x, pick_a, W, bounds, max_nfev=max_nfev)
            x = sol.x
            stages.append({"W": W, "delta": 0.0, "nfev": int(sol.nfev), "cost": float(2 * sol.cost),
                           "theta": x[:prob.n_params].copy(), "violation": constraint_violation(prob, x),
                           "converged": bool(sol.status > 0), "active_set": True, "flipped": 0})
        if not flip.any():
            ok = sol.status > 0 and stages[-1]["violation"] <= FEASIBLE_VIOLATION
            return x, _branch_residuals(prob, x, pick_a, W)[1], ok
        pick_a = np.where(flip, 1.0 - pick_a, pick_a)
    return x, _branch_residuals(prob, x, pick_a, W)[1], False


def active_set_polish(prob: MpecProblem, x: np.ndarray, W: float, bounds, *, max_nfev: int = 1000):
    """Fix every complementarity pair's branch at x (the smaller side, a ≤ b → a = 0, else b = 0) and
    minimize the branch problem (:func:`branch_solve`) from x; solutions are feasible points of the MPEC as
    long as the other sides stay ≥ 0 (checked by the caller through the plain FB violation). Returns
    (x, evaluations).

    Why: the smoothed solve can stall where a pair sits slightly on the wrong side (a friction impulse of
    −5e-5 N·s that buys friction beyond the cone and lowers the misfit below the feasible minimum; noise
    seed 3 of the particle, docs/identify.md §3); the FB residual is then flat in the direction that would
    fix it. With the branch fixed, the violated side is an ordinary weighted equation.
    """
    sol = branch_solve(prob, x, _smaller_side(prob.structure, x), W, bounds, max_nfev=max_nfev)
    return sol.x, int(sol.nfev)


def _b(st: _Structure, x) -> np.ndarray:
    """The b sides of all pairs at x (with the bilinear cone term μ p_n)."""
    b = st.Pb @ x + st.cb
    b[st.cone_rows] += st.cone_s * x[st.cone_theta] * x[st.cone_pn]
    return b


def _bilinear(st: _Structure, x) -> sp.csr_matrix:
    """∂(s μ p_n)/∂(μ, p_n) on the cone rows."""
    return sp.csr_matrix((np.concatenate([st.cone_s * x[st.cone_pn], st.cone_s * x[st.cone_theta]]),
                          (np.concatenate([st.cone_rows, st.cone_rows]),
                           np.concatenate([st.cone_theta, st.cone_pn]))), shape=st.Pb.shape)


def theta_std(prob: MpecProblem, J, objective: float) -> np.ndarray:
    """Gauss–Newton standard deviations of θ: s²[(JᵀJ)⁻¹]_θθ, s² = objective/(observations − θ count), with
    J the Jacobian of the final weighted problem. The LCP variables of a statically indeterminate contact
    set (four corners of a face) have directions J does not see; a relative damping of 1e-12 on diag(JᵀJ)
    keeps the solve regular without touching θ's block. One augmented sparse solve per θ."""
    from scipy.sparse.linalg import splu

    J = J.tocsc()
    n_obs = prob.n_frames * prob.npos
    s2 = objective / max(n_obs - prob.n_params, 1)
    D2 = np.asarray(J.multiply(J).sum(axis=0)).ravel()
    D2 = np.maximum(D2, 1e-300) * 1e-12 + 1e-300
    m = J.shape[0]
    K = sp.bmat([[sp.identity(m), J], [J.T, sp.diags(-D2)]], format="csc")
    out = np.full(prob.n_params, np.nan)
    try:
        lu = splu(K, permc_spec="COLAMD")
    except RuntimeError:
        return out
    for j in range(prob.n_params):
        rhs = np.zeros(m + prob.size)
        rhs[m + j] = -1.0
        out[j] = np.sqrt(max(s2 * lu.solve(rhs)[m + j], 0.0))
    return out


def seam(nv: int, npos: int, n_params: int) -> MpecStep:
    """The step between two trajectories fitted together (no constraint, no contact)."""
    return MpecStep(np.zeros((nv, nv)), np.zeros(nv), np.zeros((0, nv)), np.zeros((nv, 0)), np.zeros(0),
                    np.zeros((0, npos)), np.zeros(0, int), link=False)


# --------------------------------------------------------------------------------------------------
# The implicit-programming solve: the LCP variables and states eliminated through the steps' LCPs
# --------------------------------------------------------------------------------------------------
def frozen_lcp(st: MpecStep, v_star, bias, mu, base: np.ndarray | None = None):
    """The step's LCP (M, q) in z = (p_n, β, λ) from its frozen data (the LCP stepper's formulation,
    docs/lcp.md): M = [[JnA⁻¹Jnᵀ, JnA⁻¹D, 0], [DᵀA⁻¹Jnᵀ, DᵀA⁻¹D, E], [μ, −Eᵀ, 0]], q = (Jn v* + b, Dᵀv*, 0),
    b = gap/dt [m/s]. ``base``: M without its μ block (:func:`lcp_base`), when already built."""
    m, d = st.m, st.d
    M = (lcp_base(st) if base is None else base).copy()
    friction_cone_rows(M, np.asarray(mu, float), m, d)
    W = np.hstack([st.Jn.T, st.D])
    q = np.zeros(M.shape[0])
    q[:W.shape[1]] = W.T @ v_star
    q[:m] += bias
    return M, q


def lcp_base(st: MpecStep) -> np.ndarray:
    """The step's LCP matrix with μ = 0 (all of it that does not depend on θ): the LCP stepper's matrix
    (``stepping.lcp_problem.lcp_from_impulse_block``) from the frozen W = [J_nᵀ D] and A⁻¹."""
    m, d = st.m, st.d
    W = np.hstack([st.Jn.T, st.D])
    M, _ = lcp_from_impulse_block(W.T @ st.Ainv @ W, W, np.zeros(W.shape[0]), np.zeros(m), np.zeros(m), m, d)
    return M


@dataclass
class FrozenRollout:
    """Frames first..last of the rigid LCP stepper run over the frozen step data: positions p (T, np),
    velocities v (T, nv), LCP variables z (one per step), and, when asked, the tangents dp/dy (T, np, k),
    y = (θ, p_first, v_first); ``solved`` is False if some step's Lemke solve failed."""

    p: np.ndarray
    v: np.ndarray
    z: list
    dp: np.ndarray | None
    solved: bool


def frozen_rollout(prob: MpecProblem, theta, p0, v0, first: int = 0, last: int | None = None, *,
                   tangents: bool = False) -> FrozenRollout:
    """Feasible points of the MPEC: from p_first = p0, v_first = v0, every step l solves its LCP
    (:func:`frozen_lcp`, Lemke) at v* = v_l + dt a_l with the gap b_l = (φ̃_l + ∇φ_l·(p_l − p̃_l))/dt, then
    v_{l+1} = v* + A⁻¹(Jnᵀ p_n + D β), p_{l+1} = p_l + dt P v_{l+1}. Every constraint of the MPEC holds
    at the result (to Lemke's round-off).

    Tangents (``tangents=True``): on the basis α Lemke ends with (the basic z's), w_α = 0 and
    z_¬α = 0, so dz_α = −M_αα⁻¹ (dq_α + dM_α· z) with dq = [Jn; Dᵀ; 0] dv_l + [∇φ/dt; 0; 0] dp_l and
    dM/dμ_k z = p_n,i on the cone row of every contact i of pair k: the exact derivative of the step on the
    piece of the piecewise-smooth LCP map the solution lies on (one-sided at a degenerate solution).
    Solved by least squares (minimum norm, SVD cut-off at round-off): when the basis holds all corners of a
    face, M_αα is singular but for round-off, and a plain solve amplifies that round-off into the tangents
    (measured: the fits then stop early at a larger misfit).
    The velocity v_{l+1} is unique even where the corner impulses of a face are not (four coplanar
    corners), so the tangents of p and v do not depend on which impulses Lemke picked.
    """
    from convexsim.lcp.lemke import lemke

    last = prob.n_frames - 1 if last is None else last
    dt, k = prob.dt, prob.n_params + prob.npos + prob.nv
    p, v = [np.asarray(p0, float).copy()], [np.asarray(v0, float).copy()]
    Tp = np.hstack([np.zeros((prob.npos, prob.n_params)), np.eye(prob.npos), np.zeros((prob.npos, prob.nv))])
    Tv = np.hstack([np.zeros((prob.nv, prob.n_params + prob.npos)), np.eye(prob.nv)])
    dps = [Tp]
    z, solved = [], True
    for l in range(first, last):
        st = prob.steps[l]
        v_star = v[-1] + dt * st.accel
        if st.m:
            m, d = st.m, st.d
            bias = (st.phi + st.dphi_dp @ (p[-1] - prob.observed[l])) / dt
            if l not in prob.lcp_parts:          # the θ-free parts of the step, built once per problem
                prob.lcp_parts[l] = (lcp_base(st), st.Ainv @ np.hstack([st.Jn.T, st.D]))
            base, Wz = prob.lcp_parts[l]
            M, q = frozen_lcp(st, v_star, bias, np.asarray(theta, float)[st.pair], base)
            r = lemke(M, q)
            ok = bool(r.solved) and np.all(np.isfinite(r.z))
            solved &= ok
            zl = r.z.copy() if ok else np.zeros(M.shape[0])
            v_next = v_star + Wz @ zl[:m * (d + 1)]
            if tangents:
                n = M.shape[0]
                alpha = np.sort(r.basis[(r.basis >= n) & (r.basis < 2 * n)] - n)
                dq = np.zeros((n, k))
                dq[:m * (d + 1)] = np.vstack([st.Jn, st.D.T]) @ Tv
                dq[:m] += st.dphi_dp @ Tp / dt
                cone = m * (d + 1) + np.arange(m)
                dq[cone, st.pair] += zl[:m]                       # dM/dμ · z
                dz = np.zeros((n, k))
                if alpha.size:
                    dz[alpha] = -np.linalg.lstsq(M[np.ix_(alpha, alpha)], dq[alpha], rcond=None)[0]
                Tv = Tv + Wz @ dz[:m * (d + 1)]
        else:
            zl, v_next = np.zeros(0), v_star
        z.append(zl)
        v.append(v_next)
        p.append(p[-1] + dt * (prob.P @ v_next))
        if tangents:
            Tp = Tp + dt * prob.P @ Tv
            dps.append(Tp)
    return FrozenRollout(np.array(p), np.array(v), z, np.array(dps) if tangents else None, solved)


def segments_of(prob: MpecProblem) -> list[tuple[int, int]]:
    """(first, last) frames of every trajectory of the problem (split at the seam steps)."""
    cuts = [l for l, st in enumerate(prob.steps) if not st.link]
    firsts = [0] + [c + 1 for c in cuts]
    lasts = cuts + [prob.n_frames - 1]
    return list(zip(firsts, lasts))


IMPLICIT_NFEV = 200
"""Evaluations (rollouts with tangents) of the implicit solve; a box of 100 frames needs 5–30."""


def solve_implicit(prob: MpecProblem, x0: np.ndarray, *, theta_max: float = 2.0,
                   max_nfev: int = IMPLICIT_NFEV) -> MpecResult:
    """The MPEC by implicit programming (Luo, Pang & Ralph, *Mathematical Programs with Equilibrium
    Constraints*, 1996, ch. 4): every step's LCP determines v_{l+1} (and p_{l+1}) from (θ, p_l, v_l), so
    the feasible set of the MPEC is parametrized by y = (θ, and per trajectory its first p and the
    velocities P maps to position rates, e.g. a body's linear velocity) through
    :func:`frozen_rollout`, and the MPEC is min_y Σ_l ‖p_l(y) − p̃_l‖², a least-squares problem in a
    handful of unknowns (1 + 3 + 3 for one body and one pair) with the exact tangents of the rollout as
    Jacobian (``scipy.optimize.least_squares``, trust-region reflective, θ ∈ [0, θ_max]).

    Why (issue 28): solving the MPEC in all its unknowns (states, impulses) needed hundreds of
    Levenberg–Marquardt evaluations on a four-contact box — the corner impulses of a face are statically
    indeterminate (directions the data cannot see, coupled to μ by the cone rows) and fixed active sets
    cycled. Eliminated through the LCP, they are gone: Lemke picks one set of impulses, the motion does not
    depend on which. Cost: one Lemke solve per step and evaluation, linear in the frames.

    Standard deviations: the Gauss–Newton covariance of the reduced problem, s²(J_yᵀJ_y)⁺ with
    s² = misfit/(observations − dim y). J_y is the Jacobian of the misfit along the feasible set, i.e. the
    reduced Hessian of the constrained problem on its active set; every unknown of y is counted in the
    degrees of freedom. The first angular velocities are taken from x0 (the recorded ones), as the SAP fit
    does: the COM positions see them only through the contacts' lever arms, and a fit that frees them
    spins the box to make corners lift (the frozen orientations never tilt), a motion the data cannot
    refute.
    """
    from scipy.optimize import least_squares

    segs = segments_of(prob)
    th0, p_all, v_all, _ = prob.unpack(np.asarray(x0, float))
    npar, npos = prob.n_params, prob.npos
    vcols = np.flatnonzero(np.any(prob.P != 0.0, axis=0))     # velocities that move the positions
    ky = npos + vcols.size
    y0 = np.concatenate([np.clip(th0, 0.0, theta_max)]
                        + [np.concatenate([p_all[f], v_all[f, vcols]]) for f, _ in segs])
    cache: dict = {}

    def first_state(y, s, f):
        v0 = v_all[f].copy()
        v0[vcols] = y[npar + s * ky + npos:npar + (s + 1) * ky]
        return y[npar + s * ky:npar + s * ky + npos], v0

    def roll(y):
        key = y.tobytes()
        if key not in cache:
            cache.clear()
            cache[key] = [frozen_rollout(prob, y[:npar], *first_state(y, s, f), f, last, tangents=True)
                          for s, (f, last) in enumerate(segs)]
        return cache[key]

    def fun(y):
        return np.concatenate([np.ravel(ro.p - prob.observed[f:last + 1])
                               for ro, (f, last) in zip(roll(y), segs)])

    cols = np.concatenate([np.arange(npar + npos), npar + npos + vcols])

    def jac(y):
        J = np.zeros((prob.n_frames * npos, y.size))
        for s, (ro, (f, last)) in enumerate(zip(roll(y), segs)):
            rows = slice(f * npos, (last + 1) * npos)
            T = ro.dp.reshape(-1, ro.dp.shape[-1])[:, cols]
            J[rows, :npar] = T[:, :npar]
            J[rows, npar + s * ky:npar + (s + 1) * ky] = T[:, npar:]
        return J

    lo = np.full(y0.size, -np.inf)
    hi = np.full(y0.size, np.inf)
    lo[:npar], hi[:npar] = 0.0, theta_max
    sol = least_squares(fun, y0, jac=jac, bounds=(lo, hi), method="trf", x_scale="jac", max_nfev=max_nfev,
                        xtol=1e-12, ftol=1e-12, gtol=1e-12)
    y = sol.x
    ros = roll(y)
    zs: list = []
    for s, ro in enumerate(ros):
        zs += ro.z + ([np.zeros(0)] if s < len(ros) - 1 else [])
    x = prob.pack(y[:npar], np.concatenate([ro.p for ro in ros]), np.concatenate([ro.v for ro in ros]), zs)
    J = jac(y)
    objective = float(np.sum(fun(y) ** 2))
    s2 = objective / max(J.shape[0] - y.size, 1)
    cov = np.linalg.pinv(J.T @ J) * s2
    std = np.sqrt(np.maximum(np.diag(cov)[:npar], 0.0))
    std[np.all(J[:, :npar] == 0.0, axis=0)] = np.inf
    violation = constraint_violation(prob, x)
    stage = {"W": np.inf, "delta": 0.0, "nfev": int(sol.nfev), "cost": objective, "theta": y[:npar].copy(),
             "violation": violation, "converged": bool(sol.status > 0), "implicit": True}
    ok = violation <= FEASIBLE_VIOLATION and all(ro.solved for ro in ros)
    if not ok:
        message = (f"not a feasible point of the MPEC: constraint violation {violation:.2g} m/s > "
                   f"{FEASIBLE_VIOLATION:g} m/s" if violation > FEASIBLE_VIOLATION else
                   "not a feasible point of the MPEC: a step's LCP has no solution Lemke could find")
    elif sol.status > 0:
        message = f"implicit solve converged ({sol.message})"
    else:
        message = (f"feasible to {violation:.2g} m/s; the implicit solve stopped at its budget of {sol.nfev} "
                   "evaluations")
    return MpecResult(y[:npar].copy(), x, objective, violation, [stage], std, ok, message)


__all__ = [
    "CONTINUATION",
    "FEASIBLE_VIOLATION",
    "FrozenRollout",
    "MpecProblem",
    "MpecResult",
    "MpecStep",
    "active_set_polish",
    "frozen_lcp",
    "lcp_base",
    "frozen_rollout",
    "branch_solve",
    "solve_active_set",
    "sparse_least_squares",
    "theta_std",
    "constraint_violation",
    "residuals",
    "seam",
    "segments_of",
    "solve_implicit",
    "solve_mpec",
]
