"""Issue 29's four tracebacks, as regression tests, and extreme but legal values (a 1e-6 m sphere, a 1e6 kg
body, dt = 1e-6 s), which run or are refused in one line, never with a traceback.

Each crash case failed on the code before the fix with the exception the issue quotes (OverflowError in
``shape_volume``, ZeroDivisionError in the unit check, TypeError in ``convexsim info``, numpy's
UFuncNoLoopError in ``identify``), which escaped ``convexsim.cli.main``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from fuzz_kit import check_cli, error_lines

from convexsim.io import TrajectoryFormatError, load_trajectory, save_trajectory
from convexsim.scene import SceneError, scene_from_yaml
from repo_paths import SCENES as REPO_SCENES


def _sphere_scene(radius: str, mass: str = "1.0", extra: str = "") -> str:
    return (f"{extra}bodies:\n  - {{name: ground, fixed: true, geometries: [{{shape: halfspace}}]}}\n"
            f"  - {{name: ball, mass: {mass}, position: [0, 0, 2.0], "
            f"geometries: [{{shape: sphere, radius: {radius}}}]}}\n")


@pytest.mark.parametrize("radius, word", [("1.0e300", "too large"), ("1.0e-300", "too small")])
def test_extreme_sphere_radius_is_refused_naming_the_field(radius, word, tmp_path):
    """Issue 29: radius 1e300 overflowed 4/3·π·r³ (OverflowError); 1e-300 made the volume 0 and the density
    check divide by zero (ZeroDivisionError)."""
    path = tmp_path / "ball.yaml"
    path.write_text(_sphere_scene(radius), encoding="utf-8")
    with pytest.raises(SceneError) as info:
        scene_from_yaml(path.read_text(encoding="utf-8"), str(path))
    assert "bodies[1].geometries[0].radius" in str(info.value) and word in str(info.value)
    for argv in (["validate", path], ["run", path, "--duration", "0.002", "--out", tmp_path / "x.npz"]):
        status, _, err = check_cli(argv)
        lines = error_lines(err)
        assert status == 2 and len(lines) == 1, err
        assert str(path) in lines[0] and "bodies[1].geometries[0].radius" in lines[0], err


@pytest.mark.parametrize("where, value", [("mass", "1.0e300"), ("mass", "1.0e-300"), ("time_step", "1.0e-300"),
                                          ("inertia", "[1.0e300, 1.0e300, 1.0e300]")])
def test_other_out_of_range_numbers_are_refused_naming_the_field(where, value, tmp_path):
    path = tmp_path / "s.yaml"
    if where == "time_step":
        text = _sphere_scene("0.1", extra=f"time_step: {value}\n")
    elif where == "inertia":
        text = _sphere_scene("0.1").replace("mass: 1.0,", f"mass: 1.0, inertia: {value},")
    else:
        text = _sphere_scene("0.1", mass=value)
    path.write_text(text, encoding="utf-8")
    status, _, err = check_cli(["validate", path])
    assert status == 2 and str(path) in err and where in err, err


@pytest.fixture(scope="module")
def box_slide(tmp_path_factory) -> Path:
    from convexsim.simulate import simulate

    path = tmp_path_factory.mktemp("traj") / "box_slide.npz"
    save_trajectory(path, simulate("box_slide", duration=0.01))
    return path


def _rewrite(src: Path, dst: Path, **arrays) -> Path:
    with np.load(src) as data:
        out = {k: data[k] for k in data.files}
    out.update(arrays)
    np.savez(dst, **out)
    return dst


def test_time_reshaped_to_a_column_is_refused_by_the_loader_and_info(box_slide, tmp_path):
    """Issue 29: `time` of shape (T, 1) passed load_trajectory and `convexsim info` crashed formatting it."""
    T = load_trajectory(box_slide).num_frames
    path = _rewrite(box_slide, tmp_path / "t.npz", time=np.arange(T, dtype=float).reshape(T, 1) * 1e-3)
    with pytest.raises(TrajectoryFormatError, match="'time'"):
        load_trajectory(path)
    status, _, err = check_cli(["info", path])
    lines = error_lines(err)
    assert status == 2 and len(lines) == 1 and str(path) in lines[0] and "'time'" in lines[0], err


def test_quaternion_stored_as_strings_is_refused_by_identify(box_slide, tmp_path):
    """Issue 29: `quaternion` as '<U3' strings loaded, and `identify --method sap` crashed in numpy."""
    q = load_trajectory(box_slide).quaternion
    path = _rewrite(box_slide, tmp_path / "q.npz", quaternion=q.astype("<U3"))
    with pytest.raises(TrajectoryFormatError, match="'quaternion'"):
        load_trajectory(path)
    status, _, err = check_cli(["identify", path, "--method", "sap", "--out", tmp_path / "id"])
    lines = error_lines(err)
    assert status == 2 and len(lines) == 1 and str(path) in lines[0] and "'quaternion'" in lines[0], err


def test_decreasing_contact_offsets_in_a_narrow_unsigned_type_are_refused(box_slide, tmp_path):
    """Found by the trajectory fuzzer: contact_offsets stored as uint8 with a wrapped value ([0, 255, 4, ...])
    passed the non-decreasing check (uint8 differences wrap: 4 − 255 = 5), and `convexsim compare` then failed
    inside numpy (exit 70). The loader checks the offsets as int64 and refuses the file naming the field."""
    off = load_trajectory(box_slide).contact_offsets.copy()
    assert off.shape[0] > 2 and off[-1] > 0, "the fixture needs contacts"
    off[1] = 255
    path = _rewrite(box_slide, tmp_path / "o.npz", contact_offsets=off.astype(np.uint8))
    with pytest.raises(TrajectoryFormatError, match="'contact_offsets'"):
        load_trajectory(path)
    for command in (["info", path], ["compare", box_slide, path]):
        status, _, err = check_cli(command)
        assert status == 2 and "'contact_offsets'" in err, (command, status, err)


@pytest.mark.parametrize("field, value", [
    ("position", "nan"), ("contact_body_a", "out_of_range"), ("time", "empty"), ("solver_converged", "float"),
    ("time_step", "text"), ("scene_yaml", "array")])
def test_other_schema_violations_are_refused_naming_the_field(field, value, box_slide, tmp_path):
    with np.load(box_slide) as data:
        arr = data[field]
    if value == "nan":
        arr = arr.copy()
        arr[-1, -1, 0] = np.nan
    elif value == "out_of_range":
        arr = np.full_like(arr, 99)
    elif value == "empty":
        arr = arr[:0]
    elif value == "float":
        arr = arr.astype(float)
    elif value == "text":
        arr = np.asarray("0.001")
    elif value == "array":
        arr = np.asarray([str(arr), str(arr)])
    path = _rewrite(box_slide, tmp_path / "b.npz", **{field: arr})
    with pytest.raises(TrajectoryFormatError) as info:
        load_trajectory(path)
    assert str(info.value).startswith(str(path)) and f"'{field}'" in str(info.value), info.value


def test_metadata_with_strings_where_numbers_were_does_not_crash_info(box_slide, tmp_path):
    """`convexsim info` compared metadata's warmup_s with a number (TypeError for a string)."""
    path = _rewrite(box_slide, tmp_path / "m.npz",
                    metadata_json=np.asarray('{"ms_per_step": 1.0, "warmup_s": "slow", "steps": "many"}'))
    status, out, err = check_cli(["info", path])
    assert status == 0 and "speed" in out, err


def test_alias_bomb_is_refused_quickly(tmp_path):
    """Anchors of anchors expanding to 10⁸ values: refused from the node graph in well under a second
    (it used to walk every expanded value)."""
    text = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefg", "bcdefgh")) + "bodies: *h\n"
    path = tmp_path / "bomb.yaml"
    path.write_text(text, encoding="utf-8")
    t0 = time.perf_counter()
    status, _, err = check_cli(["validate", path])
    assert time.perf_counter() - t0 < 5.0
    assert status == 2 and "alias" in err and str(path) in err, err


@pytest.mark.parametrize("text", ["bodies: &a [*a]\n", "bodies: " + "[" * 3000 + "]" * 3000 + "\n"],
                         ids=["recursive_alias", "deep_nesting"])
def test_recursive_and_deep_yaml_is_refused_in_one_line(text, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(text, encoding="utf-8")
    status, _, err = check_cli(["validate", path])
    lines = error_lines(err)
    assert status == 2 and len(lines) == 1 and str(path) in lines[0], err


# ---------------------------------------------------------------------------- extreme but legal values
EXTREME = """\
time_step: {dt}
duration: {duration}
unit_warnings: false
bodies:
  - {{name: ground, fixed: true, geometries: [{{shape: halfspace}}]}}
  - {{name: speck, mass: 4.2e-15, position: [0, 0, 2.0e-6], geometries: [{{shape: sphere, radius: 1.0e-6}}]}}
  - {{name: heavy, mass: 1.0e6, position: [5, 0, 0.5], geometries: [{{shape: box, size: [1, 1, 1]}}]}}
"""


@pytest.mark.parametrize("solver", ["sap", "lcp"])
@pytest.mark.parametrize("dt, duration", [("1.0e-6", "1.0e-5"), ("1.0e-3", "0.005")])
def test_extreme_but_legal_values_run_or_are_refused_cleanly(dt, duration, solver, tmp_path):
    """A 1e-6 m sphere (of water's density), a 1e6 kg box, dt = 1e-6 s: status 0 with a finite trajectory,
    or 1 (the run stopped, frames kept) — never a traceback."""
    path = tmp_path / "extreme.yaml"
    path.write_text(EXTREME.format(dt=dt, duration=duration), encoding="utf-8")
    out = tmp_path / "extreme.npz"
    status, _, err = check_cli(["run", path, "--solver", solver, "--quiet", "--out", out])
    assert status in (0, 1), err
    traj = load_trajectory(out)            # written either way; the loader checks finiteness
    if status == 0:
        assert not traj.failure and traj.num_frames == round(float(duration) / float(dt)) + 1


@pytest.mark.parametrize("text", ["{", "a: &a [*a]", "- just a list"], ids=["invalid", "recursive", "list"])
def test_unreadable_stored_scene_is_refused_by_the_loader(text, box_slide, tmp_path):
    """A `scene_yaml` that is not YAML of a mapping: identify crashed with yaml's ScannerError (and view's
    safe_load would recurse or expand an alias bomb); the loader now refuses it naming the field."""
    path = _rewrite(box_slide, tmp_path / "s.npz", scene_yaml=np.asarray(text))
    with pytest.raises(TrajectoryFormatError, match="'scene_yaml'"):
        load_trajectory(path)
    for argv in (["identify", path, "--method", "mpec", "--out", tmp_path / "id"], ["view", path, "--html", tmp_path / "v.html"]):
        status, _, err = check_cli(argv)
        lines = error_lines(err)
        assert status == 2 and len(lines) == 1 and str(path) in lines[0] and "scene_yaml" in lines[0], err


def test_stored_scene_that_does_not_validate_is_refused_by_identify_naming_file_and_field(box_slide, tmp_path):
    path = _rewrite(box_slide, tmp_path / "s.npz", scene_yaml=np.asarray("bodies: [{name: b, mass: -1}]"))
    status, _, err = check_cli(["identify", path, "--method", "mpec", "--out", tmp_path / "id"])
    lines = error_lines(err)
    assert status == 2 and len(lines) == 1 and str(path) in lines[0] and "scene_yaml" in lines[0], err


def test_an_empty_data_file_is_refused_by_learn_in_one_line(tmp_path):
    """Found by the CLI fuzzer (varying seed): `convexsim learn empty.npz` exited 70 with numpy's EOFError
    ("No data left in file") from np.load; an empty file is bad input, refused with exit 2 in one line."""
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    status, _, err = check_cli(["learn", empty, "--out", tmp_path / "report", "--restarts", "1"])
    lines = error_lines(err)
    assert status == 2 and len(lines) == 1 and "not a readable npz file" in lines[0], err


@pytest.mark.parametrize("solver", ["sap", "lcp"])
def test_a_joint_lever_of_1e15_m_fails_the_run_cleanly(solver, tmp_path):
    """Found by the scene fuzzer (varying seed): double_pendulum with the elbow's child_offset 1e15 m exited 70
    with numpy's LinAlgError ("Matrix is singular to machine precision") from the tree's free-motion solve: M(q)'s
    entries (~1e30) leave its Schur complement (~1) to round-off. Now it warns at load (a joint's lever beyond
    1e4 m) and the run fails with status 1 and its frames so far: stopped at step 0 naming the tree's joints
    when M(q)'s Cholesky pivot comes out ≤ 0, or by a later non-finite state when round-off leaves it positive
    (either, by machine) — never an internal error."""
    text = (REPO_SCENES / "double_pendulum.yaml").read_text(encoding="utf-8")
    head, sep, tail = text.rpartition("child_offset: [0, 0, -1.0]")      # the elbow's
    assert sep
    scene = tmp_path / "lever.yaml"
    scene.write_text(head + "child_offset: [1.0e15, 0, -1.0]" + tail, encoding="utf-8")
    out = tmp_path / "run.npz"
    status, _, err = check_cli(["run", scene, "--duration", "0.002", "--solver", solver, "--out", out])
    assert status == 1, err
    assert "joints[1].child_offset: a lever of 1e+15 m" in err
    assert load_trajectory(out).num_frames >= 1
