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

from convexsim.io.atomic import atomic_path

SCHEMA_VERSION = 1
"""Version of the trajectory schema written by this code. Readers reject other versions."""


class TrajectoryFormatError(ValueError):
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
        K = int(self.contact_offsets[-1]) if T + 1 == self.contact_offsets.shape[0] else -1
        if np.any(np.diff(self.contact_offsets) < 0) or self.contact_offsets[0] != 0:
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


def _read_npz(path: Path) -> Trajectory:
    """Read and check the arrays of an npz trajectory (errors of the zip/zlib layers propagate)."""
    with np.load(path, allow_pickle=False) as data:
        if "schema_version" not in data.files:
            raise TrajectoryFormatError(f"{path}: no 'schema_version' field: not a convexsim trajectory")
        try:
            version = int(data["schema_version"])
        except (TypeError, ValueError):
            raise TrajectoryFormatError(f"{path}: 'schema_version' is not an integer: "
                                        "not a convexsim trajectory") from None
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
        kwargs["scene_yaml"] = str(data["scene_yaml"])
        kwargs["solver_kind"] = str(data["solver_kind"])
        kwargs["contact_model"] = str(data["contact_model"])
        kwargs["failure"] = str(data["failure"])
        kwargs["time_step"] = float(data["time_step"])
        meta = json.loads(str(data["metadata_json"])) if "metadata_json" in data.files else {}
    traj = Trajectory(**kwargs, metadata=meta if isinstance(meta, dict) else {})
    try:
        traj.validate()
    except TrajectoryFormatError as exc:
        raise TrajectoryFormatError(f"{path}: {exc}") from None
    return traj
