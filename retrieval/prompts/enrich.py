"""The versioned document-enrichment prompt (enrich-v1): template, response schema, strict parser.

At indexing, an LLM writes the typical questions a document answers; they are indexed
with the document for bm25 and vector (issue 13, the seed's « enrichir les documents de
questions types »). The rendered prompt is a pure function of the document and the
count, so enrichments can be cached and recorded per document; changing the template,
ENRICH_TEXT_CHARS or the rendering needs a new ENRICH_PROMPT_VERSION.

The parser keeps the usable questions and fails closed when none is left: the caller
then indexes the document without questions (counted as degraded).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from string import Template
from typing import Any

from retrieval.providers.base import ProviderError

__all__ = [
    "ENRICH_PROMPT_VERSION",
    "ENRICH_SCHEMA",
    "ENRICH_SCHEMA_NAME",
    "ENRICH_TEXT_CHARS",
    "MAX_QUESTION_CHARS",
    "QUESTIONS_PER_DOCUMENT",
    "parse_questions",
    "render_enrich_prompt",
]

ENRICH_PROMPT_VERSION = "enrich-v1"
ENRICH_SCHEMA_NAME = "questions"
QUESTIONS_PER_DOCUMENT = 5
# Part of the prompt version: the demo's longest document is about 1,400 characters.
ENRICH_TEXT_CHARS = 4000
# A "question" longer than this is a paragraph, not something a user types.
MAX_QUESTION_CHARS = 300

ENRICH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"questions": {"type": "array", "items": {"type": "string"}}},
    "required": ["questions"],
    # OpenAI's strict json_schema mode refuses a schema without it; the Gemini provider drops it.
    "additionalProperties": False,
}


@cache
def _template() -> Template:
    text = resources.files("retrieval.prompts").joinpath(f"{ENRICH_PROMPT_VERSION}.txt").read_text(encoding="utf-8")
    return Template(text)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _truncate(text: str, limit: int = ENRICH_TEXT_CHARS) -> str:
    text = _one_line(text)
    return text if len(text) <= limit else text[:limit].rstrip() + " […]"


def render_enrich_prompt(doc_id: str, title: str, text: str, count: int = QUESTIONS_PER_DOCUMENT) -> str:
    """The enrichment prompt for one document: whitespace collapsed, text cut at ENRICH_TEXT_CHARS."""
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    return _template().substitute(doc_id=doc_id, title=_one_line(title) or "(none)", text=_truncate(text), count=count)


def parse_questions(raw: str, count: int = QUESTIONS_PER_DOCUMENT) -> list[str]:
    """Read the model's answer as at most `count` distinct questions.

    The answer must be a JSON object with a "questions" list. Items that are not strings,
    empty or longer than MAX_QUESTION_CHARS are dropped, whitespace is collapsed,
    duplicates (ignoring case) keep their first position, and the first `count` are kept.
    Raises ProviderError with reason "unparseable" when the answer is not such an object,
    and "no questions" when nothing usable is left.
    """
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, TypeError) as exc:
        raise ProviderError(f"enrichment answer is not JSON: {str(raw)[:120]!r}", "unparseable") from exc
    items = data.get("questions") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ProviderError(f'enrichment answer has no "questions" list: {str(raw)[:120]!r}', "unparseable")
    kept: dict[str, str] = {}
    for item in items:
        if not isinstance(item, str):
            continue
        question = _one_line(item)
        if question and len(question) <= MAX_QUESTION_CHARS:
            kept.setdefault(question.casefold(), question)
    if not kept:
        raise ProviderError("enrichment answer holds no usable question", "no questions")
    return list(kept.values())[:count]
