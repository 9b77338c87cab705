"""Query rewriting (the seed's remedy for a question that shares no word with its document):
an LLM rewrites each question, then bm25 and vector search with the rewritten question and
reciprocal rank fusion merges them, as hybrid does for the original questions.

One call per question (bounded concurrency, the reranker's workers), then one batched
embedding call for the rewritten questions; all of them go to this method's cassette
(`rewrite-<model>`), so replaying needs no key. Degraded mode: a question whose rewrite
failed (timeout, HTTP error, empty or unparseable answer) is searched as written, with
status "degraded: <reason>"; its vector is the shared question embedding. A missing key or
a replay miss is raised, never degraded.

Cost: the LLM calls and the embedding call of the rewritten questions are counted in this
method's usage (calls and tokens). The row is priced at the LLM's prices (`cost_model`), so
the few embedding tokens are priced as LLM input tokens: a slight over-estimate.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from retrieval.config import Settings
from retrieval.data.dataset import Question
from retrieval.methods.base import Context
from retrieval.methods.hybrid import HybridSearch
from retrieval.methods.prompts.rewrite import REWRITE_SCHEMA, REWRITE_VERSION, parse_rewrite, render_rewrite_prompt
from retrieval.methods.support.llm import ask_or_degrade, channel_for, generator_or_unavailable, map_in_order
from retrieval.providers.base import GenerationProvider, ProviderError
from retrieval.run.cost import Usage
from retrieval.run.ranking import Ranking

__all__ = ["RewriteMethod", "factory"]


SCHEMA_NAME = "rewrite"


class RewriteMethod:
    """Hybrid (bm25 + vector, RRF) over LLM-rewritten questions. `rewrites` keeps, after `rank`,
    the text searched for each question (the original one where the rewrite failed)."""

    name = "rewrite"
    requires: tuple[str, ...] = ()
    needs_vectors = True
    calls = "http"
    degradable = True

    def __init__(self, generator: GenerationProvider, workers: int = 8, search: HybridSearch | None = None) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.generator = generator
        self.search = search or HybridSearch()
        self.workers = workers
        self.cost_model = generator.model
        self.channel = channel_for("rewrite", generator.model)
        self.rewrites: list[str] = []

    @property
    def config(self) -> dict[str, Any]:
        """Recorded in the baseline configuration."""
        model = self.generator.model
        return {"model": model, "prompt": REWRITE_VERSION, **self.search.config}

    def rank(self, context: Context) -> list[Ranking]:
        """One fused ranking per question, in dataset order, over the rewritten questions."""
        if context.question_vectors is None or context.document_vectors is None or context.embed is None:
            raise RuntimeError("rewrite run without embeddings: the evaluator must embed first")
        questions = context.dataset.questions
        llm = self.generator.usage
        before = (llm.calls, llm.input_tokens, llm.output_tokens)
        bar = context.progress(len(questions), "rewrite") if context.progress and questions else None
        searched = map_in_order(lambda qi: self._rewrite(questions[qi]), len(questions), self.workers, bar)
        self.rewrites = [text for text, _ in searched]

        # Only the questions whose text changed are embedded, in one batched call (question order).
        vectors = np.array(context.question_vectors, copy=True)
        changed = [qi for qi, (text, status) in enumerate(searched) if status == "ok" and text != questions[qi].text]
        spent = Usage()
        if changed:
            new, spent = context.embed([searched[qi][0] for qi in changed], "query")
            vectors[changed] = new
        usage = Usage()
        usage.add(llm.calls - before[0], llm.input_tokens - before[1], llm.output_tokens - before[2])
        usage.add(spent.calls, spent.input_tokens, spent.output_tokens)
        context.usage[self.name] = usage

        rewritten = replace(
            context.dataset,
            questions=tuple(replace(q, text=text) for q, (text, _) in zip(questions, searched, strict=True)),
        )
        statuses = [status for _, status in searched]
        return self.search.rank(rewritten, vectors, context.document_vectors, context.depth, statuses)

    def _rewrite(self, question: Question) -> tuple[str, str]:
        """(text to search, status): the rewrite, or the question itself with the failure's reason."""
        rewritten = ask_or_degrade(
            lambda: parse_rewrite(
                self.generator.generate_json(render_rewrite_prompt(question.text), REWRITE_SCHEMA, SCHEMA_NAME)
            ),
            f"rewrite of question {question.id}",
            self.generator.model,
        )
        if isinstance(rewritten, ProviderError):  # searched as written
            return question.text, f"degraded: {rewritten.reason}"
        return rewritten, "ok"


def factory(settings: Settings, *, replay: bool = False) -> RewriteMethod:
    """Query rewriting with the profile's LLM; unavailable without one, or in replay when not recorded."""
    generator = generator_or_unavailable(settings, replay, "rewrite", "rewrite")
    return RewriteMethod(generator, workers=settings.profile.llm.workers, search=HybridSearch.from_settings(settings))
