"""The evaluation report: metrics table, failures, degraded count, cost, MRR chart.

`build_report` turns a Run into plain data (what `--format json` prints);
`render_markdown` turns that into the Markdown a person reads in a terminal, a PR
summary or the README. With a baseline, each figure shows its change against it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from retrieval.analysis import Failure, RelevantTrace, best_method, failures_at_rank_1
from retrieval.cost import Usage, estimate_cost
from retrieval.metrics import MethodScores, metric_names, score_method
from retrieval.run import Run

__all__ = ["Report", "build_report", "render_json", "render_markdown", "score_run"]

ROUND = 2  # the seed's precision; the baseline keeps 4


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
    best: str
    failures: list[Failure]
    cost: list[CostRow]
    indexing: dict[str, Any]


def score_run(run: Run, k: int = 5, extra: bool = False) -> dict[str, MethodScores]:
    """Metrics of every reported method of a run."""
    relevant = {r.question.id: r.question.relevant for r in run.results}
    types = {r.question.id: r.question.type for r in run.results}
    return {m: score_method(run.ranked_ids(m), relevant, types, metric_names(k, extra)) for m in run.methods}


def _cost_rows(run: Run, prices: Mapping[str, Mapping[str, float]]) -> list[CostRow]:
    recorded = run.recorded_usage
    models = {"vector": run.config.get("embedding_model"), "rerank": run.config.get("rerank_model")}
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
                stage_cost = estimate_cost(u, models.get(stage) or "", prices)
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


def build_report(
    run: Run, documents: Mapping[str, str], prices: Mapping[str, Mapping[str, float]], *, extra: bool = False
) -> Report:
    """Everything the report shows, as plain data. `documents` maps doc id -> indexed content."""
    k = int(run.config.get("k", 5))
    candidates = int(run.config.get("candidates", 20))
    scores = score_run(run, k, extra)
    best = best_method(scores, k) if scores else ""
    index = run.usage.get("corpus embeddings")
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
        best=best,
        failures=failures_at_rank_1(run, best, documents, candidates) if best else [],
        cost=_cost_rows(run, prices),
        indexing={
            **(index.as_dict() if index else {}),
            "recorded_seconds": run.recorded_usage.get("corpus embeddings", {}).get("seconds"),
        }
        if index
        else {},
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


def _ranks(trace: RelevantTrace, method: str, depth: int) -> str:
    # A missing rank is beyond the ranking's depth, except for BM25, which does not retrieve a
    # document sharing no term with the question (shared_terms applies BM25's own rule).
    beyond = f"beyond {depth}"
    not_retrieved = "none: not retrieved" if not trace.shared_terms else beyond

    def r(v: int | None, missing: str) -> str:
        return str(v) if v is not None else missing

    terms = "no term in common" if not trace.shared_terms else "shares " + ", ".join(trace.shared_terms[:6])
    parts = [f"`{trace.doc_id}`: rank {r(trace.rank, not_retrieved if method == 'bm25' else beyond)} here"]
    if "bm25" in trace.ranks:
        parts.append(f"BM25 rank {r(trace.ranks['bm25'], not_retrieved)} ({terms})")
    else:
        parts.append(f"BM25: {terms}")
    if "vector" in trace.ranks:
        parts.append(f"vector rank {r(trace.ranks['vector'], beyond)}")
    return ", ".join(parts)


def render_markdown(
    report: Report, baseline: Mapping[str, Mapping[str, Any]] | None = None, notice: str | None = None
) -> str:
    """The report as Markdown; `baseline` (method -> baseline entry) adds ▲/▼/= against it, and
    `notice` is said first (e.g. that the baseline was made with another configuration)."""
    k = report.k
    recall = f"recall@{k}"
    has_degraded = any(report.degraded.get(m) for m in report.scores) or "rerank" in report.scores
    out = [
        f"## Retrieval evaluation: {report.dataset} ({report.questions} questions, profile "
        f"`{report.config.get('profile')}`, {report.mode})",
        "",
    ]
    if notice:
        out += [f"> **Note:** {notice}", ""]
    header = ["Method", f"Recall@{k}", "MRR", *(f"Recall@{k} {t}" for t in report.types)]
    if has_degraded:
        header.append("Degraded")
    out += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for method, s in report.scores.items():
        base = (baseline or {}).get(method)

        def b(metric: str, qtype: str | None = None, base: Any = base) -> float | None:
            if base is None:
                return None
            return base["by_type"].get(qtype, {}).get(metric) if qtype else base.get(metric)

        row = [method, _cell(s.overall[recall], b(recall)), _cell(s.overall["mrr"], b("mrr"))]
        row += [_cell(s.by_type[t][recall], b(recall, t)) if t in s.by_type else "-" for t in report.types]
        if has_degraded:
            row.append(str(len(report.degraded.get(method, {}))))
        out.append("| " + " | ".join(row) + " |")
    extra = [m for m in next(iter(report.scores.values())).overall if m not in {recall, "mrr"}] if report.scores else []
    if extra:
        out += ["", "| Method | " + " | ".join(extra) + " |", "|---|" + "---|" * len(extra)]
        out += [f"| {m} | " + " | ".join(_fmt(s.overall[x]) for x in extra) + " |" for m, s in report.scores.items()]
    for method, reason in report.skipped.items():
        out += ["", f"*{method} skipped: {reason}.*"]
    for method, reasons in report.degraded.items():
        if reasons:
            why = ", ".join(f"{q} ({r})" for q, r in reasons.items())
            out += ["", f"**{method}: {len(reasons)} question(s) degraded to the hybrid order:** {why}"]

    out += ["", f"### Failures at rank 1 of the best method ({report.best})", ""]
    if not report.failures:
        out.append("None: every question has a relevant document first.")
    for f in report.failures:
        label = "recall failure" if f.kind == "recall" else "ranking failure"
        out.append(
            f"- **{f.question_id}** ({f.type}) {f.question}  \n  expected {f.expected}, obtained {f.obtained}  \n"
            f"  **{label}** (relevant {'absent from' if f.kind == 'recall' else 'present in'} {f.pool})"
            + (f", {f.status}" if f.status != "ok" else "")
        )
        out += [f"  - {_ranks(t, f.method, int(report.config.get('depth', 1000)))}" for t in f.relevant]
    recall_n = sum(f.kind == "recall" for f in report.failures)
    if report.failures:
        out += ["", f"{recall_n} recall failure(s), {len(report.failures) - recall_n} ranking failure(s)."]

    names = list(report.scores)
    values = ", ".join(_fmt(report.scores[m].overall["mrr"]) for m in names)
    out += [
        "",
        "```mermaid",
        "xychart-beta",
        f'  title "MRR by method ({report.questions} questions)"',
        "  x-axis [" + ", ".join(f'"{m}"' for m in names) + "]",
        '  y-axis "MRR" 0 --> 1',
        f"  bar [{values}]",
        "```",
    ]

    out += ["", "### Cost", ""]
    out += [
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
    return "\n".join(out) + "\n"


def render_json(report: Report) -> str:
    """The same content as the Markdown, for machines."""
    return json.dumps(asdict(report), indent=2, ensure_ascii=False, sort_keys=False) + "\n"
