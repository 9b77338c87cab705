"""Judged@k: how much of what a method puts in its top k anyone ever judged.

Every figure counts a document nobody judged as not relevant. Judged@k says how far that holds:
the share of a ranking's first k documents that have a judgment (any grade, 0 included: "judged
not relevant" is a judgment), as ir_measures' Judged@k computes it: over min(k, the ranking's
length) documents. A ranking that holds no document has nothing unjudged in it: 1.

Pure functions over ranked ids and judged ids, like retrieval.measures.metrics.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from retrieval.run.results import Run

__all__ = ["JudgedScores", "judged_at_k", "judged_run", "score_judged", "unjudged_at_k"]


def unjudged_at_k(ranked_ids: Sequence[str], judged: Collection[str], k: int) -> list[str]:
    """The documents of the first k results that no judgment covers, in rank order."""
    return [d for d in ranked_ids[:k] if d not in judged]


def judged_at_k(ranked_ids: Sequence[str], judged: Collection[str], k: int) -> float:
    """Share of the first k results (of min(k, len(ranked_ids))) that have a judgment."""
    top = ranked_ids[:k]
    if not top:
        return 1.0
    return sum(d in judged for d in top) / len(top)


@dataclass(frozen=True)
class JudgedScores:
    """One method's Judged@k: the mean overall and per question type, every question's value,
    and the unjudged documents of each question's top k (only questions that have some)."""

    k: int
    overall: float
    by_type: dict[str, float]
    per_question: dict[str, float]
    unjudged: dict[str, list[str]]

    @property
    def holes(self) -> int:
        """How many (question, document) pairs of the top k no judgment covers."""
        return sum(len(ids) for ids in self.unjudged.values())


def score_judged(
    ranked: Mapping[str, Sequence[str]], judged: Mapping[str, Collection[str]], types: Mapping[str, str], k: int
) -> JudgedScores:
    """Judged@k of one method's rankings (question id -> ranked ids) against each question's
    judged documents (question id -> ids with a judgment), overall and per type."""
    per_question = {q: judged_at_k(ranked[q], judged[q], k) for q in judged}
    groups: dict[str, list[float]] = {}
    for q, value in per_question.items():
        groups.setdefault(types[q], []).append(value)
    holes = {q: found for q in judged if (found := unjudged_at_k(ranked[q], judged[q], k))}
    return JudgedScores(
        k=k,
        overall=sum(per_question.values()) / len(per_question) if per_question else 1.0,
        by_type={t: sum(v) / len(v) for t, v in groups.items()},
        per_question=per_question,
        unjudged=holes,
    )


def judged_run(run: Run, k: int) -> dict[str, JudgedScores]:
    """Judged@k of every method of a run, each question's judgments as it carries them."""
    judged = {r.question.id: r.question.judgments.keys() for r in run.results}
    types = {r.question.id: r.question.type for r in run.results}
    return {m: score_judged(run.ranked_ids(m), judged, types, k) for m in run.methods}
