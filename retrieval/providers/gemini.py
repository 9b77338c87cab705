"""Gemini embeddings and generation through the pinned google-genai SDK (sync client).

Measured facts this module relies on (google-genai 3.3.0, see
shared/reference/gemini-and-vcr.md):
- the API version is set explicitly ("v1") so cassette URLs do not move with the SDK;
- the SDK neither retries nor times out by default: both are set here, retries only
  for live calls (a replayed request is answered or missing, never transient);
- for "gemini-embedding-2" the SDK merges a list of plain strings into ONE content
  (one multimodal embedding), so texts are passed as one `Content` each;
- the SDK does not normalise vectors, and the API refuses more than 100 texts per call.

The sync client is used from worker threads; `client.aio` would switch to aiohttp
when installed and record different cassettes.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import numpy as np

from retrieval.config.profile_checks import DEFAULT_DIMENSIONS, MAX_BATCH
from retrieval.config.profile_checks import gemini_embeddings as check_embeddings
from retrieval.config.profile_checks import gemini_llm as check_llm
from retrieval.config.settings import Profile
from retrieval.providers.base import (
    Kind,
    MissingKeyError,
    ProviderError,
    ReplayMissError,
    ShortAnswer,
    normalize,
)
from retrieval.providers.http import RetryPolicy, is_replay_miss, tls_context
from retrieval.run.cost import Usage

__all__ = [
    "API_VERSION",
    "DEFAULT_DIMENSIONS",
    "KEY_VARIABLES",
    "MAX_BATCH",
    "GeminiEmbeddings",
    "GeminiGenerator",
    "check_embeddings",
    "check_llm",
    "gemini_api_key",
]

API_VERSION = "v1"
# In the SDK's order of precedence, for the error message.
KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
# Replays never reach a server (vcrpy answers or refuses), but Client() wants a key.
REPLAY_KEY = "replay-no-key"
TASK_TYPES: dict[str, str] = {"document": "RETRIEVAL_DOCUMENT", "query": "RETRIEVAL_QUERY"}
# Finish reasons that mean the model refused or was stopped by a filter, not that it answered.
BLOCKING_FINISH_REASONS = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "LANGUAGE",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "MODEL_ARMOR",
    }
)

try:  # google-genai's sync client uses httpx2 when installed: its exceptions are not httpx's.
    import httpx2

    _TIMEOUTS: tuple[type[BaseException], ...] = (httpx.TimeoutException, httpx2.TimeoutException)
    _TRANSPORT: tuple[type[BaseException], ...] = (httpx.TransportError, httpx2.TransportError)
except ImportError:  # pragma: no cover - depends on the SDK's optional backend
    _TIMEOUTS = (httpx.TimeoutException,)
    _TRANSPORT = (httpx.TransportError,)


def gemini_api_key(environ: Mapping[str, str] | None = None) -> str | None:
    """The key the SDK itself would pick: GOOGLE_API_KEY wins over GEMINI_API_KEY; empty is none."""
    environ = os.environ if environ is None else environ
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY"):
        value = environ.get(name, "").strip()
        if value:
            return value
    return None


def _server_root(base_url: str) -> str | None:
    # The SDK appends /v1 itself; accept the OpenAI-style ".../v1" form too, so one URL
    # shape works for every provider of a profile.
    url = base_url.strip().rstrip("/")
    if not url:
        return None
    return url.removesuffix(f"/{API_VERSION}") or None


def _make_client(base_url: str, timeout: float, replay: bool, retry: RetryPolicy) -> Any:
    """One google-genai client per provider object: building one costs 50-110 ms."""
    from google import genai
    from google.genai import types

    if replay:
        key = REPLAY_KEY
    else:
        found = gemini_api_key()
        if found is None:
            raise MissingKeyError(list(KEY_VARIABLES), "gemini")
        key = found
    retry_options = types.HttpRetryOptions(
        attempts=1 if replay else max(1, retry.attempts),
        initial_delay=retry.backoff,
        max_delay=retry.max_wait,
        # The SDK's default jitter is 1 s whatever the backoff; scale it with the backoff.
        jitter=retry.backoff,
    )
    options = types.HttpOptions(
        api_version=API_VERSION,
        timeout=max(1, round(timeout * 1000)),
        retry_options=retry_options,
        base_url=_server_root(base_url),
        # The SDK loads the certificate store two or three times per client otherwise.
        client_args={"verify": tls_context()},
        async_client_args={"verify": tls_context(), "ssl": tls_context()},
    )
    # vertexai=False: this provider is the Gemini Developer API whatever
    # GOOGLE_GENAI_USE_VERTEXAI says; only this client is affected.
    return genai.Client(api_key=key, vertexai=False, http_options=options)


def _translate(exc: Exception, what: str) -> ProviderError | None:
    """The ProviderError a failed SDK call stands for; None for bugs (not outages)."""
    from google.genai import errors

    if is_replay_miss(exc):
        return ReplayMissError(f"no recorded answer for {what}", "replay miss")
    if isinstance(exc, errors.APIError):
        detail = (exc.message or "").replace("\n", " ")[:300]
        return ProviderError(
            f"{what} -> HTTP {exc.code} {exc.status or ''}: {detail}".rstrip(": "),
            f"http {exc.code}",
        )
    if isinstance(exc, _TIMEOUTS):
        return ProviderError(f"{what} timed out", "timeout")
    if isinstance(exc, _TRANSPORT):
        return ProviderError(f"{what} failed: {type(exc).__name__}", "connect")
    if isinstance(exc, json.JSONDecodeError):
        return ProviderError(f"{what} answered with invalid JSON", "bad json")
    return None


class _GeminiBase:
    provider = "gemini"
    model: str
    usage: Usage
    _client: Any

    def _call(self, what: str, func: Any, **kwargs: Any) -> tuple[Any, float]:
        """Run one SDK call; return its response and wall seconds, or raise a ProviderError."""
        started = time.perf_counter()
        try:
            return func(**kwargs), time.perf_counter() - started
        except Exception as exc:
            # A failed call still cost a request and wall time; tokens are unknown.
            self.usage.add(1, seconds=time.perf_counter() - started)
            translated = _translate(exc, what)
            if translated is None:
                raise
            raise translated from exc

    def close(self) -> None:
        """Release the SDK client's connections."""
        close = getattr(self._client, "close", None)
        if close is not None:
            close()


class GeminiEmbeddings(_GeminiBase):
    """EmbeddingProvider over `models.embed_content` (batchEmbedContents), unit vectors out.

    `dimensions` is the profile's (768 when unset), sent as output_dimensionality;
    `batch_size` never exceeds the API's 100 texts per call.
    """

    def __init__(self, profile: Profile, *, replay: bool = False, retry: RetryPolicy | None = None) -> None:
        settings = profile.embeddings
        self.model = settings.model
        if not self.model:
            raise ValueError(f"profile {profile.name!r}: embedding_model is empty")
        self.dimensions = settings.dimensions or DEFAULT_DIMENSIONS
        self.batch_size = min(settings.batch_size or MAX_BATCH, MAX_BATCH)
        self.usage = Usage()
        self._client = _make_client(
            settings.base_url, profile.retries.timeout, replay, retry or RetryPolicy.for_profile(profile)
        )

    def embed(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        """Embed up to 100 texts in one call, as documents or queries; rows are unit vectors."""
        from google.genai import types

        if len(texts) > MAX_BATCH:
            raise ValueError(f"Gemini embeds at most {MAX_BATCH} texts per call, got {len(texts)}: batch them")
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        what = f"gemini {self.model}:batchEmbedContents ({len(texts)} {kind}s)"
        config = types.EmbedContentConfig(task_type=TASK_TYPES[kind], output_dimensionality=self.dimensions)
        contents = [types.Content(parts=[types.Part(text=text)], role="user") for text in texts]
        response, seconds = self._call(
            what,
            self._client.models.embed_content,
            model=self.model,
            contents=contents,
            config=config,
        )
        tokens = getattr(response.usage_metadata, "prompt_token_count", None) or 0
        self.usage.add(1, input_tokens=int(tokens), seconds=seconds)
        embeddings = response.embeddings or []
        if len(embeddings) != len(texts):
            raise ProviderError(f"{what} returned {len(embeddings)} vectors for {len(texts)} texts", "bad answer")
        try:
            vectors = np.asarray([e.values for e in embeddings], dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise ProviderError(f"{what} returned vectors of unequal or missing length", "bad answer") from exc
        if vectors.ndim != 2 or vectors.shape[1] != self.dimensions:
            raise ProviderError(
                f"{what} returned vectors of shape {vectors.shape}, expected {self.dimensions} dimensions",
                "bad answer",
            )
        return normalize(vectors, texts, kind)


class GeminiGenerator(_GeminiBase):
    """GenerationProvider over `models.generate_content`: temperature 0, schema-constrained JSON."""

    def __init__(self, profile: Profile, *, replay: bool = False, retry: RetryPolicy | None = None) -> None:
        if not profile.llm.model:
            raise ValueError(f"profile {profile.name!r}: rerank_model is empty")
        self.model = profile.llm.model
        self.usage = Usage()
        self._client = _make_client(
            profile.llm.base_url, profile.retries.timeout, replay, retry or RetryPolicy.for_profile(profile)
        )

    def generate_json(self, prompt: str, schema: Mapping[str, Any], schema_name: str) -> str:
        """Return the raw JSON text of one answer; ProviderError "blocked"/"empty" if there is none.

        `schema` is a plain JSON-schema dict, sent as responseSchema without its
        `additionalProperties` keys; `schema_name` is only used by OpenAI-style
        endpoints and is ignored here.
        """
        from google.genai import types

        what = f"gemini {self.model}:generateContent"
        config = types.GenerateContentConfig(
            temperature=0.0,
            response_mime_type="application/json",
            response_schema=_gemini_schema(schema),
        )
        return self._text(self._generate(what, prompt, config), what)

    def generate_short(self, prompt: str, top_logprobs: int) -> ShortAnswer:
        """A short answer with the `top_logprobs` likeliest first tokens (`responseLogprobs`), where
        the model returns them: a model without log-probabilities gives the text alone."""
        from google.genai import types

        what = f"gemini {self.model}:generateContent"
        config = types.GenerateContentConfig(temperature=0.0, response_logprobs=True, logprobs=top_logprobs)
        response = self._generate(what, prompt, config)
        text = self._text(response, what)
        result = response.candidates[0].logprobs_result if response.candidates else None
        top = (result.top_candidates or []) if result is not None else []
        first = (top[0].candidates or []) if top else []
        found = {
            c.token: float(c.log_probability)
            for c in first
            if isinstance(c.token, str) and isinstance(c.log_probability, int | float)
        }
        return ShortAnswer(text, found or None)

    def _generate(self, what: str, prompt: str, config: Any) -> Any:
        """One generateContent call, its usage counted."""
        response, seconds = self._call(
            what,
            self._client.models.generate_content,
            model=self.model,
            contents=prompt,
            config=config,
        )
        meta = response.usage_metadata
        # Thinking tokens are billed as output: count them with the answer's tokens.
        output = (getattr(meta, "candidates_token_count", None) or 0) + (
            getattr(meta, "thoughts_token_count", None) or 0
        )
        self.usage.add(
            1,
            input_tokens=int(getattr(meta, "prompt_token_count", None) or 0),
            output_tokens=int(output),
            seconds=seconds,
        )
        return response

    def _text(self, response: Any, what: str) -> str:
        """The answer's text; ProviderError "blocked"/"empty" when there is none."""
        feedback = response.prompt_feedback
        if feedback is not None and feedback.block_reason:
            raise ProviderError(f"{what}: prompt blocked ({_name(feedback.block_reason)})", "blocked")
        candidates = response.candidates or []
        if not candidates:
            raise ProviderError(f"{what}: no candidate in the answer", "empty")
        finish = _name(candidates[0].finish_reason)
        if finish in BLOCKING_FINISH_REASONS:
            raise ProviderError(f"{what}: answer stopped ({finish})", "blocked")
        content = candidates[0].content
        text = "".join(part.text for part in (content.parts or []) if part.text and not part.thought) if content else ""
        if not text.strip():
            raise ProviderError(f"{what}: empty answer (finish reason {finish or 'none'})", "empty")
        return text


def _gemini_schema(schema: Any) -> Any:
    """The schema without `additionalProperties`, recursively.

    OpenAI's strict mode requires that key; Gemini's responseSchema is an OpenAPI
    subset whose constrained decoding never adds undeclared properties, and whether
    the v1 API accepts the key could not be checked without a key, so it is not sent.
    """
    if isinstance(schema, Mapping):
        return {k: _gemini_schema(v) for k, v in schema.items() if k != "additionalProperties"}
    if isinstance(schema, list):
        return [_gemini_schema(v) for v in schema]
    return schema


def _name(value: Any) -> str:
    # SDK enums, or plain strings for values newer than the pinned SDK.
    return str(getattr(value, "value", value) or "")
