"""The chunks retrieval.data.chunk_keys cuts leave every analyzer's terms unchanged, and the keyed
look-up of analyze_corpus gives exactly analyze()'s terms, hash collisions and long chunks included.

chunk_keys cuts a batch of texts at more places than whitespace (punctuation, some apostrophes,
hyphens and underscores) and keys each chunk by its bytes; these tests compare the corpus's terms
with the plain analyzer on random text made of the pieces each of those rules reads.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from test_analyzer_fast_path import PIECES, french_texts, plain_analyze

from retrieval.data import chunk_keys, corpus_terms
from retrieval.data.analyzer import analyze
from retrieval.data.corpus_terms import analyze_corpus, forget_analyses

# What each cutting rule reads: every separator, the whitespace str.split() knows beyond ASCII,
# elisions long and short (at a word boundary or not), hyphens and underscores before digits or
# not, Unicode digits and letters from U+0400 on, combining marks after a cut, chunks longer than
# a key (KEY_BYTES).
CUTTING_PIECES = [
    *chunk_keys.SEPARATORS, "\x85", "\u1680", "\u2028", "\u2029", "\x1c", "\x1f",
    "jusqu'", "Lorsqu'", "puisqu'", "quoiqu'", "aujourd'hui", "d'", "J'", "n'", "qu'", "xjusqu'",
    "'", "''", "\u2019", "-", "--", "_", "__", "-4", "_4", "-٣", "_٣", "\u0301", "\u0308", "é",
    "Ж", "ж", "١٢٣", "\u0435", "4", "12", "HEL", "AB", "ab", "l", "s", "a", "z", "é", "ö",
    "sauvegardes", "anticonstitutionnellement", "ééééééééééééé", "Ünterschiede", "dell'",
    "superlongchunkwithoutanyspaceatall", " ", " ", "\t", "\n",
]  # fmt: skip


def cutting_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    pieces = CUTTING_PIECES + PIECES
    return ["".join(rng.choices(pieces, k=rng.randint(0, 40))) for _ in range(n)]


@pytest.fixture(autouse=True)
def batches_even_for_small_corpora(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(corpus_terms, "_SMALL_CORPUS", 0)
    forget_analyses()


def corpus_terms_of(texts: list[str], language: str = "fr") -> list[list[str]]:
    forget_analyses()
    return analyze_corpus(texts, language=language).documents()


@pytest.mark.parametrize("seed", range(4))
def test_cut_chunks_keep_the_french_terms(seed: int) -> None:
    texts = cutting_texts(800, seed)
    assert corpus_terms_of(texts) == [plain_analyze(t) for t in texts]


@pytest.mark.parametrize("language", ["en", "de", "ru", "hi"])
def test_cut_chunks_keep_the_snowball_terms(language: str) -> None:
    pytest.importorskip("Stemmer")
    texts = cutting_texts(400, seed=20)
    # analyze() cuts at whitespace only: the reference for the finer cuts.
    assert corpus_terms_of(texts, language) == [analyze(t, language) for t in texts]


def test_known_cuts() -> None:
    batch = chunk_keys.cut(["«Maison», l'été (HEL-4040) jusqu'au bout-4 a_b x_1 aujourd'hui", "", "Fin."])
    chunks = [batch.chunk(i) for i in range(len(batch.starts))]
    assert chunks == ["maison", "l", "été", "hel-4040", "jusqu'au", "bout-4", "a", "b", "x_1", "aujourd", "hui", "fin"]
    assert batch.docs.tolist() == [0] * 11 + [2]
    assert batch.spaced == []
    # Candidates (two capitals, a space, a digit): _SPACED_IDENTIFIER then keeps the real ones.
    assert chunk_keys.cut(["code HEL 4040 ici", "AB 1", "HE 40", "Ab 12", "AB\t12"]).spaced == [0, 1, 2]


def test_equal_chunks_share_a_key_and_long_ones_have_none() -> None:
    long = "x" * (chunk_keys.KEY_BYTES + 1)
    batch = chunk_keys.cut([f"Erreur erreur, {long} erreurs {'y' * chunk_keys.KEY_BYTES}"])
    keys = [tuple(batch.keys[:, i].tolist()) for i in range(len(batch.starts))]
    assert keys[0] == keys[1] != keys[3]
    assert batch.hashes[0] == batch.hashes[1] != batch.hashes[3]
    lengths = [key[-1] >> 56 for key in keys]
    assert lengths == [6, 6, chunk_keys.KEY_BYTES + 1, 7, chunk_keys.KEY_BYTES]


@pytest.mark.parametrize("batch", [1, 5, 8192])
@pytest.mark.parametrize("mix", [[0, 0, 0, 0], [0, 0, 1, 1]], ids=["one-hash", "hash-by-length"])
def test_colliding_hashes_fall_back_to_the_chunk_itself(
    batch: int, mix: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Hashes shared by different chunks (all of them; those of a length, mostly), within a batch
    # and against the chunks of the batches before: only exact key matches may share a code.
    monkeypatch.setattr(chunk_keys, "_MIX", np.array(mix, dtype=np.uint64))
    monkeypatch.setattr(corpus_terms, "_CORPUS_BATCH", batch)
    texts = french_texts(200, seed=2) + cutting_texts(200, seed=3)
    # One text a batch: every other text is still 200 batches, each looked up against the ones before.
    texts = texts[::2] if batch == 1 else texts
    assert corpus_terms_of(texts) == [plain_analyze(t) for t in texts]


def test_codes_across_batches_and_bounded_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    # Chunks seen in an earlier batch are looked up by key; a reset forgets them all.
    monkeypatch.setattr(corpus_terms, "_CORPUS_BATCH", 3)
    monkeypatch.setattr(corpus_terms, "_CHUNKS_LIMIT", 25)
    texts = french_texts(40, seed=4) + cutting_texts(40, seed=5)
    assert corpus_terms_of(texts) == [plain_analyze(t) for t in texts]


def test_a_chunk_that_gives_the_marker_is_analysed_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # The new chunks of a batch are analysed in one call, joined by a marker term; a chunk whose
    # terms hold the marker would shift every chunk after it: those are analysed one by one.
    monkeypatch.setattr(corpus_terms, "_MARK", "erreur")
    texts = ["l'erreur de sauvegarde", "erreurs du serveur", "une mise à jour", "erreur"]
    assert corpus_terms_of(texts) == [plain_analyze(t) for t in texts]
