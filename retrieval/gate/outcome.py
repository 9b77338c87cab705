"""One gate run's outcome: what the pytest plugin's items, `python -m retrieval --gate` and the job
summary report.

`gate_outcome` reads what the base branch gates, evaluates and compares (retrieval.gate.result),
tries an update without writing it when asked (the plugin writes it at session finish, once every
gate item ran and held), and turns it all into the verdict model (retrieval.gate.verdicts). The
outcome is an immutable value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from retrieval.config import ConfigError, Settings
from retrieval.data.dataset import DatasetError
from retrieval.gate.accept import tried_update
from retrieval.gate.reference import BaseBranch, base_branch
from retrieval.gate.result import GateResult, run_gate
from retrieval.gate.schema import BaselineError
from retrieval.gate.verdicts import verdicts_of, with_verdicts
from retrieval.providers.base import ProviderError
from retrieval.recording.cassette_files import CassetteError
from retrieval.recording.recorder import Mode
from retrieval.report.verdict import GateVerdict, ItemVerdict

__all__ = ["KNOWN_ERRORS", "GateOutcome", "gate_outcome", "read_base_branch"]

# Errors whose message is already one line naming the file and the fix.
KNOWN_ERRORS = (BaselineError, CassetteError, ConfigError, DatasetError, ProviderError)


@dataclass(frozen=True)
class GateOutcome:
    """One gate run: its verdicts, the result they judge, and what an update would write."""

    verdict: GateVerdict
    result: GateResult | None = None
    diff: str | None = None  # the baseline update's diff (--update-baseline)
    pending: GateResult | None = None  # the result to accept at session finish

    @property
    def verdicts(self) -> tuple[ItemVerdict, ...]:
        return self.verdict.items

    def failed(self) -> tuple[ItemVerdict, ...]:
        return self.verdict.failed


def said(exc: Exception) -> str:
    """What stopped the gate, in one line for a known error, with its redacted traceback else (a
    user's method may raise anything)."""
    from retrieval.text.redaction import failure_text, redacted

    known = isinstance(exc, KNOWN_ERRORS)
    return redacted(f"{type(exc).__name__}: {exc}") if known else f"the evaluation raised {failure_text(exc)}"


def read_base_branch(ref: str | None, settings: Settings, profile: str | None) -> BaseBranch | BaselineError | None:
    """What `ref` gates (None: no ref), read once for a command's item names and its gate run
    (`planned_items`, `gate_outcome`: two readings cost twice the git processes); the BaselineError
    that stops the reading is kept, for the run to report as its own."""
    if ref is None:
        return None
    try:
        return base_branch(ref, settings, profile)
    except BaselineError as exc:
        return exc


def gate_outcome(
    settings: Settings,
    names: Sequence[str],
    mode: Mode = "replay",
    *,
    update: bool = False,
    allow_regression: bool | str = False,
    defer_recording: bool = False,
    baseline_ref: str | None = None,
    profile_asked: str | None = None,
    known: BaseBranch | BaselineError | None = None,
) -> GateOutcome:
    """Read what `baseline_ref` gates (`known`: as `read_base_branch` read it already), evaluate,
    compare and judge: what the plugin's items and `python -m retrieval --gate` report.

    Whatever stops the comparison is the `gate` verdict. With `update`, the baseline update is
    tried without writing (`accept.tried_update`): its verdicts are those of the updated baseline,
    the items it removes (a method dropped with its reason) hold saying so, and `pending` is what
    to accept once the run may write; a refused update fails the gate item beside the comparison.
    """
    branch: BaseBranch | None = None
    result: GateResult | None = None
    problem = None
    try:
        if isinstance(known, BaselineError):
            raise known
        if baseline_ref is not None:
            branch = known if known is not None else base_branch(baseline_ref, settings, profile_asked)
        result = run_gate(settings, mode, defer_recording=defer_recording, branch=branch)
        problem = result.problem
    except Exception as exc:
        problem = said(exc)
    refusal, diff, pending, removed = None, None, None, {}
    if update and result is not None:
        # Tried without writing: no baseline yet is what an update is for; a refusal (a figure
        # fell, a credential) leaves the comparison with the committed baseline.
        try:
            diff, pending = tried_update(result, allow_regression=allow_regression)
        except (BaselineError, CassetteError) as exc:
            refusal = said(exc)
        else:
            gone = with_verdicts(result) - with_verdicts(pending)
            reason = (pending.acceptance or {}).get("reason")
            why = f"removed from the baseline by this update ({reason})" if reason else "removed by this update"
            removed = {name: why for name in names if name in gone}
            result, problem = pending, None
    verdict = verdicts_of(
        result, problem, names, refusal, profile=settings.profile.name, removed=removed, branch=branch
    )
    return GateOutcome(verdict, result, diff, pending)
