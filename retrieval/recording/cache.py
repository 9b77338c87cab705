"""The embedding cache: the vector store (retrieval.recording.vector_store) in `.cache/`, uncommitted.

A second run embeds nothing; editing one document re-embeds only that one. One store per
(provider, model, dimensions, kind, variant) under `.cache/embeddings/`: each save appends a
segment of the new vectors and replaces the manifest atomically, so an interrupted write leaves
the previous cache, and a damaged manifest or segment is detected (digests) and rebuilt with one
warning naming it, never trusted. Saves are serialised by a lock and re-read the manifest under
it: concurrent runs, even two that both found the cache damaged, keep each other's entries.
"""

from __future__ import annotations

import hashlib
import re
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retrieval.files.atomic import clean_stale
from retrieval.recording.vector_store import Space, StoreError, VectorStore

__all__ = ["CacheMismatch", "EmbeddingCache", "text_key"]

MANIFEST = "manifest.json"
# Segments a cache gathers before a save merges them into one (the cache is not committed:
# rewriting it costs nothing in history, and fewer files open faster).
MERGE_AFTER = 8


class CacheMismatch(UserWarning):
    """A cache file was damaged or does not fit the model; it is rebuilt."""


def text_key(text: str) -> str:
    """The cache key of a text: its SHA-256 (of its UTF-8 bytes, lone surrogates kept)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class EmbeddingCache:
    """Embeddings of one provider/model/dimensions/kind, in a vector store saved atomically."""

    def __init__(
        self, root: str | Path, provider: str, model: str, dimensions: int, kind: str, variant: str = ""
    ) -> None:
        # `variant` stands for whatever else changes the vectors (endpoint, prefixes, input type).
        slug = re.sub(
            r"[^A-Za-z0-9_.-]+", "_", "--".join(filter(None, (provider, model, str(dimensions), kind, variant)))
        )
        self.folder = Path(root) / "embeddings" / slug
        self.path = self.folder / MANIFEST
        self.space = Space(provider, model, dimensions, kind, variant)
        self.model = model
        self.dimensions = dimensions
        self._pending: dict[str, np.ndarray] = {}
        # After `discard_all` nothing stored may answer a lookup: the model returns another width.
        self._discarded = False
        self.hits = 0
        self.misses = 0
        clean_stale(self.folder, MANIFEST)
        clean_stale(self.folder, "seg-*")  # a killed save's segment files in progress
        self._store = self._open(warn=True)

    def _open(self, warn: bool) -> VectorStore:
        """The store on disk; an empty one (with a warning when `warn`) when it cannot be trusted."""
        try:
            store = VectorStore.open(self.path, self.folder, "it will be rebuilt")
            for segment in store.segments_of(self.space, store.width(self.space)):
                store.arrays(segment)  # digests and values checked now: a damaged cache is rebuilt, not met mid-run
            return store
        except StoreError as exc:
            if warn:
                warnings.warn(f"corrupt embedding cache: {exc}", CacheMismatch, stacklevel=3)
            return VectorStore(self.path, self.folder, "it will be rebuilt")

    def discard_all(self, reason: str) -> None:
        """Forget every stored entry (they do not fit the model), with one warning naming the cache."""
        warnings.warn(f"{self.path}: {reason}; it will be rebuilt", CacheMismatch, stacklevel=3)
        self._discarded = True
        self._pending = {}

    def lookup(self, texts: Sequence[str]) -> dict[int, np.ndarray]:
        """Cached vectors by position in `texts`; positions absent from the result need embedding."""
        found: dict[int, np.ndarray] = {}
        if not self._discarded:
            vectors, mask = self._store.lookup(self.space, texts)
            found = {int(i): np.array(vectors[i]) for i in np.flatnonzero(mask)}
        for i, text in enumerate(texts):
            pending = self._pending.get(text)
            if pending is not None:
                found[i] = pending
        self.hits += len(found)
        self.misses += len(texts) - len(found)
        return found

    def store(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Remember vectors for texts (saved by `save`); non-finite vectors are never stored."""
        for text, vector in zip(texts, vectors, strict=True):
            row = np.asarray(vector, dtype=np.float32)
            if np.isfinite(row).all():
                self._pending[text] = row

    def save(self) -> None:
        """Append this run's new vectors as a segment, under a lock, to the store as it is on disk
        now (another run may have saved, or rebuilt a damaged cache, since this one opened it).
        A cache that cannot be written (a full disk, a read-only folder) is one warning, not an
        error: the run has its vectors, the next one embeds them again."""
        if not self._pending:
            return
        widths = {len(v) for v in self._pending.values()}
        if len(widths) != 1:
            raise ValueError(f"{self.path}: vectors of {sorted(widths)} dimensions in one run")
        (width,) = widths
        try:
            store = self._saved(width)
        except (StoreError, OSError) as exc:
            why = exc if isinstance(exc, StoreError) else f"{self.folder}: {exc.strerror or exc}"
            warnings.warn(f"embedding cache not saved: {why}", CacheMismatch, stacklevel=2)
            return
        self._store = store
        self._pending = {}
        self._discarded = False

    def _saved(self, width: int) -> VectorStore:
        self.folder.mkdir(parents=True, exist_ok=True)
        from filelock import FileLock  # here: a run that embeds nothing writes no cache

        with FileLock(self.folder / ".lock"):
            store = self._open(warn=False)
            # Segments of another width (the server changed its vector size) are dropped, never mixed.
            store.segments = [s for s in store.segments if s.space != self.space or s.width == width]
            texts = list(self._pending)
            store.add(store.write_segment(self.space, texts, np.stack([self._pending[t] for t in texts]), "float32"))
            if len(store.segments_of(self.space)) > MERGE_AFTER:
                store = store.merged(self.space)
            store.save_manifest()
            for path in store.unreferenced():
                path.unlink(missing_ok=True)
        return store
