"""The vector search's answer for a whole shard (retrieval.methods.vector.VectorSharding): every
document ranked for each question, built without a Ranking per question."""

from __future__ import annotations

import numpy as np

from retrieval.methods.support.shard_answers import Candidates, index_type, score_codes
from retrieval.run.ranking import SCORE_DECIMALS

__all__ = ["whole_shard_candidates"]


def whole_shard_candidates(questions: np.ndarray, documents: np.ndarray, question_batch: int) -> Candidates:
    """Every document of a shard ranked for each question, as Candidates: the one-block path of
    `cosine_rankings` (batches of `question_batch` questions, the same product and rounding), each
    row ordered whole."""
    # The one-block path of cosine_rankings (the same batches, product and rounding), then each
    # row ordered whole: top_k's order when the depth takes every document (score descending,
    # ties to the lower index, NaN last), for a batch of questions at once. A rounded cosine is
    # its integer code (shard_answers.score_codes), so the order is a plain sort of one int64
    # key per score, the code above the index; a batch whose scores have no exact code (NaN,
    # -0.0) takes a stable sort of the negated floats instead, the same order, slower.
    corpus = np.asarray(documents, dtype=np.float64)
    width = len(corpus)
    dtype = index_type(width - 1)
    bits = max(width - 1, 1).bit_length()
    columns = np.arange(width, dtype=np.int64)
    # A code that fits int32 (a cosine's is about +-10**SCORE_DECIMALS) and an index below
    # 2**bits (at most vector.DOCUMENT_BLOCK here): one key in 32 + 14 bits.
    highest = 2**31 - 1
    indices: list[np.ndarray] = []
    scores: list[np.ndarray] = []  # a batch's codes (int32), or its floats when it has none
    for start in range(0, len(questions), question_batch):
        batch = np.asarray(questions[start : start + question_batch], dtype=np.float64)
        block = np.round(batch @ corpus.T, SCORE_DECIMALS)
        codes = score_codes(block, SCORE_DECIMALS)
        if codes is None or np.abs(codes).max(initial=0) > highest:
            order = np.argsort(-block, axis=1, kind="stable")
            scores.append(np.take_along_axis(block, order, axis=1).ravel())
            indices.append(order.astype(dtype).ravel())
            continue
        keys = ((highest - codes) << bits) | columns
        keys.sort(axis=1)
        scores.append((highest - (keys >> bits)).astype(np.int32).ravel())
        indices.append((keys & ((1 << bits) - 1)).astype(dtype).ravel())
    lengths = np.full(len(questions), width, dtype=np.int64)
    if all(part.dtype == np.int32 for part in scores):
        # The shard's answer stays coded: marks and the cut read it decoded, it crosses coded.
        return Candidates(np.concatenate(indices), np.concatenate(scores), lengths, SCORE_DECIMALS)
    floats = [part / 10.0**SCORE_DECIMALS if part.dtype == np.int32 else part for part in scores]
    return Candidates(np.concatenate(indices), np.concatenate(floats), lengths)
