"""Fuzzing the command line (issue 29): argument lists drawn from every command's options with values of
every kind (valid and missing files, files of the wrong kind, non-finite, negative, huge and non-numeric
numbers, unknown options and choices), in this process through ``convexsim.cli.main``.

Property: status 0, 1 or 2 (3 for identify's model mismatch), never the internal-error status 70, and no
traceback (no exception but SystemExit escapes ``main``); status 2 with a message. Half the drawn calls are
well formed (files of the command's kind, accepted option values), so that runs are exercised, not only
refusals; the summary reports the split (conftest.py). Commands that would run for long or serve a viewer
(bench, warmup, study, view without --html, run --view) are not drawn; `run` always ends with a short
--duration and a time step of at least 1e-4 s.
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
    save_trajectory(out["traj"], simulate("box_slide", duration=0.02))     # contacts: identify can fit μ
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


# A well-formed call half the time (files of the command's kind, option values it accepts, no refused flag
# combination), so that runs and not only refusals are exercised; the test summary reports the split.
VALID_FILES = {"run": ["scene", "urdf"], "validate": ["scene", "urdf"], "info": ["traj"], "view": ["traj"],
               "compare": ["traj"], "identify": ["traj"], "learn": ["data"], "import-urdf": ["urdf"]}
VALID_VALUES = {
    "--time-step": ["1e-3", "5e-4"], "--contact-model": ["sap", "lagged", "similar"],
    "--solver": ["sap", "lcp", "both"],
    "--set": ["bodies.ball.mass=2", "gravity=[0,0,-1]", "bodies.ball.position=[0,0,0.05]"],
    "--record-every": ["1", "2", "3"], "--slip-curvature": ["0", "0.5", "1"], "--layout": ["auto", "overlay", "offset"],
    "--tol": ["0", "1e-3", "1"], "--quantity": ["position", "velocity", "contact_force"],
    "--params": ["mu"], "--method": ["mpec", "sap"], "--mu0": ["0.3"], "--initial": ["mu=0.4"],
    "--experts": ["1", "2"], "--objective": ["em", "seed"], "--seed": ["0", "3"], "--restarts": ["1"],
    "--test-fraction": ["0.3", "0.5"], "--episodes": ["2"], "--steps": ["10"], "--dt": ["0.01"], "--mu": ["0.3"],
    "--hold": ["2"], "--formulation": ["direct"],
}
VALID_WORDS = {"learn generate": ["block", "particle"], "examples": ["lcp"]}
REFUSED_ALONE = {"--realtime", "--no-wait", "--joint-frames", "--help", "--version", "--labels", "--bogus"}
"""Flags refused without --view/--html (or one label per trajectory), or that only print help: left out of
the well-formed calls."""


@st.composite
def argument_lists(draw, files: dict[str, Path], tmp: Path):
    command = draw(st.sampled_from(sorted(COMMANDS)))
    positional, options = COMMANDS[command]
    valid = draw(st.booleans())

    def value(kind, opt=None):
        if valid and kind == "file" and command in VALID_FILES:
            return str(files[draw(st.sampled_from(VALID_FILES[command]))])
        if valid and opt in VALID_VALUES:
            return draw(st.sampled_from(VALID_VALUES[opt]))
        if valid and kind == "word" and command in VALID_WORDS:
            return draw(st.sampled_from(VALID_WORDS[command]))
        if valid and kind == "out":
            return str(tmp / draw(st.sampled_from(["o.html", "o.npz", "o.yaml", "outdir"])))
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
    n_pos = len(positional) if valid else draw(st.integers(0, len(positional)))
    args = [value("file" if k == "file" else "word") for k in positional[:n_pos]]
    pool = sorted(set(options) - REFUSED_ALONE) if valid else sorted(options) + ["--bogus", "-x"]
    chosen = draw(st.lists(st.sampled_from(pool), max_size=4, unique=valid)) if pool else []
    for opt in chosen:
        kind = options.get(opt, "word")
        args += [opt] if kind is None else [opt, value(kind, opt)]
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
    if not valid and draw(st.integers(0, 9)) == 0:
        argv.insert(draw(st.integers(0, len(argv))), draw(st.sampled_from(["--help", "--", "-", "--quiet=1"])))
    return argv


def _expensive(argv: list[str]) -> bool:
    """Identify fits and learn fits on valid inputs take seconds (identify 2-8 s, learn 1 s): one in three
    of them runs in the regular tier, one in ten in the slow one (where ten times more are drawn)."""
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
    if _expensive(argv) and any(str(files[k]) in argv for k in ("traj", "data")) and data.draw(st.integers(0, 2)):
        return
    check_argv(argv)


@pytest.mark.long
@settings(max_examples=400, deadline=None, suppress_health_check=SUPPRESS)
@given(data=st.data())
def test_random_argument_lists_many(files, tmp_path, data):
    argv = _argv_case(files, tmp_path, data)
    if _expensive(argv) and any(str(files[k]) in argv for k in ("traj", "data")) and data.draw(st.integers(0, 9)):
        return                      # one in ten of the expensive ones runs
    check_argv(argv)


@pytest.mark.parametrize("argv, status", [
    ([], 2), (["--bogus"], 2), (["run"], 2), (["run", "--duration", "nan", "box_slide"], 2),
    (["run", "box_slide", "--duration", "-1"], 2),
    (["run", "box_slide", "--time-step", "1e-300", "--duration", "0.001"], 2),
    (["run", "box_slide", "--duration", "1e300"], 2),
    (["run", "box_slide", "--record-every", "0", "--duration", "0.002"], 2),
    (["run", "box_slide", "--set", "bodies.box.mass=1e300", "--duration", "0.002"], 2),
    (["run", "box_slide", "--set", "bodies.box.geometries.0.size=[1e-300, 1, 1]", "--duration", "0.002"], 2),
    (["run", "box_slide", "--set", "solver.friction_directions=1000000000", "--solver", "lcp", "--duration",
      "0.002"], 2),
    (["run", "box_slide", "--set", "solver.max_iterations=100000000000000000000", "--duration", "0.002"], 2),
    (["run", "box_slide", "--slip-curvature", "nan", "--duration", "0.002"], 2),
    (["validate"], 2), (["info"], 2), (["compare", "x"], 2), (["learn"], 2), (["learn", "generate"], 2),
    (["examples"], 2), (["import-urdf"], 2),
    (["identify", "--out", "x"], 1),                 # identify's own "give a trajectory file TRAJ" (its exit 1)
    (["learn", "generate", "block", "--out", "x.npz", "--dt", "nan"], 2),
    (["learn", "generate", "block", "--out", "x.npz", "--episodes", "0"], 2),
    (["learn", "generate", "particle", "--out", "x.npz", "--episodes", "1", "--steps", "1", "--hold", "0"], 2),
    (["run", "box_slide", "--duration", "0.002", "--quiet"], 0),
    (["examples", "lcp"], 0),
])
def test_fixed_argument_lists(argv, status, tmp_path, monkeypatch):
    """Each case ends with its status: the refusals with 2 and a message, the runs with 0."""
    monkeypatch.chdir(tmp_path)
    got, _, err = check_cli(argv)
    assert got == status, (argv, got, err[-1000:])


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
