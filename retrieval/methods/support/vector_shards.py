"""Cosine search split by corpus shard (retrieval.methods.support.sharding.ShardedSearch for the vector method).

Each shard ranks its slice of the corpus vectors with the method's own `cosine_rankings` (same
float64 product, same rounding, same tie rule). A matrix product over another shape may round a
cosine's last bit differently, so a score lying on a rounding boundary can differ by 1e-9 between
the sharded and the single-process run: retrieval.executors.ray_cluster.compare counts such pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from retrieval.methods.support.sharding import Shard
from retrieval.methods.vector import cosine_rankings
from retrieval.run.ranking import Ranking

__all__ = ["VectorSharding"]


class VectorSharding:
    """No corpus statistics: a shard needs only its vectors and the question vectors."""

    def queries(self, context: Any) -> np.ndarray:
        if context.question_vectors is None or context.document_vectors is None:
            raise RuntimeError("vector method run without embeddings: the evaluator must embed first")
        return np.asarray(context.question_vectors)

    def documents(self, context: Any, shard: Shard) -> np.ndarray:
        return np.asarray(context.document_vectors[shard.start : shard.stop])

    def prepare(self, documents: np.ndarray, queries: np.ndarray) -> np.ndarray:
        return documents

    def summarize(self, prepared: np.ndarray, queries: np.ndarray) -> None:
        return None

    def combine(self, summaries: Sequence[None]) -> None:
        return None

    def score(self, prepared: np.ndarray, queries: np.ndarray, statistics: None, depth: int) -> list[Ranking]:
        return cosine_rankings(queries, prepared, depth)
