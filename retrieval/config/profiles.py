"""Profiles: each `[profiles.NAME]` table of the defaults and the project file, checked and built.

A profile names the models and endpoints of one evaluation setup, grouped by what uses them
(embeddings, llm, retries, rerank_api); the project file writes them flat (`embedding_model`, FLAT_KEYS) or
grouped (`[profiles.x.embeddings]`), and each provider's rules for its group are checked here
(retrieval.config.profile_checks) without importing the provider.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from retrieval.config.names import name_problem
from retrieval.config.profile_checks import check_profile
from retrieval.config.settings import (
    FLAT_KEYS,
    GROUPS,
    ConfigError,
    EmbeddingSettings,
    LLMSettings,
    Profile,
    RerankAPISettings,
    RetrySettings,
    unknown_keys,
)

__all__ = ["build_profiles"]

_FLAT_NAME = {place: key for key, place in FLAT_KEYS.items()}
# One profile's settings by (group, field), and how its file spelled each key (for messages).
_Values = dict[tuple[str, str], Any]


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

    unknown = [key for key in table if key not in FLAT_KEYS and key not in GROUPS]
    if unknown:
        raise ConfigError(
            f"{where}: profile {name!r} has {unknown_keys(unknown, [*FLAT_KEYS, *GROUPS])}; known: {sorted(FLAT_KEYS)} "
            f"or the tables {', '.join(GROUPS)} (grouped form).",
            at=(sorted(unknown)[0],),
        )
    for key, value in table.items():
        if key in FLAT_KEYS:
            put(FLAT_KEYS[key], key, value)
            continue
        known = [f.name for f in fields(GROUPS[key])]
        if not isinstance(value, Mapping):
            raise ConfigError(
                f"{where}: profile {name!r}: {key} must be a table ([profiles.{name}.{key}]).",
                at=(key,),
            )
        wrong = sorted(set(value) - set(known))
        if wrong:
            raise ConfigError(
                f"{where}: profile {name!r}: [{key}] has {unknown_keys(wrong, known)}; known: {sorted(known)}.",
                at=(key, wrong[0]),
            )
        for inner, item in value.items():
            put((key, inner), f"{key}.{inner}", item)
    return values, spelled


def _typed(name: str, place: tuple[str, str], value: Any, spelling: str, where: str) -> Any:
    """The value checked against the field's type; ints are accepted (and kept as floats) for floats."""
    group, key = place
    default = getattr(Profile(name) if not group else GROUPS[group](), key)
    if default is None or key == "server":
        if value is not None and not isinstance(value, str):
            raise ConfigError(
                f"{where}: profile {name!r}: {spelling} must be a string, got {value!r}.",
                at=spelling.split("."),
            )
        return value
    expected = type(default)
    # The TOML type must match the field's: "8" for a worker count would fail much later, and
    # `true` is no count (Python's bool is an int: `type() is` keeps it out).
    if expected is float and type(value) in (int, float) and math.isfinite(value):
        return float(value)
    if type(value) is not expected or expected is float:
        wanted = "a finite number" if expected is float else f"of type {expected.__name__}"
        raise ConfigError(
            f"{where}: profile {name!r}: {spelling} must be {wanted}, got {value!r}. Fix the value.",
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
        rerank_api=RerankAPISettings(**of("rerank_api")),
        **of(""),
    )
    # Settings no provider owns: how many LLM calls run at once, how live calls retry.
    generic = [
        ("llm", "workers", profile.llm.workers >= 1, "must be at least 1"),
        ("embeddings", "workers", profile.embeddings.workers >= 1, "must be at least 1"),
        ("rerank_api", "workers", profile.rerank_api.workers >= 1, "must be at least 1"),
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
    for group, key, problem in check_profile(profile):
        raise ConfigError(
            f"{where}: profile {name!r}: {spelling((group, key))} {problem}",
            at=spelling((group, key)).split("."),
        )
    return profile


def build_profiles(defaults: Mapping[str, Any], project: Mapping[str, Any], where: str) -> dict[str, Profile]:
    """Every profile of the defaults and the project file; the project's keys win, in either form."""
    ours = project.get("profiles", {})
    if not isinstance(ours, Mapping):
        raise ConfigError(f"{where}: profiles must be tables ([profiles.NAME]), got {ours!r}.", at=("profiles",))
    built: dict[str, Profile] = {}
    for name in dict.fromkeys([*defaults.get("profiles", {}), *ours]):
        # The name becomes cassettes/<profile>/ and baselines/rankings/<profile>.json.
        problem = name_problem("profile", name)
        if problem:
            raise ConfigError(f"{where}: {problem}", at=("profiles", name))
        values, _ = _normalise_profile(name, defaults.get("profiles", {}).get(name, {}), "defaults.toml")
        try:
            own, spelled = _normalise_profile(name, ours.get(name, {}), where)
            built[name] = _build_profile(name, values | own, spelled, where)
        except ConfigError as exc:
            exc.at = ("profiles", name, *exc.at)  # the profile's errors locate their key within it
            raise
    return built
