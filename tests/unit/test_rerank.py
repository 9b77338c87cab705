"""The rerank method: strict parsing, prompt determinism, degraded mode, bounded concurrency.

End-to-end cases go through the real providers against local fake servers, whose
answers are test fixtures (see fake_servers.py), never a baseline.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fake_servers import (
    Act,
    FakeGeminiServer,
    FakeOpenAIServer,
    StubGenerator,
    gemini_profile,
    openai_profile,
    prompt_candidate_ids,
)
from fake_servers import clean_gemini_env as clean_env

from retrieval.config import ConfigError, Profile, flat_profile
from retrieval.data.dataset import Dataset, Document, Question
from retrieval.methods.base import Context
from retrieval.methods.prompts import PROMPT_VERSION, TEXT_CHARS, render_rerank_prompt, rerank_prompt_chars
from retrieval.methods.rerank import RerankMethod, parse_ranking
from retrieval.providers import make_embedder, make_generator, required_key
from retrieval.providers.base import GenerationProvider, MissingKeyError, ProviderError, ReplayMissError
from retrieval.providers.gemini import GeminiGenerator
from retrieval.providers.openai_chat import OpenAIChat
from retrieval.run.cost import Usage
from retrieval.run.ranking import Ranking

N_DOCS = 30
N_QUESTIONS = 25
CANDIDATES = 5


# fixture data ------------------------------------------------------------------------------


def make_dataset(n_questions: int = N_QUESTIONS) -> Dataset:
    documents = tuple(
        Document(f"d{i:02d}", f"Doc {i}", f"text of document {i} " + ("long " * 400 if i == 0 else ""))
        for i in range(N_DOCS)
    )
    questions = tuple(Question(f"q{i:02d}", f"question {i}?", "paraphrase", ("d00",)) for i in range(n_questions))
    return Dataset("fixture", documents, questions, "sha256:fixture")


def hybrid_ranking(qi: int) -> Ranking:
    """A hand-made hybrid ranking, different for every question: the corpus rotated by qi."""
    indices = np.roll(np.arange(N_DOCS), -qi)
    return Ranking(indices, 1.0 / (61.0 + np.arange(N_DOCS)))


def make_context(n_questions: int = N_QUESTIONS, progress: Any = None) -> Context:
    dataset = make_dataset(n_questions)
    rankings = {"hybrid": [hybrid_ranking(qi) for qi in range(n_questions)]}
    return Context(dataset=dataset, depth=N_DOCS, rankings=rankings, progress=progress)


def ids_of(context: Context, ranking: Ranking) -> list[str]:
    return [context.dataset.documents[i].id for i in ranking.indices]


def reversed_answer(prompt: str) -> str:
    return json.dumps({"ranking": prompt_candidate_ids(prompt)[::-1]})


# parse_ranking ------------------------------------------------------------------------------

IDS = ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"ranking": ["d", "c", "b", "a"]}', ["d", "c", "b", "a"]),
        ('{"ranking": ["c"]}', ["c", "a", "b", "d"]),  # partial: the rest in hybrid order
        ('{"ranking": ["x", "b", "y"]}', ["b", "a", "c", "d"]),  # unknown ids dropped
        ('{"ranking": ["b", "b", "a", "b"]}', ["b", "a", "c", "d"]),  # duplicates removed
        ('{"ranking": ["c", 7, null, {"id": "a"}], "why": "x"}', ["c", "a", "b", "d"]),
    ],
    ids=["full", "partial", "unknown-ids", "duplicates", "junk-items"],
)
def test_parse_ranking(raw: str, expected: list[str]) -> None:
    assert parse_ranking(raw, IDS) == expected


def test_parse_ranking_reads_integer_ids() -> None:
    assert parse_ranking('{"ranking": [12, "3"]}', ["3", "12", "40"]) == ["12", "3", "40"]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("not json", "unparseable"),
        ('```json\n{"ranking": ["a"]}\n```', "unparseable"),
        ('["a", "b"]', "unparseable"),
        ('{"order": ["a"]}', "unparseable"),
        ('{"ranking": "a, b"}', "unparseable"),
        ('{"ranking": []}', "no valid ids"),
        ('{"ranking": ["x", "y"]}', "no valid ids"),
    ],
    ids=["not-json", "fenced", "list", "no-key", "not-a-list", "empty-list", "only-unknown"],
)
def test_parse_ranking_rejects(raw: str, reason: str) -> None:
    with pytest.raises(ProviderError) as info:
        parse_ranking(raw, IDS)
    assert info.value.reason == reason


# prompt ------------------------------------------------------------------------------


def test_prompt_is_deterministic_versioned_and_truncated() -> None:
    candidates = [("d00", "Doc 0", "a\n  b " + "x" * 5000), ("d01", "", "short text")]
    first = render_rerank_prompt("Which {one}? $HOME", candidates)
    assert first == render_rerank_prompt("Which {one}? $HOME", list(candidates))
    assert "Which {one}? $HOME" in first  # user text is never interpreted as template syntax
    assert prompt_candidate_ids(first) == ["d00", "d01"]
    assert "a b " + "x" * (TEXT_CHARS - 4) + " […]" in first and "x" * (TEXT_CHARS - 3) not in first
    assert "return the ids of the candidate documents ordered by relevance to the question" in first
    template = resources.files("retrieval.methods.prompts").joinpath(f"{PROMPT_VERSION}.txt")
    assert template.is_file()


# the method with an in-process generator ---------------------------------------------------


def test_prompt_chars_are_the_rendered_prompts_lengths() -> None:
    # The sweeps count tokens from these lengths without rendering: any layout drift shows here.
    long_text = "Mot " * 400 + "fin"
    candidates = [
        ("HEL-4010", "HEL-4010 : Jeton expiré", "Le jeton\n\nexpire après  90 jours."),
        ("d2", "", "sans titre"),
        ("d3", "   ", long_text),
        ("é-ü", "Titre\navec saut", "x" * (TEXT_CHARS + 5)),
        *[(f"doc-{i}", f"t{i}", f"texte {i} " * i) for i in range(4, 13)],
    ]
    for question in ("Que faire de $count et ${question} ?", "  plusieurs\n lignes  ", ""):
        expected = [len(render_rerank_prompt(question, candidates[:n])) for n in range(len(candidates) + 1)]
        assert rerank_prompt_chars(question, candidates) == expected


def test_rerank_reorders_candidates_then_keeps_the_rest_of_hybrid() -> None:
    bars: list[FakeBar] = []

    def progress(total: int, label: str) -> FakeBar:
        bars.append(FakeBar(total, label))
        return bars[-1]

    context = make_context(3, progress=progress)
    generator = StubGenerator(reversed_answer)
    method = RerankMethod(generator, candidates=CANDIDATES, workers=2)
    assert (method.name, method.requires, method.needs_vectors) == ("rerank", ("hybrid",), False)

    rankings = method.rank(context)

    assert len(rankings) == 3
    for qi, ranking in enumerate(rankings):
        hybrid = ids_of(context, context.rankings["hybrid"][qi])
        assert ids_of(context, ranking) == hybrid[:CANDIDATES][::-1] + hybrid[CANDIDATES:]
        assert ranking.status == "ok"
        assert np.all(np.diff(ranking.scores) < 0)
    # The model read exactly the top candidates, in hybrid order.
    assert sorted(prompt_candidate_ids(p) for p in generator.prompts) == sorted(
        ids_of(context, context.rankings["hybrid"][qi])[:CANDIDATES] for qi in range(3)
    )
    assert context.usage["rerank"] is generator.usage and generator.usage.calls == 3
    (bar,) = bars
    assert (bar.total, bar.label, bar.updates, bar.closed) == (3, "rerank", 3, True)


def test_a_failed_question_keeps_hybrid_order_and_says_why() -> None:
    context = make_context(3)

    def reply(prompt: str) -> str | BaseException:
        if "question 1?" in prompt:
            return ProviderError("fixture outage", "timeout")
        return reversed_answer(prompt)

    rankings = RerankMethod(StubGenerator(reply), candidates=CANDIDATES).rank(context)
    assert [r.status for r in rankings] == ["ok", "degraded: timeout", "ok"]
    hybrid = context.rankings["hybrid"][1]
    np.testing.assert_array_equal(rankings[1].indices, hybrid.indices)
    np.testing.assert_array_equal(rankings[1].scores, hybrid.scores)


@pytest.mark.parametrize(
    "error",
    [
        MissingKeyError(["GEMINI_API_KEY"], "gemini"),
        ReplayMissError("no recorded answer", "replay miss"),
    ],
    ids=["missing-key", "replay-miss"],
)
def test_setup_errors_are_raised_never_degraded(error: ProviderError) -> None:
    generator = StubGenerator(lambda prompt: error)
    with pytest.raises(type(error)):
        RerankMethod(generator, candidates=CANDIDATES, workers=4).rank(make_context(10))


def test_an_error_that_is_a_bug_is_raised() -> None:
    generator = StubGenerator(lambda prompt: KeyError("bug"))
    with pytest.raises(KeyError):
        RerankMethod(generator, candidates=CANDIDATES).rank(make_context(2))


def test_a_single_candidate_needs_no_call() -> None:
    context = make_context(1)
    context.rankings["hybrid"] = [Ranking(np.array([4]), np.array([0.5]))]
    generator = StubGenerator(reversed_answer)
    (ranking,) = RerankMethod(generator).rank(context)
    assert ranking.status == "ok" and list(ranking.indices) == [4] and generator.usage.calls == 0


class FakeBar:
    def __init__(self, total: int, label: str) -> None:
        self.total, self.label, self.updates, self.closed = total, label, 0, False

    def update(self, n: int = 1) -> None:
        self.updates += n

    def close(self) -> None:
        self.closed = True


# end to end through the providers and fake servers ------------------------------------------


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    clean_env(monkeypatch)


def hybrid_ids(qi: int) -> list[str]:
    return [f"d{i:02d}" for i in hybrid_ranking(qi).indices]


# (name, scripted acts for question 0, expected status, expected top ids of question 0 or None)
FAULTS: list[tuple[str, tuple[Act, ...], str, list[str] | None]] = [
    (
        "429-then-200",
        (Act.http(429), Act.answer('{"ranking": ["d04", "d03"]}')),
        "ok",
        ["d04", "d03", "d00"],
    ),
    ("500-after-retries", (Act.http(500), Act.http(500)), "degraded: http 500", None),
    ("400-not-retried", (Act.http(400),), "degraded: http 400", None),
    ("timeout", (Act.hang(),), "degraded: timeout", None),
    ("malformed-http-body", (Act.malformed(),), "degraded: bad json", None),
    ("malformed-answer", (Act.answer('{"ranking": ["d01", '),), "degraded: unparseable", None),
    (
        "ids-not-in-candidates",
        (Act.answer('{"ranking": ["d29", "zz", "d02", "d02"]}'),),
        "ok",
        ["d02", "d00", "d01"],
    ),
    (
        "only-unknown-ids",
        (Act.answer('{"ranking": ["zz", "d29"]}'),),
        "degraded: no valid ids",
        None,
    ),
    (
        "partial-list",
        (Act.answer('{"ranking": ["d03"]}'),),
        "ok",
        ["d03", "d00", "d01", "d02", "d04"],
    ),
    ("empty-answer", (Act.empty(),), "degraded: empty", None),
    ("safety-blocked", (Act.blocked(),), "degraded: blocked", None),
    ("prompt-blocked", (Act.prompt_blocked(),), "degraded: blocked", None),
]


@pytest.mark.parametrize(("acts", "status", "top"), [f[1:] for f in FAULTS], ids=[f[0] for f in FAULTS])
def test_gemini_fault_outcomes(
    gemini_server: FakeGeminiServer,
    gemini: GeminiGenerator,
    gemini_first_unanswered: GenerationProvider,
    acts: tuple[Act, ...],
    status: str,
    top: list[str] | None,
) -> None:
    gemini_server.reset()
    gemini_server.script(*acts)
    generator = gemini_first_unanswered if status == "degraded: timeout" else gemini
    context = make_context(2)
    # One worker: the scripted acts meet question 0's call, in order.
    rankings = RerankMethod(generator, candidates=CANDIDATES, workers=1).rank(context)
    assert rankings[0].status == status
    got = ids_of(context, rankings[0])
    if top is None:
        assert got == hybrid_ids(0)
    else:
        assert got[: len(top)] == top and sorted(got[:CANDIDATES]) == hybrid_ids(0)[:CANDIDATES]
        assert got[CANDIDATES:] == hybrid_ids(0)[CANDIDATES:]
    assert rankings[1].status == "ok"  # the other question is unaffected
    assert gemini_server.pending_acts == 0


@pytest.mark.parametrize(
    ("acts", "status"),
    [
        ((Act.http(503), Act.http(503)), "degraded: http 503"),
        ((Act.malformed(),), "degraded: bad json"),
        ((Act.answer("Sure! Here is the ranking: d01, d02"),), "degraded: unparseable"),
        ((Act.empty(),), "degraded: empty"),
        ((Act.blocked(),), "degraded: blocked"),
        ((Act.http(429), Act.answer('{"ranking": ["d01"]}')), "ok"),
    ],
    ids=[
        "503-after-retries",
        "malformed-http-body",
        "prose-answer",
        "empty",
        "content-filter",
        "429-then-200",
    ],
)
def test_openai_fault_outcomes(
    openai_server: FakeOpenAIServer, chat: OpenAIChat, acts: tuple[Act, ...], status: str
) -> None:
    openai_server.reset()
    openai_server.script(*acts)
    rankings = RerankMethod(chat, candidates=CANDIDATES, workers=1).rank(make_context(2))
    assert [r.status for r in rankings] == [status, "ok"]


def test_replay_miss_is_raised_not_degraded(gemini_server: FakeGeminiServer, tmp_path: Path) -> None:
    import vcr

    gemini_server.reset()
    generator = GeminiGenerator(gemini_profile(gemini_server.url), replay=True)
    method = RerankMethod(generator, candidates=CANDIDATES, workers=4)
    with (
        vcr.VCR(record_mode="none").use_cassette(str(tmp_path / "empty.yaml")),
        pytest.raises(ReplayMissError),
    ):
        method.rank(make_context(6))
    assert gemini_server.requests == []


class InFlight:
    """Wraps a generator and records the most calls it had running at once."""

    def __init__(self, inner: GeminiGenerator | StubGenerator) -> None:
        self.inner, self.provider, self.model = inner, inner.provider, inner.model
        self.usage = inner.usage
        self.now = self.most = 0
        self._lock = threading.Lock()

    def generate_json(self, prompt: str, schema: Mapping[str, Any], schema_name: str) -> str:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            return self.inner.generate_json(prompt, schema, schema_name)
        finally:
            with self._lock:
                self.now -= 1


def test_25_concurrent_calls_equal_sequential(gemini_server: FakeGeminiServer, gemini: GeminiGenerator) -> None:
    # Per-request latency of 0-4 ms from a hash of the body: calls finish out of order.
    def latency(body: bytes) -> float:
        return hashlib.sha256(body).digest()[0] / 255 * 0.004

    results = {}
    for workers in (1, 8):
        gemini_server.reset()
        gemini_server.latency = latency
        gemini.usage = Usage()
        context = make_context(N_QUESTIONS)
        counted = InFlight(gemini)
        results[workers] = RerankMethod(counted, candidates=CANDIDATES, workers=workers).rank(context)
        assert len(gemini_server.requests) == N_QUESTIONS and gemini.usage.calls == N_QUESTIONS
        assert context.usage["rerank"] is gemini.usage
        assert 1 <= counted.most <= workers
        if workers > 1:
            assert counted.most > 1  # the calls did overlap
    sequential, concurrent = results[1], results[8]
    for qi in range(N_QUESTIONS):
        assert concurrent[qi].status == sequential[qi].status == "ok"
        np.testing.assert_array_equal(concurrent[qi].indices, sequential[qi].indices)
        np.testing.assert_array_equal(concurrent[qi].scores, sequential[qi].scores)
    # The fixture answers really reorder (a hash shuffle may, rarely, keep an order).
    reranked = sum(
        list(r.indices[:CANDIDATES]) != list(hybrid_ranking(qi).indices[:CANDIDATES]) for qi, r in enumerate(concurrent)
    )
    assert reranked >= N_QUESTIONS - 2


# provider factories ------------------------------------------------------------------------------


def test_factories_dispatch_on_the_profile(openai_server: FakeOpenAIServer) -> None:
    gemini_generator = make_generator(gemini_profile("http://127.0.0.1:9"), replay=True)
    assert isinstance(gemini_generator, GeminiGenerator)
    gemini_generator.close()
    chat = make_generator(openai_profile(openai_server.url), replay=True)
    assert isinstance(chat, OpenAIChat)
    chat.close()
    assert make_generator(Profile("no-reranker"), replay=True) is None
    with pytest.raises(ConfigError, match=r"'odd'.*rerank_provider = 'cohere'.*openai, gemini"):
        make_generator(flat_profile("odd", rerank_provider="cohere", rerank_model="m"), replay=True)
    with pytest.raises(ConfigError, match=r"'odd'.*embedding_provider = 'voyage'"):
        make_embedder(flat_profile("odd", embedding_provider="voyage"), replay=True)


def test_required_key_names_what_a_live_run_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    clean_env(monkeypatch, key=None)
    assert required_key(gemini_profile("http://127.0.0.1:9")) == "GEMINI_API_KEY (or GOOGLE_API_KEY)"
    monkeypatch.setenv("GOOGLE_API_KEY", "fixture")
    assert required_key(gemini_profile("http://127.0.0.1:9")) is None
    assert required_key(openai_profile("http://x", api_key_env="FIXTURE_UNSET_KEY")) == ("FIXTURE_UNSET_KEY")


# wiring: settings reach the method, a fatal error stops the queue ---------------------------------


def test_settings_reach_the_reranker() -> None:
    """`candidates` and the profile's `rerank_workers` are what the built-in factory hands over:
    the model reads exactly that many documents, with at most that many calls in flight."""
    from retrieval.config import Settings
    from retrieval.methods.rerank import factory

    settings = Settings(candidates=3, profile=gemini_profile("http://127.0.0.1:9", rerank_workers=3))
    method = factory(settings, replay=True)
    method.generator.close()  # type: ignore[attr-defined]
    assert (method.candidates, method.workers, method.requires, method.channel) == (
        3,
        3,
        ("hybrid",),
        "rerank-gemini-3.5-flash",
    )
    counted = InFlight(StubGenerator(reversed_answer))
    method.generator = counted
    context = make_context(12)
    rankings = method.rank(context)
    for qi, ranking in enumerate(rankings):
        hybrid = ids_of(context, context.rankings["hybrid"][qi])
        assert ids_of(context, ranking) == hybrid[:3][::-1] + hybrid[3:]
    assert 1 <= counted.most <= 3


def test_a_fatal_error_cancels_the_queued_calls() -> None:
    """A missing key on the first call stops the run: the 24 queued questions are never sent."""
    import time

    def reply(prompt: str) -> str | BaseException:
        if "question 0?" in prompt:
            return MissingKeyError(["GEMINI_API_KEY"], "gemini")
        time.sleep(0.02)  # the other calls are slower, so the fatal error is seen first
        return reversed_answer(prompt)

    generator = StubGenerator(reply)
    with pytest.raises(MissingKeyError):
        RerankMethod(generator, candidates=CANDIDATES, workers=2).rank(make_context(N_QUESTIONS))
    # q00 failed; at most the calls already taken by the two workers went out, never all 25.
    assert 1 <= len(generator.prompts) <= 4
