"""Reranking by a rerank API (Cohere, Jina, Voyage, Mixedbread, or a self-hosted TEI, vLLM,
llama.cpp or Infinity server): the top `candidates` of hybrid scored against the question in one call, reordered by
score; the rest of the hybrid ranking follows (retrieval.methods.support.reranking).

The API is the profile's `rerank_api` group (retrieval.config.rerank_services lists the services).
Its calls go to their own cassette, one per service and model (`rerank_api-cohere-rerank-v3.5`),
recorded and replayed like every HTTP call. A failed call (an HTTP error after retries, a timeout,
an answer that names an unknown text) keeps that question's hybrid order, "degraded: <reason>".
What it costs is priced by the model's entry in the price table: `search_unit` for Cohere, which
bills search units, `input` (per million tokens) for the token-billed services.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from retrieval.config import Settings
from retrieval.methods.support.llm import channel_for
from retrieval.methods.support.reranking import CandidateReranker
from retrieval.providers.base import ProviderError, RerankProvider
from retrieval.run.cost import Usage

if TYPE_CHECKING:
    from retrieval.data.dataset import Document, Question

__all__ = ["RerankAPIMethod", "factory"]


class RerankAPIMethod(CandidateReranker):
    """Reorders the top candidates of another method (hybrid by default) by a rerank API's scores;
    ties keep the source's order. `service` names the API in the cassette and the configuration."""

    name = "rerank_api"

    def __init__(
        self,
        reranker: RerankProvider,
        service: str,
        candidates: int = 20,
        workers: int = 8,
        source: str = "hybrid",
        key_variables: Sequence[str] = (),
    ) -> None:
        super().__init__(candidates, workers, source)
        self.reranker = reranker
        self.service = service
        self.model = reranker.model
        self.cost_model = reranker.model
        self.channel = channel_for("rerank_api", f"{service}-{reranker.model}")
        self.key_variables = tuple(k for k in key_variables if k)

    @property
    def usage(self) -> Usage:
        return self.reranker.usage

    @property
    def config(self) -> dict[str, object]:
        """Recorded in the baseline configuration."""
        return {"service": self.service, "model": self.model, "candidates": self.candidates}

    def order(self, question: Question, pool: Sequence[Document]) -> list[int]:
        """The pool by the API's scores, best first; candidates it did not score follow in their order."""
        scored = [index for index, _ in self.reranker.rerank(question.text, [d.content for d in pool])]
        if not scored:
            raise ProviderError(f"{self.service} rerank {self.model}: the answer scores no candidate", "empty")
        rest = sorted(set(range(len(pool))) - set(scored))
        return [*scored, *rest]


def factory(settings: Settings, *, replay: bool = False) -> RerankAPIMethod:
    """The profile's rerank API over hybrid's candidates; unavailable when the profile names none."""
    from retrieval.methods.base import MethodUnavailable
    from retrieval.providers.rerank_api import RerankAPI, key_variable

    api = settings.profile.rerank_api
    if not api.configured:
        raise MethodUnavailable(
            f"profile {settings.profile.name!r} has no rerank API (set rerank_api_service and rerank_api_model)"
        )
    return RerankAPIMethod(
        RerankAPI(settings.profile, replay=replay),
        str(api.service),
        candidates=settings.candidates,
        workers=api.workers,
        key_variables=(key_variable(settings.profile),),
    )
