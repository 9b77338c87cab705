"""The regression gate: evaluate a profile, compare it with its baseline and with its base branch's.

The pytest plugin (retrieval.gate.plugin) and the CLI call these functions; the plugin only
turns their results into test items, so the gate behaves the same in `pytest -m regression`
and in `python -m retrieval --gate`. Every path comes from the settings, which resolve them from
the project root. A result is an immutable value: an update (retrieval.gate.accept) makes a new
one, compared again under the baseline it would write.
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
from retrieval.evaluation.evaluate import StagedRecording, evaluate
from retrieval.evaluation.progress import terminal_progress
from retrieval.gate.against import Against, against
from retrieval.gate.base_judging import base_cut_off, judging
from retrieval.gate.base_side import BaseSide
from retrieval.gate.baseline_set import baseline_lock_of, recover
from retrieval.gate.compare import (
    Check,
    config_changes,
    incompatibility,
    ungated_types,
)
from retrieval.gate.questions import DataChanges
from retrieval.gate.reference import BaseBranch, base_branch
from retrieval.gate.schema import ACCEPTED, BASELINE_PATH, BaselineError, load_baseline
from retrieval.gate.snapshots import Rankings, load_snapshots, snapshot_path, snapshot_problem
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
    "importable",
    "recover",
    "run_gate",
]


@dataclass(frozen=True)
class GateResult(BaseSide):
    """One profile's evaluation against its baseline entry and snapshots (and a git ref's).

    `problem` says why nothing could be compared (no baseline entry, a damaged file, a
    credential in the cassettes); when it is None, `own` holds the comparison with the pull
    request's baseline and `base` (with a ref) the comparison with what the ref gates.
    """

    settings: Settings
    dataset: Dataset
    run: Run
    scores: dict[str, MethodScores]
    entry: Mapping[str, Any] | None
    problem: str | None
    snapshots: Rankings = field(default_factory=dict)
    # cassette file -> sha256 of the cassettes the run read (recording.cassette_digests).
    digests: Mapping[str, str] = field(default_factory=dict)
    # What looks like a credential in the cassettes: such a result can never be accepted.
    secrets: tuple[str, ...] = ()
    own: Against | None = None
    # The cassettes read whose bytes are not the baseline's: a failure of its own, beside the
    # figures (still compared, so a re-recording shows what it moved before it is accepted).
    changed_cassettes: tuple[str, ...] = ()
    # The settings that differ from the baseline's ("hybrid.rrf_k: 60 -> 5"): a failure of its
    # own too, beside the figures compared with the baseline's (what the change costs).
    changed_config: tuple[str, ...] = ()
    # With a ref: what it gates, and the run compared with it (None: it gates nothing here).
    branch: BaseBranch | None = None
    base: Against | None = None
    # With a ref that judges or measures otherwise (its relevant_grade, its accept_llm_judgments, its
    # k, a question it gates that this run's judgments leave out): the run as the ref judges it,
    # which the ref's comparison reads (None: the run itself).
    base_run: Run | None = None
    # A recording staged and not yet committed (`run_gate(defer_recording=True)`).
    recording: StagedRecording | None = None

    @property
    def checks(self) -> list[Check]:
        """Every compared figure: against the pull request's baseline, then against the ref's."""
        return [*(self.own.checks if self.own else ()), *(self.base.checks if self.base else ())]

    @property
    def compared(self) -> Mapping[str, Any] | None:
        return self.own.compared if self.own else None

    @property
    def changed_data(self) -> DataChanges | None:
        """The dataset's changes since the baseline when some questions are still compared."""
        return self.own.changes if self.own else None

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
        # Against a ref, the update must name it too, or an accepted drop is recorded against the own baseline only.
        baseline = shown_path(self.baseline_path, self.settings.root)
        ref = f" --retrieval-baseline-ref {self.reference}" if self.reference else ""
        return (
            f"{change}. If the change is intended, run `pytest --update-baseline{ref}` (with --allow-regression if a "
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
        return changes.compared_on if changes is not None and changes.questions_changed else None

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
        return list(self.own.unproduced) if self.own else []

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
    settings: Settings,
    mode: Mode = "replay",
    baseline_ref: str | None = None,
    *,
    defer_recording: bool = False,
    profile_asked: str | None = None,
    branch: BaseBranch | None = None,
) -> GateResult:
    """Evaluate the profile (replaying or recording) and compare every gated figure with the baseline.

    With `baseline_ref` (a git ref such as "origin/main"), the run is also compared with what
    that ref gates, read from its own files (`reference.base_branch`; `profile_asked`: the
    profile a flag or the environment chose, which the ref is read for too): a drop fails unless
    the profile's baseline records its acceptance. Errors that stop the evaluation (a missing
    cassette, a replay miss, a damaged file) are raised; a run that cannot be compared is
    returned with `problem` set. With `defer_recording`, a recording stays staged
    (`GateResult.recording`): compared, digested and scanned as staged, committed by the caller
    (the plugin, at session finish) or discarded. `branch` is what the ref gates, when the caller
    read it already (`reference.base_branch`).
    """
    recover(settings)
    # What the base branch gates is read first: a ref that cannot be read costs no evaluation.
    if branch is None and baseline_ref is not None:
        branch = base_branch(baseline_ref, settings, profile_asked)
    dataset = load_dataset(
        settings.dataset, settings.split, settings.relevant_grade, accept_llm=settings.accept_llm_judgments
    )
    # A pull request cannot let pass what its base branch fails: against the base branch, the run
    # is judged as the base branch's own settings and judgments judge it (retrieval.gate.base_judging).
    sides = judging(settings, dataset, branch)
    staged: list[StagedRecording] = []
    with importable(settings.root):
        # Replaying takes seconds; live and recording runs embed the corpus: show how far they are.
        progress = None if mode == "replay" else terminal_progress
        run = evaluate(
            sides.evaluated,
            settings,
            mode=mode,
            progress=progress,
            on_staged=staged.append if defer_recording else None,
            baseline_inputs=_recorded_digests(settings),
            keep_at_least=base_cut_off(branch),
            # What the ref measures besides this project is in the cassettes only when recorded with it.
            baseline_ref=branch.ref if branch is not None and sides.evaluated is not sides.own else None,
        )
    run, base_run = sides.views(run, branch)
    try:
        return _compared(settings, dataset, run, staged[0] if staged else None, branch, base_run)
    except BaseException:
        for recording in staged:
            recording.discard()
        raise


def _compared(
    settings: Settings,
    dataset: Dataset,
    run: Run,
    recording: StagedRecording | None,
    branch: BaseBranch | None,
    base_run: Run | None = None,
) -> GateResult:
    scores = score_run(run, settings.k)
    baseline = shown_path(settings.baseline, settings.root)
    entry = load_baseline(settings.baseline, baseline)["profiles"].get(settings.profile.name)
    folder = cassettes_of(settings)
    new = recording.staged if recording is not None else {}
    digests = cassette_digests(folder, [n for n in run.cassettes if n not in new])
    if new:
        digests.update(cassette_digests(next(iter(new.values())).parent, [n for n in run.cassettes if n in new]))
    digests.update(run.inputs)  # what a cache gave the figures (bm25's analysis), recorded as a cassette is
    shown_snapshots = shown_path(snapshot_path(settings.snapshots, settings.profile.name), settings.root)
    snapshots = load_snapshots(snapshot_path(settings.snapshots, settings.profile.name), shown_snapshots)
    if problem := snapshot_problem(entry, snapshots, shown_snapshots, baseline):
        raise BaselineError(problem)
    # The gate itself scans what it replays (or what a recording staged, in place of the files it
    # replaces): a key must never pass review inside a cassette.
    variables = [k for m in run.declarations for k in run.declared(m).key_variables]
    if settings.profile.api_key_env:  # the profile's own key, whatever its variable is named
        variables.append(settings.profile.api_key_env)
    replaced = tuple(f"{folder / name}:" for name in new)
    secrets = [line for line in scan_cassettes(folder, variables=variables) if not line.startswith(replaced)]
    if new:
        secrets += scan_cassettes(next(iter(new.values())).parent, variables=variables)
    result = GateResult(
        settings,
        dataset,
        run,
        scores,
        entry,
        None,
        snapshots=snapshots,
        digests=dict(sorted(digests.items())),
        secrets=tuple(secrets),
        branch=branch,
        base_run=base_run,
        recording=recording,
    )
    if secrets:
        shown = "; ".join(secrets[:3]) + (f" and {len(secrets) - 3} more" if len(secrets) > 3 else "")
        return replace(
            result,
            problem=f"the cassettes hold what looks like a credential ({shown}): remove it, revoke the key, and "
            f"re-record with `{record_command(settings.profile.name)}`.",
        )
    if entry is None:
        return replace(
            result,
            problem=f"{baseline} has no baseline for profile {settings.profile.name!r}: "
            "create it with `pytest --update-baseline`.",
        )
    problem = incompatibility(entry, run, settings.profile.name)
    if problem is not None:
        return replace(result, problem=problem)
    result = replace(
        result,
        changed_cassettes=tuple(_changed_cassettes(entry.get("cassettes"), result.digests, folder, run.inputs)),
        changed_config=tuple(config_changes(entry, run)),
    )
    return compared_again(result, entry, snapshots)


def compared_again(result: GateResult, entry: Mapping[str, Any], snapshots: Rankings) -> GateResult:
    """The result compared with `entry` and `snapshots` as its own baseline (the committed ones,
    or those an update would write), and with what the ref gates, under the acceptances `entry`
    records."""
    settings = result.settings
    baseline = shown_path(settings.baseline, settings.root)
    own = against(
        result.run,
        result.scores,
        entry,
        snapshots,
        settings.k,
        settings.candidates,
        settings.tolerance,
        source=baseline,
        unjudged=settings.unjudged,
        relevant_grade=settings.relevant_grade,
    )
    missing = ungated_types(own.compared or entry, result.scores if own.compared is None else {}, settings.k)
    problem = None
    if missing:
        problem = (
            f"{baseline} gates no {missing[0]}"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
            + ": a question type of the dataset is not gated (its figure was deleted). Restore it with "
            f"`git checkout -- {baseline}` or rewrite it with `pytest --update-baseline`."
        )
    branch = result.branch
    base = None
    if branch is not None and branch.entry is not None and problem is None:
        base_run = result.base_run or result.run
        base = against(
            base_run,
            result.scores if result.base_run is None else None,
            branch.entry,
            branch.snapshots,
            branch.k,  # its figures as it defines them: a pull request's k cannot lift its recall@k
            settings.candidates,
            branch.tolerance,
            reference=branch.ref,
            accepting=entry,
            source=branch.baseline,
            # A pull request cannot let pass what its base branch fails: the base's own setting.
            unjudged=branch.unjudged,
            relevant_grade=branch.relevant_grade,
        )
    return replace(result, entry=entry, snapshots=snapshots, own=own, base=base, problem=problem)


def _recorded_digests(settings: Settings) -> dict[str, str]:
    """The digests the profile's baseline records (cassettes, and inputs a cache may hold): a cached
    input of another digest is computed again, never used (Context.baseline_inputs)."""
    shown = shown_path(settings.baseline, settings.root)
    entry = load_baseline(settings.baseline, shown)["profiles"].get(settings.profile.name) or {}
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
