"""Non-finite or all-zero vectors from a provider are refused in one line naming the text, live,
recording and replaying: they would score 0.0 against everything, silently, and be recorded."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fake_embeddings import FakeEmbeddingsServer, fixture_vector, make_profile

from retrieval.providers.base import ProviderError, normalize
from retrieval.providers.http import RetryPolicy
from retrieval.providers.openai_embeddings import OpenAIEmbeddings
from retrieval.recording.recorder import Recorder

TEXTS = ["Restaurer une sauvegarde", "Purger   le\ncache"]
FAST = RetryPolicy(attempts=1, backoff=0.001, max_wait=0.01)
STAGE = "corpus-embeddings"


def _message(problem: str, text: str = "Purger le cache", what: str = "document") -> str:
    return (
        f"the embedding model returned a vector of {problem} for the {what} «{text}»: it would score 0 against "
        "everything. Check the model and its server with that text, then run again."
    )


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ([0.0, 0.0, 0.0], "only zeros"),
        ([1.0, float("nan"), 0.0], "NaN or infinite values"),
        ([1.0, float("inf"), 0.0], "NaN or infinite values"),
        ([3e38, 3e38, 0.0], "overflowing values"),
    ],
)
def test_normalize_refuses_a_bad_row_naming_its_text(row: list[float], problem: str) -> None:
    with pytest.raises(ProviderError) as caught:
        normalize(np.array([[1.0, 2.0, 2.0], row]), TEXTS, "document")
    assert str(caught.value) == _message(problem)
    assert caught.value.reason == "bad vector"
    with pytest.raises(ProviderError) as caught:
        normalize(np.array([row, row]), None, "query")
    assert str(caught.value).startswith(
        f"the embedding model returned a vector of {problem} for the question number 1 "
    )
    assert "(and 1 other text(s))" in str(caught.value)


def test_normalize_keeps_the_bits_of_good_vectors() -> None:
    rows = np.array([fixture_vector(t, 8) for t in ["a", "bb", "ccc"]], dtype=np.float32)
    old = np.divide(rows, np.linalg.norm(rows, axis=1, keepdims=True))
    out = normalize(rows)
    assert out.dtype == np.float32 and out.tobytes() == old.tobytes()


def _zero_second(server: FakeEmbeddingsServer) -> None:
    """FIXTURE: the next answer holds a zero vector for the second text."""
    rows = [{"object": "embedding", "index": 0, "embedding": fixture_vector(TEXTS[0])}]
    rows.append({"object": "embedding", "index": 1, "embedding": [0.0] * 4})
    answer = {"object": "list", "model": "m", "data": rows, "usage": {"prompt_tokens": 6, "total_tokens": 6}}
    server.script.append((200, json.dumps(answer).encode()))


def _embed(url: str, replay: bool = False) -> np.ndarray:
    embedder = OpenAIEmbeddings(make_profile(url), replay=replay, retry=FAST)
    try:
        return embedder.embed(TEXTS, "document")
    finally:
        embedder.close()


def test_live_a_zero_vector_is_refused(embeddings_server: FakeEmbeddingsServer) -> None:
    _zero_second(embeddings_server)
    with pytest.raises(ProviderError) as caught:
        _embed(embeddings_server.url)
    assert str(caught.value) == _message("only zeros")


def test_recording_a_zero_vector_is_refused_and_commits_nothing(
    embeddings_server: FakeEmbeddingsServer, tmp_path: Path
) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    _zero_second(embeddings_server)
    recorder = Recorder("record", directory, "fixture")
    with pytest.raises(ProviderError) as caught, recorder.stage(STAGE):
        _embed(embeddings_server.url)
    assert str(caught.value) == _message("only zeros")
    assert not (directory / f"{STAGE}.json").exists()


def test_replaying_a_cassette_that_holds_a_zero_vector_is_refused(
    embeddings_server: FakeEmbeddingsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    # FIXTURE: a cassette recorded (really, through vcrpy) as a version without the check would
    # have kept it: the check is switched off while recording only.
    with monkeypatch.context() as patched:
        patched.setattr("retrieval.providers.openai_embeddings.normalize", lambda vectors, *_: vectors)
        _zero_second(embeddings_server)
        recorder = Recorder("record", directory, "fixture")
        with recorder.stage(STAGE):
            _embed(embeddings_server.url)
        recorder.commit({})
    url = embeddings_server.url
    embeddings_server.stop()
    with pytest.raises(ProviderError) as caught, Recorder("replay", directory, "fixture").stage(STAGE):
        _embed(url, replay=True)
    assert str(caught.value) == _message("only zeros")
