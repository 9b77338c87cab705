"""Document enrichment (the seed's remedy for paraphrases): at indexing, an LLM writes the
questions each document answers; they are indexed with the document, for bm25 and for vector
(the enriched documents are embedded again), and the two are fused as hybrid fuses them.

Indexing cost, shown once: the LLM calls are the usage stage ENRICHMENT, the embeddings of the
enriched documents the stage ENRICHED_EMBEDDINGS, beside the shared "corpus embeddings"; each
question costs only the shared question embedding (the method's own row has no call). All
calls go to this method's cassette (`enrich-<model>`).

Cache: the questions are cached like the corpus embeddings (`<cache>/enrichment/`, keyed by the
document's content, the model and the prompt version), read in live runs only, filled when
recording: only new or changed documents are enriched. Documents with the same content are
enriched once.

Degraded mode: a document whose enrichment failed is indexed as written and is not cached;
every question's ranking then has the status "degraded: <reason> (enrichment failed for F of
N documents)", since every ranking was made over that partly enriched index. A missing key or
a replay miss is raised.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import replace
from typing import Any

import numpy as np

from retrieval.config import Settings
from retrieval.data.dataset import Document
from retrieval.methods.base import Context
from retrieval.methods.hybrid import HybridSearch
from retrieval.methods.prompts.enrich import (
    ENRICH_SCHEMA,
    ENRICH_VERSION,
    QUESTIONS,
    parse_questions,
    render_enrich_prompt,
)
from retrieval.methods.support.llm import ask_or_degrade, channel_for, generator_or_unavailable, map_in_order
from retrieval.providers.base import GenerationProvider, ProviderError
from retrieval.recording.enrichment_cache import EnrichmentCache
from retrieval.run.cost import Usage
from retrieval.run.ranking import Ranking

__all__ = ["ENRICHED_EMBEDDINGS", "ENRICHMENT", "INDEXING_STAGES", "EnrichMethod", "enriched_document", "factory"]


# Usage stages of the indexing, shown once (like "corpus embeddings"), not in any pipeline.
ENRICHMENT = "enrichment (indexing)"
ENRICHED_EMBEDDINGS = "enriched corpus embeddings (indexing)"
INDEXING_STAGES = (ENRICHMENT, ENRICHED_EMBEDDINGS)
SCHEMA_NAME = "questions"


def enriched_document(document: Document, questions: list[str]) -> Document:
    """The document as indexed: its text followed by its questions, one a line."""
    if not questions:
        return document
    return replace(document, text=document.text + "\n\n" + "\n".join(questions))


class EnrichMethod:
    """Hybrid (bm25 + vector, RRF) over documents enriched with LLM-written questions.
    `questions` keeps, after `rank`, the questions indexed with each document (by id)."""

    name = "enrich"
    requires: tuple[str, ...] = ()
    needs_vectors = True
    calls = "http"
    degradable = True

    def __init__(
        self,
        generator: GenerationProvider,
        *,
        workers: int = 8,
        cache: str | None = None,
        variant: str = "",
        embedding_model: str | None = None,
        search: HybridSearch | None = None,
    ) -> None:
        self.search = search or HybridSearch()
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.generator = generator
        self.workers = workers
        self.cache_root = cache
        self.variant = variant
        self.embedding_model = embedding_model
        self.cost_model = generator.model
        self.channel = channel_for("enrich", generator.model)
        self.questions: dict[str, list[str]] = {}

    @property
    def config(self) -> dict[str, Any]:
        """Recorded in the baseline configuration."""
        return {
            "model": self.generator.model,
            "prompt": ENRICH_VERSION,
            "questions": QUESTIONS,
            **self.search.config,
        }

    def rank(self, context: Context) -> list[Ranking]:
        """Enrich the corpus (cache, then the model), index it, and rank it for every question."""
        if context.question_vectors is None or context.document_vectors is None or context.embed is None:
            raise RuntimeError("enrich run without embeddings: the evaluator must embed first")
        documents = context.dataset.documents
        answers, failures = self._enrich(context)
        self.questions = {d.id: answers.get(d.content) or [] for d in documents}
        enriched = tuple(enriched_document(d, self.questions[d.id]) for d in documents)

        # Documents left as written keep their shared corpus vector; the others are embedded again.
        vectors = np.array(context.document_vectors, copy=True)
        changed = [i for i, d in enumerate(documents) if enriched[i] is not d]
        spent = Usage()
        if changed:
            new, spent = context.embed([enriched[i].content for i in changed], "document")
            vectors[changed] = new
        context.usage[ENRICHED_EMBEDDINGS] = spent
        context.cost_models[ENRICHED_EMBEDDINGS] = self.embedding_model

        status = "ok"
        if failures:
            failed = f"enrichment failed for {len(failures)} of {len(answers)} documents"
            status = f"degraded: {_reason(failures)} ({failed})"
        indexed = replace(context.dataset, documents=enriched)
        statuses = [status] * len(context.dataset.questions)
        return self.search.rank(indexed, context.question_vectors, vectors, context.depth, statuses)

    def _enrich(self, context: Context) -> tuple[dict[str, list[str]], list[str]]:
        """Questions by document content (unique contents), and the reasons of the failed ones."""
        contents = list(dict.fromkeys(d.content for d in context.dataset.documents))
        first_id: dict[str, str] = {}
        for d in context.dataset.documents:
            first_id.setdefault(d.content, d.id)
        cache = None
        if self.cache_root is not None and context.mode != "replay":
            generator = self.generator
            cache = EnrichmentCache(self.cache_root, generator.provider, generator.model, ENRICH_VERSION, self.variant)
        # Read live only: a recording must capture every call, and a replay gives the recorded answers.
        answers: dict[str, list[str]] = {}
        if cache is not None and context.mode == "live":
            for content in contents:
                cached = cache.get(content)
                if cached is not None:
                    answers[content] = cached
        todo = [c for c in contents if c not in answers]

        llm = self.generator.usage
        before = (llm.calls, llm.input_tokens, llm.output_tokens)
        started = time.perf_counter()
        bar = context.progress(len(todo), "enrich") if context.progress and todo else None
        try:
            results = map_in_order(lambda i: self._ask(todo[i], first_id[todo[i]]), len(todo), self.workers, bar)
        finally:
            usage = Usage(seconds=time.perf_counter() - started)
            usage.add(llm.calls - before[0], llm.input_tokens - before[1], llm.output_tokens - before[2])
            context.usage[ENRICHMENT] = usage
            context.cost_models[ENRICHMENT] = self.generator.model
        failures = []
        for content, (questions, reason) in zip(todo, results, strict=True):
            if reason is None:
                answers[content] = questions
                if cache is not None:
                    cache.put(content, questions)
            else:
                answers[content] = []
                failures.append(reason)
        if cache is not None:
            cache.save()
        return answers, failures

    def _ask(self, content: str, doc_id: str) -> tuple[list[str], str | None]:
        """(questions, None), or ([], the failure's reason)."""
        questions = ask_or_degrade(
            lambda: parse_questions(
                self.generator.generate_json(render_enrich_prompt(content), ENRICH_SCHEMA, SCHEMA_NAME)
            ),
            f"enrichment of document {doc_id}",
            self.generator.model,
        )
        if isinstance(questions, ProviderError):  # indexed as written
            return [], questions.reason
        return questions, None


def _reason(reasons: list[str]) -> str:
    """The reason a status names: a failed call first (no answer was recorded for it, so the
    evaluator must refuse a recording; it reads the status), else the first one."""
    from retrieval.methods.base import UNRECORDED_REASONS

    return next((r for r in reasons if r.startswith(UNRECORDED_REASONS)), reasons[0])


def factory(settings: Settings, *, replay: bool = False) -> EnrichMethod:
    """Document enrichment with the profile's LLM; unavailable without one, or in replay when not recorded."""
    generator = generator_or_unavailable(settings, replay, "enrich", "enrich")
    profile = settings.profile
    return EnrichMethod(
        generator,
        search=HybridSearch.from_settings(settings),
        workers=profile.llm.workers,
        cache=settings.cache,
        # Same model name behind another endpoint: other answers, so another cache file.
        variant=hashlib.sha256(profile.llm.base_url.encode()).hexdigest()[:8],
        embedding_model=profile.embeddings.model or None,
    )
