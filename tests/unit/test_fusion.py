"""Reciprocal rank fusion, and the deterministic top-k every ranking is built with."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.measures.fusion import DEFAULT_RRF_K, reciprocal_rank_fusion
from retrieval.run.ranking import Ranking, rank_of, top_k


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
    # Doc 3 is 1st then 3rd, doc 1 is 3rd then 1st: equal scores, whatever the list order,
    # and the same best single rank (1): the lower corpus index (the lower id) goes first.
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


@pytest.mark.parametrize("swap", [False, True])
def test_equal_scores_go_first_to_the_better_rank_in_any_single_list(swap: bool) -> None:
    # k = 0: doc 4 is 2nd in both lists (1/2 + 1/2), docs 6 and 3 are each 1st in one list
    # only (1/1): three equal scores. Docs 3 and 6 hold a 1st place, doc 4 never better than
    # 2nd, so doc 4 comes last of the three although the index rule alone would put it before 6.
    a, b = _ranking(6, 4, 0), _ranking(3, 4, 5)
    rankings = [b, a] if swap else [a, b]
    fused = reciprocal_rank_fusion(rankings, n_documents=7, k=0)
    scores = dict(zip(fused.indices.tolist(), fused.scores.tolist(), strict=True))
    assert scores[4] == scores[6] == scores[3] == 1.0
    assert fused.indices.tolist() == [3, 6, 4, 0, 5]


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 2, 0)])
def test_equal_contributions_tie_exactly_whatever_the_order_of_addition(order: tuple[int, int, int]) -> None:
    # Doc 5 is 1st, 2nd, 7th and doc 2 is 7th, 1st, 2nd: the same three terms, whose float sum
    # in list order differs in its last bit (1/61 + 1/62 + 1/67 vs 1/67 + 1/61 + 1/62).
    lists = [
        _ranking(5, 10, 11, 12, 13, 14, 2),
        _ranking(2, 5, 15, 16, 17, 18, 19),
        _ranking(20, 2, 21, 22, 23, 24, 5),
    ]
    fused = reciprocal_rank_fusion([lists[i] for i in order], n_documents=25)
    assert fused.scores[0] == fused.scores[1]
    assert fused.indices.tolist()[:2] == [2, 5]


def test_fusion_does_not_depend_on_the_order_of_the_lists() -> None:
    # Random lists over small corpora (many ties), random weights, k from 0 to 4: the same
    # fused ranking and bit-identical scores when the lists (and their weights) are reversed.
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(2, 30))
        lists = [_ranking(*rng.permutation(n)[: int(rng.integers(1, n + 1))]) for _ in range(int(rng.integers(2, 5)))]
        weights = rng.choice([0.0, 0.5, 1.0, 2.0], size=len(lists)).tolist()
        k = int(rng.integers(0, 5))
        forward = reciprocal_rank_fusion(lists, n, k=k, weights=weights)
        backward = reciprocal_rank_fusion(lists[::-1], n, k=k, weights=weights[::-1])
        assert forward.indices.tolist() == backward.indices.tolist()
        assert forward.scores.tobytes() == backward.scores.tobytes()


def test_weighted_scores_are_exact() -> None:
    bm25, vector = _ranking(0, 1, 2), _ranking(2, 0, 3)
    fused = reciprocal_rank_fusion([bm25, vector], n_documents=5, weights=[0.5, 2.0])
    scores = dict(zip(fused.indices.tolist(), fused.scores.tolist(), strict=True))
    assert scores == {
        2: 0.5 / 63 + 2.0 / 61,
        0: 0.5 / 61 + 2.0 / 62,
        3: 2.0 / 63,
        1: 0.5 / 62,
    }
    assert fused.indices.tolist() == [2, 0, 3, 1]


def test_unit_weights_are_plain_rrf() -> None:
    lists = [_ranking(4, 3, 2, 1, 0), _ranking(0, 2, 4, 1)]
    plain = reciprocal_rank_fusion(lists, 6)
    weighted = reciprocal_rank_fusion(lists, 6, weights=[1, 1.0])
    assert plain.indices.tolist() == weighted.indices.tolist() == [4, 2, 0, 1, 3]
    assert plain.scores.tobytes() == weighted.scores.tobytes()


def test_a_zero_weight_switches_a_list_off() -> None:
    # Doc 9 is only in the switched-off list: left out; its ranks break no tie either.
    fused = reciprocal_rank_fusion([_ranking(1, 2), _ranking(9, 2, 1)], n_documents=10, weights=[1.0, 0.0])
    assert fused.indices.tolist() == [1, 2]
    assert fused.scores.tolist() == [1 / 61, 1 / 62]
    assert len(reciprocal_rank_fusion([_ranking(1)], 2, weights=[0.0])) == 0


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ([1.0], "RRF weights: give one weight per ranking (2), got 1"),
        ([1.0, 1.0, 1.0], "RRF weights: give one weight per ranking (2), got 3"),
        ([1.0, -0.5], "RRF weights must be finite numbers >= 0, got -0.5"),
        ([float("nan"), 1.0], "RRF weights must be finite numbers >= 0, got nan"),
        ([1.0, float("inf")], "RRF weights must be finite numbers >= 0, got inf"),
        ([True, 1.0], "RRF weights must be finite numbers >= 0, got True"),
        (["1", 1.0], "RRF weights must be finite numbers >= 0, got '1'"),
    ],
)
def test_bad_weights_are_refused(weights: list[object], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        reciprocal_rank_fusion([_ranking(0), _ranking(1)], 2, weights=weights)  # type: ignore[arg-type]
    assert str(caught.value) == message


def test_an_index_outside_the_corpus_is_refused() -> None:
    with pytest.raises(ValueError) as caught:
        reciprocal_rank_fusion([_ranking(0, 3)], 3)
    assert str(caught.value) == "RRF: a ranking holds a corpus index outside 0..2"
