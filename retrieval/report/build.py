"""The evaluation report: metrics table, failures, degraded count, cost, MRR chart.

`build_report` turns a Run into plain data (what `--format json` prints, `render_json`);
retrieval.report.sections renders it as Markdown.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from retrieval.data.dataset import Document, content_of
from retrieval.data.judgment_merge import LLMCheck
from retrieval.diagnosis.corpus_view import CorpusView
from retrieval.diagnosis.failures import Failure, best_method, failures_at_rank_1
from retrieval.diagnosis.remedies import diagnose, remedy_summary
from retrieval.diagnosis.sweeps import Setup, setup_for, sweeps
from retrieval.measures.agreement import Agreement, agreements
from retrieval.measures.figures import DIGITS
from retrieval.measures.judged import JudgedScores, judged_run
from retrieval.measures.metrics import MethodScores, score_run
from retrieval.measures.paired import BASELINE, PairedComparison, comparison_pairs
from retrieval.measures.paired import compare as paired
from retrieval.measures.refusion import candidate_pools
from retrieval.measures.ties import TieInfo, TieSummary, summarize_ties
from retrieval.run.cost import Usage, estimate_cost
from retrieval.run.results import Run
from retrieval.version import __version__

__all__ = ["INDEXING", "ROUND", "Report", "build_report", "render_json"]

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
    # Billed units other than tokens (Cohere's rerank search units); 0 for every other pipeline.
    search_units: int = 0


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
    # Judged@k per method (retrieval.measures.judged): how much of each top k anyone judged.
    judged: dict[str, JudgedScores] | None = None
    # Question id -> its type, in the run's order.
    question_types: dict[str, str] = field(default_factory=dict)
    # Each LLM judge's agreement with people on the pairs both judged (retrieval.measures.agreement).
    agreement: list[Agreement] | None = None
    # Lines of judgments.jsonl that judge a question not evaluated or a document not in the corpus.
    unused_judgments: int = 0
    # Whether the LLM judge's grades count (accept_llm_judgments), and how many lines it wrote.
    accept_llm: bool = False
    llm_judgments: int = 0
    # The documents and questions longer than the embedding model reads (Run.long_inputs).
    long_inputs: dict[str, Any] = field(default_factory=dict)
    # Where the methods ran (Run.executor): the executor and, on a cluster, its nodes and CPUs.
    executor: dict[str, Any] | None = None
    # The version of the tool that made the report (the package's, as `--version` prints it).
    version: str = __version__


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
            total.add(u.calls, u.input_tokens, u.output_tokens, u.seconds, search_units=u.search_units)
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
                search_units=total.search_units,
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
    llm_checks: Sequence[LLMCheck] = (),
    unused_judgments: int = 0,
    llm_judgments: int = 0,
) -> Report:
    """Everything the report shows, as plain data. `documents` is the corpus, in dataset order;
    `baseline` is the profile's baseline entry (figures shown with ▲/▼ against it, and paired
    comparisons); `what_if` puts the sweeps in the Markdown (always in the data and the JSON).
    `tolerance` is the project's setting; `accepted` the drops (and their reason) the baseline records.
    `llm_checks` are the pairs an LLM judge and people both judged (`Dataset.llm_checks`), for its
    agreement; `unused_judgments` the dataset's count of judgments.jsonl lines it could not use, and
    `llm_judgments` of those an LLM judge wrote."""
    k = int(run.config.get("k", 5))
    candidates = int(run.config.get("candidates", 20))
    scores = score_run(run, k, extra)
    best = best_method(scores, k) if scores else ""
    setup = setup_for(run, CorpusView(documents))  # a view: the sweeps and diagnoses read a few documents
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
        failures=failures_at_rank_1(run, best, _Contents(setup.documents), candidates) if best else [],
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
        judged=judged_run(run, k),
        question_types={r.question.id: r.question.type for r in run.results},
        agreement=agreements(llm_checks, int(run.config.get("relevant_grade", 1))),
        unused_judgments=unused_judgments,
        accept_llm=bool(run.config.get("accept_llm_judgments", False)),
        llm_judgments=llm_judgments,
        long_inputs=run.long_inputs,
        executor=run.executor,
    )


class _Contents(Mapping[str, str]):
    """Document id -> indexed content (`Document.content`), made on look-up from the setup's
    (title, text): the failures read a few documents of a corpus that may
    hold a million, and a dict of every content would copy every text."""

    def __init__(self, documents: Mapping[str, tuple[str, str]]) -> None:
        self._documents = documents

    def __getitem__(self, doc_id: str) -> str:
        return content_of(*self._documents[doc_id])

    def __iter__(self) -> Iterator[str]:
        return iter(self._documents)

    def __len__(self) -> int:
        return len(self._documents)


def render_json(report: Report, notice: str | None = None) -> str:
    """The same content as the Markdown, for machines; `notice` as the Markdown says it first
    (a baseline of another configuration or dataset), null when there is none."""
    return json.dumps({**_plain(report), "notice": notice}, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


_LEAVES = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    """`dataclasses.asdict` of the report, the same values: its plain types (most of a report of
    a thousand questions: their figures, ids and texts) are taken as they are, where asdict sends
    each one through its recursion and copy.deepcopy."""
    kind = type(value)
    if kind in _LEAVES:
        return value
    if kind is list:
        return [_plain(v) for v in value]
    if kind is dict:
        return {_plain(k): _plain(v) for k, v in value.items()}
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple, as asdict makes it
        return kind(*[_plain(v) for v in value])
    if isinstance(value, list | tuple):
        return kind(_plain(v) for v in value)
    if isinstance(value, dict):
        return kind((_plain(k), _plain(v)) for k, v in value.items())
    return copy.deepcopy(value)
