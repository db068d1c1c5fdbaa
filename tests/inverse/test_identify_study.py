"""The shipped identification study (noise sweep): loads, states its trend, runs reduced end to end from the
CLI, and refuses a malformed file with the field named.

The reduced sweep (shooting, ε = 5e-4 and 5e-2, one seed) checks the machinery and the trend: with one noise
seed the noise vector at 5e-2 is 100× the one at 5e-4, so a least-squares estimator that is linear in the
noise at these levels has error slope exactly 1 (measured 1.000); the 5σ check uses each fit's own σ.
"""

import csv
from pathlib import Path

import pytest

from convexsim.cli import main
from convexsim.identify.study import IdentifyStudyError, load_identify_study

STUDY = Path(__file__).resolve().parents[2] / "scenes" / "studies" / "identification" / "mu_vs_noise.yaml"


def test_shipped_study_loads_and_states_its_trend():
    spec = load_identify_study(STUDY)
    assert spec.expected and "expected" in STUDY.read_text().lower()
    assert spec.eps == sorted(spec.eps) and len(spec.eps) >= 5 and set(spec.methods) == {"shooting", "mpec"}
    assert spec.reduced is not None


def test_reduced_study_runs_from_the_cli(tmp_path, capsys):
    out = tmp_path / "study"
    assert main(["identify", "--study", str(STUDY), "--reduced", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "PASS shooting: log–log slope" in text
    for name in ("results.csv", "report.md", "error_vs_noise.png"):
        assert (out / name).stat().st_size > 0
    assert not list(out.glob(".*"))                          # atomic writes leave no temporary files
    with open(out / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [float(r["eps"]) for r in rows] == [5e-4, 5e-2]
    for r in rows:
        assert abs(float(r["mu_hat"]) - 0.2) <= 5 * float(r["std"])
        assert float(r["std"]) == pytest.approx(5.8e-3 * float(r["eps"]), rel=0.15)
    report = (out / "report.md").read_text()
    assert "**Expected.**" in report and "error_vs_noise.png" in report and "| shooting | 0.0005 |" in report


def test_malformed_study_is_refused_with_the_field(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(STUDY.read_text().replace("seeds: [0, 1, 2, 3, 4]", "seedz: [0, 1]"))
    with pytest.raises(IdentifyStudyError, match="seedz"):
        load_identify_study(bad)
    assert main(["identify", "--study", str(bad), "--out", str(tmp_path / "o")]) == 1
    assert "seedz" in capsys.readouterr().err
    neg = tmp_path / "neg.yaml"
    neg.write_text(STUDY.read_text().replace("eps: [5.0e-5,", "eps: [-5.0e-5,"))
    with pytest.raises(IdentifyStudyError, match="must be > 0"):
        load_identify_study(neg)
    assert main(["identify", "--out", str(tmp_path / "o")]) == 1   # neither TRAJ nor --study
