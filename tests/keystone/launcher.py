# Serves Keystone's WSGI application (tests/keystone/mod.rs, and the fake DevStack of
# tests/devstack/docs.sh).
# Usage: python launcher.py CONFIG_DIR PORT_FILE [HOST:PORT [PREFIX]]
#   CONFIG_DIR  the folder of keystone.conf
#   PORT_FILE   written with the port once listening
#   HOST:PORT   where to listen (default 127.0.0.1:0, a free loopback port)
#   PREFIX      the path Keystone is served under, as DevStack serves it under /identity
#               (SCRIPT_NAME, as a WSGI server mounted there sets it); other paths are 404
# When its standard input is a pipe (the test process's), it exits once that closes, so a test
# that dies leaves no Keystone behind; otherwise (a service's /dev/null) it runs until stopped.
import os
import stat
import sys
import threading
from wsgiref.simple_server import make_server, WSGIRequestHandler

conf_dir, port_file = sys.argv[1], sys.argv[2]
host, _, port = (sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1:0").rpartition(":")
prefix = sys.argv[4].rstrip("/") if len(sys.argv) > 4 else ""
# oslo.config reads sys.argv: leave it only the program name.
sys.argv = sys.argv[:1]
os.environ["OS_KEYSTONE_CONFIG_DIR"] = conf_dir

from keystone.server import wsgi  # noqa: E402

keystone = wsgi.initialize_public_application()


def app(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if not prefix:
        return keystone(environ, start_response)
    if path == prefix or path.startswith(prefix + "/"):
        environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + prefix
        environ["PATH_INFO"] = path[len(prefix):]
        return keystone(environ, start_response)
    start_response("404 Not Found", [("Content-Type", "text/plain")])
    return [b"Not Found: Keystone is served under " + prefix.encode() + b"\n"]


class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


def exit_with_parent():
    sys.stdin.read()
    os._exit(0)


if stat.S_ISFIFO(os.fstat(0).st_mode):
    threading.Thread(target=exit_with_parent, daemon=True).start()
server = make_server(host, int(port), app, handler_class=Quiet)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_port))
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
