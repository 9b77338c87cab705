"""The run's settings (outside the profiles) checked one by one: methods, fusion, numbers, paths, prices.

Each check takes the raw value (from the project file, the defaults or a flag) and returns it
in the type Settings holds, or raises ConfigError naming the key (or the flag) and the fix. A
new numeric setting adds one line to NUMBERS.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from retrieval.config.names import name_problem
from retrieval.config.settings import ConfigError, is_integer, is_number, unknown_keys

__all__ = [
    "EXECUTORS",
    "MAX_TOLERANCE",
    "NUMBERS",
    "PATH_KEYS",
    "SETTING_KEYS",
    "SPEC_SCHEMES",
    "check_prices",
    "check_values",
]

PATH_KEYS = ("dataset", "cassettes", "vectors", "cache", "baseline", "snapshots")
# The gate's tolerance is at most 0.05 (5 points of recall or MRR): replay is exact, so a
# tolerance only absorbs the noise of live runs; a larger one would pass a retriever that lost
# one relevant document in twenty, which is the regression the gate exists to catch.
MAX_TOLERANCE = 0.05
# key -> (integer?, least, highest): every number a run reads, a bool never one of them.
NUMBERS: dict[str, tuple[bool, float, float]] = {
    "k": (True, 1, math.inf),
    "rrf_k": (True, 0, math.inf),
    "candidates": (True, 1, math.inf),
    "depth": (True, 1, math.inf),
    "bm25_k1": (False, 0.0, math.inf),
    "bm25_b": (False, 0.0, 1.0),
    "tolerance": (False, 0.0, MAX_TOLERANCE),
    "relevant_grade": (True, 1, math.inf),
    "ray_timeout": (False, 1.0, 86_400.0),
}
# The executors `executor` accepts; "ray" needs the `ray` extra (retrieval.executors.executor).
EXECUTORS = ("local", "ray")
# The corpus vectors' precision, in every mode (retrieval.evaluation.corpus_vectors).
PRECISIONS = ("float32", "float16")
# What a drop resting on unjudged documents does to the gate (retrieval.gate.unjudged).
UNJUDGED = ("fail", "warn")
SETTING_KEYS = {
    "profile",
    "methods",
    "hybrid_inputs",
    "hybrid_weights",
    "vector_precision",
    "unjudged",
    "required",
    "accept_llm_judgments",
    "executor",
    "language",
    "split",
    *NUMBERS,
    *PATH_KEYS,
}
# A user method given by its factory: `package.module:function`.
_SPEC = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
# Methods given by what they wrap, `SCHEME:REST` (retrieval.evaluation.pipeline builds each): a TREC
# run file (`trec:runs/engine.run`), a LangChain or LlamaIndex retriever (`langchain:module:object`).
SPEC_SCHEMES = ("trec", "langchain", "llamaindex", "haystack")


def _source(key: str, flags: Mapping[str, Any], where: str, prefix: str = "--") -> str:
    """Who set the key, for the message: the flag when one did (as the front end spells it:
    `prefix`), else the file."""
    return f"{prefix}{key.replace('_', '-')}" if key in flags else f"{where}: {key}"


def _names(values: Any) -> Any:
    """A comma-separated string (a flag) as a list of names; any other value as it is."""
    return [m.strip() for m in values.split(",") if m.strip()] if isinstance(values, str) else values


def _methods(methods: Any, flags: Mapping[str, Any], where: str, prefix: str) -> tuple[str, ...]:
    source = _source("methods", flags, where, prefix)
    if not isinstance(methods, list | tuple) or not all(isinstance(m, str) and m for m in methods):
        raise ConfigError(
            f'{source} must be a list of method names (e.g. ["bm25", "vector"]), got {methods!r}.', at=("methods",)
        )
    for method in methods:
        # A name becomes a cassette's file name; a `module:factory` spec is checked as the name its
        # factory gives the method (retrieval.evaluation.pipeline).
        wrapped = method.partition(":")[0] in SPEC_SCHEMES
        problem = None if _SPEC.fullmatch(method) or wrapped else name_problem("method", method)
        if problem:
            raise ConfigError(
                f"{source}: {problem} A method of yours may be given as module.path:factory.", at=("methods",)
            )
    return tuple(methods)


def _hybrid_inputs(inputs: Any, where: str) -> tuple[str, ...]:
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
    return tuple(inputs)


def _hybrid_weights(weights: Any, inputs: Sequence[str], where: str) -> tuple[float, ...]:
    if (
        not isinstance(weights, list | tuple)
        or len(weights) != len(inputs)
        or not all(is_number(w) and w >= 0 for w in weights)
        # A weight of 0 switches its list off; all of them off leaves nothing to fuse.
        or not any(w > 0 for w in weights)
    ):
        raise ConfigError(
            f"{where}: hybrid_weights must give one finite number >= 0 per hybrid input {list(inputs)}, "
            f"at least one of them above 0, got {weights!r}.",
            at=("hybrid_weights",),
        )
    return tuple(float(w) for w in weights)


def _number(key: str, value: Any, flags: Mapping[str, Any], where: str, prefix: str) -> int | float:
    integer, least, highest = NUMBERS[key]
    if integer:
        if not is_integer(value) or value < least:
            raise ConfigError(
                f"{_source(key, flags, where, prefix)} must be an integer >= {least}, got {value!r}.", at=(key,)
            )
        return int(value)
    if not is_number(value) or not least <= value <= highest:
        wanted = f"a finite number >= {least:g}" if highest == math.inf else f"a number from {least:g} to {highest:g}"
        raise ConfigError(f"{_source(key, flags, where, prefix)} must be {wanted}, got {value!r}.", at=(key,))
    return float(value)


def check_values(
    values: dict[str, Any],
    flags: Mapping[str, Any],
    where: str,
    project_root: Path,
    default_inputs: Sequence[str],
    prefix: str = "--",
) -> dict[str, Any]:
    """The run's values (key -> raw value) checked and converted for Settings; paths made absolute
    (a flag's from the working directory, the file's from the project root)."""
    checked = dict(values)
    checked["methods"] = _methods(_names(values.get("methods", ())), flags, where, prefix)
    if "hybrid_inputs" in values:
        checked["hybrid_inputs"] = _hybrid_inputs(_names(values["hybrid_inputs"]), where)
    if values.get("hybrid_weights"):
        inputs = checked.get("hybrid_inputs", default_inputs)
        checked["hybrid_weights"] = _hybrid_weights(values["hybrid_weights"], inputs, where)
    for key in NUMBERS.keys() & values.keys():
        checked[key] = _number(key, values[key], flags, where, prefix)
    if values.get("executor", EXECUTORS[0]) not in EXECUTORS:
        source = _source("executor", flags, where, prefix)
        raise ConfigError(
            f"{source} must be one of {', '.join(EXECUTORS)}, got {values['executor']!r}.", at=("executor",)
        )
    if values.get("unjudged", UNJUDGED[0]) not in UNJUDGED:
        raise ConfigError(
            f'{where}: unjudged must be "fail" or "warn" (what an undecided drop does), got {values["unjudged"]!r}.',
            at=("unjudged",),
        )
    if values.get("vector_precision", PRECISIONS[0]) not in PRECISIONS:
        raise ConfigError(
            f'{where}: vector_precision must be "float32" or "float16", got {values["vector_precision"]!r}.',
            at=("vector_precision",),
        )
    if "language" in values:
        checked["language"] = _language(values["language"], flags, where, prefix)
    if "split" in values:
        split = values["split"]
        if not isinstance(split, str) or not re.fullmatch(r"[A-Za-z0-9][\w.-]*", split):
            raise ConfigError(
                f"{_source('split', flags, where, prefix)} must name a qrels file of the BEIR folder "
                f"(qrels/<split>.tsv: test, dev, train...), got {split!r}.",
                at=("split",),
            )
    for key in ("required", "accept_llm_judgments"):
        if not isinstance(values.get(key, False), bool):
            raise ConfigError(f"{where}: {key} must be true or false, got {values[key]!r}.", at=(key,))
    for key in PATH_KEYS:
        if key in values:
            if not isinstance(values[key], str) or not values[key]:
                raise ConfigError(
                    f"{where}: {key} must be a path (a non-empty string), got {values[key]!r}.", at=(key,)
                )
            base = Path.cwd() if key in flags else project_root
            checked[key] = str(base / Path(values[key]).expanduser())
    _check_cache_folder(checked, flags, where, prefix)
    return checked


def _check_cache_folder(checked: Mapping[str, Any], flags: Mapping[str, Any], where: str, prefix: str) -> None:
    """The cache folder (locks, embeddings, analyses) must be a folder or not exist yet: every run writes there."""
    cache = Path(checked.get("cache") or ".cache")
    if cache.exists() and not cache.is_dir():
        raise ConfigError(
            f"{_source('cache', flags, where, prefix)}: {cache} is a file, not a folder. Remove it (the tool "
            "keeps only rebuildable files there), or set `cache` to a folder.",
            at=("cache",),
        )


def _language(value: Any, flags: Mapping[str, Any], where: str, prefix: str) -> str:
    from retrieval.data.snowball import LANGUAGES

    if value == "fr" or value in LANGUAGES:
        return str(value)
    known = ", ".join(["fr (the default: the French analyzer)", *sorted(LANGUAGES)])
    raise ConfigError(
        f"{_source('language', flags, where, prefix)} must be a language code of BM25's analyzers, got {value!r}; "
        f"known: {known}.",
        at=("language",),
    )


def check_prices(prices: Any, where: str) -> Mapping[str, Mapping[str, float]]:
    """The price table checked: model or service -> {"input": USD, "output": USD} per million
    tokens, {"call": USD} per call and {"search_unit": USD} per search unit, numbers >= 0; a
    misspelt key is refused, not priced at 0."""
    from retrieval.run.cost import PRICE_KEYS

    if not isinstance(prices, Mapping):
        raise ConfigError(
            f'{where}: prices must be a table of models ([prices."MODEL"]), got {prices!r}.', at=("prices",)
        )
    for model, table in prices.items():
        if not isinstance(table, Mapping) or not all(is_number(v) and v >= 0 for v in table.values()):
            raise ConfigError(
                f'{where}: prices."{model}" must be a table of numbers >= 0 (USD per million tokens, e.g. '
                f'[prices."{model}"] input = 0.15, or USD per call: call = 0.002), got {table!r}.',
                at=("prices", model),
            )
        unknown = sorted(set(table) - set(PRICE_KEYS))
        if unknown:
            raise ConfigError(
                f'{where}: prices."{model}" has {unknown_keys(unknown, PRICE_KEYS)}; known: input and output (USD per '
                "million tokens), call (USD per call), search_unit (USD per search unit).",
                at=("prices", model, unknown[0]),
            )
    return prices
