"""The one interface every retrieval method implements, built-in or user-supplied."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from retrieval.cost import Usage
from retrieval.dataset import Dataset
from retrieval.ranking import Ranking

__all__ = ["Context", "Method", "ProgressFactory"]

ProgressFactory = Callable[[int, str], "Progress"]


class Progress(Protocol):
    def update(self, n: int = 1) -> object: ...
    def close(self) -> object: ...


@dataclass
class Context:
    """What methods share during one evaluation.

    Question and document vectors are computed once (questions in one batched call)
    and reused by every method that needs them, so methods are compared on the same
    embeddings. `rankings` holds the output of the methods already run, in question
    order, so that hybrid reads bm25 and vector and rerank reads hybrid.
    """

    dataset: Dataset
    depth: int
    question_vectors: np.ndarray | None = None
    document_vectors: np.ndarray | None = None
    rankings: dict[str, list[Ranking]] = field(default_factory=dict)
    usage: dict[str, Usage] = field(default_factory=dict)
    progress: ProgressFactory | None = None


class Method(Protocol):
    """A retrieval method: ranks the corpus for every question of the dataset.

    `requires` names the methods whose rankings it reads from the context (they run
    first); `needs_vectors` asks the evaluator to embed the corpus and the questions.
    `rank` returns one Ranking per question, in dataset order, at most `context.depth` long.
    """

    name: str
    requires: tuple[str, ...]
    needs_vectors: bool

    def rank(self, context: Context) -> list[Ranking]: ...
