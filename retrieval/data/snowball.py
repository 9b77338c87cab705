"""The analyzers of every language but French: a Snowball stemmer (PyStemmer) and the language's
Snowball stop words (retrieval/data/stopwords/, with their source), identifiers kept whole as in
every language (retrieval.data.analyzer).

A chunk of text (no whitespace, no identifier) is lower-cased, cut into words (letters and
digits, with the combining marks inside them in the scripts whose vowels are marks; an apostrophe
or a hyphen separates words), and each word is dropped when
it is a stop word or a single letter (the debris of elisions and possessives: l', d', 's), else
stemmed; in alphabetic scripts, accents are then folded, so that a question typed without them
("cancion", "Hauser") meets the document ("canción", "Häuser"). This is the analysis of
Lucene's and bm25s's Snowball pipelines, with the identifier rule in front.

Changing anything here, a stop list included, changes BM25 rankings: bump VERSION, which the
baseline records in the analyzer's name.
"""

from __future__ import annotations

import array
import re
import sys
import unicodedata
from collections.abc import Callable
from functools import cache, lru_cache
from importlib import resources

__all__ = ["LANGUAGES", "VERSION", "analyzer_version", "chunk_terms", "stop_words"]

VERSION = 1

# What retrieval.data.analyzer's chunk caches call: one whitespace-free chunk -> its terms.
ChunkTerms = Callable[[str], tuple[str, ...]]

# ISO 639-1 code -> PyStemmer's Snowball algorithm. French is retrieval.data.analyzer's own.
LANGUAGES = {
    "ar": "arabic",
    "ca": "catalan",
    "cs": "czech",
    "da": "danish",
    "de": "german",
    "el": "greek",
    "en": "english",
    "eo": "esperanto",
    "es": "spanish",
    "et": "estonian",
    "eu": "basque",
    "fa": "persian",
    "fi": "finnish",
    "ga": "irish",
    "hi": "hindi",
    "hu": "hungarian",
    "hy": "armenian",
    "id": "indonesian",
    "it": "italian",
    "lt": "lithuanian",
    "ne": "nepali",
    "nl": "dutch",
    "no": "norwegian",
    "pl": "polish",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sr": "serbian",
    "st": "sesotho",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
    "yi": "yiddish",
}
# Scripts whose vowels are combining marks: folding them away would merge different words.
_UNFOLDED = frozenset({"ar", "fa", "hi", "ne", "ta", "yi"})


def _known() -> str:
    return ", ".join(["fr (the default)", *sorted(LANGUAGES)])


def _algorithm(language: str) -> str:
    try:
        return LANGUAGES[language]
    except KeyError:
        raise ValueError(f"unknown language {language!r}: use one of {_known()}") from None


@cache
def stop_words(language: str) -> frozenset[str]:
    """The language's Snowball stop words (empty for a language Snowball gives no list for)."""
    name = f"{_algorithm(language)}.stop"
    folder = resources.files("retrieval.data").joinpath("stopwords")
    entry = folder.joinpath(name)
    if not entry.is_file():
        return frozenset()
    return frozenset(word.lower() for word in entry.read_text("utf-8").split())


def stop_list_bytes(language: str) -> bytes:
    """The stop list file as shipped (b"" without one): what the analysis cache keys on."""
    entry = resources.files("retrieval.data").joinpath("stopwords", f"{_algorithm(language)}.stop")
    return entry.read_bytes() if entry.is_file() else b""


def analyzer_version(language: str) -> str:
    """The analyzer's name and version, as the baseline records it: the language, this module's
    VERSION and the PyStemmer release (its Snowball algorithms), e.g. "en-snowball-1 (PyStemmer 3.1)"."""
    _algorithm(language)
    import Stemmer

    release = ".".join(str(Stemmer.version()).split(".")[:2])
    return f"{language}-snowball-{VERSION} (PyStemmer {release})"


_WORD = re.compile(r"[^\W_]+")


@lru_cache(maxsize=1)
def _word_with_marks() -> re.Pattern[str]:
    # \w leaves out combining marks (a Devanagari vowel sign): in those scripts a word is letters
    # and digits with the marks inside it. Built once, for those languages only.
    return re.compile(f"(?:[^\\W_]|[{''.join(_ranges(_marks()))}])+")


def _marks() -> list[int]:
    """Every combining mark (Unicode category M*) of this Python's Unicode database, in order.

    Marks are printable (str.isprintable: only the categories Other and Separator are not), and
    repr() escapes exactly the characters that are not printable, at C speed: the categories of the
    printable characters alone are read, 145,000 code points rather than 1.1 million (a third of a
    second to read them all, in every process that analyses one of these languages). ASCII has no
    mark, and a surrogate (category Cs) is not printable."""
    codes = array.array("I", range(0x80, 0xD800))
    codes.extend(range(0xE000, sys.maxunicode + 1))
    every = codes.tobytes().decode("utf-32-le" if sys.byteorder == "little" else "utf-32-be")
    printable = re.sub(r"[\x00-\x7f]+", "", repr(every))
    return [
        ord(c)
        for c, category in zip(printable, map(unicodedata.category, printable), strict=True)
        if category[0] == "M"
    ]


def _ranges(codes: list[int]) -> list[str]:
    """Sorted code points as a character class's ranges ("a-c", one per run of consecutive ones)."""
    ranges: list[str] = []
    for at, code in enumerate(codes):
        if at == 0 or code != codes[at - 1] + 1:
            start = code
        if at == len(codes) - 1 or codes[at + 1] != code + 1:
            ranges.append(f"{re.escape(chr(start))}-{re.escape(chr(code))}")
    return ranges


class _Combining(dict[int, int | None]):
    """str.translate table dropping combining marks (filled on first sight of each code point)."""

    def __missing__(self, code: int) -> int | None:
        value = self[code] = None if unicodedata.combining(chr(code)) else code
        return value


def chunk_terms(language: str) -> ChunkTerms:
    """The language's rule for one whitespace-free chunk without identifier (module docstring)."""
    import Stemmer

    stemmer = Stemmer.Stemmer(_algorithm(language))
    stop = stop_words(language)
    fold = language not in _UNFOLDED
    words = (_WORD if fold else _word_with_marks()).findall
    combining = _Combining()

    @lru_cache(maxsize=1 << 16)
    def term(word: str) -> str | None:
        if word in stop or (len(word) == 1 and not word.isdigit()):
            return None
        stem: str = stemmer.stemWord(word)
        if fold and not stem.isascii():
            stem = unicodedata.normalize("NFKD", stem).translate(combining)
            stem = unicodedata.normalize("NFC", stem)
        return stem

    def terms(chunk: str) -> tuple[str, ...]:
        return tuple(filter(None, map(term, words(chunk.lower()))))

    return terms
