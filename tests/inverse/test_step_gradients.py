"""Implicit step derivatives of SAP against central finite differences, for every contact model.

Tolerances: a central difference with step h has truncation error O(h²·v''') and round-off
O(ε_mach·|v|/h); with h ≈ 1e-6 relative and solves converged to a momentum residual of 1e-12 (relative),
both are below 1e-6 of the derivative's scale, so 1e-5 relative (plus an absolute floor of 1e-7 of the
largest derivative component) cannot pass by accident and does not fail by noise.
"""

import numpy as np
import pytest

from convexsim.inverse.gradients import (
    GRADIENT_PARAMETERS,
    impulse_partials,
    sap_impulse_partials,
    step_sensitivity,
)
from convexsim.sap import ContactProblem, solve
from convexsim.sap.constraints import constraint_impulse
from convexsim.sap.friction_cone import NO_CONTACT, SLIDING, STICTION, cone_region

RNG_SEED = 20240515


def _kernel_params(kind, rng):
    if kind == 0:
        return np.array([rng.uniform(0.1, 1), rng.uniform(1e-3, 1), rng.uniform(1e-3, 1), 0, 0, rng.normal(),
                         0, 0])
    dt, k, d, fe0 = 0.01, rng.uniform(1e3, 1e5), rng.uniform(0, 5), rng.uniform(-10, 100)
    return np.array([rng.uniform(0.1, 1), dt, k, d, fe0, rng.uniform(0, 1), rng.uniform(1e-4, 1e-2),
                     min(fe0 / (dt * k), 1 / (d + 1e-20))])


@pytest.mark.parametrize("kind", [0, 1, 2], ids=["sap", "lagged", "similar"])
def test_impulse_partials_match_kernels_and_finite_differences(kind):
    rng = np.random.default_rng(RNG_SEED + kind)
    for _ in range(150):
        par, vc = _kernel_params(kind, rng), rng.normal(size=3) * 0.5
        g, dgdvc, dgdp = impulse_partials(kind, par, vc)
        _, g_ref, G_ref = constraint_impulse(kind, par, vc)
        np.testing.assert_allclose(g, g_ref, rtol=0, atol=1e-12)            # same γ as the solver
        np.testing.assert_allclose(dgdvc, -G_ref, rtol=1e-9, atol=1e-9 * (1 + np.abs(G_ref).max()))
        for j in range(6 if kind == 0 else 7):                              # v̂ (HC, j = 7) has no effect
            h = 1e-6 * max(1.0, abs(par[j]))
            pp, pm = par.copy(), par.copy()
            pp[j] += h
            pm[j] -= h
            fd = (constraint_impulse(kind, pp, vc)[1] - constraint_impulse(kind, pm, vc)[1]) / (2 * h)
            np.testing.assert_allclose(dgdp[:, j], fd, rtol=1e-5, atol=1e-6 * (1 + np.abs(fd).max()))


# ------------------------------------------------------------------------------------------ one step
NV = 6


def _system(seed=1):
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(NV, NV))
    return B @ B.T + NV * np.eye(NV), rng.normal(size=(6, NV)), rng


def _problem(model, A, J, th, v_star):
    kw = {"dt": th["dt"], "model": model, "mu": th["mu"], "k": th["k"], "sigma": th["sigma"]}
    if model == "sap":
        kw.update(tau_d=th["tau_d"], phi0=th["phi0"], beta=0.0)
    else:
        kw.update(d=th["d"], fe0=-th["k"] * th["phi0"], vn0=th["vn0"], v_s=1e-4)
    return ContactProblem.from_dense(A, v_star, J, **kw)


def _theta():
    return {"dt": 0.01, "mu": np.array([0.5, 0.3]), "k": np.array([1e4, 2e4]),
            "tau_d": np.array([0.01, 0.02]), "d": np.array([1.0, 2.0]), "sigma": 1e-2,
            "phi0": np.array([-1e-3, -2e-3]), "vn0": np.array([-0.1, 0.05])}


def _fd_v(model, A, J, th, v_star, name, i, h):
    out = []
    for sign in (1, -1):
        t = {k: (v.copy() if np.ndim(v) else v) for k, v in th.items()}
        if np.ndim(t[name]):
            t[name][i] += sign * h
        else:
            t[name] += sign * h
        out.append(solve(_problem(model, A, J, t, v_star), params=GRADIENT_PARAMETERS).v)
    return (out[0] - out[1]) / (2 * h)


@pytest.mark.parametrize("model", ["sap", "lagged", "similar"])
def test_step_derivatives_match_finite_differences(model):
    A, J, rng = _system()
    th = _theta()
    v_star = rng.normal(size=NV) * 0.3
    sens = step_sensitivity(_problem(model, A, J, th, v_star))
    names = ["mu", "k", "phi0", "sigma"] + (["tau_d"] if model == "sap" else ["d", "vn0"])
    checked = 0
    for name in names:
        per = np.ndim(th[name]) > 0
        an = sens.dv_dparameter(name, per_contact=per)
        an = an if per else an[:, None]
        for i in range(an.shape[1]):
            val = th[name][i] if per else th[name]
            h = 1e-5 * abs(val)
            fd = _fd_v(model, A, J, th, v_star, name, i, h)
            scale = np.abs(fd).max()
            roundoff = 1e-14 / h           # |v| ≤ 1 m/s here: the difference quotient's round-off floor
            if scale == 0.0:               # the contact carries no impulse: nothing to compare but zeros
                assert np.abs(an[:, i]).max() == 0.0
                continue
            np.testing.assert_allclose(an[:, i], fd, rtol=1e-4, atol=1e-5 * scale + roundoff,
                                       err_msg=f"{model} {name}[{i}]")
            checked += 1
    assert checked >= 6
    # v*: dv/dv* = H⁻¹A; dt with v* = v0 + dt·a
    D = sens.dv_dvstar()
    fdD = np.column_stack([(solve(_problem(model, A, J, th, v_star + 1e-6 * e), params=GRADIENT_PARAMETERS).v
                            - solve(_problem(model, A, J, th, v_star - 1e-6 * e),
                                    params=GRADIENT_PARAMETERS).v)
                           / 2e-6 for e in np.eye(NV)])
    np.testing.assert_allclose(D, fdD, rtol=1e-5, atol=1e-7)
    a = rng.normal(size=NV)
    v0 = v_star - th["dt"] * a
    h = 1e-7
    vs = [solve(_problem(model, A, J, {**th, "dt": th["dt"] + s * h}, v0 + (th["dt"] + s * h) * a),
                params=GRADIENT_PARAMETERS).v for s in (1, -1)]
    fd = (vs[0] - vs[1]) / (2 * h)
    np.testing.assert_allclose(sens.dv_ddt(a), fd, rtol=1e-5, atol=1e-6 * np.abs(fd).max())


# ------------------------------------------------------------------------------- one-sided points
def _particle_problem(v_star, *, mu=0.5, k=1e4, tau_d=0.0, phi0=0.0, sigma=1e-2, dt=0.01):
    """A unit point mass (3 dofs), one contact with J = I (rows t1, t2, n)."""
    return ContactProblem.from_dense(np.eye(3), v_star, np.eye(3), dt=dt, model="sap", mu=mu, k=k,
                                     tau_d=tau_d,
                                     phi0=phi0, sigma=sigma, beta=0.0)


def _boundary_v_star(target_gamma, p):
    """v* whose solution has exactly the impulse target_gamma in stiction: v = v̂ − Rγ, v* = v − γ."""
    from convexsim.sap import delassus_diagonal
    from convexsim.sap.problem import constraint_kernel_data

    _, cpar, R, v_hat = constraint_kernel_data(p, delassus_diagonal(p))
    v = v_hat[0] - R[0] * target_gamma
    return v - target_gamma, cpar[0], R[0], v_hat[0]


def _region(p, v):
    from convexsim.sap import delassus_diagonal
    from convexsim.sap.friction_cone import SOFT_NORM_EPSILON
    from convexsim.sap.problem import constraint_kernel_data

    _, cpar, R, v_hat = constraint_kernel_data(p, delassus_diagonal(p))
    y = (v_hat[0] - v) / R[0]
    yr = np.sqrt(y[0] ** 2 + y[1] ** 2 + SOFT_NORM_EPSILON ** 2)
    return cone_region(cpar[0, 0], cpar[0, 0] * R[0, 0] / R[0, 2], yr, y[2])


def test_stick_slip_boundary_returns_the_sticking_side():
    mu = 0.5
    base = _particle_problem(np.zeros(3), mu=mu)
    gn = 0.05
    gt = mu * gn * np.sqrt(1 + 1e-12)    # on the cone surface (the soft norm's ε is negligible at this size)
    v_star, *_ = _boundary_v_star(np.array([gt, 0.0, gn]), base)
    sens = step_sensitivity(_particle_problem(v_star, mu=mu))
    an = sens.dv_dparameter("mu")
    h = 1e-6
    v = {s: solve(_particle_problem(v_star, mu=mu + s * h), params=GRADIENT_PARAMETERS).v for s in (1, 0, -1)}
    right, left = (v[1] - v[0]) / h, (v[0] - v[-1]) / h
    # larger μ: the contact sticks (the cone widens); smaller μ: it slides. The two sides differ:
    assert _region(_particle_problem(v_star, mu=mu + h), v[1]) == STICTION
    assert _region(_particle_problem(v_star, mu=mu - h), v[-1]) == SLIDING
    assert np.abs(right - left).max() > 1e-2
    np.testing.assert_allclose(an, right, atol=1e-6)   # the stiction (right) derivative is returned


def test_no_contact_boundary_returns_zero():
    # sliding impulse exactly zero: y_n = −μ̂ ‖y_t‖. Build it in the stiction-free form y = R⁻¹(v̂ − v):
    p0 = _particle_problem(np.zeros(3), phi0=0.0)
    from convexsim.sap import delassus_diagonal
    from convexsim.sap.problem import constraint_kernel_data

    _, cpar, R, v_hat = constraint_kernel_data(p0, delassus_diagonal(p0))
    mu, Rt, Rn = cpar[0, 0], R[0, 0], R[0, 2]
    yt = 2.0
    yn = -mu * Rt / Rn * yt
    v_star = v_hat[0] - R[0] * np.array([yt, 0.0, yn])       # γ = 0 so v = v*
    sens = step_sensitivity(_particle_problem(v_star))
    for name in ("mu", "phi0", "k"):
        assert np.abs(sens.dv_dparameter(name)).max() == 0.0
    # the side where the contact carries impulse has a nonzero derivative: the kink is real
    h = 1e-6
    v_in = solve(_particle_problem(v_star, phi0=-h), params=GRADIENT_PARAMETERS).v
    v_out = solve(_particle_problem(v_star, phi0=h), params=GRADIENT_PARAMETERS).v
    assert np.abs(v_out - v_star).max() == 0.0                  # separating side: v = v*
    assert np.abs(v_in - v_star).max() > 1e-3 * h               # penetrating side: an impulse appears
    np.testing.assert_allclose(sens.dv_dvstar(), np.eye(3), atol=1e-12)


def test_regularization_tie_takes_the_near_rigid_branch():
    # Rn = max(β²w/4π², 1/(dt k (dt+τd))): at a tie the k-derivative of the near-rigid branch (0) is returned
    from convexsim.sap import delassus_diagonal

    dt, tau, beta = 0.01, 0.0, 1.0
    v_star = np.array([0.0, 0.0, -0.5])

    def prob(k):
        return ContactProblem.from_dense(np.eye(3), v_star, np.eye(3), dt=dt, model="sap", mu=0.5, k=k,
                                         tau_d=tau,
                                         phi0=0.0, sigma=1e-2, beta=beta)

    w = float(delassus_diagonal(prob(1.0))[0])                 # √3/3 for A = J = I
    k_tie = 4 * np.pi ** 2 / (beta ** 2 * w * dt * (dt + tau))
    while 1.0 / (dt * k_tie * (dt + tau)) > beta ** 2 / (4 * np.pi ** 2) * w:   # round-off: make it a tie
        k_tie = np.nextafter(k_tie, np.inf)
    sens = step_sensitivity(prob(k_tie))
    assert np.abs(sens.dv_dparameter("k")).max() == 0.0
    h = 1e-6 * k_tie
    v0 = solve(prob(k_tie), params=GRADIENT_PARAMETERS).v
    right = (solve(prob(k_tie + h), params=GRADIENT_PARAMETERS).v - v0) / h
    left = (v0 - solve(prob(k_tie - h), params=GRADIENT_PARAMETERS).v) / h
    assert np.abs(right).max() < 1e-12 < np.abs(left).max()   # right derivative (stiffer: near-rigid) is 0


def test_hunt_crossley_cutoff_returns_zero():
    # lagged / similar: n(v) = dt (fe0 − dt k v)(1 − d v) vanishes at v̂ = fe0/(dt k); at v = v̂ exactly, 0
    dt, k, d, fe0 = 0.01, 1e4, 1.0, 5.0
    v_hat = fe0 / (dt * k)
    for kind in (1, 2):
        par = np.array([0.5, dt, k, d, fe0, 0.0, 1e-4, v_hat])
        g, dgdvc, dgdp = impulse_partials(kind, par, np.array([0.0, 0.0, v_hat]))
        assert np.all(g == 0.0) and np.all(dgdvc[2] == 0.0) and np.all(dgdp[2] == 0.0)
        g_in, dgdvc_in, _ = impulse_partials(kind, par, np.array([0.0, 0.0, v_hat * (1 - 1e-6)]))
        assert dgdvc_in[2, 2] < 0.0 and g_in[2] > 0.0           # inside: n > 0 and n' < 0


@pytest.mark.parametrize("model", ["lagged", "similar"])
def test_stiction_tolerance_tie_returns_the_v_s_side(model):
    # εs = max(v_s, μσw n0): at a tie the v_s branch is returned (∂εs/∂μ = ∂εs/∂σ = 0), i.e. the left
    # derivative in σ. A sliding contact with ‖vt‖ ~ εs makes εs visible in v (t̂ = vt/√(‖vt‖² + εs²)).
    from convexsim.sap.problem import delassus_diagonal

    dt, k, d, fe0, vn0, v_s, mu = 0.01, 1e4, 1.0, 20.0, -0.05, 1e-2, 0.5
    v_star = np.array([0.02, 0.0, -0.01])

    def prob(sigma):
        return ContactProblem.from_dense(np.eye(3), v_star, np.eye(3), dt=dt, model=model, mu=mu, k=k, d=d,
                                         fe0=fe0, vn0=vn0, sigma=sigma, v_s=v_s)

    w = delassus_diagonal(prob(1.0))[0]
    n0 = dt * fe0 * (1 - d * vn0)
    sigma = v_s / (mu * w * n0)
    while mu * sigma * w * n0 > v_s:                                       # round-off: make it a tie
        sigma = np.nextafter(sigma, 0.0)
    sens = step_sensitivity(prob(sigma))
    an = sens.dv_dparameter("sigma")
    h = 1e-6 * sigma
    v0 = solve(prob(sigma), params=GRADIENT_PARAMETERS).v
    left = (v0 - solve(prob(sigma - h), params=GRADIENT_PARAMETERS).v) / h
    right = (solve(prob(sigma + h), params=GRADIENT_PARAMETERS).v - v0) / h
    assert np.abs(right).max() > 1e-3 * np.abs(v0).max() / sigma           # the other side does move v
    np.testing.assert_allclose(an, left, atol=1e-6 * np.abs(right).max())   # left = 0 up to round-off
    assert np.abs(an - right).max() > 0.5 * np.abs(right).max()


def test_sap_partials_regions():
    # the three regions of the cone produce the derivative of their own formula
    par = np.array([0.5, 0.1, 0.1, 0, 0, 0, 0, 0])
    cases = (([0.0, 0.0, -1.0], STICTION), ([0.3, 0.0, -0.2], SLIDING), ([0.0, 0.0, 1.0], NO_CONTACT))
    for vc, region in cases:
        g, dv, dp = sap_impulse_partials(par, np.array(vc))
        if region == NO_CONTACT:
            assert not g.any() and not dv.any() and not dp.any()
        elif region == STICTION:
            assert dp[:, 0].tolist() == [0.0, 0.0, 0.0]          # μ does not act on a sticking contact
        else:
            assert dp[0, 0] != 0.0


# ------------------------------------------------------------------------------- applied forces
@pytest.mark.parametrize("model", ["sap", "lagged", "similar"])
def test_applied_force_derivative_matches_finite_differences(model):
    # v* = v0 + dt M⁻¹(f + u): dv/du = dt H⁻¹ (M = A). A central difference in u is a difference in v* by
    # ±dt M⁻¹ h e_j; same tolerance argument as above (h = 1e-4 N on forces of order 1 N).
    A, J, rng = _system(seed=3)
    th = _theta()
    v_star = rng.normal(size=NV) * 0.3
    sens = step_sensitivity(_problem(model, A, J, th, v_star))
    an = sens.dv_dapplied()
    h, dt = 1e-4, th["dt"]
    Minv = np.linalg.inv(A)

    def v_of(dv):
        return solve(_problem(model, A, J, th, v_star + dv), params=GRADIENT_PARAMETERS).v

    fd = np.column_stack([(v_of(dt * Minv @ (h * e)) - v_of(-dt * Minv @ (h * e))) / (2 * h)
                          for e in np.eye(NV)])
    assert np.abs(fd).max() > 1e-4                     # the force moves v (not a vacuous comparison)
    np.testing.assert_allclose(an, fd, rtol=1e-5, atol=1e-7 * np.abs(fd).max())
    np.testing.assert_allclose(sens.dv_dapplied(mass=A), an, rtol=1e-12, atol=1e-15)
    # a mass matrix other than A (e.g. A = M + dt·D with joint damping): H dv/du = dt A M⁻¹
    M = A + np.diag(np.arange(1.0, NV + 1))
    expected = dt * np.linalg.solve(sens.hessian(), A @ np.linalg.inv(M))
    np.testing.assert_allclose(sens.dv_dapplied(mass=M), expected, rtol=1e-9, atol=1e-12)
