"""Gemini provider end to end through the real google-genai client, against a local fake server.

No Gemini key exists here: the server's answers are test fixtures (see fake_servers.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fake_servers import (
    FAST_RETRY,
    FIXTURE_KEY,
    UNANSWERED_TIMEOUT,
    Act,
    FakeGeminiServer,
    fixture_vector,
    with_fixture_key,
)
from fake_servers import clean_gemini_env as clean_env
from fake_servers import gemini_profile as make_profile

from retrieval.methods.prompts import RERANK_SCHEMA
from retrieval.providers.base import MissingKeyError, ProviderError, ReplayMissError, normalize
from retrieval.providers.gemini import GeminiEmbeddings, GeminiGenerator
from retrieval.providers.http import RetryPolicy
from retrieval.run.cost import Usage


@pytest.fixture(scope="module")
def server() -> Iterator[FakeGeminiServer]:
    with FakeGeminiServer() as fake:
        yield fake


@pytest.fixture(autouse=True)
def _isolated(server: FakeGeminiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.reset()
    clean_env(monkeypatch)


@pytest.fixture(scope="module")
def embedder(server: FakeGeminiServer) -> Iterator[GeminiEmbeddings]:
    provider = with_fixture_key(lambda: GeminiEmbeddings(make_profile(server.url), retry=FAST_RETRY))
    yield provider
    provider.close()


@pytest.fixture(scope="module")
def generator(server: FakeGeminiServer) -> Iterator[GeminiGenerator]:
    provider = with_fixture_key(lambda: GeminiGenerator(make_profile(server.url), retry=FAST_RETRY))
    yield provider
    provider.close()


# embeddings ------------------------------------------------------------------------------


def test_embeddings_send_task_type_and_dimensionality_and_come_back_unit(
    server: FakeGeminiServer, embedder: GeminiEmbeddings
) -> None:
    embedder.usage = Usage()
    texts = ["Restaurer une sauvegarde", "Purger le cache", "HEL-4040"]
    docs = embedder.embed(texts, "document")
    query = embedder.embed(["Comment revenir à hier ?"], "query")

    assert docs.shape == (3, 8) and docs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(docs, axis=1), 1.0, rtol=1e-6)
    # In input order, equal to the fixture's vectors once normalised (the SDK does not normalise).
    np.testing.assert_allclose(docs, normalize(np.array([fixture_vector(t, 8) for t in texts])), rtol=1e-6)
    assert query.shape == (1, 8)

    first, second = server.requests
    assert first.path == "/v1/models/gemini-embedding-2:batchEmbedContents"
    assert first.headers["x-goog-api-key"] == FIXTURE_KEY and "key=" not in first.path
    # One request per text: the SDK would merge plain strings into one content for this model.
    assert [r["content"]["parts"][0]["text"] for r in first.body["requests"]] == texts
    assert {r["taskType"] for r in first.body["requests"]} == {"RETRIEVAL_DOCUMENT"}
    assert {r["outputDimensionality"] for r in first.body["requests"]} == {8}
    assert second.body["requests"][0]["taskType"] == "RETRIEVAL_QUERY"
    assert embedder.usage.calls == 2
    assert embedder.usage.input_tokens == sum(len(t.split()) for t in [*texts, "Comment revenir à hier ?"])


def test_embeddings_refuse_more_than_100_texts(server: FakeGeminiServer, embedder: GeminiEmbeddings) -> None:
    assert embedder.batch_size == 100
    with pytest.raises(ValueError, match="at most 100"):
        embedder.embed([f"t{i}" for i in range(101)], "document")
    assert server.requests == []
    assert embedder.embed([f"t{i}" for i in range(100)], "document").shape == (100, 8)


def test_embeddings_defaults_and_batch_cap(server: FakeGeminiServer) -> None:
    provider = GeminiEmbeddings(make_profile(server.url, dimensions=0, batch_size=250), replay=True)
    assert (provider.dimensions, provider.batch_size, provider.provider) == (768, 100, "gemini")


# generation ------------------------------------------------------------------------------


def test_generation_sends_schema_at_temperature_zero_and_counts_usage(
    server: FakeGeminiServer, generator: GeminiGenerator
) -> None:
    generator.usage = Usage()
    server.script(Act.answer('{"ranking": ["b", "a"]}'))
    assert generator.generate_json("question?", RERANK_SCHEMA, "ranking") == '{"ranking": ["b", "a"]}'

    (request,) = server.requests
    assert request.path == "/v1/models/gemini-3.5-flash:generateContent"
    config = request.body["generationConfig"]
    assert config["temperature"] == 0
    assert config["responseMimeType"] == "application/json"
    assert config["responseSchema"]["properties"]["ranking"]["type"].upper() == "ARRAY"
    assert config["responseSchema"]["required"] == ["ranking"]
    assert "additionalProperties" not in config["responseSchema"]  # an OpenAI strict-mode key
    assert request.body["contents"] == [{"parts": [{"text": "question?"}], "role": "user"}]
    assert generator.usage.calls == 1
    assert generator.usage.input_tokens == len("question?") // 4 + 1
    assert generator.usage.output_tokens == len('{"ranking": ["b", "a"]}') // 4 + 1


def test_generation_request_bytes_are_deterministic(server: FakeGeminiServer, generator: GeminiGenerator) -> None:
    generator.generate_json("same prompt", RERANK_SCHEMA, "ranking")
    generator.generate_json("same prompt", RERANK_SCHEMA, "ranking")
    first, second = server.requests
    assert first.body == second.body


# faults ------------------------------------------------------------------------------


def test_429_then_success_is_retried(server: FakeGeminiServer, generator: GeminiGenerator) -> None:
    server.script(Act.http(429))
    assert generator.generate_json("p", RERANK_SCHEMA, "ranking")
    assert len(server.requests) == 2


def test_500_after_retries_is_a_provider_error(server: FakeGeminiServer, generator: GeminiGenerator) -> None:
    server.script(Act.http(500), Act.http(500))
    with pytest.raises(ProviderError) as info:
        generator.generate_json("p", RERANK_SCHEMA, "ranking")
    assert info.value.reason == "http 500" and not isinstance(info.value, ReplayMissError)
    assert len(server.requests) == FAST_RETRY.attempts


def test_400_is_not_retried(server: FakeGeminiServer, embedder: GeminiEmbeddings) -> None:
    server.script(Act.http(400))
    with pytest.raises(ProviderError) as info:
        embedder.embed(["x"], "document")
    assert info.value.reason == "http 400"
    assert len(server.requests) == 1


def test_timeout_is_a_provider_error(server: FakeGeminiServer) -> None:
    one_try = GeminiGenerator(make_profile(server.url, timeout=UNANSWERED_TIMEOUT), retry=RetryPolicy(attempts=1))
    server.script(Act.hang())
    with pytest.raises(ProviderError) as info:
        one_try.generate_json("p", RERANK_SCHEMA, "ranking")
    assert info.value.reason == "timeout"
    assert one_try.usage.calls == 1


def test_malformed_json_body_is_a_provider_error(server: FakeGeminiServer, generator: GeminiGenerator) -> None:
    server.script(Act.malformed())
    with pytest.raises(ProviderError) as info:
        generator.generate_json("p", RERANK_SCHEMA, "ranking")
    assert info.value.reason == "bad json"


@pytest.mark.parametrize(
    ("act", "reason"),
    [(Act.blocked(), "blocked"), (Act.prompt_blocked(), "blocked"), (Act.empty(), "empty")],
    ids=["finish-safety", "prompt-blocked", "empty-text"],
)
def test_refusals_are_provider_errors(
    server: FakeGeminiServer, generator: GeminiGenerator, act: Act, reason: str
) -> None:
    generator.usage = Usage()
    server.script(act)
    with pytest.raises(ProviderError) as info:
        generator.generate_json("p", RERANK_SCHEMA, "ranking")
    assert info.value.reason == reason
    assert generator.usage.calls == 1 and generator.usage.input_tokens > 0  # billed all the same


# keys, environment, replay -----------------------------------------------------------------


@pytest.mark.parametrize("cls", [GeminiEmbeddings, GeminiGenerator])
def test_missing_key_names_the_variables(server: FakeGeminiServer, monkeypatch: pytest.MonkeyPatch, cls: type) -> None:
    clean_env(monkeypatch, key=None)
    monkeypatch.setenv("GEMINI_API_KEY", "  ")  # blank is no key
    with pytest.raises(MissingKeyError) as info:
        cls(make_profile(server.url))
    message = str(info.value)
    assert "GEMINI_API_KEY" in message and "GOOGLE_API_KEY" in message and "\n" not in message
    assert info.value.reason == "no key"


def test_replay_needs_no_key(server: FakeGeminiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    clean_env(monkeypatch, key=None)
    GeminiGenerator(make_profile(server.url), replay=True).generate_json("p", RERANK_SCHEMA, "ranking")
    assert server.requests[0].headers["x-goog-api-key"] == "replay-no-key"


def test_google_api_key_wins_and_sdk_env_switches_do_not_redirect(
    server: FakeGeminiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "fixture-google-key")
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
    monkeypatch.setenv("GOOGLE_GENAI_API_VERSION", "v1beta")
    # The OpenAI-style ".../v1" form of the base URL is accepted too.
    provider = GeminiGenerator(make_profile(server.url + "/v1/"), retry=FAST_RETRY)
    provider.generate_json("p", RERANK_SCHEMA, "ranking")
    (request,) = server.requests
    assert request.headers["x-goog-api-key"] == "fixture-google-key"
    assert request.path == "/v1/models/gemini-3.5-flash:generateContent"


def test_replay_miss_is_a_replay_miss_error(server: FakeGeminiServer, tmp_path: Path) -> None:
    import vcr

    provider = GeminiEmbeddings(make_profile(server.url), replay=True)
    cassette = vcr.VCR(record_mode="none").use_cassette(str(tmp_path / "empty.yaml"))
    with cassette, pytest.raises(ReplayMissError) as info:
        provider.embed(["not recorded"], "query")
    assert info.value.reason == "replay miss"
    assert server.requests == []  # refused by vcrpy, never sent
