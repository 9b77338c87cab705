"""What-if sweeps: the fusion recomputed from kept rankings, candidate counts and their tokens."""

from __future__ import annotations

import json

import numpy as np
import pytest
from demo_deep_run import demo_run

from retrieval.diagnosis.sweeps import (
    candidate_sweep,
    estimate_tokens,
    fusion_sweep,
    render_sweeps,
    rerank_tokens,
    sweeps,
)
from retrieval.measures.fusion import reciprocal_rank_fusion
from retrieval.measures.metrics import score_method
from retrieval.measures.refusion import Fused, fuse_kept, fuse_top, keep_depths, kept_lists, required_depth
from retrieval.methods.prompts import render_rerank_prompt
from retrieval.run.ranking import Ranking
from retrieval.run.results import Run

ORDER = {"a": 0, "b": 1, "c": 2, "d": 3}


@pytest.fixture(scope="module")
def deep():
    """The demo run with every ranking kept (64 documents, kept to 100)."""
    return demo_run(100)


@pytest.fixture(scope="module")
def shallow():
    """The demo run as the evaluator keeps it today: top 20."""
    return demo_run(20)


def test_fuse_top_hand_built_scores_and_corpus_order_ties() -> None:
    # k=1: a = 1/2 + 1/3, c = 1/4 + 1/2, b = 1/3; d is in no list and is left out.
    assert fuse_top([["a", "b", "c"], ["c", "a"]], [True, True], ORDER, 1).ids == ["a", "c", "b"]
    # a first in one list, b first in the other: equal scores, the lower corpus position wins.
    tied = fuse_top([["b"], ["a"]], [True, True], ORDER, 60)
    assert tied.ids == ["a", "b"] and tied.exact
    # Weights (1, 3): c = 1/2 + 3/1... the second list dominates.
    assert fuse_top([["a", "b"], ["b", "c"]], [True, True], ORDER, 0, (1.0, 3.0)).ids == ["b", "c", "a"]


def test_fuse_top_marks_a_top_that_a_cut_list_could_reorder() -> None:
    # The first list was cut at 2: c may sit at its rank 3, scoring up to 1/3 + 1/4 > a's 1/2.
    lists = [["a", "b"], ["b", "c"]]
    assert fuse_top(lists, [False, True], ORDER, 1, top=1) == fuse_top(lists, [False, True], ORDER, 1, top=1)
    first = fuse_top(lists, [False, True], ORDER, 1, top=1)
    assert (first.ids, first.exact) == (["b"], True)
    two = fuse_top(lists, [False, True], ORDER, 1, top=2)
    assert (two.ids, two.exact) == (["b", "a"], False)
    # The same lists known complete: exact.
    assert fuse_top(lists, [True, True], ORDER, 1, top=2).exact


def test_fuse_top_counts_documents_in_no_kept_list() -> None:
    # k=1: a = 1/2 + 1/2, b = 1/3 from the complete list. c, in neither kept list, may sit at
    # rank 2 of the cut list and tie b at 1/3; c comes first in the corpus, so b's place is unsure.
    lists = [["a"], ["a", "b"]]
    fused = fuse_top(lists, [False, True], {"a": 0, "c": 1, "b": 2}, 1, top=2)
    assert (fused.ids, fused.exact) == (["a", "b"], False)
    # With the cut list complete, c is in no ranking at all and scores nothing.
    assert fuse_top(lists, [True, True], {"a": 0, "c": 1, "b": 2}, 1, top=2).exact


def test_fuse_top_matches_retrieval_fusion_on_random_rankings() -> None:
    rng = np.random.default_rng(13)
    ids = [f"d{i}" for i in range(40)]
    order = {d: i for i, d in enumerate(ids)}
    for trial in range(50):
        lists = [rng.permutation(40)[: rng.integers(1, 41)] for _ in range(2)]
        rankings = [Ranking(np.asarray(lst), np.zeros(len(lst))) for lst in lists]
        k = int(rng.choice([0, 1, 5, 60]))
        expected = reciprocal_rank_fusion(rankings, 40, k=k, depth=20)
        got = fuse_top([[ids[i] for i in lst] for lst in lists], [True, True], order, k)
        assert got.ids == [ids[i] for i in expected.indices], trial
        assert got.exact


def reference_fuse_top(lists, complete, order, k, weights=None, top=20) -> Fused:
    """ORACLE: fuse_top as first written, a loop over documents and lists with Python floats;
    the vectorised fuse_kept must give the same ids and the same exactness."""
    w = list(weights) if weights is not None else [1.0] * len(lists)
    positions = [{d: r for r, d in enumerate(ranking, start=1)} for ranking in lists]
    seen = list(dict.fromkeys(d for ranking in lists for d in ranking))
    low: dict[str, float] = {}
    high: dict[str, float] = {}
    for d in seen:
        lo = hi = 0.0
        for j, ranks in enumerate(positions):
            if d in ranks:
                lo += w[j] / (k + ranks[d])
                hi += w[j] / (k + ranks[d])
            elif not complete[j]:
                hi += w[j] / (k + len(lists[j]) + 1)
        low[d], high[d] = lo, hi
    best = {
        d: min(ranks[d] for j, ranks in enumerate(positions) if d in ranks and w[j] > 0)
        for d in seen
        if any(d in ranks and w[j] > 0 for j, ranks in enumerate(positions))
    }
    seen = [d for d in seen if d in best]
    ranked = sorted(seen, key=lambda d: (-low[d], best[d], order[d]))
    unseen = sum(w[j] / (k + len(ranking) + 1) for j, ranking in enumerate(lists) if not complete[j])
    threat = [0.0] * (len(ranked) + 1)
    threat[len(ranked)] = unseen if len(seen) < len(order) else 0.0
    for i in range(len(ranked) - 1, -1, -1):
        d = ranked[i]
        threat[i] = max(threat[i + 1], high[d] if high[d] > low[d] else 0.0)
    shown = ranked[:top]
    exact = all(low[d] > threat[i + 1] for i, d in enumerate(shown))
    if len(shown) < top and threat[len(ranked)] > 0.0:
        exact = False
    return Fused(shown, exact)


def test_fuse_kept_matches_the_reference_loop_on_cut_weighted_tied_lists() -> None:
    rng = np.random.default_rng(7)
    ids = [f"d{i:02d}" for i in range(30)]
    order = {d: i for i, d in enumerate(ids)}
    inexact = 0
    for trial in range(300):
        n = int(rng.integers(1, 4))
        # Short lists over a small corpus: many ties, documents cut from one list but not another.
        lists = [[ids[i] for i in rng.permutation(30)[: rng.integers(0, 12)]] for _ in range(n)]
        complete = [bool(rng.integers(0, 2)) for _ in range(n)]
        weights = tuple(float(rng.choice([0.0, 1.0, 2.0, 3.0])) for _ in range(n))
        k, top = int(rng.choice([0, 1, 5, 60])), int(rng.choice([1, 3, 20]))
        expected = reference_fuse_top(lists, complete, order, k, weights, top)
        assert fuse_kept(kept_lists(lists, complete, order), k, weights, top) == expected, trial
        inexact += not expected.exact
    assert 50 < inexact < 250  # both outcomes are exercised


def test_required_depth_is_the_least_depth_with_a_strict_margin() -> None:
    # 2 / (100 + D + 1) < 1 / (100 + 20): D = 139 gives equality, so 140.
    assert required_depth((100,), ((1.0, 1.0),), 20) == 140
    assert 2 / (100 + 139 + 1) == 1 / 120
    assert required_depth((100,), ((1.0, 3.0),), 20) == 380
    assert required_depth() == 380


def test_estimate_tokens_and_rerank_tokens_follow_the_rendered_prompt() -> None:
    assert estimate_tokens("abcd") == 1 and estimate_tokens("abcde") == 2 and estimate_tokens("") == 0
    docs = {"a": ("Titre A", "texte a"), "b": ("", "texte b")}
    prompt = render_rerank_prompt("Q ?", [("a", "Titre A", "texte a"), ("b", "", "texte b")])
    answer = '{"ranking": ["a", "b"]}'
    assert rerank_tokens("Q ?", ["a", "b"], docs) == (-(-len(prompt) // 4), -(-len(answer) // 4))
    # One candidate: the reranker makes no call.
    assert rerank_tokens("Q ?", ["a"], docs) == (0, 0)


def test_demo_sweep_at_the_runs_own_settings_reproduces_its_hybrid_figures(deep) -> None:
    _, run, setup = deep
    sweep = fusion_sweep(run, setup, "hybrid")
    (own,) = [p for p in sweep["points"] if p["current"]]
    assert (own["rrf_k"], own["weights"], own["approximate"]) == (60, [1.0, 1.0], [])
    relevant = {r.question.id: r.question.relevant for r in run.results}
    types = {r.question.id: r.question.type for r in run.results}
    hybrid = score_method(run.ranked_ids("hybrid"), relevant, types, ["recall@5", "mrr"]).overall
    assert (own["recall@5"], own["mrr"]) == (hybrid["recall@5"], hybrid["mrr"])
    assert (own["recall@5"], round(own["mrr"], 6)) == (0.64, 0.612381)
    assert sweep["required_depth"] == 380
    assert len(sweep["points"]) == 24 and all(p["approximate"] == [] for p in sweep["points"])


def test_demo_candidate_sweep_reaches_proc_restauration_at_30(deep) -> None:
    _, run, setup = deep
    sweep = candidate_sweep(run, setup, "hybrid")
    rows = [
        (p["candidates"], p["reached"], p["input_tokens"], p["extra_input_tokens"], p["newly_reached"])
        for p in sweep["points"]
    ]
    assert rows == [
        (10, 18, 70372, -66769, []),
        (20, 21, 137141, 0, []),
        (30, 22, 203478, 66337, ["q11"]),
        (50, 23, 337082, 199941, ["q11", "q12"]),
    ]
    assert [p["approximate_tokens"] for p in sweep["points"]] == [[], [], [], []]


def test_demo_sweeps_render(deep) -> None:
    _, run, setup = deep
    data = sweeps(run, setup)
    assert json.loads(json.dumps(data)) == data  # JSON-ready as it is
    lines = render_sweeps(data)
    assert lines[4:8] == [
        "| 10 | 18/25 | 0.72 | 70,372 | 1,284 | -66,769 | -q13, -q14, -q15 |",
        "| 20 (this run) | 21/25 | 0.84 | 137,141 | 2,469 | +0 | - |",
        "| 30 | 22/25 | 0.88 | 203,478 | 3,597 | +66,337 | +q11 |",
        "| 50 | 23/25 | 0.92 | 337,082 | 6,019 | +199,941 | +q11, +q12 |",
    ]
    start = lines.index("#### hybrid: recall@5 / MRR by RRF k and weights (bm25, vector)")
    assert lines[start + 2 : start + 10] == [
        "| RRF k | (1, 1) | (1, 2) | (2, 1) | (1, 3) |",
        "|---|---|---|---|---|",
        "| 1 | 0.78 / 0.68 | 0.86 / 0.74 | 0.66 / 0.61 | 0.86 / 0.73 |",
        "| 5 | 0.74 / 0.65 | 0.86 / 0.74 | 0.64 / 0.59 | 0.86 / 0.75 |",
        "| 10 | 0.70 / 0.63 | 0.78 / 0.73 | 0.64 / 0.58 | 0.82 / 0.74 |",
        "| 30 | 0.64 / 0.61 | 0.74 / 0.68 | 0.64 / 0.58 | 0.74 / 0.72 |",
        "| 60 | **0.64 / 0.61** | 0.70 / 0.64 | 0.64 / 0.58 | 0.70 / 0.68 |",
        "| 100 | 0.64 / 0.61 | 0.70 / 0.64 | 0.64 / 0.58 | 0.70 / 0.65 |",
    ]


def test_demo_run_kept_to_20_is_marked_approximate(shallow) -> None:
    _, run, setup = shallow
    sweep = fusion_sweep(run, setup, "hybrid")
    # Only q19 (bm25 matched 1 document, so its list is complete) is exact at some settings: the
    # top 20 is then vector's kept top 20, which nothing beyond vector rank 20 can outscore.
    ids = [r.question.id for r in run.results]
    exact = {(p["rrf_k"], tuple(p["weights"])): sorted(set(ids) - set(p["approximate"])) for p in sweep["points"]}
    assert sorted(key for key, qs in exact.items() if qs) == [
        (1, (1.0, 1.0)),
        (1, (1.0, 2.0)),
        (1, (2.0, 1.0)),
        (5, (1.0, 1.0)),
        (5, (2.0, 1.0)),
        (10, (1.0, 1.0)),
        (10, (2.0, 1.0)),
        (30, (1.0, 1.0)),
        (30, (2.0, 1.0)),
        (60, (1.0, 1.0)),
        (60, (2.0, 1.0)),
        (100, (1.0, 1.0)),
        (100, (2.0, 1.0)),
    ]
    assert {q for qs in exact.values() for q in qs} == {"q19"}
    tokens = candidate_sweep(run, setup, "hybrid")
    assert [len(p["approximate_tokens"]) for p in tokens["points"]] == [0, 0, 25, 25]
    # Reach reads each relevant document's rank in the full ranking: exact at any kept depth.
    assert [(p["reached"], p["newly_reached"]) for p in tokens["points"]] == [
        (18, []),
        (21, []),
        (22, ["q11"]),
        (23, ["q11", "q12"]),
    ]
    lines = render_sweeps(sweeps(run, setup))
    assert lines[6:8] == [
        "| 30 | 22/25 | 0.88 | ≥137,141 | ≥2,469 | ≥+0 | +q11 |",
        "| 50 | 23/25 | 0.92 | ≥137,141 | ≥2,469 | ≥+0 | +q11, +q12 |",
    ]
    assert lines[-2] == (
        "≈: 25 question(s) could not be fused again exactly from the kept rankings "
        "(q01, q02, q03, q04, q05 …); keep first-stage rankings to depth 380 or more."
    )


def test_a_run_without_the_fused_methods_inputs_has_no_fusion_sweep(deep) -> None:
    _, run, setup = deep
    only_vector = Run(
        run.dataset,
        run.fingerprint,
        run.config,
        ["vector"],
        [type(r)(r.question, {"vector": r.methods["vector"]}) for r in run.results],
    )
    assert sweeps(only_vector, setup) == {"candidates": [], "fusion": []}


def test_keep_depths_for_the_builtin_declarations() -> None:
    requires = {"bm25": (), "vector": (), "hybrid": ("bm25", "vector"), "rerank": ("hybrid",)}
    assert keep_depths(requires, {"rerank": "hybrid"}) == {"bm25": 380, "vector": 380, "hybrid": 50}
    # No reranker declared (the local profile): hybrid is the list a reranker would read.
    assert keep_depths(requires, {}, weight_grid=((1.0, 1.0),)) == {"bm25": 140, "vector": 140, "hybrid": 50}


def test_a_list_switched_off_by_a_weight_of_zero_sweeps_and_renders(deep) -> None:
    # hybrid_weights = [0.0, 1.0] is documented as switching bm25 off: the report's sweep must
    # not divide by the smallest weight (it raised ZeroDivisionError).
    from dataclasses import replace

    from retrieval.diagnosis.sweeps import FusionSettings

    _, run, setup = deep
    off = replace(setup, fusion={**setup.fusion, "hybrid": FusionSettings(60, (0.0, 1.0))})
    sweep = fusion_sweep(run, off, "hybrid")
    assert sweep["current"] == {"rrf_k": 60, "weights": [0.0, 1.0]}
    (own,) = [p for p in sweep["points"] if p["current"]]
    vector = score_method(
        run.ranked_ids("vector"),
        {r.question.id: r.question.relevant for r in run.results},
        {r.question.id: r.question.type for r in run.results},
        ["recall@5", "mrr"],
    ).overall
    # With bm25 off, the fusion is the vector ranking.
    assert (own["recall@5"], own["mrr"]) == (vector["recall@5"], vector["mrr"])
    assert "| RRF k | (1, 1) | (1, 2) | (2, 1) | (1, 3) | (0, 1) |" in render_sweeps(sweeps(run, off))
    assert required_depth((60,), ((0.0, 1.0),), 20) == required_depth((60,), ((1.0,),), 20) == 20
