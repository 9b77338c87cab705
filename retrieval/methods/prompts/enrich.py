"""The versioned document-enrichment prompt: template, response schema, rendering and parsing.

The rendered prompt is a pure function of the document's content, and the enrichment cache
is keyed by ENRICH_VERSION: anything that changes the prompt's bytes (the template, QUESTIONS,
DOCUMENT_CHARS) needs a new version, which also invalidates the cached questions.
"""

from __future__ import annotations

from typing import Any

from retrieval.methods.prompts import answer_field, template
from retrieval.providers.base import ProviderError

__all__ = [
    "DOCUMENT_CHARS",
    "ENRICH_SCHEMA",
    "ENRICH_VERSION",
    "QUESTIONS",
    "parse_questions",
    "render_enrich_prompt",
]

ENRICH_VERSION = "enrich-v1"
QUESTIONS = 5  # asked per document; part of the version
# Part of the version: documents are cut there (about 1,500 tokens per call).
DOCUMENT_CHARS = 6000
QUESTION_CHARS = 300  # a longer "question" is refused

ENRICH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"questions": {"type": "array", "items": {"type": "string"}}},
    "required": ["questions"],
    "additionalProperties": False,
}


def render_enrich_prompt(content: str) -> str:
    """The enrichment prompt for one document's content (title then text), cut at DOCUMENT_CHARS."""
    content = content.strip()
    if len(content) > DOCUMENT_CHARS:
        content = content[:DOCUMENT_CHARS].rstrip() + " […]"
    return template(ENRICH_VERSION).substitute(document=content, count=QUESTIONS)


def parse_questions(raw: str) -> list[str]:
    """The questions in the model's answer: strings, whitespace collapsed, duplicates and blanks
    dropped, at most QUESTIONS, each at most QUESTION_CHARS characters.

    Raises ProviderError "unparseable" when the answer is not a JSON object with a "questions"
    list, "no questions" when no usable question is left.
    """
    items = answer_field(raw, "questions", list, "enrichment")
    questions: dict[str, None] = {}
    for item in items:
        if isinstance(item, str):
            text = " ".join(item.split())
            if text and len(text) <= QUESTION_CHARS:
                questions.setdefault(text, None)
    if not questions:
        raise ProviderError("enrichment answer holds no usable question", "no questions")
    return list(questions)[:QUESTIONS]
