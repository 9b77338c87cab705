"""Dense retrieval: cosine similarity between unit-length question and document vectors."""

from __future__ import annotations

import numpy as np

from retrieval.methods.base import Context
from retrieval.ranking import Ranking, top_k

__all__ = ["VectorMethod", "cosine_rankings"]

QUESTION_BATCH = 256


def cosine_rankings(questions: np.ndarray, documents: np.ndarray, depth: int) -> list[Ranking]:
    """Rank every document for every question; one matrix product per batch of questions.

    Vectors are unit length, so the dot product is the cosine. Batching bounds the
    score matrix at QUESTION_BATCH x n_documents floats instead of questions x documents.
    """
    rankings: list[Ranking] = []
    for start in range(0, len(questions), QUESTION_BATCH):
        scores = questions[start : start + QUESTION_BATCH] @ documents.T
        rankings.extend(top_k(row, depth) for row in np.asarray(scores, dtype=np.float32))
    return rankings


class VectorMethod:
    """Ranks the corpus by cosine similarity to the question embedding."""

    name = "vector"
    requires: tuple[str, ...] = ()
    needs_vectors = True

    def rank(self, context: Context) -> list[Ranking]:
        if context.question_vectors is None or context.document_vectors is None:
            raise RuntimeError("vector method run without embeddings: the evaluator must embed first")
        return cosine_rankings(context.question_vectors, context.document_vectors, context.depth)
