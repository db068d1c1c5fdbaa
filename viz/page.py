"""The viewer pages: the live page served by our server and the standalone HTML export.

Both pages run meshcat 0.3.2's bundled viewer (``main.min.js``) plus a small overlay script of ours:

* a legend and a readout in the top-left corner, drawn from the dict stored by a ``set_property``
  command on the scene node ``/convexsim_info`` (property ``convexsim``), so the live page and the
  export share one mechanism: title, one legend row per trajectory (label; a square swatch and text for
  how its bodies are drawn: solid / translucent, tinted, in place / shifted; a disc for its contact-marker
  colour; notes), the force-arrow scale, and the simulated time: ``t0 + animator.time`` during playback, or
  the streamed time and real-time rate while a simulation is live;
* on the live page, a red line when the websocket closes (meshcat 0.3.2 does not reconnect);
* a control bar at the bottom, with its keyboard shortcuts written on it. Playback: reset, one frame
  back, play/pause, one frame forward, a timeline to scrub, the time, a speed menu (×0.1 … ×4); keys
  Space play/pause, → / ← one recorded frame forward / back, + / − double / halve the speed. Live:
  pause/run, one simulation step (→), and the real-time pacing (max, ×1 … ×0.1; + / −), sent to our
  server as ``{"convexsim_control": {...}}`` on the websocket (the Python side holds the run while
  paused, see live.py);
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
  // The legend is redrawn in the same animation frame as the 3D view, right after it (issue 27): with
  // only the timer above, a frame rendered after the animator jumped ahead (a throttled tab, headless
  // Chromium's virtual time, a page that renders one frame a second) showed a later pose than the legend
  // named. ``convexsim_drawn_time`` is the animation time of the frame last drawn (tests read it back).
  const baseRender = viewer.render.bind(viewer);
  viewer.render = function () {
    const a = viewer.animator;
    if (a && a.duration > 0) {       // the time the mixer has applied to the scene, as display_progress
      a.time = a.actions.reduce((m, x) => Math.max(m, x.time), 0);
    }
    baseRender();
    window.convexsim_drawn_time = a ? a.time : 0;
    render();
    updateBar();
  };

  // ---- the control bar (bottom): playback timeline, or pause / step / speed of the live run ----------
  const SPEEDS = [0.1, 0.25, 0.5, 1, 2, 4];
  const LIVE_SPEEDS = [0, 1, 0.5, 0.25, 0.1];          // 0: as fast as the simulation runs
  const bar = document.createElement("div");
  bar.id = "convexsim-controls";
  bar.style.cssText = "position:absolute;left:8px;right:8px;bottom:8px;z-index:11;padding:5px 9px;" +
    "font:13px/1.4 system-ui,sans-serif;color:#111;background:rgba(255,255,255,0.88);border-radius:5px;" +
    "display:none;align-items:center;gap:6px;flex-wrap:wrap";
  bar.innerHTML =
    '<button id="convexsim-reset" title="back to the start">|&#9664;&#9664;</button>' +
    '<button id="convexsim-back" title="one frame back (&larr;)">&#9664;|</button>' +
    '<button id="convexsim-play" title="play / pause (Space)" style="min-width:4.2em">pause</button>' +
    '<button id="convexsim-fwd" title="one frame forward (&rarr;)">|&#9654;</button>' +
    '<input id="convexsim-timeline" type="range" min="0" max="1000" step="1" value="0" ' +
    'title="timeline: drag to scrub" style="flex:1;min-width:120px">' +
    '<span id="convexsim-clock" style="font-variant-numeric:tabular-nums"></span>' +
    '<label>speed <select id="convexsim-speed" title="playback speed (+ / -)"></select></label>' +
    '<span id="convexsim-keys" style="color:#555;width:100%">keys: <b>Space</b> play/pause &middot; ' +
    '<b>&rarr;</b> step forward &middot; <b>&larr;</b> step back &middot; <b>+</b> / <b>&minus;</b> ' +
    'faster / slower</span>';
  document.body.appendChild(bar);
  const $ = id => document.getElementById(id);
  let mode = null, scrubbing = false, livePaused = false, liveSpeed = 0;
  function sendControl(msg) {
    const c = viewer.connection;
    if (c && c.readyState === 1) c.send(JSON.stringify({convexsim_control: msg}));
  }
  function setMode(m) {
    if (m === mode) return;
    mode = m;
    bar.style.display = m ? "flex" : "none";
    const sel = $("convexsim-speed");
    sel.innerHTML = "";
    for (const v of (m === "live" ? LIVE_SPEEDS : SPEEDS)) {
      const o = document.createElement("option");
      o.value = String(v);
      o.textContent = v === 0 ? "max" : "\u00d7" + v;
      sel.appendChild(o);
    }
    sel.value = m === "live" ? String(liveSpeed) : "1";
    $("convexsim-timeline").style.display = m === "live" ? "none" : "";
    $("convexsim-reset").style.display = m === "live" ? "none" : "";
    $("convexsim-back").disabled = m === "live";
    $("convexsim-back").title = m === "live"
      ? "no history while live: step back in the playback after the run" : "one frame back (\u2190)";
    $("convexsim-keys").innerHTML = m === "live"
      ? "keys: <b>Space</b> pause/run the simulation &middot; <b>&rarr;</b> one simulation step &middot; " +
        "<b>+</b> / <b>&minus;</b> faster / slower (real-time pacing)"
      : "keys: <b>Space</b> play/pause &middot; <b>&rarr;</b> step forward &middot; " +
        "<b>&larr;</b> step back &middot; <b>+</b> / <b>&minus;</b> faster / slower";
  }
  function stepTo(dir) {
    const a = viewer.animator;
    a.pause();
    const dt = info().frame_dt || 1 / 30;
    const t = Math.min(a.duration, Math.max(0, a.time + dir * dt));
    a.seek(t); a.time = t;
    if (a.time_scrubber) a.time_scrubber.updateDisplay();
  }
  const act = {
    play() {
      if (mode === "live") { livePaused = !livePaused; sendControl({paused: livePaused}); return; }
      const a = viewer.animator;
      if (a.playing) a.pause(); else a.play();
    },
    fwd() {
      if (mode === "live") { livePaused = true; sendControl({paused: true, step: 1}); return; }
      stepTo(+1);
    },
    back() { if (mode !== "live") stepTo(-1); },
    reset() { const a = viewer.animator; a.pause(); a.seek(0); a.time = 0; },
    speed(factor) {
      if (mode === "live") {
        const i = LIVE_SPEEDS.indexOf(liveSpeed);
        // LIVE_SPEEDS runs from fast (max) to slow: "+" moves left, "-" right.
        const j = Math.min(LIVE_SPEEDS.length - 1, Math.max(0, i + (factor > 1 ? -1 : 1)));
        liveSpeed = LIVE_SPEEDS[j]; $("convexsim-speed").value = String(liveSpeed);
        sendControl({speed: liveSpeed || null});
        return;
      }
      const m = viewer.animator.mixer;
      m.timeScale = Math.min(16, Math.max(1 / 16, m.timeScale * factor));
    },
  };
  $("convexsim-play").onclick = () => { act.play(); render(); updateBar(); };
  $("convexsim-fwd").onclick = () => { act.fwd(); render(); updateBar(); };
  $("convexsim-back").onclick = () => { act.back(); render(); updateBar(); };
  $("convexsim-reset").onclick = () => { act.reset(); render(); updateBar(); };
  $("convexsim-speed").onchange = e => {
    const v = Number(e.target.value);
    if (mode === "live") { liveSpeed = v; sendControl({speed: v || null}); }
    else viewer.animator.mixer.timeScale = v;
    e.target.blur();                                     // keys go back to the page
  };
  const tl = $("convexsim-timeline");
  tl.oninput = () => {
    scrubbing = true;
    const a = viewer.animator, t = Number(tl.value) / 1000 * a.duration;
    a.pause(); a.seek(t); a.time = t;
    if (a.time_scrubber) a.time_scrubber.updateDisplay();
  };
  tl.onchange = () => { scrubbing = false; tl.blur(); };
  function updateBar() {
    const a = viewer.animator, inf = info();
    setMode(a.duration > 0 ? "playback" : (inf.live ? "live" : null));
    if (mode === "playback") {
      const t0 = inf.t0 || 0;
      $("convexsim-play").textContent = a.playing ? "pause" : "play";
      if (!scrubbing) tl.value = String(Math.round(1000 * a.time / a.duration));
      $("convexsim-clock").textContent =
        (t0 + a.time).toFixed(3) + " / " + (t0 + a.duration).toFixed(3) + " s";
      const ts = a.mixer.timeScale, sel = $("convexsim-speed");
      if (document.activeElement !== sel) {
        if (!SPEEDS.includes(ts)) {
          if (![...sel.options].some(o => Number(o.value) === ts)) {
            const o = document.createElement("option"); o.value = String(ts); o.textContent = "\u00d7" + ts;
            sel.appendChild(o);
          }
        }
        sel.value = String(ts);
      }
    } else if (mode === "live") {
      $("convexsim-play").textContent = livePaused ? "run" : "pause";
      $("convexsim-clock").textContent = "live: t = " + Number(inf.t || 0).toFixed(3) + " s" +
        (livePaused ? " (paused)" : "");
    }
  }
  window.convexsim_controls = act;
  setInterval(updateBar, 100);

  document.addEventListener("keydown", function (e) {
    if (!mode || (e.target && (e.target.tagName === "INPUT" && e.target.type !== "range"))) return;
    if (e.code === "Space") { act.play(); e.preventDefault(); }
    else if (e.key === "ArrowRight") { act.fwd(); e.preventDefault(); }
    else if (e.key === "ArrowLeft") { act.back(); e.preventDefault(); }
    else if (e.key === "+" || e.key === "=") act.speed(2);
    else if (e.key === "-" || e.key === "_") act.speed(0.5);
    else return;
    render(); updateBar();
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
