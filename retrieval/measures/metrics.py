"""Retrieval metrics as the seed defines them, and their means overall and per question type.

Pure functions over ranked ids and relevant ids: no model, no I/O.
recall@k = |top-k ∩ relevant| / |relevant|; reciprocal rank = 1 / rank of the first
relevant document within the top 10, else 0; MRR is its mean. nDCG@k weighs each document by
its grade when the judgments have grades (trec_eval's ndcg_cut: gain = grade, discount
log2(rank + 1), the ideal ranking from every judged grade), by 1 for each relevant id otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retrieval.run.results import Run

__all__ = [
    "MethodScores",
    "hit_rate_at_k",
    "metric_names",
    "ndcg_at_k",
    "recall_at_k",
    "reciprocal_rank",
    "score_method",
    "score_run",
]

MRR_DEPTH = 10


def recall_at_k(ranked_ids: Sequence[str], relevant: Collection[str], k: int = 5) -> float:
    """Share of the relevant documents found in the first k results."""
    if not relevant:
        raise ValueError("recall is undefined for a question without a relevant document")
    return len(set(ranked_ids[:k]) & set(relevant)) / len(set(relevant))


def reciprocal_rank(ranked_ids: Sequence[str], relevant: Collection[str], k: int = MRR_DEPTH) -> float:
    """1 / rank of the first relevant document within the first k results, else 0."""
    wanted = set(relevant)
    for rank, doc_id in enumerate(ranked_ids[:k], start=1):
        if doc_id in wanted:
            return 1.0 / rank
    return 0.0


def hit_rate_at_k(ranked_ids: Sequence[str], relevant: Collection[str], k: int = 5) -> float:
    """1 if at least one relevant document is in the first k results, else 0."""
    return 1.0 if set(ranked_ids[:k]) & set(relevant) else 0.0


def ndcg_at_k(ranked_ids: Sequence[str], relevant: Collection[str] | Mapping[str, float], k: int = 10) -> float:
    """Normalised discounted cumulative gain of the first k results. `relevant` is the relevant
    ids (each of gain 1) or the judgments, document id -> grade (gain = grade; a grade of 0 or
    below, judged not relevant, gains nothing)."""
    gains = (
        {d: float(g) for d, g in relevant.items() if g > 0}
        if isinstance(relevant, Mapping)
        else dict.fromkeys(relevant, 1.0)
    )
    dcg = sum(gains.get(d, 0.0) / math.log2(rank + 1) for rank, d in enumerate(ranked_ids[:k], 1))
    best = sorted(gains.values(), reverse=True)[:k]
    ideal = sum(gain / math.log2(rank + 1) for rank, gain in enumerate(best, 1))
    return dcg / ideal if ideal else 0.0


Metric = Callable[[Sequence[str], Any], float]


def metric_names(k: int = 5, extra: bool = False) -> list[str]:
    """The metric columns for a cut-off k: recall@k and mrr, plus hit@k and ndcg@10 with `extra`."""
    names = [f"recall@{k}", "mrr"]
    return [*names, f"hit@{k}", "ndcg@10"] if extra else names


def _metric(name: str) -> Metric:
    if name == "mrr":
        return reciprocal_rank
    if name.startswith(("recall@", "hit@", "ndcg@")):
        kind, cut = name.split("@")
        fn = {"recall": recall_at_k, "hit": hit_rate_at_k, "ndcg": ndcg_at_k}[kind]
        return lambda ranked, relevant: fn(ranked, relevant, int(cut))
    raise ValueError(f"unknown metric {name!r}: use recall@K, mrr, hit@K or ndcg@K")


@dataclass(frozen=True)
class MethodScores:
    """One method's metrics: means overall and per question type, and every question's values."""

    overall: dict[str, float]
    by_type: dict[str, dict[str, float]]
    per_question: dict[str, dict[str, float]]


def score_method(
    ranked: Mapping[str, Sequence[str]],
    relevant: Mapping[str, Collection[str]],
    types: Mapping[str, str],
    metrics: Sequence[str],
    judgments: Mapping[str, Mapping[str, float]] | None = None,
) -> MethodScores:
    """Score one method's rankings (question id -> ranked doc ids) on the given metrics. nDCG
    reads `judgments` (question id -> document id -> grade) when given, else the relevant ids."""
    fns = {name: _metric(name) for name in metrics}
    graded = judgments or {}

    def judged(name: str, qid: str) -> Collection[str] | Mapping[str, float]:
        return graded.get(qid, relevant[qid]) if name.startswith("ndcg@") else relevant[qid]

    per_question = {qid: {name: fn(ranked[qid], judged(name, qid)) for name, fn in fns.items()} for qid in relevant}

    def mean(qids: list[str]) -> dict[str, float]:
        return {name: sum(per_question[q][name] for q in qids) / len(qids) for name in fns}

    groups: dict[str, list[str]] = {}
    for qid in relevant:
        groups.setdefault(types[qid], []).append(qid)
    return MethodScores(
        overall=mean(list(relevant)),
        by_type={qtype: mean(qids) for qtype, qids in groups.items()},
        per_question=per_question,
    )


def score_run(run: Run, k: int = 5, extra: bool = False) -> dict[str, MethodScores]:
    """Metrics of every reported method of a run (recall@k and MRR; hit@k and nDCG@10 with `extra`)."""
    relevant = {r.question.id: r.question.relevant for r in run.results}
    types = {r.question.id: r.question.type for r in run.results}
    judgments = {r.question.id: r.question.judgments for r in run.results}
    return {m: score_method(run.ranked_ids(m), relevant, types, metric_names(k, extra), judgments) for m in run.methods}
