"""The embedding cache under faults: stores that do not fit are rebuilt with one warning naming
them, concurrent saves merge (also when both runs found the cache damaged), a server that changed
its vector size never mixes widths, killed writers' temporary files are removed."""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest
from test_cache import CORPUS, DIMENSIONS, CountingProvider

from retrieval.evaluation.embeddings import embed_texts
from retrieval.files.atomic import STALE_SECONDS
from retrieval.recording.cache import EmbeddingCache
from retrieval.recording.vector_store import VectorStore


def _cache(root: Path, dimensions: int = DIMENSIONS, model: str = "fake-model") -> EmbeddingCache:
    return EmbeddingCache(root, "fake", model, dimensions, "document")


def _append(cache: EmbeddingCache, texts: list[str], vectors: np.ndarray) -> None:
    """A segment written straight into the cache's store (as another version or run could leave it)."""
    store = VectorStore.open(cache.path, cache.folder)
    store.add(store.write_segment(cache.space, texts, vectors, "float32"))
    store.save_manifest()


def _widths(cache: EmbeddingCache) -> list[int]:
    return [s["width"] for s in json.loads(cache.path.read_text())["segments"]]


T = TypeVar("T")


def _load_warnings(make: Callable[[], T]) -> tuple[T, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        made = make()
    return made, [str(w.message) for w in caught]


@pytest.mark.parametrize(
    "vectors",
    [np.full((7, DIMENSIONS), np.nan, np.float32), np.full((7, DIMENSIONS), np.inf, np.float32)],
    ids=["NaN", "infinity"],
)
def test_a_cache_that_does_not_fit_is_rebuilt_with_one_warning(tmp_path: Path, vectors: np.ndarray) -> None:
    cache = _cache(tmp_path)
    _append(cache, CORPUS, vectors)
    segment = next(cache.folder.glob("seg-*.vectors.npy"))
    cache, messages = _load_warnings(lambda: _cache(tmp_path))
    assert messages == [
        f"corrupt embedding cache: {segment}: the vector of row 0 holds NaN or infinite values, which would score 0 "
        "against everything; it will be rebuilt"
    ]
    provider = CountingProvider()
    embedded = embed_texts(provider, CORPUS, "document", cache)
    assert provider.sent == CORPUS
    assert embedded.shape == (7, DIMENSIONS)
    again = CountingProvider()
    _, messages = _load_warnings(lambda: embed_texts(again, CORPUS, "document", _cache(tmp_path)))
    assert (again.sent, messages) == ([], [])


def test_vectors_of_another_width_than_configured_are_not_used(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    _append(cache, CORPUS, np.ones((7, 4), np.float32))
    provider = CountingProvider()
    embedded = embed_texts(provider, CORPUS, "document", _cache(tmp_path))
    assert (provider.sent, embedded.shape) == (CORPUS, (7, DIMENSIONS))
    assert _widths(cache) == [DIMENSIONS]  # the save dropped the other width


def test_a_server_that_changed_its_vector_size_never_mixes_widths(tmp_path: Path) -> None:
    """Issue 24, hole 8: three guards that used to mask each other, each needed here. After the
    server's change (a profile without `dimensions`), the discarded cache answers no lookup (else
    embed_texts would loop on the old width); a save keeps only the new width's segments; a lookup
    reads only the newest width's segments (a store holding both, as a run of the old server saving
    concurrently would leave it, must not crash nor mix)."""
    embed_texts(CountingProvider(), CORPUS, "document", _cache(tmp_path, dimensions=0))

    class Smaller(CountingProvider):
        def embed(self, texts, kind):
            return super().embed(texts, kind)[:, :4].copy()

    provider = Smaller()
    edited = [*CORPUS, "Un nouveau document."]
    cache = _cache(tmp_path, dimensions=0)
    embedded, messages = _load_warnings(lambda: embed_texts(provider, edited, "document", cache))
    assert messages == [
        f"{cache.path}: cached vectors have {DIMENSIONS} dimensions, the model now returns 4; it will be rebuilt"
    ]
    assert embedded.shape == (8, 4)
    assert provider.sent == ["Un nouveau document.", *edited]  # the first batch, then everything again
    assert _widths(cache) == [4]
    # An old-width segment appended after the new one, for two texts only it holds.
    _append(cache, ["ancien A", "ancien B"], np.ones((2, DIMENSIONS), np.float32))
    _append(cache, ["Un nouveau document."], embedded[-1:])  # the newest segment: width 4 again
    again = Smaller()
    vectors = embed_texts(again, [*edited, "ancien A"], "document", _cache(tmp_path, dimensions=0))
    assert again.sent == ["ancien A"]
    np.testing.assert_array_equal(vectors[:8], embedded)


def test_non_finite_vectors_are_never_stored(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    rows = np.ones((2, DIMENSIONS), np.float32)
    rows[1, 3] = np.nan
    cache.store(CORPUS[:2], rows)
    cache.save()
    assert sorted(_cache(tmp_path).lookup(CORPUS[:2])) == [0]


def test_concurrent_saves_merge(tmp_path: Path) -> None:
    # Two runs load the same (empty) cache, embed different datasets, then save one after the other.
    first, second = _cache(tmp_path), _cache(tmp_path)
    embed_texts(CountingProvider(), CORPUS[:4], "document", first)
    embed_texts(CountingProvider(), CORPUS[4:], "document", second)
    provider = CountingProvider()
    embed_texts(provider, CORPUS, "document", _cache(tmp_path))
    assert provider.sent == []


def test_two_runs_that_both_found_the_cache_damaged_keep_each_others_entries(tmp_path: Path) -> None:
    """Issue 25: each rebuilds, under the lock, the store as it is when it saves, not as it found it."""
    embed_texts(CountingProvider(), CORPUS, "document", _cache(tmp_path))
    _cache(tmp_path).path.write_text("damaged")
    (first, m1), (second, m2) = _load_warnings(lambda: _cache(tmp_path)), _load_warnings(lambda: _cache(tmp_path))
    assert len(m1) == len(m2) == 1
    embed_texts(CountingProvider(), CORPUS[:4], "document", first)
    embed_texts(CountingProvider(), CORPUS[4:], "document", second)
    provider = CountingProvider()
    _, messages = _load_warnings(lambda: embed_texts(provider, CORPUS, "document", _cache(tmp_path)))
    assert (provider.sent, messages) == ([], [])


def test_killed_writers_temporary_files_are_removed(tmp_path: Path) -> None:
    path = _cache(tmp_path).path
    path.parent.mkdir(parents=True)
    dead = path.parent / f".{path.name}.999999999-abcd1234.tmp"  # its writer was killed
    dead_segment = path.parent / ".seg-0123abcd.vectors.npy.999999999-abcd1234.tmp"
    old = path.parent / f".{path.name}.k2j4h5g6.tmp"  # an older version's name, two days old
    live = path.parent / f".{path.name}.{os.getpid()}-abcd1234.tmp"  # a concurrent save in progress
    for leftover in (dead, dead_segment, old, live):
        leftover.write_bytes(b"\0" * 1024)
    two_days_ago = time.time() - 2 * STALE_SECONDS
    os.utime(old, (two_days_ago, two_days_ago))
    _cache(tmp_path)
    assert [p.name for p in path.parent.iterdir()] == [live.name]
