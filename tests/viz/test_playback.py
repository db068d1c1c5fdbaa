"""The playback commands (no browser): tracks reproduce the trajectory, arrows follow the forces.

The trajectory is synthetic with a closed-form motion (viz_helpers.synthetic_trajectory), so every value
read back from the lowered commands has an exact expected value. Tolerances are float32 rounding:
track arrays are sent as Float32Array (relative 2^-24 ≈ 6e-8).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from convexsim.io.trajectory import Trajectory
from convexsim.viz.playback import OVERLAY_OPACITY, PlaybackOptions, build_playback, sample_frames

F32 = 2.0**-24


def unpack(value):
    return np.frombuffer(value.data, dtype="<f4").astype(np.float64)


def animation(pb) -> dict:
    anims = [c for c in pb.commands if c["type"] == "set_animation"]
    assert len(anims) == 1
    return {a["path"]: {t["name"][1:]: t for t in a["clip"]["tracks"]} for a in anims[0]["animations"]}


def track_values(tr, width):
    times = unpack(tr["times"])
    vals = np.array(tr["values"]) if tr["type"] == "boolean" else unpack(tr["values"]).reshape(len(times), width)
    return times, vals


def value_at(tr, width, t):
    """Discrete track value at time t (last key ≤ t)."""
    times, vals = track_values(tr, width)
    return vals[np.searchsorted(times, t + 1e-9, side="right") - 1]


def test_body_tracks_reproduce_the_closed_form_motion(two_body_traj):
    traj = two_body_traj
    pb = build_playback([traj], PlaybackOptions(labels=["run"], max_fps=1e6))
    clips = animation(pb)
    ball = clips["/meshcat/run/bodies/ball"]
    t, p = track_values(ball["position"], 3)
    np.testing.assert_allclose(t, traj.time, atol=F32 * traj.time[-1])
    z_exact = 1.0 - 0.5 * 9.81 * traj.time**2
    np.testing.assert_allclose(p[:, 2], z_exact, atol=F32 * np.abs(z_exact).max() * 2)
    _, qxyzw = track_values(clips["/meshcat/run/bodies/pill"]["quaternion"], 4)
    # The pill turns by 2t about z: rotating x̂ gives (cos 2t, sin 2t, 0) (scipy as the reference).
    x_img = Rotation.from_quat(qxyzw).apply([1.0, 0.0, 0.0])
    np.testing.assert_allclose(x_img, np.column_stack([np.cos(2 * traj.time), np.sin(2 * traj.time),
                                                        0 * traj.time]), atol=1e-6)
    # The fixed ground is not animated; its pose is a static transform.
    assert "/meshcat/run/bodies/ground" not in clips
    assert pb.duration == pytest.approx(traj.duration, abs=0)


def test_sampling_keeps_first_and_last_frames_and_the_fps_limit(two_body_traj):
    idx = sample_frames(two_body_traj.time, 30.0, 2, 10**9)
    t = two_body_traj.time[idx]
    assert idx[0] == 0 and idx[-1] == two_body_traj.num_frames - 1
    assert np.all(np.diff(t)[:-1] >= 1 / 30 - 1e-12)
    # Budget: 2 moving bodies × frames ≤ 20 over 1 s gives ≤ 10 fps (plus the kept last frame).
    idx = sample_frames(two_body_traj.time, 60.0, 2, 20)
    assert len(idx) <= 12
    pb = build_playback([two_body_traj], PlaybackOptions(labels=["a"], max_fps=30.0))
    for path, tracks in animation(pb).items():      # every clip spans the whole animation
        for tr in tracks.values():
            assert unpack(tr["times"])[-1] == pytest.approx(two_body_traj.duration, rel=F32), path


def test_force_arrows_have_length_proportional_to_force_and_point_along_it(two_body_traj):
    traj = two_body_traj
    scale = 0.01      # m/N
    pb = build_playback([traj], PlaybackOptions(labels=["r"], max_fps=1e6, force_scale=scale,
                                                force_threshold=0.0))
    clips = animation(pb)
    assert pb.paths["r"]["contact_slots"] == 2      # at most 2 touching contacts per frame; gap not drawn
    for f in (0, 1, 2, 4, 5):
        t = traj.time[f]
        c = traj.contacts_at(f)
        touching = c["phi"] <= 0
        order = np.argsort(-np.linalg.norm(c["force"][touching], axis=1))
        for k in range(2):
            slot = clips[f"/meshcat/r/contacts/c{k}"]
            arrow = clips[f"/meshcat/r/contacts/c{k}/force"]
            on = k < touching.sum()
            assert bool(value_at(slot["visible"], 1, t)) == on
            assert bool(value_at(arrow["visible"], 1, t)) == on
            if on:
                fk = c["force"][touching][order[k]]
                pk = c["point"][touching][order[k]]
                np.testing.assert_allclose(value_at(slot["position"], 3, t), pk, atol=1e-6)
                sy = value_at(arrow["scale"], 3, t)[1]
                assert sy == pytest.approx(np.linalg.norm(fk) * scale, rel=2 * F32)
                q = value_at(arrow["quaternion"], 4, t)
                d = Rotation.from_quat(q).apply([0.0, 1.0, 0.0])
                np.testing.assert_allclose(d, fk / np.linalg.norm(fk), atol=1e-6)


def test_threshold_hides_arrows_but_not_touching_points(two_body_traj):
    traj = two_body_traj
    pb = build_playback([traj], PlaybackOptions(labels=["r"], max_fps=1e6, force_scale=0.01,
                                                force_threshold=15.0))
    clips = animation(pb)
    t1 = traj.time[1]          # frame 1: one touching contact carrying 10 N < 15 N
    assert bool(value_at(clips["/meshcat/r/contacts/c0"]["visible"], 1, t1))
    assert not bool(value_at(clips["/meshcat/r/contacts/c0/force"]["visible"], 1, t1))
    t2 = traj.time[2]          # frame 2: 20 N (slot 0, shown) and 10 N (slot 1, hidden)
    assert bool(value_at(clips["/meshcat/r/contacts/c0/force"]["visible"], 1, t2))
    assert not bool(value_at(clips["/meshcat/r/contacts/c1/force"]["visible"], 1, t2))


def materials_of(pb, prefix):
    out = {}
    for c in pb.commands:
        if c["type"] == "set_object" and c["path"].startswith(prefix + "/bodies/"):
            out[c["path"]] = c["object"]["materials"][0]
    return out


def test_overlay_and_offset_layouts(two_body_traj):
    a = two_body_traj
    b = Trajectory(**{**a.__dict__, "solver_kind": "lcp", "contact_model": "rigid"})
    over = build_playback([a, b], PlaybackOptions(layout="overlay"))
    labels = [e["label"] for e in over.info["legend"]]
    assert labels == ["SAP (sap)", "LCP"]
    mats_a, mats_b = materials_of(over, "/meshcat/SAP (sap)"), materials_of(over, "/meshcat/LCP")
    assert all(m["opacity"] == 1.0 for m in mats_a.values())
    assert mats_b and all(m["opacity"] == pytest.approx(OVERLAY_OPACITY) and m["transparent"]
                          for m in mats_b.values())
    # The ground is drawn once (no z-fighting copy), by the first trajectory.
    assert any("ground" in p for p in mats_a) and not any("ground" in p for p in mats_b)

    off = build_playback([a, b], PlaybackOptions(layout="offset", offset=[0.0, 2.0, 0.0]))
    shifts = {c["path"]: np.array(c["matrix"]).reshape(4, 4).T[:3, 3] for c in off.commands
              if c["type"] == "set_transform" and c["path"] in ("/meshcat/SAP (sap)", "/meshcat/LCP")}
    np.testing.assert_allclose(shifts["/meshcat/LCP"] - shifts["/meshcat/SAP (sap)"], [0, 2, 0])
    assert all(m["opacity"] == 1.0 for m in materials_of(off, "/meshcat/LCP").values())


def test_matrices_are_plain_float_lists(two_body_traj):
    pb = build_playback([two_body_traj])
    for c in pb.commands:
        if c["type"] == "set_transform":
            assert len(c["matrix"]) == 16 and all(type(x) is float for x in c["matrix"])
            R = np.array(c["matrix"]).reshape(4, 4).T[:3, :3]
            np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=1e-12)


def test_camera_sees_every_body(two_body_traj):
    """Every body at frame 0 lies inside the default camera's 75° cone after the scene shift."""
    pb = build_playback([two_body_traj])
    shift = next(np.array(c["matrix"]).reshape(4, 4).T[:3, 3] for c in pb.commands
                 if c["type"] == "set_transform" and c["path"] == "/meshcat")
    ex, ey, ez = next(c["value"] for c in pb.commands if c["type"] == "set_property"
                      and c["path"] == "/Cameras/default/rotated/<object>")
    eye = np.array([ex, -ez, ey])               # rotated frame (x, z, −y) back to z-up
    for p in two_body_traj.position[0]:
        to_p = p + shift - eye
        cosang = to_p @ (-eye) / (np.linalg.norm(to_p) * np.linalg.norm(eye))
        assert cosang > np.cos(np.radians(37.5))


def test_bad_input_is_a_clear_error(two_body_traj):
    with pytest.raises(ValueError, match="no trajectory"):
        build_playback([])
    with pytest.raises(ValueError, match="layout"):
        build_playback([two_body_traj], PlaybackOptions(layout="sideways"))
    with pytest.raises(ValueError, match="labels"):
        build_playback([two_body_traj], PlaybackOptions(labels=["a", "b"]))
    other = Trajectory(**{**two_body_traj.__dict__, "body_names": np.array(["ground", "ball", "cube"])})
    with pytest.raises(ValueError, match="do not match"):
        build_playback([two_body_traj, other])
    no_scene = Trajectory(**{**two_body_traj.__dict__, "scene_yaml": ""})
    with pytest.raises(ValueError, match="scene_yaml is empty"):
        build_playback([no_scene])


def test_default_labels_name_the_setting_that_differs(two_body_traj):
    import yaml

    from convexsim.viz.playback import default_labels

    soft_yaml = yaml.safe_load(two_body_traj.scene_yaml)
    soft_yaml["materials"] = {"default": {"stiffness": 1.0e4}}
    stiff_yaml = {**soft_yaml, "materials": {"default": {"stiffness": 1.0e6}}}
    soft = Trajectory(**{**two_body_traj.__dict__, "scene_yaml": yaml.safe_dump(soft_yaml)})
    stiff = Trajectory(**{**two_body_traj.__dict__, "scene_yaml": yaml.safe_dump(stiff_yaml)})
    assert default_labels([soft, stiff]) == ["SAP (sap) stiffness=10000.0", "SAP (sap) stiffness=1000000.0"]
    assert default_labels([soft, soft]) == ["SAP (sap)", "SAP (sap) #2"]


def with_spike(traj: Trajectory, frame: int, newtons: float) -> Trajectory:
    """A copy of ``traj`` whose first contact of ``frame`` carries ``newtons`` along +z (an impact)."""
    force = traj.contact_force.copy()
    force[int(traj.contact_offsets[frame])] = [0.0, 0.0, newtons]
    return Trajectory(**{**traj.__dict__, "contact_force": force})


def test_impact_frame_survives_thinning_and_its_arrow_is_clamped(two_body_traj):
    from convexsim.viz.playback import frame_peak_force

    spike = with_spike(two_body_traj, 16, 4000.0)    # frame 16: one touching contact (10 N → 4 kN)
    plain = sample_frames(spike.time, 10.0, 2, 10**9)
    assert 16 not in plain                           # every 10th frame: the impact would be dropped
    kept = sample_frames(spike.time, 10.0, 2, 10**9, priority=frame_peak_force(spike))
    assert 16 in kept and len(kept) <= len(plain) + 1 and kept[0] == 0 and kept[-1] == spike.num_frames - 1
    # Each interval still shows one frame; without forces the choice is the old one.
    assert np.array_equal(sample_frames(spike.time, 10.0, 2, 10**9, priority=np.zeros(spike.num_frames)), plain)

    pb = build_playback([spike], PlaybackOptions(labels=["r"], max_fps=10.0))
    R, scale = pb.info["max_arrow"], pb.info["force_scale"]
    assert 4000.0 * scale > 10 * R                   # unclamped, the arrow would be > 10 scene radii
    arrow = animation(pb)["/meshcat/r/contacts/c0/force"]
    t16 = spike.time[16] + 1e-6                      # past the float32-rounded key time
    assert bool(value_at(arrow["visible"], 1, t16))
    assert value_at(arrow["scale"], 3, t16)[1] == pytest.approx(R, rel=2 * F32)       # clamped at R
    f_next = int(kept[kept > 16][0])                  # the next frame shown: 20 N, not clamped
    assert value_at(arrow["scale"], 3, spike.time[f_next] + 1e-6)[1] == pytest.approx(
        frame_peak_force(spike)[f_next] * scale, rel=2 * F32)
    assert frame_peak_force(spike)[f_next] == 20.0
    assert "at most" in pb.info["note"] and "largest force: 4 kN" in pb.info["note"]


def test_live_and_playback_use_one_arrow_scale_rule(two_body_traj):
    """force_scale = 0.25·R / (weight of the heaviest moving body), rounded to 1-2-5, in both; arrows clamped at R."""
    from types import SimpleNamespace

    from convexsim.model import Contacts
    from convexsim.scene import compile_scene, scene_from_yaml
    from convexsim.viz import LiveViewer
    from convexsim.viz.playback import REFERENCE_ARROW, nice_scale, weight_reference

    from viz_helpers import TWO_BODY_YAML

    model, state = compile_scene(scene_from_yaml(TWO_BODY_YAML))
    w = 1.0 * float(np.linalg.norm(model.gravity))   # ball and pill: 1 kg each
    assert weight_reference([model]) == pytest.approx(w)
    pb = build_playback([two_body_traj], PlaybackOptions(labels=["r"]))
    assert pb.info["force_reference"] == pytest.approx(w)
    assert pb.info["force_scale"] == pytest.approx(nice_scale(REFERENCE_ARROW * pb.info["max_arrow"] / w))

    class Rec:
        web_url, running = "http://127.0.0.1:1/static/", True

        def __init__(self):
            self.commands = []

        def send(self, cmds):
            self.commands += list(cmds)

    rec = Rec()
    viewer = LiveViewer(model, server=rec, announce=False, threaded=False)
    contacts = Contacts(geom_a=np.array([0]), geom_b=np.array([2]), body_a=np.array([0]), body_b=np.array([2]),
                        phi=np.array([-1e-4]), point=np.array([[0.5, 0.0, 0.0]]), normal=np.array([[0, 0, 1.0]]))
    viewer.update(state, SimpleNamespace(contacts=contacts, force_world=np.array([[0.0, 0.0, w]])), force=True)
    assert viewer._force_scale == pytest.approx(nice_scale(REFERENCE_ARROW * viewer._radius / w))

    def arrow_length():
        T = np.array(next(c["matrix"] for c in reversed(rec.commands)
                          if c["path"] == "/meshcat/live/contacts/c0/force")).reshape(4, 4).T
        return float(np.linalg.norm(T[:3, 1]))

    assert arrow_length() == pytest.approx(viewer._force_scale * w)        # one body's weight: about R/4
    assert 0.5 < arrow_length() / (REFERENCE_ARROW * viewer._radius) < 2.0  # 1-2-5 rounding: within ×2
    viewer.update(state, SimpleNamespace(contacts=contacts, force_world=np.array([[0.0, 0.0, 1e5]])), force=True)
    assert arrow_length() == pytest.approx(viewer._radius)                       # clamped at R


def test_legend_tells_the_runs_bodies_apart(two_body_traj):
    a = two_body_traj
    b = Trajectory(**{**a.__dict__, "solver_kind": "lcp", "contact_model": "rigid"})
    pb = build_playback([a, b], PlaybackOptions(layout="overlay"))
    la, lb = pb.info["legend"]
    assert la["body"]["text"] == "bodies solid, in place" and la["body"]["opacity"] == 1.0
    assert lb["body"]["text"] == "bodies translucent (35%), tinted blue, in place"
    assert lb["body"]["opacity"] == pytest.approx(OVERLAY_OPACITY)
    assert la["marker"]["text"] == "contacts green" and lb["marker"]["text"] == "contacts blue"
    assert la["marker"]["color"] != lb["marker"]["color"] and la["body"]["color"] != lb["body"]["color"]
    # The second run's bodies are really drawn in another colour (not only more transparent).
    ball_a = materials_of(pb, "/meshcat/SAP (sap)")
    ball_b = materials_of(pb, "/meshcat/LCP")
    ca = next(m["color"] for p, m in ball_a.items() if "/ball/" in p)
    cb = next(m["color"] for p, m in ball_b.items() if "/ball/" in p)
    assert ca != cb
    assert la["body"]["color"] == "#%06x" % ca and lb["body"]["color"] == "#%06x" % cb


def test_runs_of_different_scenes_need_the_offset_layout(two_body_traj):
    from convexsim.viz.playback import check_comparable, default_labels

    from viz_helpers import without_body

    other = without_body(two_body_traj, "pill", "other_scene")
    with pytest.raises(ValueError, match=r"a\.npz .*viz_two_bodies.* and b\.npz .*other_scene.*--layout offset"):
        check_comparable([two_body_traj, other], ["a.npz", "b.npz"], "overlay")
    with pytest.raises(ValueError, match="not runs of the same scene"):
        build_playback([two_body_traj, other], PlaybackOptions(layout="overlay"))
    assert build_playback([two_body_traj, other]).info["layout"] == "offset"     # "auto" puts them side by side
    check_comparable([two_body_traj, other], ["a.npz", "b.npz"], "offset")
    pb = build_playback([two_body_traj, other], PlaybackOptions(layout="offset"))
    assert [e["label"] for e in pb.info["legend"]] == default_labels([two_body_traj, other])
    assert default_labels([two_body_traj, other]) == ["viz_two_bodies: SAP (sap)", "other_scene: SAP (sap)"]
    assert "different scenes, side by side" in pb.info["note"]
    # Each scene has its own ground.
    assert sum(1 for c in pb.commands if c["type"] == "set_object" and "/ground/" in c["path"]) >= 2


def test_runs_of_different_scenes_with_the_same_body_names_are_not_overlaid():
    """Check two scenes that share body names (incline_stick and incline_slip: 'incline', 'box') but not
    their geometry are refused in the overlay layout, naming both, and allowed side by side."""
    from convexsim.simulate import simulate
    from convexsim.viz.playback import PlaybackOptions, build_playback
    from repo_paths import SCENES

    a = simulate(SCENES / "incline_stick.yaml", duration=0.01)
    b = simulate(SCENES / "incline_slip.yaml", duration=0.01)
    assert list(a.body_names) == list(b.body_names)
    with pytest.raises(ValueError, match="not runs of the same scene.*scene names differ"):
        build_playback([a, b], PlaybackOptions(labels=["stick", "slip"], layout="overlay"))
    pb = build_playback([a, b], PlaybackOptions(labels=["stick", "slip"], layout="offset"))
    assert "different scenes, side by side" in pb.info["note"]


def test_force_legend_is_plain_words_with_a_round_scale():
    from convexsim.viz.playback import force_legend, length_text, nice_scale

    # 1-2-5 rounding (nearest in log): never more than a factor 1.6 away.
    for x in np.logspace(-6, 3, 97):
        r = nice_scale(x)
        assert r / x < 1.6 and x / r < 1.6
        assert f"{r / 10.0 ** np.floor(np.log10(r) + 1e-9):.6g}" in ("1", "2", "5")
    assert nice_scale(0.0076) == 0.01 and nice_scale(0.0031) == 0.002
    assert length_text(0.005) == "5 mm" and length_text(0.3) == "30 cm" and length_text(2.0) == "2 m"
    assert force_legend(0.1, 0.01, 0.5) == ("arrow length: 10 cm per N, at most 50 cm (5 N and more); "
                                            "no arrow below 0.01 N")
    assert force_legend(1e-4, 1.0, 0.3).startswith("arrow length: 1 cm per 100 N, at most 30 cm (3 kN and more)")
    assert force_legend(20.0, 0.0, 1.0) == "arrow length: 20 cm per 0.01 N, at most 1 m (0.05 N and more)"
    # a run with forces near the float limit: a scale near zero makes the limit force huge or infinite
    assert "(inf kN and more)" in force_legend(1e-320, 0.0, 1.0)
    assert "(1e+305 kN and more)" in force_legend(1e-308, 0.0, 1.0)


def test_auto_layout_puts_agreeing_runs_side_by_side_and_differing_runs_in_place(two_body_traj):
    from convexsim.viz.playback import AGREE_FRACTION

    a = two_body_traj
    same = Trajectory(**{**a.__dict__, "solver_kind": "lcp", "contact_model": "rigid"})
    pb = build_playback([a, same])
    assert pb.info["layout"] == "offset"
    shifts = {c["path"]: np.array(c["matrix"]).reshape(4, 4).T[:3, 3] for c in pb.commands
              if c["type"] == "set_transform" and c["path"] in ("/meshcat/SAP (sap)", "/meshcat/LCP")}
    assert np.linalg.norm(shifts["/meshcat/LCP"] - shifts["/meshcat/SAP (sap)"]) > 0.5   # beside, not on top
    assert "to the right" in pb.info["legend"][1]["body"]["text"]
    # A run whose ball is 0.3 m off (far more than AGREE_FRACTION of the ~0.6 m scene radius): overlaid,
    # the difference is what the page shows.
    pos = a.position.copy()
    pos[:, 1, 0] += 0.3
    differs = Trajectory(**{**same.__dict__, "position": pos})
    assert 0.3 > AGREE_FRACTION * draw_radius(a)
    assert build_playback([a, differs]).info["layout"] == "overlay"
    # Later runs' arrows are thinner, so two coinciding arrows both show.
    r = {p: c["object"]["geometries"][0]["radiusTop"] for c in pb.commands for p in ("SAP (sap)", "LCP")
         if c["type"] == "set_object" and c["path"] == f"/meshcat/{p}/contacts/c0/force/shaft"}
    assert r["LCP"] < 0.7 * r["SAP (sap)"]


def draw_radius(traj) -> float:
    from convexsim.viz import draw
    from convexsim.viz.playback import model_for

    return draw.bounds_of_positions(model_for(traj), traj.position).radius


def test_camera_follows_a_body_that_leaves_the_initial_view():
    """A ball sliding 5 m in 1 s (constant velocity, closed form): "auto" follows it (the content root is
    moved by −(x(t), y(t), z)), "off" frames the whole path instead."""
    from viz_helpers import synthetic_trajectory

    base = synthetic_trajectory()
    pos = base.position.copy()
    pos[:, 1] = np.column_stack([5.0 * base.time, np.zeros(base.num_frames), np.full(base.num_frames, 0.1)])
    pos[:, 2, 0] = 0.5 + 5.0 * base.time                      # the pill goes along
    traj = Trajectory(**{**base.__dict__, "position": pos})
    pb = build_playback([traj], PlaybackOptions(labels=["r"], max_fps=1e6))
    assert pb.info["following"] and "camera follows" in pb.info["note"]
    times, values = track_values(animation(pb)["/meshcat"]["position"], 3)
    np.testing.assert_allclose(times[:base.num_frames], base.time, atol=F32 * base.time[-1])
    centroid_x = 0.5 * (pos[:, 1, 0] + pos[:, 2, 0])          # the moving bodies: ball and pill
    # −root = the followed point: the centroid plus a constant (the bodies' extent is framed around it).
    offset = -values[:base.num_frames, 0] - centroid_x
    np.testing.assert_allclose(offset, offset[0], atol=1e-5)  # float32 track values of ~5 m
    assert np.ptp(values[:, 1]) < 1e-6 and np.ptp(values[:, 2]) < 1e-6    # y and z stay: horizontal follow
    off = build_playback([traj], PlaybackOptions(labels=["r"], follow="off"))
    assert not off.info["following"] and "/meshcat" not in animation(off)
