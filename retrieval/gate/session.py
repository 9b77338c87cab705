"""What the pytest plugin knows during one session, as immutable values, and the summary line.

A session is a value (`GateSession`) made of four: what the command line asks (`GateRequest`),
the gate's items read from the files (`GatePlan`, known at collection without evaluating), which
of them this run selected (`Selection`), and what their reports said (`Tally`); plus the one
outcome (evaluated when the first gate item runs) and what the session must fail for. Each step
returns a new session; the plugin (retrieval.gate.plugin) holds the current one in one place and
only feeds it. The evaluation and the verdicts live in retrieval.gate.outcome and .verdicts.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval.config import ConfigError, Settings, load_settings, shown_path
from retrieval.gate.baseline_set import recover
from retrieval.gate.compare import unproduced
from retrieval.gate.schema import BaselineError, load_baseline
from retrieval.gate.snapshots import TOP, load_snapshots, snapshot_path
from retrieval.gate.verdicts import GATE, item_names

if TYPE_CHECKING:  # the evaluator loads only when the gate runs
    from retrieval.gate.outcome import GateOutcome
    from retrieval.gate.reference import BaseBranch
    from retrieval.recording.recorder import Mode
    from retrieval.report.verdict import GateVerdict, ItemVerdict

__all__ = [
    "FailureText",
    "Frame",
    "GatePlan",
    "GateRequest",
    "GateSession",
    "Selection",
    "Tally",
    "orphan_baseline",
    "planned_items",
    "summary",
    "verdict_frame",
]


def planned_items(
    settings: Settings,
    baseline_ref: str | None = None,
    profile_asked: str | None = None,
    known: BaseBranch | BaselineError | None = None,
) -> list[str]:
    """The gate's item names, read from the configuration, the baseline file and the snapshot
    file (and with `baseline_ref`, the entry that git ref gates, read with `git show`, or `known`,
    as read already): nothing evaluated, no model called. A file (or ref) that cannot be read
    leaves the items every gate has; its error fails the `gate` item when the gate runs."""
    try:
        entry = load_baseline(settings.baseline)["profiles"].get(settings.profile.name) or {}
        snapshots = load_snapshots(snapshot_path(settings.snapshots, settings.profile.name))
    except BaselineError:
        entry, snapshots = {}, {}
    theirs: Mapping[str, Any] = {}
    if baseline_ref is not None:
        from retrieval.gate.reference import base_branch  # only with a ref: it runs git

        try:
            branch = known or base_branch(baseline_ref, settings, profile_asked, texts=False, touched=False)
        except BaselineError as exc:
            branch = exc
        theirs = {} if isinstance(branch, BaselineError) else branch.entry or {}
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


def verdict_frame(verdict: GateVerdict) -> Frame:
    """The summary line's parts, from the verdict model (the CLI and the plugin print the same)."""
    return Frame(verdict.where, verdict.problem, verdict.methods, "".join(verdict.notes))


@dataclass(frozen=True)
class GateRequest:
    """What the command line asks of the gate."""

    project_file: Path | None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    mode: str = "replay"
    update: bool = False
    allow_regression: bool | str = False  # the reason (--allow-regression REASON)
    baseline_ref: str | None = None  # --retrieval-baseline-ref: also compared with what that ref gates
    one_process: str | None = None  # the flag that set pytest-xdist's -n aside

    def settings(self) -> Settings:
        assert self.project_file is not None
        return load_settings(self.project_file.parent, self.overrides, flag_prefix="--retrieval-")


@dataclass(frozen=True)
class GatePlan:
    """The gate's items, read from the files at collection."""

    names: tuple[str, ...]
    profile: str = "?"
    required: bool = False


@dataclass(frozen=True)
class Selection:
    """Which gate items this run selected, and what that leaves out."""

    gate_ids: Mapping[str, str] = field(default_factory=dict)  # nodeid -> item name, selected to run
    deselected: tuple[str, ...] = ()  # gate node ids deselected
    items: int = 0  # the gate's items, run or not
    not_run: str | None = None  # why a configured gate did not run in this session
    refused: str | None = None  # why this run must not evaluate (an update with items deselected)
    discovered: tuple[Path, ...] = ()  # project files met below the rootdir


@dataclass(frozen=True)
class Tally:
    """What the gate items' reports said."""

    kinds: Mapping[str, str] = field(default_factory=dict)  # nodeid -> verdict kind
    outcomes: Mapping[str, str] = field(default_factory=dict)  # nodeid -> passed | failed
    skipped: tuple[str, ...] = ()
    frame: Frame | None = None


@dataclass(frozen=True)
class GateSession:
    """The gate in one pytest session, as a value: every step returns a new one."""

    request: GateRequest
    plan: GatePlan | None = None
    selection: Selection = field(default_factory=Selection)
    tally: Tally = field(default_factory=Tally)
    outcome: GateOutcome | None = None
    problems: tuple[str, ...] = ()  # what fails the session besides items

    @property
    def project_file(self) -> Path | None:
        return self.request.project_file

    @property
    def profile(self) -> str:
        return self.plan.profile if self.plan else "?"

    def unauthenticated(self) -> str | None:
        """Why a recording of this profile cannot authenticate (a bad project file too), or None."""
        from retrieval.providers import required_key

        try:
            settings = self.request.settings()
        except ConfigError as exc:
            return str(exc)
        missing = required_key(settings.profile)
        return f"--record with profile {settings.profile.name!r} needs {missing}; it is not set." if missing else None

    def planned(self) -> GateSession:
        """The session with its item names (read once). Reads files, evaluates nothing."""
        if self.plan is not None:
            return self
        if self.project_file is None:
            return replace(self, plan=GatePlan((GATE,)))
        try:
            settings = self.request.settings()
        except ConfigError:
            return replace(self, plan=GatePlan((GATE,)))  # the gate item reports the error when it runs
        # The names are those the run will compare: a set a killed update left half written
        # is put back first (if it cannot be, the gate run says why).
        with contextlib.suppress(BaselineError, OSError):
            recover(settings)
        names = planned_items(settings, self.request.baseline_ref, self.request.overrides.get("profile"))
        return replace(self, plan=GatePlan(tuple(names), settings.profile.name, settings.required))

    def evaluated(self) -> GateSession:
        """The session with its outcome: evaluate, compare, judge (and try the update), once."""
        if self.outcome is not None:
            return self
        from retrieval.gate.outcome import GateOutcome, gate_outcome
        from retrieval.gate.verdicts import verdicts_of
        from retrieval.text.redaction import redacted

        session = self.planned()
        assert session.plan is not None
        names, request = session.plan.names, session.request
        no_file = "no project file: add a [tool.retrieval] table to pyproject.toml"
        problem = session.selection.refused or (None if request.project_file is not None else no_file)
        settings = None
        if problem is None:
            try:
                settings = request.settings()
            except ConfigError as exc:
                problem = redacted(f"ConfigError: {exc}")
        if settings is None:
            outcome = GateOutcome(verdicts_of(None, problem, names, profile=session.profile))
        else:
            mode: Mode = "record" if request.mode == "record" else "replay"
            outcome = gate_outcome(
                settings,
                names,
                mode,
                update=request.update,
                allow_regression=request.allow_regression,
                defer_recording=True,
                baseline_ref=request.baseline_ref,
                profile_asked=request.overrides.get("profile"),
            )
        return replace(session, outcome=outcome, tally=replace(session.tally, frame=verdict_frame(outcome.verdict)))

    def verdict(self, name: str) -> ItemVerdict:
        """Item `name`'s verdict (the session must be evaluated); an item without one fails."""
        assert self.outcome is not None
        return self.outcome.verdict.item(name)

    def frame_data(self) -> dict[str, Any] | None:
        """The summary frame as plain data (a report attribute an xdist worker sends): its fields
        by name, as `dataclasses.asdict` gives them without its deep copy (all are scalars); made
        for each phase of each gate item, where asdict was a third of the plugin's reporting."""
        return dict(vars(self.tally.frame)) if self.tally.frame is not None else None

    def collected(self, gate_ids: Mapping[str, str], why: list[str], flag: str | None) -> GateSession:
        """After every filter (-m, -k, --deselect, --lf): the gate items that will run; when some
        were deselected, why, and an update or a recording of part of the gate refused."""
        session = self
        selection = replace(self.selection, gate_ids=dict(gate_ids))
        if gate_ids or selection.deselected:
            session = session.planned()
            assert session.plan is not None
            selection = replace(selection, items=len(session.plan.names))
        if selection.deselected:
            said = ", ".join(why) or "a plugin"
            some = (
                f"{len(selection.deselected)} of its {selection.items}" if gate_ids else f"all {selection.items} of its"
            )
            selection = replace(selection, not_run=f"{some} items deselected ({said})")
            if flag in ("--update-baseline", "--record"):
                # Accepting or recording what part of the gate saw would lower the bar unseen.
                selection = replace(
                    selection,
                    refused=f"{flag} refused: {len(selection.deselected)} of the gate's items were deselected "
                    f"({said}); run it on the whole gate.",
                )
        return replace(session, selection=selection)

    def with_selection(self, **changes: Any) -> GateSession:
        return replace(self, selection=replace(self.selection, **changes))

    def with_problem(self, problem: str) -> GateSession:
        return replace(self, problems=(*self.problems, problem))

    def reported(
        self, nodeid: str, kind: str, outcome: str | None, items: int, frame: Mapping[str, Any] | None
    ) -> GateSession:
        """One gate item's report: its verdict kind, its outcome (None for a phase that decides none)."""
        tally = self.tally
        kinds = {**tally.kinds, nodeid: kind or tally.kinds.get(nodeid, "")}
        outcomes = {**tally.outcomes, nodeid: outcome} if outcome else tally.outcomes
        # An xdist controller evaluates nothing: its frame comes from the workers' reports.
        shown = tally.frame or (Frame(**frame) if frame is not None else None)
        return replace(
            self,
            tally=replace(tally, kinds=kinds, outcomes=outcomes, frame=shown),
            selection=replace(self.selection, items=max(self.selection.items, items)),
        )

    def skipped(self, nodeid: str) -> GateSession:
        return replace(self, tally=replace(self.tally, skipped=(*self.tally.skipped, nodeid)))

    def finish(
        self, root: Path, flag: str | None, collect_only: bool, allow_regression: bool | str | None
    ) -> GateSession:
        """At session finish: write an accepted update (or commit a recording), and record what
        fails the session (`problems`)."""
        session, selection, tally = self, self.selection, self.tally
        if tally.skipped:
            session = session.with_problem(
                f"gate item(s) skipped: {', '.join(tally.skipped)}. The gate never skips: "
                "remove the skip or xfail that reached them."
            )
        if collect_only:
            return session
        if self.project_file is not None and not selection.gate_ids and flag:
            session = session.with_problem(
                f"{flag} was given but the gate was not selected (a -m/-k filter, or only test files named): "
                f"nothing was recorded or updated. Run `pytest {flag}` with no path."
            )
        elif selection.gate_ids and not tally.outcomes:
            session = session.with_problem("the gate was collected but none of its items ran: nothing was compared.")
        elif self.project_file is None and orphan_baseline(root):
            session = session.with_problem(orphan_baseline(root))
        elif selection.not_run and (planned := session.planned()).plan and planned.plan.required:
            session = session.with_problem(
                f"required = true in [tool.retrieval], but this run did not gate: {selection.not_run}."
            )
        session, committed = session._committed(update=flag == "--update-baseline")
        outcome = session.outcome
        if not committed or flag != "--update-baseline" or outcome is None or outcome.pending is None:
            return session
        held = session.everything_ran_and_held()
        if held is not None:
            return replace(session, outcome=replace(outcome, diff=None)).with_problem(
                f"--update-baseline wrote nothing: {held}."
            )
        from retrieval.gate.accept import accept
        from retrieval.gate.outcome import KNOWN_ERRORS

        try:
            diff = accept(outcome.pending, allow_regression=allow_regression or False)
        except (*KNOWN_ERRORS, OSError) as exc:  # the files changed under the run, a full disk
            return replace(session, outcome=replace(outcome, diff=None)).with_problem(
                f"--update-baseline wrote nothing: {type(exc).__name__}: {exc}"
            )
        return replace(session, outcome=replace(outcome, diff=diff))

    def closing(self, root: Path, collect_only: bool) -> list[tuple[str | None, str, bool]]:
        """The terminal's closing lines: (section to open or None, line, failed)."""
        lines: list[tuple[str | None, str, bool]] = []
        outcome = self.outcome
        drift = outcome.result.run.drift if outcome is not None and outcome.result is not None else []
        lines += [("recording drift" if i == 0 else "", line, False) for i, line in enumerate(drift)]
        if outcome is not None and outcome.diff:
            lines.append(("baseline updated", outcome.diff, False))
        if self.tally.kinds or (collect_only and self.selection.items):
            lines.append((None, summary(self, collect_only), False))
        if self.selection.not_run and self.project_file is not None and not collect_only:
            where = shown_path(self.project_file, root)
            said = f"{where} configures it (`required = true` fails such a run)"
            lines.append((None, f"retrieval gate not run: {self.selection.not_run}; {said}", False))
        if self.problems:
            lines.append((None, f"retrieval gate FAILED: {' '.join(self.problems)}", True))
        return lines

    def _committed(self, update: bool) -> tuple[GateSession, bool]:
        """Commit a staged recording once every gate item ran and its `secrets` item held (all of
        them with --update-baseline); else discard it. False when a recording was not committed."""
        outcome = self.outcome
        recording = outcome.result.recording if outcome is not None and outcome.result is not None else None
        if recording is None:
            return self, True
        held = self.everything_ran_and_held(None if update else ("secrets",))
        if held is not None:
            recording.discard()
            return self.with_problem(f"--record committed nothing (the cassettes are as they were): {held}."), False
        from retrieval.gate.outcome import KNOWN_ERRORS

        try:
            recording.commit()
        except (*KNOWN_ERRORS, OSError) as exc:
            return self.with_problem(f"--record committed nothing: {type(exc).__name__}: {exc}"), False
        return self, True

    def everything_ran_and_held(self, names: tuple[str, ...] | None = None) -> str | None:
        """Why this session must not write the gate's files, or None when every item ran and held
        (every item, or those of `names` among them)."""
        selection, outcomes = self.selection, self.tally.outcomes
        if selection.deselected:
            return f"{len(selection.deselected)} gate item(s) deselected"
        ran = [n for n in selection.gate_ids if outcomes.get(n) in ("passed", "failed")]
        if len(ran) < len(selection.gate_ids) or not selection.gate_ids:
            return f"{len(selection.gate_ids) - len(ran)} of the gate's {len(selection.gate_ids)} items did not run"
        failed = [
            n for n, name in selection.gate_ids.items() if outcomes.get(n) != "passed" and name in (names or name)
        ]
        if failed:
            return f"{len(failed)} gate item(s) failed"
        return None


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def summary(session: GateSession, collect_only: bool = False) -> str:
    """The run's one summary line: what the gate compared."""
    items = session.selection.items
    if collect_only:
        where = f"profile {session.profile}"
        return f"retrieval gate ({where}): {_count(items, 'item')} collected, nothing compared (--collect-only)"
    frame = session.tally.frame or Frame(f"profile {session.profile}", problem="no result")
    if frame.problem:
        return f"retrieval gate ({frame.where}): nothing compared: {frame.problem}"
    outcomes, kinds = session.tally.outcomes, session.tally.kinds
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
    missing = items - sum(outcomes.get(n) in ("passed", "failed") for n in kinds)
    if missing > 0:
        line += f"; {missing} of its {items} items not run (stopped early or deselected): not known to hold"
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


@dataclass(frozen=True)
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
