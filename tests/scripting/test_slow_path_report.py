"""Which path a run took is never hidden: ``convexsim info`` shows the trajectory's path line, and the CLI
prints a slow-path warning as one plain ``warning:`` line."""

from __future__ import annotations

import warnings

from convexsim.cli import _show_warning, main
from convexsim.io import save_trajectory
from convexsim.simulate import SlowPathWarning, prepare, run_model, slow_path_text

SCENE = """
time_step: 1.0e-3
bodies:
  - {name: bob, mass: 1.0, geometries: [{shape: sphere, radius: 0.05}]}
joints:
  - {name: hinge, type: revolute, child: bob, axis: [0, 1, 0], position: [0, 0, 1.5], child_offset: [0, 0, -1]}
"""


def test_info_shows_the_path_of_the_run(tmp_path, capsys, monkeypatch):
    """A controlled run whose compiled steps are handed over to the reference from its second step on (as a
    step the compiled step cannot take is): ``convexsim info`` prints the run's path line, which says so."""
    from convexsim.stepping import compiled
    from convexsim.stepping.types import Handoff

    real = compiled.compiled_step
    monkeypatch.setattr(compiled, "compiled_step", lambda model, state, ctx=None, **kw: (
        Handoff("a step handed over") if state.step >= 1 else real(model, state, ctx, **kw)))
    model, state, _ = prepare(SCENE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SlowPathWarning)
        traj, stats = run_model(model, state, duration=0.003,
                                controller=lambda m, s: {"wrenches": {"bob": [0, 0.2, 0, 0, 0, 0]}})
    out = tmp_path / "run.npz"
    save_trajectory(out, traj)
    capsys.readouterr()
    assert main(["info", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"path        {stats.path}" in lines
    assert stats.path.startswith("compiled step, one call per step")
    assert "from step 1 some steps on the Python path: a step handed over" in stats.path


def test_the_cli_prints_a_slow_path_warning_as_one_line(capsys):
    _show_warning(SlowPathWarning(slow_path_text("why")), SlowPathWarning, "x.py", 1)
    err = capsys.readouterr().err
    assert err == f"warning: {slow_path_text('why')}\n"
    assert "why" in err and "ms" in err
