"""Pointwise LLM reranking of the hybrid candidates: one yes/no question per candidate, scored by
the model's log-probabilities where the server returns them.

The listwise reranker (retrieval.methods.rerank) asks a model to order 20 candidates in one answer;
a small model tends to give them back in the order it read them. Asked of one passage at a time
whether it answers the question, the same model can still tell: each candidate scores P(yes) /
(P(yes) + P(no)) from the likeliest first tokens of its answer (OpenAI-compatible `top_logprobs`,
Gemini's `responseLogprobs`), and the pool is ordered by that score, ties in hybrid's order. A
server that returns no log-probabilities scores "yes" 1 and "no" 0 from the answer's text: the
relevant candidates first, each group in hybrid's order.

Degraded mode, as for the listwise reranker: a question one of whose calls fails (an HTTP error
after retries, a timeout, a blocked or empty answer, an answer that is neither yes nor no without
log-probabilities to read) keeps its hybrid order, "degraded: <reason>". It costs `candidates`
calls a question instead of one: the cost section counts them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from retrieval.config import Settings
from retrieval.methods.base import Context
from retrieval.methods.prompts import POINTWISE_PROMPT_VERSION, render_pointwise_prompt
from retrieval.methods.support.llm import ask_or_degrade, channel_for
from retrieval.methods.support.reranking import CandidateReranker, degraded, reordered
from retrieval.providers.base import ProviderError, ShortAnswer, ShortAnswerProvider
from retrieval.run.cost import Usage
from retrieval.run.ranking import Ranking

if TYPE_CHECKING:
    from retrieval.data.dataset import Document, Question

__all__ = ["TOP_LOGPROBS", "PointwiseRerankMethod", "factory", "relevance"]

# How many first-token alternatives are asked for: "yes" and "no" are among the likeliest few
# whatever the model answered ("Yes", " yes", "YES" count together).
TOP_LOGPROBS = 5
_EDGES = re.compile(r"^[\W_▁Ġ]+|[\W_]+$")


def _word(token: str) -> str:
    """A token or an answer as the word it spells: case folded, without the leading space marks of
    SentencePiece (▁) and byte-level BPE (Ġ) and the punctuation around it."""
    words = _EDGES.sub("", token.strip()).lower().split()
    return _EDGES.sub("", words[0]) if words else ""


def relevance(answer: ShortAnswer) -> float:
    """How surely the answer says yes, from 0 to 1: P(yes) / (P(yes) + P(no)) over the first
    token's alternatives when the server returned some naming yes or no, else 1 for an answer
    that is "yes" and 0 for "no". ProviderError "unparseable" for any other answer."""
    alternatives: Mapping[str, float] = answer.first_token_logprobs or {}
    yes = sum(math.exp(lp) for token, lp in alternatives.items() if _word(token) == "yes")
    no = sum(math.exp(lp) for token, lp in alternatives.items() if _word(token) == "no")
    if yes + no > 0:
        return yes / (yes + no)
    word = _word(answer.text)
    if word in ("yes", "no"):
        return 1.0 if word == "yes" else 0.0
    raise ProviderError(f"pointwise reranker answered {answer.text[:60]!r}, neither yes nor no", "unparseable")


class PointwiseRerankMethod(CandidateReranker):
    """Scores each of the top candidates of another method (hybrid by default) with a yes/no
    question and reorders them by that score. `workers` bounds the concurrent calls over every
    (question, candidate) pair. Its calls go to their own cassette, one per model."""

    name = "rerank_pointwise"

    def __init__(
        self, generator: ShortAnswerProvider, candidates: int = 20, workers: int = 8, source: str = "hybrid"
    ) -> None:
        super().__init__(candidates, workers, source)
        self.generator = generator
        self.model = generator.model
        self.cost_model = generator.model
        self.channel = channel_for("rerank_pointwise", generator.model)

    @property
    def usage(self) -> Usage:
        return self.generator.usage

    @property
    def config(self) -> dict[str, object]:
        """Recorded in the baseline configuration."""
        return {
            "model": self.model,
            "prompt": POINTWISE_PROMPT_VERSION,
            "candidates": self.candidates,
            "top_logprobs": TOP_LOGPROBS,
        }

    def judge(self, question: Question, document: Document) -> float:
        """One candidate's relevance to the question (`relevance` of the model's answer)."""
        prompt = render_pointwise_prompt(question.text, document.title, document.text)
        return relevance(self.generator.generate_short(prompt, TOP_LOGPROBS))

    def rank(self, context: Context) -> list[Ranking]:
        """One Ranking per question, in dataset order; every (question, candidate) pair is one call,
        `workers` at a time; a question with a failed call keeps its source order, degraded."""
        source = self.source_rankings(context)
        questions, documents = context.dataset.questions, context.dataset.documents
        context.usage[self.name] = self.usage
        # Fewer than 2 candidates: nothing to reorder, no call.
        pools: list[list[int]] = [
            [int(i) for i in ranking.indices[: self.candidates]] if len(ranking) >= 2 else [] for ranking in source
        ]
        pairs = [(qi, i) for qi, pool in enumerate(pools) for i in pool]

        def one(n: int) -> float | ProviderError:
            qi, index = pairs[n]
            what = f"{self.name} of question {questions[qi].id} and document {documents[index].id}"
            return ask_or_degrade(lambda: self.judge(questions[qi], documents[index]), what, self.model)

        judged = self.map(context, one, len(pairs))
        rankings, start = [], 0
        for qi, pool in enumerate(pools):
            scores, start = judged[start : start + len(pool)], start + len(pool)
            failed = next((s for s in scores if isinstance(s, ProviderError)), None)
            if not pool:
                rankings.append(source[qi])
            elif failed is not None:
                rankings.append(degraded(source[qi], failed))
            else:
                values = [float(s) for s in scores if not isinstance(s, ProviderError)]
                rankings.append(reordered(source[qi], sorted(range(len(pool)), key=lambda p: (-values[p], p))))
        return rankings


def factory(settings: Settings, *, replay: bool = False) -> PointwiseRerankMethod:
    """The pointwise reranker with the profile's LLM; unavailable when the profile names none."""
    from retrieval.methods.support.llm import generator_or_unavailable

    generator = generator_or_unavailable(settings, replay, "rerank_pointwise", "rerank_pointwise")
    if not hasattr(generator, "generate_short"):
        from retrieval.methods.base import MethodUnavailable

        raise MethodUnavailable(f"the {generator.provider} provider gives no short answers with log-probabilities")
    return PointwiseRerankMethod(generator, candidates=settings.candidates, workers=settings.profile.llm.workers)  # type: ignore[arg-type]
