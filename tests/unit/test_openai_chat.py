"""OpenAI-compatible chat generation against a local fake server (answers are test fixtures)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from fake_servers import FAST_RETRY, TIMEOUT, UNANSWERED_TIMEOUT, Act, FakeOpenAIServer
from fake_servers import openai_profile as make_profile

from retrieval.methods.prompts import RERANK_SCHEMA
from retrieval.providers.base import MissingKeyError, ProviderError, ReplayMissError
from retrieval.providers.http import RetryPolicy, new_client
from retrieval.providers.openai_chat import OpenAIChat
from retrieval.run.cost import Usage

KEY_ENV = "FIXTURE_CHAT_KEY"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    """One HTTP client for the module, on the package's shared TLS context (an httpx.Client
    loads the certificate store for its own: ~20 ms)."""
    with new_client(TIMEOUT) as client:
        yield client


@pytest.fixture(scope="module")
def chat(http: httpx.Client, server: FakeOpenAIServer) -> OpenAIChat:
    return OpenAIChat(make_profile(server.url), retry=FAST_RETRY, client=http)


@pytest.fixture(autouse=True)
def _reset(server: FakeOpenAIServer, chat: OpenAIChat) -> None:
    server.reset()
    chat.usage = Usage()


def test_request_body_usage_and_answer(server: FakeOpenAIServer, chat: OpenAIChat) -> None:
    server.script(Act.answer('{"ranking": ["a"]}'))
    assert chat.generate_json("the prompt", RERANK_SCHEMA, "ranking") == '{"ranking": ["a"]}'
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.body == {
        "model": "fixture-chat-model",
        "messages": [{"role": "user", "content": "the prompt"}],
        "temperature": 0,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "ranking", "schema": RERANK_SCHEMA, "strict": True},
        },
    }
    assert "authorization" not in request.headers  # keyless server: no key configured, none sent
    assert (chat.usage.calls, chat.usage.input_tokens, chat.usage.output_tokens) == (
        1,
        len("the prompt") // 4 + 1,
        len('{"ranking": ["a"]}') // 4,
    )


def test_json_object_mode_when_the_server_has_no_schema_support(server: FakeOpenAIServer, http: httpx.Client) -> None:
    provider = OpenAIChat(make_profile(server.url, json_schema=False), client=http)
    provider.generate_json("p", RERANK_SCHEMA, "ranking")
    assert server.requests[0].body["response_format"] == {"type": "json_object"}


def test_key_from_the_profile_variable(
    server: FakeOpenAIServer, http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "fixture-secret")
    provider = OpenAIChat(make_profile(server.url, api_key_env=KEY_ENV), client=http)
    provider.generate_json("p", RERANK_SCHEMA, "ranking")
    assert server.requests[0].headers["authorization"] == "Bearer fixture-secret"


def test_missing_key_names_the_variable(
    server: FakeOpenAIServer, http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(MissingKeyError, match=KEY_ENV):
        OpenAIChat(make_profile(server.url, api_key_env=KEY_ENV), client=http)
    # Replays need no key and never send one.
    provider = OpenAIChat(make_profile(server.url, api_key_env=KEY_ENV), replay=True, client=http)
    provider.generate_json("p", RERANK_SCHEMA, "ranking")
    assert "authorization" not in server.requests[0].headers


def test_429_then_success_is_retried(server: FakeOpenAIServer, chat: OpenAIChat) -> None:
    server.script(Act.http(429))
    assert json.loads(chat.generate_json("p", RERANK_SCHEMA, "ranking")) == {"ranking": []}
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("acts", "reason", "requests"),
    [
        ((Act.http(500), Act.http(500)), "http 500", 2),
        ((Act.http(401),), "http 401", 1),
        ((Act.malformed(),), "bad json", 1),
        ((Act.blocked(),), "blocked", 1),
        ((Act.empty(),), "empty", 1),
    ],
    ids=["500-after-retries", "401-not-retried", "malformed-body", "content-filter", "empty"],
)
def test_faults_are_provider_errors(
    server: FakeOpenAIServer, chat: OpenAIChat, acts: tuple[Act, ...], reason: str, requests: int
) -> None:
    server.script(*acts)
    with pytest.raises(ProviderError) as info:
        chat.generate_json("p", RERANK_SCHEMA, "ranking")
    assert info.value.reason == reason and not isinstance(info.value, ReplayMissError)
    assert len(server.requests) == requests
    assert chat.usage.calls == 1


def test_timeout_is_a_provider_error(server: FakeOpenAIServer) -> None:
    # Its own HTTP client: the profile's timeout applies to the client the provider builds.
    provider = OpenAIChat(make_profile(server.url, timeout=UNANSWERED_TIMEOUT), retry=RetryPolicy(attempts=1))
    server.script(Act.hang())
    with pytest.raises(ProviderError) as info:
        provider.generate_json("p", RERANK_SCHEMA, "ranking")
    assert info.value.reason == "timeout"
    provider.close()


def test_replay_miss_is_a_replay_miss_error(server: FakeOpenAIServer, http: httpx.Client, tmp_path: Path) -> None:
    import vcr

    provider = OpenAIChat(make_profile(server.url), replay=True, client=http)
    with (
        vcr.VCR(record_mode="none").use_cassette(str(tmp_path / "empty.yaml")),
        pytest.raises(ReplayMissError),
    ):
        provider.generate_json("p", RERANK_SCHEMA, "ranking")
    assert server.requests == []


def test_concurrent_calls_count_every_call(chat: OpenAIChat) -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(lambda i: chat.generate_json(f"p{i}", RERANK_SCHEMA, "ranking"), range(8)))
    assert len(answers) == 8
    assert chat.usage.calls == 8
    assert chat.usage.input_tokens == sum(len(f"p{i}") // 4 + 1 for i in range(8))
