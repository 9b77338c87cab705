"""The one contract every retrieval method follows, built-in or user-supplied.

A method *declares* what it needs instead of being recognised by its name: the
evaluator, the recorder, the failure analysis and the report read these declarations
(`declaration(method)`), and nothing compares method names.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast, get_args

import numpy as np

from retrieval.cost import Usage
from retrieval.dataset import Dataset
from retrieval.providers.base import Kind
from retrieval.ranking import Ranking

__all__ = ["Calls", "Context", "Declaration", "Embed", "Method", "ProgressFactory", "Rankings", "declaration"]

ProgressFactory = Callable[[int, str], "Progress"]

Embed = Callable[[Sequence[str], Kind], tuple[np.ndarray, Usage]]
"""Embeds texts with the run's shared embedder: (vectors, that call's usage). Its HTTP calls go
to the cassette of the method calling it (query rewriting embeds its rewritten questions)."""

Calls = Literal["none", "http", "rankings"]
"""What a method reaches outside the process, and so how the gate replays it:

- "none": nothing (bm25, the team's own ranking logic, an in-process index). It always runs
  for real, in every mode: recording it would hide the very changes the gate exists to catch.
  In replay mode any connection it opens fails.
- "http": a model or a service over HTTP (httpx, requests/urllib3, the SDKs). Its calls go to
  its own cassette, `cassettes/<profile>/<channel>.json`, recorded by `--record`.
- "rankings": an engine reached without HTTP (a database driver). Its rankings are recorded per
  question in `cassettes/<profile>/<channel>.rankings.json` and replayed without the engine.
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


class Method(Protocol):
    """A retrieval method: ranks the corpus for every question of the dataset.

    Required: `name` (its row in the report), `requires` (methods whose rankings it reads
    from the context; they run first), `needs_vectors` (the evaluator embeds the corpus and
    the questions once) and `rank`, which returns one Ranking per question, in dataset
    order, at most `context.depth` long (`retrieval.ranking.top_k` builds one from scores,
    `ranking_from_ids` from the document ids a search engine answers with). `rank` may be
    `async def`: the evaluator runs it to completion on an event loop of its own.

    Optional declarations, with their defaults (see `Declaration`): `calls`, `channel`,
    `candidate_source`, `cost_model`, `degradable`, `config`, `key_variables`, `sources`.
    """

    name: str
    requires: tuple[str, ...]
    needs_vectors: bool

    def rank(self, context: Context) -> list[Ranking] | Awaitable[list[Ranking]]: ...


@dataclass(frozen=True)
class Declaration:
    """A method's declarations with defaults filled in: what the evaluator, the recorder,
    the failure analysis and the report know of it.

    `channel` names its cassette (one per model for a reranker); `candidate_source` is the
    method whose top `candidates` it reorders (None: it is its own candidate pool);
    `cost_model` is the model whose price applies to its calls; `degradable` says it may
    fall back per question ("degraded: <reason>"); `config` holds its settings, recorded
    in the baseline's configuration; `key_variables` names the environment variables holding
    its credentials: a recording or a cassette that holds one of their values is refused;
    `sources` names the modules and project files, beyond its own module, that decide the
    rankings of a `calls = "rankings"` method: its ranking cassette replays only while they
    are unchanged.
    """

    name: str
    requires: tuple[str, ...] = ()
    needs_vectors: bool = False
    calls: Calls = "none"
    channel: str = ""
    candidate_source: str | None = None
    cost_model: str | None = None
    degradable: bool = False
    config: Mapping[str, Any] = field(default_factory=dict)
    key_variables: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()

    @property
    def first_stage(self) -> bool:
        """Ranks the corpus itself (reads no other method): failures are traced through it."""
        return not self.requires

    def as_dict(self) -> dict[str, Any]:
        """Plain data for the run log (a report made again from a log needs the declarations)."""
        return {
            "requires": list(self.requires),
            "needs_vectors": self.needs_vectors,
            "calls": self.calls,
            "channel": self.channel,
            "candidate_source": self.candidate_source,
            "cost_model": self.cost_model,
            "degradable": self.degradable,
            "config": dict(self.config),
            "key_variables": list(self.key_variables),
            "sources": list(self.sources),
        }

    @classmethod
    def from_dict(cls, name: str, data: Mapping[str, Any]) -> Declaration:
        """The inverse of `as_dict`."""
        return cls(
            name=name,
            requires=tuple(data.get("requires", ())),
            needs_vectors=bool(data.get("needs_vectors", False)),
            calls=data.get("calls", "none"),
            channel=str(data.get("channel") or name),
            candidate_source=data.get("candidate_source"),
            cost_model=data.get("cost_model"),
            degradable=bool(data.get("degradable", False)),
            config=dict(data.get("config", {})),
            key_variables=tuple(data.get("key_variables", ())),
            sources=tuple(data.get("sources", ())),
        )


class DeclarationError(ValueError):
    """A method declares something the evaluator cannot honour; the message names the attribute."""


def declaration(method: Method) -> Declaration:
    """Read a method's declarations, filling the defaults and checking their types."""
    name = getattr(method, "name", None)
    if not isinstance(name, str) or not name.strip():
        raise DeclarationError(f"its `name` must be a non-empty string, got {name!r}")
    requires = getattr(method, "requires", ())
    if isinstance(requires, str) or not all(isinstance(r, str) for r in requires):
        raise DeclarationError(f"{name}: `requires` must be a tuple of method names, got {requires!r}")
    calls = getattr(method, "calls", "none")
    if calls not in get_args(Calls):
        raise DeclarationError(f"{name}: `calls` must be one of {', '.join(get_args(Calls))}, got {calls!r}")
    source = getattr(method, "candidate_source", None)
    if source is not None and source not in requires:
        raise DeclarationError(f"{name}: `candidate_source` {source!r} must be one of the methods it requires")
    channel = getattr(method, "channel", "") or name
    if not isinstance(channel, str) or "/" in channel or channel.startswith("."):
        raise DeclarationError(f"{name}: `channel` must be a plain file name, got {channel!r}")
    keys = getattr(method, "key_variables", ())
    if isinstance(keys, str) or not all(isinstance(k, str) and k for k in keys):
        raise DeclarationError(f"{name}: `key_variables` must be a tuple of environment variable names, got {keys!r}")
    sources = getattr(method, "sources", ())
    if isinstance(sources, str) or not all(isinstance(s, str) and s for s in sources):
        raise DeclarationError(
            f"{name}: `sources` must be a tuple of module names or project file paths, got {sources!r}"
        )
    return Declaration(
        name=name,
        requires=tuple(requires),
        needs_vectors=bool(getattr(method, "needs_vectors", False)),
        calls=cast(Calls, calls),
        channel=channel,
        candidate_source=source,
        cost_model=getattr(method, "cost_model", None),
        degradable=bool(getattr(method, "degradable", False)),
        config=dict(getattr(method, "config", {}) or {}),
        key_variables=tuple(keys),
        sources=tuple(sources),
    )
