"""What a shard sends back, and the merge: only the candidates the whole ranking can use.

A shard's `score` gives its top `depth` documents per question (retrieval.methods.support.sharding).
Sent whole, every shard's answers add up to n_shards x depth entries a question, of which the
merge keeps `depth`: with 7,569 questions and depth 1,000 that is what made the cluster slower
than one process. So the answers cross in two steps, on plain arrays (`Candidates`: a copy of
the flat arrays, whatever the number of questions, never a Python object per question):

1. each shard sends `marks`: per question, its scores at every `step`-th rank (a few floats);
2. the driver finds, per question, a score `t` that at least `depth` documents reach across the
   shards (`agreed_thresholds`): a lower bound on the whole corpus's depth-th best score;
3. each shard sends only its candidates scoring `t` or more (`cut`): every document of the
   whole ranking is one (its score is at least the depth-th best, so at least `t`), and all the
   documents tied at `t` are sent, so the tie rule sees them all. About depth + n_shards x step
   entries a question cross instead of n_shards x depth.

`merge` then orders each question's candidates by score, ties to the lower corpus index: the
shards come in corpus order and each shard's candidates in its own ranking's order (best first,
ties to the lower index, as retrieval.run.ranking.top_k ranks), so a stable sort on the score
alone gives that order; numpy's stable sort (timsort) merges the shards' sorted runs in one pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from retrieval.run.ranking import Ranking

__all__ = ["Candidates", "Marks", "agreed_thresholds", "cut", "mark_step", "marks", "merge", "packed"]

# Marks per shard and question, relative to the depth: each shard's count below a threshold is
# off by less than one step, so at most about depth / MARKS more candidates cross than needed.
MARKS = 16
# Questions merged at once: bounds the merge's padded matrices (questions x candidates).
MERGE_QUESTIONS = 2048


class Placed(Protocol):
    """Where a shard starts in the corpus (retrieval.methods.support.sharding.Shard has it)."""

    @property
    def start(self) -> int: ...


@dataclass(frozen=True)
class Candidates:
    """One shard's rankings of every question, packed: shard-local indices and their scores,
    question after question (`lengths[q]` entries for question q), each question best first."""

    indices: np.ndarray
    scores: np.ndarray
    lengths: np.ndarray

    @property
    def starts(self) -> np.ndarray:
        return np.cumsum(self.lengths) - self.lengths


@dataclass(frozen=True)
class Marks:
    """Per question (a row), scores a shard reaches with how many documents each: a shard
    holds at least `sum(counts[q, :j + 1])` documents scoring `scores[q, j]` or more."""

    scores: np.ndarray
    counts: np.ndarray


def packed(rankings: Sequence[Ranking]) -> Candidates:
    """A shard's rankings (one per question, best first) as one Candidates, its shard-local
    indices in the narrowest unsigned type that holds them."""
    lengths = np.array([len(r) for r in rankings], dtype=np.int64)
    if not len(rankings):
        return Candidates(np.empty(0, np.uint16), np.empty(0, np.float64), lengths)
    indices = np.concatenate([r.indices for r in rankings])
    return Candidates(
        indices.astype(_index_type(int(indices.max()) if len(indices) else 0), copy=False),
        np.concatenate([r.scores for r in rankings]),
        lengths,
    )


def _index_type(largest: int) -> type[np.unsignedinteger[Any]]:
    # What a shard sends is mostly its candidates: at depth 1,000 over a shard of thousands of
    # documents, 2-byte indices instead of 8 take 6 of a candidate's 16 bytes off what the
    # driver pulls from the shard's node.
    for dtype in (np.uint16, np.uint32):
        if largest <= np.iinfo(dtype).max:
            return dtype
    return np.uint64


def mark_step(depth: int, n_shards: int) -> int:
    """Ranks between two marks: MARKS marks a shard over depth / n_shards ranks, its expected share."""
    return max(1, depth // (MARKS * n_shards))


def marks(candidates: Candidates, step: int) -> Marks:
    """The shard's scores at ranks step, 2 step, ... and at its last rank, per question."""
    lengths, starts = candidates.lengths, candidates.starts
    columns = int(lengths.max()) // step if len(lengths) else 0
    ranks = step * np.arange(1, columns + 1)
    reached = ranks[None, :] <= lengths[:, None]
    at = np.where(reached, starts[:, None] + ranks[None, :] - 1, 0)
    scores = candidates.scores
    marked = np.where(reached, scores[at] if len(scores) else 0.0, -np.inf)
    last = np.where(lengths > 0, scores[np.maximum(starts + lengths - 1, 0)] if len(scores) else 0.0, -np.inf)
    return Marks(
        np.column_stack([marked, last]).astype(np.float64),
        np.column_stack([np.where(reached, step, 0), lengths - (lengths // step) * step]),
    )


def agreed_thresholds(shard_marks: Sequence[Marks], depth: int) -> np.ndarray:
    """Per question, a score that at least `depth` documents reach over all the shards (by
    their marks), the highest the marks show; -inf where fewer than `depth` are marked (then
    every candidate is needed)."""
    scores = np.concatenate([m.scores for m in shard_marks], axis=1)
    counts = np.concatenate([m.counts for m in shard_marks], axis=1)
    order = np.argsort(-scores, axis=1, kind="stable")
    reached = np.cumsum(np.take_along_axis(counts, order, axis=1), axis=1) >= depth
    first = np.argmax(reached, axis=1)
    threshold = np.take_along_axis(scores, np.take_along_axis(order, first[:, None], axis=1), axis=1)[:, 0]
    return np.where(reached.any(axis=1), threshold, -np.inf)


def cut(candidates: Candidates, thresholds: np.ndarray) -> Candidates:
    """The candidates scoring at least their question's threshold (the ranking's order kept)."""
    keep = ~(candidates.scores < np.repeat(thresholds, candidates.lengths))
    kept = np.concatenate([[0], np.cumsum(keep)])
    ends = np.cumsum(candidates.lengths)
    return Candidates(candidates.indices[keep], candidates.scores[keep], kept[ends] - kept[ends - candidates.lengths])


def merge(shards: Sequence[Placed], answers: Sequence[Candidates], depth: int) -> list[Ranking]:
    """The whole corpus's ranking per question from each shard's (shard-local) candidates.

    Ties go to the lower corpus index, as in retrieval.run.ranking.top_k.
    """
    if len(shards) != len(answers):
        raise ValueError(f"{len(answers)} answers for {len(shards)} shards")
    n_questions = len(answers[0].lengths) if answers else 0
    starts = [answer.starts for answer in answers]
    # The shards' score type (NaN marks an empty place, so at least float32).
    dtype = np.result_type(np.float32, *(answer.scores.dtype for answer in answers))
    merged: list[Ranking] = []
    for first in range(0, n_questions, MERGE_QUESTIONS):
        rows = slice(first, min(first + MERGE_QUESTIONS, n_questions))
        lengths = np.stack([answer.lengths[rows] for answer in answers])  # shards x questions
        before = np.cumsum(lengths, axis=0) - lengths  # a shard's first column in each question's row
        totals = lengths.sum(axis=0)
        width = int(totals.max()) if len(totals) else 0
        scores = np.full((len(totals), width), np.nan, dtype=dtype)
        indices = np.zeros((len(totals), width), dtype=np.int64)
        for s, (shard, answer) in enumerate(zip(shards, answers, strict=True)):
            counts = lengths[s]
            begin = int(starts[s][first]) if len(counts) else 0
            entries = slice(begin, begin + int(counts.sum()))
            row = np.repeat(np.arange(len(counts)), counts)
            column = np.arange(len(row)) - np.repeat(np.cumsum(counts) - counts, counts) + before[s][row]
            scores[row, column] = answer.scores[entries]
            # In int64 before the shard's offset is added: the shard's own type may not hold it.
            indices[row, column] = answer.indices[entries].astype(np.int64) + shard.start
        # NaN (no candidate) sorts last; equal scores keep their order: shard, then rank.
        order = np.argsort(-scores, axis=1, kind="stable")[:, :depth]
        best_scores = np.take_along_axis(scores, order, axis=1)
        best_indices = np.take_along_axis(indices, order, axis=1)
        for q, total in enumerate(np.minimum(totals, depth).tolist()):
            merged.append(Ranking(best_indices[q, :total], best_scores[q, :total]))
    return merged
