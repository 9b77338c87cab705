"""Query-rewriting and enrichment prompts: byte-exact rendering, and strict parsing of named
fixture answers (what a model could send back), including the ones that must fail closed."""

from __future__ import annotations

import pytest

from retrieval.prompts.enrich import (
    ENRICH_SCHEMA,
    MAX_QUESTION_CHARS,
    parse_questions,
    render_enrich_prompt,
)
from retrieval.prompts.rewrite import (
    MAX_QUERY_CHARS,
    REWRITE_SCHEMA,
    identifiers,
    parse_rewrite,
    render_rewrite_prompt,
)
from retrieval.providers.base import ProviderError

RESTAURATION = "Comment revenir à l'état d'hier après une fausse manipulation ?"

# Fixture answers: what a rewriting model could answer, by name.
REWRITE_ANSWERS = {
    "seed-example": '{"query": "restaurer une sauvegarde"}',
    "extra-whitespace": '{"query": "  restaurer   une\\nsauvegarde "}',
    "code-kept-other-spelling": '{"query": "erreur HEL-4120 au démarrage de l\'agent"}',
}
REWRITE_FAULTS = {
    "not-json": (
        "restaurer une sauvegarde",
        "unparseable",
        r"^rewrite answer is not JSON: 'restaurer une sauvegarde'$",
    ),
    "json-list": ('["restaurer une sauvegarde"]', "unparseable", r'^rewrite answer has no "query" string'),
    "query-not-string": ('{"query": ["restaurer"]}', "unparseable", r'^rewrite answer has no "query" string'),
    "wrong-key": ('{"rewritten": "restaurer"}', "unparseable", r'^rewrite answer has no "query" string'),
    "empty": ('{"query": "   "}', "empty query", r"^rewrite answer has an empty query$"),
    "answered-instead": (
        '{"query": "' + "Pour revenir à l'état d'hier, ouvrez les sauvegardes. " * 6 + '"}',
        "query too long",
        rf"^rewritten query has 323 characters \(at most {MAX_QUERY_CHARS}\)$",
    ),
}


def test_rewrite_prompt_renders_byte_exact() -> None:
    prompt = render_rewrite_prompt("  Comment revenir à l'état\nd'hier après une fausse manipulation ?  ")
    assert prompt.startswith(
        "You rewrite a user's question into a search query for a support knowledge base.\n\n"
        "Question:\nComment revenir à l'état d'hier après une fausse manipulation ?\n\n"
    )
    assert prompt.endswith('Answer with a JSON object only: {"query": "<the query>"}.\n')
    assert prompt == render_rewrite_prompt(RESTAURATION)
    assert "$" not in prompt


@pytest.mark.parametrize(
    ("name", "question", "expected"),
    [
        ("seed-example", RESTAURATION, "restaurer une sauvegarde"),
        ("extra-whitespace", RESTAURATION, "restaurer une sauvegarde"),
        ("code-kept-other-spelling", "hel 4120 au démarrage de l'agent", "erreur HEL-4120 au démarrage de l'agent"),
    ],
)
def test_rewrite_fixture_answers_parse(name: str, question: str, expected: str) -> None:
    assert parse_rewrite(REWRITE_ANSWERS[name], question) == expected


@pytest.mark.parametrize("name", sorted(REWRITE_FAULTS))
def test_rewrite_fixture_faults_fail_closed(name: str) -> None:
    raw, reason, message = REWRITE_FAULTS[name]
    with pytest.raises(ProviderError, match=message) as caught:
        parse_rewrite(raw, RESTAURATION)
    assert caught.value.reason == reason


def test_rewrite_that_drops_an_error_code_is_refused() -> None:
    with pytest.raises(
        ProviderError, match=r"^rewritten query \"erreur d'import de fichier\" drops 4040 from the question$"
    ) as caught:
        parse_rewrite('{"query": "erreur d\'import de fichier"}', "J'obtiens HEL-4040 en important mon fichier")
    assert caught.value.reason == "dropped identifier"
    assert identifiers("hel 4120, HEL-4040. v2.3 et export_2024.csv") == ["4120", "4040", "v2.3", "2024.csv"]


def test_schemas_are_closed_objects() -> None:
    assert REWRITE_SCHEMA == {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
        "additionalProperties": False,
    }
    assert ENRICH_SCHEMA["properties"] == {"questions": {"type": "array", "items": {"type": "string"}}}
    assert ENRICH_SCHEMA["required"] == ["questions"]


# Fixture answers: what an enrichment model could answer for proc-restauration, by name.
ENRICH_ANSWERS = {
    "five-questions": (
        '{"questions": ["Comment revenir à l\'état d\'hier ?", "J\'ai tout cassé, on peut annuler ?", '
        '"Où sont les sauvegardes ?", "Comment restaurer une version précédente ?", '
        '"Peut-on récupérer des fiches supprimées par erreur ?"]}'
    ),
    "messy": (
        '{"questions": ["  Où sont les\\nsauvegardes ?", 42, "", "OÙ SONT LES SAUVEGARDES ?", null, '
        '"' + "x" * (MAX_QUESTION_CHARS + 1) + '", "Comment annuler une fausse manipulation ?"]}'
    ),
    "too-many": '{"questions": ["q1 ?", "q2 ?", "q3 ?", "q4 ?", "q5 ?", "q6 ?", "q7 ?"]}',
}
ENRICH_FAULTS = {
    "not-json": ("Voici des questions : ...", "unparseable", r"^enrichment answer is not JSON"),
    "bare-list": ('["Où sont les sauvegardes ?"]', "unparseable", r'^enrichment answer has no "questions" list'),
    "questions-string": ('{"questions": "Où ?"}', "unparseable", r'^enrichment answer has no "questions" list'),
    "nothing-usable": ('{"questions": ["", 3, "  "]}', "no questions", r"^enrichment answer holds no usable question$"),
    "empty-list": ('{"questions": []}', "no questions", r"^enrichment answer holds no usable question$"),
}


def test_enrich_prompt_renders_byte_exact() -> None:
    prompt = render_enrich_prompt("proc-restauration", "Restaurer une sauvegarde", "Ouvrez\n\n  les sauvegardes.", 3)
    assert (
        "Document id: proc-restauration\nTitle: Restaurer une sauvegarde\nText: Ouvrez les sauvegardes.\n\n" in prompt
    )
    assert "Write 3 questions" in prompt
    assert prompt.endswith(
        'Answer with a JSON object only: {"questions": ["<question>", ...]}, with exactly 3 questions.\n'
    )
    assert "Title: (none)\n" in render_enrich_prompt("d", " ", "t")
    long = render_enrich_prompt("d", "t", "mot " * 2000)
    assert "Text: " + "mot " * 999 + "mot […]\n" in long
    with pytest.raises(ValueError, match=r"^count must be >= 1, got 0$"):
        render_enrich_prompt("d", "t", "x", 0)


def test_enrich_fixture_answers_parse() -> None:
    assert parse_questions(ENRICH_ANSWERS["five-questions"]) == [
        "Comment revenir à l'état d'hier ?",
        "J'ai tout cassé, on peut annuler ?",
        "Où sont les sauvegardes ?",
        "Comment restaurer une version précédente ?",
        "Peut-on récupérer des fiches supprimées par erreur ?",
    ]
    assert parse_questions(ENRICH_ANSWERS["messy"]) == [
        "Où sont les sauvegardes ?",
        "Comment annuler une fausse manipulation ?",
    ]
    assert parse_questions(ENRICH_ANSWERS["too-many"], count=5) == ["q1 ?", "q2 ?", "q3 ?", "q4 ?", "q5 ?"]


@pytest.mark.parametrize("name", sorted(ENRICH_FAULTS))
def test_enrich_fixture_faults_fail_closed(name: str) -> None:
    raw, reason, message = ENRICH_FAULTS[name]
    with pytest.raises(ProviderError, match=message) as caught:
        parse_questions(raw)
    assert caught.value.reason == reason
