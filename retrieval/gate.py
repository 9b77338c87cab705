"""The regression gate: evaluate a profile, compare with the committed baseline, update it.

conftest.py and the CLI call these functions; the pytest suite only asserts on their
results, so the gate behaves the same in `pytest -m regression` and in a script.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval.baseline import Check, compare, entry_for, incompatibility, load_baseline, update_baseline
from retrieval.config import Settings
from retrieval.dataset import Dataset, load_dataset
from retrieval.evaluate import evaluate
from retrieval.metrics import MethodScores, score_run
from retrieval.recording import Mode, Recorder, record_command
from retrieval.run import Run

__all__ = ["BASELINE_PATH", "GateResult", "accept", "run_gate", "skip_reason"]

BASELINE_PATH = "baselines/metrics.json"


@dataclass
class GateResult:
    """One profile's evaluation set against its baseline entry."""

    settings: Settings
    dataset: Dataset
    run: Run
    scores: dict[str, MethodScores]
    entry: dict[str, Any] | None
    problem: str | None
    checks: list[Check] = field(default_factory=list)

    @property
    def profile(self) -> str:
        return self.settings.profile.name


def skip_reason(settings: Settings, mode: Mode) -> str | None:
    """Why a profile cannot be gated here (no cassettes to replay), or None."""
    recorder = Recorder(mode, Path(settings.cassettes) / settings.profile.name, settings.profile.name)
    if mode == "replay" and not recorder.has_any():
        return (
            f"profile {settings.profile.name!r} has no cassettes in {recorder.directory}: "
            f"record them with `{record_command(settings.profile.name)}`"
        )
    return None


def run_gate(settings: Settings, mode: Mode = "replay", baseline_path: str | Path = BASELINE_PATH) -> GateResult:
    """Evaluate the profile (replaying or recording) and compare every gated figure with the baseline."""
    dataset = load_dataset(settings.dataset)
    run = evaluate(dataset, settings, mode=mode)
    scores = score_run(run, settings.k)
    entry = load_baseline(baseline_path)["profiles"].get(settings.profile.name)
    result = GateResult(settings, dataset, run, scores, entry, None)
    if entry is None:
        result.problem = (
            f"{baseline_path} has no baseline for profile {settings.profile.name!r}: "
            "create it with `pytest --update-baseline`."
        )
        return result
    result.problem = incompatibility(entry, run, settings.profile.name)
    if result.problem is None:
        types = {q.id: q.type for q in dataset.questions}
        result.checks = compare(entry, scores, settings.k, types)
    return result


def accept(result: GateResult, baseline_path: str | Path = BASELINE_PATH, *, allow_regression: bool = False) -> str:
    """Make the result the profile's new baseline; returns the diff. Refuses to lower a figure
    unless `allow_regression` (raises BaselineError, file untouched)."""
    entry = entry_for(result.run, result.scores, result.settings.k)
    diff = update_baseline(baseline_path, result.profile, entry, allow_regression=allow_regression)
    result.entry = load_baseline(baseline_path)["profiles"][result.profile]
    result.problem = None
    types = {q.id: q.type for q in result.dataset.questions}
    result.checks = compare(result.entry, result.scores, result.settings.k, types)
    return diff
