"""The BM25 analyzer: French text to index terms, identifiers kept whole.

Lower-case, accents folded, elisions removed (l', d', qu'...), French stop words
dropped, a light plural strip; identifiers such as `HEL-4040`, `HEL 4040`,
`hel_4040` or `HEL4040` become the single term `hel-4040` so that a user who
types the code finds the document that defines it.

Changing anything here changes BM25 rankings: bump ANALYZER_VERSION, which the
baseline records, so the gate reports a configuration change instead of a
mysterious metric drop.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from functools import cache, lru_cache
from itertools import chain

__all__ = ["ANALYZER_VERSION", "analyze"]

ANALYZER_VERSION = "fr-1"

# Letters then digits: HEL-4040, hel_4040, HEL4040; "HEL 4040" only when the prefix is
# upper-case, so that ordinary phrases such as "page 12" stay two words.
# Written for speed, same matches as the plain alternation `\b(?P<a>[A-Za-z]{2,})[-_](?P<b>\d+)\b
# |\b(?P<c>[A-Z]{2,}) (?P<d>\d{2,})\b|\b(?P<e>[A-Za-z]{2,})(?P<f>\d{3,})\b`: the shared `\b` and
# two-letter look-ahead reject most positions once instead of three times, and possessive
# quantifiers skip backtracking that can never succeed (a shorter run of letters or digits
# is followed by another letter or digit, never by the separator, digit or boundary required).
_IDENTIFIER = re.compile(
    r"\b(?=[A-Za-z]{2})"
    r"(?:(?P<a>[A-Za-z]{2,}+)[-_](?P<b>\d++)\b"
    r"|(?P<c>[A-Z]{2,}+) (?P<d>\d{2,}+)\b"
    r"|(?P<e>[A-Za-z]{2,}+)(?P<f>\d{3,}+)\b)"
)
_ELISION = re.compile(r"\b(?:l|d|j|m|n|s|t|c|qu|jusqu|lorsqu|puisqu|quoiqu)['’]", re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9]+")

# Snowball's French list, folded; plus auxiliaries that carry no topic.
STOP_WORDS = frozenset(
    """
    a ai aie aient aies ait as au aura aurai auraient aurais aurait auras aurez auriez aurions
    aurons auront aux avaient avais avait avec avez aviez avions avons ayant ayez ayons c ce ceci
    cela celle celles celui cet cette ces d dans de des du elle elles en es est et etaient etais
    etait etant ete etes etiez etions etre eu eue eues eurent eus eusse eussent eusses eussiez
    eussions eut eutes eux fumes furent fus fusse fussent fusses fussiez fussions fut futes ici il
    ils j je l la le les leur leurs lui m ma mais me meme mes moi mon n ne nos notre nous on ont
    ou par pas pour qu que quel quelle quelles quels qui s sa sans se sera serai seraient serais
    serait seras serez seriez serions serons seront ses si son sont soyez soyons suis sur t ta te
    tes toi ton tu un une vos votre vous y
    ca cet comme donc dont lorsque puis quand tout tous toute toutes tres plus peut faut
    """.split()
)


@cache
def _combining_marks() -> re.Pattern[str]:
    """Every character that unicodedata.combining() reports (about 900), as one regex class.

    Built on first use (about 0.1 s) from this Python's own Unicode tables, so removing
    the matches is exactly the per-character `if not unicodedata.combining(ch)` filter,
    done in C.
    """
    ranges: list[list[int]] = []
    for code in range(sys.maxunicode + 1):
        if unicodedata.combining(chr(code)):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    members = "".join(f"{re.escape(chr(lo))}-{re.escape(chr(hi))}" for lo, hi in ranges)
    return re.compile(f"[{members}]+")


def _fold(text: str) -> str:
    """Lower-case, compatibility-decompose (NFKD) and drop combining marks: accents go."""
    # ASCII text has no decomposition and no combining mark: lower() is the whole fold.
    if text.isascii():
        return text.lower()
    return _combining_marks().sub("", unicodedata.normalize("NFKD", text.lower()))


@lru_cache(maxsize=65536)
def _term(word: str) -> str | None:
    if word in STOP_WORDS:
        return None
    # Light plural strip so "sauvegardes" meets "sauvegarde"; short words and -ss are left alone.
    if len(word) > 4 and word[-1] in "sx" and word[-2] != "s" and not word.isdigit():
        return word[:-1]
    return word


@lru_cache(maxsize=1 << 17)
def _chunk_terms(chunk: str) -> tuple[str, ...]:
    folded = _fold(_ELISION.sub(" ", chunk))
    return tuple(t for t in map(_term, _WORD.findall(folded)) if t)


def _words(segment: str) -> list[str]:
    # Speed (100,000 documents): analyse each whitespace-separated chunk once and cache it,
    # since natural text repeats its words. This is exactly the same as analysing the whole
    # segment: no elision, word or combining mark spans whitespace, and whitespace folds to
    # whitespace (a separator); tests/unit/test_analyzer_fast_path.py checks it.
    return list(chain.from_iterable(map(_chunk_terms, segment.split())))


def analyze(text: str) -> list[str]:
    """Turn text into BM25 terms: identifiers whole (`hel-4040`), French words folded and filtered."""
    text = unicodedata.normalize("NFKC", text)
    terms: list[str] = []
    start = 0
    for match in _IDENTIFIER.finditer(text):
        terms.extend(_words(text[start : match.start()]))
        prefix = match.group("a") or match.group("c") or match.group("e")
        number = match.group("b") or match.group("d") or match.group("f")
        terms.append(f"{_fold(prefix)}-{number}")
        start = match.end()
    terms.extend(_words(text[start:]))
    return terms
