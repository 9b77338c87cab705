"""Dense retrieval: cosine similarity between unit-length question and document vectors.

Exact ties (equal cosines after rounding to SCORE_DECIMALS: duplicated documents, or
vectors equal to that precision) go to the lower document id: the corpus is sorted by id
at load time (retrieval.dataset), so the lower corpus index is the lower id, whatever the
order of the lines in corpus.jsonl.
"""

from __future__ import annotations

import numpy as np

from retrieval.config import Settings
from retrieval.methods.base import Context
from retrieval.ranking import Ranking, top_k
from retrieval.sharding import ShardedSearch

__all__ = ["VectorMethod", "cosine_rankings"]

QUESTION_BATCH = 256
# Cosines are rounded to this many decimals before ranking, so that two documents within
# float noise of each other tie (and go to the lower corpus index): with float64 products,
# a score straddling a rounding boundary differently on two CPUs becomes vanishingly rare.
SCORE_DECIMALS = 9


def cosine_rankings(questions: np.ndarray, documents: np.ndarray, depth: int) -> list[Ranking]:
    """Rank every document for every question; one matrix product per batch of questions.

    Vectors are unit length, so the dot product is the cosine. The product runs in float64:
    float32 BLAS kernels differ between CPUs in their last bits, which could swap two
    near-tied documents and make a replayed gate disagree with the machine that recorded it.
    One float64 copy of the corpus is made per call, none per question; batching bounds the
    score matrix at QUESTION_BATCH x n_documents.
    """
    corpus = np.asarray(documents, dtype=np.float64)
    rankings: list[Ranking] = []
    for start in range(0, len(questions), QUESTION_BATCH):
        batch = np.asarray(questions[start : start + QUESTION_BATCH], dtype=np.float64)
        scores = np.round(batch @ corpus.T, SCORE_DECIMALS)
        rankings.extend(top_k(row, depth) for row in scores)
    return rankings


class VectorMethod:
    """Ranks the corpus by cosine similarity to the question embedding."""

    name = "vector"
    requires: tuple[str, ...] = ()
    needs_vectors = True

    def __init__(self, cost_model: str | None = None) -> None:
        # Its calls are the shared question embeddings, priced as the embedding model.
        self.cost_model = cost_model

    def rank(self, context: Context) -> list[Ranking]:
        """The whole corpus ranked by cosine for each question, from the context's shared vectors."""
        if context.question_vectors is None or context.document_vectors is None:
            raise RuntimeError("vector method run without embeddings: the evaluator must embed first")
        return cosine_rankings(context.question_vectors, context.document_vectors, context.depth)

    def sharding(self) -> ShardedSearch:
        """The same search split by corpus shard, for a cluster executor (retrieval.sharding)."""
        from retrieval.vector_shards import VectorSharding

        return VectorSharding()


def factory(settings: Settings, *, replay: bool = False) -> VectorMethod:
    """The built-in vector method over the profile's embeddings."""
    return VectorMethod(cost_model=settings.profile.embeddings.model or None)
