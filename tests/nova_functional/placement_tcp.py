"""Placement on a loopback TCP port (runs in the venv).

Nova's tests reach Placement through wsgi-intercept: no socket, so no other process can. After
`PlacementFixture` installs its intercept, the same WSGI app object (same configuration, same
database) is also served on 127.0.0.1:<free port> until the fixture is cleaned up; Parasol and
the end-of-test check read and write it there over real HTTP.
"""

import threading
from urllib.parse import urlsplit
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from socketserver import ThreadingMixIn

import wsgi_intercept
from placement.tests.functional.fixtures import placement as placement_fixtures

from nova import utils


class Served:
    """The Placement URL of the running test (None before its PlacementFixture), and who is
    told when a test starts its Placement (a scheduler already running must pick it up)."""

    url = None
    listeners = []


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


def _at_root(app):
    """The app as mounted at `/` (the intercept mounts it at `/placement`)."""
    def mounted(environ, start_response):
        environ["SCRIPT_NAME"] = ""
        return app(environ, start_response)
    return mounted


def _serve_eventlet(app):
    import eventlet
    import eventlet.wsgi

    class _Null:
        def write(self, *args):
            pass

    sock = eventlet.listen(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    thread = eventlet.spawn(eventlet.wsgi.server, sock, app, log=_Null(),
                            log_output=False, debug=False)

    def stop():
        thread.kill()
        sock.close()
    return port, stop


def _serve_threads(app):
    server = make_server("127.0.0.1", 0, app, server_class=_ThreadingServer,
                         handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def stop():
        server.shutdown()
        server.server_close()
        thread.join(5)
    return server.server_port, stop


def _also_on_tcp(orig):
    def setUp(self):
        orig(self)
        if not self.use_intercept:
            return
        host = urlsplit(self.endpoint).hostname
        app_fn, _script = wsgi_intercept._wsgi_intercept[(host, 80)]
        app = _at_root(app_fn())
        serve = _serve_threads if utils.concurrency_mode_threading() else _serve_eventlet
        port, stop = serve(app)
        Served.url = f"http://127.0.0.1:{port}"
        self.tcp_url = Served.url

        def forget():
            stop()
            if Served.url == self.tcp_url:
                Served.url = None
        self.addCleanup(forget)
        for listener in list(Served.listeners):
            listener()
    return setUp


def install():
    cls = placement_fixtures.PlacementFixture
    cls.setUp = _also_on_tcp(cls.setUp)
