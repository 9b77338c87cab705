"""The pointwise LLM reranker: its prompt, how a yes/no answer and its log-probabilities become a
score, the OpenAI-compatible and Gemini requests, the degraded path, and a run recorded against
local protocol servers (their answers are FIXTURES, never a model's) and replayed without them."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import numpy as np
import pytest
from demo_fixture import DEMO_DATA, demo_dataset
from fake_embeddings import FakeEmbeddingsServer
from fake_embeddings import make_profile as embedding_profile
from fake_servers import (
    FAST_RETRY,
    Act,
    FakeGeminiServer,
    FakeOpenAIServer,
    clean_gemini_env,
    fixture_relevance,
    gemini_profile,
    openai_profile,
    pointwise_parts,
)

from retrieval.config import Settings
from retrieval.data.dataset import Dataset, Document, Question
from retrieval.evaluation.evaluate import evaluate
from retrieval.methods.base import Context
from retrieval.methods.prompts import TEXT_CHARS, render_pointwise_prompt
from retrieval.methods.rerank_pointwise import TOP_LOGPROBS, PointwiseRerankMethod, relevance
from retrieval.providers.base import MissingKeyError, ProviderError, ReplayMissError, ShortAnswer
from retrieval.providers.gemini import GeminiGenerator
from retrieval.providers.http import new_client
from retrieval.providers.openai_chat import OpenAIChat
from retrieval.report.build import build_report
from retrieval.run.cost import Usage
from retrieval.run.ranking import Ranking

# --- the prompt and the score ----------------------------------------------------------------------


def test_the_prompt_holds_the_question_and_one_passage() -> None:
    prompt = render_pointwise_prompt("  Comment   exporter ?\n", "Factures", "Menu\nFactures,  bouton PDF.")
    assert prompt == (
        "You judge search results for a question-answering system.\n\nQuestion:\nComment exporter ?\n\n"
        "Passage:\nFactures\nMenu Factures, bouton PDF.\n\nDoes the passage contain the information needed to "
        "answer the question? Sharing words with the question is not enough. Answer with one word: yes or no.\n"
    )
    assert pointwise_parts(prompt) == ("Comment exporter ?", "Factures\nMenu Factures, bouton PDF.")
    long = render_pointwise_prompt("q", "", "x" * (TEXT_CHARS + 50))
    assert "Passage:\n" + "x" * TEXT_CHARS + " […]\n" in long  # no title line, the text cut as the listwise prompt's


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (ShortAnswer("Yes", {"Yes": math.log(0.6), "No": math.log(0.2), "The": math.log(0.1)}), 0.75),
        # Spellings of one word count together: case, a leading space, SentencePiece's and BPE's marks.
        (ShortAnswer("No", {"▁yes": math.log(0.1), " Yes": math.log(0.1), "ĠNO.": math.log(0.6)}), 0.25),
        (ShortAnswer("No", {"No": math.log(0.9), "Maybe": math.log(0.1)}), 0.0),
        (ShortAnswer("yes", {"no": -math.inf, "yes": math.log(0.5)}), 1.0),
        # No log-probabilities naming yes or no: the answer's text decides.
        (ShortAnswer(" Yes."), 1.0),
        (ShortAnswer("no, it does not", {"The": -0.1}), 0.0),
    ],
)
def test_relevance_is_p_yes_among_yes_and_no(answer: ShortAnswer, expected: float) -> None:
    assert relevance(answer) == pytest.approx(expected)


def test_an_answer_that_is_neither_yes_nor_no_is_unparseable() -> None:
    with pytest.raises(ProviderError, match="answered 'Perhaps', neither yes nor no") as caught:
        relevance(ShortAnswer("Perhaps", {"Perhaps": -0.1, "Maybe": -2.0}))
    assert caught.value.reason == "unparseable"


# --- the providers ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    # No test here is about a timeout: a loaded machine must not turn a slow answer into one.
    # The package's shared TLS context: an httpx.Client loads the certificate store for its own (~20 ms).
    with new_client(10.0) as client:
        yield client


PROMPT = render_pointwise_prompt("exporter les factures", "", "exporter les factures en PDF")


def test_openai_compatible_servers_are_asked_for_the_first_tokens_log_probabilities(http: httpx.Client) -> None:
    with FakeOpenAIServer() as server:
        chat = OpenAIChat(openai_profile(server.url), retry=FAST_RETRY, client=http)
        answer = chat.generate_short(PROMPT, TOP_LOGPROBS)
        server.script(Act.answer("no"))  # a server that returns no log-probabilities
        plain = chat.generate_short(PROMPT, TOP_LOGPROBS)
        first = server.requests[0]
    assert first.body == {
        "model": "fixture-chat-model",
        "messages": [{"role": "user", "content": PROMPT}],
        "temperature": 0,
        "max_tokens": 1,
        "logprobs": True,
        "top_logprobs": 5,
    }
    p = fixture_relevance("exporter les factures", "exporter les factures en PDF")
    assert answer.text == "Yes" and answer.first_token_logprobs is not None
    assert answer.first_token_logprobs["Yes"] == pytest.approx(math.log(p))
    assert relevance(answer) == pytest.approx(p / (p + p / 50 + (1 - p)) + p / 50 / (p + p / 50 + (1 - p)))
    assert plain == ShortAnswer("no", None) and relevance(plain) == 0.0
    assert chat.usage.calls == 2


def test_gemini_is_asked_for_response_logprobs(monkeypatch: pytest.MonkeyPatch) -> None:
    clean_gemini_env(monkeypatch)
    with FakeGeminiServer() as server:
        generator = GeminiGenerator(gemini_profile(server.url, timeout=10.0), retry=FAST_RETRY)
        answer = generator.generate_short(PROMPT, TOP_LOGPROBS)
        config = server.requests[0].body["generationConfig"]
    assert config == {"temperature": 0.0, "responseLogprobs": True, "logprobs": 5}
    p = fixture_relevance("exporter les factures", "exporter les factures en PDF")
    assert answer.text == "Yes" and answer.first_token_logprobs is not None
    assert set(answer.first_token_logprobs) == {"Yes", "No", " yes", "The"}
    assert relevance(answer) == pytest.approx((p + p / 50) / (p + p / 50 + 1 - p))


# --- the method over a hand-made pool ----------------------------------------------------------------


class StubJudge:
    """FIXTURE ShortAnswerProvider in process: P(yes) by document text, or the error it maps to."""

    provider = "stub"
    model = "stub-judge"

    def __init__(self, answers: dict[str, float | BaseException]) -> None:
        self.answers = answers
        self.usage = Usage()

    def generate_short(self, prompt: str, top_logprobs: int) -> ShortAnswer:
        self.usage.add(1, 10, 1)
        parts = pointwise_parts(prompt)
        assert parts is not None and top_logprobs == TOP_LOGPROBS
        answer = self.answers[parts[1]]
        if isinstance(answer, BaseException):
            raise answer
        return ShortAnswer("Yes", {"Yes": math.log(answer), "No": math.log(1 - answer)})


def pool_context(texts: list[str], questions: int = 2) -> Context:
    documents = tuple(Document(f"d{i}", "", text) for i, text in enumerate(texts))
    asked = tuple(Question(f"q{n}", f"question {n}", "t", ("d0",)) for n in range(questions))
    context = Context(dataset=Dataset("pool", documents, asked, "fixture"), depth=len(texts))
    order = np.arange(len(texts), dtype=np.int64)
    context.rankings["hybrid"] = [Ranking(order, np.linspace(1, 0.5, len(texts))) for _ in asked]
    return context


def test_the_pool_is_ordered_by_relevance_with_ties_in_hybrid_order() -> None:
    judge = StubJudge({"a": 0.2, "b": 0.9, "c": 0.2, "d": 0.7, "e": 0.99})
    rankings = PointwiseRerankMethod(judge, candidates=4, workers=3).rank(pool_context(["a", "b", "c", "d", "e"]))
    for ranking in rankings:
        assert ranking.indices.tolist() == [1, 3, 0, 2, 4]  # "e" is beyond the pool: it stays fifth
        assert ranking.scores.tolist() == [5.0, 4.0, 3.0, 2.0, 1.0] and ranking.status == "ok"
    assert judge.usage.calls == 8  # one call per candidate and question


def test_a_failed_call_keeps_its_questions_hybrid_order_degraded() -> None:
    judge = StubJudge({"a": 0.2, "b": 0.9, "c": ProviderError("chat: HTTP 500", "http 500")})
    context = pool_context(["a", "b", "c"], questions=1)
    (ranking,) = PointwiseRerankMethod(judge, candidates=3).rank(context)
    assert ranking.status == "degraded: http 500" and ranking.indices.tolist() == [0, 1, 2]
    assert ranking.scores.tolist() == context.rankings["hybrid"][0].scores.tolist()


@pytest.mark.parametrize("error", [ReplayMissError("no recorded answer", "replay miss"), MissingKeyError(["K"], "x")])
def test_a_setup_problem_is_raised_not_degraded(error: ProviderError) -> None:
    judge = StubJudge({"a": 0.2, "b": error})
    with pytest.raises(type(error)):
        PointwiseRerankMethod(judge, candidates=2).rank(pool_context(["a", "b"], questions=1))


def test_a_pool_of_one_makes_no_call() -> None:
    judge = StubJudge({})
    context = pool_context(["a", "b"], questions=1)
    context.rankings["hybrid"] = [Ranking(np.array([1]), np.array([1.0]))]
    assert PointwiseRerankMethod(judge).rank(context)[0].indices.tolist() == [1] and judge.usage.calls == 0


# --- a whole run, recorded and replayed --------------------------------------------------------------


def test_record_then_replay_listwise_and_pointwise_side_by_side(tmp_path: Path) -> None:
    demo = demo_dataset()
    dataset = replace(demo, questions=demo.questions[:3])
    prices = {"fixture-chat-model": {"input": 0.1, "output": 0.4}, "fixture-e5": {"input": 0.0}}
    with FakeEmbeddingsServer() as embedder, FakeOpenAIServer() as chat:
        llm = openai_profile(chat.url).llm
        settings = Settings(
            dataset=str(DEMO_DATA),
            profile=replace(embedding_profile(embedder.url), llm=llm),
            methods=("hybrid", "rerank", "rerank_pointwise"),
            cassettes=str(tmp_path / "cassettes"),
            cache=str(tmp_path / "cache"),
            prices=prices,
            candidates=5,
        )
        # rerank's 3 calls come first; then the first pointwise call answers neither yes nor no,
        # without log-probabilities (as a server that has none).
        chat.script(Act(), Act(), Act(), Act.answer("Perhaps"))
        recorded = evaluate(dataset, settings, mode="record")
    replayed = evaluate(dataset, settings, mode="replay")  # both servers stopped

    for method in replayed.methods:
        assert replayed.ranked_ids(method) == recorded.ranked_ids(method)
    degraded = replayed.degraded("rerank_pointwise")
    assert list(degraded.values()) == ["unparseable"] and degraded == recorded.degraded("rerank_pointwise")
    for result in replayed.results:
        hybrid = result.methods["hybrid"].ids
        if result.question.id in degraded:
            assert result.methods["rerank_pointwise"].ids == hybrid[: len(result.methods["rerank_pointwise"].ids)]
            continue
        pool = hybrid[:5]
        by_relevance = sorted(
            pool, key=lambda d: (-fixture_relevance(result.question.text, _passage(d)), pool.index(d))
        )
        assert result.methods["rerank_pointwise"].ids[:6] == [*by_relevance, hybrid[5]]
    folder = tmp_path / "cassettes" / "fixture"
    assert (folder / "rerank_pointwise-fixture-chat-model.json").is_file()
    assert (folder / "rerank-fixture-chat-model.json").is_file()
    cost = {row.method: row for row in build_report(replayed, dataset.documents, prices).cost}
    assert replayed.usage["rerank_pointwise"].calls == 5 * len(dataset.questions)
    assert replayed.usage["rerank"].calls == len(dataset.questions)
    pointwise, listwise = cost["rerank_pointwise"].cost, cost["rerank"].cost
    assert pointwise is not None and listwise is not None and pointwise > 0 and listwise > 0


def _passage(doc_id: str) -> str:
    document = next(d for d in demo_dataset().documents if d.id == doc_id)
    prompt = render_pointwise_prompt("q", document.title, document.text)
    parts = pointwise_parts(prompt)
    assert parts is not None
    return parts[1]
