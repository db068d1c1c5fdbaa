"""How well a trained mixture matches the simulator: the figures of the acceptance checks and the report.

All functions take a trained :class:`~convexsim.learn.moe.MixtureOfExperts` and data in SI units.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from convexsim.learn.data import LearnData, block_rollout
from convexsim.learn.moe import fit_affine


def match_modes(pred, true, n_experts: int, n_modes: int):
    """Expert → true-mode map maximizing agreement (Hungarian method on the confusion matrix).

    Returns:
        mapping: true-mode index of each expert (−1 for an expert left unmatched), shape (K,).
        confusion: counts[expert, true mode], shape (K, n_modes).
    """
    conf = np.zeros((n_experts, n_modes), np.int64)
    np.add.at(conf, (np.asarray(pred), np.asarray(true)), 1)
    rows, cols = linear_sum_assignment(-conf)
    mapping = np.full(n_experts, -1, np.int64)
    mapping[rows] = cols
    return mapping, conf


def mode_accuracy(model, data: LearnData, mapping=None) -> tuple[float, np.ndarray]:
    """(fraction of samples whose argmax-gate expert maps to the true mode, mapping).

    Without ``mapping`` the best label permutation on ``data`` itself is used (labels of a mixture
    are arbitrary); pass the mapping found on training data to avoid choosing it on test data.
    """
    _, mode, _ = model.predict(data.X)
    if mapping is None:
        mapping, _ = match_modes(mode, data.modes, model.n_experts, len(data.mode_names))
    return float(np.mean(mapping[mode] == data.modes)), mapping


def one_step_rmse(model, data: LearnData) -> float:
    """RMS over samples and outputs of ŷ − y [units of y]."""
    y_hat, _, _ = model.predict(data.X)
    return float(np.sqrt(np.mean((y_hat - data.Y) ** 2)))


def baseline_rmse(train: LearnData, test: LearnData) -> float:
    """RMS one-step error on ``test`` of a single affine model fit to ``train`` by least squares."""
    return float(np.sqrt(np.mean((fit_affine(train.X, train.Y)(test.X) - test.Y) ** 2)))


# ------------------------------------------------------------------------------------ sliding block
def block_experts(model, mapping) -> dict:
    """The block's experts by mode: {"stick", "slide+", "slide-"} → expert index (from ``mapping``)."""
    names = ("stick", "slide+", "slide-")
    out = {}
    for i, m in enumerate(mapping):
        if 0 <= m < 3:
            out[names[m]] = i
    missing = [n for n in names if n not in out]
    if missing:
        raise ValueError(f"no expert matched to mode(s) {missing}; mapping {mapping.tolist()}")
    return out


def block_physics(model, mapping, dt: float, g: float, mass: float = 1.0) -> dict:
    """Physical parameters read off the slide experts ``v' = a v + b u + c``.

    Truth: slide± has (a, b, c) = (1, Δt/m, ∓Δtμg), stick (0, 0, 0). Returns ``mu_hat`` =
    (c₋ − c₊)/(2Δtg), and the slopes and intercepts of both slide experts and of the stick expert.
    """
    idx = block_experts(model, mapping)
    params = model.expert_params()
    out = {}
    for name, i in idx.items():
        out[f"{name}_slopes"] = params[i]["coef"][0].copy()
        out[f"{name}_intercept"] = float(params[i]["intercept"][0])
    out["mu_hat"] = (out["slide-_intercept"] - out["slide+_intercept"]) / (2.0 * dt * g)
    out["mu_hat_from_slide+"] = -out["slide+_intercept"] / (dt * g)
    out["mu_hat_from_slide-"] = out["slide-_intercept"] / (dt * g)
    return out


def block_band_edges(model, mapping, u_values, dt: float, mass: float = 1.0) -> np.ndarray:
    """Gate edges of the stick band, as values of a = v + Δt u/m, at each applied force u.

    The gate prefers stick over slide± where ``(w_s − w_±)·(v, u) + (b_s − b_±) > 0``; on the line
    u = const that boundary sits at one v, hence one a. Returns shape (len(u_values), 2): the lower
    (stick | slide−) and upper (stick | slide+) edge; truth: ∓Δtμg.
    """
    idx = block_experts(model, mapping)
    gp = model.gate_params()
    cols = list(gp["columns"])
    if cols != [0, 1]:
        raise ValueError(f"block gate must see (v, u); it sees columns {cols}")
    W, b = gp["W"], gp["b"]
    u = np.asarray(u_values, float)
    edges = np.empty((len(u), 2))
    for k, name in enumerate(("slide-", "slide+")):
        dw = W[idx["stick"]] - W[idx[name]]
        db = b[idx["stick"]] - b[idx[name]]
        v = -(dw[1] * u + db) / dw[0]
        edges[:, k] = v + dt * u / mass
    return edges


def block_axis_edges(model, mapping, dt: float, mass: float = 1.0) -> dict:
    """The band edges where the state plane's axes cross them, in units of a = v + Δt u/m.

    ``at_rest``: on v = 0, the forces at which a resting block starts to slide (×Δt/m);
    ``no_force``: on u = 0, the speeds below which a coasting block stops in one step.
    Each is (lower, upper); truth (−Δtμg, +Δtμg).
    """
    idx = block_experts(model, mapping)
    gp = model.gate_params()
    W, b = gp["W"], gp["b"]
    out = {"at_rest": [], "no_force": []}
    for name in ("slide-", "slide+"):
        dw = W[idx["stick"]] - W[idx[name]]
        db = b[idx["stick"]] - b[idx[name]]
        out["at_rest"].append(-db / dw[1] * dt / mass)  # v = 0: u = −db/dw_u
        out["no_force"].append(-db / dw[0])  # u = 0: v = −db/dw_v
    return {k: np.array(v) for k, v in out.items()}


def block_rollout_metrics(
    model,
    U,
    dt: float,
    mu: float,
    g: float,
    mass: float = 1.0,
    v0: float = 0.0,
    stick_speed: float = 1e-3,
    formulation: str = "direct",
) -> dict:
    """Closed-loop rollout of the model against the simulator under forces U (T,).

    Returns the true and predicted velocities (T+1,), true modes (T,), ``stick_hit`` = fraction of
    true-stick steps (v_{k+1} = 0) where the model predicts |v̂_{k+1}| < stick_speed [m/s],
    ``rms`` and ``max`` of v̂ − v [m/s] over the T predicted steps.
    """
    v, modes = block_rollout(v0, U, dt, mu, g, mass, formulation)
    pred, _ = model.rollout(np.array([v0]), np.asarray(U, float).reshape(-1, 1))
    pv = pred[:, 0]
    err = pv[1:] - v[1:]
    stick = modes == 0
    return {
        "v": v,
        "v_hat": pv,
        "modes": modes,
        "stick_hit": float(np.mean(np.abs(pv[1:][stick]) < stick_speed)) if stick.any() else float("nan"),
        "rms": float(np.sqrt(np.mean(err**2))),
        "max": float(np.max(np.abs(err))),
    }


def episode_rollout(model, data: LearnData, rows) -> dict:
    """Closed-loop rollout over one recorded episode (``rows``: its sample indices in step order).

    Starts from the episode's first state and applies its recorded forces. Returns ``truth`` and
    ``pred`` states (T+1, d_y), the true modes (T,), ``rms`` (d_y,) and ``max`` (d_y,) of pred − truth.
    """
    rows = np.asarray(rows)
    X = data.X[rows]
    d = data.state_dim
    truth = np.vstack([X[:, :d], data.Y[rows][-1:]])
    pred, _ = model.rollout(X[0, :d], X[:, d:])
    err = pred[1:] - truth[1:]
    return {
        "truth": truth,
        "pred": pred,
        "modes": data.modes[rows],
        "rms": np.sqrt(np.mean(err**2, axis=0)),
        "max": np.max(np.abs(err), axis=0),
    }
