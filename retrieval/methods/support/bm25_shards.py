"""BM25 split by corpus shard, through the engine's own shard interface (retrieval.methods.bm25).

Each shard analyses its documents once and computes its part of the corpus statistics
(`corpus_statistics`); the driver merges the parts in corpus order (`merge_statistics`); each
shard then scores its documents with `SparseBM25Index(shard, statistics=merged)`, which numbers
the terms as the whole corpus does and so adds a query's terms in the same order: the scores are
the single-process index's, bit for bit (tests/unit/test_executor.py, test_ray_executor.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from retrieval.data.analyzer import DEFAULT_LANGUAGE, analyze
from retrieval.data.corpus_terms import AnalysedCorpus, analyze_corpus
from retrieval.methods.support.bm25_engine import (
    QUESTION_BATCH,
    BM25Statistics,
    SparseBM25Index,
    corpus_statistics,
    merge_statistics,
    ranked_matches,
)
from retrieval.methods.support.shard_answers import Candidates, joined, packed, ranked_rows
from retrieval.methods.support.sharding import Shard
from retrieval.run.ranking import Ranking

__all__ = ["AnalysedShard", "BM25Sharding"]


@dataclass(frozen=True)
class AnalysedShard:
    """One shard's analysed documents and their part of the corpus statistics."""

    corpus: AnalysedCorpus
    statistics: BM25Statistics


class BM25Sharding:
    """retrieval.methods.support.sharding.ShardedSearch for the built-in bm25 method."""

    def __init__(self, k1: float, b: float, language: str = DEFAULT_LANGUAGE) -> None:
        self.k1, self.b, self.language = k1, b, language

    def queries(self, context: Any) -> list[list[str]]:
        return [analyze(q.text, self.language) for q in context.dataset.questions]

    def documents(self, context: Any, shard: Shard) -> list[str]:
        return [d.content for d in context.dataset.documents[shard.start : shard.stop]]

    def prepare(self, documents: list[str], queries: list[list[str]]) -> AnalysedShard:
        corpus = analyze_corpus(documents, language=self.language)
        return AnalysedShard(corpus, corpus_statistics(corpus))

    def summarize(self, prepared: AnalysedShard, queries: list[list[str]]) -> BM25Statistics:
        return prepared.statistics

    def combine(self, summaries: Sequence[BM25Statistics]) -> BM25Statistics:
        # The executor passes the summaries in shard (corpus) order, the order merging needs.
        return merge_statistics(summaries)

    def score(
        self, prepared: AnalysedShard, queries: list[list[str]], statistics: BM25Statistics, depth: int
    ) -> list[Ranking]:
        index = SparseBM25Index(prepared.corpus, k1=self.k1, b=self.b, statistics=statistics)
        rankings: list[Ranking] = []
        for start in range(0, len(queries), QUESTION_BATCH):
            rankings.extend(index.rankings(queries[start : start + QUESTION_BATCH], depth))
        return rankings

    def candidates(
        self, prepared: AnalysedShard, queries: list[list[str]], statistics: BM25Statistics, depth: int
    ) -> Candidates:
        """`packed(score(...))`'s arrays without a Ranking per question when no question matches
        more documents than the depth keeps (a shard of a few thousand documents at depth
        1,000): each batch's matches ordered by one sort of integer keys (shard_answers.ranked_rows)."""
        index = SparseBM25Index(prepared.corpus, k1=self.k1, b=self.b, statistics=statistics)
        parts: list[Candidates] = []
        for start in range(0, len(queries), QUESTION_BATCH):
            batch = queries[start : start + QUESTION_BATCH]
            lengths, found, scores = index.matches(batch)
            ranked = ranked_rows(lengths, found, scores) if int(lengths.max(initial=0)) <= depth else None
            parts.append(ranked if ranked is not None else packed(ranked_matches(lengths, found, scores, depth)))
        return joined(parts) if parts else packed([])
