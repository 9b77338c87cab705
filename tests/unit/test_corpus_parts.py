"""A corpus analysed in parts in forked processes is the AnalysedCorpus of one analyze_corpus call,
bit for bit, and BM25 ranks from it the same documents with the same scores."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest
from test_analyzer_fast_path import french_texts
from threadpoolctl import threadpool_info, threadpool_limits

from retrieval.data import corpus_parts, corpus_terms
from retrieval.data.analysis_cache import store_analysis
from retrieval.data.analyzer import DEFAULT_LANGUAGE
from retrieval.data.corpus_parts import PendingAnalysis, analyze_documents, merge_parts
from retrieval.data.corpus_terms import AnalysedCorpus, AnalysisState, analyze_corpus, forget_analyses
from retrieval.data.dataset import Dataset, Document, Question, _Documents, corpus_fingerprint
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


_ANALYZE_CORPUS = corpus_parts.analyze_corpus
_PIDS: dict[str, Path] = {}


def _recording_analysis(texts: Iterable[str], state: AnalysisState | None = None) -> AnalysedCorpus:
    """analyze_corpus that writes the pid of the process it ran in, one file per part (module
    level: a forked worker finds it by name)."""
    corpus = _ANALYZE_CORPUS(texts, state)
    (_PIDS["folder"] / f"{os.getpid()}-{time.monotonic_ns()}.pid").write_text(str(os.getpid()))
    return corpus


@pytest.fixture(autouse=True)
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    # Corpora of 80 documents and more are split, in parts of at least 10, and analysed by the
    # batch pipeline, so that small corpora take the paths a large one takes.
    monkeypatch.setattr(corpus_parts, "START_DOCUMENTS", 80)
    monkeypatch.setattr(corpus_parts, "PART_DOCUMENTS", 10)
    monkeypatch.setattr(corpus_terms, "_SMALL_CORPUS", 0)
    monkeypatch.setattr(corpus_terms, "_CORPUS_BATCH", 16)


@pytest.mark.parametrize("processes", [2, 3])
def test_parts_in_processes_equal_one_analysis(processes: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    documents = _documents(170, seed=3)
    forget_analyses()
    expected = analyze_corpus(d.content for d in documents)
    monkeypatch.setattr(corpus_parts, "analyze_corpus", _recording_analysis)
    monkeypatch.setitem(_PIDS, "folder", tmp_path)
    forget_analyses()
    # Which process takes which part is a race; made deterministic: the workers take them all
    # before this process asks for the result (the dying-worker test has this process take them).
    pending = corpus_parts.start_analysis(documents, processes=processes)
    assert pending is not None and corpus_parts._FORKED is None
    workers = set(pending._pool._processes)
    assert len(workers) == processes - 1
    for future in pending._futures:
        future.result(timeout=60)
    _assert_identical(analyze_documents(documents, pending=pending), expected)
    pids = [int(p.read_text()) for p in tmp_path.glob("*.pid")]
    # Every part analysed once, by the workers.
    assert len(pids) == len(corpus_parts.part_bounds(len(documents), processes)) - 1
    assert set(pids) <= workers and os.getpid() not in pids


def test_parts_shrink_to_the_end_and_cover_the_corpus() -> None:
    bounds = corpus_parts.part_bounds(1000, 2)
    sizes = [b - a for a, b in itertools.pairwise(bounds)]
    assert bounds[0] == 0 and bounds[-1] == 1000
    assert sizes[:6] == [250, 187, 140, 105, 79, 59]
    assert sizes == sorted(sizes, reverse=True) and min(sizes[:-1]) == 10 and 0 < sizes[-1] <= 10


def test_small_corpus_stays_in_this_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    documents = _documents(79, seed=4)  # under START_DOCUMENTS: no worker

    def forbidden(*args: object) -> PendingAnalysis:
        raise AssertionError("a worker was started for a small corpus")

    monkeypatch.setattr(corpus_parts, "PendingAnalysis", forbidden)
    assert corpus_parts.start_analysis(documents, processes=2) is None
    _assert_identical(analyze_documents(documents, processes=2), analyze_corpus(d.content for d in documents))


def test_one_process_or_an_analysed_corpus_starts_no_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    # A loaded corpus carries its fingerprint: it is remembered by it.
    documents = _Documents(_documents(120, seed=6))
    documents.corpus_fingerprint = corpus_fingerprint(tuple(documents))
    assert corpus_parts.start_analysis(documents, processes=1) is None
    forget_analyses()
    first = analyze_documents(documents, processes=2)
    # Remembered: the next start has nothing to do, and the next analysis is the same object.
    assert corpus_parts.start_analysis(documents, processes=2) is None
    assert analyze_documents(documents, processes=2) is first
    # A plain sequence of the same documents is not remembered: its workers start.
    pending = corpus_parts.start_analysis(tuple(documents), processes=2)
    assert pending is not None
    _assert_identical(analyze_documents(tuple(documents), pending=pending), first)


def _all_ended(pids: list[int | None], seconds: float = 30.0) -> bool:
    """Whether every process has exited (gone, or a zombie the pool has yet to reap), waiting up
    to `seconds`: the pool's own thread reaps them, so they are watched in /proc, not joined."""

    def ended(pid: int | None) -> bool:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError):  # reaped between the open and the read
            return True
        return stat.rsplit(")", 1)[1].split()[0] == "Z"

    deadline = time.monotonic() + seconds
    while not all(map(ended, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return all(map(ended, pids))


def test_started_early_the_analysis_is_the_same_and_closing_ends_the_workers() -> None:
    documents = _documents(150, seed=7)
    forget_analyses()
    expected = analyze_corpus(d.content for d in documents)
    forget_analyses()
    pending = corpus_parts.start_analysis(documents, processes=2)
    assert pending is not None
    workers = [w.pid for w in pending._pool._processes.values()]
    _assert_identical(analyze_documents(documents, pending=pending), expected)
    assert _all_ended(workers)
    # Closed without a result (the run failed first): no part left to take, the workers end.
    forget_analyses()
    abandoned = corpus_parts.start_analysis(documents, processes=2)
    assert abandoned is not None
    workers = [w.pid for w in abandoned._pool._processes.values()]
    abandoned.close()
    assert abandoned._counter.value == len(abandoned.bounds) - 1
    assert _all_ended(workers)


def _dies() -> dict[int, AnalysedCorpus]:
    """A worker that takes a part and is killed (out of memory, say) before it sends anything."""
    assert corpus_parts._FORKED is not None
    counter = corpus_parts._FORKED[2]
    with counter.get_lock():
        counter.value += 1
    os._exit(3)


def test_parts_of_a_worker_that_died_are_analysed_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    documents = _documents(150, seed=9)
    forget_analyses()
    expected = analyze_corpus(d.content for d in documents)
    monkeypatch.setattr(corpus_parts, "_worker", _dies)
    forget_analyses()
    pending = corpus_parts.start_analysis(documents, processes=2)
    assert pending is not None
    pending._futures[0].exception(timeout=30)  # the worker died: part 0 was taken, never sent
    assert pending._counter.value == 1
    monkeypatch.setattr(corpus_parts, "analyze_corpus", _recording_analysis)
    monkeypatch.setitem(_PIDS, "folder", tmp_path)
    _assert_identical(analyze_documents(documents, pending=pending), expected)
    # This process analysed every part: the ones it took, and the dead worker's.
    pids = [int(p.read_text()) for p in tmp_path.glob("*.pid")]
    assert pids == [os.getpid()] * (len(pending.bounds) - 1)


def test_a_fork_that_fails_analyses_here(monkeypatch: pytest.MonkeyPatch) -> None:
    documents = _documents(120, seed=12)

    def no_process(*args: object, **kwargs: object) -> None:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(corpus_parts.ProcessPoolExecutor, "submit", no_process)
    assert corpus_parts.start_analysis(documents, processes=2) is None
    forget_analyses()
    _assert_identical(analyze_documents(documents, processes=2), analyze_corpus(d.content for d in documents))


def _blas_threads() -> list[int]:
    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


@pytest.mark.parametrize("ending", ["result", "close"])
def test_blas_threads_are_limited_while_workers_run_and_restored_after(
    ending: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under `-n auto` every worker starts with one BLAS thread (conftest.py), the very limit the
    # analysis sets on 2 CPUs: the test sets limits of its own, each distinct, so that a limit
    # left in place (or never set) shows. Four threads before, three CPUs, one worker: two during.
    monkeypatch.setattr(corpus_parts, "_cpus", lambda: 3)
    documents = _documents(150, seed=8)
    forget_analyses()
    with threadpool_limits(limits=4, user_api="blas"):
        before = _blas_threads()
        assert before and set(before) == {4}, "no BLAS library loaded: nothing to limit"
        pending = corpus_parts.start_analysis(documents, processes=2)
        assert pending is not None
        assert _blas_threads() == [2] * len(before)
        if ending == "result":
            pending.result()
        else:  # the run failed before it needed the analysis
            pending.close()
        assert _blas_threads() == before


def test_an_analysis_found_meanwhile_ends_the_workers_and_restores_blas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The workers started (the cache folder did not have the corpus yet); by the time BM25 asks for
    # the result, the folder has it (another gate run of the same corpus stored it meanwhile): the
    # stored analysis is the answer, and the workers and the BLAS limit must not outlive the call.
    monkeypatch.setattr(corpus_parts, "_cpus", lambda: 3)
    documents = _Documents(_documents(150, seed=10))
    documents.corpus_fingerprint = corpus_fingerprint(tuple(documents))
    forget_analyses()
    expected = analyze_corpus(d.content for d in documents)
    forget_analyses()
    with threadpool_limits(limits=4, user_api="blas"):
        pending = corpus_parts.start_analysis(documents, processes=2, cache=tmp_path)
        assert pending is not None
        workers = [w.pid for w in pending._pool._processes.values()]
        store_analysis(tmp_path, documents.corpus_fingerprint, expected, DEFAULT_LANGUAGE)
        _assert_identical(analyze_documents(documents, pending=pending, cache=tmp_path), expected)
        assert pending._counter.value == len(pending.bounds) - 1  # no part left to take
        assert _blas_threads() == [4] * len(_blas_threads())
        assert _all_ended(workers, seconds=10)


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
    forget_analyses()
    monkeypatch.setattr(corpus_parts, "_cpus", lambda: 2)
    context = Context(dataset=dataset, depth=50)
    method = BM25Method()
    stop = method.prepare(context)  # as the evaluator does: workers start, rank joins in
    assert stop is not None
    parallel = method.rank(context)
    stop()
    forget_analyses()
    monkeypatch.setattr(corpus_parts, "_cpus", lambda: 1)
    assert BM25Method().prepare(context) is None
    single = BM25Method().rank(context)
    assert [r.indices.tolist() for r in parallel] == [r.indices.tolist() for r in single]
    assert [r.scores.tobytes() for r in parallel] == [r.scores.tobytes() for r in single]
    assert any(len(r.indices) for r in single)
