"""The gate's verdicts: one pure function from an evaluation and its baselines to the verdict model.

The pytest plugin (one test item per verdict name), `python -m retrieval --gate` and the Markdown
job summary all render the `GateVerdict` that `verdicts_of` makes (retrieval.report.verdict), so a
failure reads the same in each. The item names are known before anything is evaluated
(`item_names`: from the configured methods, the baseline's figures, those a git ref gates, and
the snapshot file); one figure compared with the pull request's baseline and with the ref's is
one item. A verdict whose name is not among them goes to the `gate` item, which always exists;
an item given no verdict fails. Nothing here reads a file, imports the evaluator or calls a model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from retrieval.config import shown_path
from retrieval.gate.compare import Check, figure_words, unproduced_words
from retrieval.gate.schema import judged_ids, relevant_ids
from retrieval.gate.snapshots import TOP, top_changed, top_rankings
from retrieval.gate.update import removed_question
from retrieval.report.verdict import AcceptedDrop, Dropped, EditedQuestion, GateVerdict, ItemVerdict

if TYPE_CHECKING:  # annotations only: the plugin loads this module in every pytest run
    from retrieval.gate.reference import BaseBranch
    from retrieval.gate.result import Against, GateResult

__all__ = ["GATE", "INTEGRITY", "against_item", "item_id", "item_names", "verdicts_of", "with_verdicts"]

GATE = "gate"  # carries what stopped the comparison, and every verdict without an item of its own
# Always-present items, in the order they run: what must hold before a figure means anything.
INTEGRITY = ("secrets", "cassettes", "configuration", "dataset", "coverage")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.@+-]+")
STOPPED = f"not compared: the comparison stopped before it ({GATE} says why)"


def item_id(figure: str) -> str:
    """The id of a figure or check as pytest prints it and a shell passes it on unquoted:
    "bm25 recall@5[paraphrase]" -> "bm25-recall@5-paraphrase"."""
    return _UNSAFE.sub("-", figure.replace("[", " ").replace("]", "")).strip("-") or GATE


def against_item(reference: str) -> str:
    """The item that says what a git ref gates beyond its figures (its profile, its project):
    "origin/main" -> "against-origin-main"."""
    return item_id(f"against {reference}")


def _snapshot(method: str) -> str:
    return item_id(f"{method} top {TOP}")


def item_names(
    methods: Iterable[str],
    figures: Iterable[str],
    snapshot_methods: Iterable[str],
    reference: str | None = None,
    reference_figures: Iterable[str] = (),
) -> list[str]:
    """Every item of the gate, known without evaluating: the gate, the integrity items, with a git
    ref the item of what it gates as a whole, one per figure of the baseline or of the ref's
    baseline (`baseline.unproduced(entry, [])` lists them; a figure both gate is one item), one
    top-10 snapshot per method named by the configuration (a `module:factory` names none), the
    baseline or the snapshot file."""
    names = [GATE, *INTEGRITY, *([against_item(reference)] if reference else [])]
    names += [item_id(f) for f in [*figures, *(reference_figures if reference else ())]]
    named = [m for m in methods if ":" not in m]
    names += [_snapshot(m) for m in dict.fromkeys([*named, *snapshot_methods])]
    return list(dict.fromkeys(names))


def _only(tops: Mapping[str, list[str]], questions: Sequence[str] | None) -> Mapping[str, list[str]]:
    return tops if questions is None else {q: tops[q] for q in questions if q in tops}


def _figure_items(result: GateResult) -> list[ItemVerdict]:
    """One item per figure: its comparison with the pull request's baseline and with the ref's,
    and whether either gates it and the run did not produce it."""
    by_figure: dict[str, list[Check]] = {}
    for check in result.checks:
        by_figure.setdefault(check.baseline_figure, []).append(check)
    own = result.own_unproduced()
    base = result.base
    theirs = list(base.unproduced) if base is not None else []
    why = ""
    if base is not None and base.no_common:
        why = f" on {base.reference}'s questions (no question id of its dataset is in this run's)"
    items = []
    for figure in dict.fromkeys([*by_figure, *own, *theirs]):
        checks = by_figure.get(figure, [])
        parts = [figure_words(checks)] if any(not c.ok for c in checks) else []
        gating = [*([None] if figure in own else []), *([result.reference] if figure in theirs else [])]
        if gating:
            parts.append(unproduced_words(figure, gating, result.run.methods, why if None not in gating else ""))
        method, _, metric = figure.partition(" ")
        comparisons = tuple(c.comparison() for c in checks)
        items.append(ItemVerdict(item_id(figure), "figure", " ".join(parts) or None, method, metric, comparisons))
    # A figure the ref gates that this run no longer produces, its removal accepted with a reason.
    reason = (result.acceptance or {}).get("reason")
    for figure in base.removed if base is not None else ():
        if figure not in by_figure and figure not in own:
            method, _, metric = figure.partition(" ")
            note = f"removed against {result.reference}, accepted: {reason}"
            items.append(ItemVerdict(item_id(figure), "figure", None, method, metric, note=note))
    return items


def _snapshot_items(result: GateResult) -> list[ItemVerdict]:
    current = top_rankings(result.run)
    shown = shown_path(result.snapshot_path, result.settings.root)
    items = []
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
        items.append(ItemVerdict(_snapshot(method), "snapshot", failure, method))
    # A configured method this profile cannot provide (a reranker without a model): its item has
    # a verdict too, holding with why nothing of it is gated (no baseline figure gates it either).
    items += [
        ItemVerdict(_snapshot(m), "snapshot", None, m, note=f"not gated: {why}")
        for m, why in result.run.skipped.items()
        if m not in current
    ]
    return items


def _questions_dropped(result: GateResult) -> str | None:
    """Why questions the ref gates are gone from this run with no acceptance naming them, or None:
    a question removed is a drop like a figure that fell (the figures compared on the questions
    both hold cannot see it: removing the questions a change got wrong would keep them)."""
    base = result.base
    if base is None or base.reference is None or base.changes is None or not base.changes.removed:
        return None
    recorded = (result.acceptance or {}).get("figures") or {}
    gone = [q for q in base.changes.removed if removed_question(q) not in recorded]
    if not gone:
        return None
    return (
        f"{base.reference} gates {len(gone)} question(s) this run no longer holds ({', '.join(gone)}): a "
        "question removed is a drop. If it is intended, accept it with "
        f'`pytest --update-baseline --allow-regression "REASON" --retrieval-baseline-ref {base.reference}`.'
    )


def _base_item(result: GateResult) -> ItemVerdict | None:
    branch = result.branch
    if branch is None:
        return None
    failures = []
    if branch.project is None and branch.gone:
        failures.append(
            f"{branch.ref} gates the retrieval project(s) {', '.join(branch.gone)}, which this working tree no "
            "longer holds where it did, and none here: restore them, or gate each where it now is."
        )
    if result.profile_dropped:
        failures.append(result.profile_dropped)
    dropped = _questions_dropped(result)
    if dropped:
        failures.append(dropped)
    note = result.reference_note
    if branch.moved_from:
        note = f"the project moved: {branch.ref} held it at {branch.moved_from}"
    return ItemVerdict(against_item(branch.ref), "base", " ".join(failures) or None, note=note)


def _compared_items(result: GateResult) -> list[ItemVerdict]:
    """Every verdict of a result whose comparison ran (no `problem`)."""
    items = [
        ItemVerdict("cassettes", "digests", result.stale),
        ItemVerdict("configuration", "integrity", result.reconfigured),
        ItemVerdict("dataset", "integrity", result.redataset),
    ]
    base = _base_item(result)
    items += [base] if base is not None else []
    items += _figure_items(result)
    ungated = result.ungated_methods()
    items.append(
        ItemVerdict(
            "coverage",
            "coverage",
            f"{', '.join(ungated)} ran but {'has' if len(ungated) == 1 else 'have'} no baseline figure: "
            "add it with `pytest --update-baseline`."
            if ungated
            else None,
        )
    )
    return items + _snapshot_items(result)


def with_verdicts(result: GateResult) -> set[str]:
    """The names of the items a compared result gives a verdict of its own."""
    return {v.name for v in _compared_items(result)} if result.problem is None else set()


def _notes(result: GateResult) -> tuple[str, ...]:
    """What the summary line says after its counts: the tolerance, the ref, accepted drops,
    what changed since the baseline, what is not gated."""
    notes = []
    if result.tolerance:  # the project file's: a baseline file's own is never trusted
        notes.append(f", tolerance {result.tolerance}")
    if result.reference:
        note = result.reference_note
        notes.append(f"; compared with {result.reference}'s baseline too" + (f" ({note})" if note else ""))
    branch = result.branch
    if branch is not None and result.base is not None:
        if result.dataset.llm_graded and not branch.accept_llm_judgments:
            notes.append(
                f"; {result.reference} refuses LLM judgments (its accept_llm_judgments): compared with it, the "
                f"{len(result.dataset.llm_graded)} pair(s) only an LLM graded are unjudged"
            )
        if branch.k != result.settings.k:
            notes.append(
                f"; {result.reference} gates recall at k = {branch.k} (its k; this run's: {result.settings.k}): "
                "compared with it at that cut-off"
            )
        if branch.relevant_grade != result.settings.relevant_grade:
            notes.append(
                f"; {result.reference} counts a document relevant from grade {branch.relevant_grade} (its "
                f"relevant_grade; this run's: {result.settings.relevant_grade}): compared with it at that grade"
            )
    warned = [c for c in result.checks if c.undecided and c.warned]
    if warned:
        documents = len({d for c in warned for d in c.unjudged})
        figures = ", ".join(dict.fromkeys(c.baseline_figure for c in warned))
        ref = f" --baseline-ref {result.reference}" if result.reference else ""
        notes.append(
            f"; undecided (unjudged = warn): {figures} fell only with {documents} unjudged document(s) counted as not "
            f"relevant: judge them with `python -m retrieval judge{ref}`"
        )
    if any(c.accepted for c in result.checks):
        notes.append(f"; drops accepted against {result.reference}: {(result.acceptance or {}).get('reason')}")
    if result.changed_cassettes:
        notes.append(f"; cassettes changed since the baseline: {', '.join(result.changed_cassettes)}")
    if result.changed_config:
        notes.append(f"; configuration changed since the baseline: {'; '.join(result.changed_config)}")
    changes = result.changed_data
    if changes:
        notes.append(f"; dataset changed since the baseline: {changes}, figures compared on {changes.where}")
    if result.entry is not None and "questions" not in result.entry:
        # Made by an older version: a pull request that changes the dataset would not be compared.
        notes.append(
            "; the baseline has no question digests yet: `pytest --update-baseline` adds them (no figure changes)"
        )
    # Requested methods the profile cannot provide (a reranker without a model): said once here.
    if result.run.skipped:
        notes.append("; not gated: " + "; ".join(f"{m}: {why}" for m, why in result.run.skipped.items()))
    return tuple(notes)


def _dropped(result: GateResult) -> tuple[Dropped, ...]:
    dropped = []
    branch = result.branch
    if branch is not None and branch.project is None and branch.gone:
        dropped += [Dropped("project", p, f"gated by {branch.ref}, no longer here") for p in branch.gone]
    if branch is not None and branch.entry is not None and branch.profile != result.profile:
        detail = f"gated by {branch.ref}; this run gates {result.profile}"
        dropped.append(Dropped("profile", str(branch.profile), detail))
    base = result.base
    if base is not None and base.no_common:
        dataset = str(base.entry.get("dataset", "?"))
        count = len(base.entry.get("questions", {}))
        dropped.append(Dropped("dataset", dataset, f"{branch.ref if branch else ''}'s {count} questions: none is here"))
    seen = set()
    for against in (result.own, base):
        if against is None:
            continue
        for method in against.entry.get("methods", {}):
            if method not in result.run.methods and method not in seen:
                seen.add(method)
                who = f"{against.reference}'s baseline" if against.reference else "the baseline"
                dropped.append(Dropped("method", method, f"gated by {who}, not run"))
    return tuple(dropped)


def _edited(result: GateResult) -> tuple[EditedQuestion, ...]:
    """The questions kept by id whose text, relevant documents or type changed since the base
    branch's baseline (the pull request's own when there is no ref)."""
    against = result.base or result.own
    if against is None or against.changes is None:
        return ()
    kept = against.entry.get("judgments", {})
    texts = result.branch.texts if result.base is not None and result.branch is not None else {}
    # The run as the comparison read it: against the ref, as the ref judges it (a question it
    # gates that this run's judgments leave out is one of its edits).
    compared = result.base_run if result.base is not None and result.base_run is not None else result.run
    now = {r.question.id: r.question for r in compared.results}
    edited = []
    for q in against.changes.edited:
        old = kept.get(q, {})
        question = now[q]
        edited.append(
            EditedQuestion(
                q,
                texts.get(q),
                question.text,
                relevant_ids(old) if old else (),
                tuple(sorted(question.relevant)),
                str(old.get("type", "?")),
                question.type,
            )
        )
    return tuple(edited)


def _accepted(result: GateResult) -> tuple[AcceptedDrop, ...]:
    """The drops the pull request's baseline accepts that the comparison with the ref used."""
    record = result.acceptance or {}
    reason = str(record.get("reason", ""))
    drops = [
        AcceptedDrop(c.baseline_figure, c.baseline, c.current, c.accepted, c.reference)
        for c in result.checks
        if not c.held and c.accepted is not None
    ]
    figures = record.get("figures", {})
    base = result.base
    if base is not None:
        compared = {c.baseline_figure for c in base.checks}
        for name, change in figures.items():
            bare = name.removesuffix(" (removed)")
            if name != bare and bare not in compared and (change or {}).get("to") is None:
                drops.append(AcceptedDrop(bare, (change or {}).get("from"), None, reason, base.reference))
    return tuple(drops)


def _unjudged(against: Against | None, k: int) -> tuple[tuple[str, int, int], ...]:
    """Per method: documents that entered its top k since the baseline's snapshot that no
    judgment of the baseline covers (relevant or judged not relevant), and on how many questions.
    What no figure can say: better or worse, nobody judged them."""
    if against is None or not against.snapshots:
        return ()
    judgments = against.entry.get("judgments", {})
    found = []
    for method in against.judged.methods:
        tops = against.snapshots.get(method)
        if not tops:
            continue
        documents = questions = 0
        for r in against.judged.results:
            q = r.question.id
            if q not in tops or q not in judgments or method not in r.methods:
                continue
            new = set(r.methods[method].ids[:k]) - set(tops[q][:k]) - judged_ids(judgments[q])
            documents += len(new)
            questions += bool(new)
        if documents:
            found.append((method, documents, questions))
    return tuple(found)


def _where(result: GateResult | None, profile: str) -> str:
    if result is None:
        return f"profile {profile}"
    return f"profile {result.profile}, dataset {result.run.dataset}"


def verdicts_of(
    result: GateResult | None,
    problem: str | None,
    names: Sequence[str],
    refusal: str | None = None,
    *,
    profile: str = "?",
    removed: Mapping[str, str] | None = None,
    branch: BaseBranch | None = None,
) -> GateVerdict:
    """The verdict model: one verdict per item name, in `names` order (the `gate` one first if
    missing from it), and what a reviewer needs beside them.

    `problem` (what stopped the comparison: a damaged file, a replay miss, a method that raised,
    a credential in the cassettes) fails the gate item; the items it left fail as not compared (a
    gate item never passes unchecked, never skips). Verdicts without an item fail or pass through
    the gate item; an item with no verdict fails. `refusal` (an update refused: a figure fell)
    fails the gate item beside the comparison, whose verdicts still say which figures fell.
    `removed` (item name -> why) holds the items an accepted update removes from the baseline.
    `profile` names the profile when nothing was evaluated, `branch` what the ref gates when the
    evaluation stopped before a result (the files the pull request edits are said all the same).
    """
    secret = result is not None and bool(result.secrets)
    found: list[ItemVerdict] = []
    if result is not None:
        found.append(ItemVerdict("secrets", "secrets", problem if secret else None))
    if problem is None and result is not None:
        found += _compared_items(result)
    elif problem is None:
        problem = "the gate produced no result"
    found += [ItemVerdict(name, "figure", None, note=why) for name, why in (removed or {}).items()]
    own: dict[str, ItemVerdict] = {}
    for found_verdict in found:
        own.setdefault(found_verdict.name, found_verdict)
    wanted = list(dict.fromkeys([GATE, *names]))
    lines = [refusal] if refusal and not secret else []
    if problem:
        lines.append("the cassettes hold what looks like a credential: see the secrets item." if secret else problem)
    lines += [v.failure for v in found if v.name not in wanted and v.failure]
    items = [ItemVerdict(GATE, "problem", "\n".join(lines) or None)]
    for name in wanted[1:]:
        given = own.get(name)
        if given is None:
            kind = "snapshot" if name.endswith(f"-top-{TOP}") else "figure"
            kind = "integrity" if name in INTEGRITY else kind
            why = STOPPED if problem else f"no verdict: this run compared nothing for {name}, so it cannot hold"
            given = ItemVerdict(name, kind, why)
        items.append(given)
    if result is None or problem is not None:
        branch = result.branch if result is not None else branch
        return GateVerdict(
            _where(result, profile),
            tuple(items),
            problem=(problem or "").splitlines()[0],
            reference=branch.ref if branch is not None else None,
            touched=branch.touched if branch is not None else (),
        )
    # New documents in a top k are counted as the comparison that decides does: the base branch's, at its k.
    side, k = (result.own, result.settings.k)
    if result.base is not None and result.branch is not None:
        side, k = (result.base, result.branch.k)
    return GateVerdict(
        _where(result, profile),
        tuple(items),
        reference=result.reference,
        methods=len(result.run.methods),
        k=k,
        notes=_notes(result),
        dropped=_dropped(result),
        edited=_edited(result),
        accepted=_accepted(result),
        unjudged=_unjudged(side, k),
        touched=result.branch.touched if result.branch is not None else (),
    )
