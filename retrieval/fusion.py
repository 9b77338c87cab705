"""Reciprocal rank fusion."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retrieval.ranking import Ranking, top_k

__all__ = ["DEFAULT_RRF_K", "reciprocal_rank_fusion"]

DEFAULT_RRF_K = 60


def reciprocal_rank_fusion(
    rankings: Sequence[Ranking], n_documents: int, k: int = DEFAULT_RRF_K, depth: int | None = None
) -> Ranking:
    """Fuse rankings: score(d) = sum over rankings of 1 / (k + rank(d)).

    Documents absent from every ranking score 0 and are left out. Equal scores (a
    document 1st in one list and 3rd in the other against the reverse) are broken by
    corpus order, so the fused ranking never depends on set or dict iteration order.
    """
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k}")
    fused = np.zeros(n_documents, dtype=np.float64)
    seen = np.zeros(n_documents, dtype=bool)
    for ranking in rankings:
        ranks = np.arange(1, len(ranking.indices) + 1, dtype=np.float64)
        np.add.at(fused, ranking.indices, 1.0 / (k + ranks))
        seen[ranking.indices] = True
    present = np.flatnonzero(seen)
    best = top_k(fused[present], depth)
    return Ranking(present[best.indices], best.scores)
