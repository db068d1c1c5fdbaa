"""Real headless Chromium: exported pages from file:// and the live server page.

Each test reads the scene back from ``window.viewer`` (objects present, animation duration, a body's
position after seeking) and compares a screenshot with an empty scene's.
"""

from __future__ import annotations

import numpy as np
import pytest

from convexsim.viz import LiveViewer, export_html
from convexsim.viz.page import static_page_html

pytestmark = pytest.mark.browser

BOXES = ["ground", "box_0", "box_1", "box_2", "box_3", "box_4"]
# three.js stores key times as Float32Array: a duration of ~0.05 s is exact to 2^-24 relative.
DURATION_TOL = 1e-6


@pytest.fixture(scope="module")
def empty_screenshot(tmp_path_factory, browser):
    from viz_helpers import PageProbe

    path = tmp_path_factory.mktemp("empty") / "empty.html"
    path.write_text(static_page_html([]))
    probe = PageProbe(browser, path.as_uri())
    probe.page.wait_for_function("() => window.convexsim_loaded === true")
    img = probe.screenshot()
    probe.close()
    return img


def assert_rendered_and_differs(img: np.ndarray, empty: np.ndarray) -> None:
    # A page whose WebGL failed is one flat colour (docs/viewer.md "Tests"): check that first.
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 50
    changed = np.abs(img - empty).max(axis=2) > 40
    # The boxes, ground slab and legend cover well over 5 % of an 800×600 view.
    assert changed.mean() > 0.05, f"only {changed.mean():.1%} of the pixels differ from an empty scene"


def seek_z(probe, t: float, group: str, body: str) -> float:
    return probe.page.evaluate(
        """([t, g, b]) => { const a = viewer.animator; a.pause(); a.seek(t);
             return viewer.scene_tree.find(['meshcat', g, 'bodies', b]).object.position.z; }""",
        [t, group, body])


def test_box_stack_export_plays_from_file(tmp_path, box_stack_pair, open_page, empty_screenshot):
    sap, _ = box_stack_pair
    out = export_html([sap], tmp_path / "box_stack.html", labels=["SAP"])
    print(f"box_stack export: {out.stat().st_size / 1e6:.2f} MB")
    probe = open_page(out.as_uri(), offline=True)
    probe.wait_for_body("SAP", "box_4")
    assert probe.bodies() == {"SAP": BOXES}
    duration = probe.page.evaluate("() => viewer.animator.duration")
    assert duration == pytest.approx(sap.duration, abs=DURATION_TOL)
    # Seeking works on load (the play=False trap) and lands on the recorded poses.
    for frame in (0, sap.num_frames - 1):
        t = float(sap.time[frame] - sap.time[0])
        z = seek_z(probe, t, "SAP", "box_4")
        assert z == pytest.approx(sap.position[frame, 5, 2], abs=1e-6)   # float32 of ~0.45 m
    img = probe.screenshot()
    assert_rendered_and_differs(img, empty_screenshot)
    overlay = probe.page.inner_text("#convexsim-overlay")
    assert "box_stack" in overlay and "t = " in overlay
    assert probe.errors == [] and probe.blocked == []


def test_sap_vs_lcp_comparison_export(tmp_path, box_stack_pair, open_page, empty_screenshot):
    sap, lcp = box_stack_pair
    out = export_html([sap, lcp], tmp_path / "cmp.html", labels=["SAP", "LCP"], layout="overlay")
    probe = open_page(out.as_uri(), offline=True)
    probe.wait_for_body("LCP", "box_4")
    assert probe.bodies() == {"SAP": BOXES, "LCP": BOXES}
    duration = probe.page.evaluate("() => viewer.animator.duration")
    assert duration == pytest.approx(max(sap.duration, lcp.duration), abs=DURATION_TOL)
    opacity = probe.page.evaluate(
        """() => [['SAP'], ['LCP']].map(([g]) => {
             const n = viewer.scene_tree.find(['meshcat', g, 'bodies', 'box_4']);
             const geom = Object.values(n.children)[0].children['<object>'].object;
             return [geom.material.opacity, geom.material.transparent]; })""")
    assert opacity[0] == [1, False] and opacity[1][0] == pytest.approx(0.35) and opacity[1][1] is True
    legend = probe.page.inner_text("#convexsim-overlay")
    assert "SAP" in legend and "LCP" in legend and "translucent" in legend
    t_end = float(lcp.time[-1] - lcp.time[0])
    assert seek_z(probe, t_end, "LCP", "box_4") == pytest.approx(lcp.position[-1, 5, 2], abs=1e-6)
    assert_rendered_and_differs(probe.screenshot(), empty_screenshot)
    assert probe.errors == [] and probe.blocked == []


def test_live_page_from_the_served_url(open_page, empty_screenshot):
    from convexsim.simulate import prepare

    from viz_helpers import scene_path

    model, state, _ = prepare(scene_path("box_stack"))
    with LiveViewer(model, state=state, port=0) as viewer:
        assert viewer.web_url.startswith("http://127.0.0.1:")
        for k in range(5):         # streaming, not physics: lift the top box 1 cm a step
            state = state.copy()
            state.q[5, 2] += 0.01
            state.t, state.step = state.t + model.time_step, k + 1
            viewer.update(state, None, force=True)
        probe = open_page(viewer.web_url)
        probe.wait_for_body("live", "box_4")
        assert probe.bodies() == {"live": BOXES}
        # The page comes to hold the last streamed pose (sent as float64 matrices). The sender thread
        # delivers the newest frame asynchronously (update() never blocks), so wait for it.
        box = "viewer.scene_tree.find(['meshcat','live','bodies','box_4']).object.position.z"
        probe.page.wait_for_function(f"() => Math.abs({box} - {float(state.q[5, 2])!r}) <= 1e-12")
        z = probe.page.evaluate(f"() => {box}")
        assert z == pytest.approx(state.q[5, 2], abs=1e-12)
        probe.page.wait_for_function("() => document.getElementById('convexsim-overlay').innerText.includes('step 5')")
        assert_rendered_and_differs(probe.screenshot(), empty_screenshot)
        assert probe.errors == []
        viewer.server.stop()           # the page says so (0.3.2 neither reconnects nor tells)
        probe.page.wait_for_function(
            "() => document.getElementById('convexsim-overlay').innerText.includes('no connection')")



def test_served_playback_shows_resting_contacts_in_its_first_loop(box_stack_pair, open_page):
    """A browser that opens the SERVED page after the publish (the `convexsim view` case) must see
    box_stack's resting contacts. With the stock replay order (root animation first, then the
    slots' `visible False`) three.js's mixer keeps the slots hidden until the loop wraps through a
    hidden key, so this is checked while the animation plays its first loop (the recording is
    stretched to 20 s of animation so the page reads it long before the first wrap)."""
    import dataclasses

    from convexsim.viz import serve_trajectories

    sap, _ = box_stack_pair
    # The bug shows when the browser's mixer first evaluates the clip after the first key that shows
    # the contacts (0.04 s: the first evaluation comes a page-load delay after the clock started);
    # the rest is stretched so the first loop lasts ~20 s and the page is read long before it wraps.
    rel = sap.time - sap.time[0]
    slow = dataclasses.replace(sap, time=sap.time[0] + np.where(
        np.arange(sap.num_frames) <= 1, 40.0 * rel, 40.0 * rel[1] + 400.0 * (rel - rel[1])))
    server = serve_trajectories([slow], labels=["SAP"], port=0, block=False)
    try:
        probe = open_page(server.web_url)
        probe.wait_for_body("SAP", "box_4")
        # Playing (autoplay), past the first recorded step (contacts appear at frame 1).
        t_first = float(slow.time[1] - slow.time[0])
        probe.page.wait_for_function("(t) => viewer.animator.playing && viewer.animator.mixer.time > t",
                                     arg=t_first)
        state = probe.page.evaluate(
            """() => { const c = viewer.scene_tree.find(['meshcat', 'SAP', 'contacts']);
                 return {mixer_time: viewer.animator.mixer.time, duration: viewer.animator.duration,
                         slots: Object.keys(c.children).length,
                         visible: Object.keys(c.children).filter(k => c.children[k].object.visible)}; }""")
        if state["mixer_time"] >= state["duration"]:
            pytest.skip(f"the page took more than one 20 s loop to load: {state}")
        frame = int(np.searchsorted(slow.time - slow.time[0], state["mixer_time"], side="right")) - 1
        n_contacts = int(slow.contact_offsets[frame + 1] - slow.contact_offsets[frame])
        assert n_contacts >= 4 and state["slots"] >= 4                # 5 resting boxes
        assert len(state["visible"]) >= 4, state
        assert probe.errors == []
    finally:
        server.stop()


def test_exported_page_shows_the_timeline_controls_and_the_shortcuts(tmp_path, box_stack_pair, open_page):
    """The control bar is on the page (not hidden under "Open Controls"), its shortcuts are written on
    it, and the buttons, keys, timeline and speed menu drive the animation."""
    sap, _ = box_stack_pair
    out = export_html([sap], tmp_path / "bar.html", labels=["SAP"])
    probe = open_page(out.as_uri(), offline=True)
    probe.wait_for_body("SAP", "box_4")
    page = probe.page
    page.wait_for_function("() => getComputedStyle(document.getElementById('convexsim-controls')).display === 'flex'")
    for el in ("convexsim-play", "convexsim-back", "convexsim-fwd", "convexsim-reset", "convexsim-timeline",
               "convexsim-speed"):
        assert page.locator(f"#{el}").is_visible(), el
    keys = page.inner_text("#convexsim-keys")
    for hint in ("Space", "play/pause", "\u2192", "\u2190", "+", "\u2212", "faster"):
        assert hint in keys, (hint, keys)
    a = "viewer.animator"
    page.click("#convexsim-play")                       # autoplay -> paused
    assert page.evaluate(f"() => {a}.playing") is False
    page.click("#convexsim-reset")
    dt = page.evaluate("() => { const n = viewer.scene_tree.children.convexsim_info; return n.object.convexsim.frame_dt; }")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert page.evaluate(f"() => {a}.time") == pytest.approx(2 * dt, rel=1e-6)
    page.keyboard.press("ArrowLeft")
    assert page.evaluate(f"() => {a}.time") == pytest.approx(dt, rel=1e-6)
    page.keyboard.press("Space")
    assert page.evaluate(f"() => {a}.playing") is True
    page.keyboard.press("Space")
    page.keyboard.press("-")
    assert page.evaluate(f"() => {a}.mixer.timeScale") == 0.5
    page.keyboard.press("+")
    page.keyboard.press("+")
    assert page.evaluate(f"() => {a}.mixer.timeScale") == 2.0
    page.select_option("#convexsim-speed", "0.25")
    assert page.evaluate(f"() => {a}.mixer.timeScale") == 0.25
    # The timeline: the last position is the end of the recording, where box_4 is at its recorded pose.
    page.locator("#convexsim-timeline").fill("1000")
    assert page.evaluate(f"() => {a}.time") == pytest.approx(sap.duration, rel=1e-5)
    z = page.evaluate("() => viewer.scene_tree.find(['meshcat','SAP','bodies','box_4']).object.position.z")
    assert z == pytest.approx(sap.position[-1, 5, 2], abs=1e-6)
    page.wait_for_function("() => document.getElementById('convexsim-clock').innerText.includes(' s')")
    assert probe.errors == [] and probe.blocked == []


def test_run_solver_both_page_shows_the_runs_side_by_side(tmp_path, open_page):
    """`run box_stack --solver both --html`: SAP and LCP agree to the eye, so the default layout puts them
    side by side, both solid, the legend says where; `--layout overlay` keeps them in place."""
    from convexsim.cli import main

    from viz_helpers import scene_path

    out = tmp_path / "both.html"
    assert main(["run", str(scene_path("box_stack")), "--solver", "both", "--duration", "0.05",
                 "--out", str(tmp_path / "bs.npz"), "--html", str(out), "--quiet"]) == 0
    probe = open_page(out.as_uri(), offline=True)
    probe.wait_for_body("LCP", "box_4")
    groups = probe.page.evaluate(
        """() => Object.fromEntries(Object.entries(viewer.scene_tree.children.meshcat.children).map(([k, n]) =>
             [k, [n.object.position.x, n.object.position.y, n.object.position.z]]))""")
    sap = next(k for k in groups if k.startswith("SAP"))
    shift = np.subtract(groups["LCP"], groups[sap])
    assert shift[0] > 0.1 and abs(shift[1]) < 1e-9 and abs(shift[2]) < 1e-9      # 0.1 m boxes: beside
    opac = probe.page.evaluate(
        """(g) => [g, 'LCP'].map(k => { const n = viewer.scene_tree.find(['meshcat', k, 'bodies', 'box_4']);
             return Object.values(n.children)[0].children['<object>'].object.material.opacity; })""", sap)
    assert opac == [1, 1]
    legend = probe.page.inner_text("#convexsim-overlay")
    assert "to the right" in legend and "arrow length:" in legend and " per " in legend
    assert probe.errors == [] and probe.blocked == []
    over = tmp_path / "over.html"
    assert main(["run", str(scene_path("box_stack")), "--solver", "both", "--duration", "0.02", "--layout", "overlay",
                 "--out", str(tmp_path / "bs2.npz"), "--html", str(over), "--quiet"]) == 0
    from viz_helpers import commands_in_page

    cmds = commands_in_page(over.read_text())
    info = next(c["value"] for c in cmds if c["type"] == "set_property" and c["path"] == "/convexsim_info")
    assert info["layout"] == "overlay"


def test_live_page_pauses_and_steps_the_simulation(open_page):
    """The live page's pause holds the run (its loop stops advancing), → lets exactly one step through,
    Space resumes."""
    import threading
    import time

    from convexsim.simulate import prepare

    from viz_helpers import scene_path

    model, state, _ = prepare(scene_path("box_stack"))
    done = []
    with LiveViewer(model, state=state, port=0, max_rate_hz=200.0) as viewer:
        stop = threading.Event()

        def loop():                    # stands for simulate(..., step_callback=...): one update per step
            s = state.copy()
            while not stop.is_set():
                s = s.copy()
                s.t, s.step = s.t + model.time_step, s.step + 1
                viewer.update(s, None)
                done.append(s.step)
                time.sleep(0.002)

        th = threading.Thread(target=loop, daemon=True)
        th.start()
        probe = open_page(viewer.web_url)
        probe.wait_for_body("live", "box_4")
        page = probe.page
        page.wait_for_function("() => getComputedStyle(document.getElementById('convexsim-controls')).display === 'flex'")
        assert "one simulation step" in page.inner_text("#convexsim-keys")
        page.click("#convexsim-play")                   # pause
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not viewer._control.get("paused"):
            time.sleep(0.02)
        time.sleep(0.2)                                 # the loop reaches the hold
        held = len(done)
        time.sleep(0.5)
        assert len(done) == held                        # held while paused
        page.keyboard.press("ArrowRight")               # one step
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(done) == held:
            time.sleep(0.02)
        time.sleep(0.5)
        assert len(done) == held + 1
        page.wait_for_function("() => document.getElementById('convexsim-clock').innerText.includes('paused')")
        page.keyboard.press("Space")                    # run again
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(done) < held + 20:
            time.sleep(0.02)
        assert len(done) >= held + 20
        stop.set()
        assert probe.errors == []
    th.join(10)
    assert not th.is_alive()
