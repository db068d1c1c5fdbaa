"""The command surface: --help everywhere, options in any order, the examples/seeds rename, compare's
tolerance and exit codes, run summaries that cannot contradict themselves, warm-up reported apart."""

from __future__ import annotations

import contextlib
import io
import math

import numpy as np
import pytest

from convexsim.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, build_parser, main
from convexsim.io import load_trajectory, save_trajectory


def _verbs() -> list[str]:
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    return sorted(sub.choices)


def test_every_verb_is_a_subcommand():
    assert set(_verbs()) == {"run", "validate", "scenes", "info", "view", "compare", "bench", "study",
                             "examples", "warmup", "seeds", "learn", "identify", "import-urdf", "import-mjcf"}


def test_import_urdf_writes_a_scene_and_rejects_bad_files(tmp_path, capsys, repo):
    """`convexsim import-urdf`: a valid scene from the shipped example; a missing mesh file is one error, exit 2."""
    out = tmp_path / "arm.yaml"
    assert main(["import-urdf", str(repo / "scenes" / "robots" / "two_link_arm.urdf"), "--out", str(out)]) == EXIT_OK
    assert main(["validate", str(out)]) == EXIT_OK
    bad = tmp_path / "mesh.urdf"
    bad.write_text('<robot name="r"><link name="a"><collision><geometry><mesh filename="a.stl"/></geometry>'
                   '</collision></link></robot>', encoding="utf-8")
    capsys.readouterr()
    assert main(["import-urdf", str(bad)]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "mesh file 'a.stl' not found" in err[0]
    assert main(["import-urdf", str(out)]) == EXIT_USAGE      # not a .urdf


@pytest.mark.parametrize("argv", [[v, "--help"] for v in _verbs()]
                         + [["examples", "lcp", "--help"], ["--help"]])
def test_help_works_on_every_subcommand(argv, capsys):
    assert main(argv) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith("usage: convexsim"), out
    assert " ".join(argv[:-1]) in out.splitlines()[0]


def test_options_in_any_order():
    parse = build_parser().parse_args
    a = parse(["study", "--jobs", "2", "spec.yaml", "--quiet"])
    b = parse(["study", "spec.yaml", "--quiet", "--jobs", "2"])
    assert (a.spec, a.jobs, a.quiet) == (b.spec, b.jobs, b.quiet) == ("spec.yaml", 2, True)
    r = parse(["run", "--duration", "0.01", "sphere_drop", "--solver", "lcp"])
    assert (r.scene, r.duration, r.solver) == ("sphere_drop", 0.01, "lcp")
    c = parse(["compare", "--tol", "1e-3", "a.npz", "b.npz"])
    assert (c.a, c.b, c.tol) == ("a.npz", "b.npz", 1e-3)


def test_usage_errors_exit_2(capsys):
    assert main(["study"]) == EXIT_USAGE                    # missing spec
    assert main(["run", "sphere_drop", "--bogus"]) == EXIT_USAGE
    assert main(["examples"]) == EXIT_USAGE                 # which example?
    assert main([]) == EXIT_USAGE
    assert main(["study", "--jobs", "0", "x.yaml"]) == EXIT_USAGE
    capsys.readouterr()


def test_seeds_is_a_deprecated_alias_of_examples_lcp(capsys):
    assert main(["examples", "lcp"]) == EXIT_OK
    new = capsys.readouterr()
    assert main(["seeds"]) == EXIT_OK
    old = capsys.readouterr()
    assert old.out == new.out and "Berard" in new.out
    notice = [ln for ln in old.err.splitlines() if ln.strip()]
    assert len(notice) == 1 and "deprecated" in notice[0] and "convexsim examples lcp" in notice[0]
    assert new.err == ""


# ------------------------------------------------------------------------------------------ compare
@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(a, b, b_shifted, where): two identical 50-step sphere_drop files and a copy of b whose ball is
    moved by 2 cm at frame 30 only (t = 0.03 s)."""
    from convexsim.simulate import simulate

    d = tmp_path_factory.mktemp("cmp")
    traj = simulate("sphere_drop", duration=0.05)
    a, b, c = d / "a.npz", d / "b.npz", d / "c.npz"
    save_trajectory(a, traj)
    save_trajectory(b, traj)
    ball = traj.body_index("ball")
    traj.position[30, ball, 1] += 0.02
    save_trajectory(c, traj)
    return a, b, c


def test_compare_tol_exit_codes(pair, capsys):
    a, b, c = pair
    assert main(["compare", str(a), str(b), "--tol", "0"]) == EXIT_OK          # identical: within any tol.
    assert "PASS" in capsys.readouterr().out
    assert main(["compare", str(a), str(c), "--tol", "0.021"]) == EXIT_OK       # 2 cm <= 2.1 cm
    capsys.readouterr()
    assert main(["compare", str(a), str(c), "--tol", "0.019"]) == EXIT_FAILURE  # 2 cm > 1.9 cm
    verdict = capsys.readouterr().out.splitlines()[-1]
    expected = "FAIL: largest position difference 2.000e-02 m (body 'ball', t = 0.03 s)"
    assert verdict.startswith(expected), verdict
    assert main(["compare", str(a), str(c), "--tol", "0.019", "--quantity", "velocity"]) == EXIT_OK
    capsys.readouterr()
    assert main(["compare", str(a), str(c)]) == EXIT_OK                          # no --tol: report only
    capsys.readouterr()
    assert main(["compare", str(a), str(c), "--tol", "-1"]) == EXIT_USAGE
    assert main(["compare", str(a), str(a.with_name("missing.npz")), "--tol", "1"]) == EXIT_USAGE


def test_compare_shows_readable_labels_and_when_the_largest_difference_happened(pair, capsys):
    a, _, c = pair
    assert main(["compare", str(a), str(c)]) == EXIT_OK
    out = capsys.readouterr().out
    assert f"{a}: SAP solver, 'sap' contact model" in out and f"{c}: SAP solver, 'sap' contact model" in out
    assert "sap/sap vs" not in out
    row = next(ln for ln in out.splitlines() if ln.strip().startswith("ball"))
    fields = row.split()
    assert fields[:3] == ["ball", "position", "[m]"] and float(fields[3]) == pytest.approx(0.02)
    assert float(fields[4]) == pytest.approx(0.03)                               # at t [s]


def test_compare_different_scenes_is_a_usage_error(pair, tmp_path, capsys):
    from convexsim.simulate import simulate

    other = tmp_path / "stack.npz"
    save_trajectory(other, simulate("box_stack", duration=0.002))
    assert main(["compare", str(pair[0]), str(other)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "different bodies" in err and str(other) in err


# ------------------------------------------------------------------------------------------ summary
class _Traj:
    def __init__(self, failure=""):
        self.failure = failure


def test_result_line_never_contradicts_itself():
    from convexsim.cli.run import _result_line

    ok = _result_line({"unconverged_steps": 0}, _Traj(), True)
    assert ok == "result     completed, every step converged"
    some = _result_line({"unconverged_steps": 3}, _Traj(), True)
    assert "completed; 3 steps did not converge" in some
    stopped = _result_line({"unconverged_steps": 0}, _Traj("step 12 (t = 0.012 s): NaN in v"), True)
    assert stopped == "result     STOPPED EARLY: step 12 (t = 0.012 s): NaN in v"
    assert "0 " not in stopped and "completed" not in stopped


def test_lcp_summary_counts_all_the_work_and_the_warm_steps():
    from convexsim.cli.run import _effort_line

    d = {"steps": 100, "mean_iterations": 2.5, "max_iterations": 12, "warm_started_steps": 98}
    line = _effort_line(d, sap=False)
    assert "mean 2.50, max 12 per step (Lemke pivots + warm-start factorizations)" in line
    assert "98 of 100 steps solved by the warm start" in line
    assert "warm start" not in _effort_line({**d, "warm_started_steps": 0}, sap=False).split(";")[-1][-30:]


def test_run_summary_reports_warm_up_apart(tmp_path, capsys):
    """ms/step = (wall − warm-up) / steps: RunStats arithmetic, and the summary line when warm-up > 0."""
    from convexsim.simulate import RunStats

    stats = RunStats(steps=10, wall_time_s=2.0, warmup_s=1.5)
    assert stats.as_dict()["ms_per_step"] == pytest.approx(50.0)
    assert main(["run", "sphere_drop", "--duration", "0.01", "--out", str(tmp_path / "s.npz")]) == EXIT_OK
    out = capsys.readouterr().out
    assert "result     completed, every step converged" in out
    meta = load_trajectory(tmp_path / "s.npz").metadata
    expected = 1e3 * (meta["wall_time_s"] - meta["warmup_s"]) / 10
    assert math.isclose(meta["ms_per_step"], expected, rel_tol=1e-9)


def test_kernel_clock_times_compilation_and_announces_once(monkeypatch, capsys):
    """A fresh (uncached) numba function compiled inside the clock adds to ``seconds`` and prints the
    first-run notice once per process; compiled code called again adds nothing."""
    import numba

    import convexsim._kernel_clock as kernels

    monkeypatch.setattr(kernels, "_compile_notice_shown", False)

    @numba.njit(cache=False)
    def f(x):
        return x * 2.0 + 1.0

    @numba.njit(cache=False)
    def g(x):
        return x - 1.0

    with kernels.KernelClock(notice=True) as clock:
        assert f(1.0) == 3.0
    first = clock.seconds
    assert first > 0.0
    with kernels.KernelClock(notice=True) as again:
        assert f(2.0) == 5.0 and g(1.0) == 0.0
    assert again.seconds > 0.0                 # g compiled
    with kernels.KernelClock(notice=True) as warm:
        f(3.0), g(3.0)
    assert warm.seconds == 0.0
    err = capsys.readouterr().err
    assert err.count("compiling kernels (first run") == 1, err


def test_no_wait_does_not_print_the_url_just_before_stopping(tmp_path, monkeypatch, capsys):
    """With --no-wait the playback is still published, but no 'open this URL' line follows the run."""
    import convexsim.cli.run as cli_run

    published = []

    class FakeViewer:
        out = None

        def live(self, model):
            print("Meshcat viewer: http://127.0.0.1:7000/static/ (live while simulating)")
            return None

        def finish(self, trajectories, wait=True, layout="auto"):
            published.append(len(trajectories))
            print("Meshcat viewer: http://127.0.0.1:7000/static/ (playback)", file=self.out or None)

    monkeypatch.setattr(cli_run, "_run_viewer", lambda args: contextlib.nullcontext(FakeViewer()))
    assert main(["run", "sphere_drop", "--duration", "0.002", "--view", "--no-wait",
                 "--out", str(tmp_path / "v.npz")]) == EXIT_OK
    out = capsys.readouterr().out
    assert published == [1]
    assert out.count("http://") == 1 and out.index("http://") < out.index("result")
    assert out.rstrip().endswith("viewer stopped (--no-wait)")


def test_status_enums_print_their_names():
    from convexsim.lcp.lemke import LemkeStatus, lemke
    from convexsim.sap.types import SapStatus

    assert str(SapStatus.CONVERGED) == "CONVERGED" and f"{SapStatus(1)}" == "MAX_ITERATIONS"
    assert SapStatus.CONVERGED == 0                          # still the kernels' integer code
    r = lemke(np.array([[2.0, 1.0], [1.0, 2.0]]), np.array([-1.0, -1.0]))
    buf = io.StringIO()
    print(r.status, file=buf)
    assert buf.getvalue() == "SOLVED\n" and r.status == LemkeStatus.SOLVED
