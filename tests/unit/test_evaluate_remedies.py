"""Query rewriting and document enrichment through a whole evaluation, keyless: the real Gemini
SDK (and the OpenAI-compatible clients) record against local fake servers, then replay with the
servers stopped and no key. The servers' answers are FIXTURES (remedy_fixtures.py), so nothing
here is a baseline or a committed recording; what is checked is the plumbing: each method's own
cassette, identical replay, degraded questions, the indexing stages, the cost rows, a failed call
refusing the recording, and a profile without an LLM never failing."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from demo_fixture import DEMO_DATA, demo_dataset, demo_settings
from fake_embeddings import FakeEmbeddingsServer, make_profile
from fake_servers import (
    FIXTURE_KEY,
    Act,
    FakeGeminiServer,
    FakeOpenAIServer,
    clean_gemini_env,
    gemini_profile,
)
from remedy_fixtures import fixture_llm_answer, prompt_question

from retrieval.config import Settings
from retrieval.data.dataset import Dataset
from retrieval.evaluation.evaluate import evaluate
from retrieval.methods.enrich import ENRICHED_EMBEDDINGS, ENRICHMENT
from retrieval.recording.cassette_files import CassetteError
from retrieval.report.build import build_report
from retrieval.text.redaction import find_secrets

REMEDIES = ["hybrid", "rewrite", "rewrite_rerank", "enrich"]
# FIXTURE: the question whose rewrite the fake model answers in prose (unparseable).
PROSE_FOR = "J'obtiens HEL-4040 en importation de mon fichier, que faire ?"


def small_demo() -> Dataset:
    """Three demo questions (an identifier, the seed's remaining failure, a paraphrase) over
    their documents and ten others: every path, in a fraction of the full demo's calls."""
    demo = demo_dataset()
    questions = tuple(q for q in demo.questions if q.id in {"q01", "q11", "q12"})
    relevant = {d for q in questions for d in q.relevant}
    documents = tuple(d for i, d in enumerate(demo.documents) if d.id in relevant or i < 10)
    return replace(demo, questions=questions, documents=documents)


def llm_answer(prompt: str) -> str:
    """FIXTURE: the default answers, except a prose answer to one question's rewrite."""
    if prompt.startswith("You rewrite questions") and prompt_question(prompt).startswith("J'obtiens HEL-4040"):
        return "Voici la requête : HEL-4040 import"
    return fixture_llm_answer(prompt)


def test_record_then_replay_rewriting_and_enrichment_with_gemini(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clean_gemini_env(monkeypatch)
    dataset = small_demo()
    n_questions, n_documents = len(dataset.questions), len(dataset.documents)
    assert (n_questions, n_documents) == (3, 12)
    prices = demo_settings().prices
    with FakeGeminiServer(answer=llm_answer) as server:
        settings = Settings(
            dataset=str(DEMO_DATA),
            profile=gemini_profile(server.url),  # 8 concurrent calls
            cassettes=str(tmp_path / "cassettes"),
            cache=str(tmp_path / "cache"),
            prices=prices,
        )
        recorded = evaluate(dataset, settings, mode="record", methods=REMEDIES)
    monkeypatch.delenv("GEMINI_API_KEY")
    replayed = evaluate(dataset, settings, mode="replay", methods=REMEDIES)

    assert replayed.methods == REMEDIES
    for method in replayed.methods:
        assert replayed.ranked_ids(method) == recorded.ranked_ids(method)
    assert replayed.degraded("rewrite") == recorded.degraded("rewrite") == {"q01": "unparseable"}
    # Searched as written, q01's rewrite row is hybrid's; the reranker then reads rewrite's candidates.
    q01 = next(r for r in replayed.results if r.question.id == "q01")
    assert q01.methods["rewrite"].ids == q01.methods["hybrid"].ids
    assert replayed.degraded("enrich") == replayed.degraded("rewrite_rerank") == {}
    # FIXTURE rewrite "restaurer une sauvegarde": the seed's remaining failure comes first.
    q11 = next(r for r in replayed.results if r.question.id == "q11")
    assert (q11.methods["hybrid"].relevant_ranks, q11.methods["rewrite"].relevant_ranks) == (
        {"proc-restauration": 10},
        {"proc-restauration": 1},
    )

    for run in (recorded, replayed):
        # Rewrite: one call per question, and one embedding call for the two rewritten questions.
        assert run.usage["rewrite"].calls == n_questions + 1
        assert run.usage["rewrite_rerank"].calls == n_questions
        # Enrichment is indexing: one call per document, one embedding call; the row itself calls nothing.
        assert (run.usage[ENRICHMENT].calls, run.usage[ENRICHED_EMBEDDINGS].calls) == (n_documents, 1)
        assert run.usage["enrich"].calls == 0
    assert replayed.cost_models[ENRICHMENT] == "gemini-3.5-flash"
    assert replayed.cost_models[ENRICHED_EMBEDDINGS] == "gemini-embedding-2"
    assert replayed.pipelines["rewrite_rerank"] == ["question embeddings", "rewrite", "rewrite_rerank"]
    assert replayed.pipelines["enrich"] == ["question embeddings", "enrich"]
    report = build_report(replayed, dataset.documents, prices)
    cost = {row.method: row for row in report.cost}
    assert cost["rewrite"].calls == 1 + n_questions + 1
    assert cost["rewrite_rerank"].calls == 1 + n_questions + 1 + n_questions
    assert cost["enrich"].calls == 1  # per question: the shared question embedding only
    rewrite_cost, hybrid_cost = cost["rewrite"].cost, cost["hybrid"].cost
    assert rewrite_cost is not None and hybrid_cost is not None and rewrite_cost > hybrid_cost > 0

    folder = tmp_path / "cassettes" / "fixture-gemini"
    assert sorted(p.name for p in folder.iterdir()) == [
        "corpus-vectors.json",
        "enrich-gemini-3.5-flash.json",
        "question-embeddings.json",
        "recording.json",
        "rewrite-gemini-3.5-flash.json",
        "rewrite_rerank-gemini-3.5-flash.json",
    ]
    for path in folder.glob("*.json"):
        assert find_secrets(path.read_text(), {"GEMINI_API_KEY": FIXTURE_KEY}) == []
    # The recording filled the enrichment cache (a live run reads it).
    [cached] = (tmp_path / "cache" / "enrichment").iterdir()
    assert cached.name.startswith("gemini--gemini-3.5-flash--enrich-v1--")


@pytest.mark.parametrize(
    ("method", "message"),
    [
        ("rewrite", r"recording not kept: rewrite of q01 \(http 500\) failed"),
        (
            "enrich",
            r"recording not kept: enrich of q01 \(http 500 \(enrichment failed for 1 of 12 documents\)\), "
            r"enrich of q11 .* failed",
        ),
    ],
)
def test_a_recording_with_a_failed_call_replaces_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str, message: str
) -> None:
    """vcrpy does not record an error answer, so a cassette with a failed call could never replay."""
    clean_gemini_env(monkeypatch)
    with FakeGeminiServer(answer=fixture_llm_answer) as server:
        settings = Settings(
            profile=gemini_profile(server.url, rerank_workers=1, retry_attempts=2, retry_backoff=0.01),
            cassettes=str(tmp_path / "cassettes"),
            cache=str(tmp_path / "cache"),
        )
        # Two embedding calls, then the method's first call fails on both of its attempts.
        server.script(Act(), Act(), Act.http(500), Act.http(500))
        with pytest.raises(CassetteError, match=message):
            evaluate(small_demo(), settings, mode="record", methods=[method])
    assert not (tmp_path / "cassettes" / "fixture-gemini").exists()


def test_rewriting_through_openai_compatible_endpoints_records_and_replays(
    tmp_path: Path, embeddings_server: FakeEmbeddingsServer
) -> None:
    """Any OpenAI-compatible chat endpoint, with an OpenAI-compatible embedder kept open for the
    method loop: the rewritten questions are embedded after the shared stages."""
    dataset = small_demo()
    with FakeOpenAIServer(answer=fixture_llm_answer) as chat:
        profile = make_profile(
            embeddings_server.url,
            rerank_provider="openai",
            rerank_model="fixture-chat-model",
            rerank_base_url=chat.url + "/v1",
        )
        settings = Settings(profile=profile, cassettes=str(tmp_path / "cassettes"), cache=str(tmp_path / "cache"))
        recorded = evaluate(dataset, settings, mode="record", methods=["rewrite"])
        assert len(chat.requests) == 3
    posts = len(embeddings_server.posts)
    # corpus (12 documents, batches of 3), questions, then the 3 rewritten questions: 4 + 1 + 1.
    assert posts == 6
    embeddings_server.stop()
    replayed = evaluate(dataset, settings, mode="replay", methods=["rewrite"])
    assert replayed.ranked_ids("rewrite") == recorded.ranked_ids("rewrite")
    assert replayed.usage["rewrite"].calls == 3 + 1
    assert sorted(p.name for p in (tmp_path / "cassettes" / "fixture").iterdir()) == [
        "corpus-vectors.json",
        "question-embeddings.json",
        "recording.json",
        "rewrite-fixture-chat-model.json",
    ]


def test_the_local_profile_shows_them_unavailable_and_runs_the_rest() -> None:
    settings = demo_settings()
    run = evaluate(small_demo(), settings, mode="replay", methods=["bm25", "rewrite", "enrich"])
    assert run.methods == ["bm25"]
    assert sorted(run.skipped) == ["enrich", "rewrite"]
    assert run.skipped["rewrite"].startswith("profile 'local' has no LLM (rerank_provider, rerank_model): ")
