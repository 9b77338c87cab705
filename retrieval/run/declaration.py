"""What a method declares, as plain data: the run log keeps it, and everything after the
evaluation (failure analysis, report, gate) reads it instead of recognising a method by its name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

__all__ = ["Calls", "Declaration", "DeclarationError", "declaration"]

Calls = Literal["none", "http", "rankings"]
"""What a method reaches outside the process, and so how the gate replays it:

- "none": nothing (bm25, the team's own ranking logic, an in-process index). It always runs
  for real, in every mode: recording it would hide the very changes the gate exists to catch.
  In replay mode any connection it opens fails.
- "http": a model or a service over HTTP (httpx, requests/urllib3, the SDKs). Its calls go to
  its own cassette, `cassettes/<profile>/<channel>.json`, recorded by `--record`, with the
  digests of its declared `sources` (a service in the repository): replayed only while they hold.
- "rankings": an engine reached without HTTP (a database driver). Its rankings are recorded per
  question in `cassettes/<profile>/<channel>.rankings.json` and replayed without the engine.
"""


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
    rankings of a `calls = "rankings"` method, or the answers of the service a `calls = "http"`
    method calls when that service lives in the repository (its tokenizer, its query builder):
    its cassette replays only while they are unchanged.
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


def declaration(method: Any) -> Declaration:
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
