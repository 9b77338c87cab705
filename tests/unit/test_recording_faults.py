"""Cassettes under faults: a failed commit keeps the committed set, damaged files are named in one
line, local cassettes replay on any port, the secret scan sees escaped and header-borne keys."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from demo_fixture import DEMO_CASSETTES
from fake_embeddings import FakeEmbeddingsServer, make_profile

from retrieval.files import atomic
from retrieval.files.atomic import STALE_SECONDS
from retrieval.providers.http import RetryPolicy
from retrieval.providers.openai_embeddings import OpenAIEmbeddings
from retrieval.recording import cassette_files
from retrieval.recording.cassette_files import CassetteError, scan_cassettes
from retrieval.recording.matching import loopback_port
from retrieval.recording.recorder import Recorder
from retrieval.text.redaction import find_secrets

CORPUS, QUESTIONS = "corpus-embeddings", "question-embeddings"
FAST = RetryPolicy(attempts=1)
FIX = "Restore it with `git checkout -- {path}` or re-record with `pytest --record --retrieval-profile fixture`."


def _embed(recorder: Recorder, stage: str, url: str, texts: list[str]) -> np.ndarray:
    embedder = OpenAIEmbeddings(make_profile(url), replay=recorder.mode == "replay", retry=FAST)
    try:
        with recorder.stage(stage):
            return embedder.embed(texts, "document")
    finally:
        embedder.close()


def _record_set(server: FakeEmbeddingsServer, directory: Path, texts: list[str]) -> Recorder:
    recorder = Recorder("record", directory, "fixture")
    _embed(recorder, CORPUS, server.url, texts)
    _embed(recorder, QUESTIONS, server.url, [t + " ?" for t in texts])
    return recorder


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.mark.parametrize("step", ["exchange", "copy", "write"])
def test_a_commit_failing_at_any_step_keeps_the_committed_set_and_no_staging(
    embeddings_server: FakeEmbeddingsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    _record_set(embeddings_server, directory, ["premier"]).commit({"fingerprint": "sha256:one"})
    (directory / "rerank-m.json").write_text('{"interactions": []}')  # a stage this run does not re-record
    before = _files(directory)
    second = _record_set(embeddings_server, directory, ["second"])

    def fail(*args: object, **kwargs: object) -> bool:
        raise OSError(5, "Input/output error (injected)")

    target = {"exchange": (atomic, "_exchange"), "copy": (atomic.shutil, "copy2"), "write": (atomic.os, "fsync")}
    monkeypatch.setattr(*target[step], fail)
    with pytest.raises(CassetteError) as caught:
        second.commit({"fingerprint": "sha256:two"})
    monkeypatch.undo()
    assert str(caught.value) == (
        f"recording not saved: [Errno 5] Input/output error (injected). The cassettes in {directory} were kept "
        "as they were; the recording was discarded."
    )
    assert _files(directory) == before
    assert [p.name for p in directory.parent.iterdir()] == ["fixture"]  # no staging left


def test_a_commit_replaces_every_cassette_and_the_metadata_together(
    embeddings_server: FakeEmbeddingsServer, tmp_path: Path
) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    _record_set(embeddings_server, directory, ["premier"]).commit({"fingerprint": "sha256:one"})
    written = _record_set(embeddings_server, directory, ["second"]).commit({"fingerprint": "sha256:two"})
    assert written == [directory / f"{CORPUS}.json", directory / f"{QUESTIONS}.json"]
    corpus = json.loads((directory / f"{CORPUS}.json").read_text())["interactions"]
    questions = json.loads((directory / f"{QUESTIONS}.json").read_text())["interactions"]
    assert json.loads(corpus[0]["request"]["body"])["input"] == ["second"]
    assert json.loads(questions[0]["request"]["body"])["input"] == ["second ?"]
    assert json.loads((directory / "recording.json").read_text())["fingerprint"] == "sha256:two"


def test_a_killed_recordings_staging_is_removed_by_the_next_recording(
    embeddings_server: FakeEmbeddingsServer, tmp_path: Path
) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    dead = tmp_path / "cassettes" / ".fixture.staging-999999999-abcd1234"  # its process no longer runs
    old = tmp_path / "cassettes" / f".fixture.staging-{os.getpid()}-old00000"  # our pid, but two days old
    for folder in (dead, old):
        folder.mkdir(parents=True)
        (folder / f"{CORPUS}.json").write_text("{}")
    two_days_ago = time.time() - 2 * STALE_SECONDS
    os.utime(old, (two_days_ago, two_days_ago))
    _record_set(embeddings_server, directory, ["premier"]).commit({})
    assert [p.name for p in (tmp_path / "cassettes").iterdir()] == ["fixture"]


def test_local_cassettes_replay_on_another_port(embeddings_server: FakeEmbeddingsServer, tmp_path: Path) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    recorder = Recorder("record", directory, "fixture")
    recorded = _embed(recorder, CORPUS, embeddings_server.url, ["premier"])
    recorder.commit({})
    moved = "http://127.0.0.1:1"  # nothing listens there; the cassette answers
    replayed = _embed(Recorder("replay", directory, "fixture"), CORPUS, moved, ["premier"])
    assert replayed.tolist() == recorded.tolist()


def test_the_port_still_matters_off_loopback() -> None:
    from vcr.request import Request

    same = Request("POST", "http://127.0.0.1:8765/v1/embeddings", b"", {})
    other = Request("POST", "http://localhost:9000/v1/embeddings", b"", {})
    loopback_port(same, other)  # loopback: any port
    with pytest.raises(AssertionError, match="port 8765 != 9000"):
        loopback_port(
            Request("POST", "http://10.0.0.1:8765/v1/embeddings", b"", {}),
            Request("POST", "http://10.0.0.1:9000/v1/embeddings", b"", {}),
        )


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b'{"version": 1, "interactions": [{"request": {', "invalid JSON at line 1: Expecting property name"),
        (b"", "invalid JSON at line 1: Expecting value"),
        (b'{"interactions": ["caf\xe9"]}', "not UTF-8: invalid continuation byte at byte 22"),
        (b"[]", "expected a JSON object, got list"),
        (b'{"interactions": 3}', '"interactions" must be a list of {"request": ..., "response": ...}'),
        (
            b'{"version": 1, "interactions": [{"request": {}, "response": {}}]}',
            "TypeError: Request.__init__() missing 4 required positional arguments",
        ),
    ],
    ids=["truncated", "empty", "latin-1", "a list", "interactions not a list", "vcrpy cannot load it"],
)
def test_a_damaged_cassette_is_one_line_naming_it(tmp_path: Path, content: bytes, reason: str) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    directory.mkdir(parents=True)
    path = directory / f"{CORPUS}.json"
    path.write_bytes(content)
    recorder = Recorder("replay", directory, "fixture")
    with pytest.raises(CassetteError) as caught, recorder.stage(CORPUS):
        pass
    message = str(caught.value)
    assert message.startswith(f"{path}: damaged cassette (")
    assert reason in message
    assert message.endswith(FIX.format(path=path))
    assert "\n" not in message


def test_damaged_metadata_and_recorded_strings_are_named(tmp_path: Path) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    directory.mkdir(parents=True)
    (directory / "recording.json").write_bytes(b'{"fingerprint": ')
    (directory / f"{CORPUS}.json").write_bytes(b"\xff\xfe")
    recorder = Recorder("replay", directory, "fixture")
    with pytest.raises(CassetteError, match=r"recording\.json: damaged recording metadata \(Expecting value"):
        recorder.metadata()
    with pytest.raises(CassetteError, match=rf"{CORPUS}\.json: damaged cassette \(not UTF-8"):
        recorder.recorded_strings(CORPUS)


# FIXTURE: what `git lfs pointer --file=cassettes/local/question-embeddings.json` wrote (git-lfs 3.3):
# a checkout holds this in place of a file tracked by Git LFS when LFS did not fetch it.
LFS_POINTER = (
    "version https://git-lfs.github.com/spec/v1\n"
    "oid sha256:ba1896de3d815eac9b51fda447638d4571a40bbd608962946ae6b13bff4f85ff\n"
    "size 56593\n"
)
LFS_FETCH = (
    "is a Git LFS pointer, not the file: fetch it with `git lfs pull` "
    "(in GitHub Actions: `lfs: true` on actions/checkout)."
)


def test_a_git_lfs_pointer_in_place_of_a_cassette_says_to_fetch_it(tmp_path: Path) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    directory.mkdir(parents=True)
    for name in (f"{CORPUS}.json", "recording.json", "search.rankings.json"):
        (directory / name).write_text(LFS_POINTER)
    recorder = Recorder("replay", directory, "fixture")
    with pytest.raises(CassetteError) as cassette, recorder.stage(CORPUS):
        pass
    with pytest.raises(CassetteError) as metadata:
        recorder.metadata()
    with pytest.raises(CassetteError) as rankings:
        recorder.replay_rankings("search", None, 10)
    assert str(cassette.value) == f"{directory / CORPUS}.json {LFS_FETCH}"
    assert str(metadata.value) == f"{directory}/recording.json {LFS_FETCH}"
    assert str(rankings.value) == f"{directory}/search.rankings.json {LFS_FETCH}"


def test_a_recorded_file_too_large_for_github_is_named_with_the_fix(
    embeddings_server: FakeEmbeddingsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cassette_files.large_file_notice("c.json", cassette_files.LARGE_FILE) is None
    assert cassette_files.large_file_notice("c.json", 150 * 2**20) == (
        "c.json is 150.0 MiB: GitHub refuses files over 100 MiB and warns over 50 MiB; keep the cassettes in Git "
        "LFS (`git lfs track 'cassettes/**/*.json'`, and `lfs: true` on the workflow's actions/checkout)"
    )
    directory = tmp_path / "cassettes" / "fixture"
    recorder = _record_set(embeddings_server, directory, ["premier"])
    corpus = len((recorder._staging / f"{CORPUS}.json").read_bytes())  # type: ignore[operator]
    monkeypatch.setattr(cassette_files, "LARGE_FILE", corpus - 1)
    recorder.commit({})
    assert [n.split(" is ")[0] for n in recorder.notices] == [f"{CORPUS}.json", f"{QUESTIONS}.json"]


@pytest.mark.parametrize(
    ("metadata", "problem"),
    [
        ({"usage": []}, '"usage" is list, expected an object (stage -> counters)'),
        ({"usage": {"vector": 3}}, "\"usage\" of 'vector' is int, expected an object of counters"),
        ({"usage": {"vector": {"seconds": "1.5"}}}, "\"usage\" of 'vector': seconds is '1.5', not a number"),
        ({"drift": []}, '"drift" is list, expected an object'),
        ({"fingerprint": 3}, '"fingerprint" is int, expected a string'),
        ({"config": "k=5"}, '"config" is str, expected an object'),
    ],
    ids=["usage a list", "stage a number", "string seconds", "drift a list", "int fingerprint", "config a string"],
)
def test_metadata_of_the_wrong_shape_is_one_line_naming_the_file(tmp_path: Path, metadata: dict, problem: str) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    directory.mkdir(parents=True)
    path = directory / "recording.json"
    path.write_text(json.dumps({"fingerprint": "sha256:one", "config": {"k": 5}, "usage": {}, **metadata}))
    with pytest.raises(CassetteError) as caught:
        Recorder("replay", directory, "fixture").metadata()
    assert str(caught.value) == f"{path}: damaged recording metadata ({problem}). {FIX.format(path=path)}"


def test_well_formed_metadata_loads(tmp_path: Path) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    directory.mkdir(parents=True)
    data = {"fingerprint": "sha256:one", "config": {}, "usage": {"vector": {"calls": 1, "seconds": 0.5}}, "drift": {}}
    (directory / "recording.json").write_text(json.dumps(data))
    assert Recorder("replay", directory, "fixture").metadata() == data


GOOGLE = "AIza" + "Sy" + "F" * 33  # FIXTURE: the shape of a Google key, not one


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (json.dumps({"body": json.dumps({"key": "\\u0041" + GOOGLE[1:]})}), ["a Google API key (AIza…) at line 1"]),
        # Among escaped accents (left as they are: no pattern matches them), an escaped header name.
        (
            json.dumps({"body": json.dumps({"t": "café", "\\u0061uthorization": "x"})}),
            ['a "authorization" header at line 1'],
        ),
        (json.dumps({"headers": {"api-key": ["abc"]}}), ['a "api-key" header at line 1']),
        (json.dumps({"headers": {"X-Api-Key": ["abc"]}}), ['a "X-Api-Key" header at line 1']),
        (json.dumps({"body": '{"auth": "Bearer abcdefgh12345678"}'}), ["a Bearer token at line 1"]),
        (json.dumps({"uri": "https://x.test/v1?alt=json&key=abcdefgh1234"}), ["a key in a query string at line 1"]),
        (json.dumps({"uri": "https://x.test/v1?API_KEY=abcdefgh1234"}), ["a key in a query string at line 1"]),
        (json.dumps({"body": json.dumps({"x": "sk-" + "a1" * 12})}), ["an OpenAI-style key (sk-…) at line 1"]),
        (json.dumps({"uri": "https://x.test/v1%3Fkey%3Dabcdefgh1234"}), ["a key in a query string at line 1"]),
        (
            json.dumps({"body": json.dumps({"headers": {"Proxy-Authorization": "x"}})}),
            ['a "Proxy-Authorization" header at line 1'],
        ),
        (json.dumps({"body": "BEARER abcdefgh12345678"}), ["a Bearer token at line 1"]),
        # The words alone, as a French corpus may hold them, are no credential.
        (json.dumps({"body": "authentification, authorization, key, api-key, Bearer"}), []),
    ],
    ids=[
        "json-escaped google key",
        "escaped header among escaped accents",
        "api-key header",
        "x-api-key header",
        "bearer in body",
        "key=",
        "api_key=",
        "openai key in a body",
        "url-encoded key",
        "header inside a body",
        "upper-case bearer",
        "the words alone",
    ],
)
def test_find_secrets_catches(text: str, expected: list[str]) -> None:
    assert find_secrets(text) == expected


def test_scan_cassettes_names_each_file(tmp_path: Path) -> None:
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "clean.json").write_text('{"interactions": []}')
    (tmp_path / "local" / "leak.json").write_text(json.dumps({"headers": {"x-api-key": ["v"]}}))
    (tmp_path / "local" / "binary.json").write_bytes(b"\xff")
    assert scan_cassettes(tmp_path, keys={}) == [
        f"{tmp_path / 'local' / 'binary.json'}: cannot be scanned ('utf-8' codec can't decode byte 0xff in "
        "position 0: invalid start byte); re-record or delete it",
        f'{tmp_path / "local" / "leak.json"}: a "x-api-key" header at line 1',
    ]


def test_a_real_recording_scans_clean() -> None:
    # The demo fixture's cassettes are a copy of a real recording; the repository's own are
    # scanned by the gate at every run (test_gate_lifecycle: a cassette holding a key fails it).
    assert scan_cassettes(DEMO_CASSETTES, keys={}) == []
