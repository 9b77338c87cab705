"""The one contract every retrieval method follows, built-in or user-supplied.

A method *declares* what it needs instead of being recognised by its name: the
evaluator, the recorder, the failure analysis and the report read these declarations
(`declaration(method)`), and nothing compares method names.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

from retrieval.data.dataset import Dataset
from retrieval.providers.base import Kind
from retrieval.run.cost import Usage
from retrieval.run.declaration import Calls, Declaration, DeclarationError, declaration
from retrieval.run.ranking import Ranking

# Declaration and its reader live with the run's plain data (retrieval.run.declaration); a method's
# author finds the whole contract here.
__all__ = [
    "UNRECORDED_REASONS",
    "Calls",
    "Context",
    "Declaration",
    "DeclarationError",
    "Embed",
    "Method",
    "MethodUnavailable",
    "ProgressFactory",
    "Rankings",
    "declaration",
    "prepared",
]

ProgressFactory = Callable[[int, str], "Progress"]

Embed = Callable[[Sequence[str], Kind], tuple[np.ndarray, Usage]]
"""Embeds texts with the run's shared embedder: (vectors, that call's usage). Its HTTP calls go
to the cassette of the method calling it (query rewriting embeds its rewritten questions)."""


# Degraded answers that were errors (an HTTP status, a timeout, a refused connection): vcrpy does
# not record them, so a replay of the same run would miss; the evaluator refuses to record them.
UNRECORDED_REASONS = ("http ", "timeout", "connect")


class MethodUnavailable(Exception):
    """A built-in method this profile cannot provide (a reranker without a configured model).

    It is not run and not gated; the reason is said once in the report and the gate summary.
    """


class Progress(Protocol):
    def update(self, n: int = 1) -> object: ...
    def close(self) -> object: ...


class Rankings(dict[str, list[Ranking]]):
    """The rankings of the methods already run, by name; a method that required another by its
    `module:factory` spec reads it under that spec too (`aliases`: spec -> name)."""

    def __init__(self, aliases: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.aliases = dict(aliases or {})

    def __missing__(self, key: str) -> list[Ranking]:
        if key in self.aliases:
            return self[self.aliases[key]]
        raise KeyError(key)


@dataclass
class Context:
    """What methods share during one evaluation.

    Question and document vectors are computed once (questions in one batched call)
    and reused by every method that needs them, so methods are compared on the same
    embeddings. `rankings` holds the output of the methods already run, in question
    order (hybrid reads its inputs there). A method that calls a model puts its
    provider's counters in `usage[its name]`.

    `embed` (set when vectors are needed) embeds a method's own texts with the same embedder;
    a method that adds usage stages of its own (enrichment at indexing) names their model in
    `cost_models`; `mode` says whether calls are replayed, live or recorded (a method's own
    cache is read only live, as the corpus embedding cache is).
    """

    dataset: Dataset
    depth: int
    question_vectors: np.ndarray | None = None
    document_vectors: np.ndarray | None = None
    rankings: dict[str, list[Ranking]] = field(default_factory=Rankings)
    usage: dict[str, Usage] = field(default_factory=dict)
    progress: ProgressFactory | None = None
    embed: Embed | None = None
    cost_models: dict[str, str | None] = field(default_factory=dict)
    mode: Literal["replay", "live", "record"] = "replay"
    # Digests of what a method's rankings were computed from beside the recorded calls, when a
    # cache may hold it (bm25's analysed corpus, "bm25-analysis"): the baseline records them with
    # the cassettes' digests, and `baseline_inputs` holds those of the baseline's figures (from the
    # gate; empty elsewhere): a cached input of another digest is computed again, never used.
    inputs: dict[str, str] = field(default_factory=dict)
    baseline_inputs: Mapping[str, str] | None = None


class Method(Protocol):
    """A retrieval method: ranks the corpus for every question of the dataset.

    Required: `name` (its row in the report), `requires` (methods whose rankings it reads
    from the context; they run first), `needs_vectors` (the evaluator embeds the corpus and
    the questions once) and `rank`, which returns one Ranking per question, in dataset
    order, at most `context.depth` long (`retrieval.run.ranking.top_k` builds one from scores,
    `ranking_from_ids` from the document ids a search engine answers with). `rank` may be
    `async def`: the evaluator runs it to completion on an event loop of its own.

    Optional declarations, with their defaults (see `Declaration`): `calls`, `channel`,
    `candidate_source`, `cost_model`, `degradable`, `config`, `key_variables`, `sources`.
    Optional `prepare(context)`: see `prepared`.
    """

    name: str
    requires: tuple[str, ...]
    needs_vectors: bool

    def rank(self, context: Context) -> list[Ranking] | Awaitable[list[Ranking]]: ...


def prepared(method: Method, context: Context) -> Callable[[], None] | None:
    """Call the method's optional `prepare(context)`, which starts work that can run while the
    other methods rank (bm25 starts analysing a large corpus in worker processes) and returns
    what stops it, or None. The evaluator calls it, before the shared embeddings, for every
    method whose `rank` will run, and calls what it returns when the methods have run."""
    prepare = getattr(method, "prepare", None)
    return prepare(context) if callable(prepare) else None
