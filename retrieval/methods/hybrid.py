"""Hybrid retrieval: reciprocal rank fusion of first-stage rankings (bm25 and vector by default)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from retrieval.config import Settings
from retrieval.data.dataset import Dataset
from retrieval.measures.fusion import DEFAULT_RRF_K, reciprocal_rank_fusion
from retrieval.methods.base import Context
from retrieval.methods.bm25 import BM25Method
from retrieval.methods.vector import cosine_rankings
from retrieval.run.ranking import Ranking

__all__ = ["HybridMethod", "HybridSearch", "factory"]


class HybridMethod:
    """Fuses the rankings of `inputs` with RRF (k = 60 by default)."""

    name = "hybrid"
    needs_vectors = False

    def __init__(
        self,
        inputs: Sequence[str] = ("bm25", "vector"),
        rrf_k: int = DEFAULT_RRF_K,
        weights: Sequence[float] | None = None,
    ) -> None:
        if len(inputs) < 2:
            raise ValueError(f"hybrid fuses at least two methods, got {list(inputs)}")
        self.requires: tuple[str, ...] = tuple(inputs)
        self.rrf_k = rrf_k
        self.weights = tuple(weights) if weights else None

    @property
    def config(self) -> dict[str, Any]:
        """Recorded in the baseline configuration: changing the fusion changes the figures."""
        own: dict[str, Any] = {"inputs": list(self.requires), "rrf_k": self.rrf_k}
        return {**own, "weights": list(self.weights)} if self.weights else own

    def rank(self, context: Context) -> list[Ranking]:
        """One fused ranking per question from the inputs' rankings in the context."""
        n = len(context.dataset.documents)
        return [
            reciprocal_rank_fusion(lists, n, k=self.rrf_k, depth=context.depth, weights=self.weights)
            for lists in zip(*(context.rankings[m] for m in self.requires), strict=True)
        ]


def factory(settings: Settings, *, replay: bool = False) -> HybridMethod:
    """The built-in hybrid method with the settings' inputs and RRF constant."""
    return HybridMethod(settings.hybrid_inputs, settings.rrf_k, settings.hybrid_weights or None)


class HybridSearch:
    """bm25 and cosine fused with RRF over texts and vectors a method prepared itself (rewritten
    questions, enriched documents), with the bm25 method's own k1 and b, so its rows compare
    with the built-in hybrid's."""

    def __init__(self, bm25: BM25Method | None = None, rrf_k: int = DEFAULT_RRF_K) -> None:
        self.bm25 = bm25 or BM25Method()
        self.rrf_k = rrf_k

    @classmethod
    def from_settings(cls, settings: Settings) -> HybridSearch:
        """The search the settings describe (rrf_k, bm25_k1, bm25_b, language)."""
        return cls(BM25Method(k1=settings.bm25_k1, b=settings.bm25_b, language=settings.language), settings.rrf_k)

    @property
    def config(self) -> dict[str, Any]:
        """What changes its rankings, for the configuration of the method that uses it."""
        return {
            "inputs": ["bm25", "vector"],
            "rrf_k": self.rrf_k,
            **{f"bm25_{key}": value for key, value in self.bm25.config.items()},
        }

    def rank(
        self,
        dataset: Dataset,
        question_vectors: np.ndarray,
        document_vectors: np.ndarray,
        depth: int,
        statuses: Sequence[str],
    ) -> list[Ranking]:
        """One fused ranking per question of `dataset`, each with its status."""
        lexical = self.bm25.rank(Context(dataset=dataset, depth=depth))
        dense = cosine_rankings(question_vectors, document_vectors, depth)
        n = len(dataset.documents)
        rankings = []
        for b, v, status in zip(lexical, dense, statuses, strict=True):
            fused = reciprocal_rank_fusion([b, v], n, k=self.rrf_k, depth=depth)
            rankings.append(Ranking(fused.indices, fused.scores, status))
        return rankings
