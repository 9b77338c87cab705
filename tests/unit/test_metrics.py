"""Metrics: the seed's worked examples, the extra metrics, means, and a cross-check against
ir_measures (trec_eval through pytrec_eval, and ir_measures' own RR@10) on random runs."""

from __future__ import annotations

import math

import ir_measures
import numpy as np
import pytest
from ir_measures import RR, R, Success, nDCG

from retrieval.measures.metrics import (
    hit_rate_at_k,
    metric_names,
    ndcg_at_k,
    recall_at_k,
    reciprocal_rank,
    score_method,
)

RANKED = ["d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8", "d9", "d10", "d11", "d12"]


# --- the seed's worked examples --------------------------------------------------------------


def test_relevant_first_gives_reciprocal_rank_1() -> None:
    assert reciprocal_rank(RANKED, {"d1"}) == 1.0


def test_relevant_third_gives_reciprocal_rank_one_third() -> None:
    rr = reciprocal_rank(RANKED, {"d3"})
    assert rr == pytest.approx(1 / 3)
    assert round(rr, 2) == 0.33  # the seed's figure


def test_absent_relevant_gives_0() -> None:
    assert reciprocal_rank(RANKED, {"nowhere"}) == 0.0
    assert recall_at_k(RANKED, {"nowhere"}) == 0.0


def test_relevant_beyond_rank_10_gives_0() -> None:
    assert reciprocal_rank(RANKED, {"d10"}) == pytest.approx(0.1)
    assert reciprocal_rank(RANKED, {"d11"}) == 0.0
    assert reciprocal_rank(RANKED, {"d12"}) == 0.0


def test_two_relevant_one_found_gives_recall_at_5_one_half() -> None:
    assert recall_at_k(RANKED, {"d2", "nowhere"}, k=5) == 0.5
    assert recall_at_k(RANKED, {"d2", "d5"}, k=5) == 1.0
    assert recall_at_k(RANKED, {"d2", "d6"}, k=5) == 0.5  # d6 is 6th: outside the top 5


def test_reciprocal_rank_uses_the_first_relevant_document() -> None:
    assert reciprocal_rank(RANKED, {"d4", "d2"}) == 0.5


def test_recall_of_a_question_without_relevant_document_is_an_error() -> None:
    with pytest.raises(ValueError, match="relevant"):
        recall_at_k(RANKED, set())


# --- hit rate and nDCG -----------------------------------------------------------------------


def test_hit_rate_at_k() -> None:
    assert hit_rate_at_k(RANKED, {"d5"}, k=5) == 1.0
    assert hit_rate_at_k(RANKED, {"d6"}, k=5) == 0.0
    assert hit_rate_at_k(RANKED, {"d1", "d6"}, k=5) == 1.0
    assert hit_rate_at_k(RANKED, {"d6"}, k=6) == 1.0


def test_ndcg_at_10() -> None:
    assert ndcg_at_k(RANKED, {"d1"}) == pytest.approx(1.0)
    assert ndcg_at_k(RANKED, {"d2"}) == pytest.approx(1 / math.log2(3))
    assert ndcg_at_k(RANKED, {"d1", "d3"}) == pytest.approx((1 + 1 / 2) / (1 + 1 / math.log2(3)))
    assert ndcg_at_k(RANKED, {"d11"}) == 0.0  # beyond the cut-off
    assert ndcg_at_k(RANKED, {"d1", "nowhere"}) == pytest.approx(1 / (1 + 1 / math.log2(3)))


def test_metric_names() -> None:
    assert metric_names(5) == ["recall@5", "mrr"]
    assert metric_names(3, extra=True) == ["recall@3", "mrr", "hit@3", "ndcg@10"]


# --- means overall and per type ---------------------------------------------------------------


def test_score_method_means_overall_and_per_type() -> None:
    ranked = {
        "q1": ["a", "b", "c"],  # relevant a at 1
        "q2": ["b", "c", "a"],  # relevant a at 3
        "q3": ["x", "y", "z"],  # relevant a absent
        "q4": ["b", "x", "y"],  # relevant a, b: b at 1
    }
    relevant = {"q1": ["a"], "q2": ["a"], "q3": ["a"], "q4": ["a", "b"]}
    types = {"q1": "identifiant", "q2": "paraphrase", "q3": "paraphrase", "q4": "mixte"}
    scores = score_method(ranked, relevant, types, metric_names(5, extra=True))

    assert scores.per_question["q2"]["mrr"] == pytest.approx(1 / 3)
    assert scores.per_question["q4"]["recall@5"] == 0.5
    assert scores.overall["mrr"] == pytest.approx((1 + 1 / 3 + 0 + 1) / 4)
    assert scores.overall["recall@5"] == pytest.approx((1 + 1 + 0 + 0.5) / 4)
    assert scores.overall["hit@5"] == pytest.approx(3 / 4)
    assert set(scores.by_type) == {"identifiant", "paraphrase", "mixte"}
    assert scores.by_type["paraphrase"]["mrr"] == pytest.approx((1 / 3 + 0) / 2)
    assert scores.by_type["paraphrase"]["recall@5"] == pytest.approx(0.5)
    assert scores.by_type["identifiant"]["mrr"] == 1.0
    assert scores.by_type["mixte"]["recall@5"] == 0.5


def test_score_method_rejects_unknown_metric() -> None:
    with pytest.raises(ValueError, match="unknown metric"):
        score_method({"q": ["a"]}, {"q": ["a"]}, {"q": "t"}, ["precision@5"])


# --- cross-check against an independent implementation ---------------------------------------


def _random_runs(n_queries: int = 200, seed: int = 20260415):
    """Random corpus of 50 ids, relevant sets of 1-20 documents (often more than k = 5 and more
    than nDCG's cut-off of 10, where the ideal ranking is cut too), random permutations (some cut)."""
    rng = np.random.default_rng(seed)
    corpus = [f"doc{i:02d}" for i in range(50)]
    ranked, relevant = {}, {}
    for q in range(n_queries):
        qid = f"q{q:03d}"
        relevant[qid] = [corpus[i] for i in rng.choice(50, size=int(rng.integers(1, 21)), replace=False)]
        order = [corpus[i] for i in rng.permutation(50)]
        if q % 5 == 2:
            # Every relevant document first: with more relevant documents than k, recall@5
            # tops out at 5 / |relevant|, the edge an implementation dividing by k gets wrong.
            order = relevant[qid] + [d for d in order if d not in relevant[qid]]
        if q % 3 == 1:
            # Move one relevant document to a random rank from 1 to 12, so that first places,
            # places within 10 and just beyond 10 all occur whatever the seed.
            order.remove(relevant[qid][0])
            order.insert(int(rng.integers(0, 12)), relevant[qid][0])
        # A quarter of the runs are cut short, so some relevant documents are never retrieved.
        ranked[qid] = order[: int(rng.integers(3, 50))] if q % 4 == 0 else order
    return ranked, relevant


def _scored(ranked: dict[str, list[str]], depth: int | None = None) -> list[ir_measures.ScoredDoc]:
    # trec_eval sorts by score and breaks ties by doc id: distinct scores keep our order.
    return [
        ir_measures.ScoredDoc(qid, doc, float(len(ids) - rank))
        for qid, ids in ranked.items()
        for rank, doc in enumerate(ids[:depth])
    ]


def test_metrics_match_ir_measures_on_random_runs() -> None:
    ranked, relevant = _random_runs()
    qrels = [ir_measures.Qrel(qid, doc, 1) for qid, docs in relevant.items() for doc in docs]
    types = {qid: "all" for qid in relevant}
    ours = score_method(ranked, relevant, types, ["recall@5", "mrr", "hit@5", "ndcg@10"])
    names = {R @ 5: "recall@5", RR @ 10: "mrr", nDCG @ 10: "ndcg@10", Success @ 5: "hit@5"}

    # R@5, nDCG@10 and Success@5 come from trec_eval (pytrec_eval), RR@10 from ir_measures' own
    # code (its msmarco provider).
    theirs = list(ir_measures.iter_calc(list(names), qrels, _scored(ranked)))
    assert len(theirs) == 4 * len(ranked)
    for metric in theirs:
        expected = ours.per_question[metric.query_id][names[metric.measure]]
        assert metric.value == pytest.approx(expected, abs=1e-9), (metric, expected)

    # trec_eval's reciprocal rank on runs cut at 10 is RR@10.
    cut = list(ir_measures.pytrec_eval.iter_calc([RR], qrels, _scored(ranked, depth=10)))
    assert {m.query_id for m in cut} == set(ranked)
    for metric in cut:
        assert metric.value == pytest.approx(ours.per_question[metric.query_id]["mrr"], abs=1e-9)

    aggregate = ir_measures.calc_aggregate(list(names), qrels, _scored(ranked))
    for measure, name in names.items():
        assert aggregate[measure] == pytest.approx(ours.overall[name], abs=1e-9)

    # The random runs exercise every case: first, deeper, beyond 10, never retrieved, partial
    # recall.
    rr = [v["mrr"] for v in ours.per_question.values()]
    recalls = [v["recall@5"] for v in ours.per_question.values()]
    assert 1.0 in rr and 0.0 in rr and any(0 < x < 1 for x in rr)
    assert any(0 < x < 1 for x in recalls)
    capped = [q for q in relevant if len(relevant[q]) > 5 and relevant[q][:5] == ranked[q][:5]]
    assert capped and all(ours.per_question[q]["recall@5"] == 5 / len(relevant[q]) for q in capped)
    # More relevant documents than nDCG's cut-off: a perfect top 10 scores exactly 1, imperfect ones
    # less; an ideal summed over every relevant document would put both below 1.
    deep = [q for q in relevant if len(relevant[q]) > 10]
    perfect = [q for q in deep if set(ranked[q][:10]) <= set(relevant[q]) and len(ranked[q]) >= 10]
    assert len(deep) > 50 and perfect
    assert all(ours.per_question[q]["ndcg@10"] == pytest.approx(1.0, abs=1e-12) for q in perfect)
    assert any(0 < ours.per_question[q]["ndcg@10"] < 1 for q in deep)
