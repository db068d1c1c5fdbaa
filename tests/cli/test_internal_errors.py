"""A refusal of the input (exit 2, naming the file or option) is told apart from a failure of convexsim's own
code (exit 70, a short report: what was raised, where as module:function:line, in which command). A
``ValueError`` raised inside a step is a bug, not a refusal, even though refusals are ``ValueError`` too.
"""

from __future__ import annotations

import pydantic
import pytest

import convexsim.stepping
from convexsim.cli import EXIT_INTERNAL, EXIT_USAGE, main
from convexsim.cli.common import is_refusal
from convexsim.errors import InputError
from convexsim.io import TrajectoryFormatError
from convexsim.scene import SceneError
from convexsim.stepping import dispatch


def _broken_step(*args, **kwargs):
    """A step whose numpy work fails the way a shape bug does."""
    raise ValueError("operands could not be broadcast together with shapes (3,) (4,)")


@pytest.fixture
def step_raises(monkeypatch):
    """Every step of a run goes through ``convexsim.stepping.step`` (the per-step path, forced) and raises."""
    import convexsim.tools.warmup

    monkeypatch.setattr(dispatch, "run_plan", lambda *a, **k: (False, "per-step path (test)"))
    monkeypatch.setattr(convexsim.stepping, "step", _broken_step)
    monkeypatch.setattr(convexsim.tools.warmup, "ensure_warm", lambda *a, **k: None)   # nothing to compile


def test_a_value_error_inside_a_step_is_an_internal_error(step_raises, tmp_path, capsys):
    """Exit 70 (not 2), and the report names the exception, the raising function as module:function:line,
    and the command; no traceback unless asked for."""
    status = main(["run", "sphere_drop", "--duration", "0.002", "--quiet", "--out", str(tmp_path / "t.npz")])
    err = capsys.readouterr().err
    assert status == EXIT_INTERNAL, err
    assert "convexsim run: internal error" in err and "ValueError: operands could not be broadcast" in err, err
    line = _broken_step.__code__.co_firstlineno + 2
    assert f"where: {__name__}:_broken_step:{line}" in err, err
    assert "Traceback" not in err and "error: operands" not in err


def test_the_full_traceback_on_request(step_raises, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CONVEXSIM_TRACEBACK", "1")
    assert main(["run", "sphere_drop", "--duration", "0.002", "--quiet", "--out", str(tmp_path / "t.npz")]) \
        == EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "_broken_step" in err


def test_an_input_error_inside_a_run_is_still_a_refusal(monkeypatch, tmp_path, capsys):
    """The same place raising the project's InputError (a refused value) exits 2 with the one-line message."""
    def refuse(*a, **k):
        raise InputError("--set bodies.ball.mass: must be > 0 (got -1)")

    monkeypatch.setattr(dispatch, "run_plan", refuse)
    monkeypatch.setattr("convexsim.tools.warmup.ensure_warm", lambda *a, **k: None)
    assert main(["run", "sphere_drop", "--duration", "0.002", "--quiet", "--out", str(tmp_path / "t.npz")]) \
        == EXIT_USAGE
    assert capsys.readouterr().err.strip() == "convexsim run: error: --set bodies.ball.mass: must be > 0 (got -1)"


def test_bad_options_and_files_are_refusals_naming_them(tmp_path, capsys):
    assert main(["run", "sphere_drop", "--duration", "-1"]) == EXIT_USAGE
    assert "--duration" in capsys.readouterr().err
    assert main(["info", str(tmp_path / "missing.npz")]) == EXIT_USAGE
    assert "missing.npz" in capsys.readouterr().err
    assert main(["compare", "a.npz", "b.npz", "--tol", "nan"]) == EXIT_USAGE      # the first file is missing
    assert "a.npz" in capsys.readouterr().err


def _validation_error():
    class Field(pydantic.BaseModel):
        x: float

    try:
        Field(x="abc")
    except pydantic.ValidationError as exc:
        return exc


@pytest.mark.parametrize("exc, refusal", [
    (InputError("--x: bad"), True),
    (SceneError(["s.yaml: bodies: missing"], "s.yaml"), True),
    (TrajectoryFormatError("t.npz: not a trajectory"), True),
    (FileNotFoundError("scene not found: x.yaml"), True),
    (PermissionError(13, "Permission denied", "out.npz"), True),      # an OSError naming its file
    (_validation_error(), True),
    (ValueError("operands could not be broadcast together"), False),  # numpy inside our code: a bug
    (OSError("socket closed"), False),                                 # no file named
    (KeyError("x"), False),
    (ZeroDivisionError("division by zero"), False),
])
def test_what_counts_as_a_refusal(exc, refusal):
    assert is_refusal(exc) is refusal
