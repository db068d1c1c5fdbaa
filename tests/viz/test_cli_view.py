"""`convexsim run --view` (one server, playback published after the run, Ctrl-C to stop) and
`convexsim view` (labels, runs of different scenes)."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from convexsim.io import save_trajectory

from viz_helpers import commands_in_page, scene_path, without_body

PY = sys.executable


def test_run_view_uses_one_server_and_publishes_the_playback(tmp_path, monkeypatch, capsys):
    """`--solver both --view --no-wait`: one server for both runs, streamed live together, then the recorded
    playback of both on the same server; the server is stopped when the command returns."""
    import convexsim.viz.live as live
    from convexsim.cli import main

    started = []

    class Recording(live.MeshcatServer):
        def start(self):
            started.append(self)
            self.sent: list[dict] = []
            return super().start()

        def send(self, commands):
            commands = list(commands)
            self.sent += commands
            return super().send(commands)

    monkeypatch.setattr(live, "MeshcatServer", Recording)
    rc = main(["run", str(scene_path("sphere_drop")), "--solver", "both", "--duration", "0.02",
               "--out", str(tmp_path / "sd.npz"), "--view", "--no-wait", "--quiet"])
    assert rc == 0
    assert len(started) == 1                         # one viewer for the whole command
    server = started[0]
    assert not server.running                        # --no-wait: stopped on return
    titles = [c["value"].get("title", "") for c in server.sent
              if c["path"] == "/convexsim_info" and c["type"] == "set_property"]
    # both runs streamed together (viz/lockstep.py): one live legend naming both, both groups moved
    assert any("live, in lockstep: SAP (sap) vs LCP" in t for t in titles)
    moved = {c["path"].split("/")[3] for c in server.sent
             if c["type"] == "set_transform" and c["path"].startswith("/meshcat/live/") and "/bodies/" in c["path"]}
    assert len(moved) == 2, moved
    anims = [c for c in server.sent if c["type"] == "set_animation"]
    assert len(anims) == 1                           # the playback, published after both runs
    paths = {a["path"] for a in anims[0]["animations"]}
    assert any(p.startswith("/meshcat/SAP (sap)/") for p in paths) and any(p.startswith("/meshcat/LCP/") for p in paths)
    last_delete = max(i for i, c in enumerate(server.sent) if c["type"] == "delete" and c["path"] == "/meshcat")
    assert server.sent.index(anims[0]) > last_delete  # the live scene is replaced, not mixed in
    out = capsys.readouterr().out
    assert out.count("http://127.0.0.1:") >= 1 and "Ctrl-C" not in out


def test_realtime_without_view_is_an_error(tmp_path, capsys):
    from convexsim.cli import main

    rc = main(["run", str(scene_path("sphere_drop")), "--duration", "0.01", "--realtime",
               "--out", str(tmp_path / "x.npz"), "--quiet"])
    assert rc != 0
    err = capsys.readouterr().err
    assert "--realtime" in err and "--view" in err
    assert not (tmp_path / "x.npz").exists()


def test_run_view_blocks_after_the_run_until_sigint(tmp_path):
    """A run that is over before anyone opens the page: the page still has the playback, and the command
    waits with "Ctrl-C to stop"; SIGINT stops it and its server."""
    from test_server import can_connect, children_of, replayed_messages, wait_gone

    proc = subprocess.Popen([PY, "-m", "convexsim.cli", "run", str(scene_path("sphere_drop")), "--duration", "0.02",
                             "--out", str(tmp_path / "sd.npz"), "--view", "--quiet"],
                            stdout=subprocess.PIPE, text=True)
    try:
        from test_server import read_until

        lines = read_until(proc, "Ctrl-C to stop", timeout=120)
        url = next(x.split("Meshcat viewer: ", 1)[1].split()[0] for x in lines if x.startswith("Meshcat viewer:"))
        assert url.startswith("http://127.0.0.1:")
        assert (tmp_path / "sd.npz").exists()             # the run is over
        servers = children_of(proc.pid)
        assert len(servers) == 1
        msgs = replayed_messages(url, "set_animation")    # a browser opening now gets the playback
        assert msgs[-1]["type"] == "set_animation"
        assert proc.poll() is None                        # still serving
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert wait_gone(servers[0], 5.0)
        assert not can_connect("127.0.0.1", int(url.split(":")[2].split("/")[0]))
    finally:
        if proc.poll() is None:
            proc.kill()


def test_view_refuses_to_overlay_different_scenes_and_uses_playback_labels(tmp_path, two_body_traj, capsys):
    from convexsim.cli import main

    a = save_trajectory(tmp_path / "a.npz", two_body_traj)
    b = save_trajectory(tmp_path / "b.npz", without_body(two_body_traj, "pill", "only_ball"))
    assert main(["view", str(a), str(b), "--layout", "overlay", "--html", str(tmp_path / "x.html")]) != 0
    err = capsys.readouterr().err
    assert str(a) in err and str(b) in err and "--layout offset" in err
    assert not (tmp_path / "x.html").exists()
    # Allowed side by side (the default "auto" layout picks it), and said so in the legend.
    assert main(["view", str(a), str(b), "--html", str(tmp_path / "off.html")]) == 0
    info = next(c["value"] for c in commands_in_page((tmp_path / "off.html").read_text())
                if c["type"] == "set_property" and c["path"] == "/convexsim_info")
    assert "different scenes" in info["note"]
    # Default labels are the playback's (solver / contact model), not the file names.
    assert main(["view", str(a), "--html", str(tmp_path / "one.html")]) == 0
    info = next(c["value"] for c in commands_in_page((tmp_path / "one.html").read_text())
                if c["type"] == "set_property" and c["path"] == "/convexsim_info")
    assert [e["label"] for e in info["legend"]] == ["SAP (sap)"]
    assert info["title"] == "viz_two_bodies — SAP (sap)"
