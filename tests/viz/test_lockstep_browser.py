"""`convexsim run box_slide --solver both --view --realtime` in headless Chromium, mid-run: the live page
shows both boxes (SAP in place, LCP beside it) and a legend naming both runs."""

from __future__ import annotations

import signal
import subprocess
import sys

import numpy as np
import pytest

from viz_helpers import scene_path

pytestmark = pytest.mark.browser

PY = sys.executable

LIVE_GROUPS = """() => { const l = window.viewer && viewer.scene_tree.children.meshcat &&
    viewer.scene_tree.children.meshcat.children.live;
  if (!l) return [];
  return Object.keys(l.children).filter(g => { const b = l.children[g].children.bodies;
    const n = b && b.children.box;
    return !!n && Object.values(n.children).some(c => c.children['<object>'] && c.children['<object>'].object.isMesh); }); }"""

BOX_ON_SCREEN = """(g) => { const n = viewer.scene_tree.find(['meshcat', 'live', g, 'bodies', 'box']).object;
  const p = new n.position.constructor(); n.getWorldPosition(p); p.project(viewer.camera);
  return [p.x, p.y, p.z]; }"""

SET_BOX_VISIBLE = """([g, on]) => { viewer.scene_tree.find(['meshcat', 'live', g, 'bodies', 'box']).object.visible = on;
  viewer.set_dirty(); }"""


def wait_until_still(page, groups, *, polls=50, interval_ms=200):
    """Wait until the boxes of ``groups`` stay where they are on screen over one poll interval: after a pause the
    run that lags (here the LCP one) may still deliver the frames it sent before the pause, and a screenshot
    taken meanwhile would not show the box where the later projection puts it."""
    last = None
    for _ in range(polls):
        now = [page.evaluate(BOX_ON_SCREEN, g) for g in groups]
        if now == last:
            return
        last = now
        page.wait_for_timeout(interval_ms)
    raise AssertionError(f"the paused page's boxes never stopped moving: {last}")


def test_run_both_view_realtime_shows_both_boxes_mid_run(tmp_path, open_page):
    from test_server import children_of, read_until, wait_gone

    proc = subprocess.Popen([PY, "-m", "convexsim.cli", "run", str(scene_path("box_slide")), "--solver", "both",
                             "--view", "--realtime", "--duration", "10", "--out", str(tmp_path / "bs.npz"),
                             "--quiet"], stdout=subprocess.PIPE, text=True)
    try:
        lines = read_until(proc, "Meshcat viewer:", timeout=120)
        url = lines[-1].split("Meshcat viewer: ", 1)[1].split()[0]
        assert url.startswith("http://127.0.0.1:")
        probe = open_page(url)
        page = probe.page
        page.wait_for_function(f"() => ({LIVE_GROUPS})().length === 2", timeout=60000)
        page.wait_for_function("() => document.getElementById('convexsim-overlay').innerText.includes('in lockstep')")
        page.click("#convexsim-play")                      # pause the live run: a still frame to read
        page.wait_for_function("() => document.getElementById('convexsim-clock').innerText.includes('paused')")
        page.wait_for_timeout(300)                         # the frame sent when the run stopped
        assert proc.poll() is None and not list(tmp_path.glob("*.npz"))     # mid-run: nothing written yet
        groups = page.evaluate(LIVE_GROUPS)
        sap = next(g for g in groups if g.startswith("SAP"))
        lcp = next(g for g in groups if g.startswith("LCP"))
        wait_until_still(page, (sap, lcp))                 # frames sent before the pause have all been drawn
        img = probe.screenshot()
        from PIL import Image

        Image.fromarray(img.astype(np.uint8)).save(tmp_path / "lockstep_midrun.png")
        print(f"screenshot: {tmp_path / 'lockstep_midrun.png'}")
        h, w = img.shape[:2]
        centres = {}
        for g in (sap, lcp):
            x, y, z = page.evaluate(BOX_ON_SCREEN, g)
            assert abs(x) < 0.9 and abs(y) < 0.9 and -1 < z < 1, (g, x, y, z)    # inside the view
            centres[g] = (int((x + 1) / 2 * w), int((1 - y) / 2 * h))
        (xs, ys), (xl, yl) = centres[sap], centres[lcp]
        assert np.hypot(xs - xl, ys - yl) > 40                  # two boxes, apart on screen
        for g, (cx, cy) in centres.items():                      # each box is drawn where it is
            page.evaluate(SET_BOX_VISIBLE, [g, False])
            hidden = probe.screenshot()
            page.evaluate(SET_BOX_VISIBLE, [g, True])
            patch = np.s_[cy - 4:cy + 5, cx - 4:cx + 5]
            diff = np.abs(img[patch] - hidden[patch]).max(axis=2).mean()
            assert diff > 20, f"{g}: the box's pixels barely change when it is hidden ({diff:.1f})"
        legend = page.inner_text("#convexsim-overlay")
        assert "SAP (lagged)" in legend and "LCP" in legend and "live" in legend
        assert probe.errors == []
        servers = children_of(proc.pid)
        proc.send_signal(signal.SIGINT)                    # Ctrl-C while paused: both runs stop, both saved
        assert proc.wait(timeout=60) == 130
        assert {p.name for p in tmp_path.glob("*.npz")} == {"bs_sap.npz", "bs_lcp.npz"}
        assert all(wait_gone(pid, 10.0) for pid in servers)
    finally:
        if proc.poll() is None:
            proc.kill()
