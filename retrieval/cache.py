"""The corpus embedding cache: vectors keyed by provider, model, dimensions, kind and text hash.

A second run embeds nothing; editing one document re-embeds only that one. One file
per (provider, model, dimensions, kind) under `.cache/embeddings/`, written atomically
(temporary file then rename) with a checksum, so an interrupted write or a damaged
file is detected and rebuilt rather than trusted.
"""

from __future__ import annotations

import hashlib
import re
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retrieval.atomic import atomic_write

__all__ = ["EmbeddingCache", "text_key"]

FORMAT = "retrieval-embedding-cache-1"


def text_key(text: str) -> str:
    """The cache key of a text: its SHA-256."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _checksum(keys: np.ndarray, vectors: np.ndarray) -> str:
    digest = hashlib.sha256(FORMAT.encode())
    digest.update(keys.astype("S64").tobytes())
    digest.update(np.ascontiguousarray(vectors, dtype=np.float32).tobytes())
    return digest.hexdigest()


class EmbeddingCache:
    """Embeddings of one provider/model/dimensions/kind, loaded whole and saved atomically."""

    def __init__(
        self, root: str | Path, provider: str, model: str, dimensions: int, kind: str, variant: str = ""
    ) -> None:
        # `variant` stands for whatever else changes the vectors (endpoint, prefixes, input type).
        slug = re.sub(
            r"[^A-Za-z0-9_.-]+", "_", "--".join(filter(None, (provider, model, str(dimensions), kind, variant)))
        )
        self.path = Path(root) / "embeddings" / f"{slug}.npz"
        self._vectors: dict[str, np.ndarray] = {}
        self._dirty = False
        self.hits = 0
        self.misses = 0
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        try:
            with np.load(self.path, allow_pickle=False) as data:
                keys, vectors, stored = data["keys"], data["vectors"], str(data["checksum"])
            if stored != _checksum(keys, vectors) or len(keys) != len(vectors):
                raise ValueError("checksum mismatch")
        except Exception as exc:  # whatever is wrong with the file, it is rebuilt, never trusted
            warnings.warn(f"{self.path}: corrupt embedding cache ({exc}); it will be rebuilt", stacklevel=2)
            self._dirty = True
            return
        self._vectors = {k.decode(): v for k, v in zip(keys, vectors, strict=True)}

    def lookup(self, texts: Sequence[str]) -> dict[int, np.ndarray]:
        """Cached vectors by position in `texts`; positions absent from the result need embedding."""
        found = {}
        for i, text in enumerate(texts):
            vector = self._vectors.get(text_key(text))
            if vector is not None:
                found[i] = vector
        self.hits += len(found)
        self.misses += len(texts) - len(found)
        return found

    def store(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Remember vectors for texts (saved by `save`)."""
        for text, vector in zip(texts, vectors, strict=True):
            self._vectors[text_key(text)] = np.asarray(vector, dtype=np.float32)
        self._dirty = True

    def save(self) -> None:
        """Write the cache atomically if anything changed."""
        if not self._dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = np.array(sorted(self._vectors), dtype="S64")
        vectors = np.stack([self._vectors[k.decode()] for k in keys]) if len(keys) else np.zeros((0, 0), np.float32)
        checksum = np.array(_checksum(keys, vectors))
        atomic_write(self.path, lambda handle: np.savez(handle, keys=keys, vectors=vectors, checksum=checksum))
        self._dirty = False
