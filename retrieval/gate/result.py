"""The regression gate: evaluate a profile, compare with the committed baseline, update it.

The pytest plugin (retrieval.gate.plugin) and the CLI call these functions; the plugin
only turns their results into test items, so the gate behaves the same in
`pytest -m regression` and in a script. Every path comes from the settings, which resolve
them from the project root.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from retrieval.config import Settings, shown_path
from retrieval.data.dataset import Dataset, load_dataset
from retrieval.diagnosis.failures import where_relevant
from retrieval.evaluation.evaluate import StagedRecording, evaluate
from retrieval.evaluation.progress import terminal_progress
from retrieval.gate.baseline_set import baseline_lock_of, recover
from retrieval.gate.compare import Check, compare, config_changes, incompatibility, ungated_types, unproduced
from retrieval.gate.questions import DataChanges, as_scores, on_questions, rejudged, run_data_changes
from retrieval.gate.reference import baseline_at
from retrieval.gate.schema import entry_for, load_baseline
from retrieval.gate.snapshots import Rankings, load_snapshots, snapshot_path
from retrieval.gate.update import ACCEPTED, accepted_drop
from retrieval.measures.metrics import MethodScores, score_run
from retrieval.recording.cassette_files import (
    cassette_digest,
    cassette_digests,
    record_command,
    scan_cassettes,
)
from retrieval.recording.recorder import Mode
from retrieval.run.results import Run

__all__ = [
    "BASELINE_PATH",
    "GateResult",
    "baseline_lock_of",
    "check_all",
    "compare_with_ref",
    "importable",
    "recover",
    "run_gate",
]

# The default of the `baseline` setting (root-relative); kept for callers that name the file.
BASELINE_PATH = "baselines/metrics.json"


@dataclass
class GateResult:
    """One profile's evaluation set against its baseline entry and its ranking snapshots.

    `problem` says why nothing could be compared (no baseline entry, another dataset, a
    credential in the cassettes); when it is None, `checks` holds every compared figure.
    """

    settings: Settings
    dataset: Dataset
    run: Run
    scores: dict[str, MethodScores]
    entry: dict[str, Any] | None
    problem: str | None
    checks: list[Check] = field(default_factory=list)
    # cassette file -> sha256 of the cassettes the run read (recording.cassette_digests).
    digests: dict[str, str] = field(default_factory=dict)
    # The cassettes read whose bytes are not the baseline's: a failure of its own, beside the
    # figures (still compared, so a re-recording shows what it moved before it is accepted).
    changed_cassettes: list[str] = field(default_factory=list)
    # The settings that differ from the baseline's ("hybrid.rrf_k: 60 -> 5"): a failure of its
    # own too, beside the figures compared with the baseline's (what the change costs).
    changed_config: list[str] = field(default_factory=list)
    # The dataset's changes since the baseline when some questions stayed as they were: a failure
    # of its own, beside the figures, compared on those questions (`compared`: the baseline's, so).
    changed_data: DataChanges | None = None
    compared: dict[str, Any] | None = None
    snapshots: Rankings = field(default_factory=dict)
    # What looks like a credential in the cassettes: such a result can never be accepted.
    secrets: list[str] = field(default_factory=list)
    # With --retrieval-baseline-ref: the ref, its entry for this profile, and the figures it
    # gates ("bm25 mrr") that this run no longer produces without an acceptance recorded in `entry`.
    reference: str | None = None
    reference_entry: dict[str, Any] | None = None
    reference_unproduced: list[str] = field(default_factory=list)
    # Why nothing was compared with the ref's baseline (no entry there, another dataset), or None.
    reference_note: str | None = None
    # A recording staged and not yet committed (`run_gate(defer_recording=True)`).
    recording: StagedRecording | None = None

    @property
    def tolerance(self) -> float:
        """The project's tolerance ([tool.retrieval] `tolerance`): a baseline file's own is ignored."""
        return self.settings.tolerance

    @property
    def acceptance(self) -> dict[str, Any] | None:
        """The drops the profile's baseline records as accepted, with the reason, or None."""
        record = (self.entry or {}).get(ACCEPTED)
        return record if isinstance(record, dict) else None

    @property
    def profile(self) -> str:
        return self.settings.profile.name

    @property
    def stale(self) -> str | None:
        """Why the cassettes are not those the baseline was computed from, with the fix; or None."""
        if not self.changed_cassettes:
            return None
        baseline = shown_path(self.baseline_path, self.settings.root)
        folder = shown_path(cassettes_of(self.settings), self.settings.root)
        return (
            f"the cassettes changed since the baseline ({', '.join(self.changed_cassettes)}): run "
            f"`pytest --update-baseline` and commit {baseline} with {folder}/."
        )

    def _until_recorded(self, change: str) -> str:
        # A change the figures are still compared across fails on its own until the baseline records it.
        baseline = shown_path(self.baseline_path, self.settings.root)
        return (
            f"{change}. If the change is intended, run `pytest --update-baseline` (with --allow-regression if a "
            f"figure fell, and say why in the PR) and commit {baseline}."
        )

    @property
    def reconfigured(self) -> str | None:
        """Why the baseline no longer describes this configuration, with the fix; or None."""
        if not self.changed_config:
            return None
        return self._until_recorded(
            f"the configuration differs from the baseline's ({'; '.join(self.changed_config)}): the figures are "
            "compared with the baseline's"
        )

    @property
    def redataset(self) -> str | None:
        """Why the baseline no longer describes this dataset, with the fix; or None."""
        if self.changed_data is None:
            return None
        return self._until_recorded(
            f"the dataset changed since the baseline ({self.changed_data}): the figures are compared on "
            f"{self.changed_data.where}"
        )

    @property
    def kept_questions(self) -> tuple[str, ...] | None:
        """The questions the figures and top 10s are compared on, when not all of them."""
        changes = self.changed_data
        return changes.common if changes is not None and changes.questions_changed else None

    @property
    def baseline_path(self) -> Path:
        return Path(self.settings.baseline)

    @property
    def snapshot_path(self) -> Path:
        return snapshot_path(self.settings.snapshots, self.profile)

    def unproduced(self) -> list[str]:
        """Baseline figures no check compared (and, against a ref, its figures dropped without a
        recorded acceptance, "bm25 mrr (in origin/main's baseline)"): each one fails the gate."""
        theirs = [f"{name} (in {self.reference}'s baseline)" for name in self.reference_unproduced]
        return [*self.own_unproduced(), *theirs]

    def own_unproduced(self) -> list[str]:
        """The profile's baseline figures no check compared."""
        own = [c for c in self.checks if c.reference is None]
        return unproduced(self.compared or self.entry or {}, own)

    def ungated_methods(self) -> list[str]:
        """Methods the run evaluated that have no baseline figure: each one fails the gate."""
        gated = (self.entry or {}).get("methods", {})
        return [m for m in self.run.methods if m not in gated]


def cassettes_of(settings: Settings) -> Path:
    """The folder of the selected profile's cassettes."""
    return Path(settings.cassettes) / settings.profile.name


@contextmanager
def importable(root: str | Path) -> Iterator[None]:
    """The project root on sys.path while the block runs, so `methods = ["mymodule:factory"]`
    imports the project's own module from pytest (whose sys.path need not hold the root) and
    from any subfolder."""
    entry = str(root)
    added = entry not in sys.path
    if added:
        sys.path.insert(0, entry)
    try:
        yield
    finally:
        if added and entry in sys.path:
            sys.path.remove(entry)


def run_gate(
    settings: Settings, mode: Mode = "replay", baseline_ref: str | None = None, *, defer_recording: bool = False
) -> GateResult:
    """Evaluate the profile (replaying or recording) and compare every gated figure with the baseline.

    With `baseline_ref` (a git ref such as "origin/main"), every figure is also compared with
    that ref's baseline: a drop fails unless the profile's baseline records its acceptance.
    Errors that stop the evaluation (a missing cassette, a replay miss, a damaged file) are
    raised; a run that cannot be compared is returned with `problem` set. With
    `defer_recording`, a recording stays staged (`GateResult.recording`): compared, digested and
    scanned as staged, committed by the caller (the plugin, at session finish) or discarded.
    """
    recover(settings)
    dataset = load_dataset(
        settings.dataset, settings.split, settings.relevant_grade, accept_llm=settings.accept_llm_judgments
    )
    staged: list[StagedRecording] = []
    with importable(settings.root):
        # Replaying takes seconds; live and recording runs embed the corpus: show how far they are.
        progress = None if mode == "replay" else terminal_progress
        run = evaluate(
            dataset,
            settings,
            mode=mode,
            progress=progress,
            on_staged=staged.append if defer_recording else None,
            baseline_inputs=_recorded_digests(settings),
        )
    try:
        return _compared(settings, dataset, run, staged[0] if staged else None, baseline_ref)
    except BaseException:
        for recording in staged:
            recording.discard()
        raise


def _compared(
    settings: Settings, dataset: Dataset, run: Run, recording: StagedRecording | None, baseline_ref: str | None
) -> GateResult:
    scores = score_run(run, settings.k)
    baseline = shown_path(settings.baseline, settings.root)
    entry = load_baseline(settings.baseline)["profiles"].get(settings.profile.name)
    folder = cassettes_of(settings)
    new = recording.staged if recording is not None else {}
    digests = cassette_digests(folder, [n for n in run.cassettes if n not in new])
    if new:
        digests.update(cassette_digests(next(iter(new.values())).parent, [n for n in run.cassettes if n in new]))
    digests.update(run.inputs)  # what a cache gave the figures (bm25's analysis), recorded as a cassette is
    result = GateResult(settings, dataset, run, scores, entry, None, digests=dict(sorted(digests.items())))
    result.recording = recording
    result.snapshots = load_snapshots(result.snapshot_path)
    # The gate itself scans what it replays (or what a recording staged, in place of the files it
    # replaces): a key must never pass review inside a cassette.
    variables = [k for m in run.declarations for k in run.declared(m).key_variables]
    if settings.profile.api_key_env:  # the profile's own key, whatever its variable is named
        variables.append(settings.profile.api_key_env)
    replaced = tuple(f"{folder / name}:" for name in new)
    secrets = [line for line in scan_cassettes(folder, variables=variables) if not line.startswith(replaced)]
    if new:
        secrets += scan_cassettes(next(iter(new.values())).parent, variables=variables)
    result.secrets = secrets
    if secrets:
        shown = "; ".join(secrets[:3]) + (f" and {len(secrets) - 3} more" if len(secrets) > 3 else "")
        result.problem = (
            f"the cassettes hold what looks like a credential ({shown}): remove it, revoke the key, and re-record "
            f"with `{record_command(settings.profile.name)}`."
        )
        return result
    if entry is None:
        result.problem = (
            f"{baseline} has no baseline for profile {settings.profile.name!r}: "
            "create it with `pytest --update-baseline`."
        )
        return result
    result.problem = incompatibility(entry, run, settings.profile.name)
    if result.problem is None:
        result.changed_cassettes = _changed_cassettes(entry.get("cassettes"), result.digests, folder, run.inputs)
        result.changed_config = config_changes(entry, run)
        result.changed_data = run_data_changes(entry, run)
        result.checks, result.compared = check_all(result, entry, result.changed_data)
        missing = ungated_types(result.compared or entry, result.scores if result.compared is None else {}, settings.k)
        if missing:
            result.problem = (
                f"{baseline} gates no {missing[0]}"
                + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
                + ": a question type of the dataset is not gated (its figure was deleted). Restore it with "
                f"`git checkout -- {baseline}` or rewrite it with `pytest --update-baseline`."
            )
    if baseline_ref is not None and result.problem is None:
        _against_ref(result, baseline_ref)
    return result


def _against_ref(result: GateResult, ref: str) -> None:
    """Compare the run with `ref`'s baseline too: a drop there fails unless accepted in ours."""
    result.reference = ref
    theirs = baseline_at(ref, result.baseline_path)["profiles"].get(result.profile)
    if theirs is None:
        result.reference_note = f"{ref} has no baseline for profile {result.profile!r}: nothing to lower"
        return
    if incompatibility(theirs, result.run, result.profile) is not None:
        result.reference_note = f"{ref}'s baseline is of another dataset: this one is a new baseline"
        return
    compare_with_ref(result, ref, theirs)


def compare_with_ref(result: GateResult, ref: str, theirs: dict[str, Any]) -> None:
    """Add the checks against `theirs` (the ref's entry), each drop passed by an acceptance of ours."""
    result.reference_entry = theirs
    changes = run_data_changes(theirs, result.run)
    checks, compared = check_all(result, theirs, changes)
    for check in checks:
        reason = None if check.held else accepted_drop(result.entry, check.name, check.baseline, check.current)
        result.checks.append(replace(check, reference=ref, accepted=reason))
    own = {c.baseline_figure for c in checks}
    acceptance = result.acceptance or {}
    for name in unproduced(compared or theirs, checks):
        if name not in own and f"{name} (removed)" not in acceptance.get("figures", {}):
            result.reference_unproduced.append(name)


def _recorded_digests(settings: Settings) -> dict[str, str]:
    """The digests the profile's baseline records (cassettes, and inputs a cache may hold): a cached
    input of another digest is computed again, never used (Context.baseline_inputs)."""
    entry = load_baseline(settings.baseline)["profiles"].get(settings.profile.name) or {}
    recorded = entry.get("cassettes")
    return {k: v for k, v in recorded.items() if isinstance(v, str)} if isinstance(recorded, dict) else {}


def _changed_cassettes(recorded: Any, digests: Mapping[str, str], folder: Path, inputs: Mapping[str, str]) -> list[str]:
    """The cassettes (and cached inputs) the run read whose bytes are not those the baseline was
    computed from; an input missing from a baseline made before inputs were recorded is not one."""
    if isinstance(recorded, str):  # a baseline from before per-file digests: one digest of the folder
        return [] if recorded == cassette_digest(folder) else ["the baseline holds one digest of the whole folder"]
    recorded = recorded if isinstance(recorded, dict) else {}
    return [
        name
        for name, digest in digests.items()
        if recorded.get(name) != digest and (name in recorded or name not in inputs)
    ]


def check_all(
    result: GateResult, entry: Mapping[str, Any], changes: DataChanges | None
) -> tuple[list[Check], dict[str, Any] | None]:
    """Every figure compare() gates for this run against `entry`: metrics per method and type,
    degraded counts; after questions changed, both sides recomputed on the questions both hold
    and the edited ones, those scored under the judgments `entry` kept. Returns the checks and
    the entry as compared (None when whole)."""
    run, k = result.run, result.settings.k
    types = {q.id: q.type for q in result.dataset.questions}
    degraded = {m: list(run.degraded(m)) for m in run.methods}
    scores: Mapping[str, MethodScores] = result.scores
    compared = None
    judged = run
    if changes is not None and changes.questions_changed:
        on = changes.compared_on
        types = {**types, **{q: entry["judgments"][q]["type"] for q in changes.rejudged}}
        judged = rejudged(run, entry, changes.rejudged) if changes.rejudged else run
        judged_scores = score_run(judged, k) if changes.rejudged else result.scores
        compared = entry = on_questions(entry, on, types, k)
        scores = as_scores(on_questions(entry_for(judged, judged_scores, k), on, types, k), k)
        kept = set(on)
        degraded = {m: [q for q in fell_back if q in kept] for m, fell_back in degraded.items()}
    source = shown_path(result.baseline_path, result.settings.root)
    # An edited question's "why" is where its judged (old) relevant documents ranked.
    why = where_relevant(judged, result.settings.candidates)
    checks = compare(entry, scores, k, types, degraded, source=source, why=why, tolerance=result.tolerance)
    return checks, compared
