"""Exhaustive search split by corpus shard: the contract a method implements to be sharded, and
the merge that gives the same rankings as one process.

A method that can be sharded says so by having `sharding()`, returning a `ShardedSearch`. The
executor (retrieval.executors.executor) then splits the corpus into contiguous shards, runs the search's
worker-side steps on each shard wherever it likes (a Ray cluster), and merges the shards' top
candidates with `merge`. Nothing here knows which method it runs, and nothing here imports Ray:
the steps are plain functions of picklable data.

Why the merge is exact: every shard ranks its own documents by the same scores and the same tie
rule as the whole corpus (retrieval.run.ranking.top_k: equal scores go to the lower corpus index), and
returns its top `depth`; a document in the whole corpus's top `depth` is in its shard's top `depth`,
so sorting the union by (score descending, corpus index ascending) and keeping `depth` gives the
single-process ranking (of that union, only the candidates that can reach the whole top cross:
retrieval.methods.support.shard_answers), provided each shard computes the same scores (BM25 with the global
statistics; cosines of the same vectors; retrieval.methods.support.bm25_shards, VectorSharding).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from retrieval.methods.support.shard_answers import (
    Candidates,
    agreed_thresholds,
    coded,
    cut,
    mark_step,
    marks,
    merge,
    packed,
    worth_cutting,
)
from retrieval.run.ranking import Ranking

__all__ = ["Shard", "ShardedSearch", "merge", "run_in_process", "scored", "shard_bounds", "sharding_of"]


@dataclass(frozen=True)
class Shard:
    """One contiguous slice of the corpus: documents [start, stop)."""

    index: int
    start: int
    stop: int


@runtime_checkable
class ShardedSearch(Protocol):
    """A method's search split into driver-side and shard-side steps.

    Driver: `queries` (what every shard scores against), `documents` (one shard's input),
    `combine` (the shards' summaries -> the global statistics). Shard (any process, so these
    must be pure functions of their arguments): `prepare` (index the shard's documents once, for
    these queries),
    `summarize` (its contribution to the global statistics), `score` (its top `depth`
    documents per question, indices local to the shard, scores as the whole run rounds them,
    best first with ties to the lower index as retrieval.run.ranking.top_k ranks: the merge and
    the thresholds of retrieval.methods.support.shard_answers rely on that order). A search may
    also have `candidates(prepared, queries, statistics, depth)`: the same answer already packed
    (`packed(score(...))`, equal arrays), when it can build it faster than a Ranking per question.
    A search whose `combine` gives the same statistics whatever the shards' summaries (none to
    gather: vector search) may say so with `needs_statistics = False`; an executor may then score
    each shard in the step that prepares it, with `combine([])` as the statistics.
    """

    def queries(self, context: Any) -> Any: ...
    def documents(self, context: Any, shard: Shard) -> Any: ...
    def prepare(self, documents: Any, queries: Any) -> Any: ...
    def summarize(self, prepared: Any, queries: Any) -> Any: ...
    def combine(self, summaries: Sequence[Any]) -> Any: ...
    def score(self, prepared: Any, queries: Any, statistics: Any, depth: int) -> list[Ranking]: ...


def sharding_of(method: object) -> ShardedSearch | None:
    """The method's sharded search when it declares one (`sharding()`), else None (it runs whole)."""
    declare = getattr(method, "sharding", None)
    if not callable(declare):
        return None
    search = declare()
    if not isinstance(search, ShardedSearch):
        raise TypeError(
            f"{type(method).__name__}.sharding() must return a retrieval.methods.support.sharding.ShardedSearch"
        )
    return search


def scored(search: ShardedSearch, prepared: Any, queries: Any, statistics: Any, depth: int) -> Candidates:
    """A shard's answer packed (the search's own `candidates` when it has one, else its rankings
    packed), its scores as their integer codes where those give them back exactly (`coded`:
    fewer bytes to the driver, and a merge on integer keys). A subclass that overrides `score`
    but not `candidates` (a test's fault injection, a team's variant) is ranked by its `score`."""
    direct = getattr(search, "candidates", None)
    if callable(direct) and issubclass(_defining(search, "candidates"), _defining(search, "score")):
        answer: Candidates = direct(prepared, queries, statistics, depth)
        return coded(answer)
    return coded(packed(search.score(prepared, queries, statistics, depth)))


def _defining(search: object, name: str) -> type:
    # The class of the search's method resolution order that defines `name` (the search's own
    # class when an instance attribute holds it).
    return next((klass for klass in type(search).__mro__ if name in vars(klass)), type(search))


def shard_bounds(n_documents: int, n_shards: int) -> list[Shard]:
    """`n_shards` contiguous shards of near-equal size (fewer when the corpus is smaller)."""
    count = max(1, min(n_shards, n_documents))
    edges = np.linspace(0, n_documents, count + 1).round().astype(int)
    return [Shard(i, int(edges[i]), int(edges[i + 1])) for i in range(count)]


def run_in_process(search: ShardedSearch, context: Any, shards: Sequence[Shard]) -> list[Ranking]:
    """The sharded search run shard after shard in this process: the cluster's steps without a
    cluster, answers cut to the agreed thresholds as on a cluster (what the exactness tests and
    the per-shard benchmark measure)."""
    queries = search.queries(context)
    prepared = [search.prepare(search.documents(context, shard), queries) for shard in shards]
    statistics = search.combine([search.summarize(p, queries) for p in prepared])
    step = mark_step(context.depth, len(shards))
    answers = [scored(search, p, queries, statistics, context.depth) for p in prepared]
    shard_marks = [marks(answer, step) for answer in answers]
    if not worth_cutting(shard_marks, context.depth):
        return merge(shards, answers, context.depth)
    thresholds = agreed_thresholds(shard_marks, context.depth)
    return merge(shards, [cut(answer, thresholds) for answer in answers], context.depth)
