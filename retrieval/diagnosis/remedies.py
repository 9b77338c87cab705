"""Which remedy could reach each failure: the seed's three remedies, measured from a run.

For every question whose first result under a method is not relevant, we say where
its relevant documents stand in each list and which remedy could bring one to the
method's candidate pool (the top `candidates` of its declared candidate source, or of
the method itself), in this order:

- reorder: a relevant document is already among the candidates; only the ordering
  (the reranker, or a reranker over this method's top) can fix it;
- more candidates: it is within the pool's top N for N in COUNTS (30, 50), with the
  estimated extra rerank tokens (retrieval.diagnosis.sweeps.rerank_tokens);
- fusion settings: it is in a first-stage method's top 20 but out of a fused method's
  top 20 (the fusion lost it); we fuse again from the recorded rankings and give the
  RRF k (with the run's weights) and the weights (with the run's k) that keep it;
- query rewriting or document enrichment: none of the above reaches it. When it is out
  of every list's top max(COUNTS), it is a vocabulary mismatch: no cut-off helps.

Plain functions over a Run and a retrieval.diagnosis.sweeps.Setup; no model call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from retrieval.diagnosis.corpus_view import corpus_order
from retrieval.diagnosis.sweeps import Setup, candidate_sweep, fused_methods, fusion_inputs, token_ratio
from retrieval.measures.fusion import DEFAULT_RRF_K
from retrieval.measures.refusion import RRF_KS, WEIGHT_GRID, fuse_kept, kept_lists
from retrieval.run.results import QuestionResult, Run
from retrieval.text.markdown import escape_cell, escape_text, folded

__all__ = ["COUNTS", "Diagnosis", "Remedy", "diagnose", "remedy_summary", "render_diagnosis"]

COUNTS = (30, 50)
RemedyKind = Literal["reorder", "more candidates", "fusion settings", "rewrite or enrich"]


@dataclass(frozen=True)
class Remedy:
    """One remedy that could reach a failed question's relevant document."""

    kind: RemedyKind
    detail: str
    # more candidates: the smallest count that reaches it, and this question's extra input tokens.
    candidates: int | None = None
    extra_input_tokens: int | None = None
    # fusion settings: the fused method and the settings that keep the document in its top 20.
    method: str | None = None
    settings: list[dict[str, Any]] = field(default_factory=list)
    vocabulary_mismatch: bool = False


@dataclass(frozen=True)
class Diagnosis:
    """A failure at rank 1 of `method`, where its relevant documents stand, and the remedies."""

    question_id: str
    question: str
    method: str
    pool: str
    candidates: int
    expected: list[str]
    obtained: list[str]
    # relevant doc id -> method -> 1-based rank in that method's full ranking (None: not ranked).
    ranks: dict[str, dict[str, int | None]]
    remedies: list[Remedy]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def _closure(method: str, requires: Mapping[str, Sequence[str]]) -> list[str]:
    seen: list[str] = []

    def visit(name: str) -> None:
        if name in seen:
            return
        seen.append(name)
        for dependency in requires.get(name, ()):
            visit(dependency)

    visit(method)
    return seen


def _best(ranks: Mapping[str, int | None]) -> tuple[str, int] | None:
    known = [(r, d) for d, r in ranks.items() if r is not None]
    if not known:
        return None
    rank, doc = min(known)
    return doc, rank


def _fusion_remedy(
    run: Run, setup: Setup, fused: str, qi: int, result: QuestionResult, order: Mapping[str, int]
) -> Remedy | None:
    """The fusion lost a relevant document: in an input's top `setup.top`, out of the fused top."""
    inputs = list(setup.requires[fused])
    lost = []
    for doc in result.question.relevant:
        fused_rank = result.methods[fused].relevant_ranks.get(doc)
        if fused_rank is not None and fused_rank <= setup.top:
            continue
        tops = [(m, result.methods[m].relevant_ranks.get(doc)) for m in inputs]
        tops = [(m, r) for m, r in tops if r is not None and r <= setup.top]
        if tops:
            lost.append((doc, fused_rank, tops))
    if not lost:
        return None
    current = setup.fusion.get(fused)
    k_now = current.rrf_k if current else DEFAULT_RRF_K
    w_now = tuple(current.weights) if current and current.weights else tuple([1.0] * len(inputs))
    rankings = kept_lists(*fusion_inputs(run, setup, fused, qi), order)
    settings: list[dict[str, Any]] = []
    keeping_k: list[int] = []
    keeping_w: list[tuple[float, ...]] = []
    trials = [(k, w_now) for k in RRF_KS] + [(k_now, tuple(w)) for w in WEIGHT_GRID if tuple(w) != w_now]
    for k, weights in trials:
        top = fuse_kept(rankings, k, weights, setup.top)
        kept = [d for d, _, _ in lost if d in top.ids]
        if kept:
            rank = min(top.ids.index(d) + 1 for d in kept)
            settings.append({"rrf_k": k, "weights": list(weights), "rank": rank, "exact": top.exact})
            if weights == w_now:
                keeping_k.append(k)
            if k == k_now and weights != w_now:
                keeping_w.append(weights)
    doc, fused_rank, tops = lost[0]
    where = ", ".join(f"{m} rank {r}" for m, r in tops)
    fused_at = f"rank {fused_rank}" if fused_rank is not None else "not ranked"
    keeps = []
    if keeping_k:
        keeps.append(_k_phrase(keeping_k))
    if keeping_w:
        keeps.append("weights " + ", ".join(_weights(w) for w in keeping_w) + f" at k {k_now}")
    detail = f"{doc}: {where}, {fused} {fused_at}; " + (
        f"kept in the fused top {setup.top} by " + " or ".join(keeps)
        if keeps
        else f"no tried setting keeps it in the top {setup.top}"
    )
    if any(not s["exact"] for s in settings):
        detail += " (≈: some settings not exact at the kept depth)"
    return Remedy("fusion settings", detail, method=fused, settings=settings)


def _k_phrase(ks: Sequence[int]) -> str:
    return "RRF k in {" + ", ".join(str(k) for k in ks) + "}"


def _weights(weights: Sequence[float]) -> str:
    return "(" + ", ".join(f"{w:g}" for w in weights) + ")"


def diagnose(run: Run, setup: Setup, method: str, counts: Sequence[int] = COUNTS) -> list[Diagnosis]:
    """Every question whose first result under `method` is not relevant, with where its
    relevant documents stand in each list and the remedies that could reach them."""
    pool = setup.candidate_sources.get(method) or method
    present = {m for r in run.results for m in r.methods}
    for name in dict.fromkeys((method, pool)):
        if name not in present:
            raise ValueError(f"cannot diagnose {method}: {name} is not in the run ({', '.join(sorted(present))})")
    order = corpus_order(setup.documents)
    ratio, rule = token_ratio(run, setup, pool)
    sweep = candidate_sweep(run, setup, pool, sorted({*counts, setup.candidates}), ratio, rule)
    tokens = {p["candidates"]: p["per_question_input_tokens"] for p in sweep["points"]}
    short = {p["candidates"]: set(p["approximate_tokens"]) for p in sweep["points"]}
    fused = [
        f
        for f in fused_methods(setup, run)
        if f in {*_closure(method, setup.requires), *_closure(pool, setup.requires)}
    ]
    deepest = max(counts)
    out = []
    for qi, result in enumerate(run.results):
        q = result.question
        mine = result.methods[method]
        if mine.ids and mine.ids[0] in q.relevant:
            continue
        lists = [m for m in result.methods]
        ranks = {doc: {m: result.methods[m].relevant_ranks.get(doc) for m in lists} for doc in q.relevant}
        remedies: list[Remedy] = []
        best = _best(result.methods[pool].relevant_ranks)
        if best is not None and best[1] <= setup.candidates:
            who = "the reranker" if pool != method else f"a reranker over {method}'s top {setup.candidates}"
            remedies.append(
                Remedy(
                    "reorder", f"{best[0]} is at {pool} rank {best[1]}, among the candidates: {who} could put it first"
                )
            )
        elif best is not None:
            for n in sorted(counts):
                if best[1] <= n:
                    extra = tokens[n][q.id] - tokens[setup.candidates][q.id]
                    # The run kept fewer candidates than n: the tokens of the kept ones only.
                    bound = "at least " if q.id in short[n] else ""
                    remedies.append(
                        Remedy(
                            "more candidates",
                            f"{best[0]} is at {pool} rank {best[1]}: within the top {n} "
                            f"({bound}+{extra:,} estimated input tokens for this question)",
                            candidates=n,
                            extra_input_tokens=extra,
                        )
                    )
                    break
        for f in fused:
            remedy = _fusion_remedy(run, setup, f, qi, result, order)
            if remedy is not None:
                remedies.append(remedy)
        # A fusion that lost the document but that no tried setting repairs is a finding, not a remedy.
        if not any(r.kind != "fusion settings" or r.settings for r in remedies):
            everywhere = [r for per in ranks.values() for r in per.values() if r is not None and r <= deepest]
            mismatch = not everywhere
            if mismatch:
                detail = f"out of every list's top {deepest}: vocabulary mismatch"
            else:
                rank, where, doc = min((r, m, d) for d, per in ranks.items() for m, r in per.items() if r is not None)
                detail = (
                    f"{doc} is beyond {pool}'s top {deepest} and no fusion setting tried keeps it "
                    f"(its best rank in any list: {where} {rank})"
                )
            remedies.append(
                Remedy(
                    "rewrite or enrich",
                    detail + ": only query rewriting or document enrichment can help",
                    vocabulary_mismatch=mismatch,
                )
            )
        out.append(
            Diagnosis(
                question_id=q.id,
                question=q.text,
                method=method,
                pool=pool,
                candidates=setup.candidates,
                expected=list(q.relevant),
                obtained=mine.ids[:3],
                ranks=ranks,
                remedies=remedies,
            )
        )
    return out


def remedy_summary(
    diagnoses: Sequence[Diagnosis], run: Run, setup: Setup, counts: Sequence[int] = COUNTS
) -> list[dict[str, Any]]:
    """One row per remedy: the questions it could reach and its cost, JSON-ready."""
    if not diagnoses:
        return []
    method, pool = diagnoses[0].method, diagnoses[0].pool
    ratio, rule = token_ratio(run, setup, pool)
    sweep = candidate_sweep(run, setup, pool, sorted({*counts, setup.candidates}), ratio, rule)
    by_count = {p["candidates"]: p for p in sweep["points"]}
    questions = len(run.results)
    rows = []

    def reached(kind: str, **match: Any) -> list[str]:
        return [
            d.question_id
            for d in diagnoses
            if any(
                r.kind == kind
                and all(getattr(r, a) == v for a, v in match.items())
                and (r.kind != "fusion settings" or r.settings)
                for r in d.remedies
            )
        ]

    now = by_count[setup.candidates]
    if pool != method:
        reorder_cost = "none: the reranker already reads these candidates (its ordering failed)"
    else:
        reorder_cost = (
            f"a reranker over {pool}'s top {setup.candidates}: {questions} calls, "
            f"≈{now['input_tokens']:,} input tokens a run"
        )
    rows.append(
        {"remedy": f"reorder ({pool} top {setup.candidates})", "questions": reached("reorder"), "cost": reorder_cost}
    )
    for n in sorted(counts):
        point = by_count[n]
        share = point["extra_input_tokens"] / now["input_tokens"] if now["input_tokens"] else 0.0
        approx = "at least " if point["approximate_tokens"] else ""
        rows.append(
            {
                "remedy": f"more candidates ({n} of {pool})",
                # Cumulative: every question that n candidates reach.
                "questions": [
                    d.question_id
                    for d in diagnoses
                    if any(r.kind == "more candidates" and (r.candidates or 0) <= n for r in d.remedies)
                ],
                "cost": f"{approx}+{point['extra_input_tokens']:,} estimated rerank input tokens a run ({share:+.0%})",
                "extra_input_tokens": point["extra_input_tokens"],
            }
        )
    for f in dict.fromkeys(r.method for d in diagnoses for r in d.remedies if r.kind == "fusion settings"):
        rows.append(
            {
                "remedy": f"fusion settings ({f})",
                "questions": reached("fusion settings", method=f),
                "cost": "none: no model call (check the other questions in the fusion sweep)",
            }
        )
    rows.append(
        {
            "remedy": "query rewriting or document enrichment",
            "questions": reached("rewrite or enrich"),
            "cost": (
                f"rewriting: +1 LLM call per question ({questions} a run); "
                f"enrichment: 1 LLM call per document at indexing, once ({len(setup.documents)} documents)"
            ),
        }
    )
    return rows


def _rank(rank: int | None) -> str:
    return "not ranked" if rank is None else str(rank)


def render_diagnosis(diagnoses: Sequence[Diagnosis], summary: Sequence[Mapping[str, Any]]) -> list[str]:
    """Markdown lines: one item per failure, then the remedy table."""
    if not diagnoses:
        return ["No failure at rank 1: nothing to remedy."]
    first = diagnoses[0]
    out = [f"Failures at rank 1 of {first.method} (candidate pool: {first.pool} top {first.candidates}):", ""]
    items = [
        [
            f"- **{escape_text(d.question_id)}** {escape_text(d.question)}  ",
            f"  expected {escape_text(', '.join(d.expected))}; obtained {escape_text(', '.join(d.obtained))}",
            *(f"  - `{doc}`: " + ", ".join(f"{m} {_rank(r)}" for m, r in per.items()) for doc, per in d.ranks.items()),
            *(f"  - {r.kind}: {r.detail}" for r in d.remedies),
        ]
        for d in diagnoses
    ]
    out += folded(items, "failure(s)")
    out += ["", "| Remedy | Questions it could reach | Cost |", "|---|---|---|"]
    for row in summary:
        qs = row["questions"]
        out.append(f"| {row['remedy']} | {len(qs)}{': ' + escape_cell(', '.join(qs)) if qs else ''} | {row['cost']} |")
    return out
