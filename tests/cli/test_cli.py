"""End-to-end command-line tests on shipped scenes (run, info, validate, scenes, interruption)."""

import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from convexsim.cli import main
from convexsim.io import SCHEMA_VERSION, load_trajectory
from repo_paths import REPO


def test_run_writes_a_trajectory_matching_its_schema(tmp_path, capsys):
    """Check `convexsim run` on a shipped scene writes a loadable file with every documented field."""
    out = tmp_path / "drop.npz"
    assert main(["run", "sphere_drop", "--duration", "0.2", "--out", str(out), "--quiet"]) == 0
    traj = load_trajectory(out)
    raw = np.load(out)
    assert int(raw["schema_version"]) == SCHEMA_VERSION
    for key in ("time", "body_names", "position", "quaternion", "linear_velocity", "angular_velocity",
                "solver_iterations", "solver_converged", "momentum_residual", "contact_offsets",
                "contact_body_a", "contact_body_b", "contact_point", "contact_normal", "contact_phi",
                "contact_force", "scene_yaml"):
        assert key in raw.files, key
    T = traj.num_frames
    assert T == 201 and traj.time[-1] == pytest.approx(0.2)
    np.testing.assert_allclose(np.linalg.norm(traj.quaternion, axis=-1), 1.0, atol=1e-12)
    assert "time_step" in traj.scene_yaml
    assert traj.metadata["steps"] == 200


def test_run_summary_and_info(tmp_path, capsys):
    """Check the run summary reports steps, ms/step, iterations and contacts; info describes the file."""
    out = tmp_path / "stack.npz"
    assert main(["run", "box_stack", "--duration", "0.05", "--out", str(out), "--record-every", "10"]) == 0
    text = capsys.readouterr().out
    for word in ("steps", "ms/step", "Newton iterations", "contacts", "result", str(out)):
        assert word in text, word
    assert load_trajectory(out).num_frames == 6
    assert main(["info", str(out)]) == 0
    assert "frames      6" in capsys.readouterr().out


def test_overrides_and_options_reach_the_model(tmp_path):
    """Check --set, --time-step and --contact-model are applied and stored in the resolved scene."""
    out = tmp_path / "o.npz"
    assert main(["run", "sphere_drop", "--duration", "0.01", "--time-step", "0.002", "--contact-model",
                 "lagged", "--set", "materials.default.friction=0.25", "--out", str(out), "--quiet"]) == 0
    traj = load_trajectory(out)
    assert traj.time_step == 0.002 and traj.contact_model == "lagged"
    assert "0.25" in traj.scene_yaml


def test_bad_inputs_give_clear_errors(tmp_path, capsys):
    """Check a missing scene, a bad override path and a missing trajectory exit 2 with a message."""
    assert main(["run", "no_such_scene", "--out", str(tmp_path / "x.npz")]) == 2
    assert "no_such_scene" in capsys.readouterr().err
    assert main(["run", "sphere_drop", "--set", "materials.default.nonsense=1", "--quiet",
                 "--out", str(tmp_path / "y.npz")]) == 2
    assert "nonsense" in capsys.readouterr().err
    assert main(["info", str(tmp_path / "missing.npz")]) == 2
    assert "not found" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_scenes_and_validate(capsys, tmp_path):
    """Check `scenes` lists the shipped scenes and `validate` accepts them and rejects a bad file."""
    assert main(["scenes"]) == 0
    listing = capsys.readouterr().out
    for name in ("sphere_drop", "box_slide", "incline_stick", "incline_slip", "box_stack", "capsule_roll",
                 "sphere_pile", "clutter_1000", "mixed_clutter"):
        assert name in listing
    assert main(["validate", str(REPO / "scenes" / "box_stack.yaml")]) == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nbodies:\n  - name: b\n    mass: -1\n    geometries: [{shape: sphere, radius: 0}]\n")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "mass" in err and "radius" in err


def _console():
    return [sys.executable, "-m", "convexsim.cli"]


def _read_until_progress(proc, *, timeout):
    """Read the child's stderr until its progress bar shows a step count; returns what was read."""
    import selectors

    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    seen = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if sel.select(timeout=1.0):
            chunk = os.read(proc.stderr.fileno(), 4096).decode(errors="replace")
            seen += chunk
            if "simulating: step" in seen:
                time.sleep(0.5)   # a few more steps
                return seen
    raise AssertionError(f"the run never reported progress: {seen!r}")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_interrupted_run_keeps_its_frames(tmp_path, sig, capsys):
    """Check a run of a real `convexsim run` process stopped by Ctrl-C or SIGTERM writes the frames it
    recorded, atomically, marked interrupted (``failure``, metadata, `info`), and exits 130 / 143; SIGKILL
    (which cannot be handled) leaves no file and no temporary file behind."""
    out = tmp_path / "big.npz"
    proc = subprocess.Popen(_console() + ["run", "sphere_pile", "--duration", "30", "--out", str(out)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Wait until the run is in its stepping loop (past imports and compilation): without a terminal the
    # progress goes to stderr as plain "simulating: step …" lines. A fixed sleep was flaky under load.
    first = _read_until_progress(proc, timeout=300)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(sig)
    _, rest = proc.communicate(timeout=60)
    err = first + rest
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
        assert list(tmp_path.iterdir()) == [], list(tmp_path.iterdir())
        return
    name = "SIGTERM" if sig == signal.SIGTERM else "SIGINT"
    assert proc.returncode == (143 if sig == signal.SIGTERM else 130), err
    assert list(tmp_path.iterdir()) == [out], list(tmp_path.iterdir())     # no temporary file left
    who = "by SIGTERM" if sig == signal.SIGTERM else "by the user"
    assert f"interrupted {who} at step" in err and "frames recorded so far are in" in err, err
    traj = load_trajectory(out)
    assert traj.num_frames >= 2                   # frame 0 and at least one step: progress had been shown
    assert traj.failure.startswith(f"interrupted {who} at step")
    assert traj.metadata["interrupted"] == name
    # record_every 1: one frame per step taken, except that the signal may land between a step and its
    # recording, so the last step taken may be one past the last frame.
    step = int(traj.failure.split("at step ")[1].split()[0])
    assert traj.num_frames - 1 <= step <= traj.num_frames
    assert traj.num_frames - 1 <= traj.metadata["steps"] <= traj.num_frames
    np.testing.assert_allclose(np.diff(traj.time), traj.time_step, rtol=1e-9)
    assert main(["info", str(out)]) == 0
    info = capsys.readouterr().out
    assert f"interrupted {traj.failure}" in info, info


def test_interrupted_trajectory_drops_a_frame_cut_short():
    """Check the frames an interrupted run writes are whole: a signal landing inside Recorder.record (between
    two of its appends, here after the time and positions of a 5th frame, or after its contact count but
    before its contact rows) drops that frame instead of making the file inconsistent."""
    from convexsim.simulate import Recorder, RunInterrupted, RunStats, interrupted_trajectory, prepare
    from convexsim.stepping import StepContext, step

    model, state, _ = prepare("box_stack", duration=0.01)
    rec, ctx = Recorder(model), StepContext()
    rec.record(state, None)
    for _ in range(4):
        state, info = step(model, state, ctx)
        rec.record(state, info)
    assert rec.contact_counts[-1] > 0                    # the boxes touch: frames carry contact rows
    message = "interrupted by the user at step 4"
    whole = interrupted_trajectory(model, RunInterrupted(rec, RunStats(), message))
    rec.frames_t.append(state.t + model.time_step)
    rec.frames_q.append(state.q.copy())
    cut = interrupted_trajectory(model, RunInterrupted(rec, RunStats(), "interrupted by the user at step 5"))
    for name in ("frames_v", "iterations", "converged", "residual", "ls_evals", "contact_counts"):
        getattr(rec, name).append(getattr(rec, name)[-1])    # every per-frame list, but no contact rows
    cut2 = interrupted_trajectory(model, RunInterrupted(rec, RunStats(), "interrupted by the user at step 5"))
    for traj in (whole, cut, cut2):
        traj.validate()
        assert traj.num_frames == 5 and traj.metadata["interrupted"] == "SIGINT"
        np.testing.assert_array_equal(traj.position, whole.position)
        np.testing.assert_array_equal(traj.contact_force, whole.contact_force)


def test_time_flags_are_checked_and_named(tmp_path, capsys):
    """Check bad --duration/--time-step values are blamed on the flag (not the scene file), a duration
    shorter than one step is an error naming --duration, and nothing is written in either case."""
    out = tmp_path / "t.npz"
    for flags, expected in ((["--duration", "-1"], "--duration: must be a finite number of seconds > 0 (got -1)"),
                            (["--duration", "nan"], "--duration: must be a finite number of seconds > 0 (got nan)"),
                            (["--time-step", "0"], "--time-step: must be a finite number of seconds > 0 (got 0)"),
                            (["--duration", "0.0004"], "--duration = 0.0004 s is shorter than one time step (dt = 0.001 s)")):
        assert main(["run", "sphere_drop", *flags, "--out", str(out), "--quiet"]) == 2, flags
        err = capsys.readouterr().err
        assert expected in err, err
        assert "sphere_drop.yaml" not in err, err
    assert not out.exists()


def test_duration_not_a_multiple_of_dt_is_reported_as_rounded(tmp_path, capsys):
    """Check --duration 0.0105 with dt = 1 ms runs round(10.5) = 10 steps and says so (stderr note and
    summary), so the user knows the file ends at t = 0.01 s."""
    out = tmp_path / "r.npz"
    assert main(["run", "sphere_drop", "--duration", "0.0105", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    message = "--duration = 0.0105 s is not a multiple of dt = 0.001 s: rounded to 10 steps (0.01 s)"
    assert message in captured.err and message in captured.out
    assert load_trajectory(out).num_frames == 11
    assert main(["run", "sphere_drop", "--duration", "0.01", "--out", str(out)]) == 0
    assert "rounded" not in "".join(capsys.readouterr())


@pytest.mark.parametrize("mask", [0o022, 0o027])
def test_outputs_get_normal_file_permissions(tmp_path, mask):
    """Check trajectory files get 0o666 & ~umask like any new file (not mkstemp's 0600): 0644 under
    umask 022, 0640 under 027."""
    old = os.umask(mask)
    try:
        out = tmp_path / f"p{mask:o}.npz"
        assert main(["run", "sphere_drop", "--duration", "0.002", "--out", str(out), "--quiet"]) == 0
    finally:
        os.umask(old)
    assert out.stat().st_mode & 0o777 == 0o666 & ~mask


def test_atomic_write_sets_umask_permissions(tmp_path):
    """Check atomic_write_text leaves a file with mode 0o666 & ~umask, also when replacing a 0600 file."""
    from convexsim.io.atomic import atomic_write_text

    old = os.umask(0o022)
    try:
        target = tmp_path / "a.txt"
        target.write_text("old")
        target.chmod(0o600)
        atomic_write_text(target, "new")
    finally:
        os.umask(old)
    assert target.read_text() == "new"
    assert target.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_bench_prints_its_figures(capsys):
    """Smoke test of `convexsim bench` on its fastest setting (one scene, 5 steps, no solver table):
    exit 0 and the ms/step, iterations/step and contacts/step columns with a row for the scene.
    No timing is asserted."""
    assert main(["bench", "--scenes", "sphere_drop", "--duration", "0.005", "--no-solver-bench"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0]
    for column in ("ms/step", "iter/step", "contacts/step", "steps", "bodies"):
        assert column in header, header
    (row,) = [line for line in lines if line.startswith("sphere_drop")]
    fields = row.split()
    assert fields[1:3] == ["1", "5"]  # 1 moving body, 5 steps
    for column in ("φ<0/step", "factor ms", "fill L/H", "kept"):
        assert column in header, header
    assert fields[-1] == "compiled" and header.split()[-1] == "path"   # the runner that took the steps
    fields = fields[:-1]
    assert fields[-3:-1] == ["—", "—"]  # fill, kept: the ball is still falling, nothing was factored
    assert "ls/iter" in header and fields[6] == "—"  # line-search evaluations per iteration: no iteration
    assert all(math.isfinite(float(x)) for x in fields[3:6] + fields[7:-3] + fields[-1:])
