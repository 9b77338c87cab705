"""Embedding a list of texts through a provider: fixed-order batches, cache, progress."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retrieval.methods.base import ProgressFactory
from retrieval.providers.base import EmbeddingProvider, Kind
from retrieval.recording.cache import EmbeddingCache

__all__ = ["embed_texts"]


def embed_texts(
    provider: EmbeddingProvider,
    texts: Sequence[str],
    kind: Kind,
    cache: EmbeddingCache | None = None,
    progress: ProgressFactory | None = None,
) -> np.ndarray:
    """Embed texts in batches of `provider.batch_size`, skipping those the cache holds.

    Batches follow the texts' order, so the same corpus always produces the same
    requests: cassettes match on them. The cache is saved even if a batch fails,
    so an interrupted run keeps what it paid for.
    """
    found = cache.lookup(texts) if cache else {}
    missing = [i for i in range(len(texts)) if i not in found]
    vectors: np.ndarray | None = None
    if found:
        first = next(iter(found.values()))
        vectors = np.zeros((len(texts), len(first)), dtype=np.float32)
        for i, v in found.items():
            vectors[i] = v
    bar = progress(len(missing), f"embedding {len(missing)} {kind}s") if progress and missing else None
    try:
        for start in range(0, len(missing), provider.batch_size):
            batch = missing[start : start + provider.batch_size]
            batch_texts = [texts[i] for i in batch]
            embedded = provider.embed(batch_texts, kind)
            if vectors is not None and found and embedded.shape[1] != vectors.shape[1]:
                # The server changed its vector size since the cache was filled (a profile without
                # `dimensions`): the cached vectors cannot be mixed with the new ones; embed everything.
                assert cache is not None
                cache.discard_all(
                    f"cached vectors have {vectors.shape[1]} dimensions, the model now returns {embedded.shape[1]}"
                )
                if bar:
                    bar.close()
                    bar = None
                return embed_texts(provider, texts, kind, cache, progress)
            if vectors is None:
                vectors = np.zeros((len(texts), embedded.shape[1]), dtype=np.float32)
            vectors[batch] = embedded
            if cache:
                cache.store(batch_texts, embedded)
            if bar:
                bar.update(len(batch))
    finally:
        if bar:
            bar.close()
        if cache:
            cache.save()
    if vectors is None:
        return np.zeros((0, provider.dimensions), dtype=np.float32)
    return vectors
