"""The BM25 analyzers: text to index terms, identifiers kept whole, in the dataset's language.

Every language shares the identifier rule: `HEL-4040`, `HEL 4040`, `hel_4040` or `HEL4040`
become the single term `hel-4040`, so that a user who types the code finds the document
that defines it. Between identifiers, text is analysed chunk by chunk (split on whitespace)
by the language's own rule:
- French (`fr`, the default, ANALYZER_VERSION "fr-2", written here): lower-case, accents
  folded, elisions removed (l', d', qu'...), French stop words dropped, a light plural strip;
- the other languages: a Snowball stemmer and that language's stop words
  (retrieval.data.snowball).

Changing anything here changes BM25 rankings: bump the analyzer's version, which the
baseline records, so the gate reports a configuration change instead of a
mysterious metric drop.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterable, Iterator
from functools import lru_cache
from itertools import chain

from retrieval.data import snowball
from retrieval.data.snowball import ChunkTerms

__all__ = [
    "ANALYZER_VERSION",
    "DEFAULT_LANGUAGE",
    "DIGITS",
    "FRENCH",
    "STOP_WORDS",
    "Analyzer",
    "ChunkCache",
    "analyze",
    "analyze_many",
    "analyze_with",
    "analyzer_for",
    "analyzer_version",
    "forget_documents",
    "language_of",
    "term_spans",
]

# The French analyzer's version (the default language's): what the baseline records as `analyzer`.
ANALYZER_VERSION = "fr-2"
DEFAULT_LANGUAGE = "fr"

# Letters then digits: HEL-4040, hel_4040, HEL4040; "HEL 4040" only when the prefix is
# upper-case, so that ordinary phrases such as "page 12" stay two words.
_IDENTIFIER = re.compile(
    r"\b(?P<a>[A-Za-z]{2,})[-_](?P<b>\d+)\b"
    r"|\b(?P<c>[A-Z]{2,}) (?P<d>\d{2,})\b"
    r"|\b(?P<e>[A-Za-z]{2,})(?P<f>\d{3,})\b"
)
DIGITS = re.compile(r"\d+")  # a run of digits: an identifier's number, or a chunk to analyse whole
_ASCII_LETTERS = frozenset(string.ascii_letters)
# The apostrophe, straight or typographic (\u2019, written as an escape so that it shows).
_ELISION = re.compile(r"\b(?:l|d|j|m|n|s|t|c|qu|jusqu|lorsqu|puisqu|quoiqu)['\u2019]", re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9]+")
_LIGATURES = str.maketrans({"œ": "oe", "æ": "ae", "ß": "ss"})

# Snowball's French list, folded; plus auxiliaries that carry no topic.
_STOP_WORDS_TEXT = """
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
"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())


def _fold(text: str) -> str:
    # ASCII text has no decomposition and no combining mark: lower() is the whole fold.
    if text.isascii():
        return text.lower()
    # NFKD leaves ligatures whole and the word pattern keeps only a-z: "cœur" would lose "œ".
    decomposed = unicodedata.normalize("NFKD", text.lower().translate(_LIGATURES))
    return decomposed.translate(_COMBINING)


class _CombiningMarks(dict[int, int | None]):
    """str.translate table: a combining mark -> None (dropped), any other code point -> itself.
    Filled on first sight of each code point: one C-level translate per fold, no Python per
    character."""

    def __missing__(self, code: int) -> int | None:
        value = self[code] = None if unicodedata.combining(chr(code)) else code
        return value


_COMBINING = _CombiningMarks()


@lru_cache(maxsize=65536)
def _term(word: str) -> str | None:
    if word in STOP_WORDS:
        return None
    # Light plural strip so "sauvegardes" meets "sauvegarde"; short words and -ss are left alone.
    if len(word) > 4 and word[-1] in "sx" and word[-2] != "s" and not word.isdigit():
        return word[:-1]
    return word


def _chunk_terms(chunk: str) -> tuple[str, ...]:
    """The terms of one whitespace-free piece of text (no identifier in it)."""
    folded = _fold(_ELISION.sub(" ", chunk))
    return tuple(filter(None, map(_term, _WORD.findall(folded))))  # _term: a word, or None for a stop word


class ChunkCache(dict[str, tuple[str, ...]]):
    """Chunk -> terms by a language's rule (`terms_of`, French by default), computed on first
    lookup; lookups that hit stay in C (dict.__getitem__)."""

    def __init__(self, terms_of: ChunkTerms | None = None) -> None:
        super().__init__()
        self.terms_of = terms_of or _chunk_terms

    def __missing__(self, chunk: str) -> tuple[str, ...]:
        terms = self[chunk] = self.terms_of(chunk)
        return terms


# Chunk caches are emptied when full: bounded memory without LRU bookkeeping. analyze()
# shares one per analyzer for the life of the process; analyze_many() has its own, larger, per call.
_SHARED_CHUNKS_LIMIT = 1 << 16
_MANY_CHUNKS_LIMIT = 1 << 20
# Analysed documents by text (per analyzer), for the life of the process: a run indexes its
# corpus once per BM25 index (bm25's, and the hybrid searches of rewrite and enrich), and a
# recording runs the methods twice (the committed cassettes' run, then its own). Emptied past
# _DOCUMENTS_LIMIT terms (about 32 MB of references), like the chunk caches.
_DOCUMENTS_LIMIT = 1 << 22


def _identifiers(text: str) -> Iterator[re.Match[str]]:
    """The matches of `_IDENTIFIER.finditer(text)`, found several times faster.

    Trying the three-way pattern at every position of a document costs more than the rest
    of the analysis. Every identifier holds digits, and a match can only start at the
    ASCII-letter run just before its first digit run (or before the one separator before
    it). So we scan for digit runs (a fast C search) and try the same pattern at that one
    position per run, left to right from the end of the previous match, as finditer would.
    """
    end = 0
    for digits in DIGITS.finditer(text):
        first = digits.start()
        start = first - 1 if first and text[first - 1] in "-_ " else first
        while start > end and text[start - 1] in _ASCII_LETTERS:
            start -= 1
        match = _IDENTIFIER.match(text, start)
        if match:
            end = match.end()
            yield match


def analyze_with(text: str, chunks: ChunkCache) -> list[str]:
    """analyze(), with `chunks` as the cache of each whitespace-separated chunk's terms (a
    corpus's analysis keeps one per process: retrieval.data.corpus_terms)."""
    text = unicodedata.normalize("NFKC", text)
    lookup = chunks.__getitem__
    terms: list[str] = []
    start = 0
    # Between identifiers, text is analysed chunk by chunk (split on whitespace), each
    # distinct chunk once: natural text repeats its words, so most chunks are cache hits.
    # That gives the same terms as analysing the whole span at once, because no elision,
    # word or combining mark spans whitespace and whitespace folds to a separator
    # (tests/unit/test_analyzer_fast_path.py compares both on the demo corpus and random text).
    for match in _identifiers(text):
        terms.extend(chain.from_iterable(map(lookup, text[start : match.start()].split())))
        prefix = match.group("a") or match.group("c") or match.group("e")
        number = match.group("b") or match.group("d") or match.group("f")
        terms.append(f"{_fold(prefix)}-{number}")
        start = match.end()
    terms.extend(chain.from_iterable(map(lookup, text[start:].split())))
    return terms


class Analyzer:
    """One language's analysis (`analyze`, `analyze_many`) and what it keeps between calls.

    `version` is what the baseline records as `analyzer` ("fr-2", "en-snowball-1 (PyStemmer
    3.1)"); `chunk_terms` turns one whitespace-free piece of text without identifier into terms.
    """

    def __init__(self, language: str, version: str, chunk_terms: ChunkTerms) -> None:
        self.language, self.version, self.chunk_terms = language, version, chunk_terms
        self.shared = ChunkCache(chunk_terms)
        self.documents: dict[str, tuple[str, ...]] = {}
        self.documents_terms = 0

    def chunk_cache(self) -> ChunkCache:
        """A new, empty chunk cache of this language (a corpus's analysis keeps one per process)."""
        return ChunkCache(self.chunk_terms)

    def analyze(self, text: str) -> list[str]:
        """Turn text into BM25 terms: identifiers whole (`hel-4040`), words by the language's rule."""
        if len(self.shared) > _SHARED_CHUNKS_LIMIT:
            self.shared.clear()
        return analyze_with(text, self.shared)

    def forget_documents(self) -> None:
        """Drop the terms analyze_many keeps per text: the next call analyses every text again."""
        self.documents.clear()
        self.documents_terms = 0

    def analyze_many(self, texts: Iterable[str]) -> list[list[str]]:
        """analyze() over a corpus, faster: a larger chunk cache that lives as long as the call,
        and the terms of each text kept for the next call that analyses it."""
        chunks = self.chunk_cache()
        out: list[list[str]] = []
        for text in texts:
            terms = self.documents.get(text)
            if terms is None:
                if len(chunks) > _MANY_CHUNKS_LIMIT:
                    chunks.clear()
                terms = tuple(analyze_with(text, chunks))
                if self.documents_terms + len(terms) > _DOCUMENTS_LIMIT:
                    self.forget_documents()
                self.documents[text] = terms
                self.documents_terms += len(terms)
            out.append(list(terms))
        return out


FRENCH = Analyzer(DEFAULT_LANGUAGE, ANALYZER_VERSION, _chunk_terms)
_ANALYZERS: dict[str, Analyzer] = {DEFAULT_LANGUAGE: FRENCH}


def analyzer_for(language: str = DEFAULT_LANGUAGE) -> Analyzer:
    """The analyzer of a language code (`fr`, `en`, `de`...; retrieval.data.snowball.LANGUAGES),
    built once per process; ValueError naming the known codes for another."""
    found = _ANALYZERS.get(language)
    if found is None:  # PyStemmer is imported only here, for a Snowball language
        found = _ANALYZERS[language] = Analyzer(
            language, snowball.analyzer_version(language), snowball.chunk_terms(language)
        )
    return found


def analyzer_version(language: str = DEFAULT_LANGUAGE) -> str:
    """The name and version of a language's analyzer, as the baseline records it (`analyzer`)."""
    # The French one read here, not from FRENCH: the tests bump it to see the gate react.
    return ANALYZER_VERSION if language == DEFAULT_LANGUAGE else analyzer_for(language).version


def language_of(version: str) -> str:
    """The language code of an analyzer version a run or a baseline recorded ("fr-2" -> "fr",
    "en-snowball-1 (PyStemmer 3.1)" -> "en")."""
    return version.split("-", 1)[0] if version else DEFAULT_LANGUAGE


def analyze(text: str, language: str = DEFAULT_LANGUAGE) -> list[str]:
    """Turn text into BM25 terms: identifiers whole (`hel-4040`), words by the language's rule
    (French by default: folded, filtered)."""
    return analyzer_for(language).analyze(text)


def forget_documents() -> None:
    """Drop the terms analyze_many keeps per text, in every language: the next call analyses
    every text again (the benchmarks measure that first analysis)."""
    for each in _ANALYZERS.values():
        each.forget_documents()


def analyze_many(texts: Iterable[str], language: str = DEFAULT_LANGUAGE) -> list[list[str]]:
    """analyze() over a corpus, faster: a larger chunk cache that lives as long as the call,
    and the terms of each text kept for the next call that analyses it."""
    return analyzer_for(language).analyze_many(texts)


_CHUNK = re.compile(r"\S+")


def term_spans(text: str, language: str = DEFAULT_LANGUAGE) -> list[tuple[int, int, tuple[str, ...]]]:
    """The pieces of `text` that give BM25 terms, as (start, end, terms) in `text`'s own offsets:
    each identifier whole (`HEL 4040` -> `hel-4040`), each other whitespace-separated chunk with
    the terms the language's rule gives it (a stop word gives none, and is left out). What a page
    highlights: the words of a document that meet the question's terms, as BM25 meets them."""
    analyzer = analyzer_for(language)
    spans: list[tuple[int, int, tuple[str, ...]]] = []

    def chunks(start: int, end: int) -> None:
        for chunk in _CHUNK.finditer(text, start, end):
            terms = tuple(analyzer.analyze(chunk.group()))
            if terms:
                spans.append((chunk.start(), chunk.end(), terms))

    start = 0
    for match in _identifiers(text):
        chunks(start, match.start())
        spans.append((match.start(), match.end(), tuple(analyzer.analyze(match.group()))))
        start = match.end()
    chunks(start, len(text))
    return spans
