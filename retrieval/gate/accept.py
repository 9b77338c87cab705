"""Accepting a gate run as the new baseline: the diff, the refusal of a drop without a reason,
the edited questions judged again, and the baseline and its snapshots written as one set (or only
tried, for the plugin, which writes at session finish)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval.config import shown_path
from retrieval.gate.baseline_set import baseline_lock_of
from retrieval.gate.questions import rejudged
from retrieval.gate.result import GateResult, check_all, compare_with_ref
from retrieval.gate.schema import entry_for, first_of, judgments, load_baseline, question_digests
from retrieval.gate.snapshots import moved, render_snapshots, top_rankings
from retrieval.gate.update import try_update, update_baseline
from retrieval.measures.metrics import score_run
from retrieval.recording.cassette_files import CassetteError

__all__ = ["accept"]


def judge_again(result: GateResult) -> Any:
    """For an update after questions were edited: the run's entry with each edited question
    scored under the judgments the old entry kept for it."""
    run, k = result.run, result.settings.k
    digests, texts = question_digests(run), judgments(run)

    def judge(old: Mapping[str, Any]) -> dict[str, Any]:
        kept, before = old.get("judgments", {}), old.get("questions", {})
        edited = [
            q
            for q, d in digests.items()
            if q in kept and q in before and before[q] != d and kept[q].get("text") == texts[q]["text"]
        ]
        judged = rejudged(run, old, edited)
        return entry_for(judged, score_run(judged, k), k)

    return judge


def accept(result: GateResult, *, allow_regression: bool | str = False, write: bool = True) -> str:
    """Make the result the profile's new baseline and ranking snapshots, written as one set under
    the baseline's lock; returns the diff.

    Refuses to lower a figure unless `allow_regression` is the reason (raises BaselineError): then
    neither the baseline nor the snapshots are written; the reason is recorded in the entry. Run
    with a ref (`run_gate(..., baseline_ref=)`), a drop against the ref's baseline counts too.
    Only this profile's entry and snapshot file change. Cassettes holding a credential are never
    accepted (raises CassetteError). With `write=False` nothing is written: the update is tried
    under the same lock on the same file (`baseline_update.try_update`: same diff, same refusal)
    and `result` is left as the written update would leave it; the pytest plugin writes at
    session finish, once every gate item ran and held.
    """
    if result.secrets:
        raise CassetteError(result.problem or "the cassettes hold what looks like a credential")
    entry = entry_for(result.run, result.scores, result.settings.k, cassettes=result.digests)
    current = top_rankings(result.run)
    types = {q.id: q.type for q in result.dataset.questions}
    options: dict[str, Any] = {
        "allow_regression": allow_regression,
        "types": types,
        "judge_again": judge_again(result),
        "lock": baseline_lock_of(result.settings),
        "reference": result.reference_entry,
    }
    if write:
        also = {result.snapshot_path: render_snapshots(result.profile, current)} if current != result.snapshots else {}
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
            [f"  {m} {change}" for change in first_of(moved(result.snapshots[m], current[m]), f"`git diff {shown}`")]
            if m in result.snapshots
            else [f"  {m}: new ({len(current[m])} questions)"]
        )
    ]
    diff += f"\nrankings {shown}:\n" + ("\n".join(moves) if moves else "  no top 10 moved")
    result.entry = accepted
    result.snapshots = current
    result.problem = None
    result.changed_cassettes, result.changed_config, result.changed_data = [], [], None
    result.checks, result.compared = check_all(result, result.entry, None)
    result.reference_unproduced = []
    if result.reference is not None and result.reference_entry is not None:
        # Judged against the ref again, under the acceptances just recorded: the gate's items
        # against the ref (named at collection) say what the update accepted.
        compare_with_ref(result, result.reference, result.reference_entry)
    return diff
