"""BM25 over shards: global statistics computed once, each shard scored exactly as the whole.

The interface another executor (Ray) uses to split a corpus: `corpus_statistics` per shard,
`merge_statistics` in corpus order, then `SparseBM25Index(shard, statistics=whole)`.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from test_bm25_engines import random_dataset

from retrieval.data.analyzer import analyze
from retrieval.data.corpus_terms import AnalysedCorpus, analyze_corpus
from retrieval.methods.base import Context
from retrieval.methods.bm25 import BM25Method
from retrieval.methods.support.bm25_engine import RankBM25Index, SparseBM25Index, corpus_statistics, merge_statistics


def shards(texts: list[str], cuts: list[int]) -> list[AnalysedCorpus]:
    bounds = [0, *cuts, len(texts)]
    return [analyze_corpus(texts[a:b]) for a, b in itertools.pairwise(bounds)]


@pytest.mark.parametrize("seed", [0, 1])
def test_shards_score_their_documents_bit_for_bit_as_the_whole(seed: int) -> None:
    dataset = random_dataset(seed, n_documents=300, n_questions=40)
    texts = [d.content for d in dataset.documents]
    queries = [analyze(q.text) for q in dataset.questions]
    whole = analyze_corpus(texts)
    statistics = corpus_statistics(whole)
    parts = shards(texts, [97, 98, 250])
    merged = merge_statistics([corpus_statistics(p) for p in parts])
    assert merged.vocabulary == statistics.vocabulary
    np.testing.assert_array_equal(merged.document_frequencies, statistics.document_frequencies)
    assert (merged.n_documents, merged.total_length) == (300, int(whole.lengths.sum()))
    assert merged.average_length == statistics.average_length

    expected = SparseBM25Index(whole).scores(queries)
    scored = np.concatenate([SparseBM25Index(p, statistics=merged).scores(queries) for p in parts], axis=1)
    np.testing.assert_array_equal(scored, expected)  # exact, not within a tolerance


def test_statistics_are_the_document_frequencies() -> None:
    corpus = analyze_corpus(["serveur erreur serveur", "erreur", "réseau serveur"])
    statistics = corpus_statistics(corpus)
    assert dict(zip(statistics.vocabulary, statistics.document_frequencies.tolist(), strict=True)) == {
        "serveur": 2,
        "erreur": 2,
        "reseau": 1,
    }
    assert (statistics.n_documents, statistics.total_length) == (3, 6)
    assert statistics.average_length == 2.0


def test_a_shard_alone_scores_differently() -> None:
    # The reason for global statistics: a shard's own idf and average length differ.
    dataset = random_dataset(2, n_documents=120, n_questions=10)
    texts = [d.content for d in dataset.documents]
    queries = [analyze(q.text) for q in dataset.questions]
    expected = SparseBM25Index(analyze_corpus(texts)).scores(queries)[:, :60]
    alone = SparseBM25Index(analyze_corpus(texts[:60])).scores(queries)
    assert not np.array_equal(alone, expected)


@pytest.mark.parametrize("depth", [1, 5, 1000])
def test_sparse_rankings_equal_the_dense_path(depth: int) -> None:
    dataset = random_dataset(4, n_documents=200, n_questions=30)
    corpus = analyze_corpus([d.content for d in dataset.documents])
    queries = [analyze(q.text) for q in dataset.questions]
    sparse = SparseBM25Index(corpus)
    dense = RankBM25Index.rankings  # the dense path, run on the sparse engine's scores
    for fast, slow in zip(sparse.rankings(queries, depth), dense(sparse, queries, depth), strict=True):  # type: ignore[arg-type]
        np.testing.assert_array_equal(fast.indices, slow.indices)
        np.testing.assert_array_equal(fast.scores, slow.scores)
    assert BM25Method().rank(Context(dataset=dataset, depth=depth))[0].indices.tolist() == (
        sparse.rankings(queries, depth)[0].indices.tolist()
    )


def test_weights_computed_in_slices_equal_those_computed_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from retrieval.methods.support import bm25_engine as bm25

    dataset = random_dataset(5, n_documents=150, n_questions=5)
    corpus = analyze_corpus([d.content for d in dataset.documents])
    whole = SparseBM25Index(corpus).weights
    monkeypatch.setattr(bm25, "_WEIGHT_SLICE", 7)
    sliced = SparseBM25Index(corpus).weights
    np.testing.assert_array_equal(sliced.indptr, whole.indptr)
    np.testing.assert_array_equal(sliced.indices, whole.indices)
    np.testing.assert_array_equal(sliced.data, whole.data)
