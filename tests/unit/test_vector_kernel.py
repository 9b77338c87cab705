"""The vector search's optional C kernel (retrieval.methods.support.vector_kernel) gives the same
candidates, scores and rankings as numpy's path, and the package searches without it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import numpy as np
import pytest

from retrieval.methods import vector
from retrieval.methods.support import vector_kernel
from retrieval.methods.vector import DOCUMENT_BLOCK, cosine_rankings
from retrieval.run.ranking import Ranking

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
    for depth in (1, 10, 1000):
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
