"""Listwise LLM reranking of the hybrid candidates, with a degraded mode.

For each question the top `candidates` of the hybrid ranking go to the model in one
call; it returns their ids by relevance. The final ranking is the reranked candidates
followed by the rest of the hybrid ranking (retrieval.methods.support.reranking), so recall
beyond the candidate pool is exactly hybrid's. The pointwise mode, one yes/no question per
candidate, is retrieval.methods.rerank_pointwise.

Degraded mode (the seed's "si l'appel de reranking échoue, renvoyer l'ordre hybrid"):
a ProviderError for one question (timeout, HTTP error after retries, empty or blocked
answer, unparseable output) keeps that question's hybrid order with status
"degraded: <reason>", and the run goes on. A missing key or a replay miss is a setup
problem, not an outage: it is raised, never degraded.

Scores of a reranked ranking are synthetic: the document at position p (0-based) of
a ranking of length L scores L - p. Only the order carries meaning; hybrid's fused
scores are not comparable with the model's order, so they are not reused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from retrieval.config import Settings
from retrieval.methods.prompts import RERANK_SCHEMA, answer_field, render_rerank_prompt
from retrieval.methods.support.llm import channel_for
from retrieval.methods.support.reranking import CandidateReranker
from retrieval.providers.base import GenerationProvider, ProviderError
from retrieval.run.cost import Usage

if TYPE_CHECKING:
    from retrieval.data.dataset import Document, Question

__all__ = ["RerankMethod", "factory", "parse_ranking"]


SCHEMA_NAME = "ranking"


def parse_ranking(raw: str, candidate_ids: Sequence[str]) -> list[str]:
    """Read the model's answer as a full ordering of `candidate_ids`.

    The answer must be a JSON object with a "ranking" list. Ids not among the
    candidates are dropped (integers are read as their decimal string, for servers
    without schema enforcement), duplicates keep their first position, and candidates
    the model left out are appended in their given (hybrid) order. Raises
    ProviderError with reason "unparseable" when the answer is not such an object,
    and "no valid ids" when it names none of the candidates: an all-appended order
    would be hybrid's order passed off as a reranking.
    """
    ranking = answer_field(raw, "ranking", list, "reranker")
    allowed = set(candidate_ids)
    ordered: dict[str, None] = {}
    for item in ranking:
        if isinstance(item, int) and not isinstance(item, bool):
            item = str(item)
        if isinstance(item, str) and item in allowed:
            ordered.setdefault(item, None)
    if not ordered:
        raise ProviderError("reranker answer names none of the candidates", "no valid ids")
    for doc_id in candidate_ids:
        ordered.setdefault(doc_id, None)
    return list(ordered)


class RerankMethod(CandidateReranker):
    """Reranks the top candidates of another method (hybrid by default) with one listwise LLM
    call per question.

    `candidates` is how many documents the model reads (the seed's 20); `workers` bounds the
    concurrent calls. Rankings come back in question order whatever order the calls finish in.
    Its calls go to its own cassette, one per model, so a change of model is a new recording.
    """

    name = "rerank"

    def __init__(
        self, generator: GenerationProvider, candidates: int = 20, workers: int = 8, source: str = "hybrid"
    ) -> None:
        super().__init__(candidates, workers, source)
        self.generator = generator
        self.model = generator.model
        self.cost_model = generator.model
        self.channel = channel_for("rerank", generator.model)

    @property
    def usage(self) -> Usage:
        return self.generator.usage

    @property
    def config(self) -> dict[str, object]:
        """Recorded in the baseline configuration."""
        from retrieval.methods.prompts import PROMPT_VERSION

        return {"model": self.generator.model, "prompt": PROMPT_VERSION, "candidates": self.candidates}

    def order(self, question: Question, pool: Sequence[Document]) -> list[int]:
        """The model's listwise order of the pool, as positions within it."""
        candidates = [(d.id, d.title, d.text) for d in pool]
        ids = [c[0] for c in candidates]
        prompt = render_rerank_prompt(question.text, candidates)
        order = parse_ranking(self.generator.generate_json(prompt, RERANK_SCHEMA, SCHEMA_NAME), ids)
        position = {doc_id: p for p, doc_id in enumerate(ids)}
        return [position[d] for d in order]


def factory(settings: Settings, *, replay: bool = False) -> RerankMethod:
    """The built-in reranker of the profile; unavailable when the profile names none."""
    from retrieval.methods.base import MethodUnavailable
    from retrieval.providers import make_generator

    generator = make_generator(settings.profile, replay=replay)
    if generator is None:
        raise MethodUnavailable(
            f"profile {settings.profile.name!r} has no reranker (set rerank_provider and rerank_model)"
        )
    return RerankMethod(generator, candidates=settings.candidates, workers=settings.profile.llm.workers)
