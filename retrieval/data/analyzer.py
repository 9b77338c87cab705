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
import string
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain, islice

import numpy as np

__all__ = ["ANALYZER_VERSION", "AnalysedCorpus", "analyze", "analyze_corpus", "analyze_many"]

ANALYZER_VERSION = "fr-2"

# Letters then digits: HEL-4040, hel_4040, HEL4040; "HEL 4040" only when the prefix is
# upper-case, so that ordinary phrases such as "page 12" stay two words.
_IDENTIFIER = re.compile(
    r"\b(?P<a>[A-Za-z]{2,})[-_](?P<b>\d+)\b"
    r"|\b(?P<c>[A-Z]{2,}) (?P<d>\d{2,})\b"
    r"|\b(?P<e>[A-Za-z]{2,})(?P<f>\d{3,})\b"
)
_DIGITS = re.compile(r"\d+")
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
    return tuple(t for t in map(_term, _WORD.findall(folded)) if t)


class _ChunkCache(dict[str, tuple[str, ...]]):
    """Chunk -> terms, computed on first lookup; lookups that hit stay in C (dict.__getitem__)."""

    def __missing__(self, chunk: str) -> tuple[str, ...]:
        terms = self[chunk] = _chunk_terms(chunk)
        return terms


# Chunk caches are emptied when full: bounded memory without LRU bookkeeping. analyze()
# shares one for the life of the process; analyze_many() has its own, larger, per call.
_SHARED_CHUNKS = _ChunkCache()
_SHARED_CHUNKS_LIMIT = 1 << 16
_MANY_CHUNKS_LIMIT = 1 << 20
# Analysed documents by text, for the life of the process: a run indexes its corpus once per
# BM25 index (bm25's, and the hybrid searches of rewrite and enrich), and a recording runs the
# methods twice (the committed cassettes' run, then its own). Emptied past _DOCUMENTS_LIMIT
# terms (about 32 MB of references), like the chunk caches.
_DOCUMENTS: dict[str, tuple[str, ...]] = {}
_DOCUMENTS_LIMIT = 1 << 22
_documents_terms = 0


def _identifiers(text: str) -> Iterator[re.Match[str]]:
    """The matches of `_IDENTIFIER.finditer(text)`, found several times faster.

    Trying the three-way pattern at every position of a document costs more than the rest
    of the analysis. Every identifier holds digits, and a match can only start at the
    ASCII-letter run just before its first digit run (or before the one separator before
    it). So we scan for digit runs (a fast C search) and try the same pattern at that one
    position per run, left to right from the end of the previous match, as finditer would.
    """
    end = 0
    for digits in _DIGITS.finditer(text):
        first = digits.start()
        start = first - 1 if first and text[first - 1] in "-_ " else first
        while start > end and text[start - 1] in _ASCII_LETTERS:
            start -= 1
        match = _IDENTIFIER.match(text, start)
        if match:
            end = match.end()
            yield match


def _analyze(text: str, chunks: _ChunkCache) -> list[str]:
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


def analyze(text: str) -> list[str]:
    """Turn text into BM25 terms: identifiers whole (`hel-4040`), French words folded, filtered."""
    if len(_SHARED_CHUNKS) > _SHARED_CHUNKS_LIMIT:
        _SHARED_CHUNKS.clear()
    return _analyze(text, _SHARED_CHUNKS)


def forget_documents() -> None:
    """Drop the terms analyze_many keeps per text: the next call analyses every text again
    (the benchmarks measure that first analysis)."""
    global _documents_terms
    _DOCUMENTS.clear()
    _CORPORA.clear()
    _documents_terms = 0


def analyze_many(texts: Iterable[str]) -> list[list[str]]:
    """analyze() over a corpus, faster: a larger chunk cache that lives as long as the call,
    and the terms of each text kept for the next call that analyses it."""
    global _documents_terms
    chunks = _ChunkCache()
    out: list[list[str]] = []
    for text in texts:
        terms = _DOCUMENTS.get(text)
        if terms is None:
            if len(chunks) > _MANY_CHUNKS_LIMIT:
                chunks.clear()
            terms = tuple(_analyze(text, chunks))
            if _documents_terms + len(terms) > _DOCUMENTS_LIMIT:
                forget_documents()
            _DOCUMENTS[text] = terms
            _documents_terms += len(terms)
        out.append(list(terms))
    return out


# --- a whole corpus as term ids (what the BM25 index reads) ---------------------------------

# Codes of chunks in the stream that a batch of documents becomes: a chunk with one term is
# that term's id (>= 0); these negative codes stand for the rest.
_END = -1  # the end of a document
_HAS_DIGIT = -2  # a chunk starting with a digit: its document is analysed whole (see _IdChunks)
_NO_TERM = -3  # a chunk with no term (stop words, punctuation)
_MULTI = -4  # _MULTI - i: a chunk with several terms, the i-th of _IdChunks.multi
# Never a chunk of str.split(): stands for the end of a document in the stream of chunks.
_SEPARATOR = " "
# Documents analysed per step: bounds the list of chunks held at once.
_CORPUS_BATCH = 8192


@dataclass(frozen=True)
class AnalysedCorpus:
    """A corpus's terms as ids: `vocabulary[ids[i]]` is the i-th term of the corpus, document
    after document, `lengths[d]` terms for document d. Terms are numbered in order of first
    appearance, as `dict.fromkeys` over every document's `analyze()` terms would number them.
    """

    vocabulary: tuple[str, ...]
    ids: np.ndarray  # int32, one per term occurrence
    lengths: np.ndarray  # int64, one per document

    @classmethod
    def from_terms(cls, documents: Iterable[Iterable[str]]) -> AnalysedCorpus:
        """The same form for documents already analysed (lists of terms)."""
        docs = [list(d) for d in documents]
        numbering = {term: i for i, term in enumerate(dict.fromkeys(chain.from_iterable(docs)))}
        lengths = np.fromiter(map(len, docs), dtype=np.int64, count=len(docs))
        ids = np.fromiter(
            map(numbering.__getitem__, chain.from_iterable(docs)), dtype=np.int32, count=int(lengths.sum())
        )
        return cls(tuple(numbering), ids, lengths)

    def __len__(self) -> int:
        return len(self.lengths)

    def documents(self) -> list[list[str]]:
        """Each document's terms, as analyze() gives them."""
        terms = np.array(self.vocabulary, dtype=object)[self.ids] if len(self.ids) else np.empty(0, dtype=object)
        bounds = np.cumsum(self.lengths)[:-1]
        return [part.tolist() for part in np.split(terms, bounds)] if len(self.lengths) else []


_TRAILING = '.,;:!?)"»'


def _canonical(chunk: str) -> str:
    """A chunk with the same terms, shared by its variants ("Sauvegarde," and "sauvegarde"),
    so that most new chunks of a large corpus are analysed by a look-up.

    Trailing punctuation is never part of a term and no pattern looks past it. lower() is
    what _fold does first; it is applied only where it keeps the length, as "İ" lowers to
    "i" and a combining dot, which would move a word boundary the elision pattern sees.
    """
    stripped = chunk.rstrip(_TRAILING)
    lowered = stripped.lower()
    return lowered if len(lowered) == len(stripped) else stripped


class _Numbering(dict[str, int]):
    """Term -> id, numbered on first lookup (provisional: renumbered at the end)."""

    def __missing__(self, term: str) -> int:
        number = self[term] = len(self)
        return number


class _IdChunks(dict[str, int]):
    """Chunk -> its code in the stream (see _END and the codes after it): one int per chunk,
    so the stream is one `np.fromiter` over the look-ups, with no tuple per chunk."""

    def __init__(self, chunks: _ChunkCache, numbering: _Numbering) -> None:
        super().__init__({_SEPARATOR: _END})
        self.chunks, self.numbering = chunks, numbering
        self.multi: list[tuple[int, ...]] = []

    def reset(self) -> None:
        """Empty the cache (between batches: codes are resolved within their batch)."""
        self.clear()
        self[_SEPARATOR] = _END
        self.multi = []

    def __missing__(self, chunk: str) -> int:
        if not _DIGITS.search(chunk):
            terms: Iterable[str] = self.chunks[_canonical(chunk)]
        elif _DIGITS.match(chunk):
            # Only a chunk that starts with digits can end an identifier begun in the chunk
            # before ("HEL 4040"): its document is analysed whole.
            self[chunk] = _HAS_DIGIT
            return _HAS_DIGIT
        else:
            # Identifiers inside one chunk are found as in the whole text: \b sees whitespace
            # and a string's edge alike, and no match spans whitespace but "HEL 4040".
            terms = _analyze(chunk, self.chunks)
        ids = tuple(map(self.numbering.__getitem__, terms))
        if len(ids) == 1:
            code = ids[0]
        elif not ids:
            code = _NO_TERM
        else:
            code = _MULTI - len(self.multi)
            self.multi.append(ids)
        self[chunk] = code
        return code


def _analyse_batch(texts: list[str], chunks: _ChunkCache, id_chunks: _IdChunks) -> tuple[np.ndarray, np.ndarray]:
    """(ids, lengths) of a batch of documents, with provisional ids.

    Every chunk of every document goes through one C-level pipeline (split, cached look-up of
    its code, fromiter): no Python code runs per word once the chunk cache is warm; the codes
    are then expanded to term ids with numpy. A document whose chunks all start with a
    non-digit has its identifiers inside chunks, so its terms are its chunks' terms, as in
    _analyze; any other is analysed by _analyze itself, and its terms replace its span.
    """
    pieces: list[list[str]] = []
    for text in texts:
        parts = unicodedata.normalize("NFKC", text).split()
        parts.append(_SEPARATOR)
        pieces.append(parts)
    codes = np.fromiter(map(id_chunks.__getitem__, chain.from_iterable(pieces)), dtype=np.int64)
    del pieces
    ends = np.flatnonzero(codes == _END)
    counts = (codes >= 0).astype(np.int64)
    multi = np.flatnonzero(codes <= _MULTI)
    if len(multi):
        sizes_of = np.fromiter(map(len, id_chunks.multi), dtype=np.int64, count=len(id_chunks.multi))
        entries = _MULTI - codes[multi]
        sizes = sizes_of[entries]
        counts[multi] = sizes
    lengths = np.add.reduceat(counts, np.concatenate(([0], ends[:-1] + 1)))
    ids = np.repeat(codes, counts)
    if len(multi):
        table = np.fromiter(chain.from_iterable(id_chunks.multi), dtype=np.int64, count=int(sizes_of.sum()))
        within = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        targets = np.repeat((np.cumsum(counts) - counts)[multi], sizes) + within
        ids[targets] = table[np.repeat((np.cumsum(sizes_of) - sizes_of)[entries], sizes) + within]
    ids = ids.astype(np.int32)
    flagged = np.unique(np.searchsorted(ends, np.flatnonzero(codes == _HAS_DIGIT)))
    if not len(flagged):
        return ids, lengths
    starts = np.cumsum(lengths) - lengths
    segments: list[np.ndarray] = []
    previous = 0
    for doc in flagged.tolist():
        segments.append(ids[starts[previous] : starts[doc]])
        terms = _analyze(texts[doc], chunks)
        segments.append(np.fromiter(map(id_chunks.numbering.__getitem__, terms), dtype=np.int32, count=len(terms)))
        lengths[doc] = len(terms)
        previous = doc + 1
    segments.append(ids[starts[previous] :] if previous < len(texts) else ids[:0])
    return np.concatenate(segments), lengths


# Whole corpora analysed by analyze_corpus, kept for the next call over the same texts (a
# recording runs the methods twice), within _CORPORA_LIMIT term ids (4 bytes each).
_CORPORA: dict[tuple[str, ...], AnalysedCorpus] = {}
_CORPORA_LIMIT = 1 << 25
_CORPORA_TEXTS = 100_000
# Up to this many texts, analyze_many's per-text path (same terms) is faster than the batches.
_SMALL_CORPUS = 256
_UNSEEN = np.iinfo(np.int64).max


def analyze_corpus(texts: Iterable[str]) -> AnalysedCorpus:
    """analyze() over every text, as term ids (see AnalysedCorpus): what a BM25 index reads.

    `vocabulary[ids]` split by `lengths` equals `[analyze(t) for t in texts]` (tested on the
    demo set, generated French and random strings); it costs a fraction of analyze_many at
    scale and holds 4 bytes per term instead of a list of string references per document.
    Texts are read batch by batch: a corpus of more than _CORPORA_TEXTS texts is never held
    whole (a generator of a million documents' contents costs one batch of strings).
    """
    iterator = iter(texts)
    head = list(islice(iterator, _CORPORA_TEXTS + 1))
    key = tuple(head) if len(head) <= _CORPORA_TEXTS else None
    if key is not None and key in _CORPORA:
        return _CORPORA[key]
    if len(head) <= _SMALL_CORPUS:
        # The batch pipeline's fixed cost (a few dozen numpy calls) outweighs a small corpus.
        return AnalysedCorpus.from_terms(analyze_many(head))
    numbering = _Numbering()
    chunks = _ChunkCache()
    id_chunks = _IdChunks(chunks, numbering)
    batches: list[np.ndarray] = []
    all_lengths: list[np.ndarray] = []
    # First position of each provisional id, to renumber in order of first appearance.
    first = np.empty(0, dtype=np.int64)
    position = 0
    stream = chain(head, iterator)
    del head
    while batch := list(islice(stream, _CORPUS_BATCH)):
        if len(chunks) > _MANY_CHUNKS_LIMIT:
            chunks.clear()
        if len(id_chunks) > _MANY_CHUNKS_LIMIT:
            id_chunks.reset()
        ids, lengths = _analyse_batch(batch, chunks, id_chunks)
        if len(numbering) > len(first):
            first = np.concatenate([first, np.full(len(numbering) - len(first), _UNSEEN, dtype=np.int64)])
        np.minimum.at(first, ids, np.arange(position, position + len(ids), dtype=np.int64))
        position += len(ids)
        batches.append(ids)
        all_lengths.append(lengths)
    # Renumbered in order of first appearance; ids that no kept term uses are dropped.
    used = np.flatnonzero(first != _UNSEEN)
    order = used[np.argsort(first[used], kind="stable")]
    renumber = np.full(len(first), -1, dtype=np.int32)
    renumber[order] = np.arange(len(order), dtype=np.int32)
    terms = list(numbering)
    vocabulary = tuple(terms[i] for i in order.tolist())
    ids = np.empty(position, dtype=np.int32)
    at = 0
    batches.reverse()
    while batches:
        part = batches.pop()  # each batch freed once copied: one copy of the ids at a time
        np.take(renumber, part, out=ids[at : at + len(part)])
        at += len(part)
        del part
    lengths = np.concatenate(all_lengths) if all_lengths else np.empty(0, dtype=np.int64)
    # Read-only: a corpus may be kept and shared, and scipy sorts or compacts arrays in place.
    ids.setflags(write=False)
    lengths.setflags(write=False)
    corpus = AnalysedCorpus(vocabulary, ids, lengths)
    if key is not None and len(ids) <= _CORPORA_LIMIT:
        if sum(len(c.ids) for c in _CORPORA.values()) + len(ids) > _CORPORA_LIMIT:
            _CORPORA.clear()
        _CORPORA[key] = corpus
    return corpus
