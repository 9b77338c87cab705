"""Inputs longer than the embedding model reads: cut to the profile's limit and counted, or
refused naming the text; the limit is a profile setting, checked when the settings load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from demo_fixture import DEMO_DATA
from fake_embeddings import FakeEmbeddingsServer, make_profile

from retrieval.config import ConfigError, load_settings
from retrieval.providers.base import ProviderError
from retrieval.providers.http import RetryPolicy
from retrieval.providers.openai_embeddings import OpenAIEmbeddings
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
