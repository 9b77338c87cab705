"""The regression gate: evaluate a profile, compare with the committed baseline, update it.

The pytest plugin (retrieval.pytest_plugin) and the CLI call these functions; the plugin
only turns their results into test items, so the gate behaves the same in
`pytest -m regression` and in a script. Every path comes from the settings, which resolve
them from the project root.
"""

from __future__ import annotations

import copy
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval.baseline import (
    BaselineError,
    Check,
    DataChanges,
    as_scores,
    compare,
    config_changes,
    entry_for,
    first_of,
    incompatibility,
    load_baseline,
    on_questions,
    run_data_changes,
    unproduced,
    update_baseline,
)
from retrieval.config import ConfigError, Settings, shown_path
from retrieval.dataset import Dataset, DatasetError, load_dataset
from retrieval.evaluate import StagedRecording, evaluate
from retrieval.failures import where_relevant
from retrieval.metrics import MethodScores, score_run
from retrieval.providers.base import ProviderError
from retrieval.recording import CassetteError, Mode, cassette_digest, cassette_digests, record_command, scan_cassettes
from retrieval.run import Run
from retrieval.snapshots import Rankings, load_snapshots, moved, snapshot_path, top_rankings, write_snapshots
from retrieval.verdicts import Verdict, judge

# Errors whose message is already one line naming the file and the fix.
KNOWN_ERRORS = (BaselineError, CassetteError, ConfigError, DatasetError, ProviderError)

__all__ = ["BASELINE_PATH", "GateOutcome", "GateResult", "accept", "importable", "judge_run", "run_gate"]

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
    # A recording staged and not yet committed (`run_gate(defer_recording=True)`).
    recording: StagedRecording | None = None

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
            f"the dataset changed since the baseline ({self.changed_data}): the figures are compared on the "
            f"{len(self.changed_data.common)} questions both hold"
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
        """Baseline figures no check compared: each one fails the gate."""
        return unproduced(self.compared or self.entry or {}, self.checks)

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


def run_gate(settings: Settings, mode: Mode = "replay", *, defer_recording: bool = False) -> GateResult:
    """Evaluate the profile (replaying or recording) and compare every gated figure with the baseline.

    Errors that stop the evaluation (a missing cassette, a replay miss, a damaged file) are
    raised; a run that cannot be compared is returned with `problem` set. With
    `defer_recording`, a recording stays staged (`GateResult.recording`): compared, digested and
    scanned as staged, committed by the caller (the plugin, at session finish) or discarded.
    """
    dataset = load_dataset(settings.dataset)
    staged: list[StagedRecording] = []
    with importable(settings.root):
        run = evaluate(dataset, settings, mode=mode, on_staged=staged.append if defer_recording else None)
    try:
        return _compared(settings, dataset, run, staged[0] if staged else None)
    except BaseException:
        for recording in staged:
            recording.discard()
        raise


def _compared(settings: Settings, dataset: Dataset, run: Run, recording: StagedRecording | None) -> GateResult:
    scores = score_run(run, settings.k)
    baseline = shown_path(settings.baseline, settings.root)
    entry = load_baseline(settings.baseline)["profiles"].get(settings.profile.name)
    folder = cassettes_of(settings)
    new = recording.staged if recording is not None else {}
    digests = cassette_digests(folder, [n for n in run.cassettes if n not in new])
    if new:
        digests.update(cassette_digests(next(iter(new.values())).parent, [n for n in run.cassettes if n in new]))
    result = GateResult(settings, dataset, run, scores, entry, None, digests=dict(sorted(digests.items())))
    result.recording = recording
    result.snapshots = load_snapshots(result.snapshot_path)
    # The gate itself scans what it replays (or what a recording staged, in place of the files it
    # replaces): a key must never pass review inside a cassette.
    variables = [k for m in run.declarations for k in run.declared(m).key_variables]
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
        result.changed_cassettes = _changed_cassettes(entry.get("cassettes"), result.digests, folder)
        result.changed_config = config_changes(entry, run)
        result.changed_data = run_data_changes(entry, run)
        result.checks = _checks(result, entry)
    return result


def _changed_cassettes(recorded: Any, digests: Mapping[str, str], folder: Path) -> list[str]:
    """The cassettes the run read whose bytes are not those the baseline was computed from."""
    if isinstance(recorded, str):  # a baseline from before per-file digests: one digest of the folder
        return [] if recorded == cassette_digest(folder) else ["the baseline holds one digest of the whole folder"]
    recorded = recorded if isinstance(recorded, dict) else {}
    return [name for name, digest in digests.items() if recorded.get(name) != digest]


def _checks(result: GateResult, entry: Mapping[str, Any]) -> list[Check]:
    """Every figure compare() gates for this run: metrics per method and type, degraded counts;
    after questions changed, both sides recomputed on the questions both hold."""
    run, k = result.run, result.settings.k
    types = {q.id: q.type for q in result.dataset.questions}
    degraded = {m: list(run.degraded(m)) for m in run.methods}
    scores: Mapping[str, MethodScores] = result.scores
    result.compared = None
    common = result.kept_questions
    if common is not None:
        result.compared = entry = on_questions(entry, common, types, k)
        scores = as_scores(on_questions(entry_for(run, result.scores, k), common, types, k), k)
        kept = set(common)
        degraded = {m: [q for q in fell_back if q in kept] for m, fell_back in degraded.items()}
    source = shown_path(result.baseline_path, result.settings.root)
    why = where_relevant(run, result.settings.candidates)
    return compare(entry, scores, k, types, degraded, source=source, why=why)


def accept(result: GateResult, *, allow_regression: bool = False, write: bool = True) -> str:
    """Make the result the profile's new baseline and ranking snapshots; returns the diff.

    Refuses to lower a figure unless `allow_regression` (raises BaselineError): then neither
    the baseline nor the snapshots are written. Only this profile's entry and snapshot file change.
    Cassettes holding a credential are never accepted (raises CassetteError). With `write=False`
    nothing in the project changes: the update is tried on a scratch copy of the baseline file
    (same diff, same refusal) and `result` is left as the written update would leave it; the
    plugin writes at session finish, once every gate item ran and held.
    """
    if result.secrets:
        raise CassetteError(result.problem or "the cassettes hold what looks like a credential")
    entry = entry_for(result.run, result.scores, result.settings.k, cassettes=result.digests)
    current = top_rankings(result.run)
    types = {q.id: q.type for q in result.dataset.questions}
    with tempfile.TemporaryDirectory(prefix="retrieval-accept-") as scratch:
        target = result.baseline_path
        if not write:
            target = Path(scratch) / "metrics.json"
            if result.baseline_path.is_file():
                shutil.copyfile(result.baseline_path, target)
        diff = update_baseline(target, result.profile, entry, allow_regression=allow_regression, types=types)
        accepted = load_baseline(target)["profiles"][result.profile]
    # The diff names the file as the project sees it, whatever the working directory.
    diff = diff.replace(str(target), shown_path(result.baseline_path, result.settings.root), 1)
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
    if write and current != result.snapshots:
        write_snapshots(result.snapshot_path, result.profile, current)
    diff += f"\nrankings {shown}:\n" + ("\n".join(moves) if moves else "  no top 10 moved")
    result.entry = accepted
    result.snapshots = current
    result.problem = None
    result.changed_cassettes, result.changed_config, result.changed_data = [], [], None
    result.checks = _checks(result, result.entry)
    return diff


@dataclass
class GateOutcome:
    """One gate run: its verdicts, and what an update would write."""

    verdicts: list[Verdict]
    result: GateResult | None = None
    problem: str | None = None
    diff: str | None = None  # the baseline update's diff (--update-baseline)
    pending: GateResult | None = None  # the result to accept at session finish

    def failed(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.ok]


def judge_run(
    settings: Settings,
    names: list[str],
    mode: Mode = "replay",
    *,
    update: bool = False,
    allow_regression: bool = False,
    defer_recording: bool = False,
) -> GateOutcome:
    """Evaluate, compare and judge: what the plugin's items and `python -m retrieval --gate` report.

    Whatever stops the comparison is the `gate` verdict: a known error in its one line, anything
    else (a user's method may raise anything) with its redacted traceback. With `update`, the
    baseline update is tried without writing (`accept(write=False)`): its verdicts are those of
    the updated baseline, and `pending` is what to accept once the run may write.
    """
    from retrieval.redaction import failure_text, redacted

    def said(exc: Exception) -> str:
        known = isinstance(exc, KNOWN_ERRORS)
        return redacted(f"{type(exc).__name__}: {exc}") if known else f"the evaluation raised {failure_text(exc)}"

    outcome = GateOutcome([])
    refusal = None
    try:
        result = outcome.result = run_gate(settings, mode, defer_recording=defer_recording)
        outcome.problem = result.problem
    except Exception as exc:
        outcome.problem = said(exc)
    if update and outcome.result is not None:
        # Tried on a scratch copy: no baseline yet or another dataset is what an update is for;
        # a refusal (a figure fell, a credential) leaves the comparison with the committed baseline.
        pending = copy.copy(outcome.result)
        try:
            outcome.diff = accept(outcome.result, allow_regression=allow_regression, write=False)
            outcome.pending, outcome.problem = pending, None
        except (BaselineError, CassetteError) as exc:
            outcome.result, refusal = pending, said(exc)
    outcome.verdicts = judge(outcome.result, outcome.problem, names, refusal)
    return outcome
