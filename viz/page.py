"""The viewer pages: the live page served by our server and the standalone HTML export.

Both pages run meshcat 0.3.2's bundled viewer (``main.min.js``) plus a small overlay script of ours:

* a legend and a readout in the top-left corner, drawn from the dict stored by a ``set_property``
  command on the scene node ``/convexsim_info`` (property ``convexsim``), so the live page and the
  export share one mechanism: title, one legend row per trajectory (label; a square swatch and text for
  how its bodies are drawn: solid / translucent, tinted, in place / shifted; a disc for its contact-marker
  colour; notes), the force-arrow scale, and the simulated time: ``t0 + animator.time`` during playback, or
  the streamed time and real-time rate while a simulation is live;
* on the live page, a red line when the websocket closes (meshcat 0.3.2 does not reconnect);
* keyboard shortcuts for playback: Space play/pause, ←/→ one recorded frame back/forward, −/= halve or
  double the speed (the dat.GUI "Open Controls › Animations" folder offers play, pause, reset, the
  time scrubber and ``timeScale``);
* ``autoplay: false`` in the info pauses a freshly loaded animation (it is always published with
  ``play=True``, which avoids the 0.3.2 trap where the scrubber does nothing until Play was pressed).

The export embeds every command as base64 msgpack and decodes them synchronously in order (the
stock ``static_html`` uses ``fetch(data:)`` promises, whose order is not guaranteed).
"""

from __future__ import annotations

import base64
import functools
import html
import os
from typing import Iterable

import umsgpack

OVERLAY_JS = r"""
(function () {
  "use strict";
  function child(names) {            // walk existing nodes only (scene_tree.find creates missing ones)
    let n = viewer.scene_tree;
    for (const k of names) { n = n && n.children[k]; }
    return n;
  }
  function info() { const n = child(["convexsim_info"]); return (n && n.object.convexsim) || {}; }
  function esc(s) { return String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c])); }
  const box = document.createElement("div");
  box.id = "convexsim-overlay";
  box.style.cssText = "position:absolute;left:8px;top:8px;z-index:10;max-width:46vw;padding:6px 9px;" +
    "font:13px/1.45 system-ui,sans-serif;color:#111;background:rgba(255,255,255,0.82);" +
    "border-radius:5px;pointer-events:none";
  document.body.appendChild(box);
  let lastHtml = null, lastActions = null;
  function render() {
    const inf = info(), a = viewer.animator;
    if (a.actions.length && a.actions !== lastActions) {
      lastActions = a.actions;
      if (inf.autoplay === false) { a.pause(); a.seek(0); a.time = 0; }
    }
    let h = "";
    if (inf.title) h += "<b>" + esc(inf.title) + "</b><br>";
    function sw(color, opacity, round) {
      return '<span style="display:inline-block;width:12px;height:12px;margin:0 4px 0 6px;vertical-align:-1px;' +
             'border:1px solid #333;' + (round ? 'border-radius:6px;' : '') + 'background:' + esc(color) +
             ';opacity:' + (opacity === undefined ? 1 : opacity) + '"></span>';
    }
    for (const e of (inf.legend || [])) {
      h += '<div class="convexsim-legend-row"><b>' + esc(e.label) + '</b>';
      if (e.body) {              // body style (square) and contact-marker colour (disc), told apart
        h += sw(e.body.color, e.body.opacity, false) + esc(e.body.text);
        if (e.marker) h += sw(e.marker.color, 1, true) + esc(e.marker.text);
      } else {
        h += sw(e.swatch, e.opacity, false);
      }
      h += (e.note ? ' <span style="color:#555">' + esc(e.note) + '</span>' : '') + '</div>';
    }
    const t0 = inf.t0 || 0;
    if (a.duration > 0) {
      h += '<div id="convexsim-time">t = ' + (t0 + a.time).toFixed(3) + " s of " + (t0 + a.duration).toFixed(3) +
           " s &nbsp;" + (a.playing ? "&#9654;" : "&#10074;&#10074;") + " &nbsp;speed &times;" +
           a.mixer.timeScale.toFixed(2) + "</div>";
    } else if (inf.live) {
      h += '<div id="convexsim-time">t = ' + Number(inf.t).toFixed(3) + " s &nbsp;step " + inf.step +
           (inf.rate ? " &nbsp;" + Number(inf.rate).toFixed(2) + "&times; real time" : "") +
           " &nbsp;" + inf.contacts + " contacts</div>";
    }
    if (inf.note) h += '<div style="color:#555">' + esc(inf.note) + "</div>";
    if (window.convexsim_disconnected) h += '<div style="color:#b00">no connection to the viewer server ' +
      "(stopped?): the scene is frozen; reload after restarting it</div>";
    if (h !== lastHtml) { box.innerHTML = h; box.style.display = h ? "block" : "none"; lastHtml = h; }
  }
  window.convexsim_render = render;
  setInterval(render, 100);
  document.addEventListener("keydown", function (e) {
    const a = viewer.animator;
    if (!a.actions.length || (e.target && e.target.tagName === "INPUT")) return;
    if (e.code === "Space") {
      if (a.playing) a.pause(); else a.play();
      e.preventDefault();
    } else if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
      a.pause();
      const dt = info().frame_dt || 1 / 30;
      const t = Math.min(a.duration, Math.max(0, a.time + (e.key === "ArrowRight" ? dt : -dt)));
      a.seek(t); a.time = t;
      if (a.time_scrubber) a.time_scrubber.updateDisplay();
      e.preventDefault();
    } else if (e.key === "-" || e.key === "=" || e.key === "+") {
      a.mixer.timeScale = Math.min(16, Math.max(1 / 16, a.mixer.timeScale * (e.key === "-" ? 0.5 : 2)));
    }
    render();
  });
})();
"""

_STYLE = "body{margin:0}#meshcat-pane{width:100vw;height:100vh;overflow:hidden}"


@functools.lru_cache(maxsize=1)
def meshcat_js() -> str:
    """The viewer bundle shipped with meshcat (three.js r132, dat.GUI, msgpack-lite), as text."""
    import meshcat

    path = os.path.join(meshcat.viewer_assets_path(), "dist", "main.min.js")
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def live_page_html() -> str:
    """The page our server returns at ``/static/``: stock viewer + websocket + overlay."""
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>convexsim viewer</title>"
            f"<style>{_STYLE}</style></head><body><div id=\"meshcat-pane\"></div>"
            "<script src=\"main.min.js\"></script><script>"
            "var viewer = new MeshCat.Viewer(document.getElementById('meshcat-pane'));"
            "try { viewer.connect(); viewer.connection.addEventListener('close', () => {"
            " window.convexsim_disconnected = true; }); }"
            " catch (e) { console.info('no MeshCat websocket server', e); }"
            f"</script><script>{OVERLAY_JS}</script></body></html>")


def _ext_to_msgpack(obj):
    import msgpack

    if isinstance(obj, umsgpack.Ext):
        return msgpack.ExtType(obj.type, obj.data)
    raise TypeError(f"cannot pack {type(obj).__name__}")


def pack_command(cmd: dict) -> bytes:
    """msgpack bytes of one lowered command, as the viewer's ``handle_command_bytearray`` expects.

    Uses the C ``msgpack`` package when installed (same bytes format, ~10× faster on large
    animations), else meshcat's pure-Python ``umsgpack``.
    """
    try:
        import msgpack
    except ImportError:
        return umsgpack.packb(cmd)
    return msgpack.packb(cmd, default=_ext_to_msgpack, use_bin_type=True)


def static_page_html(commands: Iterable[dict], *, title: str = "convexsim") -> str:
    """A self-contained page (no network, works from file://) replaying ``commands`` in order."""
    blobs = ",\n".join('"' + base64.b64encode(pack_command(c)).decode("ascii") + '"' for c in commands)
    loader = ("(function(){const cmds=[\n" + blobs + "\n];"
              "for(const s of cmds){const b=atob(s);const u=new Uint8Array(b.length);"
              "for(let i=0;i<b.length;i++)u[i]=b.charCodeAt(i);viewer.handle_command_bytearray(u);}"
              "window.convexsim_loaded=true;})();")
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
            "<div id=\"meshcat-pane\"></div>"
            f"<script>{meshcat_js()}</script>"
            "<script>var viewer = new MeshCat.Viewer(document.getElementById('meshcat-pane'));</script>"
            f"<script>{OVERLAY_JS}</script><script>{loader}</script></body></html>")
