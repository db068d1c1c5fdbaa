"""Our Meshcat server process: meshcat 0.3.2's ZMQ/websocket bridge, bound to 127.0.0.1 only.

Run as ``python -u -m convexsim.viz._server_main --parent-pid PID [--port N]``. It prints
``zmq_url=…`` and ``web_url=…`` on stdout, then serves until SIGTERM/SIGINT/SIGHUP or until its
parent process dies (watchdog, polled every 0.25 s; it then removes ``--orphan-log``). Differences from the stock server
(viewer-ux.md §1.2):

* HTTP and ZMQ listen on 127.0.0.1 only (the stock ``app.listen(port)`` binds every interface);
* ``--port 0`` takes an ephemeral port, no port given scans 7000–7099 like meshcat;
* the page at ``/static/`` is ours (overlay with legend and simulated time);
* ``set_property`` keeps only the last value per (path, property) in the replay tree, so streaming a
  status readout does not grow the tree a browser receives on connect;
* a new browser gets the animations after every object, property and transform (``send_scene``);
  the stock order sends the root's animation first, which hides resting contacts (see there);
* stderr is meant to go to a log file (the parent sets that up), so no pipe can fill.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys


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

        def make_app(self):
            return tornado.web.Application([
                (r"/static/(?:index\.html)?", PageHandler),
                (r"/static/(.*)", zs.StaticFileHandlerNoCache,
                 {"path": zs.VIEWER_ROOT, "default_filename": zs.VIEWER_HTML}),
                (r"/favicon\.ico", NoContent),
                (r"/", zs.WebSocketHandler, {"bridge": self}),
            ])

        def send_scene(self, websocket):
            """Replay the tree to a new browser: objects, properties and transforms first, animations last.

            The stock order walks from the root, and ``set_animation`` is stored at the root path "",
            so a new browser got the animation before the contact slots' ``visible False``. three.js's
            mixer may then activate the clip while the slots are still visible, remember ``true`` as
            the last value it wrote and, as it writes a property only when its value changes, never
            show a resting contact again (until the loop wraps through a hidden key). Sending the
            animation last gives the browser the same order as a page connected before the publish.
            """
            animations = []
            for node in walk(self.tree):
                if node.object is not None:
                    websocket.write_message(node.object, binary=True)
                for p in node.properties:
                    websocket.write_message(p, binary=True)
                if node.transform is not None:
                    websocket.write_message(node.transform, binary=True)
                if node.animation is not None:
                    animations.append(node.animation)
            for a in animations:
                websocket.write_message(a, binary=True)

        def handle_zmq(self, frames):
            if len(frames) == 3 and frames[0] == b"set_property":
                path = [p for p in frames[1].decode("utf-8").split("/") if p]
                key = umsgpack.unpackb(frames[2]).get("property")
                node = find_node(self.tree, path)
                node.properties = [p for p in node.properties if umsgpack.unpackb(p).get("property") != key]
            super().handle_zmq(frames)

    bridge = LoopbackBridge(args.port)
    try:
        sys.stdout.write(f"zmq_url={bridge.zmq_url}\nweb_url={bridge.web_url}\n")
        sys.stdout.flush()
    except BrokenPipeError:
        pass                            # the parent reads these two lines, then closes the pipe
    sys.stdout = open(os.devnull, "w")
    print(f"convexsim meshcat server pid {os.getpid()} serving {bridge.web_url}", file=sys.stderr, flush=True)

    def stop(*_):
        bridge.ioloop.add_callback_from_signal(bridge.ioloop.stop)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
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
