"""The analyzer's fast paths give exactly the terms of the plain algorithm they replace.

The fast paths (retrieval/data/analyzer.py, issue 6): identifiers found from digit runs instead
of trying the pattern at every position, text analysed per whitespace chunk through a
cache, lower() alone for ASCII. `plain_analyze` below is the analyzer as it was before
them, written over the module's own patterns and word rules, so that the comparison
still holds after a deliberate change to those (which bumps ANALYZER_VERSION).
"""

from __future__ import annotations

import functools
import random
import unicodedata

import pytest
from demo_fixture import demo_dataset

from retrieval.data import analyzer
from retrieval.data.analyzer import analyze, analyze_many


def plain_fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.lower().translate(analyzer._LIGATURES))
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def plain_words(segment: str) -> list[str]:
    folded = plain_fold(analyzer._ELISION.sub(" ", segment))
    return [t for t in map(analyzer._term, analyzer._WORD.findall(folded)) if t]


def plain_analyze(text: str) -> list[str]:
    return list(_plain_terms(text))  # a list of its own


@functools.cache
def _plain_terms(text: str) -> tuple[str, ...]:
    # Remembered: the same texts are the expectation of several cases (each batch size, each
    # module's comparison): 6,788 texts of 16,877 calls.
    text = unicodedata.normalize("NFKC", text)
    terms: list[str] = []
    start = 0
    for match in analyzer._IDENTIFIER.finditer(text):
        terms.extend(plain_words(text[start : match.start()]))
        prefix = match.group("a") or match.group("c") or match.group("e")
        number = match.group("b") or match.group("d") or match.group("f")
        terms.append(f"{plain_fold(prefix)}-{number}")
        start = match.end()
    terms.extend(plain_words(text[start:]))
    return tuple(terms)


# Pieces that stress each fast path: identifier shapes and near misses, every kind of
# whitespace, apostrophes, combining marks (alone, after a space), non-ASCII letters that
# fold to ASCII or to nothing, final sigma, dotted I, Unicode digits, ligatures.
PIECES = [
    "a", "e", "z", "x", "s", "l", "qu", "HEL", "hel", "Hel", "AB", "ab", "X",
    "4", "40", "4040", "123", "٣٤٥", "\uff14\uff10", "-", "_", " ", "  ", "\t", "\n", "\xa0",
    "\u2028", "\x1c", "\u3000", "'", "\u2019", "l'", "qu'", "L\u2019", "jusqu'", "é", "É",
    "e\u0301", "\u0301", "\u0327", "œ", "Œ", "ß", "ﬁ", "Σ", "ΟΣ", "İ", "\u0131",
    "K", "Å", "ǅ", "ñ", "ç", ".", ",", ";", "!", "(", "»", "les", "sauvegardes", "erreurs",
    "index", "page 12",
]  # fmt: skip


def random_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choices(PIECES, k=rng.randint(0, 40))) for _ in range(n)]


FRENCH = (
    "l'erreur d'authentification de la sauvegarde échoue lorsque le serveur redémarre "
    "après une mise à jour du système ; vérifiez les paramètres réseau, les journaux "
    "d'événements et qu'aucun nœud n'est arrêté. Code HEL-4040 hel_4041 HEL 4120 ERR4200 "
    "page 12 version 3.11 à 90 jours jusqu'à l\u2019échéance Élément côté réplica crées"
)


def french_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = FRENCH.split()
    return [" ".join(rng.choices(words, k=rng.randint(1, 150))) for _ in range(n)]


@pytest.mark.parametrize(
    ("text", "terms"),
    [  # outputs of the analyzer before the fast paths (fr-2: ligatures expanded, "Œuvre" -> "oeuvre")
        (
            "L\u2019erreur HEL 4040 des sauvegardes a échoué",
            ["erreur", "hel-4040", "sauvegarde", "echoue"],
        ),
        (
            "J'obtiens hel_4040 puis HEL4040, page 12",
            ["obtien", "hel-4040", "hel-4040", "page", "12"],
        ),
        (
            "Œuvre, naïve façon: les index ﬁchiers Déjà-vu XY-12 ab12 abc123",
            ["oeuvre", "naive", "facon", "inde", "fichier", "deja", "vu", "xy-12", "ab12", "abc-123"],
        ),
        ("Qu\u2019est-ce que ERR-1 et SYN 77 ?", ["err-1", "syn-77"]),
    ],
)
def test_known_outputs(text: str, terms: list[str]) -> None:
    assert analyze(text) == terms
    assert plain_analyze(text) == terms


def test_same_terms_on_the_demo_set() -> None:
    dataset = demo_dataset()
    texts = [d.content for d in dataset.documents] + [q.text for q in dataset.questions]
    expected = [plain_analyze(t) for t in texts]
    assert [analyze(t) for t in texts] == expected
    assert analyze_many(texts) == expected


def test_same_terms_on_generated_french_text() -> None:
    texts = french_texts(300, seed=1)
    expected = [plain_analyze(t) for t in texts]
    assert [analyze(t) for t in texts] == expected
    assert analyze_many(texts) == expected


@pytest.mark.parametrize("seed", range(3))
def test_same_terms_on_random_strings(seed: int) -> None:
    texts = random_texts(1000, seed)
    expected = [plain_analyze(t) for t in texts]
    assert [analyze(t) for t in texts] == expected
    assert analyze_many(texts) == expected


def test_identifier_scan_matches_finditer() -> None:
    for text in random_texts(2000, seed=10) + french_texts(100, seed=11):
        text = unicodedata.normalize("NFKC", text)
        fast = [(m.span(), m.groups()) for m in analyzer._identifiers(text)]
        plain = [(m.span(), m.groups()) for m in analyzer._IDENTIFIER.finditer(text)]
        assert fast == plain, repr(text)


def test_caches_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analyzer, "_SHARED_CHUNKS_LIMIT", 10)
    monkeypatch.setattr(analyzer, "_MANY_CHUNKS_LIMIT", 10)
    texts = french_texts(50, seed=3)
    expected = [plain_analyze(t) for t in texts]
    assert [analyze(t) for t in texts] == expected
    assert len(analyzer.FRENCH.shared) <= 10 + 150  # one text's chunks past the limit
    assert analyze_many(texts) == expected
