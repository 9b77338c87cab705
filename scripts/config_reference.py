"""Generate the configuration reference in docs/configuration.md from the settings' own definitions.

    python scripts/config_reference.py           rewrite the block between the markers
    python scripts/config_reference.py --check   exit 1 if the block differs from the code

Every key the project file accepts comes from retrieval.config (SETTING_KEYS, FLAT_KEYS, the
profile groups' fields, PRICE_KEYS), its description from the field's metadata (settings.DOC),
its default from defaults.toml, its range or choices from the checks that enforce them, and
the flags from the CLI's parser and the pytest plugin's options. A key without a description
stops the generation: a new setting is documented where it is defined.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import MISSING, Field, fields
from importlib import resources
from pathlib import Path
from typing import Any

from generated_block import BlockError, block_main

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "configuration.md"
START = "<!-- config-reference:start -->"
END = "<!-- config-reference:end -->"
NOTE = "<!-- Generated from retrieval/config by `python scripts/config_reference.py`; do not edit by hand. -->"


class ReferenceBlockError(BlockError):
    """The reference cannot be generated or placed; the message says what to fix."""


def _value(value: Any) -> str:
    """A value as the project file writes it (TOML), in a code span."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
    elif isinstance(value, list | tuple):
        text = "[" + ", ".join(_value(v).strip("`") for v in value) + "]"
    else:
        text = str(value)
    return f"`{text}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _doc(field: Field[Any], owner: str) -> str:
    from retrieval.config.settings import DOC

    doc = field.metadata.get(DOC)
    if not doc:
        raise ReferenceBlockError(
            f"{owner}.{field.name} has no description: give its field `metadata={{DOC: ...}}` "
            "(retrieval/config/settings.py, `_setting(default, doc)`)."
        )
    return str(doc)


def _default(field: Field[Any]) -> Any:
    if field.default is not MISSING:
        return field.default
    if field.default_factory is not MISSING:
        return field.default_factory()
    return None


def _flags() -> dict[str, list[str]]:
    """key -> the flags that set it: `python -m retrieval`'s and pytest's."""
    from retrieval.cli import _parser

    found: dict[str, list[str]] = {}
    for action in _parser()._actions:
        if action.option_strings and action.dest != "help":
            found.setdefault(action.dest, []).append(action.option_strings[-1])
    for option in _pytest_options():
        dest = option["dest"].removeprefix("retrieval_")
        found.setdefault(dest, []).append(f"{option['flag']}` (pytest)")
    return found


def _pytest_options() -> list[dict[str, Any]]:
    """The gate plugin's options, as its pytest_addoption declares them."""
    from retrieval.gate import plugin

    options: list[dict[str, Any]] = []

    class Group:
        def addoption(self, *names: str, **kwargs: Any) -> None:
            dest = kwargs.get("dest") or names[0].lstrip("-").replace("-", "_")
            options.append({"flag": names[0], "dest": dest, **kwargs})

    class Parser:
        def getgroup(self, *_: Any, **__: Any) -> Group:
            return Group()

        def addini(self, *_: Any, **__: Any) -> None:
            pass

    plugin.pytest_addoption(Parser())  # type: ignore[arg-type]
    return options


def _rules(key: str) -> str:
    """What the checks accept for a run setting (retrieval.config.setting_values)."""
    from retrieval.config.setting_values import EXECUTORS, NUMBERS, PATH_KEYS, PRECISIONS

    if key in NUMBERS:
        integer, least, highest = NUMBERS[key]
        kind = "integer" if integer else "number"
        if highest == math.inf:
            return f"{kind} >= {least:g}"
        return f"{kind} from {least:g} to {highest:g}"
    if key in PATH_KEYS:
        return "path, from the project root"
    return {
        "executor": " or ".join(f"`{e}`" for e in EXECUTORS),
        "vector_precision": " or ".join(f"`{p}`" for p in PRECISIONS),
        "required": "true or false",
        "methods": "list of names or specs",
        "hybrid_inputs": "list of names or specs",
        "hybrid_weights": "list of numbers",
        "profile": "profile name",
    }.get(key, "")


def _shown_default(name: str, field: Field[Any], defaults: Mapping[str, Any]) -> str:
    """defaults.toml's value, else the field's own; an empty one is "unset" (a derived default)."""
    value = defaults[name] if name in defaults else _default(field)
    return "unset" if value in (None, "") else _value(value)


def _setters(key: str, flags: Mapping[str, list[str]]) -> str:
    from retrieval.config import ENVIRONMENT

    setters = [f"`{flag}" + ("" if flag.endswith("` (pytest)") else "`") for flag in flags.get(key, [])]
    if key in ENVIRONMENT:
        setters.append(f"`{ENVIRONMENT[key]}`")
    return ", ".join(setters)


def _run_settings(defaults: Mapping[str, Any], flags: Mapping[str, list[str]]) -> list[str]:
    from retrieval.config.setting_values import SETTING_KEYS
    from retrieval.config.settings import Settings

    by_name = {f.name: f for f in fields(Settings)}
    missing = sorted(SETTING_KEYS - set(by_name))
    if missing:
        raise ReferenceBlockError(f"settings {missing} are accepted but are no field of Settings")
    lines = [
        "| key | accepts | default | also set by | what it does |",
        "|---|---|---|---|---|",
    ]
    for name in [f.name for f in fields(Settings) if f.name in SETTING_KEYS]:
        field = by_name[name]
        default = _shown_default(name, field, defaults)
        lines.append(
            f"| `{name}` | {_rules(name)} | {default} | {_setters(name, flags)} | {_cell(_doc(field, 'Settings'))} |"
        )
    return lines


def _profile_settings(flags: Mapping[str, list[str]]) -> list[str]:
    from retrieval.config.profile_checks import CHECKS, ENCODINGS, LONG_INPUTS
    from retrieval.config.settings import FLAT_KEYS, GROUPS, Profile

    group_fields = {(group, f.name): (f, cls.__name__) for group, cls in GROUPS.items() for f in fields(cls)}
    group_fields.update({("", f.name): (f, "Profile") for f in fields(Profile) if f.name not in {"name", *GROUPS}})
    unlisted = sorted(set(group_fields) - set(FLAT_KEYS.values()))
    if unlisted:
        raise ReferenceBlockError(f"profile settings {unlisted} have no flat key in FLAT_KEYS")
    choices = {
        "provider": " or ".join(f"`{p}`" for p in CHECKS),
        "encoding_format": " or ".join(f"`{e}`" for e in ENCODINGS),
        "long_inputs": ", ".join(f"`{e}`" for e in LONG_INPUTS[:-1]) + f" or `{LONG_INPUTS[-1]}`",
    }
    lines = [
        "| flat key | grouped key | accepts | default | also set by | what it does |",
        "|---|---|---|---|---|---|",
    ]
    for flat, (group, name) in FLAT_KEYS.items():
        field, owner = group_fields[(group, name)]
        grouped = f"`{group}.{name}`" if group else f"`{name}`"
        default = _default(field)
        shown = "unset" if default is None else _value(default)
        accepts = choices.get(name, "") or {bool: "true or false", int: "integer", float: "number"}.get(
            type(default), "text"
        )
        lines.append(
            f"| `{flat}` | {grouped} | {accepts} | {shown} | {_setters(flat, flags)} | {_cell(_doc(field, owner))} |"
        )
    return lines


def _builtin_profiles(defaults: Mapping[str, Any]) -> list[str]:
    profiles: Mapping[str, Mapping[str, Any]] = defaults.get("profiles", {})
    names = list(profiles)
    keys: list[str] = []
    for table in profiles.values():
        keys += [k for k in table if k not in keys]
    lines = ["| flat key | " + " | ".join(f"`{n}`" for n in names) + " |", "|---|" + "---|" * len(names)]
    for key in keys:
        cells = [_value(profiles[n][key]) if key in profiles[n] else "" for n in names]
        lines.append(f"| `{key}` | " + " | ".join(cells) + " |")
    return lines


def _prices(defaults: Mapping[str, Any]) -> list[str]:
    from retrieval.run.cost import PRICE_KEYS

    prices: Mapping[str, Mapping[str, float]] = defaults.get("prices", {})
    lines = [
        "| model or service | " + " | ".join(f"`{k}`" for k in PRICE_KEYS) + " |",
        "|---|" + "---|" * len(PRICE_KEYS),
    ]
    for model, table in prices.items():
        lines.append(f"| `{model}` | " + " | ".join(_value(table[k]) if k in table else "" for k in PRICE_KEYS) + " |")
    return lines


def _options(rows: Iterable[tuple[str, str]]) -> list[str]:
    lines = ["| option | what it does |", "|---|---|"]
    lines += [f"| `{flag}` | {_cell(text)} |" for flag, text in rows]
    return lines


def _cli_rows(parser: argparse.ArgumentParser | None = None) -> list[tuple[str, str]]:
    from retrieval.cli import _parser

    rows = []
    for action in (parser or _parser())._actions:
        if not action.option_strings or action.dest == "help":
            continue
        flag = ", ".join(action.option_strings)
        if action.metavar or (action.nargs != 0 and not isinstance(action, argparse._StoreTrueAction)):
            flag += f" {action.metavar or action.dest.upper()}"
        text = action.help or ""
        if action.choices:
            text = (text + " " if text else "") + "one of " + ", ".join(str(c) for c in action.choices)
            if action.default is not None:
                text += f" (default {action.default})"
        rows.append((flag, text))
    return rows


def _judge_parser() -> argparse.ArgumentParser:
    from retrieval.judging.command import judge_parser

    return judge_parser()


def _pytest_rows() -> list[tuple[str, str]]:
    rows = []
    for option in _pytest_options():
        flag = option["flag"]
        if option.get("action") != "store_true":
            flag += f" {option.get('metavar') or option['dest'].removeprefix('retrieval_').upper()}"
        rows.append((flag, str(option.get("help", ""))))
    return rows


def render_reference() -> str:
    """The generated block, markers included."""
    defaults = tomllib.loads(resources.files("retrieval.config").joinpath("defaults.toml").read_text("utf-8"))
    flags = _flags()
    from retrieval.run.cost import PRICE_KEYS

    parts = [
        START,
        NOTE,
        "",
        "### Run settings",
        "",
        "At the top level of `retrieval.toml`, or under `[tool.retrieval]` in `pyproject.toml`.",
        "",
        *_run_settings(defaults, flags),
        "",
        "### Profile settings",
        "",
        "Under `[profiles.NAME]` (`[tool.retrieval.profiles.NAME]`), flat, or grouped in the tables",
        "`embeddings`, `llm` and `retries` (`[profiles.NAME.embeddings] model = ...`); both forms may be",
        "mixed, but not for the same setting. An unset key takes the default below.",
        "",
        *_profile_settings(flags),
        "",
        "### Built-in profiles",
        "",
        "From the package's `defaults.toml`; a project's `[profiles.local]` or `[profiles.gemini]` changes",
        "the keys it sets and keeps the others.",
        "",
        *_builtin_profiles(defaults),
        "",
        "### Prices",
        "",
        '`[prices."MODEL"]` (`[tool.retrieval.prices."MODEL"]`): '
        + ", ".join(f"`{k}`" for k in PRICE_KEYS)
        + " (`input` and `output` in USD per million tokens, `call` in USD per request); a",
        "misspelt key is refused, not priced at 0. Built in (illustrative: put your contract's prices):",
        "",
        *_prices(defaults),
        "",
        "### `python -m retrieval` options",
        "",
        *_options(_cli_rows()),
        "",
        "### `python -m retrieval judge` options",
        "",
        "The depth-k pool of every configured method, judged on a local page, in a spreadsheet or by the",
        "profile's LLM ([Judgments that stay true](judging.md)).",
        "",
        *_options(_cli_rows(_judge_parser())),
        "",
        "### pytest options (the gate's plugin)",
        "",
        *_options(_pytest_rows()),
        "",
        END,
    ]
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    return block_main(argv, __doc__, [PAGE], START, END, render_reference, "python scripts/config_reference.py")


if __name__ == "__main__":
    sys.exit(main())
