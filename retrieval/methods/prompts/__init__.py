"""The versioned reranking prompts (listwise, pointwise): templates, response schema and deterministic rendering.

Cassettes match requests byte for byte, so the rendered prompt must be a pure function
of the question and the candidates. Anything that changes its bytes (the template, the
truncation length, the candidate layout) needs a new PROMPT_VERSION and a re-recording.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache, lru_cache
from importlib import resources
from string import Template
from typing import Any

__all__ = [
    "POINTWISE_PROMPT_VERSION",
    "PROMPT_VERSION",
    "RERANK_SCHEMA",
    "TEXT_CHARS",
    "answer_field",
    "render_pointwise_prompt",
    "render_rerank_prompt",
    "rerank_prompt_chars",
    "template",
]

PROMPT_VERSION = "rerank-v1"
# The pointwise reranker's: one passage per prompt, answered yes or no.
POINTWISE_PROMPT_VERSION = "rerank-pointwise-v1"

# Part of the prompt version: 20 candidates x 1,000 characters keeps a call near 6k tokens.
TEXT_CHARS = 1000

RERANK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ranking": {"type": "array", "items": {"type": "string"}}},
    "required": ["ranking"],
    # OpenAI's strict json_schema mode refuses a schema without it; the Gemini provider drops it.
    "additionalProperties": False,
}


@cache
def template(version: str) -> Template:
    """The prompt template `<version>.txt` shipped in this package (pyproject: prompts/*.txt);
    read_text normalises line endings, so the rendered bytes are the same on every system."""
    return Template(resources.files(__name__).joinpath(f"{version}.txt").read_text(encoding="utf-8"))


def _one_line(text: str) -> str:
    # Newlines inside a document would break the candidate layout the model reads.
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        # A printable text's only whitespace is the space (every other is a control or separator
        # character): single spaces between words are what the split and join give back.
        return text
    return " ".join(text.split())


# The sweeps render a prompt per question and candidate count to count its tokens: the same
# documents again and again, whose whole text is split and joined for each.
@lru_cache(maxsize=8192)
def _truncate(text: str, limit: int = TEXT_CHARS) -> str:
    text = _one_line(text)
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + " […]"


def render_rerank_prompt(question: str, candidates: Sequence[tuple[str, str, str]]) -> str:
    """Render the listwise reranking prompt for one question.

    `candidates` are (id, title, text) in the order the model sees them (the hybrid
    order). Texts are whitespace-collapsed and cut at TEXT_CHARS characters, so the
    same inputs always give the same bytes.
    """
    blocks = []
    for position, (doc_id, title, text) in enumerate(candidates, start=1):
        lines = [f"[{position}] id: {doc_id}"]
        if title.strip():
            lines.append(f"title: {_one_line(title)}")
        lines.append(f"text: {_truncate(text)}")
        blocks.append("\n".join(lines))
    return template(PROMPT_VERSION).substitute(
        question=_one_line(question),
        count=len(candidates),
        candidates="\n\n".join(blocks),
    )


def render_pointwise_prompt(question: str, title: str, text: str) -> str:
    """Render the pointwise prompt for one question and one candidate: its title (when it has one)
    and its text, whitespace-collapsed and cut at TEXT_CHARS characters as in the listwise prompt."""
    passage = f"{_one_line(title)}\n{_truncate(text)}" if title.strip() else _truncate(text)
    return template(POINTWISE_PROMPT_VERSION).substitute(question=_one_line(question), passage=passage)


def rerank_prompt_chars(question: str, candidates: Sequence[tuple[str, str, str]]) -> list[int]:
    """`len(render_rerank_prompt(question, candidates[:n]))` for n = 0 .. len(candidates), without
    rendering a prompt: what the sweeps' token estimates read (the report renders no prompt, and
    a question's N candidates are the first N of its N + 10). Equal by construction and tested
    (tests/unit/test_rerank.py): the template's fixed text, the question and the count, then each
    block (its position, id, title and text lines) and the blank lines between blocks."""
    fixed = len(template(PROMPT_VERSION).substitute(question=_one_line(question), count="", candidates=""))
    lengths = [fixed + 1]  # the count "0"
    blocks = 0
    for position, (doc_id, title, text) in enumerate(candidates, start=1):
        blocks += len(str(position)) + _block_chars(doc_id, title, text) + (2 if position > 1 else 0)
        lengths.append(fixed + len(str(position)) + blocks)
    return lengths


@lru_cache(maxsize=65536)
def _block_chars(doc_id: str, title: str, text: str) -> int:
    # A block without its position: "[] id: <id>", the title line when there is one, the text line.
    title_line = len("\ntitle: ") + len(_one_line(title)) if title.strip() else 0
    return len("[] id: ") + len(doc_id) + title_line + len("\ntext: ") + len(_truncate(text))


def answer_field(raw: str, field: str, kind: type, what: str) -> Any:
    """The `field` of a model's JSON answer, of type `kind`; ProviderError "unparseable" (naming
    `what` answered and the start of the answer) when the answer is not such a JSON object."""
    from retrieval.providers.base import ProviderError

    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, TypeError) as exc:
        raise ProviderError(f"{what} answer is not JSON: {str(raw)[:120]!r}", "unparseable") from exc
    value = data.get(field) if isinstance(data, dict) else None
    if not isinstance(value, kind):
        article = "list" if kind is list else "string" if kind is str else kind.__name__
        raise ProviderError(f'{what} answer has no "{field}" {article}: {str(raw)[:120]!r}', "unparseable")
    return value
