"""The vector store (retrieval.recording.vector_store): keys, segments, digests, append-only writes, compaction.

Vectors here are FIXTURES (seeded random numbers), never a recording."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from retrieval.recording import vector_store
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
    assert store.written == sorted(files)
    # Another writer's store (another recording, a killed one's leftover): the files are there,
    # so it wrote none, and a discard of its recording removes none.
    other = _store(tmp_path)
    assert other.write_segment(SPACE, TEXTS[:3], vectors, "float32") == first
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "vectors").iterdir()} == files
    assert other.written == []


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
        # Said once: never a message inside itself ("…damaged vector segment (…damaged vector segment…").
        assert message.count(str(path)) == 1 and message.count("delete it to rebuild") == 1
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


def test_damage_is_said_once_not_inside_itself(tmp_path: Path) -> None:
    _saved(tmp_path, TEXTS, _vectors(len(TEXTS)))
    path = _segment_file(tmp_path, 1)
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(StoreError) as caught:
        _store(tmp_path).lookup(SPACE, TEXTS)
    assert str(caught.value) == (
        f"{path}: damaged vector segment (not the sha256 corpus-vectors.json lists); delete it to rebuild"
    )


# --- what the manifest lists is what is read ------------------------------------------------------


def _manifest_edit(store: VectorStore, **entry: object) -> None:
    data = json.loads(store.manifest.read_text())
    data["segments"][0].update(entry)
    store.manifest.write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"name": ".hidden"}, "segment name '.hidden' is not a plain file name"),
        ({"count": -1}, "segment 'NAME': precision, count or width out of range"),
        ({"width": -8}, "segment 'NAME': precision, count or width out of range"),
        ({"precision": "float64"}, "segment 'NAME': precision, count or width out of range"),
    ],
    ids=["hidden file", "negative count", "negative width", "unknown precision"],
)
def test_a_manifest_entry_out_of_range_is_refused(tmp_path: Path, entry: dict[str, object], expected: str) -> None:
    store = _saved(tmp_path, TEXTS[:2], _vectors(2))
    _manifest_edit(store, **entry)
    with pytest.raises(StoreError) as caught:
        _store(tmp_path)
    expected = expected.replace("NAME", store.segments[0].name)
    assert str(caught.value) == (
        f"{store.manifest}: damaged vector store manifest (ValueError: {expected}); delete it to rebuild"
    )


def test_a_float16_file_listed_as_float32_is_refused(tmp_path: Path) -> None:
    # Its digests are the file's own: only the dtype tells that it is not what the entry says.
    store = _saved(tmp_path, TEXTS, _vectors(len(TEXTS)), "float16")
    _manifest_edit(store, precision="float32")
    with pytest.raises(StoreError) as caught:
        _store(tmp_path).lookup(SPACE, TEXTS)
    vectors = tmp_path / "vectors" / store.segments[0].files[1]
    assert (
        str(caught.value) == f"{vectors}: vector segment of another shape than its manifest entry; delete it to rebuild"
    )


def test_the_newest_width_is_the_one_used(tmp_path: Path) -> None:
    # A server that chose its width (dimensions = 0) and then changed it: the new width's vectors only.
    space = Space("openai", "fixture-e5", 0, "document", "v1")
    store = _store(tmp_path)
    store.add(store.write_segment(space, TEXTS, _vectors(len(TEXTS), width=4), "float32"))
    wider = _vectors(len(TEXTS), width=8, seed=3)
    store.add(store.write_segment(space, TEXTS[:5], wider[:5], "float32"))
    store.save_manifest()
    again = _store(tmp_path)
    assert again.width(space) == 8
    got, found = again.lookup(space, TEXTS[:6])
    assert got.shape == (6, 8) and found.tolist() == [True] * 5 + [False]
    np.testing.assert_array_equal(got[:5], wider[:5])


@pytest.mark.parametrize("asked", ["the first segment's texts exactly", "some of them"])
def test_the_newest_vector_of_a_text_wins(tmp_path: Path, asked: str) -> None:
    vectors = _vectors(len(TEXTS))
    store = _saved(tmp_path, TEXTS, vectors)
    changed = _vectors(2, seed=1)
    store.add(store.write_segment(SPACE, [TEXTS[3], TEXTS[4]], changed, "float32"))
    store.save_manifest()
    texts = TEXTS if asked == "the first segment's texts exactly" else [TEXTS[4], TEXTS[3], TEXTS[9]]
    got, found = _store(tmp_path).lookup(SPACE, texts)
    assert found.all()
    expected = vectors.copy() if len(texts) == len(TEXTS) else vectors[[4, 3, 9]]
    if len(texts) == len(TEXTS):
        expected[[3, 4]] = changed
    else:
        expected[[0, 1]] = changed[[1, 0]]
    np.testing.assert_array_equal(got, expected)


def test_a_segment_added_twice_is_listed_once(tmp_path: Path) -> None:
    # A re-recording that embeds the same vectors again: the manifest, and so its digest, stay as they were.
    store = _saved(tmp_path, TEXTS, _vectors(len(TEXTS)))
    digest = store.digest()
    store.add(store.write_segment(SPACE, TEXTS, _vectors(len(TEXTS)), "float32"))
    assert len(store.segments) == 1 and store.digest() == digest


# --- values checked where they are read (a replay too) ----------------------------------------------


def _with_row(tmp_path: Path, row: list[float]) -> VectorStore:
    """A store whose row 7 is `row`, its digests made consistent (what the manifest lists is that file)."""
    vectors = _vectors(len(TEXTS))
    vectors[7] = row
    with np.errstate(over="ignore"):
        return _saved(tmp_path, TEXTS, vectors)


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ([float("nan")] + [0.5] * 7, "NaN or infinite values"),
        ([float("inf")] + [0.5] * 7, "NaN or infinite values"),
        ([0.0] * 8, "only zeros"),
        ([1e30] * 8, "values so large that its norm overflows"),
        ([1e-30] * 8, "values so small that its norm is 0"),
    ],
    ids=["NaN", "infinity", "zero", "1e30", "1e-30"],
)
def test_a_vector_that_would_score_zero_is_refused_when_read(tmp_path: Path, row: list[float], problem: str) -> None:
    store = _with_row(tmp_path, row)
    vectors = tmp_path / "vectors" / store.segments[0].files[1]
    for asked in (TEXTS, TEXTS[5:9]):  # the memory map as is, or rows copied out of it
        with pytest.raises(StoreError) as caught:
            _store(tmp_path).lookup(SPACE, asked)
        assert str(caught.value) == (
            f"{vectors}: the vector of row 7 holds {problem}, which would score 0 against everything; delete it to "
            "rebuild"
        )


def test_good_vectors_are_read_bit_for_bit(tmp_path: Path) -> None:
    vectors = _vectors(len(TEXTS))
    vectors[3] = [3e-20] * 8  # small, but its float32 norm is not 0
    got, _ = _saved(tmp_path, TEXTS, vectors).lookup(SPACE, TEXTS)
    np.testing.assert_array_equal(got, vectors)


def test_a_segment_that_cannot_be_written_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _saved(tmp_path, TEXTS, _vectors(len(TEXTS)))
    before = sorted(p.name for p in (tmp_path / "vectors").iterdir())
    real = vector_store.atomic_write

    def full_at_vectors(path: Path, write: object) -> None:
        if str(path).endswith(".vectors.npy"):
            raise OSError(28, "No space left on device")
        real(path, write)  # type: ignore[arg-type]

    monkeypatch.setattr(vector_store, "atomic_write", full_at_vectors)
    with pytest.raises(StoreError) as caught:
        store.write_segment(SPACE, ["nouveau"], _vectors(1), "float32")
    assert str(caught.value) == (
        f"{tmp_path / 'vectors'}: the vector segment could not be written (No space left on device); free space on "
        "its disk or make the folder writable, then run again"
    )
    assert sorted(p.name for p in (tmp_path / "vectors").iterdir()) == before  # no keys file without its vectors
    assert store.written == []  # nothing a discarded recording would have to remove
