"""Vector search over a corpus read block by block ranks exactly as the one-block product."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.methods import vector
from retrieval.methods.vector import cosine_rankings


def corpus_with_ties(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(40, 200))
    documents = np.round(rng.standard_normal((n, 8)), 1).astype(np.float32)
    # Duplicated documents tie exactly: the lower index must go first in every block layout.
    documents[rng.integers(0, n, n // 3)] = documents[rng.integers(0, n, n // 3)]
    questions = rng.standard_normal((int(rng.integers(1, 40)), 8)).astype(np.float32)
    questions[: len(questions) // 2] = documents[rng.integers(0, n, len(questions) // 2)]
    return questions, documents


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize(("block", "batch"), [(3, 2), (7, 3), (50, 1024)])
def test_blocked_rankings_equal_the_one_block_product(
    seed: int, block: int, batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    questions, documents = corpus_with_ties(seed)
    rng = np.random.default_rng(100 + seed)
    for depth in (1, 10, int(rng.integers(1, len(documents) + 30))):
        expected = cosine_rankings(questions, documents, depth)  # one block: DOCUMENT_BLOCK is larger
        with monkeypatch.context() as patch:
            patch.setattr(vector, "DOCUMENT_BLOCK", block)
            patch.setattr(vector, "BLOCKED_QUESTION_BATCH", batch)
            got = cosine_rankings(questions, documents, depth)
        assert len(got) == len(expected) == len(questions)
        for a, b in zip(got, expected, strict=True):
            assert len(a) == min(depth, len(documents))
            np.testing.assert_array_equal(a.indices, b.indices)
            np.testing.assert_array_equal(a.scores, b.scores)


def test_a_memory_mapped_corpus_is_read_as_it_is(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    questions, documents = corpus_with_ties(9)
    path = f"{tmp_path}/documents.npy"
    np.save(path, documents)
    mapped = np.load(path, mmap_mode="r")
    monkeypatch.setattr(vector, "DOCUMENT_BLOCK", 16)
    got = cosine_rankings(questions, mapped, 20)
    monkeypatch.setattr(vector, "DOCUMENT_BLOCK", 10**9)
    for a, b in zip(got, cosine_rankings(questions, documents, 20), strict=True):
        np.testing.assert_array_equal(a.indices, b.indices)


def test_nan_vectors_are_left_out_as_in_one_block(monkeypatch: pytest.MonkeyPatch) -> None:
    # top_k never ranks a NaN score: a question with NaN ranks nothing, a document with NaN
    # is never ranked; the blocked path selects by threshold, which NaN never passes.
    questions, documents = corpus_with_ties(11)
    questions[0, 3] = np.nan
    documents[[2, 40]] = np.nan
    expected = cosine_rankings(questions, documents, 15)
    monkeypatch.setattr(vector, "DOCUMENT_BLOCK", 16)
    got = cosine_rankings(questions, documents, 15)
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a.scores, b.scores)
    assert len(got[0]) == 0 and len(got[1]) == 15 and not {2, 40} & set(got[1].indices.tolist())
