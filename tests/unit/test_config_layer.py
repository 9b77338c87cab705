"""The configuration is the lowest layer: its modules import no provider, recorder, method or
gate, so nothing they import can import them back (the cycle config -> providers -> recording
-> config is gone). Read from the source, top-level and function-level imports alike."""

from __future__ import annotations

import ast
from pathlib import Path

import retrieval

PACKAGE = Path(retrieval.__file__).parent
CONFIG_LAYER = {
    "retrieval.config",
    "retrieval.settings",
    "retrieval.project_file",
    "retrieval.profiles",
    "retrieval.profile_checks",
    "retrieval.setting_values",
    "retrieval.names",
    "retrieval.toml_lines",
}
# What the layer may read besides itself: plain modules with no import of the package's upper layers.
ALLOWED = CONFIG_LAYER | {"retrieval.cost", "retrieval.analyzer"}


def _imports(module: str) -> set[str]:
    path = PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py")
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name == "retrieval" or name.startswith("retrieval.")}


def test_the_config_layer_imports_nothing_above_it() -> None:
    upward = {module: sorted(_imports(module) - ALLOWED) for module in sorted(CONFIG_LAYER)}
    assert {module: names for module, names in upward.items() if names} == {}


def test_what_the_layer_reads_imports_nothing_of_the_package_either() -> None:
    for module in ALLOWED - CONFIG_LAYER:
        assert _imports(module) <= ALLOWED, module


def test_each_config_module_has_one_job_and_stays_small() -> None:
    sizes = {
        m: len(PACKAGE.joinpath(*m.split(".")[1:]).with_suffix(".py").read_text().splitlines()) for m in CONFIG_LAYER
    }
    assert max(sizes.values()) < 400, sizes


def test_the_names_other_code_imports_from_config_are_still_there() -> None:
    from retrieval import config

    for name in config.__all__:
        assert hasattr(config, name), name
    assert set(config.__all__) >= {
        "ConfigError",
        "EmbeddingSettings",
        "FLAT_KEYS",
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
    }
