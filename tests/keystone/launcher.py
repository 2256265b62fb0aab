# Serves Keystone's WSGI application on a free loopback port (tests/keystone/mod.rs).
# Usage: python launcher.py CONFIG_DIR PORT_FILE; writes the port to PORT_FILE once listening
# and exits when its standard input closes (the test process ended).
import os
import sys
import threading
from wsgiref.simple_server import make_server, WSGIRequestHandler

conf_dir, port_file = sys.argv[1], sys.argv[2]
# oslo.config reads sys.argv: leave it only the program name.
sys.argv = sys.argv[:1]
os.environ["OS_KEYSTONE_CONFIG_DIR"] = conf_dir

from keystone.server import wsgi  # noqa: E402

app = wsgi.initialize_public_application()


class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


def exit_with_parent():
    sys.stdin.read()
    os._exit(0)


threading.Thread(target=exit_with_parent, daemon=True).start()
server = make_server("127.0.0.1", 0, app, handler_class=Quiet)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_port))
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
