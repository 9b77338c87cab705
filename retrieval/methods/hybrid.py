"""Hybrid retrieval: reciprocal rank fusion of first-stage rankings (bm25 and vector by default)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retrieval.config import Settings
from retrieval.fusion import DEFAULT_RRF_K, reciprocal_rank_fusion
from retrieval.methods.base import Context
from retrieval.ranking import Ranking

__all__ = ["HybridMethod", "factory"]


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
