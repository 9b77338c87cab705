"""Accepting a gate run as the new baseline: the diff, the refusal of a drop without a reason,
the edited questions scored again, and the baseline and its snapshots written as one set (or
only tried, for the plugin, which writes at session finish).

A result is a value: accepting it makes a new result, compared again under the baseline the
update writes (and against the base branch under the acceptances it records)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from retrieval.config import shown_path
from retrieval.gate.baseline_set import baseline_lock_of
from retrieval.gate.questions import under_judgments
from retrieval.gate.result import GateResult, compared_again
from retrieval.gate.schema import entry_for, first_of, load_baseline, question_digests
from retrieval.gate.snapshots import load_snapshots, moved, render_snapshots, top_rankings
from retrieval.gate.update import JudgedAs, try_update, update_baseline
from retrieval.measures.metrics import score_run
from retrieval.recording.cassette_files import CassetteError
from retrieval.run.results import Run

__all__ = ["accept", "tried_update"]


def _rescorer(run: Run, k: int) -> Callable[[Mapping[str, Any]], Mapping[str, Any]]:
    """For an update after questions were edited: the run's entry with each edited question (same
    id, another digest) scored under the judgments the old entry kept for it."""
    digests = question_digests(run)

    def rescored(old: Mapping[str, Any]) -> dict[str, Any]:
        kept, before = old.get("judgments", {}), old.get("questions", {})
        edited = [q for q, d in digests.items() if q in kept and q in before and before[q] != d]
        judged = under_judgments(run, old, edited)
        return entry_for(judged, score_run(judged, k), k)

    return rescored


def _judged_as_reference(result: GateResult) -> JudgedAs | None:
    """The run's entry as the base branch judges it, when it judges otherwise (`GateResult.base_run`):
    a question it gates that this run's judgments leave out scored under the judgments it kept."""
    view, branch = result.base_run, result.branch
    if view is None or branch is None or branch.entry is None:
        return None
    k = branch.k
    left_out = [r.question.id for r in view.results if not r.question.relevant]
    view = under_judgments(view, branch.entry, left_out) if left_out else view
    types = {r.question.id: r.question.type for r in view.results}
    return JudgedAs(entry_for(view, score_run(view, k), k), types, _rescorer(view, k))


def _update(result: GateResult, allow_regression: bool | str, write: bool) -> tuple[str, GateResult]:
    if result.secrets:
        raise CassetteError(result.problem or "the cassettes hold what looks like a credential")
    entry = entry_for(result.run, result.scores, result.settings.k, cassettes=result.digests)
    current = top_rankings(result.run)
    branch = result.branch
    options: dict[str, Any] = {
        "allow_regression": allow_regression,
        "types": {q.id: q.type for q in result.dataset.questions},
        "rescored": _rescorer(result.run, result.settings.k),
        "lock": baseline_lock_of(result.settings),
        "reference": branch.entry if branch is not None else None,
        "reference_profile": branch.profile if branch is not None and branch.entry is not None else None,
        "judged_as_reference": _judged_as_reference(result),
    }
    committed = load_snapshots(result.snapshot_path)  # a tried update's result holds those it would write
    if write:
        also = {result.snapshot_path: render_snapshots(result.profile, current)} if current != committed else {}
        diff = update_baseline(result.baseline_path, result.profile, entry, also=also, **options)
        accepted = load_baseline(result.baseline_path)["profiles"][result.profile]
    else:
        diff, accepted = try_update(result.baseline_path, result.profile, entry, **options)
    # The diff names the file as the project sees it, whatever the working directory.
    diff = diff.replace(str(result.baseline_path), shown_path(result.baseline_path, result.settings.root), 1)
    shown = shown_path(result.snapshot_path, result.settings.root)
    moves = [
        line
        for m in sorted(current)
        for line in (
            [f"  {m} {change}" for change in first_of(moved(committed[m], current[m]), f"`git diff {shown}`")]
            if m in committed
            else [f"  {m}: new ({len(current[m])} questions)"]
        )
    ]
    diff += f"\nrankings {shown}:\n" + ("\n".join(moves) if moves else "  no top 10 moved")
    updated = replace(result, changed_cassettes=(), changed_config=(), problem=None)
    return diff, compared_again(updated, accepted, current)


def accept(result: GateResult, *, allow_regression: bool | str = False) -> str:
    """Make the result the profile's new baseline and ranking snapshots, written as one set under
    the baseline's lock; returns the diff.

    Refuses to lower a figure unless `allow_regression` is the reason (raises BaselineError): then
    neither the baseline nor the snapshots are written; the reason is recorded in the entry. Run
    with a ref (`run_gate(..., baseline_ref=)`), a drop against what the ref gates counts too.
    Only this profile's entry and snapshot file change. Cassettes holding a credential are never
    accepted (raises CassetteError).
    """
    return _update(result, allow_regression, write=True)[0]


def tried_update(result: GateResult, *, allow_regression: bool | str = False) -> tuple[str, GateResult]:
    """What `accept` would do, without writing: its diff and the result compared under the baseline
    it would write (or its BaselineError), tried under the same lock on the same file (same diff,
    same refusal). The pytest plugin writes at session finish, once every gate item ran and held."""
    return _update(result, allow_regression, write=False)
