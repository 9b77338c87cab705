"""Reciprocal rank fusion computed again from kept (truncated) rankings, exactly or marked inexact.

A run keeps each first-stage ranking only to a depth, so that the what-if sweeps can fuse them
again under other RRF k and weights without any model call. A document missing from an input
list that was cut at length L may sit just past it, so its score there lies in
[0, w / (k + L + 1)]. `fuse_top` carries that interval for every document and marks the top
`top` inexact when a possible contribution beyond a kept depth could reorder it;
`required_depth` gives the depth that makes this rare and `keep_depths` the depth a run keeps
of each ranking (the evaluator asks it before ranking).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "CANDIDATE_COUNTS",
    "FUSED_TOP",
    "RRF_KS",
    "WEIGHT_GRID",
    "Fused",
    "KeptLists",
    "candidate_pools",
    "fuse_kept",
    "fuse_top",
    "keep_depths",
    "kept_lists",
    "required_depth",
]

CANDIDATE_COUNTS = (10, 20, 30, 50)
RRF_KS = (1, 5, 10, 30, 60, 100)
WEIGHT_GRID: tuple[tuple[float, ...], ...] = ((1.0, 1.0), (1.0, 2.0), (2.0, 1.0), (1.0, 3.0))
# Depth of the fused ranking the sweeps recompute: covers recall@5, MRR@10 and "fused top 20".
FUSED_TOP = 20


@dataclass(frozen=True)
class Fused:
    """The top of a fused ranking recomputed from kept rankings; `exact` False when a
    contribution beyond some input's kept depth could change it."""

    ids: list[str]
    exact: bool


@dataclass(frozen=True)
class KeptLists:
    """One question's kept input rankings, in the form `fuse_kept` scores: everything that
    depends neither on k nor on the weights, built once for a whole sweep grid."""

    ids: list[str]  # every document of some list, in first-seen order
    ranks: np.ndarray  # (lists, documents): the document's rank in the list, 0 where absent
    lengths: tuple[int, ...]
    complete: tuple[bool, ...]
    order: np.ndarray  # each document's corpus position
    corpus: int  # documents in the corpus


def kept_lists(lists: Sequence[Sequence[str]], complete: Sequence[bool], order: Mapping[str, int]) -> KeptLists:
    """Prepare `lists` (each cut at its length unless `complete`) for `fuse_kept`; `order` maps
    every corpus document to its position."""
    if len(complete) != len(lists):
        raise ValueError(f"{len(lists)} rankings but {len(complete)} completeness flags")
    ids = list(dict.fromkeys(d for ranking in lists for d in ranking))
    column = {d: i for i, d in enumerate(ids)}
    ranks = np.zeros((len(lists), len(ids)), dtype=np.int64)
    for j, ranking in enumerate(lists):
        ranks[j, [column[d] for d in ranking]] = np.arange(1, len(ranking) + 1)
    return KeptLists(
        ids=ids,
        ranks=ranks,
        lengths=tuple(len(ranking) for ranking in lists),
        complete=tuple(bool(c) for c in complete),
        order=np.array([order[d] for d in ids], dtype=np.int64),
        corpus=len(order),
    )


def fuse_kept(kept: KeptLists, k: int, weights: Sequence[float] | None = None, top: int = FUSED_TOP) -> Fused:
    """Top `top` ids of the weighted RRF of the kept lists, as retrieval.measures.fusion computes it.

    score(d) = sum over lists, in list order, of w / (k + rank); documents in no list are
    left out; ties go to the better rank in any single list, then to the lower corpus
    position, as in retrieval.measures.fusion. A list not complete was cut at its length L: a
    document missing from it may score up to w / (k + L + 1) there, so the result is exact
    only when no such contribution can reorder the top.
    """
    n = len(kept.lengths)
    w = [float(x) for x in weights] if weights is not None else [1.0] * n
    if len(w) != n:
        raise ValueError(f"{n} rankings but {len(w)} weights")
    # low: the score from the kept lists. high: plus, for each cut list a document is missing
    # from, the largest value it could have there. The terms are added as retrieval.measures.fusion adds
    # them (in list order for two lists, sorted for more; a 0.0 term changes no float), so a
    # tie there is a tie here: 1/63 + 1/80 summed in another order is not the same float.
    lows = np.zeros((n, len(kept.ids)))
    highs = np.zeros((n, len(kept.ids)))
    unseen = 0.0
    unranked = np.iinfo(np.int64).max  # best rank of a document only lists of weight 0 hold
    best = np.full(len(kept.ids), unranked)
    for j, ranks in enumerate(kept.ranks):
        present = ranks > 0
        lows[j] = np.where(present, w[j] / (k + np.maximum(ranks, 1)), 0.0)
        if kept.complete[j]:
            highs[j] = lows[j]
        else:
            beyond = w[j] / (k + kept.lengths[j] + 1)
            highs[j] = np.where(present, lows[j], beyond)
            unseen += beyond
        if w[j] > 0:  # a list of weight 0 is switched off, as in retrieval.measures.fusion
            best = np.where(present, np.minimum(best, ranks), best)
    low, high = ((terms if n <= 2 else np.sort(terms, axis=0)).sum(axis=0) for terms in (lows, highs))
    scored = np.flatnonzero(best < unranked)
    ranked = scored[np.lexsort((kept.order[scored], best[scored], -low[scored]))]
    # Only documents whose score is uncertain (and unseen ones) can overtake one above them:
    # threat[i] is the most any document from position i on (or an unseen one) could score.
    end = unseen if len(ranked) < kept.corpus else 0.0
    uncertain = np.where(high[ranked] > low[ranked], high[ranked], 0.0)
    threat = np.append(np.maximum(np.maximum.accumulate(uncertain[::-1])[::-1], end), end)
    shown = ranked[:top]
    exact = bool(np.all(low[shown] > threat[1 : len(shown) + 1]))
    if len(shown) < top and end > 0.0:
        exact = False  # unseen documents could fill the rest of the top
    return Fused([kept.ids[i] for i in shown], exact)


def fuse_top(
    lists: Sequence[Sequence[str]],
    complete: Sequence[bool],
    order: Mapping[str, int],
    k: int,
    weights: Sequence[float] | None = None,
    top: int = FUSED_TOP,
) -> Fused:
    """`fuse_kept` of one (k, weights): the top `top` ids of the weighted RRF of `lists`."""
    return fuse_kept(kept_lists(lists, complete, order), k, weights, top)


def required_depth(
    rrf_ks: Sequence[int] = RRF_KS, weight_grid: Sequence[Sequence[float]] = WEIGHT_GRID, top: int = FUSED_TOP
) -> int:
    """Smallest depth D to keep each input ranking to so that no document missing from
    every kept list can enter the fused top `top`, for every k and weight vector.

    The top `top` documents of any input list score at least w_j / (k + top) each, so the
    fused top-`top` threshold is at least w_min / (k + top); a document beyond depth D in
    every list scores at most sum(w) / (k + D + 1). D is the least integer with
    sum(w) / (k + D + 1) < w_min / (k + top): D > (sum(w) / w_min) * (k + top) - k - 1.
    Equal weights, k <= 100, top 20: D = 140; with weights up to (1, 3): D = 380.
    (Documents seen in one list but cut from another are checked per question by fuse_top.)
    """
    depth = 0
    for k in rrf_ks:
        for weights in weight_grid:
            # A list of weight 0 is switched off: it neither scores nor sets the threshold.
            active = [w for w in weights if w > 0]
            if not active:
                continue
            ratio = sum(active) / min(active)
            depth = max(depth, math.floor(ratio * (k + top) - k - 1) + 1)
    return depth


def candidate_pools(requires: Mapping[str, Sequence[str]], candidate_sources: Mapping[str, str | None]) -> list[str]:
    """The rankings a reranker reads: the declared candidate sources, or, when no method of the
    run declares one (a profile without a reranker), every fused method, the list a reranker
    would read."""
    declared = [s for s in candidate_sources.values() if s]
    if declared:
        return list(dict.fromkeys(declared))
    first_stage = {m for m, needs in requires.items() if not needs}
    return [m for m, inputs in requires.items() if len(inputs) >= 2 and all(i in first_stage for i in inputs)]


def keep_depths(
    requires: Mapping[str, Sequence[str]],
    candidate_sources: Mapping[str, str | None],
    counts: Sequence[int] = CANDIDATE_COUNTS,
    rrf_ks: Sequence[int] = RRF_KS,
    weight_grid: Sequence[Sequence[float]] = WEIGHT_GRID,
    top: int = FUSED_TOP,
) -> dict[str, int]:
    """How deep a run should keep each method's ranking for these sweeps (the evaluator keeps
    the larger of this and what the metrics need): the inputs of a fused method to
    `required_depth`, a candidate source to the largest candidate count."""
    depths: dict[str, int] = {}
    first_stage = {m for m, needs in requires.items() if not needs}
    fused_depth = required_depth(rrf_ks, weight_grid, top)
    for inputs in requires.values():
        if len(inputs) >= 2 and all(i in first_stage for i in inputs):
            for i in inputs:
                depths[i] = max(depths.get(i, 0), fused_depth)
    for source in candidate_pools(requires, candidate_sources):
        depths[source] = max(depths.get(source, 0), max(counts))
    return depths
