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
from pathlib import Path
from typing import Sequence

import numpy as np

from convexsim.io.trajectory import Trajectory
from convexsim.model import Model, State

from . import draw
from ._math import pose_matrix, quat_from_y_to
from .playback import (ARROW_COLORS, REFERENCE_ARROW, PlaybackOptions, arrow_objects, build_playback,
                       point_object, weight_reference)
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


class LiveViewer:
    """Stream a running simulation to a Meshcat page (our 127.0.0.1-only server).

    Args:
        model: the compiled scene being simulated.
        realtime: False: as fast as the simulation runs; True: paced to real time; a number r > 0:
            paced so that simulated time advances r times as fast as wall time.
        state: if given, draw the scene right away (otherwise at the first ``update``).
        port: HTTP port (None: 7000 or the next free one; 0: any free port).
        max_rate_hz: at most this many updates a second are sent to the browser [Hz].
        show_contacts: draw contact points and force arrows (force on body B, length
            min(|f|·scale, R) with scale = 0.25·R / f_ref [m/N], R the radius of the initial scene
            enlarged by 25 % and f_ref the weight of the heaviest moving body, 1 N without gravity:
            the same rule as the playback, see playback.py).
        open_browser: open the page in the default browser.
        server: an already started MeshcatServer to use (then ``close()`` leaves it running).
        out: where the URL is printed.
        announce: print the URL (off when the caller already did).
        clock, sleep: the wall clock [s] and the sleep function used for pacing and throttling
            (default ``time.perf_counter`` / ``time.sleep``; tests inject fakes).

    ``update(state, info)`` is meant for ``simulate(..., step_callback=lambda m, s, i: viewer.update(s, i))``;
    it returns at once when throttled. Usable as a context manager (``close()`` on exit).
    """

    def __init__(self, model: Model, *, realtime: bool | float = False, state: State | None = None,
                 port: int | None = None, max_rate_hz: float = 30.0, show_contacts: bool = True,
                 open_browser: bool = False, server: MeshcatServer | None = None, out=None,
                 announce: bool = True, clock=time.perf_counter, sleep=time.sleep):
        self.model = model
        self.rate_target = 1.0 if realtime is True else (float(realtime) if realtime else 0.0)
        self.min_interval = 1.0 / max_rate_hz if max_rate_hz > 0 else 0.0
        self.show_contacts = show_contacts
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
        self._last_send = -np.inf
        self._last_sent_t: tuple[float, float] | None = None
        self._slots = 0
        self._visible = []
        self._arrow_visible = []
        self._moving = np.flatnonzero(~np.asarray(model.body_fixed, dtype=bool))
        weight = weight_reference([model])
        self._force_ref = weight if weight > 0 else 1.0
        self._radius = 1.0
        self.sends = 0
        if state is not None:
            self._draw(state)

    # ---------------------------------------------------------------------------------- drawing
    def _draw(self, state: State) -> None:
        m = self.model
        bounds = draw.bounds_of_positions(m, state.q[:, :3])
        # Bodies usually move: frame a bit more than the initial configuration.
        bounds = draw.Bounds(bounds.center - 1.25 * (bounds.center - bounds.lo),
                             bounds.center + 1.25 * (bounds.hi - bounds.center))
        self._radius = bounds.radius
        self._force_scale = REFERENCE_ARROW * bounds.radius / self._force_ref
        self._force_threshold = 1e-3 * self._force_ref
        cmds = [draw.cmd_delete("/meshcat"), draw.cmd_delete("/convexsim_info")]
        cmds += draw.model_commands(m, LIVE_PREFIX, state.q, bounds=bounds)
        cmds += draw.camera_commands(bounds, hide_stock_grid=draw.has_halfspace(m))
        self.server.send(cmds)
        self._drawn = True

    def _grow_pool(self, n: int) -> list[dict]:
        cmds = []
        r = max(0.006 * self._radius, 5e-4)
        color = ARROW_COLORS[0]
        for k in range(self._slots, n):
            slot = f"{LIVE_PREFIX}/contacts/c{k}"
            cmds.append(draw.cmd_object(f"{slot}/point", point_object(color, 2 * r)))
            for name, obj, T in arrow_objects(color, r):
                cmds.append(draw.cmd_object(f"{slot}/force/{name}", obj))
                cmds.append(draw.cmd_transform(f"{slot}/force/{name}", T))
            self._visible.append(True)
            self._arrow_visible.append(True)
        self._slots = max(self._slots, n)
        return cmds

    def _contact_commands(self, info) -> tuple[list[dict], int]:
        contacts = getattr(info, "contacts", None)
        if contacts is None or not self.show_contacts:
            return [], 0
        nc = contacts.count
        force = getattr(info, "force_world", None)
        if force is None or np.shape(force)[0] != nc:
            force = np.zeros((nc, 3))
        mag = np.linalg.norm(force, axis=1) if nc else np.zeros(0)
        show = np.flatnonzero((mag > self._force_threshold) | (contacts.phi <= 0.0))[:100]
        cmds = self._grow_pool(show.size)
        quats = quat_from_y_to(force[show]) if show.size else np.zeros((0, 4))
        for k in range(self._slots):
            slot = f"{LIVE_PREFIX}/contacts/c{k}"
            on = k < show.size
            arrow_on = on and mag[show[k]] > self._force_threshold
            if on:
                i = show[k]
                cmds.append(draw.cmd_transform(slot, pose_matrix(contacts.point[i])))
                if arrow_on:
                    L = min(float(mag[i]) * self._force_scale, self._radius)     # clamped at R
                    cmds.append(draw.cmd_transform(f"{slot}/force", pose_matrix(np.zeros(3), quats[k], (1.0, L, 1.0))))
            if self._visible[k] != on:
                cmds.append(draw.cmd_property(slot, "visible", bool(on)))
                self._visible[k] = on
            if self._arrow_visible[k] != arrow_on:
                cmds.append(draw.cmd_property(f"{slot}/force", "visible", bool(arrow_on)))
                self._arrow_visible[k] = arrow_on
        return cmds, int(show.size)

    # ---------------------------------------------------------------------------------- updates
    def update(self, state: State, info=None, *, force: bool = False) -> bool:
        """Show ``state`` (and ``info.contacts`` / ``info.force_world``); returns True if it was sent.

        Pacing (``realtime``) sleeps so that simulated time does not run ahead of wall time × rate; a
        simulation slower than that is shown as fast as it runs (the pacing re-anchors after 0.25 s lag).
        """
        if self._closed or self._dead:
            return False
        if not self._drawn:
            try:
                self._draw(state)
            except ViewerServerError as exc:
                print(f"viewer stopped streaming: {exc}", file=sys.stderr, flush=True)
                self._dead = True
                return False
        now = self._clock()
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
        if not force and now - self._last_send < self.min_interval:
            return False
        cmds = []
        for b in self._moving:
            path = f"{LIVE_PREFIX}/bodies/{draw.node_name(self.model.body_names[b])}"
            cmds.append(draw.cmd_transform(path, pose_matrix(state.q[b, :3], state.q[b, 3:7])))
        ccmds, nshow = self._contact_commands(info) if info is not None else ([], 0)
        cmds += ccmds
        rate = None
        if self._last_sent_t is not None and now > self._last_sent_t[1]:
            rate = (float(state.t) - self._last_sent_t[0]) / (now - self._last_sent_t[1])
        status = {"title": f"{self.model.name} — live ({self.model.solver.kind.upper()})", "live": True,
                  "t": float(state.t), "step": int(state.step), "rate": rate, "contacts": nshow,
                  "note": (f"force arrows: 1 m = {1.0 / self._force_scale:.4g} N, clamped at "
                           f"{self._radius:.3g} m" if self.show_contacts else "")}
        cmds.append(draw.cmd_property("/convexsim_info", "convexsim", status))
        try:
            self.server.send(cmds)
        except ViewerServerError as exc:
            # A dead viewer must not kill the simulation: say so once and stop streaming.
            print(f"viewer stopped streaming: {exc}", file=sys.stderr, flush=True)
            self._dead = True
            return False
        self._last_send = now
        self._last_sent_t = (float(state.t), now)
        self.sends += 1
        return True

    def publish(self, trajectories: Sequence[Trajectory], *, models: Sequence[Model] | None = None,
                **options) -> None:
        """Replace the live scene by the recorded playback of ``trajectories`` (PlaybackOptions fields)."""
        pb = build_playback(trajectories, PlaybackOptions(**options), models=models or [self.model])
        self.server.send([draw.cmd_delete("/meshcat"), draw.cmd_delete("/convexsim_info")] + pb.commands)

    def wait(self) -> None:
        """Block until Ctrl-C / SIGTERM (prints the URL again and "Ctrl-C to stop")."""
        print(f"Meshcat viewer: {self.web_url}", file=self.out, flush=True)
        wait_for_stop_signal(self.server, out=self.out)

    def close(self) -> None:
        """Stop our server (if we started it). Idempotent."""
        if not self._closed:
            self._closed = True
            if self._own_server:
                self.server.stop()

    def __enter__(self) -> "LiveViewer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def serve_trajectories(trajectories: Sequence[Trajectory], *, labels: Sequence[str] | None = None,
                       layout: str = "overlay", offset: Sequence[float] | None = None,
                       force_scale: float | None = None, force_threshold: float | None = None,
                       show_contacts: bool = True, open_browser: bool = False, port: int | None = None,
                       html_out: str | Path | None = None, models: Sequence[Model] | None = None,
                       block: bool = True, out=None) -> MeshcatServer | None:
    """Serve the playback of ``trajectories`` on our 127.0.0.1-only Meshcat server.

    Prints the URL and "Ctrl-C to stop", blocks until SIGINT/SIGTERM, then stops the server (no
    orphan). With ``html_out`` the standalone page is written too. With ``block=False`` the running
    server is returned instead (the caller stops it). Options as in ``export_html``.
    """
    out = out or sys.stdout
    opts = PlaybackOptions(labels=labels, layout=layout, offset=offset, force_scale=force_scale,
                           force_threshold=force_threshold, show_contacts=show_contacts)
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
                 out=None):
        self.realtime = realtime
        self.out = out or sys.stdout
        self._port, self._open_browser = port, open_browser
        self.server: MeshcatServer | None = None
        self.web_url = ""
        self.viewer: LiveViewer | None = None

    def _ensure_server(self) -> MeshcatServer:
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
        self._ensure_server()
        if self.viewer is not None:
            self.viewer.close()
        self.viewer = LiveViewer(model, realtime=self.realtime, server=self.server, out=self.out, announce=False)
        viewer = self.viewer
        return lambda m, s, info: viewer.update(s, info)

    def finish(self, trajectories: Sequence[Trajectory], *, labels: Sequence[str] | None = None,
               wait: bool = True) -> None:
        """Publish the playback of ``trajectories``; with ``wait``, block until Ctrl-C / SIGTERM."""
        if self.viewer is not None:
            self.viewer.close()
            self.viewer = None
        try:
            self._ensure_server()
            if trajectories:
                pb = build_playback(trajectories, PlaybackOptions(labels=labels))
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
