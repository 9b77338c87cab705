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

Step 3 is a round of tasks on a cluster: when the shards hold at most CUT_WORTH x depth
entries a question in all (`worth_cutting`: a few thousand documents at depth 1,000), they send
their answers whole instead, which costs less than that round for the few entries it saves.

`merge` then orders each question's candidates by score, ties to the lower corpus index: the
shards come in corpus order and each shard's candidates in its own ranking's order (best first,
ties to the lower index, as retrieval.run.ranking.top_k ranks), so a stable sort on the score
alone gives that order; numpy's stable sort (timsort) merges the shards' sorted runs in one pass.

The methods round their scores to CODE_DECIMALS decimals (retrieval.methods.vector,
retrieval.methods.support.bm25_engine), so a score is also an integer, its rounded form:
`coded` sends that integer (int32 when it fits: 6 bytes a cosine candidate instead of 10) when
dividing it by 10**CODE_DECIMALS gives back the score bit for bit, checked on every candidate
(else the shard sends its floats). Coded answers merge on one integer key per candidate (the
code, then the corpus index), sorted plainly: no stable float sort, the same order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from retrieval.run.ranking import SCORE_DECIMALS, Ranking

__all__ = [
    "CODE_DECIMALS",
    "Candidates",
    "Marks",
    "agreed_thresholds",
    "coded",
    "cut",
    "index_type",
    "joined",
    "mark_step",
    "marks",
    "merge",
    "packed",
    "ranked_rows",
    "score_codes",
    "worth_cutting",
]

# Marks per shard and question, relative to the depth: each shard's count below a threshold is
# off by less than one step, so at most about depth / MARKS more candidates cross than needed.
MARKS = 16
# Questions merged at once: bounds the merge's padded matrices (questions x candidates). Small
# enough that a block's keys stay in the cache (256 x 1,518 int64: 3 MB): at 2,048 the merge of
# PIAF's answers took twice the time (docs/performance.md, "PIAF").
MERGE_QUESTIONS = 256
# A cut round pays when the shards hold more than this many times the depth a question.
CUT_WORTH = 2
# The decimals the built-in methods round their scores to.
CODE_DECIMALS = SCORE_DECIMALS
# Bits of a merge's integer key (a code above a corpus index); the largest int64 marks an empty place.
KEY_BITS = 62


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
    # Set when `scores` holds the scores' integer codes: score = code / 10**decimals (`coded`).
    decimals: int | None = None

    @property
    def starts(self) -> np.ndarray:
        return np.cumsum(self.lengths) - self.lengths

    @property
    def values(self) -> np.ndarray:
        """The scores as floats (decoded when they cross as codes)."""
        if self.decimals is None:
            return self.scores
        return self.scores / 10.0**self.decimals


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
        indices.astype(index_type(int(indices.max()) if len(indices) else 0), copy=False),
        np.concatenate([r.scores for r in rankings]),
        lengths,
    )


def index_type(largest: int) -> type[np.unsignedinteger[Any]]:
    """The narrowest unsigned type that holds shard-local indices up to `largest`."""
    # What a shard sends is mostly its candidates: at depth 1,000 over a shard of thousands of
    # documents, 2-byte indices instead of 8 take 6 of a candidate's 16 bytes off what the
    # driver pulls from the shard's node.
    for dtype in (np.uint16, np.uint32):
        if largest <= np.iinfo(dtype).max:
            return dtype
    return np.uint64


def score_codes(scores: np.ndarray, decimals: int = CODE_DECIMALS) -> np.ndarray | None:
    """The integers c (int64) with c / 10**decimals equal to `scores` bit for bit, or None when
    a score is not such a quotient (not rounded to `decimals`, -0.0, NaN, out of range)."""
    scores = np.asarray(scores, dtype=np.float64)
    scaled = scores * 10.0**decimals
    # NaN fails the comparison; the bound keeps every code exact in float64 and inside a key.
    if not np.all(np.abs(scaled) < 2.0**52):
        return None
    codes = np.rint(scaled).astype(np.int64)
    if not np.array_equal((codes / 10.0**decimals).view(np.int64), scores.view(np.int64)):
        return None
    return codes


def coded(candidates: Candidates, decimals: int = CODE_DECIMALS) -> Candidates:
    """The candidates with their scores as integer codes (int32 when they fit), for the trip
    to the driver; unchanged when a score does not come back exactly from its code."""
    if candidates.decimals is not None:
        return candidates
    codes = score_codes(candidates.scores, decimals)
    if codes is None:
        return candidates
    small = not len(codes) or (int(codes.min()) >= -(2**31) and int(codes.max()) < 2**31)
    return Candidates(candidates.indices, codes.astype(np.int32) if small else codes, candidates.lengths, decimals)


def ranked_rows(
    lengths: np.ndarray, indices: np.ndarray, scores: np.ndarray, decimals: int = CODE_DECIMALS
) -> Candidates | None:
    """Candidates from every row's entries (`lengths[r]` of them, row after row, in any order
    within a row): each row whole, best first with ties to the lower index (top_k_among's order
    when the depth takes the row), coded; None when a score has no exact code or a row, code and
    index do not fit in one int64 key (then rank the rows one by one)."""
    codes = score_codes(scores, decimals)
    if codes is None:
        return None
    if not len(codes):
        return Candidates(indices.astype(np.uint16), codes.astype(np.int32), lengths, decimals)
    highest, lowest = int(codes.max()), int(codes.min())
    index_bits = max(int(indices.max()), 1).bit_length()
    code_bits = (highest - lowest).bit_length()
    row_bits = max(len(lengths) - 1, 1).bit_length()
    if row_bits + code_bits + index_bits > KEY_BITS:
        return None
    rows = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    # Row first, then the code from the highest down, then the index: a plain ascending sort.
    keys = (rows << (code_bits + index_bits)) | ((highest - codes) << index_bits) | indices.astype(np.int64)
    keys.sort()
    ordered = highest - ((keys >> index_bits) & ((1 << code_bits) - 1))
    small = lowest >= -(2**31) and highest < 2**31
    return Candidates(
        (keys & ((1 << index_bits) - 1)).astype(index_type(int(indices.max()))),
        ordered.astype(np.int32) if small else ordered,
        lengths.astype(np.int64),
        decimals,
    )


def joined(parts: Sequence[Candidates]) -> Candidates:
    """Candidates of consecutive question batches as one (their codes or floats alike)."""
    decimals = {part.decimals for part in parts}
    if len(decimals) > 1:  # some batch kept its floats: every batch as floats
        parts = [Candidates(p.indices, p.values, p.lengths) for p in parts]
    dtype = index_type(max((int(p.indices.max()) for p in parts if len(p.indices)), default=0))
    return Candidates(
        np.concatenate([p.indices.astype(dtype, copy=False) for p in parts]),
        np.concatenate([p.scores for p in parts]),
        np.concatenate([p.lengths for p in parts]),
        parts[0].decimals if parts else None,
    )


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
    scores = candidates.values
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


def worth_cutting(shard_marks: Sequence[Marks], depth: int) -> bool:
    """Whether the shards hold more than CUT_WORTH x depth candidates a question (their marks'
    counts): below that, sending them whole costs less than a round of cuts (on a cluster, a
    task per shard) for the few entries it would save."""
    questions = len(shard_marks[0].counts) if shard_marks else 0
    held = sum(int(m.counts.sum()) for m in shard_marks)
    return held > CUT_WORTH * depth * questions


def cut(candidates: Candidates, thresholds: np.ndarray) -> Candidates:
    """The candidates scoring at least their question's threshold (the ranking's order kept)."""
    keep = ~(candidates.values < np.repeat(thresholds, candidates.lengths))
    kept = np.concatenate([[0], np.cumsum(keep)])
    ends = np.cumsum(candidates.lengths)
    lengths = kept[ends] - kept[ends - candidates.lengths]
    return Candidates(candidates.indices[keep], candidates.scores[keep], lengths, candidates.decimals)


def merge(shards: Sequence[Placed], answers: Sequence[Candidates], depth: int) -> list[Ranking]:
    """The whole corpus's ranking per question from each shard's (shard-local) candidates.

    Ties go to the lower corpus index, as in retrieval.run.ranking.top_k.
    """
    if len(shards) != len(answers):
        raise ValueError(f"{len(answers)} answers for {len(shards)} shards")
    n_questions = len(answers[0].lengths) if answers else 0
    starts = [answer.starts for answer in answers]
    keying = _keying(shards, answers)
    keyed = keying is not None
    # The shards' score type (NaN marks an empty place, so at least float32).
    dtype = np.result_type(np.float32, *(answer.values.dtype for answer in answers)) if not keyed else np.float64
    merged: list[Ranking] = []
    for first in range(0, n_questions, MERGE_QUESTIONS):
        rows = slice(first, min(first + MERGE_QUESTIONS, n_questions))
        lengths = np.stack([answer.lengths[rows] for answer in answers])  # shards x questions
        before = np.cumsum(lengths, axis=0) - lengths  # a shard's first column in each question's row
        totals = lengths.sum(axis=0)
        width = int(totals.max()) if len(totals) else 0
        if keyed:
            # One int64 per candidate: (highest code - code) above the corpus index, so that an
            # ascending plain sort is best first, ties to the lower index; empty places last.
            highest, index_bits, decimals = keying  # type: ignore[misc]
            keys = np.full((len(totals), width), np.iinfo(np.int64).max, dtype=np.int64)
        else:
            scores = np.full((len(totals), width), np.nan, dtype=dtype)
            indices = np.zeros((len(totals), width), dtype=np.int64)
        columns = np.arange(width)
        # Every shard with as many candidates for each question of the block (whole shards at a
        # depth that takes them): its places are a band of columns, filled by a reshape, which
        # costs a fraction of the mask's scattered writes.
        uniform = bool(len(totals)) and bool((lengths == lengths[:, :1]).all())
        for s, (shard, answer) in enumerate(zip(shards, answers, strict=True)):
            counts = lengths[s]
            begin = int(starts[s][first]) if len(counts) else 0
            entries = slice(begin, begin + int(counts.sum()))
            place: Any
            if uniform:
                band = int(before[s][0])
                place = (slice(None), slice(band, band + int(counts[0])))
            else:
                # The shard's places, row after row: a mask's order is its entries' (question, then rank).
                place = (columns >= before[s][:, None]) & (columns < (before[s] + counts)[:, None])
            # In int64 before the shard's offset is added: the shard's own type may not hold it.
            placed = answer.indices[entries].astype(np.int64) + shard.start
            # A band takes its entries as rows x count; a mask takes them flat.
            shape = (len(counts), int(counts[0])) if uniform else (-1,)
            if keyed:
                coded_keys = ((highest - answer.scores[entries].astype(np.int64)) << index_bits) | placed
                keys[place] = coded_keys.reshape(shape)
            else:
                scores[place] = answer.values[entries].reshape(shape)
                indices[place] = placed.reshape(shape)
        if keyed:
            keys.sort(axis=1)
            best = keys[:, :depth]
            best_indices = best & ((1 << index_bits) - 1)
            best_scores = (highest - (best >> index_bits)) / 10.0**decimals
        else:
            # NaN (no candidate) sorts last; equal scores keep their order: shard, then rank.
            order = np.argsort(-scores, axis=1, kind="stable")[:, :depth]
            best_scores = np.take_along_axis(scores, order, axis=1)
            best_indices = np.take_along_axis(indices, order, axis=1)
        for q, total in enumerate(np.minimum(totals, depth).tolist()):
            merged.append(Ranking(best_indices[q, :total], best_scores[q, :total]))
    return merged


def _keying(shards: Sequence[Placed], answers: Sequence[Candidates]) -> tuple[int, int, int] | None:
    """(highest code, bits of a corpus index, decimals) when every answer crossed coded with the
    same decimals and a code's range and a corpus index fit in one key together, else None."""
    decimals = {answer.decimals for answer in answers}
    if len(decimals) != 1 or None in decimals:
        return None
    filled = [(shard, answer) for shard, answer in zip(shards, answers, strict=True) if len(answer.scores)]
    if not filled:
        return None
    highest = max(int(answer.scores.max()) for _, answer in filled)
    lowest = min(int(answer.scores.min()) for _, answer in filled)
    index_bits = max(int(answer.indices.max()) + int(shard.start) for shard, answer in filled).bit_length()
    if (highest - lowest).bit_length() + index_bits > KEY_BITS:
        return None
    return highest, index_bits, int(next(iter(decimals)))  # type: ignore[arg-type]
