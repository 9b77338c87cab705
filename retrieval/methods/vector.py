"""Dense retrieval: cosine similarity between unit-length question and document vectors.

Exact ties (equal cosines after rounding to SCORE_DECIMALS: duplicated documents, or
vectors equal to that precision) go to the lower document id: the corpus is sorted by id
at load time (retrieval.data.dataset), so the lower corpus index is the lower id, whatever the
order of the lines in corpus.jsonl.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from retrieval.config import Settings
from retrieval.methods.base import Context
from retrieval.methods.support import vector_kernel
from retrieval.methods.support.shard_answers import Candidates, packed
from retrieval.methods.support.sharding import Shard, ShardedSearch
from retrieval.methods.support.vector_kernel import Rescoring, ranked_candidates, scan_range
from retrieval.methods.support.vector_shards import whole_shard_candidates
from retrieval.run.ranking import SCORE_DECIMALS, Ranking, top_k

__all__ = ["VectorMethod", "cosine_rankings"]

QUESTION_BATCH = 256
# Cosines are rounded to SCORE_DECIMALS (retrieval.run.ranking) before ranking, so that two
# documents within float noise of each other tie (and go to the lower corpus index): with float64
# products, a score straddling a rounding boundary differently on two CPUs becomes vanishingly rare.


# Above this many documents the corpus is scored chunk by chunk (see _scan).
DOCUMENT_BLOCK = 16_384
# Documents scored together by one float32 product in the scan (at most DOCUMENT_BLOCK): 1,000
# questions x 512 documents (2 MiB of scores, in a core's L2 for the candidate pass): one thread,
# 1M documents, products 5.47 s and the C kernel's pass 0.18 s, against 5.64 s and 0.32 s at
# 2,048 (5.80 s of products at 256). Without the kernel, NUMPY_SCORE_CHUNK: 1,000 x 2,048 took
# 2.2-2.3 s for 500,000 documents against 2.4-2.6 s for 500 x 16,384 (1,024 and 4,096 within the noise).
SCORE_CHUNK = 512
NUMPY_SCORE_CHUNK = 2048
# Questions scored together: bounds the score chunk at 1,024 x SCORE_CHUNK float32.
BLOCKED_QUESTION_BATCH = 1024
# A batch of at least this many questions is searched on threads, one a core, BLAS held to one
# thread each: numpy (and the C kernel) releases the GIL in the products, the candidate pass, the
# partitions and the rescoring, so each core runs its own product or its single-core work, instead of
# cores idle beside the single-core work and BLAS's threads spinning between products. The corpus
# is cut into one range a core (each product then takes every question of the batch: 1,000
# questions a product ran 9 % faster than 500), and the rescoring into one part of the questions a
# core; each question's ranking depends on no other question, so the parts give the same rankings.
THREADED_QUESTIONS = 64
# The random sample of the corpus (at most DOCUMENT_BLOCK // 2 documents) whose
# ceil(ESTIMATE_SLACK x depth x sample / corpus)-th best float32 score starts each question's
# threshold (`_estimates`); the seed makes the search deterministic.
ESTIMATE_SAMPLE = 8192
ESTIMATE_SLACK = 3.0
# An estimate only where the sample should hold at least this many of the depth's best (depth x
# sample / corpus): from 6 up, the sample holds 3 times as many about once in 17,000 or less.
ESTIMATE_LEAST = 6
ESTIMATE_SEED = 0


# A range's scan: its candidates' questions, documents and float32 scores, in chunk order, then by
# question, then by document; and each question's k best candidate scores (`_scan`).
Scanned = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
# A range's final candidates: their documents by question (question q's from starts[q] to
# starts[q + 1], in document order), and the starts (`_kept`).
Kept = tuple[np.ndarray, list[int]]


def _cores() -> int:
    """The cores this process may run on."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def cosine_rankings(questions: np.ndarray, documents: np.ndarray, depth: int) -> list[Ranking]:
    """Rank every document for every question; one matrix product per batch of questions.

    Vectors are unit length, so the dot product is the cosine. The product runs in float64:
    float32 BLAS kernels differ between CPUs in their last bits, which could swap two
    near-tied documents and make a replayed gate disagree with the machine that recorded it.
    A corpus of up to DOCUMENT_BLOCK documents is copied to float64 once per call; a larger one
    (possibly memory-mapped) is read chunk by chunk, so memory does not grow with the corpus,
    and scored in float32 only to find the candidates that float64 then scores (the same
    rankings and scores: `_blocked_rankings`).
    """
    if len(documents) > DOCUMENT_BLOCK and depth > 0:
        largest = _corpus_norm(documents)
        if isinstance(documents, np.memmap):  # the same pages, without memmap's Python-level indexing
            documents = documents.view(np.ndarray)
        rankings: list[Ranking] = []
        cores = _cores()
        threaded = len(questions) >= THREADED_QUESTIONS and cores > 1
        blas = threadpool_limits(1, user_api="blas") if threaded else contextlib.nullcontext()
        with ThreadPoolExecutor(max_workers=cores) as pool, blas:
            for start in range(0, len(questions), BLOCKED_QUESTION_BATCH):
                batch = np.asarray(questions[start : start + BLOCKED_QUESTION_BATCH], dtype=np.float64)
                parts = cores if threaded and len(batch) >= THREADED_QUESTIONS else 1
                rankings.extend(_blocked_rankings(batch, documents, depth, largest, pool, parts))
        return rankings
    corpus = np.asarray(documents, dtype=np.float64)
    rankings = []
    for start in range(0, len(questions), QUESTION_BATCH):
        batch = np.asarray(questions[start : start + QUESTION_BATCH], dtype=np.float64)
        scores = np.round(batch @ corpus.T, SCORE_DECIMALS)
        rankings.extend(top_k(row, depth) for row in scores)
    return rankings


def _blocked_rankings(
    batch: np.ndarray,
    documents: np.ndarray,
    depth: int,
    largest: float,
    pool: ThreadPoolExecutor,
    parts: int,
    estimated: bool = True,
) -> list[Ranking]:
    """top_k of each question's rounded float64 cosines over the whole corpus, read by chunks.

    Products in float64 cost three times those in float32, so the chunks are scored in float32
    to find candidates, and only the candidates are scored again in float64 and rounded, as the
    one-block path scores every document. A float32 dot product of n terms is within
    `_float32_error` (n + 2 units of 2^-23, times the two norms: the classic bound for any
    order of summation, and the conversion of each side to float32) of the exact one, and so
    of the rounded float64 cosine, up to the 5e-10 of rounding (`largest` is the corpus's largest
    vector norm, `_largest_norm`). Let M be that bound and r_k the
    depth-th best rounded cosine: fewer than `depth` documents have a float32 score above
    r_k + M, so the depth-th best float32 score t is at most r_k + M, and every document of
    the final top (rounded cosine >= r_k) has a float32 score >= r_k - M >= t - 2M. A document
    is a candidate when it scores >= threshold - 2M at its chunk's time, for a threshold never
    above t: every document of the final top is one. The threshold is the larger of two lower
    bounds: the smallest of the `depth` best float32 scores merged so far in the corpus range
    (`_scan`), and the estimate from a sample (`_estimates`), which is checked afterwards: when
    the depth-th best candidate's score t (then t itself, the candidates holding every document
    that scores >= t) is below a question's estimate, the estimate may have been above t, and
    that question is searched again without one. The final candidates, those >= t - 2M, are then
    the same whatever the thresholds were, in the same order, scored by the same float64 products.
    """
    n_questions, n = len(batch), len(documents)
    k = min(depth, n)
    questions32 = batch.astype(np.float32)
    margin = 2 * _float32_error(batch, largest)
    split = [part for part in np.array_split(np.arange(n_questions), parts) if len(part)]
    if estimated:
        estimate = np.concatenate(list(pool.map(lambda part: _estimates(questions32[part], documents, k), split)))
    else:
        estimate = np.full(n_questions, -np.inf, dtype=np.float32)
    floor = _below(estimate, margin)
    width = min(SCORE_CHUNK if vector_kernel.KERNEL is not None else NUMPY_SCORE_CHUNK, DOCUMENT_BLOCK)
    edges = [min(n, -(-n * i // parts // width) * width) for i in range(parts + 1)]
    ranges = [(lo, hi) for lo, hi in itertools.pairwise(edges) if hi > lo]
    scans = list(pool.map(lambda r: _scan(questions32, documents, r, width, k, margin, floor), ranges))
    # No serial pass over every candidate: each core merges its part of the questions' best into
    # the depth-th best t, then filters (and scores in float64) the candidates of the range it
    # scanned, then ranks its part of the questions.
    kth = np.concatenate(list(pool.map(lambda part: _kth([scan[3][part] for scan in scans], k), split)))
    threshold = _below(kth, margin)
    if vector_kernel.in_place(documents):
        rankings = ranked_candidates(scans, threshold, batch, documents, k, pool, split)
    else:
        kept = list(pool.map(lambda scan: _kept(scan, threshold, len(batch)), scans))
        rankings = [ranking for part in pool.map(lambda part: _ranked(batch, documents, kept, part, k), split)
                    for ranking in part]  # fmt: skip
    missed = np.flatnonzero(~(kth >= estimate))  # NaN compares false: searched again too
    if len(missed):
        again = _blocked_rankings(batch[missed], documents, depth, largest, pool, parts, estimated=False)
        for question, ranking in zip(missed.tolist(), again, strict=True):
            rankings[question] = ranking
    return rankings


def _estimates(questions32: np.ndarray, documents: np.ndarray, k: int) -> np.ndarray:
    """Per question, a float32 score that at least k documents reach, most likely: the r-th best
    of a seeded random sample of the corpus, r = ceil(ESTIMATE_SLACK x k x sample / corpus), which
    at least k documents reach unless the sample holds r of the fewer than k that score above it
    (about 2e-6 for a sample of 8,192 out of a million at a depth of 1,000); -inf (no estimate)
    for a corpus below eight samples, or where the sample should hold fewer than ESTIMATE_LEAST
    of the k best. `_blocked_rankings` checks it."""
    n = len(documents)
    size = max(1, min(ESTIMATE_SAMPLE, DOCUMENT_BLOCK // 2))
    rank = math.ceil(ESTIMATE_SLACK * k * size / n)
    none = np.full(len(questions32), -np.inf, dtype=np.float32)
    if n < 8 * size or k * size < ESTIMATE_LEAST * n or rank > size:
        return none
    picks = np.sort(np.random.default_rng(ESTIMATE_SEED).choice(n, size, replace=False))
    scores = questions32 @ np.asarray(documents[picks], dtype=np.float32).T
    # The rank-th largest as the (size - rank)-th smallest: no negated copies of the scores.
    estimate = np.partition(scores, size - rank, axis=1)[:, size - rank]
    return np.where(np.isnan(estimate), none, estimate)


def _scan(
    questions32: np.ndarray,
    documents: np.ndarray,
    bounds: tuple[int, int],
    width: int,
    k: int,
    margin: np.ndarray,
    floor: np.ndarray,
) -> Scanned:
    """The candidates (question, document, float32 score; by chunk, then question, then document)
    of the documents in `bounds`, scored `width` at a time, those that score >= their chunk's threshold
    (`_blocked_rankings`), and each question's k best candidate scores. The
    range's best are merged (`_merged_best`) only once some question has as many new candidates as
    k, and after the last chunk: the threshold may lag behind them (it stays a lower bound), a
    partition every few chunks instead of one per chunk. Where the C kernel was built, it scans
    the range instead (`scan_range`: the same candidates' superset, a threshold raised sooner)."""
    n_questions = len(questions32)
    lo, hi = bounds
    # The kernel's candidates are int32 rows and columns: a corpus beyond them takes numpy's path.
    if vector_kernel.KERNEL is not None and hi < 2**31 and n_questions < 2**31:
        return scan_range(questions32, documents, bounds, width, k, margin, floor)
    best = np.full((n_questions, k), -np.inf, dtype=np.float32)
    threshold = floor[:, None]
    # One score buffer for every full chunk: a fresh array per chunk costs its page faults each time.
    width = min(width, hi - lo)
    scores_buffer = np.empty((n_questions, width), dtype=np.float32)
    mask_buffer = np.empty((n_questions, width), dtype=bool)
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    values: list[np.ndarray] = []
    pending: list[tuple[np.ndarray, np.ndarray]] = []  # candidates not yet merged into `best`
    pending_counts = np.zeros(n_questions, dtype=np.int64)
    for start in range(lo, hi, width):
        chunk = np.asarray(documents[start : min(start + width, hi)], dtype=np.float32)
        full = len(chunk) == width
        scores = scores_buffer if full else np.empty((n_questions, len(chunk)), dtype=np.float32)
        vector_kernel.products(questions32, chunk, scores)
        filled = start == lo and scores.shape[1] >= k
        if filled:
            # The range's first chunk fills each question's best at once.
            best = -np.partition(-scores, k - 1, axis=1)[:, :k]
            threshold = np.maximum(floor, _below(best.min(axis=1), margin))[:, None]
        mask = mask_buffer if full else np.empty(scores.shape, dtype=bool)
        np.greater_equal(scores, threshold, out=mask)
        # flatnonzero then divmod: the same (row, col) pairs in the same order as np.nonzero,
        # which costs three to four times more on a 2-D mask.
        flat = np.flatnonzero(mask)
        row, col = np.divmod(flat, scores.shape[1])
        found = scores.reshape(-1)[flat]
        rows.append(row)
        cols.append(col + start)
        values.append(found)
        if filled:
            continue
        pending.append((row, found))
        pending_counts += np.bincount(row, minlength=n_questions)
        if pending_counts.max() >= k or start + width >= hi:
            best = _merged_best(best, pending, pending_counts, k)
            threshold = np.maximum(floor, _below(best.min(axis=1), margin))[:, None]
            pending, pending_counts = [], np.zeros(n_questions, dtype=np.int64)
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(values), best


def _kth(bests: list[np.ndarray], k: int) -> np.ndarray:
    """Each question's depth-th best float32 score t over every range's k best."""
    if len(bests) == 1:
        return bests[0].min(axis=1)
    return -np.partition(-np.concatenate(bests, axis=1), k - 1, axis=1)[:, k - 1]


def _kept(scan: Scanned, threshold: np.ndarray, n_questions: int) -> Kept:
    """The range's candidates that score >= their question's `threshold` (t - 2M), by question,
    then document. Chunks come in document order and each chunk's pairs by question, then
    document: a stable sort by question (a radix sort on 16-bit rows) orders them by (question,
    document). (Where the C kernel reads the corpus in place, `ranked_candidates` does this.)"""
    row, col, found, _ = scan
    keep = found >= threshold[row]
    row, col = row[keep], col[keep]
    row = row.astype(np.int16 if n_questions < 2**15 else np.int64)
    order = np.argsort(row, kind="stable")
    starts = np.concatenate([[0], np.cumsum(np.bincount(row, minlength=n_questions))]).tolist()
    return col[order], starts


def _ranked(batch: np.ndarray, documents: np.ndarray, kept: list[Kept], part: np.ndarray, k: int) -> list[Ranking]:
    """The rankings of the questions in `part`: their candidates of every range (`_kept`), in
    document order, their float64 scores (numpy's) rounded, ranked by top_k (the tie rule)."""
    rescore = Rescoring(batch, documents)
    rankings: list[Ranking] = []
    for question in part.tolist():
        pieces = [col[starts[question] : starts[question + 1]] for col, starts in kept]
        candidates = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
        best_of = top_k(np.round(rescore.one(candidates, question), SCORE_DECIMALS), k)
        rankings.append(Ranking(candidates[best_of.indices], best_of.scores))
    return rankings


def _merged_best(
    best: np.ndarray, pending: list[tuple[np.ndarray, np.ndarray]], counts: np.ndarray, k: int
) -> np.ndarray:
    """Each question's k best of `best` and of the pending (row, value) pairs, whose rows come in
    ascending order within each pair: the new values, padded with -inf to a rectangle, join best."""
    padded = np.full((len(best), int(counts.max())), -np.inf, dtype=np.float32)
    filled = np.zeros(len(best), dtype=np.int64)
    for row, found in pending:
        here = np.bincount(row, minlength=len(best))
        offsets = np.arange(len(row)) - np.repeat(np.cumsum(here) - here, here) + filled[row]
        padded[row, offsets] = found
        filled += here
    merged = np.concatenate([best, padded], axis=1)
    return -np.partition(-merged, k - 1, axis=1)[:, :k]


# The largest norm of each read-only corpus searched (a vector store's memory map), by the array's
# id while it lives: such an array cannot change, and a run searches it once per method that reads
# it (vector, hybrid, rerank...), each time a full pass over the corpus otherwise.
_NORMS: dict[int, tuple[weakref.ref[np.ndarray], float]] = {}


def _corpus_norm(documents: np.ndarray) -> float:
    """_largest_norm(documents), computed once per array over a read-only buffer (a memory map
    opened for reading: no array over it can be written); per call for any other array."""
    base: object = documents
    while isinstance(base, np.ndarray):  # numpy lets no array over a read-only buffer be written
        base = base.base
    try:
        with memoryview(base) as view:  # type: ignore[arg-type]
            readonly = view.readonly
    except TypeError:  # no buffer under it: an array that owns its data may be made writable again
        readonly = False
    if not readonly:
        return _largest_norm(documents)
    key = id(documents)
    kept = _NORMS.get(key)
    if kept is not None and kept[0]() is documents:
        return kept[1]
    largest = _largest_norm(documents)
    _NORMS[key] = (weakref.ref(documents, lambda _, key=key: _NORMS.pop(key, None)), largest)  # type: ignore[misc]
    return largest


def _largest_norm(documents: np.ndarray) -> float:
    """An upper bound on the largest vector norm of a corpus (possibly memory-mapped), read block by
    block in float32 (a float64 copy of each block cost a tenth of the search): squared norms
    summed in float32 are within (n + 2) units of 2^-24 of the exact ones, so that much is added."""
    largest = 0.0
    for start in range(0, len(documents), DOCUMENT_BLOCK):
        block = np.asarray(documents[start : start + DOCUMENT_BLOCK], dtype=np.float32)
        norms = np.einsum("ij,ij->i", block, block)
        if len(norms):
            largest = max(largest, float(np.nanmax(norms, initial=0.0)))
    return math.sqrt(largest * (1 + (documents.shape[1] + 2) * 2.0**-23))


def _float32_error(questions: np.ndarray, largest: float) -> np.ndarray:
    """Per question, a bound on |float32 dot product - rounded float64 cosine| against documents
    of norm at most `largest`: (n + 2) x 2^-23 x |q| x largest for n dimensions, plus the
    rounding to SCORE_DECIMALS."""
    unit = (questions.shape[1] + 2) * 2.0**-23
    return unit * np.linalg.norm(questions, axis=1) * largest + 10.0**-SCORE_DECIMALS


def _below(values: np.ndarray, margin: np.ndarray) -> np.ndarray:
    """values - margin as float32, never above the float64 difference (compared with float32
    scores without a float64 copy of the block)."""
    exact = values.astype(np.float64) - margin
    rounded = exact.astype(np.float32)
    return np.where(rounded > exact, np.nextafter(rounded, np.float32(-np.inf)), rounded)


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
        """The same search split by corpus shard, for a cluster executor (retrieval.methods.support.sharding)."""
        return VectorSharding()


def factory(settings: Settings, *, replay: bool = False) -> VectorMethod:
    """The built-in vector method over the profile's embeddings."""
    return VectorMethod(cost_model=settings.profile.embeddings.model or None)


class VectorSharding:
    """The vector search split by corpus shard: no corpus statistics, a shard needs only its
    vectors and the question vectors, and ranks them with `cosine_rankings` (same float64 product,
    same rounding, same tie rule). A product over another shape may round a cosine's last bit
    differently: retrieval.executors.ray_cluster counts the pairs whose order depends on it."""

    # No corpus statistics: a shard is scored in the step that prepares it (sharding.ShardedSearch).
    needs_statistics = False

    def queries(self, context: Any) -> np.ndarray:
        if context.question_vectors is None or context.document_vectors is None:
            raise RuntimeError("vector method run without embeddings: the evaluator must embed first")
        return np.asarray(context.question_vectors)

    def documents(self, context: Any, shard: Shard) -> np.ndarray:
        return np.asarray(context.document_vectors[shard.start : shard.stop])

    def prepare(self, documents: np.ndarray, queries: np.ndarray) -> np.ndarray:
        return documents

    def summarize(self, prepared: np.ndarray, queries: np.ndarray) -> None:
        return None

    def combine(self, summaries: Sequence[None]) -> None:
        return None

    def score(self, prepared: np.ndarray, queries: np.ndarray, statistics: None, depth: int) -> list[Ranking]:
        return cosine_rankings(queries, prepared, depth)

    def candidates(self, prepared: np.ndarray, queries: np.ndarray, statistics: None, depth: int) -> Candidates:
        """`packed(score(...))`, the same arrays, built without a Ranking per question when the
        depth takes the whole shard (a cluster's shards at a run's usual depth of 1,000 over a
        corpus of a few thousand documents): one stable sort per batch of questions instead of a
        `top_k` per question."""
        if len(prepared) > DOCUMENT_BLOCK or depth < len(prepared) or not len(queries):
            return packed(self.score(prepared, queries, statistics, depth))
        return whole_shard_candidates(queries, prepared, QUESTION_BATCH)
