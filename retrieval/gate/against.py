"""One run compared with one baseline entry: the pull request's own, or what a git ref gates.

Questions are matched by id; after they changed, both sides are recomputed on the questions both
hold, an edited one scored under the judgments the entry kept for it (retrieval.gate.questions).
Every figure the entry gates is compared (retrieval.gate.compare) or named as not produced; against
a ref, a drop passes only when the pull request's own entry records its acceptance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from retrieval.diagnosis.failures import failure_kind, where
from retrieval.gate.compare import Check, Describe, compare, unproduced
from retrieval.gate.questions import DataChanges, as_scores, on_questions, rank_in, run_data_changes, under_judgments
from retrieval.gate.schema import ACCEPTED, entry_for
from retrieval.gate.snapshots import Rankings
from retrieval.gate.unjudged import MRR_DEPTH, as_if_judged, entered_unjudged, filled_holes, ranged_checks
from retrieval.gate.update import accepted_drop
from retrieval.measures.metrics import MethodScores, score_run
from retrieval.report.verdict import Place, WorseQuestion
from retrieval.run.results import Run

__all__ = ["Against", "against"]


@dataclass(frozen=True)
class Against:
    """The run compared with one baseline entry: the pull request's own (`reference` None) or a
    git ref's. `checks` are the figures compared, `compared` the entry as compared (recomputed on
    the questions both hold; None when whole), `changes` how the questions differ (None: the same
    dataset), `unproduced` the figures it gates that no check compared and, against a ref, no
    acceptance of the pull request names; `judged` the run under the entry's judgments."""

    reference: str | None
    entry: Mapping[str, Any]
    checks: tuple[Check, ...]
    compared: Mapping[str, Any] | None
    changes: DataChanges | None
    unproduced: tuple[str, ...]
    judged: Run
    snapshots: Rankings = field(default_factory=dict)
    # True when no question id of the entry is in the run: its dataset is not produced at all.
    no_common: bool = False
    # Against a ref: the figures it gates that this run does not produce, accepted as removed.
    removed: tuple[str, ...] = ()


def _describer(judged: Run, snapshots: Rankings, candidates: int) -> Describe:
    """What the gate says of a question that got worse under a method: its text, its relevant
    documents' ranks in the baseline's top 10 (`snapshots`) and in this run, the failure class."""
    results = {r.question.id: r for r in judged.results}

    def describe(method: str, question: str, metric: str, was: float, now: float) -> WorseQuestion:
        result = results[question]
        mine = result.methods[method]
        source = judged.declared(method).candidate_source or method
        kind, pool = failure_kind(result, method, source, candidates)
        top = snapshots.get(method, {}).get(question) or []
        places = tuple(
            Place(d, top.index(d) + 1 if d in top else None, rank_in(mine, d)) for d in result.question.relevant
        )
        words = where(result, method, source, candidates)
        return WorseQuestion(question, result.question.text, metric, was, now, places, kind, words, pool)

    return describe


def _scored(run: Run, k: int) -> dict[str, MethodScores]:
    """The run's scores on the questions it can score: a question kept with no relevant document
    (retrieval.gate.base_judging.judged_as) is scored under the entry's judgments, as an edited one."""
    return score_run(replace(run, results=[r for r in run.results if r.question.relevant]), k)


def against(
    run: Run,
    scores: Mapping[str, MethodScores] | None,
    entry: Mapping[str, Any],
    snapshots: Rankings,
    k: int,
    candidates: int,
    tolerance: float,
    *,
    reference: str | None = None,
    accepting: Mapping[str, Any] | None = None,
    source: str = "the baseline",
    unjudged: str = "fail",
    relevant_grade: int = 1,
    ranged: bool = True,
) -> Against:
    """The run compared with `entry` (with `tolerance`): every figure `compare` gates, metrics per
    method and type and degraded counts. Questions are matched by id: after they changed, both
    sides are recomputed on the questions both hold, the edited ones scored under the judgments
    `entry` kept, those whose judgments only grew (holes filled) under the new ones on both sides
    (retrieval.gate.unjudged). Against a ref, each drop passes when `accepting` (the pull request's
    own entry) records its acceptance; a figure the ref gates and this run does not produce, unless
    accepted as removed, is `unproduced`. `source` names the entry's file in its errors. A drop that
    holds only while the unjudged documents that entered a top k count as not relevant is
    undecided (`ranged`: its range is computed), and passes when `unjudged` is "warn". `scores`
    None: the run's, computed here."""
    if scores is None:
        scores = _scored(run, k)
    exact = bool(snapshots) and k <= MRR_DEPTH  # what a top-10 snapshot recomputes exactly
    filled = filled_holes(run, entry) if exact else ()
    if filled:
        entry = as_if_judged(entry, snapshots, run, filled, k)
    types = {r.question.id: r.question.type for r in run.results}
    degraded = {m: list(run.degraded(m)) for m in run.methods}
    changes = run_data_changes(entry, run)
    if changes is not None and filled:
        changes = replace(changes, filled=filled)
    no_common = entry.get("fingerprint") != run.fingerprint and changes is None
    compared: dict[str, Any] | None = None
    judged, measured = run, scores
    if no_common:
        compared = {**entry, "methods": {}}  # nothing of its dataset is produced: every figure is unproduced
    elif changes is not None and changes.questions_changed:
        on = changes.compared_on
        types = {**types, **{q: entry["judgments"][q]["type"] for q in changes.rejudged}}
        judged = under_judgments(run, entry, changes.rejudged) if changes.rejudged else run
        judged_scores = score_run(judged, k) if changes.rejudged else scores
        compared = on_questions(entry, on, types, k)
        measured = as_scores(on_questions(entry_for(judged, judged_scores, k), on, types, k), k)
        kept = set(on)
        degraded = {m: [q for q in fell_back if q in kept] for m, fell_back in degraded.items()}
    checks = compare(
        compared or entry,
        measured,
        k,
        types,
        degraded,
        source=source,
        describe=_describer(judged, snapshots, candidates),
        tolerance=tolerance,
        reference=reference,
    )
    if reference is not None:
        checks = [
            c if c.held else replace(c, accepted=accepted_drop(accepting, c.baseline_figure, c.baseline, c.current))
            for c in checks
        ]
    if ranged and exact and any(not c.ok for c in checks):
        edited = set(changes.edited) if changes is not None else set()
        entered = [e for e in entered_unjudged(run, snapshots, k) if e.question not in edited]

        def if_relevant(counted: Run, rescored: Mapping[str, Any]) -> Sequence[Check]:
            again = against(
                counted,
                None,
                rescored,
                snapshots,
                k,
                candidates,
                tolerance,
                reference=reference,
                ranged=False,
            )
            return again.checks

        checks = ranged_checks(checks, entered, run, entry, snapshots, k, relevant_grade, unjudged, if_relevant)
    figures = unproduced(entry if no_common else compared or entry, checks)
    removed: list[str] = []
    if reference is not None:
        recorded = ((accepting or {}).get(ACCEPTED) or {}).get("figures", {})
        removed = [f for f in figures if f"{f} (removed)" in recorded]
        figures = [f for f in figures if f not in removed]
    return Against(
        reference,
        entry,
        tuple(checks),
        compared,
        changes,
        tuple(figures),
        judged,
        snapshots,
        no_common,
        tuple(removed),
    )
