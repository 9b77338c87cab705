"""Reciprocal rank fusion, and the deterministic top-k every ranking is built with."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.fusion import DEFAULT_RRF_K, reciprocal_rank_fusion
from retrieval.ranking import Ranking, rank_of, top_k


def _ranking(*indices: int) -> Ranking:
    return Ranking(np.array(indices, dtype=np.int64), np.arange(len(indices), 0, -1, dtype=np.float64))


def test_default_k_is_60() -> None:
    assert DEFAULT_RRF_K == 60


def test_rrf_scores_are_exact() -> None:
    bm25 = _ranking(0, 1, 2)
    vector = _ranking(2, 0, 3)
    fused = reciprocal_rank_fusion([bm25, vector], n_documents=5)
    scores = dict(zip(fused.indices.tolist(), fused.scores.tolist(), strict=True))
    assert scores == {
        0: 1 / (60 + 1) + 1 / (60 + 2),
        2: 1 / (60 + 3) + 1 / (60 + 1),
        1: 1 / (60 + 2),
        3: 1 / (60 + 3),
    }
    assert fused.indices.tolist() == [0, 2, 1, 3]


def test_rrf_k_is_configurable() -> None:
    bm25 = _ranking(0, 1)
    vector = _ranking(1, 2)
    fused = reciprocal_rank_fusion([bm25, vector], n_documents=3, k=10)
    scores = dict(zip(fused.indices.tolist(), fused.scores.tolist(), strict=True))
    assert scores == {0: 1 / 11, 1: 1 / 12 + 1 / 11, 2: 1 / 12}
    assert fused.indices.tolist() == [1, 0, 2]


def test_k_changes_the_order() -> None:
    # Doc 0 is first in one list only; doc 1 is second in both. A small k rewards the first
    # place more than steady seconds, a large k the other way round.
    a, b = _ranking(0, 1, 2, 3, 4), _ranking(5, 1, 6, 7, 0)
    assert reciprocal_rank_fusion([a, b], 8, k=0).indices[0] == 0
    assert reciprocal_rank_fusion([a, b], 8, k=60).indices[0] == 1


def test_negative_k_is_refused() -> None:
    with pytest.raises(ValueError, match="k"):
        reciprocal_rank_fusion([_ranking(0)], 1, k=-1)


@pytest.mark.parametrize("swap", [False, True])
def test_ties_go_to_the_lower_corpus_index(swap: bool) -> None:
    # Doc 3 is 1st then 3rd, doc 1 is 3rd then 1st: equal scores, whatever the list order.
    a, b = _ranking(3, 0, 1), _ranking(1, 2, 3)
    rankings = [b, a] if swap else [a, b]
    fused = reciprocal_rank_fusion(rankings, n_documents=4)
    assert fused.scores[0] == fused.scores[1]
    assert fused.indices.tolist()[:2] == [1, 3]
    assert fused.indices.tolist() == [1, 3, 0, 2]


def test_many_ties_are_ordered_by_corpus_index() -> None:
    fused = reciprocal_rank_fusion([_ranking(7), _ranking(2), _ranking(9), _ranking(4)], 10)
    assert fused.indices.tolist() == [2, 4, 7, 9]
    assert len(set(fused.scores.tolist())) == 1


def test_documents_absent_from_every_ranking_are_left_out() -> None:
    fused = reciprocal_rank_fusion([_ranking(5, 1), _ranking(1, 8)], n_documents=10)
    assert sorted(fused.indices.tolist()) == [1, 5, 8]
    assert len(fused) == 3
    assert (fused.scores > 0).all()


def test_depth_truncates_the_fused_ranking() -> None:
    full = reciprocal_rank_fusion([_ranking(4, 3, 2, 1, 0), _ranking(0, 1, 2, 3, 4)], 6)
    top = reciprocal_rank_fusion([_ranking(4, 3, 2, 1, 0), _ranking(0, 1, 2, 3, 4)], 6, depth=2)
    assert top.indices.tolist() == full.indices.tolist()[:2]
    # 0 and 4 tie at 1/61 + 1/65, 1 and 3 at 1/62 + 1/64, then 2 at 2/63: lower index first.
    assert full.indices.tolist() == [0, 4, 1, 3, 2]
    assert top.indices.tolist() == [0, 4]


def test_rank_of() -> None:
    ranking = _ranking(4, 2, 9)
    assert rank_of(ranking, 4) == 1
    assert rank_of(ranking, 9) == 3
    assert rank_of(ranking, 5) is None


# --- top_k: the partial path must equal the full sort's prefix ----------------------------------


def _reference_order(scores: np.ndarray) -> list[int]:
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def test_full_sort_is_by_score_then_index() -> None:
    scores = np.array([0.5, 0.9, 0.5, 0.1, 0.9])
    full = top_k(scores)
    assert full.indices.tolist() == [1, 4, 0, 2, 3]
    assert full.scores.tolist() == [0.9, 0.9, 0.5, 0.5, 0.1]


def test_partial_top_k_equals_the_full_sort_prefix_with_many_ties() -> None:
    rng = np.random.default_rng(7)
    for trial in range(150):
        n = int(rng.integers(1, 60))
        # Few distinct values: most depths cut through a group of ties.
        scores = rng.integers(0, int(rng.integers(1, 6)), size=n).astype(np.float64)
        if trial % 3 == 0:
            scores = scores / 7.0  # non-integer values too
        full = top_k(scores)
        assert full.indices.tolist() == _reference_order(scores)
        for depth in range(0, n + 2):
            part = top_k(scores, depth)
            assert part.indices.tolist() == full.indices.tolist()[:depth], (scores, depth)
            assert part.scores.tolist() == full.scores.tolist()[:depth]


def test_top_k_of_nothing() -> None:
    assert len(top_k(np.array([]))) == 0
    assert len(top_k(np.array([1.0, 2.0]), 0)) == 0
