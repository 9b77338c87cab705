"""One gate run judged: what the pytest plugin's items and `python -m retrieval --gate` report.

`judge_run` evaluates and compares (retrieval.gate.result) and turns the result into one verdict per
item name (retrieval.gate.verdicts), trying an update without writing it when asked: the plugin
writes it at session finish, once every gate item ran and held.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from retrieval.config import ConfigError, Settings
from retrieval.data.dataset import DatasetError
from retrieval.gate.accept import accept
from retrieval.gate.result import GateResult, run_gate
from retrieval.gate.schema import BaselineError
from retrieval.gate.verdicts import Verdict, judge
from retrieval.providers.base import ProviderError
from retrieval.recording.cassette_files import CassetteError
from retrieval.recording.recorder import Mode

__all__ = ["KNOWN_ERRORS", "GateOutcome", "judge_run"]

# Errors whose message is already one line naming the file and the fix.
KNOWN_ERRORS = (BaselineError, CassetteError, ConfigError, DatasetError, ProviderError)


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
    allow_regression: bool | str = False,
    defer_recording: bool = False,
    baseline_ref: str | None = None,
) -> GateOutcome:
    """Evaluate, compare and judge: what the plugin's items and `python -m retrieval --gate` report.

    Whatever stops the comparison is the `gate` verdict: a known error in its one line, anything
    else (a user's method may raise anything) with its redacted traceback. With `update`, the
    baseline update is tried without writing (`accept(write=False)`): its verdicts are those of
    the updated baseline, and `pending` is what to accept once the run may write.
    """
    from retrieval.text.redaction import failure_text, redacted

    def said(exc: Exception) -> str:
        known = isinstance(exc, KNOWN_ERRORS)
        return redacted(f"{type(exc).__name__}: {exc}") if known else f"the evaluation raised {failure_text(exc)}"

    outcome = GateOutcome([])
    refusal = None
    try:
        result = outcome.result = run_gate(settings, mode, baseline_ref, defer_recording=defer_recording)
        outcome.problem = result.problem
    except Exception as exc:
        outcome.problem = said(exc)
    if update and outcome.result is not None:
        # Tried without writing: no baseline yet or another dataset is what an update is for;
        # a refusal (a figure fell, a credential) leaves the comparison with the committed baseline.
        pending = copy.copy(outcome.result)
        try:
            outcome.diff = accept(outcome.result, allow_regression=allow_regression, write=False)
            outcome.pending, outcome.problem = pending, None
        except (BaselineError, CassetteError) as exc:
            outcome.result, refusal = pending, said(exc)
    outcome.verdicts = judge(outcome.result, outcome.problem, names, refusal)
    return outcome
