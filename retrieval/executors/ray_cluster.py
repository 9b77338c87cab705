"""The Ray executor: sharded search and corpus embedding on a Ray cluster.

Imported only when `executor = "ray"` (retrieval.executors.executor). It joins the cluster `RAY_ADDRESS`
names (or one already initialised in this process), else starts a local Ray without a dashboard,
and shuts down only what it started; a bad address, a cluster out of reach or lost mid-run, or a
start that fails end the run in one line within `ray_timeout` seconds (retrieval.executors.ray_connection).

Faults: every remote step is a Ray task or actor call that Ray retries when its worker or node
dies (`max_retries`, actor restarts); a shard's prepared index lost with its node is rebuilt from
its lineage. An exception raised by the code itself is not retried: it is a bug or bad data, and
it ends the run as it would in one process. The driver writes nothing until every shard answered.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Protocol

import numpy as np
import ray

from retrieval.executors.ray_connection import DEFAULT_TIMEOUT, cluster_size, connect, first_done, gather, settle
from retrieval.methods.base import prepared
from retrieval.methods.support.shard_answers import (
    Candidates,
    Marks,
    agreed_thresholds,
    cut,
    mark_step,
    marks,
    merge,
    worth_cutting,
)
from retrieval.methods.support.sharding import ShardedSearch, scored, shard_bounds, sharding_of
from retrieval.providers.base import Kind
from retrieval.run.ranking import Ranking

__all__ = [
    "SHARD_DOCUMENTS",
    "TASK_RETRIES",
    "ClusterEmbeddings",
    "RayExecutor",
    "search_on_cluster",
    "shard_count",
]

# Documents per shard at most (the size measured per shard in docs/performance.md, "On a Ray
# cluster"); a smaller corpus gets one shard per CPU of the cluster.
SHARD_DOCUMENTS = 1_000_000
# How often Ray runs a step again after its worker or node died.
TASK_RETRIES = 3


@ray.remote(max_retries=TASK_RETRIES, num_returns=2)
def _prepare(search: ShardedSearch, documents: Any, queries: Any) -> tuple[Any, Any]:
    # One task round for both: the prepared shard stays in its node's object store, only its
    # summary goes to the driver.
    prepared = search.prepare(documents, queries)
    return prepared, search.summarize(prepared, queries)


@ray.remote(max_retries=TASK_RETRIES, num_returns=2)
def _score(
    search: ShardedSearch, prepared: Any, queries: Any, statistics: Any, depth: int, step: int
) -> tuple[Candidates, Marks]:
    # The candidates stay in the node's object store; only their marks go to the driver.
    candidates = scored(search, prepared, queries, statistics, depth)
    return candidates, marks(candidates, step)


@ray.remote(max_retries=TASK_RETRIES, num_returns=2)
def _prepared_and_scored(
    search: ShardedSearch, documents: Any, queries: Any, statistics: Any, depth: int, step: int
) -> tuple[Candidates, Marks]:
    # A search whose statistics need no other shard's (`needs_statistics` false): one task round,
    # the shard's answer where its index was made.
    candidates = scored(search, search.prepare(documents, queries), queries, statistics, depth)
    return candidates, marks(candidates, step)


@ray.remote(max_retries=TASK_RETRIES)
def _cut(candidates: Candidates, thresholds: np.ndarray) -> Candidates:
    return cut(candidates, thresholds)


def shard_count(n_documents: int, cpus: int) -> int:
    """Shards for a corpus on a cluster of `cpus` CPUs: one per CPU, more when a shard would
    hold over SHARD_DOCUMENTS documents."""
    return max(cpus, 1, math.ceil(n_documents / SHARD_DOCUMENTS))


def search_on_cluster(search: ShardedSearch, context: Any, n_shards: int | None = None) -> list[Ranking]:
    """The method's rankings of the whole corpus, its shards scored on the cluster.

    Shards are spread over the nodes; their prepared indexes stay in the cluster's object store
    between the steps (statistics, scores, then the cut), only the statistics, the shards'
    marks and the candidates above the agreed thresholds come back to the driver
    (retrieval.methods.support.shard_answers). A search without statistics to gather
    (`needs_statistics` false) is prepared and scored in one round of tasks.
    """
    n_documents = len(context.dataset.documents)
    if n_shards is None:
        n_shards = shard_count(n_documents, int(ray.cluster_resources().get("CPU", 1)))
    shards = shard_bounds(n_documents, n_shards)
    queries = ray.put(search.queries(context))
    step = mark_step(context.depth, len(shards))
    answered: list[Any]
    if not getattr(search, "needs_statistics", True):
        # Two results a task (num_returns=2): the candidates' reference, then the marks'.
        whole = _prepared_and_scored.options(scheduling_strategy="SPREAD")
        statistics = ray.put(search.combine([]))
        answered = [
            whole.remote(search, search.documents(context, shard), queries, statistics, context.depth, step)
            for shard in shards
        ]
    else:
        spread = _prepare.options(scheduling_strategy="SPREAD")
        # Two results a task (num_returns=2): the prepared shard's reference, then its summary's.
        started: list[Any] = [spread.remote(search, search.documents(context, shard), queries) for shard in shards]
        shared = ray.put(search.combine(gather([summary for _, summary in started])))
        answered = [_score.remote(search, p, queries, shared, context.depth, step) for p, _ in started]
    shard_marks = gather([m for _, m in answered])
    if not worth_cutting(shard_marks, context.depth):
        # Every shard's answer fits in little more than the depth: a cut round would cost more
        # than the entries it saves (the merge keeps the same best `depth` of a superset).
        return merge(shards, gather([candidates for candidates, _ in answered]), context.depth)
    thresholds = ray.put(agreed_thresholds(shard_marks, context.depth))
    # Each cut runs where its candidates are (Ray schedules a task by its arguments' location).
    answers = gather([_cut.remote(candidates, thresholds) for candidates, _ in answered])
    return merge(shards, answers, context.depth)


class RayExecutor:
    """Sharded methods on the cluster; every other method in this process.

    The sharded searches overlap: each runs on a driver thread of its own, started as soon as its
    inputs exist (at `prepare` for a method that reads no embeddings, before the evaluator
    embeds; the others at the first sharded `rank`, after it), so that the cluster scores one
    method's shards while the driver merges another's, and a method's `rank` waits for its own.
    """

    def __init__(self, n_shards: int | None = None) -> None:
        self.n_shards = n_shards
        # Prepared sharded methods (by identity) not started yet, and those running.
        self._waiting: dict[int, ShardedSearch] = {}
        self._running: dict[int, Future[list[Ranking]]] = {}
        self._threads: ThreadPoolExecutor | None = None

    @classmethod
    @contextmanager
    def connected(
        cls, n_shards: int | None = None, timeout: float = DEFAULT_TIMEOUT, temp_dir: str | None = None
    ) -> Iterator[RayExecutor]:
        """Joined to the cluster for the block ($RAY_ADDRESS, else a local Ray whose files go to
        `temp_dir`); a local Ray this started is shut down after it."""
        with connect(timeout, temp_dir):
            executor = cls(n_shards)
            try:
                yield executor
            finally:
                executor.stop()

    def describe(self) -> dict[str, Any]:
        """Where the run ran, for the report: the executor and the cluster's size."""
        return {"name": "ray", **cluster_size()}

    def prepare(self, method: Any, context: Any) -> Callable[[], None] | None:
        search = sharding_of(method)
        if search is None:
            return prepared(method, context)
        self._waiting[id(method)] = search
        if not getattr(method, "needs_vectors", False):
            # Its inputs are the dataset's: it runs on the cluster while the evaluator embeds.
            self._start(id(method), context)
        return self.stop

    def rank(self, method: Any, context: Any) -> object:
        if id(method) not in self._waiting and id(method) not in self._running:
            search = sharding_of(method)
            if search is None:
                return method.rank(context)
            self._waiting[id(method)] = search
        # Every prepared search has its inputs by now (the evaluator embeds before ranking):
        # they all start, and this method's answer is awaited.
        for key in list(self._waiting):
            self._start(key, context)
        return self._running.pop(id(method)).result()

    def _start(self, key: int, context: Any) -> None:
        if self._threads is None:
            self._threads = ThreadPoolExecutor(thread_name_prefix="ray-search")
        search = self._waiting.pop(key)
        self._running[key] = self._threads.submit(search_on_cluster, search, context, self.n_shards)

    def stop(self) -> None:
        """Wait for the searches still running (a run that stopped before ranking them): none
        uses the cluster after the executor closed. Their errors were the run's to raise."""
        self._waiting.clear()
        running, self._running = list(self._running.values()), {}
        for future in running:
            with contextlib.suppress(Exception):
                future.result()
        if self._threads is not None:
            self._threads.shutdown()
            self._threads = None

    @contextmanager
    def corpus_embeddings(self, embedder: Any, profile: Any) -> Iterator[ClusterEmbeddings]:
        """The corpus embedded on the cluster: `profile.embeddings.workers` actors, each holding
        the profile's provider (built on its node: the embedding server must be reachable from
        every node), sending batches of the driver's provider's size. Questions and LLM calls
        stay on the driver, inside its cassettes."""
        from retrieval.providers import make_embedder

        cluster = ClusterEmbeddings(
            functools.partial(make_embedder, profile, replay=False),
            embedder.batch_size,
            profile.embeddings.workers,
            embedder.dimensions,
            embedder.usage,
        )
        try:
            yield cluster
        finally:
            cluster.close()


class Embeds(Protocol):
    """What the cluster needs of a provider (retrieval.providers.base.EmbeddingProvider has it)."""

    def embed(self, texts: Sequence[str], kind: Kind) -> np.ndarray: ...


# Counters a call adds to the provider's Usage (retrieval.run.cost), sent back to the driver's.
_COUNTERS = ("calls", "input_tokens", "output_tokens", "truncated")
# Batches per worker in one call of ClusterEmbeddings.embed: the driver's cache and progress bar
# advance between calls, the workers stay busy within one.
ROUNDS = 4


@ray.remote(max_restarts=TASK_RETRIES, max_task_retries=TASK_RETRIES)
class _EmbeddingWorker:
    """One provider per actor: its client (and a local model it starts) is made once."""

    def __init__(self, make_provider: Callable[[], Embeds]) -> None:
        self.provider = make_provider()

    def embed(self, texts: list[str], kind: Kind) -> tuple[np.ndarray, dict[str, int]]:
        usage = getattr(self.provider, "usage", None)
        before = {c: getattr(usage, c, 0) for c in _COUNTERS}
        vectors = np.asarray(self.provider.embed(texts, kind), dtype=np.float32)
        return vectors, {c: getattr(usage, c, 0) - before[c] for c in _COUNTERS}


class ClusterEmbeddings:
    """A provider whose `embed` spreads its texts over `concurrency` actors, in batches of
    `batch_size`: what retrieval.embeddings.embed_texts embeds the corpus through on a cluster.

    Each actor holds one provider (`make_provider()`, built once) and has one batch in flight, so
    at most `concurrency` calls reach the provider at once; each call keeps the provider's own
    retry rules, and a batch whose worker died is sent again by Ray. A batch that still fails
    raises from `embed`. The actors' usage counters are added to `usage` (the driver's provider's).
    """

    def __init__(
        self,
        make_provider: Callable[[], Embeds],
        batch_size: int,
        concurrency: int,
        dimensions: int = 0,
        usage: Any = None,
    ) -> None:
        if batch_size < 1 or concurrency < 1:
            raise ValueError(f"batch_size and concurrency must be at least 1, got {batch_size} and {concurrency}")
        self.make_provider, self.concurrency = make_provider, concurrency
        self.calls_batch_size = batch_size
        self.batch_size = batch_size * concurrency * ROUNDS
        self.dimensions = dimensions
        self.usage = usage
        self._workers: list[Any] = []

    def embed(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        """`texts`' vectors in input order (float32)."""
        size = self.calls_batch_size
        batches = [list(texts[start : start + size]) for start in range(0, len(texts), size)]
        if not batches:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        while len(self._workers) < min(self.concurrency, len(batches)):
            self._workers.append(_EmbeddingWorker.remote(self.make_provider))  # type: ignore[attr-defined]
        # One batch in flight per actor; the answers are put back in the batches' order.
        answers: list[Any] = [None] * len(batches)
        waiting = list(range(len(batches)))[::-1]
        running: dict[Any, tuple[int, Any]] = {}
        idle = list(self._workers[: len(batches)])
        while waiting or running:
            while idle and waiting:
                worker, index = idle.pop(), waiting.pop()
                running[worker.embed.remote(batches[index], kind)] = (index, worker)
            done = first_done(list(running))
            index, worker = running.pop(done)
            try:
                answers[index] = ray.get(done)
            except Exception:
                settle(list(running))  # their errors read here, not printed by Ray as unhandled
                raise
            idle.append(worker)
        if self.usage is not None:
            for _, counted in answers:
                self.usage.add(**counted)
        return np.concatenate([vectors for vectors, _ in answers])

    def close(self) -> None:
        """End the actors (and the providers they hold)."""
        for worker in self._workers:
            ray.kill(worker)
        self._workers = []
