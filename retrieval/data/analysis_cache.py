"""BM25's analysed corpus kept on disk between runs, in the project's cache folder: the gate of a
large corpus that did not change skips the analysis, most of its time at 100,000 documents.

An entry is keyed by everything that determines the ids: the corpus fingerprint (ids, titles and
texts of the documents, retrieval.data.dataset), the language and its analyzer's version, the
source of the modules that compute the ids (analyzer.py, snowball.py, corpus_terms.py) and the
language's stop list, so that an edit of the analyzer that forgets the version bump misses the
cache instead of finding a stale entry. An entry is a folder
(ids.npy, lengths.npy, vocabulary.json) written beside its place and renamed into it, so a
reader never sees half of one; an entry that does not read back whole and consistent is a miss,
analysed and written again. The newest KEEP entries are kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np

from retrieval.data import analyzer, corpus_terms, snowball
from retrieval.data.analyzer import DEFAULT_LANGUAGE, analyzer_version
from retrieval.data.corpus_terms import AnalysedCorpus
from retrieval.files.atomic import clean_stale, staging_directory

__all__ = ["KEEP", "load_analysis", "store_analysis"]

KEEP = 2


def _code_digest(language: str) -> str:
    digest = hashlib.sha256(f"{language}\0{analyzer_version(language)}".encode())
    for module in (analyzer, snowball, corpus_terms):
        digest.update(Path(module.__file__ or "").read_bytes())
    if language != DEFAULT_LANGUAGE:
        digest.update(snowball.stop_list_bytes(language))
    return digest.hexdigest()


def _entry(folder: Path, fingerprint: str, language: str) -> Path:
    key = hashlib.sha256(f"{fingerprint}\0{_code_digest(language)}".encode()).hexdigest()[:32]
    return folder / key


def load_analysis(
    folder: str | Path, fingerprint: str, documents: int, language: str = DEFAULT_LANGUAGE
) -> AnalysedCorpus | None:
    """The AnalysedCorpus stored for this corpus fingerprint (of `documents` documents) by this
    language's analyzer, or None."""
    entry = _entry(Path(folder), fingerprint, language)
    try:
        ids = np.load(entry / "ids.npy", mmap_mode="r", allow_pickle=False)
        lengths = np.load(entry / "lengths.npy", allow_pickle=False)
        vocabulary = tuple(json.loads((entry / "vocabulary.json").read_text(encoding="utf-8")))
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
    if not consistent:
        shutil.rmtree(entry, ignore_errors=True)
        return None
    with contextlib.suppress(OSError):
        os.utime(entry)  # the newest entries are the ones kept
    lengths.setflags(write=False)
    return AnalysedCorpus(vocabulary, ids, lengths)


def store_analysis(
    folder: str | Path, fingerprint: str, corpus: AnalysedCorpus, language: str = DEFAULT_LANGUAGE
) -> None:
    """Store `corpus` as this corpus's analysis in `language`, then drop all but the KEEP newest
    entries. A failure to write (a full disk, a read-only checkout) leaves no entry and is not an
    error: the next run analyses again."""
    root = Path(folder)
    entry = _entry(root, fingerprint, language)
    if entry.is_dir():
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
