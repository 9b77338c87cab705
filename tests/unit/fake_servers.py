"""Local fake model servers for keyless tests. Their answers are test fixtures, never a baseline.

`FakeGeminiServer` answers the two Gemini endpoints the SDK calls
(`POST /v1/models/{model}:batchEmbedContents` and `:generateContent`);
`FakeOpenAIServer` answers `POST /v1/chat/completions`; `FakeRerankServer(service)` answers one
rerank API's endpoint in that service's own shape (retrieval.config.rerank_services). All listen
on 127.0.0.1 only, on a free port, in a daemon thread, and are stopped by `stop()` (or leaving
the `with` block), which also wakes any request sleeping in a fault.

Behaviour is scripted per request: `script(*acts)` queues one `Act` per coming
request (429 then success, a 500, a sleep past the client's timeout, malformed
JSON, a chosen model answer, a blocked or empty answer); when the queue is empty
the server gives its default fixture answer. Fixture answers are deterministic
functions of the request: embeddings are seeded by the text, and the default
reranking is the candidate ids shuffled by a hash of the prompt, so an answer
delivered to the wrong request would show. A pointwise request (one asking for
`logprobs`, or Gemini's `responseLogprobs`) is answered yes or no with the
first token's alternatives at P(yes) = `fixture_relevance(question, passage)`; a
scripted `Act.answer(text)` answers with the text alone, as a server without
log-probabilities does. The rerank server scores each text with `fixture_relevance`.
"""

from __future__ import annotations

import hashlib
import json
import math
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
from retrieval.config.rerank_services import SERVICES
from retrieval.providers.http import RetryPolicy
from retrieval.run.cost import Usage

_T = TypeVar("_T")

if TYPE_CHECKING:
    import pytest

__all__ = [
    "FAST_RETRY",
    "FIXTURE_KEY",
    "TIMEOUT",
    "UNANSWERED_TIMEOUT",
    "Act",
    "FakeGeminiServer",
    "FakeOpenAIServer",
    "FakeRerankServer",
    "RecordedRequest",
    "clean_gemini_env",
    "fixture_relevance",
    "fixture_vector",
    "gemini_profile",
    "openai_profile",
    "pointwise_parts",
    "prompt_candidate_ids",
    "rerank_profile",
    "shuffled_ranking",
    "with_fixture_key",
]

# Tiny backoff keeps fault tests fast; two attempts show the retry.
FAST_RETRY = RetryPolicy(attempts=2, backoff=0.01, max_wait=0.05)
# The timeout of calls meant to be answered: generous, since no test waits for it. At 0.3 s a
# loaded machine (two xdist workers beside other runs) made the first call of a module time out
# while the fake server had already taken its scripted act: the retry then got the default answer
# and test_gemini.py's first generation test failed about once in five full runs.
TIMEOUT = 10.0
# For a timeout case's call that is never answered (Act.hang()), alone on its client (the other
# calls of a rerank or rewrite case go to another: conftest.py's gemini_first_unanswered): whatever
# the load, the bound can only end in a timeout (in connecting, sending or waiting: each is
# "timeout"), so it can be this short. A bound shared by answered calls cannot: at 0.05 s, and at
# 0.3 s, a loaded machine made one of them time out too (test_rerank.py's [timeout] case).
UNANSWERED_TIMEOUT = 0.05
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
_POINTWISE = re.compile(r"Question:\n(.*?)\n\nPassage:\n(.*?)\n\nDoes the passage", re.DOTALL)
_WORD = re.compile(r"\w+")


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
    def hang(cls) -> Act:
        """Never answer while the test runs: the request is dropped when the server stops (after
        MAX_SLEEP at most, so that a client without a timeout cannot hang the run)."""
        return cls("sleep", seconds=MAX_SLEEP)

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


def fixture_relevance(query: str, text: str) -> float:
    """FIXTURE relevance of a text to a query, in (0, 1): the share of the query's words (4 letters
    or more) the text holds, nudged by a hash of both so that no two texts tie. Deterministic, and
    loosely related to relevance, so reranked figures move; never a model's judgement."""
    words = {w for w in _WORD.findall(query.lower()) if len(w) >= 4}
    held = set(_WORD.findall(text.lower()))
    share = len(words & held) / len(words) if words else 0.0
    jitter = int.from_bytes(hashlib.sha256(f"{query}\0{text}".encode()).digest()[:4], "big") / 2**32
    return round(0.02 + 0.9 * share + 0.05 * jitter, 6)


def pointwise_parts(prompt: str) -> tuple[str, str] | None:
    """The (question, passage) of a rendered pointwise prompt, or None for another prompt."""
    match = _POINTWISE.search(prompt)
    return (match.group(1), match.group(2)) if match else None


def _yes_no(prompt: str) -> tuple[str, list[tuple[str, float]]]:
    """The fixture's pointwise answer and its first token's alternatives (token, log-probability)."""
    parts = pointwise_parts(prompt)
    p = fixture_relevance(*parts) if parts else 0.5
    alternatives = [("Yes", math.log(p)), ("No", math.log(1 - p)), (" yes", math.log(p / 50)), ("The", -9.0)]
    return ("Yes" if p >= 0.5 else "No"), sorted(alternatives, key=lambda a: -a[1])


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

    def _route(self, path: str, body: Any, act: Act) -> tuple[int, Any]:
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
        config = body.get("generationConfig") or {}
        pointwise = bool(config.get("responseLogprobs")) and act.kind == "default"
        if pointwise:
            text, alternatives = _yes_no(prompt)
        else:
            text = act.text if act.kind == "answer" else "" if act.kind == "empty" else self.answer_for(prompt)
        usage["candidatesTokenCount"] = len(text) // 4 + 1
        usage["totalTokenCount"] = usage["promptTokenCount"] + usage["candidatesTokenCount"]
        candidate = {
            "content": {"parts": [{"text": text}], "role": "model"},
            "finishReason": "STOP",
            "index": 0,
        }
        if pointwise:
            top = alternatives[: int(config.get("logprobs") or 0)]
            candidate["logprobsResult"] = {
                "topCandidates": [{"candidates": [{"token": t, "logProbability": lp} for t, lp in top]}],
                "chosenCandidates": [{"token": text, "logProbability": dict(alternatives)[text]}],
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
        logprobs = None
        if act.kind == "blocked":
            content, finish = None, "content_filter"
        elif act.kind == "empty":
            content = ""
        elif act.kind == "answer":
            content = act.text
        elif body.get("logprobs"):
            content, alternatives = _yes_no(prompt)
            top = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in alternatives]
            chosen = {"token": content, "logprob": dict(alternatives)[content], "bytes": list(content.encode())}
            logprobs = {"content": [{**chosen, "top_logprobs": top[: int(body.get("top_logprobs") or 0)]}]}
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
                    "finish_reason": "length" if logprobs else finish,
                    **({"logprobs": logprobs} if logprobs else {}),
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


class FakeRerankServer(_FakeServer):
    """Test fixture standing in for one rerank API (`service`: a name of
    retrieval.config.rerank_services.SERVICES) at that service's path, answering in its own shape:
    Cohere's `results` with `meta.billed_units.search_units`, Jina's and vLLM's with `usage`,
    Voyage's `data`, Mixedbread's `data` scored `score`, TEI's bare list scored `score`, llama.cpp's
    `results` cut to `top_n`, Infinity's `results` with `usage`. Each text scores
    `fixture_relevance(query, text)`; `Act.answer(text)` sends `text` as the whole body."""

    def __init__(self, service: str, **options: Any) -> None:
        super().__init__(**options)
        self.service = SERVICES[service]

    def _route(self, path: str, body: Any, act: Act) -> tuple[int, Any]:
        service = self.service
        if path != service.path or not isinstance(body, dict):
            return 404, self._error(404)
        if act.kind == "answer":
            return 200, json.loads(act.text)
        query, texts = body.get("query", ""), body.get(service.documents) or []
        scored: list[dict[str, Any]] = sorted(
            ({"index": i, service.score: fixture_relevance(query, t)} for i, t in enumerate(texts)),
            key=lambda r: -float(r[service.score]),
        )
        if service.top_n and body.get(service.top_n):
            scored = scored[: int(body[service.top_n])]
        tokens = (len(query) // 4 + 1) * len(texts) + sum(len(t) // 4 + 1 for t in texts)
        if service.name == "tei":
            return 200, scored
        if service.name == "cohere":
            units = max(1, math.ceil(len(texts) / 100))
            meta = {"api_version": {"version": "2", "is_experimental": False}, "billed_units": {"search_units": units}}
            return 200, {"id": "07734bd2-fixture", "results": scored, "meta": meta}
        if service.name == "voyage":
            return 200, {
                "object": "list",
                "data": scored,
                "model": body.get("model"),
                "usage": {"total_tokens": tokens},
            }
        if service.name == "vllm":
            results = [{**r, "document": {"text": texts[int(r["index"])]}} for r in scored]
            usage = {"prompt_tokens": tokens, "total_tokens": tokens}
            return 200, {"id": "rerank-fixture", "model": body.get("model"), "usage": usage, "results": results}
        if service.name == "mixedbread":
            return 200, {
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens, "completion_tokens": None},
                "model": body.get("model"),
                "data": [{**r, "object": "rank_result"} for r in scored],
                "object": "list",
                "top_k": body.get("top_k"),
                "return_input": False,
            }
        if service.name == "infinity":
            usage = {"prompt_tokens": tokens, "total_tokens": tokens}
            return 200, {"object": "rerank", "results": scored, "model": body.get("model"), "usage": usage}
        if service.name == "llamacpp":
            usage = {"prompt_tokens": tokens, "total_tokens": tokens}
            return 200, {"model": body.get("model"), "object": "list", "usage": usage, "results": scored}
        return 200, {"model": body.get("model"), "usage": {"total_tokens": tokens}, "results": scored}  # jina


def rerank_profile(service: str, url: str, **overrides: Any) -> Profile:
    """A profile whose rerank API is `service` at `url` (a FakeRerankServer's endpoint), keyless."""
    values: dict[str, Any] = {
        "rerank_api_service": service,
        "rerank_api_model": "fixture-reranker",
        "rerank_api_url": url,
        "rerank_api_key_env": "",
        "timeout": 10.0,
    }
    values.update(overrides)
    return flat_profile(f"fixture-{service}", **values)


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
