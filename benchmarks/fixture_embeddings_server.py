"""FIXTURE: an OpenAI-compatible `/v1/embeddings` server whose vectors are random, seeded by the
text, so that a project of generated documents can record vector and hybrid at scale.

    python benchmarks/fixture_embeddings_server.py --port 18931 --dim 384 --seconds 1800

Its vectors are a benchmark FIXTURE, never a model's: each text's vector is a unit float32
vector drawn from a generator seeded by the text's SHA-256, the same text always giving the
same vector. Figures computed from them measure time and memory, not retrieval quality.
The server listens on 127.0.0.1 only and stops after --seconds (bounded).

A project for it (`retrieval.toml` beside a generated `data/`, see benchmarks/scale.py --project):

    dataset = "data"
    profile = "fixture"
    methods = ["bm25", "vector", "hybrid"]

    [profiles.fixture]
    embedding_provider = "openai"
    embedding_model = "fixture-random"
    embedding_base_url = "http://127.0.0.1:18931/v1"
    dimensions = 384
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np


def fixture_vector(text: str, dim: int) -> np.ndarray:
    """A unit float32 vector seeded by the text: a FIXTURE, not an embedding."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(dim, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def answer(body: dict[str, Any], dim: int) -> bytes:
    """The embeddings response for one request body (float lists, or base64 as asked)."""
    inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
    rows = []
    for index, text in enumerate(inputs):
        vector = fixture_vector(text, dim)
        if body.get("encoding_format") == "base64":
            embedding: Any = base64.b64encode(vector.astype("<f4").tobytes()).decode()
        else:
            embedding = vector.tolist()
        rows.append({"object": "embedding", "index": index, "embedding": embedding})
    usage = {"prompt_tokens": len(inputs), "total_tokens": len(inputs)}
    return json.dumps({"object": "list", "model": body.get("model", ""), "data": rows, "usage": usage}).encode()


def serve(port: int, dim: int, seconds: float) -> None:
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
            self._send(200, b'{"status": "ok"}') if self.path == "/health" else self._send(404, b"{}")

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length", 0)))
            if self.path != "/v1/embeddings":
                self._send(404, b"{}")
                return
            self._send(200, answer(json.loads(raw), dim))

    ThreadingHTTPServer.daemon_threads = True
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    timer = threading.Timer(seconds, server.shutdown)
    timer.daemon = True
    timer.start()
    print(f"FIXTURE embeddings on http://127.0.0.1:{port}/v1, dim {dim}, for {seconds:.0f} s", flush=True)
    try:
        server.serve_forever()
    finally:
        timer.cancel()
        server.server_close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=18931)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--seconds", type=float, default=1800.0, help="stop after this many seconds")
    args = parser.parse_args()
    if args.port == 8765 or not 1 <= args.dim <= 4096 or args.seconds <= 0:
        parser.error("--port other than 8765, --dim 1..4096, --seconds positive")
    serve(args.port, args.dim, args.seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
