"""What every reranker shares: the top `candidates` of its candidate source, reordered by a model,
followed by the rest of that ranking; on an outage the source's order, said degraded.

The listwise LLM (retrieval.methods.rerank), the pointwise LLM (retrieval.methods.rerank_pointwise)
and the rerank APIs (retrieval.methods.rerank_api) differ only in how they order the pool. Recall
beyond the pool is exactly the source's. Scores of a reranked ranking are synthetic: the document
at position p (0-based) of a ranking of length L scores L - p; only the order carries meaning (a
model's scores are not comparable with the source's fused scores below the pool).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from retrieval.methods.base import Context
from retrieval.methods.support.llm import ask_or_degrade, map_in_order
from retrieval.providers.base import ProviderError
from retrieval.run.cost import Usage
from retrieval.run.ranking import Ranking

if TYPE_CHECKING:
    from retrieval.data.dataset import Document, Question

__all__ = ["CandidateReranker", "degraded", "reordered"]

T = TypeVar("T")


def reordered(source: Ranking, order: Sequence[int]) -> Ranking:
    """`source` with its first len(order) documents put in `order` (positions within that pool,
    each once), the rest of it after them as it was, scored L - p."""
    pool = source.indices[: len(order)]
    indices = np.concatenate([pool[np.asarray(order, dtype=np.int64)], source.indices[len(order) :]])
    return Ranking(indices.astype(source.indices.dtype, copy=False), np.arange(len(indices), 0, -1, dtype=np.float64))


def degraded(source: Ranking, error: ProviderError) -> Ranking:
    """The source's ranking kept, with the outage's reason as its status."""
    return Ranking(source.indices, source.scores, status=f"degraded: {error.reason}")


class CandidateReranker:
    """A method reordering the top `candidates` of another one (hybrid by default), one model
    call per question at most `workers` at a time; rankings in question order whatever order
    the calls finish in. A subclass sets `name`, `model`, `usage` (its provider's counters) and
    `order(question, pool)`; a ProviderError it raises for one question keeps that question's
    source order, degraded (a missing key or a replay miss is raised: a setup problem)."""

    needs_vectors = False
    calls = "http"
    degradable = True
    name: str
    model: str

    def __init__(self, candidates: int = 20, workers: int = 8, source: str = "hybrid") -> None:
        if candidates < 1:
            raise ValueError(f"candidates must be >= 1, got {candidates}")
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.candidates = candidates
        self.workers = workers
        self.candidate_source = source
        self.requires: tuple[str, ...] = (source,)

    @property
    def usage(self) -> Usage:
        raise NotImplementedError

    def order(self, question: Question, pool: Sequence[Document]) -> Sequence[int]:
        """The pool's positions (0-based), most relevant first, each once."""
        raise NotImplementedError

    def source_rankings(self, context: Context) -> list[Ranking]:
        """The candidate source's rankings, checked to hold one per question."""
        source = context.rankings[self.candidate_source]
        if len(source) != len(context.dataset.questions):
            raise ValueError(
                f"{self.candidate_source} has {len(source)} rankings for {len(context.dataset.questions)} questions"
            )
        return source

    def rank(self, context: Context) -> list[Ranking]:
        """One Ranking per question, in dataset order; failed calls give the source's order, degraded."""
        source = self.source_rankings(context)
        questions = context.dataset.questions
        # The report reads the provider's counters as the method's calls and tokens.
        context.usage[self.name] = self.usage
        documents = context.dataset.documents

        def one(qi: int) -> Ranking:
            pool = source[qi].indices[: self.candidates]
            if len(pool) < 2:  # nothing to reorder: no call
                return source[qi]
            chosen = [documents[int(i)] for i in pool]
            order = ask_or_degrade(
                lambda: self.order(questions[qi], chosen), f"{self.name} of question {questions[qi].id}", self.model
            )
            return degraded(source[qi], order) if isinstance(order, ProviderError) else reordered(source[qi], order)

        return self.map(context, one, len(questions))

    def map(self, context: Context, call: Callable[[int], T], count: int) -> list[T]:
        """`call` over 0..count-1, `workers` at a time, with the run's progress bar; a fatal error
        (replay miss, missing key) cancels the queued calls."""
        bar = context.progress(count, self.name) if context.progress and count else None
        return map_in_order(call, count, self.workers, bar)
