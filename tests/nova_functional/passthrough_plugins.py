"""A pass-through chain of operator plugins (docs/plugins.md) for `PARASOL_NF_PLUGINS=passthrough`:
one loopback webhook, started once per worker, that approves every `select` call, keeps every
`filter` candidate, gives no `weigh` weight and acknowledges every `claimed` notification, and
the `[[plugins.chain]]` tables registering it for the four events (issue 47: Nova's functional
tests must pass with such a chain). Counts what it was sent, so a run can show the chain was
called."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWERS = {
    "/select": {"decision": "approve"},
    "/filter": {},
    "/weigh": {"weights": {}},
    "/claimed": None,
}

_server = None
calls = {path: 0 for path in ANSWERS}
_lock = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    # Headers and body go out in two writes: without TCP_NODELAY the body waits for the
    # client's delayed ACK, ~40 ms a call (docs/plugins.md §4).
    disable_nagle_algorithm = True

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        json.loads(self.rfile.read(length) or b"null")
        answer = ANSWERS.get(self.path, "missing")
        if answer == "missing":
            self.send_response(404)
            self.end_headers()
            return
        with _lock:
            calls[self.path] += 1
        body = b"" if answer is None else json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def base_url():
    """The webhook's URL, started on first use (a daemon thread of this worker)."""
    global _server
    if _server is None:
        _server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        _server.daemon_threads = True
        threading.Thread(target=_server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{_server.server_address[1]}"


def chain_toml():
    """The `[[plugins.chain]]` tables of the pass-through chain."""
    base = base_url()
    lines = []
    for event in ("select", "filter", "weigh", "claimed"):
        lines += ["[[plugins.chain]]", f'name = "passthrough-{event}"', f'event = "{event}"',
                  f'url = "{base}/{event}"', ""]
    return "\n".join(lines)
