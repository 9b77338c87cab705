"""Which remedy reaches each failure: hand-built runs with exact remedies, and the demo."""

from __future__ import annotations

import json

import numpy as np
import pytest
from demo_deep_run import demo_run

from retrieval.data.dataset import Question
from retrieval.diagnosis.remedies import Remedy, diagnose, remedy_summary, render_diagnosis
from retrieval.diagnosis.sweeps import FusionSettings, Setup, measured_chars_per_token, sweeps, token_ratio
from retrieval.measures.fusion import reciprocal_rank_fusion
from retrieval.methods.prompts import PROMPT_VERSION, render_rerank_prompt
from retrieval.run.cost import Usage
from retrieval.run.ranking import Ranking
from retrieval.run.results import MethodResult, QuestionResult, Run

DOCS = ["b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "y", "z"]
REQUIRES = {"bm25": (), "vector": (), "hybrid": ("bm25", "vector")}
SETUP = Setup(
    requires=REQUIRES,
    candidate_sources={},
    documents={d: (f"titre {d}", f"texte {d}") for d in DOCS},
    candidates=2,
    fusion={"hybrid": FusionSettings(5)},
    kept={m: 100 for m in REQUIRES},
    k=2,
    top=2,
)


def _method(ids: list[str], relevant: tuple[str, ...]) -> MethodResult:
    return MethodResult(ids, [0.0] * len(ids), {d: ids.index(d) + 1 if d in ids else None for d in relevant})


def _question(qid: str, relevant: str, bm25: list[str], vector: list[str]) -> QuestionResult:
    """bm25 and vector as given, hybrid fused by retrieval.measures.fusion at k = 5."""
    index = {d: i for i, d in enumerate(DOCS)}
    rankings = [
        Ranking(np.asarray([index[d] for d in lst], dtype=np.int64), np.zeros(len(lst))) for lst in (bm25, vector)
    ]
    hybrid = [DOCS[i] for i in reciprocal_rank_fusion(rankings, len(DOCS), k=5).indices]
    q = Question(qid, f"question {qid}", "paraphrase", (relevant,))
    return QuestionResult(
        q,
        {
            "bm25": _method(bm25, q.relevant),
            "vector": _method(vector, q.relevant),
            "hybrid": _method(hybrid, q.relevant),
        },
    )


def _run() -> Run:
    rest = ["f", "g", "h", "i", "j", "k"]
    results = [
        # d is vector's 2nd but c (bm25 2nd, vector 10th) passes it: hybrid b, c, d.
        _question("q1", "d", ["b", "c"], ["b", "d", "e", *rest, "c", "y", "z"]),
        # c is hybrid's 2nd: among the 2 candidates.
        _question("q2", "c", ["b", "c"], ["b", "c", "d", "e", *rest, "y", "z"]),
        # z is last everywhere: vocabulary mismatch.
        _question("q3", "z", ["b"], ["b", "c", "d", "e", *rest, "y", "z"]),
        # y is vector's 4th, hybrid's 5th (e, bm25's 4th, ties with it and comes first in the corpus).
        _question("q4", "y", ["b", "c", "d", "e"], ["b", "c", "d", "y", "e", *rest, "z"]),
        # d is vector's 2nd, but c (bm25 2nd, vector 3rd) passes it at every tried k and weight.
        _question("q6", "d", ["b", "c"], ["b", "d", "c", "e", *rest, "y", "z"]),
        # Not a failure: b first.
        _question("q5", "b", ["b"], ["b", "c", "d", "e", *rest, "y", "z"]),
    ]
    return Run("hand", "f", {}, ["bm25", "vector", "hybrid"], results)


def test_hand_built_failures_get_exact_remedies() -> None:
    run = _run()
    assert [r.methods["hybrid"].ids[:5] for r in run.results[:4]] == [
        ["b", "c", "d", "e", "f"],
        ["b", "c", "d", "e", "f"],
        ["b", "c", "d", "e", "f"],
        ["b", "c", "d", "e", "y"],
    ]
    found = {d.question_id: d for d in diagnose(run, SETUP, "hybrid", counts=(3, 4))}
    assert list(found) == ["q1", "q2", "q3", "q4", "q6"]
    q1 = found["q1"].remedies
    assert [r.kind for r in q1] == ["more candidates", "fusion settings"]
    # The third candidate adds "\n\n[3] id: d\ntitle: titre d\ntext: texte d" (40 characters): 10 tokens.
    assert len("\n\n[3] id: d\ntitle: titre d\ntext: texte d") == 40
    assert (q1[0].candidates, q1[0].extra_input_tokens) == (3, 10)
    assert q1[1].settings == [
        {"rrf_k": 5, "weights": [1.0, 2.0], "rank": 2, "exact": True},
        {"rrf_k": 5, "weights": [1.0, 3.0], "rank": 2, "exact": True},
    ]
    assert q1[1].detail == "d: vector rank 2, hybrid rank 3; kept in the fused top 2 by weights (1, 2), (1, 3) at k 5"
    assert found["q2"].remedies == [
        Remedy(
            "reorder", "c is at hybrid rank 2, among the candidates: a reranker over hybrid's top 2 could put it first"
        )
    ]
    assert found["q3"].remedies == [
        Remedy(
            "rewrite or enrich",
            "out of every list's top 4: vocabulary mismatch: only query rewriting or document enrichment can help",
            vocabulary_mismatch=True,
        )
    ]
    assert found["q3"].ranks == {"z": {"bm25": None, "vector": 12, "hybrid": 12}}
    q6 = found["q6"].remedies
    assert [(r.kind, r.candidates, r.settings) for r in q6] == [
        ("more candidates", 3, []),
        ("fusion settings", None, []),
    ]
    assert q6[1].detail == "d: vector rank 2, hybrid rank 3; no tried setting keeps it in the top 2"
    assert found["q4"].remedies == [
        Remedy(
            "rewrite or enrich",
            "y is beyond hybrid's top 4 and no fusion setting tried keeps it (its best rank in any list: vector 4): "
            "only query rewriting or document enrichment can help",
        )
    ]


def test_hand_built_summary_rows() -> None:
    run = _run()
    diagnoses = diagnose(run, SETUP, "hybrid", counts=(3, 4))
    rows = remedy_summary(diagnoses, run, SETUP, counts=(3, 4))
    assert [(r["remedy"], r["questions"]) for r in rows] == [
        ("reorder (hybrid top 2)", ["q2"]),
        ("more candidates (3 of hybrid)", ["q1", "q6"]),
        ("more candidates (4 of hybrid)", ["q1", "q6"]),
        ("fusion settings (hybrid)", ["q1"]),
        ("query rewriting or document enrichment", ["q3", "q4"]),
    ]
    assert rows[-1]["cost"] == (
        "rewriting: +1 LLM call per question (6 a run); "
        "enrichment: 1 LLM call per document at indexing, once (12 documents)"
    )


def test_a_reranker_is_diagnosed_through_its_candidate_source() -> None:
    base = _run()
    results = [QuestionResult(r.question, {**r.methods, "rerank": r.methods["hybrid"]}) for r in base.results]
    run = Run("hand", "f", {}, ["bm25", "vector", "hybrid", "rerank"], results)
    setup = Setup(
        **{**SETUP.__dict__, "requires": {**REQUIRES, "rerank": ("hybrid",)}, "candidate_sources": {"rerank": "hybrid"}}
    )
    found = {d.question_id: d for d in diagnose(run, setup, "rerank", counts=(3, 4))}
    assert (
        found["q2"].remedies[0].detail == "c is at hybrid rank 2, among the candidates: the reranker could put it first"
    )
    assert [r.kind for r in found["q1"].remedies] == ["more candidates", "fusion settings"]
    assert remedy_summary(list(found.values()), run, setup, counts=(3, 4))[0]["cost"] == (
        "none: the reranker already reads these candidates (its ordering failed)"
    )


@pytest.fixture(scope="module")
def deep():
    return demo_run(100)


def test_demo_proc_restauration_is_reachable_with_30_candidates(deep) -> None:
    _, run, setup = deep
    diagnoses = diagnose(run, setup, "hybrid")
    assert [d.question_id for d in diagnoses] == [
        "q11",
        "q12",
        "q13",
        "q14",
        "q15",
        "q16",
        "q17",
        "q18",
        "q19",
        "q20",
        "q25",
    ]
    summary = remedy_summary(diagnoses, run, setup)
    as_json = {"diagnoses": [d.as_dict() for d in diagnoses], "summary": summary}
    assert json.loads(json.dumps(as_json)) == as_json  # JSON-ready as it is
    lines = render_diagnosis(diagnoses, summary)
    start = lines.index("- **q11** Comment revenir à l'état d'hier après une fausse manipulation ?  ")
    assert lines[start + 2 : start + 5] == [
        "  - `proc-restauration`: bm25 not ranked, vector 7, hybrid 21",
        "  - more candidates: proc-restauration is at hybrid rank 21: within the top 30 "
        "(+2,699 estimated input tokens for this question)",
        "  - fusion settings: proc-restauration: vector rank 7, hybrid rank 21; kept in the fused top 20 by "
        "RRF k in {1} or weights (1, 3) at k 60",
    ]
    assert lines[-7:] == [
        "| Remedy | Questions it could reach | Cost |",
        "|---|---|---|",
        "| reorder (hybrid top 20) | 7: q13, q14, q15, q16, q18, q19, q25 "
        "| a reranker over hybrid's top 20: 25 calls, ≈137,141 input tokens a run |",
        "| more candidates (30 of hybrid) | 1: q11 | +66,337 estimated rerank input tokens a run (+48%) |",
        "| more candidates (50 of hybrid) | 2: q11, q12 | +199,941 estimated rerank input tokens a run (+146%) |",
        "| fusion settings (hybrid) | 3: q11, q12, q16 "
        "| none: no model call (check the other questions in the fusion sweep) |",
        "| query rewriting or document enrichment | 2: q17, q20 | rewriting: +1 LLM call per question (25 a run); "
        "enrichment: 1 LLM call per document at indexing, once (64 documents) |",
    ]
    assert diagnoses[0].as_dict()["remedies"][1]["settings"] == [
        {"rrf_k": 1, "weights": [1.0, 1.0], "rank": 17, "exact": True},
        {"rrf_k": 60, "weights": [1.0, 3.0], "rank": 19, "exact": True},
    ]


def test_demo_run_kept_to_20_gives_token_lower_bounds() -> None:
    _, run, setup = demo_run(20)
    diagnoses = diagnose(run, setup, "hybrid")
    assert diagnoses[0].remedies[0].detail == (
        "proc-restauration is at hybrid rank 21: within the top 30 "
        "(at least +0 estimated input tokens for this question)"
    )
    assert remedy_summary(diagnoses, run, setup)[1]["cost"] == "at least +0 estimated rerank input tokens a run (+0%)"


def test_a_method_or_pool_missing_from_the_run_is_refused() -> None:
    setup = Setup(**{**SETUP.__dict__, "candidate_sources": {"rerank": "hybrid"}})
    with pytest.raises(
        ValueError, match=r"^cannot diagnose rerank: rerank is not in the run \(bm25, hybrid, vector\)$"
    ):
        diagnose(_run(), setup, "rerank")


def test_token_estimates_calibrate_on_the_rerankers_measured_tokens() -> None:
    base = _run()
    results = [QuestionResult(r.question, {**r.methods, "rerank": r.methods["hybrid"]}) for r in base.results]
    setup = Setup(
        **{**SETUP.__dict__, "requires": {**REQUIRES, "rerank": ("hybrid",)}, "candidate_sources": {"rerank": "hybrid"}}
    )
    prompts = [
        render_rerank_prompt(r.question.text, [(d, *setup.documents[d]) for d in r.methods["hybrid"].ids[:2]])
        for r in results
    ]
    chars = sum(len(p) for p in prompts)
    usage = Usage()
    usage.add(6, 589, 50)  # the provider counted 589 input tokens: 6 characters per token
    methods = ["bm25", "vector", "hybrid", "rerank"]
    # A reranker whose calls are not the listwise prompt (pointwise, a rerank API) calibrates nothing.
    pointwise = Run("hand", "f", {"rerank.prompt": "rerank-pointwise-v1"}, methods, results, {"rerank": usage})
    assert token_ratio(pointwise, setup, "hybrid")[0] == 4.0
    run = Run("hand", "f", {"rerank.prompt": PROMPT_VERSION}, methods, results, {"rerank": usage})
    assert chars == 3534 and measured_chars_per_token(run, setup, "rerank") == 6.0
    assert token_ratio(run, setup, "hybrid") == (
        6.0,
        "estimated: rendered rerank prompt characters / 6.00, the characters per token measured "
        "on this run's rerank calls (589 input tokens)",
    )
    # q1's prompt grows from 589 to 629 characters with a third candidate: ceil(629 / 6) - ceil(589 / 6)
    # = 6 tokens at 6 characters per token (10 at 4).
    q1 = diagnose(run, setup, "rerank", counts=(3, 4))[0].remedies[0]
    assert (q1.kind, q1.candidates, q1.extra_input_tokens) == ("more candidates", 3, 6)
    (sweep,) = sweeps(run, setup)["candidates"]
    assert (sweep["chars_per_token"], sweep["token_rule"]) == token_ratio(run, setup, "hybrid")
    # Without measured tokens: Gemini's documented 4 characters per token.
    assert token_ratio(base, SETUP, "hybrid")[0] == 4.0
