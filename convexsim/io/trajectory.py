"""Trajectory files: one ``.npz`` per run, schema documented in docs/trajectory-format.md.

Frame f (0 <= f < T) is the state at ``time[f]``; frame 0 is the initial state. Solver statistics
and contacts of frame f belong to the step that produced it (frame 0: no solve, no contacts).
Contacts of all frames are flattened: those of frame f are rows
``contact_offsets[f]:contact_offsets[f+1]`` of every ``contact_*`` array.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
import zlib
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from convexsim.errors import InputError
from convexsim.io.atomic import atomic_path

SCHEMA_VERSION = 1
"""Version of the trajectory schema written by this code. Readers reject other versions."""


class TrajectoryFormatError(InputError):
    """A file is not a convexsim trajectory of a supported schema version."""


def _f(*shape):
    return field(default_factory=lambda: np.zeros(shape))


def _i(*shape):
    return field(default_factory=lambda: np.zeros(shape, np.int64))


@dataclass
class Trajectory:
    """A recorded simulation (T frames, B bodies, K contacts over all frames).

    Attributes:
        time: frame times [s], shape (T,).
        body_names: body names, shape (B,).
        position: COM positions in W [m], shape (T, B, 3).
        quaternion: orientations R_WB (w, x, y, z), shape (T, B, 4).
        linear_velocity: COM velocities in W [m/s], shape (T, B, 3).
        angular_velocity: angular velocities in W [rad/s], shape (T, B, 3).
        solver_iterations: Newton iterations (SAP) or Lemke pivots (LCP) of the step, shape (T,).
        solver_converged: whether the step's solve succeeded, shape (T,).
        momentum_residual: SAP relative momentum residual r/s at exit (0 for LCP), shape (T,).
        line_search_evaluations: SAP line-search evaluations of the step, shape (T,).
        contact_offsets: contacts of frame f are rows offsets[f]:offsets[f+1], shape (T+1,).
        contact_body_a: body index of A, shape (K,).
        contact_body_b: body index of B, shape (K,).
        contact_point: contact point in W [m], shape (K, 3).
        contact_normal: unit normal from A into B in W, shape (K, 3).
        contact_phi: signed distance at the start of the step [m], shape (K,).
        contact_force: average force on B over the step (γ/dt) in W [N]; A receives the opposite,
            shape (K, 3).
        constraint_force_names: F names of joint and body-constraint forces (StepInfo.named_forces keys:
            ``actuator:<joint>``, ``limit:<joint>``, ``constraint:<name>``), shape (F,); empty without trees
            and constraints, and in files written before these fields existed.
        constraint_force: those forces per frame (the step that produced it; 0 for frame 0), shape
            (T, F, 6): actuators, limits, distances and couplers in column 0 [N·m or N], welds (force on
            body_b [N], torque on body_b [N·m]) in W; unused columns 0.
        scene_yaml: the fully resolved scene as YAML text.
        solver_kind: "sap" or "lcp".
        contact_model: "sap", "lagged", "similar" (SAP) or "rigid" (LCP).
        time_step: dt [s].
        failure: empty, or the message of the error that stopped the run early.
        metadata: free-form JSON-serializable dict (software versions, wall time, command line).
    """

    time: np.ndarray = _f(0)
    body_names: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype="<U1"))
    position: np.ndarray = _f(0, 0, 3)
    quaternion: np.ndarray = _f(0, 0, 4)
    linear_velocity: np.ndarray = _f(0, 0, 3)
    angular_velocity: np.ndarray = _f(0, 0, 3)
    solver_iterations: np.ndarray = _i(0)
    solver_converged: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    momentum_residual: np.ndarray = _f(0)
    line_search_evaluations: np.ndarray = _i(0)
    contact_offsets: np.ndarray = _i(1)
    contact_body_a: np.ndarray = _i(0)
    contact_body_b: np.ndarray = _i(0)
    contact_point: np.ndarray = _f(0, 3)
    contact_normal: np.ndarray = _f(0, 3)
    contact_phi: np.ndarray = _f(0)
    contact_force: np.ndarray = _f(0, 3)
    constraint_force_names: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype="<U1"))
    constraint_force: np.ndarray | None = None
    scene_yaml: str = ""
    solver_kind: str = "sap"
    contact_model: str = "sap"
    time_step: float = 0.0
    failure: str = ""
    metadata: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.constraint_force is None:
            self.constraint_force = np.zeros((self.time.shape[0], self.constraint_force_names.shape[0], 6))

    def forces_of(self, name: str) -> np.ndarray:
        """The (T, 6) rows of one named force (``constraint_force_names``; KeyError listing them)."""
        hits = np.flatnonzero(self.constraint_force_names == name)
        if hits.size == 0:
            raise KeyError(f"no force named {name!r}; forces: {', '.join(map(str, self.constraint_force_names))}")
        return self.constraint_force[:, int(hits[0])]

    @property
    def num_frames(self) -> int:
        """T."""
        return int(self.time.shape[0])

    @property
    def num_bodies(self) -> int:
        """B."""
        return int(self.body_names.shape[0])

    @property
    def duration(self) -> float:
        """time[-1] - time[0] [s] (0 for fewer than two frames)."""
        return float(self.time[-1] - self.time[0]) if self.num_frames > 1 else 0.0

    def contacts_at(self, frame: int) -> dict[str, np.ndarray]:
        """The contact arrays of one frame, keyed without the ``contact_`` prefix."""
        a, b = int(self.contact_offsets[frame]), int(self.contact_offsets[frame + 1])
        return {
            "body_a": self.contact_body_a[a:b],
            "body_b": self.contact_body_b[a:b],
            "point": self.contact_point[a:b],
            "normal": self.contact_normal[a:b],
            "phi": self.contact_phi[a:b],
            "force": self.contact_force[a:b],
        }

    def body_index(self, name: str) -> int:
        """Index of the body called ``name`` (KeyError if absent)."""
        hits = np.flatnonzero(self.body_names == name)
        if hits.size == 0:
            import difflib

            names = [str(n) for n in self.body_names]
            close = difflib.get_close_matches(str(name), names, n=1)
            mean = f" (did you mean {close[0]!r}?)" if close else ""
            shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
            raise KeyError(f"no body named {name!r}{mean}; bodies: {shown}")
        return int(hits[0])

    def validate(self) -> None:
        """Check shapes and offsets; raise TrajectoryFormatError naming the bad field."""
        T, B = self.num_frames, self.num_bodies
        expect = {
            "position": (T, B, 3),
            "quaternion": (T, B, 4),
            "linear_velocity": (T, B, 3),
            "angular_velocity": (T, B, 3),
            "solver_iterations": (T,),
            "solver_converged": (T,),
            "momentum_residual": (T,),
            "line_search_evaluations": (T,),
            "contact_offsets": (T + 1,),
            "constraint_force": (T, self.constraint_force_names.shape[0], 6),
        }
        for name, shape in expect.items():
            got = getattr(self, name).shape
            if got != shape:
                raise TrajectoryFormatError(f"field {name!r} has shape {got}, expected {shape}")
        offsets = _as_int64(self.contact_offsets)
        K = int(offsets[-1]) if T + 1 == offsets.shape[0] else -1
        if np.any(np.diff(offsets) < 0) or offsets[0] != 0:
            raise TrajectoryFormatError("field 'contact_offsets' must start at 0 and be non-decreasing")
        for name, tail in (("contact_body_a", ()), ("contact_body_b", ()), ("contact_point", (3,)),
                           ("contact_normal", (3,)), ("contact_phi", ()), ("contact_force", (3,))):
            got = getattr(self, name).shape
            if got != (K, *tail):
                raise TrajectoryFormatError(f"field {name!r} has shape {got}, expected {(K, *tail)}")


_ARRAY_FIELDS = [f.name for f in fields(Trajectory) if f.name not in
                 ("scene_yaml", "solver_kind", "contact_model", "time_step", "failure", "metadata")]
_OPTIONAL_FIELDS = ("constraint_force_names", "constraint_force")   # absent in older files: no forces


def save_trajectory(path: str | os.PathLike, traj: Trajectory, *, compress: bool = True) -> Path:
    """Write ``traj`` to ``path`` (npz) atomically; return the path.

    The file holds every array field of ``Trajectory`` under its name, plus ``schema_version``
    (int), ``scene_yaml``, ``solver_kind``, ``contact_model``, ``failure`` (0-d strings),
    ``time_step`` (0-d float) and ``metadata_json`` (0-d string).
    """
    traj.validate()
    path = Path(path)
    arrays = {name: np.asarray(getattr(traj, name)) for name in _ARRAY_FIELDS}
    arrays["body_names"] = np.asarray(traj.body_names, dtype=str)
    arrays["schema_version"] = np.asarray(SCHEMA_VERSION, dtype=np.int64)
    arrays["scene_yaml"] = np.asarray(traj.scene_yaml)
    arrays["solver_kind"] = np.asarray(traj.solver_kind)
    arrays["contact_model"] = np.asarray(traj.contact_model)
    arrays["failure"] = np.asarray(traj.failure)
    arrays["time_step"] = np.asarray(float(traj.time_step))
    arrays["metadata_json"] = np.asarray(json.dumps(traj.metadata, default=str))
    buf = io.BytesIO()
    (np.savez_compressed if compress else np.savez)(buf, **arrays)
    with atomic_path(path) as tmp:
        tmp.write_bytes(buf.getvalue())
    return path


_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


def load_trajectory(path: str | os.PathLike) -> Trajectory:
    """Read a trajectory file.

    Raises:
        FileNotFoundError: no such file.
        TrajectoryFormatError: anything else, with a one-line message that starts with the path: a
            directory, an unreadable file, an empty file, a file that is not an npz archive, a corrupted
            archive (bad CRC, bad compressed data, truncated), a missing field, an unsupported schema
            version, or fields of inconsistent shapes.
    """
    path = Path(path)
    if path.is_dir():
        raise TrajectoryFormatError(f"{path}: is a directory, not a trajectory file")
    if not path.exists():
        raise FileNotFoundError(f"trajectory file not found: {path}")
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise TrajectoryFormatError(f"{path}: cannot read: {(exc.strerror or str(exc)).lower()}") from None
    if not head:
        raise TrajectoryFormatError(f"{path}: the file is empty, not a trajectory")
    if head not in _ZIP_MAGIC:
        kind = "a text file" if _looks_like_text(path) else "not an npz (zip) archive"
        raise TrajectoryFormatError(f"{path}: not a trajectory file ({kind}; trajectories are .npz files "
                                    "written by `convexsim run` or save_trajectory)")
    try:
        return _read_npz(path)
    except TrajectoryFormatError:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, KeyError, TypeError,
            IndexError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        if "allow_pickle" in reason:     # numpy's hint to load pickles unsafely is not advice to give users
            raise TrajectoryFormatError(f"{path}: corrupted or not a convexsim trajectory: a field holds "
                                        "pickled Python objects, which convexsim never writes and will not "
                                        "load") from None
        raise TrajectoryFormatError(f"{path}: corrupted or unreadable trajectory file "
                                    f"({type(exc).__name__}: {reason})") from None


def _looks_like_text(path: Path) -> bool:
    """True when the first KB of ``path`` decodes as UTF-8 without NUL bytes."""
    try:
        with path.open("rb") as fh:
            chunk = fh.read(1024)
        chunk.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return b"\0" not in chunk


# The schema every file is checked against (docs/trajectory-format.md): per array field, the dtype kinds
# allowed (numpy ``dtype.kind``: f float, i/u integer, b bool, U str), the shape in the dimensions T (frames),
# B (bodies), K (contacts), F (named forces), and whether every value must be finite.
_FLOAT, _INT, _BOOL, _STR = "f", "iu", "b", "U"
ARRAY_SCHEMA: dict[str, tuple[str, tuple, bool]] = {
    "time": (_FLOAT + _INT, ("T",), True),
    "body_names": (_STR, ("B",), False),
    "position": (_FLOAT, ("T", "B", 3), True),
    "quaternion": (_FLOAT, ("T", "B", 4), True),
    "linear_velocity": (_FLOAT, ("T", "B", 3), True),
    "angular_velocity": (_FLOAT, ("T", "B", 3), True),
    "solver_iterations": (_INT, ("T",), False),
    "solver_converged": (_BOOL, ("T",), False),
    "momentum_residual": (_FLOAT, ("T",), False),      # NaN/inf allowed: the residual of a failed solve
    "line_search_evaluations": (_INT, ("T",), False),
    "contact_offsets": (_INT, ("T+1",), False),
    "contact_body_a": (_INT, ("K",), False),
    "contact_body_b": (_INT, ("K",), False),
    "contact_point": (_FLOAT, ("K", 3), True),
    "contact_normal": (_FLOAT, ("K", 3), True),
    "contact_phi": (_FLOAT, ("K",), True),
    "contact_force": (_FLOAT, ("K", 3), True),
    "constraint_force_names": (_STR, ("F",), False),
    "constraint_force": (_FLOAT, ("T", "F", 6), True),
}
"""Array fields of a trajectory file: (dtype kinds, shape, finite). ``load_trajectory`` refuses a file whose
field has another dtype, ndim or shape, a non-finite value where ``finite``, contact offsets that do not
start at 0 or decrease, or contact body indices outside 0..B-1."""

_KIND_NAMES = {"f": "float", "i": "integer", "u": "integer", "b": "bool", "U": "string"}
SOLVER_KINDS = ("sap", "lcp")
CONTACT_MODELS = ("sap", "lagged", "similar", "rigid")


def _describe_dtype(arr: np.ndarray) -> str:
    return f"{_KIND_NAMES.get(arr.dtype.kind, 'other')} ({arr.dtype.str})"


def _as_int64(arr: np.ndarray) -> np.ndarray:
    """An integer array as int64 (unsigned values above int64's range become negative, which the checks
    refuse)."""
    return np.asarray(arr).astype(np.int64, casting="unsafe", copy=False)


def _check_array(name: str, arr: np.ndarray, dims: dict[str, int]) -> None:
    """Raise TrajectoryFormatError (without the path) if ``arr`` breaks ARRAY_SCHEMA[name]."""
    kinds, shape, finite = ARRAY_SCHEMA[name]
    if arr.dtype.kind not in kinds:
        allowed = " or ".join(sorted({_KIND_NAMES[k] for k in kinds}))
        raise TrajectoryFormatError(f"field {name!r} holds {_describe_dtype(arr)} values, expected {allowed}")
    expect = tuple(dims[d] if isinstance(d, str) else d for d in shape)
    if arr.shape != expect:
        names = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
        raise TrajectoryFormatError(f"field {name!r} has shape {arr.shape}, expected {names} = {expect}")
    if finite and arr.size and not np.isfinite(arr).all():
        bad = np.argwhere(~np.isfinite(arr))[0]
        where = "[" + ", ".join(map(str, bad)) + "]"
        raise TrajectoryFormatError(f"field {name!r} holds a non-finite value ({arr[tuple(bad)]} at {where})")


def _scalar(data, name: str, kinds: str):
    """The 0-d field ``name`` as a Python value; TrajectoryFormatError naming it otherwise."""
    arr = data[name]
    if arr.shape != () or arr.dtype.kind not in kinds:
        allowed = " or ".join(sorted({_KIND_NAMES[k] for k in kinds}))
        raise TrajectoryFormatError(f"field {name!r} must be a single {allowed} (0-d array); got "
                                    f"{_describe_dtype(arr)} of shape {arr.shape}")
    return arr.item()


def check_arrays(arrays: dict[str, np.ndarray]) -> None:
    """Check the array fields of a trajectory file against ``ARRAY_SCHEMA`` (optional fields may be absent);
    TrajectoryFormatError naming the first bad field."""
    for name in ("time", "body_names", "constraint_force_names"):
        arr = arrays.get(name)
        if arr is not None and arr.ndim != 1:
            raise TrajectoryFormatError(f"field {name!r} has shape {arr.shape}, expected a 1-d array")
    T = arrays["time"].shape[0]
    if T == 0:
        raise TrajectoryFormatError("field 'time' is empty: a trajectory holds at least its initial frame")
    dims = {"T": T, "T+1": T + 1, "B": arrays["body_names"].shape[0],
            "F": arrays["constraint_force_names"].shape[0] if "constraint_force_names" in arrays else 0}
    _check_array("contact_offsets", arrays["contact_offsets"], dims)
    # as int64 before any arithmetic: in a narrower or unsigned integer type the differences wrap around (uint8:
    # 4 − 255 = 5), so decreasing offsets would pass the check below and break every frame's contact rows
    offsets = arrays["contact_offsets"] = _as_int64(arrays["contact_offsets"])
    if offsets[0] != 0 or np.any(np.diff(offsets) < 0):
        raise TrajectoryFormatError("field 'contact_offsets' must start at 0 and be non-decreasing")
    dims["K"] = int(offsets[-1])
    for name in ARRAY_SCHEMA:
        if name in arrays and name != "contact_offsets":
            _check_array(name, arrays[name], dims)
    for name in ("contact_body_a", "contact_body_b"):
        idx = arrays[name]
        if idx.size and (idx.min() < 0 or idx.max() >= dims["B"]):
            raise TrajectoryFormatError(f"field {name!r} holds body index {int(idx.min() if idx.min() < 0 else idx.max())}"
                                        f" outside 0..{dims['B'] - 1}")


def _read_npz(path: Path) -> Trajectory:
    """Read and check the arrays of an npz trajectory (errors of the zip/zlib layers propagate)."""
    with np.load(path, allow_pickle=False) as data:
        if "schema_version" not in data.files:
            raise TrajectoryFormatError(f"{path}: no 'schema_version' field: not a convexsim trajectory")
        sv = data["schema_version"]
        if sv.shape != () or sv.dtype.kind not in "iu":
            raise TrajectoryFormatError(f"{path}: 'schema_version' is not an integer: "
                                        "not a convexsim trajectory")
        version = int(sv)
        if version != SCHEMA_VERSION:
            raise TrajectoryFormatError(
                f"{path}: trajectory schema version {version} is not supported "
                f"(this convexsim reads version {SCHEMA_VERSION})")
        required = _ARRAY_FIELDS + ["scene_yaml", "solver_kind", "contact_model", "failure", "time_step"]
        required = [n for n in required if n not in _OPTIONAL_FIELDS]
        missing = [n for n in required if n not in data.files]
        if missing:
            raise TrajectoryFormatError(f"{path}: missing fields {missing}")
        kwargs = {name: data[name] for name in _ARRAY_FIELDS if name in data.files}
        try:
            check_arrays(kwargs)
            kwargs["scene_yaml"] = _scalar(data, "scene_yaml", _STR)
            kwargs["solver_kind"] = _scalar(data, "solver_kind", _STR)
            kwargs["contact_model"] = _scalar(data, "contact_model", _STR)
            kwargs["failure"] = _scalar(data, "failure", _STR)
            kwargs["time_step"] = float(_scalar(data, "time_step", _FLOAT + _INT))
            meta_text = _scalar(data, "metadata_json", _STR) if "metadata_json" in data.files else "{}"
        except TrajectoryFormatError as exc:
            raise TrajectoryFormatError(f"{path}: {exc}") from None
    if kwargs["solver_kind"] not in SOLVER_KINDS:
        raise TrajectoryFormatError(f"{path}: field 'solver_kind' is {_clip(kwargs['solver_kind'])!r}, expected one "
                                    f"of {', '.join(SOLVER_KINDS)}")
    if kwargs["contact_model"] not in CONTACT_MODELS:
        raise TrajectoryFormatError(f"{path}: field 'contact_model' is {_clip(kwargs['contact_model'])!r}, expected "
                                    f"one of {', '.join(CONTACT_MODELS)}")
    if not (np.isfinite(kwargs["time_step"]) and kwargs["time_step"] >= 0):
        raise TrajectoryFormatError(f"{path}: field 'time_step' is {kwargs['time_step']}, expected a finite "
                                    "number of seconds >= 0")
    if kwargs["scene_yaml"].strip():
        _check_scene_yaml(path, kwargs["scene_yaml"])
    try:
        meta = json.loads(meta_text)
    except ValueError as exc:
        raise TrajectoryFormatError(f"{path}: field 'metadata_json' is not JSON ({exc})") from None
    traj = Trajectory(**kwargs, metadata=meta if isinstance(meta, dict) else {})
    try:
        traj.validate()
    except TrajectoryFormatError as exc:
        raise TrajectoryFormatError(f"{path}: {exc}") from None
    return traj


def _check_scene_yaml(path: Path, text: str) -> None:
    """``scene_yaml`` is YAML (within the scene reader's limits: no alias bombs, recursion or deep nesting) of a
    mapping; whether it is a valid scene is for the commands that compile it (view, identify) to say."""
    from convexsim.scene.load import SceneError, parse_scene_yaml   # pydantic, yaml: only for a file with a scene

    try:
        data, _ = parse_scene_yaml(text, "scene_yaml")
    except SceneError as exc:
        raise TrajectoryFormatError(f"{path}: field 'scene_yaml': {exc.problems[0]}") from None
    if not isinstance(data, dict):
        raise TrajectoryFormatError(f"{path}: field 'scene_yaml' does not hold a scene (a YAML mapping)")


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
