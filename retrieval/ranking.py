"""A ranking of corpus documents, and the one deterministic way to build it from scores."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Ranking", "rank_of", "top_k"]


@dataclass(frozen=True)
class Ranking:
    """One question's ranking: corpus indices best first, with their scores.

    `status` is "ok", or "degraded: <reason>" when a method fell back to another
    method's order (reranking that failed). Rankings are truncated to the run's depth.
    """

    indices: np.ndarray
    scores: np.ndarray
    status: str = "ok"

    def __len__(self) -> int:
        return len(self.indices)


def top_k(scores: np.ndarray, depth: int | None = None) -> Ranking:
    """Indices of the `depth` best scores, best first; ties go to the lower corpus index
    (the lower document id: retrieval.dataset sorts the corpus by id at load time).

    Uses a partial sort, so ranking 1,000 of 100,000 documents does not sort them all.
    """
    scores = np.asarray(scores)
    n = len(scores)
    if depth is None or depth >= n:
        order = np.lexsort((np.arange(n), -scores))
        return Ranking(order, scores[order])
    if depth <= 0:
        return Ranking(np.empty(0, dtype=np.int64), np.empty(0, dtype=scores.dtype))
    kth = scores[np.argpartition(-scores, depth - 1)[depth - 1]]
    above = np.flatnonzero(scores > kth)
    tied = np.flatnonzero(scores == kth)[: depth - len(above)]
    chosen = np.concatenate([above, tied])
    order = chosen[np.lexsort((chosen, -scores[chosen]))]
    return Ranking(order, scores[order])


def rank_of(ranking: Ranking, index: int) -> int | None:
    """1-based rank of a corpus index in the ranking, None when it is beyond its depth."""
    hits = np.flatnonzero(ranking.indices == index)
    return int(hits[0]) + 1 if len(hits) else None
