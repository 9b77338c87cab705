"""Record and replay with vcrpy against the fake embeddings embeddings_server; secret scanning of cassettes."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fake_embeddings import FakeEmbeddingsServer, make_profile
from loopback_http import LoopbackHTTPServer

from retrieval.providers.base import ProviderError, ReplayMissError
from retrieval.providers.http import RetryPolicy, is_replay_miss, new_client, post_json
from retrieval.providers.openai_embeddings import OpenAIEmbeddings
from retrieval.recording.cassette_files import CassetteError, record_command, scan_cassettes
from retrieval.recording.matching import KEPT_REQUEST_HEADERS
from retrieval.recording.misses import missed_request
from retrieval.recording.recorder import Recorder
from retrieval.text.redaction import find_secrets

REPO = Path(__file__).resolve().parents[2]
STAGE = "corpus-embeddings"
TEXTS = ["Restaurer une sauvegarde", "Purger le cache"]
FIXTURE_KEY = "sk-fixture0000000000000000000000"  # a test fixture, not a credential
FAST = RetryPolicy(attempts=3, backoff=0.001, max_wait=0.01)


@pytest.fixture
def keyed_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fixture key in OPENAI_API_KEY, so that commit() also looks for its value."""
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", FIXTURE_KEY)


def _embedder(url: str, *, replay: bool = False) -> OpenAIEmbeddings:
    return OpenAIEmbeddings(make_profile(url, api_key_env="OPENAI_API_KEY"), replay=replay, retry=FAST)


def _record(embeddings_server: FakeEmbeddingsServer, directory: Path) -> tuple[Recorder, np.ndarray]:
    recorder = Recorder("record", directory, "fixture")
    embedder = _embedder(embeddings_server.url)
    try:
        with recorder.stage(STAGE):
            vectors = embedder.embed(TEXTS, "document")
    finally:
        embedder.close()
    return recorder, vectors


def test_record_writes_the_cassette_only_on_commit(
    embeddings_server: FakeEmbeddingsServer, tmp_path: Path, keyed_env: None
) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    recorder, _ = _record(embeddings_server, directory)
    assert not recorder.has(STAGE)  # still in staging
    assert not directory.exists()
    # Staged beside the profile's folder, in a hidden folder named after the process.
    staged = list((tmp_path / "cassettes").glob(f".fixture.staging-{os.getpid()}-*/*"))
    assert [p.name for p in staged] == [f"{STAGE}.json"]
    written = recorder.commit({"fingerprint": "sha256:fixture", "usage": {STAGE: {"calls": 1}}})
    assert written == [directory / f"{STAGE}.json"]
    assert recorder.has(STAGE)
    assert recorder.metadata()["fingerprint"] == "sha256:fixture"
    assert sorted(p.name for p in directory.iterdir()) == [f"{STAGE}.json", "recording.json"]
    assert [p.name for p in (tmp_path / "cassettes").iterdir()] == ["fixture"]  # the staging folder is gone
    interactions = json.loads((directory / f"{STAGE}.json").read_text())["interactions"]
    assert len(interactions) == 1
    assert json.loads(interactions[0]["request"]["body"])["input"] == TEXTS


def test_discard_leaves_the_committed_cassettes(
    embeddings_server: FakeEmbeddingsServer, tmp_path: Path, keyed_env: None
) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    first, _ = _record(embeddings_server, directory)
    first.commit({})
    before = (directory / f"{STAGE}.json").read_bytes()
    second = Recorder("record", directory, "fixture")
    embedder = _embedder(embeddings_server.url)
    with second.stage(STAGE):
        embedder.embed(["un autre texte"], "document")
    embedder.close()
    second.discard()  # the run failed later: nothing is replaced
    assert (directory / f"{STAGE}.json").read_bytes() == before


def test_authorization_header_is_filtered(
    embeddings_server: FakeEmbeddingsServer, tmp_path: Path, keyed_env: None
) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    recorder, _ = _record(embeddings_server, directory)
    # The key did reach the embeddings_server...
    sent = {k.lower(): v for k, v in embeddings_server.posts[0]["headers"].items()}
    assert sent["authorization"] == f"Bearer {FIXTURE_KEY}"
    recorder.commit({})
    # ... but not the cassette.
    text = (directory / f"{STAGE}.json").read_text()
    assert FIXTURE_KEY not in text
    headers = json.loads(text)["interactions"][0]["request"]["headers"]
    assert "authorization" not in {h.lower() for h in headers}
    assert find_secrets(text, {"OPENAI_API_KEY": FIXTURE_KEY}) == []


def test_error_responses_are_not_recorded(
    embeddings_server: FakeEmbeddingsServer, tmp_path: Path, keyed_env: None
) -> None:
    embeddings_server.script.append((429, b'{"error": "rate limited"}'))
    directory = tmp_path / "cassettes" / "fixture"
    recorder, _ = _record(embeddings_server, directory)
    assert len(embeddings_server.posts) == 2  # the client retried the 429
    recorder.commit({})
    interactions = json.loads((directory / f"{STAGE}.json").read_text())["interactions"]
    assert [i["response"]["status"]["code"] for i in interactions] == [200]


def test_replay_answers_without_the_server(
    embeddings_server: FakeEmbeddingsServer, tmp_path: Path, keyed_env: None
) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    recorder, recorded = _record(embeddings_server, directory)
    recorder.commit({})
    url = embeddings_server.url
    embeddings_server.stop()  # nothing listens any more: answers can only come from the cassette

    replay = Recorder("replay", directory, "fixture")
    embedder = _embedder(url, replay=True)
    try:
        with replay.stage(STAGE):
            replayed = embedder.embed(TEXTS, "document")
    finally:
        embedder.close()
    np.testing.assert_array_equal(replayed, recorded)


def test_replay_miss_is_not_a_network_call(
    embeddings_server: FakeEmbeddingsServer, tmp_path: Path, keyed_env: None
) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    recorder, _ = _record(embeddings_server, directory)
    recorder.commit({})
    posts = len(embeddings_server.posts)

    replay = Recorder("replay", directory, "fixture")
    body = {"model": "fixture-e5", "input": ["jamais enregistré"], "input_type": "passage"}
    with pytest.raises(ReplayMissError) as caught, replay.stage(STAGE), new_client(5) as client:
        post_json(client, f"{embeddings_server.url}/v1/embeddings", body, retry=FAST)
    assert caught.value.reason == "replay miss"
    assert isinstance(caught.value, ProviderError)
    assert len(embeddings_server.posts) == posts  # the embeddings_server, still up, saw nothing


def test_replay_matches_a_body_by_its_bytes_or_as_the_same_json_and_nothing_else(
    embeddings_server: FakeEmbeddingsServer, tmp_path: Path
) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    url = f"{embeddings_server.url}/v1/embeddings"
    sent = b'{"input":["a"],"model":"fixture-e5"}'
    client = new_client(5)
    recorder = Recorder("record", directory, "fixture")
    with recorder.stage(STAGE):
        recorded = client.post(url, content=sent).json()
        client.post(url, content=b'{"input":["b"],"model":"fixture-e5"}')
    recorder.commit({})
    posts = len(embeddings_server.posts)

    replay = Recorder("replay", directory, "fixture")
    # The same bytes; the same JSON with other spacing and key order (each stage plays an answer once).
    for same in (sent, b'{ "model": "fixture-e5", "input": [ "a" ] }'):
        with replay.stage(STAGE):
            assert client.post(url, content=same).json() == recorded
    # A JSON body says where it first differs (two recorded: the one that differs least is named).
    for other, where in (
        (b'{"input":["c"],"model":"fixture-e5"}', ', first at $.input[0]: recorded "a", sent "c"'),
        (b'{"input":["a"],"model":"fixture-e5","dimensions":8}', ", first at $.dimensions: recorded nothing, sent 8"),
        (b'{"input":["a","b"],"model":"fixture-e5"}', ", first at $.input (length): recorded 1, sent 2"),
        (b"input=a&model=fixture-e5", ""),
        (b"\xff", ""),
    ):
        with pytest.raises(Exception) as caught, replay.stage(STAGE):
            client.post(url, content=other)
        assert is_replay_miss(caught.value), other
        assert missed_request(caught.value) == f"POST {url} (the closest recorded request differs in its body{where})"
    # A miss says how the closest recorded request differs: sent more often than recorded, elsewhere.
    with pytest.raises(Exception) as caught, replay.stage(STAGE):
        for _ in range(2):
            client.post(url, content=sent)
    assert missed_request(caught.value) == f"POST {url} (recorded, but sent more times than when it was recorded)"
    elsewhere = f"{embeddings_server.url}/v1/other"
    with pytest.raises(Exception) as caught, replay.stage(STAGE):
        client.post(elsewhere, content=sent)
    assert missed_request(caught.value) == f"POST {elsewhere} (the closest recorded request differs in its path)"
    assert missed_request(ValueError("not a miss")) is None
    client.close()
    assert len(embeddings_server.posts) == posts


class _KeyedSearch(BaseHTTPRequestHandler):
    """A fixture service that takes keys the way hosted search APIs do and hands back a session."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        payload = b'{"hits": [["doc-1", 2.5]]}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Set-Cookie", "session=fixture-secret-6")
        self.send_header("X-Session-Token", "fixture-secret-7")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def keyed_search() -> Iterator[str]:
    server = LoopbackHTTPServer(_KeyedSearch)
    try:
        yield f"http://127.0.0.1:{server.port}/search"
    finally:
        server.stop()


def _keyed_post(
    client: httpx.Client, url: str, secret: str, body: bytes = b'{"query": "vpn"}', keywords: str = "vpn"
) -> Any:
    headers = {
        "X-Algolia-API-Key": f"{secret}-1",
        "Ocp-Apim-Subscription-Key": f"{secret}-2",
        "Authorization": f"Bearer {secret}-3",
        "X-Request-Source": "ci",
        "Content-Type": "application/json",
    }
    query = {"api_key": f"{secret}-4", "access_token": f"{secret}-5", "keywords": keywords, "page": "2"}
    return client.post(url, params=query, headers=headers, content=body).json()


def test_a_cassette_keeps_no_header_or_parameter_that_could_hold_a_key_and_still_replays(
    keyed_search: str, tmp_path: Path
) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    with new_client(5) as client:
        recorder = Recorder("record", directory, "fixture")
        with recorder.stage("search"):
            answer = _keyed_post(client, keyed_search, "fixture-secret")
        recorder.commit({})
        text = (directory / "search.json").read_text(encoding="utf-8")
        assert "fixture-secret" not in text and "x-request-source" not in text.lower()
        interaction = json.loads(text)["interactions"][0]
        assert set(interaction["request"]["headers"]) <= KEPT_REQUEST_HEADERS
        assert interaction["request"]["uri"] == f"{keyed_search}?keywords=vpn&page=2"
        assert {h.lower() for h in interaction["response"]["headers"]} == {"content-type", "content-length"}
        # Other keys on replay (another CI secret): the same request, answered.
        with Recorder("replay", directory, "fixture").stage("search"):
            assert _keyed_post(client, keyed_search, "other-secret") == answer
        # A search parameter is not a credential: another value is another request.
        with pytest.raises(Exception) as caught, Recorder("replay", directory, "fixture").stage("search"):
            _keyed_post(client, keyed_search, "fixture-secret", keywords="wifi")
        assert missed_request(caught.value) == (
            f"POST {keyed_search}?keywords=wifi&page=2 (the closest recorded request differs in its query string)"
        )


def test_a_recording_whose_body_holds_a_key_is_refused_with_the_fix_and_replaces_nothing(
    keyed_search: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEARCH_KEY", "fixture-body-key-0123")
    directory = tmp_path / "cassettes" / "fixture"
    with new_client(5) as client:
        recorder = Recorder("record", directory, "fixture", key_variables=("SEARCH_KEY",))
        with recorder.stage("search"):
            _keyed_post(client, keyed_search, "s", body=b'{"query": "vpn", "auth": "fixture-body-key-0123"}')
    with pytest.raises(CassetteError) as caught:
        recorder.commit({})
    assert str(caught.value) == (
        "recording search.json holds secrets (value of $SEARCH_KEY): a request or an answer carries a credential "
        "in its body or its URL path. Send it in a header, or in a query parameter named like a key or a token: "
        "neither is recorded. Nothing was replaced."
    )
    assert list(directory.parent.iterdir()) == []  # no cassette folder, no staging folder left


def test_missing_cassette_names_the_record_command(tmp_path: Path) -> None:
    replay = Recorder("replay", tmp_path / "cassettes" / "fixture", "fixture")
    with pytest.raises(CassetteError) as caught, replay.stage(STAGE):
        pass
    assert record_command("fixture") in str(caught.value)
    assert "pytest --record --retrieval-profile fixture" in str(caught.value)
    assert f"{STAGE}.json" in str(caught.value)


def test_record_command_names_the_key_the_providers_declare() -> None:
    from retrieval.config import load_settings
    from retrieval.providers import credentials

    gemini = credentials(load_settings(REPO, {"profile": "gemini"}).profile)
    assert gemini.needed == ("GEMINI_API_KEY",)
    assert record_command("gemini", gemini.needed) == "GEMINI_API_KEY=... pytest --record --retrieval-profile gemini"
    local = credentials(load_settings(REPO, {"profile": "local"}).profile)
    assert record_command("local", local.needed) == "pytest --record --retrieval-profile local"


def test_commit_refuses_an_empty_recording(tmp_path: Path) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    recorder = Recorder("record", directory, "fixture")
    with recorder.stage(STAGE):
        pass  # no HTTP call intercepted
    with pytest.raises(CassetteError, match="no interaction"):
        recorder.commit({})
    assert not recorder.has(STAGE)
    recorder.discard()


def test_live_mode_records_nothing(embeddings_server: FakeEmbeddingsServer, tmp_path: Path, keyed_env: None) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    recorder = Recorder("live", directory, "fixture")
    embedder = _embedder(embeddings_server.url)
    with recorder.stage(STAGE):
        embedder.embed(TEXTS, "document")
    embedder.close()
    assert recorder.commit({}) == []
    assert not directory.exists()


# --- secret scanning --------------------------------------------------------------------------


def test_find_secrets_catches_a_google_api_key() -> None:
    text = json.dumps({"uri": "https://example.invalid/v1?x=1", "body": "AIza" + "B" * 35})
    assert find_secrets(text)


def test_find_secrets_catches_authorization_headers() -> None:
    assert find_secrets(json.dumps({"headers": {"authorization": ["Bearer x"]}}))
    assert find_secrets(json.dumps({"headers": {"Authorization": ["Bearer x"]}}))
    assert find_secrets(json.dumps({"headers": {"x-goog-api-key": ["x"]}}))


def test_find_secrets_catches_a_given_key_value() -> None:
    value = "plain-looking-value-123"
    text = json.dumps({"body": f"token {value} leaked"})
    assert find_secrets(text) == []  # no pattern matches it...
    assert find_secrets(text, {"GEMINI_API_KEY": "", "OPENAI_API_KEY": value}) == [
        "value of $OPENAI_API_KEY"
    ]  # ... its value does
    assert find_secrets(text, {"GEMINI_API_KEY": value}) == ["value of $GEMINI_API_KEY"]


def test_find_secrets_leaves_clean_text_alone() -> None:
    clean = json.dumps({"request": {"headers": {"content-type": ["application/json"]}, "body": "HEL-4040"}})
    assert find_secrets(clean, {"GEMINI_API_KEY": ""}) == []


def test_the_scan_also_looks_for_the_values_of_the_methods_key_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIXTURE_SEARCH_KEY", "fixture-body-key-0123")
    (tmp_path / "search.json").write_text('{"interactions": [], "text": "fixture-body-key-0123"}')
    assert scan_cassettes(tmp_path) == []
    assert scan_cassettes(tmp_path, variables=["FIXTURE_SEARCH_KEY"]) == [
        f"{tmp_path / 'search.json'}: value of $FIXTURE_SEARCH_KEY"
    ]


def test_committed_cassettes_hold_no_secret() -> None:
    cassettes = sorted((REPO / "cassettes").glob("**/*.json"))
    if not cassettes:
        pytest.skip("no committed cassette under cassettes/ yet: nothing to scan")
    leaks = {str(path.relative_to(REPO)): find_secrets(path.read_text(encoding="utf-8")) for path in cassettes}
    assert {path: found for path, found in leaks.items() if found} == {}


def test_an_interrupt_while_committing_leaves_no_staging_folder(
    embeddings_server: FakeEmbeddingsServer, tmp_path: Path, keyed_env: None
) -> None:
    """Ctrl-C while the drift is computed: nothing is replaced, and no hidden staging folder is
    left for `git add cassettes` to pick up."""
    directory = tmp_path / "cassettes" / "fixture"
    recorder, _ = _record(embeddings_server, directory)

    def interrupted(staged: object) -> dict[str, object]:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        recorder.commit({}, drift=interrupted)
    assert list((tmp_path / "cassettes").iterdir()) == []
