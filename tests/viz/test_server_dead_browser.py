"""Dead or stalled browsers: dropped quietly (one log line, no traceback per message) and promptly, while
every command keeps being answered (the run is never stalled); the live page's controls reach Python."""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
import time

import pytest

from convexsim.viz import MeshcatServer, draw
from convexsim.viz._math import pose_matrix
from convexsim.viz._server_main import PING_INTERVAL_S, PING_TIMEOUT_S, Control, forward

N_BODIES = 100


def ws_connect(port: int, *, rcvbuf: int | None = None) -> socket.socket:
    """A raw websocket client (handshake only; it reads nothing afterwards)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    head = s.recv(4096)
    assert head.split(b"\r\n")[0].endswith(b"101 Switching Protocols"), head
    return s


def ws_send_text(s: socket.socket, text: str) -> None:
    """One masked text frame (clients must mask)."""
    data = text.encode()
    mask = os.urandom(4)
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
    assert len(data) < 126
    s.sendall(bytes([0x81, 0x80 | len(data)]) + mask + body)


def frame_commands(k: int) -> list[dict]:
    """One streamed frame of a 100-body scene: a set_transform per body."""
    return [draw.cmd_transform(f"/meshcat/live/bodies/b{i}", pose_matrix([0.01 * k, 0.2 * i, 0.0]))
            for i in range(N_BODIES)]


def wait_for_log(server: MeshcatServer, text: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = server.log_path.read_text()
        if text in log:
            return log
        server.send(frame_commands(0))          # keeps the run going meanwhile
        time.sleep(0.05)
    return server.log_path.read_text()


def assert_quiet(log: str) -> None:
    assert "Traceback" not in log and "WebSocketClosedError" not in log, log[:2000]
    # start, open, drop or close, a few lines: far from the 42 MB the stock server wrote in 20 s.
    assert len(log.splitlines()) < 12, log


def test_a_reset_browser_is_dropped_quietly_and_the_run_keeps_going(tmp_path):
    with MeshcatServer(port=0, log_path=tmp_path / "server.log") as server:
        s = ws_connect(server.port)
        time.sleep(0.2)
        # Close with RST (SO_LINGER 0): no websocket close frame, as a crashed tab's socket.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        sent = sum(server.send(frame_commands(k)) for k in range(50))
        assert sent == 50 * N_BODIES                    # every command answered "ok"
        log = wait_for_log(server, "browser connection", 5)
        assert "opened browser connection" in log
        assert "closed browser connection" in log or "dropped browser connection" in log
        assert_quiet(server.log_path.read_text())


def test_a_browser_that_stops_reading_is_dropped_within_the_ping_timeout(tmp_path):
    with MeshcatServer(port=0, log_path=tmp_path / "server.log") as server:
        s = ws_connect(server.port, rcvbuf=4096)        # never reads: answers no ping
        try:
            frames = 0
            deadline = time.monotonic() + 3 * (PING_INTERVAL_S + PING_TIMEOUT_S)
            while time.monotonic() < deadline and not any(
                    w in server.log_path.read_text() for w in ("closed browser", "dropped browser")):
                server.send(frame_commands(frames))
                frames += 1
            log = server.log_path.read_text()
            print(f"stalled browser: {frames} frames of {N_BODIES} transforms streamed until it was dropped")
            assert "closed browser connection" in log or "dropped browser connection" in log, log
            assert frames > 0
            assert_quiet(log)
        finally:
            s.close()


def test_forward_drops_closed_failing_and_stalled_browsers_without_raising(capsys):
    from tornado.websocket import WebSocketClosedError

    class Conn:
        def __init__(self, closing=False):
            self.closing = closing
            self.stream = None

        def is_closing(self):
            return self.closing

    class FakeWS:
        def __init__(self, name, *, closing=False, raises=False, fails_later=False, pending=0):
            self.name, self.raises, self.fails_later = name, raises, fails_later
            self.ws_connection = Conn(closing)
            self._convexsim_pending = pending
            self.written = 0
            self.closed = False

        def write_message(self, data, binary=False):
            if self.raises:
                raise WebSocketClosedError()
            self.written += 1
            fut = _Fut()
            if self.fails_later:
                fut.set_exception(WebSocketClosedError())
            else:
                fut.set_result(None)
            return fut

        def close(self):
            self.closed = True

    class _Fut:
        def __init__(self):
            self._exc, self._cbs, self._done = None, [], False

        def set_result(self, _):
            self._done = True

        def set_exception(self, e):
            self._exc, self._done = e, True

        def add_done_callback(self, cb):
            cb(self)

        def cancelled(self):
            return False

        def exception(self):
            return self._exc

    good = FakeWS("good")
    pool = {good, FakeWS("closing", closing=True), FakeWS("raises", raises=True),
            FakeWS("fails", fails_later=True), FakeWS("stalled", pending=10**9)}
    for _ in range(100):
        forward(pool, b"x" * 10)
    assert pool == {good} and good.written == 100 and good._convexsim_pending == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 4 and all(line.startswith("dropped browser connection") for line in err), err
    assert any("not reading" in line for line in err)


def test_control_messages_from_the_page_reach_python_and_a_lone_pause_is_released(tmp_path):
    c = Control()
    c.update({"paused": True})
    c.update({"step": 1})
    c.update({"speed": 0.25})
    assert json.loads(c.as_json()) == {"paused": True, "steps": 1, "speed": 0.25, "seq": 3}
    c.update({"speed": None})
    assert c.speed is None
    with MeshcatServer(port=0, log_path=tmp_path / "server.log") as server:
        assert server.control()["paused"] is False
        s = ws_connect(server.port)
        ws_send_text(s, json.dumps({"convexsim_control": {"paused": True, "step": 2}}))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not server.control()["paused"]:
            time.sleep(0.02)
        ctrl = server.control()
        assert ctrl["paused"] is True and ctrl["steps"] == 2
        s.close()                                        # the last page leaves: the run must not stay paused
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and server.control()["paused"]:
            time.sleep(0.02)
        assert server.control()["paused"] is False
        assert_quiet(server.log_path.read_text())


def test_the_log_named_in_an_error_is_kept_after_the_server_stops(capsys):
    server = MeshcatServer(port=0).start()
    log = server.log_path
    os.kill(server.pid, 9)
    server.proc.wait(5)
    with pytest.raises(Exception) as exc:
        server.send(frame_commands(0))
    assert str(log) in str(exc.value)
    server.stop()
    assert log.exists()
    log.unlink()
