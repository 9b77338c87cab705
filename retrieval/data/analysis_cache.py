"""BM25's analysed corpus kept on disk between runs, in the project's cache folder: the gate of a
large corpus that did not change skips the analysis, most of its time at 100,000 documents.

A cache that cannot change a figure. An entry is keyed by everything that decides the ids: the
corpus fingerprint (ids, titles and texts of the documents, retrieval.data.dataset), the language
and its analyzer's version, the language's stop list, the Unicode tables accents are folded with,
and the source of every module that builds the analysed text or numbers its terms (dataset.py, whose
`Document.content` joins title and text; analyzer.py, snowball.py, corpus_terms.py, chunk_keys.py,
corpus_parts.py; this module), so that an edit that forgets the version bump misses the cache
instead of finding a stale entry. An entry holds the digest of its content
(`analysis_digest`: the vocabulary, the ids, the lengths), checked when it is read: an entry that is
not whole, consistent and what its digest says is a miss, analysed and written again. And the
digest of the analysis a figure was computed from is recorded in the baseline beside the cassettes'
(retrieval.methods.bm25): given it (`expected`), an entry of another digest is never used, whatever
its own digest says (CI restores the folder from a cache another branch may have written), unless
this process analysed that very corpus itself.

An entry is a folder (ids.npy, lengths.npy, vocabulary.json, digest.txt) written beside its place
and renamed into it, so a reader never sees half of one. The KEEP entries used last are kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import unicodedata
import weakref
from pathlib import Path

import numpy as np

from retrieval.data import analyzer, chunk_keys, corpus_terms, dataset, snowball
from retrieval.data.analyzer import DEFAULT_LANGUAGE, analyzer_version
from retrieval.data.corpus_terms import AnalysedCorpus
from retrieval.files.atomic import clean_stale, staging_directory

__all__ = ["KEEP", "analysed_here", "analysis_digest", "load_analysis", "store_analysis", "trusted"]

KEEP = 2
DIGEST_FILE = "digest.txt"
# Ids hashed at a time: a memory-mapped entry of 100 million ids is read in slices, not copied.
_HASH_IDS = 1 << 22

# id(corpus) -> (a weak reference to it, its digest): a corpus is hashed once per process.
_DIGESTS: dict[int, tuple[weakref.ref[AnalysedCorpus], str]] = {}
# Digests of the analyses this process computed itself: the truth of this code, whatever a baseline says.
_ANALYSED: set[str] = set()


def _sources() -> list[str]:
    """The files whose code decides an analysis: corpus_parts's found, not imported (it imports this module)."""
    parts = importlib.util.find_spec("retrieval.data.corpus_parts")
    modules = (dataset, analyzer, snowball, corpus_terms, chunk_keys, sys.modules[__name__])
    return [*(module.__file__ or "" for module in modules), (parts.origin if parts else None) or ""]


def _code_digest(language: str) -> str:
    digest = hashlib.sha256(f"{language}\0{analyzer_version(language)}\0{unicodedata.unidata_version}".encode())
    for source in _sources():
        digest.update(Path(source).read_bytes())
    if language != DEFAULT_LANGUAGE:
        digest.update(snowball.stop_list_bytes(language))
    return digest.hexdigest()


def _entry(folder: Path, fingerprint: str, language: str) -> Path:
    key = hashlib.sha256(f"{fingerprint}\0{_code_digest(language)}".encode()).hexdigest()[:32]
    return folder / key


def analysis_digest(corpus: AnalysedCorpus) -> str:
    """sha256 of an analysis's content (vocabulary in order, ids, lengths): what the baseline records."""
    known = _DIGESTS.get(id(corpus))
    if known is not None and known[0]() is corpus:
        return known[1]
    digest = hashlib.sha256(json.dumps(list(corpus.vocabulary), ensure_ascii=False).encode())
    ids = corpus.ids
    digest.update(b"\0")
    for start in range(0, len(ids), _HASH_IDS):
        digest.update(np.ascontiguousarray(ids[start : start + _HASH_IDS], dtype="<i4").tobytes())
    digest.update(b"\0" + np.ascontiguousarray(corpus.lengths, dtype="<i8").tobytes())
    found = "sha256:" + digest.hexdigest()
    key = id(corpus)
    _DIGESTS[key] = (weakref.ref(corpus, lambda _: _DIGESTS.pop(key, None)), found)
    return found


def analysed_here(corpus: AnalysedCorpus) -> str:
    """Record that this process analysed `corpus` itself (never read it from a cache); its digest."""
    digest = analysis_digest(corpus)
    _ANALYSED.add(digest)
    return digest


def trusted(corpus: AnalysedCorpus, expected: str | None) -> bool:
    """Whether an analysis read back (from the cache, or remembered from it) may give figures: with
    no `expected` digest, its own was checked; else it must be that one, or one analysed here."""
    if expected is None:
        return True
    digest = analysis_digest(corpus)
    return digest == expected or digest in _ANALYSED


def load_analysis(
    folder: str | Path,
    fingerprint: str,
    documents: int,
    language: str = DEFAULT_LANGUAGE,
    expected: str | None = None,
) -> AnalysedCorpus | None:
    """The AnalysedCorpus stored for this corpus fingerprint (of `documents` documents) by this
    language's analyzer, or None: none stored, not whole, not what its digest says (then removed),
    or not the `expected` analysis (the baseline's; then kept, the caller analyses and compares)."""
    entry = _entry(Path(folder), fingerprint, language)
    try:
        ids = np.load(entry / "ids.npy", mmap_mode="r", allow_pickle=False)
        lengths = np.load(entry / "lengths.npy", allow_pickle=False)
        vocabulary = tuple(json.loads((entry / "vocabulary.json").read_text(encoding="utf-8")))
        recorded = (entry / DIGEST_FILE).read_text(encoding="ascii").strip()
    except FileNotFoundError:
        if entry.is_dir():  # a file of the entry is missing: damaged
            shutil.rmtree(entry, ignore_errors=True)
        return None
    except (OSError, ValueError, UnicodeDecodeError):
        shutil.rmtree(entry, ignore_errors=True)  # damaged: analysed and written again
        return None
    consistent = (
        ids.dtype == np.int32
        and ids.ndim == lengths.ndim == 1
        and lengths.dtype == np.int64
        and len(lengths) == documents
        and (not len(lengths) or int(lengths.min()) >= 0)
        and int(lengths.sum()) == len(ids)
        and all(type(term) is str for term in vocabulary)
        and (not len(ids) or 0 <= int(ids.min()) <= int(ids.max()) < len(vocabulary))
    )
    corpus = AnalysedCorpus(vocabulary, ids, lengths) if consistent else None
    if corpus is None or analysis_digest(corpus) != recorded:
        shutil.rmtree(entry, ignore_errors=True)
        return None
    if not trusted(corpus, expected):
        return None
    with contextlib.suppress(OSError):
        os.utime(entry)  # the entries used last are the ones kept
    lengths.setflags(write=False)
    return corpus


def store_analysis(
    folder: str | Path, fingerprint: str, corpus: AnalysedCorpus, language: str = DEFAULT_LANGUAGE
) -> None:
    """Store `corpus` as this corpus's analysis in `language` (in place of an entry of another
    content), then drop all but the KEEP entries used last. A failure to write (a full disk, a read-only
    checkout, a cache folder that is a file) leaves no entry and is not an error: the next run
    analyses again."""
    root = Path(folder)
    entry = _entry(root, fingerprint, language)
    digest = analysis_digest(corpus)
    with contextlib.suppress(OSError):
        if (entry / DIGEST_FILE).read_text(encoding="ascii").strip() == digest:
            return
    try:
        root.mkdir(parents=True, exist_ok=True)
        clean_stale(root, "*")  # any entry's staging folder left by a killed run
        staging = staging_directory(entry)
    except OSError:
        return
    try:
        np.save(staging / "ids.npy", np.ascontiguousarray(corpus.ids, dtype=np.int32))
        np.save(staging / "lengths.npy", np.ascontiguousarray(corpus.lengths, dtype=np.int64))
        (staging / "vocabulary.json").write_text(json.dumps(list(corpus.vocabulary), ensure_ascii=False), "utf-8")
        (staging / DIGEST_FILE).write_text(digest + "\n", "ascii")
        if entry.is_dir():  # another content under this key (a forged or outdated entry): replaced
            shutil.rmtree(entry, ignore_errors=True)
        staging.rename(entry)  # fails when another run stored it first: theirs is the same
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        return
    entries = sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")), key=_mtime)
    for old in entries[:-KEEP]:
        shutil.rmtree(old, ignore_errors=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
