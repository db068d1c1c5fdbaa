"""The scene MPEC on multi-contact data, several trajectories fitted together, and model mismatch reported.

Bounds: for data made by the model a method assumes (the rigid LCP stepper for the MPEC), the estimate is
least squares with Gaussian noise, so |μ̂ − μ| ~ N(0, σ²) with the Gauss–Newton σ the fit reports; the
checks ask 3σ (fails by chance with probability 0.3 % per fit; the seeds are fixed, so a pass does not
flicker). Data made by another model (SAP/lagged) either agrees within 3σ or the verdict says mismatch.
"""

import numpy as np
import pytest

from convexsim.cli import main
from convexsim.identify import identify
from convexsim.identify.fit import MISMATCH_RATIO, Estimate, MethodResult, judge, noise_from_scatter
from convexsim.io import save_trajectory
from convexsim.simulate import simulate

GROUND = {"name": "ground", "fixed": True, "geometries": [{"shape": "halfspace", "material": "floor"}]}


def _scene(bodies, *, dt, frames, contact_model="lagged", mu=0.4, mu_top=None):
    mats = {"floor": {"friction": mu}, "wood": {"friction": mu}}
    if mu_top is not None:                    # the stack: box/box pair μ_top, box/floor pair μ
        mats = {"floor": {"friction": mu}, "wood": {"friction": mu}, "top": {"friction": mu_top}}
    return {"name": "ident", "time_step": dt, "duration": dt * (frames - 1), "contact_model": contact_model,
            "materials": mats, "bodies": [GROUND, *bodies]}


def box(v=(1.4, 0.6, 0.0), size=(0.3, 0.2, 0.1), mass=2.5, z=None, name="box", material="wood"):
    return {"name": name, "mass": mass, "position": [0, 0, size[2] / 2 if z is None else z],
            "linear_velocity": list(v), "geometries": [{"shape": "box", "size": list(size), "material": material}]}


def capsule(v=(1.0, 0.0, 0.0)):
    """Resting on its side, axis along y, launched along x: slides, and friction spins it up."""
    return {"name": "capsule", "mass": 1.0, "position": [0, 0, 0.05], "quaternion": [0.7071067811865476,
            -0.7071067811865476, 0, 0], "linear_velocity": list(v),
            "geometries": [{"shape": "capsule", "radius": 0.05, "length": 0.2, "material": "wood"}]}


def stack():
    """Two boxes: the lower one slides on the floor, the upper one slides on it (body–body contact)."""
    lower = box(v=(1.0, 0.0, 0.0), size=(0.4, 0.4, 0.1), mass=2.0, name="lower")
    upper = box(v=(2.0, 0.3, 0.0), size=(0.2, 0.2, 0.1), mass=1.0, z=0.15, name="upper", material="top")
    lower["geometries"][0]["material"] = "wood"
    return [lower, upper]


def noisy(traj, eps, seed):
    rng = np.random.default_rng(seed)
    traj.position[:, 1:, :] += rng.normal(0.0, eps, traj.position[:, 1:, :].shape)
    return traj


def mu_of(result, pair):
    return next(e for e in result.estimates if e.parameter == f"mu[{pair}]")


CASES = {   # name: (bodies, dt [s], frames, noise [m], seed, {pair: true μ})
    "box": (lambda: [box()], 0.01, 12, 1e-4, 1, {"floor/wood": 0.4}),
    "capsule": (lambda: [capsule()], 0.005, 12, 5e-4, 2, {"floor/wood": 0.4}),
    "stack": (stack, 0.01, 10, 2e-3, 3, {"floor/wood": 0.4, "top/wood": 0.25}),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    "box",
    pytest.param("capsule", marks=pytest.mark.long),    # 20–60 s and 13–47 s on a loaded 2-core machine:
    pytest.param("stack", marks=pytest.mark.long),      # the long tier (CI runs it after make test)
])
def test_mpec_recovers_mu_from_lcp_data(name):
    bodies, dt, frames, eps, seed, truth = CASES[name]
    scene = _scene(bodies(), dt=dt, frames=frames, mu_top=truth.get("top/wood"))
    traj = noisy(simulate(scene, solver="lcp"), eps, seed)
    ident = identify(traj, ("mu",), methods=("mpec",), noise=eps)
    res = ident.results[0]
    assert res.violation < 1e-3
    for pair, mu in truth.items():
        e = mu_of(res, pair)
        assert abs(e.value - mu) <= 3 * e.std, (pair, e.value, e.std)
    assert not ident.verdict.mismatch, ident.verdict.first_line()    # the model that made the data fits


@pytest.mark.long
@pytest.mark.xfail(run=False, reason="not run (≈ 200 s for a known failure): open (docs/identify.md, 'Not reached'): on this seed both fits leave a "
                   "misfit at the noise (0.85σ, 0.88σ) and the SAP fit recovers μ (0.412 ± 0.148), but the MPEC "
                   "ends more than 3 of its own σ from μ while the methods' gap stays within their combined σ, so "
                   "no rule of the verdict fires; the MPEC also falls back to the continuation here (≈ 200 s)")
def test_lagged_data_at_1ms_agree_or_report_the_mismatch():
    scene = _scene([box(v=(1.0, 0.4, 0.0))], dt=1e-3, frames=25, contact_model="lagged")
    traj = noisy(simulate(scene, solver="sap"), 2e-4, 4)
    ident = identify(traj, ("mu",), methods=("mpec", "sap"))
    within = all(abs(mu_of(r, "floor/wood").value - 0.4) <= 3 * mu_of(r, "floor/wood").std
                 for r in ident.results)
    assert within or ident.verdict.mismatch, ident.verdict.first_line()
    assert ident.verdict.first_line().startswith("MODEL MISMATCH" if ident.verdict.mismatch else "Fit consistent")


@pytest.mark.slow
@pytest.mark.long           # 19–27 s on a loaded 2-core machine: the long tier
def test_several_trajectories_fit_one_mu(tmp_path):
    """Two pushes of the same box in different directions: one μ for both; the joint σ is below each
    trajectory's own (more data), and the estimate within 3σ of the truth."""
    paths = []
    for k, v in enumerate([(1.2, 0.0, 0.0), (0.0, -1.0, 0.0)]):
        traj = noisy(simulate(_scene([box(v=v)], dt=0.01, frames=10), solver="lcp"), 5e-4, 10 + k)
        paths.append(tmp_path / f"push{k}.npz")
        save_trajectory(paths[-1], traj)
    alone = [mu_of(identify(p, methods=("mpec",)).results[0], "floor/wood") for p in paths]
    both = identify(paths, methods=("mpec",))
    joint = mu_of(both.results[0], "floor/wood")
    assert abs(joint.value - 0.4) <= 3 * joint.std
    assert joint.std < min(e.std for e in alone)
    assert both.observed.shape[0] == 20 and both.results[0].positions.shape == both.observed.shape
    out = tmp_path / "r"
    assert main(["identify", *map(str, paths), "--method", "mpec", "--out", str(out)]) == 0
    assert str(paths[1]) in (out / "report.md").read_text()


@pytest.mark.slow
@pytest.mark.long           # three MPEC fits, 11–74 s on a loaded 2-core machine: the long tier
def test_mismatch_is_a_finding_and_an_exit_status(tmp_path, capsys):
    """LCP data with 0.1 mm of noise, fitted by the MPEC (the model that made it): with the true noise level
    the fit is consistent (exit 0); told the noise is 0.1 µm, the same misfit is 1000× the noise, so the
    report's first line says MODEL MISMATCH and the exit status is 3 unless --accept-mismatch."""
    traj = noisy(simulate(_scene([box()], dt=0.01, frames=12), solver="lcp"), 1e-4, 1)
    path = tmp_path / "box.npz"
    save_trajectory(path, traj)
    out = tmp_path / "r"
    args = ["identify", str(path), "--method", "mpec", "--out", str(out)]
    assert main([*args, "--noise", "1e-4"]) == 0
    assert capsys.readouterr().out.startswith("Fit consistent with the noise")
    assert main([*args, "--noise", "1e-7"]) == 3
    assert capsys.readouterr().out.startswith("MODEL MISMATCH: mpec: RMS misfit")
    assert (out / "report.md").read_text().startswith("MODEL MISMATCH")
    assert main([*args, "--noise", "1e-7", "--accept-mismatch"]) == 0


def test_noise_from_scatter_recovers_the_noise_of_a_smooth_motion():
    """A cubic motion has zero third differences: the estimate is the noise alone (MAD of 3×200 samples:
    relative standard error ≈ 1.1/√600 ≈ 5 %, bound 15 %), and one kink in the velocity does not move it."""
    t = np.arange(200) * 0.01
    p = np.stack([1 + 2 * t - 3 * t ** 2 + t ** 3, np.abs(t - 1.0), 0.05 + 0 * t], axis=1)
    rng = np.random.default_rng(0)
    assert noise_from_scatter(p + rng.normal(0, 1e-3, p.shape)) == pytest.approx(1e-3, rel=0.15)
    assert noise_from_scatter(p) < 1e-9


def _result(method, value, std, objective):
    return MethodResult(method, [Estimate(method, "mu[a/b]", value, std, 0.5)], objective, 1, np.zeros(0))


def test_verdict_flags_misfit_and_disagreement():
    n, sigma = 300, 1e-3
    ok = judge([_result("mpec", 0.5, 0.01, n * sigma ** 2), _result("sap", 0.51, 0.01, n * sigma ** 2)], n, sigma)
    assert not ok.mismatch and ok.first_line().startswith("Fit consistent")
    far = judge([_result("mpec", 0.5, 0.01, n * (1.1 * MISMATCH_RATIO * sigma) ** 2)], n, sigma)
    assert far.mismatch and far.first_line().startswith("MODEL MISMATCH: mpec: RMS misfit")
    split = judge([_result("mpec", 0.5, 0.01, n * sigma ** 2), _result("sap", 0.6, 0.01, n * sigma ** 2)], n, sigma)
    assert split.mismatch and "disagree on mu[a/b]" in split.first_line()
