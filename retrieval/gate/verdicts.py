"""The gate's verdicts: one pure function from an evaluation and its baseline to pass/fail lines.

The pytest plugin (one test item per verdict name) and `python -m retrieval --gate` both call
`judge`, so a failure reads the same in both. The item names are known before anything is
evaluated (`item_names`: from the configured methods, the baseline's figures, those of a git
ref's baseline when the gate also compares with it, and the snapshot file); a verdict whose
name is not among them (a figure the run produced that the baseline does not hold, a snapshot
of a method the configuration does not name) goes to the `gate` item, which always exists.
Nothing here reads a file, imports the evaluator or calls a model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from retrieval.config import shown_path
from retrieval.gate.snapshots import TOP, top_changed, top_rankings

if TYPE_CHECKING:  # annotations only: the plugin loads this module in every pytest run
    from retrieval.gate.result import GateResult

__all__ = ["GATE", "INTEGRITY", "Verdict", "figure_item", "item_id", "item_names", "judge"]

GATE = "gate"  # carries what stopped the comparison, and every verdict without an item of its own
# Always-present items, in the order they run: what must hold before a figure means anything.
INTEGRITY = ("secrets", "cassettes", "configuration", "dataset", "coverage")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.@+-]+")


@dataclass(frozen=True)
class Verdict:
    """One gated check: `name` is its item's id (`test_gate[<name>]`), `failure` None when it holds."""

    name: str
    kind: str  # problem | secrets | digests | integrity | coverage | figure | snapshot
    failure: str | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


def item_id(figure: str) -> str:
    """The id of a figure or check as pytest prints it and a shell passes it on unquoted:
    "bm25 recall@5[paraphrase]" -> "bm25-recall@5-paraphrase"."""
    return _UNSAFE.sub("-", figure.replace("[", " ").replace("]", "")).strip("-") or GATE


def figure_item(figure: str, reference: str | None = None) -> str:
    """A figure's item id; a figure of a git ref's baseline is its own item
    ("bm25 mrr" against origin/main -> "bm25-mrr-against-origin-main")."""
    return item_id(f"{figure} against {reference}" if reference else figure)


def _snapshot(method: str) -> str:
    return item_id(f"{method} top {TOP}")


def item_names(
    methods: Iterable[str],
    figures: Iterable[str],
    snapshot_methods: Iterable[str],
    reference: str | None = None,
    reference_figures: Iterable[str] = (),
) -> list[str]:
    """Every item of the gate, known without evaluating: the gate, the integrity items, one per
    baseline figure (`baseline.unproduced(entry, [])` lists them), one per figure of the git
    ref's baseline when the gate also compares with it (`reference`), one top-10 snapshot per
    method named by the configuration (a `module:factory` names none), the baseline or the
    snapshot file."""
    names = [GATE, *INTEGRITY, *(item_id(f) for f in figures)]
    names += [figure_item(f, reference) for f in reference_figures] if reference else []
    named = [m for m in methods if ":" not in m]
    names += [_snapshot(m) for m in dict.fromkeys([*named, *snapshot_methods])]
    return list(dict.fromkeys(names))


def _only(tops: Mapping[str, list[str]], questions: Sequence[str] | None) -> Mapping[str, list[str]]:
    return tops if questions is None else {q: tops[q] for q in questions if q in tops}


def _checked(result: GateResult) -> list[Verdict]:
    """Every verdict of a result whose comparison ran (no `problem`)."""
    out = [
        Verdict("cassettes", "digests", result.stale),
        Verdict("configuration", "integrity", result.reconfigured),
        Verdict("dataset", "integrity", result.redataset),
    ]
    out += [
        Verdict(figure_item(c.baseline_figure, c.reference), "figure", None if c.ok else c.message())
        for c in result.checks
    ]
    unproduced = [(item_id(f), f) for f in result.own_unproduced()]
    ref = result.reference
    unproduced += [(figure_item(f, ref), f"{f} (in {ref}'s baseline)") for f in result.reference_unproduced]
    out += [
        Verdict(
            name,
            "figure",
            f"the baseline gates {figure} but this run did not produce it (methods run: "
            f"{', '.join(result.run.methods)}). If it was dropped on purpose: "
            '`pytest --update-baseline --allow-regression "REASON"`, and say why in the PR.',
        )
        for name, figure in unproduced
    ]
    ungated = result.ungated_methods()
    out.append(
        Verdict(
            "coverage",
            "coverage",
            f"{', '.join(ungated)} ran but {'has' if len(ungated) == 1 else 'have'} no baseline figure: "
            "add it with `pytest --update-baseline`."
            if ungated
            else None,
        )
    )
    current = top_rankings(result.run)
    shown = shown_path(result.snapshot_path, result.settings.root)
    for method in sorted(set(current) | set(result.snapshots)):
        failure = None
        if method not in current:
            failure = (
                f"{shown} holds {method}'s top {TOP} but this run did not produce {method}: "
                '`pytest --update-baseline --allow-regression "REASON"` drops it.'
            )
        elif method not in result.snapshots:
            failure = f"{shown} has no top {TOP} of {method}: write it with `pytest --update-baseline`."
        else:
            # After questions changed, the top 10s of the questions both hold.
            kept = result.kept_questions
            was, now = (_only(r[method], kept) for r in (result.snapshots, current))
            failure = top_changed(method, was, now, shown)
        out.append(Verdict(_snapshot(method), "snapshot", failure))
    return out


def judge(
    result: GateResult | None, problem: str | None, names: Sequence[str], refusal: str | None = None
) -> list[Verdict]:
    """One verdict per item name, in `names` order (the `gate` one first if missing from it).

    `problem` (what stopped the comparison: a damaged file, a replay miss, a method that raised,
    a credential in the cassettes) fails the gate item; the items it left without a verdict fail
    as not compared (a gate item never passes unchecked, never skips). Verdicts without an item
    fail or pass through the gate item. `refusal` (an update refused: a figure fell) fails the
    gate item beside the comparison, whose verdicts still say which figures fell.
    """
    secret = result is not None and bool(result.secrets)
    found: list[Verdict] = []
    if result is not None:
        found.append(Verdict("secrets", "secrets", problem if secret else None))
    if problem is None and result is not None:
        found += _checked(result)
    elif problem is None:
        problem = "the gate produced no result"
    own = {v.name: v for v in found}
    wanted = list(dict.fromkeys([GATE, *names]))
    lines = [refusal] if refusal and not secret else []
    if problem:
        lines.append("the cassettes hold what looks like a credential: see the secrets item." if secret else problem)
    lines += [v.failure for v in found if v.name not in wanted and v.failure]
    gate_failure = "\n".join(lines)
    verdicts = [Verdict(GATE, "problem", gate_failure or None)]
    stopped = f"not compared: the comparison stopped before it ({GATE} says why)" if problem else None
    for name in wanted[1:]:
        verdict = own.get(name)
        if verdict is None:
            kind = "snapshot" if name.endswith(f"-top-{TOP}") else "figure"
            kind = "integrity" if name in INTEGRITY else kind
            # Without a problem: a snapshot item of a configured method the profile cannot
            # provide (the summary line names it "not gated"); nothing compared, nothing held.
            verdict = Verdict(name, kind, stopped) if stopped else Verdict(name, "unrun", None)
        verdicts.append(verdict)
    return verdicts
