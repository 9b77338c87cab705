"""An append-only store of embedding vectors, keyed by the SHA-256 of their text, that numpy memory-maps.

Format (why): each segment is two `.npy` files, `<name>.keys.npy` (n x 32 uint8: the SHA-256 of each
text) and `<name>.vectors.npy` (n x width, float32 or float16, C order). `.npy` is numpy's own format:
`np.load(mmap_mode="r")` maps it without reading it, a million 384-d float32 vectors cost no memory
until touched, and reading needs nothing beyond numpy (safetensors or Arrow would add a dependency for
the same flat array). A JSON manifest lists the segments, each with its space (provider, model,
configured dimensions, kind, variant: what changes the vectors), its row count, width, precision and
the SHA-256 of both files; a reader checks a segment's digests before using it, so the manifest's own
digest stands for every vector it lists (the baseline records it like a cassette's), and its values:
a NaN, infinite, zero or overflowing vector (which would score 0 against everything) is refused.

Texts are never copied in (the corpus is in the repository): 32 bytes of key per vector, plus a
header of 128 bytes per file and a manifest entry per segment.

Append-only: `write_segment` writes new files only (named by their content, so writing the same
vectors twice writes nothing); `save_manifest` replaces the manifest, the one file that changes. A
later segment's vector wins over an earlier one for the same key and space. `compacted` keeps only
the vectors asked for, in one new segment; `unreferenced` names the files no manifest lists.

Messages name the file and the fix in one line (`StoreError`); a Git LFS pointer checked out instead of
a segment is named as such.

Use: `VectorStore.open(manifest, folder)`; `lookup(space, texts, precision)` gives the vectors and a
mask of those found (a memory map when one segment holds exactly the texts); `write_segment` then
`add`, and `save_manifest` (a standalone store, the cache) or `Recorder.stage_vectors` (a profile's
store, committed with its cassettes); `digest`; `compacted`/`merged` and `unreferenced` to compact.
A profile's store is `Recorder.committed_store()`; its space, `corpus_vectors.corpus_space`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from retrieval.files.atomic import atomic_write, atomic_write_bytes

__all__ = [
    "FORMAT",
    "PRECISIONS",
    "Segment",
    "Space",
    "StoreError",
    "VectorStore",
    "text_keys",
]

FORMAT = "retrieval-vector-store-1"
# float32: exactly what the provider returned; float16: half the bytes, rounded (docs/performance.md).
PRECISIONS = ("float32", "float16")
KEY_BYTES = 32
_LFS_POINTER = b"version https://git-lfs.github.com/spec/v1"


class StoreError(ValueError):
    """A store file is missing, damaged or not what the manifest says; the message names it and the fix."""


def text_keys(texts: Sequence[str]) -> np.ndarray:
    """The keys of texts: the SHA-256 of their UTF-8 bytes (lone surrogates kept), n x 32 uint8."""
    joined = b"".join(hashlib.sha256(t.encode("utf-8", "surrogatepass")).digest() for t in texts)
    return np.frombuffer(joined, dtype=np.uint8).reshape(len(texts), KEY_BYTES)


@dataclass(frozen=True)
class Space:
    """What changes a text's vector besides the text: a vector is looked up in its own space only."""

    provider: str
    model: str
    dimensions: int  # as configured; 0 when the server chooses (the segment's `width` says what it chose)
    kind: str  # "document" or "query" (a task type)
    variant: str = ""  # whatever else changes the vectors: endpoint, prefixes, input limit

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Space:
        """The space a manifest entry names; KeyError or TypeError when it is not one."""
        space = cls(str(data["provider"]), str(data["model"]), int(data["dimensions"]), str(data["kind"]))
        return Space(space.provider, space.model, space.dimensions, space.kind, str(data.get("variant", "")))


@dataclass(frozen=True)
class Segment:
    """One segment as the manifest lists it."""

    name: str
    space: Space
    count: int
    width: int
    precision: str
    keys_sha256: str
    vectors_sha256: str

    @property
    def files(self) -> tuple[str, str]:
        """The segment's two file names (keys, vectors)."""
        return f"{self.name}.keys.npy", f"{self.name}.vectors.npy"

    def as_dict(self) -> dict[str, Any]:
        """The manifest entry."""
        entry = asdict(self)
        entry["space"] = asdict(self.space)
        return entry


class _Hashing:
    """A write-only stream that only hashes: numpy writes a `.npy` to it in chunks (16 MiB), so a
    segment's digest is known before its file is written, without a copy of the array in memory."""

    def __init__(self) -> None:
        self.digest = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        return len(data)


def _npy_sha256(array: np.ndarray) -> str:
    stream = _Hashing()
    np.lib.format.write_array(stream, array, allow_pickle=False)
    return stream.digest.hexdigest()


def _prefix(keys: np.ndarray) -> np.ndarray:
    """The first 8 bytes of each key as an unsigned integer (the keys are uniform hashes)."""
    return np.ascontiguousarray(keys[:, :8]).view(">u8").ravel()


def _write_npy(path: Path, array: np.ndarray) -> None:
    def write(handle: BinaryIO) -> None:
        np.lib.format.write_array(handle, array, allow_pickle=False)

    atomic_write(path, write)


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


# Rows checked at a time: a million 384-d vectors are read in slices of 24 MB, not copied whole.
_CHECK_ROWS = 1 << 14


def _bad_row(vectors: np.ndarray) -> str | None:
    """What is wrong with the first vector that is not finite, all zero or of a float32 norm that
    overflows (1e30), or None."""
    for start in range(0, len(vectors), _CHECK_ROWS):
        rows = np.asarray(vectors[start : start + _CHECK_ROWS], dtype=np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            squares = np.einsum("ij,ij->i", rows, rows)
        bad = np.flatnonzero(~np.isfinite(squares) | (squares == 0))
        if len(bad):
            row = rows[bad[0]]
            what = (
                "NaN or infinite values"
                if not np.isfinite(row).all()
                else "only zeros"
                if not row.any()
                else "values so small that its norm is 0"
                if squares[bad[0]] == 0
                else "values so large that its norm overflows"
            )
            return f"the vector of row {start + int(bad[0])} holds {what}"
    return None


def _segment(entry: Any) -> Segment:
    if not isinstance(entry, dict):
        raise TypeError("a segment entry is not an object")
    segment = Segment(
        name=str(entry["name"]),
        space=Space.from_dict(entry["space"]),
        count=int(entry["count"]),
        width=int(entry["width"]),
        precision=str(entry["precision"]),
        keys_sha256=str(entry["keys_sha256"]),
        vectors_sha256=str(entry["vectors_sha256"]),
    )
    if segment.precision not in PRECISIONS or segment.count < 0 or segment.width < 0:
        raise ValueError(f"segment {segment.name!r}: precision, count or width out of range")
    if "/" in segment.name or "\\" in segment.name or segment.name.startswith("."):
        raise ValueError(f"segment name {segment.name!r} is not a plain file name")
    return segment


@dataclass
class VectorStore:
    """The segments a manifest lists, read from `folder`.

    `fix` ends every error message: how to restore the store (`git checkout`, a re-recording).
    A store whose manifest does not exist is empty.
    """

    manifest: Path
    folder: Path
    fix: str = "delete it to rebuild"
    segments: list[Segment] = field(default_factory=list)
    # Digests checked when a segment is first read (hashing ~1 GB/s): off only for a benchmark
    # that re-reads a store it just wrote; shapes and dtypes are checked either way.
    verify: bool = True
    _checked: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False)
    # The segment files this store wrote (new files only; not those another writer left or shares):
    # what a discarded recording removes, and nothing else.
    written: list[Path] = field(default_factory=list, repr=False)

    @classmethod
    def open(
        cls, manifest: str | Path, folder: str | Path, fix: str = "delete it to rebuild", verify: bool = True
    ) -> VectorStore:
        """The store a manifest describes (empty if it does not exist); StoreError when it is damaged.
        Segments are checked against their digests when first read, not here."""
        store = cls(Path(manifest), Path(folder), fix, verify=verify)
        if store.manifest.is_file():
            store.segments = store._read_manifest()
        return store

    def _error(self, path: Path, what: str) -> StoreError:
        return StoreError(f"{path}: {what}; {self.fix}")

    def _read_manifest(self) -> list[Segment]:
        try:
            raw = self.manifest.read_bytes()
        except OSError as exc:
            raise self._error(self.manifest, f"unreadable vector store manifest ({exc.strerror or exc})") from exc
        if raw.startswith(_LFS_POINTER):
            raise self._error(
                self.manifest, "a Git LFS pointer, not the manifest: fetch it with `git lfs pull`, or"
            ) from None
        try:
            data = json.loads(raw.decode("utf-8"))
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError(f"expected an object of format {FORMAT!r}")
            entries = data["segments"]
            if not isinstance(entries, list):
                raise TypeError('"segments" is not a list')
            return [_segment(entry) for entry in entries]
        except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            raise self._error(self.manifest, f"damaged vector store manifest ({type(exc).__name__}: {exc})") from exc

    def manifest_bytes(self, segments: Iterable[Segment] | None = None) -> bytes:
        """The manifest listing `segments` (default: this store's), as written."""
        listed = self.segments if segments is None else list(segments)
        data = {"format": FORMAT, "segments": [s.as_dict() for s in listed]}
        return (json.dumps(data, indent=1, sort_keys=True) + "\n").encode()

    def digest(self) -> str:
        """sha256 of the manifest as written: it holds every segment's digests, so it stands for the vectors."""
        return "sha256:" + hashlib.sha256(self.manifest_bytes()).hexdigest()

    def save_manifest(self) -> None:
        """Replace the manifest atomically with this store's segment list."""
        atomic_write_bytes(self.manifest, self.manifest_bytes())

    def arrays(self, segment: Segment) -> tuple[np.ndarray, np.ndarray]:
        """A segment's keys and vectors, memory-mapped, after checking both files against the manifest
        and every vector finite and non-zero (replay reads them too: one bad row would score 0 silently)."""
        if segment.name in self._checked:
            return self._checked[segment.name]
        keys, vectors = (
            self._load(self.folder / file, expected)
            for file, expected in zip(segment.files, (segment.keys_sha256, segment.vectors_sha256), strict=True)
        )
        shape_ok = keys.shape == (segment.count, KEY_BYTES) and keys.dtype == np.uint8
        if not shape_ok or vectors.shape != (segment.count, segment.width) or vectors.dtype != segment.precision:
            raise self._error(self.folder / segment.files[1], "vector segment of another shape than its manifest entry")
        problem = _bad_row(vectors)
        if problem is not None:
            raise self._error(self.folder / segment.files[1], f"{problem}, which would score 0 against everything")
        self._checked[segment.name] = (keys, vectors)
        return keys, vectors

    def _load(self, path: Path, expected: str) -> np.ndarray:
        """One segment file, memory-mapped, once its digest is checked; StoreError otherwise (raised
        outside the handlers of the read, so that a message never holds another)."""
        try:
            with open(path, "rb") as handle:
                pointer = handle.read(len(_LFS_POINTER)) == _LFS_POINTER
            intact = not pointer and (not self.verify or _sha256_file(path) == expected)
            array = np.load(path, mmap_mode="r", allow_pickle=False) if intact else None
        except FileNotFoundError as exc:
            raise self._error(path, f"missing vector segment (listed in {self.manifest})") from exc
        except OSError as exc:
            raise self._error(path, f"unreadable vector segment ({exc.strerror or exc})") from exc
        except ValueError as exc:
            raise self._error(path, f"damaged vector segment ({exc})") from exc
        if pointer:
            raise self._error(path, "a Git LFS pointer, not the vectors: fetch it with `git lfs pull`, or")
        if array is None:
            raise self._error(path, f"damaged vector segment (not the sha256 {self.manifest.name} lists)")
        return array

    def segments_of(self, space: Space, width: int | None = None) -> list[Segment]:
        """The space's segments, oldest first; of one `width` when given (a server that changed its
        vector size leaves segments of the old width, never mixed with the new)."""
        return [s for s in self.segments if s.space == space and (width is None or s.width == width)]

    def width(self, space: Space) -> int | None:
        """The width of the space's vectors: the configured dimensions, else the newest segment's."""
        if space.dimensions:
            return space.dimensions
        found = self.segments_of(space)
        return found[-1].width if found else None

    def lookup(self, space: Space, texts: Sequence[str], precision: str = "float32") -> tuple[np.ndarray, np.ndarray]:
        """The stored vectors of `texts` in `space` (float32, rounded to `precision`) and a mask of
        those found. Vectors stored in float16 serve only a float16 lookup (the float32 ones are gone).

        When one segment holds exactly `texts` in order, its memory map is returned as is (float32)."""
        width = self.width(space)
        wanted = text_keys(texts)
        usable = [s for s in self.segments_of(space, width) if precision == "float16" or s.precision == "float32"]
        if width is None or not usable:
            return np.zeros((len(texts), width or 0), np.float32), np.zeros(len(texts), bool)
        newest = usable[-1]
        if newest.precision == precision == "float32":
            keys, vectors = self.arrays(newest)
            if np.array_equal(keys, wanted):
                return vectors, np.ones(len(texts), bool)  # a large corpus recorded at once: no copy
        out = np.zeros((len(texts), width), np.float32)
        found = np.zeros(len(texts), bool)
        wanted_prefix = _prefix(wanted)
        for segment in reversed(usable):  # newest first: a later vector wins
            keys, vectors = self.arrays(segment)
            pending = np.flatnonzero(~found)
            if not len(pending):
                break
            if not len(keys):
                continue
            # Sorted by the keys' first 8 bytes (a fast integer sort); the 32 bytes decide. Two keys
            # sharing 8 bytes (about 1 in 10^7 for a million texts) leave one text missing: a replay
            # miss, never a wrong vector.
            stored = _prefix(keys)
            order = np.argsort(stored, kind="stable")
            at = np.minimum(np.searchsorted(stored[order], wanted_prefix[pending]), len(order) - 1)
            rows = order[at]
            hit = np.all(keys[rows] == wanted[pending], axis=1)
            out[pending[hit]] = vectors[rows[hit]]
            found[pending[hit]] = True
        if precision == "float16":
            out = out.astype(np.float16).astype(np.float32)
        return out, found

    def write_segment(self, space: Space, texts: Sequence[str], vectors: np.ndarray, precision: str) -> Segment:
        """Write the vectors of `texts` as a new segment (files only: the manifest is the caller's,
        see `add`). Named by its content: the same vectors twice write nothing."""
        rows = np.asarray(vectors, dtype=np.float32)
        if rows.ndim != 2 or len(rows) != len(texts):
            raise ValueError(f"{len(texts)} texts but vectors of shape {rows.shape}")
        return self._write(space, text_keys(texts), rows, precision)

    def _write(self, space: Space, keys: np.ndarray, rows: np.ndarray, precision: str) -> Segment:
        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
        # A key given twice: its last vector, once (lookups may then stop at the first match).
        flipped = keys[::-1].view(f"V{KEY_BYTES}").ravel()
        _, first = np.unique(flipped, return_index=True)
        if len(first) != len(keys):
            keep = np.sort(len(keys) - 1 - first)
            keys, rows = keys[keep], rows[keep]
        arrays = (np.ascontiguousarray(keys), np.ascontiguousarray(rows, dtype=precision))
        keys_sha, vectors_sha = (_npy_sha256(a) for a in arrays)
        name = "seg-" + hashlib.sha256(f"{keys_sha}{vectors_sha}".encode()).hexdigest()[:24]
        segment = Segment(name, space, len(keys), rows.shape[1], precision, keys_sha, vectors_sha)
        created: list[Path] = []
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            for file, array, expected in zip(segment.files, arrays, (keys_sha, vectors_sha), strict=True):
                path = self.folder / file
                if path.is_file() and _sha256_file(path) == expected:
                    continue  # content-addressed: already there, never rewritten
                _write_npy(path, array)
                created.append(path)
        except OSError as exc:
            for path in created:  # no half segment left: a keys file without its vectors
                path.unlink(missing_ok=True)
            raise StoreError(
                f"{self.folder}: the vector segment could not be written ({exc.strerror or exc}); free space on "
                "its disk or make the folder writable, then run again"
            ) from exc
        self.written += created
        return segment

    def merged(self, space: Space) -> VectorStore:
        """A store in which the space's segments of its current width are one segment (later vectors
        winning), the other spaces' kept as they are; its manifest is not saved."""
        width = self.width(space)
        parts = [s for s in self.segments_of(space, width) if s.precision == "float32"]
        result = VectorStore(self.manifest, self.folder, self.fix)
        result.segments = [s for s in self.segments if s not in parts]
        if parts:
            arrays = [self.arrays(s) for s in parts]
            keys = np.concatenate([k for k, _ in arrays])
            rows = np.concatenate([np.asarray(v, np.float32) for _, v in arrays])
            result.add(result._write(space, keys, rows, "float32"))
        return result

    def add(self, segment: Segment) -> None:
        """List a written segment (in memory: `save_manifest` or a recording's commit writes it)."""
        if all(s.name != segment.name for s in self.segments):
            self.segments.append(segment)

    def compacted(self, keep: Mapping[Space, Sequence[str]], precision: str | None = None) -> VectorStore:
        """A store of one segment per space holding only the vectors of `keep`'s texts (what the
        corpus uses), written to this folder; its manifest is not saved. Texts not stored are skipped."""
        result = VectorStore(self.manifest, self.folder, self.fix)
        for space, texts in keep.items():
            kinds = {s.precision for s in self.segments_of(space, self.width(space))}
            stored_in = precision or ("float32" if "float32" in kinds or not kinds else "float16")
            vectors, found = self.lookup(space, texts, stored_in)
            if found.any():
                chosen = [t for t, f in zip(texts, found, strict=True) if f]
                result.add(result.write_segment(space, chosen, np.asarray(vectors)[found], stored_in))
        return result

    def unreferenced(self) -> list[Path]:
        """Segment files in the folder that the manifest does not list (left by a compaction or a failed commit)."""
        listed = {file for s in self.segments for file in s.files}
        if not self.folder.is_dir():
            return []
        return sorted(p for p in self.folder.glob("seg-*.npy") if p.name not in listed)

    def nbytes(self) -> int:
        """Bytes of the manifest and the segment files it lists, as written."""
        files = [self.folder / f for s in self.segments for f in s.files]
        return len(self.manifest_bytes()) + sum(p.stat().st_size for p in files)
