"""The vector search's optional C kernel (retrieval.methods.support.vector_kernel) gives the same
candidates, scores and rankings as numpy's path, and the package searches without it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from retrieval.methods import vector
from retrieval.methods.support import vector_kernel
from retrieval.methods.vector import DOCUMENT_BLOCK, cosine_rankings
from retrieval.run.ranking import Ranking, top_k

ROOT = Path(__file__).resolve().parents[2]
KERNEL = vector_kernel.KERNEL
needs_kernel = pytest.mark.skipif(KERNEL is None, reason="the C kernel was not built (no C compiler)")


def test_the_kernel_is_built_where_a_compiler_is() -> None:
    # `pip install -e .` compiles it wherever the interpreter's C compiler exists: CI's runs test it.
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}): the numpy path alone")
    assert KERNEL is not None


def corpus(seed: int, dims: int = 24) -> tuple[np.ndarray, np.ndarray]:
    """Unit documents above DOCUMENT_BLOCK with duplicates (exact ties) and near-ties (copies moved
    by a few units of float32's last place), and questions near some of them."""
    rng = np.random.default_rng(seed)
    n = DOCUMENT_BLOCK + int(rng.integers(1, 3000))
    documents = rng.standard_normal((n, dims)).astype(np.float32)
    documents /= np.linalg.norm(documents, axis=1, keepdims=True)
    documents[rng.integers(0, n, n // 10)] = documents[rng.integers(0, n, n // 10)]
    near = rng.integers(0, n, n // 10)
    nudged = documents[rng.integers(0, n, n // 10)]
    documents[near] = nudged + rng.integers(-3, 4, nudged.shape) * np.spacing(nudged)
    questions = documents[rng.integers(0, n, 80)] + 0.2 * rng.standard_normal((80, dims)).astype(np.float32)
    return questions.astype(np.float32), documents


def both_paths(questions: np.ndarray, documents: np.ndarray, depth: int) -> tuple[list[Ranking], list[Ranking]]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(vector_kernel, "KERNEL", None)
        numpy_only = cosine_rankings(questions, documents, depth)
    return cosine_rankings(questions, documents, depth), numpy_only


def assert_same(got: list[Ranking], expected: list[Ranking]) -> None:
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a.scores, b.scores)


@needs_kernel
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("threaded", [2, 10**9], ids=["threads", "one-thread"])
def test_the_kernel_ranks_as_numpy(seed: int, threaded: int, monkeypatch: pytest.MonkeyPatch) -> None:
    questions, documents = corpus(seed)
    monkeypatch.setattr(vector, "THREADED_QUESTIONS", threaded)
    monkeypatch.setattr(vector, "_cores", lambda: 3)  # three ranges and parts, of unequal sizes
    # 600, above the kernel's chunk of SCORE_CHUNK documents: a question's best fill across chunks,
    # its threshold raised from the second, as at 1,000 (whose rescoring cost a third more; a
    # threshold raised without the margin fails both).
    assert vector.SCORE_CHUNK < 600
    for depth in (1, 10, 600):
        got, expected = both_paths(questions, documents, depth)
        assert_same(got, expected)
        assert all(len(r) == depth for r in got)


@needs_kernel
def test_a_depth_beyond_the_corpus_ranks_every_document_as_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    questions, documents = corpus(5, dims=8)
    monkeypatch.setattr(vector, "THREADED_QUESTIONS", 2)
    got, expected = both_paths(questions[:10], documents, len(documents) + 50)
    assert_same(got, expected)
    assert all(len(r) == len(documents) for r in got)


@needs_kernel
def test_nan_vectors_are_left_out_as_by_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    questions, documents = corpus(7)
    questions[3, 5] = np.nan
    documents[[10, 2000, DOCUMENT_BLOCK + 1]] = np.nan
    monkeypatch.setattr(vector, "THREADED_QUESTIONS", 2)
    got, expected = both_paths(questions, documents, 100)
    assert_same(got, expected)
    assert len(got[3]) == 0 and not {10, 2000, DOCUMENT_BLOCK + 1} & set(np.concatenate([r.indices for r in got]))


@needs_kernel
def test_a_memory_mapped_float64_corpus_ranks_as_numpy(tmp_path: Path) -> None:
    # A float64 corpus is not read in place by the rescoring: numpy scores it, the same rankings.
    questions, documents = corpus(8, dims=8)
    np.save(tmp_path / "documents.npy", documents.astype(np.float64))
    mapped = np.load(tmp_path / "documents.npy", mmap_mode="r")
    got, expected = both_paths(questions, mapped, 50)
    assert_same(got, expected)
    assert_same(got, cosine_rankings(questions, documents, 50))


def numpy_candidates(scores: np.ndarray, threshold: np.ndarray, start: int) -> tuple[np.ndarray, ...]:
    rows, cols = np.nonzero(scores >= threshold[:, None])
    return rows, cols + start, scores[rows, cols]


def call_kernel(
    scores: np.ndarray, threshold: np.ndarray, k: int, start: int = 0
) -> tuple[int, tuple[np.ndarray, ...]]:
    """The kernel's pass over one chunk from empty heaps: (count, (rows, cols, values, best, threshold))."""
    assert KERNEL is not None
    n_questions, width = scores.shape
    floor = threshold.astype(np.float32)
    raised = floor.copy()
    margin = np.full(n_questions, 1e-4)
    best = np.full((n_questions, 2 * k), np.nan, np.float32)
    sizes = np.zeros(n_questions, np.int64)
    room = n_questions * width
    rows, cols, values = np.zeros(room, np.int32), np.zeros(room, np.int32), np.zeros(room, np.float32)
    count = KERNEL.chunk_candidates(
        scores, raised, floor, margin, best, sizes, rows, cols, values, n_questions, width, k, start
    )
    KERNEL.kept_best(best, sizes, n_questions, k)
    return count, (rows[:count], cols[:count], values[:count], best[:, :k], raised)


def chunk_scores(width: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(width)
    scores = rng.standard_normal((7, width)).astype(np.float32)
    scores[rng.random(scores.shape) < 0.1] = np.nan
    threshold = np.array([0.5, -np.inf, np.inf, np.nan, 1.0, 0.0, scores[6, 0]], dtype=np.float32)
    return scores, threshold


@needs_kernel
@pytest.mark.parametrize("width", [1, 15, 16, 17, 100])
def test_chunk_candidates_are_numpy_s_in_the_same_order(width: int) -> None:
    # k above the chunk: no question's best fills, each threshold stays its floor.
    scores, threshold = chunk_scores(width)
    count, (rows, cols, values, _, raised) = call_kernel(scores, threshold, width + 1, 1000)
    expected = numpy_candidates(scores, threshold, 1000)
    assert count == len(expected[0])
    arrays: list[np.ndarray] = [rows, cols, values]
    for got, want in zip(arrays, expected, strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(raised, threshold)


@needs_kernel
@pytest.mark.parametrize("width", [16, 100])
@pytest.mark.parametrize("k", [1, 3, 5])
def test_each_question_s_k_best_raise_its_threshold_as_they_come(width: int, k: int) -> None:
    # The reference: each question's scores in order, a candidate when >= the threshold; once k
    # are held, and each time 2k are, the k best kept and the threshold max(floor, k-th best - margin).
    scores, threshold = chunk_scores(width)
    count, (rows, cols, values, best, raised) = call_kernel(scores, threshold, k)
    expected: list[tuple[int, int, float]] = []
    for q, line in enumerate(scores):
        kept: list[float] = []
        t = threshold[q]
        for d, score in enumerate(line):
            if not score >= t:
                continue
            expected.append((q, d, float(score)))
            kept.append(float(score))
            if len(kept) in (k, 2 * k):
                kept = sorted(kept, reverse=True)[:k]
                t = max(threshold[q], vector._below(np.array([kept[-1]], np.float32), np.array([1e-4]))[0])
        assert raised[q] == t or (np.isnan(raised[q]) and np.isnan(t))
        top = sorted(kept, reverse=True)[:k]
        np.testing.assert_array_equal(np.sort(best[q])[::-1], np.array(top + [-np.inf] * (k - len(top)), np.float32))
    assert count == len(expected)
    assert list(zip(rows.tolist(), cols.tolist(), values.tolist(), strict=True)) == expected


@needs_kernel
def test_a_range_scan_grows_its_buffers_and_finds_every_candidate() -> None:
    # No floor and k above the range: every score is a candidate, past the first room.
    rng = np.random.default_rng(3)
    questions32 = rng.standard_normal((50, 8)).astype(np.float32)
    documents = rng.standard_normal((1000, 8)).astype(np.float32)
    floor = np.full(50, -np.inf, np.float32)
    row, col, found, best = vector_kernel.scan_range(questions32, documents, (100, 900), 64, 10**4, np.zeros(50), floor)
    # The same products as the scan's, chunk by chunk (one product over another shape may round a
    # float32 score's last bit differently).
    scores = np.concatenate([questions32 @ documents[at : min(at + 64, 900)].T for at in range(100, 900, 64)], axis=1)
    chunks = [numpy_candidates(scores[:, at : at + 64], floor, 100 + at) for at in range(0, 800, 64)]
    expected = [np.concatenate(parts) for parts in zip(*chunks, strict=True)]
    np.testing.assert_array_equal(row, expected[0])
    np.testing.assert_array_equal(col, expected[1])
    np.testing.assert_array_equal(found, expected[2])
    assert best.shape == (50, 10**4) and np.isinf(best[:, 800:]).all()
    np.testing.assert_array_equal(np.sort(best[:, :800], axis=1), np.sort(scores, axis=1))


def kept_rescored(
    row: np.ndarray, col: np.ndarray, values: np.ndarray, threshold: np.ndarray, places: np.ndarray,
    documents: np.ndarray, questions: np.ndarray, room: int,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    assert KERNEL is not None
    out_documents, exact = np.full(room, -1, np.int64), np.full(room, np.nan)
    KERNEL.kept_rescored(
        row, col, values, threshold, places, documents, questions, questions.dtype == np.float32, out_documents,
        exact, len(row), len(documents), len(questions), documents.shape[1], room,
    )  # fmt: skip
    return out_documents, exact


@needs_kernel
@pytest.mark.parametrize("dims", [1, 7, 16, 33, 384])
def test_kept_candidates_are_placed_by_question_with_float64_dot_products(dims: int) -> None:
    rng = np.random.default_rng(dims)
    documents = rng.standard_normal((300, dims)).astype(np.float32)
    row = np.sort(rng.integers(0, 20, 500)).astype(np.int32)
    col = rng.integers(0, 300, 500).astype(np.int32)
    values = rng.standard_normal(500).astype(np.float32)
    threshold = rng.standard_normal(20).astype(np.float32)
    threshold[3] = values[np.flatnonzero(row == 3)[0]] if (row == 3).any() else 0  # a score at its threshold: kept
    threshold[5] = np.nan  # compares false: none kept
    keep = values >= threshold[row]
    counts = np.zeros(20, np.int64)
    assert KERNEL is not None
    KERNEL.kept_counts(row, values, threshold, counts, 500, 20)
    np.testing.assert_array_equal(counts, np.bincount(row[keep], minlength=20))
    assert counts[5] == 0 and ((row == 3).sum() == 0 or counts[3] >= 1)
    starts = np.concatenate([[0], np.cumsum(counts)])
    questions = rng.standard_normal((20, dims)).astype(np.float32)
    wide = questions.astype(np.float64)
    places = starts[:-1].copy()
    got_documents, exact = kept_rescored(row, col, values, threshold, places, documents, wide, int(starts[-1]))
    np.testing.assert_array_equal(places, starts[1:])  # each question's places filled, no more
    np.testing.assert_array_equal(got_documents, col[keep])  # rows ascending: in order
    expected = np.einsum("ij,ij->i", documents[col[keep]].astype(np.float64), wide[row[keep]])
    np.testing.assert_allclose(exact, expected, rtol=0, atol=1e-13 * np.sqrt(dims))
    # Questions that float32 holds exactly, read as float32 (half the bytes): the same sums, bit for bit.
    _, narrow = kept_rescored(row, col, values, threshold, starts[:-1].copy(), documents, questions, int(starts[-1]))
    np.testing.assert_array_equal(narrow, exact)
    # Questions that float32 does not hold are read in float64.
    wider = wide + 1e-12
    _, exact = kept_rescored(row, col, values, threshold, starts[:-1].copy(), documents, wider, int(starts[-1]))
    expected = np.einsum("ij,ij->i", documents[col[keep]].astype(np.float64), wider[row[keep]])
    np.testing.assert_allclose(exact, expected, rtol=0, atol=1e-13 * np.sqrt(dims))
    assert not np.array_equal(exact, narrow)


@needs_kernel
def test_the_kernel_refuses_short_buffers_and_indices_out_of_range() -> None:
    assert KERNEL is not None
    documents = np.zeros((4, 3), np.float32)
    questions = np.zeros((2, 3))
    one = np.ones(1, np.float32)

    def rescore(row: int, col: int, place: int, n_documents: int = 4) -> None:
        rows, cols, places = np.array([row], np.int32), np.array([col], np.int32), np.array([place, 0], np.int64)
        assert KERNEL is not None
        KERNEL.kept_rescored(
            rows, cols, one, np.zeros(2, np.float32), places, documents, questions, False, np.empty(1, np.int64),
            np.empty(1), 1, n_documents, 2, 3, 1,
        )  # fmt: skip

    rescore(0, 3, 0)
    for row, col, place in ((0, 4, 0), (2, 0, 0), (-1, 0, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1)):
        with pytest.raises(IndexError):
            rescore(row, col, place)
    with pytest.raises(ValueError, match="documents"):
        rescore(0, 0, 0, n_documents=5)
    with pytest.raises(IndexError):
        KERNEL.kept_counts(np.array([2], np.int32), one, np.zeros(2, np.float32), np.zeros(2, np.int64), 1, 2)
    with pytest.raises(ValueError, match="counts"):
        KERNEL.kept_counts(np.array([0], np.int32), one, np.zeros(2, np.float32), np.zeros(1, np.int64), 1, 2)
    ranked = [np.zeros(2, np.int64), np.zeros(2), np.array([0, 1, 2], np.int64)]
    out = [np.empty((2, 1), np.int64), np.empty((2, 1)), np.empty(2, np.int64)]
    KERNEL.ranked(*ranked, *out, 0, 2, 1, 1e9)
    with pytest.raises(ValueError, match=r"lo\.\.hi"):
        KERNEL.ranked(*ranked, *out, 0, 3, 1, 1e9)
    with pytest.raises(ValueError, match="ascend"):
        KERNEL.ranked(ranked[0], ranked[1], np.array([0, 2, 1], np.int64), *out, 0, 2, 1, 1e9)
    with pytest.raises(ValueError, match="documents"):  # starts past the candidates
        KERNEL.ranked(ranked[0], ranked[1], np.array([0, 1, 3], np.int64), *out, 0, 2, 1, 1e9)
    with pytest.raises(ValueError, match="exact"):
        KERNEL.ranked(ranked[0], np.zeros(1), ranked[2], *out, 0, 2, 1, 1e9)
    with pytest.raises(ValueError, match="scores"):
        KERNEL.ranked(*ranked, out[0], np.empty(1), out[2], 0, 2, 1, 1e9)
    scores = np.zeros((2, 3), np.float32)
    state = [np.zeros(2, np.float32), np.zeros(2, np.float32), np.zeros(2), np.zeros((2, 2), np.float32)]
    buffers = [np.empty(8, t) for t in "iif"]
    with pytest.raises(ValueError, match="scores"):
        KERNEL.chunk_candidates(scores, *state, np.zeros(2, np.int64), *buffers, 2, 4, 1, 0)
    with pytest.raises(ValueError, match="size"):  # best said to hold 2k already
        KERNEL.chunk_candidates(scores, *state, np.full(2, 2, np.int64), *buffers, 2, 3, 1, 0)
    with pytest.raises(ValueError, match="int32"):  # a column past int32
        KERNEL.chunk_candidates(scores, *state, np.zeros(2, np.int64), *buffers, 2, 3, 1, 2**31 - 3)
    with pytest.raises(ValueError, match="rows"):  # int64 rows: half the room
        KERNEL.chunk_candidates(scores, *state, np.zeros(2, np.int64), np.empty(2, np.int64), *buffers[1:], 2, 3, 1, 0)
    with pytest.raises(ValueError, match="size"):
        KERNEL.kept_best(state[3], np.full(2, 3, np.int64), 2, 1)
    with pytest.raises(ValueError, match="contiguous"):  # a strided view: never read as if contiguous
        KERNEL.chunk_candidates(scores[:, ::2], *state, np.zeros(2, np.int64), *buffers, 2, 2, 1, 0)


def test_the_package_imports_and_searches_without_the_extension(tmp_path: Path) -> None:
    # A fresh interpreter in which the compiled module cannot be imported (an install without a
    # C compiler): the loader falls back to numpy, and the rankings are this process's.
    questions, documents = corpus(4, dims=8)
    expected = cosine_rankings(questions, documents, 20)
    script = textwrap.dedent(
        """
        import sys, numpy as np

        class NoKernel:
            def find_spec(self, name, path=None, target=None):
                if name == "retrieval.methods.support._vector_kernel":
                    raise ImportError("no compiled kernel")

        sys.meta_path.insert(0, NoKernel())
        from retrieval.methods.support import vector_kernel
        from retrieval.methods.vector import cosine_rankings
        assert vector_kernel.KERNEL is None
        data = np.load(sys.argv[1])
        got = cosine_rankings(data["questions"], data["documents"], 20)
        np.savez(sys.argv[1], indices=np.stack([r.indices for r in got]), scores=np.stack([r.scores for r in got]))
        """
    )
    path = tmp_path / "vectors.npz"
    np.savez(path, questions=questions, documents=documents)
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    with np.load(path) as got:
        np.testing.assert_array_equal(got["indices"], np.stack([r.indices for r in expected]))
        np.testing.assert_array_equal(got["scores"], np.stack([r.scores for r in expected]))


@needs_kernel
@pytest.mark.parametrize("k", [1, 2, 7, 64])
def test_kept_best_keeps_each_question_s_k_largest_with_duplicates(k: int) -> None:
    assert KERNEL is not None
    rng = np.random.default_rng(k)
    best = rng.integers(-3, 4, (40, 2 * k)).astype(np.float32)  # many equal values
    sizes = rng.integers(0, 2 * k + 1, 40).astype(np.int64)
    held = [np.sort(row[:size])[::-1][:k] for row, size in zip(best, sizes, strict=True)]
    KERNEL.kept_best(best, sizes, 40, k)
    for row, size, want in zip(best, sizes, held, strict=True):
        assert size == min(len(want), k)
        padded = np.concatenate([want, np.full(k - len(want), -np.inf, np.float32)])
        np.testing.assert_array_equal(np.sort(row[:k])[::-1], padded)


@pytest.mark.parametrize("path", ["kernel", "numpy"])
@pytest.mark.parametrize("seed", range(2))
def test_float32_scores_anywhere_within_their_error_bound_miss_no_document(
    path: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The adversary the margin is for: every float32 score 0.9 of its bound M away from its
    # float64 cosine, towards the wrong side (the documents of the final top, and those tied with
    # its last, pushed down; every other pushed up), in clusters of 800 near-ties (within 1e-7,
    # M about 5e-5) that a depth of 300 cuts through: the 500 outside the top score above it, so
    # the depth-th best float32 score t is about r + 0.9 M (r the depth-th best cosine) and the
    # top's last documents score about t - 1.8 M: candidates with a margin of 2 M, not with M.
    if path == "numpy":
        monkeypatch.setattr(vector_kernel, "KERNEL", None)
    elif KERNEL is None:
        pytest.skip("the C kernel was not built (no C compiler)")
    # The other documents (cosines about 0.05 at most, far below the clusters' 0.5) only take the
    # corpus above the block that starts the chunked search: a block of NUMPY_SCORE_CHUNK, the
    # widest chunk, instead of DOCUMENT_BLOCK, crosses the same paths at a fraction of the cost.
    monkeypatch.setattr(vector, "DOCUMENT_BLOCK", vector.NUMPY_SCORE_CHUNK)
    rng = np.random.default_rng(seed)
    dims, depth = 384, 300
    questions = rng.standard_normal((3, dims))
    questions /= np.linalg.norm(questions, axis=1, keepdims=True)
    parts = [rng.standard_normal((vector.DOCUMENT_BLOCK, dims))]
    for question in questions:
        noise = rng.standard_normal((800, dims))
        noise -= np.outer(noise @ question, question)
        noise /= np.linalg.norm(noise, axis=1, keepdims=True)
        parts.append(0.5 * question + np.sqrt(0.75) * noise)
    documents = np.concatenate(parts)
    documents = rng.permutation(documents / np.linalg.norm(documents, axis=1, keepdims=True)).astype(np.float32)
    questions32 = questions.astype(np.float32)
    with monkeypatch.context() as patch:
        patch.setattr(vector, "DOCUMENT_BLOCK", 10**9)  # one block: every product in float64
        expected = cosine_rankings(questions32, documents, depth)
    last = np.array([ranking.scores[-1] for ranking in expected])
    bound = vector._float32_error(questions32.astype(np.float64), vector._largest_norm(documents))
    assert bound.min() > 1e-5  # far wider than the clusters' spread

    def adversarial(queries: np.ndarray, chunk: np.ndarray, out: np.ndarray) -> None:
        rows = [int(np.flatnonzero((questions32 == query).all(axis=1))[0]) for query in queries]
        exact = queries.astype(np.float64) @ chunk.astype(np.float64).T
        top = np.round(exact, vector.SCORE_DECIMALS) >= last[rows][:, None]
        out[...] = exact + np.where(top, -0.9, 0.9) * bound[rows][:, None]

    monkeypatch.setattr(vector_kernel, "products", adversarial)
    monkeypatch.setattr(vector, "ESTIMATE_SAMPLE", 0)  # no sampled estimate (its products are numpy's)
    got = cosine_rankings(questions32, documents, depth)
    assert_same(got, expected)
    # The adversary moved the order: the float32 top differs from the float64 one in every question.
    scores = np.empty((3, len(documents)), np.float32)
    adversarial(questions32, documents, scores)
    assert all(
        set(np.argsort(-row, kind="stable")[:depth].tolist()) != set(ranking.indices.tolist())
        for row, ranking in zip(scores, expected, strict=True)
    )


def edge_scores(rng: np.random.Generator, m: int) -> np.ndarray:
    """Float64 scores whose rounding and order are hard: exact ties, zeros of both signs, halves
    of the last decimal (ties to even) and their neighbours, infinities, large and tiny values."""
    half = (np.arange(-6, 6) + 0.5) / 10.0**vector.SCORE_DECIMALS
    pool = np.concatenate([
        half, np.nextafter(half, np.inf), np.nextafter(half, -np.inf), [0.0, -0.0, 1e-300, -1e-300],
        [np.inf, -np.inf, 4.5e6, -4.5e6, 2.0**52 / 1e9, 1e12, 0.3, 0.3000000005, 0.3000000015],
        np.round(rng.standard_normal(8), 3),
    ])  # fmt: skip
    return np.where(rng.random(m) < 0.5, rng.choice(pool, m), rng.standard_normal(m) * 10.0 ** rng.integers(-12, 3, m))


@needs_kernel
@pytest.mark.parametrize("k", [1, 3, 50, 400])
def test_ranked_rounds_and_orders_as_top_k(k: int) -> None:
    # Each question's candidates in document order (their documents ascending), ranked by the C
    # kernel, against np.round then top_k: the same documents, the same scores bit for bit (the
    # sign of a zero included), ties to the lower document; a NaN leaves the question to top_k.
    assert KERNEL is not None
    rng = np.random.default_rng(k)
    sizes = rng.integers(0, 2 * k + 5, 30)
    sizes[:3] = [0, k, k + 1]
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    exact = edge_scores(rng, int(starts[-1]))
    exact[starts[5] : starts[5] + 1] = np.nan if sizes[5] else exact[starts[5] : starts[5] + 1]
    documents = np.concatenate([np.sort(rng.choice(10**6, size, replace=False)) for size in sizes]).astype(np.int64)
    indices, scores = np.full((30, k), -1, np.int64), np.full((30, k), np.nan)
    lengths = np.full(30, -2, np.int64)
    KERNEL.ranked(documents, exact, starts, indices, scores, lengths, 0, 17, k, 10.0**vector.SCORE_DECIMALS)
    KERNEL.ranked(documents, exact, starts, indices, scores, lengths, 17, 30, k, 10.0**vector.SCORE_DECIMALS)
    for q in range(30):
        segment = exact[starts[q] : starts[q + 1]]
        if np.isnan(segment).any():
            assert lengths[q] == -1
            continue
        want = top_k(np.round(segment, vector.SCORE_DECIMALS), k)
        assert lengths[q] == len(want) == min(k, sizes[q])
        np.testing.assert_array_equal(indices[q, : lengths[q]], documents[starts[q] : starts[q + 1]][want.indices])
        assert scores[q, : lengths[q]].tobytes() == want.scores.tobytes()
    assert (lengths == -1).sum() == (sizes[5] > 0)


def test_ranked_candidates_rank_a_nan_question_as_top_k(monkeypatch: pytest.MonkeyPatch) -> None:
    # A candidate whose float32 score passed but whose float64 score is NaN cannot come from real
    # vectors; the kernel leaves such a question to top_k, which never ranks a NaN.
    if KERNEL is None:
        pytest.skip("the C kernel was not built (no C compiler)")
    questions, documents = corpus(6)
    expected = cosine_rankings(questions, documents, 30)
    ranked, spoilt = KERNEL.ranked, []

    def with_nan(candidates: np.ndarray, exact: np.ndarray, starts: np.ndarray, *args: Any) -> None:
        if args[3] <= 1 < args[4]:  # the part holding question 1: its candidate ranked best becomes NaN
            at = int(starts[1]) + int(np.argmax(exact[starts[1] : starts[2]]))
            spoilt.append(int(candidates[at]))
            exact[at] = np.nan
        ranked(candidates, exact, starts, *args)

    proxy = SimpleNamespace(**{name: getattr(KERNEL, name) for name in dir(KERNEL) if name[0] != "_"})
    proxy.ranked = with_nan
    monkeypatch.setattr(vector_kernel, "KERNEL", proxy)
    got = cosine_rankings(questions, documents, 30)
    assert_same(got[:1] + got[2:], expected[:1] + expected[2:])
    assert spoilt == [expected[1].indices[0]]  # its best
    assert_same(
        [Ranking(got[1].indices[:29], got[1].scores[:29])], [Ranking(expected[1].indices[1:], expected[1].scores[1:])]
    )
