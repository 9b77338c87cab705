"""A large corpus analysed in parts, one process per part, merged into the very AnalysedCorpus
that one `analyze_corpus` call over the whole gives (same vocabulary order, same ids).

Analysis is pure Python per chunk and holds the GIL: threads would not share it, processes do.
The parts are contiguous ranges of documents. Part k's vocabulary is in order of first
appearance within part k, so the whole corpus's order of first appearance is part 0's
vocabulary, then part 1's terms not yet seen in their order, and so on: the merge renumbers
each part's ids through that order, and every BM25 score built on the result is the same float.

Worker processes are forked (POSIX): they inherit the documents, so no text is copied
through a pipe, and send back only their part's ids. Below `PART_DOCUMENTS` documents per part,
or with one CPU, or where fork is unavailable, the corpus is analysed in this process.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from retrieval.data.analyzer import AnalysedCorpus, analyze_corpus
from retrieval.data.dataset import Document

__all__ = ["PART_DOCUMENTS", "analyze_documents", "merge_parts"]

# At least this many documents per part: below it a worker's start and the ids' transfer cost
# more than the half of the analysis they save. Above analyzer._CORPORA_TEXTS too, so that no
# part is kept in the analyzer's cache of small corpora.
PART_DOCUMENTS = 150_000

# The documents a forked worker reads its part from (set just before the fork, cleared after).
_FORKED: Sequence[Document] = ()


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _analyse_range(start: int, stop: int) -> AnalysedCorpus:
    return analyze_corpus(_FORKED[i].content for i in range(start, stop))


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


def analyze_documents(documents: Sequence[Document], processes: int | None = None) -> AnalysedCorpus:
    """analyze_corpus over the documents' contents, in up to `processes` (default: the CPUs this
    process may use) parts of at least PART_DOCUMENTS documents each, the first in this process."""
    global _FORKED
    wanted = _cpus() if processes is None else processes
    count = min(wanted, len(documents) // PART_DOCUMENTS)
    if count < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return analyze_corpus(d.content for d in documents)
    bounds = [len(documents) * k // count for k in range(count + 1)]
    _FORKED = documents
    try:
        with ProcessPoolExecutor(max_workers=count - 1, mp_context=multiprocessing.get_context("fork")) as pool:
            others = [pool.submit(_analyse_range, bounds[k], bounds[k + 1]) for k in range(1, count)]
            first = _analyse_range(bounds[0], bounds[1])
            parts = [first, *(future.result() for future in others)]
    finally:
        _FORKED = ()
    return merge_parts(parts)
