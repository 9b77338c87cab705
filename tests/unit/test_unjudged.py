"""The unjudged documents of the base-branch comparison, on the demo: the documents that entered a
method's top 5, and the base branch's figures recomputed from its top-10 snapshot as if they (or
holes filled since) had been judged relevant, equal to the figures an evaluation under those
judgments gives."""

from __future__ import annotations

from dataclasses import replace

import pytest
from demo_fixture import demo_dataset, demo_settings

from retrieval.data.dataset import Question
from retrieval.evaluation.evaluate import evaluate
from retrieval.gate.schema import entry_for
from retrieval.gate.snapshots import top_rankings
from retrieval.gate.unjudged import as_if_judged, counted_relevant, entered_unjudged, filled_holes
from retrieval.measures.metrics import score_run
from retrieval.run.results import Run


@pytest.fixture(scope="module")
def runs() -> tuple[Run, Run]:
    """bm25 on the demo, and bm25 with other settings: the base branch's run and the pull request's."""
    dataset = demo_dataset()
    base = evaluate(dataset, demo_settings(methods=("bm25",)))
    changed = evaluate(dataset, demo_settings(methods=("bm25",), bm25_k1=0.3, bm25_b=0.1))
    return base, changed


def _figures(entry: dict) -> dict:
    return {m: {k: v for k, v in f.items() if k != "degraded"} for m, f in entry["methods"].items()}


def test_the_documents_that_entered_a_top_k_unjudged(runs: tuple[Run, Run]) -> None:
    base, changed = runs
    snapshots = top_rankings(base)
    entered = entered_unjudged(changed, snapshots, 5)
    assert entered, "other BM25 settings bring other documents into the top 5"
    tops = {r.question.id: r for r in changed.results}
    for e in entered:
        result = tops[e.question]
        assert result.methods["bm25"].ids[e.rank - 1] == e.document
        assert e.document not in snapshots["bm25"][e.question][:5]
        assert e.document not in result.question.judgments
    assert entered_unjudged(base, snapshots, 5) == []  # nothing entered: the same rankings


def test_the_base_figures_as_if_the_entered_documents_had_been_judged_relevant(runs: tuple[Run, Run]) -> None:
    base, changed = runs
    entry = entry_for(base, score_run(base, 5), 5)
    entered = entered_unjudged(changed, top_rankings(base), 5)
    after = counted_relevant(changed, entered, 1)
    # What the base branch's run scores under the same judgments, evaluated for real.
    expected_run = counted_relevant(base, entered, 1)
    expected = entry_for(expected_run, score_run(expected_run, 5), 5)
    rescored = as_if_judged(entry, top_rankings(base), after, {e.question for e in entered}, 5)
    assert _figures(rescored) == _figures(expected)
    assert rescored["questions"] == expected["questions"] and rescored["judgments"] == expected["judgments"]
    assert _figures(rescored) != _figures(entry)  # it moved: some entered documents are in the base's top 10


def test_a_hole_filled_since_the_baseline_counts_on_both_sides(runs: tuple[Run, Run]) -> None:
    base, changed = runs
    entry = entry_for(base, score_run(base, 5), 5)
    [first, *_] = entered_unjudged(changed, top_rankings(base), 5)
    judged: list = []
    for r in changed.results:
        q = r.question
        if q.id == first.question:  # judged relevant on the page: a hole filled
            grades = {**dict(q.judgments), first.document: 3}
            q = Question(q.id, q.text, q.type, (*q.relevant, first.document), tuple(grades.items()))
        judged.append(replace(r, question=q))
    after = replace(changed, results=judged)
    assert filled_holes(after, entry) == (first.question,)
    assert filled_holes(changed, entry) == ()
    rescored = as_if_judged(entry, top_rankings(base), after, filled_holes(after, entry), 5)
    expected_run = counted_relevant(base, [first], 3)
    expected = entry_for(expected_run, score_run(expected_run, 5), 5)
    assert _figures(rescored) == _figures(expected)
    # An existing judgment changed is not a hole filled: the gate's old rule applies to it.
    edited = [
        replace(r, question=replace(r.question, relevant=(), grades=((r.question.relevant[0], 0),)))
        if r.question.id == first.question
        else r
        for r in after.results
    ]
    assert filled_holes(replace(after, results=edited), entry) == ()
