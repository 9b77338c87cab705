"""The reranker over query rewriting's candidates: the seed's full remedy chain.

The same listwise reranking as `rerank` (same prompt, same degraded mode: a failed call keeps
rewrite's order), reading the top `candidates` of `rewrite` instead of `hybrid`. The model
reads the user's original question: rewriting only widens what reaches it. Its calls have
their own cassette (`rewrite_rerank-<model>`).
"""

from __future__ import annotations

from retrieval.config import Settings
from retrieval.methods.rerank import RerankMethod
from retrieval.methods.support.llm import channel_for, generator_or_unavailable
from retrieval.providers.base import GenerationProvider

__all__ = ["RewriteRerankMethod", "factory"]


class RewriteRerankMethod(RerankMethod):
    """RerankMethod over `rewrite`, with its own name and cassette."""

    name = "rewrite_rerank"

    def __init__(self, generator: GenerationProvider, candidates: int = 20, workers: int = 8) -> None:
        super().__init__(generator, candidates=candidates, workers=workers, source="rewrite")
        self.channel = channel_for("rewrite_rerank", generator.model)


def factory(settings: Settings, *, replay: bool = False) -> RewriteRerankMethod:
    """The reranker over rewrite; unavailable without an LLM, or in replay when not recorded."""
    generator = generator_or_unavailable(settings, replay, "rewrite_rerank", "rewrite_rerank")
    return RewriteRerankMethod(generator, candidates=settings.candidates, workers=settings.profile.llm.workers)
