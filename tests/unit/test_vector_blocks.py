"""Vector search over a corpus read block by block ranks exactly as the one-block product."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

from retrieval.methods import vector
from retrieval.methods.support import vector_kernel
from retrieval.methods.vector import cosine_rankings
from retrieval.run.ranking import Ranking


@pytest.fixture(autouse=True, params=["kernel", "numpy"])
def search_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test on both paths of the blocked search: the C kernel's and numpy's."""
    if request.param == "numpy":
        monkeypatch.setattr(vector_kernel, "KERNEL", None)
    elif vector_kernel.KERNEL is None:
        pytest.skip("the C kernel was not built (no C compiler)")
    return str(request.param)


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
@pytest.mark.parametrize("threaded", [2, 10**9], ids=["threads", "one-thread"])
def test_blocked_rankings_equal_the_one_block_product(
    seed: int, block: int, batch: int, threaded: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    questions, documents = corpus_with_ties(seed)
    # Each batch of questions is searched on its own, chunk by chunk: about three batches and a
    # short last one cross every path, so small batches take every few questions (those that copy a
    # document and those that do not), not all 40: each further batch paid ~70 chunks of Python.
    questions = questions[:: max(1, len(questions) // (3 * batch + 1))]
    rng = np.random.default_rng(100 + seed)
    for depth in (1, 10, int(rng.integers(1, len(documents) + 30))):
        expected = cosine_rankings(questions, documents, depth)  # one block: DOCUMENT_BLOCK is larger
        with monkeypatch.context() as patch:
            patch.setattr(vector, "DOCUMENT_BLOCK", block)
            patch.setattr(vector, "BLOCKED_QUESTION_BATCH", batch)
            patch.setattr(vector, "THREADED_QUESTIONS", threaded)  # batches of 2 or more: in parts
            patch.setattr(
                vector, "_cores", lambda: 3
            )  # three parts, of unequal sizes where the batch is not a multiple
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


@functools.cache
def clustered_near_ties(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per question, 400 unit documents at cosine 0.5 to within float32's rounding of their
    components (their float64 cosines spread over ~1e-7, as does float32's error) among 1,000
    others: a depth of 300 cuts through every cluster, where float32 alone would choose by its noise.
    Made once a seed for both search paths, read-only."""
    rng = np.random.default_rng(seed)
    dims, per_cluster = 384, 400
    questions = rng.standard_normal((3, dims))
    questions /= np.linalg.norm(questions, axis=1, keepdims=True)
    parts = [rng.standard_normal((1000, dims))]
    for q in questions:
        noise = rng.standard_normal((per_cluster, dims))
        noise -= np.outer(noise @ q, q)  # orthogonal to the question
        noise /= np.linalg.norm(noise, axis=1, keepdims=True)
        parts.append(0.5 * q + np.sqrt(0.75) * noise)
    documents = np.concatenate(parts)
    documents /= np.linalg.norm(documents, axis=1, keepdims=True)
    made = questions.astype(np.float32), rng.permutation(documents).astype(np.float32)
    for array in made:
        array.flags.writeable = False
    return made


@pytest.mark.parametrize("seed", range(3))
def test_float32_candidates_miss_no_document_of_the_float64_top(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    questions, documents = clustered_near_ties(seed)
    expected = cosine_rankings(questions, documents, 300)  # one block: every product in float64
    monkeypatch.setattr(vector, "DOCUMENT_BLOCK", 128)
    # One thread, then three corpus ranges: each range drops its candidates below its own final
    # threshold, and each question's candidates are joined across the ranges.
    for threaded, cores in ((10**9, 1), (2, 3)):
        monkeypatch.setattr(vector, "THREADED_QUESTIONS", threaded)
        monkeypatch.setattr(vector, "_cores", lambda cores=cores: cores)
        got = cosine_rankings(questions, documents, 300)
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(a.indices, b.indices)
            np.testing.assert_array_equal(a.scores, b.scores)
    # The depth cuts through each cluster: its last 100 documents are within float32's error.
    assert all(r.scores[-100] - r.scores[-1] < 1e-6 for r in expected)


def test_a_read_only_memory_map_s_norm_is_computed_once(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    # A store's memory map cannot change: its largest norm is kept, not read again per search;
    # any array that can be written (or sits on a buffer that can) is read again every time.
    questions, documents = corpus_with_ties(12)
    path = f"{tmp_path}/documents.npy"
    np.save(path, documents)
    monkeypatch.setattr(vector, "DOCUMENT_BLOCK", 16)
    passes: list[int] = []
    largest_norm = vector._largest_norm

    def counted(docs: np.ndarray) -> float:
        passes.append(len(docs))
        return largest_norm(docs)

    monkeypatch.setattr(vector, "_largest_norm", counted)
    mapped = np.load(path, mmap_mode="r")
    first = cosine_rankings(questions, mapped, 20)
    again = cosine_rankings(questions, mapped, 20)
    assert passes == [len(documents)]
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a.scores, b.scores)
    del mapped, first, again
    assert vector._NORMS == {}  # forgotten with the array
    writable = np.load(path, mmap_mode="r+")
    frozen_view = documents.view()
    frozen_view.flags.writeable = False
    flat = np.frombuffer(bytearray(documents.tobytes()), dtype=np.float32)
    flat.flags.writeable = False
    over_bytearray = flat.reshape(documents.shape)  # no array writable, the buffer under them is
    assert not over_bytearray.flags.writeable
    for array in (documents, writable, frozen_view, over_bytearray):
        passes.clear()
        cosine_rankings(questions, array, 20)
        cosine_rankings(questions, array, 20)
        assert passes == [len(documents)] * 2


def test_merged_best_keeps_each_question_s_k_best_of_every_pending_block() -> None:
    # Pending pairs from three blocks (rows ascending within each), some rows absent from some
    # blocks: the merge must keep every value, whatever block it came from.
    rng = np.random.default_rng(3)
    n_questions, k = 7, 5
    best = np.sort(rng.standard_normal((n_questions, k)).astype(np.float32), axis=1)[:, ::-1]
    pending, everything = [], [list(row) for row in best]
    for _ in range(3):
        row = np.sort(rng.integers(0, n_questions, int(rng.integers(0, 20))))
        found = rng.standard_normal(len(row)).astype(np.float32) + 1
        pending.append((row, found))
        for r, v in zip(row.tolist(), found.tolist(), strict=True):
            everything[r].append(v)
    counts = np.bincount(np.concatenate([row for row, _ in pending]), minlength=n_questions)
    merged = vector._merged_best(best, pending, counts, k)
    for question in range(n_questions):
        expected = np.sort(np.asarray(everything[question], dtype=np.float32))[::-1][:k]
        np.testing.assert_array_equal(np.sort(merged[question])[::-1], expected)


def test_the_best_scores_are_merged_a_few_times_not_once_per_block(
    search_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The threshold may lag (it stays a lower bound): the depth's best are merged only once the new
    # candidates could fill a question's depth, and at the last block; the rankings do not change.
    # numpy's path (the C kernel keeps each question's best in a heap as the candidates come).
    if search_path == "kernel":
        pytest.skip("numpy's path merges; the kernel's heaps are tested in test_vector_kernel.py")
    rng = np.random.default_rng(4)
    documents = rng.standard_normal((4096, 16)).astype(np.float32)
    documents /= np.linalg.norm(documents, axis=1, keepdims=True)
    questions = documents[:20] + 0.1 * rng.standard_normal((20, 16)).astype(np.float32)
    expected = cosine_rankings(questions, documents, 10)
    merges: list[int] = []
    merged_best = vector._merged_best

    def counted(best: np.ndarray, *args: object) -> np.ndarray:
        merges.append(len(best))
        return merged_best(best, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(vector, "_merged_best", counted)
    monkeypatch.setattr(vector, "DOCUMENT_BLOCK", 64)
    got = cosine_rankings(questions, documents, 10)
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a.scores, b.scores)
    assert 1 <= len(merges) <= 12  # 64 blocks


def near_neighbours(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Unit documents and questions each near one document: each question's best scores stand out
    of the rest, as a real question's do."""
    rng = np.random.default_rng(seed)
    documents = rng.standard_normal((3000, 12)).astype(np.float32)
    documents /= np.linalg.norm(documents, axis=1, keepdims=True)
    questions = documents[rng.integers(0, len(documents), 70)] + 0.3 * rng.standard_normal((70, 12))
    return questions.astype(np.float32), documents


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("threaded", [2, 10**9], ids=["threads", "one-thread"])
def test_the_sampled_threshold_changes_no_ranking(seed: int, threaded: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # A sample of 32 documents out of 3,000 starts each question's threshold at its 1st to 6th
    # best sampled score (depth 60: 3 x 60 x 32 / 3,000); wherever that estimate was above the
    # depth-th best float32 score, the question is searched again without one.
    questions, documents = near_neighbours(seed)
    expected = cosine_rankings(questions, documents, 60)  # one block
    estimates: list[np.ndarray] = []
    sampled = vector._estimates

    def kept(*args: object) -> np.ndarray:
        estimates.append(sampled(*args))  # type: ignore[arg-type]
        return estimates[-1]

    monkeypatch.setattr(vector, "_estimates", kept)
    monkeypatch.setattr(vector, "ESTIMATE_LEAST", 0.5)
    _small_blocks(monkeypatch, threaded)
    _assert_same(cosine_rankings(questions, documents, 60), expected)
    assert np.isfinite(np.concatenate(estimates)).all()  # every question had an estimate


@pytest.mark.parametrize("threaded", [2, 10**9], ids=["threads", "one-thread"])
def test_a_question_whose_estimate_was_too_high_is_searched_again(
    threaded: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An estimate above the depth-th best score would let documents of the final top go
    # unseen: such a question's depth-th best candidate scores below its estimate, and it is
    # searched again without one. Every other question keeps its first search.
    questions, documents = near_neighbours(7)
    expected = cosine_rankings(questions, documents, 40)  # one block
    best = np.asarray([ranking.scores[1] for ranking in expected], dtype=np.float32)
    searches: list[int] = []
    blocked = vector._blocked_rankings

    def counted(batch: np.ndarray, *args: Any, **kwargs: Any) -> list[Ranking]:
        searches.append(len(batch))
        return blocked(batch, *args, **kwargs)

    def too_high(questions32: np.ndarray, documents: np.ndarray, k: int) -> np.ndarray:
        # The second best score for the odd questions (above their 40th best), none for the rest.
        rows = [np.flatnonzero((questions == row).all(axis=1))[0] for row in questions32]
        return np.where(np.asarray(rows) % 2 == 1, best[rows] - 1e-3, -np.inf).astype(np.float32)

    monkeypatch.setattr(vector, "_estimates", too_high)
    monkeypatch.setattr(vector, "_blocked_rankings", counted)
    _small_blocks(monkeypatch, threaded)
    _assert_same(cosine_rankings(questions, documents, 40), expected)
    assert searches == [len(questions), len(questions) // 2]


def _small_blocks(monkeypatch: pytest.MonkeyPatch, threaded: int) -> None:
    """Blocks of 64 documents over 3 cores: the small corpora of these tests cross every path."""
    monkeypatch.setattr(vector, "DOCUMENT_BLOCK", 64)
    monkeypatch.setattr(vector, "THREADED_QUESTIONS", threaded)
    monkeypatch.setattr(vector, "_cores", lambda: 3)


def _assert_same(got: list[Ranking], expected: list[Ranking]) -> None:
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a.scores, b.scores)
