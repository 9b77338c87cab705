"""The vector store (retrieval.recording.vector_store): keys, segments, digests, append-only writes, compaction.

Vectors here are FIXTURES (seeded random numbers), never a recording."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from retrieval.recording.vector_store import FORMAT, Space, StoreError, VectorStore, text_keys

SPACE = Space("openai", "fixture-e5", 8, "document", "v1")
TEXTS = [f"Document {i} : la procédure numéro {i}." for i in range(50)]


def _vectors(n: int, width: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, width)).astype(np.float32)


def _store(tmp_path: Path) -> VectorStore:
    return VectorStore.open(tmp_path / "cassettes" / "corpus-vectors.json", tmp_path / "vectors")


def _saved(tmp_path: Path, texts: list[str], vectors: np.ndarray, precision: str = "float32") -> VectorStore:
    store = _store(tmp_path)
    store.add(store.write_segment(SPACE, texts, vectors, precision))
    store.save_manifest()
    return _store(tmp_path)


def test_keys_are_the_sha256_of_the_text() -> None:
    keys = text_keys(["é", "\ud800"])  # a lone surrogate is kept, not refused
    assert keys.shape == (2, 32) and keys.dtype == np.uint8
    assert keys[0].tobytes() == hashlib.sha256("é".encode()).digest()
    assert keys[1].tobytes() == hashlib.sha256("\ud800".encode("utf-8", "surrogatepass")).digest()


def test_vectors_come_back_exactly_by_text_whatever_the_order(tmp_path: Path) -> None:
    vectors = _vectors(len(TEXTS))
    store = _saved(tmp_path, TEXTS, vectors)
    asked = [TEXTS[7], "never stored", TEXTS[0], TEXTS[7]]
    got, found = store.lookup(SPACE, asked)
    assert found.tolist() == [True, False, True, True]
    np.testing.assert_array_equal(got[[0, 2, 3]], vectors[[7, 0, 7]])
    # Another space (model, kind, variant...) holds none of them.
    _, found = store.lookup(Space("openai", "other", 8, "document", "v1"), TEXTS[:3])
    assert not found.any()


def test_the_corpus_recorded_at_once_is_memory_mapped_not_copied(tmp_path: Path) -> None:
    store = _saved(tmp_path, TEXTS, _vectors(len(TEXTS)))
    got, found = store.lookup(SPACE, TEXTS)
    assert isinstance(got, np.memmap) and found.all()


def test_a_later_segment_wins_and_rewrites_no_existing_file(tmp_path: Path) -> None:
    store = _saved(tmp_path, TEXTS, _vectors(len(TEXTS)))
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in (tmp_path / "vectors").iterdir()}
    changed = _vectors(1, seed=1)
    store.add(store.write_segment(SPACE, [TEXTS[3]], changed, "float32"))
    store.save_manifest()
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in (tmp_path / "vectors").iterdir()}
    assert {name: after[name] for name in before} == before and len(after) == len(before) + 2
    got, _ = _store(tmp_path).lookup(SPACE, [TEXTS[3]])
    np.testing.assert_array_equal(got[0], changed[0])


def test_the_same_vectors_twice_write_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path)
    vectors = _vectors(3)
    first = store.write_segment(SPACE, TEXTS[:3], vectors, "float32")
    files = {p: p.stat().st_mtime_ns for p in (tmp_path / "vectors").iterdir()}
    assert store.write_segment(SPACE, TEXTS[:3], vectors, "float32") == first
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "vectors").iterdir()} == files


def test_a_text_given_twice_keeps_its_last_vector(tmp_path: Path) -> None:
    vectors = _vectors(3)
    store = _saved(tmp_path, [TEXTS[0], TEXTS[1], TEXTS[0]], vectors)
    assert store.segments[0].count == 2
    got, _ = store.lookup(SPACE, [TEXTS[0], TEXTS[1]])
    np.testing.assert_array_equal(got, vectors[[2, 1]])


def test_float16_halves_the_vectors_and_serves_float16_lookups_only(tmp_path: Path) -> None:
    vectors = _vectors(len(TEXTS))
    store = _saved(tmp_path, TEXTS, vectors, "float16")
    [segment] = store.segments
    assert np.load(tmp_path / "vectors" / segment.files[1]).dtype == np.float16
    got, found = store.lookup(SPACE, TEXTS, "float16")
    assert found.all() and got.dtype == np.float32
    np.testing.assert_array_equal(got, vectors.astype(np.float16).astype(np.float32))
    # A float32 run cannot get back what the rounding lost: those vectors are missing to it.
    assert not store.lookup(SPACE, TEXTS, "float32")[1].any()


def test_a_float32_store_serves_float16_rounded(tmp_path: Path) -> None:
    vectors = _vectors(4)
    got, _ = _saved(tmp_path, TEXTS[:4], vectors).lookup(SPACE, TEXTS[:4], "float16")
    np.testing.assert_array_equal(got, vectors.astype(np.float16).astype(np.float32))


def test_compaction_keeps_what_is_asked_and_nothing_else(tmp_path: Path) -> None:
    vectors = _vectors(len(TEXTS))
    store = _saved(tmp_path, TEXTS, vectors)
    store.add(store.write_segment(SPACE, ["édité"], _vectors(1, seed=2), "float32"))
    kept = [*TEXTS[:10], "édité"]
    compacted = store.compacted({SPACE: kept})
    compacted.save_manifest()
    for path in compacted.unreferenced():
        path.unlink()
    again = _store(tmp_path)
    assert [s.count for s in again.segments] == [11]
    got, found = again.lookup(SPACE, [*kept, TEXTS[20]])
    assert found.tolist() == [True] * 11 + [False]
    np.testing.assert_array_equal(got[:10], vectors[:10])
    assert len(list((tmp_path / "vectors").iterdir())) == 2


def test_bytes_per_vector_are_the_vector_and_its_key(tmp_path: Path) -> None:
    # The measured figures are in docs/performance.md (benchmarks/vector_store_size.py).
    for precision, size in (("float32", 4), ("float16", 2)):
        store = VectorStore.open(tmp_path / precision / "m.json", tmp_path / precision)
        store.add(store.write_segment(SPACE, TEXTS, _vectors(len(TEXTS)), precision))
        files = [tmp_path / precision / f for f in store.segments[0].files]
        assert sum(p.stat().st_size for p in files) == 2 * 128 + len(TEXTS) * (32 + size * 8)


# --- damage: one line naming the file and the fix -----------------------------------------------


def _segment_file(tmp_path: Path, which: int) -> Path:
    return sorted((tmp_path / "vectors").glob("seg-*"))[which]


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (
            lambda p: p.write_bytes(p.read_bytes()[:-3]),
            "damaged vector segment (not the sha256 corpus-vectors.json lists)",
        ),
        (lambda p: p.unlink(), "missing vector segment (listed in "),
        (lambda p: p.write_bytes(b"version https://git-lfs.github.com/spec/v1\noid sha256:0\n"), "a Git LFS pointer"),
    ],
    ids=["truncated", "missing", "LFS pointer"],
)
def test_a_damaged_segment_is_named_in_one_line(tmp_path: Path, damage: object, expected: str) -> None:
    for which in (0, 1):  # keys, then vectors
        _saved(tmp_path, TEXTS, _vectors(len(TEXTS)))
        path = _segment_file(tmp_path, which)
        damage(path)  # type: ignore[operator]
        with pytest.raises(StoreError) as caught:
            _store(tmp_path).lookup(SPACE, TEXTS[:1])
        message = str(caught.value)
        assert message.startswith(f"{path}: ") and expected in message and "\n" not in message
        assert message.endswith("delete it to rebuild")
        for leftover in (tmp_path / "vectors").iterdir():
            leftover.unlink()


def test_a_flipped_vector_byte_is_caught_by_the_digest(tmp_path: Path) -> None:
    _saved(tmp_path, TEXTS, _vectors(len(TEXTS)))
    path = _segment_file(tmp_path, 1)
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0x01
    path.write_bytes(bytes(raw))
    with pytest.raises(StoreError, match="damaged vector segment"):
        _store(tmp_path).lookup(SPACE, TEXTS)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"{", "damaged vector store manifest (JSONDecodeError"),
        (json.dumps({"format": "other", "segments": []}).encode(), f"expected an object of format {FORMAT!r}"),
        (json.dumps({"format": FORMAT, "segments": [{"name": "../x"}]}).encode(), "KeyError"),
        (b"version https://git-lfs.github.com/spec/v1\n", "a Git LFS pointer, not the manifest"),
    ],
    ids=["invalid JSON", "other format", "entry incomplete", "LFS pointer"],
)
def test_a_damaged_manifest_is_named_in_one_line(tmp_path: Path, content: bytes, expected: str) -> None:
    manifest = tmp_path / "cassettes" / "corpus-vectors.json"
    manifest.parent.mkdir()
    manifest.write_bytes(content)
    with pytest.raises(StoreError) as caught:
        _store(tmp_path)
    assert str(caught.value).startswith(f"{manifest}: ") and expected in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_segment_name_that_leaves_the_folder_is_refused(tmp_path: Path) -> None:
    store = _saved(tmp_path, TEXTS[:2], _vectors(2))
    data = json.loads(store.manifest.read_text())
    data["segments"][0]["name"] = "../../etc/x"
    store.manifest.write_text(json.dumps(data))
    with pytest.raises(StoreError, match="is not a plain file name"):
        _store(tmp_path)
