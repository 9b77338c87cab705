"""The OpenAI-compatible embeddings client against a local fake `/v1/embeddings` embeddings_server."""

from __future__ import annotations

import json
import socket
from typing import Any

import numpy as np
import pytest
from fake_embeddings import DIMENSIONS, FakeEmbeddingsServer, fixture_vector, make_profile

from retrieval.providers.base import MissingKeyError, ProviderError
from retrieval.providers.http import RetryPolicy, dumps
from retrieval.providers.local_server import server_answers
from retrieval.providers.openai_embeddings import OpenAIEmbeddings

FAST = RetryPolicy(attempts=3, backoff=0.001, max_wait=0.01)


def _client(embeddings_server: FakeEmbeddingsServer, **changes: Any) -> OpenAIEmbeddings:
    client = OpenAIEmbeddings(make_profile(embeddings_server.url, **changes), retry=FAST)
    embeddings_server.clients.append(client)
    return client


def _expected(texts: list[str]) -> np.ndarray:
    raw = np.asarray([fixture_vector(t) for t in texts], dtype=np.float64)
    return raw / np.linalg.norm(raw, axis=1, keepdims=True)


# --- requests ---------------------------------------------------------------------------------


def test_request_body(embeddings_server: FakeEmbeddingsServer) -> None:
    client = _client(embeddings_server)
    client.embed(["Restaurer une sauvegarde", "Purger le cache"], "document")
    client.embed(["comment revenir à hier ?"], "query")
    first, second = embeddings_server.posts
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


def test_prefixes_and_float_format(embeddings_server: FakeEmbeddingsServer) -> None:
    client = _client(
        embeddings_server,
        input_type=False,
        encoding_format="float",
        query_prefix="query: ",
        document_prefix="passage: ",
    )
    client.embed(["a"], "query")
    client.embed(["b"], "document")
    assert json.loads(embeddings_server.posts[0]["raw"]) == {"model": "fixture-e5", "input": ["query: a"]}
    assert json.loads(embeddings_server.posts[1]["raw"]) == {"model": "fixture-e5", "input": ["passage: b"]}


def test_api_key_is_sent_as_bearer(embeddings_server: FakeEmbeddingsServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIXTURE_EMBEDDINGS_KEY", "fixture-key-not-a-secret")
    _client(embeddings_server, api_key_env="FIXTURE_EMBEDDINGS_KEY").embed(["a"], "query")
    headers = {k.lower(): v for k, v in embeddings_server.posts[0]["headers"].items()}
    assert headers["authorization"] == "Bearer fixture-key-not-a-secret"


def test_missing_api_key_fails_before_any_call(
    embeddings_server: FakeEmbeddingsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FIXTURE_EMBEDDINGS_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="FIXTURE_EMBEDDINGS_KEY"):
        _client(embeddings_server, api_key_env="FIXTURE_EMBEDDINGS_KEY")
    assert embeddings_server.requests == []


# --- answers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["base64", "float"])
def test_vectors_are_unit_float32_in_input_order(embeddings_server: FakeEmbeddingsServer, encoding: str) -> None:
    texts = ["un", "deux", "trois"]
    vectors = _client(embeddings_server, encoding_format=encoding).embed(texts, "document")
    assert vectors.dtype == np.float32
    assert vectors.shape == (3, DIMENSIONS)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(vectors, _expected(texts), rtol=1e-6)


def test_base64_and_float_decode_to_the_same_vectors(embeddings_server: FakeEmbeddingsServer) -> None:
    texts = ["HEL-4040", "proc-restauration"]
    as_base64 = _client(embeddings_server, encoding_format="base64").embed(texts, "document")
    as_float = _client(embeddings_server, encoding_format="float").embed(texts, "document")
    np.testing.assert_array_equal(as_base64, as_float)


def test_usage_counts_calls_and_tokens(embeddings_server: FakeEmbeddingsServer) -> None:
    client = _client(embeddings_server)
    client.embed(["a", "b"], "document")
    client.embed(["c"], "query")
    assert client.usage.calls == 2
    assert client.usage.input_tokens == 9


def test_dimension_mismatch(embeddings_server: FakeEmbeddingsServer) -> None:
    embeddings_server.dimensions = DIMENSIONS + 1
    with pytest.raises(ProviderError, match="dimensions") as caught:
        _client(embeddings_server).embed(["a"], "query")
    assert f"returned {DIMENSIONS + 1} dimensions" in str(caught.value)
    assert caught.value.reason == "config"


def test_wrong_number_of_vectors(embeddings_server: FakeEmbeddingsServer) -> None:
    one_row = {"data": [{"index": 0, "embedding": [1.0] * DIMENSIONS}]}
    embeddings_server.script.append((200, json.dumps(one_row).encode()))
    with pytest.raises(ProviderError) as caught:
        _client(embeddings_server).embed(["a", "b"], "document")
    assert caught.value.reason == "bad json"


def test_batch_larger_than_batch_size_is_refused(embeddings_server: FakeEmbeddingsServer) -> None:
    with pytest.raises(ValueError, match="batch_size is 3"):
        _client(embeddings_server).embed(["a", "b", "c", "d"], "document")
    assert embeddings_server.requests == []


# --- failures and retries ---------------------------------------------------------------------


def test_429_then_200_is_retried(embeddings_server: FakeEmbeddingsServer) -> None:
    embeddings_server.script.append((429, b'{"error": "rate limited"}'))
    client = OpenAIEmbeddings(make_profile(embeddings_server.url), retry=RetryPolicy(backoff=0.001))
    embeddings_server.clients.append(client)
    vectors = client.embed(["a"], "query")
    assert len(embeddings_server.posts) == 2
    assert embeddings_server.posts[0]["raw"] == embeddings_server.posts[1]["raw"]
    np.testing.assert_allclose(vectors, _expected(["a"]), rtol=1e-6)


def test_500_every_time_gives_up_after_the_attempts(embeddings_server: FakeEmbeddingsServer) -> None:
    embeddings_server.script.extend([(500, b'{"error": "boom"}')] * 10)
    with pytest.raises(ProviderError) as caught:
        _client(embeddings_server).embed(["a"], "query")
    assert caught.value.reason == "http 500"
    assert "HTTP 500" in str(caught.value)
    assert len(embeddings_server.posts) == FAST.attempts


def test_400_is_not_retried(embeddings_server: FakeEmbeddingsServer) -> None:
    embeddings_server.script.extend([(400, b'{"error": "bad model"}')] * 3)
    with pytest.raises(ProviderError) as caught:
        _client(embeddings_server).embed(["a"], "query")
    assert caught.value.reason == "http 400"
    assert "bad model" in str(caught.value)
    assert len(embeddings_server.posts) == 1


def test_invalid_json(embeddings_server: FakeEmbeddingsServer) -> None:
    embeddings_server.script.append((200, b"<html>not json</html>"))
    with pytest.raises(ProviderError) as caught:
        _client(embeddings_server).embed(["a"], "query")
    assert caught.value.reason == "bad json"
    assert len(embeddings_server.posts) == 1


def test_json_without_data(embeddings_server: FakeEmbeddingsServer) -> None:
    embeddings_server.script.append((200, b'{"object": "list"}'))
    with pytest.raises(ProviderError) as caught:
        _client(embeddings_server).embed(["a"], "query")
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


# --- the local embeddings_server's health check ------------------------------------------------------------


def test_server_answers_on_health(embeddings_server: FakeEmbeddingsServer) -> None:
    assert server_answers(f"{embeddings_server.url}/v1")
    assert embeddings_server.requests[-1]["path"] == "/health"


def test_server_not_healthy(embeddings_server: FakeEmbeddingsServer) -> None:
    embeddings_server.health_status = 503
    assert not server_answers(f"{embeddings_server.url}/v1")


def test_nothing_answers() -> None:
    assert not server_answers(f"http://127.0.0.1:{_free_port()}/v1", timeout=0.5)
