"""Every way a file a user passes can be broken gives one clean line naming the file, exit status 2.

Trajectory files (.npz) go through `info`, `view --html` and `compare` (as either argument); scene files
through `run` and `validate`. No case may print a traceback or numpy's "allow_pickle" hint.
"""

from __future__ import annotations

import io
import os
import pathlib
import zipfile

import numpy as np
import pytest

from convexsim.cli import EXIT_USAGE, main
from convexsim.io import SCHEMA_VERSION, TrajectoryFormatError, load_trajectory, save_trajectory


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> pathlib.Path:
    """A valid 20-step sphere_drop trajectory."""
    from convexsim.simulate import simulate

    path = tmp_path_factory.mktemp("good") / "good.npz"
    save_trajectory(path, simulate("sphere_drop", duration=0.02))
    return path


def _member_data_offset(raw: bytes, name: str) -> tuple[int, int]:
    """(offset, length) of the compressed data of zip member ``name`` (after its local header: 30 bytes,
    then the name and the extra field)."""
    with zipfile.ZipFile(io.BytesIO(raw)) as zf:
        info = zf.getinfo(name)
    h = info.header_offset
    name_len = int.from_bytes(raw[h + 26:h + 28], "little")
    extra_len = int.from_bytes(raw[h + 28:h + 30], "little")
    return h + 30 + name_len + extra_len, info.compress_size


def _rewrite(good: pathlib.Path, path: pathlib.Path, **changes) -> None:
    """Copy of ``good`` with arrays replaced (value) or removed (None)."""
    with np.load(good) as data:
        arrays = {k: data[k] for k in data.files}
    for key, value in changes.items():
        if value is None:
            arrays.pop(key)
        else:
            arrays[key] = value
    np.savez_compressed(path, **arrays)


def make_broken(kind: str, good: pathlib.Path, tmp: pathlib.Path) -> pathlib.Path:
    """A trajectory file broken in the way ``kind`` names."""
    path = tmp / f"{kind}.npz"
    raw = good.read_bytes()
    if kind == "bad_crc":               # one flipped byte in the middle of a member's compressed data
        off, n = _member_data_offset(raw, "position.npy")
        b = bytearray(raw)
        b[off + n // 2] ^= 0x01
        path.write_bytes(bytes(b))
    elif kind == "bad_deflate":         # a member's compressed data replaced by an invalid deflate stream
        off, n = _member_data_offset(raw, "position.npy")
        path.write_bytes(raw[:off] + b"\xff" * n + raw[off + n:])
    elif kind == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    elif kind == "text":
        path.write_text("time,x\n0,1\n", encoding="utf-8")
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "directory":
        path.mkdir()
    elif kind == "missing_keys":
        _rewrite(good, path, position=None, contact_force=None)
    elif kind == "no_schema":
        np.savez(path, a=np.zeros(3))
    elif kind == "wrong_version":
        _rewrite(good, path, schema_version=np.asarray(SCHEMA_VERSION + 1))
    elif kind == "pickled_member":
        _rewrite(good, path, time=np.array([object()], dtype=object))
    elif kind == "bad_shapes":
        _rewrite(good, path, position=np.zeros((2, 2, 3)))
    elif kind == "permission":
        path.write_bytes(raw)
    else:
        raise AssertionError(kind)
    return path


KINDS = ["bad_crc", "bad_deflate", "truncated", "text", "empty", "directory", "missing_keys", "no_schema",
         "wrong_version", "pickled_member", "bad_shapes", "permission"]
EXPECT = {   # a word the message must contain, so each case gets its own explanation
    "bad_crc": "corrupted", "bad_deflate": "corrupted", "truncated": "corrupted", "text": "text file",
    "empty": "empty", "directory": "directory", "missing_keys": "missing fields",
    "no_schema": "schema_version",
    "wrong_version": f"schema version {SCHEMA_VERSION + 1}", "pickled_member": "corrupted",
    "bad_shapes": "shape", "permission": "permission denied",
}


def _deny(monkeypatch, path: pathlib.Path) -> None:
    """Make ``path`` unreadable: chmod 000, and (as root, who ignores modes) Path.open raising EACCES."""
    path.chmod(0)
    real_open = pathlib.Path.open

    def guarded(self, *args, **kwargs):
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "open", guarded)


def _one_clean_line(err: str, path: pathlib.Path) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert str(path) in lines[0], err
    assert "Traceback" not in err and "allow_pickle" not in err, err
    return lines[0]


@pytest.mark.parametrize("kind", KINDS)
def test_loader_names_the_file_and_the_problem(kind, good, tmp_path, monkeypatch):
    path = make_broken(kind, good, tmp_path)
    if kind == "permission":
        _deny(monkeypatch, path)
    with pytest.raises(TrajectoryFormatError) as info:
        load_trajectory(path)
    msg = str(info.value)
    assert msg.startswith(str(path)) and "\n" not in msg, msg
    assert EXPECT[kind] in msg, msg


@pytest.mark.parametrize("command", ["info", "view", "compare_a", "compare_b"])
@pytest.mark.parametrize("kind", KINDS)
def test_commands_report_a_broken_trajectory_in_one_line(kind, command, good, tmp_path, monkeypatch, capsys):
    path = make_broken(kind, good, tmp_path)
    if kind == "permission":
        _deny(monkeypatch, path)
    argv = {"info": ["info", str(path)], "view": ["view", str(path), "--html", str(tmp_path / "v.html")],
            "compare_a": ["compare", str(path), str(good)],
            "compare_b": ["compare", str(good), str(path)]}[command]
    assert main(argv) == EXIT_USAGE
    line = _one_clean_line(capsys.readouterr().err, path)
    assert EXPECT[kind] in line, line
    assert not (tmp_path / "v.html").exists()


def test_missing_trajectory_is_exit_2_naming_the_file(tmp_path, capsys):
    missing = tmp_path / "nope.npz"
    for argv in (["info", str(missing)], ["compare", str(missing), str(missing)],
                 ["view", str(missing), "--html", str(tmp_path / "x.html")]):
        assert main(argv) == EXIT_USAGE
        assert "not found" in _one_clean_line(capsys.readouterr().err, missing)


SCENE_KINDS = ["binary", "empty", "comments_only", "directory", "permission", "missing", "invalid_yaml"]


def make_broken_scene(kind: str, tmp: pathlib.Path) -> pathlib.Path:
    path = tmp / f"{kind}.yaml"
    if kind == "binary":
        path.write_bytes(b"name: x\n\xff\xfe\x00garbage")
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "comments_only":
        path.write_text("# just a header\n\n", encoding="utf-8")
    elif kind == "directory":
        path.mkdir()
    elif kind == "permission":
        path.write_text("bodies: []\n", encoding="utf-8")
    elif kind == "invalid_yaml":
        path.write_text("name: x\nbodies: [\n", encoding="utf-8")
    return path


SCENE_EXPECT = {"binary": "not a text (YAML) file", "empty": "empty", "comments_only": "empty",
                "directory": "directory", "permission": "permission denied", "missing": "no file",
                "invalid_yaml": "invalid YAML"}


@pytest.mark.parametrize("command", ["run", "validate"])
@pytest.mark.parametrize("kind", SCENE_KINDS)
def test_broken_scene_files_are_one_line_exit_2(kind, command, tmp_path, monkeypatch, capsys):
    path = make_broken_scene(kind, tmp_path)
    if kind == "permission":
        real = pathlib.Path.read_bytes

        def guarded(self):
            if self == path:
                raise PermissionError(13, "Permission denied", str(self))
            return real(self)

        monkeypatch.setattr(pathlib.Path, "read_bytes", guarded)
    monkeypatch.chdir(tmp_path)
    if command == "run":
        argv = ["run", str(path), "--out", str(tmp_path / "o.npz"), "--quiet"]
    else:
        argv = ["validate", str(path)]
    assert main(argv) == EXIT_USAGE
    line = _one_clean_line(capsys.readouterr().err, path)
    assert SCENE_EXPECT[kind] in line, line
    assert not (tmp_path / "o.npz").exists()


def test_good_files_still_load(good, capsys):
    """The checks must not reject a good file (the tests above would pass for a loader that rejects all)."""
    assert load_trajectory(good).num_frames == 21
    assert main(["info", str(good)]) == 0
    assert main(["compare", str(good), str(good), "--tol", "0"]) == 0
    assert os.path.getsize(good) > 0
