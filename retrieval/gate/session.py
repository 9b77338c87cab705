"""What the pytest plugin knows during one session, and the summary line it prints.

One object (`GateSession`) per pytest config: the gate's item names (known at collection,
without evaluating), the one evaluation (run when the first gate item runs), the items'
outcomes, and what the session must fail for. The plugin's hooks (retrieval.gate.plugin)
only feed it; the evaluation and the verdicts live in retrieval.gate.result and retrieval.gate.verdicts.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval.config import ConfigError, Settings, load_settings, shown_path
from retrieval.gate.baseline_set import recover
from retrieval.gate.compare import unproduced
from retrieval.gate.schema import BaselineError, load_baseline
from retrieval.gate.snapshots import TOP, load_snapshots, snapshot_path
from retrieval.gate.verdicts import GATE, Verdict, item_names

if TYPE_CHECKING:  # the evaluator loads only when the gate runs
    from retrieval.gate.judge import GateOutcome
    from retrieval.recording.recorder import Mode

__all__ = ["FailureText", "Frame", "GateSession", "orphan_baseline", "outcome_frame", "planned_items", "summary"]


def planned_items(settings: Settings, baseline_ref: str | None = None) -> list[str]:
    """The gate's item names, read from the configuration, the baseline file and the snapshot
    file (and with `baseline_ref`, the baseline at that git ref, read with `git show`): nothing
    evaluated, no model called. A file (or ref) that cannot be read leaves the items every gate
    has; its error fails the `gate` item when the gate runs."""
    try:
        entry = load_baseline(settings.baseline)["profiles"].get(settings.profile.name) or {}
        snapshots = load_snapshots(snapshot_path(settings.snapshots, settings.profile.name))
    except BaselineError:
        entry, snapshots = {}, {}
    theirs: dict[str, Any] = {}
    if baseline_ref is not None:
        from retrieval.gate.reference import baseline_at  # only with a ref: it runs git

        try:
            theirs = baseline_at(baseline_ref, settings.baseline)["profiles"].get(settings.profile.name) or {}
        except BaselineError:
            theirs = {}
    figures = unproduced(entry, [])  # every figure of the entry: none compared yet
    methods = [*entry.get("methods", {}), *snapshots]
    return item_names(settings.methods, figures, methods, baseline_ref, unproduced(theirs, []))


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
    allow_regression: bool | str = False  # the reason (--allow-regression REASON)
    baseline_ref: str | None = None  # --retrieval-baseline-ref: also compared with that ref's baseline
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
        return load_settings(self.project_file.parent, self.overrides, flag_prefix="--retrieval-")

    def unauthenticated(self) -> str | None:
        """Why a recording of this profile cannot authenticate (a bad project file too), or None."""
        from retrieval.providers import required_key

        try:
            settings = self.settings()
        except ConfigError as exc:
            return str(exc)
        missing = required_key(settings.profile)
        return f"--record with profile {settings.profile.name!r} needs {missing}; it is not set." if missing else None

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
            # The names are those the run will compare: a set a killed update left half written
            # is put back first (if it cannot be, the gate run says why).
            with contextlib.suppress(BaselineError, OSError):
                recover(settings)
            self.names = planned_items(settings, self.baseline_ref)
        return self.names

    def evaluate(self) -> GateOutcome:
        """Run the gate once per process: evaluate, compare, judge (and try the update)."""
        if self.outcome is not None:
            return self.outcome
        from retrieval.gate.judge import GateOutcome, judge_run
        from retrieval.gate.verdicts import judge
        from retrieval.text.redaction import redacted

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
                    settings,
                    names,
                    mode,
                    update=self.update,
                    allow_regression=self.allow_regression,
                    defer_recording=True,
                    baseline_ref=self.baseline_ref,
                )
        self.frame = outcome_frame(self.outcome, self.profile)
        return self.outcome

    def verdict(self, name: str) -> Verdict:
        outcome = self.evaluate()
        return next(v for v in outcome.verdicts if v.name == name)

    def frame_data(self) -> dict[str, Any] | None:
        """The summary frame as plain data (a report attribute an xdist worker sends)."""
        return asdict(self.frame) if self.frame is not None else None

    def deselection(self, why: list[str], flag: str | None) -> None:
        """Gate items were deselected: say why, and refuse an update or a recording of part of it."""
        said = ", ".join(why) or "a plugin"
        some = f"{len(self.deselected)} of its {self.items}" if self.gate_ids else f"all {self.items} of its"
        self.not_run = f"{some} items deselected ({said})"
        if flag in ("--update-baseline", "--record"):
            # Accepting or recording what part of the gate saw would lower the bar unseen.
            self.refused = (
                f"{flag} refused: {len(self.deselected)} of the gate's items were deselected ({said}); "
                "run it on the whole gate."
            )

    def finish(
        self, root: Path, flag: str | None, collect_only: bool, allow_regression: bool | str | None
    ) -> list[str]:
        """At session finish: write an accepted update, and list what fails the session."""
        problems = self.problems
        if self.skipped:
            problems.append(
                f"gate item(s) skipped: {', '.join(self.skipped)}. The gate never skips: "
                "remove the skip or xfail that reached them."
            )
        if collect_only:
            return problems
        if self.project_file is not None and not self.gate_ids and flag:
            problems.append(
                f"{flag} was given but the gate was not selected (a -m/-k filter, or only test files named): "
                f"nothing was recorded or updated. Run `pytest {flag}` with no path."
            )
        elif self.gate_ids and not self.outcomes:
            problems.append("the gate was collected but none of its items ran: nothing was compared.")
        elif self.project_file is None and orphan_baseline(root):
            problems.append(orphan_baseline(root))
        elif self.not_run and self.plan() and self.required:
            problems.append(f"required = true in [tool.retrieval], but this run did not gate: {self.not_run}.")
        outcome = self.outcome
        if not self._committed(outcome, update=flag == "--update-baseline"):
            return problems
        if flag == "--update-baseline" and outcome is not None and outcome.pending is not None:
            held, outcome.diff = self.everything_ran_and_held(), None
            if held is not None:
                problems.append(f"--update-baseline wrote nothing: {held}.")
                return problems
            from retrieval.gate.accept import accept
            from retrieval.gate.judge import KNOWN_ERRORS

            try:
                outcome.diff = accept(outcome.pending, allow_regression=allow_regression or False)
            except (*KNOWN_ERRORS, OSError) as exc:  # the files changed under the run, a full disk
                problems.append(f"--update-baseline wrote nothing: {type(exc).__name__}: {exc}")
        return problems

    def closing(self, root: Path, collect_only: bool) -> list[tuple[str | None, str, bool]]:
        """The terminal's closing lines: (section to open or None, line, failed)."""
        lines: list[tuple[str | None, str, bool]] = []
        outcome = self.outcome
        drift = outcome.result.run.drift if outcome is not None and outcome.result is not None else []
        lines += [("recording drift" if i == 0 else "", line, False) for i, line in enumerate(drift)]
        if outcome is not None and outcome.diff:
            lines.append(("baseline updated", outcome.diff, False))
        if self.kinds or (collect_only and self.items):
            lines.append((None, summary(self, collect_only), False))
        if self.not_run and self.project_file is not None and not collect_only:
            where = shown_path(self.project_file, root)
            said = f"{where} configures it (`required = true` fails such a run)"
            lines.append((None, f"retrieval gate not run: {self.not_run}; {said}", False))
        if self.problems:
            lines.append((None, f"retrieval gate FAILED: {' '.join(self.problems)}", True))
        return lines

    def _committed(self, outcome: GateOutcome | None, update: bool) -> bool:
        """Commit a staged recording once every gate item ran and its `secrets` item held (all of
        them with --update-baseline); else discard it. False when a recording was not committed."""
        recording = outcome.result.recording if outcome is not None and outcome.result is not None else None
        if recording is None:
            return True
        held = self.everything_ran_and_held(None if update else ("secrets",))
        if held is not None:
            recording.discard()
            self.problems.append(f"--record committed nothing (the cassettes are as they were): {held}.")
            return False
        from retrieval.gate.judge import KNOWN_ERRORS

        try:
            recording.commit()
        except (*KNOWN_ERRORS, OSError) as exc:
            self.problems.append(f"--record committed nothing: {type(exc).__name__}: {exc}")
            return False
        return True

    def everything_ran_and_held(self, names: tuple[str, ...] | None = None) -> str | None:
        """Why this session must not write the gate's files, or None when every item ran and held
        (every item, or those of `names` among them)."""
        if self.deselected:
            return f"{len(self.deselected)} gate item(s) deselected"
        ran = [n for n in self.gate_ids if self.outcomes.get(n) in ("passed", "failed")]
        if len(ran) < len(self.gate_ids) or not self.gate_ids:
            return f"{len(self.gate_ids) - len(ran)} of the gate's {len(self.gate_ids)} items did not run"
        failed = [
            n for n, name in self.gate_ids.items() if self.outcomes.get(n) != "passed" and name in (names or name)
        ]
        if failed:
            return f"{len(failed)} gate item(s) failed"
        return None


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def outcome_frame(outcome: GateOutcome, profile: str) -> Frame:
    """The summary line's parts that come from the evaluation (see `summary`); `profile` names
    the profile when nothing was evaluated."""
    result = outcome.result
    profile = result.profile if result else profile
    where = f"profile {profile}, dataset {result.run.dataset}" if result else f"profile {profile}"
    if outcome.problem or result is None:
        return Frame(where, problem=(outcome.problem or "no result").splitlines()[0])
    tail = ""
    if result.tolerance:  # the project file's: a baseline file's own is never trusted
        tail += f", tolerance {result.tolerance}"
    if result.reference:
        tail += f"; compared with {result.reference}'s baseline too" + (
            f" ({result.reference_note})" if result.reference_note else ""
        )
    if any(c.accepted for c in result.checks):
        tail += f"; drops accepted against {result.reference}: {(result.acceptance or {}).get('reason')}"
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


def orphan_baseline(root: Path) -> str:
    """Why a committed gate baseline with no configuration left to gate it fails the run, or ""."""
    path = root / "baselines" / "metrics.json"
    try:
        format_ = json.loads(path.read_text(encoding="utf-8")).get("format", "")
    except (OSError, ValueError, AttributeError):
        return ""
    if not str(format_).startswith("retrieval-baseline"):
        return ""
    return (
        "baselines/metrics.json holds a retrieval baseline but no [tool.retrieval] (or retrieval.toml) configures "
        "the gate: this run gated nothing. Restore the configuration, or remove baselines/ if the gate was "
        "dropped on purpose."
    )


@dataclass
class _Crash:
    path: str
    lineno: int
    message: str


class FailureText:
    """A gate item's failure report: one paragraph, shown in full and on the short summary line."""

    def __init__(self, item: Any, message: str) -> None:
        self.message = message
        self.reprcrash = _Crash(str(item.path), 0, message)

    def toterminal(self, tw: Any) -> None:
        tw.line(self.message, red=True, bold=True)

    def __str__(self) -> str:
        return self.message
