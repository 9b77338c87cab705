"""Rerank APIs against local protocol servers (FakeRerankServer: each service's own request and
answer shape; its scores are FIXTURES, never a model's): the request each service is sent, its
answer read and billed as it bills, the outages that degrade a question, and a whole evaluation
recorded with the real recorder and replayed with the server stopped."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import numpy as np
import pytest
from demo_fixture import DEMO_DATA, demo_dataset
from fake_embeddings import FakeEmbeddingsServer
from fake_embeddings import make_profile as embedding_profile
from fake_servers import FAST_RETRY, Act, FakeRerankServer, fixture_relevance, rerank_profile

from retrieval.config import ConfigError, Settings, load_settings
from retrieval.config.rerank_services import SERVICES
from retrieval.data.dataset import Dataset, Document, Question
from retrieval.evaluation.evaluate import evaluate
from retrieval.methods.base import Context
from retrieval.methods.rerank_api import RerankAPIMethod
from retrieval.providers.base import MissingKeyError, ProviderError
from retrieval.providers.http import new_client
from retrieval.providers.rerank_api import RerankAPI, read_results
from retrieval.recording.cassette_files import CassetteError
from retrieval.report.build import build_report
from retrieval.report.sections import render_markdown
from retrieval.run.ranking import Ranking
from retrieval.text.redaction import find_secrets

QUERY = "Comment exporter mes factures en PDF ?"
TEXTS = ["Exporter les factures : menu Factures, bouton PDF.", "Changer son mot de passe.", "Factures en PDF"]
KEY_ENV = "FIXTURE_RERANK_KEY"
KEY = "fixture-rerank-key-0123456789"


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    # No test here is about a timeout: a loaded machine must not turn a slow answer into one.
    # The package's shared TLS context: an httpx.Client loads the certificate store for its own (~20 ms).
    with new_client(10.0) as client:
        yield client


def served(service: str, server: FakeRerankServer) -> str:
    return server.url + SERVICES[service].path


# What each service is sent for one query over three texts (the fields its own API defines).
SENT = {
    "cohere": {"model": "fixture-reranker", "query": QUERY, "documents": TEXTS, "top_n": 3},
    "jina": {"model": "fixture-reranker", "query": QUERY, "documents": TEXTS, "top_n": 3, "return_documents": False},
    "voyage": {"model": "fixture-reranker", "query": QUERY, "documents": TEXTS, "top_k": 3},
    "tei": {"query": QUERY, "texts": TEXTS, "truncate": True},
    "vllm": {"model": "fixture-reranker", "query": QUERY, "documents": TEXTS, "top_n": 3},
    "llamacpp": {"model": "fixture-reranker", "query": QUERY, "documents": TEXTS, "top_n": 3},
    "mixedbread": {"model": "fixture-reranker", "query": QUERY, "input": TEXTS, "top_k": 3, "return_input": False},
    "infinity": {"model": "fixture-reranker", "query": QUERY, "documents": TEXTS, "top_n": 3},
}


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_each_service_is_sent_its_own_request_and_read_in_its_own_answer(service: str, http: httpx.Client) -> None:
    assert set(SENT) == set(SERVICES)
    with FakeRerankServer(service) as server:
        api = RerankAPI(rerank_profile(service, served(service, server)), retry=FAST_RETRY, client=http)
        pairs = api.rerank(QUERY, TEXTS)
        (request,) = server.requests
    assert request.path == SERVICES[service].path
    assert request.body == SENT[service]
    assert "authorization" not in request.headers  # keyless self-hosted profile: none sent
    expected = sorted(((i, fixture_relevance(QUERY, t)) for i, t in enumerate(TEXTS)), key=lambda p: -p[1])
    assert pairs == expected and [i for i, _ in pairs] == [0, 2, 1]
    tokens = (len(QUERY) // 4 + 1) * 3 + sum(len(t) // 4 + 1 for t in TEXTS)
    billed = {"cohere": (0, 1), "tei": (0, 0)}.get(service, (tokens, 0))
    assert (api.usage.calls, api.usage.input_tokens, api.usage.search_units) == (1, *billed)


def test_a_hosted_service_sends_its_key_as_a_bearer_token(http: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COHERE_API_KEY", KEY)
    with FakeRerankServer("cohere") as server:
        # The service's own variable when the profile names none.
        profile = rerank_profile("cohere", served("cohere", server), rerank_api_key_env=None)
        RerankAPI(profile, client=http).rerank(QUERY, TEXTS)
        assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
        monkeypatch.delenv("COHERE_API_KEY")
        with pytest.raises(MissingKeyError, match="set COHERE_API_KEY"):
            RerankAPI(profile, client=http)
        # Replay needs no key and sends none.
        RerankAPI(profile, replay=True, client=http).rerank(QUERY, TEXTS)
        assert "authorization" not in server.requests[1].headers


TEI = SERVICES["tei"]
COHERE = SERVICES["cohere"]


@pytest.mark.parametrize(
    ("answer", "service", "reason", "says"),
    [
        ({"results": []}, COHERE, "empty", "scores no text"),
        ({"results": [{"index": 3, "relevance_score": 0.5}]}, COHERE, "bad answer", "index 3 is not one of"),
        ({"results": [{"index": 0, "relevance_score": 0.5}] * 2}, COHERE, "bad answer", "index 0 is not one of"),
        ({"results": [{"index": True, "relevance_score": 0.5}]}, COHERE, "bad answer", "index True"),
        ({"results": [{"index": 0, "relevance_score": "high"}]}, COHERE, "bad answer", "no finite 'relevance_score'"),
        ({"results": [{"index": 0, "relevance_score": float("nan")}]}, COHERE, "bad answer", "no finite"),
        ({"data": []}, COHERE, "bad answer", 'not a "results" list'),
        ({"results": []}, TEI, "bad answer", "not a list"),
        ([{"index": 1, "relevance_score": 0.5}], TEI, "bad answer", "no finite 'score'"),
    ],
)
def test_an_unreadable_answer_is_an_outage(answer: object, service: object, reason: str, says: str) -> None:
    with pytest.raises(ProviderError, match=says) as caught:
        read_results(answer, service, 3, "fixture rerank")  # type: ignore[arg-type]
    assert caught.value.reason == reason


def test_a_partial_answer_is_read_best_first_with_ties_in_input_order() -> None:
    answer = [{"index": 2, "score": 0.5}, {"index": 0, "score": 0.5}, {"index": 1, "score": 0.9}]
    assert read_results(answer, TEI, 4, "x") == [(1, 0.9), (0, 0.5), (2, 0.5)]


# --- the method over a hand-made candidate pool ----------------------------------------------------


def five_documents() -> Dataset:
    documents = tuple(Document(f"d{i}", "", text) for i, text in enumerate(["a", "factures pdf", "b", "exporter", "c"]))
    questions = (Question("q1", "exporter factures pdf", "t", ("d1",)), Question("q2", "exporter", "t", ("d3",)))
    return Dataset("five", documents, questions, "fixture")


def pool_context(dataset: Dataset) -> Context:
    context = Context(dataset=dataset, depth=5)
    order = np.arange(5, dtype=np.int64)
    context.rankings["hybrid"] = [Ranking(order, np.linspace(1, 0.5, 5)) for _ in dataset.questions]
    return context


def test_the_pool_is_reordered_by_score_and_the_rest_kept(http: httpx.Client) -> None:
    dataset = five_documents()
    with FakeRerankServer("jina") as server:
        api = RerankAPI(rerank_profile("jina", served("jina", server)), retry=FAST_RETRY, client=http)
        rankings = RerankAPIMethod(api, "jina", candidates=3, workers=1).rank(pool_context(dataset))
        sent = [r.body["documents"] for r in server.requests]
    assert sent == [["a", "factures pdf", "b"]] * 2  # each question's top 3, as the corpus holds them
    for question, ranking in zip(dataset.questions, rankings, strict=True):
        scores = [fixture_relevance(question.text, t) for t in ("a", "factures pdf", "b")]
        pool = sorted(range(3), key=lambda i: (-scores[i], i))
        assert ranking.indices.tolist() == [*pool, 3, 4]
        assert ranking.scores.tolist() == [5.0, 4.0, 3.0, 2.0, 1.0] and ranking.status == "ok"


def test_an_outage_keeps_the_hybrid_order_degraded(http: httpx.Client) -> None:
    dataset = five_documents()
    with FakeRerankServer("tei") as server:
        api = RerankAPI(rerank_profile("tei", served("tei", server)), retry=FAST_RETRY, client=http)
        # q1: HTTP 500 on both attempts; q2: an answer naming a text that was not sent.
        server.script(Act.http(500), Act.http(500), Act.answer(json.dumps([{"index": 7, "score": 1.0}])))
        rankings = RerankAPIMethod(api, "tei", candidates=3, workers=1).rank(pool_context(dataset))
    assert [r.status for r in rankings] == ["degraded: http 500", "degraded: bad answer"]
    assert all(r.indices.tolist() == [0, 1, 2, 3, 4] for r in rankings)
    assert api.usage.calls == 2  # q1's two attempts are one call; q2's unreadable answer was one


# --- the configuration -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "says"),
    [
        ('rerank_api_service = "cohre"\nrerank_api_model = "m"', "rerank_api_service = 'cohre' is not a known"),
        ('rerank_api_service = "tei"\nrerank_api_model = "m"', "rerank_api_url is empty: a self-hosted tei server"),
        ('rerank_api_service = "cohere"', 'rerank_api_model is empty: cohere needs a model, e.g. "rerank-v3.5"'),
        ('rerank_api_service = "vllm"\nrerank_api_model = "m"\nrerank_api_url = "localhost:8000"', "not an http"),
        ('rerank_api_service = "jina"\nrerank_api_model = "m"\nrerank_api_workers = 0', "must be at least 1"),
    ],
)
def test_a_bad_rerank_api_group_is_one_line_naming_the_key(tmp_path: Path, lines: str, says: str) -> None:
    (tmp_path / "retrieval.toml").write_text(f"[profiles.x]\n{lines}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="profile 'x'") as caught:
        load_settings(tmp_path, {"profile": "x"}, environ={})
    assert says in str(caught.value) and "\n" not in str(caught.value)
    assert str(caught.value).startswith(str(tmp_path / "retrieval.toml"))


# --- a whole evaluation, recorded and replayed -------------------------------------------------------


def small_demo() -> Dataset:
    demo = demo_dataset()
    return replace(demo, questions=demo.questions[:6])


@pytest.mark.parametrize(("service", "price"), [("cohere", {"search_unit": 0.002}), ("jina", {"input": 0.02})])
def test_record_then_replay_a_rerank_api_with_the_server_stopped(
    service: str, price: dict[str, float], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = small_demo()
    prices = {"fixture-reranker": price, "fixture-e5": {"input": 0.0}}
    monkeypatch.setenv(KEY_ENV, KEY)
    with FakeEmbeddingsServer() as embedder, FakeRerankServer(service) as reranker:
        rerank = rerank_profile(service, served(service, reranker), rerank_api_key_env=KEY_ENV)
        profile = replace(embedding_profile(embedder.url), rerank_api=rerank.rerank_api)
        settings = Settings(
            dataset=str(DEMO_DATA),
            profile=profile,
            methods=("bm25", "vector", "hybrid", "rerank_api"),
            cassettes=str(tmp_path / "cassettes"),
            cache=str(tmp_path / "cache"),
            prices=prices,
        )
        # The first rerank call answers with a text that was not sent: its question is degraded.
        reranker.script(Act.answer(json.dumps({"results": [{"index": 99, "relevance_score": 1.0}]})))
        recorded = evaluate(dataset, settings, mode="record")
        sent = [r.headers.get("authorization") for r in reranker.requests]
    monkeypatch.delenv(KEY_ENV)
    replayed = evaluate(dataset, settings, mode="replay")  # both servers stopped, no key

    assert sent == [f"Bearer {KEY}"] * len(dataset.questions)
    for method in replayed.methods:
        assert replayed.ranked_ids(method) == recorded.ranked_ids(method)
    assert list(replayed.degraded("rerank_api").values()) == ["bad answer"]
    assert replayed.degraded("rerank_api") == recorded.degraded("rerank_api")
    assert replayed.ranked_ids("rerank_api") != replayed.ranked_ids("hybrid")
    folder = tmp_path / "cassettes" / "fixture"
    assert (folder / f"rerank_api-{service}-fixture-reranker.json").is_file()
    for path in folder.glob("*.json"):
        assert find_secrets(path.read_text(), {KEY_ENV: KEY}) == [] and KEY not in path.read_text()

    report = build_report(replayed, dataset.documents, prices)
    (cost,) = [row for row in report.cost if row.method == "rerank_api"]
    calls = len(dataset.questions)
    assert cost.stages == ["question embeddings", "bm25", "vector", "hybrid", "rerank_api"]
    usage = replayed.usage["rerank_api"]
    assert usage.calls == calls
    if service == "cohere":  # one search unit per query of 20 documents, $0.002 each; the scripted answer bills none
        assert (usage.search_units, usage.input_tokens) == (calls - 1, 0)
        assert cost.search_units == calls - 1 and cost.cost == pytest.approx((calls - 1) * 0.002)
        assert "| Search units |" in render_markdown(report)
    else:  # tokens, per million
        assert usage.search_units == 0 and usage.input_tokens > 0
        assert cost.cost == pytest.approx(usage.input_tokens * 0.02 / 1_000_000)
        assert "Search units" not in render_markdown(report)
    rows = [line for line in render_markdown(report).splitlines() if line.startswith("| rerank_api |")]
    assert rows[0].endswith("| 1 |")  # the Degraded column counts the question


def test_a_recording_with_a_failed_rerank_call_replaces_nothing(tmp_path: Path) -> None:
    dataset = replace(small_demo(), questions=small_demo().questions[:2])
    with FakeEmbeddingsServer() as embedder, FakeRerankServer("tei") as reranker:
        rerank = rerank_profile("tei", served("tei", reranker), rerank_api_workers=1)
        profile = replace(
            embedding_profile(embedder.url, retry_attempts=2, retry_backoff=0.01), rerank_api=rerank.rerank_api
        )
        settings = Settings(
            dataset=str(DEMO_DATA),
            profile=profile,
            methods=("hybrid", "rerank_api"),
            cassettes=str(tmp_path / "cassettes"),
            cache=str(tmp_path / "cache"),
        )
        reranker.script(Act.http(503), Act.http(503))
        with pytest.raises(CassetteError, match=r"recording not kept: rerank_api of q01 \(http 503\)"):
            evaluate(dataset, settings, mode="record")
    assert not (tmp_path / "cassettes" / "fixture").exists()


def test_a_recording_needs_the_rerank_apis_key_before_its_first_call(monkeypatch: pytest.MonkeyPatch) -> None:
    from retrieval.providers import required_key

    monkeypatch.delenv("COHERE_API_KEY", raising=False)
    profile = rerank_profile("cohere", "https://api.cohere.com/v2/rerank", rerank_api_key_env=None)
    assert required_key(profile) == "COHERE_API_KEY"
    monkeypatch.setenv("COHERE_API_KEY", KEY)
    assert required_key(profile) is None
    assert required_key(rerank_profile("tei", "http://127.0.0.1:8080/rerank")) is None  # keyless server
