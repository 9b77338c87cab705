"""The vector search's passes beyond the float32 products: each chunk's candidates, and their
float64 rescoring; by the package's optional C kernel where it was built, by numpy otherwise.

`pip install` compiles `_vector_kernel.c`, `_vector_scan.c` and `_vector_ranking.c` into one
module where a C compiler exists (pyproject.toml, [[tool.setuptools.ext-modules]], optional) and
installs without it where none does: `KERNEL` is then None and both passes take numpy's path
(tests set `KERNEL` to None to force it). Either way the same candidates in the same order; the
float64 scores may differ in their last bits (the C sum's fixed order against the BLAS dgemv's,
which differs by CPU), below the rounding to SCORE_DECIMALS that precedes every ranking.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType

import numpy as np

from retrieval.run.ranking import SCORE_DECIMALS, Ranking, top_k

__all__ = ["KERNEL", "Rescoring", "in_place", "products", "ranked_candidates", "scan_range"]


def _load() -> ModuleType | None:
    """The compiled kernel next to this module, or None where the install built none."""
    try:
        return importlib.import_module("retrieval.methods.support._vector_kernel")
    except ImportError:
        return None


KERNEL: ModuleType | None = _load()


def products(questions32: np.ndarray, chunk: np.ndarray, out: np.ndarray) -> None:
    """A chunk's float32 scores, questions x documents, into `out`: the scan's only products, so
    that a test can give scores anywhere within float32's error bound (`_float32_error`)."""
    np.matmul(questions32, chunk.T, out=out)


def scan_range(
    questions32: np.ndarray,
    documents: np.ndarray,
    bounds: tuple[int, int],
    width: int,
    k: int,
    margin: np.ndarray,
    floor: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """retrieval.methods.vector._scan by the C kernel: the range's documents scored `width` at a
    time in float32, then each chunk's candidates (question, document, float32 score: by chunk,
    then question, then document) found while its scores are in cache, each question's best kept
    beside, which raise its threshold, max(floor, k-th best - margin), once there are k and every k
    more (numpy's path merges every question's at once, every few chunks: its threshold lags, more
    candidates, the same final ones). Returns the candidates and each question's k best (-inf
    where fewer)."""
    assert KERNEL is not None
    n_questions = len(questions32)
    lo, hi = bounds
    best = np.empty((n_questions, 2 * k), dtype=np.float32)
    sizes = np.zeros(n_questions, dtype=np.int64)
    floors = np.ascontiguousarray(floor, dtype=np.float32)
    threshold = floors.copy()
    margins = np.ascontiguousarray(margin, dtype=np.float64)
    # One score buffer for every full chunk: a fresh array per chunk costs its page faults each time.
    width = min(width, hi - lo)
    scores_buffer = np.empty((n_questions, width), dtype=np.float32)
    # Candidate buffers, grown by doubling, always with room for every score of the next chunk.
    room = max(4 * n_questions * width, 1)
    buffers: tuple[np.ndarray, ...] = (np.empty(room, np.int32), np.empty(room, np.int32), np.empty(room, np.float32))
    used = 0
    for start in range(lo, hi, width):
        chunk = np.asarray(documents[start : min(start + width, hi)], dtype=np.float32)
        scores = scores_buffer if len(chunk) == width else np.empty((n_questions, len(chunk)), dtype=np.float32)
        products(questions32, chunk, scores)
        if used + scores.size > len(buffers[0]):
            grown = tuple(np.empty(2 * len(buffers[0]) + scores.size, buffer.dtype) for buffer in buffers)
            for new, old in zip(grown, buffers, strict=True):
                new[:used] = old[:used]
            buffers = grown
        rows, cols, values = (buffer[used:] for buffer in buffers)
        used += KERNEL.chunk_candidates(
            scores, threshold, floors, margins, best, sizes, rows, cols, values,
            n_questions, scores.shape[1], k, start,
        )  # fmt: skip
    KERNEL.kept_best(best, sizes, n_questions, k)
    row, col, found = (buffer[:used] for buffer in buffers)
    return row, col, found, best[:, :k]


def in_place(documents: np.ndarray) -> bool:
    """Whether the C kernel can search this corpus to the end: its float32 rows read in place by
    the rescoring (a C-contiguous float32 array, possibly memory-mapped), its columns int32."""
    return (
        KERNEL is not None and documents.dtype == np.float32 and documents.flags.c_contiguous and len(documents) < 2**31
    )


def ranked_candidates(
    scans: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
    threshold: np.ndarray,
    questions: np.ndarray,
    documents: np.ndarray,
    k: int,
    pool: ThreadPoolExecutor,
    parts: Sequence[np.ndarray],
) -> list[Ranking]:
    """Each question's ranking from the ranges' scans (`scan_range`, in corpus order): the
    candidates >= its `threshold` (t - 2M) counted by range, then each range's scored in float64
    by the core that scanned it, in chunk order (its rows read forward once), into one array where
    each question's candidates follow each other in document order (question first, then range);
    then each part of the questions (contiguous) rounded and ranked by a core, as top_k ranks them:
    the same rankings as vector._kept and vector._ranked, without a Python step per question
    beyond its Ranking. A question with a NaN score is ranked by top_k itself."""
    assert KERNEL is not None and in_place(documents)
    kernel = KERNEL
    n_questions, dims = questions.shape
    limit = np.ascontiguousarray(threshold, dtype=np.float32)
    queries: np.ndarray = np.ascontiguousarray(questions, dtype=np.float64)
    narrow = queries.astype(np.float32)
    if np.array_equal(narrow, queries):  # float32 embeddings: the same products, half the bytes
        queries = narrow
    counts = np.zeros((len(scans), n_questions), dtype=np.int64)

    def count(r: int) -> None:
        kernel.kept_counts(scans[r][0], scans[r][2], limit, counts[r], len(scans[r][0]), n_questions)

    list(pool.map(count, range(len(scans))))
    offsets = np.zeros(n_questions * len(scans) + 1, dtype=np.int64)
    np.cumsum(counts.T.reshape(-1), out=offsets[1:])
    # Each range's next place for each question, advanced by the kernel: a copy, never a view of offsets.
    places = offsets[:-1].reshape(n_questions, len(scans)).T.copy()
    total = int(offsets[-1])
    kept_documents, exact = np.empty(total, dtype=np.int64), np.empty(total, dtype=np.float64)

    def rescore(r: int) -> None:
        row, col, found, _ = scans[r]
        kernel.kept_rescored(
            row, col, found, limit, places[r], documents, queries, queries.dtype == np.float32,
            kept_documents, exact, len(row), len(documents), n_questions, dims, total,
        )  # fmt: skip

    list(pool.map(rescore, range(len(scans))))
    starts = np.ascontiguousarray(offsets[:: len(scans)])
    indices = np.empty((n_questions, k), dtype=np.int64)
    scores = np.empty((n_questions, k), dtype=np.float64)
    lengths = np.empty(n_questions, dtype=np.int64)
    scale = 10.0**SCORE_DECIMALS

    def rank(part: np.ndarray) -> None:
        lo, hi = int(part[0]), int(part[-1]) + 1
        kernel.ranked(kept_documents, exact, starts, indices, scores, lengths, lo, hi, k, scale)

    list(pool.map(rank, [part for part in parts if len(part)]))
    rankings: list[Ranking] = []
    for question, length in enumerate(lengths.tolist()):
        if length >= 0:
            rankings.append(Ranking(indices[question, :length], scores[question, :length]))
            continue
        first, last = int(starts[question]), int(starts[question + 1])
        best_of = top_k(np.round(exact[first:last], SCORE_DECIMALS), k)
        rankings.append(Ranking(kept_documents[first:last][best_of.indices], best_of.scores))
    return rankings


class Rescoring:
    """Candidates' float64 dot products with their questions, by numpy, where the C kernel cannot
    read the corpus in place (`ranked_candidates` scores them otherwise): a question at a time (in
    a question's order, its candidates' rows are random reads, as much data as the scan itself):
    the rows gathered into a buffer reused from question to question (np.take without bounds
    checks, mode "clip": the candidates are corpus indices), copied to float64 in place and
    multiplied: 0.72 s a million rows against 0.80 s for a fresh fancy index and float64 array
    each time (mode "raise", which buffers the output, measured slower with kept buffers)."""

    def __init__(self, questions: np.ndarray, documents: np.ndarray) -> None:
        """For float64 `questions` against `documents` (a 2-D array, possibly memory-mapped)."""
        self._questions, self._documents = questions, documents
        self._rows = np.empty((0, documents.shape[1]), dtype=documents.dtype)
        self._wide = np.empty((0, documents.shape[1]), dtype=np.float64)

    def one(self, candidates: np.ndarray, question: int) -> np.ndarray:
        """The float64 scores of the documents `candidates` for question number `question`, by numpy."""
        m = len(candidates)
        if m > len(self._rows):
            size = max(m, 2 * len(self._rows))
            dims = self._rows.shape[1]
            self._rows, self._wide = np.empty((size, dims), self._rows.dtype), np.empty((size, dims))
        np.take(self._documents, candidates, axis=0, out=self._rows[:m], mode="clip")
        np.copyto(self._wide[:m], self._rows[:m])
        return self._wide[:m] @ self._questions[question]
