"""Readable pages at any scale (issue 27): the force-arrow modes, the CLI flags, and a headless check that
the 3D view shows the frame the legend names."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from convexsim.viz import PlaybackOptions, build_playback, export_html
from convexsim.viz.playback import MANY_CONTACTS, TOP_ARROWS


def many_contacts(traj, per_frame: int = 60):
    """``traj`` with ``per_frame`` touching contacts at the pill in every frame (forces 1 … per_frame N)."""
    T = traj.num_frames
    K = T * per_frame
    pts = np.tile(np.column_stack([np.linspace(0.4, 0.6, per_frame), np.zeros(per_frame), np.zeros(per_frame)]),
                  (T, 1))
    force = np.zeros((K, 3))
    force[:, 2] = np.tile(np.arange(1.0, per_frame + 1.0), T)
    return dataclasses.replace(
        traj, contact_offsets=np.arange(T + 1, dtype=np.int64) * per_frame,
        contact_body_a=np.zeros(K, np.int64), contact_body_b=np.full(K, 2, np.int64), contact_point=pts,
        contact_normal=np.tile([0.0, 0.0, 1.0], (K, 1)), contact_phi=np.full(K, -1e-4), contact_force=force)


def arrow_nodes(pb) -> set[str]:
    return {c["path"].rsplit("/force/", 1)[0] for c in pb.commands
            if c["type"] == "set_object" and "/force/" in c.get("path", "")}


def test_many_contacts_switch_to_the_largest_arrows_and_the_legend_says_so(two_body_traj):
    pile = many_contacts(two_body_traj)
    assert MANY_CONTACTS < 60
    auto = build_playback([pile], PlaybackOptions(labels=["A"]))
    assert auto.info["forces"] == "top" and auto.info["busiest_frame_contacts"] == 60
    assert auto.paths["A"]["contact_slots"] == TOP_ARROWS == len(arrow_nodes(auto))
    assert f"arrows for the {TOP_ARROWS} largest forces" in auto.info["note"]
    assert "--forces capped" in auto.info["note"]
    capped = build_playback([pile], PlaybackOptions(labels=["A"], forces="capped"))
    assert capped.info["forces"] == "capped" and len(arrow_nodes(capped)) == 60
    assert "at most" in capped.info["note"]
    scaled = build_playback([pile], PlaybackOptions(labels=["A"], forces="scaled", force_scale=0.01))
    assert scaled.info["force_scale"] == 0.01 and "not capped" in scaled.info["note"]
    off = build_playback([pile], PlaybackOptions(labels=["A"], forces="off"))
    assert arrow_nodes(off) == set() and off.paths["A"]["contact_slots"] == 60
    assert "contact points only" in off.info["note"]
    none = build_playback([pile], PlaybackOptions(labels=["A"], show_contacts=False))
    assert not any("/contacts/" in c.get("path", "") for c in none.commands)
    # Few contacts: every arrow, capped (the page as before).
    few = build_playback([two_body_traj], PlaybackOptions(labels=["A"]))
    assert few.info["forces"] == "capped" and "largest forces" not in few.info["note"]
    with pytest.raises(ValueError, match="forces must be one of"):
        build_playback([pile], PlaybackOptions(forces="many"))


def test_thinned_frames_are_said_in_the_legend(two_body_traj):
    pb = build_playback([two_body_traj], PlaybackOptions(labels=["A"], max_fps=10.0))
    assert pb.frames[0] < two_body_traj.num_frames
    assert f"{pb.frames[0]} of the {two_body_traj.num_frames} recorded frames shown" in pb.info["note"]


def test_cli_display_flags(tmp_path, two_body_traj, capsys):
    from convexsim.cli import EXIT_OK, EXIT_USAGE, main
    from convexsim.io import save_trajectory

    src = tmp_path / "pile.npz"
    save_trajectory(src, many_contacts(two_body_traj))
    out = tmp_path / "off.html"
    assert main(["view", str(src), "--html", str(out), "--forces", "off", "--force-scale", "0.01"]) == EXIT_OK
    from viz_helpers import commands_in_page

    info = [c for c in commands_in_page(out.read_text()) if c.get("path") == "/convexsim_info"][0]["value"]
    assert info["forces"] == "off" and info["force_scale"] == 0.01
    assert main(["view", str(src), "--html", str(tmp_path / "n.html"), "--contacts", "off"]) == EXIT_OK
    capsys.readouterr()
    assert main(["run", "sphere_drop", "--duration", "0.01", "--forces", "off", "--out",
                 str(tmp_path / "s.npz")]) == EXIT_USAGE
    assert "--forces changes what the viewer draws" in capsys.readouterr().err
    assert main(["view", str(src), "--html", str(out), "--force-scale", "-1"]) == EXIT_USAGE


@pytest.mark.browser
def test_the_3d_view_shows_the_frame_the_legend_names(tmp_path, two_body_traj, open_page):
    """While the page plays, the legend's time and the ball's drawn height are read in one go, at two
    moments: the height must be the recorded one at the legend's time (the ball falls freely, z = 1 − g t²/2,
    ~5 m/s at the end: a legend one 100 ms timer tick behind the view is decimetres off)."""
    out = export_html([two_body_traj], tmp_path / "ball.html", labels=["A"], loop=False)
    probe = open_page(out.as_uri(), offline=True)
    probe.wait_for_body("A", "ball")
    page = probe.page
    read = """() => { const n = viewer.scene_tree.find(['meshcat', 'A', 'bodies', 'ball']);
                      return [document.getElementById('convexsim-time').innerText, n.object.position.z,
                              viewer.animator.playing]; }"""
    page.evaluate("() => { const a = viewer.animator; a.mixer.timeScale = 0.5; a.seek(0); a.time = 0; a.play(); }")
    seen = []
    for wait_ms in (300, 900):
        page.wait_for_timeout(wait_ms)
        text, z, playing = page.evaluate(read)
        t = float(re.search(r"t = ([0-9.]+) s", text).group(1))
        seen.append(t)
        expected = float(np.interp(t, two_body_traj.time, two_body_traj.position[:, 1, 2]))
        # the legend rounds t to 1 ms: at most 5 mm at the ball's top speed
        assert z == pytest.approx(expected, abs=6e-3), (text, z, expected, playing)
    assert seen[1] > seen[0] + 0.1
    assert probe.errors == []
