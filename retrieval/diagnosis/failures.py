"""Why questions fail: failures at rank 1, recall failures versus ranking failures.

A *recall failure* means no relevant document reached the pipeline's candidate pool
(the top `candidates` of the method's declared candidate source, or of the method
itself): no reordering can fix it. A *ranking failure* means a relevant document was
among the candidates but not first. For each failure we give the relevant documents'
ranks in the full ranking of every first-stage method (one that reads no other method),
and the analysed terms the question shares with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from retrieval.data.analyzer import analyze, language_of
from retrieval.measures.metrics import MethodScores
from retrieval.run.results import QuestionResult, Run

__all__ = ["Failure", "RelevantTrace", "best_method", "failure_kind", "failures_at_rank_1", "where", "where_relevant"]


@dataclass(frozen=True)
class RelevantTrace:
    """Where one relevant document stood for a failed question."""

    doc_id: str
    rank: int | None
    # first-stage method -> rank in its full ranking; None: not in it (see `retrieved`).
    ranks: dict[str, int | None]
    shared_terms: list[str]
    # method -> how many documents its ranking of this question held (this method's included).
    retrieved: dict[str, int | None]


@dataclass(frozen=True)
class Failure:
    """A question whose first result under `method` is not relevant."""

    question_id: str
    question: str
    type: str
    method: str
    expected: list[str]
    obtained: list[str]
    kind: Literal["recall", "ranking"]
    pool: str
    relevant: list[RelevantTrace]
    status: str


def best_method(scores: Mapping[str, MethodScores], k: int = 5) -> str:
    """The method with the best MRR, then the best recall@k, then the first listed."""
    names = list(scores)
    return max(names, key=lambda m: (scores[m].overall["mrr"], scores[m].overall[f"recall@{k}"], -names.index(m)))


def failures_at_rank_1(run: Run, method: str, documents: Mapping[str, str], candidates: int) -> list[Failure]:
    """Every question whose top result under `method` is not relevant, classified.

    `documents` maps doc id -> indexed content, to find terms BM25 could have matched.
    """
    source = run.declared(method).candidate_source or method
    traced = [m for m in run.declarations if run.declared(m).first_stage]
    # The terms BM25 shares with a relevant document, in the run's own analyzer.
    language = language_of(str(run.config.get("analyzer", "")))
    failures = []
    for result in run.results:
        q = result.question
        mine = result.methods[method]
        if mine.ids and mine.ids[0] in q.relevant:
            continue
        kind, pool = failure_kind(result, method, source, candidates)
        question_terms = set(analyze(q.text, language))
        traces = []
        for doc_id in q.relevant:
            traces.append(
                RelevantTrace(
                    doc_id=doc_id,
                    rank=mine.relevant_ranks.get(doc_id),
                    # None means beyond the run's depth; a method that did not run is absent.
                    ranks={m: result.methods[m].relevant_ranks.get(doc_id) for m in traced if m in result.methods},
                    shared_terms=sorted(question_terms & set(analyze(documents[doc_id], language))),
                    retrieved={m: r.retrieved for m, r in result.methods.items()},
                )
            )
        failures.append(
            Failure(
                question_id=q.id,
                question=q.text,
                type=q.type,
                method=method,
                expected=list(q.relevant),
                obtained=mine.ids[:3],
                kind=kind,
                pool=pool,
                relevant=traces,
                status=mine.status,
            )
        )
    return failures


def failure_kind(
    result: QuestionResult, method: str, source: str, candidates: int
) -> tuple[Literal["recall", "ranking"], str]:
    """Whether a relevant document of the question reached the method's candidate pool (the top
    `candidates` of `source`; "ranking": reordering could fix it) or not ("recall"), and that
    pool in words."""
    mine = result.methods[method]
    pool = result.methods[source].ids[:candidates] if source in result.methods else mine.ids[:candidates]
    kind: Literal["recall", "ranking"] = "ranking" if set(pool) & set(result.question.relevant) else "recall"
    return kind, f"{source} top {candidates}"


def where(result: QuestionResult, method: str, source: str, candidates: int) -> str:
    """Where a question's relevant documents stand under `method` and the kind of failure that
    is, in words ("proc-a at rank 7: a ranking failure, within hybrid top 20")."""
    mine = result.methods[method]
    kind, pool = failure_kind(result, method, source, candidates)
    ranks = [(d, mine.relevant_ranks.get(d)) for d in result.question.relevant]
    ranks.sort(key=lambda dr: (dr[1] is None, dr[1] or 0))
    places = ", ".join(
        f"{d} at rank {r}" if r is not None else f"{d} not in its top {len(mine.ids)}" for d, r in ranks[:3]
    )
    more = f" (+{len(ranks) - 3} more)" if len(ranks) > 3 else ""
    what = "a ranking failure, within" if kind == "ranking" else "a recall failure, none in"
    return f"{places}{more}: {what} {pool}"


def where_relevant(run: Run, candidates: int) -> dict[str, dict[str, str]]:
    """method -> question id -> `where` its relevant documents stand: what the gate adds to each
    question whose figure fell."""
    found: dict[str, dict[str, str]] = {}
    for method in run.methods:
        per_question = found.setdefault(method, {})
        source = run.declared(method).candidate_source or method
        for result in run.results:
            if method in result.methods:
                per_question[result.question.id] = where(result, method, source, candidates)
    return found
