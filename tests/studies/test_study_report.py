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
