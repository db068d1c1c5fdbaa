"""MeshcatServer: loopback-only binding, clean stop, no orphan after normal exit, SIGINT or SIGKILL."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from convexsim.io import save_trajectory
from convexsim.viz import MeshcatServer

PY = sys.executable


def non_loopback_address() -> str | None:
    """An IPv4 address of this machine that is not 127.x (UDP connect sends nothing)."""
    for target in ("10.255.255.255", "192.168.255.255", "172.31.255.255"):
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect((target, 1))
                ip = s.getsockname()[0]
        except OSError:
            continue
        if not ip.startswith("127.") and ip != "0.0.0.0":
            return ip
    try:
        out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=5).stdout.split()
    except (OSError, subprocess.SubprocessError):
        out = []
    return next((ip for ip in out if ":" not in ip and not ip.startswith("127.")), None)


def can_connect(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def process_gone(pid: int) -> bool:
    """True if pid does not exist or is a zombie (exited, not yet reaped by its new parent)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process_gone(pid):
            return True
        time.sleep(0.05)
    return process_gone(pid)


def children_of(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            pass
    return kids


def test_server_listens_on_loopback_only_and_stops_cleanly():
    server = MeshcatServer(port=0).start()
    pid, port = server.pid, server.port
    zmq_port = int(server.zmq_url.rsplit(":", 1)[1])
    try:
        page = urllib.request.urlopen(server.web_url, timeout=10).read().decode()
        assert "convexsim-overlay" in page and "main.min.js" in page
        assert urllib.request.urlopen(server.web_url + "main.min.js", timeout=10).status == 200
        assert server.send([{"type": "set_property", "path": "/Grid", "property": "visible", "value": False}]) == 1
        ip = non_loopback_address()
        if ip is None:
            pytest.skip("this machine has no non-loopback IPv4 address to probe")
        # Positive control first: a socket bound to all interfaces IS reachable on that address.
        with socket.socket() as probe:
            probe.bind(("0.0.0.0", 0))
            probe.listen(1)
            assert can_connect(ip, probe.getsockname()[1])
        assert not can_connect(ip, port), f"HTTP port {port} reachable on {ip}"
        assert not can_connect(ip, zmq_port), f"ZMQ port {zmq_port} reachable on {ip}"
        assert can_connect("127.0.0.1", port)
    finally:
        server.stop()
    assert wait_gone(pid, 5.0)
    assert not can_connect("127.0.0.1", port)
    assert not Path(server.log_path).exists()        # our temporary log is removed on a clean stop


SERVE_SCRIPT = """
import sys
from convexsim.io import load_trajectory
from convexsim.viz import serve_trajectories
serve_trajectories([load_trajectory(sys.argv[1])], port=0)
print("returned", flush=True)
"""

EXIT_SCRIPT = """
from convexsim.viz import MeshcatServer
s = MeshcatServer(port=0).start()
print("pid", s.pid, s.port, s.log_path, flush=True)
"""          # exits without stop(): the finalizer must stop the server (and remove its log)

KILL_SCRIPT = """
import time
from convexsim.viz import MeshcatServer
s = MeshcatServer(port=0).start()
print("pid", s.pid, s.port, s.log_path, flush=True)
time.sleep(120)
"""


def read_until(proc: subprocess.Popen, needle: str, timeout: float = 60.0) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.strip())
        if needle in line:
            return lines
    raise AssertionError(f"{needle!r} not printed; got {lines}; rc={proc.poll()}")


def test_serve_blocks_until_sigint_and_leaves_no_server(tmp_path, two_body_traj):
    traj_path = save_trajectory(tmp_path / "t.npz", two_body_traj)
    proc = subprocess.Popen([PY, "-c", SERVE_SCRIPT, str(traj_path)], stdout=subprocess.PIPE, text=True)
    try:
        lines = read_until(proc, "Ctrl-C to stop")
        url = next(x.split(": ", 1)[1] for x in lines if x.startswith("Meshcat viewer:"))
        assert url.startswith("http://127.0.0.1:")
        servers = children_of(proc.pid)
        assert len(servers) == 1
        assert urllib.request.urlopen(url, timeout=10).status == 200
        time.sleep(0.3)
        assert proc.poll() is None                      # still blocking
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
        assert "returned" in proc.stdout.read()
        assert wait_gone(servers[0], 5.0)
        assert not can_connect("127.0.0.1", int(url.split(":")[2].split("/")[0]))
    finally:
        if proc.poll() is None:
            proc.kill()


def test_no_server_after_normal_exit_without_stop():
    out = subprocess.run([PY, "-c", EXIT_SCRIPT], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    _, pid, port, log = out.stdout.split()
    assert wait_gone(int(pid), 5.0)
    assert not can_connect("127.0.0.1", int(port))
    assert not Path(log).exists()                   # the exit finalizer removed the temporary log


def test_watchdog_stops_the_server_when_its_parent_is_killed():
    proc = subprocess.Popen([PY, "-c", KILL_SCRIPT], stdout=subprocess.PIPE, text=True)
    try:
        _, pid, port, log = read_until(proc, "pid")[-1].split()
        assert not process_gone(int(pid)) and Path(log).exists()
        proc.send_signal(signal.SIGKILL)                # no atexit, no finalizer: only the watchdog
        proc.wait(timeout=10)
        assert wait_gone(int(pid), 10.0)
        assert not can_connect("127.0.0.1", int(port))
        assert not Path(log).exists()                   # the server removed its own log
    finally:
        if proc.poll() is None:
            proc.kill()
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, UnboundLocalError, ValueError):
            pass


def replayed_messages(web_url: str, until_type: str, timeout: float = 20.0) -> list[dict]:
    """What a newly connected browser receives (decoded), up to and including the first ``until_type``."""
    import asyncio

    import umsgpack
    from tornado.websocket import websocket_connect

    ws_url = web_url.replace("http://", "ws://").replace("/static/", "/")

    async def read():
        conn = await websocket_connect(ws_url)
        out = []
        try:
            while True:
                msg = await asyncio.wait_for(conn.read_message(), timeout)
                assert msg is not None, "the server closed the websocket"
                out.append(umsgpack.unpackb(msg))
                if out[-1]["type"] == until_type:
                    return out
        finally:
            conn.close()

    # In a thread of its own: Playwright's sync API (other tests, same process) keeps an event loop
    # running in the main thread, and asyncio.run refuses to start inside it.
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, read()).result()


def test_new_browser_gets_the_animation_after_every_property(two_body_traj):
    """Replay order to a browser connecting after the publish: the animation (stored at the root) comes
    after the contact slots' `visible` properties, as for a browser that was already connected."""
    from convexsim.viz import build_playback

    pb = build_playback([two_body_traj])
    with MeshcatServer(port=0) as server:
        server.send(pb.commands)
        msgs = replayed_messages(server.web_url, "set_animation")
    slot_props = {c["path"] for c in pb.commands
                  if c["type"] == "set_property" and "/contacts/c" in c["path"] and c["property"] == "visible"}
    assert slot_props                                    # the synthetic run has contact slots
    received = {m["path"] for m in msgs[:-1] if m["type"] == "set_property"}
    assert slot_props <= received, sorted(slot_props - received)[:3]
    assert sum(m["type"] == "set_object" for m in msgs[:-1]) == sum(c["type"] == "set_object" for c in pb.commands)


def test_a_crashed_server_keeps_its_log_and_says_where(capsys):
    server = MeshcatServer(port=0).start()
    log = Path(server.log_path)
    try:
        os.kill(server.pid, signal.SIGKILL)             # a crash, as far as we can tell
        server.proc.wait(timeout=10)
        server.stop()
        assert log.exists()
        assert f"its log is kept: {log}" in capsys.readouterr().err
    finally:
        server.stop()
        log.unlink(missing_ok=True)


def test_a_stop_right_after_start_is_clean():
    """The server installs its signal handlers before it prints the start-up lines the parent waits for: a stop at
    once (a script that ends right after ``start()``) is a clean exit (0) that removes the log, never a SIGTERM
    death (−15) that keeps it (seen on a loaded CI machine before the order was fixed)."""
    for _ in range(5):
        s = MeshcatServer(port=0).start()
        log = s.log_path
        s.stop()
        assert s.proc.returncode == 0
        assert not Path(log).exists()
