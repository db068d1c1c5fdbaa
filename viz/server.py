"""MeshcatServer: our launcher of the Meshcat server (127.0.0.1 only, log file, clean stop, no orphan).

The server runs ``convexsim.viz._server_main`` in a child process in its own session (so a Ctrl-C in
the terminal reaches only our process, which then stops the server in order). Three independent
guards make sure it never outlives us:

1. ``stop()`` (also from ``with``, ``atexit`` and garbage collection): SIGTERM, wait, SIGKILL after 5 s;
2. the server's watchdog exits within ~0.25 s when its parent process is gone (even after SIGKILL);
3. its stdout is closed after the two start-up lines and stderr goes to a log file, so it can never
   block on a full pipe (the stock server hangs after ~500 page loads).

A log file named in an error message is kept (never removed at exit), so the user can read it.

Commands are sent over a ZMQ DEALER socket, pipelined (many requests in flight, replies drained in
batches): streaming 1000 transforms costs one round trip, not 1000.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Iterable

from .page import pack_command

_START_TIMEOUT_S = 20.0
_REPLY_TIMEOUT_S = 30.0
_MAX_IN_FLIGHT = 256


class ViewerServerError(RuntimeError):
    """The Meshcat server could not be started or stopped answering."""


def _stop_process(proc: subprocess.Popen, timeout: float = 5.0) -> None:
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
        except ProcessLookupError:
            pass


def _shutdown(proc: subprocess.Popen, log_path: Path | None, remove_log: bool, timeout: float = 5.0) -> None:
    """Stop the server; remove our temporary log if it stopped cleanly (exit code 0), else keep it and
    say where (also what the exit finalizer runs, so no log is left behind at interpreter exit)."""
    _stop_process(proc, timeout)
    if not remove_log or log_path is None:
        return
    if proc.returncode == 0:
        try:
            log_path.unlink()
        except OSError:
            pass
    elif log_path.exists():
        print(f"convexsim viewer: the Meshcat server (pid {proc.pid}) exited with code {proc.returncode}; "
              f"its log is kept: {log_path}", file=sys.stderr, flush=True)


class MeshcatServer:
    """A Meshcat server process bound to 127.0.0.1, and a pipelined command client.

    Args:
        port: HTTP port; None scans 7000–7099 for a free one (then any free port), 0 takes an
            ephemeral port, any other value must be free.
        log_path: file receiving the server's stderr; default: a temporary file, removed when the
            server stops cleanly (``stop()``, the exit finalizer, or the server's own watchdog after
            its parent died) and kept, with its path printed to stderr, if the server failed.

    Attributes (after ``start()``): ``web_url`` (the page to open), ``zmq_url``, ``pid``, ``port``,
    ``log_path``.

    Usage::

        with MeshcatServer() as server:
            print(server.web_url)
            server.send([{"type": "delete", "path": "/meshcat"}])
    """

    def __init__(self, *, port: int | None = None, log_path: str | os.PathLike | None = None):
        self._port_request = port
        self._own_log = log_path is None
        self.log_path = Path(log_path) if log_path is not None else None
        self.proc: subprocess.Popen | None = None
        self.web_url = ""
        self.zmq_url = ""
        self._socket = None
        self._lock = threading.RLock()
        self._in_flight = 0
        self._finalizer = None

    # ------------------------------------------------------------------------------ lifecycle
    @property
    def pid(self) -> int | None:
        """PID of the server process (None before start)."""
        return self.proc.pid if self.proc is not None else None

    @property
    def port(self) -> int:
        """HTTP port of the page."""
        return int(self.web_url.split(":")[2].split("/")[0])

    @property
    def running(self) -> bool:
        """True while the server process is alive."""
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> "MeshcatServer":
        """Launch the server and connect; raise ViewerServerError with the log tail if it fails."""
        if self.proc is not None:
            return self
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="convexsim-meshcat-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        args = [sys.executable, "-u", "-m", "convexsim.viz._server_main", "--parent-pid", str(os.getpid())]
        if self._own_log:              # the server removes it itself if its parent dies (watchdog)
            args += ["--orphan-log", str(self.log_path)]
        if self._port_request is not None:
            args += ["--port", str(int(self._port_request))]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=log, start_new_session=True)
        # Also runs at exit and on garbage collection: stop the server, remove our log if clean.
        self._finalizer = weakref.finalize(self, _shutdown, self.proc, self.log_path, self._own_log)
        try:
            lines = self._read_start_lines()
        except BaseException:
            self.keep_log()            # the error message points to it
            self.stop()
            raise
        self.zmq_url, self.web_url = lines["zmq_url"], lines["web_url"]
        self._connect()
        return self

    def _read_start_lines(self) -> dict[str, str]:
        """Read ``zmq_url=…`` and ``web_url=…`` from the server's stdout (unbuffered, with a timeout)."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + _START_TIMEOUT_S
        buf = b""
        found: dict[str, str] = {}
        while len(found) < 2:
            remaining = deadline - time.monotonic()
            ready = select.select([fd], [], [], max(remaining, 0.0))[0] if remaining > 0 else []
            chunk = os.read(fd, 4096) if ready else b""
            if not chunk:
                raise ViewerServerError(
                    f"the Meshcat server did not start (exit code {self.proc.poll()}); log {self.log_path}:\n"
                    + self._log_tail())
            buf += chunk
            complete = buf[:buf.rfind(b"\n") + 1]        # never parse a half-written line
            for line in complete.decode("utf-8", "replace").splitlines():
                key, _, value = line.strip().partition("=")
                if key in ("zmq_url", "web_url") and value:
                    found[key] = value
        self.proc.stdout.close()
        return found

    def keep_log(self) -> None:
        """Never remove the log file (an error message names it); also at exit and in the watchdog."""
        if self._own_log:
            self._own_log = False
            if self._finalizer is not None and self.proc is not None:
                self._finalizer.detach()
                self._finalizer = weakref.finalize(self, _shutdown, self.proc, self.log_path, False)

    def _error(self, text: str) -> ViewerServerError:
        """A ViewerServerError naming the log, which is then kept."""
        self.keep_log()
        return ViewerServerError(f"{text}; log: {self.log_path}")

    def _log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(Path(self.log_path).read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def _connect(self) -> None:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import zmq
        self._zmq = zmq
        self._context = zmq.Context.instance()
        self._socket = self._context.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.connect(self.zmq_url)
        self._in_flight = 0

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout`` s) and close the client. Idempotent."""
        if self._socket is not None:
            try:
                self._socket.close(linger=0)
            finally:
                self._socket = None
        if self.proc is not None:
            if self._finalizer is not None:
                self._finalizer.detach()
            _shutdown(self.proc, self.log_path, self._own_log, timeout)

    close = stop

    def __enter__(self) -> "MeshcatServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------------------- commands
    def send(self, commands: Iterable[dict]) -> int:
        """Send lowered meshcat commands (dicts with "type" and "path"); wait for all replies.

        Returns the number of commands sent. Raises ViewerServerError if the server stops answering.
        """
        n = 0
        with self._lock:               # one socket: several viewers' sender threads take turns
            for cmd in commands:
                self._send_one(cmd)
                n += 1
                if self._in_flight >= _MAX_IN_FLIGHT:
                    self._drain()
            self._drain()
        return n

    def _send_one(self, cmd: dict) -> None:
        if self._socket is None:
            raise ViewerServerError("the viewer server is not running")
        self._socket.send_multipart([b"", cmd["type"].encode("utf-8"), cmd.get("path", "").encode("utf-8"),
                                     pack_command(cmd)])
        self._in_flight += 1

    def _recv(self, deadline: float) -> list[bytes]:
        """One reply; ViewerServerError (naming the kept log) if the server died or stays silent."""
        while not self._socket.poll(200, self._zmq.POLLIN):
            if self.proc is not None and self.proc.poll() is not None:
                raise self._error(f"the Meshcat server (pid {self.pid}) exited with code "
                                  f"{self.proc.returncode}")
            if time.monotonic() > deadline:
                raise self._error(f"the Meshcat server (pid {self.pid}) did not answer within "
                                  f"{_REPLY_TIMEOUT_S:.0f} s")
        self._in_flight -= 1
        return self._socket.recv_multipart()

    def _drain(self) -> None:
        while self._in_flight > 0:
            frames = self._recv(time.monotonic() + _REPLY_TIMEOUT_S)
            if frames[-1] != b"ok":
                raise self._error(f"the Meshcat server refused a command: {frames[-1][:200]!r}")

    def control(self) -> dict:
        """The live page's controls: {"paused": bool, "steps": int (single steps requested so far),
        "speed": float | None (× real time; None: as fast as the run goes), "seq": int}."""
        import json

        with self._lock:
            self._drain()
            if self._socket is None:
                raise ViewerServerError("the viewer server is not running")
            self._socket.send_multipart([b"", b"convexsim_control", b"", b""])
            self._in_flight += 1
            return json.loads(self._recv(time.monotonic() + _REPLY_TIMEOUT_S)[-1])
