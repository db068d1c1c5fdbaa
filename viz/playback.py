"""Recorded playback: trajectories -> one meshcat animation (bodies, contact points, force arrows).

Everything is expressed as lowered meshcat commands (dicts), which the live server and the
standalone export send identically. One ``set_animation`` holds one clip per animated node; track
arrays are packed as Float32Array msgpack extensions (4 bytes a number, not 9).

Frames. The animation time of frame f is ``time[f] − t0`` (t0: the earliest first time of all
trajectories); the overlay shows ``t0 + animator.time``. Frames are subsampled to at most
``max_fps`` per second of simulated time and to at most ``max_body_frames`` (moving bodies × frames)
per trajectory; the first and the last frame are always kept, so the animation's duration equals the
trajectory's duration ``time[-1] − time[0]``. Within each sampling interval the frame with the largest
contact force is kept (ties: the earliest), so a one-step impact is never thinned away.

Contacts (per trajectory, a pre-allocated pool, since animations cannot create objects):
slot k of frame f shows the k-th contact of that frame by decreasing |f|, among contacts that
touch (φ ≤ 0) or carry a force above the threshold; at most ``max_contacts`` slots. Slot node
``prefix/contacts/c<k>`` has discrete ``position`` and ``visible`` tracks and a small sphere (the
contact point); its child ``force`` has discrete ``quaternion`` (rotation taking +y to f/|f|),
``scale`` ([1, L, 1], L = min(|f|·force_scale, R) [m]) and ``visible`` (|f| > force_threshold) tracks over a
unit-length arrow (shaft 0.75, cone 0.25 along +y). The arrow starts at the contact point and shows
the force on body B (the contact normal points from A into B); A receives the opposite. Markers are
drawn on top of the bodies (no depth test), since most arrows start inside or under a body.

Scale (one rule, shared with the live viewer): force_scale = 0.25·R / f_ref [m/N] rounded to the
nearest 1-2-5 value (so the legend can say "arrow length: 5 mm per N"), R the scene's bounding radius
and f_ref the weight m·|g| of the heaviest moving body (so a body resting on one contact draws about a
quarter of the scene); without gravity f_ref is the 98th percentile of the nonzero |f| (live: 1 N).
force_threshold = 1e-3·f_ref [N]. Arrows are capped at length R (an impact of thousands of newtons
would otherwise draw an arrow many times the scene). The legend says all three in plain words
(``force_legend``).

Layout (``layout``): "overlay" draws the runs in place (the second and later translucent and tinted),
"offset" side by side; "auto" (the default) picks offset when the runs agree to the eye (largest
body-position difference below AGREE_FRACTION of the scene radius: overlaid, they would be
indistinguishable) or are runs of different scenes, else overlay. Later runs' arrows are thinner, so
coinciding arrows of two runs both show.

Camera follow (``follow``): "auto" follows the moving bodies' horizontal centroid when framing the whole
recording would make them small (the recording's bounding radius exceeds FOLLOW_RATIO × the radius of
the bodies around their centroid); "centroid" always; a body name follows that body; "off" never. It is
a position track on the content root ``/meshcat`` (meshcat 0.3.2 cannot move the camera's target).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import umsgpack

from convexsim.errors import InputError
from convexsim.io.trajectory import Trajectory
from convexsim.model import Model

from . import draw
from ._math import make_sign_continuous, quat_from_y_to, translation_matrix, wxyz_to_xyzw

INTERPOLATE_DISCRETE = 2300
INTERPOLATE_LINEAR = 2301

ARROW_COLORS = ["#1f9e3a", "#1f6fd1", "#c22f9d", "#e0720b"]
"""Contact marker colour per trajectory; the bodies of the second and later runs are tinted with it."""

COLOR_NAMES = ["green", "blue", "magenta", "orange"]
"""Names of ARROW_COLORS, for the legend."""

OVERLAY_OPACITY = 0.35
"""Opacity factor of the second and later trajectories in the overlay layout."""

TINT_WEIGHT = 0.55
"""How far the second and later runs' body colours are blended toward their run colour."""

REFERENCE_ARROW = 0.25
"""Arrow length of the reference force f_ref, as a fraction of the scene radius R."""

AGREE_FRACTION = 0.05
"""layout="auto": runs whose bodies never differ by more than this fraction of the scene radius are shown
side by side (overlaid they would hide each other)."""

FOLLOW_RATIO = 2.0
"""follow="auto": follow when the whole recording is more than this many times the bodies' own extent."""

ARROW_RADIUS_FACTORS = [1.0, 0.55, 0.4, 0.3]
"""Arrow thickness per run (relative): a later run's arrow inside an earlier one's leaves both visible."""


def nice_scale(x: float) -> float:
    """``x`` > 0 rounded to the nearest (in log) of 1, 2, 5 × 10^k; 0 for x <= 0."""
    if not (x > 0 and np.isfinite(x)):
        return 0.0
    e = np.floor(np.log10(x))
    cands = [m * 10.0 ** (e + d) for d in (-1, 0, 1) for m in (1.0, 2.0, 5.0)]
    return float(min(cands, key=lambda c: abs(np.log(c / x))))


def _num(v: float) -> str:
    """Two significant digits, plainly: 0.0098, 2.6, 52, 150, 4,000; a million and more, and inf or nan, as
    "1.5e+07", "inf" (a legend of a run with forces near the float limit divides by a scale near zero)."""
    if 10 <= v < 1e6:
        return f"{round(v, 1 - int(np.floor(np.log10(v)))):,.0f}"
    return f"{v:.2g}"


def length_text(m: float) -> str:
    """A length [m] in mm, cm or m, rounded: 0.005 -> "5 mm", 0.3 -> "30 cm", 2 -> "2 m"."""
    if m < 0.01:
        return f"{_num(m * 1000)} mm"
    if m < 1.0:
        return f"{_num(m * 100)} cm"
    return f"{_num(m)} m"


def force_text(f: float) -> str:
    """A force [N], rounded: 0.0098 -> "0.0098 N", 60 -> "60 N", 3972 -> "3.97 kN"."""
    if f >= 1000:
        return f"{_num(f / 1000)} kN"
    return f"{f:.2g} N" if f < 0.1 else f"{_num(f)} N"


def force_legend(scale: float, threshold: float, max_length: float) -> str:
    """The arrow scale in plain words, e.g. "arrow length: 5 mm per N, at most 30 cm (60 N and more); no
    arrow below 0.0098 N". ``scale`` [m/N] is shown per N when that is at least 1 mm and at most 1 m,
    else per a power of ten of newtons ("1 cm per 100 N", "10 cm per 0.1 N")."""
    if scale <= 0:
        return ""
    per = 1.0
    if scale < 1e-3:
        while scale * per < 1e-2 * (1 - 1e-9):
            per *= 10.0
    elif scale > 1.0:
        while scale * per > 1.0 * (1 + 1e-9):
            per /= 10.0
    unit = "N" if per == 1.0 else ("kN" if per == 1000.0 else force_text(per))
    text = f"arrow length: {length_text(scale * per)} per {unit}"
    if np.isfinite(max_length):
        text += f", at most {length_text(max_length)} ({force_text(max_length / scale)} and more)"
    else:
        text += ", not capped"
    if threshold > 0:
        text += f"; no arrow below {force_text(threshold)}"
    return text


def max_position_difference(a: Trajectory, b: Trajectory) -> float:
    """Largest |p_a(t) − p_b(t)| over bodies and a's frames (b interpolated linearly; frames outside b's time
    span compare with b's end) [m]; inf if the bodies differ."""
    if [str(n) for n in a.body_names] != [str(n) for n in b.body_names]:
        return float("inf")
    if b.num_frames == 1:
        pb = np.broadcast_to(b.position[0], a.position.shape)
    else:
        tb = np.asarray(b.time, dtype=np.float64)
        pb = np.empty_like(a.position)
        for k in range(3):
            for j in range(a.num_bodies):
                pb[:, j, k] = np.interp(a.time, tb, b.position[:, j, k])
    return float(np.max(np.linalg.norm(a.position - pb, axis=2))) if a.num_bodies else 0.0


def resolve_layout(layout: str, trajectories: Sequence[Trajectory], radius: float) -> str:
    """"overlay" or "offset" for ``layout`` ("auto": offset when the runs agree within AGREE_FRACTION·radius
    or are not runs of one scene, else overlay)."""
    if layout not in ("auto", "overlay", "offset"):
        raise InputError(f"layout must be 'auto', 'overlay' or 'offset', got {layout!r}")
    if layout != "auto":
        return layout
    trajs = list(trajectories)
    if len(trajs) < 2:
        return "overlay"
    if len({scene_name(t) for t in trajs}) > 1:
        return "offset"
    diff = max(max_position_difference(trajs[0], t) for t in trajs[1:])
    return "offset" if diff <= AGREE_FRACTION * radius else "overlay"


def side_by_side_step(bounds: draw.Bounds) -> np.ndarray:
    """The shift [m] between two runs drawn side by side (layout "offset"), for a run that spans ``bounds``:
    along x as the default camera sees it (along y when the run is more than twice as long in x), by
    1.15 × its extent along that axis + 0.1 R, so that the runs never overlap."""
    ext = bounds.hi - bounds.lo
    axis = 1 if ext[0] > 2.0 * ext[1] else 0
    step = np.zeros(3)
    step[axis] = 1.15 * ext[axis] + 0.1 * bounds.radius
    return step


def hex_to_rgb(color: str) -> np.ndarray:
    v = int(color.lstrip("#"), 16)
    return np.array([(v >> 16) & 255, (v >> 8) & 255, v & 255], dtype=np.float64) / 255.0


def rgb_to_css(rgb) -> str:
    return "#" + "".join(f"{int(round(255 * float(np.clip(c, 0, 1)))):02x}" for c in tuple(rgb)[:3])


def weight_reference(models: Sequence[Model]) -> float:
    """The reference force of the arrow scale: the largest weight m·|g| of a moving body [N] (0 if none)."""
    best = 0.0
    for m in models:
        moving = ~np.asarray(m.body_fixed, dtype=bool)
        if moving.any():
            best = max(best, float(np.max(np.asarray(m.body_mass)[moving])) * float(np.linalg.norm(m.gravity)))
    return best


@dataclass
class PlaybackOptions:
    """How trajectories are turned into an animation (see module docstring for the defaults)."""

    labels: Sequence[str] | None = None
    layout: str = "auto"
    offset: Sequence[float] | None = None
    force_scale: float | None = None
    force_threshold: float | None = None
    show_contacts: bool = True
    max_contacts: int = 300
    max_fps: float = 60.0
    max_body_frames: int = 100_000
    autoplay: bool = True
    loop: bool = True
    title: str | None = None
    follow: str = "auto"
    joint_frames: bool = False
    forces: str = "auto"
    """Force arrows: "capped" (every contact, length |f|·force_scale capped at R), "scaled" (every
    contact, not capped), "top" (only the TOP_ARROWS largest forces of each frame, capped), "off" (contact
    points only), "auto" (capped, or top when a frame has more than MANY_CONTACTS contacts to show)."""


FORCE_MODES = ("auto", "capped", "scaled", "top", "off")

MANY_CONTACTS = 40
"""forces="auto": above this many contacts in a frame, arrows are drawn for the largest forces only."""

TOP_ARROWS = 12
"""forces="top": the arrows of this many largest forces per frame (and no other contact marker)."""


TOP_REFERENCE = 0.15
"""forces="top": the 95th percentile of the contact forces draws this fraction of the scene radius."""

TOP_CAP = 0.3
"""forces="top": arrows are capped at this fraction of the scene radius."""


@dataclass
class Playback:
    """Commands to send (in order) and a summary of what was built."""

    commands: list[dict] = field(default_factory=list)
    info: dict = field(default_factory=dict)
    duration: float = 0.0
    frames: list[int] = field(default_factory=list)
    paths: dict = field(default_factory=dict)


# ------------------------------------------------------------------------------------ helpers
def f32(a) -> umsgpack.Ext:
    """A Float32Array msgpack extension (type 0x17, as meshcat's viewer decodes it)."""
    return umsgpack.Ext(0x17, np.ascontiguousarray(np.asarray(a, dtype="<f4")).tobytes())


def track(name: str, jstype: str, times, values, interpolation: int | None = None, *,
          t_end: float | None = None) -> dict:
    """A three.js KeyframeTrack JSON (times in seconds, values flattened).

    With ``t_end`` later than the last key, the last value is held until ``t_end``: every clip of
    an animation then has the same duration, so looping stays in step (a clip of duration 0, e.g. a
    contact slot that is never used, would otherwise make three.js's looping time NaN).
    """
    times = np.asarray(times, dtype=np.float64)
    values = list(values) if jstype == "boolean" else np.asarray(values, dtype=np.float64)
    if t_end is not None and t_end > times[-1]:
        times = np.append(times, t_end)
        if jstype == "boolean":
            values = values + [values[-1]]
        else:
            values = np.concatenate([values, values[-1:]], axis=0)
    t = {"name": "." + name, "type": jstype, "times": f32(times)}
    if jstype == "boolean":
        t["values"] = [bool(v) for v in values]
    else:
        t["values"] = f32(np.asarray(values, dtype=np.float64).ravel())
    if interpolation is not None:
        t["interpolation"] = interpolation
    return t


def clip(path: str, tracks: list[dict]) -> dict:
    """One entry of ``set_animation``'s animation list (times are in seconds: fps = 1)."""
    return {"path": path, "clip": {"fps": 1, "name": "default", "tracks": tracks}}


def frame_peak_force(traj: Trajectory) -> np.ndarray:
    """Largest contact force magnitude of each frame [N], shape (T,) (0 for a frame without contacts)."""
    T = traj.num_frames
    out = np.zeros(T)
    offsets = np.asarray(traj.contact_offsets, dtype=np.int64)
    if T == 0 or offsets[-1] == 0:
        return out
    mag = np.linalg.norm(traj.contact_force, axis=1)
    counts = np.diff(offsets)
    nonempty = np.flatnonzero(counts > 0)
    out[nonempty] = np.maximum.reduceat(mag, offsets[nonempty])
    return out


def sample_frames(time: np.ndarray, max_fps: float, n_moving: int, max_body_frames: int,
                  priority: np.ndarray | None = None) -> np.ndarray:
    """Indices of the frames to show, at most about fps per simulated second,
    fps = min(max_fps, budget/(n_moving·duration)).

    The time axis is cut into intervals of ≥ 1/fps (greedily, from frame 0); each interval is shown by
    its frame of largest ``priority`` (e.g. the peak contact force, so an impact survives the thinning;
    ties and no priority: its first frame, then the spacing is ≥ 1/fps). Frame 0 and the last frame are
    always included.
    """
    T = int(time.shape[0])
    if T <= 2:
        return np.arange(T)
    duration = float(time[-1] - time[0])
    fps = float(max_fps)
    if n_moving > 0 and duration > 0:
        fps = min(fps, max(max_body_frames / (n_moving * duration), 2.0 / duration))
    min_dt = (1.0 / fps) * (1.0 - 1e-9)
    keep = [0]
    for i in range(1, T - 1):
        if time[i] - time[keep[-1]] >= min_dt:
            keep.append(i)
    keep.append(T - 1)
    keep = np.array(keep, dtype=np.int64)
    if priority is None:
        return keep
    priority = np.asarray(priority, dtype=np.float64)
    starts = keep[:-1]
    # argmax of each interval [keep[j], keep[j+1]) (first maximum: ties keep the interval's start).
    best = [int(a + np.argmax(priority[a:b])) for a, b in zip(starts, keep[1:])]
    return np.unique(np.concatenate([[0], best, [T - 1]])).astype(np.int64)


def _flatten(d, prefix: str = "") -> dict:
    out = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}{k}."))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            out.update(_flatten(v, f"{prefix}{i}."))
    else:
        out[prefix[:-1]] = d
    return out


def scene_differences(trajectories: Sequence[Trajectory], max_keys: int = 2) -> list[str]:
    """Per trajectory, "key=value" of the (at most ``max_keys``) scene settings that differ between
    them (e.g. "materials.default.stiffness=100000.0"); empty strings if none or too many differ."""
    import yaml

    try:
        flat = [_flatten(yaml.safe_load(t.scene_yaml) or {}) for t in trajectories]
    except yaml.YAMLError:
        return [""] * len(trajectories)
    keys = sorted({k for f in flat for k in f})
    differ = [k for k in keys if len({repr(f.get(k)) for f in flat}) > 1
              and not k.startswith("solver.kind") and k != "contact_model"]
    if not differ or len(differ) > max_keys:
        return [""] * len(trajectories)
    return [", ".join(f"{k.split('.')[-1] if len(differ) == 1 else k}={f.get(k)}" for k in differ) for f in flat]


def scene_name(traj: Trajectory) -> str:
    """The ``name`` of the trajectory's scene ("" if none)."""
    import yaml

    try:
        data = yaml.safe_load(traj.scene_yaml) or {}
    except yaml.YAMLError:
        return ""
    return str(data.get("name", "")) if isinstance(data, dict) else ""


def run_label(solver_kind: str, contact_model: str) -> str:
    """"SAP (lagged)" / "LCP": how the pages name a run of a solver."""
    return solver_kind.upper() + (f" ({contact_model})" if solver_kind == "sap" else "")


def default_labels(trajectories: Sequence[Trajectory]) -> list[str]:
    """"SAP (lagged)", "LCP", …; runs with the same solver get the scene setting that differs
    ("SAP (sap) stiffness=1e5"), or " #k"; runs of different scenes are prefixed with the scene name."""
    bases = [run_label(t.solver_kind, t.contact_model) for t in trajectories]
    names = [scene_name(t) for t in trajectories]
    if len(set(names)) > 1:
        bases = [f"{n}: {b}" if n else b for n, b in zip(names, bases)]
    if len(set(bases)) < len(bases):
        diffs = scene_differences(trajectories)
        bases = [f"{b} {d}".strip() for b, d in zip(bases, diffs)]
    return numbered_labels(bases)


def numbered_labels(bases: Sequence[str]) -> list[str]:
    """``bases`` with a repeated label numbered ("LCP", "LCP #2", ...), so that every run's label is unique."""
    out: list[str] = []
    for base in bases:
        label, k = base, 2
        while label in out:
            label, k = f"{base} #{k}", k + 1
        out.append(label)
    return out


def unique_node_names(labels: Sequence[str]) -> list[str]:
    names: list[str] = []
    for lab in labels:
        base, k = draw.node_name(lab), 2
        name = base
        while name in names:
            name, k = f"{base}_{k}", k + 1
        names.append(name)
    return names


def model_for(traj: Trajectory) -> Model:
    """Compile the trajectory's own scene (``scene_yaml``)."""
    if not traj.scene_yaml.strip():
        raise InputError("the trajectory holds no scene (scene_yaml is empty): cannot draw its geometry")
    from convexsim.scene import compile_scene, scene_from_yaml

    model, _ = compile_scene(scene_from_yaml(traj.scene_yaml))
    return model


def check_comparable(trajectories: Sequence[Trajectory], names: Sequence[str], layout: str) -> None:
    """Raise ValueError if runs of different scenes (other scene name or other bodies) would be overlaid
    (``names`` name the runs in the message, e.g. file names); with ``layout="offset"`` they are allowed
    (side by side; "auto" picks it for them). Runs of one scene with other parameters (solver, stiffness,
    …) keep its name."""
    if layout in ("offset", "auto") or len(trajectories) < 2:
        return
    first = [str(n) for n in trajectories[0].body_names]
    a = scene_name(trajectories[0]) or "?"
    for traj, name in zip(trajectories[1:], names[1:]):
        other = [str(n) for n in traj.body_names]
        b = scene_name(traj) or "?"
        if other != first or a != b:
            what = "their bodies differ" if other != first else "their scene names differ"
            raise InputError(
                f"{names[0]} (scene {a!r}, {len(first)} bodies) and {name} (scene {b!r}, {len(other)} bodies) "
                f"are not runs of the same scene ({what}), so they cannot be overlaid; "
                f"use --layout offset (layout=\"offset\") to show them side by side")


def check_same_bodies(model: Model, traj: Trajectory, label: str) -> None:
    names = [str(n) for n in traj.body_names]
    if list(model.body_names) != names:
        raise InputError(f"trajectory {label!r}: its bodies {names[:5]}… do not match the scene's "
                         f"{list(model.body_names)[:5]}…")


def moving_mask(traj: Trajectory, frames: np.ndarray) -> np.ndarray:
    """Bodies whose pose changes over the sampled frames, shape (B,)."""
    p = traj.position[frames]
    q = traj.quaternion[frames]
    return (np.ptp(p, axis=0).max(axis=1) > 0) | (np.ptp(q, axis=0).max(axis=1) > 0)


# ----------------------------------------------------------------------------- contact pools
def marker_material(color: str):
    """Contact-marker material: drawn on top of everything (no depth test, rendered in the
    transparent pass after the opaque bodies), so arrows inside or under bodies stay visible."""
    import meshcat.geometry as mg

    return mg.MeshLambertMaterial(color=int(color.lstrip("#"), 16), opacity=0.9, depthTest=False)


def arrow_objects(color: str, radius: float):
    """Unit-length arrow along +y (shaft 0.75, cone 0.25): [(name, obj, T)]."""
    import meshcat.geometry as mg

    mat = marker_material(color)
    shaft = mg.Mesh(mg.Cylinder(0.75, radius=radius), mat)
    head = mg.Mesh(mg.Cylinder(0.25, radiusTop=0.0, radiusBottom=2.5 * radius), mat)
    return [("shaft", shaft, translation_matrix([0.0, 0.375, 0.0])),
            ("head", head, translation_matrix([0.0, 0.875, 0.0]))]


def point_object(color: str, radius: float):
    """Contact-point sphere."""
    import meshcat.geometry as mg

    return mg.Mesh(mg.Sphere(radius), marker_material(color))


def max_shown_contacts(traj: Trajectory, force_threshold: float) -> int:
    """The most contacts one frame of ``traj`` would draw (touching, or carrying more than the threshold)."""
    offsets = np.asarray(traj.contact_offsets, dtype=np.int64)
    if offsets[-1] == 0:
        return 0
    shown = (np.linalg.norm(traj.contact_force, axis=1) > force_threshold) | (np.asarray(traj.contact_phi) <= 0.0)
    c = np.concatenate([[0], np.cumsum(shown, dtype=np.int64)])
    counts = c[offsets[1:]] - c[offsets[:-1]]
    return int(counts.max()) if counts.size else 0


def _changes(values: np.ndarray) -> np.ndarray:
    """Indices where a discrete sequence changes (always includes 0)."""
    v = np.asarray(values)
    return np.concatenate([[0], np.flatnonzero(v[1:] != v[:-1]) + 1]).astype(np.int64)


def contact_pool_commands(traj: Trajectory, frames: np.ndarray, times: np.ndarray, prefix: str, *,
                          t_end: float, color: str, force_scale: float, force_threshold: float, radius: float,
                          max_contacts: int, max_length: float = np.inf, arrows: bool = True,
                          points: bool = True) -> tuple[list[dict], list[dict], int, int]:
    """(objects, clips, pool size, contacts dropped) for the contact slots of one trajectory.

    Arrow lengths are |f|·force_scale, clamped at ``max_length`` [m].
    """
    per_frame = []
    dropped = 0
    for f in frames:
        a, b = int(traj.contact_offsets[f]), int(traj.contact_offsets[f + 1])
        force = traj.contact_force[a:b]
        mag = np.linalg.norm(force, axis=1)
        idx = np.flatnonzero((mag > force_threshold) | (traj.contact_phi[a:b] <= 0.0))
        idx = idx[np.argsort(-mag[idx], kind="stable")]
        dropped = max(dropped, max(idx.size - max_contacts, 0))
        idx = idx[:max_contacts]
        per_frame.append((traj.contact_point[a:b][idx], force[idx], mag[idx]))
    n = len(frames)
    pool = max((pf[0].shape[0] for pf in per_frame), default=0)
    # Slot arrays, (frames, slots, ·): slot k of frame j is the k-th shown contact of that frame.
    active_all = np.zeros((n, pool), bool)
    arrow_all = np.zeros((n, pool), bool)
    pos_all = np.zeros((n, pool, 3))
    quat_all = np.tile([0.0, 0.0, 0.0, 1.0], (n, pool, 1))
    scale_all = np.ones((n, pool, 3))
    for j, (pts, frc, mag) in enumerate(per_frame):
        m = pts.shape[0]
        if m == 0:
            continue
        active_all[j, :m] = True
        arrow_all[j, :m] = mag > force_threshold
        pos_all[j, :m] = pts
        quat_all[j, :m] = wxyz_to_xyzw(quat_from_y_to(frc))
        scale_all[j, :m, 1] = np.clip(mag * force_scale, 1e-9, max_length)
    objects: list[dict] = []
    clips: list[dict] = []
    for k in range(pool):
        slot = f"{prefix}/contacts/c{k}"
        if points:
            objects.append(draw.cmd_object(f"{slot}/point", point_object(color, 2.0 * radius)))
        if arrows:
            for name, obj, T in arrow_objects(color, radius):
                objects.append(draw.cmd_object(f"{slot}/force/{name}", obj))
                objects.append(draw.cmd_transform(f"{slot}/force/{name}", T))
        active, arrow_on = active_all[:, k], arrow_all[:, k]
        pos, quat, scale = pos_all[:, k], quat_all[:, k], scale_all[:, k]
        keys = np.flatnonzero(active)
        if keys.size == 0:
            keys = np.array([0])
        ch = _changes(active)
        clips.append(clip(slot, [
            track("position", "vector3", times[keys], pos[keys], INTERPOLATE_DISCRETE, t_end=t_end),
            track("visible", "boolean", times[ch], active[ch], t_end=t_end),
        ]))
        if not arrows:
            objects.append(draw.cmd_property(slot, "visible", bool(active[0])))
            continue
        akeys = np.flatnonzero(arrow_on)
        if akeys.size == 0:
            akeys = np.array([0])
        ach = _changes(arrow_on)
        clips.append(clip(f"{slot}/force", [
            track("quaternion", "quaternion", times[akeys], quat[akeys], INTERPOLATE_DISCRETE, t_end=t_end),
            track("scale", "vector3", times[akeys], scale[akeys], INTERPOLATE_DISCRETE, t_end=t_end),
            track("visible", "boolean", times[ach], arrow_on[ach], t_end=t_end),
        ]))
        # Hidden until the animation says otherwise (a browser without the animation shows nothing odd).
        objects.append(draw.cmd_property(slot, "visible", bool(active[0])))
    return objects, clips, pool, dropped


def shift_text(d) -> str:
    """"0.45 m to the right" for a shift along +x (as the default camera sees it), else "(x, y, z) m"."""
    d = np.asarray(d, dtype=np.float64)
    nz = np.flatnonzero(np.abs(d) > 1e-12)
    words = {(0, 1): "to the right", (0, -1): "to the left", (1, 1): "further back", (1, -1): "closer",
             (2, 1): "higher", (2, -1): "lower"}
    if nz.size == 1:
        k = int(nz[0])
        return f"{length_text(abs(d[k]))} {words[(k, 1 if d[k] > 0 else -1)]}"
    return "(" + ", ".join(f"{x:.3g}" for x in d) + ") m"


def follow_view(follow: str, models, trajs, frames, shifts, bounds: draw.Bounds, t0: float,
                t_end: float) -> tuple[draw.Bounds, dict | None]:
    """(bounds the camera frames, animation clip of the content root or None) for the ``follow`` option.

    The followed point c(t) is the horizontal centroid of the first run's moving bodies (or the named
    body), plus the mean run shift; the view then frames the bodies' extent around c(t) (over all frames
    and runs), and the root ``/meshcat`` is moved by −(c_x(t), c_y(t), z_view) at the first run's frames.
    """
    if follow == "off":
        return bounds, None
    t, fr = trajs[0], frames[0]
    moving = moving_mask(t, fr) if len(fr) > 1 else np.zeros(t.num_bodies, bool)
    if follow in ("auto", "centroid"):
        if not moving.any():
            return bounds, None
        c = t.position[fr][:, moving].mean(axis=1)
    else:
        c = t.position[fr][:, [str(n) for n in t.body_names].index(follow)]
    c = c + np.mean(shifts, axis=0)
    c[:, 2] = 0.0
    rel = None
    for mi, ti, fi, sh in zip(models, trajs, frames, shifts):
        ci = np.stack([np.interp(ti.time[fi], t.time[fr], c[:, k]) for k in range(3)], axis=1)
        b = draw.bounds_of_positions(mi, ti.position[fi] + sh - ci[:, None, :])
        rel = b if rel is None else rel.union(b)
    if follow == "auto" and bounds.radius <= FOLLOW_RATIO * rel.radius:
        return bounds, None
    z = rel.center[2]
    target = np.column_stack([c[:, 0] + rel.center[0], c[:, 1] + rel.center[1], np.full(len(fr), z)])
    view = rel.shifted(c[0])                     # centre = target at the first frame
    times = t.time[fr] - t0
    root = track("position", "vector3", times, -target, INTERPOLATE_LINEAR, t_end=t_end)
    return view, clip("/meshcat", [root])


# ------------------------------------------------------------------------------------- build
def build_playback(trajectories: Sequence[Trajectory], options: PlaybackOptions | None = None, *,
                   models: Sequence[Model] | None = None) -> Playback:
    """Commands drawing ``trajectories`` (same scene) and one animation of all of them.

    Args:
        trajectories: one or more recorded runs of the same scene (runs whose bodies differ are
            refused unless ``layout="offset"``: then they are shown side by side).
        options: PlaybackOptions (labels, layout "overlay" | "offset", offset [m], force scale [m/N]
            and threshold [N], contacts on/off, frame budget, autoplay, loop, title).
        models: compiled scene per trajectory (default: compiled from each ``scene_yaml``).

    Raises:
        ValueError: empty list, bad layout or labels, bodies that do not match the scene, runs of
            different scenes overlaid.
    """
    opts = options or PlaybackOptions()
    trajs = list(trajectories)
    if not trajs:
        raise InputError("nothing to show: no trajectory given")
    if any(t.num_bodies == 0 for t in trajs):
        raise InputError("nothing to show: a trajectory of a scene without bodies")
    if opts.layout not in ("auto", "overlay", "offset"):
        raise InputError(f"layout must be 'auto', 'overlay' or 'offset', got {opts.layout!r}")
    if opts.forces not in FORCE_MODES:
        raise InputError(f"forces must be one of {', '.join(FORCE_MODES)}, got {opts.forces!r}")
    labels = list(opts.labels) if opts.labels is not None else default_labels(trajs)
    if len(labels) != len(trajs):
        raise InputError(f"{len(labels)} labels for {len(trajs)} trajectories")
    if models is None:
        models = [model_for(t) for t in trajs]
    models = list(models)
    if len(models) == 1 and len(trajs) > 1:
        models = models * len(trajs)
    for m, t, lab in zip(models, trajs, labels):
        check_same_bodies(m, t, lab)
        if t.num_frames == 0:
            raise InputError(f"trajectory {lab!r} has no frames")
    check_comparable(trajs, [repr(lab) for lab in labels], opts.layout)
    named = [str(n) for n in trajs[0].body_names]
    if opts.follow not in ("auto", "centroid", "off") and opts.follow not in named:
        raise InputError(f"follow must be 'auto', 'centroid', 'off' or a body name, got {opts.follow!r}")
    same_scene = len({tuple(map(str, t.body_names)) for t in trajs}) == 1 and len({scene_name(t) for t in trajs}) == 1
    names = unique_node_names(labels)
    prefixes = [f"/meshcat/{n}" for n in names]

    frames = []
    for m, t in zip(models, trajs):
        all_frames = np.arange(t.num_frames)
        n_moving = int(moving_mask(t, all_frames).sum()) if t.num_frames > 1 else 0
        frames.append(sample_frames(t.time, opts.max_fps, n_moving, opts.max_body_frames,
                                    priority=frame_peak_force(t) if opts.show_contacts else None))
    t0 = min(float(t.time[0]) for t in trajs)
    t_end = max(float(t.time[fr[-1]]) for t, fr in zip(trajs, frames)) - t0

    # Layout and bounds.
    bounds0 = [draw.bounds_of_positions(m, t.position[fr]) for m, t, fr in zip(models, trajs, frames)]
    layout = resolve_layout(opts.layout, trajs, bounds0[0].radius)
    if opts.offset is not None:
        step = np.asarray(opts.offset, dtype=np.float64).reshape(3)
    else:
        step = side_by_side_step(bounds0[0])
    shifts = [(i * step if layout == "offset" else np.zeros(3)) for i in range(len(trajs))]
    bounds = bounds0[0].shifted(shifts[0])
    for b, s in zip(bounds0[1:], shifts[1:]):
        bounds = bounds.union(b.shifted(s))
    R = bounds.radius

    mags = np.concatenate([np.linalg.norm(t.contact_force, axis=1) for t in trajs])
    mags = mags[mags > 0]
    # Reference force (the rule the live viewer uses too): the heaviest moving body's weight, so a body
    # resting on one contact draws REFERENCE_ARROW·R; without gravity the 98th percentile of |f|.
    f_ref = weight_reference(models)
    if f_ref <= 0:
        f_ref = float(np.percentile(mags, 98)) if mags.size else 0.0
    force_scale = (opts.force_scale if opts.force_scale is not None
                   else nice_scale(REFERENCE_ARROW * R / f_ref) if f_ref > 0 else 0.0)
    force_threshold = opts.force_threshold if opts.force_threshold is not None else 1e-3 * f_ref
    # forces="auto": every contact's arrow while that stays readable, else the largest ones only.
    busiest = max(max_shown_contacts(t, force_threshold) for t in trajs) if opts.show_contacts else 0
    forces = opts.forces
    if forces == "auto":
        forces = "top" if busiest > MANY_CONTACTS else "capped"
    show_arrows = opts.show_contacts and forces != "off"
    max_arrow = R if forces != "scaled" else np.inf   # clamp: a 4 kN impact must not draw a 57 m arrow
    if forces == "top":
        # A pile: the largest forces carry many bodies' weight, so one body's weight would cap them all at R.
        # Scale on the largest forces instead (95th percentile: TOP_REFERENCE·R) and cap at TOP_CAP·R.
        max_arrow = TOP_CAP * R
        if opts.force_scale is None and mags.size:
            force_scale = nice_scale(TOP_REFERENCE * R / float(np.percentile(mags, 95)))
    f_peak = float(mags.max()) if mags.size else 0.0
    marker_radius = max(0.006 * R, 5e-4)

    pb = Playback()
    cmds = pb.commands
    clips: list[dict] = []
    legend = []
    any_ground = False
    for i, (m, t, fr, prefix, label) in enumerate(zip(models, trajs, frames, prefixes, labels)):
        opacity = OVERLAY_OPACITY if (layout == "overlay" and i > 0) else 1.0
        color = ARROW_COLORS[i % len(ARROW_COLORS)]
        tint_weight = TINT_WEIGHT if i > 0 else 0.0
        draw_ground = i == 0 or not same_scene
        any_ground |= draw_ground and draw.has_halfspace(m)
        q_first = np.concatenate([t.position[0], t.quaternion[0]], axis=1)
        cmds += draw.model_commands(m, prefix, q_first, opacity=opacity, draw_halfspaces=draw_ground,
                                    bounds=bounds.shifted(-shifts[i]), tint=hex_to_rgb(color),
                                    tint_weight=tint_weight, joint_frames=opts.joint_frames)
        cmds.append(draw.cmd_transform(prefix, translation_matrix(shifts[i])))
        times = t.time[fr] - t0
        moving = moving_mask(t, fr) if len(fr) > 1 else np.zeros(t.num_bodies, bool)
        pb.paths[label] = {"prefix": prefix, "moving": [str(t.body_names[b]) for b in np.flatnonzero(moving)]}
        quats = wxyz_to_xyzw(make_sign_continuous(t.quaternion[fr][:, moving])) if moving.any() else None
        for i_m, b in enumerate(np.flatnonzero(moving)):
            path = f"{prefix}/bodies/{draw.node_name(t.body_names[b])}"
            quat = quats[:, i_m]
            clips.append(clip(path, [
                track("position", "vector3", times, t.position[fr, b], INTERPOLATE_LINEAR, t_end=t_end),
                track("quaternion", "quaternion", times, quat, INTERPOLATE_LINEAR, t_end=t_end),
            ]))
        note_parts = []
        # How this run's BODIES look (they carry the scene's colours, so the swatch shows the first
        # moving body's colour as drawn for this run) and its contact-marker colour.
        body_text = "solid" if opacity == 1.0 else f"translucent ({opacity:.0%})"
        if tint_weight > 0:
            body_text += f", tinted {COLOR_NAMES[i % len(COLOR_NAMES)]}"
        if layout == "offset" and i > 0:
            body_text += ", shifted by " + shift_text(shifts[i])
        elif len(trajs) > 1:
            body_text += ", in place"
        moving_geoms = [g for g in range(m.ngeom) if not m.body_fixed[int(m.geom_body[g])]]
        base_rgba = m.geom_color[moving_geoms[0]] if moving_geoms else np.array([0.6, 0.6, 0.6, 1.0])
        body_css = rgb_to_css(draw.tinted(base_rgba, hex_to_rgb(color), tint_weight)[:3])
        has_contacts = opts.show_contacts and int(t.contact_offsets[-1]) > 0
        if opts.show_contacts and int(t.contact_offsets[-1]) > 0:
            objs, cclips, pool, dropped = contact_pool_commands(
                t, fr, times, prefix, t_end=t_end, color=color, force_scale=force_scale, force_threshold=force_threshold,
                radius=marker_radius * ARROW_RADIUS_FACTORS[min(i, len(ARROW_RADIUS_FACTORS) - 1)],
                max_contacts=TOP_ARROWS if forces == "top" else opts.max_contacts, max_length=max_arrow,
                arrows=show_arrows, points=forces != "top")
            cmds += objs
            clips += cclips
            pb.paths[label]["contact_slots"] = pool
            if dropped and forces != "top":
                note_parts.append(f"{dropped} smallest contacts per frame not drawn")
        if t.failure:
            note_parts.append("stopped early: " + (t.failure if len(t.failure) < 80 else t.failure[:77] + "…"))
        legend.append({"label": label, "swatch": color, "opacity": opacity,
                       "body": {"color": body_css, "opacity": opacity, "text": "bodies " + body_text},
                       "marker": ({"color": color, "text": f"contacts {COLOR_NAMES[i % len(COLOR_NAMES)]}"}
                                  if has_contacts else None),
                       "note": ("(" + "; ".join(note_parts) + ")") if note_parts else ""})
        pb.frames.append(len(fr))
        pb.duration = max(pb.duration, float(t.time[fr[-1]] - t0))

    view, follow_clip = follow_view(opts.follow, models, trajs, frames, shifts, bounds, t0, t_end)
    cmds += draw.camera_commands(view, hide_stock_grid=any_ground)
    if follow_clip is not None:
        clips.append(follow_clip)
    dts = np.concatenate([np.diff(t.time[fr]) for t, fr in zip(trajs, frames)])
    title = opts.title or (models[0].name + (" — " + " vs ".join(labels) if len(trajs) > 1 else f" — {labels[0]}"))
    notes = []
    if not same_scene:
        notes.append("different scenes, side by side")
    if opts.show_contacts and forces == "top":
        notes.append(f"{busiest} contacts in the busiest frame: arrows for the {TOP_ARROWS} largest forces "
                     "of each frame only" + (" (--forces capped: every contact)" if opts.forces == "auto" else ""))
    elif opts.show_contacts and forces == "off":
        notes.append("contact points only, no force arrows")
    if force_scale > 0 and show_arrows:
        notes.append(force_legend(force_scale, force_threshold, max_arrow)
                     + (f" (largest force: {force_text(f_peak)})" if f_peak * force_scale > max_arrow else ""))
    recorded = sum(t.num_frames for t in trajs)
    if sum(pb.frames) < recorded:
        notes.append(f"{sum(pb.frames)} of the {recorded} recorded frames shown "
                     f"(at most {opts.max_fps:g} per simulated second and {opts.max_body_frames:,} body-frames)")
    if follow_clip is not None:
        notes.append("camera follows " + ("the moving bodies" if opts.follow in ("auto", "centroid")
                                          else opts.follow))
    pb.info = {"title": title, "legend": legend, "t0": t0, "duration": pb.duration,
               "frame_dt": float(np.median(dts)) if dts.size else 1.0 / 30.0,
               "autoplay": bool(opts.autoplay), "note": "; ".join(notes),
               "force_scale": force_scale, "force_threshold": force_threshold, "max_arrow": max_arrow,
               "force_reference": f_ref, "layout": layout, "following": follow_clip is not None,
               "forces": forces if opts.show_contacts else "off", "busiest_frame_contacts": busiest}
    cmds.append(draw.cmd_property("/convexsim_info", "convexsim", pb.info))
    if clips and t_end > 0:
        cmds.append({"type": "set_animation", "path": "", "animations": clips,
                     "options": {"play": True, "repetitions": float("inf") if opts.loop else 1}})
    return pb
