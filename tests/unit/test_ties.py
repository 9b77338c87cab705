"""Tie exposure: the closed forms against brute-force enumeration of every order of the tied
groups, hand-worked cases, the aggregation, the Markdown section, and the demo's real ties."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import pytest
from demo_fixture import demo_dataset, demo_settings

from retrieval.evaluation.evaluate import evaluate
from retrieval.measures.metrics import recall_at_k, reciprocal_rank
from retrieval.measures.ties import (
    TieInfo,
    render_ties,
    summarize_ties,
    tie_info_for_dataset,
    tie_summary,
    ties_to_dict,
)
from retrieval.methods.base import Context
from retrieval.run.ranking import Ranking


def _ranking(scores: Sequence[float], indices: list[int] | None = None) -> Ranking:
    order = list(range(len(scores))) if indices is None else indices
    return Ranking(np.array(order, dtype=np.int64), np.array(scores, dtype=np.float64))


def _brute_force(ranking: Ranking, relevant: set[int], k: int) -> tuple[list[Fraction], list[Fraction]]:
    """Recall@k and RR@10 of every order of the tied groups (runs of equal scores), exactly."""
    indices, scores = ranking.indices.tolist(), ranking.scores.tolist()
    groups = [list(g) for _, g in itertools.groupby(range(len(indices)), key=lambda i: scores[i])]
    recalls, rrs = [], []
    for orders in itertools.product(*(itertools.permutations(g) for g in groups)):
        ranked = [indices[i] for group in orders for i in group]
        recalls.append(Fraction(len(set(ranked[:k]) & relevant), len(relevant)))
        first = next((rank for rank, d in enumerate(ranked[:10], start=1) if d in relevant), None)
        rrs.append(Fraction(1, first) if first else Fraction(0))
    return recalls, rrs


def _check_against_brute_force(ranking: Ranking, relevant: set[int], k: int) -> TieInfo:
    info = tie_summary(ranking, relevant, k)
    recalls, rrs = _brute_force(ranking, relevant, k)
    assert info.expected_recall == float(sum(recalls) / len(recalls))
    assert info.expected_rr == float(sum(rrs) / len(rrs))
    assert (info.min_recall, info.max_recall) == (float(min(recalls)), float(max(recalls)))
    assert (info.min_rr, info.max_rr) == (float(min(rrs)), float(max(rrs)))
    assert info.dependent == (len(set(recalls)) > 1 or len(set(rrs)) > 1)
    # As ranked: the same figures as the metrics module gives on the ids.
    ids = [str(i) for i in ranking.indices.tolist()]
    assert info.recall == recall_at_k(ids, {str(r) for r in relevant}, k)
    assert info.rr == reciprocal_rank(ids, {str(r) for r in relevant})
    return info


def test_one_group_across_the_cut_off_by_hand() -> None:
    # Ranks 2, 3, 4 tie; the relevant document is one of them; k = 2.
    info = tie_summary(_ranking([3, 2, 2, 2, 1]), {3}, k=2)
    assert info == TieInfo(
        dependent=True,
        expected_recall=1 / 3,
        expected_rr=13 / 36,  # (1/2 + 1/3 + 1/4) / 3
        recall=0.0,
        rr=0.25,
        min_recall=0.0,
        max_recall=1.0,
        min_rr=0.25,
        max_rr=0.5,
        tied_groups=1,
    )


def test_a_group_across_rank_10_by_hand() -> None:
    # Ranks 9..12 tie, one relevant among them: E[RR] = (1/9 + 1/10 + 0 + 0) / 4.
    scores = [20, 19, 18, 17, 16, 15, 14, 13, 5, 5, 5, 5]
    info = tie_summary(_ranking(scores), {11}, k=5)
    assert info.expected_rr == 19 / 360
    assert (info.min_rr, info.max_rr, info.rr) == (0.0, 1 / 9, 0.0)
    assert (info.expected_recall, info.min_recall, info.max_recall) == (0.0, 0.0, 0.0)
    assert info.dependent


def test_two_relevant_in_one_group_by_hand() -> None:
    # t = 4 tied at ranks 1..4 with r = 2 relevant: P(first relevant is j-th) = C(4 - j, 1) / C(4, 2).
    info = tie_summary(_ranking([1, 1, 1, 1, 0]), {0, 2}, k=1)
    assert info.expected_rr == (3 / 1 + 2 / 2 + 1 / 3) / 6
    assert info.expected_recall == 0.25  # 2 relevant * 1 place / 4, over 2 relevant
    assert (info.min_recall, info.max_recall) == (0.0, 0.5)


@pytest.mark.parametrize(
    ("scores", "relevant", "k"),
    [
        ([5, 4, 3, 2, 1], {2}, 2),  # no tie at all
        ([5, 4, 4, 2, 1], {0}, 2),  # a tie of non-relevant documents only
        ([5, 3, 3, 3, 1], {1, 2, 3}, 2),  # a group that is all relevant
        ([20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 1, 1], {11}, 3),  # tied at ranks 11-12: past k and 10
    ],
    ids=["no-tie", "non-relevant-tie", "all-relevant-group", "tie-below-k"],
)
def test_ties_that_do_not_change_the_figure(scores: list[float], relevant: set[int], k: int) -> None:
    info = _check_against_brute_force(_ranking(scores), relevant, k)
    assert not info.dependent
    assert (info.expected_recall, info.expected_rr) == (info.recall, info.rr)


def test_relevant_documents_missing_from_the_ranking_count_as_not_found() -> None:
    info = _check_against_brute_force(_ranking([2, 2, 1], [7, 3, 5]), {3, 9}, k=1)
    assert info.expected_recall == 0.25  # one of two relevant, in one of two tied places
    assert info.max_recall == 0.5


def test_random_rankings_with_many_ties_match_brute_force() -> None:
    # Small corpora, three or four distinct scores (large tied groups), one to four relevant
    # documents, cut-offs 1 to 6; rankings up to 14 long so that groups cross rank 10 too.
    rng = random.Random(2008)
    checked = dependent = 0
    while checked < 150:
        n = rng.randint(2, 14)
        scores = sorted((float(rng.randint(0, rng.choice([2, 3]))) for _ in range(n)), reverse=True)
        sizes = [len(list(g)) for _, g in itertools.groupby(scores)]
        if math.prod(math.factorial(s) for s in sizes) > 720:
            continue
        indices = rng.sample(range(30), n)
        relevant = set(rng.sample(indices, rng.randint(1, min(4, n))))
        if rng.random() < 0.2:
            relevant.add(99)  # a relevant document the ranking does not hold
        info = _check_against_brute_force(_ranking(scores, indices), relevant, rng.randint(1, 6))
        checked += 1
        dependent += info.dependent
    assert dependent > 50  # the cases really exercise ties that matter


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError) as caught:
        tie_summary(_ranking([1.0]), set(), k=5)
    assert str(caught.value) == "tie_summary: a question needs at least one relevant document"
    with pytest.raises(ValueError) as caught:
        tie_summary(_ranking([1.0]), {0}, k=0)
    assert str(caught.value) == "tie_summary: k must be >= 1, got 0"


def test_a_group_cut_at_the_depth_is_flagged() -> None:
    ranking = _ranking([3, 2, 2, 2])
    assert tie_summary(ranking, {2}, k=2, depth=4).truncated
    assert not tie_summary(ranking, {2}, k=2, depth=5).truncated
    assert not tie_summary(ranking, {2}, k=2).truncated


def _info(dependent: bool, recall: float, expected_recall: float, rr: float, expected_rr: float) -> TieInfo:
    return TieInfo(
        dependent=dependent,
        expected_recall=expected_recall,
        expected_rr=expected_rr,
        recall=recall,
        rr=rr,
        min_recall=min(recall, expected_recall),
        max_recall=max(recall, expected_recall) + (0.5 if dependent else 0.0),
        min_rr=min(rr, expected_rr),
        max_rr=max(rr, expected_rr),
        tied_groups=int(dependent),
    )


def test_summary_render_and_dict() -> None:
    infos = {
        "q1": _info(True, 0.0, 0.5, 0.5, 0.75),
        "q2": _info(False, 1.0, 1.0, 1.0, 1.0),
        "q3": _info(False, 1.0, 1.0, 0.25, 0.25),
    }
    summary = summarize_ties(infos, {"q1": "paraphrase", "q2": "identifiant", "q3": "paraphrase"})
    assert summary.questions == 3
    assert summary.dependent == ["q1"]
    assert summary.overall["recall"] == 2 / 3
    assert summary.overall["expected_recall"] == 2.5 / 3
    assert summary.overall["max_recall"] == 3 / 3
    assert summary.overall["expected_rr"] == 2 / 3
    assert summary.by_type["paraphrase"]["expected_rr"] == 0.5
    assert list(summary.by_type) == ["paraphrase", "identifiant"]
    clean = summarize_ties({"q2": infos["q2"]}, {"q2": "identifiant"})
    assert render_ties({"hybrid": summary, "bm25": clean}, k=5) == [
        "### Ties",
        "",
        "Questions whose figure depends on the order of documents with equal scores, and each figure as "
        "ranked, its expected value over all orders of the tied documents (McSherry and Najork, 2008) and "
        "the range those orders give.",
        "",
        "| Method | Tie-dependent | Recall@5 | expected | range | MRR | expected | range |",
        "|---|---|---|---|---|---|---|---|",
        "| hybrid | 1 of 3 | 0.67 | 0.83 | 0.67..1.00 | 0.58 | 0.67 | 0.58..0.67 |",
        "| bm25 | 0 of 1 | 1.00 | 1.00 | 1.00 | 1.00 | 1.00 | 1.00 |",
        "",
        "- hybrid: q1",
        "",
    ]
    assert render_ties({"bm25": clean}, k=5) == []
    as_dict = ties_to_dict({"hybrid": summary})
    assert as_dict["hybrid"]["dependent"] == ["q1"]
    assert as_dict["hybrid"]["questions"] == 3
    assert as_dict["hybrid"]["overall"] == summary.overall


def _demo_rankings() -> tuple[Context, dict[str, list[Ranking]]]:
    """The demo's full rankings of bm25, vector and hybrid, replayed from the demo fixture's cassettes,
    caught by a method that requires them all (as the evaluator would pass them to tie_summary)."""
    caught: dict[str, list[Ranking]] = {}

    class Catch:
        name = "catch"
        requires: tuple[str, ...] = ("bm25", "vector", "hybrid")
        needs_vectors = False

        def rank(self, context: Context) -> list[Ranking]:
            caught.update(context.rankings)
            return context.rankings["hybrid"]

    settings = demo_settings()
    dataset = demo_dataset()
    evaluate(dataset, settings, mode="replay", methods=[], extra=[Catch()])
    return Context(dataset=dataset, depth=settings.depth), caught


def test_demo_tie_exposure() -> None:
    context, rankings = _demo_rankings()
    dataset = context.dataset
    questions = [(q.id, q.relevant) for q in dataset.questions]
    types = {q.id: q.type for q in dataset.questions}
    summaries = {
        m: summarize_ties(tie_info_for_dataset(dataset.doc_ids, questions, rankings[m], 5, context.depth), types)
        for m in ("bm25", "vector", "hybrid")
    }
    # One question: q25's relevant proc-webhooks ties with HEL-4140 at ranks 1-2 of hybrid
    # (1st and 2nd against 2nd and 1st); the id puts HEL-4140 first.
    assert {m: s.dependent for m, s in summaries.items()} == {"bm25": [], "vector": [], "hybrid": ["q25"]}
    q25 = tie_info_for_dataset(dataset.doc_ids, questions, rankings["hybrid"], 5)["q25"]
    assert (q25.rr, q25.expected_rr, q25.min_rr, q25.max_rr) == (0.5, 0.75, 0.5, 1.0)
    hybrid = {name: round(value, 4) for name, value in summaries["hybrid"].overall.items()}
    assert hybrid == {
        "recall": 0.64,
        "expected_recall": 0.64,
        "min_recall": 0.64,
        "max_recall": 0.64,
        "rr": 0.6124,
        "expected_rr": 0.6224,
        "min_rr": 0.6124,
        "max_rr": 0.6324,
    }
    for method in ("bm25", "vector"):
        overall = summaries[method].overall
        assert overall["rr"] == overall["expected_rr"] == overall["min_rr"] == overall["max_rr"]
