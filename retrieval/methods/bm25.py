"""The built-in bm25 method: BM25Plus over title + text with the analyzer of the dataset's
language (`language`, French by default; retrieval.data.analyzer), the engines and why BM25Plus:
retrieval.methods.support.bm25_engine."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

from retrieval.config import Settings
from retrieval.data.analysis_cache import analysis_digest
from retrieval.data.analyzer import DEFAULT_LANGUAGE, analyzer_for
from retrieval.data.corpus_parts import PendingAnalysis, analyze_documents, start_analysis
from retrieval.data.corpus_terms import AnalysedCorpus
from retrieval.methods.base import Context
from retrieval.methods.support.bm25_engine import ENGINES, K1, QUESTION_BATCH, B, BM25Index, Engine, Tokens
from retrieval.methods.support.sharding import ShardedSearch
from retrieval.run.ranking import Ranking

__all__ = ["ANALYSIS_INPUT", "CACHED_DOCUMENTS", "BM25Method", "factory"]

# From this many documents, the analysed corpus is kept in the project's cache folder.
CACHED_DOCUMENTS = 10_000
# The name of the analysed corpus's digest among a run's inputs (Context.inputs), when it may come
# from the cache: the baseline records it beside the cassettes' digests.
ANALYSIS_INPUT = "bm25-analysis"


class BM25Method:
    """Ranks documents by BM25Plus score of the analysed question against the analysed documents.

    `engine` picks how the score is computed: "sparse" (default, fast) or "rank-bm25"
    (the reference); both give the same rankings (see the module docstring). `k1` and `b`
    are the settings `bm25_k1` and `bm25_b`, `language` the setting `language`:
    BM25Method(k1=settings.bm25_k1, b=settings.bm25_b, language=settings.language).
    """

    name = "bm25"
    requires: tuple[str, ...] = ()
    needs_vectors = False

    def __init__(
        self,
        k1: float = K1,
        b: float = B,
        engine: Engine = "sparse",
        analysis_cache: str | Path | None = None,
        language: str = DEFAULT_LANGUAGE,
    ) -> None:
        if engine not in ENGINES:
            raise ValueError(f"unknown BM25 engine {engine!r}: use one of {', '.join(ENGINES)}")
        if not (math.isfinite(k1) and k1 >= 0):
            raise ValueError(f"BM25 k1 must be a finite number >= 0, got {k1!r}")
        if not 0 <= b <= 1:
            raise ValueError(f"BM25 b must be a number from 0 to 1, got {b!r}")
        self.k1, self.b, self.engine = k1, b, engine
        self.language = analyzer_for(language).language  # an unknown code fails here, not mid-run
        # Where a large corpus's analysis is kept between runs (retrieval.data.analysis_cache).
        self.analysis_cache = analysis_cache
        self._pending: tuple[object, PendingAnalysis] | None = None

    @property
    def config(self) -> dict[str, float]:
        """Recorded in the baseline configuration (`bm25.k1`, `bm25.b`): they change the figures."""
        return {"k1": self.k1, "b": self.b}

    def build_index(self, corpus: AnalysedCorpus | Sequence[Tokens]) -> BM25Index:
        """Index an analysed corpus (analyze_corpus, or one list of terms per document) with this
        method's engine."""
        return ENGINES[self.engine](corpus, k1=self.k1, b=self.b)

    def prepare(self, context: Context) -> Callable[[], None] | None:
        """Start analysing a large corpus in worker processes while the other methods rank
        (retrieval.data.corpus_parts); `rank` joins in. Returns what stops the workers."""
        cache = self._cache_for(context)
        pending = start_analysis(
            context.dataset.documents, cache=cache, language=self.language, expected=_expected(context, cache)
        )
        if pending is None:
            return None
        self._pending = (context.dataset.documents, pending)
        return pending.close

    def rank(self, context: Context) -> list[Ranking]:
        """One ranking per question of the documents sharing at least one analysed term with it.

        BM25Plus gives a document with no query term the same delta * idf constant as every
        other: ranking those would order them by corpus position, noise that RRF would then
        fuse and that could even put a relevant document in the top 10 by luck. They are left
        out, as a BM25 search engine returns only the documents that match.
        """
        # The index is built once per corpus, then questions are scored in batches. A large
        # corpus is analysed in several processes, into the same ids (corpus_parts), from
        # `prepare` on when the evaluator called it, and kept in the analysis cache.
        started, self._pending = self._pending, None
        pending = None
        if started is not None:
            if started[0] is context.dataset.documents:
                pending = started[1]
            else:  # prepared for another corpus: not this one's analysis
                started[1].close()
        cache = self._cache_for(context)
        corpus = analyze_documents(
            context.dataset.documents,
            pending=pending,
            cache=cache,
            language=self.language,
            expected=_expected(context, cache),
        )
        if cache is not None:  # the figures' analysis may have come from the cache: its digest is theirs
            context.inputs[ANALYSIS_INPUT] = analysis_digest(corpus)
        index = self.build_index(corpus)
        analyze = analyzer_for(self.language).analyze
        queries = [analyze(q.text) for q in context.dataset.questions]
        rankings: list[Ranking] = []
        for start in range(0, len(queries), QUESTION_BATCH):
            rankings.extend(index.rankings(queries[start : start + QUESTION_BATCH], context.depth))
        return rankings

    def _cache_for(self, context: Context) -> str | Path | None:
        # A small corpus is analysed faster than its cache entry would be written and read.
        return self.analysis_cache if len(context.dataset.documents) >= CACHED_DOCUMENTS else None

    def sharding(self) -> ShardedSearch:
        """The same scores split by corpus shard, for a cluster executor (retrieval.methods.support.sharding)."""
        from retrieval.methods.support.bm25_shards import BM25Sharding

        return BM25Sharding(self.k1, self.b, self.language)


def _expected(context: Context, cache: str | Path | None) -> str | None:
    """The digest a cached analysis must have to be used: the baseline's ("" when it records none:
    then none is used); None outside the gate (an entry is checked against its own digest only)."""
    if cache is None or context.baseline_inputs is None:
        return None
    return context.baseline_inputs.get(ANALYSIS_INPUT, "")


def factory(settings: Settings, *, replay: bool = False) -> BM25Method:
    """The built-in bm25 method (in-process: it always runs for real, in every mode)."""
    return BM25Method(
        k1=settings.bm25_k1,
        b=settings.bm25_b,
        analysis_cache=Path(settings.cache) / "bm25-analysis",
        language=settings.language,
    )
