"""Check that the shipped studies reproduce their stated trends (run at reduced size, read from the CSV)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from convexsim.studies import load_study, read_csv
from convexsim.studies.report import loglog_slope
from convexsim.studies.spec import study_header

from study_testkit import STUDIES

G = 9.81


def _col(rows, name):
    return np.array([float(r[name]) if r[name] != "" else math.nan for r in rows])


def _ok_rows_and_sap_by_stiffness(res):
    """(all rows, the SAP rows sorted by stiffness) of a SAP-vs-LCP study; every run must be ok."""
    rows = read_csv(res.csv)
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    sap = sorted((r for r in rows if r["solver.kind"] == "sap"), key=lambda r: float(r["materials.default.stiffness"]))
    return rows, sap


def _sphere_delassus(m: float, r: float) -> float:
    """w = ||W||_F/3 with W = diag(1 + r²/I, 1 + r²/I, 1)/m for a contact below a solid sphere's centre.

    This is docs/sap-model.md (3) with diag(A)⁻¹ (I = 2/5·m·r²): the independent closed form of the estimate.
    """
    I = 0.4 * m * r * r
    a = (1.0 + m * r * r / I) / m
    return math.sqrt(2 * a * a + (1.0 / m) ** 2) / 3.0


def _skew(p):
    return np.array([[0, -p[2], p[1]], [p[2], 0, -p[0]], [-p[1], p[0], 0]])


@pytest.mark.parametrize("path", sorted(STUDIES.glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_study_loads_and_states_its_trend(path):
    """Check that every shipped study validates and its header states an expected trend."""
    spec = load_study(path)
    header = study_header(path)
    assert "Expected" in header or "expected" in header, f"{path.name}: header must state the expected trend"
    assert spec.expected, f"{path.name}: 'expected' field is empty"
    assert spec.reduced is not None, f"{path.name}: needs a reduced version for tests"


@pytest.mark.slow
def test_rest_penetration_follows_mg_over_k_then_plateaus(shipped_reduced):
    """Check penetration = m·g/k (log–log slope −1) when soft and the near-rigid floor when stiff."""
    res = shipped_reduced("rest_penetration_vs_stiffness", plots=True)
    rows = [r for r in read_csv(res.csv) if r["contact_model"] == "sap"]
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    k = _col(rows, "materials.default.stiffness")
    pen = _col(rows, "rest_penetration")
    soft = k <= 1.0e5  # k* = 4π²/(w·dt·(dt+τ_d)) ≈ 2.3e5 N/m for dt = 2e-3 s, τ_d = 0.05 s, β = 1
    assert np.count_nonzero(soft) >= 3
    slope = loglog_slope(k[soft], pen[soft])
    # Acceptance: within 5% of −1. (The runs settle to ~0.1%, so this is far from a tuned bound.)
    assert abs(slope + 1.0) < 0.05, slope
    # Each soft value against m·g/k: 1% covers the residual settling after 0.3 s (decay ≥ e^-6).
    np.testing.assert_allclose(pen[soft], 1.0 * G / k[soft], rtol=0.01)
    # Near-rigid floor β²/(4π²)·w·m·g·dt·(dt+τ_d) (docs/sap-model.md (8)). 3% covers w's dependence on the
    # contact point (r_eff = r − φ/2) and the sphere's slight rocking; k = 1e7 and 1e8 must agree.
    w = _sphere_delassus(1.0, 0.1)
    dt, tau = 2e-3, 0.05
    floor = w / (4 * math.pi ** 2) * 1.0 * G * dt * (dt + tau)
    stiff = k >= 1.0e7
    assert np.count_nonzero(stiff) >= 2
    np.testing.assert_allclose(pen[stiff], floor, rtol=0.03)
    # The plot and report exist and embed the plots.
    pngs = [p for p in res.plots if p.suffix == ".png"]
    svgs = [p for p in res.plots if p.suffix == ".svg"]
    assert len(pngs) == len(svgs) >= 2
    assert all(p.stat().st_size > 1000 for p in res.plots)
    assert pngs[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in svgs[0].read_bytes()[:2000]
    text = res.report.read_text()
    assert "resting_sphere" in text and "materials.default.stiffness" in text
    assert "numpy" in text and "numba" in text and "convexsim" in text  # software versions
    for png in pngs:
        assert f"plots/{png.name}" in text
    # Slopes are fitted per regime: the soft regime 1e3..1e5 on its own (slope −1, not mixed with the floor).
    soft_row = [line for line in text.splitlines()
                if line.startswith("| rest_penetration |") and "| 1e3 – 1e5 | 3 |" in line]
    assert len(soft_row) == 1, [line for line in text.splitlines() if line.startswith("| rest_penetration |")]
    assert float(soft_row[0].rstrip(" |").rsplit("|", 1)[1]) == pytest.approx(-1.0, abs=0.05)
    # The report leads with the verdict: the soft slope and the sap plateau hold; the lagged trend has no
    # data in the reduced run (sap only). Timing and iteration counts are not fitted.
    head = text.split("## Expected trend")[0]
    assert "## Verdict" in head and "**PASS**: 2 of 3 expected trends hold" in head, head
    assert "slope -1.0" in head and "level 4." in head
    assert not any(line.startswith(("| ms_per_step |", "| newton_iterations")) for line in text.splitlines())


def test_stiction_slip_is_proportional_to_sigma(shipped_reduced):
    """Check slip ∝ σ over two decades and equal to σ·w·m·g·sin θ·dt/3 (three feet)."""
    res = shipped_reduced("stiction_slip_vs_sigma")
    rows = read_csv(res.csv)
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    sigma = _col(rows, "solver.sigma")
    slip = _col(rows, "stiction_slip")
    assert sigma.max() / sigma.min() >= 100 - 1e-9
    ratio = slip / sigma
    # Acceptance: proportional within 20% over two decades.
    assert ratio.max() / ratio.min() < 1.2, ratio
    # Closed form: each foot has v_t = R_t·γ_t with R_t = σ·w and γ_t = m·g·sin θ·dt/3 (no rotation, equal
    # feet). w from J diag(A)⁻¹ Jᵀ of one foot (contact point p = (0.1, 0, −0.02) from the COM, inertia
    # diag(0.0034, 0.0034, 0.0067)). 3% covers the Newton tolerance on these 1e-6 m/s velocities.
    inertia = np.array([0.0034, 0.0034, 0.0067])
    p = np.array([0.1, 0.0, -0.02])
    W = _skew(p) @ np.diag(1 / inertia) @ _skew(p).T + np.eye(3)
    w = np.linalg.norm(W) / 3.0
    g_t = 3.6431  # tangential gravity of the tilted scene [m/s²]
    np.testing.assert_allclose(slip, sigma * w * 1.0 * g_t * 5e-3 / 3.0, rtol=0.03)


def test_lagged_does_not_hop_where_sap_does(shipped_reduced):
    """Check the gliding artifact: sap hops above 1 mm while lagged stays below 0.1 mm."""
    res = shipped_reduced("sliding_hop")
    rows = read_csv(res.csv)
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    by_dt: dict[str, dict[str, float]] = {}
    for r in rows:
        by_dt.setdefault(r["time_step"], {})[r["contact_model"]] = float(r["hop_height"])
    assert len(by_dt) >= 2
    for dt, hops in by_dt.items():
        assert hops["sap"] > 1e-3, (dt, hops)  # the (dt+τ_d)·μ·|v| offset throws the sphere up by mm
        assert hops["lagged"] < 1e-4, (dt, hops)


def test_sap_matches_lcp_on_a_box_stack_as_stiffness_grows(shipped_reduced):
    """Check the SAP–LCP difference equals the SAP stack's settling 2.25·m·g/k and shrinks with k."""
    res = shipped_reduced("sap_vs_lcp_box_stack")
    _, sap = _ok_rows_and_sap_by_stiffness(res)
    k = _col(sap, "materials.default.stiffness")
    diff = _col(sap, "sap_lcp_final_position_diff")
    assert np.all(np.diff(diff) < 0), diff
    # Soft regime: top box sinks by 3mg/(4k) + 2mg/(4·k/2) + mg/(4·k/2) = 2.25·m·g/k. 3% covers settling
    # within 0.1 s (τ_d = 0.01 s per pair, strongly damped) and the LCP stack's drift (~1e-14 m).
    soft = k <= 1.0e6
    assert np.count_nonzero(soft) >= 2
    np.testing.assert_allclose(diff[soft], 2.25 * G / k[soft], rtol=0.03)


def test_sap_agrees_with_lcp_on_the_box_stack_in_the_stiff_limit(shipped_reduced):
    """Check the stiff end (k = 1e8 N/m) of the box stack: SAP and LCP agree to micrometres.

    Above k* = 4π²/(β²·w·dt·(dt+τ_d)) (≈ 2e7 N/m for a box corner on the ground, β = 0.1, dt = 5e-3 s,
    τ_d = 0.01 s) SAP clamps the normal regularization, R_n >= β²·w/(4π²), so a contact with load F sinks by
    F·(1/k_eff) with 1/k <= 1/k_eff <= 1/k + β²·w·dt·(dt+τ_d)/(4π²). Summed over the three layers exactly as
    the soft 2.25·m·g/k (box–box pairs have k/2 in series and twice the Delassus estimate of a corner on the
    ground), the top box's offset from LCP is bounded by
        2.25·m·g/k  <=  diff  <=  2.25·m·g·(1/k + β²·w·dt·(dt+τ_d)/(4π²)),
    with w taken at its upper bound λ_max(W) of a corner contact, W = I/m + [r]ₓ I_b⁻¹ [r]ₓᵀ
    (r = (±0.05, ±0.05, −0.05) m, I_b = m·(0.1²+0.1²)/12): λ_max = 5.5 kg⁻¹. The band is 2.2e-7 .. 2.5e-6 m;
    measured: 1.48e-6 m. No tolerance is added: both ends are bounds, not estimates.
    """
    res = shipped_reduced("sap_vs_lcp_box_stack")
    _, sap = _ok_rows_and_sap_by_stiffness(res)
    k = _col(sap, "materials.default.stiffness")
    diff = _col(sap, "sap_lcp_final_position_diff")
    assert k[-1] == 1.0e8, "the reduced sweep must reach the stiff limit k = 1e8 N/m"
    m, beta, dt, tau = 1.0, 0.1, 5e-3, 0.01
    r = np.array([0.05, 0.05, -0.05])
    inertia = m * (0.1 ** 2 + 0.1 ** 2) / 12.0
    W = np.eye(3) / m + _skew(r) @ _skew(r).T / inertia
    w_max = float(np.linalg.eigvalsh(W).max())
    assert w_max == pytest.approx(5.5)
    lower = 2.25 * m * G / k[-1]
    upper = 2.25 * m * G * (1.0 / k[-1] + beta ** 2 * w_max * dt * (dt + tau) / (4 * math.pi ** 2))
    assert lower <= diff[-1] <= upper, (lower, diff[-1], upper)  # upper ≈ 2.5e-6 m: micrometre agreement


def test_sap_matches_lcp_on_an_incline_as_stiffness_grows(shipped_reduced):
    """Check the SAP–LCP difference on a sticking incline shrinks as k grows and LCP does not slip."""
    res = shipped_reduced("sap_vs_lcp_incline")
    rows, sap = _ok_rows_and_sap_by_stiffness(res)
    lcp = [r for r in rows if r["solver.kind"] == "lcp"]
    diff = _col(sap, "sap_lcp_final_position_diff")
    k = _col(sap, "materials.default.stiffness")
    # Two decades of k: the compliant part (∝ 1/k, ≈ 2.5e-4 m at 1e4 N/m) shrinks by ~100, the σ creep
    # (~4e-7 m in 0.1 s) does not: expect at least a factor 30 drop.
    assert diff[0] / diff[-1] > 30, diff
    assert diff[0] == pytest.approx(9.81 * 0.9285 / (4 * k[0]), rel=0.25)  # mean sink m·g·cosθ/(4k), plus tilt
    assert np.all(_col(lcp, "stiction_slip") < 1e-9)  # the rigid model sticks exactly


def test_sap_agrees_with_lcp_on_the_incline_up_to_the_sigma_creep(shipped_reduced):
    """Check the stiff end (k = 1e8 N/m) of the incline: the SAP–LCP difference is the σ creep distance.

    At k = 1e8 N/m the compliant offset (m·g·cos θ/(4k) ≈ 2e-8 m, at most the clamped sink: the measured
    rest penetration, ≈ 1.6e-7 m) is small next to the stiction creep: the SAP box slides down the slope at
    the regularized slip velocity v_s (the ``stiction_slip`` metric, ≈ σ·w·m·g·sin θ·dt/4 ≈ 1.5e-5 m/s) from
    the first step on, so after T = 0.1 s the difference is v_s·T ≈ 1.5e-6 m (measured:
    3.8e-6 m over the full 0.25 s). Tolerance 10%: the sink adds in quadrature (≤ 1%, the offsets are normal
    and tangential), v_s is averaged over the last half of the run while the creep is not yet steady in
    the first step of 20 (≤ 5%), and the slight tilt of the box adds a few percent. The difference has
    levelled off: between k = 1e6 and 1e8 it falls by less than 3× (1/k would give 100×).
    """
    res = shipped_reduced("sap_vs_lcp_incline")
    _, sap = _ok_rows_and_sap_by_stiffness(res)
    k = _col(sap, "materials.default.stiffness")
    diff = _col(sap, "sap_lcp_final_position_diff")
    slip = _col(sap, "stiction_slip")
    assert k[-1] == 1.0e8 and k[-2] == 1.0e6, "the reduced sweep must reach the stiff limit k = 1e8 N/m"
    duration = res.spec.duration
    assert duration == pytest.approx(0.1)
    assert 1.0e-5 < slip[-1] < 2.0e-5, slip  # the σ-level creep of the header (≈ 1.5e-5 m/s)
    assert diff[-1] == pytest.approx(slip[-1] * duration, rel=0.10), (diff[-1], slip[-1] * duration)
    assert diff[-2] / diff[-1] < 3.0, diff


def test_newton_iterations_grow_as_sigma_falls(shipped_reduced):
    """Check mean and max Newton iterations rise steadily with ln(1/σ) through stick–slip transitions."""
    res = shipped_reduced("newton_iterations_vs_sigma")
    rows = sorted(read_csv(res.csv), key=lambda r: -float(r["solver.sigma"]))  # σ falling
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    assert np.all(_col(rows, "solver_failures") == 0)
    sigma = _col(rows, "solver.sigma")
    mean_it = _col(rows, "newton_iterations_mean")
    max_it = _col(rows, "newton_iterations_max")
    # Non-decreasing, and rising overall: since speculative contacts push only when the step closes
    # the gap and the step predicts stiction (docs/sap.md), the reduced run measures 1.3875, 1.6875, 1.7875
    # (was 1.51, 2.13, 2.55, then 1.375, 1.825, 1.825).
    assert np.all(np.diff(mean_it) >= 0) and mean_it[-1] > mean_it[0], mean_it
    assert np.all(np.diff(max_it) >= 0) and max_it[-1] > max_it[0], max_it
    # "Roughly like ln(1/σ)": the gain per e-fold of σ is positive and modest (Newton stays fast: well
    # under one extra iteration per e-fold; measured ≈ 0.043). Bounds: 0.02 .. 1.
    gain = np.polyfit(np.log(1 / sigma), mean_it, 1)[0]
    assert 0.02 < gain < 1.0, gain
    # The same puck stops in the same way whatever σ (σ only changes the regularized stiction).
    stop = _col(rows, "stop_distance")
    assert np.ptp(stop) < 0.02 * stop.mean(), stop


@pytest.mark.parametrize("name", sorted(p.stem for p in STUDIES.glob("*.yaml")))
def test_shipped_study_meets_its_checkable_trends_at_reduced_size(shipped_reduced, name):
    """Each shipped study states its trend in checkable form; the reduced run fails none of them and passes
    at least one (a trend whose range the reduced sweep does not reach has no data)."""
    from convexsim.studies.report import check_trends

    res = shipped_reduced(name)
    spec = load_study(STUDIES / f"{name}.yaml")
    assert spec.trends, f"{name}: no trends"
    verdicts = check_trends(spec, read_csv(res.csv))
    summary = [(v.statement, v.status, [(c.label, c.measured) for c in v.series]) for v in verdicts]
    print(name, summary)
    assert not any(v.status == "fail" for v in verdicts), summary
    assert any(v.status == "pass" for v in verdicts), summary
