"""The corpus embedding cache through `embed_texts`: reuse, partial re-embedding, corruption,
atomic writes."""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from retrieval.evaluation.embeddings import embed_texts
from retrieval.providers.base import Kind
from retrieval.recording.cache import CacheMismatch, EmbeddingCache
from retrieval.run.cost import Usage

DIMENSIONS = 8
CORPUS = [f"Document {i} : procédure de restauration numéro {i}." for i in range(7)]


class CountingProvider:
    """FIXTURE EmbeddingProvider: deterministic fake vectors from each text's hash, and a log of
    every text sent. Its vectors are test fixtures, never a baseline."""

    provider = "fake"
    model = "fake-model"
    dimensions = DIMENSIONS

    def __init__(self, batch_size: int = 3) -> None:
        self.batch_size = batch_size
        self.usage = Usage()
        self.calls: list[list[str]] = []

    @property
    def sent(self) -> list[str]:
        return [text for call in self.calls for text in call]

    def embed(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        assert len(texts) <= self.batch_size
        self.calls.append(list(texts))
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(f"{kind}:{text}".encode()).digest()[:8], "little")
            rows.append(np.random.default_rng(seed).standard_normal(DIMENSIONS))
        vectors = np.asarray(rows, dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _cache(root: Path, kind: str = "document") -> EmbeddingCache:
    return EmbeddingCache(root, "fake", "fake-model", DIMENSIONS, kind)


def _fill(root: Path) -> tuple[np.ndarray, Path]:
    provider = CountingProvider()
    cache = _cache(root)
    vectors = embed_texts(provider, CORPUS, "document", cache)
    return vectors, cache.path


def test_first_run_embeds_everything_in_ordered_batches(tmp_path: Path) -> None:
    provider = CountingProvider(batch_size=3)
    vectors = embed_texts(provider, CORPUS, "document", _cache(tmp_path))
    assert provider.calls == [CORPUS[0:3], CORPUS[3:6], CORPUS[6:7]]
    assert vectors.shape == (len(CORPUS), DIMENSIONS)
    assert vectors.dtype == np.float32


def test_second_run_embeds_nothing(tmp_path: Path) -> None:
    first, _ = _fill(tmp_path)
    provider = CountingProvider()
    cache = _cache(tmp_path)
    second = embed_texts(provider, CORPUS, "document", cache)
    assert provider.sent == []
    assert cache.hits == len(CORPUS) and cache.misses == 0
    np.testing.assert_array_equal(second, first)


def test_editing_one_document_re_embeds_only_that_one(tmp_path: Path) -> None:
    first, _ = _fill(tmp_path)
    edited = list(CORPUS)
    edited[4] = "Document 4 : procédure de restauration révisée."
    provider = CountingProvider()
    second = embed_texts(provider, edited, "document", _cache(tmp_path))
    assert provider.sent == [edited[4]]
    assert len(provider.calls) == 1
    unchanged = [i for i in range(len(CORPUS)) if i != 4]
    np.testing.assert_array_equal(second[unchanged], first[unchanged])
    np.testing.assert_array_equal(second[4], CountingProvider().embed([edited[4]], "document")[0])
    # ... and the third run embeds nothing again.
    third = CountingProvider()
    embed_texts(third, edited, "document", _cache(tmp_path))
    assert third.sent == []


def test_cache_is_keyed_by_kind_and_model(tmp_path: Path) -> None:
    _fill(tmp_path)
    queries = CountingProvider()
    embed_texts(queries, CORPUS[:2], "query", _cache(tmp_path, "query"))
    assert queries.sent == CORPUS[:2]
    other_model = CountingProvider()
    embed_texts(
        other_model,
        CORPUS[:2],
        "document",
        EmbeddingCache(tmp_path, "fake", "other", DIMENSIONS, "document"),
    )
    assert other_model.sent == CORPUS[:2]


def test_without_cache_everything_is_embedded_each_time(tmp_path: Path) -> None:
    provider = CountingProvider()
    embed_texts(provider, CORPUS, "document", None)
    embed_texts(provider, CORPUS, "document", None)
    assert provider.sent == CORPUS + CORPUS


# --- corrupt files are detected and rebuilt ---------------------------------------------------


def _segment_vectors(manifest: Path) -> Path:
    return next(manifest.parent.glob("seg-*.vectors.npy"))


def _truncate_manifest(manifest: Path) -> None:
    manifest.write_bytes(manifest.read_bytes()[: manifest.stat().st_size // 2])


def _garbage_manifest(manifest: Path) -> None:
    manifest.write_bytes(b"this is not an embedding cache\x00\xff" * 10)


def _truncate_segment(manifest: Path) -> None:
    path = _segment_vectors(manifest)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip_vector_byte(manifest: Path) -> None:
    # A well-formed .npy whose last vector byte changed: only the digest can tell.
    path = _segment_vectors(manifest)
    raw = bytearray(path.read_bytes())
    raw[-2] ^= 0xFF
    path.write_bytes(bytes(raw))


def _delete_segment(manifest: Path) -> None:
    _segment_vectors(manifest).unlink()


@pytest.mark.parametrize(
    "damage", [_truncate_manifest, _garbage_manifest, _truncate_segment, _flip_vector_byte, _delete_segment]
)
def test_corrupt_cache_is_detected_and_rebuilt(tmp_path: Path, damage: Callable[[Path], None]) -> None:
    first, path = _fill(tmp_path)
    damage(path)
    provider = CountingProvider()
    with pytest.warns(UserWarning, match="corrupt embedding cache"):
        cache = _cache(tmp_path)
    rebuilt = embed_texts(provider, CORPUS, "document", cache)
    assert provider.sent == CORPUS  # nothing from the damaged file was trusted
    np.testing.assert_array_equal(rebuilt, first)
    # The manifest was rewritten: the next run reads it back without a warning.
    again = CountingProvider()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        embed_texts(again, CORPUS, "document", _cache(tmp_path))
    assert again.sent == []


# --- atomic writes ----------------------------------------------------------------------------


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_save_leaves_no_temporary_file(tmp_path: Path) -> None:
    _, path = _fill(tmp_path)
    assert path.is_file()
    # The manifest, one segment (keys and vectors), and the lock file of concurrent saves.
    names = _listing(path.parent)
    assert len(names) == 4 and names[:2] == [".lock", "manifest.json"]
    assert [n.rsplit(".", 2)[1:] for n in names[2:]] == [["keys", "npy"], ["vectors", "npy"]]


def test_failed_save_keeps_the_previous_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, path = _fill(tmp_path)
    before = {name: (path.parent / name).read_bytes() for name in _listing(path.parent)}

    def broken_replace(*args: object, **kwargs: object) -> None:
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(os, "replace", broken_replace)
    edited = [*CORPUS, "Un nouveau document."]
    provider = CountingProvider()
    # The run has its vectors: a cache it cannot save is one warning, not its failure.
    with pytest.warns(CacheMismatch, match=r"^embedding cache not saved: .*\(disk full \(simulated\)\)"):
        vectors = embed_texts(provider, edited, "document", _cache(tmp_path))
    assert len(vectors) == len(edited)
    assert {name: (path.parent / name).read_bytes() for name in _listing(path.parent)} == before
    monkeypatch.undo()
    # The previous store is still a valid cache: only the new document needs embedding.
    again = CountingProvider()
    embed_texts(again, edited, "document", _cache(tmp_path))
    assert again.sent == ["Un nouveau document."]


def test_a_save_appends_a_segment_and_rewrites_no_existing_one(tmp_path: Path) -> None:
    _, path = _fill(tmp_path)
    segments = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in path.parent.glob("seg-*")}
    embed_texts(CountingProvider(), [*CORPUS, "Un nouveau document."], "document", _cache(tmp_path))
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in path.parent.glob("seg-*")}
    assert {name: after[name] for name in segments} == segments
    assert len(after) == len(segments) + 2


def test_save_failure_in_the_middle_of_a_batch_keeps_what_was_paid_for(tmp_path: Path) -> None:
    class FailingProvider(CountingProvider):
        def embed(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
            if len(self.calls) == 1:
                raise RuntimeError("provider down (simulated)")
            return super().embed(texts, kind)

    with pytest.raises(RuntimeError, match="provider down"):
        embed_texts(FailingProvider(batch_size=3), CORPUS, "document", _cache(tmp_path))
    provider = CountingProvider()
    embed_texts(provider, CORPUS, "document", _cache(tmp_path))
    assert provider.sent == CORPUS[3:]
