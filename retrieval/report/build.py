"""The evaluation report: metrics table, failures, degraded count, cost, MRR chart.

`build_report` turns a Run into plain data (what `--format json` prints);
`render_markdown` turns that into the Markdown a person reads in a terminal, a PR
summary or the README. With a baseline, each figure shows its change against it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from retrieval.data.dataset import Document
from retrieval.diagnosis.failures import Failure, RelevantTrace, best_method, failures_at_rank_1
from retrieval.diagnosis.remedies import diagnose, remedy_summary, render_diagnosis
from retrieval.diagnosis.sweeps import Setup, render_sweeps, setup_for, sweeps
from retrieval.measures.figures import DIGITS
from retrieval.measures.metrics import MethodScores, score_run
from retrieval.measures.paired import BASELINE, PairedComparison, comparison_pairs, render_comparisons, summary_line
from retrieval.measures.paired import compare as paired
from retrieval.measures.refusion import candidate_pools
from retrieval.measures.ties import TieInfo, TieSummary, render_ties, summarize_ties
from retrieval.run.cost import Usage, estimate_cost
from retrieval.run.results import Run
from retrieval.text.markdown import escape_cell, escape_text, folded
from retrieval.text.server_provenance import served_by

__all__ = ["Report", "build_report", "render_json", "render_markdown"]

ROUND = 2  # the seed's precision; the baseline keeps 4
INDEXING = "corpus embeddings"  # the usage stage shown once, as indexing


@dataclass(frozen=True)
class CostRow:
    method: str
    stages: list[str]
    calls: int
    input_tokens: int
    output_tokens: int
    seconds: float
    recorded_seconds: float | None
    cost: float | None
    cost_per_1000_questions: float | None


@dataclass(frozen=True)
class Report:
    dataset: str
    fingerprint: str
    questions: int
    mode: str
    config: dict[str, Any]
    k: int
    types: list[str]
    scores: dict[str, MethodScores]
    degraded: dict[str, dict[str, str]]
    skipped: dict[str, str]
    # method -> the method whose order it falls back to, for methods that may degrade.
    fallbacks: dict[str, str]
    best: str
    failures: list[Failure]
    cost: list[CostRow]
    # Usage stages paid once per corpus, not per question (no method's pipeline lists them):
    # stage -> calls, tokens, seconds (and when recorded), truncated inputs.
    indexing: dict[str, dict[str, Any]]
    # Per diagnosed method (the best one, and the list a reranker reads): each failure's
    # remedies and the summary table (retrieval.diagnosis.remedies).
    remedies: list[dict[str, Any]]
    # What-if sweeps from the recorded rankings (retrieval.diagnosis.sweeps); in the Markdown with what_if.
    sweeps: dict[str, Any]
    # Tie exposure per method (retrieval.measures.ties), and paired comparisons (retrieval.measures.paired):
    # each method against the baseline and against each method it reads.
    ties: dict[str, TieSummary]
    comparisons: list[PairedComparison]
    # The baseline entry's per-method figures (the ▲/▼ cells) and the project's tolerance.
    baseline: dict[str, Any] | None = None
    tolerance: float = 0.0
    # The drops the pull request's baseline records as accepted ({"reason", "figures": name ->
    # {"from", "to"}}), written by `--update-baseline --allow-regression REASON`: the PR summary shows them.
    accepted: dict[str, Any] | None = None
    dropped_questions: int = 0
    what_if: bool = False
    # The model server that embedded, or recorded what was replayed (recording.json's "server").
    server: dict[str, Any] | None = None


def _cost_rows(run: Run, prices: Mapping[str, Mapping[str, float]]) -> list[CostRow]:
    recorded = run.recorded_usage
    n = max(len(run.results), 1)
    rows = []
    for method in run.methods:
        stages = run.pipelines.get(method, [method])
        total = Usage()
        cost: float | None = 0.0
        recorded_seconds: float | None = 0.0
        for stage in stages:
            u = run.usage.get(stage, Usage())
            total.add(u.calls, u.input_tokens, u.output_tokens, u.seconds)
            if u.calls:
                stage_cost = estimate_cost(u, run.cost_models.get(stage) or "", prices)
                cost = None if cost is None or stage_cost is None else cost + stage_cost
            seen = recorded.get(stage, {}).get("seconds")
            recorded_seconds = None if recorded_seconds is None or seen is None else recorded_seconds + seen
        rows.append(
            CostRow(
                method=method,
                stages=stages,
                calls=total.calls,
                input_tokens=total.input_tokens,
                output_tokens=total.output_tokens,
                seconds=round(total.seconds, 3),
                recorded_seconds=round(recorded_seconds, 3) if recorded_seconds is not None and recorded else None,
                cost=cost,
                cost_per_1000_questions=None if cost is None else cost * 1000 / n,
            )
        )
    return rows


def _remedies(run: Run, setup: Setup, best: str) -> list[dict[str, Any]]:
    """Diagnose the best method and every candidate pool (what a reranker reads) it is not."""
    present = set(run.methods)
    pools = candidate_pools(setup.requires, setup.candidate_sources)
    out = []
    for method in dict.fromkeys([best, *(p for p in pools if p in present)]):
        found = diagnose(run, setup, method)
        out.append({"method": method, "diagnoses": found, "summary": remedy_summary(found, run, setup)})
    return out


def _indexing(run: Run) -> dict[str, dict[str, Any]]:
    in_pipelines = {stage for stages in run.pipelines.values() for stage in stages}
    return {
        stage: {**usage.as_dict(), "recorded_seconds": run.recorded_usage.get(stage, {}).get("seconds")}
        for stage, usage in run.usage.items()
        if stage not in in_pipelines and stage not in run.declarations
    }


def _ties(run: Run) -> dict[str, TieSummary]:
    types = {r.question.id: r.question.type for r in run.results}
    summaries = {}
    for method in run.methods:
        infos = {r.question.id: TieInfo(**ties) for r in run.results if (ties := r.methods[method].ties)}
        if infos and len(infos) == len(run.results):  # a run log written before ties were recorded has none
            summaries[method] = summarize_ties(infos, types)
    return summaries


def _comparisons(
    run: Run, scores: Mapping[str, MethodScores], k: int, baseline: Mapping[str, Any] | None
) -> list[PairedComparison]:
    """Each method against the baseline (its per-question figures) and against each method it reads."""
    metrics = ((f"recall@{k}", "recall_per_question"), ("mrr", "reciprocal_ranks"))
    requires = {m: [d for d in run.declared(m).requires if d in scores] for m in scores}
    out = []
    for reference, candidate in comparison_pairs(requires, [m for m in (baseline or {}) if m in scores]):
        for metric, stored in metrics:
            after = {q: v[metric] for q, v in scores[candidate].per_question.items()}
            if reference == BASELINE:
                before = (baseline or {})[candidate].get(stored, {})
                if set(before) == set(after):  # other questions: nothing to pair
                    out.append(paired(before, after, metric, reference, candidate, decimals=DIGITS))
            else:
                before = {q: v[metric] for q, v in scores[reference].per_question.items()}
                out.append(paired(before, after, metric, reference, candidate))
    return out


def build_report(
    run: Run,
    documents: Sequence[Document],
    prices: Mapping[str, Mapping[str, float]],
    *,
    extra: bool = False,
    what_if: bool = False,
    baseline: Mapping[str, Any] | None = None,
    dropped_questions: int = 0,
    tolerance: float = 0.0,
    accepted: Mapping[str, Any] | None = None,
) -> Report:
    """Everything the report shows, as plain data. `documents` is the corpus, in dataset order;
    `baseline` is the profile's baseline entry (figures shown with ▲/▼ against it, and paired
    comparisons); `what_if` puts the sweeps in the Markdown (always in the data and the JSON).
    `tolerance` is the project's setting; `accepted` the drops (and their reason) the baseline records."""
    k = int(run.config.get("k", 5))
    candidates = int(run.config.get("candidates", 20))
    scores = score_run(run, k, extra)
    best = best_method(scores, k) if scores else ""
    setup = setup_for(run, [(d.id, d.title, d.text) for d in documents])
    methods = dict(baseline["methods"]) if baseline else None
    return Report(
        dataset=run.dataset,
        fingerprint=run.fingerprint,
        questions=len(run.results),
        mode=run.mode,
        config=run.config,
        k=k,
        types=list(dict.fromkeys(r.question.type for r in run.results)),
        scores=scores,
        degraded={m: run.degraded(m) for m in run.methods},
        skipped=run.skipped,
        fallbacks={m: run.declared(m).candidate_source or "" for m in run.methods if run.declared(m).degradable},
        best=best,
        failures=failures_at_rank_1(run, best, {d.id: d.content for d in documents}, candidates) if best else [],
        cost=_cost_rows(run, prices),
        indexing=_indexing(run),
        remedies=_remedies(run, setup, best) if best else [],
        sweeps=sweeps(run, setup),
        ties=_ties(run),
        comparisons=_comparisons(run, scores, k, methods),
        baseline=methods,
        tolerance=tolerance,
        accepted=dict(accepted) if accepted else None,
        dropped_questions=dropped_questions,
        what_if=what_if,
        server=run.server,
    )


def _fmt(value: float) -> str:
    return f"{value:.{ROUND}f}"


def _cell(value: float, base: float | None) -> str:
    if base is None:
        return _fmt(value)
    delta = round(value - base, 4)
    if abs(delta) < 0.00005:
        return f"{_fmt(value)} ="
    arrow = "▲" if delta > 0 else "▼"
    return f"{_fmt(value)} {arrow} {delta:+.{ROUND}f}"


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
        f"`{report.config.get('profile')}`, {report.mode})",
        "",
    ]
    if notice:
        out += [f"> **Note:** {notice}", ""]
    if report.dropped_questions:
        out += [
            f"> {report.dropped_questions} question(s) of the dataset have no relevant document (every qrels "
            "score is 0) and are not evaluated.",
            "",
        ]
    return out


def _figures_table(report: Report, baseline: Mapping[str, Mapping[str, Any]] | None) -> list[str]:
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

        row = [method, _cell(s.overall[recall], b(recall)), _cell(s.overall["mrr"], b("mrr"))]
        row += [_cell(s.by_type[t][recall], b(recall, t)) if t in s.by_type else "-" for t in report.types]
        if show_degraded:
            row.append(str(len(report.degraded.get(method, {}))))
        out.append("| " + " | ".join(row) + " |")
    extra = [m for m in next(iter(report.scores.values())).overall if m not in {recall, "mrr"}] if report.scores else []
    if extra:
        out += ["", "| Method | " + " | ".join(extra) + " |", "|---|" + "---|" * len(extra)]
        out += [f"| {m} | " + " | ".join(_fmt(s.overall[x]) for x in extra) + " |" for m, s in report.scores.items()]
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


def _chart(report: Report) -> list[str]:
    names = list(report.scores)
    values = ", ".join(_fmt(report.scores[m].overall["mrr"]) for m in names)
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
    out = [
        "",
        "### Cost",
        "",
        "| Method | Pipeline | Calls | Input tokens | Output tokens | Time this run (s) "
        "| Time when recorded (s) | Est. cost | per 1,000 questions |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in report.cost:
        money = "n/a" if c.cost is None else f"${c.cost:.4f}"
        per = "n/a" if c.cost_per_1000_questions is None else f"${c.cost_per_1000_questions:.2f}"
        rec = "-" if c.recorded_seconds is None else f"{c.recorded_seconds:.2f}"
        out.append(
            f"| {c.method} | {' → '.join(c.stages)} | {c.calls} | {c.input_tokens} | {c.output_tokens} "
            f"| {c.seconds:.2f} | {rec} | {money} | {per} |"
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
    if report.server:
        out += ["", f"Model server: {served_by(report.server, 'served' if report.mode == 'live' else 'recorded')}."]
    if report.mode == "replay" and any(c.calls for c in report.cost):
        out += [
            "",
            "Replayed calls take no time: the recorded column shows the latency measured "
            "when the cassettes were recorded.",
        ]
    return out


def render_markdown(
    report: Report, baseline: Mapping[str, Mapping[str, Any]] | None = None, notice: str | None = None
) -> str:
    """The report as Markdown; `baseline` (method -> baseline entry) adds ▲/▼/= against it, and
    `notice` is said first (e.g. that the baseline was made with another configuration)."""
    out = [
        *_header(report, notice),
        *_figures_table(report, baseline),
        *_changes(report),
        *_skipped_and_degraded(report),
        *_failures(report),
        *_ties_section(report),
        *_comparisons_section(report),
        *_remedies_section(report),
        *_what_if(report),
        *_chart(report),
        *_cost(report),
    ]
    return "\n".join(out) + "\n"


def render_json(report: Report, notice: str | None = None) -> str:
    """The same content as the Markdown, for machines; `notice` as the Markdown says it first
    (a baseline of another configuration or dataset), null when there is none."""
    return json.dumps({**asdict(report), "notice": notice}, indent=2, ensure_ascii=False, sort_keys=False) + "\n"
