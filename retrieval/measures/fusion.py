"""Reciprocal rank fusion, optionally weighted per list, with a tie rule that has a meaning.

score(d) = sum over the input lists i where d appears of w_i / (k + rank_i(d))
(every w_i = 1 by default: plain RRF).

Ties. Two documents whose ranks are swapped between two lists (1st and 3rd against 3rd
and 1st) get exactly the same fused score, and on a real FAQ about one question in ten
has its relevant document in such a tie. Equal fused scores are ordered by:

1. the better (smaller) rank the document holds in any single input list: a document
   one list puts first goes before one no list puts higher than second;
2. then the document: the lower corpus index, which is the lower document id since
   `retrieval.data.dataset.load_dataset` sorts the corpus by id.

So the fused ranking depends neither on the order of the input lists nor on the order of
the corpus file. Scores are summed in a canonical order (each document's contributions
sorted), so two documents with the same contributions from different lists get bit-identical
scores and really tie, instead of differing in their last bit by the order of addition.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from retrieval.run.ranking import Ranking

__all__ = ["DEFAULT_RRF_K", "reciprocal_rank_fusion"]

DEFAULT_RRF_K = 60


def _check_weights(weights: Sequence[float] | None, n_lists: int) -> list[float]:
    if weights is None:
        return [1.0] * n_lists
    values = list(weights)
    if len(values) != n_lists:
        raise ValueError(f"RRF weights: give one weight per ranking ({n_lists}), got {len(values)}")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise ValueError(f"RRF weights must be finite numbers >= 0, got {value!r}")
    return [float(v) for v in values]


def reciprocal_rank_fusion(
    rankings: Sequence[Ranking],
    n_documents: int,
    k: int = DEFAULT_RRF_K,
    depth: int | None = None,
    weights: Sequence[float] | None = None,
) -> Ranking:
    """Fuse rankings: score(d) = sum over rankings i of weights[i] / (k + rank_i(d)).

    Documents absent from every ranking are left out, and so are those found only in
    rankings of weight 0 (a weight of 0 switches a list off: it neither scores nor breaks
    ties). Equal scores go to the better rank in any single list, then to the lower corpus
    index (see the module docstring). Each ranking lists a document at most once.
    Raises ValueError for k < 0 or weights that are not one finite number >= 0 per ranking.
    """
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k}")
    active = [(r, w) for r, w in zip(rankings, _check_weights(weights, len(rankings)), strict=True) if w > 0]
    if not active or not any(len(r) for r, _ in active):
        return Ranking(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64))
    every = np.concatenate([np.asarray(r.indices, dtype=np.int64) for r, _ in active])
    if every.min() < 0 or every.max() >= n_documents:
        raise ValueError(f"RRF: a ranking holds a corpus index outside 0..{n_documents - 1}")
    present, where = np.unique(every, return_inverse=True)
    # One row of contributions per list; sorting each column makes the sum independent of
    # the order of the lists, so equal contributions give bit-identical scores.
    contributions = np.zeros((len(active), len(present)), dtype=np.float64)
    best_rank = np.full(len(present), np.iinfo(np.int64).max, dtype=np.int64)
    start = 0
    for row, (ranking, weight) in enumerate(active):
        n = len(ranking)
        positions = where[start : start + n]
        start += n
        ranks = np.arange(1, n + 1, dtype=np.int64)
        contributions[row, positions] = weight / (k + ranks.astype(np.float64))
        # A ranking lists a document once, so its positions are distinct: no ufunc.at needed.
        best_rank[positions] = np.minimum(best_rank[positions], ranks)
    # Two terms add the same in either order (IEEE addition is commutative); three or more
    # need the sort.
    fused = (contributions if len(active) <= 2 else np.sort(contributions, axis=0)).sum(axis=0)
    order = np.lexsort((present, best_rank, -fused))
    if depth is not None:
        order = order[: max(depth, 0)]
    return Ranking(present[order], fused[order])
