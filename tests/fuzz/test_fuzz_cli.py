"""Fuzzing the command line (issue 29): argument lists drawn from every command's options with values of
every kind (valid and missing files, files of the wrong kind, non-finite, negative, huge and non-numeric
numbers, unknown options and choices), in this process through ``convexsim.cli.main``.

Property: status 0, 1 or 2 and no traceback (no exception but SystemExit escapes ``main``); status 2 with a
message. Commands that would run for long or serve a viewer (bench, warmup, study, view without --html,
run --view) are not drawn; `run` always ends with a short --duration and a time step of at least 1e-4 s.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from fuzz_kit import check_cli
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from convexsim.io import save_trajectory

SUPPRESS = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """Input files of every kind the arguments point at."""
    from convexsim.learn.data import make_block_data, save_data
    from convexsim.simulate import simulate

    d = tmp_path_factory.mktemp("cli")
    out = {"traj": d / "good.npz", "scene": d / "ball.yaml", "text": d / "notes.txt", "bad_yaml": d / "bad.yaml",
           "urdf": Path(__file__).resolve().parents[2] / "scenes" / "robots" / "two_link_arm.urdf",
           "data": d / "data.npz", "missing": d / "missing.npz", "dir": d, "empty": d / "empty.npz",
           "outdir": d / "out"}
    save_trajectory(out["traj"], simulate("sphere_drop", duration=0.005))
    out["scene"].write_text("bodies:\n  - {name: ball, mass: 1.0, position: [0, 0, 1], "
                            "geometries: [{shape: sphere, radius: 0.1}]}\n", encoding="utf-8")
    out["text"].write_text("hello\n", encoding="utf-8")
    out["bad_yaml"].write_text("bodies: [\n", encoding="utf-8")
    out["empty"].write_bytes(b"")
    save_data(out["data"], make_block_data(episodes=2, steps=20, seed=0))
    return out


NUMBERS = ["0", "-1", "1", "0.5", "nan", "inf", "-inf", "1e300", "-1e300", "1e-300", "1e16", "abc", "", "0x10",
           "2", "3", "1e-3", "0.0005"]
WORDS = ["sap", "lcp", "both", "similar", "lagged", "em", "seed", "mpec", "mu", "mu,k", "k,tau_d", "d", "x",
         "bodies.ball.mass=2", "bodies.ball.mass=nan", "solver.kind=lcp", "nope=1", "=", "time_step=1e300",
         "materials.default.friction=-1", "bodies[0].geometries[0].radius=1e-300", "gravity=[0,0]", "a.b.c",
         "auto", "overlay", "offset", "block", "particle", "direct", "mu=0.3", "k=1e5,tau_d=0.1", "k=nan"]
FILE_KINDS = ["traj", "scene", "text", "bad_yaml", "urdf", "data", "missing", "dir", "empty"]

# command -> (positional slots as lists of value kinds, {option: value kind or None for a flag})
COMMANDS = {
    "run": (["file"], {"--time-step": "dt", "--contact-model": "word", "--solver": "word", "--set": "word",
                       "--record-every": "number", "--slip-curvature": "number", "--strict": None,
                       "--no-unit-warnings": None, "--html": "out", "--layout": "word", "--joint-frames": None,
                       "--realtime": None, "--no-wait": None}),
    "validate": (["file", "file"], {"--no-unit-warnings": None}),
    "scenes": ([], {}),
    "info": (["file"], {}),
    "view": (["file", "file"], {"--html": "out", "--layout": "word", "--labels": "word", "--joint-frames": None}),
    "compare": (["file", "file"], {"--tol": "number", "--quantity": "word", "--all-bodies": None}),
    "identify": (["file"], {"--params": "word", "--method": "word", "--mu0": "number", "--initial": "word",
                            "--out": "out"}),
    "learn": (["file"], {"--experts": "number", "--objective": "word", "--seed": "number", "--restarts": "number",
                         "--test-fraction": "number", "--out": "out"}),
    "learn generate": (["word"], {"--out": "out", "--episodes": "number", "--steps": "number", "--dt": "number",
                                  "--mu": "number", "--hold": "number", "--formulation": "word"}),
    "import-urdf": (["file"], {"--out": "out", "--floating-base": None}),
    "examples": (["word"], {}),
    "seeds": ([], {}),
    "": ([], {"--version": None, "--help": None}),
}


@st.composite
def argument_lists(draw, files: dict[str, Path], tmp: Path):
    command = draw(st.sampled_from(sorted(COMMANDS)))
    positional, options = COMMANDS[command]

    def value(kind):
        if kind == "file":
            return str(files[draw(st.sampled_from(FILE_KINDS))])
        if kind == "number":
            return draw(st.sampled_from(NUMBERS))
        if kind == "dt":
            return draw(st.sampled_from(["1e-3", "5e-4", "nan", "-1", "0", "inf", "x", "1e300"]))
        if kind == "out":
            return str(tmp / draw(st.sampled_from(["o.html", "o.npz", "o.yaml", "outdir", "missing/dir/o.npz"])))
        return draw(st.sampled_from(WORDS))

    argv = command.split()
    args = [value("file" if k == "file" else "word") for k in positional[:draw(st.integers(0, len(positional)))]]
    chosen = draw(st.lists(st.sampled_from(sorted(options) + ["--bogus", "-x"]), max_size=4)) if options else []
    for opt in chosen:
        kind = options.get(opt, "word")
        args += [opt] if kind is None else [opt, value(kind)]
    argv += draw(st.permutations(args)) if draw(st.booleans()) else args
    if command == "run":
        argv += ["--duration", "0.002", "--quiet", "--out", str(tmp / "run.npz")]
    if command in ("identify", "learn") and "--out" not in argv:
        argv += ["--out", str(tmp / "report")]
    if command == "learn" and files["data"] and "--restarts" not in argv:
        argv += ["--restarts", "1"]
    if command == "learn generate" and "--episodes" not in argv:
        argv += ["--episodes", "2", "--steps", "10"]
    if command == "view" and "--html" not in argv:
        argv += ["--html", str(tmp / "v.html")]          # never serve (it waits for Ctrl-C)
    if draw(st.integers(0, 9)) == 0:
        argv.insert(draw(st.integers(0, len(argv))), draw(st.sampled_from(["--help", "--", "-", "--quiet=1"])))
    return argv


def _expensive(argv: list[str]) -> bool:
    """Identify fits and learn fits on valid inputs take seconds: drawn, but skipped in the regular tier."""
    return bool(argv) and argv[0] in ("identify", "learn") and "generate" not in argv


def check_argv(argv: list[str]) -> None:
    status, _, err = check_cli(argv)
    event(f"status {status}")


def _argv_case(files, tmp_path, data):
    return data.draw(argument_lists(files, tmp_path))


@settings(max_examples=150, deadline=None, suppress_health_check=SUPPRESS)
@given(data=st.data())
def test_random_argument_lists(files, tmp_path, data):
    argv = _argv_case(files, tmp_path, data)
    if _expensive(argv) and any(str(files[k]) in argv for k in ("traj", "data")):
        return
    check_argv(argv)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=SUPPRESS)
@given(data=st.data())
def test_random_argument_lists_many(files, tmp_path, data):
    argv = _argv_case(files, tmp_path, data)
    if _expensive(argv) and any(str(files[k]) in argv for k in ("traj", "data")) and data.draw(st.integers(0, 9)):
        return                      # one in ten of the expensive ones runs
    check_argv(argv)


@pytest.mark.parametrize("argv", [
    [], ["--bogus"], ["run"], ["run", "--duration", "nan", "box_slide"], ["run", "box_slide", "--duration", "-1"],
    ["run", "box_slide", "--time-step", "1e-300", "--duration", "0.001"],
    ["run", "box_slide", "--duration", "1e300"], ["run", "box_slide", "--record-every", "0", "--duration", "0.002"],
    ["run", "box_slide", "--set", "bodies.box.mass=1e300", "--duration", "0.002"],
    ["run", "box_slide", "--set", "bodies.box.geometries.0.size=[1e-300, 1, 1]", "--duration", "0.002"],
    ["run", "box_slide", "--set", "solver.friction_directions=1000000000", "--solver", "lcp", "--duration", "0.002"],
    ["run", "box_slide", "--set", "solver.max_iterations=100000000000000000000", "--duration", "0.002"],
    ["run", "box_slide", "--slip-curvature", "nan", "--duration", "0.002"],
    ["validate"], ["info"], ["compare", "x"], ["learn"], ["learn", "generate"], ["examples"], ["import-urdf"],
    ["identify", "--out", "x"], ["learn", "generate", "block", "--out", "x.npz", "--dt", "nan"],
    ["learn", "generate", "block", "--out", "x.npz", "--episodes", "0"],
    ["learn", "generate", "particle", "--out", "x.npz", "--episodes", "1", "--steps", "1", "--hold", "0"],
])
def test_fixed_argument_lists(argv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, _, err = check_cli(argv)
    if argv and argv[0] == "run" and "--duration" in argv and argv[argv.index("--duration") + 1] in ("nan", "-1", "1e300"):
        assert status == 2, err


def test_learn_data_files_broken(files, tmp_path):
    """`convexsim learn DATA`: a learning data file with arrays of other dtypes or shapes is refused (2)."""
    with np.load(files["data"]) as data:
        good = {k: data[k] for k in data.files}
    cases = {"X_text": {"X": good["X"].astype("<U3")}, "X_1d": {"X": good["X"].ravel()},
             "Y_nan": {"Y": np.full_like(good["Y"], math.nan)}, "modes_float": {"modes": good["modes"] + 0.5},
             "schema_text": {"schema": np.asarray("x")}, "schema_array": {"schema": np.arange(3)},
             "gate_2d": {"gate_columns": np.zeros((2, 2), int)}, "names_2d": {"mode_names": np.zeros((2, 2))},
             "episode_short": {"episode": good["episode"][:-1]}, "dt_text": {"dt": np.asarray("fast")}}
    for name, change in cases.items():
        path = tmp_path / f"{name}.npz"
        np.savez(path, **{**good, **change})
        status, _, err = check_cli(["learn", path, "--out", tmp_path / "r", "--restarts", "1"])
        assert status == 2 and str(path) in err, (name, err)
