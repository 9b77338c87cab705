"""The report in Markdown, in named sections: what a person reads in a terminal, a PR summary or
the README. With a baseline, each figure shows its change against it (▲/▼/=)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval.diagnosis.failures import RelevantTrace
from retrieval.diagnosis.remedies import render_diagnosis
from retrieval.diagnosis.sweeps import render_sweeps
from retrieval.measures.figures import DIGITS
from retrieval.measures.paired import BASELINE, render_comparisons, summary_line
from retrieval.measures.ties import render_ties
from retrieval.report.build import ROUND, Report
from retrieval.report.judged_sections import agreement_section, judged_section
from retrieval.text.long_inputs import long_inputs_said
from retrieval.text.markdown import escape_cell, escape_text, folded
from retrieval.text.server_provenance import served_by

__all__ = ["render_markdown"]


def _fmt(value: float, decimals: int = ROUND) -> str:
    return f"{value:.{decimals}f}"


def _cell(value: float, base: float | None, decimals: int = ROUND) -> str:
    if base is None:
        return _fmt(value, decimals)
    delta = round(value - base, DIGITS)
    if abs(delta) < 0.00005:
        return f"{_fmt(value, decimals)} ="
    arrow = "▲" if delta > 0 else "▼"
    # The delta as the gate says it (4 decimals): a drop of 0.0016 is never shown as "-0.00".
    return f"{_fmt(value, decimals)} {arrow} {delta:+.{DIGITS}f}"


def _rank(rank: int | None, retrieved: int | None, depth: int) -> str:
    if rank is not None:
        return str(rank)
    # A ranking that ended before the depth holds every document the method retrieved:
    # this one was not among them (BM25 retrieves only documents sharing a term).
    if retrieved is not None and retrieved < depth:
        return "none: not retrieved"
    return f"beyond {depth}"


def _trace(trace: RelevantTrace, method: str, depth: int) -> str:
    parts = [f"`{trace.doc_id}`: rank {_rank(trace.rank, trace.retrieved.get(method), depth)} here"]
    parts += [
        f"{m} rank {_rank(rank, trace.retrieved.get(m), depth)}" for m, rank in trace.ranks.items() if m != method
    ]
    terms = ", ".join(trace.shared_terms[:6])
    parts.append(f"shares {terms} with the question" if terms else "no analysed term in common with the question")
    return ", ".join(parts)


def _header(report: Report, notice: str | None) -> list[str]:
    out = [
        f"## Retrieval evaluation: {report.dataset} ({report.questions} questions, profile "
        f"`{report.config.get('profile')}`, {report.mode}; retrieval-regression {report.version})",
        "",
    ]
    if notice:
        out += [f"> **Note:** {notice}", ""]
    if report.dropped_questions:
        least = report.config.get("relevant_grade", 1)
        why = (
            "no relevant document (every qrels score is 0)"
            if least == 1
            else f"no document of grade {least} or more (relevant_grade)"
        )
        out += [f"> {report.dropped_questions} question(s) of the dataset have {why} and are not evaluated.", ""]
    return out


def _figures_table(
    report: Report, baseline: Mapping[str, Mapping[str, Any]] | None, decimals: int = ROUND
) -> list[str]:
    recall = f"recall@{report.k}"
    show_degraded = bool(report.fallbacks) or any(report.degraded.get(m) for m in report.scores)
    baseline = report.baseline if baseline is None else baseline
    header = ["Method", f"Recall@{report.k}", "MRR", *(f"Recall@{report.k} {escape_cell(t)}" for t in report.types)]
    if show_degraded:
        header.append("Degraded")
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for method, s in report.scores.items():
        base = (baseline or {}).get(method)

        def b(metric: str, qtype: str | None = None, base: Any = base) -> float | None:
            if base is None:
                return None
            return base["by_type"].get(qtype, {}).get(metric) if qtype else base.get(metric)

        row = [method, _cell(s.overall[recall], b(recall), decimals), _cell(s.overall["mrr"], b("mrr"), decimals)]
        row += [_cell(s.by_type[t][recall], b(recall, t), decimals) if t in s.by_type else "-" for t in report.types]
        if show_degraded:
            row.append(str(len(report.degraded.get(method, {}))))
        out.append("| " + " | ".join(row) + " |")
    extra = [m for m in next(iter(report.scores.values())).overall if m not in {recall, "mrr"}] if report.scores else []
    if extra:
        out += ["", "| Method | " + " | ".join(extra) + " |", "|---|" + "---|" * len(extra)]
        out += [
            f"| {m} | " + " | ".join(_fmt(s.overall[x], decimals) for x in extra) + " |"
            for m, s in report.scores.items()
        ]
    return out


def _skipped_and_degraded(report: Report) -> list[str]:
    out = []
    for method, reason in report.skipped.items():
        out += ["", f"*{method} not evaluated: {reason}.*"]
    for method, reasons in report.degraded.items():
        if reasons:
            why = ", ".join(f"{q} ({r})" for q, r in reasons.items())
            source = report.fallbacks.get(method)
            kept = f" (kept the {source} order)" if source else ""
            out += ["", f"**{method}: {len(reasons)} question(s) degraded{kept}:** {why}"]
    return out


def _changes(report: Report) -> list[str]:
    """For the PR summary: every figure that moved against the baseline, with its interval."""
    if report.baseline is None:
        return []
    moved = [c for c in report.comparisons if c.reference == BASELINE and c.difference != 0]
    tolerance = f" (tolerance {report.tolerance})" if report.tolerance else ""
    out = (
        ["", f"**Against the baseline{tolerance}:** no figure moved."]
        if not moved
        else ["", f"**Against the baseline{tolerance}:**", "", *(f"- {summary_line(c)}" for c in moved)]
    )
    return out + _accepted(report)


def _accepted(report: Report) -> list[str]:
    """The drops this baseline accepts, with the reason it records: what a reviewer approves."""
    record = report.accepted
    if not record:
        return []
    figures = record.get("figures", {})
    lines = [
        f"- {name}: {change.get('from')} -> {'removed' if change.get('to') is None else change.get('to')}"
        for name, change in sorted(figures.items())
    ]
    return ["", f"**Accepted drops** (`--allow-regression`): {record.get('reason') or 'no reason given'}", "", *lines]


def _failures(report: Report) -> list[str]:
    out = ["", f"### Failures at rank 1 of the best method ({report.best})", ""]
    if not report.failures:
        return [*out, "None: every question has a relevant document first."]
    depth = int(report.config.get("depth", 1000))
    items = []
    for f in report.failures:
        label = "recall failure" if f.kind == "recall" else "ranking failure"
        head = (
            f"- **{escape_text(f.question_id)}** ({escape_cell(f.type)}) {escape_text(f.question)}  \n"
            f"  expected {escape_text(str(f.expected))}, obtained {escape_text(str(f.obtained))}  \n"
            f"  **{label}** (relevant {'absent from' if f.kind == 'recall' else 'present in'} {f.pool})"
            + (f", {f.status}" if f.status != "ok" else "")
        )
        items.append([head, *(f"  - {_trace(t, f.method, depth)}" for t in f.relevant)])
    out += folded(items, "failure(s)")
    recall_n = sum(f.kind == "recall" for f in report.failures)
    return [*out, "", f"{recall_n} recall failure(s), {len(report.failures) - recall_n} ranking failure(s)."]


def _ties_section(report: Report) -> list[str]:
    lines = render_ties(report.ties, report.k)
    return ["", *lines] if lines else []


def _comparisons_section(report: Report) -> list[str]:
    lines = render_comparisons(report.comparisons)
    return ["", *lines] if lines else []


def _remedies_section(report: Report) -> list[str]:
    out = []
    for diagnosed in report.remedies:
        out += ["", f"### Which remedy could reach each failure of {diagnosed['method']}", ""]
        out += render_diagnosis(diagnosed["diagnoses"], diagnosed["summary"])
    return out


def _what_if(report: Report) -> list[str]:
    if not report.what_if:
        return []
    lines = render_sweeps(report.sweeps)
    return ["", "### What if (from the recorded rankings, no model call)", "", *lines] if lines else []


def _chart(report: Report, decimals: int = ROUND) -> list[str]:
    names = list(report.scores)
    values = ", ".join(_fmt(report.scores[m].overall["mrr"], decimals) for m in names)
    return [
        "",
        "```mermaid",
        "xychart-beta",
        f'  title "MRR by method ({report.questions} questions)"',
        "  x-axis [" + ", ".join(f'"{m}"' for m in names) + "]",
        '  y-axis "MRR" 0 --> 1',
        f"  bar [{values}]",
        "```",
    ]


def _cost(report: Report) -> list[str]:
    # A column for search units only when a service billed some (Cohere Rerank): other reports keep their table.
    units = any(c.search_units for c in report.cost)
    out = [
        "",
        "### Cost",
        "",
        "| Method | Pipeline | Calls | Input tokens | Output tokens | "
        + ("Search units | " if units else "")
        + "Time this run (s) | Time when recorded (s) | Est. cost | per 1,000 questions |",
        "|---|---|---|---|---|" + ("---|" if units else "") + "---|---|---|---|",
    ]
    for c in report.cost:
        money = "n/a" if c.cost is None else f"${c.cost:.4f}"
        per = "n/a" if c.cost_per_1000_questions is None else f"${c.cost_per_1000_questions:.2f}"
        rec = "-" if c.recorded_seconds is None else f"{c.recorded_seconds:.2f}"
        billed = f"{c.search_units} | " if units else ""
        out.append(
            f"| {c.method} | {' → '.join(c.stages)} | {c.calls} | {c.input_tokens} | {c.output_tokens} "
            f"| {billed}{c.seconds:.2f} | {rec} | {money} | {per} |"
        )
    for stage, i in report.indexing.items():
        recorded = f" ({i['recorded_seconds']:.2f} s when recorded)" if i.get("recorded_seconds") is not None else ""
        truncated = (
            f" {i['truncated']} input(s) were longer than the model accepts and were truncated."
            if i.get("truncated")
            else ""
        )
        out += [
            "",
            f"Indexing ({stage}, once): {i['calls']} call(s), {i['input_tokens']} tokens, "
            f"{i['seconds']:.2f} s{recorded}.{truncated}",
        ]
    for what, entry in report.long_inputs.items():
        out += ["", f"Long inputs: {long_inputs_said(entry, what)}."]
    if report.server:
        out += ["", f"Model server: {served_by(report.server, 'served' if report.mode == 'live' else 'recorded')}."]
    if report.executor and report.executor.get("name") != "local":
        size = report.executor
        out += ["", f"Ran on: {size['name']}, {size.get('nodes', '?')} node(s), {size.get('cpus', '?')} CPU(s)."]
    if report.mode == "replay" and any(c.calls for c in report.cost):
        out += [
            "",
            "Replayed calls take no time: the recorded column shows the latency measured "
            "when the cassettes were recorded.",
        ]
    return out


def render_markdown(
    report: Report,
    baseline: Mapping[str, Mapping[str, Any]] | None = None,
    notice: str | None = None,
    decimals: int = ROUND,
) -> str:
    """The report as Markdown; `baseline` (method -> baseline entry) adds ▲/▼/= against it, and
    `notice` is said first (e.g. that the baseline was made with another configuration).
    `decimals` is the figures' precision (the gate's summary shows its 4, as its verdicts do)."""
    out = [
        *_header(report, notice),
        *_figures_table(report, baseline, decimals),
        *_changes(report),
        *_skipped_and_degraded(report),
        *_failures(report),
        *_ties_section(report),
        *_comparisons_section(report),
        *_remedies_section(report),
        *_what_if(report),
        *_chart(report, decimals),
        *judged_section(report),
        *agreement_section(report),
        *_cost(report),
    ]
    return "\n".join(out) + "\n"
