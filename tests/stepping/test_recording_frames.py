"""Recording in the compiled run loop (``simulate.RunFrames``): the run kernel writes its frames into run-long
arrays in place, and the trajectory holds exactly what the step-by-step recorder (``simulate.Recorder``)
holds for the same steps, and what a run recording other frames holds for the frames both record.

Every comparison is exact (bit for bit): recording only copies numbers the steps computed, and both sides
take the same steps with the same kernels on the same inputs, so no round-off can enter between them.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from convexsim import simulate
from convexsim.io.trajectory import Trajectory
from convexsim.simulate import CONTACT_ROWS0, Recorder, prepare, recorded_frames, run_model
from convexsim.stepping import StepContext, dispatch, step

ARRAYS = [f.name for f in dataclasses.fields(Trajectory)
          if f.name not in ("scene_yaml", "solver_kind", "contact_model", "time_step", "failure", "metadata")]
"""Every array a Trajectory records."""


def _assert_same_frames(a, b, frames_a):
    """Trajectory b equals the frames ``frames_a`` of trajectory a, bit for bit, in every array."""
    oa = a.contact_offsets
    rows = np.concatenate([np.arange(oa[f], oa[f + 1]) for f in frames_a]).astype(np.int64)
    for name in ARRAYS:
        x, y = getattr(a, name), getattr(b, name)
        if name in ("body_names", "constraint_force_names"):
            expected = x
        elif name == "contact_offsets":
            expected = np.concatenate([[0], np.cumsum(np.diff(oa)[frames_a])])
        elif name.startswith("contact_"):
            expected = x[rows]
        else:
            expected = x[frames_a]
        assert y.shape == np.shape(expected) and y.dtype == x.dtype, name
        assert np.array_equal(y, expected), name


@pytest.mark.parametrize("scene, steps, every", [("iiwa_push", 60, 1), ("iiwa_push", 60, 7),
                                                 ("box_stack", 60, 1), ("gripper_lift", 40, 3),
                                                 ("pile_100", 22, 1)])
def test_run_loop_frames_equal_the_step_by_step_recorder(scene, steps, every):
    """The compiled run loop's trajectory (frames written in place by the run kernel) equals the one the
    Python loop's Recorder makes of the same compiled steps, in every array (body states, solver counts,
    contact rows, named joint forces and their names). box_stack has about 20 contacts per frame, more than
    the contact arrays hold at first: the rows of a grown buffer are kept. pile_100's landing has islands
    above the kernel's dense limit: those steps go through ``stepping.step`` and their frames (contacts
    included) are written row by row between the kernel's."""
    model, state, _ = prepare(scene)
    traj, stats = run_model(model, state, duration=steps * model.time_step, record_every=every, path="compiled")
    assert stats.path.startswith("compiled step (compiled run loop")
    rec, ctx, s = Recorder(model), StepContext(), state
    rec.record(s, None)
    for k in range(steps):
        s, info = step(model, s, ctx, path="compiled")
        if (k + 1) % every == 0 or k + 1 == steps:
            rec.record(s, info)
    ref = rec.to_trajectory(scene_yaml=model.scene_yaml, solver_kind="sap", contact_model="sap")
    assert traj.num_frames == recorded_frames(steps, every) == ref.num_frames
    _assert_same_frames(ref, traj, np.arange(ref.num_frames))
    if scene == "box_stack":
        assert traj.contact_phi.shape[0] > CONTACT_ROWS0        # more rows than the first arrays hold


def test_recording_every_step_changes_no_frame_of_a_pile(monkeypatch):
    """pile_100's island exceeds the run kernel's dense limit: the loop hands those steps to
    ``stepping.step``, whose frames are written row by row (``RunFrames.record``) between the kernel's.
    Recording every step or every 4th gives the same frames where both record, bit for bit, and the same
    per-step statistics."""
    model, state, _ = prepare("pile_100")
    handed = []
    real_step = dispatch.step
    monkeypatch.setattr(dispatch, "step", lambda *a, **k: handed.append(1) or real_step(*a, **k))
    steps = 22
    every_1, s1 = run_model(model, state, duration=steps * model.time_step, record_every=1)
    assert handed, "no step was handed over: the test would not cover the frames written row by row"
    every_4, s4 = run_model(model, state, duration=steps * model.time_step, record_every=4)
    assert every_1.num_frames == steps + 1 and every_4.num_frames == recorded_frames(steps, 4) == 7
    _assert_same_frames(every_1, every_4, np.array([0, 4, 8, 12, 16, 20, 22]))
    assert s1.iterations == s4.iterations and s1.contacts == s4.contacts


@pytest.mark.parametrize("scene, steps", [("box_stack", 40), ("pile_100", 22)])
def test_frames_outgrowing_their_first_arrays_are_kept(scene, steps, monkeypatch):
    """A run whose frames do not fit the frame arrays it starts with (here room for 4 frames, doubled when
    full, up to the run's frames) records what a run with room for all of them records, bit for bit, in
    every array: the kernel's frames and those written row by row (pile_100's handed-over steps)."""
    model, state, _ = prepare(scene)
    duration = steps * model.time_step
    roomy, _ = run_model(model, state, duration=duration, record_every=1)
    monkeypatch.setattr(simulate, "FRAME_BYTES0", 0)
    monkeypatch.setattr(simulate, "FRAMES0_MIN", 4)
    grown, _ = run_model(model, state, duration=duration, record_every=1)
    assert grown.num_frames == steps + 1 > 4
    _assert_same_frames(roomy, grown, np.arange(roomy.num_frames))


@pytest.mark.parametrize("n_steps, every", [(0, 1), (1, 1), (10, 1), (10, 3), (9, 3), (2, 100), (200, 100)])
def test_recorded_frames_counts_the_frames_of_the_recording_rule(n_steps, every):
    """``recorded_frames`` is the number of frames the run loops record: frame 0, and one after step k when
    (k + 1) % every == 0 or k + 1 == n_steps."""
    rule = [k for k in range(n_steps) if (k + 1) % every == 0 or k + 1 == n_steps]
    assert recorded_frames(n_steps, every) == 1 + len(rule)
