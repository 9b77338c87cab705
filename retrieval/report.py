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

from retrieval.cost import Usage, estimate_cost
from retrieval.dataset import Document
from retrieval.failures import Failure, RelevantTrace, best_method, failures_at_rank_1
from retrieval.metrics import MethodScores, score_run
from retrieval.remedies import diagnose, remedy_summary, render_diagnosis
from retrieval.run import Run
from retrieval.sweeps import Setup, candidate_pools, render_sweeps, setup_for, sweeps

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
    indexing: dict[str, Any]
    # Per diagnosed method (the best one, and the list a reranker reads): each failure's
    # remedies and the summary table (retrieval.remedies).
    remedies: list[dict[str, Any]]
    # What-if sweeps from the recorded rankings (retrieval.sweeps); in the Markdown with what_if.
    sweeps: dict[str, Any]
    what_if: bool = False


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


def build_report(
    run: Run,
    documents: Sequence[Document],
    prices: Mapping[str, Mapping[str, float]],
    *,
    extra: bool = False,
    what_if: bool = False,
) -> Report:
    """Everything the report shows, as plain data. `documents` is the corpus, in dataset order;
    `what_if` puts the sweeps in the Markdown (they are always in the data and the JSON)."""
    k = int(run.config.get("k", 5))
    candidates = int(run.config.get("candidates", 20))
    scores = score_run(run, k, extra)
    best = best_method(scores, k) if scores else ""
    index = run.usage.get(INDEXING)
    setup = setup_for(run, [(d.id, d.title, d.text) for d in documents])
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
        fallbacks={m: run.declared(m).candidate_source or m for m in run.methods if run.declared(m).degradable},
        best=best,
        failures=failures_at_rank_1(run, best, {d.id: d.content for d in documents}, candidates) if best else [],
        cost=_cost_rows(run, prices),
        indexing={
            **(index.as_dict() if index else {}),
            "recorded_seconds": run.recorded_usage.get(INDEXING, {}).get("seconds"),
        }
        if index
        else {},
        remedies=_remedies(run, setup, best) if best else [],
        sweeps=sweeps(run, setup),
        what_if=what_if,
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
    return out + ([f"> **Note:** {notice}", ""] if notice else [])


def _figures_table(report: Report, baseline: Mapping[str, Mapping[str, Any]] | None) -> list[str]:
    recall = f"recall@{report.k}"
    show_degraded = bool(report.fallbacks) or any(report.degraded.get(m) for m in report.scores)
    header = ["Method", f"Recall@{report.k}", "MRR", *(f"Recall@{report.k} {t}" for t in report.types)]
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
            fallback = report.fallbacks.get(method, method)
            out += ["", f"**{method}: {len(reasons)} question(s) degraded to the {fallback} order:** {why}"]
    return out


def _failures(report: Report) -> list[str]:
    out = ["", f"### Failures at rank 1 of the best method ({report.best})", ""]
    if not report.failures:
        return [*out, "None: every question has a relevant document first."]
    depth = int(report.config.get("depth", 1000))
    for f in report.failures:
        label = "recall failure" if f.kind == "recall" else "ranking failure"
        out.append(
            f"- **{f.question_id}** ({f.type}) {f.question}  \n  expected {f.expected}, obtained {f.obtained}  \n"
            f"  **{label}** (relevant {'absent from' if f.kind == 'recall' else 'present in'} {f.pool})"
            + (f", {f.status}" if f.status != "ok" else "")
        )
        out += [f"  - {_trace(t, f.method, depth)}" for t in f.relevant]
    recall_n = sum(f.kind == "recall" for f in report.failures)
    return [*out, "", f"{recall_n} recall failure(s), {len(report.failures) - recall_n} ranking failure(s)."]


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
    if report.indexing:
        i = report.indexing
        out += [
            "",
            f"Indexing (corpus embeddings, once): {i['calls']} call(s), {i['input_tokens']} tokens, "
            f"{i['seconds']:.2f} s"
            + (f" ({i['recorded_seconds']:.2f} s when recorded)." if i.get("recorded_seconds") is not None else "."),
        ]
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
        *_skipped_and_degraded(report),
        *_failures(report),
        *_remedies_section(report),
        *_what_if(report),
        *_chart(report),
        *_cost(report),
    ]
    return "\n".join(out) + "\n"


def render_json(report: Report) -> str:
    """The same content as the Markdown, for machines."""
    return json.dumps(asdict(report), indent=2, ensure_ascii=False, sort_keys=False) + "\n"
