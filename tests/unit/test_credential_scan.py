"""No credential survives into a committed cassette: the recorder drops what it can by name (headers,
query parameters, URL passwords, on both sides of a replay match) and the scan refuses the rest
(by name and by shape); a short placeholder key never fails a clean gate."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import pytest
from demo_fixture import DEMO_PROJECT
from loopback_http import LoopbackHTTPServer

from retrieval.config import load_settings
from retrieval.gate.accept import accept
from retrieval.gate.result import run_gate
from retrieval.providers.http import new_client
from retrieval.recording.cassette_files import CassetteError
from retrieval.recording.misses import missed_request
from retrieval.recording.recorder import Recorder
from retrieval.text.redaction import credential_name, find_secrets

# FIXTURE credentials: made up for these tests, valid nowhere.
SECRET = "fixture-credential-5150"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            json.dumps({"uri": f"https://s.test/q?q=vpn&access_token={SECRET}"}),
            ["parameter 'access_token' with a value at line 1"],
        ),
        (json.dumps({"uri": "https://s.test/q?token=abc"}), ["parameter 'token' with a value at line 1"]),
        (json.dumps({"uri": f"https://s.test/q?k%65y={SECRET}"}), ["parameter 'key' with a value at line 1"]),
        (
            json.dumps({"uri": f"https://s.test/q?Access%5FToken={SECRET}"}),
            ["parameter 'Access_Token' with a value at line 1"],
        ),
        (json.dumps({"uri": f"https://s.test/q?sessionid={SECRET}"}), ["parameter 'sessionid' with a value at line 1"]),
        (json.dumps({"headers": {"X-Algolia-API-Key": ["v"]}}), ['"X-Algolia-API-Key" with a value at line 1']),
        (
            json.dumps({"headers": {"Ocp-Apim-Subscription-Key": ["v"]}}),
            ['"Ocp-Apim-Subscription-Key" with a value at line 1'],
        ),
        (json.dumps({"headers": {"Cookie": ["lang=fr; sid=x"]}}), ['"Cookie" with a value at line 1']),
        (json.dumps({"headers": {"Set-Cookie": ["session=x"]}}), ['"Set-Cookie" with a value at line 1']),
        (json.dumps({"body": "Basic Zml4dHVyZTpwYXNzd29yZA=="}), ["a Basic authorization at line 1"]),
        (
            json.dumps({"body": f"grant_type=client_credentials&client_secret={SECRET}"}),
            ["parameter 'client_secret' with a value at line 1"],
        ),
        (
            json.dumps({"body": json.dumps({"query": "vpn", "sessionToken": SECRET})}),
            ['"sessionToken" with a value at line 1'],
        ),
        (json.dumps({"body": json.dumps({"PASSWORD": SECRET})}), ['"PASSWORD" with a value at line 1']),
        (json.dumps({"uri": "https://reader:hunter2hunter2@s.test/q"}), ["a password in a URL at line 1"]),
    ],
    ids=[
        "token in a query string",
        "short token in a query string",
        "percent-encoded parameter name",
        "percent-encoded underscore, upper case",
        "session id parameter",
        "vendor key header",
        "subscription key header",
        "cookie",
        "set-cookie",
        "basic authorization",
        "form field",
        "json key in a body",
        "upper-case json key",
        "password in a url",
    ],
)
def test_the_scan_finds_credentials_by_name_and_shape(text: str, expected: list[str]) -> None:
    assert find_secrets(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"uri": "https://s.test/q?keywords=vpn&author=dupont&pageToken=CAoQAA&sort_key=date"}),
        json.dumps({"body": json.dumps({"usage": {"prompt_tokens": 12, "total_tokens": 12}})}),
        json.dumps({"body": json.dumps({"usageMetadata": {"promptTokenCount": 9, "cachedContentTokenCount": 0}})}),
        json.dumps({"body": json.dumps({"key_points": "la clé du succès est la sauvegarde"})}),
        json.dumps({"body": "authentification, authorization, key, api-key, token, session, Bearer"}),
        json.dumps({"headers": {"content-type": ["application/json"]}, "body": "HEL-4040"}),
    ],
    ids=["search parameters", "token counts", "gemini token counts", "prose field", "the words alone", "clean"],
)
def test_the_scan_leaves_what_is_no_credential(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("X-Goog-Api-Key", True),
        ("x-api-key", True),
        ("apikey", True),
        ("Authorization", True),
        ("Proxy-Authorization", True),
        ("oauth", True),
        ("client_secret", True),
        ("JSESSIONID", True),
        ("passwd", True),
        ("k%2565y", True),  # encoded twice: a URL inside a URL
        ("x-amz-security-token", True),
        ("keywords", False),
        ("author", False),
        ("pageToken", False),
        ("next_token", False),
        ("max_tokens", False),
        ("sort_key", False),
        ("input", False),
    ],
)
def test_a_name_says_credential_after_decoding_and_folding(name: str, says: bool) -> None:
    assert credential_name(name) is says


class _Echo(BaseHTTPRequestHandler):
    """A fixture service that hands back a cookie and a session token, and answers with its query."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        payload = json.dumps({"hits": [["doc-1", 2.5]]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Set-Cookie", f"sid={SECRET}-set; HttpOnly")
        self.send_header("X-Auth-Token", f"{SECRET}-answer")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def service() -> Iterator[int]:
    server = LoopbackHTTPServer(_Echo)
    try:
        yield server.port
    finally:
        server.stop()


def _post(client: httpx.Client, port: int, secret: str, body: bytes = b'{"query": "vpn"}', page: str = "2") -> Any:
    # Each credential form the recorder must keep out: a password in the URL, Basic authorization,
    # a cookie, a vendor header, and query parameters named like a key once percent-encoded.
    url = (
        f"http://reader:{secret}-url@127.0.0.1:{port}/search"
        f"?q=vpn&k%65y={secret}-q&pageToken={page}&Session%5FToken={secret}-s&access_token={secret}-t"
    )
    return client.post(
        url,
        headers={
            "Cookie": f"sid={secret}-cookie",
            "X-Algolia-API-Key": f"{secret}-h",
            "Content-Type": "application/json",
        },
        auth=("reader", f"{secret}-basic"),
        content=body,
    ).json()


def test_a_recording_keeps_no_credential_and_replays_with_others(service: int, tmp_path: Path) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    with new_client(5) as client:
        recorder = Recorder("record", directory, "fixture")
        with recorder.stage("search"):
            answer = _post(client, service, SECRET)
        assert recorder.commit({}) == [directory / "search.json"]
        text = (directory / "search.json").read_text(encoding="utf-8")
        assert "fixture-credential" not in text and "reader" not in text and find_secrets(text) == []
        assert json.loads(text)["interactions"][0]["request"]["uri"] == (
            f"http://127.0.0.1:{service}/search?pageToken=2&q=vpn"
        )
        # Other credentials on replay (another developer's): the same request, answered.
        with Recorder("replay", directory, "fixture").stage("search"):
            assert _post(client, service, "other-credential-0000") == answer
        # A page token is no credential: another page is another request.
        with pytest.raises(Exception) as caught, Recorder("replay", directory, "fixture").stage("search"):
            _post(client, service, SECRET, page="3")
        # Named as recorded: without the credentials, for a CI log.
        assert missed_request(caught.value) == (
            f"POST http://127.0.0.1:{service}/search?pageToken=3&q=vpn "
            "(the closest recorded request differs in its query string)"
        )


def test_a_form_body_holding_a_secret_is_refused_and_replaces_nothing(service: int, tmp_path: Path) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    with new_client(5) as client:
        recorder = Recorder("record", directory, "fixture")
        with recorder.stage("search"):
            _post(client, service, "s", body=f"grant_type=client_credentials&client_secret={SECRET}".encode())
    with pytest.raises(
        CassetteError, match=r"recording search.json holds secrets \(parameter 'client_secret' with a value at line 8\)"
    ):
        recorder.commit({})
    assert list(directory.parent.iterdir()) == []


# FIXTURE: the demo project with its recorded embeddings (keyless), as an adopter has it.
PROJECT_FILE = 'dataset = "data/demo"\nprofile = "local"\nmethods = ["bm25", "vector", "hybrid"]\n'


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for item in ("data/demo", "cassettes/local", "vectors/local"):
        shutil.copytree(DEMO_PROJECT / item, tmp_path / item)
    (tmp_path / "retrieval.toml").write_text(PROJECT_FILE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_short_placeholder_key_does_not_fail_a_clean_keyless_gate(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "test" is in any text; "a-placeholder" (13 characters) is a key value the scan looks for.
    monkeypatch.setenv("GEMINI_API_KEY", "test")
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    result = run_gate(load_settings(project, {"profile": "local"}))
    assert result.secrets == ()
    accept(result)


def test_a_token_in_a_committed_query_string_fails_the_gate_and_the_update(project: Path) -> None:
    path = project / "cassettes/local/question-embeddings.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["interactions"][0]["request"]["uri"] += f"?access_token={SECRET}"
    path.write_text(json.dumps(data), encoding="utf-8")
    result = run_gate(load_settings(project, {"profile": "local"}))
    assert result.secrets == (f"{path}: parameter 'access_token' with a value at line 1",)
    with pytest.raises(CassetteError, match="the cassettes hold what looks like a credential"):
        accept(result)


def test_the_value_of_the_profiles_own_key_variable_in_a_committed_cassette_fails_the_gate(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # api_key_env may name any variable: the gate looks for its value too.
    monkeypatch.setenv("FIXTURE_SERVER_PASS", "fixture-server-pass-0123")
    path = project / "cassettes/local/question-embeddings.json"
    path.write_text(path.read_text().replace('"interactions"', '"note": "fixture-server-pass-0123", "interactions"', 1))
    settings = load_settings(project, {"profile": "local"})
    keyed = replace(settings, profile=replace(settings.profile, api_key_env="FIXTURE_SERVER_PASS"))
    assert run_gate(keyed).secrets == (f"{path}: value of $FIXTURE_SERVER_PASS",)
