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

__all__ = ["KERNEL", "ChunkCandidates", "Rescoring"]


def _load() -> ModuleType | None:
    """The compiled kernel next to this module, or None where the install built none."""
    try:
        return importlib.import_module("retrieval.methods.support._vector_kernel")
    except ImportError:
        return None


KERNEL: ModuleType | None = _load()

# The first room for candidates, per question of the batch, grown by doubling as needed.
_ROOM_PER_QUESTION = 16


class ChunkCandidates:
    """The candidates of one corpus range, added chunk by chunk: each (question, document) whose
    float32 score is >= the question's threshold (NaN compares false), in chunk order, then by
    question, then by document, with its float32 score."""

    def __init__(self, n_questions: int, width: int) -> None:
        """For chunks of `n_questions` x at most `width` scores."""
        self._kernel = KERNEL
        if self._kernel is None:
            # One mask for every full chunk: a fresh array per chunk costs its page faults each time.
            self._mask = np.empty((n_questions, width), dtype=bool)
            self._pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
            return
        self._used = 0
        self._buffers: tuple[np.ndarray, ...] = ()
        self._grow(max(1024, _ROOM_PER_QUESTION * n_questions))

    def _grow(self, room: int) -> None:
        used = self._used
        fresh: tuple[np.ndarray, ...] = (
            np.empty(room, dtype=np.int64),
            np.empty(room, dtype=np.int64),
            np.empty(room, dtype=np.float32),
        )
        if used:
            for new, old in zip(fresh, self._buffers, strict=True):
                new[:used] = old[:used]
        self._buffers = fresh

    def add(self, scores: np.ndarray, threshold: np.ndarray, start: int) -> tuple[np.ndarray, ...]:
        """The candidates of the chunk whose first document is `start`: their rows (questions) and
        float32 scores. `scores` is questions x documents (float32, C order), `threshold` one float32
        a question (any shape of that size)."""
        if self._kernel is None:
            return self._numpy_add(scores, threshold, start)
        n_questions, width = scores.shape
        limits = np.ascontiguousarray(threshold, dtype=np.float32).reshape(-1)
        while True:
            rows, cols, values = (buffer[self._used :] for buffer in self._buffers)
            count = self._kernel.chunk_candidates(scores, limits, rows, cols, values, n_questions, width, start)
            if count <= len(rows):
                break
            # More candidates than room: the buffers grow and the chunk is searched again.
            self._grow(max(2 * len(self._buffers[0]), self._used + count))
        at, self._used = self._used, self._used + count
        return self._buffers[0][at : self._used], self._buffers[2][at : self._used]

    def _numpy_add(self, scores: np.ndarray, threshold: np.ndarray, start: int) -> tuple[np.ndarray, ...]:
        full = scores.shape == self._mask.shape
        mask = self._mask if full else np.empty(scores.shape, dtype=bool)
        np.greater_equal(scores, threshold.reshape(-1, 1), out=mask)
        # flatnonzero then divmod: the same (row, col) pairs in the same order as np.nonzero,
        # which costs three to four times more on a 2-D mask.
        flat = np.flatnonzero(mask)
        row, col = np.divmod(flat, scores.shape[1])
        found = scores.reshape(-1)[flat]
        self._pieces.append((row, col + start, found))
        return row, found

    def arrays(self) -> tuple[np.ndarray, ...]:
        """Every candidate added: rows (questions), documents, float32 scores."""
        if self._kernel is not None:
            return tuple(buffer[: self._used] for buffer in self._buffers)
        if not self._pieces:
            empty = np.empty(0, dtype=np.int64)
            return empty, empty, np.empty(0, dtype=np.float32)
        return tuple(np.concatenate(parts) for parts in zip(*self._pieces, strict=True))


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
