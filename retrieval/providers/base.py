"""The small interface every model provider implements, and the errors they raise.

Embedding providers turn texts into L2-normalised float32 vectors, one HTTP call
per `embed` call; batching, caching and progress live in `retrieval.evaluation.embeddings`.
Generation providers return the raw text of one JSON-constrained answer; parsing
it is the caller's job (the reranker), so a provider knows nothing of ranking.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from retrieval.run.cost import Usage

if TYPE_CHECKING:  # numpy loads with the first vectors: the gate plugin imports these errors in every pytest run
    import numpy as np

__all__ = [
    "EmbeddingProvider",
    "GenerationProvider",
    "Kind",
    "MissingKeyError",
    "ProviderError",
    "ReplayMissError",
    "RerankProvider",
    "ShortAnswer",
    "ShortAnswerProvider",
    "cause_of",
    "normalize",
]

Kind = Literal["query", "document"]


class ProviderError(RuntimeError):
    """A model call failed after its retries (HTTP status, timeout, refusal, unreadable answer).

    `reason` is a short machine-readable cause ("timeout", "http 500", "blocked", ...);
    the reranker reports it when it falls back to the hybrid order.
    """

    def __init__(self, message: str, reason: str = "error") -> None:
        super().__init__(message)
        self.reason = reason


class MissingKeyError(ProviderError):
    """A live call needs an API key that no environment variable provides. Never degraded."""

    def __init__(self, variables: Sequence[str], provider: str) -> None:
        names = " or ".join(variables)
        super().__init__(
            f"{provider} needs an API key: set {names} (or replay the cassettes without --live).", "no key"
        )


class ReplayMissError(ProviderError):
    """Replaying cassettes, a request had no recorded answer. Never degraded, never sent."""


class EmbeddingProvider(Protocol):
    """Embeds texts as documents or queries; one call per `embed`, at most `batch_size` texts."""

    provider: str
    model: str
    dimensions: int
    batch_size: int
    usage: Usage

    def embed(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        """Return an (len(texts), dimensions) float32 array of unit vectors, in input order."""
        ...


class GenerationProvider(Protocol):
    """Generates one answer constrained to a JSON schema, deterministically (temperature 0)."""

    provider: str
    model: str
    usage: Usage

    def generate_json(self, prompt: str, schema: Mapping[str, Any], schema_name: str) -> str:
        """Return the model's raw answer text; raise ProviderError when there is none."""
        ...


@dataclass(frozen=True)
class ShortAnswer:
    """A model's short free-text answer and, where the server returned them, the log-probabilities
    of the likeliest tokens at its first position (token -> natural log-probability)."""

    text: str
    first_token_logprobs: Mapping[str, float] | None = None


class ShortAnswerProvider(Protocol):
    """Answers a prompt in a word or two, deterministically, with the first token's alternatives
    when the server gives them (OpenAI-compatible `logprobs`/`top_logprobs`, Gemini's
    `responseLogprobs`): what the pointwise reranker reads its yes/no from."""

    provider: str
    model: str
    usage: Usage

    def generate_short(self, prompt: str, top_logprobs: int) -> ShortAnswer:
        """Return the answer; raise ProviderError when there is none."""
        ...


class RerankProvider(Protocol):
    """Scores texts against a query in one call (a rerank API, a cross-encoder behind a server)."""

    provider: str
    model: str
    usage: Usage

    def rerank(self, query: str, texts: Sequence[str]) -> list[tuple[int, float]]:
        """(index into `texts`, relevance score) pairs, best first; texts it left out have none.
        Raise ProviderError when there is no usable answer."""
        ...


def normalize(vectors: np.ndarray, texts: Sequence[str] | None = None, kind: Kind = "document") -> np.ndarray:
    """L2-normalise rows as float32; ProviderError naming the text when a row is not finite or all zero.

    Every provider's vectors pass here, live, recording and replaying alike: a NaN, infinite or
    zero vector would score 0.0 against everything, silently, and be recorded as if it were one.
    """
    import numpy as np

    vectors = np.asarray(vectors, dtype=np.float32)
    with np.errstate(over="ignore"):  # an overflowing row is refused below, by name
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    finite = np.isfinite(vectors).all(axis=1)
    # A float32 norm of large finite values overflows to inf (its row would become zeros).
    bad = np.flatnonzero(~finite | ~np.isfinite(norms[:, 0]) | (norms[:, 0] == 0))
    if len(bad):
        row = int(bad[0])
        what = "question" if kind == "query" else "document"
        named = f"«{' '.join(texts[row].split())[:60].rstrip()}»" if texts is not None else f"number {row + 1}"
        problem = (
            "NaN or infinite values"
            if not finite[row]
            else "only zeros"
            if norms[row, 0] == 0
            else "overflowing values"
        )
        raise ProviderError(
            f"the embedding model returned a vector of {problem} for the {what} {named}"
            f"{f' (and {len(bad) - 1} other text(s))' if len(bad) > 1 else ''}: it would score 0 against "
            "everything. Check the model and its server with that text, then run again.",
            "bad vector",
        )
    return vectors / norms


_E = TypeVar("_E", bound=BaseException)


def cause_of(exc: BaseException, kind: type[_E]) -> _E | None:
    """The first exception of `kind` in the chain behind `exc` (HTTP clients and SDKs wrap the
    error that matters: a refused connection, a replay miss), or None. An exception group's
    members are in the chain: anyio raises "All connection attempts failed" from a group of the
    attempts when a name has several addresses (localhost: ::1 and 127.0.0.1)."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        behind = current.__cause__ or current.__context__
        members = current.exceptions if isinstance(current, BaseExceptionGroup) else ()
        # Depth first, in order: the cause before the members, each member's own chain before the next.
        pending.extend(reversed([*([behind] if behind is not None else []), *members]))
    return None
