"""Several runs of one scene streamed live, in lockstep, to one page (``run --solver both --view``).

Each run is one ordinary call of the public run API (``run_model(..., step_callback=...)``), so its
trajectory is exactly the one it would record alone with a step callback. The runs take turns: run 0
(in the calling thread) steps ``chunk`` seconds of simulated time, then hands the turn to run 1 (in its
own thread) for the same simulated span, and so on. Only the run holding the turn steps; the others wait
in their step callback, so no two runs ever step at the same time and their simulated times never differ
by more than ``chunk`` + one time step. A run that ends (or fails) passes the turn on for good.

On the page the runs are drawn as on the recorded page (viz/playback.py): run 0 in place, the later runs
tinted with their run colour and shifted side by side (layout "offset", the default) or translucent in
place ("overlay"); one legend names them. Pacing (``--realtime``, the page's speed) and pause / single step
hold run 0, which holds the others through the turn.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from convexsim.model import Model, State

from . import draw
from .live import LIVE_PREFIX, LiveViewer, initial_view_bounds
from .playback import (ARROW_COLORS, COLOR_NAMES, OVERLAY_OPACITY, TINT_WEIGHT, hex_to_rgb, rgb_to_css,
                       numbered_labels, run_label, shift_text, side_by_side_step, unique_node_names)

CHUNK_SECONDS = 0.005
"""Simulated time [s] a run steps before handing the turn to the next (well below a 30 Hz frame)."""

SWEEP_SECONDS = 0.5
"""The side-by-side shift is chosen (as on the recorded page) from the bounds the bodies sweep when moved
by their initial velocities for this long [s] (or the run's duration if shorter): a box launched along x
gets its twin beside it along y, not in its path."""


class _Turns:
    """Whose turn it is to step (one run at a time), and an abort flag that stops every waiting run."""

    def __init__(self, n: int):
        self.turn, self.done, self.abort = 0, [False] * n, None
        self.cond = threading.Condition()

    def wait(self, i: int) -> None:
        """Block until it is run ``i``'s turn; raises the abort exception (a KeyboardInterrupt) if set."""
        with self.cond:
            while self.turn != i and self.abort is None:
                self.cond.wait(0.2)        # a timeout keeps the main thread responsive to Ctrl-C
            if self.abort is not None:
                raise self.abort

    def pass_on(self, i: int, *, finished: bool = False) -> None:
        """Run ``i`` hands the turn to the next run not yet done (itself if it is the only one left)."""
        with self.cond:
            self.done[i] = self.done[i] or finished
            n = len(self.done)
            for k in range(1, n + 1):
                j = (i + k) % n
                if not self.done[j]:
                    self.turn = j
                    break
            self.cond.notify_all()

    def stop_all(self, exc: BaseException) -> None:
        with self.cond:
            if self.abort is None:
                self.abort = exc
            self.cond.notify_all()


@dataclass
class LockstepResult:
    """One run's outcome: ``value`` what its run function returned, or ``error`` what it raised."""

    value: Any = None
    error: BaseException | None = None


def run_lockstep(runs: Sequence[Callable[[Callable], Any]], time_steps: Sequence[float], *,
                 chunk: float = CHUNK_SECONDS, on_step: Sequence[Callable] | None = None) -> list[LockstepResult]:
    """Run ``runs`` in turns of ``chunk`` seconds of simulated time each; returns one result per run.

    ``runs[i](callback)`` must run the simulation with ``step_callback=callback`` (e.g. a ``run_model``
    call) and return its result; ``time_steps[i]`` is its dt [s]. ``on_step[i](model, state, info)``, if
    given, is called after every step of run i, before the turn may pass (the viewer's update). Run 0 runs
    in the calling thread, the others in threads of their own, one at a time. Ctrl-C or SIGTERM (in the
    calling thread) interrupts every run: each raises its KeyboardInterrupt-derived error (``run_model``:
    RunInterrupted with its frames), reported in the results. Exceptions of a run are returned, not raised.
    Python's warning filters are restored on return (each run sets its own while it runs).
    """
    n = len(runs)
    turns = _Turns(n)
    on_step = list(on_step) if on_step is not None else [None] * n
    results = [LockstepResult() for _ in range(n)]

    def callback_for(i: int) -> Callable:
        boundary = [chunk]

        def callback(model: Model, state: State, info) -> None:
            if on_step[i] is not None:
                on_step[i](model, state, info)
            if turns.abort is not None:
                raise turns.abort
            # Half a step of slack: t is a sum of dt's, a boundary must not fall between two equal steps.
            if state.t + 0.5 * time_steps[i] >= boundary[0]:
                while boundary[0] <= state.t + 0.5 * time_steps[i]:
                    boundary[0] += chunk
                turns.pass_on(i)
                turns.wait(i)
        return callback

    def run(i: int) -> None:
        try:
            if i > 0:
                turns.wait(i)
            results[i].value = runs[i](callback_for(i))
        except BaseException as exc:          # noqa: BLE001 - reported in the result, re-raised by the caller
            results[i].error = exc
            if i == 0 and isinstance(exc, KeyboardInterrupt):
                turns.stop_all(_interruption_of(exc))
        finally:
            turns.pass_on(i, finished=True)

    threads = [threading.Thread(target=run, args=(i,), name=f"convexsim-lockstep-{i}", daemon=True)
               for i in range(1, n)]
    with warnings.catch_warnings():
        for th in threads:
            th.start()
        run(0)
        for th in threads:
            while th.is_alive():
                try:
                    th.join(0.2)
                except KeyboardInterrupt as exc:  # Ctrl-C after run 0 ended: stop the others
                    turns.stop_all(_interruption_of(exc))
    return results


def _interruption_of(exc: BaseException) -> KeyboardInterrupt:
    """The KeyboardInterrupt the other runs raise when run 0 is interrupted (a TerminationRequest for
    SIGTERM, so that every run reports the same cause)."""
    from convexsim.simulate import RunInterrupted, TerminationRequest

    if isinstance(exc, RunInterrupted) and exc.terminated is not None:
        return TerminationRequest(exc.terminated.signal_name)
    if isinstance(exc, TerminationRequest):
        return TerminationRequest(exc.signal_name)
    return KeyboardInterrupt()


def swept_bounds(model: Model, state: State, horizon: float) -> draw.Bounds:
    """Bounds of the poses of ``state`` and of the same poses moved by their linear velocities for
    ``horizon`` seconds (where the bodies are heading; what the side-by-side shift must avoid)."""
    p0 = np.asarray(state.q[:, :3], dtype=np.float64)
    moved = p0 + horizon * np.asarray(state.v[:, 3:], dtype=np.float64)
    return draw.bounds_of_positions(model, np.stack([p0, moved]))


def run_labels(models: Sequence[Model]) -> list[str]:
    """The recorded page's labels ("SAP (lagged)", "LCP") of runs of ``models``."""
    from convexsim.simulate import contact_model_name

    return numbered_labels([run_label(m.solver.kind, contact_model_name(m)) for m in models])


class LockstepViewer:
    """Live views of several runs of one scene on one page (one LiveViewer per run, same server).

    Args:
        models, states: the runs' compiled scenes and initial states (same bodies).
        server: a started MeshcatServer (the caller stops it).
        layout: "offset" / "auto" (side by side, the shift of the recorded page) or "overlay" (in place,
            the later runs translucent).
        duration: the runs' simulated time [s] (bounds the sweep that chooses the shift).
        realtime, follow, joint_frames, forces, force_scale, show_contacts, out: as LiveViewer (pacing
            and follow act on run 0; the others are drawn where run 0's camera looks).
        viewer_options: more LiveViewer keywords for every run (tests: ``threaded``, ``max_rate_hz``).
    """

    def __init__(self, models: Sequence[Model], states: Sequence[State], *, server, layout: str = "auto",
                 duration: float = SWEEP_SECONDS, realtime: bool | float = False, follow: str = "auto",
                 joint_frames: bool = False, forces: str = "auto", force_scale: float | None = None,
                 show_contacts: bool = True, out=None, **viewer_options):
        if layout not in ("auto", "offset", "overlay"):
            raise ValueError(f"layout must be 'auto', 'offset' or 'overlay', got {layout!r}")
        self.models = list(models)
        self.labels = run_labels(self.models)
        m0, s0 = self.models[0], states[0]
        self.layout = "overlay" if layout == "overlay" else "offset"
        step = (side_by_side_step(swept_bounds(m0, s0, min(duration, SWEEP_SECONDS)))
                if self.layout == "offset" else np.zeros(3))
        self.shifts = [i * step for i in range(len(self.models))]
        view = initial_view_bounds(m0, s0.q)
        for m, s, sh in zip(self.models[1:], states[1:], self.shifts[1:]):
            view = view.union(initial_view_bounds(m, s.q).shifted(sh))
        names = unique_node_names(self.labels)
        self.prefixes = [f"{LIVE_PREFIX}/{n}" for n in names]
        self.viewers = [
            LiveViewer(m, realtime=realtime if i == 0 else False, server=server, out=out, announce=False,
                       follow=follow if i == 0 else "off", joint_frames=joint_frames, forces=forces,
                       force_scale=force_scale, show_contacts=show_contacts, prefix=prefix, lane=i,
                       shift=self.shifts[i], opacity=OVERLAY_OPACITY if (self.layout == "overlay" and i) else 1.0,
                       view_bounds=view, owns_page=i == 0, status_hook=self._status if i == 0 else None,
                       holds=i == 0, **viewer_options)
            for i, (m, prefix) in enumerate(zip(self.models, self.prefixes))]

    def on_step(self, i: int) -> Callable:
        """Run i's per-step hook (``run_lockstep(on_step=...)``): offer its state to its viewer."""
        viewer = self.viewers[i]

        def update(model: Model, state: State, info) -> None:
            viewer.update(state, info)
        return update

    def _legend(self, t0: float) -> list[dict]:
        """The recorded page's legend rows, each with the time of the run's latest frame (run 0: ``t0``)."""
        rows = []
        for i, (m, label) in enumerate(zip(self.models, self.labels)):
            color = ARROW_COLORS[i % len(ARROW_COLORS)]
            tint = TINT_WEIGHT if i else 0.0
            opacity = OVERLAY_OPACITY if (self.layout == "overlay" and i) else 1.0
            text = "bodies solid" if opacity == 1.0 else f"bodies translucent ({opacity:.0%})"
            if tint:
                text += f", tinted {COLOR_NAMES[i % len(COLOR_NAMES)]}"
            text += (", shifted by " + shift_text(self.shifts[i])) if self.layout == "offset" and i else ", in place"
            moving = [g for g in range(m.ngeom) if not m.body_fixed[int(m.geom_body[g])]]
            rgba = m.geom_color[moving[0]] if moving else np.array([0.6, 0.6, 0.6, 1.0])
            rows.append({"label": label, "swatch": color, "opacity": opacity,
                         "body": {"color": rgb_to_css(draw.tinted(rgba, hex_to_rgb(color), tint)[:3]),
                                  "opacity": opacity, "text": text},
                         "marker": {"color": color, "text": f"contacts {COLOR_NAMES[i % len(COLOR_NAMES)]}"},
                         "note": f"t = {self._shown_t(i, t0):.3f} s"})
        return rows

    def _status(self, status: dict) -> dict:
        """Run 0's live legend, extended to every run (the recorded page's rows, each run's time)."""
        return {**status, "title": f"{self.models[0].name} — live, in lockstep: " + " vs ".join(self.labels),
                "legend": self._legend(float(status["t"])), "lockstep": list(self.labels)}

    def _shown_t(self, i: int, t0: float) -> float:
        last = self.viewers[i]._last_offered_t if i else None
        return t0 if i == 0 or last is None else last[0]

    def close(self) -> None:
        """Send every run's last frame and stop the senders (the server keeps running)."""
        for v in self.viewers:
            v.close()


def open_lockstep(run_viewer, models: Sequence[Model], states: Sequence[State], *, duration: float,
                  layout: str | None = None) -> "LockstepViewer":
    """A LockstepViewer streaming the runs of ``models`` side by side on ``run_viewer``'s page (a
    ``live.RunViewer``: its server, options and layout; it replaces the page's current viewer). Its
    ``on_step(i)`` is run i's per-step hook for ``run_lockstep``."""
    v = run_viewer
    v.ensure_server()
    if v.viewer is not None:
        v.viewer.close()
    v.viewer = LockstepViewer(models, states, server=v.server, layout=layout or v.layout, duration=duration,
                              realtime=v.realtime, follow=v.follow, joint_frames=v.joint_frames, forces=v.forces,
                              force_scale=v.force_scale, show_contacts=v.show_contacts, out=v.out)
    return v.viewer
