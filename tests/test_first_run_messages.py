"""The first hour's messages: the run summary's compile figures agree with the "compiled in N s" line printed
before the run, a failed run's cause is said once (in the summary) with a suggestion, and a scene beyond the LCP
stepper is refused before its first step with the reason and the size that runs."""

from __future__ import annotations

import re

import pytest

from convexsim.cli import main
from convexsim.cli.run import _kernel_time_text


def test_compile_figures_cannot_contradict_each_other():
    # the demo's case: 99.6 s compiling before the run, 0.36 s of the run's wall time loading the kernels
    text = _kernel_time_text(0.36, 99.6)
    assert text == ("99.6 s compiling kernels before the run, not in this wall time; "
                    "0.36 s of this wall time loading them, not in ms/step")
    assert _kernel_time_text(0.96, None) == "0.96 s of it compiling/loading kernels, not in ms/step"
    assert _kernel_time_text(0.001, None) == ""


def test_a_pile_is_refused_for_the_lcp_stepper_before_any_step(tmp_path, capsys):
    """pile_100 with --solver lcp (and both): exit 2 before anything runs, no file written, the message says
    why, the capacity, the size that runs and what to use instead."""
    for solver in ("lcp", "both"):
        code = main(["run", "pile_100", "--solver", solver, "--out", str(tmp_path / "p.npz")])
        err = capsys.readouterr().err
        assert code == 2 and not list(tmp_path.iterdir())
        assert err.count("too large for the LCP stepper") == 1
        assert re.search(r"about \d+ contacts once it settles .* above its capacity of \d+", err)
        assert "--solver sap" in err and "runs to its end" in err


def test_a_small_scene_is_not_refused():
    from convexsim.lcp.capacity import capacity, resting_contacts
    from convexsim.simulate import prepare

    for name in ("box_stack", "mixed_clutter", "iiwa_push_10", "iiwa_push"):
        model, state, _ = prepare(name, solver="lcp")
        assert resting_contacts(model, state) <= capacity(model.time_step), name


def test_resting_contacts_count_a_pile_and_not_a_drop():
    """Two touching spheres on the ground: 3 contacts (each other, each with the ground); the same two 1 m
    above the ground: 1; far apart in the air: none. A box resting on the ground: 4 (a face)."""
    from convexsim.lcp.capacity import resting_contacts
    from convexsim.simulate import prepare

    def scene(z: float, dx: float) -> str:
        return ("bodies:\n  - {name: ground, fixed: true, geometries: [{shape: halfspace}]}\n"
                f"  - {{name: a, mass: 1, position: [0, 0, {z}], geometries: [{{shape: sphere, radius: 0.1}}]}}\n"
                f"  - {{name: b, mass: 1, position: [{dx}, 0, {z}], geometries: [{{shape: sphere, radius: 0.1}}]}}\n")

    counts = [resting_contacts(*prepare(scene(z, dx), solver="lcp")[:2])
              for z, dx in ((0.1, 0.2), (1.0, 0.2), (1.0, 2.0))]
    assert counts == [3, 1, 0]
    box = ("bodies:\n  - {name: ground, fixed: true, geometries: [{shape: halfspace}]}\n"
           "  - {name: a, mass: 1, position: [0, 0, 0.05], geometries: [{shape: box, size: [0.1, 0.1, 0.1]}]}\n")
    assert resting_contacts(*prepare(box, solver="lcp")[:2]) == 4


@pytest.mark.parametrize("solver", ["lcp"])
def test_a_failed_run_says_its_cause_once_with_a_suggestion(tmp_path, capsys, monkeypatch, solver):
    """A run that stops early (here: an LCP whose pivot limit is set to 1) names the cause once, in the
    summary's result line, and stderr says what to try."""
    code = main(["run", "box_stack", "--solver", solver, "--duration", "0.01", "--set", "solver.lcp_max_pivots=1",
                 "--out", str(tmp_path / "b.npz")])
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert code == 1, text[-3000:]
    cause = re.search(r"result     STOPPED EARLY: (.{20})", captured.out)
    assert cause, captured.out
    assert text.count(cause.group(1)) == 1, text
    assert "Try: --solver sap" in captured.err


def test_scene_descriptions_are_whole_sentences(tmp_path):
    """`convexsim scenes` shows each scene's first sentence whole, also when the header wraps it over lines."""
    from convexsim.scene import list_scenes

    for name, description, _ in list_scenes():
        assert description.endswith((".", "!", "?", ")")), (name, description)
    (tmp_path / "wrapped.yaml").write_text("# A long first sentence that the header\n# wraps over two lines. "
                                           "Then more.\n#\n# Details.\nbodies: []\n", encoding="utf-8")
    (tmp_path / "bare.yaml").write_text("# no full stop\n\nbodies: []\n", encoding="utf-8")
    got = {n: d for n, d, _ in list_scenes(tmp_path)}
    assert got == {"wrapped": "A long first sentence that the header wraps over two lines.", "bare": "no full stop"}
