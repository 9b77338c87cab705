"""The French BM25 analyzer: folding, elisions, stop words, identifiers kept whole, plurals."""

from __future__ import annotations

import pytest

from retrieval.data import analyzer
from retrieval.data.analyzer import STOP_WORDS, analyze, analyze_many


def test_lower_case() -> None:
    assert analyze("SAUVEGARDE Restauration") == ["sauvegarde", "restauration"]


def test_accents_are_folded() -> None:
    assert analyze("Élément sécurité réplica à côté") == ["element", "securite", "replica", "cote"]
    assert analyze("sécurité") == analyze("securite") == analyze("SÉCURITÉ")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("l'application", ["application"]),
        ("L'application", ["application"]),
        ("l\u2019application", ["application"]),  # typographic apostrophe
        ("d'authentification", ["authentification"]),
        ("qu'importe", ["importe"]),
        ("j'obtiens", analyze("obtiens")),
        ("jusqu'au redémarrage", ["redemarrage"]),
        ("jusqu'aujourd'hui", analyze("aujourd'hui")),
    ],
)
def test_elisions_are_removed(text: str, expected: list[str]) -> None:
    assert analyze(text) == expected


def test_elided_word_matches_the_bare_word() -> None:
    assert analyze("l'erreur d'import") == analyze("erreur import")


def test_stop_words_are_dropped() -> None:
    assert analyze("le la les de des du et ou pour dans avec sur une un") == []
    assert analyze("Comment revenir à l'état d'hier après une fausse manipulation ?") == [
        "comment",
        "revenir",
        "etat",
        "hier",
        "apre",
        "fausse",
        "manipulation",
    ]


def test_no_stop_word_survives_as_a_term() -> None:
    text = "Je ne sais pas si les données de mon compte sont dans la sauvegarde ou non"
    assert not set(analyze(text)) & STOP_WORDS
    assert "sauvegarde" in analyze(text)


@pytest.mark.parametrize("text", ["HEL-4040", "hel-4040", "HEL 4040", "hel_4040", "HEL4040"])
def test_identifier_spellings_give_one_term(text: str) -> None:
    assert analyze(text) == ["hel-4040"]


@pytest.mark.parametrize(
    "text",
    [
        "J'obtiens HEL-4040 en important mon fichier",
        "j'obtiens hel-4040 en important mon fichier",
        "J'obtiens HEL 4040 en important mon fichier",
        "J'obtiens hel_4040 en important mon fichier",
        "J'obtiens HEL4040 en important mon fichier",
    ],
)
def test_identifier_inside_a_sentence(text: str) -> None:
    assert analyze(text) == ["obtien", "hel-4040", "important", "fichier"]


def test_identifier_next_to_punctuation_and_elision() -> None:
    assert analyze("(HEL-4040), l'HEL-4050.") == ["hel-4040", "hel-4050"]


def test_different_codes_stay_different() -> None:
    assert analyze("HEL-4040") != analyze("HEL-4050")
    assert analyze("HEL-4040 HEL-4400") == ["hel-4040", "hel-4400"]


def test_ordinary_word_and_number_stay_two_terms() -> None:
    assert analyze("page 12") == ["page", "12"]
    assert analyze("Page 12") == ["page", "12"]
    assert analyze("version 2") == ["version", "2"]


@pytest.mark.parametrize(
    ("plural", "singular"),
    [
        ("sauvegardes", "sauvegarde"),
        ("documents", "document"),
        ("erreurs", "erreur"),
        ("numéros", "numéro"),
    ],
)
def test_plural_and_singular_meet(plural: str, singular: str) -> None:
    assert analyze(plural) == analyze(singular)
    assert len(analyze(plural)) == 1
    assert analyze(f"Les {plural} du compte") == analyze(f"le {singular} du compte")


def test_plural_strip_leaves_short_words_double_s_and_numbers() -> None:
    assert analyze("gaz bus") == ["gaz", "bus"]  # four letters or fewer
    assert analyze("processus") == ["processu"]
    assert analyze("stress") == ["stress"]  # -ss is not a plural
    assert analyze("tableaux") == analyze("tableau")


def test_plural_strip_is_idempotent_on_terms() -> None:
    text = "Les sauvegardes des documents et les erreurs des agents"
    terms = analyze(text)
    assert analyze(" ".join(terms)) == terms


def test_empty_and_punctuation_only_text() -> None:
    assert analyze("") == []
    assert analyze("  ?! … « » ") == []


def test_ligatures_are_expanded_not_dropped() -> None:
    assert analyze("cœur manœuvre Cæsar") == analyze("coeur manoeuvre Caesar") == ["coeur", "manoeuvre", "caesar"]


def test_analyze_many_keeps_each_texts_terms_within_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analyzer.FRENCH, "documents", {})
    monkeypatch.setattr(analyzer.FRENCH, "documents_terms", 0)
    texts = ["Erreur HEL-4040 à l'import", "Restaurer une sauvegarde"]
    first = analyze_many(texts)
    assert first == [analyze(t) for t in texts] == [["erreur", "hel-4040", "import"], ["restaurer", "sauvegarde"]]
    assert {t: tuple(terms) for t, terms in zip(texts, first, strict=True)} == analyzer.FRENCH.documents
    first[0].append("changed by the caller")
    assert analyze_many(texts) == [["erreur", "hel-4040", "import"], ["restaurer", "sauvegarde"]]
    # Past the bound the kept terms are dropped, then the cache fills again.
    monkeypatch.setattr(analyzer, "_DOCUMENTS_LIMIT", 6)
    assert analyze_many(["Changer la langue de l'interface"]) == [["changer", "langue", "interface"]]
    assert list(analyzer.FRENCH.documents) == ["Changer la langue de l'interface"]
    assert analyzer.FRENCH.documents_terms == 3
