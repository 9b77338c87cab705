"""Hybrid retrieval: reciprocal rank fusion of the bm25 and vector rankings."""

from __future__ import annotations

from retrieval.fusion import DEFAULT_RRF_K, reciprocal_rank_fusion
from retrieval.methods.base import Context
from retrieval.ranking import Ranking

__all__ = ["HybridMethod"]


class HybridMethod:
    """Fuses bm25 and vector with RRF (k = 60 by default)."""

    name = "hybrid"
    requires: tuple[str, ...] = ("bm25", "vector")
    needs_vectors = False

    def __init__(self, rrf_k: int = DEFAULT_RRF_K) -> None:
        self.rrf_k = rrf_k

    def rank(self, context: Context) -> list[Ranking]:
        n = len(context.dataset.documents)
        return [
            reciprocal_rank_fusion(lists, n, k=self.rrf_k, depth=context.depth)
            for lists in zip(*(context.rankings[m] for m in self.requires), strict=True)
        ]
