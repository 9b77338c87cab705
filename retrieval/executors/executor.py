"""Where a method's search runs: in this process ("local", the default) or on a Ray cluster.

The evaluator asks `open_executor(settings.executor)` for an executor and ranks every method
through it. The local executor calls `method.rank` and nothing else: Ray is imported only when
`executor = "ray"`, so a default run neither needs nor loads it. The Ray executor runs the
methods that declare a sharded search (retrieval.methods.support.sharding) shard by shard on the cluster; the
others (hybrid, rerank, a team's retriever) still run in this process, on the merged rankings.
An executor also says what embeds the corpus texts the vector store lacks (`corpus_embeddings`):
this process's provider, or actors on the cluster; the store is written in this process either way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Protocol

from retrieval.config import ConfigError
from retrieval.methods.base import prepared

__all__ = ["LOCAL", "Executor", "LocalExecutor", "open_executor"]


class Executor(Protocol):
    """Runs one method's `rank` for the evaluator, and says what embeds the corpus."""

    def prepare(self, method: Any, context: Any) -> Callable[[], None] | None:
        """Let the method start work that can run while the others rank (its optional
        `prepare(context)`), where its `rank` will run; what stops that work, or None."""
        ...

    def rank(self, method: Any, context: Any) -> object: ...

    def corpus_embeddings(self, embedder: Any, profile: Any) -> AbstractContextManager[Any]:
        """The provider the corpus texts the vector store lacks are embedded through (an
        EmbeddingProvider), open for the block; `embedder` is the driver's, for the profile."""
        ...

    def describe(self) -> dict[str, Any]:
        """Where the run ran, for the report: {"name": ...} and, on a cluster, its size."""
        ...


class LocalExecutor:
    """Every method in this process, as it has always run."""

    def prepare(self, method: Any, context: Any) -> Callable[[], None] | None:
        return prepared(method, context)

    def rank(self, method: Any, context: Any) -> object:
        return method.rank(context)

    def corpus_embeddings(self, embedder: Any, profile: Any) -> AbstractContextManager[Any]:
        return nullcontext(embedder)

    def describe(self) -> dict[str, Any]:
        return {"name": "local"}


# Where methods run and the corpus is embedded unless the settings name a cluster.
LOCAL = LocalExecutor()


@contextmanager
def open_executor(name: str, timeout: float = 180.0, temp_dir: str | None = None) -> Iterator[Executor]:
    """The executor `name` names, open for one evaluation (a Ray instance this started is shut
    down). On Ray: `timeout` bounds joining, starting and losing the cluster (`ray_timeout`), and
    a local Ray writes its files in `temp_dir`."""
    if name == "local":
        yield LOCAL
        return
    if name != "ray":
        raise ConfigError(f"executor must be local or ray, got {name!r}.")
    try:
        from retrieval.executors.ray_cluster import RayExecutor
    except ImportError as exc:
        if (exc.name or "").split(".")[0] != "ray":
            raise
        raise ConfigError(
            f"executor = \"ray\" needs Ray ({exc.name or exc}): pip install 'retrieval-regression[ray]', "
            'or set executor = "local".'
        ) from None
    with RayExecutor.connected(timeout=timeout, temp_dir=temp_dir) as executor:
        yield executor
