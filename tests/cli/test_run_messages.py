"""The run's messages count: one warning at the first non-converged step and one summary line for all
of them; the summary names the stepper that ran and why (issue 27)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

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


FORCED = "compiled step switched off by the test"


@pytest.mark.parametrize("eligible", [True, False])
def test_summary_names_the_path_and_the_reason(eligible, tmp_path, capsys, monkeypatch):
    """The run summary's path line: the compiled step for the (eligible) pendulum; the Python path with the
    reason when the dispatcher refuses the compiled step (forced: the pair listed in NO_COMPILED)."""
    from convexsim.simulate import path_text, prepare, run_model
    from convexsim.stepping import dispatch

    if not eligible:
        monkeypatch.setitem(dispatch.NO_COMPILED, ("trees", "sap"), FORCED)
    assert main(["run", "pendulum", "--duration", "0.01", "--out", str(tmp_path / "p.npz")]) == EXIT_OK
    out = capsys.readouterr().out
    model, state, _ = prepare("pendulum")
    assert dispatch.eligibility(model) == ((True, "") if eligible else (False, FORCED))
    path_line = [ln for ln in out.splitlines() if ln.startswith("path ")]
    assert len(path_line) == 1
    expected = "compiled step (compiled run loop)" if eligible else f"Python path: {FORCED}"
    assert path_line[0] == f"path       {expected}"
    _, stats = run_model(model, state, duration=0.002, path="reference")
    assert stats.path == "Python path: path='reference' was asked for"
    assert path_text(model, "reference", None) == stats.path
    assert stats.as_dict()["path"] == stats.path


def test_summary_says_the_compile_time_is_inside_the_wall_time():
    from convexsim.cli.run import _summary
    from convexsim.simulate import RunStats, simulate

    traj = simulate("sphere_drop", duration=0.002)
    from convexsim.simulate import prepare

    model, _, _ = prepare("sphere_drop")
    stats = RunStats(steps=2, wall_time_s=1.83, warmup_s=0.96, iterations=[1, 1], contacts=[0, 0])
    text = _summary(model, traj, stats, tmp := __import__("pathlib").Path("x.npz"))
    assert "0.96 s of it compiling/loading kernels, not in ms/step" in text and "plus" not in text
    assert tmp.name == "x.npz"


@pytest.mark.parametrize("name", ["rest_penetration_vs_stiffness", "rest_penetration_vs_stiffness.yaml",
                                  "studies/sliding_hop", "scenes/studies/sliding_hop",
                                  "identification/mu_vs_noise"])
def test_a_study_is_named_like_a_scene(name, repo):
    from convexsim.studies.cli import resolve_study_path

    path = resolve_study_path(name)
    assert path.is_file() and path.resolve().is_relative_to((repo / "scenes" / "studies").resolve())
    assert path.stem == name.rsplit("/", 1)[-1].removesuffix(".yaml")


def test_a_study_name_that_does_not_exist_lists_the_studies():
    from convexsim.studies.cli import resolve_study_path

    with pytest.raises(FileNotFoundError, match="study files in .*sliding_hop.yaml"):
        resolve_study_path("sliding_hopp")


def test_the_shipped_urdf_arm_stands_on_a_post_and_swings_clear_of_it(repo):
    """issue 27: the imported two_link_arm hung 1.25 m above its base with nothing under it."""
    from convexsim.scene import load_scene
    from convexsim.simulate import simulate

    arm = repo / "scenes" / "robots" / "two_link_arm.urdf"
    base = load_scene(str(arm)).bodies[0]
    assert base.fixed
    top = max(g.position[2] + g.size[2] / 2 for g in base.geometries)
    assert top >= 1.5 - 0.05               # the post reaches the shoulder (z = 1.5)
    traj = simulate(str(arm), duration=0.3, overrides=["joints.shoulder.initial_position=1.0"])
    assert not traj.failure and int(traj.contact_offsets[-1]) == 0     # swings beside the post
    assert np.ptp(traj.position[:, 2, 0]) > 0.1


def test_every_bench_scene_column_has_a_legend():
    from convexsim.tools import bench

    header = bench.scene_table_header()
    titles = [t for t in bench.SCENE_TABLE_LEGEND]
    # the header is exactly these titles, right- or left-aligned in fixed widths
    assert "".join(header.split()) == "".join("".join(t.split()) for t in titles)
    legend = bench.scene_table_legend()
    for t in titles:
        assert f"  {t} " in legend
    assert len(legend.splitlines()) == len(titles)
