#!/usr/bin/env python3
"""A Parasol `select` plugin (docs/plugins.md): keeps tenant `tenant-x` off hosts with the
CUSTOM_MAINTENANCE trait and denies tenant `frozen`; approves everything else.
Standard library only: python3 docs/examples/maintenance_plugin.py [PORT]"""
import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


class Plugin(BaseHTTPRequestHandler):
    # Headers and body go out in two writes: without TCP_NODELAY the body waits for the
    # client's delayed ACK, ~40 ms a call (docs/plugins.md §4).
    disable_nagle_algorithm = True

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        request = body["request"]
        if request.get("project_id") == "frozen":
            answer = {"decision": "deny", "reason": "tenant frozen until the audit ends"}
        elif request.get("project_id") == "tenant-x":
            forbidden = request["forbidden_traits"] + ["CUSTOM_MAINTENANCE"]
            answer = {"decision": "modify", "request": {"forbidden_traits": forbidden}}
        else:
            answer = {"decision": "approve"}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


port = int(sys.argv[1]) if len(sys.argv) > 1 else 9000
HTTPServer(("127.0.0.1", port), Plugin).serve_forever()
