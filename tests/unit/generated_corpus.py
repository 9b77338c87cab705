"""FIXTURE: a generated corpus of any size, and a fixture embedder for it, for the sharding tests.

Deterministic (a seeded generator, no clock): the same arguments give the same documents,
questions and vectors on every machine. Documents are French-looking words drawn with a skewed
frequency (so BM25's document frequencies vary) plus error codes; each question paraphrases a
few words of its relevant document. Near-duplicates are planted on purpose: exact score ties
are where a sharded merge would go wrong. The vectors are test fixtures, never a baseline.
"""

from __future__ import annotations

import functools
import hashlib
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from retrieval.data.dataset import Dataset, Document, Question

__all__ = ["fixture_vectors", "generated_dataset"]

_SYLLABLES = ("ba", "ce", "di", "fo", "gu", "la", "me", "no", "pi", "ra", "se", "tu", "vo", "zé", "ré", "ma")


def _vocabulary(size: int, rng: np.random.Generator) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES, size=int(rng.integers(2, 5)))))
    return sorted(words)


@functools.cache
def _seeded_vocabulary(seed: int) -> tuple[tuple[str, ...], Mapping[str, Any]]:
    """The vocabulary a generator seeded `seed` draws first, and its state after: drawn once a process
    (0.07 s; the executor's tests make seven datasets of one seed)."""
    rng = np.random.default_rng(seed)
    return tuple(_vocabulary(3000, rng)), rng.bit_generator.state


def generated_dataset(n_documents: int, n_questions: int, seed: int = 27) -> Dataset:
    """`n_documents` documents (ids d0000000...) and `n_questions` questions, each with one
    relevant document; every tenth document copies its predecessor's text (exact ties)."""
    rng = np.random.default_rng(seed)
    words, after = _seeded_vocabulary(seed)
    rng.bit_generator.state = after  # as if drawn here
    weights = 1.0 / np.arange(1, len(words) + 1)  # Zipf-like: some words in most documents
    weights /= weights.sum()
    lengths = rng.integers(8, 40, size=n_documents)
    codes = rng.integers(0, 5000, size=n_documents)
    # One draw for the whole corpus: drawing per document with `p` is 10 times slower.
    drawn = np.asarray(words)[rng.choice(len(words), size=int(lengths.sum()), p=weights)]
    ends = np.cumsum(lengths)
    documents: list[Document] = []
    for i in range(n_documents):
        if i % 10 == 9:
            text = documents[-1].text
        else:
            text = " ".join(drawn[ends[i] - lengths[i] : ends[i]]) + f" code ERR-{codes[i]}"
        documents.append(Document(id=f"d{i:07d}", title=f"page {i % 97}", text=text))
    questions = []
    for q in range(n_questions):
        target = documents[int(rng.integers(0, n_documents))]
        terms = target.text.split()
        picked = rng.choice(terms, size=min(4, len(terms)), replace=False)
        questions.append(
            Question(id=f"q{q:05d}", text=" ".join(picked), type=("lookup", "paraphrase")[q % 2], relevant=(target.id,))
        )
    digest = hashlib.sha256(f"generated-{n_documents}-{n_questions}-{seed}".encode()).hexdigest()[:16]
    return Dataset(
        name=f"generated-{n_documents}", documents=tuple(documents), questions=tuple(questions), fingerprint=digest
    )


def fixture_vectors(texts: list[str], dimensions: int = 32) -> np.ndarray:
    """FIXTURE embedder: unit vectors, the normalised sum of one seeded random vector per word."""
    words_of = [text.lower().split() for text in texts]
    out = np.zeros((len(texts), dimensions), dtype=np.float32)
    if not any(words_of):
        return out
    # Summed word after word across all texts at once (the n-th words of every text, then the
    # next): each float32 row rounded after each word as a sum per word rounds it, the same bits,
    # a few dozen numpy passes instead of one per word (the executor's 3,000 documents: 0.26 -> 0.10 s).
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(word, len(index)) for words in words_of for word in words), dtype=np.intp)
    table = np.array([np.random.default_rng(zlib.crc32(word.encode())).standard_normal(dimensions) for word in index])
    lengths = np.array([len(words) for words in words_of])
    starts = np.cumsum(lengths) - lengths
    for n in range(int(lengths.max())):
        rows = np.flatnonzero(lengths > n)
        out[rows] = out[rows] + table[codes[starts[rows] + n]]
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1, norms)
