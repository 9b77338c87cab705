"""The OpenAI-compatible embeddings client against a local fake `/v1/embeddings` server."""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from retrieval.config import Profile
from retrieval.providers.base import MissingKeyError, ProviderError
from retrieval.providers.http import RetryPolicy, dumps
from retrieval.providers.local_server import server_answers
from retrieval.providers.openai_embeddings import OpenAIEmbeddings

FAST = RetryPolicy(attempts=3, backoff=0.001, max_wait=0.01)
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
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        # A short poll interval makes shutdown() return at once instead of after 0.5 s.
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.01,), daemon=True)
        self._thread.start()

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
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def server() -> Iterator[FakeEmbeddingsServer]:
    fake = FakeEmbeddingsServer()
    try:
        yield fake
    finally:
        fake.stop()


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
    return Profile(name="fixture", **fields)


def _client(server: FakeEmbeddingsServer, **changes: Any) -> OpenAIEmbeddings:
    client = OpenAIEmbeddings(make_profile(server.url, **changes), retry=FAST)
    server.clients.append(client)
    return client


def _expected(texts: list[str]) -> np.ndarray:
    raw = np.asarray([fixture_vector(t) for t in texts], dtype=np.float64)
    return raw / np.linalg.norm(raw, axis=1, keepdims=True)


# --- requests ---------------------------------------------------------------------------------


def test_request_body(server: FakeEmbeddingsServer) -> None:
    client = _client(server)
    client.embed(["Restaurer une sauvegarde", "Purger le cache"], "document")
    client.embed(["comment revenir à hier ?"], "query")
    first, second = server.posts
    assert first["path"] == "/v1/embeddings"
    assert first["headers"]["content-type"] == "application/json"
    assert json.loads(first["raw"]) == {
        "model": "fixture-e5",
        "input": ["Restaurer une sauvegarde", "Purger le cache"],
        "input_type": "passage",
        "encoding_format": "base64",
    }
    assert json.loads(second["raw"])["input_type"] == "query"
    # Bytes are deterministic (sorted keys, compact): cassettes match on them.
    assert first["raw"] == dumps(json.loads(first["raw"]))
    assert "authorization" not in {h.lower() for h in first["headers"]}


def test_prefixes_and_float_format(server: FakeEmbeddingsServer) -> None:
    client = _client(
        server,
        input_type=False,
        encoding_format="float",
        query_prefix="query: ",
        document_prefix="passage: ",
    )
    client.embed(["a"], "query")
    client.embed(["b"], "document")
    assert json.loads(server.posts[0]["raw"]) == {"model": "fixture-e5", "input": ["query: a"]}
    assert json.loads(server.posts[1]["raw"]) == {"model": "fixture-e5", "input": ["passage: b"]}


def test_api_key_is_sent_as_bearer(server: FakeEmbeddingsServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIXTURE_EMBEDDINGS_KEY", "fixture-key-not-a-secret")
    _client(server, api_key_env="FIXTURE_EMBEDDINGS_KEY").embed(["a"], "query")
    headers = {k.lower(): v for k, v in server.posts[0]["headers"].items()}
    assert headers["authorization"] == "Bearer fixture-key-not-a-secret"


def test_missing_api_key_fails_before_any_call(server: FakeEmbeddingsServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FIXTURE_EMBEDDINGS_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="FIXTURE_EMBEDDINGS_KEY"):
        _client(server, api_key_env="FIXTURE_EMBEDDINGS_KEY")
    assert server.requests == []


# --- answers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["base64", "float"])
def test_vectors_are_unit_float32_in_input_order(server: FakeEmbeddingsServer, encoding: str) -> None:
    texts = ["un", "deux", "trois"]
    vectors = _client(server, encoding_format=encoding).embed(texts, "document")
    assert vectors.dtype == np.float32
    assert vectors.shape == (3, DIMENSIONS)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(vectors, _expected(texts), rtol=1e-6)


def test_base64_and_float_decode_to_the_same_vectors(server: FakeEmbeddingsServer) -> None:
    texts = ["HEL-4040", "proc-restauration"]
    as_base64 = _client(server, encoding_format="base64").embed(texts, "document")
    as_float = _client(server, encoding_format="float").embed(texts, "document")
    np.testing.assert_array_equal(as_base64, as_float)


def test_usage_counts_calls_and_tokens(server: FakeEmbeddingsServer) -> None:
    client = _client(server)
    client.embed(["a", "b"], "document")
    client.embed(["c"], "query")
    assert client.usage.calls == 2
    assert client.usage.input_tokens == 9


def test_dimension_mismatch(server: FakeEmbeddingsServer) -> None:
    server.dimensions = DIMENSIONS + 1
    with pytest.raises(ProviderError, match="dimensions") as caught:
        _client(server).embed(["a"], "query")
    assert f"returned {DIMENSIONS + 1} dimensions" in str(caught.value)
    assert caught.value.reason == "config"


def test_wrong_number_of_vectors(server: FakeEmbeddingsServer) -> None:
    one_row = {"data": [{"index": 0, "embedding": [1.0] * DIMENSIONS}]}
    server.script.append((200, json.dumps(one_row).encode()))
    with pytest.raises(ProviderError) as caught:
        _client(server).embed(["a", "b"], "document")
    assert caught.value.reason == "bad json"


def test_batch_larger_than_batch_size_is_refused(server: FakeEmbeddingsServer) -> None:
    with pytest.raises(ValueError, match="batch_size is 3"):
        _client(server).embed(["a", "b", "c", "d"], "document")
    assert server.requests == []


# --- failures and retries ---------------------------------------------------------------------


def test_429_then_200_is_retried(server: FakeEmbeddingsServer) -> None:
    server.script.append((429, b'{"error": "rate limited"}'))
    client = OpenAIEmbeddings(make_profile(server.url), retry=RetryPolicy(backoff=0.001))
    server.clients.append(client)
    vectors = client.embed(["a"], "query")
    assert len(server.posts) == 2
    assert server.posts[0]["raw"] == server.posts[1]["raw"]
    np.testing.assert_allclose(vectors, _expected(["a"]), rtol=1e-6)


def test_500_every_time_gives_up_after_the_attempts(server: FakeEmbeddingsServer) -> None:
    server.script.extend([(500, b'{"error": "boom"}')] * 10)
    with pytest.raises(ProviderError) as caught:
        _client(server).embed(["a"], "query")
    assert caught.value.reason == "http 500"
    assert "HTTP 500" in str(caught.value)
    assert len(server.posts) == FAST.attempts


def test_400_is_not_retried(server: FakeEmbeddingsServer) -> None:
    server.script.extend([(400, b'{"error": "bad model"}')] * 3)
    with pytest.raises(ProviderError) as caught:
        _client(server).embed(["a"], "query")
    assert caught.value.reason == "http 400"
    assert "bad model" in str(caught.value)
    assert len(server.posts) == 1


def test_invalid_json(server: FakeEmbeddingsServer) -> None:
    server.script.append((200, b"<html>not json</html>"))
    with pytest.raises(ProviderError) as caught:
        _client(server).embed(["a"], "query")
    assert caught.value.reason == "bad json"
    assert len(server.posts) == 1


def test_json_without_data(server: FakeEmbeddingsServer) -> None:
    server.script.append((200, b'{"object": "list"}'))
    with pytest.raises(ProviderError) as caught:
        _client(server).embed(["a"], "query")
    assert caught.value.reason == "bad json"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nothing_listening_is_a_connect_error() -> None:
    client = OpenAIEmbeddings(make_profile(f"http://127.0.0.1:{_free_port()}"), retry=FAST)
    with pytest.raises(ProviderError) as caught:
        client.embed(["a"], "query")
    client.close()
    assert caught.value.reason == "connect"


# --- the local server's health check ------------------------------------------------------------


def test_server_answers_on_health(server: FakeEmbeddingsServer) -> None:
    assert server_answers(f"{server.url}/v1")
    assert server.requests[-1]["path"] == "/health"


def test_server_not_healthy(server: FakeEmbeddingsServer) -> None:
    server.health_status = 503
    assert not server_answers(f"{server.url}/v1")


def test_nothing_answers() -> None:
    assert not server_answers(f"http://127.0.0.1:{_free_port()}/v1", timeout=0.5)
