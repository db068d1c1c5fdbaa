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
print("pid", s.pid, s.port, flush=True)
"""          # exits without stop(): the finalizer must stop the server

KILL_SCRIPT = """
import time
from convexsim.viz import MeshcatServer
s = MeshcatServer(port=0).start()
print("pid", s.pid, s.port, flush=True)
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
    _, pid, port = out.stdout.split()
    assert wait_gone(int(pid), 5.0)
    assert not can_connect("127.0.0.1", int(port))


def test_watchdog_stops_the_server_when_its_parent_is_killed():
    proc = subprocess.Popen([PY, "-c", KILL_SCRIPT], stdout=subprocess.PIPE, text=True)
    try:
        _, pid, port = read_until(proc, "pid")[-1].split()
        assert not process_gone(int(pid))
        proc.send_signal(signal.SIGKILL)                # no atexit, no finalizer: only the watchdog
        proc.wait(timeout=10)
        assert wait_gone(int(pid), 10.0)
        assert not can_connect("127.0.0.1", int(port))
    finally:
        if proc.poll() is None:
            proc.kill()
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, UnboundLocalError, ValueError):
            pass
