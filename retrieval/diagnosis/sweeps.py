"""What-if sweeps from recorded rankings: candidate counts, RRF k and weights, no model call.

Everything here reads a Run (per method and question: the top ids and each relevant
document's rank in the full ranking) plus plain declarations of the methods, so a
sweep costs nothing and can run again on a saved run log.

- Candidates: for N in {10, 20, 30, 50}, the share of questions whose relevant document
  is within the top N of the reranker's candidate source (so it reaches the reranker),
  and the rerank tokens N candidates would cost.
- Fusion: for every fused method (one that reads two or more first-stage methods, i.e.
  methods with `requires == ()`), its figures (recall@k, MRR) under each RRF k and
  each weight vector, fused again here from the recorded first-stage rankings.

Tokens are estimated, not counted: the rerank prompt is rendered exactly as the
reranker would (retrieval.methods.prompts.render_rerank_prompt over the top N candidates), and
its length in characters is divided by a characters-per-token ratio. When the run holds
the reranker's measured input tokens (the provider's own counters, live or replayed from
a cassette), the ratio is calibrated on them: the same prompts' characters over those
tokens (`measured_chars_per_token`), so the estimate counts the way the provider does.
Otherwise it is CHARS_PER_TOKEN = 4, Google's documented rule for Gemini ("a token is
about 4 characters"; https://ai.google.dev/gemini-api/docs/tokens); French runs slightly
more tokens per character than English, so read those as estimates.
The output is estimated the same way from the answer the schema asks for
({"ranking": [every candidate id]}).

Fused rankings are recomputed exactly, or marked inexact, by retrieval.measures.refusion.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring  # json.dumps(str, ensure_ascii=False)'s C encoder
from typing import Any

from retrieval.diagnosis.corpus_view import CorpusView, corpus_order
from retrieval.measures.metrics import MRR_DEPTH, score_method
from retrieval.measures.refusion import (
    CANDIDATE_COUNTS,
    FUSED_TOP,
    RRF_KS,
    WEIGHT_GRID,
    candidate_pools,
    fuse_kept,
    kept_lists,
    required_depth,
)
from retrieval.methods.prompts import PROMPT_VERSION, rerank_prompt_chars
from retrieval.run.results import Run

__all__ = [
    "CHARS_PER_TOKEN",
    "FusionSettings",
    "Setup",
    "candidate_sweep",
    "estimate_tokens",
    "fused_methods",
    "fusion_inputs",
    "fusion_sweep",
    "measured_chars_per_token",
    "render_sweeps",
    "rerank_token_counts",
    "rerank_tokens",
    "setup_for",
    "sweeps",
    "token_ratio",
]

CHARS_PER_TOKEN = 4.0
TOKEN_RULE = "estimated: rendered rerank prompt characters / 4 (Gemini's documented ~4 characters per token)"
CALIBRATED_RULE = (
    "estimated: rendered rerank prompt characters / {ratio:.2f}, the characters per token measured "
    "on this run's {method} calls ({tokens:,} input tokens)"
)


@dataclass(frozen=True)
class FusionSettings:
    """A fused method's RRF settings: k, and one weight per input (None: all 1)."""

    rrf_k: int
    weights: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Setup:
    """What the sweeps need besides the run, as plain data.

    `requires` and `candidate_sources` are the methods' declarations (method -> the
    methods it reads; method -> the method whose top `candidates` it reorders, None for
    none). `documents` maps doc id -> (title, text) in corpus order (that order breaks
    fusion ties, as retrieval.measures.fusion does). `fusion` gives each fused method's settings in
    the run. `kept` is how deep the run kept each method's ranking (a method absent from it:
    unknown, then only a ranking as long as `depth` or the corpus counts as complete; see
    `keep_depths`). `depth` is the depth the methods ranked to (Settings.depth).
    """

    requires: Mapping[str, Sequence[str]]
    candidate_sources: Mapping[str, str | None]
    documents: Mapping[str, tuple[str, str]]
    candidates: int
    fusion: Mapping[str, FusionSettings] = field(default_factory=dict)
    kept: Mapping[str, int] = field(default_factory=dict)
    depth: int = 1000
    k: int = 5
    # "In a list's top N" for the fusion diagnosis (the fusion lost a document of a first-stage top 20).
    top: int = FUSED_TOP
    # Derived: rerank_token_counts per (source, largest N, chars per token), once for sweeps and remedies.
    token_curves: dict[tuple[str, int, float], list[list[tuple[int, int]]]] = field(default_factory=dict, repr=False)


def estimate_tokens(text: str, chars_per_token: float = CHARS_PER_TOKEN) -> int:
    """Estimated tokens of a text: ceil(characters / chars_per_token)."""
    return math.ceil(len(text) / chars_per_token)


def rerank_tokens(
    question: str,
    ids: Sequence[str],
    documents: Mapping[str, tuple[str, str]],
    chars_per_token: float = CHARS_PER_TOKEN,
) -> tuple[int, int]:
    """Estimated (input, output) tokens of one rerank call over `ids`; (0, 0) below 2
    candidates, where the reranker makes no call."""
    return rerank_token_counts(question, ids, documents, chars_per_token)[len(ids)]


def rerank_token_counts(
    question: str,
    ids: Sequence[str],
    documents: Mapping[str, tuple[str, str]],
    chars_per_token: float = CHARS_PER_TOKEN,
) -> list[tuple[int, int]]:
    """`rerank_tokens(question, ids[:n], ...)` for n = 0 .. len(ids), from lengths (`rerank_prompt_chars`)."""
    prompts = rerank_prompt_chars(question, [(d, *documents[d]) for d in ids])
    # The answer is json.dumps({"ranking": ids[:n]}, ensure_ascii=False): '{"ranking": [' ... ']}'.
    answer = len('{"ranking": []}')
    counts = [(0, 0)]
    for n, doc_id in enumerate(ids, start=1):
        answer += len(encode_basestring(doc_id)) + (2 if n > 1 else 0)
        tokens = (math.ceil(prompts[n] / chars_per_token), math.ceil(answer / chars_per_token))
        counts.append(tokens if n >= 2 else (0, 0))  # estimate_tokens of texts of these lengths
    return counts


def measured_chars_per_token(run: Run, setup: Setup, method: str) -> float | None:
    """Characters per input token of `method`'s own rerank calls in this run: the rendered
    prompts' characters (its candidate source's top `candidates`, questions with 2 or more)
    over the input tokens its provider counted. None without a candidate source or tokens, or for a
    reranker whose declared `prompt` is not the listwise one (pointwise, a rerank API: other texts)."""
    usage = run.usage.get(method)
    source = setup.candidate_sources.get(method)
    if usage is None or usage.input_tokens <= 0 or not source or run.config.get(f"{method}.prompt") != PROMPT_VERSION:
        return None
    chars = 0
    for result in run.results:
        if source not in result.methods:
            return None
        ids = result.methods[source].ids[: setup.candidates]
        if len(ids) >= 2:
            chars += rerank_prompt_chars(result.question.text, [(d, *setup.documents[d]) for d in ids])[-1]
    return chars / usage.input_tokens if chars else None


def token_ratio(run: Run, setup: Setup, source: str) -> tuple[float, str]:
    """Characters per token for rerank prompts over `source`, and the rule to print: measured
    on a reranker of the run that reads `source` when one has input tokens, else CHARS_PER_TOKEN."""
    for method, read in setup.candidate_sources.items():
        measured = measured_chars_per_token(run, setup, method) if read == source else None
        if measured is not None:
            tokens = run.usage[method].input_tokens
            return measured, CALIBRATED_RULE.format(ratio=measured, method=method, tokens=tokens)
    return CHARS_PER_TOKEN, TOKEN_RULE


def _complete(ids: Sequence[str], method: str, setup: Setup) -> bool:
    """Whether a kept ranking holds every document its method ranked."""
    full = min(setup.depth, len(setup.documents))
    if len(ids) >= full:
        return True
    # Shorter than the kept depth: the method returned no more (BM25 ranks matching documents only).
    return method in setup.kept and len(ids) < setup.kept[method]


def setup_for(run: Run, documents: Iterable[tuple[str, str, str]] | CorpusView) -> Setup:
    """The Setup of a run from what it recorded: its methods' declarations, its configuration
    (a method's `<name>.rrf_k` and `<name>.weights` make it a fused method's settings), how deep
    it kept each ranking; `documents` is (id, title, text) in corpus order, or a CorpusView of them."""
    names = list(run.declarations)
    requires = {m: run.declared(m).requires for m in names}
    fusion = {
        m: FusionSettings(int(run.config[f"{m}.rrf_k"]), _weights_of(run.config.get(f"{m}.weights")))
        for m in names
        if f"{m}.rrf_k" in run.config
    }
    return Setup(
        requires=requires,
        candidate_sources={m: run.declared(m).candidate_source for m in names},
        documents=documents if isinstance(documents, CorpusView) else {d: (t, text) for d, t, text in documents},
        candidates=int(run.config.get("candidates", 20)),
        fusion=fusion,
        kept=dict(run.kept),
        depth=int(run.config.get("depth", 1000)),
        k=int(run.config.get("k", 5)),
    )


def _weights_of(value: Any) -> tuple[float, ...] | None:
    return tuple(float(w) for w in value) if value else None


def fused_methods(setup: Setup, run: Run) -> list[str]:
    """Methods of the run that fuse two or more first-stage methods (declared requires == ())."""
    present = {m for r in run.results for m in r.methods}
    first_stage = {m for m, needs in setup.requires.items() if not needs}
    return [
        name
        for name, inputs in setup.requires.items()
        if name in present and len(inputs) >= 2 and all(i in first_stage and i in present for i in inputs)
    ]


def fusion_inputs(run: Run, setup: Setup, method: str, qi: int) -> tuple[list[list[str]], list[bool]]:
    """The kept input rankings of a fused method for question `qi`, with completeness flags."""
    result = run.results[qi]
    lists = [list(result.methods[i].ids) for i in setup.requires[method]]
    return lists, [_complete(ids, m, setup) for ids, m in zip(lists, setup.requires[method], strict=True)]


def _best_rank(ranks: Mapping[str, int | None]) -> int | None:
    known = [r for r in ranks.values() if r is not None]
    return min(known) if known else None


def candidate_sweep(
    run: Run,
    setup: Setup,
    source: str,
    counts: Sequence[int] = CANDIDATE_COUNTS,
    chars_per_token: float = CHARS_PER_TOKEN,
    token_rule: str = TOKEN_RULE,
) -> dict[str, Any]:
    """For each candidate count N: questions whose relevant document is within `source`'s
    top N (it reaches the reranker), and the estimated rerank tokens of N candidates.

    Reach uses each relevant document's rank in the full ranking (exact at any depth);
    tokens need `source`'s top N ids, so a point lists in `approximate_tokens` the questions
    for which the run kept fewer (the tokens then cover the kept ids only: a lower bound).
    """
    questions = len(run.results)
    points: list[dict[str, Any]] = []
    base_input = base_output = 0
    base_reached: set[str] = set()
    wanted = sorted({*counts, setup.candidates})
    key = (source, wanted[-1], chars_per_token)
    if key not in setup.token_curves:
        setup.token_curves[key] = [
            rerank_token_counts(r.question.text, r.methods[source].ids[: wanted[-1]], setup.documents, chars_per_token)
            for r in run.results
        ]
    curves = setup.token_curves[key]
    for n in wanted:
        reached, input_tokens, output_tokens, short = [], 0, 0, []
        per_question: dict[str, int] = {}
        for qi, result in enumerate(run.results):
            mine = result.methods[source]
            best = _best_rank(mine.relevant_ranks)
            if best is not None and best <= n:
                reached.append(result.question.id)
            ids = mine.ids[:n]
            if len(ids) < n and not _complete(mine.ids, source, setup):
                short.append(result.question.id)
            tokens_in, tokens_out = curves[qi][len(ids)]
            per_question[result.question.id] = tokens_in
            input_tokens += tokens_in
            output_tokens += tokens_out
        points.append(
            {
                "candidates": n,
                "reached": len(reached),
                "questions": questions,
                "share": len(reached) / questions if questions else 0.0,
                "reached_ids": reached,
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "per_question_input_tokens": per_question,
                "approximate_tokens": short,
            }
        )
        if n == setup.candidates:
            base_input, base_output, base_reached = input_tokens, output_tokens, set(reached)
    for point in points:
        point["current"] = point["candidates"] == setup.candidates
        point["extra_input_tokens"] = point["input_tokens"] - base_input
        point["extra_output_tokens"] = point["output_tokens"] - base_output
        point["newly_reached"] = [q for q in point["reached_ids"] if q not in base_reached]
        point["no_longer_reached"] = sorted(base_reached - set(point["reached_ids"]))
    # The run's own count is shown only when it is one of the asked counts.
    shown = [p for p in points if p["candidates"] in counts]
    return {
        "source": source,
        "current": setup.candidates,
        "chars_per_token": chars_per_token,
        "token_rule": token_rule,
        "points": shown,
    }


def fusion_sweep(
    run: Run,
    setup: Setup,
    method: str,
    rrf_ks: Sequence[int] = RRF_KS,
    weight_grid: Sequence[Sequence[float]] = WEIGHT_GRID,
) -> dict[str, Any]:
    """The fused method's recall@k and MRR for every (RRF k, weights) pair, fused again
    from the recorded first-stage rankings. Each point lists the questions whose fused
    top could not be recomputed exactly (see fuse_top); empty means exact figures."""
    inputs = list(setup.requires[method])
    current = setup.fusion.get(method)
    current_k = current.rrf_k if current else None
    current_w = tuple(current.weights) if current and current.weights else tuple([1.0] * len(inputs))
    order = corpus_order(setup.documents)
    relevant = {r.question.id: r.question.relevant for r in run.results}
    types = {r.question.id: r.question.type for r in run.results}
    grid = list(dict.fromkeys(tuple(float(x) for x in w) for w in weight_grid))
    if current_w not in grid:
        grid.append(current_w)
    kept = [kept_lists(*fusion_inputs(run, setup, method, qi), order) for qi in range(len(run.results))]
    points = []
    for k in sorted({*rrf_ks, *([current_k] if current_k is not None else [])}):
        for weights in grid:
            if len(weights) != len(inputs):
                raise ValueError(f"weights {weights} do not match {method}'s {len(inputs)} inputs {inputs}")
            ranked: dict[str, list[str]] = {}
            approximate = []
            for qi, result in enumerate(run.results):
                fused = fuse_kept(kept[qi], k, weights, max(setup.top, setup.k, MRR_DEPTH))
                ranked[result.question.id] = fused.ids
                if not fused.exact:
                    approximate.append(result.question.id)
            scores = score_method(ranked, relevant, types, [f"recall@{setup.k}", "mrr"])
            points.append(
                {
                    "rrf_k": k,
                    "weights": list(weights),
                    f"recall@{setup.k}": scores.overall[f"recall@{setup.k}"],
                    "mrr": scores.overall["mrr"],
                    "current": k == current_k and weights == current_w,
                    "approximate": approximate,
                }
            )
    return {
        "method": method,
        "inputs": inputs,
        "current": {"rrf_k": current_k, "weights": list(current_w)},
        "k": setup.k,
        "required_depth": required_depth(rrf_ks, grid, max(setup.top, setup.k, MRR_DEPTH)),
        "points": points,
    }


def sweeps(run: Run, setup: Setup) -> dict[str, Any]:
    """Every sweep the run allows, JSON-ready: one candidate sweep per candidate pool present
    in the run (see `candidate_pools`), one fusion sweep per fused method."""
    present = {m for r in run.results for m in r.methods}
    candidates = []
    for source in candidate_pools(setup.requires, setup.candidate_sources):
        if source in present:
            ratio, rule = token_ratio(run, setup, source)
            candidates.append(candidate_sweep(run, setup, source, chars_per_token=ratio, token_rule=rule))
    return {
        "candidates": candidates,
        "fusion": [fusion_sweep(run, setup, m) for m in fused_methods(setup, run)],
    }


def _weights(weights: Sequence[float]) -> str:
    return "(" + ", ".join(f"{w:g}" for w in weights) + ")"


def render_sweeps(data: Mapping[str, Any]) -> list[str]:
    """Markdown lines for the output of `sweeps`."""
    out: list[str] = []
    for sweep in data["candidates"]:
        out += [
            f"#### Candidates read by the reranker (from {sweep['source']}; this run: {sweep['current']})",
            "",
            "| Candidates | Questions reached | Share | Rerank input tokens | Output tokens "
            "| Extra input tokens | Reached vs this run |",
            "|---|---|---|---|---|---|---|",
        ]
        for p in sweep["points"]:
            mark = " (this run)" if p["current"] else ""
            # Tokens over the kept candidates only: a lower bound.
            approx = "≥" if p["approximate_tokens"] else ""
            change = [f"+{q}" for q in p["newly_reached"]] + [f"-{q}" for q in p["no_longer_reached"]]
            out.append(
                f"| {p['candidates']}{mark} | {p['reached']}/{p['questions']} | {p['share']:.2f} "
                f"| {approx}{p['input_tokens']:,} | {approx}{p['output_tokens']:,} "
                f"| {approx}{p['extra_input_tokens']:+,} | {', '.join(change) or '-'} |"
            )
        out += [
            "",
            f"Reached: a relevant document is within {sweep['source']}'s top N, so the reranker reads it "
            "(its rank in the full ranking). "
            f"Tokens {sweep['token_rule']}.",
        ]
        short = sorted({q for p in sweep["points"] for q in p["approximate_tokens"]})
        if short:
            out.append(
                f"≥: a lower bound: the run kept fewer {sweep['source']} candidates than the count "
                f"for {len(short)} question(s)."
            )
        out.append("")
    for sweep in data["fusion"]:
        k = sweep["k"]
        grid = list(dict.fromkeys(tuple(p["weights"]) for p in sweep["points"]))
        ks = list(dict.fromkeys(p["rrf_k"] for p in sweep["points"]))
        cell = {(p["rrf_k"], tuple(p["weights"])): p for p in sweep["points"]}
        inputs = ", ".join(sweep["inputs"])
        out += [
            f"#### {sweep['method']}: recall@{k} / MRR by RRF k and weights ({inputs})",
            "",
            "| RRF k | " + " | ".join(_weights(w) for w in grid) + " |",
            "|---|" + "---|" * len(grid),
        ]
        for rrf_k in ks:
            cells = []
            for w in grid:
                p = cell[(rrf_k, w)]
                text = f"{p[f'recall@{k}']:.2f} / {p['mrr']:.2f}"
                if p["approximate"]:
                    text = "≈" + text
                cells.append(f"**{text}**" if p["current"] else text)
            out.append(f"| {rrf_k} | " + " | ".join(cells) + " |")
        inexact = sorted({q for p in sweep["points"] for q in p["approximate"]})
        out += ["", "Bold: this run's settings."]
        if inexact:
            out.append(
                f"≈: {len(inexact)} question(s) could not be fused again exactly from the kept rankings "
                f"({', '.join(inexact[:5])}{' …' if len(inexact) > 5 else ''}); "
                f"keep first-stage rankings to depth {sweep['required_depth']} or more."
            )
        out.append("")
    return out
