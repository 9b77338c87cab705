"""Every message the tool prints holds no credential, not only fatal ones: the warning of a degraded
rerank whose server echoes the request (real clients: the OpenAI-compatible chat client and the
google-genai SDK, against a local server), and the traceback of a method whose declared key
variable is named like nothing in particular."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import numpy as np
import pytest
from demo_fixture import DEMO_DATA
from fake_servers import clean_gemini_env, gemini_profile, openai_profile
from loopback_http import LoopbackHTTPServer

from retrieval import Context, Ranking
from retrieval.cli import main
from retrieval.methods.prompts import RERANK_SCHEMA
from retrieval.methods.support.llm import ask_or_degrade
from retrieval.providers.base import ProviderError
from retrieval.providers.gemini import GeminiGenerator
from retrieval.providers.http import RetryPolicy
from retrieval.providers.openai_chat import OpenAIChat

# FIXTURE key: random-looking, of no known shape (no "sk-", no "AIza"), valid nowhere; only the
# mechanisms that know where a key goes can find it.
KEY = "Zq7vK2mPx9LwR4tN8bYc3HdF6jGs1Ae5Uo0Wi"


def _pieces(text: str) -> list[str]:
    """Each 8-character piece of KEY in `text`: what a cut message would still show of it."""
    return [KEY[i : i + 8] for i in range(len(KEY) - 7) if KEY[i : i + 8] in text]


class _Echo(BaseHTTPRequestHandler):
    """A server that refuses every request and echoes it back, headers first, as some proxies do."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        echoed = f"{self.command} {self.path}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in self.headers.items())
        payload = json.dumps({"error": {"code": 400, "message": echoed, "status": "INVALID_ARGUMENT"}}).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def echo() -> Iterator[str]:
    server = LoopbackHTTPServer(_Echo)
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.stop()


def _degraded(generator: Any, caplog: pytest.LogCaptureFixture) -> tuple[ProviderError, str]:
    with caplog.at_level(logging.WARNING, logger="retrieval.methods.support.llm"):
        outcome = ask_or_degrade(
            lambda: generator.generate_json("rank these", RERANK_SCHEMA, "ranking"), "rerank of question q01", "m"
        )
    assert isinstance(outcome, ProviderError)
    return outcome, caplog.text


# A variable named like a key, and one named like nothing (api_key_env may name any variable).
@pytest.mark.parametrize("variable", ["OPENAI_API_KEY", "FIXTURE_ECHO_BEARER"])
def test_a_degraded_rerank_warning_shows_no_part_of_the_key_its_server_echoed(
    echo: str, variable: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(variable, KEY)
    chat = OpenAIChat(openai_profile(echo, api_key_env=variable), retry=RetryPolicy(attempts=1))
    error, warning = _degraded(chat, caplog)
    chat.close()
    assert "rerank of question q01 degraded: POST" in warning and "HTTP 400" in warning
    assert "uthorization: <authorization>" in warning  # the echo, with the key named, not shown
    assert _pieces(warning) == [] and _pieces(str(error)) == []


def test_a_degraded_gemini_warning_shows_no_part_of_the_key_its_server_echoed(
    echo: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clean_gemini_env(monkeypatch, KEY)
    generator = GeminiGenerator(gemini_profile(echo))
    _, warning = _degraded(generator, caplog)
    generator.close()
    assert "rerank of question q01 degraded:" in warning and "HTTP 400" in warning
    assert "x-goog-api-key: …" in warning.lower()
    assert _pieces(warning) == []


class LeakyLogin:
    """A method that signs in to its engine with a declared key and fails, quoting it."""

    name = "leaky"
    requires: tuple[str, ...] = ()
    needs_vectors = False
    key_variables = ("FIXTURE_LEAKY_LOGIN",)

    def __init__(self, settings: object) -> None:
        self.login = os.environ["FIXTURE_LEAKY_LOGIN"]

    def rank(self, context: Context) -> list[Ranking]:
        if self.login:
            raise RuntimeError(f"engine refused login {self.login!r}")
        return [Ranking(np.array([0]), np.array([1.0])) for _ in context.dataset.questions]


def test_a_methods_traceback_hides_its_declared_key_variable(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FIXTURE_LEAKY_LOGIN", KEY)
    monkeypatch.chdir(tmp_path)
    code = main(["--dataset", str(DEMO_DATA), "--methods", "bm25,test_message_redaction:LeakyLogin", "--live"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.splitlines()[0] == (
        "error: RuntimeError: engine refused login '$FIXTURE_LEAKY_LOGIN' (raised by method 'leaky')"
    )
    assert "Traceback (most recent call last):" in err and _pieces(err) == []
