"""The judging page's local web server: the standard library's http.server on 127.0.0.1 only.

No key: it listens on loopback alone, and refuses what another site open in the same browser
could send it. A request must name this server as its Host (a page of another site resolved to
127.0.0.1 by DNS rebinding names its own), and a write must come from this page: its Origin, when
the browser sends one, is this server's, and it carries the page's own header (`X-Judging-Page`),
which no other site's script can add without a preflight this server never grants. The page, its
script and its style are served from the package (no file fetched from anywhere else; a Content
Security Policy says so to the browser).

Routes: `/` the page, `/page.js`, `/page.css`; `GET /api/state` the pairs and their judgments now;
`GET /api/judgments` the judgments alone (what a tab polls); `GET /api/pair/<n>` one pair's
details; `POST /api/judge` and `POST /api/undo` (JSON bodies).
"""

from __future__ import annotations

import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any, TextIO

from retrieval.data.records import DatasetError
from retrieval.files.atomic import clean_stale
from retrieval.judging.session import JudgingError, JudgingSession

__all__ = ["DEFAULT_PORT", "HOST", "JudgingServer", "serve_page", "start_server"]

HOST = "127.0.0.1"  # never another interface: the page has no key
DEFAULT_PORT = 8770
PAGE_HEADER = "X-Judging-Page"
_STATIC = {
    "/": ("page.html", "text/html"),
    "/page.js": ("page.js", "text/javascript"),
    "/page.css": ("page.css", "text/css"),
}
_PAIR = re.compile(r"/api/pair/(\d+)")
_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
# A judgment is a few hundred bytes: a larger body is not one.
_MAX_BODY = 64 * 1024


def _static(name: str) -> bytes:
    return resources.files("retrieval.judging").joinpath(name).read_bytes()


class JudgingServer(ThreadingHTTPServer):
    """The server of one session; `url` is where the page is."""

    daemon_threads = True
    session: JudgingSession

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}/"


class _Handler(BaseHTTPRequestHandler):
    server: JudgingServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # the terminal shows the URL, not each request
        pass

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", f"{kind}; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", _POLICY)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data: Any) -> None:
        self._send(status, json.dumps(data, ensure_ascii=False).encode("utf-8"), "application/json")

    def _ours(self) -> bool:
        """Whether the request names this server (not a rebound name of another site's)."""
        port = self.server.server_address[1]
        return self.headers.get("Host", "") in (f"{HOST}:{port}", f"localhost:{port}")

    def do_GET(self) -> None:
        if not self._ours():
            return self._json(421, {"error": "this server answers only as 127.0.0.1 or localhost"})
        path = self.path.split("?", 1)[0]
        session = self.server.session
        try:
            if path == "/favicon.ico":  # the page has none; a 404 would show in the browser's console
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            if path in _STATIC:
                name, kind = _STATIC[path]
                return self._send(200, _static(name), kind)
            if path == "/api/state":
                return self._json(200, session.state())
            if path == "/api/judgments":
                return self._json(200, session.judgments())
            match = _PAIR.fullmatch(path)
            if match:
                return self._json(200, session.details(int(match.group(1))))
            return self._json(404, {"error": f"no such page: {path}"})
        except JudgingError as exc:
            return self._json(exc.status, {"error": str(exc)})
        except DatasetError as exc:  # the judgments file was damaged by hand meanwhile
            return self._json(500, {"error": str(exc)})

    def do_POST(self) -> None:
        port = self.server.server_address[1]
        origin = self.headers.get("Origin")
        if not self._ours() or (
            origin is not None and origin not in (f"http://{HOST}:{port}", f"http://localhost:{port}")
        ):
            return self._json(403, {"error": "judgments are written only from the judging page"})
        if self.headers.get(PAGE_HEADER) != "1" or not self.headers.get("Content-Type", "").startswith(
            "application/json"
        ):
            return self._json(403, {"error": f"a write needs the page's {PAGE_HEADER} header and a JSON body"})
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 < length <= _MAX_BODY:
            return self._json(400, {"error": "a judgment is a JSON object of at most 64 KB"})
        try:
            body = json.loads(self.rfile.read(length))
        except (ValueError, UnicodeDecodeError):
            return self._json(400, {"error": "the body is not JSON"})
        if not isinstance(body, dict):
            return self._json(400, {"error": "the body must be a JSON object"})
        session = self.server.session
        try:
            if self.path == "/api/judge":
                return self._json(200, session.judge(body))
            if self.path == "/api/undo":
                return self._json(200, session.undo(body))
            return self._json(404, {"error": f"no such action: {self.path}"})
        except JudgingError as exc:
            return self._json(exc.status, {"error": str(exc)})
        except (DatasetError, OSError) as exc:  # nothing was written: the page says so, keeps the grade unsaved
            return self._json(500, {"error": f"not saved: {exc}"})


def start_server(session: JudgingSession, port: int = DEFAULT_PORT) -> JudgingServer:
    """A server for `session` on 127.0.0.1:`port` (0: a free port), not yet serving."""
    server = JudgingServer((HOST, port), _Handler)
    server.session = session
    return server


def serve_page(session: JudgingSession, port: int = DEFAULT_PORT, out: TextIO = sys.stderr) -> int:
    """Serve the page until Ctrl-C; returns how many pairs of the pool are judged by then."""
    clean_stale(session.path.parent, session.path.name)  # a killed writer's temporary file, before anyone reads
    server = start_server(session, port)
    left = len(session.pool)
    print(
        f"Judging page for {session.dataset.name}: {server.url} ({left} pair(s) to judge as {session.source}; "
        f"judgments go to {session.path}). Ctrl-C stops it.",
        file=out,
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    judged = sum(1 for value in session.judgments().values() if value["judgment"])
    print(f"stopped: {judged} of {left} pair(s) judged, in {session.path}", file=out)
    return judged
