"""Rerank APIs over HTTP: a query and the candidate texts in, each text's relevance score out.

One client for every service of retrieval.config.rerank_services (Cohere, Jina, Voyage and
Mixedbread hosted; text-embeddings-inference, vLLM, llama.cpp and Infinity self-hosted): the
service's record names the fields, this module sends and reads them. Bodies are serialised
deterministically by `post_json_value` (cassettes match them byte for byte). What the answer
bills is counted as the service bills it: Cohere's search units, the others' tokens; TEI's answer
holds no count (its x-compute-tokens header is dropped from cassettes, as every header named like
a token is), so only its calls count.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from retrieval.config.profile_checks import rerank_api as check
from retrieval.config.rerank_services import SERVICES, RerankService
from retrieval.config.settings import Profile
from retrieval.providers.base import ProviderError
from retrieval.providers.http import HTTPProvider, post_json_value

__all__ = ["RerankAPI", "check", "key_variable", "read_results"]


def key_variable(profile: Profile) -> str:
    """The variable holding the profile's rerank API key ("" when it uses none)."""
    settings = profile.rerank_api
    if settings.api_key_env is not None:
        return settings.api_key_env
    return SERVICES[settings.service].key_variable if settings.service in SERVICES else ""


def _count(data: Any, path: Sequence[str]) -> int:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, int) and not isinstance(data, bool) and data >= 0 else 0


def read_results(data: Any, service: RerankService, count: int, what: str) -> list[tuple[int, float]]:
    """The (index, score) pairs of an answer over `count` texts, best first (ties: the lower index,
    the candidate source's order). An answer may leave texts out (a server that cuts at top_n);
    an index outside the texts, one given twice or a score that is not a finite number makes the
    answer unusable: ProviderError "bad answer" (or "empty" when it scores nothing)."""
    results = data if service.results is None else data.get(service.results) if isinstance(data, dict) else None
    if not isinstance(results, list):
        where = "a list" if service.results is None else f'a "{service.results}" list'
        raise ProviderError(f"{what}: the answer is not {where}", "bad answer")
    if not results and count:
        raise ProviderError(f"{what}: the answer scores no text", "empty")
    pairs: dict[int, float] = {}
    for item in results:
        index = item.get("index") if isinstance(item, dict) else None
        score = item.get(service.score) if isinstance(item, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count or index in pairs:
            raise ProviderError(
                f"{what}: a result's index {index!r} is not one of the {count} texts, once", "bad answer"
            )
        if not isinstance(score, int | float) or isinstance(score, bool) or not math.isfinite(score):
            raise ProviderError(f"{what}: the result of text {index} has no finite {service.score!r}", "bad answer")
        pairs[index] = float(score)
    return sorted(pairs.items(), key=lambda pair: (-pair[1], pair[0]))


class RerankAPI(HTTPProvider):
    """A rerank API as the profile's `rerank_api` group names it: `rerank(query, texts)`.

    Live, the key comes from the service's variable (COHERE_API_KEY, JINA_API_KEY, VOYAGE_API_KEY,
    MXBAI_API_KEY)
    or the group's `api_key_env`, sent as a Bearer token; a self-hosted server takes none unless
    one is named. In replay no key is needed or sent. `client` lets callers share one httpx.Client.
    """

    provider = "rerank_api"

    def _configure(self, profile: Profile) -> tuple[str, str]:
        settings = profile.rerank_api
        if not settings.configured or settings.service not in SERVICES:
            raise ValueError(f"profile {profile.name!r}: no rerank API (rerank_api_service, rerank_api_model)")
        self.service = SERVICES[settings.service]
        self.model = str(settings.model)
        self.url = settings.url or self.service.url
        self.key_variable = key_variable(profile)
        return self.key_variable, f"{self.service.name} rerank"

    def body(self, query: str, texts: Sequence[str]) -> dict[str, Any]:
        """The request for one query: every text scored (top_n, or Voyage's top_k, is their count)."""
        body: dict[str, Any] = {"query": query, self.service.documents: list(texts), **self.service.extra}
        if self.service.sends_model:
            body["model"] = self.model
        if self.service.top_n:
            body[self.service.top_n] = len(texts)
        return body

    def rerank(self, query: str, texts: Sequence[str]) -> list[tuple[int, float]]:
        """(index into `texts`, relevance score) pairs, best first; ProviderError when the call fails
        or its answer cannot be read."""
        what = f"{self.service.name} rerank {self.model}"
        started = time.perf_counter()
        try:
            data = post_json_value(
                self._client, self.url, self.body(query, texts), headers=self._headers, retry=self._retry, what=what
            )
        except ProviderError:
            # A failed call still cost a request and wall time; what it billed is unknown.
            self.usage.add(1, seconds=time.perf_counter() - started)
            raise
        billed = _count(data, self.service.usage) if self.service.usage else 0
        self.usage.add(
            1,
            input_tokens=billed if self.service.billing == "tokens" else 0,
            search_units=billed if self.service.billing == "search_units" else 0,
            seconds=time.perf_counter() - started,
        )
        return read_results(data, self.service, len(texts), what)
