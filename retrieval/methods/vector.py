"""Dense retrieval: cosine similarity between unit-length question and document vectors.

Exact ties (equal cosines after rounding to SCORE_DECIMALS: duplicated documents, or
vectors equal to that precision) go to the lower document id: the corpus is sorted by id
at load time (retrieval.data.dataset), so the lower corpus index is the lower id, whatever the
order of the lines in corpus.jsonl.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval.config import Settings
from retrieval.methods.base import Context
from retrieval.methods.support.sharding import Shard, ShardedSearch
from retrieval.run.ranking import Ranking, top_k, top_k_among

__all__ = ["VectorMethod", "cosine_rankings"]

QUESTION_BATCH = 256
# Cosines are rounded to this many decimals before ranking, so that two documents within
# float noise of each other tie (and go to the lower corpus index): with float64 products,
# a score straddling a rounding boundary differently on two CPUs becomes vanishingly rare.
SCORE_DECIMALS = 9


# Above this many documents the corpus is scored block by block (see _blocked_rankings).
DOCUMENT_BLOCK = 16_384
# Questions scored together against one block: bounds the score block at 1,024 x 16,384 float64.
BLOCKED_QUESTION_BATCH = 1024


def cosine_rankings(questions: np.ndarray, documents: np.ndarray, depth: int) -> list[Ranking]:
    """Rank every document for every question; one matrix product per batch of questions.

    Vectors are unit length, so the dot product is the cosine. The product runs in float64:
    float32 BLAS kernels differ between CPUs in their last bits, which could swap two
    near-tied documents and make a replayed gate disagree with the machine that recorded it.
    A corpus of up to DOCUMENT_BLOCK documents is copied to float64 once per call; a larger one
    (possibly memory-mapped) is read block by block, so memory does not grow with the corpus,
    and scored in float32 only to find the candidates that float64 then scores (the same
    rankings and scores: `_blocked_rankings`).
    """
    if len(documents) > DOCUMENT_BLOCK and depth > 0:
        rankings: list[Ranking] = []
        for start in range(0, len(questions), BLOCKED_QUESTION_BATCH):
            batch = np.asarray(questions[start : start + BLOCKED_QUESTION_BATCH], dtype=np.float64)
            rankings.extend(_blocked_rankings(batch, documents, depth))
        return rankings
    corpus = np.asarray(documents, dtype=np.float64)
    rankings = []
    for start in range(0, len(questions), QUESTION_BATCH):
        batch = np.asarray(questions[start : start + QUESTION_BATCH], dtype=np.float64)
        scores = np.round(batch @ corpus.T, SCORE_DECIMALS)
        rankings.extend(top_k(row, depth) for row in scores)
    return rankings


def _blocked_rankings(batch: np.ndarray, documents: np.ndarray, depth: int) -> list[Ranking]:
    """top_k of each question's rounded float64 cosines over the whole corpus, read by blocks.

    Products in float64 cost three times those in float32, so the blocks are scored in float32
    to find candidates, and only the candidates are scored again in float64 and rounded, as the
    one-block path scores every document. Why no document of the final top is missed: a float32
    dot product of n terms is within e = (n + 2) units of 2^-23 x |q| x |d| of the exact one
    (the classic bound for any order of summation, plus each side's conversion to float32), and
    so within e + 1e-9 of the rounded float64 cosine; e is taken with the largest |d| of the
    document's block (`_block_error`), so float32 score s gives the bounds s - e <= cosine <= s + e.
    If `depth` documents have s - e >= L, then `depth` documents have a cosine >= L, so the
    depth-th best rounded cosine r_k is >= L; a document of the final top has s + e >= its cosine
    >= r_k >= L. Each question keeps L, the depth-th best s - e of the documents kept so far
    (raised from time to time, `_raise`); a document is kept when s + e >= L at its block's
    time, and every document that could reach the top is (a document not kept has s - e < L,
    so it cannot lower the depth-th best s - e either). At the end, those with s + e >= the
    final L are scored in float64.

    Where the time goes at 1,000,000 x 384 (docs/performance.md): the float32 products; the
    kept documents are found from maxima of groups of GROUP scores (one pass that reads the
    block's scores, then only the few groups that hold a candidate are looked at), not by a
    mask over every score.
    """
    if isinstance(documents, np.memmap):  # the same pages, without memmap's Python-level indexing
        documents = documents.view(np.ndarray)
    n_questions, n = len(batch), len(documents)
    k = min(depth, n)
    questions32 = batch.astype(np.float32)
    # e of a question against a block of largest norm 1 (scaled by the block's own below).
    unit = (batch.shape[1] + 2) * 2.0**-23 * np.linalg.norm(batch, axis=1)
    lower = np.full(n_questions, -np.inf)
    # Scores document by question: a group's maximum is then an elementwise maximum of whole rows.
    buffer = np.empty((DOCUMENT_BLOCK, n_questions), dtype=np.float32)
    kept = _Kept.empty(n_questions)
    pending: list[_Kept] = []
    raise_at = 1
    passed = n_questions * DOCUMENT_BLOCK  # candidates of the block before: none yet, so every score
    for number, start in enumerate(range(0, n, DOCUMENT_BLOCK)):
        block = np.asarray(documents[start : start + DOCUMENT_BLOCK], dtype=np.float32)
        width = len(block)
        error = unit * _largest_norm(block) + 10.0**-SCORE_DECIMALS
        if number == 0 and width >= k:
            # The first block fills L at once: its depth-th best s - e. About `depth` of its
            # documents pass for each question, too many for groups to skip any: it is scored
            # question x document and compared score by score.
            first = questions32 @ block.T
            kth = -np.partition(-first, k - 1, axis=1)[:, k - 1]
            lower = kth.astype(np.float64) - error
            raise_at = 2  # L is exact for this block: nothing to raise after it
            row, col = np.nonzero(first >= _below(lower, error)[:, None])
            found = first[row, col]
            del first
        else:
            scores = buffer if width == DOCUMENT_BLOCK else np.empty((width, n_questions), dtype=np.float32)
            np.matmul(block, questions32.T, out=scores)
            # Groups pay once few of them hold a candidate (the later blocks, as L rises); before
            # that, every score is compared (the count of the block before says which).
            sparse = passed * GROUP * SPARSE_GROUPS < width * n_questions
            row, col, found = (_at_least if sparse else _each_at_least)(scores, _below(lower, error))
        passed = len(row)
        pending.append(_Kept.of(row, col + start, found, error[row], n_questions))
        if number + 1 == raise_at:  # after blocks 1, 2, 4, 8, ...: L rises as the corpus is read
            raise_at *= 2
            kept, lower = kept.joined(pending).raised(lower, k)
            pending = []
    kept, lower = kept.joined(pending).raised(lower, k)
    rankings: list[Ranking] = []
    for question in range(n_questions):
        # In corpus order: a memory map is read forwards.
        candidates = np.sort(kept.documents[question, : kept.counts[question]])
        exact = np.round(np.asarray(documents[candidates], dtype=np.float64) @ batch[question], SCORE_DECIMALS)
        rankings.append(top_k_among(exact, candidates, k))
    return rankings


# Documents per group whose maximum score decides whether the group is looked at (_at_least),
# used once fewer than one group in SPARSE_GROUPS held a candidate in the block before.
GROUP = 32
SPARSE_GROUPS = 8


def _at_least(scores: np.ndarray, cut: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(questions, documents, values) of the scores (document x question) >= their question's
    `cut`, NaN never, ordered by question: from the maxima of groups of GROUP documents, so that
    one pass reads every score and only the groups holding a candidate are compared one by one."""
    width, n_questions = scores.shape
    whole = width - width % GROUP
    grouped = scores[:whole].reshape(whole // GROUP, GROUP, n_questions)
    # fmax ignores NaN: a NaN score never hides a candidate of its group, and is never one.
    row, group = np.nonzero((np.fmax.reduce(grouped, axis=1) >= cut).T)
    picked = grouped[group, :, row]
    inner, position = np.nonzero(picked >= cut[row][:, None])
    row, col, found = row[inner], group[inner] * GROUP + position, picked[inner, position]
    if whole < width:  # the last documents, fewer than a group
        tail_row, tail_col = np.nonzero((scores[whole:] >= cut).T)
        order = np.argsort(np.concatenate([row, tail_row]), kind="stable")
        row = np.concatenate([row, tail_row])[order]
        col = np.concatenate([col, tail_col + whole])[order]
        found = np.concatenate([found, scores[tail_col + whole, tail_row]])[order]
    return row, col, found


def _each_at_least(scores: np.ndarray, cut: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What _at_least gives, from a comparison of every score: for a block where most groups
    hold a candidate."""
    col, row = np.nonzero(scores >= cut)
    order = np.argsort(row.astype(np.int32), kind="stable")  # by question, each in document order
    row, col = row[order], col[order]
    return row, col, scores[col, row]


@dataclass(frozen=True)
class _Kept:
    """The documents kept for each question: a rectangle of one row per question, the first
    `counts[q]` entries of row q in use (s, e and the document of each)."""

    counts: np.ndarray
    scores: np.ndarray  # float32 scores as float64
    errors: np.ndarray
    documents: np.ndarray

    @classmethod
    def empty(cls, n_questions: int) -> _Kept:
        return cls.of(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0), np.empty(0), n_questions)

    @classmethod
    def of(cls, row: np.ndarray, col: np.ndarray, found: np.ndarray, error: np.ndarray, n_questions: int) -> _Kept:
        """The rectangle of entries ordered by question (`row`)."""
        counts = np.bincount(row, minlength=n_questions)
        width = int(counts.max()) if len(row) else 0
        offsets = np.arange(len(row)) - np.repeat(np.cumsum(counts) - counts, counts)
        scores = np.full((n_questions, width), -np.inf)
        errors = np.zeros((n_questions, width))
        documents = np.zeros((n_questions, width), dtype=np.int64)
        scores[row, offsets], errors[row, offsets], documents[row, offsets] = found, error, col
        return cls(counts, scores, errors, documents)

    def joined(self, others: Sequence[_Kept]) -> _Kept:
        """Every entry of this and `others` (unused places stay at -inf)."""
        parts = [self, *others]
        return _Kept(
            np.sum([p.counts for p in parts], axis=0),
            np.concatenate([p.scores for p in parts], axis=1),
            np.concatenate([p.errors for p in parts], axis=1),
            np.concatenate([p.documents for p in parts], axis=1),
        )

    def raised(self, lower: np.ndarray, k: int) -> tuple[_Kept, np.ndarray]:
        """L raised to each question's depth-th best s - e (where it has that many), and the entries
        that can no longer reach the top (s + e < L) dropped."""
        if self.scores.shape[1] >= k:
            bounds = self.scores - self.errors  # -inf where unused
            lower = np.maximum(lower, -np.partition(-bounds, k - 1, axis=1)[:, k - 1])
        row, position = np.nonzero(self.scores + self.errors >= lower[:, None])
        kept = _Kept.of(
            row,
            self.documents[row, position],
            self.scores[row, position],
            self.errors[row, position],
            len(lower),
        )
        return kept, lower


def _largest_norm(block: np.ndarray) -> float:
    """An upper bound on the largest vector norm of a float32 block: its squared norms summed in
    float32 are within (n + 2) units of 2^-24 of the exact ones, so that much is added back."""
    squares = np.einsum("ij,ij->i", block, block)
    largest = float(np.nanmax(squares, initial=0.0)) if len(squares) else 0.0
    return math.sqrt(largest * (1 + (block.shape[1] + 2) * 2.0**-23))


def _below(values: np.ndarray, margin: np.ndarray) -> np.ndarray:
    """values - margin as float32, never above the float64 difference (compared with float32
    scores without a float64 copy of the block)."""
    exact = values.astype(np.float64) - margin
    rounded = exact.astype(np.float32)
    return np.where(rounded > exact, np.nextafter(rounded, np.float32(-np.inf)), rounded)


class VectorMethod:
    """Ranks the corpus by cosine similarity to the question embedding."""

    name = "vector"
    requires: tuple[str, ...] = ()
    needs_vectors = True

    def __init__(self, cost_model: str | None = None) -> None:
        # Its calls are the shared question embeddings, priced as the embedding model.
        self.cost_model = cost_model

    def rank(self, context: Context) -> list[Ranking]:
        """The whole corpus ranked by cosine for each question, from the context's shared vectors."""
        if context.question_vectors is None or context.document_vectors is None:
            raise RuntimeError("vector method run without embeddings: the evaluator must embed first")
        return cosine_rankings(context.question_vectors, context.document_vectors, context.depth)

    def sharding(self) -> ShardedSearch:
        """The same search split by corpus shard, for a cluster executor (retrieval.methods.support.sharding)."""
        return VectorSharding()


def factory(settings: Settings, *, replay: bool = False) -> VectorMethod:
    """The built-in vector method over the profile's embeddings."""
    return VectorMethod(cost_model=settings.profile.embeddings.model or None)


class VectorSharding:
    """The vector search split by corpus shard: no corpus statistics, a shard needs only its
    vectors and the question vectors, and ranks them with `cosine_rankings` (same float64 product,
    same rounding, same tie rule). A product over another shape may round a cosine's last bit
    differently: retrieval.executors.ray_cluster counts the pairs whose order depends on it."""

    def queries(self, context: Any) -> np.ndarray:
        if context.question_vectors is None or context.document_vectors is None:
            raise RuntimeError("vector method run without embeddings: the evaluator must embed first")
        return np.asarray(context.question_vectors)

    def documents(self, context: Any, shard: Shard) -> np.ndarray:
        return np.asarray(context.document_vectors[shard.start : shard.stop])

    def prepare(self, documents: np.ndarray, queries: np.ndarray) -> np.ndarray:
        return documents

    def summarize(self, prepared: np.ndarray, queries: np.ndarray) -> None:
        return None

    def combine(self, summaries: Sequence[None]) -> None:
        return None

    def score(self, prepared: np.ndarray, queries: np.ndarray, statistics: None, depth: int) -> list[Ranking]:
        return cosine_rankings(queries, prepared, depth)
