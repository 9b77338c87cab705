"""Query rewriting and document enrichment (issue 13 items 4-6): prompts and parsers, the
methods with an in-process generator and embedder, the enrichment cache, and the factories
(a profile without an LLM makes them unavailable, never a failure).

The generator and the embedder here are FIXTURES: answers from remedy_fixtures.py, vectors
seeded by the text. End-to-end runs through the real providers are in
test_evaluate_remedies.py and at the end of this file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from demo_fixture import demo_dataset, demo_settings
from fake_servers import (
    Act,
    FakeGeminiServer,
    FakeOpenAIServer,
    StubGenerator,
    clean_gemini_env,
    fixture_vector,
    gemini_profile,
)
from remedy_fixtures import fixture_llm_answer, fixture_questions, fixture_rewrite, prompt_document, prompt_question

from retrieval.config import Settings
from retrieval.data.dataset import Dataset, Document, Question
from retrieval.evaluation.evaluate import evaluate
from retrieval.evaluation.pipeline import plan
from retrieval.methods.base import Context
from retrieval.methods.bm25 import BM25Method
from retrieval.methods.enrich import ENRICHED_EMBEDDINGS, ENRICHMENT, EnrichMethod, enriched_document
from retrieval.methods.hybrid import HybridMethod
from retrieval.methods.prompts.enrich import (
    DOCUMENT_CHARS,
    ENRICH_VERSION,
    parse_questions,
    render_enrich_prompt,
)
from retrieval.methods.prompts.rewrite import MAX_QUERY_CHARS, REWRITE_VERSION, parse_rewrite, render_rewrite_prompt
from retrieval.methods.rewrite import RewriteMethod
from retrieval.methods.vector import VectorMethod
from retrieval.providers.base import GenerationProvider, MissingKeyError, ProviderError, ReplayMissError, normalize
from retrieval.providers.gemini import GeminiGenerator
from retrieval.providers.openai_chat import OpenAIChat
from retrieval.recording.cassette_files import CassetteError
from retrieval.recording.enrichment_cache import EnrichmentCache
from retrieval.run.cost import Usage
from retrieval.run.ranking import Ranking, rank_of

DIMENSIONS = 8

# fixture data ------------------------------------------------------------------------------

DOCUMENTS = (
    Document("proc-restauration", "Restaurer une sauvegarde", "Remettre les données comme la veille."),
    Document("proc-purge", "Purger le cache", "Vider le cache local quand les pages sont périmées."),
    Document("proc-jetons", "Rotation des jetons", "Remplacer un jeton d'accès expiré sans interruption."),
    Document("inc-doublons", "Incident doublons", "Des fiches en double après une fausse manipulation d'import."),
    Document("proc-diagnostic", "Diagnostic", "Collecter les journaux de l'agent avant d'ouvrir un ticket."),
    Document("HEL-4010", "HEL-4010 : jeton expiré", "Code HEL-4010 : le jeton d'authentification a expiré."),
)
QUESTIONS = (
    Question(
        "q0", "Comment revenir à l'état d'hier après une fausse manipulation ?", "paraphrase", ("proc-restauration",)
    ),
    Question("q1", "les pages affichées sont vieilles", "paraphrase", ("proc-purge",)),
    Question("q2", "J'obtiens HEL-4010", "identifiant", ("HEL-4010",)),
)
DATASET = Dataset("fixture", DOCUMENTS, QUESTIONS, "sha256:fixture")


def fixture_vectors(texts: Sequence[str]) -> np.ndarray:
    """FIXTURE embeddings: seeded by each text (fake_servers.fixture_vector), unit length."""
    return normalize(np.array([fixture_vector(t, DIMENSIONS) for t in texts]))


class FakeEmbed:
    """FIXTURE `Context.embed`: fixture vectors, one call counted per use with a token per word."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], str]] = []

    def __call__(self, texts: Sequence[str], kind: str) -> tuple[np.ndarray, Usage]:
        self.calls.append((list(texts), kind))
        usage = Usage()
        usage.add(1, sum(len(t.split()) for t in texts))
        return fixture_vectors(texts), usage


def make_context(dataset: Dataset = DATASET, mode: Any = "replay") -> Context:
    return Context(
        dataset=dataset,
        depth=len(dataset.documents),
        question_vectors=fixture_vectors([q.text for q in dataset.questions]),
        document_vectors=fixture_vectors([d.content for d in dataset.documents]),
        embed=FakeEmbed(),
        mode=mode,
    )


def hybrid_over(
    dataset: Dataset, question_vectors: np.ndarray | None, document_vectors: np.ndarray | None
) -> list[Ranking]:
    """The built-in methods bm25, vector and hybrid (RRF k=60) run as the evaluator runs them."""
    context = Context(
        dataset=dataset,
        depth=len(dataset.documents),
        question_vectors=question_vectors,
        document_vectors=document_vectors,
    )
    for method in (BM25Method(), VectorMethod(), HybridMethod()):
        context.rankings[method.name] = method.rank(context)
    return context.rankings["hybrid"]


def assert_same(got: list[Ranking], expected: list[Ranking]) -> None:
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_array_equal(g.indices, e.indices)
        np.testing.assert_array_equal(g.scores, e.scores)


# prompts and parsers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"query": "restaurer une sauvegarde"}', "restaurer une sauvegarde"),
        ('{"query": "  restaurer\\n une   sauvegarde "}', "restaurer une sauvegarde"),
        ('{"query": "HEL-4010 jeton expiré", "why": "x"}', "HEL-4010 jeton expiré"),
    ],
    ids=["plain", "whitespace", "extra-key"],
)
def test_parse_rewrite(raw: str, expected: str) -> None:
    assert parse_rewrite(raw) == expected


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("restaurer une sauvegarde", "unparseable"),
        ('```json\n{"query": "x"}\n```', "unparseable"),
        ('["x"]', "unparseable"),
        ('{"rewrite": "x"}', "unparseable"),
        ('{"query": ["x"]}', "unparseable"),
        ('{"query": "  "}', "empty query"),
        (json.dumps({"query": "x" * (MAX_QUERY_CHARS + 1)}), "too long"),
    ],
    ids=["prose", "fenced", "list", "no-key", "not-a-string", "blank", "too-long"],
)
def test_parse_rewrite_rejects(raw: str, reason: str) -> None:
    with pytest.raises(ProviderError) as info:
        parse_rewrite(raw)
    assert info.value.reason == reason


def test_parse_questions_keeps_usable_distinct_questions() -> None:
    raw = json.dumps({"questions": ["Q1 ?", " Q1  ?", 7, "", "x" * 301, "Q2 ?", "Q3", "Q4", "Q5", "Q6"]})
    assert parse_questions(raw) == ["Q1 ?", "Q2 ?", "Q3", "Q4", "Q5"]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("Q1 ? Q2 ?", "unparseable"),
        ('{"questions": "Q1 ?"}', "unparseable"),
        ('{"questions": []}', "no questions"),
        ('{"questions": [1, "", "  "]}', "no questions"),
    ],
    ids=["prose", "not-a-list", "empty-list", "nothing-usable"],
)
def test_parse_questions_rejects(raw: str, reason: str) -> None:
    with pytest.raises(ProviderError) as info:
        parse_questions(raw)
    assert info.value.reason == reason


def test_prompts_are_versioned_package_data_and_deterministic() -> None:
    for version in (REWRITE_VERSION, ENRICH_VERSION):
        assert resources.files("retrieval.methods.prompts").joinpath(f"{version}.txt").is_file()
    rewrite = render_rewrite_prompt("Which {one}?\n  $HOME")
    assert rewrite == render_rewrite_prompt("Which {one}?\n  $HOME")
    assert prompt_question(rewrite) == "Which {one}? $HOME"  # one line, never read as template syntax
    assert rewrite.endswith('Answer with a JSON object only: {"query": "<the rewritten question>"}.\n')
    long = "Titre\n" + "y" * (DOCUMENT_CHARS + 50)
    enrich = render_enrich_prompt(long)
    assert prompt_document(enrich) == "Titre"
    assert "y" * (DOCUMENT_CHARS - 6) + " […]" in enrich and "y" * (DOCUMENT_CHARS - 5) not in enrich
    assert "Task: write 5 distinct questions" in enrich


# rewrite, in process ------------------------------------------------------------------------


def test_rewrite_is_hybrid_over_the_rewritten_questions() -> None:
    context = make_context()
    generator = StubGenerator(fixture_llm_answer)
    method = RewriteMethod(generator, workers=2)

    rankings = method.rank(context)

    rewrites = [fixture_rewrite(q.text) for q in QUESTIONS]
    assert (
        method.rewrites
        == rewrites
        == ["restaurer une sauvegarde", "LES PAGES AFFICHÉES SONT VIEILLES", "J'OBTIENS HEL-4010"]
    )
    rewritten = replace(DATASET, questions=tuple(replace(q, text=t) for q, t in zip(QUESTIONS, rewrites, strict=True)))
    assert_same(rankings, hybrid_over(rewritten, fixture_vectors(rewrites), context.document_vectors))
    assert [r.status for r in rankings] == ["ok", "ok", "ok"]
    # The fixture rewrite takes the restoration procedure from last to first (the seed's failure).
    original = hybrid_over(DATASET, context.question_vectors, context.document_vectors)
    assert (rank_of(original[0], 0), rank_of(rankings[0], 0)) == (6, 1)
    # One batched embedding call for the rewritten questions, then counted with the LLM calls.
    assert context.embed.calls == [(rewrites, "query")]  # type: ignore[union-attr]
    usage = context.usage["rewrite"]
    assert (usage.calls, usage.input_tokens, usage.output_tokens) == (3 + 1, 3 * 10 + 3 + 5 + 2, 3 * 2)


def test_a_failed_rewrite_searches_the_question_as_written() -> None:
    def reply(prompt: str) -> str | BaseException:
        if "vieilles" in prompt:
            return ProviderError("fixture outage", "timeout")
        if "HEL-4010" in prompt:
            return json.dumps({"query": "J'obtiens HEL-4010"})  # unchanged: nothing to embed
        return fixture_llm_answer(prompt)

    context = make_context()
    rankings = RewriteMethod(StubGenerator(reply)).rank(context)

    assert [r.status for r in rankings] == ["ok", "degraded: timeout", "ok"]
    original = hybrid_over(DATASET, context.question_vectors, context.document_vectors)
    assert_same(rankings[1:], original[1:])  # q1 and q2 searched as written, with their shared vectors
    assert context.embed.calls == [(["restaurer une sauvegarde"], "query")]  # type: ignore[union-attr]
    assert context.usage["rewrite"].calls == 3 + 1


@pytest.mark.parametrize(
    "error",
    [MissingKeyError(["GEMINI_API_KEY"], "gemini"), ReplayMissError("no recorded answer", "replay miss")],
    ids=["missing-key", "replay-miss"],
)
def test_rewrite_setup_errors_are_raised_never_degraded(error: ProviderError) -> None:
    with pytest.raises(type(error)) as info:
        RewriteMethod(StubGenerator(lambda prompt: error), workers=1).rank(make_context())
    if isinstance(error, ReplayMissError):
        assert str(info.value) == "rewrite of question q0 (stub-model): no recorded answer"


# enrich, in process ------------------------------------------------------------------------


def test_enrich_is_hybrid_over_the_enriched_documents() -> None:
    context = make_context()
    generator = StubGenerator(fixture_llm_answer)
    method = EnrichMethod(generator, workers=2, embedding_model="fixture-embedding")

    rankings = method.rank(context)

    assert method.questions == {d.id: fixture_questions(d.title) for d in DOCUMENTS}
    enriched = tuple(enriched_document(d, fixture_questions(d.title)) for d in DOCUMENTS)
    assert enriched[0].content == (
        "Restaurer une sauvegarde\nRemettre les données comme la veille.\n\n"
        "Comment annuler une fausse manipulation d'hier ?\nRevenir en arrière sur mes données"
    )
    expected = hybrid_over(
        replace(DATASET, documents=enriched), context.question_vectors, fixture_vectors([d.content for d in enriched])
    )
    assert_same(rankings, expected)
    assert [r.status for r in rankings] == ["ok", "ok", "ok"]
    assert context.embed.calls == [([d.content for d in enriched], "document")]  # type: ignore[union-attr]
    # Indexing cost, in its own stages; the method's row (one per question) calls nothing.
    llm, vectors = context.usage[ENRICHMENT], context.usage[ENRICHED_EMBEDDINGS]
    assert (llm.calls, llm.input_tokens, llm.output_tokens) == (6, 60, 12)
    assert (vectors.calls, vectors.input_tokens) == (1, sum(len(d.content.split()) for d in enriched))
    assert "enrich" not in context.usage
    assert context.cost_models == {ENRICHMENT: "stub-model", ENRICHED_EMBEDDINGS: "fixture-embedding"}


def test_a_failed_enrichment_indexes_the_document_as_written_and_degrades_every_question() -> None:
    def reply(prompt: str) -> str | BaseException:
        if prompt_document(prompt) == "Purger le cache":
            return "not json"
        if prompt_document(prompt) == "Diagnostic":  # after the unparseable one, named first: no answer recorded
            return ProviderError("fixture outage", "http 500")
        return fixture_llm_answer(prompt)

    context = make_context()
    method = EnrichMethod(StubGenerator(reply))
    rankings = method.rank(context)

    status = "degraded: http 500 (enrichment failed for 2 of 6 documents)"
    assert [r.status for r in rankings] == [status] * 3
    assert (method.questions["proc-purge"], method.questions["proc-diagnostic"]) == ([], [])
    # The two are not embedded again: their shared corpus vectors are used.
    [(texts, kind)] = context.embed.calls  # type: ignore[union-attr]
    assert kind == "document" and len(texts) == 4 and DOCUMENTS[1].content not in texts


def test_documents_with_the_same_content_are_enriched_once() -> None:
    twin = replace(DOCUMENTS[0], id="proc-restauration-copie")
    dataset = replace(DATASET, documents=(*DOCUMENTS, twin))
    generator = StubGenerator(fixture_llm_answer)
    method = EnrichMethod(generator)
    method.rank(make_context(dataset))
    assert generator.usage.calls == 6
    assert method.questions["proc-restauration-copie"] == method.questions["proc-restauration"]


def test_enrichment_cache_live_reads_record_fills_replay_ignores(tmp_path: Path) -> None:
    cache = str(tmp_path / "cache")

    def run(mode: str, dataset: Dataset = DATASET) -> tuple[StubGenerator, list[Ranking]]:
        generator = StubGenerator(fixture_llm_answer)
        rankings = EnrichMethod(generator, cache=cache, variant="v").rank(make_context(dataset, mode))
        return generator, rankings

    first, rankings = run("live")
    assert first.usage.calls == 6
    [path] = (tmp_path / "cache" / "enrichment").iterdir()
    assert path.name == "stub--stub-model--enrich-v1--v.json"
    again, cached = run("live")
    assert again.usage.calls == 0  # every document from the cache
    assert_same(cached, rankings)
    edited = replace(DATASET, documents=(replace(DOCUMENTS[0], text="Texte modifié."), *DOCUMENTS[1:]))
    changed, _ = run("live", edited)
    assert [prompt_document(p) for p in changed.prompts] == ["Restaurer une sauvegarde"]  # only the edited one
    # A recording must capture every call: it never reads the cache (it fills it).
    recording, _ = run("record")
    assert recording.usage.calls == 6
    # A replay gives the recorded answers: it neither reads nor writes the cache.
    path.unlink()
    replaying, _ = run("replay")
    assert replaying.usage.calls == 6 and not path.exists()


def test_a_failed_enrichment_is_not_cached(tmp_path: Path) -> None:
    def failing(prompt: str) -> str | BaseException:
        return ProviderError("fixture outage", "timeout") if "Diagnostic" in prompt else fixture_llm_answer(prompt)

    EnrichMethod(StubGenerator(failing), cache=str(tmp_path)).rank(make_context(mode="live"))
    retry = StubGenerator(fixture_llm_answer)
    EnrichMethod(retry, cache=str(tmp_path)).rank(make_context(mode="live"))
    assert [prompt_document(p) for p in retry.prompts] == ["Diagnostic"]


def test_enrichment_cache_is_keyed_by_model_and_version_and_rebuilds_a_damaged_file(tmp_path: Path) -> None:
    cache = EnrichmentCache(tmp_path, "gemini", "gemini-3.5-flash", "enrich-v1")
    cache.put("Titre\ntexte", ["Q ?"])
    cache.save()
    assert EnrichmentCache(tmp_path, "gemini", "gemini-3.5-flash", "enrich-v1").get("Titre\ntexte") == ["Q ?"]
    assert EnrichmentCache(tmp_path, "gemini", "gemini-3.5-flash", "enrich-v2").get("Titre\ntexte") is None
    assert EnrichmentCache(tmp_path, "gemini", "gemini-3.5-flash-lite", "enrich-v1").get("Titre\ntexte") is None
    data = json.loads(cache.path.read_text())
    data["entries"][next(iter(data["entries"]))] = ["tampered"]
    cache.path.write_text(json.dumps(data))
    with pytest.warns(UserWarning, match="corrupt enrichment cache \\(checksum mismatch\\); it will be rebuilt"):
        damaged = EnrichmentCache(tmp_path, "gemini", "gemini-3.5-flash", "enrich-v1")
    assert damaged.get("Titre\ntexte") is None


# factories: unavailable, never a failure ----------------------------------------------------------

REMEDIES = ["rewrite", "rewrite_rerank", "enrich"]


def test_a_profile_without_an_llm_makes_them_unavailable() -> None:
    settings = demo_settings()
    assert settings.profile.name == "local"
    chosen = plan(["bm25", *REMEDIES], settings, replay=True)
    assert chosen.wanted == ["bm25"]
    assert chosen.unavailable == {
        name: f"profile 'local' has no LLM (rerank_provider, rerank_model): not recorded; record {name} with a "
        "profile that has one, e.g. `GEMINI_API_KEY=... pytest --record --retrieval-profile gemini`"
        for name in REMEDIES
    }


def test_in_replay_a_method_never_recorded_fails_naming_its_cassette(tmp_path: Path) -> None:
    demo = demo_dataset()
    settings = Settings(profile=gemini_profile("http://127.0.0.1:9"), cassettes=str(tmp_path))
    with pytest.raises(CassetteError, match=r"no cassette .*/fixture-gemini/corpus-vectors.json"):
        evaluate(replace(demo, questions=demo.questions[:1]), settings, methods=["rewrite"])


def test_recorded_methods_declare_what_the_evaluator_needs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clean_gemini_env(monkeypatch)
    folder = tmp_path / "fixture-gemini"
    folder.mkdir()
    for channel in ("rewrite", "rewrite_rerank", "enrich"):
        (folder / f"{channel}-gemini-3.5-flash.json").write_text("{}")
    settings = Settings(profile=gemini_profile("http://127.0.0.1:9"), cassettes=str(tmp_path), rrf_k=30, bm25_k1=1.2)
    chosen = plan(REMEDIES, settings, replay=True)
    assert chosen.wanted == REMEDIES and chosen.unavailable == {}
    declared = {name: chosen.declarations[name] for name in REMEDIES}
    assert {
        n: (d.requires, d.calls, d.channel, d.candidate_source, d.cost_model, d.degradable) for n, d in declared.items()
    } == {
        "rewrite": ((), "http", "rewrite-gemini-3.5-flash", None, "gemini-3.5-flash", True),
        "rewrite_rerank": (
            ("rewrite",),
            "http",
            "rewrite_rerank-gemini-3.5-flash",
            "rewrite",
            "gemini-3.5-flash",
            True,
        ),
        "enrich": ((), "http", "enrich-gemini-3.5-flash", None, "gemini-3.5-flash", True),
    }
    assert declared["rewrite"].config == {
        "model": "gemini-3.5-flash",
        "prompt": "rewrite-v1",
        "inputs": ["bm25", "vector"],
        "rrf_k": 30,
        # The BM25 inside is the bm25 method's, with the settings' k1 and b.
        "bm25_k1": 1.2,
        "bm25_b": 0.75,
    }
    assert declared["enrich"].config["prompt"] == "enrich-v1" and declared["enrich"].config["questions"] == 5
    assert (declared["enrich"].config["bm25_k1"], declared["enrich"].config["bm25_b"]) == (1.2, 0.75)
    assert chosen.pipeline("rewrite_rerank") == ["rewrite", "rewrite_rerank"]
    for method in chosen.methods:
        method.generator.close()  # type: ignore[attr-defined]


# through the real SDK and the chat client, against the fake servers ---------------------------------


def served(server: FakeGeminiServer | FakeOpenAIServer, *acts: Act) -> None:
    server.reset()
    server.answer_for = fixture_llm_answer
    server.script(*acts)


# (name, scripted acts for q0's rewrite call, q0's status)
REWRITE_FAULTS: list[tuple[str, tuple[Act, ...], str]] = [
    ("429-then-200", (Act.http(429), Act()), "ok"),
    ("500-after-retries", (Act.http(500), Act.http(500)), "degraded: http 500"),
    ("timeout", (Act.hang(),), "degraded: timeout"),
    ("malformed-http-body", (Act.malformed(),), "degraded: bad json"),
    ("unparseable", (Act.answer("Voici la question réécrite : restaurer une sauvegarde"),), "degraded: unparseable"),
    ("empty-answer", (Act.empty(),), "degraded: empty"),
    ("empty-query", (Act.answer('{"query": ""}'),), "degraded: empty query"),
    ("safety-blocked", (Act.blocked(),), "degraded: blocked"),
]


@pytest.mark.parametrize(("acts", "status"), [f[1:] for f in REWRITE_FAULTS], ids=[f[0] for f in REWRITE_FAULTS])
def test_gemini_rewrite_faults_search_the_original_question(
    gemini_server: FakeGeminiServer,
    gemini: GeminiGenerator,
    gemini_first_unanswered: GenerationProvider,
    acts: tuple[Act, ...],
    status: str,
) -> None:
    served(gemini_server, *acts)
    generator = gemini_first_unanswered if status == "degraded: timeout" else gemini
    method = RewriteMethod(generator, workers=1)  # one worker: the scripted acts meet q0's call
    context = make_context()
    rankings = method.rank(context)
    assert [r.status for r in rankings] == [status, "ok", "ok"]
    expected = [fixture_rewrite(q.text) for q in QUESTIONS]
    if status != "ok":
        expected[0] = QUESTIONS[0].text
    assert method.rewrites == expected
    assert gemini_server.pending_acts == 0


@pytest.mark.parametrize(
    ("acts", "status"),
    [
        ((Act.http(503), Act.http(503)), "degraded: http 503"),
        ((Act.answer("restaurer une sauvegarde"),), "degraded: unparseable"),
        ((Act.empty(),), "degraded: empty"),
        ((Act.blocked(),), "degraded: blocked"),
        ((Act.http(429), Act()), "ok"),
    ],
    ids=["503-after-retries", "prose-answer", "empty", "content-filter", "429-then-200"],
)
def test_openai_rewrite_faults(
    openai_server: FakeOpenAIServer, chat: OpenAIChat, acts: tuple[Act, ...], status: str
) -> None:
    served(openai_server, *acts)
    method = RewriteMethod(chat, workers=1)
    rankings = method.rank(make_context())
    assert [r.status for r in rankings] == [status, "ok", "ok"]
    assert method.rewrites[1:] == ["LES PAGES AFFICHÉES SONT VIEILLES", "J'OBTIENS HEL-4010"]


@pytest.mark.parametrize(
    ("acts", "status"),
    [
        ((Act.http(500), Act.http(500)), "degraded: http 500 (enrichment failed for 1 of 6 documents)"),
        ((Act.answer('{"questions": []}'),), "degraded: no questions (enrichment failed for 1 of 6 documents)"),
        ((Act.malformed(),), "degraded: bad json (enrichment failed for 1 of 6 documents)"),
        ((Act.answer('{"questions": ["Q ?", "Q ?"]}'),), "ok"),
    ],
    ids=["500-after-retries", "no-questions", "malformed-http-body", "duplicates-kept-once"],
)
def test_gemini_enrichment_faults(
    gemini_server: FakeGeminiServer, gemini: GeminiGenerator, acts: tuple[Act, ...], status: str
) -> None:
    served(gemini_server, *acts)
    method = EnrichMethod(gemini, workers=1)  # the first document's call meets the acts
    rankings = method.rank(make_context())
    assert [r.status for r in rankings] == [status] * 3
    first = [] if status != "ok" else ["Q ?"]
    assert method.questions["proc-restauration"] == first
    assert method.questions["proc-purge"] == ["Que dit « Purger le cache » ?"]


def test_openai_enrichment(openai_server: FakeOpenAIServer, chat: OpenAIChat) -> None:
    served(openai_server)
    method = EnrichMethod(chat, workers=3)
    rankings = method.rank(make_context())
    assert [r.status for r in rankings] == ["ok"] * 3
    assert method.questions == {d.id: fixture_questions(d.title) for d in DOCUMENTS}
    assert len(openai_server.requests) == 6
