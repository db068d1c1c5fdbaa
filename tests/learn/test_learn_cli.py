"""`convexsim learn generate` and `convexsim learn DATA --out DIR` end to end on a small file."""

import json

import numpy as np

from convexsim.cli import main


def test_generate_then_learn_writes_the_report(tmp_path, capsys):
    data = tmp_path / "block.npz"
    assert (
        main(
            [
                "learn",
                "generate",
                "block",
                "--out",
                str(data),
                "--episodes",
                "6",
                "--steps",
                "500",
                "--seed",
                "3",
                "--formulation",
                "lcp",
            ]
        )
        == 0
    )
    assert "3000 samples" in capsys.readouterr().out
    out = tmp_path / "rep"
    assert main(["learn", str(data), "--experts", "3", "--out", str(out), "--restarts", "2"]) == 0
    for name in ("report.md", "metrics.json", "gate_partition.png", "rollout.png"):
        assert (out / name).stat().st_size > 0, name
    m = json.loads((out / "metrics.json").read_text())
    em, seed = m["results"]
    assert (em["objective"], seed["objective"]) == ("em", "seed")
    assert em["train_samples"] == 2000 and em["test_samples"] == 1000  # episodes 0-3 train, 4-5 test
    assert abs(em["mu_hat"] - 0.3) < 1.5e-3 and em["rmse_over_std"] < 1e-3  # EM on 2000 samples: exact
    report = (out / "report.md").read_text()
    assert "| mode accuracy" in report and "μ̂ from the slide intercepts" in report
    assert not list(out.glob(".*"))  # atomic writes leave no temporaries
    png = (out / "gate_partition.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_learn_reports_errors(tmp_path, capsys):
    """Bad input exits 2, as in every convexsim command."""
    assert main(["learn", str(tmp_path / "none.npz"), "--out", str(tmp_path / "r")]) == 2
    assert "not found" in capsys.readouterr().err
    np.savez(tmp_path / "x.npz", X=np.zeros((2, 2)))
    assert main(["learn", str(tmp_path / "x.npz"), "--out", str(tmp_path / "r")]) == 2
    assert "missing" in capsys.readouterr().err
    assert main(["learn", "generate", "block", "--out", str(tmp_path / "d.npz"), "--dt", "0"]) == 2
    assert "--dt" in capsys.readouterr().err
