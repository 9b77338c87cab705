"""FIXTURE: a fake OpenAI-compatible `/v1/embeddings` server, shared by the client and recording
tests. Its answers are test fixtures, never a baseline."""

from __future__ import annotations

import base64
import json
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler
from typing import Any

import numpy as np
from loopback_http import LoopbackHTTPServer

from retrieval.config import Profile, flat_profile
from retrieval.providers.openai_embeddings import OpenAIEmbeddings

DIMENSIONS = 4


def fixture_vector(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    """The fake server's raw (not normalised) vector for a text: a deterministic FIXTURE."""
    seed = sum(text.encode("utf-8")) + len(text)
    return [float((seed * (i + 3)) % 17 + 1) for i in range(dimensions)]


class FakeEmbeddingsServer:
    """FIXTURE: a fake OpenAI-compatible embeddings server for keyless tests. Its answers are
    test fixtures, never a baseline.

    Listens on 127.0.0.1 on a free port in a daemon thread. `POST /v1/embeddings` answers
    with `fixture_vector` of every input, rows in reverse order (each with its `index`),
    float lists or base64 as the request's `encoding_format` asks; `GET /health` answers
    `health_status`. `script` queues (status, body) answers for the coming POSTs; every
    request is kept in `requests` (path, headers, raw body).
    """

    def __init__(self, dimensions: int = DIMENSIONS) -> None:
        self.dimensions = dimensions
        self.health_status = 200
        self.script: deque[tuple[int, bytes]] = deque()
        self.requests: list[dict[str, Any]] = []
        self.clients: list[OpenAIEmbeddings] = []  # closed with the server
        self._lock = threading.Lock()
        self._httpd = LoopbackHTTPServer(self._handler())
        self.port = self._httpd.port
        self.url = f"http://127.0.0.1:{self.port}"

    @property
    def posts(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["method"] == "POST"]

    def answer(self, body: dict[str, Any]) -> tuple[int, bytes]:
        inputs = body["input"]
        rows = []
        for index, text in enumerate(inputs):
            vector = fixture_vector(text, self.dimensions)
            if body.get("encoding_format") == "base64":
                embedding: Any = base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()
            else:
                embedding = vector
            rows.append({"object": "embedding", "index": index, "embedding": embedding})
        answer = {
            "object": "list",
            "model": body["model"],
            "data": rows[::-1],  # out of order on purpose: the client must sort by index
            "usage": {"prompt_tokens": 3 * len(inputs), "total_tokens": 3 * len(inputs)},
        }
        return 200, json.dumps(answer).encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                with server._lock:
                    server.requests.append({"method": "GET", "path": self.path, "headers": dict(self.headers)})
                if self.path == "/health":
                    self._send(server.health_status, b'{"status": "ok"}')
                else:
                    self._send(404, b'{"error": "not found"}')

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                with server._lock:
                    server.requests.append(
                        {
                            "method": "POST",
                            "path": self.path,
                            "headers": dict(self.headers),
                            "raw": raw,
                        }
                    )
                    scripted = server.script.popleft() if server.script else None
                if scripted is not None:
                    self._send(*scripted)
                elif self.path != "/v1/embeddings":
                    self._send(404, b'{"error": "not found"}')
                else:
                    self._send(*server.answer(json.loads(raw)))

        return Handler

    def stop(self) -> None:
        for client in self.clients:
            client.close()
        self._httpd.stop()

    def __enter__(self) -> FakeEmbeddingsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def make_profile(url: str, **changes: Any) -> Profile:
    fields: dict[str, Any] = {
        "embedding_provider": "openai",
        "embedding_base_url": f"{url}/v1",
        "embedding_model": "fixture-e5",
        "dimensions": DIMENSIONS,
        "batch_size": 3,
        "input_type": True,
        "encoding_format": "base64",
        "timeout": 5.0,
    }
    fields.update(changes)
    return flat_profile("fixture", **fields)
