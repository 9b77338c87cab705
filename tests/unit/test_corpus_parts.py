"""A corpus analysed in parts in forked processes is the AnalysedCorpus of one analyze_corpus call,
bit for bit, and BM25 ranks from it the same documents with the same scores."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from test_analyzer_fast_path import french_texts

from retrieval.data import analyzer, corpus_parts
from retrieval.data.analyzer import AnalysedCorpus, analyze_corpus, forget_documents
from retrieval.data.corpus_parts import analyze_documents, merge_parts
from retrieval.data.dataset import Dataset, Document, Question
from retrieval.methods.base import Context
from retrieval.methods.bm25 import BM25Method


def _documents(n: int, seed: int) -> tuple[Document, ...]:
    texts = french_texts(n, seed=seed)
    # Titles too, and an identifier split across two chunks ("HEL 4040": the whole-text path).
    return tuple(
        Document(f"d{i:04d}", f"Titre {i % 7}" if i % 2 else "", text + (" HEL 4040" if i % 5 == 0 else ""))
        for i, text in enumerate(texts)
    )


def _assert_identical(got: AnalysedCorpus, expected: AnalysedCorpus) -> None:
    assert got.vocabulary == expected.vocabulary
    assert got.ids.dtype == expected.ids.dtype == np.int32
    assert got.lengths.dtype == expected.lengths.dtype == np.int64
    np.testing.assert_array_equal(got.ids, expected.ids)
    np.testing.assert_array_equal(got.lengths, expected.lengths)
    assert not got.ids.flags.writeable and not got.lengths.flags.writeable


_ANALYSE_RANGE = corpus_parts._analyse_range
_PIDS: dict[str, Path] = {}


def _recording_range(start: int, stop: int) -> AnalysedCorpus:
    """_analyse_range that writes the pid of the process it ran in (module level: a worker finds it by name)."""
    (_PIDS["folder"] / f"{start}.pid").write_text(str(os.getpid()))
    return _ANALYSE_RANGE(start, stop)


@pytest.fixture(autouse=True)
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    # Parts of 40 documents and the batch pipeline for them, so that small corpora are split.
    monkeypatch.setattr(corpus_parts, "PART_DOCUMENTS", 40)
    monkeypatch.setattr(analyzer, "_SMALL_CORPUS", 0)
    monkeypatch.setattr(analyzer, "_CORPUS_BATCH", 16)


@pytest.mark.parametrize("processes", [2, 3])
def test_parts_in_processes_equal_one_analysis(processes: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    documents = _documents(170, seed=3)
    forget_documents()
    expected = analyze_corpus(d.content for d in documents)
    # The parts after the first run in other processes (each writes its pid).
    monkeypatch.setattr(corpus_parts, "_analyse_range", _recording_range)
    monkeypatch.setitem(_PIDS, "folder", tmp_path)
    forget_documents()
    got = analyze_documents(documents, processes=processes)
    _assert_identical(got, expected)
    pids = {int(p.read_text()) for p in tmp_path.glob("*.pid")}
    assert len(list(tmp_path.glob("*.pid"))) == processes
    assert os.getpid() in pids and len(pids) >= 2
    assert corpus_parts._FORKED == ()


def test_small_corpus_stays_in_this_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    documents = _documents(79, seed=4)  # one part of 40 at most: no worker

    def forbidden(start: int, stop: int) -> AnalysedCorpus:
        raise AssertionError("a worker was started for a small corpus")

    monkeypatch.setattr(corpus_parts, "_analyse_range", forbidden)
    _assert_identical(analyze_documents(documents, processes=2), analyze_corpus(d.content for d in documents))


def test_merge_numbers_terms_in_order_of_first_appearance() -> None:
    parts = [
        AnalysedCorpus.from_terms([["b", "a"], ["a"]]),
        AnalysedCorpus.from_terms([]),
        AnalysedCorpus.from_terms([["c", "a"], [], ["d", "b", "c"]]),
    ]
    whole = AnalysedCorpus.from_terms([["b", "a"], ["a"], ["c", "a"], [], ["d", "b", "c"]])
    merged = merge_parts(parts)
    assert merged.vocabulary == ("b", "a", "c", "d")
    np.testing.assert_array_equal(merged.ids, whole.ids)
    np.testing.assert_array_equal(merged.lengths, whole.lengths)
    assert merged.documents() == [["b", "a"], ["a"], ["c", "a"], [], ["d", "b", "c"]]


def test_bm25_rankings_and_scores_are_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    documents = _documents(130, seed=5)
    questions = tuple(
        Question(f"q{j}", " ".join(documents[j * 9].text.split()[:6]), "t", (documents[j * 9].id,)) for j in range(12)
    )
    dataset = Dataset("parts", documents, questions, "sha256:test")
    forget_documents()
    monkeypatch.setattr(corpus_parts, "_cpus", lambda: 2)
    parallel = BM25Method().rank(Context(dataset=dataset, depth=50))
    forget_documents()
    monkeypatch.setattr(corpus_parts, "_cpus", lambda: 1)
    single = BM25Method().rank(Context(dataset=dataset, depth=50))
    assert [r.indices.tolist() for r in parallel] == [r.indices.tolist() for r in single]
    assert [r.scores.tobytes() for r in parallel] == [r.scores.tobytes() for r in single]
    assert any(len(r.indices) for r in single)
