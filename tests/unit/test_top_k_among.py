"""top_k_among over documents in any order gives top_k's Ranking over them sorted by index:
same documents, same order, ties to the lower index (BM25 ranks from unsorted sparse columns)."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.run.ranking import top_k, top_k_among


@pytest.mark.parametrize("seed", range(300))
def test_equals_top_k_over_the_sorted_documents(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 60))
    indices = rng.choice(10_000, size=n, replace=False)
    # Few distinct scores: most candidates tie, at the threshold and above it.
    scores = rng.integers(0, 4, size=n).astype(np.float64) / 4
    depth = int(rng.integers(0, n + 3))
    by_index = np.argsort(indices)
    expected = top_k(scores[by_index], depth)
    got = top_k_among(scores, indices, depth)
    np.testing.assert_array_equal(got.indices, indices[by_index][expected.indices])
    np.testing.assert_array_equal(got.scores, expected.scores)
    assert got.indices.dtype == np.int64


def test_ties_at_the_threshold_go_to_the_lowest_indices_whatever_their_positions() -> None:
    got = top_k_among(np.array([1.0, 2.0, 1.0, 1.0]), np.array([9, 5, 3, 7]), 3)
    assert got.indices.tolist() == [5, 3, 7]
    assert got.scores.tolist() == [2.0, 1.0, 1.0]
