"""FIXTURE answers for the query-rewriting and enrichment prompts, served by the fake Gemini and
OpenAI-compatible servers (fake_servers.py) or by an in-process stub. They are test fixtures,
never a recording nor a baseline: they exist to check the plumbing (which text reaches which
index, which call degrades what)."""

from __future__ import annotations

import json
import re

from fake_servers import shuffled_ranking

__all__ = [
    "FIXTURE_QUESTIONS",
    "FIXTURE_REWRITES",
    "fixture_llm_answer",
    "fixture_questions",
    "fixture_rewrite",
    "prompt_document",
    "prompt_question",
]

# FIXTURE: the seed's rewrite of its one remaining failure (q11 of the demo).
FIXTURE_REWRITES = {"Comment revenir à l'état d'hier après une fausse manipulation ?": "restaurer une sauvegarde"}
# FIXTURE: questions "written" for a document, by its title.
FIXTURE_QUESTIONS = {
    "Restaurer une sauvegarde": [
        "Comment annuler une fausse manipulation d'hier ?",
        "Revenir en arrière sur mes données",
    ]
}

_QUESTION = re.compile(r"^Question:\n(.*)$", re.MULTILINE)
_DOCUMENT = re.compile(r"^Document:\n(.*)$", re.MULTILINE)


def prompt_question(prompt: str) -> str:
    """The question in a rendered rewrite prompt."""
    match = _QUESTION.search(prompt)
    assert match, "not a rewrite prompt"
    return match.group(1)


def prompt_document(prompt: str) -> str:
    """The first line (the title) of the document in a rendered enrichment prompt."""
    match = _DOCUMENT.search(prompt)
    assert match, "not an enrichment prompt"
    return match.group(1)


def fixture_rewrite(question: str) -> str:
    """FIXTURE: the named rewrite, else the question in capitals (same words for bm25, another vector)."""
    return FIXTURE_REWRITES.get(question, question.upper())


def fixture_questions(title: str) -> list[str]:
    """FIXTURE: the named questions, else one question naming the title."""
    return FIXTURE_QUESTIONS.get(title, [f"Que dit « {title} » ?"])


def fixture_llm_answer(prompt: str) -> str:
    """FIXTURE: what the fake servers answer by default, by the prompt they receive."""
    if prompt.startswith("You rewrite questions"):
        return json.dumps({"query": fixture_rewrite(prompt_question(prompt))}, ensure_ascii=False)
    if prompt.startswith("You write the questions that a document answers"):
        return json.dumps({"questions": fixture_questions(prompt_document(prompt))}, ensure_ascii=False)
    return shuffled_ranking(prompt)
