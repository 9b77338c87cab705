"""The executor setting and the sharded search without Ray: the shards' merge must give the
single-process rankings exactly (retrieval.methods.support: sharding, bm25_shards; retrieval.methods.vector)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from generated_corpus import fixture_vectors, generated_dataset

from retrieval.config import ConfigError, load_settings
from retrieval.executors.executor import LocalExecutor, open_executor
from retrieval.methods.base import Context
from retrieval.methods.bm25 import BM25Method
from retrieval.methods.hybrid import HybridMethod
from retrieval.methods.support.shard_answers import (
    Marks,
    agreed_thresholds,
    coded,
    cut,
    mark_step,
    marks,
    merge,
    packed,
    ranked_rows,
    score_codes,
    worth_cutting,
)
from retrieval.methods.support.sharding import Shard, run_in_process, scored, shard_bounds, sharding_of
from retrieval.methods.vector import VectorMethod, VectorSharding, cosine_rankings
from retrieval.run.ranking import Ranking, top_k, top_k_among

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def context() -> Context:
    dataset = generated_dataset(3000, 120)
    context = Context(dataset=dataset, depth=1000)
    context.document_vectors = fixture_vectors([d.content for d in dataset.documents])
    context.question_vectors = fixture_vectors([q.text for q in dataset.questions])
    return context


@pytest.fixture(scope="module")
def whole_rankings() -> dict[int, list[Ranking]]:
    """Each method's single-process rankings of `context`, ranked once for its three shard counts."""
    return {}


def _same(a: list[Ranking], b: list[Ranking]) -> bool:
    return len(a) == len(b) and all(
        np.array_equal(x.indices, y.indices) and np.array_equal(x.scores, y.scores) and x.scores.dtype == y.scores.dtype
        for x, y in zip(a, b, strict=True)
    )


@pytest.mark.parametrize("n_shards", [1, 2, 7])
@pytest.mark.parametrize(
    "method", [BM25Method(), BM25Method(k1=0.9, b=0.4), VectorMethod()], ids=["bm25", "bm25-k1-0.9-b-0.4", "vector"]
)
def test_sharded_search_gives_the_single_process_rankings(
    context: Context, whole_rankings: dict[int, list[Ranking]], method: object, n_shards: int
) -> None:
    search = sharding_of(method)
    assert search is not None
    if id(method) not in whole_rankings:  # one method object per parameter, shared by its shard counts
        whole_rankings[id(method)] = method.rank(context)  # type: ignore[attr-defined]
    whole = whole_rankings[id(method)]
    sharded = run_in_process(search, context, shard_bounds(len(context.dataset.documents), n_shards))
    # Bit-identical scores, the same documents in the same order, to the full depth.
    assert _same(sharded, whole)


def test_the_generated_corpus_has_ties_across_shards(context: Context) -> None:
    # What makes the test above able to fail on the tie rule: equal BM25 scores in the top 10
    # whose documents sit in different shards of the 7-shard split.
    rankings = BM25Method().rank(context)
    bounds = shard_bounds(len(context.dataset.documents), 7)
    shard_of = np.searchsorted([s.stop for s in bounds], np.arange(len(context.dataset.documents)), side="right")
    crossing = 0
    for ranking in rankings:
        top = ranking.scores[:10]
        for score in np.unique(top[np.r_[top[1:] == top[:-1], False]]):
            crossing += len(set(shard_of[ranking.indices[:10][top == score]])) > 1
    assert crossing > 0


def test_merge_breaks_ties_on_the_lower_corpus_index_across_shards() -> None:
    shards = [Shard(0, 0, 10), Shard(1, 10, 20)]
    first = [Ranking(np.array([7, 2]), np.array([0.5, 0.25]))]
    second = [Ranking(np.array([0, 3]), np.array([0.5, 0.5]))]
    merged = merge(shards, [packed(first), packed(second)], depth=3)[0]
    assert merged.indices.tolist() == [7, 10, 13]
    assert merged.scores.tolist() == [0.5, 0.5, 0.5]


@pytest.mark.parametrize(
    ("largest", "dtype"), [(65_535, np.uint16), (65_536, np.uint32), (2**32, np.uint64)], ids=["2", "4", "8"]
)
def test_a_shard_sends_its_indices_in_the_narrowest_type_and_the_merge_offsets_them_in_int64(
    largest: int, dtype: type
) -> None:
    # The shard's last document (local index `largest`) and its first, the shard placed after
    # 70,000 documents: in the shard's own type the offset would wrap or overflow.
    start = 70_000
    answer = packed([Ranking(np.array([largest, 0]), np.array([0.75, 0.5]))])
    assert answer.indices.dtype == dtype
    merged = merge([Shard(0, start, start + largest + 1)], [answer], depth=2)[0]
    assert merged.indices.dtype == np.int64
    assert merged.indices.tolist() == [start + largest, start]


def test_methods_without_a_sharded_search_are_not_sharded(context: Context) -> None:
    hybrid = HybridMethod(("bm25", "vector"), 60)
    assert sharding_of(hybrid) is None
    with open_executor("local") as executor:
        assert isinstance(executor, LocalExecutor)


def test_executor_setting_reads_the_project_file_and_refuses_others(tmp_path: Path) -> None:
    (tmp_path / "retrieval.toml").write_text('executor = "ray"\n', encoding="utf-8")
    assert load_settings(tmp_path, environ={}).executor == "ray"
    assert load_settings(tmp_path, {"executor": "local"}, environ={}).executor == "local"
    (tmp_path / "retrieval.toml").write_text('executor = "spark"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"toml, line 1: executor must be one of local, ray, got 'spark'\.$"):
        load_settings(tmp_path, environ={})
    # The executor changes where the search runs, not the figures: never in the baseline's configuration.
    assert "executor" not in load_settings(tmp_path, {"executor": "ray"}, environ={}).describe()


def test_executor_ray_without_ray_installed_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` meets where Ray is not installed
    monkeypatch.delitem(sys.modules, "retrieval.executors.ray_cluster", raising=False)
    with pytest.raises(ConfigError, match=r"^executor = \"ray\" needs Ray .*pip install 'retrieval-regression\[ray\]'"):
        open_executor("ray").__enter__()


def test_an_import_error_that_is_not_ray_missing_is_not_said_to_be(monkeypatch: pytest.MonkeyPatch) -> None:
    # A module of this package that fails to import is a bug to show, not "install Ray".
    pytest.importorskip("ray", reason="Ray is not installed here: pip install 'retrieval-regression[ray]'")
    monkeypatch.setitem(sys.modules, "retrieval.executors.ray_connection", None)
    monkeypatch.delitem(sys.modules, "retrieval.executors.ray_cluster", raising=False)
    with pytest.raises(ImportError) as caught:
        open_executor("ray").__enter__()
    assert not isinstance(caught.value, ConfigError)
    assert caught.value.name == "retrieval.executors.ray_connection"


@pytest.mark.slow
def test_a_default_evaluation_never_imports_ray() -> None:
    script = textwrap.dedent(
        """
        import sys
        from demo_fixture import demo_dataset, demo_settings
        from retrieval.evaluation.evaluate import evaluate
        run = evaluate(demo_dataset(), demo_settings())
        assert run.results, "the demo evaluated nothing"
        print(sorted(m for m in sys.modules if m == "ray" or m.startswith("ray.")))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=HERE, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_a_wrong_executor_flag_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from retrieval.cli import main

    assert main(["--dataset", str(HERE / "fixtures" / "fixture_native"), "--executor", "spark"]) == 2
    assert capsys.readouterr().err == "error: --executor must be one of local, ray, got 'spark'.\n"


def test_embedding_workers_is_read_and_must_be_at_least_1(tmp_path: Path) -> None:
    # How many calls at once the cluster sends to the embedding provider (executor = "ray").
    path = tmp_path / "retrieval.toml"
    path.write_text("[profiles.local.embeddings]\nworkers = 2\n", encoding="utf-8")
    assert load_settings(tmp_path, environ={}).profile.embeddings.workers == 2
    path.write_text("[profiles.local]\nembedding_workers = 0\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, environ={})
    assert str(caught.value) == f"{path}, line 2: profile 'local': embedding_workers must be at least 1, got 0."


class TiedScores:
    """FIXTURE: a sharded search over a given score matrix (questions x documents) whose scores
    take few values, so that ties straddle the shards and the agreed thresholds."""

    def __init__(self, scores: np.ndarray) -> None:
        self.matrix = scores

    def queries(self, context: Context) -> np.ndarray:
        return self.matrix

    def documents(self, context: Context, shard: Shard) -> np.ndarray:
        return self.matrix[:, shard.start : shard.stop]

    def prepare(self, documents: np.ndarray, queries: np.ndarray) -> np.ndarray:
        return documents

    def summarize(self, prepared: np.ndarray, queries: np.ndarray) -> None:
        return None

    def combine(self, summaries: object) -> None:
        return None

    def score(self, prepared: np.ndarray, queries: np.ndarray, statistics: None, depth: int) -> list[Ranking]:
        return [top_k(row, depth) for row in prepared]


@pytest.mark.parametrize("seed", range(6))
def test_the_cut_and_merge_give_the_whole_ranking_with_ties_at_the_threshold(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_documents = int(rng.integers(1, 400))
    scores = rng.integers(0, 6, size=(40, n_documents)).astype(np.float64) / 4
    scores[:5] = 1.0  # every document tied
    dataset = generated_dataset(n_documents, 40)
    for depth in (1, 7, int(rng.integers(1, n_documents + 20)), n_documents + 3):
        context = Context(dataset=dataset, depth=depth)
        whole = [top_k(row, depth) for row in scores]
        for n_shards in (1, 2, 3, 7):
            sharded = run_in_process(TiedScores(scores), context, shard_bounds(n_documents, n_shards))
            assert _same(sharded, whole), (n_documents, depth, n_shards)


def test_only_the_candidates_above_the_agreed_thresholds_cross(context: Context) -> None:
    # Cosines of the fixture vectors: no ties. Whole, 7 shards would send 7 x depth candidates a question.
    search, depth = VectorMethod().sharding(), 100
    bounds = shard_bounds(len(context.dataset.documents), 7)
    queries = search.queries(context)
    answers = [packed(search.score(search.documents(context, s), queries, None, depth)) for s in bounds]
    assert all(answer.lengths.tolist() == [depth] * len(queries) for answer in answers)
    step = mark_step(depth, len(bounds))
    crossing = [cut(a, agreed_thresholds([marks(a, step) for a in answers], depth)) for a in answers]
    sent = np.sum([c.lengths for c in crossing], axis=0)
    assert step == 1 and sent.min() >= depth and sent.max() <= 107  # of 700: one step per shard at most
    context = Context(
        dataset=context.dataset,
        depth=depth,
        question_vectors=context.question_vectors,
        document_vectors=context.document_vectors,
    )
    assert _same(merge(bounds, crossing, depth), VectorMethod().rank(context))


def test_score_codes_give_back_each_score_bit_for_bit_or_nothing() -> None:
    rng = np.random.default_rng(3)
    rounded = np.round(rng.uniform(-1, 1, 50_000), 9)
    codes = score_codes(rounded)
    assert codes is not None and codes.dtype == np.int64
    assert np.array_equal((codes / 1e9).view(np.int64), rounded.view(np.int64))
    # Not a quotient of 10**9, -0.0 (its code 0 comes back +0.0), NaN, beyond float64's exact integers.
    for value in (0.1234567891234, -0.0, np.nan, 1e7):
        assert score_codes(np.array([0.5, value])) is None, value


@pytest.mark.parametrize(("scale", "dtype"), [(1.0, np.int32), (40.0, np.int64)], ids=["cosines", "bm25-sized"])
def test_coded_answers_cross_as_integers_and_merge_as_their_floats(scale: float, dtype: type) -> None:
    # Scores with ties inside and across three shards, some questions empty on a shard.
    rng = np.random.default_rng(5)
    shards = shard_bounds(90, 3)
    answers = []
    for shard in shards:
        rankings = []
        for _ in range(20):
            size = int(rng.integers(0, shard.stop - shard.start))
            scores = np.round(rng.integers(0, 8, size) / 7 * scale, 9)
            rankings.append(top_k(np.pad(scores, (0, shard.stop - shard.start - size), constant_values=-1.0), size))
        answers.append(packed(rankings))
    crossing = [coded(answer) for answer in answers]
    assert all(c.decimals == 9 and c.scores.dtype == dtype for c in crossing)
    assert all(
        np.array_equal(c.values.view(np.int64), a.scores.view(np.int64)) for c, a in zip(crossing, answers, strict=True)
    )
    mixed = [crossing[0], answers[1], crossing[2]]  # a shard whose scores had no exact code
    for depth in (1, 5, 200):
        assert _same(merge(shards, crossing, depth), merge(shards, answers, depth))
        assert _same(merge(shards, mixed, depth), merge(shards, answers, depth))
    assert coded(packed([Ranking(np.array([0]), np.array([-0.0]))])).decimals is None  # sent as it is


def test_a_whole_shard_of_vectors_is_answered_as_its_packed_rankings() -> None:
    rng = np.random.default_rng(7)
    documents = rng.standard_normal((300, 16)).astype(np.float32)
    documents /= np.linalg.norm(documents, axis=1)[:, None]
    documents[10:20] = documents[3]  # exact ties, to the lower index
    questions = np.vstack([documents[:40], rng.standard_normal((300, 16)).astype(np.float32)])
    questions /= np.linalg.norm(questions, axis=1)[:, None]
    search = VectorMethod().sharding()
    for depth in (300, 1000):
        answer = search.candidates(documents, questions, None, depth)  # type: ignore[attr-defined]
        expected = packed(cosine_rankings(questions, documents, depth))
        assert answer.decimals == 9 and answer.scores.dtype == np.int32 and answer.indices.dtype == np.uint16
        assert np.array_equal(answer.indices, expected.indices) and np.array_equal(answer.lengths, expected.lengths)
        assert np.array_equal(answer.values.view(np.int64), expected.scores.view(np.int64))
    with_nan = documents.copy()
    with_nan[5] = np.nan  # no code for NaN: the floats, NaN last, as top_k puts it
    answer = search.candidates(with_nan, questions, None, 1000)  # type: ignore[attr-defined]
    expected = packed(cosine_rankings(questions, with_nan, 1000))
    assert answer.decimals is None
    assert np.array_equal(answer.indices, expected.indices)
    assert np.array_equal(answer.scores, expected.scores, equal_nan=True)
    shallow = search.candidates(documents, questions, None, 10)  # type: ignore[attr-defined]
    assert shallow.decimals is None and shallow.lengths.tolist() == [10] * len(questions)


def test_a_cut_round_is_worth_it_only_above_twice_the_depth() -> None:
    def held(counts: list[int]) -> Marks:
        return Marks(np.zeros((1, 1)), np.array([[c] for c in counts]).reshape(1, -1))

    assert not worth_cutting([held([759]), held([759])], 1000)
    assert not worth_cutting([held([1000]), held([1000])], 1000)
    assert worth_cutting([held([1000]), held([1001])], 1000)


def test_ranked_rows_order_each_row_as_top_k_among_or_decline() -> None:
    rng = np.random.default_rng(11)
    lengths = rng.integers(0, 30, 50)
    found = np.concatenate([rng.permutation(60)[:n] for n in lengths])  # any order within a row
    scores = np.round(rng.integers(0, 5, int(lengths.sum())) / 3 * 20, 9)  # ties, bm25-sized
    ranked = ranked_rows(lengths, found, scores)
    assert ranked is not None and ranked.decimals == 9 and ranked.indices.dtype == np.uint16
    ends = np.cumsum(lengths)
    expected = packed([top_k_among(scores[e - n : e], found[e - n : e], n) for n, e in zip(lengths, ends, strict=True)])
    assert np.array_equal(ranked.indices, expected.indices) and np.array_equal(ranked.lengths, expected.lengths)
    assert np.array_equal(ranked.values.view(np.int64), expected.scores.view(np.int64))
    assert ranked_rows(lengths, found, scores + 1e-12) is None  # not rounded: no codes


def test_a_bm25_shard_answers_as_its_packed_rankings_at_every_depth(context: Context) -> None:
    search = BM25Method().sharding()
    shard = shard_bounds(len(context.dataset.documents), 7)[2]
    queries = search.queries(context)
    prepared = search.prepare(search.documents(context, shard), queries)
    statistics = search.combine([search.summarize(prepared, queries)])
    for depth in (3, 1000):  # rows longer than the depth ranked one by one; whole rows by keys
        answer = search.candidates(prepared, queries, statistics, depth)  # type: ignore[attr-defined]
        expected = packed(search.score(prepared, queries, statistics, depth))
        assert np.array_equal(answer.indices, expected.indices) and np.array_equal(answer.lengths, expected.lengths)
        assert np.array_equal(answer.values.view(np.int64), expected.scores.view(np.int64))


class _Reversed(VectorSharding):
    """A variant that changes `score` only: its answers must come from that `score`."""

    def score(self, prepared: np.ndarray, queries: np.ndarray, statistics: None, depth: int) -> list[Ranking]:
        return [
            Ranking(r.indices[::-1].copy(), r.scores[::-1].copy())
            for r in super().score(prepared, queries, None, depth)
        ]


def test_a_subclass_that_overrides_score_is_answered_by_its_score(context: Context) -> None:
    search = _Reversed()
    documents = search.documents(context, Shard(0, 0, 300))
    queries = search.queries(context)
    answer = scored(search, documents, queries, None, 1000)
    expected = packed(search.score(documents, queries, None, 1000))
    assert np.array_equal(answer.indices, expected.indices)
    assert np.array_equal(answer.values.view(np.int64), expected.scores.view(np.int64))
