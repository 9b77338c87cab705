"""BM25Plus scoring engines: the sparse one, rank-bm25 as the reference, and the global
statistics that let a shard score its documents exactly as the whole corpus would.

rank-bm25's BM25Okapi gives terms found in half the documents or more a zero or
negative IDF, then patches them with epsilon * mean IDF: on a 60-document catalogue
where every error page says "code", "cause" and "résolution", that makes common
words score erratically. BM25Plus uses IDF = log((N + 1) / df), positive for every
term, and its delta adds the same constant to every document for a given query,
so it ranks exactly as Lucene-style BM25 with that IDF (k1 = 1.5, b = 0.75).

Two engines compute that same BM25Plus score:

- "sparse" (the default): a term x document weight matrix built once per corpus with
  scipy.sparse; the scores of a batch of questions are one sparse-matrix product, whose
  cost follows the postings of the query terms. It is the default because it gives the
  same rankings as rank-bm25 about 100 times faster: 1,000 questions over 100,000
  documents score in under 2 s instead of about 3 minutes (docs/performance.md).
- "rank-bm25": rank-bm25's BM25Plus, kept as the reference the sparse engine is tested
  against (tests/unit/test_bm25_engines.py). It scores each query term with a Python
  loop over every document.

Both engines round scores to SCORE_DECIMALS decimals before ranking. They add the same
terms in a different order, so a score can differ in its last bit, and two documents
tied in one engine could then be one ulp apart in the other and be ordered differently.
After rounding, ties are the same in both engines and go to the lower corpus index
(retrieval.run.ranking.top_k), so the rankings are identical.

Exact ties (two documents with the same rounded score: duplicates, or documents matching
the same terms with the same length) go to the lower document id: the corpus is sorted by
id at load time (retrieval.data.dataset), so the lower corpus index is the lower id and the
ranking does not depend on the order of the lines in corpus.jsonl. (Only a last-bit difference
falling exactly across a rounding boundary could escape this; the tests would show it.)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain
from typing import Literal, Protocol

import numpy as np
import scipy.sparse as sp
from rank_bm25 import BM25Plus

from retrieval.data.corpus_terms import AnalysedCorpus
from retrieval.run.ranking import SCORE_DECIMALS, Ranking, top_k, top_k_among

__all__ = [
    "DELTA",
    "ENGINES",
    "K1",
    "QUESTION_BATCH",
    "SCORE_DECIMALS",
    "B",
    "BM25Index",
    "BM25Statistics",
    "Engine",
    "RankBM25Index",
    "SparseBM25Index",
    "Tokens",
    "corpus_statistics",
    "merge_statistics",
    "ranked_matches",
    "round_scores",
]

K1 = 1.5
B = 0.75
DELTA = 1.0  # rank-bm25's BM25Plus default
# Scores are rounded to SCORE_DECIMALS (retrieval.run.ranking) before ranking (see the module
# docstring). BM25 scores stay below about 10^3, where float64 resolves about 1e-13: rounding to
# 1e-9 erases the engines' last-bit differences, and scores closer than 1e-9 count as ties.
# Questions scored per sparse product: bounds the dense score block at
# QUESTION_BATCH x n_documents float64 (100 MB for 100,000 documents).
QUESTION_BATCH = 128
# Postings whose weights are computed at once while building an index (64 MB of float64).
_WEIGHT_SLICE = 1 << 23

Engine = Literal["sparse", "rank-bm25"]
Tokens = Sequence[str]


def round_scores(scores: np.ndarray) -> np.ndarray:
    """Scores as both engines rank them: rounded to SCORE_DECIMALS decimals."""
    return np.round(scores, SCORE_DECIMALS)


class BM25Index(Protocol):
    """A BM25Plus index over one analysed corpus."""

    def scores(self, queries: Sequence[Tokens]) -> np.ndarray:
        """Unrounded scores, shape (len(queries), n_documents), float64."""
        ...

    def scores_and_matches(self, queries: Sequence[Tokens]) -> tuple[np.ndarray, np.ndarray]:
        """Scores, and which documents hold at least one query term (bool, same shape)."""
        ...

    def rankings(self, queries: Sequence[Tokens], depth: int) -> list[Ranking]:
        """Each query's top `depth` of the documents holding one of its terms, rounded scores."""
        ...


@dataclass(frozen=True)
class BM25Statistics:
    """What a document's BM25Plus score depends on besides its own terms: the number of
    documents, their total length (average length = total_length / n_documents) and each
    term's document frequency, the terms numbered in order of first appearance in the corpus.

    Computed once for a whole corpus (`corpus_statistics`), or per shard and merged
    (`merge_statistics`, shards in corpus order): an index built on a shard with the whole's
    statistics (`SparseBM25Index(shard, statistics=whole)`) scores the shard's documents
    bit for bit as the index of the whole corpus does.
    """

    vocabulary: tuple[str, ...]
    document_frequencies: np.ndarray  # int64, aligned with vocabulary
    n_documents: int
    total_length: int

    @property
    def average_length(self) -> float:
        return self.total_length / self.n_documents

    @cached_property
    def term_ids(self) -> dict[str, int]:
        """Term -> its number (position in `vocabulary`)."""
        return {term: i for i, term in enumerate(self.vocabulary)}


def corpus_statistics(corpus: AnalysedCorpus) -> BM25Statistics:
    """The BM25 statistics of an analysed corpus (or of one shard of it)."""
    return _statistics(corpus, _term_frequencies(corpus.ids, corpus.lengths, len(corpus.vocabulary)))


def _statistics(corpus: AnalysedCorpus, tf: sp.csr_matrix) -> BM25Statistics:
    df = np.diff(tf.indptr).astype(np.int64)[: len(corpus.vocabulary)]
    return BM25Statistics(corpus.vocabulary, df, len(corpus), int(corpus.lengths.sum()))


def _term_frequencies(ids: np.ndarray, lengths: np.ndarray, n_terms: int) -> sp.csr_matrix:
    """Terms x documents, each entry a term frequency, built without sorting the corpus: one
    entry per token in a documents x terms matrix, transposed by a counting pass (each term's
    entries then come in document order, a document's repeats side by side), repeats summed."""
    indptr = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    # A copy of the ids: scipy sorts and compacts a matrix's indices in place.
    by_document = sp.csr_matrix(
        (np.ones(len(ids), dtype=np.int32), np.array(ids, dtype=np.int32), indptr), shape=(len(lengths), n_terms)
    )
    tf = by_document.T.tocsr()
    del by_document
    tf.sum_duplicates()
    return tf


def merge_statistics(parts: Sequence[BM25Statistics]) -> BM25Statistics:
    """The statistics of the corpus made of `parts`' shards, in corpus order."""
    vocabulary = tuple(dict.fromkeys(chain.from_iterable(p.vocabulary for p in parts)))
    numbering = {term: i for i, term in enumerate(vocabulary)}
    df = np.zeros(len(vocabulary), dtype=np.int64)
    for part in parts:
        df[np.fromiter(map(numbering.__getitem__, part.vocabulary), dtype=np.int64)] += part.document_frequencies
    return BM25Statistics(vocabulary, df, sum(p.n_documents for p in parts), sum(p.total_length for p in parts))


class SparseBM25Index:
    """rank-bm25's BM25Plus formula, vectorised with scipy.sparse.

    score(q, d) = sum over query tokens t (duplicates included, as rank-bm25 loops over them)
    of idf(t) * (delta + tf(t, d) * (k1 + 1) / (k1 * (1 - b + b * dl(d) / avgdl) + tf(t, d))),
    with idf(t) = log((N + 1) / df(t)) and 0 for a term absent from the corpus.

    Split as  delta * sum of idf(t)  (the same for every document of a query)
          +   sum over t of count(t in q) * W[t, d],  W[t, d] = idf(t) * tf part,
    W being a term x document CSR matrix, zero where tf = 0, built once.

    `corpus` is an AnalysedCorpus (analyze_corpus) or one list of terms per document. With
    `statistics` (a whole corpus's, this corpus being one of its shards), N, avgdl, the
    document frequencies and the numbering of terms are the whole's: the scores are the
    whole index's scores of these documents, bit for bit (the sparse product adds a query's
    terms in the order of their numbers).
    """

    def __init__(
        self,
        corpus: AnalysedCorpus | Sequence[Tokens],
        k1: float = K1,
        b: float = B,
        delta: float = DELTA,
        statistics: BM25Statistics | None = None,
    ) -> None:
        if not isinstance(corpus, AnalysedCorpus):
            corpus = AnalysedCorpus.from_terms(corpus)
        if not len(corpus):
            raise ValueError("BM25 needs at least one document")
        self.k1, self.b, self.delta = k1, b, delta
        self.n_documents = len(corpus)
        if statistics is None:
            tf = _term_frequencies(corpus.ids, corpus.lengths, len(corpus.vocabulary))
            stats = _statistics(corpus, tf)
        else:
            stats = statistics
            local = np.fromiter(map(stats.term_ids.__getitem__, corpus.vocabulary), dtype=np.int32)
            tf = _term_frequencies(local[corpus.ids], corpus.lengths, len(stats.vocabulary))
        self.statistics = stats
        self.vocabulary: dict[str, int] = stats.term_ids
        lengths = corpus.lengths

        # The tf part uses rank-bm25's operations in rank-bm25's order: bit-identical to its own.
        avgdl = stats.average_length
        total = stats.n_documents
        self.idf = np.array(
            [math.log((total + 1) / int(f)) if f else 0.0 for f in stats.document_frequencies.tolist()],
            dtype=np.float64,
        )
        norm = k1 * (1 - b + b * lengths / avgdl)
        # Computed a slice of terms at a time: the float64 temporaries stay small at a million
        # documents (elementwise, so each weight is the same float as computed at once).
        weights = np.empty(len(tf.data), dtype=np.float64)
        cuts = np.searchsorted(tf.indptr, np.arange(0, len(tf.data), _WEIGHT_SLICE), side="right") - 1
        for first, last in itertools.pairwise([*np.unique(cuts).tolist(), len(self.idf)]):
            lo, hi = tf.indptr[first], tf.indptr[last]
            freq = tf.data[lo:hi].astype(np.float64)
            denominator = norm[tf.indices[lo:hi]]
            denominator += freq
            part = weights[lo:hi]
            np.multiply(freq, k1 + 1, out=part)
            part /= denominator
            np.multiply(np.repeat(self.idf[first:last], np.diff(tf.indptr[first : last + 1])), part, out=part)
        tf.data = np.empty(0, dtype=np.int32)  # the counts' memory, freed: the weights replace them
        self.weights = sp.csr_matrix((weights, tf.indices, tf.indptr), shape=tf.shape)  # term x document

    def _query_matrix(self, queries: Sequence[Tokens]) -> tuple[sp.csr_matrix, np.ndarray]:
        """Query x term counts (known terms only) and each query's constant delta * sum(idf)."""
        rows: list[int] = []
        cols: list[int] = []
        constants = np.zeros(len(queries), dtype=np.float64)
        for row, query in enumerate(queries):
            constant = 0.0
            for token in query:
                term = self.vocabulary.get(token)
                if term is None:  # rank-bm25: idf 0, adds nothing
                    continue
                rows.append(row)
                cols.append(term)
                # Accumulated in query order like rank-bm25, so documents matching no
                # query term get bit-identical scores in both engines.
                constant += self.idf[term] * self.delta
            constants[row] = constant
        counts = sp.coo_matrix(
            (np.ones(len(rows), dtype=np.float64), (rows, cols)),
            shape=(len(queries), len(self.vocabulary)),
        ).tocsr()
        counts.sum_duplicates()
        return counts, constants

    def scores(self, queries: Sequence[Tokens]) -> np.ndarray:
        """Unrounded BM25Plus scores, shape (len(queries), n_documents): one sparse product."""
        return self.scores_and_matches(queries)[0]

    def scores_and_matches(self, queries: Sequence[Tokens]) -> tuple[np.ndarray, np.ndarray]:
        """Scores, and which documents hold a query term: every weight is > 0 where tf > 0."""
        counts, constants = self._query_matrix(queries)
        product = (counts @ self.weights).toarray()
        matched = product > 0
        product += constants[:, None]
        return product, matched

    def rankings(self, queries: Sequence[Tokens], depth: int) -> list[Ranking]:
        """Each query's ranking of the documents holding one of its terms, as BM25Method ranks
        them, from the sparse product alone: no dense question x document block (at a
        million documents, 128 questions would take a GiB)."""
        return ranked_matches(*self.matches(queries), depth)

    def matches(self, queries: Sequence[Tokens]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per query, the documents holding one of its terms and their rounded scores, flat:
        (counts per query, document indices, scores), each query's in the product's order."""
        counts, constants = self._query_matrix(queries)
        product = (counts @ self.weights).tocsr()
        keep = product.data > 0
        rows = np.repeat(np.arange(len(queries)), np.diff(product.indptr))[keep]
        # Elementwise, so each score is the float the per-query sum gives.
        scores = round_scores(product.data[keep] + constants[rows])
        return np.bincount(rows, minlength=len(queries)), product.indices[keep].astype(np.int64), scores


def ranked_matches(lengths: np.ndarray, found: np.ndarray, scores: np.ndarray, depth: int) -> list[Ranking]:
    """Each query's ranking from its matches (SparseBM25Index.matches), one top_k_among a query."""
    # Columns stay in the product's order (sorting them cost as much as the product):
    # top_k_among breaks ties by document index whatever the order.
    ends = np.cumsum(lengths)
    return [
        top_k_among(scores[end - length : end], found[end - length : end], depth)
        for length, end in zip(lengths.tolist(), ends.tolist(), strict=True)
    ]


class RankBM25Index:
    """The reference engine: rank-bm25's BM25Plus, one Python loop per query term."""

    def __init__(
        self, corpus: AnalysedCorpus | Sequence[Tokens], k1: float = K1, b: float = B, delta: float = DELTA
    ) -> None:
        documents = corpus.documents() if isinstance(corpus, AnalysedCorpus) else list(corpus)
        if not documents:
            raise ValueError("BM25 needs at least one document")
        self.n_documents = len(documents)
        self.bm25 = BM25Plus(documents, k1=k1, b=b, delta=delta)

    def scores(self, queries: Sequence[Tokens]) -> np.ndarray:
        """Unrounded BM25Plus scores, shape (len(queries), n_documents)."""
        out = np.empty((len(queries), self.n_documents), dtype=np.float64)
        for row, query in enumerate(queries):
            out[row] = self.bm25.get_scores(list(query))
        return out

    def scores_and_matches(self, queries: Sequence[Tokens]) -> tuple[np.ndarray, np.ndarray]:
        """Scores, and which documents hold a query term (from rank-bm25's term frequencies)."""
        matched = np.array(
            [[any(term in freqs for term in set(query)) for freqs in self.bm25.doc_freqs] for query in queries],
            dtype=bool,
        ).reshape(len(queries), self.n_documents)
        return self.scores(queries), matched

    def rankings(self, queries: Sequence[Tokens], depth: int) -> list[Ranking]:
        """Each query's ranking of the documents holding one of its terms (BM25Method.rank)."""
        scores, matched = self.scores_and_matches(queries)
        rankings: list[Ranking] = []
        for row, hits in zip(round_scores(scores), matched, strict=True):
            found = np.flatnonzero(hits)
            best = top_k(row[found], depth)
            rankings.append(Ranking(found[best.indices], best.scores))
        return rankings


ENGINES: dict[str, type[SparseBM25Index] | type[RankBM25Index]] = {
    "sparse": SparseBM25Index,
    "rank-bm25": RankBM25Index,
}
