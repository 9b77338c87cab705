"""Judged@k equals ir_measures' Judged@k on random runs with holes; per method, per type and per
question in the report and the run log; and an LLM judge's agreement with people (Cohen's kappa,
the confusion table), checked on Cohen's own worked figures."""

from __future__ import annotations

import json
from pathlib import Path

import ir_measures
import numpy as np
import pytest
from ir_measures import Judged

from retrieval.data.dataset import Document, Question
from retrieval.data.judgment_merge import LLMCheck
from retrieval.measures.agreement import agreements, cohen_kappa, confusion
from retrieval.measures.judged import judged_at_k, judged_run, score_judged, unjudged_at_k
from retrieval.report.build import build_report, render_json
from retrieval.report.sections import render_markdown
from retrieval.run.results import MethodResult, QuestionResult, Run, load_run, run_log


def _runs_with_holes(seed: int = 11) -> tuple[dict[str, list[str]], dict[str, list[float]], dict[str, dict[str, int]]]:
    """400 questions over 300 documents: each judges 0 to 30 documents (grades -1 to 3, so
    "judged not relevant" and negative grades occur), runs of 1 to 40 documents with tied scores,
    judged documents favoured near the top so that every share from 0 to 1 occurs."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i:03}" for i in range(300)]
    ranked, scores, judged = {}, {}, {}
    for q in range(400):
        qid = f"q{q}"
        chosen = rng.choice(300, size=int(rng.integers(0, 31)), replace=False)
        judged[qid] = {docs[i]: int(rng.integers(-1, 4)) for i in chosen}
        depth = int(rng.integers(1, 41))
        favoured = [d for d in judged[qid] if rng.random() < 0.5]
        rest = [docs[i] for i in rng.permutation(300) if docs[i] not in favoured]
        pool = (favoured + rest)[:depth]
        # Scores in steps of 0.5 give ties; the ranking is ir_measures' order (score, then id).
        raw = sorted(((float(depth - r) // 2 / 2, d) for r, d in enumerate(pool)), key=lambda x: (-x[0], x[1]))
        ranked[qid] = [d for _, d in raw]
        scores[qid] = [s for s, _ in raw]
    return ranked, scores, judged


def test_judged_at_k_equals_ir_measures_on_random_runs_with_holes() -> None:
    ranked, scores, judged = _runs_with_holes()
    qrels = [ir_measures.Qrel(q, d, g) for q, grades in judged.items() for d, g in grades.items()]
    run = [ir_measures.ScoredDoc(q, d, s) for q in ranked for d, s in zip(ranked[q], scores[q], strict=True)]
    types = {q: "even" if int(q[1:]) % 2 == 0 else "odd" for q in ranked}
    compared = 0
    for k in (1, 5, 10, 20):
        theirs = {m.query_id: m.value for m in ir_measures.iter_calc([Judged @ k], qrels, run)}
        ours = score_judged(ranked, {q: judged[q].keys() for q in ranked}, types, k)
        # ir_measures leaves out a question with no judgment at all; ours is 0 there (all of its
        # top k is unjudged), which is what a hole means.
        for qid, value in ours.per_question.items():
            if qid in theirs:
                assert value == pytest.approx(theirs[qid], abs=1e-12), (k, qid)
                compared += 1
            else:
                assert not judged[qid] and value == 0.0
        assert ours.overall == pytest.approx(np.mean(list(ours.per_question.values())))
        assert ours.by_type["even"] == pytest.approx(
            np.mean([v for q, v in ours.per_question.items() if types[q] == "even"])
        )
        # The unjudged documents are exactly what is missing from the share.
        for qid, holes in ours.unjudged.items():
            top = ranked[qid][:k]
            assert holes == [d for d in top if d not in judged[qid]]
            assert ours.per_question[qid] == pytest.approx(1 - len(holes) / len(top))
        values = list(ours.per_question.values())
        assert 0.0 in values and 1.0 in values and (k == 1 or any(0 < v < 1 for v in values)), k
    assert compared > 1400
    # A run shorter than k is judged over what it holds, as ir_measures does.
    assert judged_at_k(["a", "b"], {"a"}, 10) == 0.5
    assert judged_at_k([], {"a"}, 5) == 1.0
    assert unjudged_at_k(["a", "b", "c"], {"b"}, 2) == ["a"]


def _run() -> Run:
    def result(qid: str, qtype: str, grades: tuple[tuple[str, int], ...], tops: dict[str, list[str]]) -> QuestionResult:
        relevant = tuple(d for d, g in grades if g > 0)
        methods = {m: MethodResult(ids, [float(-i) for i in range(len(ids))], {}) for m, ids in tops.items()}
        return QuestionResult(Question(qid, f"text {qid}", qtype, relevant, grades), methods)

    return Run(
        "fixture",
        "sha256:x",
        {"k": 3, "profile": "p"},
        ["bm25", "vector"],
        [
            result("q1", "a", (("d1", 1), ("d2", 0)), {"bm25": ["d1", "d2", "d3"], "vector": ["d4", "d1", "d5"]}),
            result("q2", "b", (("d3", 2),), {"bm25": ["d3", "d1"], "vector": ["d3", "d6", "d7", "d8"]}),
        ],
    )


DOCUMENTS = [Document(f"d{i}", f"titre {i}", f"texte {i}") for i in range(1, 9)]


def test_the_report_and_the_run_log_give_judged_at_k_per_method_type_and_question() -> None:
    run = _run()
    judged = judged_run(run, 3)
    assert judged["bm25"].per_question == {"q1": pytest.approx(2 / 3), "q2": 0.5}
    assert judged["vector"].unjudged == {"q1": ["d4", "d5"], "q2": ["d6", "d7"]}
    assert judged["vector"].by_type == {"a": pytest.approx(1 / 3), "b": pytest.approx(1 / 3)}
    report = build_report(run, DOCUMENTS, {})
    markdown = render_markdown(report)
    section = markdown.split("### Judged@3: what the figures rest on")[1].split("###")[0]
    assert "| Method | Judged@3 | Judged@3 a | Judged@3 b | Unjudged in the top 3 |" in section
    assert "| bm25 | 0.58 | 0.67 | 0.50 | 2 |" in section
    assert "| vector | 0.33 | 0.33 | 0.33 | 4 |" in section
    assert "6 (question, document) pair(s) of the methods' top 3 are unjudged: `python -m retrieval judge`" in section
    assert "- **q1** (a): bm25 0.67: `d3`; vector 0.33: `d4`, `d5`" in section
    assert "- **q2** (b): bm25 0.50: `d1`; vector 0.33: `d6`, `d7`" in section
    assert json.loads(render_json(report))["judged"]["vector"]["unjudged"] == {"q1": ["d4", "d5"], "q2": ["d6", "d7"]}
    # The run log holds the same figures (its own arithmetic, so they are compared here).
    lines = [json.loads(line) for line in run_log(run).splitlines()]
    for method, scores in judged.items():
        assert lines[0]["judged@3"][method]["overall"] == pytest.approx(scores.overall)
        assert lines[0]["judged@3"][method]["by_type"] == pytest.approx(scores.by_type)
        for line in lines[1:]:
            assert line["judged@3"][method] == pytest.approx(scores.per_question[line["question"]])
            assert line["unjudged@3"][method] == scores.unjudged.get(line["question"], [])


def test_a_run_log_with_judged_figures_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text(run_log(_run()), encoding="utf-8")
    again = load_run(path)
    assert judged_run(again, 3) == judged_run(_run(), 3)


def test_cohen_kappa_on_cohens_worked_example() -> None:
    # The textbook 2x2 case: 50 items, 20 yes-yes, 5 yes-no, 10 no-yes, 15 no-no: p_o 0.7, p_e 0.5.
    pairs = [(1, 1)] * 20 + [(1, 0)] * 5 + [(0, 1)] * 10 + [(0, 0)] * 15
    assert cohen_kappa(pairs) == pytest.approx(0.4)
    assert confusion(pairs) == {0: {0: 15, 1: 10}, 1: {0: 5, 1: 20}}
    # Three categories (Fleiss, Cohen & Everitt's 3x3 table): p_o 0.70, p_e 0.41.
    table = {(0, 0): 44, (0, 1): 5, (0, 2): 1, (1, 0): 7, (1, 1): 20, (1, 2): 3, (2, 0): 9, (2, 1): 5, (2, 2): 6}
    three = [pair for pair, n in table.items() for _ in range(n)]
    rows = {a: sum(n for (x, _), n in table.items() if x == a) / 100 for a in range(3)}
    cols = {b: sum(n for (_, y), n in table.items() if y == b) / 100 for b in range(3)}
    chance = sum(rows[g] * cols[g] for g in range(3))
    assert cohen_kappa(three) == pytest.approx((0.70 - chance) / (1 - chance))
    assert cohen_kappa([(2, 2)] * 5) is None  # one grade on both sides: nothing to correct
    assert cohen_kappa([(1, 1), (0, 0)]) == 1.0
    assert cohen_kappa([(1, 0), (0, 1)]) == -1.0
    assert cohen_kappa([]) is None


def test_agreement_per_model_in_the_report() -> None:
    checks = [
        LLMCheck("q1", f"d{i}", "m", people, llm) for i, (people, llm) in enumerate([(0, 0), (3, 2), (1, 0), (2, 2)])
    ]
    checks.append(LLMCheck("q1", "d9", "other", 1, 1))
    found = {a.model: a for a in agreements(checks, relevant_grade=1)}
    assert found["m"].pairs == 4 and found["m"].exact == 0.5
    assert found["m"].confusion == {
        0: {0: 1, 1: 0, 2: 0, 3: 0},
        1: {0: 1, 1: 0, 2: 0, 3: 0},
        2: {0: 0, 1: 0, 2: 1, 3: 0},
        3: {0: 0, 1: 0, 2: 1, 3: 0},
    }
    # Relevant or not from grade 1: (0,0) (1,0) (1,1) (1,1): p_o 0.75, p_e 0.5.
    assert found["m"].binary_kappa == pytest.approx(0.5)
    assert found["other"].kappa is None
    report = build_report(_run(), DOCUMENTS, {}, llm_checks=checks, llm_judgments=7)
    markdown = render_markdown(report)
    section = markdown.split("### LLM judge `llm:m` against people")[1].split("###")[0]
    assert "On the 4 pair(s) both judged" in section
    assert f"Cohen's kappa {found['m'].kappa:.2f} on the grades, 0.50 on relevant or not (from grade 1)" in section
    assert "the same grade for 50% of them. Its grades do not count (accept_llm_judgments is false)." in section
    assert "| People's grade ↓, the LLM's → | 0 | 1 | 2 | 3 |" in section
    assert "| 3 | 0 | 0 | 1 | 0 |" in section
    assert "undefined (one grade on both sides)" in markdown.split("`llm:other`")[1]
    assert "7 judgment(s) of judgments.jsonl are an LLM's proposals (`llm:`): not counted" in markdown
