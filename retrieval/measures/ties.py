"""Tie exposure: how much a question's figure owes to the order of documents with equal scores.

A method ranks documents with equal scores in some order (by id here, see
retrieval.data.dataset), and recall@k or reciprocal rank can change with that order when a
tied group holds a relevant document and straddles a cut-off (rank k, or rank 10 for
MRR). For each question this module gives, over all orders of every tied group:

- the expected value of recall@k and of reciprocal rank (MRR@10), in closed form as
  McSherry and Najork (2008, "Computing information retrieval performance measures
  efficiently in the presence of tied scores", ECIR) describe: a group of t tied documents
  holding r relevant ones at ranks a+1..a+t puts, on average, r * (its positions within k) / t
  relevant documents in the top k, and its first relevant document at rank a + j with
  probability C(t - j, r - 1) / C(t, r);
- the smallest and largest value any order gives, and whether they differ ("dependent").

A tied group is a run of equal scores in the ranking (scores as the method ranks them:
BM25 and cosines rounded, fused scores exact). For hybrid, the fusion's rule "better rank
in any single list" is a convention like the id, so its groups are equal fused scores too.
Computed where the whole ranking exists (at evaluation time): the Run keeps only the top
of each ranking, which may cut a tied group. Pure: numpy and fractions, no I/O.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from functools import cache
from math import comb

import numpy as np

from retrieval.run.ranking import Ranking

__all__ = [
    "TieInfo",
    "TieSummary",
    "render_ties",
    "summarize_ties",
    "tie_info_for_dataset",
    "tie_summary",
    "ties_to_dict",
]

MRR_DEPTH = 10  # as retrieval.measures.metrics.MRR_DEPTH; repeated so this module imports no metric code


@dataclass(frozen=True)
class TieInfo:
    """One question, one method: the figures as ranked, their expectation and range over all
    orders of the tied groups, and whether the order of a tie changes them.

    `truncated` is True when a tied group that reaches the cut-off runs to the end of a ranking
    cut at its depth: documents tied with it beyond the depth are unknown, and the expected
    values count only the part kept (the caller should keep whole groups, or a deeper ranking).
    """

    dependent: bool
    expected_recall: float
    expected_rr: float
    recall: float
    rr: float
    min_recall: float
    max_recall: float
    min_rr: float
    max_rr: float
    tied_groups: int  # tied groups of 2+ documents that hold a relevant one and reach the cut-off
    truncated: bool = False

    def as_dict(self) -> dict[str, float | int | bool]:
        """The fields by name, as `dataclasses.asdict` gives them without its deep copy (all are
        scalars): the Run stores one per question and method."""
        return dict(vars(self))


def _relevant_groups(positions: Sequence[int], scores: np.ndarray) -> list[tuple[int, int, int]]:
    """(start, end, relevant documents inside) of each run of equal scores that holds one of
    the relevant `positions` (sorted), in ranking order."""
    # The first position of each run of equal scores, then the end of the ranking.
    bounds = [0, *(np.flatnonzero(scores[1:] != scores[:-1]) + 1).tolist(), len(scores)]
    groups: dict[int, list[int]] = {}
    for position in positions:
        g = bisect_right(bounds, position) - 1
        groups.setdefault(bounds[g], [bounds[g + 1], 0])[1] += 1
    return [(start, end, r) for start, (end, r) in groups.items()]


def _first_relevant_rr(a: int, t: int, r: int) -> Fraction:
    """E[1 / rank of the first relevant] (0 beyond MRR_DEPTH) when t tied documents, r of them
    relevant, take ranks a+1..a+t in a uniformly random order."""
    total = comb(t, r)
    value = Fraction(0)
    for j in range(1, min(t - r + 1, MRR_DEPTH - a) + 1):
        # P(the first relevant is the group's j-th) = C(t - j, r - 1) / C(t, r).
        value += Fraction(comb(t - j, r - 1), total) / (a + j)
    return value


@cache  # one Fraction per rank (0 beyond MRR_DEPTH), asked for on every question and method
def _rr(rank: int) -> Fraction:
    return Fraction(1, rank) if rank <= MRR_DEPTH else Fraction(0)


def tie_summary(ranking: Ranking, relevant_indices: Collection[int], k: int, depth: int | None = None) -> TieInfo:
    """Tie-aware recall@k and reciprocal rank (MRR@10) of one ranking (corpus indices best first
    with their scores) for one question's relevant documents (corpus indices).

    Pass the ranking with every tied group that reaches rank max(k, 10) whole. With `depth`
    (the length the ranking was cut at), a group reaching the end of a ranking that long is
    flagged `truncated`.
    """
    relevant = set(int(i) for i in relevant_indices)
    if not relevant:
        raise ValueError("tie_summary: a question needs at least one relevant document")
    if k < 1:
        raise ValueError(f"tie_summary: k must be >= 1, got {k}")
    indices = np.asarray(ranking.indices)
    scores = np.asarray(ranking.scores)
    if len(indices) != len(scores):
        raise ValueError(f"tie_summary: {len(indices)} indices but {len(scores)} scores")
    cutoff = max(k, MRR_DEPTH)
    # Where the relevant documents are: a question has a handful, a ranking hundreds of entries,
    # so one comparison per relevant document beats a mask over the ranking.
    positions = sorted(p for d in relevant for p in np.flatnonzero(indices == d).tolist())
    observed_found = sum(1 for p in positions if p < k)
    observed_rr = Fraction(1, positions[0] + 1) if positions and positions[0] < MRR_DEPTH else Fraction(0)

    # Exact throughout; a group of one document adds whole numbers, so only ties need Fractions.
    found: list[int | Fraction] = [0, 0, 0]  # expected, min, max relevant documents in the top k
    rr = [Fraction(0)] * 3  # expected, min, max reciprocal rank
    first_seen = False
    tied_groups = 0
    truncated = False
    for start, end, r in _relevant_groups(positions, scores):
        if start >= cutoff:
            break
        t = end - start
        if t > 1 and (start < k or (not first_seen and start < MRR_DEPTH)):
            tied_groups += 1
            if depth is not None and end == len(indices) and len(indices) >= depth:
                truncated = True
        inside = max(0, min(k, end) - start)  # the group's positions within the top k
        if inside:
            found[0] += Fraction(r * inside, t) if t > 1 else r * inside
            found[1] += max(0, r - (t - inside))  # the relevant ones pushed to the back
            found[2] += min(r, inside)  # the relevant ones brought to the front
        if not first_seen:
            first_seen = True
            rr[0] = _first_relevant_rr(start, t, r) if t > 1 else _rr(start + 1)
            rr[1] = _rr(start + t - r + 1)
            rr[2] = _rr(start + 1)
    n_relevant = len(relevant)
    recalls = [f / n_relevant for f in found]
    return TieInfo(
        dependent=recalls[1] != recalls[2] or rr[1] != rr[2],
        expected_recall=float(recalls[0]),
        expected_rr=float(rr[0]),
        recall=observed_found / n_relevant,
        rr=float(observed_rr),
        min_recall=float(recalls[1]),
        max_recall=float(recalls[2]),
        min_rr=float(rr[1]),
        max_rr=float(rr[2]),
        tied_groups=tied_groups,
        truncated=truncated,
    )


def tie_info_for_dataset(
    doc_ids: Sequence[str],
    questions: Sequence[tuple[str, Collection[str]]],
    rankings: Sequence[Ranking],
    k: int,
    depth: int | None = None,
) -> dict[str, TieInfo]:
    """Question id -> TieInfo for one method: `questions` are (id, relevant document ids) in
    the order of `rankings` (dataset order), `doc_ids` the corpus ids by corpus index.

    At evaluation time: tie_info_for_dataset(dataset.doc_ids, [(q.id, q.relevant) for q in
    dataset.questions], context.rankings[name], settings.k, settings.depth).
    """
    if len(questions) != len(rankings):
        raise ValueError(f"tie_info_for_dataset: {len(questions)} questions but {len(rankings)} rankings")
    position = {doc_id: i for i, doc_id in enumerate(doc_ids)}
    return {
        qid: tie_summary(ranking, [position[d] for d in relevant], k, depth)
        for (qid, relevant), ranking in zip(questions, rankings, strict=True)
    }


@dataclass(frozen=True)
class TieSummary:
    """One method over every question: how many figures depend on the order of ties, and the
    means (overall and per question type) as ranked, expected over all tie orders, and their range."""

    questions: int
    dependent: list[str]  # question ids, in dataset order
    truncated: list[str]
    overall: dict[str, float]
    by_type: dict[str, dict[str, float]]


_FIELDS = ("recall", "expected_recall", "min_recall", "max_recall", "rr", "expected_rr", "min_rr", "max_rr")


def _means(infos: Sequence[TieInfo]) -> dict[str, float]:
    return {name: sum(getattr(i, name) for i in infos) / len(infos) for name in _FIELDS}


def summarize_ties(infos: Mapping[str, TieInfo], types: Mapping[str, str]) -> TieSummary:
    """Aggregate one method's TieInfo (question id -> info, dataset order) with the question types.

    Means are keyed recall, expected_recall, min_recall, max_recall and rr, expected_rr, min_rr,
    max_rr (rr means are MRR); per type in order of first appearance.
    """
    if not infos:
        raise ValueError("summarize_ties: no question")
    groups: dict[str, list[TieInfo]] = {}
    for qid, info in infos.items():
        groups.setdefault(types[qid], []).append(info)
    return TieSummary(
        questions=len(infos),
        dependent=[qid for qid, info in infos.items() if info.dependent],
        truncated=[qid for qid, info in infos.items() if info.truncated],
        overall=_means(list(infos.values())),
        by_type={qtype: _means(members) for qtype, members in groups.items()},
    )


def ties_to_dict(summaries: Mapping[str, TieSummary]) -> dict[str, dict[str, object]]:
    """JSON-ready: method -> {questions, dependent, truncated, overall, by_type} (unrounded means)."""
    return {method: asdict(summary) for method, summary in summaries.items()}


def _range(low: float, high: float) -> str:
    return f"{low:.2f}" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}..{high:.2f}"


def render_ties(summaries: Mapping[str, TieSummary], k: int) -> list[str]:
    """The report's Markdown section on ties: per method, the questions whose figure depends on
    the order of tied documents, and each figure as ranked, expected over all tie orders, and
    its range. Empty when no method has a tie that matters."""
    if not any(s.dependent for s in summaries.values()):
        return []
    lines = [
        "### Ties",
        "",
        "Questions whose figure depends on the order of documents with equal scores, and each "
        "figure as ranked, its expected value over all orders of the tied documents "
        "(McSherry and Najork, 2008) and the range those orders give.",
        "",
        f"| Method | Tie-dependent | Recall@{k} | expected | range | MRR | expected | range |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for method, s in summaries.items():
        o = s.overall
        lines.append(
            f"| {method} | {len(s.dependent)} of {s.questions} | {o['recall']:.2f} | {o['expected_recall']:.2f} "
            f"| {_range(o['min_recall'], o['max_recall'])} | {o['rr']:.2f} | {o['expected_rr']:.2f} "
            f"| {_range(o['min_rr'], o['max_rr'])} |"
        )
    lines.append("")
    for method, s in summaries.items():
        if s.dependent:
            lines.append(f"- {method}: {', '.join(s.dependent)}")
        if s.truncated:
            lines.append(
                f"- {method}: tied groups cut at the ranking depth for {', '.join(s.truncated)} "
                "(expected values count only the documents kept)"
            )
    lines.append("")
    return lines
