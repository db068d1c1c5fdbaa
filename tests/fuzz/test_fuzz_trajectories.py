"""Fuzzing trajectory files (issue 29): every array of a valid `.npz` with its shape, dtype or length broken,
non-finite values, keys removed or added, the 0-d fields (scene, solver, time step, metadata) replaced.

Property: ``load_trajectory`` either loads the file or raises TrajectoryFormatError with one line that
starts with the path; every command that reads trajectories (info, view --html, compare, identify) ends
with status 0, 1 or 2 and no traceback, status 2 with one line naming the file. A file that loads has arrays
of the schema's dtypes and shapes, finite where the schema says so.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from fuzz_kit import check_cli, error_lines
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from convexsim.io import TrajectoryFormatError, load_trajectory, save_trajectory
from convexsim.io.trajectory import ARRAY_SCHEMA

SUPPRESS = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    """A valid box_slide trajectory (contacts in every frame), 8 steps."""
    from convexsim.simulate import simulate

    path = tmp_path_factory.mktemp("good") / "good.npz"
    save_trajectory(path, simulate("box_slide", duration=0.008))
    return path


@pytest.fixture(scope="module")
def good_arrays(good) -> dict[str, np.ndarray]:
    with np.load(good) as data:
        return {k: data[k] for k in data.files}


DTYPES = [np.float32, np.float64, np.int64, np.int8, np.uint8, bool, np.complex128, "<U3", "S4", "<M8[s]",
          np.float16]
SCALARS = ["", "sap", "lcp", "rigid", "xyz", "{", "[1, 2]", "null", "name: x", "bodies: [1]", "{\"a\": NaN}",
           "bodies: &a [*a]", "- 1", "\x00", "é" * 100]


def _mutate(draw, arrays: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], str]:
    """One mutation of the file's arrays; returns (arrays, description)."""
    arrays = dict(arrays)
    if not arrays:
        return arrays, "unchanged"
    key = draw(st.sampled_from(sorted(arrays)))      # the 0-d fields (scene_yaml, metadata_json, ...) included
    arr = arrays[key]
    kind = draw(st.sampled_from(["remove", "reshape", "truncate", "extend", "dtype", "nonfinite", "scalar",
                                 "text", "transpose", "empty", "huge", "negative"]))
    if kind == "remove":
        del arrays[key]
    elif kind == "reshape":
        shape = draw(st.sampled_from(["add_axis", "flatten", "drop_axis"]))
        arrays[key] = (arr[..., None] if shape == "add_axis" else arr.reshape(-1) if shape == "flatten"
                       else arr[..., 0] if arr.ndim and arr.shape[-1] else arr.reshape(-1))
    elif kind in ("truncate", "extend") and arr.ndim:
        axis = draw(st.integers(0, arr.ndim - 1))
        if kind == "truncate":
            arrays[key] = np.take(arr, range(max(arr.shape[axis] - draw(st.integers(1, 3)), 0)), axis=axis)
        else:
            n = draw(st.integers(1, 2))
            shape = list(arr.shape)
            shape[axis] = n
            extra = np.take(arr, [0] * n, axis=axis) if arr.shape[axis] else np.zeros_like(arr, shape=shape)
            arrays[key] = np.concatenate([arr, extra], axis=axis)
    elif kind == "dtype":
        dtype = draw(st.sampled_from(DTYPES))
        try:
            arrays[key] = arr.astype(dtype)
        except (ValueError, TypeError, OverflowError, RuntimeError):   # RuntimeError: numpy's datetime64 → '<U3'
            arrays[key] = np.full(arr.shape, "x", dtype="<U1")
    elif kind == "nonfinite" and arr.dtype.kind == "f" and arr.size:
        out = arr.copy()
        out.flat[draw(st.integers(0, arr.size - 1))] = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
        arrays[key] = out
    elif kind == "scalar":
        arrays[key] = np.asarray(draw(st.sampled_from([0, -1, 1.5, math.nan, True, "x", 10**18])))
    elif kind == "text":
        arrays[key] = np.asarray(draw(st.sampled_from(SCALARS)))
    elif kind == "transpose" and arr.ndim >= 2:
        arrays[key] = np.swapaxes(arr, 0, arr.ndim - 1)
    elif kind == "empty":
        arrays[key] = arr[:0] if arr.ndim else np.zeros(0)
    elif kind == "huge" and arr.dtype.kind in "iuf" and arr.size:
        out = arr.copy()
        # the largest value of the array's own dtype (an earlier mutation may have made it int8 or float32)
        out.flat[draw(st.integers(0, arr.size - 1))] = (np.iinfo(arr.dtype).max if arr.dtype.kind in "iu"
                                                        else np.finfo(arr.dtype).max)
        arrays[key] = out
    elif kind == "negative" and arr.dtype.kind in "if" and arr.size:
        arrays[key] = -arr - 1
    else:
        return arrays, "unchanged"
    return arrays, f"{kind} {key}"


@st.composite
def broken_files(draw, max_mutations: int = 2):
    return draw(st.integers(1, max_mutations)), draw(st.data())


def _write_mutant(good_arrays, n, data, path: Path) -> str:
    arrays, what = dict(good_arrays), []
    for _ in range(n):
        arrays, w = _mutate(data.draw, arrays)
        what.append(w)
    with path.open("wb") as fh:
        np.savez(fh, **arrays)          # allow_pickle: object arrays are written pickled, and must be refused
    return "; ".join(what)


def check_loaded(traj) -> None:
    """A trajectory that loaded has the schema's dtypes and shapes, finite where required."""
    T, B = traj.num_frames, traj.num_bodies
    assert T >= 1
    for name, (kinds, _, finite) in ARRAY_SCHEMA.items():
        arr = getattr(traj, name)
        assert arr.dtype.kind in kinds, name
        if finite:
            assert np.isfinite(arr).all(), name
    assert traj.position.shape == (T, B, 3) and traj.contact_offsets.shape == (T + 1,)


def check_file(path: Path, good: Path, commands: tuple[str, ...], tmp: Path, identify_loaded: bool = False) -> None:
    """The property on one file. ``identify`` fits on a file that loads take seconds: only with
    ``identify_loaded`` (a refused file costs nothing, and must be refused by identify as by the others)."""
    try:
        traj = load_trajectory(path)
    except TrajectoryFormatError as exc:
        msg = str(exc)
        assert msg.startswith(str(path)) and "\n" not in msg, msg
        event("refused")
        loaded = False
    else:
        check_loaded(traj)
        event("loaded")
        loaded = True
    for command in commands:
        if command == "identify" and loaded and not identify_loaded:
            continue
        argv = {"info": ["info", path],
                "view": ["view", path, "--html", tmp / "v.html"],
                "compare": ["compare", good, path],
                "identify": ["identify", path, "--method", "mpec", "--out", tmp / "id"]}[command]
        status, _, err = check_cli(argv)
        if not loaded:
            assert status == 2, (command, err)
            lines = error_lines(err)
            assert len(lines) == 1 and str(path) in lines[0], (command, err)


@settings(max_examples=120, deadline=None, suppress_health_check=SUPPRESS)
@given(case=broken_files())
def test_broken_trajectories_load_or_are_refused_in_one_line(case, good, good_arrays, tmp_path):
    n, data = case
    path = tmp_path / "broken.npz"
    _write_mutant(good_arrays, n, data, path)
    check_file(path, good, ("info", "compare"), tmp_path)


@settings(max_examples=25, deadline=None, suppress_health_check=SUPPRESS)
@given(case=broken_files(max_mutations=1))
def test_broken_trajectories_through_view_and_identify(case, good, good_arrays, tmp_path):
    n, data = case
    path = tmp_path / "broken.npz"
    _write_mutant(good_arrays, n, data, path)
    check_file(path, good, ("view", "identify"), tmp_path)


@pytest.mark.long
@settings(max_examples=500, deadline=None, suppress_health_check=SUPPRESS)
@given(case=broken_files(max_mutations=3))
def test_broken_trajectories_many(case, good, good_arrays, tmp_path):
    n, data = case
    path = tmp_path / "broken.npz"
    _write_mutant(good_arrays, n, data, path)
    check_file(path, good, ("info", "compare"), tmp_path)


@pytest.mark.long
@settings(max_examples=150, deadline=None, suppress_health_check=SUPPRESS)
@given(case=broken_files(max_mutations=2))
def test_broken_trajectories_through_view_and_identify_many(case, good, good_arrays, tmp_path):
    n, data = case
    path = tmp_path / "broken.npz"
    _write_mutant(good_arrays, n, data, path)
    check_file(path, good, ("view", "identify"), tmp_path)


@pytest.mark.parametrize("scene_yaml", ["null", "# only a comment", "~", "   "])
def test_identify_on_a_trajectory_whose_scene_is_empty_yaml(scene_yaml, good_arrays, tmp_path):
    """Found by fuzzing: `scene_yaml: null` loads (an empty document) and identify passed None on to the scene
    reader (TypeError). (Fits on mutants that load take seconds to minutes each: not fuzzed here.)"""
    path = tmp_path / "s.npz"
    np.savez(path, **{**good_arrays, "scene_yaml": np.asarray(scene_yaml)})
    status, _, err = check_cli(["identify", path, "--method", "mpec", "--out", tmp_path / "id"])
    assert status in (1, 2) and "scene" in err, err


@pytest.mark.parametrize("meta", ["[]", "3", "null", "{\"ms_per_step\": \"fast\", \"warmup_s\": [1]}",
                                  "{\"ms_per_step\": 1.0, \"steps\": {}, \"warmup_s\": \"x\"}",
                                  "{\"interrupted\": 5}", "not json", "{\"a\": NaN}"])
def test_replaced_metadata_never_crashes_info(meta, good_arrays, tmp_path):
    path = tmp_path / "meta.npz"
    np.savez(path, **{**good_arrays, "metadata_json": np.asarray(meta)})
    status, out, err = check_cli(["info", path])
    assert status == 0 or (status == 2 and "metadata_json" in err), err


def test_other_scene_in_scene_yaml_is_refused_by_view(good_arrays, tmp_path):
    """A trajectory whose stored scene has other bodies than its arrays: view refuses it (status 2)."""
    path = tmp_path / "other.npz"
    other = "name: other\nbodies:\n- {name: x, mass: 1.0, geometries: [{shape: sphere, radius: 0.1}]}\n"
    np.savez(path, **{**good_arrays, "scene_yaml": np.asarray(other)})
    status, _, err = check_cli(["view", path, "--html", tmp_path / "v.html"])
    assert status == 2, err


def test_json_metadata_survives_a_round_trip(good, tmp_path):
    traj = load_trajectory(good)
    traj.metadata = {"x": [1, 2], "note": "é"}
    save_trajectory(tmp_path / "m.npz", traj)
    assert load_trajectory(tmp_path / "m.npz").metadata == json.loads(json.dumps(traj.metadata))
