"""Mixture-of-experts internals: gate optimality, units of the reported parameters, input checks."""

import numpy as np
import pytest

from convexsim.learn.moe import LinearSoftmaxGate, fit, log_softmax


def test_gate_newton_reaches_a_stationary_point():
    """After fit_cross_entropy the gradient (by central finite differences of f) is ≈ 0."""
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(300, 2))
    R = rng.dirichlet(np.ones(3), size=300)
    gate = LinearSoftmaxGate(2, 3)
    l2 = 1e-3
    gate.fit_cross_entropy(Z, R, l2=l2)

    def f(W, b):
        return -np.sum(R * log_softmax(Z @ W.T + b)) / len(Z) + 0.5 * l2 * np.sum(W * W)

    h = 1e-6
    for arr in (gate.W, gate.b):
        for idx in np.ndindex(arr.shape):
            old = arr[idx]
            arr[idx] = old + h
            fp = f(gate.W, gate.b)
            arr[idx] = old - h
            fm = f(gate.W, gate.b)
            arr[idx] = old
            assert abs((fp - fm) / (2 * h)) < 1e-6  # from O(0.1) at the start; Newton decrement tol 1e-12


def test_parameters_are_in_data_units():
    """expert_params and gate_params reproduce predict and gate_probs on raw inputs (scaled data)."""
    rng = np.random.default_rng(1)
    X = np.column_stack([rng.uniform(-50, 50, 2000), rng.uniform(0, 1e-3, 2000)])
    Y = np.where(X[:, :1] > 0, 3.0 * X[:, :1] + 2e4 * X[:, 1:], -X[:, :1] + 7.0)
    m = fit(X, Y, 2, seed=0, restarts=2)
    y_hat, mode, P = m.predict(X)
    params = m.expert_params()
    manual = np.array([params[k]["coef"] @ x + params[k]["intercept"] for k, x in zip(mode, X)])
    np.testing.assert_allclose(y_hat, manual, rtol=1e-10, atol=1e-9)
    gp = m.gate_params()
    L = X[:, gp["columns"]] @ gp["W"].T + gp["b"]
    np.testing.assert_allclose(P, np.exp(log_softmax(L)), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(y_hat, Y, atol=1e-8)  # two exact affine pieces, separable by a line


def test_fit_rejects_bad_input():
    X, Y = np.zeros((10, 2)), np.zeros(10)
    with pytest.raises(ValueError, match="objective"):
        fit(X, Y, 2, objective="adam")
    with pytest.raises(ValueError, match="n_experts"):
        fit(X, Y, 0)
    with pytest.raises(ValueError, match="same N"):
        fit(X, Y[:5], 2)
    with pytest.raises(ValueError, match="gate_columns"):
        fit(X, Y, 2, gate_columns=[3])


def test_report_ratio_of_an_exact_fit_is_not_round_off_noise():
    """issue 27: an exact fit printed "single-affine RMSE / RMSE = 182732351474116.2"."""
    from convexsim.learn.report import _ratio_text

    assert _ratio_text({"baseline_ratio": 1.0e9, "fit_exact": True}) == "≥ 1e+09 (fit exact to round-off)"
    assert _ratio_text({"baseline_ratio": 73.25, "fit_exact": False}) == "73.2"
