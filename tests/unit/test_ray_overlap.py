"""The Ray executor's sharded searches overlap: each starts once its inputs exist (at `prepare`
for a method that reads no embeddings, at the first sharded `rank` for the others), and each
`rank` returns its own method's answer. No cluster: the search itself is replaced."""

from __future__ import annotations

import threading
from types import ModuleType
from typing import Any

import pytest

from retrieval.methods.support.bm25_shards import BM25Sharding


@pytest.fixture(scope="module")
def ray_executor() -> ModuleType:
    """retrieval.executors.ray_cluster, imported by the tests rather than at collection: Ray's
    import (about 0.4 s of CPU) in every pytest-xdist worker, for the one that runs them."""
    pytest.importorskip("ray", reason="the Ray executor needs Ray (pip install 'retrieval-regression[ray]')")
    import retrieval.executors.ray_cluster

    return retrieval.executors.ray_cluster


class _Search(BM25Sharding):
    """A ShardedSearch that names its method (the fake search_on_cluster answers with it)."""

    def __init__(self, name: str) -> None:
        super().__init__(1.2, 0.75)
        self.name = name


class _Method:
    def __init__(self, name: str, needs_vectors: bool) -> None:
        self.name, self.needs_vectors = name, needs_vectors

    def sharding(self) -> _Search:
        return _Search(self.name)


class _Context:
    embedded = False


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch, ray_executor: ModuleType) -> list[tuple[str, bool]]:
    """(method, whether the context was embedded) for each search, in the order they started."""
    calls: list[tuple[str, bool]] = []
    lock = threading.Lock()

    def fake(search: Any, context: Any, n_shards: int | None = None) -> list[str]:
        with lock:
            calls.append((search.name, context.embedded))
        if search.name == "broken":
            raise RuntimeError("the shard failed")
        return [search.name]

    monkeypatch.setattr(ray_executor, "search_on_cluster", fake)
    return calls


def test_a_method_without_embeddings_starts_at_prepare_the_others_at_the_first_rank(
    started: list[tuple[str, bool]], ray_executor: ModuleType
) -> None:
    executor = ray_executor.RayExecutor()
    context = _Context()
    bm25, vector = _Method("bm25", needs_vectors=False), _Method("vector", needs_vectors=True)
    stop = executor.prepare(bm25, context)
    assert executor.prepare(vector, context) is not None and stop is not None
    executor._running[id(bm25)].result()  # it ran before the embeddings
    assert started == [("bm25", False)]
    context.embedded = True  # what the evaluator does between prepare and rank
    assert executor.rank(bm25, context) == ["bm25"]
    executor._running[id(vector)].result()
    # vector started with bm25's rank, on the embedded context, and answers its own rank.
    assert started == [("bm25", False), ("vector", True)]
    assert executor.rank(vector, context) == ["vector"]
    stop()
    assert not executor._running and not executor._waiting


def test_a_method_ranked_without_prepare_runs_and_a_failure_reaches_its_rank(
    started: list[tuple[str, bool]], ray_executor: ModuleType
) -> None:
    executor = ray_executor.RayExecutor()
    context = _Context()
    assert executor.rank(_Method("vector", needs_vectors=True), context) == ["vector"]
    broken = _Method("broken", needs_vectors=True)
    executor.prepare(broken, context)
    with pytest.raises(RuntimeError, match="the shard failed"):
        executor.rank(broken, context)
    executor.stop()


def test_stop_waits_for_a_search_nobody_ranked(started: list[tuple[str, bool]], ray_executor: ModuleType) -> None:
    executor = ray_executor.RayExecutor()
    context = _Context()
    executor.prepare(_Method("broken", needs_vectors=False), context)  # started, never ranked
    executor.prepare(_Method("vector", needs_vectors=True), context)  # never started
    executor.stop()  # its error was the run's to raise: not raised here
    assert started == [("broken", False)]
    assert not executor._running and not executor._waiting
