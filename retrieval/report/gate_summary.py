"""The gate's verdicts rendered as Markdown: the CI job summary and the pull-request comment.

It renders the verdict model (retrieval.report.verdict) that the pytest items and `python -m
retrieval --gate` report, so the reviewer reads the gate's own words: the verdict first (pass or
fail, and which items, each failed item in the gate's words), then for each failed figure the
questions that got worse under that method, what was dropped, the questions edited, the drops
accepted with their reason, the documents no judgment covers, and the files deciding the gate
that the pull request edits. Nothing is computed here but the layout.
"""

from __future__ import annotations

from collections.abc import Sequence

from retrieval.report.verdict import Comparison, GateVerdict, ItemVerdict, Place, figure_text
from retrieval.text.markdown import escape_cell, escape_text, folded

__all__ = ["MARKER", "render_gate_summary", "summary_failures"]

# The first line of the summary: how the workflow finds its own comment on a pull request to edit it.
MARKER = "<!-- retrieval-gate-summary -->"
_ITEM = "- **`{name}`**: "


def _failed_items(verdict: GateVerdict) -> list[str]:
    """Each failed item in the gate's words, one list item each (a line break inside kept as such)."""
    out = []
    for item in verdict.failed:
        lines = [escape_text(line) for line in (item.failure or "").splitlines()] or [""]
        out.append(_ITEM.format(name=item.name) + "  \n  ".join(lines))
    return out


def summary_failures(markdown: str) -> dict[str, str]:
    """The failed items a summary lists, name -> words (what a test compares with the gate's)."""
    found: dict[str, str] = {}
    name, continued, inside = None, False, False
    for line in markdown.splitlines():
        if line.startswith("### "):
            inside = line == "### Failed items"
            name = None
        elif inside and line.startswith("- **`") and "`**: " in line:
            name, _, words = line.removeprefix("- **`").partition("`**: ")
            found[name], continued = words.removesuffix("  "), words.endswith("  ")
        elif inside and name is not None and continued and line.startswith("  "):
            found[name] += "\n" + line[2:].removesuffix("  ")
            continued = line.endswith("  ")
        else:
            name = None
    return found


def _rank(rank: int | None, beyond: str) -> str:
    return str(rank) if rank is not None else beyond


def _places(places: Sequence[Place]) -> tuple[str, str, str]:
    shown = places[:3]
    more = f" (+{len(places) - 3})" if len(places) > 3 else ""
    docs = ", ".join(f"`{escape_cell(p.doc)}`" for p in shown) + more
    was = ", ".join(_rank(p.was, "not in top 10") for p in shown)
    now = ", ".join(_rank(p.now, "beyond") for p in shown)
    return docs, was, now


def _against(comparison: Comparison) -> str:
    return f"`{comparison.against}`'s baseline" if comparison.against else "the baseline"


def _worse_section(item: ItemVerdict) -> list[str]:
    """The questions that got worse for one failed figure: one heading with each baseline it fell
    against, one table (the base branch's questions when it fell against it: what the base gates)."""
    failing = [c for c in item.comparisons if not c.ok]
    if not failing:
        return []
    metric = item.metric or ""

    def values(c: Comparison) -> str:
        return f"{figure_text(metric, c.was)} -> {figure_text(metric, c.now)} ({figure_text(metric, c.delta, '+')})"

    heads: list[tuple[str, list[str]]] = []
    for c in failing:
        same = [h for h in heads if h[0] == values(c)]
        if same:
            same[0][1].append(_against(c))
        else:
            heads.append((values(c), [_against(c)]))
    title = "; ".join(f"{v} against {' and '.join(who)}" for v, who in heads)
    out = ["", f"#### {escape_text(item.method or '')} {escape_text(metric)}: {title}", ""]
    out += _undecided(failing, metric)
    shown = next((c for c in reversed(failing) if c.worse), failing[0])
    if not shown.worse:
        return [*out, "No question got worse by itself: the mean moved."]
    out += [
        f"{len(shown.worse)} question(s) got worse:",
        "",
        "| Question | Text | Relevant | Old rank | New rank | Value | Failure |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = []
    for w in shown.worse:
        docs, was, now = _places(w.places)
        value = f"{figure_text(w.metric, w.was)} -> {figure_text(w.metric, w.now)}"
        failure = w.failure
        if w.pool:
            failure += f" ({'within' if w.failure == 'ranking' else 'none in'} {escape_cell(w.pool)})"
        cells = [f"`{escape_cell(w.id)}`", escape_cell(w.text), docs, was, now, value, failure]
        rows.append(["| " + " | ".join(cells) + " |"])
    return out + folded(rows, f"questions that got worse under {item.method} {metric}")


def _undecided(failing: list[Comparison], metric: str) -> list[str]:
    """For a drop that rests on unjudged documents: its range, the documents, the command (once
    for the baselines that say the same)."""
    groups: dict[tuple[object, ...], list[Comparison]] = {}
    for c in failing:
        if c.undecided and c.if_relevant is not None:
            groups.setdefault((c.if_relevant, c.unjudged), []).append(c)
    out: list[str] = []
    for same in groups.values():
        c = same[0]
        was, now = (figure_text(metric, v) for v in c.if_relevant or ())
        documents = ", ".join(f"`{escape_cell(q)}` `{escape_cell(d)}` (rank {r})" for q, d, r in c.unjudged[:10])
        more = f" and {len(c.unjudged) - 10} more" if len(c.unjudged) > 10 else ""
        reference = next((x.against for x in same if x.against), None)
        command = "python -m retrieval judge" + (f" --baseline-ref {reference}" if reference else "")
        against = " and ".join(_against(x) for x in same)
        out += [
            f"**Undecided** against {against}: with the {len(c.unjudged)} unjudged document(s) that entered its "
            f"top k counted as relevant, {was} -> {now}, which holds: {documents}{more}. Judge them: `{command}`.",
            "",
        ]
    return out


def _dropped(verdict: GateVerdict) -> list[str]:
    if not verdict.dropped:
        return []
    lines = [f"- {d.what} **{escape_text(d.name)}**: {escape_text(d.detail)}" for d in verdict.dropped]
    return ["", "### Dropped", "", *lines]


def _edited(verdict: GateVerdict) -> list[str]:
    if not verdict.edited:
        return []
    items = []
    for e in verdict.edited:
        old = f"«{escape_text(e.old_text)}»" if e.old_text is not None else "(text as the baseline's digest)"
        text = f"{old} -> «{escape_text(e.new_text)}»" if e.old_text != e.new_text else f"«{escape_text(e.new_text)}»"
        relevant = ""
        if e.old_relevant != e.new_relevant:
            relevant = f"; relevant {', '.join(e.old_relevant) or 'none'} -> {', '.join(e.new_relevant) or 'none'}"
        kind = f"; type {escape_text(e.old_type)} -> {escape_text(e.new_type)}" if e.old_type != e.new_type else ""
        items.append([f"- `{escape_text(e.id)}`: {text}{escape_text(relevant)}{kind}"])
    where = f"`{verdict.reference}`'s baseline" if verdict.reference else "the baseline"
    head = (
        f"{len(verdict.edited)} question(s) kept by id and edited since {where}: each is scored under the old "
        "judgments (its old relevant documents and type), on this run's ranking of its new text."
    )
    return ["", "### Questions edited", "", head, "", *folded(items, "edited questions")]


def _accepted(verdict: GateVerdict) -> list[str]:
    if not verdict.accepted:
        return []
    lines = []
    for a in verdict.accepted:
        metric = a.figure.partition(" ")[2] or a.figure
        now = figure_text(metric, a.now) if a.now is not None else "removed"
        change = f"{figure_text(metric, a.was)} -> {now}" if a.was is not None else now
        against = f" (against `{a.against}`)" if a.against else ""
        lines.append(f"- {escape_text(a.figure)}: {change}{against}: {escape_text(a.reason)}")
    return ["", "### Accepted drops", "", "Recorded in this pull request's baseline, with the reason:", "", *lines]


def _unjudged(verdict: GateVerdict) -> list[str]:
    if not verdict.unjudged:
        return []
    lines = [
        f"- {escape_text(method)}: {documents} document(s) entered its top {verdict.k} on {questions} question(s)"
        for method, documents, questions in verdict.unjudged
    ]
    return [
        "",
        "### Documents no judgment covers",
        "",
        "New in a method's top k since the baseline, and judged neither relevant nor not relevant: no figure "
        "can say whether they are better.",
        "",
        *lines,
    ]


def _touched(verdict: GateVerdict) -> list[str]:
    if not verdict.touched:
        return []
    where = f"`{verdict.reference}`" if verdict.reference else "the base branch"
    files = ", ".join(f"`{escape_text(p)}`" for p in verdict.touched)
    return [
        "",
        "### Files deciding the gate that this pull request edits",
        "",
        f"Against {where}: {files}. Review them as the gate itself: they say what is compared, and how.",
    ]


def _headline(verdict: GateVerdict) -> list[str]:
    against = f" against `{verdict.reference}`" if verdict.reference else ""
    total, where = len(verdict.items), escape_text(verdict.where)
    if verdict.problem:
        head = f"## Retrieval gate{against}: FAILED, nothing compared ({where})"
    elif verdict.failed:
        head = f"## Retrieval gate{against}: FAILED, {len(verdict.failed)} of {total} items ({where})"
    else:
        head = f"## Retrieval gate{against}: PASSED, all {total} items held ({where})"
    lines = [MARKER, head]
    if verdict.problem:
        lines += ["", f"**Nothing was compared:** {escape_text(verdict.problem)}"]
    elif verdict.failed:
        lines += ["", "**Failed:** " + ", ".join(f"`{i.name}`" for i in verdict.failed)]
    return lines


def render_gate_summary(verdict: GateVerdict, details: str = "") -> str:
    """The Markdown of the job summary and the pull-request comment: the verdict, then what a
    reviewer needs; `details` (the evaluation report) follows under its own heading."""
    out = _headline(verdict)
    if verdict.failed:
        out += ["", "### Failed items", "", *_failed_items(verdict)]
    worse = [line for item in verdict.failed if item.kind == "figure" for line in _worse_section(item)]
    if worse:
        out += ["", "### What got worse", *worse]
    out += [*_dropped(verdict), *_edited(verdict), *_accepted(verdict), *_unjudged(verdict), *_touched(verdict)]
    notes = "".join(verdict.notes).removeprefix("; ").removeprefix(", ")
    if notes:
        out += ["", f"_{escape_text(notes)}_"]
    if details:
        out += ["", "<details><summary>Evaluation details</summary>", "", details.rstrip("\n"), "", "</details>"]
    return "\n".join(out) + "\n"
