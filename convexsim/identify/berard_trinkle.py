"""The particle of Berard & Trinkle, "An MPEC Formulation for Parameter Identification of Complementarity
Systems" (RPI, 2008): forward model, noisy observations, and μ identified two ways (docs/identify.md).

A unit-mass particle in the vertical (x, y) plane starts at q⁰ = (0, 3) m at rest (ν⁰ = 0: the slides do
not give it), is pushed with x_app = 5 N and falls under g = 9.81 m/s² onto the ground y = 0, where it
slides with Coulomb friction μ = 0.2; h = 0.05 s, N = 100 steps. Each step is the 4×4 LCP in
z = (λ_n, λ_f1, λ_f2, σ) of ``convexsim.lcp.seeds.berard_trinkle_lcp`` (position-level normal condition
y^{l+1} ≥ 0, two friction directions ∓x), solved by Lemke.

Observations are the positions (x, y) with i.i.d. uniform noise on [−ε, ε] in both channels (the slides'
objective values, ≈ 65·ε² for 101 frames, match two noisy channels: 2·101·ε²/3 = 67 ε²).

Identification:
* :func:`fit_shooting`: least squares on forward LCP simulations, J(μ, x⁰) = Σ_l ‖(x_l, y_l) − ỹ_l‖²,
  first a bounded scalar search on μ with x⁰ from the first observation, then ``least_squares`` over
  (μ, x⁰) (5 unknowns);
* :func:`fit_mpec`: the seed's MPEC (``convexsim.identify.mpec``), states and forces free, started from a
  forward simulation at μ₀ (the slides' start — observations, zero forces, μ = 1 — stalls in a wrong basin).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares, minimize_scalar

from convexsim.identify.mpec import MpecProblem, MpecStep, solve_mpec
from convexsim.lcp import seeds

MU, H, M, G, X_APP, Q0, STEPS = 0.2, 0.05, 1.0, 9.81, 5.0, (0.0, 3.0), 100
"""The slides' values."""

TABLE_1 = ((5e-5, 0.2, 2.03e-07, 301), (5e-4, 0.2, 1.61e-05, 443), (5e-3, 0.2, 1.467e-03, 19),
           (5e-2, 0.200022, 1.61e-01, 149), (5e-1, 0.199873, 1.48e+01, 96))
"""Published Table 1 (KNITRO): (ε, μ̂, objective, iterations); the last row is flagged 'infeasible pt'."""

TABLE_2 = ((2, 2006, 0.0, 4.09e-03, 334), (3, 3009, 0.0, 4.95e-03, 185), (5, 5015, 0.000006, 1.05e-02, 364),
           (10, 10030, 0.0000072, 1.66e-02, 281))
"""Published Table 2 (ε = 5e-3): (particles, variables, μ RMSE, objective, iterations)."""


def simulate(mu: float = MU, state0=(Q0[0], Q0[1], 0.0, 0.0), steps: int = STEPS, h: float = H,
             x_app: float = X_APP) -> tuple[np.ndarray, np.ndarray]:
    """States (x, y, ẋ, ẏ) of frames 0..steps, shape (steps+1, 4), and the forces (λ_n, λ_f1, λ_f2, σ) of
    the step producing each frame (row 0 zero)."""
    s0 = np.asarray(state0, float)
    return seeds.berard_trinkle_trajectory(mu=mu, h=h, q0=tuple(s0[:2]), nu0=tuple(s0[2:]), x_app=x_app,
                                           m=M, g=G, steps=steps)


def observe(states: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
    """Positions with uniform noise on [−ε, ε] per channel, shape (T, 2)."""
    return states[:, :2] + rng.uniform(-eps, eps, size=(states.shape[0], 2))


@dataclass
class Fit:
    """One identification: μ̂, its Gauss–Newton standard deviation, the objective Σ‖n‖² [m²], evaluations,
    and the fitted states (T, 4)."""

    mu: float
    mu_std: float
    objective: float
    evaluations: int
    states: np.ndarray
    violation: float = 0.0
    converged: bool = True
    message: str = ""


def initial_state(obs: np.ndarray, h: float = H, frames: int = 8) -> np.ndarray:
    """(x, y, ẋ, ẏ) at frame 0 from a quadratic least-squares fit to the first ``frames`` observations
    (exact in free flight; a difference quotient would amplify the noise by 1/h)."""
    k = min(frames, obs.shape[0])
    t = h * np.arange(k)
    out = np.zeros(4)
    for c in range(2):
        coef = np.polyfit(t, obs[:k, c], 2 if k > 2 else 1)
        out[c] = np.polyval(coef, 0.0)
        out[2 + c] = np.polyval(np.polyder(coef), 0.0)
    return out


def _shoot_residual(theta, obs, steps, h, x_app):
    states, _ = simulate(theta[0], theta[1:5], steps, h, x_app)
    return np.ravel(states[:, :2] - obs)


def fit_shooting(obs: np.ndarray, *, h: float = H, x_app: float = X_APP, mu_max: float = 1.0) -> Fit:
    """Least squares on forward LCP simulations over (μ, x⁰) (module docstring)."""
    steps = obs.shape[0] - 1
    x0 = initial_state(obs, h)

    def cost(mu):
        return float(np.sum(_shoot_residual(np.r_[mu, x0], obs, steps, h, x_app) ** 2))

    scalar = minimize_scalar(cost, bounds=(0.0, mu_max), method="bounded", options={"xatol": 1e-10})
    sol = least_squares(_shoot_residual, np.r_[scalar.x, x0], args=(obs, steps, h, x_app),
                        bounds=([0.0, -np.inf, -np.inf, -np.inf, -np.inf], [mu_max] + [np.inf] * 4),
                        x_scale=[0.1, 1, 1, 1, 1], diff_step=1e-7, xtol=1e-14, ftol=1e-14, gtol=1e-14)
    objective = float(2 * sol.cost)
    dof = max(sol.fun.size - 5, 1)
    try:
        cov = np.linalg.inv(sol.jac.T @ sol.jac) * objective / dof
        std = float(np.sqrt(max(cov[0, 0], 0.0)))
    except np.linalg.LinAlgError:
        std = float("nan")
    states, _ = simulate(sol.x[0], sol.x[1:5], steps, h, x_app)
    return Fit(float(sol.x[0]), std, objective, int(scalar.nfev + sol.nfev), states)


def mpec_problem(obs: np.ndarray, *, h: float = H, x_app: float = X_APP) -> MpecProblem:
    """The particle's MPEC (8 unknowns per step plus x⁰ and μ, as the seed's 4N + 5)."""
    step = MpecStep(Ainv=np.eye(2) / M, accel=np.array([x_app / M, -G]), Jn=np.array([[0.0, 1.0]]),
                    D=np.array([[-1.0, 1.0], [0.0, 0.0]]), phi=np.zeros(1), dphi_dp=np.array([[0.0, 1.0]]),
                    pair=np.zeros(1, dtype=int))
    steps = []
    for l in range(obs.shape[0] - 1):
        st = MpecStep(**{**step.__dict__, "phi": np.array([obs[l, 1]])})
        steps.append(st)
    return MpecProblem(h, obs, np.eye(2), steps, 1)


def fit_mpec(obs: np.ndarray, *, mu0: float = 0.5, h: float = H, x_app: float = X_APP) -> Fit:
    """The seed's MPEC, started from a forward simulation at μ₀ from the first observation."""
    prob = mpec_problem(obs, h=h, x_app=x_app)
    states, forces = simulate(mu0, initial_state(obs, h), obs.shape[0] - 1, h, x_app)
    z = [np.array([h * f[0], h * f[1], h * f[2], f[3]]) for f in forces[1:]]
    x0 = prob.pack([mu0], states[:, :2], states[:, 2:], z)
    res = solve_mpec(prob, x0, theta_max=1.0)
    _, p, v, _ = prob.unpack(res.x)
    return Fit(float(res.theta[0]), float(res.theta_std[0]), res.objective,
               int(sum(s["nfev"] for s in res.stages)), np.hstack([p, v]), res.violation, res.success,
               res.message)


def noise_sweep(eps_values=(5e-5, 5e-4, 5e-3, 5e-2, 5e-1), seeds_=range(3), methods=("mpec", "shooting"),
                mu: float = MU) -> list[dict]:
    """Table 1 reproduction: one row per (ε, seed, method) with μ̂, |μ̂ − μ|, σ_μ, objective/ε² and
    evaluations."""
    truth, _ = simulate(mu)
    rows = []
    for eps in eps_values:
        for seed in seeds_:
            obs = observe(truth, eps, np.random.default_rng(seed))
            for method in methods:
                fit = fit_mpec(obs) if method == "mpec" else fit_shooting(obs)
                rows.append({"eps": eps, "seed": seed, "method": method, "mu": fit.mu,
                             "error": abs(fit.mu - mu), "std": fit.mu_std, "objective": fit.objective,
                             "objective_per_eps2": fit.objective / eps ** 2, "evaluations": fit.evaluations,
                             "violation": fit.violation, "converged": fit.converged})
    return rows


def multi_particle(n: int, eps: float = 5e-3, seed: int = 0, method: str = "mpec") -> dict:
    """Table 2: n particles with random x ∈ [−10, 10], y ∈ [0, 5], μ ∈ (0, 0.5]; they do not interact, so
    the MPEC decouples and each particle is fitted alone. Returns μ RMSE, total objective, the variables a
    joint MPEC would have (this formulation: 8N + 5 per particle) and the per-particle results."""
    rng = np.random.default_rng(seed)
    fits = []
    for _ in range(n):
        x0, y0 = rng.uniform(-10, 10), rng.uniform(0, 5)
        mu = 0.5 - 0.5 * rng.uniform(0.0, 1.0)  # (0, 0.5]
        truth, _ = simulate(mu, (x0, y0, 0.0, 0.0))
        obs = observe(truth, eps, rng)
        f = fit_mpec(obs) if method == "mpec" else fit_shooting(obs)
        fits.append((mu, f))
    err = np.array([f.mu - mu for mu, f in fits])
    return {"particles": n, "variables": n * (8 * STEPS + 5), "rmse": float(np.sqrt(np.mean(err ** 2))),
            "objective": float(sum(f.objective for _, f in fits)), "fits": fits}


__all__ = [
    "MU",
    "Q0",
    "STEPS",
    "TABLE_1",
    "TABLE_2",
    "X_APP",
    "Fit",
    "G",
    "H",
    "M",
    "fit_mpec",
    "fit_shooting",
    "mpec_problem",
    "multi_particle",
    "noise_sweep",
    "observe",
    "simulate",
]
