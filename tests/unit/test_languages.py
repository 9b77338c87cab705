"""BM25's analyzers by language: Snowball stemmers and stop words, identifiers whole in every
language, the analyzer's name in the configuration, and every cache of an analysis keyed by
its language (the corpus batch pipeline, a process's remembered corpora, the on-disk cache)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_analyzer_fast_path import french_texts
from test_corpus_parts import _assert_identical, _documents

from retrieval.config import ConfigError, Settings, load_settings
from retrieval.data import analyzer, corpus_parts, corpus_terms, snowball
from retrieval.data.analysis_cache import load_analysis, store_analysis
from retrieval.data.analyzer import analyze, analyzer_for, language_of
from retrieval.data.corpus_parts import analyze_documents
from retrieval.data.corpus_terms import analyze_corpus, forget_analyses
from retrieval.data.dataset import Dataset, Document, Question, _Documents, corpus_fingerprint
from retrieval.methods.base import Context
from retrieval.methods.bm25 import BM25Method

NO_ENV: dict[str, str] = {}


@pytest.mark.parametrize("language", [*sorted(snowball.LANGUAGES), "fr"])
@pytest.mark.parametrize("spelling", ["HEL-4040", "HEL 4040", "hel_4040", "HEL4040"])
def test_identifiers_are_kept_whole_in_every_language(language: str, spelling: str) -> None:
    assert "hel-4040" in analyze(f"code {spelling}, voir", language)


def test_english_stems_and_drops_its_stop_words() -> None:
    assert analyze("The studies of running proteins", "en") == ["studi", "run", "protein"]
    assert analyze("a study that runs a protein", "en") == ["studi", "run", "protein"]
    # French's analyzer knows neither English stop words nor English suffixes.
    assert analyze("The studies of running proteins") == ["the", "studie", "of", "running", "protein"]


def test_german_and_italian_stems_meet_with_or_without_accents() -> None:
    assert analyze("Die Häuser", "de") == analyze("das Haus", "de") == analyze("Hauser", "de") == ["haus"]
    assert analyze("la città", "it") == analyze("citta", "it")
    # Elided articles and possessives leave single letters, which are not terms.
    assert analyze("l'acqua dell' OPEC", "it") == ["acqua", "opec"]
    assert analyze("John's claims", "en") == ["john", "claim"]


def test_scripts_whose_vowels_are_marks_keep_their_words_whole() -> None:
    assert analyze("नमस्ते दुनिया", "hi") == ["नमस्त", "दुनिय"]


def test_each_stop_list_is_snowball_s_as_postgresql_ships_it() -> None:
    folder = Path(snowball.__file__).parent / "stopwords"
    lists = sorted(p.stem for p in folder.glob("*.stop"))
    assert lists == [
        "danish", "dutch", "english", "finnish", "german", "hungarian", "italian", "nepali",
        "norwegian", "portuguese", "russian", "spanish", "swedish", "turkish",
    ]  # fmt: skip
    assert set(lists) <= set(snowball.LANGUAGES.values())
    assert "PostgreSQL" in (folder / "README.md").read_text() and "Snowball" in (folder / "README.md").read_text()
    assert {"the", "of", "and"} <= snowball.stop_words("en") and "study" not in snowball.stop_words("en")
    assert {"und", "für", "über"} <= snowball.stop_words("de")
    assert snowball.stop_words("el") == frozenset()  # Greek: a stemmer, no Snowball stop list


def test_the_analyzer_s_name_is_in_the_configuration_and_the_default_is_french() -> None:
    assert Settings().describe()["analyzer"] == "fr-2"
    import Stemmer

    release = ".".join(Stemmer.version().split(".")[:2])
    assert Settings(language="en").describe()["analyzer"] == f"en-snowball-1 (PyStemmer {release})"
    assert language_of("fr-2") == "fr" and language_of(Settings(language="de").describe()["analyzer"]) == "de"


def test_an_unknown_language_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "retrieval.toml").write_text('language = "klingon"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, environ=NO_ENV)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'retrieval.toml'}, line 1: language must be a language code")
    assert "'klingon'" in message and "fr (the default" in message and " en, " in message
    assert load_settings(tmp_path, {"language": "en"}, environ=NO_ENV).language == "en"
    with pytest.raises(ValueError, match="unknown language 'xx'"):
        BM25Method(language="xx")


@pytest.fixture
def batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(corpus_terms, "_SMALL_CORPUS", 0)
    monkeypatch.setattr(corpus_terms, "_CORPUS_BATCH", 7)


def _english_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = ["The", "studies", "running", "proteins", "HEL", "4040", "HEL-12", "p53", "CD4", "1.2", "mg"]
    words += ["(n", "=", "17)", "isn't", "cells\u2019", "Häuser", "HEL 4040"]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(0, 30))) for _ in range(n)]


@pytest.mark.parametrize("language", ["en", "de", "ru", "hi"])
def test_the_corpus_pipeline_gives_analyze_s_terms_in_every_language(language: str, batches: None) -> None:
    texts = _english_texts(60, seed=1) + french_texts(20, seed=2)
    forget_analyses()
    corpus = analyze_corpus(texts, language=language)
    assert corpus.documents() == [analyze(t, language) for t in texts]
    # The same texts in another language are another analysis, not the remembered one.
    assert analyze_corpus(texts).documents() == [analyze(t) for t in texts]
    assert analyze_corpus(texts, language=language) is corpus


def _loaded(n: int) -> _Documents:
    documents = _Documents(Document(d.id, d.title, d.text + " studies running") for d in _documents(n, seed=5))
    documents.corpus_fingerprint = corpus_fingerprint(tuple(documents))
    return documents


def test_remembered_and_cached_analyses_are_keyed_by_language(tmp_path: Path, batches: None) -> None:
    documents = _loaded(90)
    forget_analyses()
    french = analyze_documents(documents, processes=1, cache=tmp_path)
    english = analyze_documents(documents, processes=1, cache=tmp_path, language="en")
    assert "studi" in english.vocabulary and "studi" not in french.vocabulary
    assert len(list(tmp_path.iterdir())) == 2  # one entry per language
    fingerprint = documents.corpus_fingerprint
    _assert_identical(load_analysis(tmp_path, fingerprint, len(documents), "en"), english)  # type: ignore[arg-type]
    _assert_identical(load_analysis(tmp_path, fingerprint, len(documents)), french)  # type: ignore[arg-type]
    assert load_analysis(tmp_path, fingerprint, len(documents), "de") is None
    # A stored entry of one language is never read as another's.
    store_analysis(tmp_path / "other", fingerprint, english, "en")
    assert load_analysis(tmp_path / "other", fingerprint, len(documents), "fr") is None
    # In this process too: each language's analysis is remembered under its own key.
    assert corpus_parts._memory_key(fingerprint, "en") != corpus_parts._memory_key(fingerprint, "fr")
    assert analyze_documents(documents, processes=1, language="en") is english


def test_the_stop_list_is_in_the_cache_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batches: None) -> None:
    documents = _loaded(30)
    store_analysis(tmp_path, documents.corpus_fingerprint, analyze_corpus(d.content for d in documents), "en")
    assert load_analysis(tmp_path, documents.corpus_fingerprint, len(documents), "en") is not None
    monkeypatch.setattr(snowball, "stop_list_bytes", lambda language: b"edited")
    assert load_analysis(tmp_path, documents.corpus_fingerprint, len(documents), "en") is None


def test_parts_analysed_in_workers_are_the_language_s(monkeypatch: pytest.MonkeyPatch, batches: None) -> None:
    monkeypatch.setattr(corpus_parts, "START_DOCUMENTS", 80)
    monkeypatch.setattr(corpus_parts, "PART_DOCUMENTS", 10)
    documents = _documents(120, seed=7)
    forget_analyses()
    expected = analyze_corpus((d.content for d in documents), language="en")
    forget_analyses()
    pending = corpus_parts.start_analysis(documents, processes=2, language="en")
    assert pending is not None
    _assert_identical(analyze_documents(documents, pending=pending, language="en"), expected)
    # A pending analysis of another language is stopped, not used.
    forget_analyses()
    pending = corpus_parts.start_analysis(documents, processes=2)
    assert pending is not None
    _assert_identical(analyze_documents(documents, pending=pending, language="en"), expected)


def test_bm25_in_english_finds_what_the_french_analyzer_misses() -> None:
    documents = (
        Document("d1", "Proteins", "Studies of running cells."),
        Document("d2", "Weather", "The rain in spain stays."),
    )
    dataset = Dataset("en", documents, (Question("q1", "study of a protein that runs", "all", ("d1",)),), "x")
    english = BM25Method(language="en").rank(Context(dataset=dataset, depth=10))[0]
    french = BM25Method().rank(Context(dataset=dataset, depth=10))[0]
    assert list(english.indices) == [0]
    assert list(french.indices) == [0] and english.scores[0] > french.scores[0]
    assert analyzer_for("en") is analyzer_for("en") and analyzer_for("en").language == "en"
    assert analyzer.FRENCH.version == analyzer.ANALYZER_VERSION == "fr-2"
