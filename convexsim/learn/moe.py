"""Mixture of experts for hybrid (piecewise) dynamics: experts, a softmax gate, two training objectives.

Model (inputs x ∈ ℝ^{d_x}, outputs y ∈ ℝ^{d_y}, K experts):

    gate      P_i(x) = softmax_i(w_i·z(x) + b_i),      z(x) = the gate's columns of x
    experts   F_i(x)   (affine: F_i(x) = A_i x + c_i)
    predict   I(x) = argmax_i P_i(x),  ŷ(x) = F_I(x)   (one expert per region: the "mode")

Both x and y are standardized (zero mean, unit standard deviation per column) inside the model;
parameters are reported in the data's units.

Objectives (docs/learn.md):

* ``"em"`` (default), the mixture likelihood of Jacobs, Jordan, Nowlan & Hinton (1991) and
  Jordan & Jacobs (1994), maximized by expectation–maximization:
  ``ℓ = Σ_j log Σ_i P_i(x_j) N(y_j; F_i(x_j), σ_i² I)``.
  E-step: posterior responsibilities ``r_ij ∝ P_i(x_j) N(y_j; F_i(x_j), σ_i²I)``;
  M-step: each expert by least squares weighted by ``r_·i``, ``σ_i²`` from its weighted residuals
  (never below ``sigma_floor``), the gate by cross-entropy against ``r`` (L-BFGS).
* ``"seed"``, the gate-weighted squared error of the seed paper:
  ``L = (1/N) Σ_j Σ_i P_i(x_j) ‖F_i(x_j) − y_j‖²``, minimized by block coordinate descent:
  experts by least squares weighted by the gate ``P`` (exact for fixed gate), then the gate by
  L-BFGS on L (experts fixed). Each block step lowers L.

Both run ``restarts`` times from different starts (the best objective wins) and finish with a
hard refit: each sample goes to one expert (EM: its largest responsibility; seed: the gate's argmax,
the seed's own mode rule), the experts are refit by plain least squares on their samples and (EM)
the gate is refit to those labels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import scipy.optimize

OBJECTIVES = ("em", "seed")


def _mm(A, B):
    """A @ B by einsum, single-threaded on purpose: the products here are tall and skinny (N × ≤ 49),
    where a multi-threaded BLAS spins its threads against other processes on a loaded machine
    (measured: a 4 s fit took over 100 s with 5 busy processes on 2 cores)."""
    return np.einsum("ij,jk->ik", A, B)


def _rowmax(A):
    """max over each row (numpy reduces a short last axis slowly; reduce the transposed copy)."""
    return np.ascontiguousarray(A.T).max(axis=0)[:, None]


def _rowsum(A):
    """sum over each row, as a column (N, 1)."""
    return np.ascontiguousarray(A.T).sum(axis=0)[:, None]


def log_softmax(L):
    """log softmax over each row of L (N, K), shifted by the row max (no overflow)."""
    S = L - _rowmax(L)
    return S - np.log(_rowsum(np.exp(S)))


def softmax(L):
    """softmax over each row of L (N, K)."""
    return np.exp(log_softmax(L))


def logsumexp(L):
    """log Σ_k exp L_jk for each row j, shape (N,)."""
    m = _rowmax(L)
    return (m + np.log(_rowsum(np.exp(L - m))))[:, 0]


class Expert(Protocol):
    """What the mixture needs from an expert; all arrays in standardized units.

    ``fit(X, Y, w)`` minimizes Σ_j w_j ‖F(x_j) − y_j‖² (w ≥ 0) in place; ``predict(X)`` returns
    (N, d_y); ``params(x_mean, x_scale, y_mean, y_scale)`` returns the parameters in data units.
    """

    def fit(self, X: np.ndarray, Y: np.ndarray, w: np.ndarray) -> None: ...

    def predict(self, X: np.ndarray) -> np.ndarray: ...

    def params(self, x_mean, x_scale, y_mean, y_scale) -> dict: ...


class AffineExpert:
    """F(x) = A x + c, fit by weighted least squares (tiny ridge ``ridge·Σw`` on A for rank safety)."""

    def __init__(self, n_in: int, n_out: int, ridge: float = 1e-12):
        self.coef = np.zeros((n_out, n_in))
        self.intercept = np.zeros(n_out)
        self.ridge = ridge

    def fit(self, X, Y, w) -> None:
        """Weighted least squares by the normal equations ``(XᵀWX + ridge) β = XᵀWY`` (X with a ones
        column) plus one step of iterative refinement (X is standardized, so XᵀWX is well scaled)."""
        Xa = np.column_stack([X, np.ones(len(X))])
        w = np.maximum(w, 0.0)
        Xw = Xa * w[:, None]
        A = _mm(Xw.T, Xa)
        A[np.arange(X.shape[1]), np.arange(X.shape[1])] += self.ridge * max(float(w.sum()), 1e-300)
        beta = np.linalg.lstsq(A, _mm(Xw.T, Y), rcond=None)[0]
        beta += np.linalg.lstsq(A, _mm(Xw.T, Y - _mm(Xa, beta)), rcond=None)[0]
        self.coef, self.intercept = beta[:-1].T.copy(), beta[-1].copy()

    def predict(self, X) -> np.ndarray:
        return _mm(X, self.coef.T) + self.intercept

    def params(self, x_mean, x_scale, y_mean, y_scale) -> dict:
        """{"coef": (d_y, d_x), "intercept": (d_y,)} with y = coef·x + intercept in data units."""
        coef = self.coef * y_scale[:, None] / x_scale[None, :]
        intercept = y_mean + y_scale * self.intercept - coef @ x_mean
        return {"coef": coef, "intercept": intercept}


class LinearSoftmaxGate:
    """P(x) = softmax(W z + b) over K experts; W (K, d_z), b (K,); z standardized gate inputs."""

    def __init__(self, n_in: int, n_experts: int):
        self.W = np.zeros((n_experts, n_in))
        self.b = np.zeros(n_experts)

    def logits(self, Z) -> np.ndarray:
        return _mm(Z, self.W.T) + self.b

    def probs(self, Z) -> np.ndarray:
        return softmax(self.logits(Z))

    def _pack(self):
        return np.concatenate([self.W.ravel(), self.b])

    def _unpack(self, p):
        K, d = self.W.shape
        self.W, self.b = p[: K * d].reshape(K, d).copy(), p[K * d :].copy()

    def _minimize(self, fun, Z, l2: float, max_iter: int) -> None:
        K, d = self.W.shape
        Za = np.column_stack([Z, np.ones(len(Z))])

        def f(p):
            Wm, b = p[: K * d].reshape(K, d), p[K * d :]
            val, G = fun(_mm(Z, Wm.T) + b)  # G = dval/dlogits, (N, K)
            g = _mm(G.T, Za)  # (K, d+1)
            grad = np.concatenate([(g[:, :d] + l2 * Wm).ravel(), g[:, d]])
            return val + 0.5 * l2 * float(np.sum(Wm * Wm)), grad

        res = scipy.optimize.minimize(
            f,
            self._pack(),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": max_iter, "gtol": 1e-10, "ftol": 1e-14},
        )
        self._unpack(res.x)

    def fit_cross_entropy(self, Z, R, l2: float = 1e-8, max_iter: int = 50, tol: float = 1e-12) -> None:
        """Minimize f = (1/N) Σ_j Σ_i −r_ij log P_i(z_j) + (l2/2)‖W‖² by damped Newton.

        Soft or one-hot targets R (N, K). f is convex; its Hessian
        (1/N) Σ_j (diag p_j − p_j p_jᵀ) ⊗ [z_j;1][z_j;1]ᵀ + l2 (on W) is formed exactly (K(d+1) unknowns),
        so the fit stays fast and accurate when the classes are (nearly) separable and the weights
        grow large, where first-order methods crawl. Stops when the Newton decrement ½ gᵀH⁻¹g ≤ tol.
        """
        n, (K, d) = len(Z), self.W.shape
        Za = np.column_stack([Z, np.ones(n)])
        rsum = _rowsum(R)[:, 0]
        pen = np.tile(np.r_[np.full(d, l2), 0.0], K)  # no penalty on the biases
        ZZ = (Za[:, :, None] * Za[:, None, :]).reshape(n, (d + 1) ** 2)

        def value(p):
            L = _mm(Za, p.reshape(K, d + 1).T)
            lp = log_softmax(L)
            return -float(np.sum(R * lp)) / n + 0.5 * float(np.sum(pen * p * p)), lp

        p = np.column_stack([self.W, self.b]).ravel()
        f, lp = value(p)
        for _ in range(max_iter):
            P = np.exp(lp)
            g = (_mm((P * rsum[:, None] - R).T, Za) / n).ravel() + pen * p
            C = (P * rsum[:, None])[:, :, None] * (np.eye(K)[None] - P[:, None, :])  # (N, K, K)
            H = (_mm(C.reshape(n, K * K).T, ZZ) / n).reshape(K, K, d + 1, d + 1).transpose(0, 2, 1, 3)
            H = H.reshape(K * (d + 1), K * (d + 1))
            H[np.diag_indices_from(H)] += pen + 1e-12 * (
                1.0 + np.trace(H) / len(H)
            )  # softmax shift: null space
            step = -np.linalg.solve(H, g)
            dec = -0.5 * float(g @ step)
            if not dec > tol:
                break
            t = 1.0
            while True:  # backtracking (Armijo) line search
                f_new, lp_new = value(p + t * step)
                if f_new <= f - 0.25 * t * 2 * dec or t < 1e-10:
                    break
                t *= 0.5
            if f_new > f:
                break
            p, f, lp = p + t * step, f_new, lp_new
        self.W, self.b = p.reshape(K, d + 1)[:, :d].copy(), p.reshape(K, d + 1)[:, d].copy()

    def fit_weighted_error(self, Z, E, l2: float = 1e-6, max_iter: int = 100) -> None:
        """Minimize (1/N) Σ_j Σ_i P_i(z_j) e_ij + (l2/2)‖W‖² for fixed expert errors E (N, K)."""
        n = len(Z)

        def fun(L):
            P = softmax(L)
            mean = _rowsum(P * E)
            return float(np.sum(mean)) / n, P * (E - mean) / n

        self._minimize(fun, Z, l2, max_iter)

    def params(self, z_mean, z_scale) -> dict:
        """{"W": (K, d_z), "b": (K,)}: logits W z + b with z in data units."""
        W = self.W / z_scale[None, :]
        return {"W": W, "b": self.b - W @ z_mean}


@dataclass
class FitInfo:
    """How training went. objective: the training objective's final value per restart (EM: mean
    log-likelihood per sample, higher is better; seed: L, lower is better); iterations per restart;
    best: index of the chosen restart; converged per restart."""

    objective: list = field(default_factory=list)
    iterations: list = field(default_factory=list)
    converged: list = field(default_factory=list)
    best: int = -1


@dataclass
class MixtureOfExperts:
    """A trained mixture (from :func:`fit`). Use predict / rollout / expert_params / gate_params."""

    experts: list
    gate: LinearSoftmaxGate
    gate_columns: np.ndarray
    x_mean: np.ndarray
    x_scale: np.ndarray
    y_mean: np.ndarray
    y_scale: np.ndarray
    sigma: np.ndarray
    objective: str
    seed: int
    info: FitInfo

    @property
    def n_experts(self) -> int:
        return len(self.experts)

    def _std(self, X):
        X = np.asarray(X, float)
        if X.ndim != 2 or X.shape[1] != len(self.x_mean):
            raise ValueError(f"X must have shape (N, {len(self.x_mean)}); got {X.shape}")
        return (X - self.x_mean) / self.x_scale

    def gate_probs(self, X) -> np.ndarray:
        """P_i(x) for each row of X, shape (N, K)."""
        return self.gate.probs(self._std(X)[:, self.gate_columns])

    def expert_outputs(self, X) -> np.ndarray:
        """F_i(x) of every expert, in data units, shape (N, K, d_y)."""
        Xs = self._std(X)
        return np.stack([e.predict(Xs) for e in self.experts], axis=1) * self.y_scale + self.y_mean

    def predict(self, X):
        """(y_hat (N, d_y), mode (N,), gate_probs (N, K)): the argmax-gate expert's prediction."""
        Xs = self._std(X)
        P = self.gate.probs(Xs[:, self.gate_columns])
        mode = np.argmax(P, axis=1)
        out = np.empty((len(Xs), len(self.y_mean)))
        for i, e in enumerate(self.experts):
            sel = mode == i
            if sel.any():
                out[sel] = e.predict(Xs[sel])
        return out * self.y_scale + self.y_mean, mode, P

    def rollout(self, x0, U):
        """Closed-loop simulation: s_{k+1} = ŷ([s_k, u_k]) from s_0 = x0.

        Args:
            x0: initial state, shape (d_y,) (the first d_y inputs are the state, the rest the force).
            U: applied forces, shape (T, d_x − d_y) (or (T,) when there is one force column).

        Returns:
            states (T+1, d_y) and modes (T,) (the expert used at each step).
        """
        d_y = len(self.y_mean)
        d_u = len(self.x_mean) - d_y
        x0 = np.asarray(x0, float).reshape(d_y)
        U = np.asarray(U, float).reshape(len(U), d_u)
        states = np.empty((len(U) + 1, d_y))
        modes = np.empty(len(U), np.int64)
        states[0] = x0
        for k in range(len(U)):
            y, m, _ = self.predict(np.concatenate([states[k], U[k]])[None, :])
            states[k + 1], modes[k] = y[0], m[0]
        return states, modes

    def expert_params(self) -> list[dict]:
        """Each expert's parameters in data units (affine: {"coef", "intercept"}) plus "sigma"."""
        out = []
        for e, s in zip(self.experts, self.sigma):
            p = e.params(self.x_mean, self.x_scale, self.y_mean, self.y_scale)
            p["sigma"] = s * self.y_scale
            out.append(p)
        return out

    def gate_params(self) -> dict:
        """Gate logits in data units of the gate columns: {"W": (K, d_z), "b": (K,), "columns"}."""
        p = self.gate.params(self.x_mean[self.gate_columns], self.x_scale[self.gate_columns])
        p["columns"] = self.gate_columns.copy()
        return p


# ----------------------------------------------------------------------------------------- training
def _scale(A):
    mean, scale = A.mean(0), A.std(0)
    return mean, np.where(scale > 0, scale, 1.0)


def _sq_errors(experts, Xs, Ys) -> np.ndarray:
    """e_ij = ‖y_j − F_i(x_j)‖², shape (N, K)."""
    return np.column_stack([_rowsum((e.predict(Xs) - Ys) ** 2)[:, 0] for e in experts])


def _init_responsibilities(rng, Z, K) -> np.ndarray:
    """Hard assignment to K centres chosen by k-means++ seeding in the gate inputs (one-hot, (N, K))."""
    n = len(Z)
    centres = [Z[rng.integers(n)]]
    d2 = np.sum((Z - centres[0]) ** 2, axis=1)
    for _ in range(1, K):
        p = d2 / d2.sum() if d2.sum() > 0 else np.full(n, 1.0 / n)
        centres.append(Z[rng.choice(n, p=p)])
        d2 = np.minimum(d2, np.sum((Z - centres[-1]) ** 2, axis=1))
    D = np.stack([np.sum((Z - c) ** 2, axis=1) for c in centres], axis=1)
    return np.eye(K)[np.argmin(D, axis=1)]


def _em_loglik(gate, experts, sigma, Z, Xs, Ys):
    """(mean log-likelihood, responsibilities (N, K))."""
    d = Ys.shape[1]
    E = _sq_errors(experts, Xs, Ys)
    logp = (
        log_softmax(gate.logits(Z))
        - 0.5 * d * np.log(2 * np.pi * sigma**2)[None, :]
        - 0.5 * E / sigma[None, :] ** 2
    )
    lse = logsumexp(logp)
    return float(lse.mean()), np.exp(logp - lse[:, None])


def _sigma_update(E, R, d, floor) -> np.ndarray:
    w = R.sum(0)
    s2 = np.where(w > 0, (R * E).sum(0) / (d * np.maximum(w, 1e-300)), 1.0)
    return np.sqrt(np.maximum(s2, floor**2))


def _run_em(gate, experts, sigma, Z, Xs, Ys, opts):
    prev, it, converged = -np.inf, 0, False
    d = Ys.shape[1]
    for it in range(1, opts["max_iter"] + 1):
        ll, R = _em_loglik(gate, experts, sigma, Z, Xs, Ys)
        for i, e in enumerate(experts):
            e.fit(Xs, Ys, R[:, i])
        sigma = _sigma_update(_sq_errors(experts, Xs, Ys), R, d, opts["sigma_floor"])
        gate.fit_cross_entropy(Z, R, opts["gate_l2"], opts["gate_iter"])
        if abs(ll - prev) <= opts["tol"] * max(1.0, abs(ll)):
            converged = True
            break
        prev = ll
    ll, R = _em_loglik(gate, experts, sigma, Z, Xs, Ys)
    return ll, R, sigma, it, converged


def _seed_objective(gate, experts, Z, Xs, Ys):
    P = gate.probs(Z)
    return float(np.sum(P * _sq_errors(experts, Xs, Ys))) / len(Z), P


def _run_seed(gate, experts, Z, Xs, Ys, opts):
    prev, it, converged = np.inf, 0, False
    for it in range(1, opts["max_iter"] + 1):
        _, P = _seed_objective(gate, experts, Z, Xs, Ys)
        for i, e in enumerate(experts):
            e.fit(Xs, Ys, P[:, i])
        gate.fit_weighted_error(Z, _sq_errors(experts, Xs, Ys), opts["gate_l2"], opts["gate_iter"])
        L, P = _seed_objective(gate, experts, Z, Xs, Ys)
        if abs(prev - L) <= opts["tol"] * max(L, 1e-300):
            converged = True
            break
        prev = L
    return L, P, it, converged


def _hard_refit(experts, gate, labels, Z, Xs, Ys, refit_gate, opts):
    K = len(experts)
    for i, e in enumerate(experts):
        sel = labels == i
        if sel.sum() > Xs.shape[1] + 1:  # enough samples for a determined fit
            e.fit(Xs, Ys, sel.astype(float))
    if refit_gate:
        gate.fit_cross_entropy(Z, np.eye(K)[labels], opts["refit_l2"], 4 * opts["gate_iter"])
    R = np.eye(K)[labels]
    return _sigma_update(_sq_errors(experts, Xs, Ys), R, Ys.shape[1], opts["sigma_floor"])


def fit(
    X,
    Y,
    n_experts: int,
    seed: int = 0,
    objective: str = "em",
    *,
    restarts: int = 5,
    max_iter: int = 200,
    tol: float = 1e-7,
    gate_columns=None,
    gate_l2: float = 1e-8,
    refit_l2: float = 1e-12,
    gate_iter: int = 50,
    sigma_floor: float = 1e-6,
    hard_refit: bool = True,
    expert_factory: Callable[[int, int], Expert] | None = None,
) -> MixtureOfExperts:
    """Train a mixture of experts on samples (X, Y).

    Args:
        X: inputs, shape (N, d_x); Y: outputs, shape (N, d_y) or (N,).
        n_experts: K ≥ 1.
        seed: seeds every random choice; the same seed gives the same model.
        objective: "em" (mixture likelihood, EM) or "seed" (gate-weighted squared error).
        restarts: independent starts; the best training objective is kept.
        max_iter: iterations per start; tol: relative change of the objective that stops a start.
        gate_columns: indices of X the gate sees (default all).
        gate_l2: L2 penalty on the gate weights (standardized units); keeps them finite on
            separable data.
        gate_iter: L-BFGS iterations per gate update.
        sigma_floor: smallest expert noise σ (standardized units, EM only); an expert that fits
            its samples exactly (a sticking block: y = 0) would otherwise make the likelihood infinite.
        hard_refit: finish with the hard refit described in the module docstring.
        expert_factory: ``(d_x, d_y) -> Expert`` (default AffineExpert).

    Returns:
        MixtureOfExperts.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}; got {objective!r}")
    X = np.asarray(X, float)
    Y = np.asarray(Y, float)
    Y = Y[:, None] if Y.ndim == 1 else Y
    if X.ndim != 2 or len(X) != len(Y) or len(X) == 0:
        raise ValueError(f"X (N, d_x) and Y (N, d_y) must have the same N > 0; got {X.shape}, {Y.shape}")
    if not (np.isfinite(X).all() and np.isfinite(Y).all()):
        raise ValueError("X and Y must be finite")
    K = int(n_experts)
    if K < 1 or K > len(X):
        raise ValueError(f"n_experts must be in 1..{len(X)}; got {n_experts}")
    if int(restarts) < 1 or int(max_iter) < 1:
        raise ValueError(f"restarts and max_iter must be ≥ 1; got {restarts}, {max_iter}")
    cols = np.arange(X.shape[1]) if gate_columns is None else np.asarray(gate_columns, np.int64)
    if len(cols) == 0 or cols.min() < 0 or cols.max() >= X.shape[1]:
        raise ValueError(f"gate_columns must index the {X.shape[1]} columns of X; got {cols.tolist()}")
    factory = expert_factory or (lambda n_in, n_out: AffineExpert(n_in, n_out))
    opts = dict(
        max_iter=int(max_iter),
        tol=tol,
        gate_l2=gate_l2,
        refit_l2=refit_l2,
        gate_iter=int(gate_iter),
        sigma_floor=sigma_floor,
    )

    x_mean, x_scale = _scale(X)
    y_mean, y_scale = _scale(Y)
    Xs, Ys = (X - x_mean) / x_scale, (Y - y_mean) / y_scale
    Z = Xs[:, cols]
    info = FitInfo()
    best = None
    for r, child in enumerate(np.random.SeedSequence(int(seed)).spawn(int(restarts))):
        rng = np.random.default_rng(child)
        experts = [factory(X.shape[1], Y.shape[1]) for _ in range(K)]
        gate = LinearSoftmaxGate(len(cols), K)
        R0 = _init_responsibilities(rng, Z, K)
        for i, e in enumerate(experts):
            e.fit(Xs, Ys, R0[:, i])
        gate.fit_cross_entropy(Z, R0, gate_l2, gate_iter)
        if objective == "em":
            sigma = _sigma_update(_sq_errors(experts, Xs, Ys), R0, Ys.shape[1], sigma_floor)
            score, R, sigma, it, conv = _run_em(gate, experts, sigma, Z, Xs, Ys, opts)
            better = best is None or score > best[0]
        else:
            score, R, it, conv = _run_seed(gate, experts, Z, Xs, Ys, opts)
            sigma = _sigma_update(_sq_errors(experts, Xs, Ys), R, Ys.shape[1], sigma_floor)
            better = best is None or score < best[0]
        info.objective.append(score)
        info.iterations.append(it)
        info.converged.append(conv)
        if better:
            best = (score, experts, gate, sigma, R, r)
    _, experts, gate, sigma, R, info.best = best
    if hard_refit:
        labels = np.argmax(R, axis=1)  # EM: posterior; seed: R is the gate itself
        sigma = _hard_refit(experts, gate, labels, Z, Xs, Ys, objective == "em", opts)
    return MixtureOfExperts(
        experts, gate, cols, x_mean, x_scale, y_mean, y_scale, sigma, objective, int(seed), info
    )


def fit_affine(X, Y):
    """The single-affine baseline y ≈ A x + c by least squares: returns predict(X) -> (N, d_y)."""
    X = np.asarray(X, float)
    Y = np.asarray(Y, float)
    Y = Y[:, None] if Y.ndim == 1 else Y
    sol = np.linalg.lstsq(np.column_stack([X, np.ones(len(X))]), Y, rcond=None)[0]
    return lambda Xn: np.column_stack([np.asarray(Xn, float), np.ones(len(Xn))]) @ sol
