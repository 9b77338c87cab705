"""Local fake model servers for keyless tests. Their answers are test fixtures, never a baseline.

`FakeGeminiServer` answers the two Gemini endpoints the SDK calls
(`POST /v1/models/{model}:batchEmbedContents` and `:generateContent`);
`FakeOpenAIServer` answers `POST /v1/chat/completions`. Both listen on 127.0.0.1
only, on a free port, in a daemon thread, and are stopped by `stop()` (or leaving
the `with` block), which also wakes any request sleeping in a fault.

Behaviour is scripted per request: `script(*acts)` queues one `Act` per coming
request (429 then success, a 500, a sleep past the client's timeout, malformed
JSON, a chosen model answer, a blocked or empty answer); when the queue is empty
the server gives its default fixture answer. Fixture answers are deterministic
functions of the request: embeddings are seeded by the text, and the default
reranking is the candidate ids shuffled by a hash of the prompt, so an answer
delivered to the wrong request would show.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any, Self, TypeVar

from loopback_http import LoopbackHTTPServer

from retrieval.config import Profile, flat_profile
from retrieval.providers.http import RetryPolicy
from retrieval.run.cost import Usage

_T = TypeVar("_T")

if TYPE_CHECKING:
    import pytest

__all__ = [
    "FAST_RETRY",
    "FIXTURE_KEY",
    "SHORT_TIMEOUT",
    "TIMEOUT",
    "Act",
    "FakeGeminiServer",
    "FakeOpenAIServer",
    "RecordedRequest",
    "clean_gemini_env",
    "fixture_vector",
    "gemini_profile",
    "openai_profile",
    "prompt_candidate_ids",
    "shuffled_ranking",
    "with_fixture_key",
]

# Tiny backoff and timeouts keep fault tests fast; two attempts show the retry.
FAST_RETRY = RetryPolicy(attempts=2, backoff=0.01, max_wait=0.05)
TIMEOUT = 0.3
# Only for calls meant to time out: a shorter wait keeps the suite fast.
SHORT_TIMEOUT = 0.05
FIXTURE_KEY = "fixture-gemini-key"
# Environment switches that would send the SDK elsewhere (Vertex AI, another URL or version).
SDK_ENV = (
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_GENAI_USE_ENTERPRISE",
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_GENAI_API_VERSION",
    "GOOGLE_GENAI_HTTP_CLIENT",
)

# Upper bound of any sleep, so a forgotten fault cannot hang a test run.
MAX_SLEEP = 5.0
_CANDIDATE_LINE = re.compile(r"^\[\d+\] id: (.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Act:
    """What the server does for one request (see the named constructors)."""

    kind: str = "default"
    status: int = 200
    seconds: float = 0.0
    text: str = ""

    @classmethod
    def http(cls, status: int) -> Act:
        """Answer with this HTTP status and an API-style error body."""
        return cls("status", status=status)

    @classmethod
    def sleep(cls, seconds: float) -> Act:
        """Wait (past the client's timeout, typically), then give the default answer."""
        return cls("sleep", seconds=seconds)

    @classmethod
    def malformed(cls) -> Act:
        """HTTP 200 whose body is not JSON."""
        return cls("malformed")

    @classmethod
    def answer(cls, text: str) -> Act:
        """A normal answer whose model text is `text` (bad JSON, unknown ids, a partial list...)."""
        return cls("answer", text=text)

    @classmethod
    def blocked(cls) -> Act:
        """A safety-blocked answer (Gemini: finishReason SAFETY; OpenAI: content_filter)."""
        return cls("blocked")

    @classmethod
    def prompt_blocked(cls) -> Act:
        """Gemini only: the prompt itself is blocked (promptFeedback.blockReason, no candidate)."""
        return cls("prompt_blocked")

    @classmethod
    def empty(cls) -> Act:
        """An answer with empty text."""
        return cls("empty")


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: Any


def fixture_vector(text: str, dimensions: int) -> list[float]:
    """The fixture embedding of a text: seeded by its hash, deliberately not unit length."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
    rng = random.Random(seed)
    return [round(rng.uniform(-3.0, 3.0), 6) for _ in range(dimensions)]


def prompt_candidate_ids(prompt: str) -> list[str]:
    """The candidate ids listed in a rendered rerank prompt, in prompt order."""
    return _CANDIDATE_LINE.findall(prompt)


def shuffled_ranking(prompt: str) -> str:
    """Default fixture reranking: the prompt's candidate ids ordered by a hash of (prompt, id)."""
    ids = prompt_candidate_ids(prompt)
    digest = hashlib.sha256(prompt.encode("utf-8")).hexdigest()
    ids.sort(key=lambda i: hashlib.sha256(f"{digest}:{i}".encode()).hexdigest())
    return json.dumps({"ranking": ids})


class _FakeServer:
    """Shared machinery: scripted acts, recorded requests, lifecycle."""

    def __init__(
        self,
        *,
        latency: float | Callable[[bytes], float] = 0.0,
        answer: Callable[[str], str] = shuffled_ranking,
    ) -> None:
        self.latency = latency
        self.answer_for = answer
        self.requests: list[RecordedRequest] = []
        self._acts: deque[Act] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: LoopbackHTTPServer | None = None

    # lifecycle ---------------------------------------------------------------
    def start(self) -> Self:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                owner._handle(self)

            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                pass

        self._stopping.clear()
        self._httpd = LoopbackHTTPServer(Handler)
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes sleeping faults
        if self._httpd is not None:
            self._httpd.stop()
        self._httpd = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Server root, e.g. http://127.0.0.1:12345 (no API version)."""
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.port}"

    # scripting ---------------------------------------------------------------
    def script(self, *acts: Act) -> None:
        """Queue one act per coming request, in arrival order."""
        with self._lock:
            self._acts.extend(acts)

    def reset(self) -> None:
        """Forget scripted acts, recorded requests and latency (between tests sharing a server)."""
        with self._lock:
            self._acts.clear()
            self.requests.clear()
        self.latency = 0.0
        self.answer_for = shuffled_ranking

    @property
    def pending_acts(self) -> int:
        with self._lock:
            return len(self._acts)

    # request handling ------------------------------------------------------------
    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        with self._lock:
            self.requests.append(
                RecordedRequest(handler.path, {k.lower(): v for k, v in handler.headers.items()}, body)
            )
            act = self._acts.popleft() if self._acts else Act()
        delay = self.latency(raw) if callable(self.latency) else self.latency
        if act.kind == "sleep":
            delay += act.seconds
        if delay > 0 and self._stopping.wait(min(delay, MAX_SLEEP)):
            return  # shutting down: drop the request
        if act.kind == "status":
            status, payload = act.status, json.dumps(self._error(act.status)).encode()
        elif act.kind == "malformed":
            status, payload = 200, b'{"candidates": [ this is not json'
        else:
            status, result = self._route(handler.path, body, act)
            payload = json.dumps(result).encode()
        try:
            handler.send_response(status)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout): expected in fault tests

    def _error(self, status: int) -> dict[str, Any]:
        return {"error": {"code": status, "message": f"fixture error {status}", "status": "FIXTURE"}}

    def _route(self, path: str, body: Any, act: Act) -> tuple[int, dict[str, Any]]:
        raise NotImplementedError


class FakeGeminiServer(_FakeServer):
    """Test fixture standing in for the Gemini API (v1 batchEmbedContents and generateContent)."""

    _PATH = re.compile(r"^/v1/models/([^/:]+):(batchEmbedContents|generateContent)$")

    def _route(self, path: str, body: Any, act: Act) -> tuple[int, dict[str, Any]]:
        match = self._PATH.match(path)
        if not match or not isinstance(body, dict):
            return 404, self._error(404)
        model, method = match.groups()
        if method == "batchEmbedContents":
            return 200, self._embed(body)
        return 200, self._generate(model, body, act)

    def _embed(self, body: dict[str, Any]) -> dict[str, Any]:
        embeddings, tokens = [], 0
        for request in body.get("requests", []):
            text = "".join(p.get("text", "") for p in request["content"]["parts"])
            tokens += len(text.split())
            embeddings.append({"values": fixture_vector(text, int(request.get("outputDimensionality") or 768))})
        return {"embeddings": embeddings, "usageMetadata": {"promptTokenCount": tokens}}

    def _generate(self, model: str, body: dict[str, Any], act: Act) -> dict[str, Any]:
        prompt = "".join(p.get("text", "") for c in body.get("contents", []) for p in c.get("parts", []))
        usage = {"promptTokenCount": len(prompt) // 4 + 1}
        if act.kind == "prompt_blocked":
            return {
                "promptFeedback": {"blockReason": "SAFETY"},
                "usageMetadata": usage,
                "modelVersion": model,
            }
        if act.kind == "blocked":
            candidate: dict[str, Any] = {
                "finishReason": "SAFETY",
                "safetyRatings": [
                    {
                        "category": "HARM_CATEGORY_DANGEROUS_CONTENT",
                        "probability": "HIGH",
                        "blocked": True,
                    }
                ],
            }
            return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model}
        text = act.text if act.kind == "answer" else "" if act.kind == "empty" else self.answer_for(prompt)
        usage["candidatesTokenCount"] = len(text) // 4 + 1
        usage["totalTokenCount"] = usage["promptTokenCount"] + usage["candidatesTokenCount"]
        candidate = {
            "content": {"parts": [{"text": text}], "role": "model"},
            "finishReason": "STOP",
            "index": 0,
        }
        return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model}


class FakeOpenAIServer(_FakeServer):
    """Test fixture standing in for an OpenAI-compatible chat completions server."""

    def _route(self, path: str, body: Any, act: Act) -> tuple[int, dict[str, Any]]:
        if path != "/v1/chat/completions" or not isinstance(body, dict):
            return 404, self._error(404)
        prompt = "".join(str(m.get("content", "")) for m in body.get("messages", []))
        content: str | None
        finish = "stop"
        if act.kind == "blocked":
            content, finish = None, "content_filter"
        elif act.kind == "empty":
            content = ""
        elif act.kind == "answer":
            content = act.text
        else:
            content = self.answer_for(prompt)
        prompt_tokens = len(prompt) // 4 + 1
        completion_tokens = len(content or "") // 4
        return 200, {
            "id": "chatcmpl-fixture",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


def clean_gemini_env(mp: pytest.MonkeyPatch, key: str | None = FIXTURE_KEY) -> None:
    """Clear the SDK's environment switches and both key variables, then set the fixture key."""
    for name in (*SDK_ENV, "GOOGLE_API_KEY", "GEMINI_API_KEY"):
        mp.delenv(name, raising=False)
    if key is not None:
        mp.setenv("GEMINI_API_KEY", key)


def with_fixture_key(build: Callable[[], _T]) -> _T:
    """Build a provider with only the fixture key in the SDK's environment (for module-scoped
    fixtures, which cannot use the function-scoped monkeypatch)."""
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        clean_gemini_env(mp)
        return build()


def gemini_profile(url: str, **overrides: Any) -> Profile:
    """A Gemini profile (embeddings and reranker) pointed at a FakeGeminiServer."""
    values: dict[str, Any] = {
        "embedding_provider": "gemini",
        "embedding_model": "gemini-embedding-2",
        "embedding_base_url": url,
        "dimensions": 8,
        "batch_size": 100,
        "timeout": TIMEOUT,
        "rerank_provider": "gemini",
        "rerank_model": "gemini-3.5-flash",
        "rerank_base_url": url,
    }
    values.update(overrides)
    return flat_profile("fixture-gemini", **values)


def openai_profile(url: str, **overrides: Any) -> Profile:
    """A profile whose reranker is a FakeOpenAIServer (OpenAI-style base URL ending in /v1)."""
    values: dict[str, Any] = {
        "rerank_provider": "openai",
        "rerank_model": "fixture-chat-model",
        "rerank_base_url": url + "/v1",
        "timeout": TIMEOUT,
    }
    values.update(overrides)
    return flat_profile("fixture-openai", **values)


class StubGenerator:
    """FIXTURE GenerationProvider in process: answers with `reply(prompt)`, or raises what it returns."""

    provider = "stub"
    model = "stub-model"

    def __init__(self, reply: Callable[[str], str | BaseException]) -> None:
        self.reply = reply
        self.usage = Usage()
        self.prompts: list[str] = []

    def generate_json(self, prompt: str, schema: Mapping[str, Any], schema_name: str) -> str:
        self.prompts.append(prompt)
        self.usage.add(1, 10, 2)
        answer = self.reply(prompt)
        if isinstance(answer, BaseException):
            raise answer
        return answer
