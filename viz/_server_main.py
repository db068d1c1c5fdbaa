"""Our Meshcat server process: meshcat 0.3.2's ZMQ/websocket bridge, bound to 127.0.0.1 only.

Run as ``python -u -m convexsim.viz._server_main --parent-pid PID [--port N]``. It prints
``zmq_url=…`` and ``web_url=…`` on stdout, then serves until SIGTERM/SIGINT/SIGHUP or until its
parent process dies (watchdog, polled every 0.25 s; it then removes ``--orphan-log``). Differences from
the stock server (docs/viewer.md, "Server"):

* HTTP and ZMQ listen on 127.0.0.1 only (the stock ``app.listen(port)`` binds every interface);
* ``--port 0`` takes an ephemeral port, no port given scans 7000–7099 like meshcat;
* the page at ``/static/`` is ours (overlay with legend and simulated time);
* ``set_property`` keeps only the last value per (path, property) in the replay tree, so streaming a
  status readout does not grow the tree a browser receives on connect;
* a new browser gets the animations after every object, property and transform (``send_scene``);
  the stock order sends the root's animation first, which hides resting contacts (see there);
* stderr is meant to go to a log file (the parent sets that up), so no pipe can fill;
* dead browsers are dropped quietly and promptly (``forward``): a connection that is closed, closing,
  fails a write, stops reading (more than ``MAX_PENDING_BYTES`` unsent) or misses pongs (pinged every
  ``PING_INTERVAL_S``) leaves the pool with one log line, never a traceback per message; a ZMQ command
  is always answered, whatever happens to the browsers;
* the live page's controls (pause, single step, speed) reach Python: the page sends
  ``{"convexsim_control": {...}}`` on its websocket, the server keeps the state (``Control``) and answers
  the ZMQ request ``convexsim_control`` with it as JSON; the pause is lifted when the last page leaves.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys

PING_INTERVAL_S = 3.0
"""Pings to every browser this often [s]; a browser that has not answered within PING_TIMEOUT_S is dropped
(tornado needs the timeout <= the interval)."""

PING_TIMEOUT_S = 3.0

MAX_PENDING_BYTES = 64 * 2**20
"""A browser with more than this many bytes written but not yet taken by its socket is not reading:
it is dropped."""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Control:
    """The live page's playback controls: paused, single steps requested (a counter), speed (None: as fast as
    the simulation runs; r: r × real time). ``update`` applies a page's message, ``as_json`` answers
    Python."""

    def __init__(self):
        self.paused = False
        self.steps = 0
        self.speed: float | None = None
        self.seq = 0

    def update(self, msg: dict) -> None:
        if "paused" in msg:
            self.paused = bool(msg["paused"])
        if msg.get("step"):
            self.steps += int(msg["step"])
        if "speed" in msg:
            v = msg["speed"]
            self.speed = float(v) if isinstance(v, (int, float)) and v > 0 else None
        self.seq += 1

    def release(self) -> None:
        """No page left to un-pause the run: let it go on."""
        if self.paused:
            self.paused = False
            self.seq += 1

    def as_json(self) -> bytes:
        return json.dumps({"paused": self.paused, "steps": self.steps, "speed": self.speed,
                           "seq": self.seq}).encode("utf-8")


def drop(pool: set, ws, reason: str) -> None:
    """Remove a dead or stalled browser from the pool (one log line) and close its connection."""
    if ws not in pool:
        return
    pool.discard(ws)
    log(f"dropped browser connection {id(ws):#x}: {reason}")
    try:
        ws.close()
        conn = ws.ws_connection
        if conn is not None and getattr(conn, "stream", None) is not None:
            conn.stream.close()     # do not wait 5 s for a close handshake a dead peer never sends
    except Exception:  # noqa: BLE001 - already gone
        pass


def forward(pool: set, data: bytes) -> int:
    """Write ``data`` to every browser in ``pool``; drop (quietly) those that are closed, closing, failing or
    not reading. Never raises. Returns the number of browsers written to."""
    from tornado.websocket import WebSocketClosedError

    n = 0
    for ws in list(pool):
        conn = ws.ws_connection
        if conn is None or conn.is_closing():
            drop(pool, ws, "connection closed")
            continue
        pending = getattr(ws, "_convexsim_pending", 0)
        if pending > MAX_PENDING_BYTES:
            drop(pool, ws, f"not reading ({pending / 2**20:.0f} MB unsent)")
            continue
        try:
            fut = ws.write_message(data, binary=True)
        except WebSocketClosedError:
            drop(pool, ws, "connection closed")
            continue
        except Exception as exc:  # noqa: BLE001 - any write failure: the browser is gone
            drop(pool, ws, f"write failed ({type(exc).__name__})")
            continue
        ws._convexsim_pending = pending + len(data)
        fut.add_done_callback(lambda f, ws=ws, size=len(data): _written(pool, ws, f, size))
        n += 1
    return n


def _written(pool: set, ws, fut, size: int) -> None:
    ws._convexsim_pending = getattr(ws, "_convexsim_pending", size) - size
    if fut.cancelled():
        return
    if fut.exception() is not None:            # retrieved here: no "exception never retrieved" traceback
        drop(pool, ws, f"write failed ({type(fut.exception()).__name__})")


def _parent_alive(pid: int) -> bool:
    if os.getppid() != pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _bind_http(app, port: int | None):
    import tornado.httpserver
    import tornado.netutil

    candidates = [port] if port is not None else list(range(7000, 7100)) + [0]
    last_error: OSError | None = None
    for p in candidates:
        try:
            sockets = tornado.netutil.bind_sockets(p, address="127.0.0.1")
        except OSError as exc:
            last_error = exc
            continue
        server = tornado.httpserver.HTTPServer(app)
        server.add_sockets(sockets)
        return server, sockets[0].getsockname()[1]
    raise OSError(f"could not bind the viewer's HTTP port on 127.0.0.1: {last_error}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parent-pid", type=int, default=None)
    parser.add_argument("--port", type=int, default=None, help="HTTP port (0: ephemeral; default: 7000+)")
    parser.add_argument("--orphan-log", default=None,
                        help="log file to remove when the watchdog stops the server (nobody else can then)")
    args = parser.parse_args(argv)

    import warnings

    warnings.filterwarnings("ignore", category=DeprecationWarning)
    import tornado.ioloop
    import tornado.web
    import umsgpack
    import zmq
    from meshcat.servers import zmqserver as zs
    from meshcat.servers.tree import SceneTree, find_node, walk
    from zmq.eventloop.zmqstream import ZMQStream

    from convexsim.viz.page import live_page_html

    page = live_page_html().encode("utf-8")

    class PageHandler(tornado.web.RequestHandler):
        def get(self, *_):
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.set_header("Cache-Control", "no-store")
            self.write(page)

    class NoContent(tornado.web.RequestHandler):
        def get(self, *_):
            self.set_status(204)

    class BrowserHandler(zs.WebSocketHandler):
        """The stock handler, quiet about dead peers, reading our page's control messages."""

        def open(self):
            self.bridge.websocket_pool.add(self)
            log(f"opened browser connection {id(self):#x}")
            self.bridge.send_scene(self)

        def on_message(self, message):
            try:
                msg = json.loads(message)
            except (TypeError, ValueError):
                log("ignored a browser message that is not JSON")
                return
            if isinstance(msg, dict) and isinstance(msg.get("convexsim_control"), dict):
                self.bridge.control.update(msg["convexsim_control"])
            elif isinstance(msg, dict) and "data" in msg:
                self.bridge.send_image(msg["data"])

        def on_close(self):
            if self in self.bridge.websocket_pool:
                self.bridge.websocket_pool.discard(self)
                log(f"closed browser connection {id(self):#x}")
            if not self.bridge.websocket_pool:
                self.bridge.control.release()

    class LoopbackBridge(zs.ZMQWebSocketBridge):
        """The 0.3.2 bridge with loopback sockets, our page and a bounded property cache."""

        def __init__(self, port: int | None):  # noqa: D107 (the stock __init__ binds 0.0.0.0)
            self.host = "127.0.0.1"
            self.websocket_pool = set()
            self.app = self.make_app()
            self.ioloop = tornado.ioloop.IOLoop.current()
            sock = self.context.socket(zmq.REP)
            zmq_port = sock.bind_to_random_port("tcp://127.0.0.1")
            self.zmq_socket, self.zmq_stream = sock, ZMQStream(sock)
            self.zmq_stream.on_recv(self.handle_zmq)
            self.zmq_url = f"tcp://127.0.0.1:{zmq_port}"
            self.http_server, self.fileserver_port = _bind_http(self.app, port)
            self.web_url = f"http://127.0.0.1:{self.fileserver_port}/static/"
            self.tree = SceneTree()
            self.control = Control()

        def make_app(self):
            return tornado.web.Application([
                (r"/static/(?:index\.html)?", PageHandler),
                (r"/static/(.*)", zs.StaticFileHandlerNoCache,
                 {"path": zs.VIEWER_ROOT, "default_filename": zs.VIEWER_HTML}),
                (r"/favicon\.ico", NoContent),
                (r"/", BrowserHandler, {"bridge": self}),
            ], websocket_ping_interval=PING_INTERVAL_S, websocket_ping_timeout=PING_TIMEOUT_S)

        def forward_to_websockets(self, frames):
            forward(self.websocket_pool, frames[-1])

        def send_scene(self, websocket):
            """Replay the tree to a new browser: objects, properties and transforms first, animations last.

            The stock order walks from the root, and ``set_animation`` is stored at the root path "",
            so a new browser got the animation before the contact slots' ``visible False``. three.js's
            mixer may then activate the clip while the slots are still visible, remember ``true`` as
            the last value it wrote and, as it writes a property only when its value changes, never
            show a resting contact again (until the loop wraps through a hidden key). Sending the
            animation last gives the browser the same order as a page connected before the publish.
            """
            animations, pool = [], {websocket}
            for node in walk(self.tree):
                if node.object is not None:
                    forward(pool, node.object)
                for p in node.properties:
                    forward(pool, p)
                if node.transform is not None:
                    forward(pool, node.transform)
                if node.animation is not None:
                    animations.append(node.animation)
            for a in animations:
                forward(pool, a)
            if not pool:                       # it died while receiving the scene
                self.websocket_pool.discard(websocket)

        def handle_zmq(self, frames):
            if frames and frames[0] == b"convexsim_control":
                self.zmq_socket.send(self.control.as_json())
                return
            if len(frames) == 3 and frames[0] == b"set_property":
                path = [p for p in frames[1].decode("utf-8").split("/") if p]
                key = umsgpack.unpackb(frames[2]).get("property")
                node = find_node(self.tree, path)
                node.properties = [p for p in node.properties if umsgpack.unpackb(p).get("property") != key]
            try:
                super().handle_zmq(frames)
            except Exception as exc:  # noqa: BLE001 - answer anyway: a silent REP socket stalls the sender
                log(f"error handling {frames[0][:40]!r}: {type(exc).__name__}: {exc}")
                self.zmq_socket.send(f"error: {type(exc).__name__}: {exc}".encode("utf-8"))

    bridge = LoopbackBridge(args.port)

    def stop(*_):
        bridge.ioloop.add_callback_from_signal(bridge.ioloop.stop)

    # Before the start-up lines: the parent may stop the server as soon as it has read them (a script that exits
    # right after start()), and a SIGTERM before these handlers would kill it uncleanly (exit −15, log kept).
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    try:
        sys.stdout.write(f"zmq_url={bridge.zmq_url}\nweb_url={bridge.web_url}\n")
        sys.stdout.flush()
    except BrokenPipeError:
        pass                            # the parent reads these two lines, then closes the pipe
    sys.stdout = open(os.devnull, "w")
    log(f"convexsim meshcat server pid {os.getpid()} serving {bridge.web_url}")

    orphaned = []
    if args.parent_pid is not None:
        def watchdog():
            if not _parent_alive(args.parent_pid):
                print("parent process gone: stopping", file=sys.stderr, flush=True)
                orphaned.append(True)
                bridge.ioloop.stop()
        tornado.ioloop.PeriodicCallback(watchdog, 250).start()
    bridge.run()
    bridge.http_server.stop()
    bridge.zmq_socket.close(linger=0)
    print("stopped", file=sys.stderr, flush=True)
    if orphaned and args.orphan_log:
        try:
            os.unlink(args.orphan_log)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
