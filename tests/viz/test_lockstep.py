"""SAP and LCP in lockstep on one live page (viz/lockstep.py, `run --solver both --view`): the runs take
turns of CHUNK simulated seconds, the page receives both runs' frames interleaved, and each run's
trajectory is the one it records alone."""

from __future__ import annotations

import numpy as np
import pytest

from convexsim.simulate import prepare, run_model
from convexsim.viz.lockstep import LockstepViewer, run_lockstep

from viz_helpers import scene_path

DURATION = 0.05     # [s] 50 steps of box_slide: the box slides at ~2 m/s on 4 contacts
CHUNK = 0.005       # [s] 5 steps a turn
FIELDS = ("time", "position", "quaternion", "linear_velocity", "angular_velocity", "contact_offsets",
          "contact_point", "contact_force", "solver_iterations")


class FakeServer:
    """Records each ``send`` (one frame of one run, or the drawing of one run's scene)."""

    web_url = "http://127.0.0.1:0/static/"
    running = True

    def __init__(self):
        self.batches: list[list[dict]] = []

    def send(self, commands):
        self.batches.append(list(commands))
        return len(self.batches[-1])


@pytest.fixture(scope="module")
def box_slide_runs():
    runs = [prepare(scene_path("box_slide"), solver=kind, duration=DURATION)[:2] for kind in ("sap", "lcp")]
    return [(m, s.copy()) for m, s in runs]


@pytest.fixture(scope="module")
def lockstep(box_slide_runs):
    """The lockstep run of SAP and LCP with a viewer that sends every step's frame, synchronously."""
    server = FakeServer()
    models, states = zip(*box_slide_runs)
    # duration=1: the side-by-side shift is chosen as for the scene's 1 s run (the box slides 0.4 m in x)
    viewer = LockstepViewer(models, [s.copy() for s in states], server=server, duration=1.0,
                            threaded=False, max_rate_hz=0.0)
    results = run_lockstep([lambda cb, m=m, s=s: run_model(m, s.copy(), duration=DURATION, step_callback=cb)
                            for m, s in box_slide_runs], [m.time_step for m in models], chunk=CHUNK,
                           on_step=[viewer.on_step(i) for i in range(2)])
    viewer.close()
    assert [r.error for r in results] == [None, None]
    return viewer, server, [r.value[0] for r in results]


def body_frames(viewer, server):
    """[(run index, box position sent)] of every frame batch, in the order the page received them."""
    frames = []
    for batch in server.batches:
        for i, prefix in enumerate(viewer.prefixes):
            cmd = next((c for c in batch if c["type"] == "set_transform" and c["path"] == f"{prefix}/bodies/box"), None)
            drawing = any(c["type"] == "set_object" and c["path"].startswith(f"{prefix}/bodies/") for c in batch)
            if cmd is not None and not drawing:
                frames.append((i, np.asarray(cmd["matrix"]).reshape(4, 4).T[:3, 3]))
    return frames


def test_the_page_receives_both_runs_frames_in_turns_of_one_chunk(lockstep):
    viewer, server, trajs = lockstep
    frames = body_frames(viewer, server)
    per_turn = round(CHUNK / trajs[0].time_step)
    n_steps = trajs[0].num_frames - 1
    # SAP steps 1-5, LCP steps 1-5, SAP 6-10, …: the runs never differ by more than one chunk.
    expected = [i for turn in range(n_steps // per_turn) for i in (0, 1) for _ in range(per_turn)]
    assert [i for i, _ in frames] == expected
    # Each frame carries its run's state at that step (body poses relative to the run's group).
    for i, traj in enumerate(trajs):
        sent = np.array([p for j, p in frames if j == i])
        np.testing.assert_array_equal(sent, traj.position[1:, 1])
    # Side by side: LCP's group is shifted across the slide (box_slide moves along +x), as the legend says.
    shift = next(c for b in server.batches for c in b
                 if c["type"] == "set_transform" and c["path"] == viewer.prefixes[1])
    d = np.asarray(shift["matrix"]).reshape(4, 4).T[:3, 3]
    assert d[1] > 0.2 and d[0] == 0 and d[2] == 0          # 0.2 m box: beside it, not in its path
    info = [c["value"] for b in server.batches for c in b
            if c["path"] == "/convexsim_info" and c["type"] == "set_property"][-1]
    assert info["title"] == "box_slide — live, in lockstep: SAP (lagged) vs LCP"
    assert [row["label"] for row in info["legend"]] == ["SAP (lagged)", "LCP"]
    assert "further back" in info["legend"][1]["body"]["text"]


def test_lockstep_trajectories_equal_the_separate_runs(lockstep, box_slide_runs):
    """Each run is one run_model call with a step callback: exactly the separate run with a callback
    (same code, same inputs; the other run only waits in between). Without a callback SAP takes the
    compiled run loop (same kernels): equal within 1e-12 (measured: equal)."""
    _, _, trajs = lockstep
    for traj, (m, s) in zip(trajs, box_slide_runs):
        alone, _ = run_model(m, s.copy(), duration=DURATION, step_callback=lambda *a: None)
        for f in FIELDS:
            np.testing.assert_array_equal(getattr(traj, f), getattr(alone, f), err_msg=f)
        plain, _ = run_model(m, s.copy(), duration=DURATION)
        np.testing.assert_allclose(traj.position, plain.position, rtol=0, atol=1e-12)
        np.testing.assert_allclose(traj.linear_velocity, plain.linear_velocity, rtol=0, atol=1e-12)


def test_an_interruption_of_the_first_run_stops_the_others():
    """Ctrl-C lands in run 0 (the calling thread): every run then ends with a KeyboardInterrupt."""
    seen = []

    def first(cb):
        for k in range(1, 4):
            cb(None, type("S", (), {"t": k * 1e-3})(), None)
        raise KeyboardInterrupt

    def second(cb):
        for k in range(1, 100):
            seen.append(k)
            cb(None, type("S", (), {"t": k * 1e-3})(), None)
        return "finished"

    results = run_lockstep([first, second], [1e-3, 1e-3], chunk=2e-3)
    assert isinstance(results[0].error, KeyboardInterrupt)
    assert isinstance(results[1].error, KeyboardInterrupt) and results[1].value is None
    assert seen == [1, 2]                 # its one turn (2 steps), then the abort
