"""A batch of texts cut into chunks with numpy over their UTF-8 bytes, each chunk with an exact key.

analyze_corpus (retrieval.data.corpus_terms) analyses each distinct chunk of a corpus once and
looks every other occurrence up. Cutting with str.split and looking up with a dict costs a
Python string and a hash per word: most of a corpus's analysis. Here a batch of documents is one
bytes object; a table look-up per byte finds where chunks start and end, each chunk of up to
KEY_BYTES bytes is read as three 64-bit words (its key: its bytes, zero-padded, and its length),
and sorting the keys' hashes groups equal chunks. Only a chunk never seen before is decoded into
a string and analysed, in Python.

Chunks are the whitespace-separated pieces of str.split(), cut further where that leaves every
analyzer's terms unchanged, so that "Maison," "«maison" and "maison" are one chunk:
- ASCII letters are lower-cased: every analyzer lower-cases, and the identifier rule, the one
  rule that reads case, only does so across a space ("HEL 4040"), which no chunk holds;
- the inert characters (SEPARATORS: ASCII punctuation but the apostrophe, the hyphen and the
  underscore; guillemets, curly double quotes, en and em dashes) separate chunks like whitespace.
  They are no word character (so `\\b` sees them as it sees a chunk's edge), no combining mark,
  fold to themselves, and no pattern of an analyzer holds them (identifiers: letters, digits,
  `-`, `_`; elisions: apostrophes), so no term spans one and none sees past one.
tests/unit/test_chunk_keys.py checks both on random text against the plain analyzer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

__all__ = ["KEY_BYTES", "KEY_WORDS", "SEPARATORS", "BatchChunks", "cut"]

# Chunks up to this long are keyed by their bytes (three 64-bit words, the last byte the length);
# longer ones (one in 100,000 in French prose) are decoded and looked up as strings.
KEY_BYTES = 23
KEY_WORDS = 3

# Characters that separate chunks as whitespace does, besides whitespace (module docstring).
SEPARATORS = '!"#$%&()*+,./:;<=>?@[\\]^`{|}~«»“”\u2013\u2014'  # en and em dashes escaped
# str.split()'s whitespace beyond ASCII, as NFKC leaves it (NFKC turns the others into a space).
_WIDE_SPACES = "\x85\u1680\u2028\u2029"


def _byte_table(characters: str) -> np.ndarray:
    table = np.zeros(256, dtype=bool)
    table[[ord(c) for c in characters]] = True
    return table


_ASCII_SPACES = "".join(chr(c) for c in range(128) if chr(c).isspace())
_SEPARATING_BYTES = _byte_table(_ASCII_SPACES + "".join(c for c in SEPARATORS if c.isascii()))
_SEPARATING_TRANSLATION = _SEPARATING_BYTES.astype(np.uint8).tobytes()  # for bytes.translate: 1 or 0
# Multi-byte separators, grouped by their lead byte: {lead: [the bytes after it, ...]}.
_WIDE_SEPARATORS: dict[int, list[bytes]] = {}
for _wide in _WIDE_SPACES + "".join(c for c in SEPARATORS if not c.isascii()):
    _WIDE_SEPARATORS.setdefault(_wide.encode()[0], []).append(_wide.encode()[1:])
_LOWER = np.arange(256, dtype=np.uint8)
_LOWER[ord("A") : ord("Z") + 1] += ord("a") - ord("A")
_DIGIT = _byte_table("0123456789")
_LETTER = _byte_table("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
# Bytes of a word character (\w) for sure: ASCII letters, digits, the underscore, any byte of a
# multi-byte character (most are letters: counted as word characters, the cautious side here).
_WORD_BYTE = _LETTER | _DIGIT | _byte_table("_")
_WORD_BYTE[0x80:] = True
# French elisions whose prefix is not a stop word (retrieval.data.analyzer._ELISION).
_LONG_ELISIONS = ("jusqu", "lorsqu", "puisqu", "quoiqu")
# An ASCII digit or a byte of a character from U+0400 on, where Unicode's other digits are.
_MAY_BE_DIGIT = _DIGIT.copy()
_MAY_BE_DIGIT[0xD0:] = True
# What keeps an underscore inside its chunk: a digit, an apostrophe (either), a character from U+0400 on.
_BLOCKS_UNDERSCORE = _MAY_BE_DIGIT | _byte_table("'")
# _MASKS[n]: the n low bytes of a little-endian word.
_MASKS = np.array([(1 << (8 * n)) - 1 for n in range(9)], dtype=np.uint64)
_MIX = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93], dtype=np.uint64)


@dataclass(frozen=True)
class BatchChunks:
    """A batch's chunks, in order: chunk i is `text[starts[i]:ends[i]]` of `text`, the batch's
    documents lower-cased (ASCII letters) and joined by a newline (zero bytes after the last, see
    _keys), in document `docs[i]`. Chunks no longer than KEY_BYTES have their bytes and length in
    `keys[:, i]` (for the others, the length byte is KEY_BYTES + 1), a hash of those in `hashes[i]`.
    A key's middle words are zero but for the chunks of more than 8 bytes, `longer`."""

    text: bytes
    starts: np.ndarray  # int64
    ends: np.ndarray  # int64
    docs: np.ndarray  # int64
    keys: np.ndarray  # uint64, (3, chunks)
    hashes: np.ndarray  # uint64
    spaced: list[int]  # documents that may hold "HEL 4040" (an ASCII space between capitals and a digit)
    longer: np.ndarray  # int64: the chunks of more than 8 bytes, in order

    def chunk(self, i: int) -> str:
        """Chunk i as a string (lower-cased as in `text`)."""
        return self.text[self.starts[i] : self.ends[i]].decode("utf-8", "surrogatepass")

    def chunks(self, indices: np.ndarray) -> list[str]:
        """`[self.chunk(i) for i in indices]`, decoded at once: no chunk holds a newline (whitespace
        separates chunks), so the chunks' bytes joined by newlines decode and split back into them."""
        if not len(indices):
            return []
        pieces = map(slice, self.starts[indices].tolist(), self.ends[indices].tolist())
        return b"\n".join(map(self.text.__getitem__, pieces)).decode("utf-8", "surrogatepass").split("\n")


def cut(texts: list[str]) -> BatchChunks:
    """The chunks of `texts` (each already NFKC-normalized), as BatchChunks."""
    encoded = [t.encode("utf-8", "surrogatepass") for t in texts]
    sizes = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    # A newline before the first document and after the last: every chunk has a separator on each side.
    data = b"\n" + b"\n".join(encoded) + b"\n"
    doc_starts = np.cumsum(sizes + 1) - sizes
    raw = np.frombuffer(data, dtype=np.uint8)
    # Byte tables applied by bytes.translate and bytes.lower (C loops over the bytes, no index array).
    separating = np.frombuffer(bytearray(data.translate(_SEPARATING_TRANSLATION)), dtype=bool)
    for lead, tails in _WIDE_SEPARATORS.items():
        leads = np.flatnonzero(raw == lead)  # never the last byte: the text ends with a newline
        for tail in tails:
            at = leads
            for offset, byte in enumerate(tail, start=1):
                at = at[raw[np.minimum(at + offset, len(raw) - 1)] == byte]
            for offset in range(len(tail) + 1):
                separating[at + offset] = True
    separating[_splitting_apostrophes(raw, separating)] = True
    separating[_splitting_hyphens(raw)] = True
    separating[_splitting_underscores(raw, separating)] = True
    starts, ends = _spans(separating)
    # Each chunk's document: document d's chunks are those from its first one (a search per document).
    firsts = np.searchsorted(starts, doc_starts)
    docs = np.repeat(np.arange(len(texts), dtype=np.int64), np.diff(np.append(firsts, len(starts))))
    # Lower-cased (ASCII letters only, as bytes.lower does), with a key's worth of zeros after the
    # last byte so that every chunk's key words can be read (_keys).
    lowered = (data + bytes(8 * KEY_WORDS)).lower()
    keys, hashes, longer = _keys(np.frombuffer(lowered, dtype=np.uint8), starts, ends - starts)
    return BatchChunks(lowered, starts, ends, docs, keys, hashes, _spaced(data, doc_starts), longer)


def _spans(separating: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the runs of non-separating bytes (the first and last bytes separate)."""
    edges = np.flatnonzero(separating[1:] != separating[:-1]) + 1  # alternately a start and an end
    return edges[0::2], edges[1::2]


def _splitting_apostrophes(raw: np.ndarray, separating: np.ndarray) -> np.ndarray:
    """The straight apostrophes that separate chunks as a space would.

    An apostrophe is no word character and every analyzer folds it to a word separator; what it
    does more is French elision (retrieval.data.analyzer): `\b` + l', d', qu', jusqu'... is
    removed. Where the prefix is a stop word (l, d, j, m, n, s, t, c, qu), cutting after it gives
    the prefix alone, which is dropped: the same terms. So an apostrophe after a run of ASCII
    letters R separates, unless R is jusqu, lorsqu, puisqu or quoiqu after a `\b`, or the byte
    before R is not ASCII (a combining mark there would fold away and join R to the letter before).
    """
    at = np.flatnonzero(raw == ord("'"))
    at = at[_LETTER[raw[at - 1]]]
    # The start of each apostrophe's run of letters, looked for one byte further back at a time.
    start = at - 1
    open_ = np.arange(len(at))
    while len(open_):
        before = start[open_] - 1
        letter = _LETTER[raw[before]]
        start[open_[letter]] = before[letter]
        open_ = open_[letter]
    previous, cut_before = raw[start - 1], separating[start - 1]
    known_before = (previous < 0x80) | cut_before
    boundary = cut_before | ~_WORD_BYTE[previous]
    long_prefix = np.zeros(len(at), dtype=bool)
    for prefix in _LONG_ELISIONS:
        candidates = np.flatnonzero(at - start == len(prefix))
        match = np.ones(len(candidates), dtype=bool)
        for offset, byte in enumerate(prefix.encode()):
            match &= _LOWER[raw[start[candidates] + offset]] == byte
        long_prefix[candidates[match]] = True
    return at[known_before & ~(boundary & long_prefix)]


def _splitting_hyphens(raw: np.ndarray) -> np.ndarray:
    """The hyphens that separate chunks as a space would: those not followed by a digit. A hyphen
    is no word character, no analyzer keeps it in a term, and the identifier rule reads it only
    before a digit ("HEL-4040"). Any byte of a character from U+0400 on counts as a possible
    (Unicode) digit; below, there is none."""
    at = np.flatnonzero(raw == ord("-"))  # never the last byte: the text ends with a newline
    return at[~_MAY_BE_DIGIT[raw[at + 1]]]


def _splitting_underscores(raw: np.ndarray, separating: np.ndarray) -> np.ndarray:
    """The underscores that separate chunks as a space would: those of chunks without a digit
    or an apostrophe. An underscore is a word character to `\\b` and to the identifier rule
    ("hel_4040"), but no analyzer keeps it in a term; `\\b` matters only to elisions (an
    apostrophe) and identifiers (a digit). Any byte of a character from U+0400 on counts as a
    possible digit or apostrophe (Unicode digits, the typographic apostrophe); below, there is none."""
    at = np.flatnonzero(raw == ord("_"))
    free = np.ones(len(at), dtype=bool)
    for step in (-1, 1):  # the chunk's bytes on each side, one further at a time
        position = at + step
        open_ = np.arange(len(at))
        while len(open_):
            inside = ~separating[position[open_]]
            open_ = open_[inside]
            free[open_] &= ~_BLOCKS_UNDERSCORE[raw[position[open_]]]
            open_ = open_[free[open_]]
            position[open_] += step
    return at[free]


def _keys(lowered: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(keys, hashes, longer) of the chunks of `lowered` (the batch's bytes, then 8 * KEY_WORDS zeros, so
    that a key's last word is read within it): each chunk's bytes as three little-endian words,
    zero-padded, the length in the last word's top byte (exact for chunks up to KEY_BYTES), a
    hash of those words, and the chunks of more than 8 bytes (the only ones whose middle words
    are not zero)."""
    padded = lowered
    # Every byte offset as the start of a little-endian 64-bit word (unaligned reads, no copy).
    words = np.ndarray((len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    keys = np.zeros((KEY_WORDS, len(starts)), dtype=np.uint64)
    keys[0] = words[starts] & _MASKS[np.minimum(lengths, 8)]
    longer = np.flatnonzero(lengths > 8)  # about one chunk in seven: the other words are only read for those
    for w in range(1, KEY_WORDS):
        # The last word's top byte is the length's: a longer chunk's 24th byte is left out.
        top = 8 if w < KEY_WORDS - 1 else 7
        keys[w, longer] = words[starts[longer] + 8 * w] & _MASKS[np.clip(lengths[longer] - 8 * w, 0, top)]
    # A longer chunk's key is not its own: the length byte says so (KEY_BYTES + 1).
    # Lengths are not negative: their int64 bits are the uint64 value (a view, no copy).
    length_bytes = np.minimum(lengths, KEY_BYTES + 1).view(np.uint64)
    length_bytes <<= np.uint64(56)
    keys[-1] |= length_bytes
    hashes = keys[0] * _MIX[0]
    hashes ^= keys[-1] * _MIX[KEY_WORDS - 1]
    for w in range(1, KEY_WORDS - 1):
        # A zero word adds nothing to the hash (0 * mix): only the longer chunks' are read.
        hashes[longer] ^= keys[w, longer] * _MIX[w]
    hashes ^= hashes >> np.uint64(31)
    hashes *= _MIX[KEY_WORDS]
    return keys, hashes, longer


def _spaced(data: bytes, doc_starts: np.ndarray) -> list[int]:
    """The documents with a space between two ASCII capitals and a digit (an ASCII one, or a byte
    of a multi-byte character: Unicode digits count too): those that may hold "HEL 4040". The
    bytes are mapped to classes (capital "A", possible digit "0", space, other ".") by one
    bytes.translate, in which the shape is a plain substring ("AA 0", which cannot overlap itself)."""
    classes = data.translate(_SPACED_CLASSES)
    at = [found.start() + 2 for found in _SPACED_SHAPE.finditer(classes)]  # the spaces' positions
    return np.unique(np.searchsorted(doc_starts, np.array(at, dtype=np.int64), side="right") - 1).tolist()


def _classes() -> bytes:
    table = bytearray(b"." * 256)
    table[ord("A") : ord("Z") + 1] = b"A" * 26
    table[ord("0") : ord("9") + 1] = b"0" * 10
    table[0x80:] = b"0" * 128
    table[ord(" ")] = ord(" ")
    return bytes(table)


_SPACED_CLASSES = _classes()
_SPACED_SHAPE = re.compile(b"AA 0")
