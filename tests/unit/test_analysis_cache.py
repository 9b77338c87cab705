"""BM25's analysed corpus kept on disk: read back as analysed, keyed by the corpus and the
analyzer's code, a damaged entry a miss that is written again, and a gate that finds it
analyses nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_corpus_parts import _assert_identical, _documents

from retrieval.data import analysis_cache, corpus_parts, corpus_terms
from retrieval.data.analysis_cache import load_analysis, store_analysis
from retrieval.data.corpus_terms import AnalysedCorpus, analyze_corpus, forget_analyses
from retrieval.data.dataset import Dataset, Question, _Documents, corpus_fingerprint
from retrieval.methods import bm25
from retrieval.methods.base import Context
from retrieval.methods.bm25 import BM25Method


@pytest.fixture(autouse=True)
def batch_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    # Small corpora through the batch pipeline, whose ids are read-only, as a large corpus's.
    monkeypatch.setattr(corpus_terms, "_SMALL_CORPUS", 0)


def _loaded(n: int, seed: int) -> _Documents:
    """Documents as load_dataset gives them: carrying their corpus fingerprint."""
    documents = _Documents(_documents(n, seed))
    documents.corpus_fingerprint = corpus_fingerprint(tuple(documents))
    return documents


def test_an_entry_reads_back_as_stored_and_only_for_its_corpus(tmp_path: Path) -> None:
    documents = _loaded(60, seed=1)
    corpus = analyze_corpus(d.content for d in documents)
    store_analysis(tmp_path, documents.corpus_fingerprint, corpus)
    loaded = load_analysis(tmp_path, documents.corpus_fingerprint, len(documents))
    assert loaded is not None
    _assert_identical(loaded, corpus)
    assert load_analysis(tmp_path, "sha256:another", len(documents)) is None
    assert load_analysis(tmp_path, documents.corpus_fingerprint, len(documents) + 1) is None  # and removed
    assert not list(tmp_path.glob(".*"))  # no staging folder left


def test_the_analyzer_code_is_in_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    documents = _loaded(60, seed=2)
    store_analysis(tmp_path, documents.corpus_fingerprint, analyze_corpus(d.content for d in documents))
    assert load_analysis(tmp_path, documents.corpus_fingerprint, len(documents)) is not None
    monkeypatch.setattr(analysis_cache.analyzer, "ANALYZER_VERSION", "fr-edited")
    assert load_analysis(tmp_path, documents.corpus_fingerprint, len(documents)) is None
    monkeypatch.undo()
    # An edit of the analyzer's source without a version bump misses too.
    edited = tmp_path / "analyzer_copy.py"
    edited.write_bytes(Path(corpus_terms.__file__).read_bytes() + b"\n# edited\n")
    monkeypatch.setattr(analysis_cache.corpus_terms, "__file__", str(edited))
    assert load_analysis(tmp_path, documents.corpus_fingerprint, len(documents)) is None


@pytest.mark.parametrize("damage", ["truncated ids", "ids past the vocabulary", "missing vocabulary", "not json"])
def test_a_damaged_entry_is_a_miss_and_is_written_again(tmp_path: Path, damage: str) -> None:
    documents = _loaded(60, seed=3)
    expected = analyze_corpus(d.content for d in documents)
    store_analysis(tmp_path, documents.corpus_fingerprint, expected)
    (entry,) = (p for p in tmp_path.iterdir() if p.is_dir())
    if damage == "truncated ids":
        (entry / "ids.npy").write_bytes((entry / "ids.npy").read_bytes()[:-8])
    elif damage == "ids past the vocabulary":
        np.save(entry / "ids.npy", np.asarray(expected.ids) + len(expected.vocabulary))
    elif damage == "missing vocabulary":
        (entry / "vocabulary.json").unlink()
    else:
        (entry / "vocabulary.json").write_text("[", encoding="utf-8")
    assert load_analysis(tmp_path, documents.corpus_fingerprint, len(documents)) is None
    assert not entry.exists()  # removed: the next analysis writes it again
    forget_analyses()
    _assert_identical(corpus_parts.analyze_documents(documents, processes=1, cache=tmp_path), expected)
    rewritten = load_analysis(tmp_path, documents.corpus_fingerprint, len(documents))
    assert rewritten is not None
    _assert_identical(rewritten, expected)


def test_only_the_newest_entries_are_kept(tmp_path: Path) -> None:
    corpora = [_loaded(40, seed=10 + i) for i in range(analysis_cache.KEEP + 2)]
    for documents in corpora:
        store_analysis(tmp_path, documents.corpus_fingerprint, analyze_corpus(d.content for d in documents))
    assert len([p for p in tmp_path.iterdir() if p.is_dir()]) == analysis_cache.KEEP
    assert load_analysis(tmp_path, corpora[0].corpus_fingerprint, len(corpora[0])) is None
    assert load_analysis(tmp_path, corpora[-1].corpus_fingerprint, len(corpora[-1])) is not None


def test_a_cache_that_cannot_be_written_is_no_error(tmp_path: Path) -> None:
    documents = _loaded(40, seed=4)
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    store_analysis(blocked / "cache", documents.corpus_fingerprint, analyze_corpus(d.content for d in documents))
    assert load_analysis(blocked / "cache", documents.corpus_fingerprint, len(documents)) is None


def test_bm25_finds_its_analysis_in_the_cache_and_starts_no_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bm25, "CACHED_DOCUMENTS", 50)
    documents = _loaded(90, seed=5)
    questions = tuple(Question(f"q{j}", documents[j].text[:40], "t", (documents[j].id,)) for j in range(5))
    context = Context(dataset=Dataset("cached", documents, questions, "sha256:test"), depth=20)
    forget_analyses()
    first = BM25Method(analysis_cache=tmp_path).rank(context)
    assert len([p for p in tmp_path.iterdir() if p.is_dir()]) == 1
    forget_analyses()  # as a new process: nothing remembered in memory

    def no_analysis(*args: object, **kwargs: object) -> AnalysedCorpus:
        raise AssertionError("the corpus was analysed again")

    monkeypatch.setattr(corpus_parts, "analyze_corpus", no_analysis)
    monkeypatch.setattr(corpus_parts, "PendingAnalysis", no_analysis)
    method = BM25Method(analysis_cache=tmp_path)
    assert method.prepare(context) is None
    again = method.rank(context)
    assert [r.indices.tolist() for r in again] == [r.indices.tolist() for r in first]
    assert [r.scores.tobytes() for r in again] == [r.scores.tobytes() for r in first]
