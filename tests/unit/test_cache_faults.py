"""The embedding cache under faults: files that do not fit are rebuilt with one warning naming
them, concurrent saves merge, killed writers' temporary files are removed."""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest
from test_cache import CORPUS, DIMENSIONS, CountingProvider

from retrieval.atomic import STALE_SECONDS
from retrieval.cache import EmbeddingCache, _checksum
from retrieval.embeddings import embed_texts


def _cache(root: Path, dimensions: int = DIMENSIONS, model: str = "fake-model") -> EmbeddingCache:
    return EmbeddingCache(root, "fake", model, dimensions, "document")


def _write(path: Path, vectors: np.ndarray, model: str | None = "fake-model") -> None:
    """A cache file with a valid checksum holding `vectors` for CORPUS."""
    from retrieval.cache import text_key

    keys = np.array([text_key(t) for t in CORPUS[: len(vectors)]], dtype="S64")
    extra: dict[str, Any] = {} if model is None else {"model": np.array(model)}
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        np.savez(handle, keys=keys, vectors=vectors, checksum=np.array(_checksum(keys, vectors)), **extra)


T = TypeVar("T")


def _load_warnings(make: Callable[[], T]) -> tuple[T, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        made = make()
    return made, [str(w.message) for w in caught]


@pytest.mark.parametrize(
    ("vectors", "model", "reason"),
    [
        (np.ones((7, 4), np.float32), "fake-model", "vectors of 4 dimensions, expected 8"),
        (np.full((7, DIMENSIONS), np.nan, np.float32), "fake-model", "non-finite values (NaN or infinity)"),
        (np.full((7, DIMENSIONS), np.inf, np.float32), "fake-model", "non-finite values (NaN or infinity)"),
        (np.ones((7, DIMENSIONS), np.float32), "other-model", "vectors of model 'other-model', expected 'fake-model'"),
    ],
    ids=["other vector size", "NaN", "infinity", "other model"],
)
def test_a_cache_that_does_not_fit_is_rebuilt_with_one_warning(
    tmp_path: Path, vectors: np.ndarray, model: str, reason: str
) -> None:
    path = _cache(tmp_path).path
    _write(path, vectors, model)
    cache, messages = _load_warnings(lambda: _cache(tmp_path))
    assert messages == [f"{path}: corrupt embedding cache ({reason}); it will be rebuilt"]
    provider = CountingProvider()
    embedded = embed_texts(provider, CORPUS, "document", cache)
    assert provider.sent == CORPUS
    assert embedded.shape == (7, DIMENSIONS)
    again = CountingProvider()
    _, messages = _load_warnings(lambda: embed_texts(again, CORPUS, "document", _cache(tmp_path)))
    assert (again.sent, messages) == ([], [])


def test_a_server_that_changed_its_vector_size_re_embeds_everything(tmp_path: Path) -> None:
    # A profile without `dimensions`: the file name cannot tell the sizes apart.
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
    with np.load(cache.path) as data:
        assert data["vectors"].shape == (8, 4)


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


def test_killed_writers_temporary_files_are_removed(tmp_path: Path) -> None:
    path = _cache(tmp_path).path
    path.parent.mkdir(parents=True)
    dead = path.parent / f".{path.name}.999999999-abcd1234.tmp"  # its writer was killed
    old = path.parent / f".{path.name}.k2j4h5g6.tmp"  # an older version's name, two days old
    live = path.parent / f".{path.name}.{os.getpid()}-abcd1234.tmp"  # a concurrent save in progress
    for leftover in (dead, old, live):
        leftover.write_bytes(b"\0" * 1024)
    two_days_ago = time.time() - 2 * STALE_SECONDS
    os.utime(old, (two_days_ago, two_days_ago))
    _cache(tmp_path)
    assert [p.name for p in path.parent.iterdir()] == [live.name]
