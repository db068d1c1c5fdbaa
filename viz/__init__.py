"""Meshcat viewer for convexsim (installed as ``convexsim.viz``); the core never imports it.

Public API (imported lazily, so ``import convexsim.viz`` stays cheap):

* ``export_html(trajectories, out_path, *, labels=None, layout="auto", offset=None,
  force_scale=None, force_threshold=None, show_contacts=True, follow="auto", ...) -> Path``: standalone
  HTML animation (no server, works from file:// without network), with a control bar.
* ``show(trajectories, *, height=480, **export_options) -> InlinePlayback``: the same page inline in a Jupyter
  notebook (an iframe; ``[sap, lcp]`` side by side), displayed by its ``_repr_html_`` (docs/notebooks.md).
* ``serve_trajectories(trajectories, *, labels=None, layout="auto", open_browser=False,
  port=None, html_out=None, ...) -> None``: serve the same animation on 127.0.0.1, print the URL and
  "Ctrl-C to stop", block until SIGINT/SIGTERM, stop the server.
* ``LiveViewer(model, *, realtime=False, follow="auto", ...)``: stream a running simulation without
  blocking it (``.update(state, info)``, ``.flush()``, ``.publish(trajectories)``, ``.wait()``,
  ``.close()``; a context manager); the live page's pause / step / speed hold or pace the run.
* ``RunViewer(*, realtime=False, port=None)``: one server for a whole ``convexsim run --view``
  (``.live(model)`` -> step callback, ``.finish(trajectories, wait=True)`` publishes the playback and
  blocks with "Ctrl-C to stop", ``.close()``); ``open_lockstep(run_viewer, models, states, duration=)``
  streams several runs side by side in lockstep on its page (viz/lockstep.py).
* ``run_lockstep(runs, time_steps, *, chunk=0.005, on_step=None)`` / ``LockstepViewer``: run several
  ``run_model`` calls in turns of ``chunk`` simulated seconds, streamed to one page.
* ``MeshcatServer(*, port=None, log_path=None)``: our Meshcat server launcher (127.0.0.1 only, log
  file, clean stop, parent-death watchdog).
* ``build_playback`` / ``PlaybackOptions``: the commands behind export and serve.

Documentation: docs/viewer.md (meshcat 0.3.2 traps handled here: its section "meshcat 0.3.2 traps").
"""

from __future__ import annotations

from convexsim._lazy import lazy_attributes

_EXPORTS = {
    "export_html": "export",
    "serve_trajectories": "live",
    "LiveViewer": "live",
    "RunViewer": "live",
    "LockstepViewer": "lockstep",
    "run_lockstep": "lockstep",
    "open_lockstep": "lockstep",
    "MeshcatServer": "server",
    "ViewerServerError": "server",
    "build_playback": "playback",
    "PlaybackOptions": "playback",
    "show": "notebook",
    "InlinePlayback": "notebook",
}
"""Public names -> the submodule of convexsim.viz that defines them, imported on first use."""

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_attributes("convexsim.viz", _EXPORTS, globals())
