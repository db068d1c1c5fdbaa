"""A 1000-body export (time and size measured and printed, not asserted), bad input, live contacts."""

from __future__ import annotations

import time

import numpy as np
import pytest

from convexsim.io import SCHEMA_VERSION, Trajectory, save_trajectory
from convexsim.viz import LiveViewer, export_html

from viz_helpers import commands_in_page, scene_path


def falling_clutter(duration: float = 2.0, fps: float = 100.0):
    """clutter_1000's 1000 spheres falling freely onto z = r and resting there (closed form), with one
    ground contact per resting sphere carrying m·g."""
    from convexsim.scene import compile_scene, dump_scene, load_scene

    spec = load_scene(scene_path("clutter_1000"))
    model, state = compile_scene(spec)
    t = np.arange(int(round(duration * fps)) + 1) / fps
    q0 = state.q
    g, r, m = 9.81, 0.05, 0.5
    pos = np.repeat(q0[None, :, :3], len(t), axis=0)
    moving = ~model.body_fixed
    z = q0[moving, 2][None, :] - 0.5 * g * t[:, None] ** 2
    pos[:, moving, 2] = np.maximum(z, r)
    quat = np.repeat(q0[None, :, 3:], len(t), axis=0)
    resting = pos[:, :, 2] <= r
    counts = resting.sum(axis=1)
    frames, bodies = np.nonzero(resting)
    K = len(frames)
    n = len(t)
    B = model.nbody
    traj = Trajectory(
        time=t, body_names=np.array(model.body_names), position=pos, quaternion=quat,
        linear_velocity=np.zeros((n, B, 3)), angular_velocity=np.zeros((n, B, 3)),
        solver_iterations=np.zeros(n, np.int64), solver_converged=np.ones(n, bool),
        momentum_residual=np.zeros(n), line_search_evaluations=np.zeros(n, np.int64),
        contact_offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        contact_body_a=np.zeros(K, np.int64), contact_body_b=bodies.astype(np.int64),
        contact_point=np.column_stack([pos[frames, bodies, 0], pos[frames, bodies, 1], np.zeros(K)]),
        contact_normal=np.tile([0.0, 0.0, 1.0], (K, 1)), contact_phi=np.zeros(K),
        contact_force=np.tile([0.0, 0.0, m * g], (K, 1)),
        scene_yaml=dump_scene(spec), solver_kind="sap", contact_model="sap", time_step=1e-3)
    return model, traj


def test_1000_body_export_reports_time_and_size(tmp_path, capsys):
    model, traj = falling_clutter()
    assert int((~model.body_fixed).sum()) == 1000
    t0 = time.perf_counter()
    out = export_html([traj], tmp_path / "clutter.html", models=[model])
    elapsed = time.perf_counter() - t0
    size_mb = out.stat().st_size / 1e6
    with capsys.disabled():
        print(f"\n1000-body export: {traj.num_frames} frames over {traj.duration:.1f} s, "
              f"{elapsed:.2f} s, {size_mb:.2f} MB ({out})")
    html = out.read_text()
    assert "convexsim_loaded" in html
    # Every moving body is drawn and animated in the page (the commands decoded from the file).
    cmds = commands_in_page(html)
    moving = {name for name, fixed in zip(model.body_names, model.body_fixed) if not fixed}
    drawn = {c["path"].split("/bodies/")[1].split("/")[0] for c in cmds
             if c["type"] == "set_object" and "/bodies/" in c["path"]}
    animated = {a["path"].rsplit("/bodies/", 1)[1] for c in cmds if c["type"] == "set_animation"
                for a in c["animations"] if "/bodies/" in a["path"]}
    assert moving <= drawn and animated == moving
    assert size_mb < 60.0            # the frame budget (300 000 body-frames) bounds the page size


def test_cli_view_rejects_other_schema_versions_and_missing_files(tmp_path, two_body_traj, capsys):
    from convexsim.cli import main

    good = save_trajectory(tmp_path / "good.npz", two_body_traj)
    data = dict(np.load(good))
    data["schema_version"] = np.asarray(SCHEMA_VERSION + 98)
    bad = tmp_path / "future.npz"
    np.savez(bad, **data)
    assert main(["view", str(bad), "--html", str(tmp_path / "x.html")]) != 0
    err = capsys.readouterr().err
    assert f"schema version {SCHEMA_VERSION + 98} is not supported" in err
    assert not (tmp_path / "x.html").exists()
    assert main(["view", str(tmp_path / "nope.npz"), "--html", str(tmp_path / "y.html")]) != 0
    assert "not found" in capsys.readouterr().err
    assert main(["view", str(good), "--html", str(tmp_path / "ok.html")]) == 0
    assert (tmp_path / "ok.html").stat().st_size > 100_000


class RecordingServer:
    """Stands in for MeshcatServer: records the commands LiveViewer sends."""

    web_url = "http://127.0.0.1:1/static/"
    running = True

    def __init__(self):
        self.commands: list[dict] = []

    def send(self, cmds):
        cmds = list(cmds)
        self.commands += cmds
        return len(cmds)


class FakeClock:
    """A wall clock that only moves when told: ``sleep`` advances it, ``work`` stands for compute time."""

    def __init__(self, t0: float = 100.0):
        self.now = t0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, dt: float) -> None:
        assert dt > 0
        self.sleeps.append(dt)
        self.now += dt

    def work(self, dt: float) -> None:
        self.now += dt


def two_body_live(**kw):
    from types import SimpleNamespace

    from convexsim.model import Contacts
    from convexsim.scene import compile_scene, scene_from_yaml

    from viz_helpers import TWO_BODY_YAML

    model, state = compile_scene(scene_from_yaml(TWO_BODY_YAML))
    server = RecordingServer()
    viewer = LiveViewer(model, server=server, **kw)
    contacts = Contacts(geom_a=np.array([0, 0]), geom_b=np.array([2, 2]), body_a=np.array([0, 0]),
                        body_b=np.array([2, 2]), phi=np.array([-1e-4, 0.01]),
                        point=np.array([[0.5, 0.0, 0.0], [9.0, 9.0, 9.0]]), normal=np.tile([0, 0, 1.0], (2, 1)))
    info = SimpleNamespace(contacts=contacts, force_world=np.array([[3.0, 0.0, 4.0], [0.0, 0.0, 0.0]]))
    return model, state, server, viewer, info


def test_live_viewer_draws_contacts_and_paces_to_real_time(capsys):
    """Pacing checked with an injected clock (no wall time): a simulation 4× faster than real time
    is slowed to exactly 1× (and 2× with realtime=2), a slower one is never made to sleep."""
    clock = FakeClock()
    model, state, server, viewer, info = two_body_live(realtime=True, clock=clock, sleep=clock.sleep)
    for k in range(1, 6):               # 0.02 s of simulated time per step, computed in 0.005 s
        clock.work(0.005)
        s = state.copy()
        s.t, s.step = 0.02 * k, k
        viewer.update(s, info, force=True)
    viewer.flush()                      # the sender thread has sent the latest frame
    # The first update anchors the pacing; each later one waits until its simulated time is due.
    assert clock.sleeps == pytest.approx([0.015] * 4, abs=1e-12)
    sent = server.commands
    # One slot (the φ > 0 zero-force contact is not drawn): point at the contact, arrow along f.
    slots = {c["path"] for c in sent if c["path"].startswith("/meshcat/live/contacts/c") and c["type"] == "set_object"}
    assert {p.split("/")[4] for p in slots} == {"c0"}
    T = np.array(next(c["matrix"] for c in reversed(sent) if c["path"] == "/meshcat/live/contacts/c0/force")).reshape(4, 4).T
    y_img = T[:3, 1]                 # image of +y: direction × length |f|·scale
    np.testing.assert_allclose(y_img / np.linalg.norm(y_img), [0.6, 0.0, 0.8], atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(y_img), 5.0 * viewer._force_scale, rtol=1e-12)
    status = [c["value"] for c in sent if c["path"] == "/convexsim_info" and c["type"] == "set_property"]
    assert status[-1]["live"] and status[-1]["step"] == 5 and status[-1]["contacts"] == 1
    assert status[-1]["rate"] == pytest.approx(1.0, rel=1e-9)      # exactly 1× on the fake clock
    viewer.close()
    assert "127.0.0.1" in capsys.readouterr().out

    # realtime=2: simulated time runs twice as fast as wall time.
    clock = FakeClock()
    *_, server, viewer, info = two_body_live(realtime=2.0, clock=clock, sleep=clock.sleep)
    for k in range(1, 4):
        clock.work(0.001)
        s = state.copy()
        s.t, s.step = 0.02 * k, k
        viewer.update(s, info, force=True)
    viewer.flush()
    assert clock.sleeps == pytest.approx([0.009, 0.009], abs=1e-12)
    status = [c["value"] for c in server.commands if c["path"] == "/convexsim_info" and c["type"] == "set_property"]
    assert status[-1]["rate"] == pytest.approx(2.0, rel=1e-9)

    # Slower than real time: no sleep, and after more than 0.25 s of lag the pacing re-anchors
    # (no burst of catching up afterwards).
    clock = FakeClock()
    *_, server, viewer, info = two_body_live(realtime=True, clock=clock, sleep=clock.sleep)
    for k, work in enumerate([0.0, 0.1, 0.5, 0.001, 0.001], start=1):
        clock.work(work)
        s = state.copy()
        s.t, s.step = 0.02 * k, k
        viewer.update(s, info, force=True)
    # step 3 lagged 0.56 s > 0.25 s: re-anchored there, so steps 4 and 5 are paced from it again.
    assert clock.sleeps == pytest.approx([0.019, 0.019], abs=1e-12)     # without re-anchoring: none


def test_live_throttle_uses_the_injected_clock():
    clock = FakeClock()
    _, state, _, viewer, info = two_body_live(max_rate_hz=10.0, clock=clock, sleep=clock.sleep)
    sent = []
    for k in range(1, 31):             # 30 updates, 0.01 s apart on the clock, at most 10 Hz sent
        clock.work(0.01)
        s = state.copy()
        s.t, s.step = 0.001 * k, k
        sent.append(viewer.update(s, info))
    assert clock.sleeps == []           # not paced
    assert sum(sent) == 3 and sent[0] and sent[10] and sent[20]


def test_cli_run_solver_both_html_is_one_comparison_page(tmp_path):
    """`convexsim run SCENE --solver both --html cmp.html`: one page holding both runs and a legend."""
    from convexsim.cli import main

    from viz_helpers import commands_in_page

    out = tmp_path / "cmp.html"
    rc = main(["run", str(scene_path("sphere_drop")), "--solver", "both", "--duration", "0.05",
               "--out", str(tmp_path / "sd.npz"), "--html", str(out), "--quiet"])
    assert rc == 0
    html = out.read_text()
    assert "<script src" not in html and "<link" not in html      # nothing to fetch: works offline
    cmds = commands_in_page(html)
    groups = {c["path"].split("/")[2] for c in cmds if c["type"] == "set_object" and "/bodies/" in c["path"]}
    assert len(groups) == 2 and any(g.startswith("SAP") for g in groups) and any(g.startswith("LCP") for g in groups)
    info = next(c["value"] for c in cmds if c["type"] == "set_property" and c["path"] == "/convexsim_info")
    assert [e["label"].split()[0] for e in info["legend"]] == ["SAP", "LCP"]
    assert sum(c["type"] == "set_animation" for c in cmds) == 1


def test_live_viewer_survives_a_dead_server(capsys):
    """If the viewer's server dies mid-run, updates stop with one message; the run goes on."""
    from convexsim.scene import compile_scene, scene_from_yaml

    from viz_helpers import TWO_BODY_YAML

    model, state = compile_scene(scene_from_yaml(TWO_BODY_YAML))
    viewer = LiveViewer(model, state=state, port=0)
    viewer.server.proc.kill()
    viewer.server.proc.wait()
    viewer.update(state, None, force=True)    # offered: the sender thread finds the server dead
    viewer.flush()
    assert viewer.update(state, None, force=True) is False
    assert viewer.update(state, None, force=True) is False
    err = capsys.readouterr().err
    assert err.count("viewer stopped streaming") == 1
    viewer.close()
    # The log named in the message still exists after the viewer stopped; this test removes it.
    log = viewer.server.log_path
    assert f"log: {log}" in err and log.exists()
    log.unlink()


def test_a_stalled_viewer_never_blocks_a_100_body_run():
    """sphere_pile (100 spheres) streamed at every step to a server that stops answering after the first
    drawing: the run still takes all its steps; the frames pile up as drops, not as waiting (counted, no
    clock). When the server answers again, the latest frame is sent."""
    import threading

    from convexsim.simulate import simulate

    release = threading.Event()

    class StalledServer:
        web_url, running = "http://127.0.0.1:1/static/", True

        def __init__(self):
            self.calls = 0

        def send(self, cmds):
            self.calls += 1
            if self.calls > 1:                 # the scene is drawn; every later send hangs until released
                release.wait()
            return len(list(cmds))

        def control(self):
            return {"paused": False, "steps": 0, "speed": None, "seq": 0}

    server = StalledServer()
    steps = []
    viewer = None

    def callback(m, s, info):
        nonlocal viewer
        if viewer is None:
            viewer = LiveViewer(m, server=server, announce=False, max_rate_hz=0.0)
        viewer.update(s, info)
        steps.append(s.step)

    traj = simulate(scene_path("sphere_pile"), duration=0.03, step_callback=callback)
    assert traj.num_bodies == 101 and len(steps) == 30 and not traj.failure
    print(f"100-body run: {viewer.offered} frames offered, {viewer.sent} sent, {viewer.dropped} dropped "
          f"while the server hung")
    assert viewer.offered == 30 and viewer.sent == 0          # the one frame in flight is still hanging
    assert viewer.dropped >= 30 - 2                           # all but the hanging one and the latest
    release.set()
    viewer.close()                                            # sends the latest frame first
    assert viewer.sent == 2 and viewer.offered == viewer.sent + viewer.dropped


def test_bodies_far_away_give_a_bounded_ground_and_a_page(tmp_path):
    """A trajectory whose body ends at 1e300 m (finite, but its bounds overflow to inf) is drawn: the ground slab
    keeps a finite size within GROUND_HALF_RANGE (before, the grid spacing became NaN and the export crashed)."""
    import math

    from convexsim.simulate import simulate
    from convexsim.viz.draw import GROUND_HALF_RANGE, ground_size

    lo, hi = GROUND_HALF_RANGE
    assert ground_size(math.inf, [0.0, 0.0]) == (lo, pytest.approx(np.zeros(2)))
    assert ground_size(math.nan, [1.0, 2.0])[0] == lo
    assert ground_size(3.0, [math.inf, 0.0])[1].tolist() == [0.0, 0.0]
    assert ground_size(1e9, [1.0, 2.0])[0] == hi and ground_size(2.0, [1.0, 2.0])[0] == 2.0
    traj = simulate("box_slide", duration=0.003)
    traj.position[-1, 1] = [1e300, -1e300, 1e300]
    out = tmp_path / "far.html"
    export_html([traj], out)
    assert out.stat().st_size > 0
