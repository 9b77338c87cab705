"""What the pytest plugin knows during one session, and the summary line it prints.

One object (`GateSession`) per pytest config: the gate's item names (known at collection,
without evaluating), the one evaluation (run when the first gate item runs), the items'
outcomes, and what the session must fail for. The plugin's hooks (retrieval.pytest_plugin)
only feed it; the evaluation and the verdicts live in retrieval.gate and retrieval.verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval.baseline import BaselineError, load_baseline, unproduced
from retrieval.config import ConfigError, Settings, load_settings
from retrieval.snapshots import TOP, load_snapshots, snapshot_path
from retrieval.verdicts import GATE, Verdict, item_names

if TYPE_CHECKING:  # the evaluator loads only when the gate runs
    from retrieval.gate import GateOutcome
    from retrieval.recording import Mode

__all__ = ["Frame", "GateSession", "planned_items"]


def planned_items(settings: Settings) -> list[str]:
    """The gate's item names, read from the configuration, the baseline file and the snapshot
    file: nothing evaluated, no model called. A file that cannot be read leaves the items every
    gate has; its error fails the `gate` item when the gate runs."""
    try:
        entry = load_baseline(settings.baseline)["profiles"].get(settings.profile.name) or {}
        snapshots = load_snapshots(snapshot_path(settings.snapshots, settings.profile.name))
    except BaselineError:
        entry, snapshots = {}, {}
    figures = unproduced(entry, [])  # every figure of the entry: none compared yet
    return item_names(settings.methods, figures, [*entry.get("methods", {}), *snapshots])


@dataclass(frozen=True)
class Frame:
    """The summary line's parts known once the gate is evaluated: all of it but the counts of
    outcomes. Plain data, so that an xdist worker can send it to the controller."""

    where: str  # "profile local, dataset faq"
    problem: str | None = None  # what stopped the comparison (its first line): nothing compared
    methods: int = 0
    tail: str = ""  # the tolerance and the notes after the counts


@dataclass
class GateSession:
    """The gate in one pytest session."""

    project_file: Path | None
    overrides: dict[str, Any] = field(default_factory=dict)
    mode: str = "replay"
    update: bool = False
    allow_regression: bool = False
    names: list[str] | None = None  # the gate's items, once planned
    config_problem: str | None = None  # the project file could not be read: the gate item says so
    required: bool = False
    profile: str = "?"
    outcome: GateOutcome | None = None
    frame: Frame | None = None
    refused: str | None = None  # why this run must not evaluate (an update with items deselected)
    gate_ids: dict[str, str] = field(default_factory=dict)  # nodeid -> item name, selected to run
    deselected: list[str] = field(default_factory=list)  # gate node ids deselected
    kinds: dict[str, str] = field(default_factory=dict)  # nodeid -> verdict kind, from the reports
    outcomes: dict[str, str] = field(default_factory=dict)  # nodeid -> passed | failed
    skipped: list[str] = field(default_factory=list)
    items: int = 0  # the gate's items, run or not
    not_run: str | None = None  # why a configured gate did not run in this session
    problems: list[str] = field(default_factory=list)  # what fails the session besides items
    one_process: str | None = None  # the flag that set pytest-xdist's -n aside
    discovered: list[Path] = field(default_factory=list)  # project files met below the rootdir
    evaluations: int = 0

    def settings(self) -> Settings:
        assert self.project_file is not None
        return load_settings(self.project_file.parent, self.overrides)

    def plan(self) -> list[str]:
        """The item names (once per session). Reads files, evaluates nothing."""
        if self.names is None:
            if self.project_file is None:
                self.names = [GATE]
                return self.names
            try:
                settings = self.settings()
            except ConfigError:
                self.names = [GATE]  # the gate item reports the error when it runs
                return self.names
            self.profile, self.required = settings.profile.name, settings.required
            self.names = planned_items(settings)
        return self.names

    def evaluate(self) -> GateOutcome:
        """Run the gate once per process: evaluate, compare, judge (and try the update)."""
        if self.outcome is not None:
            return self.outcome
        from retrieval.gate import GateOutcome, judge_run
        from retrieval.redaction import redacted
        from retrieval.verdicts import judge

        self.evaluations += 1
        names = self.plan()
        if self.refused or self.project_file is None:
            problem = self.refused or "no project file: add a [tool.retrieval] table to pyproject.toml"
            self.outcome = GateOutcome(judge(None, problem, names), problem=problem)
        else:
            try:
                settings = self.settings()
            except ConfigError as exc:
                problem = redacted(f"ConfigError: {exc}")
                self.outcome = GateOutcome(judge(None, problem, names), problem=problem)
            else:
                self.profile = settings.profile.name
                mode: Mode = "record" if self.mode == "record" else "replay"
                self.outcome = judge_run(
                    settings, names, mode, update=self.update, allow_regression=self.allow_regression
                )
        self.frame = _frame(self, self.outcome)
        return self.outcome

    def verdict(self, name: str) -> Verdict:
        outcome = self.evaluate()
        return next(v for v in outcome.verdicts if v.name == name)

    def everything_ran_and_held(self) -> str | None:
        """Why this session must not write the gate's files, or None when every item ran and held."""
        if self.deselected:
            return f"{len(self.deselected)} gate item(s) deselected"
        ran = [n for n in self.gate_ids if self.outcomes.get(n) in ("passed", "failed")]
        if len(ran) < len(self.gate_ids) or not self.gate_ids:
            return f"{len(self.gate_ids) - len(ran)} of the gate's {len(self.gate_ids)} items did not run"
        failed = [n for n in self.gate_ids if self.outcomes.get(n) != "passed"]
        if failed:
            return f"{len(failed)} gate item(s) failed"
        return None


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _frame(session: GateSession, outcome: GateOutcome) -> Frame:
    """The summary line's parts that come from the evaluation (see `summary`)."""
    result = outcome.result
    profile = result.profile if result else session.profile
    where = f"profile {profile}, dataset {result.run.dataset}" if result else f"profile {profile}"
    if outcome.problem or result is None:
        return Frame(where, problem=(outcome.problem or "no result").splitlines()[0])
    tail = ""
    tolerance = float((result.entry or {}).get("tolerance", 0.0))
    if tolerance:
        tail += f", tolerance {tolerance}"
    if result.changed_cassettes:
        tail += f"; cassettes changed since the baseline: {', '.join(result.changed_cassettes)}"
    if result.changed_config:
        tail += f"; configuration changed since the baseline: {'; '.join(result.changed_config)}"
    if result.changed_data:
        tail += (
            f"; dataset changed since the baseline: {result.changed_data}, figures compared on the "
            f"{len(result.changed_data.common)} questions both hold"
        )
    if result.entry is not None and "questions" not in result.entry:
        # Made by an older version: a pull request that changes the dataset would not be compared.
        tail += "; the baseline has no question digests yet: `pytest --update-baseline` adds them (no figure changes)"
    # Requested methods the profile cannot provide (a reranker without a model): said once here.
    skipped = result.run.skipped
    if skipped:
        tail += "; not gated: " + "; ".join(f"{m}: {why}" for m, why in skipped.items())
    return Frame(where, methods=len(result.run.methods), tail=tail)


def summary(session: GateSession, collect_only: bool = False) -> str:
    """The run's one summary line: what the gate compared."""
    if collect_only:
        where = f"profile {session.profile}"
        return f"retrieval gate ({where}): {_count(session.items, 'item')} collected, nothing compared (--collect-only)"
    frame = session.frame or Frame(f"profile {session.profile}", problem="no result")
    if frame.problem:
        return f"retrieval gate ({frame.where}): nothing compared: {frame.problem}"
    outcomes, kinds = session.outcomes, session.kinds
    figures = [n for n, k in kinds.items() if k == "figure"]
    held = sum(outcomes.get(n) == "passed" for n in figures)
    fell = sum(outcomes.get(n) == "failed" for n in figures)
    snaps = [n for n, k in kinds.items() if k == "snapshot"]
    matched = sum(outcomes.get(n) == "passed" for n in snaps)
    moved_ = sum(outcomes.get(n) == "failed" for n in snaps)
    line = (
        f"retrieval gate ({frame.where}): {_count(frame.methods, 'method')}, {held} figures held, {fell} fell, "
        f"{matched} top-{TOP} snapshots matched, {moved_} moved{frame.tail}"
    )
    # After -x stopped the session, or --lf ran the failed items alone, the counts above are of
    # the items that ran: the others were compared but not reported.
    unrun = session.items - sum(outcomes.get(n) in ("passed", "failed") for n in kinds)
    if unrun > 0:
        line += f"; {unrun} of its {session.items} items not run (stopped early or deselected): not known to hold"
    return line
