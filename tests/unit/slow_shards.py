"""FIXTURE: a user method whose sharded search waits before it scores, so that a test can kill
the Ray cluster mid-run (tests/unit/test_ray_executor.py). The shard touches the file named by
$SLOW_SHARDS_MARKER when it starts waiting; it waits at most 120 s."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from retrieval.methods.bm25 import BM25Method
from retrieval.methods.support.bm25_shards import BM25Sharding
from retrieval.methods.support.sharding import ShardedSearch
from retrieval.run.ranking import Ranking


class Waiting(BM25Sharding):
    def __init__(self, marker: str) -> None:
        super().__init__(1.5, 0.75)
        self.marker = marker

    def score(self, prepared: Any, queries: Any, statistics: Any, depth: int) -> list[Ranking]:
        Path(self.marker).touch()
        time.sleep(120)
        return super().score(prepared, queries, statistics, depth)


class WaitingBM25(BM25Method):
    name = "waiting-bm25"

    def sharding(self) -> ShardedSearch:
        return Waiting(os.environ["SLOW_SHARDS_MARKER"])


def factory(settings: Any, *, replay: bool = False) -> WaitingBM25:
    return WaitingBM25()
