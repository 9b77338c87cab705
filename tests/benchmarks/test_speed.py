"""Speed of each stage of an evaluation, on the demo set and on a synthetic corpus.

Run with:  pytest tests/benchmarks --benchmark-only
(the default test run skips them: pyproject's addopts has --benchmark-skip).
Sizes are in bench_data.py; figures and machine are in docs/performance.md.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from bench_data import DEPTH, N_DOCUMENTS, N_QUESTIONS, Workload
from pytest_benchmark.fixture import BenchmarkFixture

from retrieval.config import load_settings
from retrieval.data.analyzer import analyze_many
from retrieval.data.corpus_terms import analyze_corpus, forget_analyses
from retrieval.data.dataset import Dataset, load_dataset
from retrieval.evaluation.evaluate import evaluate
from retrieval.measures.fusion import reciprocal_rank_fusion
from retrieval.measures.metrics import metric_names, score_method
from retrieval.methods.base import Context
from retrieval.methods.bm25 import BM25Method
from retrieval.methods.support.bm25_engine import QUESTION_BATCH, RankBM25Index, SparseBM25Index, round_scores
from retrieval.methods.vector import cosine_rankings
from retrieval.report.build import build_report
from retrieval.report.sections import render_markdown
from retrieval.run.ranking import top_k

pytestmark = pytest.mark.benchmark

# rank-bm25 scores one question in tens of milliseconds at 20,000 documents: both engines
# are compared on a sample of the questions; extra_info has questions per second.
RANK_BM25_QUESTIONS = 10


def per_second(benchmark: BenchmarkFixture, count: int, unit: str) -> None:
    """Record the throughput (items per second, from the mean time) beside the timings."""
    assert benchmark.stats is not None
    benchmark.extra_info[f"{unit}/s"] = round(count / benchmark.stats.stats.mean)


# analyzer ----------------------------------------------------------------------------------


def test_analyzer_synthetic_corpus(benchmark: BenchmarkFixture, workload: Workload) -> None:
    texts = [d.content for d in workload.dataset.documents[:5000]]
    benchmark.group = "analyzer"
    # Each round analyses anew, as the first run of a process does (analyze_many keeps terms).
    result = benchmark.pedantic(analyze_many, args=(texts,), setup=forget_analyses, rounds=5)
    assert len(result) == len(texts)
    per_second(benchmark, len(texts), "documents")


def test_analyzer_synthetic_corpus_as_term_ids(benchmark: BenchmarkFixture, workload: Workload) -> None:
    """What BM25Method indexes: analyze_corpus (term ids), the same 5,000 documents."""
    texts = [d.content for d in workload.dataset.documents[:5000]]
    benchmark.group = "analyzer"
    result = benchmark.pedantic(analyze_corpus, args=(texts,), setup=forget_analyses, rounds=5)
    assert len(result) == len(texts)
    per_second(benchmark, len(texts), "documents")


def test_analyzer_demo_corpus(benchmark: BenchmarkFixture, demo: Dataset) -> None:
    texts = [d.content for d in demo.documents]
    benchmark.group = "analyzer"
    benchmark.pedantic(analyze_many, args=(texts,), setup=forget_analyses, rounds=50)
    per_second(benchmark, len(texts), "documents")


def test_analyzer_demo_corpus_again(benchmark: BenchmarkFixture, demo: Dataset) -> None:
    """The same texts analysed again in the process (bm25, then rewrite's and enrich's own
    hybrid searches; a recording's two runs): their terms are kept."""
    texts = [d.content for d in demo.documents]
    analyze_many(texts)
    benchmark.group = "analyzer"
    benchmark(analyze_many, texts)
    per_second(benchmark, len(texts), "documents")


# bm25 --------------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", [SparseBM25Index, RankBM25Index], ids=["sparse", "rank-bm25"])
def test_bm25_index_build(benchmark: BenchmarkFixture, workload: Workload, engine: type) -> None:
    assert len(workload.dataset.documents) == N_DOCUMENTS == 20_000  # as docs/performance.md
    assert len(workload.dataset.questions) == N_QUESTIONS == 200
    benchmark.group = "bm25 index build (20,000 documents)"
    index = benchmark.pedantic(engine, args=(workload.corpus_tokens,), rounds=3)
    assert index.n_documents == len(workload.dataset.documents)


def _query(index: SparseBM25Index | RankBM25Index, queries: list[list[str]]) -> int:
    """What BM25Method.rank does after indexing: batched scores, rounding, top-k at the tool's depth."""
    ranked = 0
    for start in range(0, len(queries), QUESTION_BATCH):
        scores = round_scores(index.scores(queries[start : start + QUESTION_BATCH]))
        ranked += sum(len(top_k(row, DEPTH)) for row in scores)
    return ranked


@pytest.mark.parametrize("engine", [SparseBM25Index, RankBM25Index], ids=["sparse", "rank-bm25"])
def test_bm25_query_both_engines(benchmark: BenchmarkFixture, workload: Workload, engine: type) -> None:
    index = engine(workload.corpus_tokens)
    queries = workload.query_tokens[:RANK_BM25_QUESTIONS]
    benchmark.group = f"bm25 query: {RANK_BM25_QUESTIONS} questions x 20,000 documents"
    benchmark.pedantic(_query, args=(index, queries), rounds=3)
    per_second(benchmark, len(queries), "questions")


def test_bm25_query_sparse_all_questions(benchmark: BenchmarkFixture, workload: Workload) -> None:
    index = SparseBM25Index(workload.corpus_tokens)
    queries = workload.query_tokens
    benchmark.group = "bm25 query: 200 questions x 20,000 documents"
    benchmark.pedantic(_query, args=(index, queries), rounds=5)
    per_second(benchmark, len(queries), "questions")


@pytest.mark.parametrize("engine", ["sparse", "rank-bm25"])
def test_bm25_method_demo_set(benchmark: BenchmarkFixture, demo: Dataset, engine: str) -> None:
    """The whole BM25Method.rank on the demo set: analysis, index and every question."""
    method = BM25Method(engine=engine)  # type: ignore[arg-type]
    context = Context(dataset=demo, depth=DEPTH)
    benchmark.group = "bm25 method, demo set"
    rankings = benchmark.pedantic(method.rank, args=(context,), setup=forget_analyses, rounds=30)
    assert len(rankings) == len(demo.questions)


# vector, fusion ----------------------------------------------------------------------------


def test_vector_search(benchmark: BenchmarkFixture, workload: Workload) -> None:
    context = workload.context
    assert context.question_vectors is not None and context.document_vectors is not None
    benchmark.group = "vector search"
    rankings = benchmark.pedantic(
        cosine_rankings,
        args=(context.question_vectors, context.document_vectors, DEPTH),
        rounds=5,
    )
    assert len(rankings) == len(workload.dataset.questions)
    per_second(benchmark, len(rankings), "questions")


def test_rrf_fusion(benchmark: BenchmarkFixture, workload: Workload) -> None:
    n = len(workload.dataset.documents)
    pairs = list(zip(workload.bm25, workload.vector, strict=True))

    def fuse_all() -> int:
        fused = [reciprocal_rank_fusion(pair, n, depth=DEPTH) for pair in pairs]
        return len(fused)

    benchmark.group = "rrf fusion"
    assert benchmark(fuse_all) == len(pairs)
    per_second(benchmark, len(pairs), "questions")


# metrics, rerank parsing -------------------------------------------------------------------


def test_score_method(benchmark: BenchmarkFixture, workload: Workload) -> None:
    doc_ids = workload.dataset.doc_ids
    questions = workload.dataset.questions
    pairs = zip(questions, workload.bm25, strict=True)
    ranked = {q.id: [doc_ids[i] for i in r.indices] for q, r in pairs}
    relevant = {q.id: q.relevant for q in questions}
    types = {q.id: q.type for q in questions}
    metrics = metric_names(5, extra=True)
    benchmark.group = "metrics"
    scores = benchmark(score_method, ranked, relevant, types, metrics)
    assert set(scores.overall) == set(metrics)
    per_second(benchmark, len(questions), "questions")


def test_rerank_parse_ranking(benchmark: BenchmarkFixture) -> None:
    rerank = pytest.importorskip("retrieval.methods.rerank")
    parse_ranking = rerank.parse_ranking
    rng = random.Random(0)
    # 1,000 answers over 20 candidates, as the reranker reads them: full, partial, with
    # duplicates and unknown ids.
    cases = []
    for _ in range(1000):
        candidates = [f"HEL-{rng.randrange(10_000):04d}-{i}" for i in range(20)]
        answer = [*rng.sample(candidates, rng.randint(5, 20)), "inconnu", candidates[0]]
        cases.append((json.dumps({"ranking": answer}), candidates))

    def parse_all() -> int:
        return sum(len(parse_ranking(raw, ids)) for raw, ids in cases)

    benchmark.group = "rerank parsing"
    assert benchmark(parse_all) == 20 * len(cases)
    per_second(benchmark, len(cases), "answers")


def test_full_replayed_evaluation_demo_set(benchmark: BenchmarkFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """What `python -m retrieval` does after start-up: load the demo set, replay the committed
    cassettes (corpus and question embeddings), run bm25, vector and hybrid, score and report."""
    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)
    settings = load_settings(root)

    def run() -> str:
        dataset = load_dataset(settings.dataset)
        result = evaluate(dataset, settings, mode="replay")
        report = build_report(result, dataset.documents, settings.prices)
        return render_markdown(report)

    benchmark.group = "full evaluation, demo set (replayed)"
    markdown = benchmark.pedantic(run, rounds=5, warmup_rounds=1)
    assert "| hybrid |" in markdown


def test_report_demo_set(benchmark: BenchmarkFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """The report of a replayed demo run (every method of this repository's configuration):
    tables, failures, remedies, the what-if sweeps and their token estimates."""
    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)
    settings = load_settings(root)
    dataset = load_dataset(settings.dataset)
    result = evaluate(dataset, settings, mode="replay")
    benchmark.group = "report, demo set"
    report = benchmark.pedantic(build_report, args=(result, dataset.documents, settings.prices), rounds=10)
    assert report.remedies
