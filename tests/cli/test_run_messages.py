"""The run's messages count: one warning at the first non-converged step and one summary line for all
of them; the summary names the stepper that ran and why (issue 27)."""

from __future__ import annotations

import warnings

from convexsim.cli import EXIT_OK, main


def test_non_converged_steps_warn_once_and_are_summarized_in_one_line(tmp_path, capsys):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["run", "pile_100", "--duration", "0.3", "--set", "solver.max_iterations=3",
                     "--out", str(tmp_path / "p.npz")]) == EXIT_OK
    from convexsim.stepping import ConvergenceWarning

    conv = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(conv) == 1, [str(w.message) for w in conv]
    first = str(conv[0].message)
    assert "did not converge at step " in first and "later non-converged steps are only counted" in first
    out = capsys.readouterr().out
    result = [ln for ln in out.splitlines() if ln.startswith("result")]
    assert len(result) == 1
    line = result[0]
    assert "steps did not converge (first at step " in line and "worst momentum residual" in line
    step = int(first.split("at step ")[1].split()[0])
    assert f"first at step {step}," in line
    assert "path       compiled step" in out


def test_summary_names_the_path_and_the_reason(tmp_path, capsys):
    from convexsim.simulate import path_text, prepare, run_model
    from convexsim.stepping.compiled import supported_cached

    assert main(["run", "pendulum", "--duration", "0.01", "--out", str(tmp_path / "p.npz")]) == EXIT_OK
    out = capsys.readouterr().out
    model, state, _ = prepare("pendulum")
    ok, reason = supported_cached(model)
    path_line = [ln for ln in out.splitlines() if ln.startswith("path ")]
    assert len(path_line) == 1
    if not ok:                      # today: kinematic trees take the Python path
        assert path_line[0] == f"path       Python path: {reason}"
    _, stats = run_model(model, state, duration=0.002, path="reference")
    assert stats.path == "Python path: path='reference' was asked for"
    assert path_text(model, "reference", None) == stats.path
    assert stats.as_dict()["path"] == stats.path


def test_summary_says_the_compile_time_is_inside_the_wall_time():
    from convexsim.cli import _summary
    from convexsim.simulate import RunStats, simulate

    traj = simulate("sphere_drop", duration=0.002)
    from convexsim.simulate import prepare

    model, _, _ = prepare("sphere_drop")
    stats = RunStats(steps=2, wall_time_s=1.83, warmup_s=0.96, iterations=[1, 1], contacts=[0, 0])
    text = _summary(model, traj, stats, tmp := __import__("pathlib").Path("x.npz"))
    assert "0.96 s of it compiling/loading kernels, not in ms/step" in text and "plus" not in text
    assert tmp.name == "x.npz"
