"""The corpus embedding cache: vectors keyed by provider, model, dimensions, kind and text hash.

A second run embeds nothing; editing one document re-embeds only that one. One file
per (provider, model, dimensions, kind) under `.cache/embeddings/`, written atomically
(temporary file then rename) with a checksum, so an interrupted write or a damaged
file is detected and rebuilt rather than trusted. What a file holds is checked too (model,
vector size, finite values): a file that does not fit is rebuilt, with one warning naming it.
Concurrent runs saving the same file merge their entries under a lock; the temporary
files of killed runs are removed.
"""

from __future__ import annotations

import hashlib
import re
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from filelock import FileLock

from retrieval.atomic import atomic_write, clean_stale

__all__ = ["CacheMismatch", "EmbeddingCache", "text_key"]

FORMAT = "retrieval-embedding-cache-1"


class CacheMismatch(UserWarning):
    """A cache file was damaged or does not fit the model; it is rebuilt."""


def text_key(text: str) -> str:
    """The cache key of a text: its SHA-256 (of its UTF-8 bytes, lone surrogates kept)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _checksum(keys: np.ndarray, vectors: np.ndarray) -> str:
    digest = hashlib.sha256(FORMAT.encode())
    digest.update(keys.astype("S64").tobytes())
    digest.update(np.ascontiguousarray(vectors, dtype=np.float32).tobytes())
    return digest.hexdigest()


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    # One lock file beside the folder (filelock: POSIX and Windows), so the folder holds caches only
    # and every save in it is serialised.
    with FileLock(folder.with_name(f"{folder.name}.lock")):
        yield


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
        self.model = model
        self.dimensions = dimensions
        self._vectors: dict[str, np.ndarray] = {}
        self._dirty = False
        self._reset = False  # the file on disk must not be merged back (it did not fit)
        self.hits = 0
        self.misses = 0
        clean_stale(self.path.parent, self.path.name)
        self._load()

    def _read(self) -> dict[str, np.ndarray]:
        """The file's entries, checked; ValueError saying what does not fit."""
        with np.load(self.path, allow_pickle=False) as data:
            keys, vectors, stored = data["keys"], data["vectors"], str(data["checksum"])
            model = str(data["model"]) if "model" in data.files else None
        if stored != _checksum(keys, vectors) or len(keys) != len(vectors):
            raise ValueError("checksum mismatch")
        if model is not None and model != self.model:
            raise ValueError(f"vectors of model {model!r}, expected {self.model!r}")
        if len(keys) and (vectors.ndim != 2 or (self.dimensions and vectors.shape[1] != self.dimensions)):
            raise ValueError(f"vectors of {vectors.shape[-1]} dimensions, expected {self.dimensions}")
        if not np.isfinite(vectors).all():
            raise ValueError("non-finite values (NaN or infinity)")
        return {k.decode(): v for k, v in zip(keys, vectors, strict=True)}

    def _load(self) -> None:
        if not self.path.exists():
            return
        try:
            self._vectors = self._read()
        except Exception as exc:  # whatever is wrong with the file, it is rebuilt, never trusted
            self.discard_all(f"corrupt embedding cache ({exc})")

    def discard_all(self, reason: str) -> None:
        """Forget every entry (the file did not fit), with one warning naming the file."""
        warnings.warn(f"{self.path}: {reason}; it will be rebuilt", CacheMismatch, stacklevel=3)
        self._vectors = {}
        self._dirty = True
        self._reset = True

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
        """Remember vectors for texts (saved by `save`); non-finite vectors are never stored."""
        for text, vector in zip(texts, vectors, strict=True):
            row = np.asarray(vector, dtype=np.float32)
            if np.isfinite(row).all():
                self._vectors[text_key(text)] = row
        self._dirty = True

    def save(self) -> None:
        """Write the cache atomically if anything changed, merged with what another run saved
        since this one loaded (under a lock: neither run loses the other's entries)."""
        if not self._dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(self.path.parent):
            merged: dict[str, np.ndarray] = {}
            if not self._reset and self.path.exists():
                try:
                    merged = self._read()
                except Exception:  # damaged since: this run's entries replace it
                    merged = {}
            width = {len(v) for v in self._vectors.values()}
            merged = {k: v for k, v in merged.items() if len(v) in width or not width}
            merged.update(self._vectors)
            keys = np.array(sorted(merged), dtype="S64")
            vectors = np.stack([merged[k.decode()] for k in keys]) if len(keys) else np.zeros((0, 0), np.float32)
            checksum = np.array(_checksum(keys, vectors))
            model = np.array(self.model)
            atomic_write(
                self.path,
                lambda handle: np.savez(handle, keys=keys, vectors=vectors, checksum=checksum, model=model),
            )
            self._vectors = merged
        self._dirty = False
        self._reset = False
