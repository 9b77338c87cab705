"""The small interface every model provider implements, and the errors they raise.

Embedding providers turn texts into L2-normalised float32 vectors, one HTTP call
per `embed` call; batching, caching and progress live in `retrieval.embeddings`.
Generation providers return the raw text of one JSON-constrained answer; parsing
it is the caller's job (the reranker), so a provider knows nothing of ranking.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from retrieval.cost import Usage

if TYPE_CHECKING:  # numpy loads with the first vectors: the gate plugin imports these errors in every pytest run
    import numpy as np

__all__ = [
    "EmbeddingProvider",
    "GenerationProvider",
    "Kind",
    "MissingKeyError",
    "ProviderError",
    "ReplayMissError",
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


def normalize(vectors: np.ndarray) -> np.ndarray:
    """L2-normalise rows as float32; a zero row stays zero instead of becoming NaN."""
    import numpy as np

    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
