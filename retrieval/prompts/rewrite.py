"""The versioned query-rewriting prompt (rewrite-v1): template, response schema, strict parser.

An LLM rewrites each question into a search query in the documentation's vocabulary
before bm25 and vector search (issue 13, the seed's « réécrire la question »). Cassettes
match requests byte for byte, so the rendered prompt is a pure function of the question;
changing the template or the rendering needs a new REWRITE_PROMPT_VERSION.

The parser is strict and fails closed: an answer it cannot use raises ProviderError
with a short reason, and the caller keeps the original question (counted as degraded).
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from string import Template
from typing import Any

from retrieval.providers.base import ProviderError

__all__ = [
    "MAX_QUERY_CHARS",
    "REWRITE_PROMPT_VERSION",
    "REWRITE_SCHEMA",
    "REWRITE_SCHEMA_NAME",
    "identifiers",
    "parse_rewrite",
    "render_rewrite_prompt",
]

REWRITE_PROMPT_VERSION = "rewrite-v1"
REWRITE_SCHEMA_NAME = "rewrite"
# A query longer than this is not a query: the model answered or rambled.
MAX_QUERY_CHARS = 300

REWRITE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string"}},
    "required": ["query"],
    # OpenAI's strict json_schema mode refuses a schema without it; the Gemini provider drops it.
    "additionalProperties": False,
}

# Words with a digit: error codes (HEL-4040, hel 4120), versions (v2.3), file names (export_2024.csv).
_IDENTIFIER = re.compile(r"[^\W_]*\d[\w.-]*", re.UNICODE)


@cache
def _template() -> Template:
    text = resources.files("retrieval.prompts").joinpath(f"{REWRITE_PROMPT_VERSION}.txt").read_text(encoding="utf-8")
    return Template(text)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def render_rewrite_prompt(question: str) -> str:
    """The rewriting prompt for one question (whitespace collapsed: same input, same bytes)."""
    return _template().substitute(question=_one_line(question))


def identifiers(text: str) -> list[str]:
    """The words of `text` that carry a digit, lower-cased, trailing punctuation stripped."""
    return [m.group(0).rstrip(".-").lower() for m in _IDENTIFIER.finditer(text) if m.group(0).rstrip(".-")]


def parse_rewrite(raw: str, question: str) -> str:
    """Read the model's answer as the rewritten query for `question`.

    The answer must be a JSON object whose "query" is a non-empty string of at most
    MAX_QUERY_CHARS characters (whitespace collapsed), keeping every identifier of the
    question (words with a digit, compared case-insensitively, so "hel 4120" may become
    "HEL-4120"). Raises ProviderError with reason "unparseable", "empty query",
    "query too long" or "dropped identifier"; the caller then searches with the question.
    """
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, TypeError) as exc:
        raise ProviderError(f"rewrite answer is not JSON: {str(raw)[:120]!r}", "unparseable") from exc
    query = data.get("query") if isinstance(data, dict) else None
    if not isinstance(query, str):
        raise ProviderError(f'rewrite answer has no "query" string: {str(raw)[:120]!r}', "unparseable")
    query = _one_line(query)
    if not query:
        raise ProviderError("rewrite answer has an empty query", "empty query")
    if len(query) > MAX_QUERY_CHARS:
        raise ProviderError(
            f"rewritten query has {len(query)} characters (at most {MAX_QUERY_CHARS})", "query too long"
        )
    lowered = query.lower()
    dropped = [i for i in identifiers(question) if i not in lowered]
    if dropped:
        raise ProviderError(
            f"rewritten query {query!r} drops {', '.join(dropped)} from the question", "dropped identifier"
        )
    return query
