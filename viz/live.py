"""Live streaming (LiveViewer) and serving recorded trajectories (serve_trajectories).

Both print the page URL. Serving blocks with "Ctrl-C to stop" until SIGINT or SIGTERM, then stops the
server (MeshcatServer guarantees no orphan, see server.py).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
import webbrowser
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from convexsim.io.trajectory import Trajectory
from convexsim.model import Model, State

from . import draw
from ._math import pose_matrices, quat_from_y_to, translation_matrix
from .playback import (ARROW_COLORS, ARROW_RADIUS_FACTORS, REFERENCE_ARROW, TINT_WEIGHT, PlaybackOptions,
                       arrow_objects, build_playback, force_legend, hex_to_rgb, nice_scale, point_object,
                       weight_reference)
from .server import MeshcatServer, ViewerServerError

LIVE_PREFIX = "/meshcat/live"


def wait_for_stop_signal(server: MeshcatServer | None = None, *, out=None) -> None:
    """Block until SIGINT/SIGTERM (or the server process dies); prints "Ctrl-C to stop"."""
    print("Ctrl-C to stop", file=out or sys.stdout, flush=True)
    stop = threading.Event()
    on_main = threading.current_thread() is threading.main_thread()
    previous = {}
    if on_main:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
    try:
        while not stop.wait(0.2):
            if server is not None and not server.running:
                print("the viewer server stopped", file=sys.stderr, flush=True)
                break
    except KeyboardInterrupt:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _transform_cmd(path: str, T: np.ndarray) -> dict:
    """set_transform of a float64 4×4 matrix (column-major)."""
    return {"type": "set_transform", "path": path, "matrix": T.T.ravel().tolist()}


def initial_view_bounds(model: Model, q: np.ndarray) -> draw.Bounds:
    """What a live page frames: the bounds of the poses ``q`` (nbody, 7) enlarged by 25 % about their
    centre (bodies usually move)."""
    b = draw.bounds_of_positions(model, q[:, :3])
    return draw.Bounds(b.center - 1.25 * (b.center - b.lo), b.center + 1.25 * (b.hi - b.center))


@dataclass
class _Frame:
    """What the simulation hands to the sender thread: a copy of one state (and its contacts)."""

    t: float
    step: int
    q: np.ndarray                     # (nbody, 7) poses
    contact_point: np.ndarray | None  # (n, 3) [m]
    contact_force: np.ndarray | None  # (n, 3) [N] on body B
    contact_phi: np.ndarray | None    # (n,) [m]
    rate: float | None                # measured simulated / wall time since the previous frame


FOLLOW_TRIGGER = 0.5
"""follow="auto" starts following once the moving bodies' centroid has left the initial view's centre by
this fraction of the view radius (horizontally)."""

LIVE_GROUND_FACTOR = 6.0
"""When the camera may follow, the live ground slab is this many view radii wide (the run may go far)."""


class LiveViewer:
    """Stream a running simulation to a Meshcat page (our 127.0.0.1-only server), never blocking it.

    ``update(state, info)`` only copies the state into a one-frame mailbox (and paces, throttles, or
    holds a paused run); a sender thread turns the latest frame into commands and sends it. A frame
    that arrives before the previous one was sent replaces it (counted in ``dropped``), and the sender
    rests after each send so that it takes at most ``max_duty`` of the wall time: a slow browser or
    server costs frames, never simulation speed. ``offered`` / ``sent`` / ``dropped`` count frames.

    Args:
        model: the compiled scene being simulated.
        realtime: False: as fast as the simulation runs; True: paced to real time; a number r > 0:
            paced so that simulated time advances r times as fast as wall time. The page's speed
            control overrides it.
        state: if given, draw the scene right away (otherwise at the first ``update``).
        port: HTTP port (None: 7000 or the next free one; 0: any free port).
        max_rate_hz: at most this many frames a second are offered to the sender [Hz].
        max_duty: the sender rests ``(1/max_duty − 1)`` × the wall time its last send took (building the
            commands shares the interpreter with the simulation, the server shares the CPUs).
        show_contacts: draw contact points and force arrows (force on body B, length
            min(|f|·scale, R), the scale rounded to 1-2-5 from 0.25·R / f_ref [m/N], R the radius of
            the initial scene enlarged by 25 % and f_ref the weight of the heaviest moving body, 1 N
            without gravity: the same rule as the playback, see playback.py).
        follow: "auto" (follow the moving bodies' centroid once it leaves the initial view), "centroid"
            (always), "off", or a body name (always follow that body). Only horizontal motion is
            followed (the ground stays where it is on screen).
        open_browser: open the page in the default browser.
        joint_frames: draw each link's inboard joint frame (viz/draw.py; scenes with joints only).
        server: an already started MeshcatServer to use (then ``close()`` leaves it running).
        out: where the URL is printed.
        announce: print the URL (off when the caller already did).
        threaded: send from a background thread (default); False sends inside ``update`` (tests).
        clock, sleep: the wall clock [s] and the sleep function used for pacing and throttling
            (default ``time.perf_counter`` / ``time.sleep``; tests inject fakes).
        prefix, lane, shift, opacity, view_bounds, owns_page, status_hook: for several runs streamed to
            one page (viz/lockstep.py): the scene group of this run, its index (run colour and tint as in
            the recorded page: ``playback.ARROW_COLORS``, ``TINT_WEIGHT``; lane 0 draws the ground), its
            shift [m] and opacity, the bounds the camera frames (default: this run's initial scene),
            whether this viewer clears the page and sets the camera and the legend (exactly one of the
            runs does), and a function that edits the legend dict of each frame before it is sent.
        holds: False: the page's pause does not hold this run (a lockstep run other than the first is held
            by its turn, and must stay free to stop when the first is interrupted).

    Page controls (live page): pause / play, single step (one simulation step per press while paused)
    and speed reach this object through the server; while paused, ``update`` holds the simulation.

    Usable as a context manager (``close()`` on exit: the last frame is sent first).
    """

    def __init__(self, model: Model, *, realtime: bool | float = False, state: State | None = None,
                 port: int | None = None, max_rate_hz: float = 30.0, max_duty: float = 0.25,
                 show_contacts: bool = True, follow: str = "auto", open_browser: bool = False,
                 server: MeshcatServer | None = None, out=None, announce: bool = True, threaded: bool = True,
                 joint_frames: bool = False, forces: str = "auto", force_scale: float | None = None,
                 clock=time.perf_counter, sleep=time.sleep, prefix: str = LIVE_PREFIX, lane: int = 0,
                 shift: Sequence[float] | None = None, opacity: float = 1.0,
                 view_bounds: draw.Bounds | None = None, owns_page: bool = True, status_hook=None,
                 holds: bool = True):
        from .playback import FORCE_MODES

        if forces not in FORCE_MODES:
            raise ValueError(f"forces must be one of {', '.join(FORCE_MODES)}, got {forces!r}")
        self.forces, self._user_force_scale = forces, force_scale
        self.model = model
        self.prefix, self.lane, self.opacity = prefix, int(lane), float(opacity)
        self.shift = np.zeros(3) if shift is None else np.asarray(shift, dtype=np.float64).reshape(3)
        self._view_bounds, self.owns_page, self._status_hook = view_bounds, owns_page, status_hook
        self.holds = holds
        self.rate_target = 1.0 if realtime is True else (float(realtime) if realtime else 0.0)
        self._rate_default = self.rate_target
        self.min_interval = 1.0 / max_rate_hz if max_rate_hz > 0 else 0.0
        self.max_duty = float(max_duty)
        self.show_contacts = show_contacts
        self.joint_frames = joint_frames
        self.follow = follow
        if follow not in ("auto", "centroid", "off") and follow not in list(model.body_names):
            raise ValueError(f"follow must be 'auto', 'centroid', 'off' or a body name, got {follow!r}")
        self._own_server = server is None
        self.server = server if server is not None else MeshcatServer(port=port).start()
        self.web_url = self.server.web_url
        self.out = out = out or sys.stdout
        self._clock, self._sleep = clock, sleep
        if announce:
            print(f"Meshcat viewer (live): {self.web_url}", file=out, flush=True)
        if open_browser:
            webbrowser.open(self.web_url, new=2)
        self._drawn = False
        self._closed = False
        self._dead = False          # the server stopped answering: no more streaming (close() still stops it)
        self._pace_origin: tuple[float, float] | None = None
        self._last_offer = -np.inf
        self._last_offered_t: tuple[float, float] | None = None
        self._slots = 0
        self._visible = []
        self._arrow_visible = []
        self._moving = np.flatnonzero(~np.asarray(model.body_fixed, dtype=bool))
        self._body_paths = [f"{prefix}/bodies/{draw.node_name(model.body_names[b])}"
                            for b in self._moving]
        weight = weight_reference([model])
        self._force_ref = weight if weight > 0 else 1.0
        self._radius = 1.0
        self._center = np.zeros(3)
        self._following = follow not in ("auto", "off")
        self.offered = self.sent = self.dropped = 0
        self._threaded = threaded
        self._cond = threading.Condition()
        self._pending: _Frame | None = None
        self._busy = False
        self._stop = False
        self._thread: threading.Thread | None = None
        self._control = {"paused": False, "steps": 0, "speed": None, "seq": -1}
        self._steps_seen = 0
        if state is not None:
            self._draw(state)

    @property
    def sends(self) -> int:
        """Frames sent (an alias of ``sent``)."""
        return self.sent

    # ---------------------------------------------------------------------------------- drawing
    def _draw(self, state: State) -> None:
        m = self.model
        bounds = self._view_bounds or initial_view_bounds(m, state.q)
        self._radius = bounds.radius
        self._center = bounds.center
        self._force_scale = (self._user_force_scale if self._user_force_scale is not None
                             else nice_scale(REFERENCE_ARROW * bounds.radius / self._force_ref))
        self._force_threshold = 1e-3 * self._force_ref
        ground = bounds
        if self.follow != "off":        # the run may go far: a wider ground to roll on
            half = LIVE_GROUND_FACTOR * (bounds.hi - bounds.lo) / 2
            ground = draw.Bounds(bounds.center - half, bounds.center + half)
        color = ARROW_COLORS[self.lane % len(ARROW_COLORS)]
        cmds = [draw.cmd_delete("/meshcat"), draw.cmd_delete("/convexsim_info")] if self.owns_page else []
        cmds += draw.model_commands(m, self.prefix, state.q, bounds=ground.shifted(-self.shift),
                                    joint_frames=self.joint_frames, opacity=self.opacity,
                                    draw_halfspaces=self.lane == 0, tint=hex_to_rgb(color),
                                    tint_weight=TINT_WEIGHT if self.lane > 0 else 0.0)
        if self.shift.any():
            cmds.append(draw.cmd_transform(self.prefix, translation_matrix(self.shift)))
        if self.owns_page:
            cmds += draw.camera_commands(bounds, hide_stock_grid=draw.has_halfspace(m))
        self.server.send(cmds)
        self._drawn = True

    def _grow_pool(self, n: int) -> list[dict]:
        cmds = []
        r = max(0.006 * self._radius, 5e-4) * ARROW_RADIUS_FACTORS[min(self.lane, len(ARROW_RADIUS_FACTORS) - 1)]
        color = ARROW_COLORS[self.lane % len(ARROW_COLORS)]
        for k in range(self._slots, n):
            slot = f"{self.prefix}/contacts/c{k}"
            cmds.append(draw.cmd_object(f"{slot}/point", point_object(color, 2 * r)))
            for name, obj, T in arrow_objects(color, r):
                cmds.append(draw.cmd_object(f"{slot}/force/{name}", obj))
                cmds.append(draw.cmd_transform(f"{slot}/force/{name}", T))
            self._visible.append(True)
            self._arrow_visible.append(True)
        self._slots = max(self._slots, n)
        return cmds

    def _contact_commands(self, fr: _Frame) -> tuple[list[dict], int]:
        if fr.contact_point is None or not self.show_contacts:
            return [], 0
        nc = fr.contact_point.shape[0]
        force = fr.contact_force if fr.contact_force is not None else np.zeros((nc, 3))
        mag = np.linalg.norm(force, axis=1) if nc else np.zeros(0)
        from .playback import MANY_CONTACTS, TOP_ARROWS

        show = np.flatnonzero((mag > self._force_threshold) | (fr.contact_phi <= 0.0))
        show = show[np.argsort(-mag[show], kind="stable")][:100]          # the largest forces first
        if self.forces == "top" or (self.forces == "auto" and show.size > MANY_CONTACTS):
            show = show[:TOP_ARROWS]                                     # readable on piles (legend says so)
        cmds = self._grow_pool(show.size)
        quats = quat_from_y_to(force[show]) if show.size else np.zeros((0, 4))
        lengths = mag[show] * self._force_scale
        if self.forces != "scaled":
            lengths = np.minimum(lengths, self._radius)                       # clamped at R
        arrows = pose_matrices(np.zeros((show.size, 3)), quats,
                               np.column_stack([np.ones(show.size), lengths, np.ones(show.size)]))
        points = fr.contact_point[show]
        for k in range(self._slots):
            slot = f"{self.prefix}/contacts/c{k}"
            on = k < show.size
            arrow_on = on and mag[show[k]] > self._force_threshold and self.forces != "off"
            if on:
                cmds.append(_transform_cmd(slot, translation_matrix(points[k])))
                if arrow_on:
                    cmds.append(_transform_cmd(f"{slot}/force", arrows[k]))
            if self._visible[k] != on:
                cmds.append(draw.cmd_property(slot, "visible", bool(on)))
                self._visible[k] = on
            if self._arrow_visible[k] != arrow_on:
                cmds.append(draw.cmd_property(f"{slot}/force", "visible", bool(arrow_on)))
                self._arrow_visible[k] = arrow_on
        return cmds, int(show.size)

    def follow_target(self, q: np.ndarray) -> np.ndarray | None:
        """The point the camera looks at for poses ``q`` (nbody, 7), or None to keep the initial framing.

        Horizontal (x, y) of the followed body or of the moving bodies' centroid, z of the initial view;
        "auto" switches on (for good) once that point is more than FOLLOW_TRIGGER·R from the view centre.
        """
        if self.follow == "off" or self._moving.size == 0:
            return None
        if self.follow in ("auto", "centroid"):
            p = np.asarray(q[self._moving, :3], dtype=np.float64).mean(axis=0)
        else:
            p = np.asarray(q[list(self.model.body_names).index(self.follow), :3], dtype=np.float64)
        target = np.array([p[0], p[1], self._center[2]])
        if not self._following:
            if np.linalg.norm(target - self._center) <= FOLLOW_TRIGGER * self._radius:
                return None
            self._following = True
        return target

    def _force_note(self) -> str:
        """The legend's arrow line: the scale, and which arrows are drawn when not all of them."""
        from .playback import MANY_CONTACTS, TOP_ARROWS

        if not self.show_contacts:
            return ""
        if self.forces == "off":
            return "contact points only, no force arrows"
        text = force_legend(self._force_scale, self._force_threshold,
                            self._radius if self.forces != "scaled" else np.inf)
        if self.forces == "top":
            text = f"arrows for the {TOP_ARROWS} largest forces only; " + text
        elif self.forces == "auto":
            text = f"above {MANY_CONTACTS} contacts, arrows for the {TOP_ARROWS} largest forces only; " + text
        return text

    def _frame_commands(self, fr: _Frame) -> list[dict]:
        Ts = pose_matrices(fr.q[self._moving, :3], fr.q[self._moving, 3:7])
        cmds = [_transform_cmd(p, T) for p, T in zip(self._body_paths, Ts)]
        target = self.follow_target(fr.q)
        if target is not None:
            cmds.append(draw.cmd_transform("/meshcat", translation_matrix(-target)))
        ccmds, nshow = self._contact_commands(fr)
        cmds += ccmds
        if not self.owns_page:
            return cmds
        status = {"title": f"{self.model.name} — live ({self.model.solver.kind.upper()})", "live": True,
                  "t": fr.t, "step": fr.step, "rate": fr.rate, "contacts": nshow,
                  "following": bool(target is not None),
                  "note": self._force_note()}
        if self._status_hook is not None:
            status = self._status_hook(status)
        cmds.append(draw.cmd_property("/convexsim_info", "convexsim", status))
        return cmds

    # ------------------------------------------------------------------------------- the sender
    def _send_frame(self, fr: _Frame) -> float:
        """Send one frame; returns the wall time it took [s] (building, sending and the server's handling,
        which competes for the same CPUs). Marks the viewer dead on a server error."""
        t0 = time.perf_counter()
        try:
            self.server.send(self._frame_commands(fr))
            self.sent += 1
        except ViewerServerError as exc:
            # A dead viewer must not kill the simulation: say so once and stop streaming.
            self._die(exc)
        return time.perf_counter() - t0

    def _die(self, exc: Exception) -> None:
        if not self._dead:
            print(f"viewer stopped streaming: {exc}", file=sys.stderr, flush=True)
        self._dead = True
        with self._cond:
            self._cond.notify_all()

    def _poll_control(self) -> None:
        query = getattr(self.server, "control", None)
        if query is None or self._dead:
            return
        try:
            ctrl = query()
        except ViewerServerError as exc:
            self._die(exc)
            return
        with self._cond:
            self._control = ctrl
            self._cond.notify_all()

    def _run_sender(self) -> None:
        poll_every, next_poll = 0.1, 0.0
        while True:
            with self._cond:
                while self._pending is None and not self._stop:
                    if time.perf_counter() >= next_poll:
                        break
                    self._cond.wait(max(next_poll - time.perf_counter(), 0.0))
                fr, self._pending = self._pending, None
                stop = self._stop
                self._busy = fr is not None
            cost = 0.0
            if fr is not None and not self._dead:
                cost = self._send_frame(fr)
            with self._cond:
                self._busy = False
                self._cond.notify_all()
            if self._dead or (stop and self._pending is None):
                return
            if time.perf_counter() >= next_poll:
                self._poll_control()
                next_poll = time.perf_counter() + poll_every
            rest = max(self.min_interval, cost * (1.0 / self.max_duty - 1.0)) if fr is not None else 0.0
            if rest > 0:
                with self._cond:
                    self._cond.wait_for(lambda: self._stop, timeout=rest)

    def _offer(self, fr: _Frame) -> None:
        self.offered += 1
        if not self._threaded:
            self._send_frame(fr)
            self._poll_control()
            return
        with self._cond:
            if self._pending is not None:
                self.dropped += 1
            self._pending = fr
            self._cond.notify_all()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run_sender, name="convexsim-viewer", daemon=True)
            self._thread.start()

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until the latest offered frame has been sent (or the viewer died)."""
        with self._cond:
            self._cond.wait_for(lambda: self._dead or (self._pending is None and not self._busy), timeout)

    # ---------------------------------------------------------------------------------- updates
    def _snapshot(self, state: State, info, now: float) -> _Frame:
        rate = None
        if self._last_offered_t is not None and now > self._last_offered_t[1]:
            rate = (float(state.t) - self._last_offered_t[0]) / (now - self._last_offered_t[1])
        contacts = getattr(info, "contacts", None) if info is not None else None
        point = force = phi = None
        if contacts is not None and self.show_contacts:
            nc = contacts.count
            point = np.array(contacts.point[:nc], dtype=np.float64)
            phi = np.array(contacts.phi[:nc], dtype=np.float64)
            f = getattr(info, "force_world", None)
            force = (np.array(f, dtype=np.float64) if f is not None and np.shape(f)[0] == nc
                     else np.zeros((nc, 3)))
        return _Frame(float(state.t), int(state.step), np.array(state.q, dtype=np.float64), point, force, phi,
                      rate)

    def _pace(self, state: State) -> float:
        """Sleep so simulated time does not run ahead of wall time × rate; returns the clock after it."""
        now = self._clock()
        speed = self._control.get("speed")
        rate = float(speed) if speed else self._rate_default
        if rate != self.rate_target:
            self.rate_target, self._pace_origin = rate, None
        if self.rate_target > 0:
            if self._pace_origin is None:
                self._pace_origin = (now, float(state.t))
            due = self._pace_origin[0] + (float(state.t) - self._pace_origin[1]) / self.rate_target
            if due > now:
                self._sleep(due - now)
                now = self._clock()
            elif now - due > 0.25:
                # The simulation is slower than real time (or stalled): re-anchor instead of
                # racing to catch up later.
                self._pace_origin = (now, float(state.t))
        return now

    def _hold_while_paused(self, state: State, info, shown: bool) -> None:
        """While the page says "paused", hold the simulation (show where it stopped first); one requested
        single step lets one ``update`` through."""
        if not self._control.get("paused"):
            self._steps_seen = int(self._control.get("steps", 0))
            return
        if not shown:
            self._offer(self._snapshot(state, info, self._clock()))
        while not (self._closed or self._dead):
            ctrl = self._control
            if not ctrl.get("paused"):
                self._steps_seen = int(ctrl.get("steps", 0))
                self._pace_origin = None        # no catching up on the paused time
                return
            if int(ctrl.get("steps", 0)) > self._steps_seen:
                self._steps_seen += 1
                self._pace_origin = None
                return
            if not self._threaded:
                self._poll_control()
                self._sleep(0.05)
            else:
                with self._cond:
                    self._cond.wait(0.1)

    def update(self, state: State, info=None, *, force: bool = False) -> bool:
        """Offer ``state`` (and ``info.contacts`` / ``info.force_world``) for display; True if offered.

        Pacing (``realtime`` or the page's speed) sleeps so that simulated time does not run ahead of
        wall time × rate; a simulation slower than that is shown as fast as it runs (the pacing
        re-anchors after 0.25 s lag). Frames closer than 1/max_rate_hz in wall time are skipped. While
        the page is paused this call holds the simulation.
        """
        if self._closed or self._dead:
            return False
        if not self._drawn:
            try:
                self._draw(state)
            except ViewerServerError as exc:
                self._die(exc)
                return False
        now = self._pace(state)
        offered = force or now - self._last_offer >= self.min_interval
        if offered:
            self._offer(self._snapshot(state, info, now))
            self._last_offer = now
            self._last_offered_t = (float(state.t), now)
        if self.holds:
            self._hold_while_paused(state, info, offered)
        return offered and not self._dead

    def publish(self, trajectories: Sequence[Trajectory], *, models: Sequence[Model] | None = None,
                **options) -> None:
        """Replace the live scene by the recorded playback of ``trajectories`` (PlaybackOptions fields)."""
        self._stop_sender()
        pb = build_playback(trajectories, PlaybackOptions(**options), models=models or [self.model])
        self.server.send([draw.cmd_delete("/meshcat"), draw.cmd_delete("/convexsim_info")] + pb.commands)

    def wait(self) -> None:
        """Block until Ctrl-C / SIGTERM (prints the URL again and "Ctrl-C to stop")."""
        print(f"Meshcat viewer: {self.web_url}", file=self.out, flush=True)
        wait_for_stop_signal(self.server, out=self.out)

    def _stop_sender(self) -> None:
        """Send the last pending frame, then stop the sender thread."""
        if self._thread is not None:
            with self._cond:
                self._stop = True
                self._cond.notify_all()
            self._thread.join(timeout=60)
            self._thread = None
            self._stop = False

    def close(self) -> None:
        """Send the last frame, stop our server (if we started it). Idempotent."""
        if not self._closed:
            self._closed = True
            self._stop_sender()
            if self._own_server:
                self.server.stop()

    def __enter__(self) -> "LiveViewer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def serve_trajectories(trajectories: Sequence[Trajectory], *, labels: Sequence[str] | None = None,
                       layout: str = "auto", offset: Sequence[float] | None = None,
                       force_scale: float | None = None, force_threshold: float | None = None,
                       show_contacts: bool = True, open_browser: bool = False, port: int | None = None,
                       html_out: str | Path | None = None, models: Sequence[Model] | None = None,
                       follow: str = "auto", block: bool = True, out=None,
                       joint_frames: bool = False, forces: str = "auto") -> MeshcatServer | None:
    """Serve the playback of ``trajectories`` on our 127.0.0.1-only Meshcat server.

    Prints the URL and "Ctrl-C to stop", blocks until SIGINT/SIGTERM, then stops the server (no
    orphan). With ``html_out`` the standalone page is written too. With ``block=False`` the running
    server is returned instead (the caller stops it). Options as in ``export_html``.
    """
    out = out or sys.stdout
    opts = PlaybackOptions(labels=labels, layout=layout, offset=offset, force_scale=force_scale,
                           force_threshold=force_threshold, show_contacts=show_contacts, follow=follow,
                           joint_frames=joint_frames, forces=forces)
    pb = build_playback(trajectories, opts, models=models)
    if html_out is not None:
        from .export import write_page

        path = write_page(pb, html_out)
        print(f"HTML animation: {path} ({path.stat().st_size / 1e6:.2f} MB)", file=out, flush=True)
    server = MeshcatServer(port=port).start()
    try:
        server.send(pb.commands)
        print(f"Meshcat viewer: {server.web_url}", file=out, flush=True)
        if open_browser:
            webbrowser.open(server.web_url, new=2)
        if not block:
            return server
        wait_for_stop_signal(server, out=out)
    except BaseException:
        server.stop()
        raise
    server.stop()
    return None


class RunViewer:
    """One viewer for a whole ``convexsim run --view`` command (one server for every solver run).

    Each run streams live (``live(model)`` gives its step callback); ``finish(trajectories)`` then
    replaces the live scene by the recorded playback of every run on the same server and, with
    ``wait=True``, blocks with "Ctrl-C to stop", so a run that ends before the page is opened can still
    be watched. ``close()`` (also on ``with`` exit, Ctrl-C included) stops the server. The server is
    started (and its URL printed) at the first ``live`` or ``finish``.
    """

    def __init__(self, *, realtime: bool | float = False, port: int | None = None, open_browser: bool = False,
                 out=None, layout: str = "auto", follow: str = "auto", joint_frames: bool = False,
                 forces: str = "auto", force_scale: float | None = None, show_contacts: bool = True):
        self.forces, self.force_scale, self.show_contacts = forces, force_scale, show_contacts
        self.realtime = realtime
        self.joint_frames = joint_frames
        self.layout, self.follow = layout, follow
        self.out = out or sys.stdout
        self._port, self._open_browser = port, open_browser
        self.server: MeshcatServer | None = None
        self.web_url = ""
        self.viewer = None          # the LiveViewer (or LockstepViewer) of the run being streamed

    def ensure_server(self) -> MeshcatServer:
        if self.server is None:
            self.server = MeshcatServer(port=self._port).start()
            self.web_url = self.server.web_url
            print(f"Meshcat viewer: {self.web_url} (live while simulating, then the recorded playback)",
                  file=self.out, flush=True)
            if self._open_browser:
                webbrowser.open(self.web_url, new=2)
        return self.server

    def live(self, model: Model):
        """A step callback streaming ``model``'s run (``simulate(..., step_callback=...)``)."""
        self.ensure_server()
        if self.viewer is not None:
            self.viewer.close()
        self.viewer = LiveViewer(model, realtime=self.realtime, server=self.server, out=self.out,
                                 announce=False, follow=self.follow, joint_frames=self.joint_frames,
                                 forces=self.forces, force_scale=self.force_scale,
                                 show_contacts=self.show_contacts)
        viewer = self.viewer
        return lambda m, s, info: viewer.update(s, info)

    def finish(self, trajectories: Sequence[Trajectory], *, labels: Sequence[str] | None = None,
               wait: bool = True, layout: str | None = None) -> None:
        """Publish the playback of ``trajectories`` (``layout``: default the one given at construction);
        with ``wait``, block until Ctrl-C / SIGTERM."""
        if self.viewer is not None:
            self.viewer.close()
            self.viewer = None
        try:
            self.ensure_server()
            if trajectories:
                opts = PlaybackOptions(labels=labels, layout=layout or self.layout, joint_frames=self.joint_frames,
                                       forces=self.forces, force_scale=self.force_scale,
                                       show_contacts=self.show_contacts)
                pb = build_playback(trajectories, opts)
                self.server.send([draw.cmd_delete("/meshcat"), draw.cmd_delete("/convexsim_info")] + pb.commands)
                print(f"Meshcat viewer: {self.web_url} (playback of the recorded run"
                      f"{'s' if len(trajectories) > 1 else ''})", file=self.out, flush=True)
        except ViewerServerError as exc:  # the run's files are saved already: say so, no traceback
            print(f"viewer: cannot show the recorded playback ({exc})", file=sys.stderr, flush=True)
            return
        if wait:
            wait_for_stop_signal(self.server, out=self.out)

    def close(self) -> None:
        """Stop the server. Idempotent."""
        if self.viewer is not None:
            self.viewer.close()
            self.viewer = None
        if self.server is not None:
            self.server.stop()

    def __enter__(self) -> "RunViewer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
