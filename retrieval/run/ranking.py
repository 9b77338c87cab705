"""A ranking of corpus documents, and the one deterministic way to build it from scores."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from retrieval.data.dataset import Dataset

# The decimals the built-in methods round their scores to before ranking (top_k's ties are then
# exact): a cosine's or a BM25 score's last-bit differences between CPUs and engines vanish, and
# scores closer than 1e-9 tie. Shards send a score as its integer at this rounding
# (retrieval.methods.support.shard_answers).
SCORE_DECIMALS = 9

__all__ = ["Ranking", "RankingError", "rank_of", "ranking_from_ids", "top_k", "top_k_among"]


class RankingError(ValueError):
    """A ranking that cannot be scored: a document id outside the dataset, or one id twice."""


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
    (the lower document id: retrieval.data.dataset sorts the corpus by id at load time).

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


def top_k_among(scores: np.ndarray, indices: np.ndarray, depth: int) -> Ranking:
    """top_k over the documents `indices`, in any order, whose scores are `scores`: the same
    Ranking as top_k over them sorted by index (ties go to the lower index), without sorting
    them all (a sparse product's columns come unsorted)."""
    scores, indices = np.asarray(scores), np.asarray(indices, dtype=np.int64)
    if depth >= len(scores):
        order = np.lexsort((indices, -scores))
        return Ranking(indices[order], scores[order])
    if depth <= 0:
        return Ranking(np.empty(0, dtype=np.int64), np.empty(0, dtype=scores.dtype))
    kth = scores[np.argpartition(-scores, depth - 1)[depth - 1]]
    above = np.flatnonzero(scores > kth)
    tied = np.flatnonzero(scores == kth)
    needed = depth - len(above)
    if len(tied) > needed:  # the tied documents with the lowest indices
        tied = tied[np.argpartition(indices[tied], needed - 1)[:needed]]
    chosen = np.concatenate([above, tied])
    order = chosen[np.lexsort((indices[chosen], -scores[chosen]))]
    return Ranking(indices[order], scores[order])


def ranking_from_ids(ids: Sequence[str], dataset: Dataset, scores: Sequence[float] | None = None) -> Ranking:
    """The ranking of the documents an engine returned by id, best first: what a retriever
    that calls a search service or a database builds for each question.

    Without `scores` the engine's order is the ranking, with no ties. An id the dataset does
    not hold raises RankingError: leaving it out would move every document below it up one
    rank and raise the figures, so the engine must search the evaluated documents only.
    """
    positions = dataset.positions
    unknown = [i for i in ids if i not in positions]
    if unknown:
        raise RankingError(
            f"the engine returned {len(unknown)} id(s) that dataset {dataset.name!r} does not hold ({unknown[0]!r}"
            f"{', …' if len(unknown) > 1 else ''}): leaving them out would raise the figures, so index the"
            " evaluated corpus, or export the engine's documents to the dataset's corpus.jsonl"
        )
    indices = np.fromiter((positions[i] for i in ids), dtype=np.int64, count=len(ids))
    if len(np.unique(indices)) != len(indices):
        twice = next(i for n, i in enumerate(ids) if i in ids[:n])
        raise RankingError(f"the engine returned {twice!r} twice: a document has one rank")
    if scores is None:
        values = np.arange(len(ids), 0, -1, dtype=np.float64)
    else:
        values = np.asarray(scores, dtype=np.float64)
        if values.shape != indices.shape:
            raise RankingError(f"{len(values)} scores for {len(ids)} ids: give one score per id, or none")
        # Equal scores are read as ties (retrieval.measures.ties): the order must be the scores' order.
        if not np.isfinite(values).all() or (np.diff(values) > 0).any():
            raise RankingError(
                "scores must be finite and must not increase down the ranking (best first);"
                " for a distance, pass its negation"
            )
    return Ranking(indices, values)


def rank_of(ranking: Ranking, index: int) -> int | None:
    """1-based rank of a corpus index in the ranking, None when it is beyond its depth."""
    hits = np.flatnonzero(ranking.indices == index)
    return int(hits[0]) + 1 if len(hits) else None
