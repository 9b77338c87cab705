"""The depth-k pool: every (question, document) pair in the top k of any method, as TREC pools the
runs of a track for its assessors, with the methods and ranks that retrieved each document.

Pure: from a Run (what every configured method ranked) and the questions' judgments as the
project counts them, no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from retrieval.run.results import Run

__all__ = ["MAX_DEPTH", "Candidate", "depth_pool", "unjudged"]

# A run keeps the top 20 of each method (at least): the deepest pool it can give.
MAX_DEPTH = 20


@dataclass(frozen=True)
class Candidate:
    """One pooled pair: the question, the document, and each method that put it in its top k with
    the rank it gave (best rank first, then the method's name)."""

    question: str
    document: str
    hits: tuple[tuple[str, int], ...]
    judged: bool = False

    @property
    def pair(self) -> tuple[str, str]:
        return (self.question, self.document)

    @property
    def best_rank(self) -> int:
        return min(rank for _, rank in self.hits)


def depth_pool(run: Run, depth: int, judged: Mapping[str, Collection[str]] | None = None) -> list[Candidate]:
    """The pool of the top `depth` of every method of `run`, in the run's question order and, within
    a question, by best rank then document id. `judged` (question id -> documents with a counted
    judgment; default: each question's own judgments) marks the pairs already judged."""
    out = []
    for result in run.results:
        question = result.question
        known = judged[question.id] if judged is not None else question.judgments.keys()
        hits: dict[str, list[tuple[str, int]]] = {}
        for method in run.methods:
            for rank, document in enumerate(result.methods[method].ids[:depth], start=1):
                hits.setdefault(document, []).append((method, rank))
        found = [
            Candidate(question.id, doc, tuple(sorted(h, key=lambda x: (x[1], x[0]))), doc in known)
            for doc, h in hits.items()
        ]
        out += sorted(found, key=lambda c: (c.best_rank, c.document))
    return out


def unjudged(pool: list[Candidate]) -> list[Candidate]:
    """The pairs of the pool no counted judgment covers: what the page asks about."""
    return [c for c in pool if not c.judged]
