"""The run loop: scene -> trajectory, with recording, progress and failure handling.

``simulate`` never loses what it recorded: a step that fails (NaN state, a solver failure in strict
mode, an LCP ray) ends the run, and the trajectory returned holds every frame recorded before it,
with ``failure`` set to the error message (step, time, what).
"""

from __future__ import annotations

import dataclasses
import math
import platform
import sys
import threading
import time as _time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from convexsim.errors import InputError
from convexsim.io.trajectory import Trajectory
from convexsim._kernel_clock import KernelClock
from convexsim.model import Model, State
from convexsim.stepping import ConvergenceWarning, SimulationError, StepInfo

if TYPE_CHECKING:
    from convexsim.stepping.context import StepContext

# Imported where they are used, not here: a run of the compiled loop needs ``stepping.compiled`` only (numba
# and its kernels, loaded when the run starts, so that ``prepare`` and the scene tools load no numba), not
# the reference and LCP steppers, the step context or the multibody package (tests/cli/test_startup_imports).

StepCallback = Callable[[Model, State, StepInfo], None]


@dataclass(frozen=True)
class ForceBlock:
    """The named joint forces of ``values.shape[0]`` consecutive frames: column j is ``names[j]`` (one
    number per name, e.g. ``actuator:<joint>``), as the compiled run loop records them."""

    names: tuple
    values: np.ndarray


@dataclass
class Recorder:
    """Accumulates frames of a run (every ``record_every`` steps, plus frame 0 and the last step).

    Per-frame lists (one entry per frame), except ``contact_rows`` (tuples of row arrays, in frame order,
    ``sum(contact_counts)`` rows in all); ``forces``: a dict per frame (``StepInfo.named_forces``). The
    Python loop's recorder; the compiled run loop records into :class:`RunFrames`."""

    model: Model
    frames_t: list[float] = field(default_factory=list)
    frames_q: list[np.ndarray] = field(default_factory=list)
    frames_v: list[np.ndarray] = field(default_factory=list)
    iterations: list[int] = field(default_factory=list)
    converged: list[bool] = field(default_factory=list)
    residual: list[float] = field(default_factory=list)
    ls_evals: list[int] = field(default_factory=list)
    contact_counts: list[int] = field(default_factory=list)
    contact_rows: list[tuple[np.ndarray, ...]] = field(default_factory=list)
    forces: list = field(default_factory=list)

    def record(self, state: State, info: StepInfo | None) -> None:
        """Append one frame; ``info`` is the step that produced ``state`` (None for the initial frame)."""
        if info is None:
            info = StepInfo()
        c = info.contacts
        rows = None
        if c.count:
            force = info.force_world if info.force_world.shape[0] == c.count else np.zeros((c.count, 3))
            rows = (c.body_a, c.body_b, c.point, c.normal, c.phi, force)
        self.append_frame(state.t, state.q.copy(), state.v.copy(), info.iterations, info.converged,
                          info.momentum_residual, info.line_search_evaluations, c.count, rows)
        self.forces[-1] = info.named_forces()

    def append_frame(self, t: float, q: np.ndarray, v: np.ndarray, iterations: int, converged: bool,
                     residual: float, ls_evals: int, count: int, rows: tuple | None) -> None:
        """Append one frame from its parts (q, v are kept, not copied); ``rows`` = (body_a, body_b, point,
        normal, phi, force) of its ``count`` contacts, None when there are none."""
        self.frames_t.append(t)
        self.frames_q.append(q)
        self.frames_v.append(v)
        self.iterations.append(int(iterations))
        self.converged.append(bool(converged))
        self.residual.append(float(residual))
        self.ls_evals.append(int(ls_evals))
        self.contact_counts.append(int(count))
        if count:
            self.contact_rows.append(rows)
        self.forces.append({})

    def force_frames(self) -> int:
        """Number of frames ``forces`` covers (one dict per frame)."""
        return len(self.forces)

    def to_trajectory(self, *, scene_yaml: str, solver_kind: str, contact_model: str,
                      failure: str = "", metadata: Mapping[str, Any] | None = None) -> Trajectory:
        """Pack the frames into a ``Trajectory``."""
        nf = len(self.frames_t)                 # not -1: a scene without bodies has 0-sized frames
        rows = self.contact_rows
        cat = (lambda i, shape: np.concatenate([r[i] for r in rows]) if rows else np.zeros(shape))
        return _trajectory(self.model, np.array(self.frames_t, dtype=float),
                           np.array(self.frames_q).reshape(nf, self.model.nbody, 7),
                           np.array(self.frames_v).reshape(nf, self.model.nbody, 6), np.array(self.iterations),
                           np.array(self.converged, dtype=bool), np.array(self.residual, dtype=float),
                           np.array(self.ls_evals), np.array(self.contact_counts, dtype=np.int64),
                           (cat(0, (0,)), cat(1, (0,)), cat(2, (0, 3)), cat(3, (0, 3)), cat(4, (0,)), cat(5, (0, 3))),
                           self.forces, scene_yaml=scene_yaml, solver_kind=solver_kind,
                           contact_model=contact_model, failure=failure, metadata=metadata)


def _trajectory(model: Model, t: np.ndarray, q: np.ndarray, v: np.ndarray, iterations: np.ndarray,
                converged: np.ndarray, residual: np.ndarray, ls_evals: np.ndarray, counts: np.ndarray,
                rows: tuple, forces: list, *, scene_yaml: str, solver_kind: str, contact_model: str, failure: str,
                metadata: Mapping[str, Any] | None) -> Trajectory:
    """The Trajectory of nf frames: t (nf,), q (nf, nbody, 7), v (nf, nbody, 6), the solver's per-frame
    counts (nf,), contacts per frame ``counts`` (nf,) and their rows (body_a, body_b, point, normal, φ,
    force; frame after frame), ``forces``: the named forces of the frames (:func:`_force_array`)."""
    nf = t.shape[0]
    force_values, names = _force_array(forces, nf)
    return Trajectory(
        time=t, body_names=np.array(model.body_names, dtype=str),
        position=q[:, :, :3].copy(), quaternion=q[:, :, 3:7].copy(),
        linear_velocity=v[:, :, 3:].copy(), angular_velocity=v[:, :, :3].copy(),
        solver_iterations=iterations.astype(np.int64), solver_converged=converged,
        momentum_residual=residual, line_search_evaluations=ls_evals.astype(np.int64),
        contact_offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        contact_body_a=rows[0].astype(np.int64), contact_body_b=rows[1].astype(np.int64),
        contact_point=rows[2], contact_normal=rows[3], contact_phi=rows[4], contact_force=rows[5],
        constraint_force_names=np.array(names, dtype=str), constraint_force=force_values,
        scene_yaml=scene_yaml, solver_kind=solver_kind, contact_model=contact_model,
        time_step=model.time_step, failure=failure, metadata=dict(metadata or {}))


def _force_array(forces: list, nf: int) -> tuple[np.ndarray, list]:
    """((nf, nnames, 6) named joint and constraint forces per frame, the names) from ``forces``: a dict per
    frame (``StepInfo.named_forces``) or a :class:`ForceBlock` per run of frames, in frame order; the names
    in the order they first appear."""
    names = list(dict.fromkeys(k for f in forces for k in (f.names if isinstance(f, ForceBlock) else f)))
    col = {n: i for i, n in enumerate(names)}
    out = np.zeros((nf, len(names), 6))
    t = 0
    for f in forces:
        if isinstance(f, ForceBlock):
            n = min(f.values.shape[0], nf - t)
            if n > 0 and f.names:
                out[t:t + n, [col[k] for k in f.names], 0] = f.values[:n]
            t += f.values.shape[0]
            continue
        if t < nf:
            for k, val in f.items():
                out[t, col[k], :val.size] = val
        t += 1
    return out, names


class RunConvergenceWarning(ConvergenceWarning):
    """The one warning a run issues at its first non-converged step (the rest are counted in RunStats)."""


class SlowPathWarning(UserWarning):
    """A run or a scripted step loop takes the Python reference step (not the compiled one) without being
    asked to: issued once per run or ``Simulation``, with the reason and the cost."""


SLOW_PATH_COST = ("the Python reference step costs about 10-40x the compiled step per step "
                  "(iiwa_push: about 3 ms against 0.09 ms per step)")
"""What taking the Python reference step costs, for the slow-path messages (measured on a 2-core machine,
docs/performance.md)."""


def slow_path_text(reason: str) -> str:
    """The one slow-path message: the reason the compiled step was not taken and what it costs."""
    return f"taking the Python reference step: {reason}; {SLOW_PATH_COST}"


def route_reason(model: Model, ctx: StepContext) -> str:
    """Why a step of ``model`` with ``ctx``'s controls takes the reference path (``dispatch.route``)."""
    from convexsim.stepping import dispatch

    return dispatch.route(model, "auto", controlled=ctx.controlled).reason


def warn_slow_path(path_line: str, stacklevel: int = 3) -> None:
    """Warn (SlowPathWarning) when ``path_line`` (``RunStats.path``) says the run takes the Python path."""
    prefix = "Python path: "
    if path_line.startswith(prefix):
        warnings.warn(slow_path_text(path_line[len(prefix):]), SlowPathWarning, stacklevel=stacklevel)


BLAS_THREADS_ENV = "CONVEXSIM_BLAS_THREADS"
"""Environment variable: the BLAS threads a run uses (a count >= 1; 0 or "default": leave the pools as
they are). Default 1: a step's factorizations are small and gain nothing from threads."""


def blas_threads_setting(threads: int | str | None = None) -> int | None:
    """The BLAS thread count a run limits its pools to (None: no limit): ``threads`` if given, else
    ``CONVEXSIM_BLAS_THREADS``, else 1. ValueError naming the source for anything but a count >= 0 or
    "default"."""
    import os

    source, value = ("blas_threads", threads) if threads is not None else (BLAS_THREADS_ENV,
                                                                          os.environ.get(BLAS_THREADS_ENV, "1"))
    text = str(value).strip().lower()
    if text == "default":
        return None
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0 or isinstance(value, bool):
        raise ValueError(f"{source}: must be a thread count >= 1, or 0 / 'default' to leave the BLAS "
                         f"threads as they are (got {value!r})")
    return n or None


_BLAS_POOLS: list = [-1, None]
"""[len(sys.modules) when the pools were found, their threadpoolctl controller]."""


def blas_pools():
    """The process's BLAS thread pools (a ``threadpoolctl.ThreadpoolController`` of user_api "blas"). Finding them
    walks the loaded shared libraries (≈ 0.7 ms, more than a thousand small steps of a run), so they are found
    once and again only after a module was imported since: a BLAS arrives with the extension module that
    links it (numpy, scipy.linalg, …)."""
    if _BLAS_POOLS[0] != len(sys.modules):
        from threadpoolctl import ThreadpoolController

        _BLAS_POOLS[1] = ThreadpoolController().select(user_api="blas")
        _BLAS_POOLS[0] = len(sys.modules)
    return _BLAS_POOLS[1]


class blas_thread_limit:
    """Within the block, the BLAS pools (OpenBLAS, MKL, BLIS of numpy, scipy and numba's LAPACK) use at
    most ``blas_threads_setting(threads)`` threads (threadpoolctl); restored on exit. Reusable: the pools
    are found once, when the object is made."""

    def __init__(self, threads: int | str | None = None):
        self.threads = blas_threads_setting(threads)
        self._controller = None
        self._limiter = None
        if self.threads is not None:
            ctl = blas_pools()
            if any(lib.num_threads != self.threads for lib in ctl.lib_controllers):
                self._controller = ctl

    def __enter__(self) -> "blas_thread_limit":
        if self._controller is not None:
            self._limiter = self._controller.limit(limits=self.threads)
        return self

    def __exit__(self, *exc) -> None:
        if self._limiter is not None:
            self._limiter.restore_original_limits()
            self._limiter = None


_BLAS_HOLDS: dict[int, list] = {}
"""Thread count -> [its blas_thread_limit, holders]: the pools stay limited while someone holds them."""


def hold_blas_threads(threads: int | str | None = None) -> Callable[[], None]:
    """Limit the BLAS pools as :class:`blas_thread_limit` does, until the returned function is called (for an
    object that steps many times, a ``Simulation``: one limit for its life instead of one per step). Holders
    of the same count share one limit; the pools are restored when the last one lets go."""
    n = blas_threads_setting(threads)
    if n is None:
        return lambda: None
    hold = _BLAS_HOLDS.get(n)
    if hold is None:
        hold = _BLAS_HOLDS[n] = [blas_thread_limit(n).__enter__(), 0]
    hold[1] += 1
    released = []

    def release() -> None:
        if released:
            return
        released.append(True)
        hold[1] -= 1
        if hold[1] == 0 and _BLAS_HOLDS.get(n) is hold:
            del _BLAS_HOLDS[n]
            hold[0].__exit__(None, None, None)

    return release


_PER_STEP_WARNING = r"step \d+ \(t = "
"""The steppers' per-step ConvergenceWarning messages ("step 11 (t = 0.011 s): SAP did not converge …"),
silenced during a run: the run warns once (RunConvergenceWarning) and counts the rest."""


@dataclass
class RunStats:
    """Summary of a run for the CLI and studies. ``ms_per_step`` is (wall time − warm-up) / steps: the
    kernel compilation of a first run (or loading of cached kernels) is reported apart, as ``warmup_s``."""

    steps: int = 0
    wall_time_s: float = 0.0
    iterations: list[int] = field(default_factory=list)
    contacts: list[int] = field(default_factory=list)
    unconverged_steps: int = 0
    line_search_evaluations: int = 0
    warm_started_steps: int = 0
    """LCP steps solved by the warm start (no Lemke pivots, so they count 0 iterations)."""
    warmup_s: float = 0.0
    """Wall time [s] spent compiling numba kernels or loading them from the disk cache during the run;
    not counted in ``ms_per_step``."""
    path: str = ""
    """Which stepper ran: "compiled step" or "Python path: <why the compiled step was not eligible>"."""
    first_unconverged_step: int = -1
    """Step number (``state.step`` before it) of the first step that did not converge; -1 if none."""
    first_unconverged_time: float = math.nan
    worst_residual: float = math.nan
    """Largest SAP momentum residual of the non-converged steps whose residual is known (NaN: none)."""
    start_step: int = 0
    start_time: float = 0.0
    time_step: float = 0.0
    solver_name: str = "SAP"
    warn_first_unconverged: bool = True
    """Issue one ConvergenceWarning at the first non-converged step (the per-step warnings of the
    steppers are silenced during a run; the summary counts them)."""

    def add(self, info: StepInfo) -> None:
        """Account for one step."""
        self.add_counts(info.iterations, info.contacts.count, info.converged, info.line_search_evaluations,
                        residual=getattr(info, "momentum_residual", math.nan), status=info.status)
        self.warm_started_steps += int(getattr(info, "warm_accepted", False))

    def add_counts(self, iterations: int, contacts: int, converged: bool, ls_evals: int, *,
                   residual: float = math.nan, status: str = "") -> None:
        """Account for one step from its counts (``residual``: its momentum residual, if known)."""
        self.steps += 1
        self.iterations.append(int(iterations))
        self.contacts.append(int(contacts))
        self.line_search_evaluations += int(ls_evals)
        if not converged:
            self._unconverged(self.steps - 1, int(iterations), residual, status)

    def add_steps(self, st: np.ndarray, residual: np.ndarray) -> None:
        """Account for n steps at once: ``st`` (n, 4) = (iterations, contacts, converged, line-search
        evaluations) per step (the compiled run loop's rows), ``residual`` (n,) (NaN where not known)."""
        first = self.steps
        self.steps += st.shape[0]
        self.iterations.extend(st[:, 0].tolist())
        self.contacts.extend(st[:, 1].tolist())
        self.line_search_evaluations += int(st[:, 3].sum())
        for i in np.flatnonzero(st[:, 2] == 0).tolist():
            self._unconverged(first + i, int(st[i, 0]), float(residual[i]))

    def _unconverged(self, index: int, iterations: int, residual: float, status: str = "") -> None:
        """Account for the non-converged step ``index`` (0-based in the run)."""
        self.unconverged_steps += 1
        if residual == residual and not residual <= self.worst_residual:    # NaN-aware max
            self.worst_residual = float(residual)
        if self.first_unconverged_step < 0:
            self.first_unconverged_step = self.start_step + index
            self.first_unconverged_time = self.start_time + index * self.time_step
            if self.warn_first_unconverged:
                why = f"{status}, " if status else ""
                res = f", momentum residual {residual:.3g}" if residual == residual else ""
                warnings.warn(f"{self.solver_name} did not converge at step {self.first_unconverged_step} "
                              f"(t = {self.first_unconverged_time:.6g} s; {why}{int(iterations)} iterations{res}); "
                              "the run goes on with the last iterate, later non-converged steps are only "
                              "counted (run summary)", RunConvergenceWarning, stacklevel=3)

    def unconverged_text(self) -> str:
        """"89 steps did not converge (first at step 11, t = 0.011 s; worst momentum residual 0.031)", or ""."""
        n = self.unconverged_steps
        if not n:
            return ""
        text = f"{n} step{'s' if n != 1 else ''} did not converge (first at step {self.first_unconverged_step}"
        if self.first_unconverged_time == self.first_unconverged_time:
            text += f", t = {self.first_unconverged_time:.6g} s"
        if self.worst_residual == self.worst_residual:
            text += f"; worst momentum residual {self.worst_residual:.3g}"
        return text + ")"

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly summary (ms/step, mean/max iterations and contacts)."""
        it = np.array(self.iterations or [0])
        nc = np.array(self.contacts or [0])
        return {
            "steps": self.steps,
            "wall_time_s": self.wall_time_s,
            "warmup_s": self.warmup_s,
            "ms_per_step": 1e3 * max(self.wall_time_s - self.warmup_s, 0.0) / max(self.steps, 1),
            "mean_iterations": float(it.mean()),
            "max_iterations": int(it.max()),
            "mean_contacts": float(nc.mean()),
            "max_contacts": int(nc.max()),
            "unconverged_steps": self.unconverged_steps,
            "first_unconverged_step": self.first_unconverged_step,
            "worst_unconverged_residual": self.worst_residual if self.worst_residual == self.worst_residual else None,
            "path": self.path,
            "line_search_evaluations": self.line_search_evaluations,
            "warm_started_steps": self.warm_started_steps,
        }


def prepare(scene: Any, *, duration: float | None = None, time_step: float | None = None,
            contact_model: str | None = None, solver: str | None = None,
            overrides: Mapping[str, Any] | Iterable[str] | None = None) -> tuple[Model, State, float]:
    """Load (path | shipped scene name | YAML text | dict | SceneSpec; see ``simulate``), apply overrides,
    compile: (model, state, duration).

    The scene is parsed once and validated once (twice with ``overrides``: first the scene as written,
    so that its own problems are reported with line numbers, then with the overrides applied)."""
    from convexsim import scene as scene_pkg

    check_times({"duration argument": duration, "time_step argument": time_step})
    if isinstance(scene, scene_pkg.SceneSpec) and not overrides and all(
            x is None for x in (duration, time_step, contact_model, solver)):
        spec = scene                           # already validated: nothing to change
    else:
        spec = _scene_spec(scene, overrides, {"time_step": time_step, "duration": duration,
                                              "contact_model": contact_model, "solver.kind": solver})
    model, state = scene_pkg.compile_scene(spec)
    return model, state, float(model.duration)


def _scene_spec(scene: Any, overrides: Any, arguments: Mapping[str, Any]) -> Any:
    """The validated SceneSpec of ``scene`` with the user's ``overrides`` and the (already checked)
    keyword ``arguments`` (dotted path -> value, None = not given) applied."""
    from convexsim import scene as scene_pkg

    data, node, source = scene_pkg.read_scene_data(scene, text_source="<string>")
    if overrides:
        if node is not None:                   # the file's own problems first, with line numbers
            with warnings.catch_warnings():    # unit warnings come once, from the final scene
                warnings.simplefilter("ignore", scene_pkg.UnitWarning)
                scene_pkg.scene_from_dict(data, source, _node=node)
        data, node = scene_pkg.apply_overrides(data, overrides), None
    if isinstance(data, dict):   # checked values (times > 0, names from a fixed set): line numbers stay
        data = _with_arguments(data, arguments)
    return scene_pkg.scene_from_dict(data, source, _node=node)


def _with_arguments(data: dict, arguments: Mapping[str, Any]) -> dict:
    """A shallow copy of raw scene ``data`` with top-level keys or ``solver.<key>`` set from ``arguments``
    (None = not given); no deep copy, ``data`` itself is not changed."""
    out = dict(data)
    for path, value in arguments.items():
        if value is None:
            continue
        head, _, key = path.partition(".")
        if not key:
            out[head] = value
        elif out.get(head) is None or isinstance(out[head], dict):
            out[head] = {**(out.get(head) or {}), key: value}
    return out


def check_times(values: Mapping[str, Any]) -> None:
    """Raise InputError naming the first of ``values`` (label → seconds, None = not given) that is not a
    finite number > 0, e.g. ``--duration: must be a finite number of seconds > 0 (got -1)``."""
    for label, value in values.items():
        if value is not None and not _positive_finite(value):
            numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
            shown = f"{float(value):g}" if numeric else repr(value)
            raise InputError(f"{label}: must be a finite number of seconds > 0 (got {shown})")


def plan_steps(duration: float, time_step: float, source: str = "duration",
               time_step_source: str = "") -> tuple[int, str]:
    """(number of steps, note) of a run of ``duration`` [s] at ``time_step`` [s]; the note says how a
    duration that is not a multiple of dt was rounded ('' otherwise). InputError, naming ``source``, when
    the run would take no step."""
    n = step_count(duration, time_step)
    dt_src = f" ({time_step_source})" if time_step_source else ""
    if n < 1:
        raise InputError(f"{source} = {duration:g} s is shorter than one time step (dt = {time_step:g} s{dt_src}), "
                         f"so nothing would be simulated; give a duration of at least {time_step:g} s")
    if abs(n * time_step - duration) > 1e-9 * duration:
        return n, (f"{source} = {duration:g} s is not a multiple of dt = {time_step:g} s{dt_src}: "
                   f"rounded to {n} steps ({n * time_step:.9g} s)")
    return n, ""


def _positive_finite(value: Any) -> bool:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return False
    return math.isfinite(x) and x > 0 and not isinstance(value, (bool, str))


def run_model(model: Model, state: State, *, duration: float, record_every: int = 1,
              progress: bool = False, step_callback: StepCallback | None = None,
              strict: bool = False, metadata: Mapping[str, Any] | None = None,
              ctx: StepContext | None = None,
              controller: Callable[[Model, State], Any] | None = None,
              path: str = "auto", blas_threads: int | None = None) -> tuple[Trajectory, RunStats]:
    """Step ``model`` from ``state`` for ``duration`` seconds and record a trajectory.

    Failures stop the run; the trajectory then holds every frame recorded so far and ``failure`` says
    what happened. Frames are recorded every ``record_every`` steps and at the last step. The run owns
    one StepContext (buffers, caches, LCP warm start), fresh unless ``ctx`` is given. ``controller``:
    see :func:`simulate`.

    ``path`` as in ``convexsim.stepping.step``; ``stepping.dispatch.run_plan`` decides: an eligible SAP
    model without a ``step_callback`` or ``controller`` runs in the compiled run loop (many steps per numba
    call, :func:`_run_compiled`); other runs step one step at a time through ``stepping.step``. A run that
    takes the Python reference step without being asked to (``path="auto"``) says so once, with the reason
    (a :class:`SlowPathWarning`).

    ``blas_threads``: the BLAS thread pools are limited to this many threads during the run (None: the
    ``CONVEXSIM_BLAS_THREADS`` environment variable, else 1; 0 or "default": leave them as they are);
    :func:`blas_thread_limit`.
    """
    if record_every < 1:
        raise InputError(f"record_every must be >= 1, got {record_every}")
    from convexsim.controllers import CompiledController
    from convexsim.stepping import dispatch

    law = controller if isinstance(controller, CompiledController) else None
    if law is not None:
        controller = None
    run_loop, path_line = dispatch.run_plan(model, path, step_callback=step_callback is not None,
                                            controller=controller is not None)
    if law is not None and not run_loop:
        raise InputError(f"a compiled controller runs inside the compiled SAP run loop, which this run cannot take "
                         f"({path_line}); use a Python controller (a function returning the controls) instead")
    with blas_thread_limit(blas_threads):
        if run_loop:
            return _run_compiled(model, state, duration=duration, record_every=record_every,
                                 progress=progress, strict=strict, metadata=metadata, ctx=ctx, law=law)
        if path == "auto":
            warn_slow_path(path_line)
        return _run_stepwise(model, state, duration=duration, record_every=record_every, progress=progress,
                             step_callback=step_callback, strict=strict, metadata=metadata, ctx=ctx,
                             controller=controller, path=path, path_line=path_line)


def _run_stepwise(model: Model, state: State, *, duration: float, record_every: int, progress: bool,
                  step_callback: StepCallback | None, strict: bool, metadata: Mapping[str, Any] | None,
                  ctx: StepContext | None, controller: Callable[[Model, State], Any] | None, path: str,
                  path_line: str) -> tuple[Trajectory, RunStats]:
    """``run_model`` one ``stepping.step`` at a time (the reference path, or the compiled step when a
    step callback must see every step)."""
    from convexsim.stepping import step
    from convexsim.stepping.context import StepContext

    if controller is not None:
        from convexsim.multibody.forest import Controls
    ctx = StepContext() if ctx is None else ctx
    n_steps, _ = plan_steps(duration, model.time_step)
    rec = Recorder(model)
    rec.record(state, None)
    stats = RunStats(path=path_line)
    end = _RunEnd(model, rec, stats, n_steps, progress, lambda: state)
    watch = path == "auto" and not path_line.startswith("Python path")   # a step handed over is said once
    with end:
        for k in range(n_steps):
            if controller is not None:
                ctx.controls = Controls.from_output(controller(model, state), model.forest, model.body_names)
            state, info = step(model, state, ctx, strict=strict, path=path)
            if watch and info.path.startswith("reference"):
                watch = False
                why = info.path.partition(": ")[2] or route_reason(model, ctx)
                stats.path += f"; from step {k} some steps on the Python path: {why}"
                warnings.warn(slow_path_text(why), SlowPathWarning, stacklevel=3)
            stats.add(info)
            if (k + 1) % record_every == 0 or k + 1 == n_steps:
                rec.record(state, info)
            if step_callback is not None:
                step_callback(model, state, info)
            end.bar.update(k + 1, state.t, _time.perf_counter() - end.t0)
    return end.trajectory(metadata)


class _RunEnd:
    """How a run loop ends, shared by the Python loop (:func:`run_model`) and the compiled one
    (:func:`_run_compiled`); used as ``with end:`` around the loop, then ``end.trajectory(metadata)``.

    Created where the loop's clock starts (``t0``); owns the progress bar (``bar``) and the
    :class:`KernelClock` (compilation / cache loads, reported apart from ms/step), both stopped whatever
    happens. On leaving the block:

    * a ``SimulationError`` is swallowed: the run ends there and ``failure`` is its message, the frames
      recorded so far make the trajectory;
    * Ctrl-C or a :class:`TerminationRequest` becomes :class:`RunInterrupted`, which carries the recorder
      and the statistics (wall time included) so that the caller writes the frames recorded so far;
      ``current_state()`` gives the state reached, for its message (step and time).
    """

    def __init__(self, model: Model, rec: "Recorder | RunFrames", stats: "RunStats", n_steps: int, progress: bool,
                 current_state: Callable[[], State]):
        self.model, self.rec, self.stats = model, rec, stats
        self.current_state = current_state
        self.failure = ""
        self.t0 = _time.perf_counter()
        self.bar = _ProgressBar(n_steps, enabled=progress)
        self.clock = KernelClock(notice=progress)
        state = current_state()
        stats.start_step, stats.start_time, stats.time_step = int(state.step), float(state.t), model.time_step
        stats.solver_name = model.solver.kind.upper()
        self._warnings = warnings.catch_warnings()

    def __enter__(self) -> "_RunEnd":
        self._warnings.__enter__()
        # The steppers' per-step convergence warnings are silenced: RunStats warns once at the first and
        # counts them all (one line in the run summary).
        warnings.filterwarnings("ignore", message=_PER_STEP_WARNING, category=ConvergenceWarning)
        self.clock.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            self.clock.__exit__(exc_type, exc, tb)
        finally:
            self.bar.close()
            self._warnings.__exit__(None, None, None)
        if exc_type is None:
            return False
        if issubclass(exc_type, SimulationError):
            self.failure = str(exc)
            return True
        if issubclass(exc_type, KeyboardInterrupt):
            state = self.current_state()
            who = f"by {exc.signal_name}" if isinstance(exc, TerminationRequest) else "by the user"
            message = f"interrupted {who} at step {state.step} (t = {state.t:.6g} s)"
            self._stop_clock()
            terminated = exc if isinstance(exc, TerminationRequest) else None
            raise RunInterrupted(self.rec, self.stats, message, terminated) from None
        return False

    def _stop_clock(self) -> None:
        self.stats.wall_time_s, self.stats.warmup_s = _time.perf_counter() - self.t0, self.clock.seconds

    def trajectory(self, metadata: Mapping[str, Any] | None) -> tuple[Trajectory, "RunStats"]:
        """(the trajectory of the recorded frames, with ``failure`` and the run's metadata; the statistics)."""
        self._stop_clock()
        model = self.model
        meta = {**_software_versions(), **self.stats.as_dict(), **dict(metadata or {})}
        traj = self.rec.to_trajectory(scene_yaml=model.scene_yaml, solver_kind=model.solver.kind,
                                      contact_model=contact_model_name(model), failure=self.failure,
                                      metadata=meta)
        return traj, self.stats


CHUNK_SECONDS = 0.05
"""Wall time [s] the compiled run loop aims to spend in one numba call: between calls it records frames,
updates the progress bar and lets Ctrl-C / SIGTERM through."""

MAX_REFERENCE_RUN = 32
"""After the compiled kernel meets an island too large for its dense factor, the run loop takes that step
by ``compiled_step`` (supernodal factor), then 2, 4, … up to this many steps before it tries the run kernel
again
(each try costs a collision pass): a pile stays large for many steps."""

_SIGNALS = ("SIGINT", "SIGTERM")


class _DeferSignals:
    """Within the block, a SIGINT or SIGTERM whose handler is a Python function (Ctrl-C's
    KeyboardInterrupt, the CLI's TerminationRequest) is held and handed to that handler on exit, so that an
    interruption lands between two chunks of the compiled loop, after the chunk's frames are recorded.
    Outside the main thread (where handlers cannot be set) it does nothing."""

    def __init__(self):
        self.pending: list = []
        self.saved: dict = {}

    def __enter__(self) -> "_DeferSignals":
        import signal

        if threading.current_thread() is not threading.main_thread():
            return self
        for name in _SIGNALS:
            sig = getattr(signal, name, None)
            old = signal.getsignal(sig) if sig is not None else None
            if callable(old):
                self.saved[sig] = old
                signal.signal(sig, lambda signum, frame: self.pending.append((signum, frame)))
        return self

    def __exit__(self, *exc) -> None:
        import signal

        for sig, old in self.saved.items():
            signal.signal(sig, old)
        for signum, frame in self.pending:
            self.saved[signum](signum, frame)


def _state_arrays_fit(q, v, tq, tv) -> bool:
    """Whether the state arrays have the run kernel's argument types (C-contiguous float64, q and v 2-d, the
    trees' 1-d): :meth:`RunKernel.call` may then call the kernel's entry point directly."""
    for x, nd in ((q, 2), (v, 2), (tq, 1), (tv, 1)):
        if (type(x) is not np.ndarray or x.dtype != np.float64 or x.ndim != nd or not x.flags.c_contiguous
                or not x.flags.writeable):
            return False
    return True


_RUN_ENTRIES: dict = {}
"""Per model (``packing.per_model``): {(no controls, law, no RunFrames): the run kernel's entry point}."""


class RunKernel:
    """The compiled run loop's kernel for one model (``sap_composition.run_kernel``; a free-body model is a
    forest of zero trees) with its frame and contact buffers, shared by :func:`run_model` and
    ``convexsim.sim.Simulation``.

    :meth:`call` takes up to ``max_steps`` steps from (t, q, v, tq, tv), writing the state in place and the
    frames into ``bufs`` (``fr_*``: per frame; ``c_*``: contact rows, frame after frame; ``st``: per step)."""

    def __init__(self, model: Model, strict: bool):
        from convexsim.stepping import status as K
        from convexsim.controls import no_controls
        from convexsim.stepping.compiled import no_law
        from convexsim.stepping.packing import packed, packed_forest, per_model, step_arrays
        from convexsim.stepping.sap_composition import run_kernel

        self.K = K
        self._run_kernel = run_kernel
        self.model = model
        self.args = packed(model).args(strict)
        self.arrays = step_arrays(model)
        self.trees = model.has_trees
        self.bufs: dict[str, np.ndarray] = {}
        self._no_controls = no_controls(model)
        self.no_law = no_law()
        self.pf = pf = packed_forest(model)
        self._no_trees = (np.zeros(0), np.zeros(0))       # tree_q, tree_v of a model without trees
        self.force_names = ([f"actuator:{n}" for n in pf.actuator_names],
                            [f"limit:{n}" for n in pf.limit_names],
                            [f"constraint:{n}" for n in pf.coupler_names])
        self.grow_contacts(256)
        self._entries = per_model(_RUN_ENTRIES, model, lambda _m: {})

    def _frame_buffers(self, frames: int) -> None:
        if self.bufs.get("fr_step") is None or self.bufs["fr_step"].shape[0] < frames:
            self.bufs.update(frame_arrays(self.model.nbody, self.pf, frames))

    def grow_contacts(self, rows: int) -> None:
        """Contact buffers of at least ``rows`` rows."""
        if self.bufs.get("c_phi") is None or self.bufs["c_phi"].shape[0] < rows:
            self.bufs.update(contact_arrays(rows))

    def call(self, t: float, q, v, tq, tv, k_rel: int, n_total: int, max_steps: int,
             record_every: int, ctl: tuple | None = None, law=None,
             frames: "RunFrames | None" = None) -> tuple[int, int, int, int, int, int, int]:
        """Up to ``max_steps`` steps of a run of ``n_total`` steps, ``k_rel`` of them taken, from time t [s]
        (a frame after run step j when (j + 1) % record_every == 0 or j + 1 == n_total). ``ctl``: the trees'
        controls (``controls.ControlArrays.kernel_controls``; None: none); ``law``: a
        ``controllers.CompiledController`` run before every step (None: none); ``frames``: the kernel writes
        its frames and contact rows there, after the whole ones (None: into ``bufs`` from row 0). Returns the
        kernel's (code, steps taken, frames, contact rows, bad body, SAP status, extra)."""
        b = self.bufs
        if frames is None:
            self._frame_buffers(max_steps // record_every + 2)
            out = b
        else:
            out = frames.free_rows()
        if b.get("st") is None or b["st"].shape[0] < max_steps:
            b["st"] = np.empty((max_steps, 4), np.int64)
        args = self.args
        if tq is None:
            tq, tv = self._no_trees
        call_args = (
            args[0], args[1], self.arrays, float(t), q, v, tq, tv, self._no_controls if ctl is None else ctl,
            *(self.no_law if law is None else (law.kernel_law, law.params)), k_rel, n_total, max_steps, record_every,
            out["fr_step"], out["fr_q"], out["fr_v"], out["fr_stat"], out["fr_resid"],
            out["fr_nc"], out["fr_act"], out["fr_lim"], out["fr_con"], b["st"], out["c_body"], out["c_geom"],
            out["c_point"], out["c_normal"], out["c_phi"], out["c_gamma"], out["c_force"])
        key = (ctl is None, None if law is None else law.kernel_law, frames is None)
        entry = self._entries.get(key)
        if entry is not None and _state_arrays_fit(q, v, tq, tv):
            return entry(*call_args)
        out = self._run_kernel(*call_args)
        entry = self._entry_point(call_args)
        if entry is not None:
            self._entries[key] = entry
        return out

    def _entry_point(self, call_args: tuple):
        """The compiled entry point of the run kernel for these arguments' types, or None. Calling it skips
        numba's dispatch (typing every argument, choosing the overload): ≈ 10 µs of a ~50 µs one-step call,
        what a ``Simulation.step()`` loop pays per step, and typing the 33 arguments again costs ≈ 0.5 ms per
        ``run_model`` call. Every argument but the state is built here or by ``convexsim.controls``/
        ``convexsim.controllers`` with fixed types for a model (given whether there are controls, which law and
        whether the frames go to a ``RunFrames``: the key of the model's entries, kept across runs), and
        :func:`_state_arrays_fit` checks the state's, so the types of later calls are these."""
        try:
            sig = tuple(self._run_kernel.typeof_pyval(a) for a in call_args)
            return self._run_kernel.overloads[sig].entry_point
        except (KeyError, AttributeError, TypeError):      # an unexpected numba layout: keep its dispatch
            return None

    def hands_over(self, code: int) -> bool:
        """The kernel stopped before a step it does not take (an island above the dense limit, a margin to
        check): that step goes through ``stepping.step``."""
        return code in (self.K.STEP_TOO_LARGE, self.K.STEP_BAD_MARGIN)

    def failure(self, code: int, k: int, t: float, bad: int, sap_status: int, extra: int) -> SimulationError | None:
        """The SimulationError of a failed step (the kernel stopped at step k, time t [s]), or None."""
        K, dt = self.K, self.model.time_step
        from convexsim.stepping.compiled import nonfinite_error
        from convexsim.stepping.types import singular_mass_error

        if code in (K.STEP_NONFINITE_START, K.STEP_NONFINITE_END):
            end = code == K.STEP_NONFINITE_END
            return nonfinite_error(self.model, None, bad, k + end, t + (dt if end else 0.0))
        if code == K.STEP_SINGULAR_MASS:
            return singular_mass_error(self.model, bad, k, t)
        if code == K.STEP_SOLVER_FAILED:
            from convexsim.sap.newton import SAP_STATUS_NAMES

            return SimulationError(f"SAP did not converge ({SAP_STATUS_NAMES[sap_status]}) after {extra} "
                                   "iterations", step=k, time=t)
        return None


def frame_arrays(nbody: int, pf, frames: int) -> dict[str, np.ndarray]:
    """The run kernel's frame arrays for ``frames`` frames (``sap_composition.run_kernel``'s fr_*; ``pf``: the
    model's ``packing.PackedForest``, for its actuators, limits and joint couplers)."""
    return dict(fr_step=np.empty(frames, np.int64), fr_q=np.empty((frames, nbody, 7)),
                fr_v=np.empty((frames, nbody, 6)), fr_stat=np.empty((frames, 4), np.int64),
                fr_resid=np.empty(frames), fr_nc=np.empty(frames, np.int64),
                fr_act=np.empty((frames, len(pf.actuator_names))), fr_lim=np.empty((frames, len(pf.limit_names))),
                fr_con=np.empty((frames, len(pf.coupler_names))))


def contact_arrays(rows: int) -> dict[str, np.ndarray]:
    """The run kernel's contact-row arrays for ``rows`` rows (``sap_composition.run_kernel``'s c_*)."""
    return dict(c_body=np.empty((rows, 2), np.int64), c_geom=np.empty((rows, 2), np.int64),
                c_point=np.empty((rows, 3)), c_normal=np.empty((rows, 3)), c_phi=np.empty(rows),
                c_gamma=np.empty((rows, 3)), c_force=np.empty((rows, 3)))


CONTACT_ROWS0 = 256
"""Contact rows a compiled run's frames have room for at first (:meth:`RunFrames.grow_contacts`)."""

FRAME_BYTES0 = 64 << 20
"""Bytes of frame arrays a compiled run takes at first at most (:class:`RunFrames`; at least
:data:`FRAMES0_MIN` frames): room for every frame of most runs, while a very long run (meant to be
interrupted, or to fail) does not ask for all its memory before its first step."""

FRAMES0_MIN = 1024
"""Frames a compiled run has room for at first at least (or every frame of the run, when fewer)."""


class RunFrames:
    """The frames of a compiled run (:func:`_run_compiled`) in run-long arrays: the run kernel's frame arrays
    (:func:`frame_arrays`), with room for every frame the run records (``total``, known before it starts) or
    for :data:`FRAME_BYTES0` of them, doubled when full, which the kernel fills in place, a chunk of steps
    per call (``RunKernel.call(frames=...)``); the contact rows, frame after frame, in arrays that grow when
    a chunk's rows do not fit. Nothing is copied per chunk or per frame: the trajectory is cut from these
    arrays once, at the end. A frame of a step taken through ``stepping.step`` (the initial frame, a step the
    kernel hands over) is written by :meth:`record` (its contacts' geometries and impulses, which a
    trajectory does not hold, are not).

    ``n`` frames and ``rows`` contact rows are whole: a frame counts once every array holds it (``n`` is
    raised last), so an interrupted run keeps exactly its whole frames. Makes the trajectory
    :class:`Recorder` makes of the same frames (``tests/stepping/test_recording_frames.py``)."""

    def __init__(self, model: Model, kernel: "RunKernel", total: int):
        self.model, self.kernel, self.total = model, kernel, total
        self.n, self.rows = 0, 0
        frame_bytes = sum(a.itemsize * a.size for a in frame_arrays(model.nbody, kernel.pf, 1).values()) + 8
        capacity = min(total, max(FRAMES0_MIN, FRAME_BYTES0 // frame_bytes))
        self.t = np.empty(capacity)
        self.fr = frame_arrays(model.nbody, kernel.pf, capacity)
        self.c = contact_arrays(CONTACT_ROWS0)
        self.forces: list = []        # a ForceBlock per kernel chunk, a dict per frame of record()

    @property
    def frames_t(self) -> np.ndarray:
        """The whole frames' times [s] (n,)."""
        return self.t[:self.n]

    @property
    def frames_q(self) -> np.ndarray:
        """The whole frames' body poses (n, nbody, 7)."""
        return self.fr["fr_q"][:self.n]

    def free_rows(self) -> dict[str, np.ndarray]:
        """Views of the frame and contact arrays after the whole frames and rows: where the kernel writes."""
        out = {k: a[self.n:] for k, a in self.fr.items()}
        out.update({k: a[self.rows:] for k, a in self.c.items()})
        return out

    def make_room(self) -> None:
        """At least one free frame (the whole ones kept): twice the room when full, at most ``total``."""
        size = self.t.shape[0]
        if self.n < size:
            return
        if size >= self.total:
            raise RuntimeError(f"the compiled run loop records more than the {self.total} frames of its run")
        size = min(2 * size, self.total)
        t, fr = np.empty(size), frame_arrays(self.model.nbody, self.kernel.pf, size)
        t[:self.n] = self.t[:self.n]
        for k, a in fr.items():
            a[:self.n] = self.fr[k][:self.n]
        self.t, self.fr = t, fr

    def grow_contacts(self, rows: int) -> None:
        """Room for at least ``rows`` contact rows in all (the whole rows kept): at least twice the room, and
        1.5 × what the rows so far per frame would take over every frame of the run, so that a run whose
        contacts stay about as many grows once, early, when few rows are copied (untouched room costs no
        memory, only address space)."""
        size = self.c["c_phi"].shape[0]
        if rows <= size:
            return
        size = max(2 * size, rows, 3 * rows * self.t.shape[0] // (2 * max(self.n, 1)))
        grown = contact_arrays(size)
        for k, a in grown.items():
            a[:self.rows] = self.c[k][:self.rows]
        self.c = grown

    def commit(self, t: np.ndarray, nf: int, ncr: int) -> None:
        """Count the ``nf`` frames (times ``t`` [s]) and ``ncr`` contact rows the kernel wrote after the whole
        ones (their joint forces become one ForceBlock)."""
        if nf == 0:
            return
        n = self.n
        self.t[n:n + nf] = t
        fr = self.fr
        forces = (_tree_force_block(self.kernel.force_names, fr["fr_act"][n:n + nf], fr["fr_lim"][n:n + nf],
                                    fr["fr_con"][n:n + nf]) if self.kernel.trees else ForceBlock((), np.zeros((nf, 0))))
        self.forces.append(forces)
        self.rows += ncr
        self.n = n + nf

    def record(self, state: State, info: StepInfo | None) -> None:
        """Write one frame of a step taken through ``stepping.step`` (as :meth:`Recorder.record`; ``info``
        None for the initial frame)."""
        info = StepInfo() if info is None else info
        self.make_room()
        c, n, r = info.contacts, self.n, self.rows
        self.grow_contacts(r + c.count)
        fr, ca, e = self.fr, self.c, r + c.count
        fr["fr_step"][n] = state.step
        fr["fr_q"][n], fr["fr_v"][n] = state.q, state.v
        fr["fr_stat"][n] = (info.iterations, info.converged, info.line_search_evaluations, 0)
        fr["fr_resid"][n], fr["fr_nc"][n] = info.momentum_residual, c.count
        if c.count:
            force = info.force_world if info.force_world.shape[0] == c.count else 0.0
            ca["c_body"][r:e, 0], ca["c_body"][r:e, 1] = c.body_a, c.body_b
            ca["c_point"][r:e], ca["c_normal"][r:e], ca["c_phi"][r:e], ca["c_force"][r:e] = (c.point, c.normal,
                                                                                            c.phi, force)
        self.t[n] = state.t
        self.forces.append(info.named_forces())
        self.rows = e
        self.n = n + 1

    def to_trajectory(self, *, scene_yaml: str, solver_kind: str, contact_model: str,
                      failure: str = "", metadata: Mapping[str, Any] | None = None) -> Trajectory:
        """Pack the whole frames into a ``Trajectory``."""
        n, fr, ca = self.n, self.fr, self.c
        counts = fr["fr_nc"][:n]
        rows = int(counts.sum())                  # the whole frames' rows
        stat = fr["fr_stat"][:n]
        contacts = (ca["c_body"][:rows, 0], ca["c_body"][:rows, 1], *(ca[k][:rows].copy() for k in
                                                                      ("c_point", "c_normal", "c_phi", "c_force")))
        return _trajectory(self.model, self.t[:n].copy(), fr["fr_q"][:n], fr["fr_v"][:n], stat[:, 0],
                           stat[:, 1] != 0, fr["fr_resid"][:n].copy(), stat[:, 2], counts, contacts, self.forces,
                           scene_yaml=scene_yaml, solver_kind=solver_kind, contact_model=contact_model,
                           failure=failure, metadata=metadata)


def _run_compiled(model: Model, state: State, *, duration: float, record_every: int, progress: bool,
                  strict: bool, metadata: Mapping[str, Any] | None,
                  ctx: StepContext | None, law=None) -> tuple[Trajectory, RunStats]:
    """``run_model`` with the compiled run loop (:class:`RunKernel`): chunks of steps of about CHUNK_SECONDS
    per numba call into preallocated frame buffers; a step whose island is too large for the dense factor
    is taken by ``compiled_step`` (supernodal factor) in between.
    Same trajectory, statistics, failures and interruption behaviour as the Python loop. ``ctx`` (None: a
    fresh one when first needed) serves those large-island steps only. ``law``: a compiled controller the loop
    calls before every step (``convexsim.controllers``); the steps handed to ``stepping.step`` hold its last
    commands."""
    from convexsim.stepping import dispatch

    n_steps, _ = plan_steps(duration, model.time_step)
    dt = model.time_step
    kernel = RunKernel(model, strict)
    bufs = kernel.bufs
    rec = RunFrames(model, kernel, recorded_frames(n_steps, record_every))
    rec.record(state, None)
    stats = RunStats()
    trees = kernel.trees      # tree models: with the trees' q, v and joint forces
    q = np.array(state.q, dtype=np.float64, order="C")
    v = np.array(state.v, dtype=np.float64, order="C")
    tq = np.array(state.tree_q, dtype=np.float64, order="C") if trees else None
    tv = np.array(state.tree_v, dtype=np.float64, order="C") if trees else None
    t, k = float(state.t), int(state.step)
    step0 = k   # the kernel counts the run's steps from 0: a frame after step j if (j + 1) % record_every == 0
    k_end = k + n_steps
    chunk = 16
    backoff = 1           # reference steps after the compiled kernel met an oversized island
    stats.path = "compiled step (compiled run loop)"
    commands, held = None, None
    if law is not None:   # the law's own command arrays (the cached no-controls arrays stay untouched)
        from convexsim.controls import ControlArrays

        held = ControlArrays.empty(model)
        commands = held.kernel_controls(model)
        stats.path = f"compiled step (compiled run loop, compiled controller {law.name})"
    end = _RunEnd(model, rec, stats, n_steps, progress, lambda: state)
    with end:
        while k < k_end:
            with _DeferSignals():
                rec.make_room()
                c0 = _time.perf_counter()
                code, taken, nf, ncr, bad, sap_status, extra = kernel.call(t, q, v, tq, tv, k - step0, n_steps,
                                                                           chunk, record_every, commands, law, rec)
                elapsed = _time.perf_counter() - c0
                # bookkeeping of the steps taken, a chunk at a time: times, statistics; the frames are in place
                base, f0 = k - step0, rec.n
                times = np.cumsum(np.concatenate(([t], np.full(taken, dt))))[1:]   # t += dt, step by step
                fidx = rec.fr["fr_step"][f0:f0 + nf] - base - 1          # the chunk's step of each frame
                residual = np.full(taken, math.nan)
                residual[fidx] = rec.fr["fr_resid"][f0:f0 + nf]
                stats.add_steps(bufs["st"][:taken], residual)
                rec.commit(times[fidx], nf, ncr)
                if taken:
                    t = float(times[-1])
                k += taken
                state = State(t=t, q=q.copy(), v=v.copy(), step=k, tree_q=tq.copy() if trees else state.tree_q,
                              tree_v=tv.copy() if trees else state.tree_v)
                if code == kernel.K.RUN_NEED_CONTACT_SPACE:
                    rec.grow_contacts(rec.rows + int(extra))
                elif kernel.hands_over(code):   # one step at a time (BAD_MARGIN raises)
                    from convexsim.stepping.context import StepContext

                    ctx = StepContext() if ctx is None else ctx
                    if law is not None:
                        ctx.controls = held
                    for _ in range(min(backoff, k_end - k)):
                        state, info = dispatch.step(model, state, ctx, strict=strict)
                        t, k = state.t, state.step
                        stats.add(info)
                        if (k - step0) % record_every == 0 or k == k_end:
                            rec.record(state, info)
                    q[:], v[:] = state.q, state.v
                    if trees:
                        tq[:], tv[:] = state.tree_q, state.tree_v
                    backoff = min(2 * backoff, MAX_REFERENCE_RUN)
                else:
                    error = kernel.failure(code, k, t, bad, sap_status, extra)
                    if error is not None:
                        raise error
                if taken:
                    backoff = 1
                if taken and elapsed > 0:   # aim at CHUNK_SECONDS per call
                    chunk = int(min(max(chunk * CHUNK_SECONDS / elapsed, 1), 4 * chunk, 100_000))
            end.bar.update(k - step0, t, _time.perf_counter() - end.t0)
    return end.trajectory(metadata)


def recorded_frames(n_steps: int, record_every: int) -> int:
    """Frames a run of ``n_steps`` steps records: the initial one, one after every ``record_every``-th step
    and one after the last step."""
    return 1 + n_steps // record_every + (1 if n_steps % record_every else 0)


def _tree_force_block(names: tuple, act: np.ndarray, lim: np.ndarray, con: np.ndarray) -> ForceBlock:
    """The named forces (``StepInfo.named_forces``) of n frames of the tree run kernel from its actuator,
    limit and joint-coupler rows (n, ·): one column per name, a joint's limits summed."""
    cols = list(dict.fromkeys([*names[0], *names[1], *names[2]]))
    index = {n: i for i, n in enumerate(cols)}
    values = np.zeros((act.shape[0], len(cols)))
    for group, rows in zip(names, (act, lim, con)):
        for j, n in enumerate(group):
            if group is names[1]:
                values[:, index[n]] += rows[:, j]
            else:
                values[:, index[n]] = rows[:, j]
    return ForceBlock(tuple(cols), values)


def path_text(model: Model, path: str, step_callback: StepCallback | None) -> str:
    """Which stepper a run of ``model`` takes and, for the reference, why (``stepping.dispatch.run_plan``)."""
    from convexsim.stepping import dispatch

    return dispatch.run_plan(model, path, step_callback=step_callback is not None)[1]


class TerminationRequest(KeyboardInterrupt):
    """Raised by a signal handler (the CLI's, for SIGTERM) to stop a run the way Ctrl-C does."""

    def __init__(self, signal_name: str = "SIGTERM"):
        super().__init__(signal_name)
        self.signal_name = signal_name


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (or a TerminationRequest) during a run: carries what was recorded so the CLI can decide
    what to do; ``terminated`` is the TerminationRequest, or None for Ctrl-C."""

    def __init__(self, recorder: "Recorder | RunFrames", stats: RunStats, message: str,
                 terminated: TerminationRequest | None = None):
        super().__init__(message)
        self.recorder = recorder
        self.stats = stats
        self.terminated = terminated


_Interrupted = RunInterrupted  # the former private name


def interrupted_trajectory(model: Model, exc: RunInterrupted,
                           metadata: Mapping[str, Any] | None = None) -> Trajectory:
    """The frames an interrupted run recorded, as a Trajectory: ``failure`` is the interruption message
    (who, step, time) and ``metadata["interrupted"]`` is ``"SIGTERM"`` or ``"SIGINT"``."""
    signal_name = exc.terminated.signal_name if exc.terminated is not None else "SIGINT"
    meta = {**_software_versions(), **exc.stats.as_dict(), **dict(metadata or {}), "interrupted": signal_name}
    return _whole_frames(exc.recorder).to_trajectory(
        scene_yaml=model.scene_yaml, solver_kind=model.solver.kind, contact_model=contact_model_name(model),
        failure=str(exc), metadata=meta)


def _whole_frames(rec: "Recorder | RunFrames") -> "Recorder | RunFrames":
    """``rec`` without a frame the interruption cut short: a signal can land inside ``Recorder.record``,
    between two of its appends, so keep the frames every per-frame list holds and whose contacts and forces
    are all there (a copy; ``rec`` is not changed). A :class:`RunFrames` holds whole frames only."""
    if isinstance(rec, RunFrames):
        return rec
    per_frame = ("frames_t", "frames_q", "frames_v", "iterations", "converged", "residual", "ls_evals",
                 "contact_counts")
    n = min(min(len(getattr(rec, name)) for name in per_frame), rec.force_frames())
    available = sum(r[4].shape[0] for r in rec.contact_rows)
    need = sum(rec.contact_counts[:n])
    while n > 0 and need > available:
        n -= 1
        need -= rec.contact_counts[n]
    rows = []
    for r in rec.contact_rows:              # exactly the rows of the first n frames
        if need <= 0:
            break
        k = min(need, r[4].shape[0])
        rows.append(tuple(a[:k] for a in r))
        need -= k
    return dataclasses.replace(rec, **{name: list(getattr(rec, name)[:n]) for name in per_frame},
                               contact_rows=rows)


def step_count(duration: float, time_step: float) -> int:
    """Number of steps a run of ``duration`` takes: round(duration / dt) (0 when duration < dt/2)."""
    return int(round(duration / time_step))


def contact_model_name(model: Model) -> str:
    """The contact model a run of ``model`` records: "sap", "lagged" or "similar" (SAP), "rigid" (LCP)."""
    if model.solver.kind == "lcp":
        return "rigid"
    return model.contact_model.name.lower()


def _software_versions() -> dict[str, str]:
    import numba
    import scipy

    import convexsim

    return {"convexsim": convexsim.__version__, "numpy": np.__version__, "scipy": scipy.__version__,
            "numba": numba.__version__, "python": platform.python_version()}


def simulate(scene: Any, *, duration: float | None = None, time_step: float | None = None,
             contact_model: str | None = None, solver: str | None = None,
             overrides: Mapping[str, Any] | Iterable[str] | None = None, record_every: int = 1,
             progress: bool = False, step_callback: StepCallback | None = None,
             strict: bool = False, controller: Callable[[Model, State], Any] | None = None,
             blas_threads: int | None = None) -> Trajectory:
    """Simulate a scene and return its trajectory.

    Args:
        scene: a YAML scene file (relative paths against the working directory, then the shipped
            scenes folder), a shipped scene name ("box_stack"), YAML text, a dict, or a SceneSpec. A
            string is YAML text when it has a newline or starts with a mapping (``{``, ``---``, or
            ``key:`` and a space), otherwise a path or name (``convexsim.scene.is_scene_text``).
        duration: simulated time [s] (default: the scene's).
        time_step: dt [s] (default: the scene's).
        contact_model: "sap" | "lagged" | "similar" (SAP stepper).
        solver: "sap" | "lcp".
        overrides: dotted-path overrides, {"materials.default.stiffness": 1e5} or ["solver.sigma=1e-4"].
        record_every: record one frame every N steps (and the last).
        progress: show a progress bar (only for runs longer than about a second).
        step_callback: f(model, state, info) called after every step (viewers).
        strict: raise on a SAP step that does not converge instead of warning.
        controller: ``fn(model, state)`` called before every step; it returns None or a dict
            ``{"targets": {joint: q_d or (q_d, v_d)}, "torques": {joint: tau}, "wrenches": {body: w}}``
            (SI units; targets replace the scene's actuator targets for that step, torques are added to
            the joints, w = (τ_x, τ_y, τ_z, f_x, f_y, f_z) in W at the body's COM [N·m, N];
            state.tree_q/tree_v hold the joint coordinates, in ``model.forest`` order).
            ``convexsim.sim.Simulation`` is the scripting interface for such loops. Or a compiled controller
            (``convexsim.controllers.compiled_controller``), which the compiled run loop calls before every
            step without leaving numba.
        blas_threads: BLAS threads during the run (``run_model``; default 1).

    Returns:
        The trajectory; ``traj.failure`` is non-empty if the run stopped early.
    """
    model, state, dur = prepare(scene, duration=duration, time_step=time_step,
                                contact_model=contact_model, solver=solver, overrides=overrides)
    traj, _ = run_model(model, state, duration=dur, record_every=record_every, progress=progress,
                        step_callback=step_callback, strict=strict, controller=controller,
                        blas_threads=blas_threads)
    return traj


class _ProgressBar:
    """A rich progress bar that appears only once a run has taken more than a second. When stderr is
    not a terminal (logs, CI, a batch job) it prints a plain line to stderr instead, at most every
    ``LOG_EVERY`` seconds of wall time: ``simulating: step 1200/30000, t = 1.200 s, 4.1 s wall``."""

    LOG_EVERY = 10.0  # [s] wall time between plain progress lines

    def __init__(self, total: int, *, enabled: bool):
        self.total = total
        self.enabled = enabled
        self._bar = None
        self._task = None
        self._plain = not sys.stderr.isatty()
        self._next_log = 1.0

    def update(self, done: int, t_sim: float, wall: float) -> None:
        if not self.enabled:
            return
        if self._plain:
            if wall >= self._next_log:
                print(f"simulating: step {done}/{self.total}, t = {t_sim:.3f} s, {wall:.1f} s wall",
                      file=sys.stderr, flush=True)
                self._next_log = wall + self.LOG_EVERY
            return
        if self._bar is None:
            if wall < 1.0:
                return
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeRemainingColumn)

            self._bar = Progress(TextColumn("simulating"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("t = {task.fields[t]:.3f} s"), TimeRemainingColumn(),
                                 transient=True)
            self._bar.start()
            self._task = self._bar.add_task("run", total=self.total, t=t_sim)
        if done % 10 == 0 or done == self.total:
            self._bar.update(self._task, completed=done, t=t_sim)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


__all__ = ["simulate", "prepare", "run_model", "step_count", "plan_steps", "check_times", "Recorder", "RunStats",
           "RunConvergenceWarning", "path_text", "SlowPathWarning", "warn_slow_path", "slow_path_text",
           "blas_thread_limit", "blas_threads_setting", "hold_blas_threads", "RunKernel", "ForceBlock",
           "TerminationRequest", "RunInterrupted", "interrupted_trajectory", "RunFrames", "recorded_frames",
           "CONTACT_ROWS0", "FRAME_BYTES0", "FRAMES0_MIN"]
