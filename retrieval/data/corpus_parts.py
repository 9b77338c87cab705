"""A large corpus analysed in parts by several processes, merged into the very AnalysedCorpus
that one `analyze_corpus` call over the whole gives (same vocabulary order, same ids).

Analysis is pure Python per chunk and holds the GIL: threads would not share it, processes do.
The corpus is cut into contiguous parts; forked worker processes and this process take parts
one at a time from a shared counter until none is left, so the work balances itself: the
workers can start early (`start_analysis`, while this process embeds or runs the vector
search) and this process joins in when it needs the result (`PendingAnalysis.result`).
Each process keeps one AnalysisState for all its parts, so a chunk is analysed once per
process, not once per part.

Part k's vocabulary is in order of first appearance within part k, so the whole corpus's order
of first appearance is part 0's vocabulary, then part 1's terms not yet seen in their order,
and so on: the merge renumbers each part's ids through that order, and every BM25 score built
on the result is the same float.

Workers are forked (POSIX): they inherit the documents, so no text is copied through a pipe,
and send back only their parts' ids. Below `START_DOCUMENTS` documents, with one CPU, or where
fork is unavailable or unsafe (Windows, macOS), the corpus is analysed in this process.

Workers pay where this process has other work meanwhile (`start_analysis` beside the vector
search); a corpus analysed now, with nothing else to do (`analyze_documents` without a pending
analysis: a bm25-only run), gets one process per two cores, as one process already keeps two
busy (corpus_terms cuts the next batch in a thread): on two cores, no fork, no second analysis of
the same chunks and no merge: 0.7 to 0.8 s of CPU less at 100,000 documents, wall within 0.2 s.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import warnings
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from retrieval.data.analysis_cache import analysed_here, load_analysis, store_analysis, trusted
from retrieval.data.analyzer import DEFAULT_LANGUAGE
from retrieval.data.corpus_terms import (
    AnalysedCorpus,
    AnalysisState,
    analyze_corpus,
    remember_corpus,
    remembered_corpus,
)
from retrieval.data.dataset import Document, contents_of

__all__ = [
    "PART_DOCUMENTS",
    "START_DOCUMENTS",
    "PendingAnalysis",
    "analyze_documents",
    "merge_parts",
    "part_bounds",
    "start_analysis",
]

# A corpus of fewer documents is analysed in this process: a worker's start, and the transfer
# and merge of its parts, would cost more than the share of the analysis it takes.
START_DOCUMENTS = 20_000
# Parts shrink as the corpus is used up (see part_bounds), down to this many documents: a
# smaller part's share of the renumbering and the merge outweighs what finer balancing saves.
PART_DOCUMENTS = 3_000

# What a forked worker reads (set just before the fork, cleared after it): the documents, the
# parts' bounds, the shared counter of the next part to take and the language.
_FORKED: tuple[Sequence[Document], Sequence[int], Any, str] | None = None


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def part_bounds(count: int, processes: int) -> list[int]:
    """Bounds of contiguous parts of `count` documents for `processes` processes, largest first:
    each part is 1 / (2 x processes) of what is left, and at least PART_DOCUMENTS, so the last
    parts are small and no process waits long for another's last part."""
    bounds = [0]
    while bounds[-1] < count:
        size = max(PART_DOCUMENTS, (count - bounds[-1]) // (2 * processes))
        bounds.append(min(count, bounds[-1] + size))
    return bounds


def _analyse_part(
    documents: Sequence[Document], bounds: Sequence[int], part: int, state: AnalysisState
) -> AnalysedCorpus:
    return analyze_corpus(contents_of(documents[bounds[part] : bounds[part + 1]]), state)


def _take_parts(
    documents: Sequence[Document], bounds: Sequence[int], counter: Any, language: str
) -> dict[int, AnalysedCorpus]:
    """Analyse parts, one at a time, until the counter says every part is taken."""
    state = AnalysisState(language)
    done: dict[int, AnalysedCorpus] = {}
    while True:
        with counter.get_lock():
            part = counter.value
            if part >= len(bounds) - 1:
                return done
            counter.value = part + 1
        done[part] = _analyse_part(documents, bounds, part, state)


def _worker() -> dict[int, AnalysedCorpus]:
    assert _FORKED is not None, "a part worker runs in a process forked by PendingAnalysis"
    return _take_parts(*_FORKED)


def merge_parts(parts: Sequence[AnalysedCorpus]) -> AnalysedCorpus:
    """The AnalysedCorpus of the parts' documents one after the other, numbered in order of
    first appearance over the whole, as one analyze_corpus call numbers them."""
    numbering: dict[str, int] = {}
    for part in parts:
        for term in part.vocabulary:
            numbering.setdefault(term, len(numbering))
    renumbered = []
    for part in parts:
        table = np.fromiter(map(numbering.__getitem__, part.vocabulary), dtype=np.int32, count=len(part.vocabulary))
        renumbered.append(table[part.ids] if len(part.ids) else np.empty(0, dtype=np.int32))
    ids = np.concatenate(renumbered) if renumbered else np.empty(0, dtype=np.int32)
    lengths = np.concatenate([p.lengths for p in parts]) if parts else np.empty(0, dtype=np.int64)
    # Read-only as analyze_corpus's: an index may share them, and scipy sorts arrays in place.
    ids.setflags(write=False)
    lengths.setflags(write=False)
    return AnalysedCorpus(tuple(numbering), ids, lengths.astype(np.int64, copy=False))


class PendingAnalysis:
    """A corpus's analysis under way in forked workers (see the module docstring).

    `result()` takes the parts no worker has taken, waits for the workers' parts and merges;
    `close()` stops the workers after their current part without a result (a run that failed
    before it needed one). Either ends the workers; `result()` may be called once.
    """

    def __init__(
        self, documents: Sequence[Document], workers: int, cpus: int, language: str = DEFAULT_LANGUAGE
    ) -> None:
        global _FORKED
        context = multiprocessing.get_context("fork")
        self.documents, self.language = documents, language
        self.bounds = part_bounds(len(documents), workers + 1)
        self._counter = context.Value("i", 0)
        _FORKED = (documents, self.bounds, self._counter, language)
        try:
            # With fork, the pool starts all its processes at the first submit: they inherit _FORKED.
            # Python 3.12+ warns when the process has threads (pytest-xdist's workers do): a child
            # could block on a lock another thread held at the fork. These children only analyse
            # the inherited documents and answer through the pool's pipes, taking no such lock.
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", r".*use of fork\(\) may lead to deadlocks", DeprecationWarning)
                self._pool = ProcessPoolExecutor(max_workers=workers, mp_context=context)
                self._futures: list[Future[dict[int, AnalysedCorpus]]] = [
                    self._pool.submit(_worker) for _ in range(workers)
                ]
        finally:
            _FORKED = None
        # The workers take `workers` CPUs: BLAS here (the vector search meanwhile) gets the rest,
        # as more BLAS threads than free cores spin and slow both.
        self._blas = threadpool_limits(limits=max(1, cpus - workers), user_api="blas")

    def result(self) -> AnalysedCorpus:
        """The AnalysedCorpus of the whole corpus, as analyze_corpus gives it. The parts of a
        worker that died (killed for memory, say) are analysed here: its error is not the run's."""
        try:
            parts = _take_parts(self.documents, self.bounds, self._counter, self.language)
            for future in self._futures:
                with contextlib.suppress(Exception):
                    parts.update(future.result())
        finally:
            self.close(wait=True)  # the workers are done: no thread of the pool outlives the call
        state = AnalysisState(self.language)
        for k in range(len(self.bounds) - 1):
            if k not in parts:
                parts[k] = _analyse_part(self.documents, self.bounds, k, state)
        return merge_parts([parts[k] for k in range(len(self.bounds) - 1)])

    def close(self, wait: bool = False) -> None:
        """Let no worker take another part, and end the pool (idempotent); with `wait`, once the
        workers have exited (else they exit after their current part)."""
        with self._counter.get_lock():
            self._counter.value = len(self.bounds) - 1
        self._pool.shutdown(wait=wait, cancel_futures=True)
        self._blas.restore_original_limits()


def start_analysis(
    documents: Sequence[Document],
    processes: int | None = None,
    cache: str | Path | None = None,
    language: str = DEFAULT_LANGUAGE,
    expected: str | None = None,
) -> PendingAnalysis | None:
    """Start analysing the documents' contents (in `language`) in forked workers, in up to `processes` (default:
    the CPUs this process may use) processes counting this one, which joins in at `result()`.
    None when the corpus is too small to split, with one process, without fork, or already
    analysed (in this process, or in the `cache` folder, of the `expected` digest when given):
    analyze_documents then finds or analyses it here."""
    cpus = _cpus()
    workers = (cpus if processes is None else processes) - 1
    # macOS offers fork, but system frameworks in the parent can crash a forked child there.
    forkable = "fork" in multiprocessing.get_all_start_methods() and sys.platform != "darwin"
    if workers < 1 or len(documents) < START_DOCUMENTS or not forkable:
        return None
    if _known(documents, cache, language, expected) is not None:
        return None  # analysed already (by an earlier run, or in this process: a recording runs twice)
    try:
        return PendingAnalysis(documents, workers, cpus, language)
    except OSError:  # no process to be had (a container's limit, memory): analysed here
        return None


def _fingerprint(documents: Sequence[Document]) -> str | None:
    """What a loaded corpus is remembered by: its fingerprint (ids, titles, texts), which it
    carries (retrieval.data.dataset); None for other sequences, which are not remembered."""
    fingerprint = getattr(documents, "corpus_fingerprint", None)
    return fingerprint if isinstance(fingerprint, str) else None


def _memory_key(fingerprint: str, language: str) -> str:
    """The key of a loaded corpus's analysis in a language among the analyses this process
    remembers (corpus_terms)."""
    return f"corpus {language} {fingerprint}"


def _known(
    documents: Sequence[Document], cache: str | Path | None, language: str, expected: str | None
) -> AnalysedCorpus | None:
    """The corpus's analysis in `language` if this process or the cache folder has it (then
    remembered here), and, with `expected`, if it is of that digest or was analysed here
    (analysis_cache.trusted)."""
    fingerprint = _fingerprint(documents)
    if fingerprint is None:
        return None
    known = remembered_corpus(_memory_key(fingerprint, language))
    if known is not None and (cache is None or trusted(known, expected)):
        return known
    if cache is None:
        return None
    known = load_analysis(cache, fingerprint, len(documents), language, expected)
    if known is not None:
        remember_corpus(_memory_key(fingerprint, language), known)
    return known


def analyze_documents(
    documents: Sequence[Document],
    processes: int | None = None,
    pending: PendingAnalysis | None = None,
    cache: str | Path | None = None,
    language: str = DEFAULT_LANGUAGE,
    expected: str | None = None,
) -> AnalysedCorpus:
    """analyze_corpus over the documents' contents: the result of `pending` (start_analysis over
    these documents) when given, else in parts now when the corpus is large enough (start_analysis).
    A loaded corpus is remembered by its fingerprint, in this process and, with `cache`, in that
    folder (retrieval.data.analysis_cache), so neither a recording's second run of the methods
    nor the next gate analyses it again. `expected`, the digest of the analysis the baseline's
    figures were computed from: a cache entry of another digest is analysed again, never used."""
    known = _known(documents, cache, language, expected)
    if known is not None:
        if pending is not None:
            pending.close()
        return known
    if pending is not None and pending.language != language:  # started for another language
        pending.close()
        pending = None
    # Analysed now, this process takes part: one process keeps two cores busy (its cut runs in
    # a thread, corpus_terms), so processes are forked only for the cores beyond two.
    pending = pending or start_analysis(documents, processes or max(1, _cpus() // 2), language=language)
    fingerprint = _fingerprint(documents)
    if pending is not None:
        corpus = pending.result()
    else:  # a loaded corpus is remembered by its fingerprint below, not by its texts
        corpus = analyze_corpus(contents_of(documents), language=language, remember=fingerprint is None)
    if fingerprint is not None:
        remember_corpus(_memory_key(fingerprint, language), corpus)
        if cache is not None:
            analysed_here(corpus)
            store_analysis(cache, fingerprint, corpus, language)
    return corpus
