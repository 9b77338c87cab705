"""Settings for a run. Precedence: CLI flag > environment > project file > built-in default.

The project file (retrieval.config.project_file) is `retrieval.toml`, else `[tool.retrieval]` in
`pyproject.toml`; its folder is the project root. Every path the project file or the defaults
name (dataset, cassettes, cache, baseline, snapshots) resolves from that root, never from the
working directory, so `cd tests && pytest` or `python -m retrieval` from a subfolder read the
same files, and must stay inside it, links resolved (retrieval.config.confinement). Paths given
as flags resolve from the working directory, as a shell user expects.

This module resolves the precedence; the shapes live in retrieval.config.settings, the profiles in
retrieval.config.profiles, the run's values in retrieval.config.setting_values. It imports no provider and no
recorder: they import it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from retrieval.config.confinement import check_confined
from retrieval.config.profiles import build_profiles
from retrieval.config.project_file import (
    find_project_file,
    find_project_root,
    name_the_line,
    parsed_toml,
    project_file_in,
    read_project_file,
    shown_path,
)
from retrieval.config.setting_values import PATH_KEYS, SETTING_KEYS, check_prices, check_values
from retrieval.config.settings import (
    FLAT_KEYS,
    ConfigError,
    EmbeddingSettings,
    LLMSettings,
    Profile,
    RerankAPISettings,
    RetrySettings,
    Settings,
    flat_profile,
    is_integer,
    unknown_keys,
)

__all__ = [
    "ENVIRONMENT",
    "FLAT_KEYS",
    "ConfigError",
    "EmbeddingSettings",
    "LLMSettings",
    "Profile",
    "RerankAPISettings",
    "RetrySettings",
    "Settings",
    "find_project_file",
    "find_project_root",
    "flat_profile",
    "load_settings",
    "project_file_in",
    "settings_from_table",
    "shown_path",
]


# The environment variables a run reads, by the key each one overrides: above the project file,
# below a flag (the configuration reference lists them from here).
ENVIRONMENT = {"profile": "RETRIEVAL_PROFILE", "embedding_model": "EMBEDDING_MODEL", "rerank_model": "MODEL"}


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(dict(merged[key]), value)
        else:
            merged[key] = value
    return merged


def load_settings(
    root: str | Path = ".",
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    flag_prefix: str = "--",
) -> Settings:
    """Resolve settings for a run from defaults, the project file, the environment and overrides.

    The project root is the folder of the nearest project file at or above `root` (`root`
    itself when there is none); paths from the project file and the defaults resolve from it.
    `overrides` holds CLI flags already parsed (None values are ignored; their paths resolve
    from the working directory); `profile` selects the profile. EMBEDDING_MODEL and MODEL
    override the profile's embedding and rerank models. An error names an override by its flag:
    `flag_prefix` and the key (`--executor` for the CLI, `--retrieval-executor` for pytest).
    """
    project_root = find_project_root(root) or Path(root).resolve()
    project, source = read_project_file(project_root)
    try:
        environ = os.environ if environ is None else environ
        return _settings(project, source, project_root, overrides, environ, flag_prefix)
    except ConfigError as exc:
        name_the_line(exc, source)
        raise


def settings_from_table(
    project: Mapping[str, Any],
    source: str,
    root: str | Path,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Settings from a project file's table that is not on disk (the base branch's, read with
    `git show`): `source` names it in errors ("main:pyproject.toml"), `root` is the folder its
    paths resolve from. The same checks and precedence as `load_settings`."""
    environ = os.environ if environ is None else environ
    return _settings(project, source, Path(root), overrides, environ, "--")


def _settings(
    project: Mapping[str, Any],
    source: str | None,
    project_root: Path,
    overrides: Mapping[str, Any] | None,
    environ: Mapping[str, str],
    flag_prefix: str,
) -> Settings:
    defaults = parsed_toml(resources.files("retrieval.config").joinpath("defaults.toml").read_text("utf-8"))
    where = source or "defaults.toml"
    unknown = set(project) - SETTING_KEYS - {"profiles", "prices"}
    if "tool" in unknown and source and Path(source).name == "retrieval.toml":
        raise ConfigError(
            f"{where}: retrieval.toml holds the settings at its top level: remove the [tool.retrieval] header "
            "(that table is for pyproject.toml) and keep the keys under it.",
            at=("tool",),
        )
    if unknown:
        raise ConfigError(
            f"{where}: {unknown_keys(unknown, [*SETTING_KEYS, 'profiles', 'prices'])}; known: {sorted(SETTING_KEYS)}, "
            "profiles, prices.",
            at=(sorted(unknown)[0],),
        )
    data = _merge({k: v for k, v in defaults.items() if k != "profiles"}, project)
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}

    profile_name = str(flags.pop("profile", None) or environ.get(ENVIRONMENT["profile"]) or data["profile"])
    # Every profile is checked, so a typo in one not chosen today does not wait to surface.
    built = build_profiles(defaults, project, where)
    if profile_name not in built:
        raise ConfigError(
            f"{where}: unknown profile {profile_name!r}: profiles defined are {sorted(built)} "
            f"(add [profiles.{profile_name}] to retrieval.toml "
            f"or [tool.retrieval.profiles.{profile_name}] to pyproject.toml).",
            at=("profile",),
        )
    profile = built[profile_name]
    embeddings, llm = profile.embeddings, profile.llm
    if environ.get(ENVIRONMENT["embedding_model"]):
        embeddings = replace(embeddings, model=environ[ENVIRONMENT["embedding_model"]])
    if environ.get(ENVIRONMENT["rerank_model"]):
        llm = replace(llm, model=environ[ENVIRONMENT["rerank_model"]])
    if flags.get("embedding_model") is not None:
        embeddings = replace(embeddings, model=flags.pop("embedding_model"))
    if flags.get("rerank_model") is not None:
        llm = replace(llm, model=flags.pop("rerank_model"))
    if flags.get("rerank_workers") is not None:
        llm = replace(llm, workers=flags.pop("rerank_workers"))
    if not is_integer(llm.workers) or llm.workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {llm.workers!r}.")
    profile = replace(profile, embeddings=embeddings, llm=llm)

    values = {key: data[key] for key in SETTING_KEYS - {"profile"} if key in data}
    values.update({k: v for k, v in flags.items() if k in SETTING_KEYS})
    values = check_values(values, flags, where, project_root, Settings.hybrid_inputs, flag_prefix)
    settings = Settings(
        profile=profile,
        prices=check_prices(data.get("prices", {}), where),
        source=where,
        root=str(project_root),
        **values,
    )
    check_confined(settings, {key: data[key] for key in PATH_KEYS if key in data}, flags, where)
    return settings
