"""analyze_corpus (the BM25 index's input) gives exactly analyze()'s terms, numbered in order of
first appearance, whatever the batch size and the state of its caches."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from demo_fixture import demo_dataset
from test_analyzer_fast_path import french_texts, plain_analyze, random_texts

from retrieval.data import corpus_terms
from retrieval.data.corpus_terms import AnalysedCorpus, analyze_corpus, forget_analyses


def assert_same_as_analyze(texts: list[str]) -> None:
    expected = [plain_analyze(t) for t in texts]
    forget_analyses()
    corpus = analyze_corpus(texts)
    assert corpus.documents() == expected
    reference = AnalysedCorpus.from_terms(expected)
    assert corpus.vocabulary == reference.vocabulary == tuple(dict.fromkeys(t for d in expected for t in d))
    np.testing.assert_array_equal(corpus.ids, reference.ids)
    np.testing.assert_array_equal(corpus.lengths, [len(d) for d in expected])
    assert corpus.ids.dtype == np.int32 and corpus.lengths.dtype == np.int64


@pytest.fixture(autouse=True)
def batches_even_for_small_corpora(monkeypatch: pytest.MonkeyPatch) -> None:
    # The tests' corpora are small: without this they would take analyze_many's path.
    monkeypatch.setattr(corpus_terms, "_SMALL_CORPUS", 0)


@pytest.fixture(params=[1, 7, 8192], ids=["batch1", "batch7", "batch8192"])
def batch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(corpus_terms, "_CORPUS_BATCH", request.param)
    return int(request.param)


def test_demo_set(batch: int) -> None:
    dataset = demo_dataset()
    assert_same_as_analyze([d.content for d in dataset.documents] + [q.text for q in dataset.questions])


def test_generated_french_text(batch: int) -> None:
    # One text a batch, 150 of them are as many batch boundaries (all 300 took 0.4 s there).
    assert_same_as_analyze(french_texts(300, seed=1)[: 150 if batch == 1 else None])


@pytest.mark.parametrize("seed", range(3))
def test_random_strings(seed: int, batch: int) -> None:
    # Identifiers split across chunks ("HEL 4040"), digit chunks, every kind of whitespace. The
    # 1000 texts are read in one batch; their first 75 batches of 7, and of one text, cross as many
    # batch boundaries (each batch's chunks looked up among the earlier ones': mutants of that
    # look-up fail the same cases as with 143 and 150 batches, at half the cost).
    assert_same_as_analyze(random_texts(1000, seed)[: 75 * batch])


def test_identifiers_across_chunks_and_inside_them() -> None:
    texts = ["erreur HEL 4040 puis hel_4041,", "4040 seul", "(HEL-4040). ERR4200", "", "   ", "page 12 AB 12"]
    assert_same_as_analyze(texts)
    assert analyze_corpus(texts).documents()[0] == ["erreur", "hel-4040", "hel-4041"]


def test_bounded_chunk_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(corpus_terms, "_CORPUS_BATCH", 5)
    monkeypatch.setattr(corpus_terms, "_CHUNKS_LIMIT", 10)
    assert_same_as_analyze(french_texts(60, seed=4) + random_texts(60, seed=5))


def test_a_corpus_is_kept_read_only_and_forgotten_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(corpus_terms, "_CORPORA", {})
    texts = french_texts(20, seed=6)
    first = analyze_corpus(texts)
    assert analyze_corpus(iter(texts)) is first
    with pytest.raises(ValueError, match="read-only"):
        first.ids[0] = 1
    forget_analyses()
    assert analyze_corpus(texts) is not first


def test_only_corpora_within_the_bound_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(corpus_terms, "_CORPORA", {})
    monkeypatch.setattr(corpus_terms, "_CORPORA_LIMIT", 5)
    analyze_corpus(["erreur de sauvegarde"])
    assert len(corpus_terms._CORPORA) == 1
    analyze_corpus(["une erreur de sauvegarde du serveur pendant la mise à jour du système"])
    assert len(corpus_terms._CORPORA) == 1  # too large to keep: the first one stays
    analyze_corpus(["serveur arrêté", "réseau", "nœud"])  # 2 + 4 terms > 5
    assert list(corpus_terms._CORPORA) == [("fr", ("serveur arrêté", "réseau", "nœud"))]  # the bound emptied the others


def test_a_large_corpus_is_streamed_and_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(corpus_terms, "_CORPORA", {})
    monkeypatch.setattr(corpus_terms, "_CORPORA_TEXTS", 3)
    monkeypatch.setattr(corpus_terms, "_CORPUS_BATCH", 2)
    texts = french_texts(7, seed=8)
    read: list[int] = []

    def contents() -> Iterator[str]:
        for i, text in enumerate(texts):
            read.append(i)
            yield text

    assert analyze_corpus(contents()).documents() == [plain_analyze(t) for t in texts]
    assert read == list(range(7)) and corpus_terms._CORPORA == {}


def test_a_small_corpus_takes_analyze_many_s_path_with_the_same_result(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = french_texts(40, seed=9) + random_texts(40, seed=9)
    batched = analyze_corpus(texts)
    forget_analyses()
    monkeypatch.setattr(corpus_terms, "_SMALL_CORPUS", 256)
    small = analyze_corpus(texts)
    assert small.vocabulary == batched.vocabulary
    np.testing.assert_array_equal(small.ids, batched.ids)
    np.testing.assert_array_equal(small.lengths, batched.lengths)
