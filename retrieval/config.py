"""Settings and profiles. Precedence: CLI flag > environment > project file > built-in default.

The project file is `retrieval.toml`, else `[tool.retrieval]` in `pyproject.toml`, found by
walking up from the working directory (or the folder given); its folder is the project root.
Every path the project file or the defaults name (dataset, cassettes, cache, baseline,
snapshots) resolves from that root, never from the working directory, so `cd tests && pytest`
or `python -m retrieval` from a subfolder read the same files. Paths given as flags resolve
from the working directory, as a shell user expects. A profile names the models and
endpoints of one evaluation setup.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["ConfigError", "Profile", "Settings", "find_project_file", "find_project_root", "load_settings"]


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Profile:
    """Models and endpoints: embeddings (for vector and hybrid) and, optionally, a reranker."""

    name: str
    embedding_provider: str = "openai"
    embedding_model: str = ""
    embedding_base_url: str = ""
    dimensions: int = 0
    batch_size: int = 32
    input_type: bool = False
    query_prefix: str = ""
    document_prefix: str = ""
    encoding_format: str = "float"
    server: str | None = None
    api_key_env: str = ""
    timeout: float = 60.0
    retry_attempts: int = 4
    retry_backoff: float = 1.0
    rerank_provider: str | None = None
    rerank_model: str | None = None
    rerank_base_url: str = ""
    rerank_workers: int = 8
    json_schema: bool = True
    # Texts longer than this many characters (0: no limit) are cut to it ("truncate", counted in
    # the usage) or refused naming the text ("refuse"). A character count, not tokens: see defaults.toml.
    max_input_chars: int = 0
    long_inputs: str = "truncate"

    @property
    def has_reranker(self) -> bool:
        return bool(self.rerank_provider and self.rerank_model)


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
            "embedding_provider": p.embedding_provider,
            "embedding_model": p.embedding_model,
            "dimensions": p.dimensions,
            "analyzer": ANALYZER_VERSION,
            "k": self.k,
            "candidates": self.candidates,
            "depth": self.depth,
        }


_PROFILE_FIELDS = {f.name for f in fields(Profile) if f.name != "name"}
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


def _declares_project(folder: Path) -> Path | None:
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
        found = _declares_project(candidate)
        if found is not None:
            return found
    return None


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


def _build_profile(name: str, table: Mapping[str, Any], where: str) -> Profile:
    unknown = set(table) - _PROFILE_FIELDS
    if unknown:
        raise ConfigError(
            f"{where}: profile {name!r} has unknown key(s) {sorted(unknown)}; known: {sorted(_PROFILE_FIELDS)}."
        )
    defaults = Profile(name)
    for key, value in table.items():
        expected = type(getattr(defaults, key))
        # The TOML type must match the field's: "8" for a worker count would fail much later.
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            continue
        if getattr(defaults, key) is None or key == "server":
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{where}: profile {name!r}: {key} must be a string, got {value!r}.")
            continue
        if type(value) is not expected:
            raise ConfigError(
                f"{where}: profile {name!r}: {key} must be of type {expected.__name__}, got {value!r}. Fix the value."
            )
    for key in ("batch_size", "rerank_workers", "retry_attempts"):
        if key in table and table[key] < 1:
            raise ConfigError(f"{where}: profile {name!r}: {key} must be at least 1, got {table[key]}.")
    for key in ("timeout", "retry_backoff"):
        if key in table and table[key] <= 0:
            raise ConfigError(f"{where}: profile {name!r}: {key} must be positive, got {table[key]}.")
    if table.get("max_input_chars", 0) < 0:
        raise ConfigError(f"{where}: profile {name!r}: max_input_chars must be 0 (no limit) or more.")
    if table.get("long_inputs", "truncate") not in {"truncate", "refuse"}:
        raise ConfigError(f'{where}: profile {name!r}: long_inputs must be "truncate" or "refuse".')
    return Profile(name=name, **table)


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
    environ = os.environ if environ is None else environ
    defaults = tomllib.loads(resources.files("retrieval").joinpath("defaults.toml").read_text("utf-8"))
    project_root = find_project_root(root) or Path(root).resolve()
    project, source = _read_project_file(project_root)
    where = source or "defaults.toml"
    unknown = set(project) - _SETTING_KEYS - {"profiles", "prices"}
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {sorted(unknown)}; known: {sorted(_SETTING_KEYS)}, profiles, prices."
        )
    data = _merge(defaults, project)
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}

    profile_name = str(flags.pop("profile", None) or environ.get("RETRIEVAL_PROFILE") or data["profile"])
    profiles = data.get("profiles", {})
    if profile_name not in profiles:
        raise ConfigError(
            f"{where}: unknown profile {profile_name!r}: profiles defined are {sorted(profiles)} "
            f"(add [profiles.{profile_name}] to retrieval.toml "
            f"or [tool.retrieval.profiles.{profile_name}] to pyproject.toml)."
        )
    # Every profile is checked, so a typo in one not chosen today does not wait to surface.
    built = {name: _build_profile(name, table, where) for name, table in profiles.items()}
    profile = built[profile_name]
    if environ.get("EMBEDDING_MODEL"):
        profile = replace(profile, embedding_model=environ["EMBEDDING_MODEL"])
    if environ.get("MODEL"):
        profile = replace(profile, rerank_model=environ["MODEL"])
    for key in ("embedding_model", "rerank_model", "rerank_workers"):
        if flags.get(key) is not None:
            profile = replace(profile, **{key: flags.pop(key)})
    if profile.rerank_workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {profile.rerank_workers}.")

    values = {key: data[key] for key in _SETTING_KEYS - {"profile"} if key in data}
    values.update({k: v for k, v in flags.items() if k in _SETTING_KEYS})
    if isinstance(values.get("methods"), str):
        values["methods"] = [m.strip() for m in values["methods"].split(",") if m.strip()]
    values["methods"] = tuple(values.get("methods", ()))
    if "hybrid_inputs" in values:
        inputs = values["hybrid_inputs"]
        if isinstance(inputs, str):
            inputs = [m.strip() for m in inputs.split(",") if m.strip()]
        if not isinstance(inputs, list | tuple) or len(inputs) < 2 or not all(isinstance(m, str) for m in inputs):
            raise ConfigError(f"{where}: hybrid_inputs must list at least two methods, got {inputs!r}.")
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
                f"got {weights!r}."
            )
        values["hybrid_weights"] = tuple(float(w) for w in weights)
    for key in ("k", "rrf_k", "candidates", "depth"):
        least = 0 if key == "rrf_k" else 1
        if key in values and (not isinstance(values[key], int) or values[key] < least):
            source = f"--{key.replace('_', '-')}" if key in flags else f"{where}: {key}"
            raise ConfigError(f"{source} must be an integer >= {least}, got {values[key]!r}.")
    for key, highest in (("bm25_k1", math.inf), ("bm25_b", 1.0)):
        if key not in values:
            continue
        value = values[key]
        number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not number or not 0 <= value <= highest:
            source = f"--{key.replace('_', '-')}" if key in flags else f"{where}: {key}"
            wanted = "a finite number >= 0" if highest == math.inf else "a number from 0 to 1"
            raise ConfigError(f"{source} must be {wanted}, got {value!r}.")
        values[key] = float(value)
    for key in _PATH_KEYS:
        if key in values:
            if not isinstance(values[key], str) or not values[key]:
                raise ConfigError(f"{where}: {key} must be a path (a non-empty string), got {values[key]!r}.")
            base = Path.cwd() if key in flags else project_root
            values[key] = str(base / Path(values[key]).expanduser())
    return Settings(profile=profile, prices=data.get("prices", {}), source=where, root=str(project_root), **values)
