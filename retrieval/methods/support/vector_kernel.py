"""The vector search's passes beyond the float32 products: each chunk's candidates, and their
float64 rescoring; by the package's optional C kernel where it was built, by numpy otherwise.

`pip install` compiles `_vector_kernel.c` where a C compiler exists (pyproject.toml,
[[tool.setuptools.ext-modules]], optional) and installs without it where none does: `KERNEL` is
then None and both passes take numpy's path (tests set `KERNEL` to None to force it). Either way
the same candidates in the same order; the float64 scores may differ in their last bits (the C
sum's fixed order against the BLAS dgemv's, which differs by CPU), below the rounding to
SCORE_DECIMALS that precedes every ranking.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import numpy as np

__all__ = ["KERNEL", "Rescoring", "scan_range"]


def _load() -> ModuleType | None:
    """The compiled kernel next to this module, or None where the install built none."""
    try:
        return importlib.import_module("retrieval.methods.support._vector_kernel")
    except ImportError:
        return None


KERNEL: ModuleType | None = _load()


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
    buffers: tuple[np.ndarray, ...] = (np.empty(room, np.int64), np.empty(room, np.int64), np.empty(room, np.float32))
    used = 0
    for start in range(lo, hi, width):
        chunk = np.asarray(documents[start : min(start + width, hi)], dtype=np.float32)
        scores = scores_buffer if len(chunk) == width else np.empty((n_questions, len(chunk)), dtype=np.float32)
        np.matmul(questions32, chunk.T, out=scores)
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


class Rescoring:
    """Candidates' float64 dot products with their questions. The C kernel takes a corpus range's
    candidates of every question at once, in chunk order (the range's rows read forward once, the
    rows of a chunk's candidates close together), each float32 row read in place. numpy takes a
    question at a time (in a question's order, its candidates' rows are random reads, as much data
    as the scan itself): the rows gathered into a buffer reused from question to question (np.take
    without bounds checks, mode "clip": the candidates are corpus indices), copied to float64 in
    place and multiplied: 0.72 s a million rows against 0.80 s for a fresh fancy index and float64
    array each time (mode "raise", which buffers the output, measured slower with kept buffers)."""

    def __init__(self, questions: np.ndarray, documents: np.ndarray) -> None:
        """For float64 `questions` against `documents` (a 2-D array, possibly memory-mapped)."""
        self._questions, self._documents = questions, documents
        in_place = documents.dtype == np.float32 and documents.flags.c_contiguous
        self._kernel = KERNEL if in_place else None
        self._rows = np.empty((0, documents.shape[1]), dtype=documents.dtype)
        self._wide = np.empty((0, documents.shape[1]), dtype=np.float64)

    def pairs(self, documents: np.ndarray, questions: np.ndarray) -> np.ndarray | None:
        """The float64 score of document documents[i] for question questions[i], each i, from the
        C kernel; None where it was not built, or cannot read this corpus in place."""
        if self._kernel is None:
            return None
        queries: np.ndarray = np.ascontiguousarray(self._questions, dtype=np.float64)
        narrow = queries.astype(np.float32)
        # Questions that float32 holds exactly (float32 embeddings): half the bytes to read a pair,
        # the same products.
        if np.array_equal(narrow, queries):
            queries = narrow
        which_documents = np.ascontiguousarray(documents, dtype=np.int64)
        which_questions = np.ascontiguousarray(questions, dtype=np.int64)
        exact = np.empty(len(which_documents))
        n, dims = self._documents.shape
        self._kernel.rescored(
            self._documents, queries, which_documents, which_questions, exact, queries.dtype == np.float32,
            n, len(queries), dims, len(exact),
        )  # fmt: skip
        return exact

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
