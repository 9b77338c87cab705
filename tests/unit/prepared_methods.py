"""User methods that prepare background work, and record what the evaluator did when: fixtures
for test_prepare.py. EVENTS is module level: the factories are named by spec."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from retrieval import Context, Ranking

EVENTS: list[str] = []


class Plain:
    """Ranks document 0 first; no preparation."""

    name = "plain"
    requires: tuple[str, ...] = ()
    needs_vectors = False

    def __init__(self, settings: object) -> None:
        pass

    def rank(self, context: Context) -> list[Ranking]:
        EVENTS.append(f"rank {self.name}")
        return [Ranking(np.array([0]), np.array([1.0])) for _ in context.dataset.questions]


class Early(Plain):
    """Prepares (as bm25 starts its analysis workers), and says when it is stopped."""

    name = "early"

    def prepare(self, context: Context) -> Callable[[], None]:
        EVENTS.append(f"prepare {self.name}")
        return lambda: EVENTS.append(f"stop {self.name}")


class AfterEarly(Plain):
    """Requires early: it must rank after it, however late early ranks."""

    name = "after-early"
    requires = ("prepared_methods:Early",)


class Failing(Plain):
    name = "failing"

    def rank(self, context: Context) -> list[Ranking]:
        raise RuntimeError("the search service is down")
