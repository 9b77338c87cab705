"""BM25's analysed corpus kept on disk: read back as analysed, keyed by the corpus and the
analyzer's code, a damaged entry a miss that is written again, and a gate that finds it
analyses nothing."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from dataset_files import document_rows, question_rows, write_dataset
from test_corpus_parts import _assert_identical, _documents

from retrieval.config import ConfigError, Settings, load_settings
from retrieval.data import analysis_cache, chunk_keys, corpus_parts, corpus_terms, dataset
from retrieval.data.analysis_cache import analysis_digest, load_analysis, store_analysis
from retrieval.data.corpus_terms import AnalysedCorpus, analyze_corpus, forget_analyses
from retrieval.data.dataset import Dataset, Question, _Documents, corpus_fingerprint
from retrieval.gate.accept import accept
from retrieval.gate.result import run_gate
from retrieval.methods import bm25
from retrieval.methods.base import Context
from retrieval.methods.bm25 import BM25Method


@pytest.fixture(autouse=True)
def batch_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    # Small corpora through the batch pipeline, whose ids are read-only, as a large corpus's.
    monkeypatch.setattr(corpus_terms, "_SMALL_CORPUS", 0)


def _loaded(n: int, seed: int) -> _Documents:
    """Documents as load_dataset gives them: carrying their corpus fingerprint."""
    documents = _Documents(_documents(n, seed))
    documents.corpus_fingerprint = corpus_fingerprint(tuple(documents))
    return documents


def test_an_entry_reads_back_as_stored_and_only_for_its_corpus(tmp_path: Path) -> None:
    documents = _loaded(60, seed=1)
    corpus = analyze_corpus(d.content for d in documents)
    store_analysis(tmp_path, documents.corpus_fingerprint, corpus)
    loaded = load_analysis(tmp_path, documents.corpus_fingerprint, len(documents))
    assert loaded is not None
    _assert_identical(loaded, corpus)
    assert load_analysis(tmp_path, "sha256:another", len(documents)) is None
    assert load_analysis(tmp_path, documents.corpus_fingerprint, len(documents) + 1) is None  # and removed
    assert not list(tmp_path.glob(".*"))  # no staging folder left


def test_the_analyzer_code_is_in_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    documents = _loaded(60, seed=2)
    store_analysis(tmp_path, documents.corpus_fingerprint, analyze_corpus(d.content for d in documents))
    assert load_analysis(tmp_path, documents.corpus_fingerprint, len(documents)) is not None
    monkeypatch.setattr(analysis_cache.analyzer, "ANALYZER_VERSION", "fr-edited")
    assert load_analysis(tmp_path, documents.corpus_fingerprint, len(documents)) is None
    monkeypatch.undo()
    # An edit of the analyzer's source without a version bump misses too.
    edited = tmp_path / "analyzer_copy.py"
    edited.write_bytes(Path(corpus_terms.__file__).read_bytes() + b"\n# edited\n")
    monkeypatch.setattr(analysis_cache.corpus_terms, "__file__", str(edited))
    assert load_analysis(tmp_path, documents.corpus_fingerprint, len(documents)) is None


@pytest.mark.parametrize("damage", ["truncated ids", "ids past the vocabulary", "missing vocabulary", "not json"])
def test_a_damaged_entry_is_a_miss_and_is_written_again(tmp_path: Path, damage: str) -> None:
    documents = _loaded(60, seed=3)
    expected = analyze_corpus(d.content for d in documents)
    store_analysis(tmp_path, documents.corpus_fingerprint, expected)
    (entry,) = (p for p in tmp_path.iterdir() if p.is_dir())
    if damage == "truncated ids":
        (entry / "ids.npy").write_bytes((entry / "ids.npy").read_bytes()[:-8])
    elif damage == "ids past the vocabulary":
        np.save(entry / "ids.npy", np.asarray(expected.ids) + len(expected.vocabulary))
    elif damage == "missing vocabulary":
        (entry / "vocabulary.json").unlink()
    else:
        (entry / "vocabulary.json").write_text("[", encoding="utf-8")
    assert load_analysis(tmp_path, documents.corpus_fingerprint, len(documents)) is None
    assert not entry.exists()  # removed: the next analysis writes it again
    forget_analyses()
    _assert_identical(corpus_parts.analyze_documents(documents, processes=1, cache=tmp_path), expected)
    rewritten = load_analysis(tmp_path, documents.corpus_fingerprint, len(documents))
    assert rewritten is not None
    _assert_identical(rewritten, expected)


def test_only_the_newest_entries_are_kept(tmp_path: Path) -> None:
    corpora = [_loaded(40, seed=10 + i) for i in range(analysis_cache.KEEP + 2)]
    for documents in corpora:
        store_analysis(tmp_path, documents.corpus_fingerprint, analyze_corpus(d.content for d in documents))
    assert len([p for p in tmp_path.iterdir() if p.is_dir()]) == analysis_cache.KEEP
    assert load_analysis(tmp_path, corpora[0].corpus_fingerprint, len(corpora[0])) is None
    assert load_analysis(tmp_path, corpora[-1].corpus_fingerprint, len(corpora[-1])) is not None


def test_a_cache_that_cannot_be_written_is_no_error(tmp_path: Path) -> None:
    documents = _loaded(40, seed=4)
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    store_analysis(blocked / "cache", documents.corpus_fingerprint, analyze_corpus(d.content for d in documents))
    assert load_analysis(blocked / "cache", documents.corpus_fingerprint, len(documents)) is None


def test_bm25_finds_its_analysis_in_the_cache_and_starts_no_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bm25, "CACHED_DOCUMENTS", 50)
    documents = _loaded(90, seed=5)
    questions = tuple(Question(f"q{j}", documents[j].text[:40], "t", (documents[j].id,)) for j in range(5))
    context = Context(dataset=Dataset("cached", documents, questions, "sha256:test"), depth=20)
    forget_analyses()
    first = BM25Method(analysis_cache=tmp_path).rank(context)
    assert len([p for p in tmp_path.iterdir() if p.is_dir()]) == 1
    forget_analyses()  # as a new process: nothing remembered in memory

    def no_analysis(*args: object, **kwargs: object) -> AnalysedCorpus:
        raise AssertionError("the corpus was analysed again")

    monkeypatch.setattr(corpus_parts, "analyze_corpus", no_analysis)
    monkeypatch.setattr(corpus_parts, "PendingAnalysis", no_analysis)
    method = BM25Method(analysis_cache=tmp_path)
    assert method.prepare(context) is None
    again = method.rank(context)
    assert [r.indices.tolist() for r in again] == [r.indices.tolist() for r in first]
    assert [r.scores.tobytes() for r in again] == [r.scores.tobytes() for r in first]


# --- a cache that cannot change a figure ------------------------------------------------------------------


def _entry(folder: Path) -> Path:
    (entry,) = (p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    return entry


def _forge(entry: Path, digest_agrees: bool) -> None:
    """The entry's vocabulary reversed: every id now names another term, and every shape check still
    passes; with `digest_agrees`, its digest file rewritten to match (a forgery, not a damage)."""
    vocabulary = json.loads((entry / "vocabulary.json").read_text(encoding="utf-8"))[::-1]
    (entry / "vocabulary.json").write_text(json.dumps(vocabulary, ensure_ascii=False), encoding="utf-8")
    if digest_agrees:
        ids = np.load(entry / "ids.npy")
        lengths = np.load(entry / "lengths.npy")
        forged = analysis_digest(AnalysedCorpus(tuple(vocabulary), ids, lengths))
        (entry / "digest.txt").write_text(forged + "\n", encoding="ascii")


def _cached_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> Context:
    monkeypatch.setattr(bm25, "CACHED_DOCUMENTS", 50)
    documents = _loaded(90, seed=seed)
    questions = tuple(Question(f"q{j}", documents[j].text[:40], "t", (documents[j].id,)) for j in range(8))
    return Context(dataset=Dataset("cached", documents, questions, "sha256:test"), depth=20)


def _ranked(
    context: Context, cache: Path, baseline: dict[str, str] | None = None, new_process: bool = True
) -> list[list[int]]:
    if new_process:
        forget_analyses()  # nothing remembered in memory
    context = replace(context, inputs={}, baseline_inputs=baseline)
    return [r.indices.tolist() for r in BM25Method(analysis_cache=cache).rank(context)]


def test_an_entry_that_is_not_its_digest_is_analysed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    context = _cached_context(tmp_path, monkeypatch, seed=21)
    first = _ranked(context, tmp_path)
    entry = _entry(tmp_path)
    true = (entry / "digest.txt").read_text()
    _forge(entry, digest_agrees=False)
    assert _ranked(context, tmp_path) == first
    assert (entry / "digest.txt").read_text() == true  # written again, whole


def test_a_forged_entry_is_never_used_against_the_baselines_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    context = _cached_context(tmp_path, monkeypatch, seed=22)
    fresh = replace(context, inputs={})
    first = [r.indices.tolist() for r in BM25Method(analysis_cache=tmp_path).rank(fresh)]
    recorded = fresh.inputs[bm25.ANALYSIS_INPUT]
    assert recorded.startswith("sha256:") and (_entry(tmp_path) / "digest.txt").read_text() == recorded + "\n"
    _forge(_entry(tmp_path), digest_agrees=True)
    # Its own digest agrees: outside the gate (no baseline to compare with) it would be used, and move the figures...
    assert _ranked(context, tmp_path) != first
    # ...the gate gives the baseline's digest: analysed again (though this process remembers the forged
    # one), the figures the baseline's, the entry replaced.
    assert _ranked(context, tmp_path, {bm25.ANALYSIS_INPUT: recorded}, new_process=False) == first
    assert (_entry(tmp_path) / "digest.txt").read_text() == recorded + "\n"


def test_a_baseline_that_records_no_analysis_uses_none_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its next update records the digest: of an analysis made here, never of one found in the cache.
    context = _cached_context(tmp_path, monkeypatch, seed=23)
    first = _ranked(context, tmp_path)
    _forge(_entry(tmp_path), digest_agrees=True)
    assert _ranked(context, tmp_path, {}) == first


@pytest.mark.parametrize("source", ["dataset", "corpus_parts", "chunk_keys", "analysis_cache"])
def test_every_module_that_builds_the_analysed_text_is_in_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    # dataset.py: Document.content, the title and the text joined; an edit there changes every
    # analysed text, and a stale entry must not survive it (nor the revert: the key is the source).
    documents = _loaded(40, seed=24)
    store_analysis(tmp_path, documents.corpus_fingerprint, analyze_corpus(d.content for d in documents))
    module = {
        "dataset": dataset,
        "corpus_parts": corpus_parts,
        "chunk_keys": chunk_keys,
        "analysis_cache": analysis_cache,
    }[source]
    edited = tmp_path / f"{source}_copy.py"
    edited.write_bytes(Path(module.__file__ or "").read_bytes() + b"\n# edited\n")
    sources = analysis_cache._sources()
    monkeypatch.setattr(
        analysis_cache, "_sources", lambda: [str(edited) if s == module.__file__ else s for s in sources]
    )
    assert load_analysis(tmp_path, documents.corpus_fingerprint, len(documents)) is None
    monkeypatch.undo()
    assert load_analysis(tmp_path, documents.corpus_fingerprint, len(documents)) is not None


def test_the_unicode_tables_are_in_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Accents are folded with the interpreter's Unicode tables: another Python, other terms.
    documents = _loaded(40, seed=25)
    store_analysis(tmp_path, documents.corpus_fingerprint, analyze_corpus(d.content for d in documents))
    monkeypatch.setattr(analysis_cache.unicodedata, "unidata_version", "0.0.0")
    assert load_analysis(tmp_path, documents.corpus_fingerprint, len(documents)) is None


@pytest.mark.parametrize("lengths", ["one term short", "negative"])
def test_lengths_that_do_not_add_up_are_refused_even_with_an_agreeing_digest(tmp_path: Path, lengths: str) -> None:
    documents = _loaded(40, seed=26)
    corpus = analyze_corpus(d.content for d in documents)
    store_analysis(tmp_path, documents.corpus_fingerprint, corpus)
    entry = _entry(tmp_path)
    changed = np.array(corpus.lengths)
    if lengths == "one term short":
        changed[0] -= 1  # the first document's last term counted as the second's first
    else:
        changed[0], changed[1] = -changed[1], changed[0] + 2 * changed[1]  # the sum is kept
    np.save(entry / "lengths.npy", changed)
    forged = analysis_digest(AnalysedCorpus(corpus.vocabulary, np.asarray(corpus.ids), changed))
    (entry / "digest.txt").write_text(forged + "\n", encoding="ascii")
    assert load_analysis(tmp_path, documents.corpus_fingerprint, len(documents)) is None
    assert not entry.exists()


def test_the_entries_kept_are_those_used_last(tmp_path: Path) -> None:
    corpora = [_loaded(40, seed=30 + i) for i in range(analysis_cache.KEEP + 1)]
    first, second, third = corpora
    for documents in (first, second):
        store_analysis(tmp_path, documents.corpus_fingerprint, analyze_corpus(d.content for d in documents))
    entries = {p.name: p for p in tmp_path.iterdir() if p.is_dir()}
    for i, path in enumerate(sorted(entries.values(), key=lambda p: p.stat().st_mtime)):
        os.utime(path, (1_000_000 + i, 1_000_000 + i))  # the first stored is the oldest
    assert load_analysis(tmp_path, first.corpus_fingerprint, len(first)) is not None  # used now
    store_analysis(tmp_path, third.corpus_fingerprint, analyze_corpus(d.content for d in third))
    assert load_analysis(tmp_path, first.corpus_fingerprint, len(first)) is not None
    assert load_analysis(tmp_path, second.corpus_fingerprint, len(second)) is None  # written after, used before


# --- the gate: the baseline records the analysis its figures came from -----------------------------------

GATE_DOCUMENTS = [
    ("d1", "Restaurer une sauvegarde", "Ouvrez la console et lancez la restauration."),
    ("d2", "Réinitialiser le mot de passe", "Cliquez sur mot de passe oublié."),
    ("d3", "Exporter les données", "Le bouton exporter produit un fichier CSV."),
    ("d4", "Inviter un utilisateur", "Un administrateur invite un utilisateur."),
    ("d5", "Supprimer un compte", "La suppression efface les données."),
]
GATE_QUESTIONS = [
    ("q1", "restaurer une sauvegarde", "exact", ["d1"]),
    ("q2", "mot de passe oublié", "exact", ["d2"]),
    ("q3", "exporter un fichier CSV", "exact", ["d3"]),
    ("q4", "inviter un administrateur", "paraphrase", ["d4"]),
]


@pytest.fixture
def gated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """FIXTURE project: bm25 alone over five documents, its analysis cached (the threshold lowered), its
    baseline accepted."""
    monkeypatch.setattr(bm25, "CACHED_DOCUMENTS", 3)
    write_dataset(tmp_path / "data" / "qa", document_rows(GATE_DOCUMENTS), question_rows(GATE_QUESTIONS))
    (tmp_path / "retrieval.toml").write_text('dataset = "data/qa"\nmethods = ["bm25"]\nk = 2\n')
    settings = load_settings(tmp_path, {"profile": "local"}, environ={})
    forget_analyses()
    accept(run_gate(settings))
    return settings


def test_the_baseline_records_the_analysis_and_a_forged_entry_moves_no_figure(gated: Settings) -> None:
    entry = json.loads(Path(gated.baseline).read_text())["profiles"]["local"]
    cache = Path(gated.cache) / "bm25-analysis"
    recorded = entry["cassettes"][bm25.ANALYSIS_INPUT]
    assert recorded == (_entry(cache) / "digest.txt").read_text().strip()
    assert entry["methods"]["bm25"]["recall@2"] == 1.0
    _forge(_entry(cache), digest_agrees=True)
    forget_analyses()
    result = run_gate(gated)
    assert result.problem is None and result.changed_cassettes == ()
    assert [c.name for c in result.checks if not c.ok] == []  # recall@2 still 1.0: not the forged analysis's
    assert result.digests[bm25.ANALYSIS_INPUT] == recorded
    assert (_entry(cache) / "digest.txt").read_text().strip() == recorded  # the entry put right


def test_an_analysis_other_than_the_baselines_fails_as_a_changed_cassette(gated: Settings) -> None:
    # What an analyzer that changes its terms (a new Python's Unicode tables, an edit) gives: the
    # figures were computed from another analysis, and say so until the baseline records it.
    path = Path(gated.baseline)
    data = json.loads(path.read_text())
    data["profiles"]["local"]["cassettes"][bm25.ANALYSIS_INPUT] = "sha256:" + "0" * 64
    path.write_text(json.dumps(data))
    forget_analyses()
    result = run_gate(gated)
    assert result.changed_cassettes == (bm25.ANALYSIS_INPUT,)


def test_a_baseline_made_before_the_analysis_was_recorded_is_not_a_change(gated: Settings) -> None:
    path = Path(gated.baseline)
    data = json.loads(path.read_text())
    del data["profiles"]["local"]["cassettes"][bm25.ANALYSIS_INPUT]
    path.write_text(json.dumps(data))
    forget_analyses()
    result = run_gate(gated)
    assert result.problem is None and result.changed_cassettes == ()
    assert bm25.ANALYSIS_INPUT in result.digests  # the next update records it


def test_a_cache_folder_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / ".cache").write_text("not a folder")
    (tmp_path / "retrieval.toml").write_text('dataset = "data/qa"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, environ={})
    assert str(caught.value) == (
        f"{tmp_path / 'retrieval.toml'}: cache: {tmp_path / '.cache'} is a file, not a folder. Remove it (the tool "
        "keeps only rebuildable files there), or set `cache` to a folder."
    )
