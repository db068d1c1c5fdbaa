"""Report and plots: per-regime log–log slopes, pair metrics drawn once."""

from __future__ import annotations

import math

import numpy as np
import pytest
from study_testkit import tiny_study

from convexsim.studies import study_from_dict
from convexsim.studies.report import group_series, loglog_regimes, make_plots


def test_loglog_regimes_separate_a_power_law_from_its_floor():
    """Check m·g/k followed by a floor gives a −1 regime and a 0 regime, not one mixed slope."""
    k = np.logspace(3, 8, 11)
    kstar = 10 ** 5.5
    pen = np.where(k <= kstar, 9.81 / k, 9.81 / kstar)  # a kink exactly at a sample point
    regimes = loglog_regimes(k, pen)
    assert len(regimes) == 2, regimes
    (a0, a1, an, aslope), (b0, b1, bn, bslope) = regimes
    assert (a0, a1, an) == (pytest.approx(1e3), pytest.approx(kstar), 6)
    assert (b0, b1, bn) == (pytest.approx(kstar), pytest.approx(1e8), 6)
    assert aslope == pytest.approx(-1.0) and bslope == pytest.approx(0.0, abs=1e-12)
    # One straight line stays one regime; repeated x values are averaged; non-positive points are left out.
    x = np.array([1.0, 10.0, 10.0, 100.0, 1000.0, 5.0])
    y = np.array([1.0, 0.1, 0.1, 0.01, 1e-3, -1.0])
    assert loglog_regimes(x, y) == [(1.0, 1000.0, 4, pytest.approx(-1.0))]
    assert loglog_regimes([1.0], [1.0]) == []


def _pair_spec():
    return study_from_dict(tiny_study(
        parameters=[{"path": "materials.default.stiffness", "values": [1.0e3, 1.0e4, 1.0e5]},
                    {"path": "solver.kind", "values": ["sap", "lcp"]}],
        metrics=["sap_lcp_final_position_diff", "rest_penetration"]))


def _pair_rows():
    rows = []
    for i, (k, kind) in enumerate((k, kind) for k in (1.0e3, 1.0e4, 1.0e5) for kind in ("sap", "lcp")):
        rows.append({"index": i, "run_id": f"r{i}", "materials.default.stiffness": k, "solver.kind": kind,
                     "status": "ok", "sap_lcp_final_position_diff": 9.81 / k,
                     "rest_penetration": 9.81 / k if kind == "sap" else 0.0})
    return rows


def test_pair_metric_is_one_series_and_not_plotted_against_the_solver(tmp_path):
    """Check a SAP-vs-LCP metric gives one series (from the sap rows) and no plot against solver.kind."""
    spec, rows = _pair_spec(), _pair_rows()
    series = group_series(spec, rows, "sap_lcp_final_position_diff", "materials.default.stiffness")
    assert len(series) == 1
    (xs, ys), = series.values()
    assert xs == [1.0e3, 1.0e4, 1.0e5] and ys == [9.81 / k for k in xs]
    assert group_series(spec, rows, "sap_lcp_final_position_diff", "solver.kind") == {}
    # A per-run metric still gets one series per solver.
    assert len(group_series(spec, rows, "rest_penetration", "materials.default.stiffness")) == 2
    names = {p.name for p in make_plots(spec, rows, tmp_path)}
    assert "sap_lcp_final_position_diff__vs__materials.default.stiffness.png" in names
    assert "rest_penetration__vs__solver.kind.png" in names
    assert not any(n.startswith("sap_lcp_final_position_diff__vs__solver.kind") for n in names)
    assert not math.isnan(ys[0])


def _stiffness_spec(trends):
    return study_from_dict(tiny_study(
        parameters=[{"path": "materials.default.stiffness", "range": {"start": 1.0e3, "stop": 1.0e6, "count": 7,
                                                                       "scale": "log"}},
                    {"path": "contact_model", "values": ["sap", "lagged"]}],
        trends=trends))


def _rows(spec, pen):
    """Rows of every run with rest_penetration = pen(k, model) and ms_per_step / iterations that vary."""
    from convexsim.studies.spec import parameter_points

    rows = []
    for i, pt in enumerate(parameter_points(spec)):
        k, model = pt["materials.default.stiffness"], pt["contact_model"]
        rows.append({"index": i, "run_id": f"r{i}", **pt, "status": "ok", "rest_penetration": pen(k, model),
                     "max_penetration": 2 * pen(k, model), "newton_iterations_mean": 1 + math.log10(k),
                     "ms_per_step": 0.1 * k ** 0.3, "contacts_per_step": 1.0, "energy_drift": -0.1,
                     "hop_height": 0.0})
    return rows


SOFT_SLOPE = {"metric": "rest_penetration", "against": "materials.default.stiffness", "kind": "slope",
              "range": [1.0e3, 1.0e5], "value": -1.0, "tol": 0.05}
SAP_FLOOR = {"metric": "rest_penetration", "against": "materials.default.stiffness", "kind": "plateau",
             "where": {"contact_model": "sap"}, "range": [3.0e5, 1.0e6], "value": 4.34e-5, "tol": 0.03,
             "max_ratio": 1.05}


def test_a_study_that_meets_its_trend_passes_and_one_that_does_not_fails():
    """m·g/k with a floor for sap passes both trends (slope −1.000, level 4.34e-5); the same data with
    penetration ∝ k^−0.8 fails the slope (−0.800), a floor 10 % high fails the level."""
    from convexsim.studies.report import check_trends, verdict_lines

    spec = _stiffness_spec([SOFT_SLOPE, SAP_FLOOR])
    kstar = 9.81 / 4.34e-5

    def good(k, model):
        return max(9.81 / k, 4.34e-5) if model == "sap" else 9.81 / k

    v = check_trends(spec, _rows(spec, good))
    assert [x.status for x in v] == ["pass", "pass"]
    assert [c.label for c in v[0].series] == ["contact_model=sap", "contact_model=lagged"]   # each series
    assert all(c.measured == "slope -1.000" and c.points == 5 for c in v[0].series)
    assert v[1].series[0].measured.startswith("level 4.34e-5, max/min 1.000")
    text = "\n".join(verdict_lines(v))
    assert "**PASS**: 2 of 2 expected trends hold" in text and "✅ pass" in text

    bad = check_trends(spec, _rows(spec, lambda k, m: 9.81 * k ** -0.8))
    assert bad[0].status == "fail"
    assert bad[0].series[0].measured == "slope -0.800" and bad[0].series[0].ok is False
    assert "**FAIL**" in "\n".join(verdict_lines(bad))
    high = check_trends(spec, _rows(spec, lambda k, m: max(9.81 / k, 4.78e-5)))
    assert [x.status for x in high] == ["pass", "fail"]
    assert high[1].series[0].measured.startswith("level 4.78e-5")       # 10 % above 4.34e-5: beyond 3 %
    # One series failing fails the trend, even when the other passes.
    mixed = check_trends(spec, _rows(spec, lambda k, m: good(k, m) if m == "sap" else 9.81 * k ** -0.8))
    assert mixed[0].status == "fail" and [c.ok for c in mixed[0].series] == [True, False]
    assert kstar > 1e5          # the slope range stays in the soft regime


def test_trends_without_data_in_range_and_threshold_trends():
    from convexsim.studies.report import check_trends

    above = {"metric": "rest_penetration", "against": "materials.default.stiffness", "kind": "above",
             "value": 1e-6, "where": {"contact_model": "sap"}}
    below = {"metric": "rest_penetration", "against": "materials.default.stiffness", "kind": "below",
             "value": 1e-3, "where": {"contact_model": "lagged"}}
    far = dict(SOFT_SLOPE, range=[1.0e7, 1.0e8])
    spec = _stiffness_spec([above, below, far])
    v = check_trends(spec, _rows(spec, lambda k, m: 9.81 / k))
    assert [x.status for x in v] == ["pass", "fail", "no data"]
    assert v[1].series[0].measured == "max 0.00981"                  # 9.81 / 1e3 is not below 1e-3
    with pytest.raises(Exception, match="trends\\[0\\].metric"):
        _stiffness_spec([dict(SOFT_SLOPE, metric="stiction_slip")])
    with pytest.raises(Exception, match="needs value"):
        _stiffness_spec([dict(above, value=None)])


def test_legends_and_tables_show_rounded_values_and_categories_are_bars(tmp_path):
    from matplotlib import pyplot as plt  # noqa: F401  (the Agg backend is used by Figure)

    from convexsim.studies.report import fitted_metrics, plotted_metrics, round_value

    assert round_value(3162.27766017) == "3.16e3" and round_value(1.0e-5) == "1e-5"
    assert round_value(0.0025) == "0.0025" and round_value(100000.0) == "1e5" and round_value("sap") == "sap"
    assert round_value(True) == "True" and round_value(2) == "2"
    spec = study_from_dict(tiny_study(
        parameters=[{"path": "contact_model", "values": ["sap", "lagged"]},
                    {"path": "materials.default.stiffness", "range": {"start": 1.0e3, "stop": 1.0e5, "count": 5,
                                                                      "scale": "log"}}],
        trends=[SOFT_SLOPE]))
    rows = _rows(spec, lambda k, m: 9.81 / k)
    labels = set(group_series(spec, rows, "rest_penetration", "contact_model"))
    assert "stiffness=3.16e3" in labels and not any("3162.27" in lab for lab in labels)
    # Timing is neither plotted nor fitted by default; counts are plotted but not fitted.
    assert "ms_per_step" not in plotted_metrics(spec) and plotted_metrics(spec)[0] == "rest_penetration"
    assert "newton_iterations_mean" in plotted_metrics(spec)
    assert "newton_iterations_mean" not in fitted_metrics(spec) and "contacts_per_step" not in fitted_metrics(spec)
    paths = make_plots(spec, rows, tmp_path)
    assert not any("ms_per_step" in p.name for p in paths)
    # A categorical parameter is drawn as bars: the figure holds rectangles, not a line through categories.
    from matplotlib.figure import Figure
    import convexsim.studies.report as rep

    drawn = {}
    orig = Figure.savefig

    def spy(self, *a, **kw):
        ax = self.axes[0]
        drawn[ax.get_title()] = (sum(len(c) for c in ax.containers),
                                 len([ln for ln in ax.lines if len(ln.get_xdata()) > 1]))
        return orig(self, *a, **kw)

    Figure.savefig = spy
    try:
        rep.make_plots(spec, rows, tmp_path / "again")
    finally:
        Figure.savefig = orig
    bars, lines = drawn["tiny: rest_penetration vs contact_model"]
    assert bars == 2 * 5 and lines == 0                          # 5 stiffness series × 2 categories
    bars, lines = drawn["tiny: rest_penetration vs materials.default.stiffness"]
    assert bars == 0 and lines == 2                              # numeric axis: one line per model
