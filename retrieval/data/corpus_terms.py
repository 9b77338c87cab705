"""A whole corpus as term ids: what a BM25 index reads.

The analyzer (retrieval.data.analyzer) turns one text into terms; this module runs it over a
corpus batch by batch, each distinct chunk analysed once (a batch is cut into chunks and each
chunk keyed by its bytes with numpy, retrieval.data.chunk_keys: no Python object per word), and
numbers the terms in order of first appearance, so that a corpus of a million documents costs
4 bytes per term occurrence and no list of strings per document.
"""

from __future__ import annotations

import re
import unicodedata
from collections import deque
from collections.abc import Hashable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import chain, islice

import numpy as np

from retrieval.data import analyzer, chunk_keys
from retrieval.data.analyzer import DEFAULT_LANGUAGE, DIGITS, ChunkCache, analyze_with, analyzer_for

__all__ = [
    "AnalysedCorpus",
    "AnalysisState",
    "analyze_corpus",
    "forget_analyses",
    "remember_corpus",
    "remembered_corpus",
]

# Chunk caches are emptied past this many entries: bounded memory without LRU bookkeeping.
_CHUNKS_LIMIT = 1 << 20

# The code of a chunk: a chunk with one term is that term's id (>= 0); these negative codes
# stand for the rest.
_NO_TERM = -3  # a chunk with no term (stop words, punctuation)
_MULTI = -4  # _MULTI - i: a chunk with several terms, the i-th of _IdChunks.multi
# Between the chunks of one call of a language's chunk rule (_IdChunks.codes): a word no chunk
# without a digit gives, that every analyzer keeps as it is.
_MARK = "0"
# The only identifier that spans whitespace is "HEL 4040" (retrieval.data.analyzer): a document
# without this shape anywhere has the terms of its chunks; one with it is analysed whole.
_SPACED_IDENTIFIER = re.compile(r"[A-Z]{2,} \d{2,}")
# Documents analysed per step: bounds the list of chunks held at once.
_CORPUS_BATCH = 8192
# The first steps are _CORPUS_BATCH divided by these, smaller: the first batch's cut runs before
# any analysis can (nothing overlaps it), and the first batches' analysis is the slowest (most of
# their chunks are new).
_FIRST_BATCHES = (8, 4, 2)
# Batches cut ahead of the analysis: the cutting thread keeps working while the analysis of a
# slow batch (many new chunks) runs, and the analysis catches up on the later, faster ones.
_CUTS_AHEAD = 2


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
    """Chunk -> its code (a term id, _NO_TERM or a _MULTI code): by its key (chunk_keys) for the
    chunks that have one, as a string for the others; one int per chunk, no tuple."""

    def __init__(self, chunks: ChunkCache, numbering: _Numbering) -> None:
        super().__init__()
        self.chunks, self.numbering = chunks, numbering
        self.reset()

    def reset(self) -> None:
        """Empty the cache (a bound on memory: codes are resolved within the batch that asks)."""
        self.clear()
        self.multi: list[tuple[int, ...]] = []
        # The keyed chunks seen so far, by hash (sorted; one entry per hash): key, length, code.
        self.hashes = np.empty(0, dtype=np.uint64)
        self.key_words = np.empty((chunk_keys.KEY_WORDS, 0), dtype=np.uint64)
        self.codes = np.empty(0, dtype=np.int64)

    def __len__(self) -> int:
        return super().__len__() + len(self.hashes)

    def __missing__(self, chunk: str) -> int:
        code = self[chunk] = self.code(chunk)
        return code

    def codes_of(self, chunks: list[str]) -> list[int]:
        """The codes of `chunks`, as `code` gives them, the chunks without a digit analysed in one
        call of the language's chunk rule: over them all, joined by a marker term (_MARK) between
        spaces. The rule sees whitespace as a chunk's edge (retrieval.data.analyzer: no elision,
        word or combining mark spans it), so each chunk's terms come out in turn, then a marker;
        a chunk that gave the marker's term itself would show as a marker too many, and then each
        chunk is analysed alone."""
        plain = [i for i, chunk in enumerate(chunks) if not DIGITS.search(chunk)]
        out = [_NO_TERM] * len(chunks)
        terms = self.chunks.terms_of(f" {_MARK} ".join([chunks[i] for i in plain]) + f" {_MARK}") if plain else ()
        marks = [at for at, term in enumerate(terms) if term == _MARK]
        if len(marks) != len(plain):
            plain, marks = [], []  # analysed one by one below
        numbering, start = self.numbering, 0
        for i, end in zip(plain, marks, strict=True):
            if end == start + 1:
                out[i] = numbering[terms[start]]
            elif end > start:
                self.multi.append(tuple(map(numbering.__getitem__, terms[start:end])))
                out[i] = _MULTI - len(self.multi) + 1
            start = end + 1
        done = set(plain)
        for i, chunk in enumerate(chunks):
            if i not in done:
                out[i] = self.code(chunk)
        return out

    def code(self, chunk: str) -> int:
        """The code of a chunk (of a str.split() chunk, cut as chunk_keys cuts it or not)."""
        if not DIGITS.search(chunk):
            terms: Iterable[str] = self.chunks[_canonical(chunk)]
        else:
            # Identifiers inside one chunk are found as in the whole text: \b sees whitespace
            # and a string's edge alike, and no match spans whitespace but "HEL 4040", whose
            # documents _analyse_batch analyses whole.
            terms = analyze_with(chunk, self.chunks)
        ids = tuple(map(self.numbering.__getitem__, terms))
        if len(ids) == 1:
            return ids[0]
        if not ids:
            return _NO_TERM
        self.multi.append(ids)
        return _MULTI - len(self.multi) + 1

    def keyed_codes(self, batch: chunk_keys.BatchChunks) -> tuple[np.ndarray, np.ndarray]:
        """(codes, exact) of the chunks of `batch`: each chunk's code where `exact`; where not
        (a chunk longer than a key, or a hash shared by different keys: rare, but possible),
        no code.

        Equal chunks are grouped by sorting their hashes, each hash's top bits with the chunk's
        index in the low bits (one sort of plain integers); a group is exact when each of its
        chunks has the key of its first, and a group found among the chunks seen before when its
        key is the one stored. Only the new groups' first chunks are decoded and analysed."""
        count = len(batch.hashes)
        shift = np.uint64(max(1, (count - 1).bit_length()))
        packed = (batch.hashes >> shift << shift) | np.arange(count, dtype=np.uint64)
        packed.sort()
        order = (packed & ((np.uint64(1) << shift) - np.uint64(1))).astype(np.intp)
        packed >>= shift
        first = np.ones(count, dtype=bool)
        np.not_equal(packed[1:], packed[:-1], out=first[1:])
        group = np.empty(count, dtype=np.intp)
        group[order] = np.cumsum(first) - 1  # each chunk's group, in the batch's order
        heads = order[first]
        head_keys = batch.keys[:, heads]
        exact_group = head_keys[-1] >> np.uint64(56) <= chunk_keys.KEY_BYTES
        # The first and last words are compared for every chunk; the middle ones only for the
        # chunks longer than a word: the others' are zero, and the last word holds the length, so
        # a chunk and its group's head of another length already differ there.
        same = batch.keys[0] == head_keys[0][group]
        same &= batch.keys[-1] == head_keys[-1][group]
        longer = batch.longer
        for word, head_word in zip(batch.keys[1:-1], head_keys[1:-1], strict=True):
            same[longer] &= word[longer] == head_word[group[longer]]
        exact_group[group[~same]] = False
        unique = batch.hashes[heads]
        at = np.minimum(np.searchsorted(self.hashes, unique), max(len(self.hashes) - 1, 0))
        known = self.hashes[at] == unique if len(self.hashes) else np.zeros(len(unique), dtype=bool)
        found = np.flatnonzero(known)
        stored = (self.key_words[:, at[found]] == head_keys[:, found]).all(axis=0)
        exact_group[found[~stored]] = False
        codes = np.full(len(unique), _NO_TERM, dtype=np.int64)
        codes[found] = self.codes[at[found]]
        new = np.flatnonzero(~known & exact_group)
        if len(new):
            codes[new] = self.codes_of(batch.chunks(heads[new]))
            merged = np.concatenate([self.hashes, unique[new]])
            keep = np.argsort(merged, kind="stable")
            self.hashes = merged[keep]
            self.key_words = np.concatenate([self.key_words, head_keys[:, new]], axis=1)[:, keep]
            self.codes = np.concatenate([self.codes, codes[new]])[keep]
        return codes[group], exact_group[group]


_Cut = tuple[list[str], chunk_keys.BatchChunks]  # a batch's normalized texts and chunks (_cut_batch)


def _cut_batch(texts: list[str]) -> _Cut:
    """A batch's texts NFKC-normalized, and its chunks (chunk_keys.cut): the part of a batch's
    analysis that needs no state, numpy passes that mostly run without the GIL."""
    normalized = [unicodedata.normalize("NFKC", text) for text in texts]
    return normalized, chunk_keys.cut(normalized)


def _read_and_cut(stream: Iterator[str], size: int) -> tuple[list[str], _Cut | None]:
    """The next `size` texts of `stream` and their cut (_cut_batch); None for no text left."""
    texts = list(islice(stream, size))
    return texts, _cut_batch(texts) if texts else None


def _analyse_batch(
    texts: list[str], chunks: ChunkCache, id_chunks: _IdChunks, cut: _Cut | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(ids, lengths) of a batch of documents, with provisional ids; `cut` is _cut_batch(texts)
    when already done.

    The batch is cut into chunks with numpy (retrieval.data.chunk_keys: no Python object per
    chunk); each distinct chunk's code comes from the chunks seen before or, for a new one, from
    its analysis; the codes are then expanded to term ids with numpy. A document without the
    shape of an identifier written with a space ("HEL 4040", _SPACED_IDENTIFIER) has its
    identifiers inside chunks, so its terms are its chunks' terms, as in analyze_with; any other
    is analysed by analyze_with itself, and its terms replace its span.
    """
    normalized, batch = cut or _cut_batch(texts)
    codes, exact = id_chunks.keyed_codes(batch)
    loose = np.flatnonzero(~exact)
    if len(loose):
        codes[loose] = [id_chunks[chunk] for chunk in batch.chunks(loose)]
    counts = (codes >= 0).astype(np.int64)
    multi = np.flatnonzero(codes <= _MULTI)
    if len(multi):
        sizes_of = np.fromiter(map(len, id_chunks.multi), dtype=np.int64, count=len(id_chunks.multi))
        entries = _MULTI - codes[multi]
        sizes = sizes_of[entries]
        counts[multi] = sizes
    ends = np.cumsum(counts)
    # The terms of document d are ids[bounds[d]:bounds[d + 1]] (a document may have no chunk).
    bounds = np.concatenate(([0], ends))[np.searchsorted(batch.docs, np.arange(len(texts) + 1))]
    lengths = np.diff(bounds)
    ids = np.repeat(codes, counts)
    if len(multi):
        table = np.fromiter(chain.from_iterable(id_chunks.multi), dtype=np.int64, count=int(sizes_of.sum()))
        within = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        targets = np.repeat((ends - counts)[multi], sizes) + within
        ids[targets] = table[np.repeat((np.cumsum(sizes_of) - sizes_of)[entries], sizes) + within]
    ids = ids.astype(np.int32)
    spaced = [doc for doc in batch.spaced if _SPACED_IDENTIFIER.search(normalized[doc])]
    if not spaced:
        return ids, lengths
    segments: list[np.ndarray] = []
    previous = 0
    for doc in spaced:
        segments.append(ids[bounds[previous] : bounds[doc]])
        terms = analyze_with(texts[doc], chunks)
        segments.append(np.fromiter(map(id_chunks.numbering.__getitem__, terms), dtype=np.int32, count=len(terms)))
        lengths[doc] = len(terms)
        previous = doc + 1
    segments.append(ids[bounds[previous] :] if previous < len(texts) else ids[:0])
    return np.concatenate(segments), lengths


# Whole corpora analysed by analyze_corpus, kept for the next call over the same texts (a
# recording runs the methods twice), within _CORPORA_LIMIT term ids (4 bytes each).
_CORPORA: dict[Hashable, AnalysedCorpus] = {}
_CORPORA_LIMIT = 1 << 25
_CORPORA_TEXTS = 100_000
# Up to this many texts, analyze_many's per-text path (same terms) is faster than the batches.
_SMALL_CORPUS = 256
_UNSEEN = np.iinfo(np.int64).max


class AnalysisState:
    """What analyze_corpus learns about chunks and terms, kept across the calls one process makes
    for the parts of one corpus (retrieval.data.corpus_parts): a chunk is analysed once per
    process, not once per part. Term ids stay provisional: each call renumbers its own. The
    state is of one language: its chunks' terms are that language's."""

    def __init__(self, language: str = DEFAULT_LANGUAGE) -> None:
        self.language = language
        self.numbering = _Numbering()
        self.chunks = analyzer_for(language).chunk_cache()
        self.id_chunks = _IdChunks(self.chunks, self.numbering)


def analyze_corpus(
    texts: Iterable[str],
    state: AnalysisState | None = None,
    language: str = DEFAULT_LANGUAGE,
    *,
    remember: bool = True,
) -> AnalysedCorpus:
    """analyze(text, language) over every text, as term ids (see AnalysedCorpus): what a BM25
    index reads. With `state`, the state's language is used.

    `vocabulary[ids]` split by `lengths` equals `[analyze(t) for t in texts]` (tested on the
    demo set, generated French and random strings); it costs a fraction of analyze_many at
    scale and holds 4 bytes per term instead of a list of string references per document.
    Texts are read batch by batch: a corpus of more than _CORPORA_TEXTS texts is never held
    whole (a generator of a million documents' contents costs one batch of strings). With
    `state`, the texts are one part of a corpus: the state's caches are used and kept, and the
    result is not remembered (the whole is, by `remember_corpus`). With `remember=False`, the
    result is neither looked up nor kept by its texts (corpus_parts keeps a loaded corpus's by its
    fingerprint): no text is read ahead of its batch, and each batch is read in the cutting thread.
    """
    if state is not None:
        language = state.language
    iterator = iter(texts)
    kept = remember and state is None
    # Read ahead only what decides the path: the texts of the key (every text of a corpus kept by
    # them: hashed, and held whole, while the cutting thread waits), else the small corpus's.
    head = list(islice(iterator, (_CORPORA_TEXTS if kept else _SMALL_CORPUS) + 1))
    key = (language, tuple(head)) if kept and len(head) <= _CORPORA_TEXTS else None
    if key is not None and key in _CORPORA:
        return _CORPORA[key]
    if len(head) <= _SMALL_CORPUS and state is None:
        # The batch pipeline's fixed cost (a few dozen numpy calls) outweighs a small corpus.
        return AnalysedCorpus.from_terms(analyzer_for(language).analyze_many(head))
    state = state or AnalysisState(language)
    numbering, chunks, id_chunks = state.numbering, state.chunks, state.id_chunks
    batches: list[np.ndarray] = []
    all_lengths: list[np.ndarray] = []
    # First position of each provisional id, to renumber in order of first appearance.
    first = np.empty(0, dtype=np.int64)
    position = 0
    stream = chain(head, iterator)
    del head
    # The next batches are cut in a thread while this one is analysed: the cut is numpy passes
    # over the batch's bytes that release the GIL, the analysis Python that holds it, so a single
    # process keeps two cores busy for most of the run (no fork, no second analysis of the
    # chunks, no merge: what workers in processes cost, corpus_parts).
    sizes = _batch_sizes()
    # The texts are read in that thread too, one batch a task (a loaded corpus's contents made there).
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="corpus-cut") as cutter:
        pending: deque[Future[tuple[list[str], _Cut | None]]] = deque()

        def cut_next() -> None:
            pending.append(cutter.submit(_read_and_cut, stream, next(sizes)))

        for _ in range(_CUTS_AHEAD):
            cut_next()
        while pending:
            current, cut = pending.popleft().result()
            if cut is None:
                break  # the texts are used up: the reads submitted after this one find none either
            cut_next()
            if len(chunks) > _CHUNKS_LIMIT:
                chunks.clear()
            if len(id_chunks) > _CHUNKS_LIMIT:
                id_chunks.reset()
            ids, lengths = _analyse_batch(current, chunks, id_chunks, cut)
            del current, cut
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
    if key is not None:
        remember_corpus(key, corpus)
    return corpus


def _batch_sizes() -> Iterator[int]:
    # Read when the analysis starts: the tests set _CORPUS_BATCH small to run many batches.
    for divisor in _FIRST_BATCHES:
        yield max(1, _CORPUS_BATCH // divisor)
    while True:
        yield _CORPUS_BATCH


def remembered_corpus(key: Hashable) -> AnalysedCorpus | None:
    """The AnalysedCorpus kept under `key` (analyze_corpus keys a corpus by its language and
    texts), if any."""
    return _CORPORA.get(key)


def remember_corpus(key: Hashable, corpus: AnalysedCorpus) -> None:
    """Keep `corpus` under `key` for the next analysis of the same corpus (a recording runs the
    methods twice), within _CORPORA_LIMIT term ids in all."""
    if len(corpus.ids) > _CORPORA_LIMIT:
        return
    if sum(len(c.ids) for c in _CORPORA.values()) + len(corpus.ids) > _CORPORA_LIMIT:
        _CORPORA.clear()
    _CORPORA[key] = corpus


def forget_analyses() -> None:
    """Forget every analysis this process keeps (whole corpora here, texts in the analyzer): the
    next call analyses again (the benchmarks measure that first analysis)."""
    _CORPORA.clear()
    analyzer.forget_documents()
