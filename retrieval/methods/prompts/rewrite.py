"""The versioned query-rewriting prompt: template, response schema, rendering and parsing.

As for reranking, cassettes match requests byte for byte: the rendered prompt is a pure
function of the question, and anything that changes its bytes needs a new REWRITE_VERSION
(and a re-recording).
"""

from __future__ import annotations

from typing import Any

from retrieval.methods.prompts import answer_field, template
from retrieval.providers.base import ProviderError

__all__ = ["MAX_QUERY_CHARS", "REWRITE_SCHEMA", "REWRITE_VERSION", "parse_rewrite", "render_rewrite_prompt"]

REWRITE_VERSION = "rewrite-v1"

# A rewritten query longer than this is not a query: the answer is refused (degraded).
MAX_QUERY_CHARS = 500

REWRITE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string"}},
    "required": ["query"],
    "additionalProperties": False,
}


def render_rewrite_prompt(question: str) -> str:
    """The rewriting prompt for one question (whitespace collapsed, so the bytes are stable)."""
    return template(REWRITE_VERSION).substitute(question=" ".join(question.split()))


def parse_rewrite(raw: str) -> str:
    """The rewritten query in the model's answer, whitespace collapsed.

    The answer must be a JSON object whose "query" is a string. Raises ProviderError with
    reason "unparseable" otherwise, "empty query" when it is blank, "too long" beyond
    MAX_QUERY_CHARS characters: the caller then searches with the original question.
    """
    query = answer_field(raw, "query", str, "rewrite")
    query = " ".join(query.split())
    if not query:
        raise ProviderError("rewrite answer is an empty query", "empty query")
    if len(query) > MAX_QUERY_CHARS:
        raise ProviderError(f"rewrite answer is {len(query)} characters long, over {MAX_QUERY_CHARS}", "too long")
    return query
