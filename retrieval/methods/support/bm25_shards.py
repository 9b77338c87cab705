"""BM25 split by corpus shard, scoring each document exactly as the whole-corpus engine does.

An adapter over today's sparse engine (retrieval.methods.bm25.SparseBM25Index) until that engine
exposes "global statistics + score a subset of documents" itself: `index_shard`,
`shard_statistics`, `global_statistics` and `score_subset` are the functions to swap then.

A BM25Plus score depends on the document's term frequencies and length, the corpus's average
length and each query term's document frequency. Only the query terms matter, so a shard reports
their document frequencies (and where it first saw each: the engine numbers terms in first-seen
order over the corpus, and a document's score is summed over the query's terms in that order, so
the shard must add them in the same order to give the same last bit) with its token count; the
driver adds them up once. A shard keeps only its query terms' frequencies (a sparse matrix) and
its documents' lengths, not its analysed text. Every float operation below is the engine's, in the engine's order:
the scores are bit-identical, which tests/unit/test_ray_executor.py checks against the engine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import chain, repeat
from typing import Any

import numpy as np
import scipy.sparse as sp

from retrieval.data.analyzer import analyze, analyze_many
from retrieval.methods.bm25 import DELTA, QUESTION_BATCH, round_scores
from retrieval.methods.support.sharding import Shard
from retrieval.run.ranking import Ranking, top_k

__all__ = [
    "BM25Sharding",
    "GlobalStatistics",
    "IndexedShard",
    "ShardStatistics",
    "global_statistics",
    "index_shard",
    "score_subset",
    "shard_statistics",
]

Tokens = Sequence[str]


@dataclass(frozen=True)
class IndexedShard:
    """One shard's analysed documents, reduced to what scoring the given queries reads."""

    lengths: np.ndarray  # tokens per document (int64)
    terms: tuple[str, ...]  # the query terms, sorted: the rows of `counts`
    counts: sp.csr_matrix  # term x document frequencies of the query terms (float64, exact integers)
    first: np.ndarray  # each term's first position in the shard's token stream, -1 when absent


@dataclass(frozen=True)
class ShardStatistics:
    """One shard's part of the corpus statistics, for the query terms only."""

    shard: int
    n_documents: int
    n_tokens: int
    # query term -> (documents of the shard holding it, position of its first token in the shard)
    terms: dict[str, tuple[int, int]]


@dataclass(frozen=True)
class GlobalStatistics:
    """What every shard needs to score as the whole corpus would."""

    n_documents: int
    avgdl: float
    # The query terms the corpus holds, in the engine's (first-seen) order, with their idf.
    order: tuple[str, ...]
    idf: dict[str, float]


def index_shard(corpus: Sequence[Tokens], query_terms: frozenset[str]) -> IndexedShard:
    """The query terms' frequencies in one shard's analysed documents: one C-level pass over the
    tokens, as the engine maps its own, then a sparse matrix whose rows give the document
    frequencies (`np.diff(indptr)`) and whose first column per row the first document."""
    terms = tuple(sorted(query_terms))
    column = {t: i for i, t in enumerate(terms)}
    lengths = np.fromiter(map(len, corpus), dtype=np.int64, count=len(corpus))
    n_tokens = int(lengths.sum())
    ids = np.fromiter(map(column.get, chain.from_iterable(corpus), repeat(-1)), dtype=np.int64, count=n_tokens)
    held = ids >= 0
    documents = np.repeat(np.arange(len(corpus), dtype=np.int32), lengths)[held]
    counts = sp.coo_matrix(
        (np.ones(len(documents), dtype=np.float64), (ids[held], documents)), shape=(len(terms), len(corpus))
    ).tocsr()
    counts.sum_duplicates()  # sorted columns: a row's first entry is the term's first document
    del ids, held, documents
    starts = np.cumsum(lengths) - lengths
    first = np.full(len(terms), -1, dtype=np.int64)
    for t in np.flatnonzero(np.diff(counts.indptr)):
        document = int(counts.indices[counts.indptr[t]])
        first[t] = starts[document] + corpus[document].index(terms[t])
    return IndexedShard(lengths, terms, counts, first)


def shard_statistics(shard: int, indexed: IndexedShard) -> ShardStatistics:
    """Document frequency and first position of each query term in one shard."""
    df = np.diff(indexed.counts.indptr)
    return ShardStatistics(
        shard,
        len(indexed.lengths),
        int(indexed.lengths.sum()),
        {indexed.terms[t]: (int(df[t]), int(indexed.first[t])) for t in np.flatnonzero(df).tolist()},
    )


def global_statistics(parts: Sequence[ShardStatistics]) -> GlobalStatistics:
    """The corpus's statistics from its shards': computed once, on the driver."""
    n_documents = sum(p.n_documents for p in parts)
    if n_documents == 0:
        raise ValueError("BM25 needs at least one document")
    n_tokens = sum(p.n_tokens for p in parts)
    df: dict[str, int] = {}
    seen: dict[str, tuple[int, int]] = {}
    for part in sorted(parts, key=lambda p: p.shard):
        for term, (count, first) in part.terms.items():
            df[term] = df.get(term, 0) + count
            seen.setdefault(term, (part.shard, first))
    order = tuple(sorted(seen, key=seen.__getitem__))
    # The engine's operations: int / int for the average, math.log of the same ratio for the idf.
    idf = {term: math.log((n_documents + 1) / df[term]) for term in order}
    return GlobalStatistics(n_documents, n_tokens / n_documents, order, idf)


def score_subset(
    statistics: GlobalStatistics,
    indexed: IndexedShard,
    queries: Sequence[Tokens],
    depth: int,
    k1: float,
    b: float,
    delta: float = DELTA,
) -> list[Ranking]:
    """Each question's top `depth` of the shard's documents (shard-local indices), scored with the
    corpus's statistics; like the engine, only documents holding a query term are ranked."""
    column = {term: i for i, term in enumerate(statistics.order)}
    # The shard's term numbers -> the corpus's (first-seen) order, in which the engine sums a score.
    remap = np.array([column.get(t, -1) for t in indexed.terms], dtype=np.int64)
    local = indexed.counts.tocoo()
    rows = remap[local.row] if local.nnz else np.empty(0, dtype=np.int64)
    held = rows >= 0  # every term the shard holds is in the order; kept for safety of the shapes
    tf = sp.coo_matrix(
        (local.data[held], (rows[held], local.col[held])), shape=(len(column), len(indexed.lengths))
    ).tocsr()
    tf.sum_duplicates()
    idf = np.array([statistics.idf[t] for t in statistics.order], dtype=np.float64)
    norm = k1 * (1 - b + b * indexed.lengths / statistics.avgdl)
    freq = tf.data
    freq_part = (freq * (k1 + 1)) / (norm[tf.indices] + freq)
    tf.data = np.repeat(idf, np.diff(tf.indptr)) * freq_part
    weights = tf

    rankings: list[Ranking] = []
    for start in range(0, len(queries), QUESTION_BATCH):
        batch = queries[start : start + QUESTION_BATCH]
        q_rows: list[int] = []
        q_cols: list[int] = []
        constants = np.zeros(len(batch), dtype=np.float64)
        for row, query in enumerate(batch):
            constant = 0.0
            for token in query:
                term = column.get(token)
                if term is None:
                    continue
                q_rows.append(row)
                q_cols.append(term)
                constant += statistics.idf[token] * delta
            constants[row] = constant
        counts = sp.coo_matrix(
            (np.ones(len(q_rows), dtype=np.float64), (q_rows, q_cols)), shape=(len(batch), len(column))
        ).tocsr()
        counts.sum_duplicates()
        product = (counts @ weights).toarray()
        matched = product > 0
        product += constants[:, None]
        for scores, hits in zip(round_scores(product), matched, strict=True):
            found = np.flatnonzero(hits)
            best = top_k(scores[found], depth)
            rankings.append(Ranking(found[best.indices], best.scores))
    return rankings


class BM25Sharding:
    """retrieval.methods.support.sharding.ShardedSearch for the built-in bm25 method."""

    def __init__(self, k1: float, b: float) -> None:
        self.k1, self.b = k1, b

    def queries(self, context: Any) -> list[list[str]]:
        return [analyze(q.text) for q in context.dataset.questions]

    def documents(self, context: Any, shard: Shard) -> list[str]:
        return [d.content for d in context.dataset.documents[shard.start : shard.stop]]

    def prepare(self, documents: list[str], queries: list[list[str]]) -> IndexedShard:
        return index_shard(analyze_many(documents), frozenset(t for q in queries for t in q))

    def summarize(self, prepared: IndexedShard, queries: list[list[str]]) -> ShardStatistics:
        # Numbered 0 here: the executor passes the summaries to `combine` in shard order.
        return shard_statistics(0, prepared)

    def combine(self, summaries: Sequence[ShardStatistics]) -> GlobalStatistics:
        return global_statistics([replace(s, shard=i) for i, s in enumerate(summaries)])

    def score(
        self, prepared: IndexedShard, queries: list[list[str]], statistics: GlobalStatistics, depth: int
    ) -> list[Ranking]:
        return score_subset(statistics, prepared, queries, depth, self.k1, self.b)
