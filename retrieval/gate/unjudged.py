"""Unjudged documents in the comparison with the base branch: a figure's range, not one value.

A pull request that changes retrieval brings documents into a method's top k that nobody judged;
the figures count them as not relevant. So each figure compared with the base branch's baseline
has a range: the comparison as made (they are not relevant: today's value) and the comparison with
them counted as relevant, on both sides: in this run, and in the base branch's figures, recomputed
from its top-10 snapshot (recall@k for k <= 10 and MRR@10 are exact from a top 10). A drop that
holds in both is a regression; a drop that holds only when they are not relevant is undecided: it
rests on documents nobody judged, and judging them decides it (`python -m retrieval judge`).

Holes filled since the base branch's baseline (a document it never judged, judged in the pull
request: on the judging page, in a spreadsheet) count on both sides the same way: the base
branch's figure of that question is recomputed from its snapshot under the new judgment, so
judging a document relevant turns an undecided verdict into a measured one.

Pure: a Run, baseline entries and snapshots as plain data.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from retrieval.gate.schema import rounded

if TYPE_CHECKING:  # annotations only: the gate plugin loads this module in every pytest run
    from retrieval.gate.compare import Check
    from retrieval.run.results import Run

__all__ = [
    "MRR_DEPTH",
    "Entered",
    "as_if_judged",
    "base_judged",
    "counted_relevant",
    "entered_unjudged",
    "filled_holes",
    "ranged_checks",
]

MRR_DEPTH = 10  # as retrieval.measures.metrics.MRR_DEPTH (not imported: the plugin loads this module)

Rankings = Mapping[str, Mapping[str, Sequence[str]]]  # method -> question id -> top document ids


@dataclass(frozen=True)
class Entered:
    """A document that entered `method`'s top k for `question` since the base branch's snapshot,
    at `rank` in this run, and that no judgment covers."""

    method: str
    question: str
    document: str
    rank: int


def base_judged(judgment: Mapping[str, Any]) -> frozenset[str]:
    """Every document a baseline's judgment of a question covers: its relevant ids (a list, or
    id -> grade) and its graded documents (0: judged not relevant)."""
    relevant = judgment.get("relevant", ())
    grades = judgment.get("grades", {})
    return frozenset([*relevant, *(grades if isinstance(grades, Mapping) else ())])


def _base_relevant(judgment: Mapping[str, Any]) -> set[str]:
    relevant = judgment.get("relevant", ())
    if isinstance(relevant, Mapping):
        return {d for d, grade in relevant.items() if grade > 0}
    return set(relevant)


def entered_unjudged(run: Run, snapshots: Rankings, k: int) -> list[Entered]:
    """Per method and question, the documents of this run's top k that were not in the snapshot's
    top k and that no judgment of this run covers, in method, question and rank order."""
    found = []
    for method in run.methods:
        tops = snapshots.get(method)
        if not tops:
            continue
        for r in run.results:
            before = tops.get(r.question.id)
            if before is None or method not in r.methods:
                continue
            judged = r.question.judgments
            was = set(before[:k])
            for rank, doc in enumerate(r.methods[method].ids[:k], start=1):
                if doc not in was and doc not in judged:
                    found.append(Entered(method, r.question.id, doc, rank))
    return found


def _grades(judgment: Mapping[str, Any]) -> dict[str, int]:
    """A baseline judgment's grades: its graded documents, else 1 for each relevant id."""
    grades = judgment.get("grades")
    if isinstance(grades, Mapping):
        return {d: int(g) for d, g in grades.items()}
    relevant = judgment.get("relevant", ())
    return dict(relevant) if isinstance(relevant, Mapping) else dict.fromkeys(relevant, 1)


def filled_holes(run: Run, entry: Mapping[str, Any]) -> tuple[str, ...]:
    """The questions whose judgments only grew since the baseline: same text and type, every
    document it judged with the grade it had, and documents it never judged judged since."""
    kept = entry.get("judgments", {})
    found = []
    for r in run.results:
        q = r.question
        judgment = kept.get(q.id)
        if not isinstance(judgment, Mapping) or judgment.get("type") != q.type:
            continue
        if judgment.get("text") != hashlib.sha256(q.text.encode("utf-8")).hexdigest()[:16]:
            continue
        before, now = _grades(judgment), dict(q.judgments)
        if len(now) > len(before) and all(now.get(d) == g for d, g in before.items()):
            found.append(q.id)
    return tuple(found)


def counted_relevant(run: Run, entered: Iterable[Entered], grade: int) -> Run:
    """The run with each entered document judged relevant (at `grade`) for its question."""
    added: dict[str, set[str]] = {}
    for e in entered:
        added.setdefault(e.question, set()).add(e.document)
    results = []
    for r in run.results:
        extra = added.get(r.question.id)
        if not extra:
            results.append(r)
            continue
        q = r.question
        grades = dict(q.judgments)
        grades.update(dict.fromkeys(extra, grade))
        question = replace(
            q, relevant=tuple(dict.fromkeys([*q.relevant, *sorted(extra)])), grades=tuple(grades.items())
        )
        results.append(replace(r, question=question))
    return replace(run, results=results)


def _recall(top: Sequence[str], relevant: set[str], k: int) -> float:
    return len(set(top[:k]) & relevant) / len(relevant) if relevant else 0.0


def _reciprocal(top: Sequence[str], relevant: set[str]) -> float:
    return next((1.0 / rank for rank, d in enumerate(top[:MRR_DEPTH], 1) if d in relevant), 0.0)


def as_if_judged(
    entry: Mapping[str, Any], snapshots: Rankings, run: Run, questions: Collection[str], k: int
) -> dict[str, Any]:
    """The entry as if it had been made with `run`'s judgments of `questions` (questions whose
    judgments only grew since: `filled_holes`, or documents `counted_relevant`): their figures
    recomputed from the top-10 snapshot with the documents relevant now and not then (the
    difference applied to the stored value and to the means it enters: overall and of its type),
    their digests and judgments the run's, so that they are compared as the same questions. Only
    what a top 10 decides exactly is moved (recall@k for k <= 10, MRR@10)."""
    from retrieval.gate.schema import judgments, question_digests

    if k > MRR_DEPTH:
        raise ValueError(f"recall@{k} cannot be recomputed from a top {MRR_DEPTH}")
    wanted = set(questions)
    kept = entry.get("judgments", {})
    now = {r.question.id: set(r.question.relevant) for r in run.results if r.question.id in wanted}
    added = {q: rel - _base_relevant(kept[q]) for q, rel in now.items() if q in kept}
    recall = f"recall@{entry.get('config', {}).get('k', k)}"
    methods: dict[str, Any] = {}
    for method, figures in entry.get("methods", {}).items():
        tops = snapshots.get(method, {})
        per_recall = dict(figures.get("recall_per_question", {}))
        per_rr = dict(figures.get("reciprocal_ranks", {}))
        moved_recall: dict[str, float] = {}
        moved_rr: dict[str, float] = {}
        for q, docs in added.items():
            if not docs or q not in tops or q not in per_recall or q not in per_rr:
                continue
            before = _base_relevant(kept[q])
            after = before | docs
            top = tops[q]
            moved_recall[q] = _recall(top, after, k) - _recall(top, before, k)
            moved_rr[q] = _reciprocal(top, after) - _reciprocal(top, before)
        if not moved_recall:
            methods[method] = figures
            continue
        for q, delta in moved_recall.items():
            per_recall[q] = rounded(per_recall[q] + delta)
            per_rr[q] = rounded(per_rr[q] + moved_rr[q])
        n = len(figures.get("recall_per_question", {})) or 1
        changed = {
            **figures,
            "recall_per_question": per_recall,
            "reciprocal_ranks": per_rr,
            "mrr": rounded(figures["mrr"] + sum(moved_rr.values()) / n),
        }
        if recall in figures:
            changed[recall] = rounded(figures[recall] + sum(moved_recall.values()) / n)
        by_type = {t: dict(v) for t, v in figures.get("by_type", {}).items()}
        for qtype, values in by_type.items():
            members = [q for q in figures.get("recall_per_question", {}) if kept.get(q, {}).get("type") == qtype]
            moved = sum(moved_recall.get(q, 0.0) for q in members)
            if members and recall in values and moved:
                values[recall] = rounded(values[recall] + moved / len(members))
        changed["by_type"] = by_type
        methods[method] = changed
    digests, judged = question_digests(run), judgments(run)
    return {
        **entry,
        "methods": methods,
        "questions": {**entry.get("questions", {}), **{q: digests[q] for q in now if q in digests}},
        "judgments": {**kept, **{q: judged[q] for q in now if q in judged}},
    }


def ranged_checks(
    checks: Sequence[Check],
    entered: Sequence[Entered],
    run: Run,
    entry: Mapping[str, Any],
    snapshots: Rankings,
    k: int,
    relevant_grade: int,
    unjudged: str,
    compare_again: Callable[[Run, Mapping[str, Any]], Sequence[Check]],
) -> list[Check]:
    """The checks, each drop with its range: `compare_again` (the same comparison) of the run with
    the documents that entered that method's top k counted relevant, against the entry as if they
    had been judged so (another method's documents are not that figure's: its range and the
    documents it names are the same ones). A drop that holds then is undecided: it carries that
    figure and the documents of its questions (and passes with `unjudged` "warn"); one that does
    not is a regression either way."""
    if not entered:
        return list(checks)
    if_relevant: dict[tuple[str, str], Check] = {}
    for method in dict.fromkeys(e.method for e in entered):
        mine = [e for e in entered if e.method == method]
        counted = counted_relevant(run, mine, relevant_grade)
        rescored = as_if_judged(entry, snapshots, counted, {e.question for e in mine}, k)
        if_relevant.update({(c.method, c.metric): c for c in compare_again(counted, rescored) if c.method == method})
    types = {r.question.id: r.question.type for r in run.results}
    out = []
    for check in checks:
        other = if_relevant.get((check.method, check.metric))
        qtype = check.metric.split("[", 1)[1].rstrip("]") if "[" in check.metric else None
        documents = tuple(
            (e.question, e.document, e.rank)
            for e in entered
            if e.method == check.method and (qtype is None or types.get(e.question) == qtype)
        )
        if check.ok or other is None or not other.held or not documents:
            out.append(check)
            continue
        out.append(
            replace(check, if_relevant=(other.baseline, other.current), unjudged=documents, warned=unjudged == "warn")
        )
    return out
