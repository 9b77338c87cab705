"""The Ray executor: sharded search and corpus embedding on a Ray cluster.

Imported only when `executor = "ray"` (retrieval.executors.executor). It joins the cluster `RAY_ADDRESS`
names (or one already initialised in this process), else starts a local Ray without a dashboard,
and shuts down only what it started.

Faults: every remote step is a Ray task or actor call that Ray retries when its worker or node
dies (`max_retries`, actor restarts); a shard's prepared index lost with its node is rebuilt from
its lineage. An exception raised by the code itself is not retried: it is a bug or bad data, and
it ends the run as it would in one process. The driver writes nothing until every shard answered.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import numpy as np
import ray
from ray.util import ActorPool

from retrieval.methods.support.sharding import ShardedSearch, merge, shard_bounds, sharding_of
from retrieval.providers.base import Kind
from retrieval.run.ranking import Ranking

__all__ = ["SHARD_DOCUMENTS", "TASK_RETRIES", "RayExecutor", "embed_on_cluster", "search_on_cluster"]

# Documents per shard at most (the size measured per shard in docs/performance.md, "On a Ray
# cluster"); a smaller corpus gets one shard per CPU of the cluster.
SHARD_DOCUMENTS = 1_000_000
# How often Ray runs a step again after its worker or node died.
TASK_RETRIES = 3


@ray.remote(max_retries=TASK_RETRIES)
def _prepare(search: ShardedSearch, documents: Any, queries: Any) -> Any:
    return search.prepare(documents, queries)


@ray.remote(max_retries=TASK_RETRIES)
def _summarize(search: ShardedSearch, prepared: Any, queries: Any) -> Any:
    return search.summarize(prepared, queries)


@ray.remote(max_retries=TASK_RETRIES)
def _score(search: ShardedSearch, prepared: Any, queries: Any, statistics: Any, depth: int) -> list[Ranking]:
    return search.score(prepared, queries, statistics, depth)


def search_on_cluster(search: ShardedSearch, context: Any, n_shards: int | None = None) -> list[Ranking]:
    """The method's rankings of the whole corpus, its shards scored on the cluster.

    Shards are spread over the nodes; their prepared indexes stay in the cluster's object store
    between the two steps (statistics, then scores), only the statistics and each shard's top
    `context.depth` per question come back to the driver.
    """
    n_documents = len(context.dataset.documents)
    if n_shards is None:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        n_shards = max(cpus, math.ceil(n_documents / SHARD_DOCUMENTS))
    shards = shard_bounds(n_documents, n_shards)
    queries = ray.put(search.queries(context))
    spread = _prepare.options(scheduling_strategy="SPREAD")
    prepared = [spread.remote(search, search.documents(context, shard), queries) for shard in shards]
    statistics = search.combine(ray.get([_summarize.remote(search, p, queries) for p in prepared]))
    shared = ray.put(statistics)
    answers = ray.get([_score.remote(search, p, queries, shared, context.depth) for p in prepared])
    return merge(shards, answers, context.depth)


class RayExecutor:
    """Sharded methods on the cluster; every other method in this process."""

    def __init__(self, n_shards: int | None = None) -> None:
        self.n_shards = n_shards

    @classmethod
    @contextmanager
    def connected(cls, n_shards: int | None = None) -> Iterator[RayExecutor]:
        """Joined to the cluster for the block; a local Ray this started is shut down after it."""
        started = not ray.is_initialized()
        if started:
            # address=None: $RAY_ADDRESS when set (an existing cluster), else a new local instance.
            ray.init(address=os.environ.get("RAY_ADDRESS") or None, include_dashboard=False, log_to_driver=False)
        try:
            yield cls(n_shards)
        finally:
            if started:
                ray.shutdown()

    def rank(self, method: Any, context: Any) -> object:
        search = sharding_of(method)
        if search is None:
            return method.rank(context)
        return search_on_cluster(search, context, self.n_shards)


class Embeds(Protocol):
    """What the cluster needs of a provider (retrieval.providers.base.EmbeddingProvider has it)."""

    def embed(self, texts: Sequence[str], kind: Kind) -> np.ndarray: ...


@ray.remote(max_restarts=TASK_RETRIES, max_task_retries=TASK_RETRIES)
class _EmbeddingWorker:
    """One provider per actor: its client (and a local model it starts) is made once."""

    def __init__(self, make_provider: Callable[[], Embeds]) -> None:
        self.provider = make_provider()

    def embed(self, texts: list[str], kind: Kind) -> np.ndarray:
        return np.asarray(self.provider.embed(texts, kind), dtype=np.float32)


def embed_on_cluster(
    make_provider: Callable[[], Embeds],
    texts: Sequence[str],
    kind: Kind,
    batch_size: int,
    concurrency: int,
) -> np.ndarray:
    """Embed `texts` with the provider `make_provider` builds, on the cluster: vectors in input order.

    `concurrency` actors each hold one provider and send one batch at a time, so at most that
    many calls reach the provider at once; each call keeps the provider's own retry rules, and a
    batch whose worker died is sent again by Ray. Any batch that still fails raises here, before
    the caller has written anything: a recording that fails replaces nothing.
    """
    if batch_size < 1 or concurrency < 1:
        raise ValueError(f"batch_size and concurrency must be at least 1, got {batch_size} and {concurrency}")
    batches = [list(texts[start : start + batch_size]) for start in range(0, len(texts), batch_size)]
    if not batches:
        return np.zeros((0, 0), dtype=np.float32)
    workers = [_EmbeddingWorker.remote(make_provider) for _ in range(min(concurrency, len(batches)))]  # type: ignore[attr-defined]
    try:
        pool = ActorPool(workers)
        # map keeps the batches' order whatever order they finish in.
        parts = list(pool.map(lambda worker, batch: worker.embed.remote(batch, kind), batches))
    finally:
        for worker in workers:
            ray.kill(worker)
    return np.concatenate(parts)
