"""How a replayed request finds its recorded answer: the index key never separates requests the
matchers accept, each request meets only its own recordings (not the whole cassette), and
identical requests still replay their answers in recorded order."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from fake_embeddings import FakeEmbeddingsServer

from retrieval.providers.http import new_client
from retrieval.recording import misses
from retrieval.recording import recorder as recording
from retrieval.recording.matching import index_cassette, match_key, same_body

if TYPE_CHECKING:
    from vcr.request import Request

STAGE = "corpus-embeddings"
URL = "http://127.0.0.1:8765/v1/embeddings"


def _request(body: object, url: str = URL, verb: str = "POST") -> Request:
    from vcr.request import Request  # vcrpy (0.3 s of imports) loads when the tests run

    return Request(verb, url, body, {})


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (b'{"input":["a"],"model":"m"}', b'{ "model": "m", "input": [ "a" ] }'),
        (b'{"dimensions": 384}', b'{"dimensions": 384.0}'),
        (b'{"truncate": true}', b'{"truncate": 1}'),
        (b'{"offset": -0.0}', b'{"offset": 0}'),
        ('{"input": ["é"]}', b'{"input": ["\\u00e9"]}'),
        (b"input=a&model=m", b"input=a&model=m"),
        # aiohttp's `json=`: vcrpy keeps the object itself as the body.
        ({"input": ["a"], "model": "m"}, b'{"model": "m", "input": ["a"]}'),
    ],
)
def test_bodies_the_matcher_accepts_share_a_key(one: bytes | str, other: bytes) -> None:
    same_body(_request(one), _request(other))
    assert match_key(_request(one)) == match_key(_request(other))


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ((b'{"input":["a"]}',), (b'{"input":["b"]}',)),
        ((b"input=a",), (b"input=b",)),
        (({"input": ["a"]},), ({"input": ["b"]},)),
        ((b'{"input":["a"]}',), (b'{"input":["a"]}', "http://127.0.0.1:8765/v1/other")),
        ((b'{"input":["a"]}',), (b'{"input":["a"]}', URL, "PUT")),
    ],
)
def test_requests_differing_in_method_path_or_body_have_other_keys(
    one: tuple[Any, ...], other: tuple[Any, ...]
) -> None:
    assert match_key(_request(*one)) != match_key(_request(*other))


def test_bodies_kept_as_objects_that_differ_are_told_apart_not_a_crash() -> None:
    with pytest.raises(AssertionError, match="the bodies differ"):
        same_body(_request({"input": ["a"]}), _request({"input": ["b"]}))
    with pytest.raises(AssertionError, match="the bodies differ"):
        same_body(_request({"input": ["a"]}), _request(b"input=a"))


def _counting_body_matcher(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]

    @functools.wraps(same_body)
    def counted(r1: Any, r2: Any) -> None:
        calls[0] += 1
        same_body(r1, r2)

    monkeypatch.setattr(recording, "same_body", counted)
    return calls


def test_each_replayed_request_meets_only_its_own_recording(
    embeddings_server: FakeEmbeddingsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # vcrpy alone compares each request with every recorded one, twice: 40 batches cost 1,640
    # body comparisons here, and 12,000 documents took 20 s to replay.
    directory = tmp_path / "cassettes" / "fixture"
    bodies = [f'{{"input":["texte {n}"],"model":"fixture-e5"}}'.encode() for n in range(40)]
    calls = _counting_body_matcher(monkeypatch)
    client = new_client(5)
    recorder = recording.Recorder("record", directory, "fixture")
    with recorder.stage(STAGE):
        recorded = [client.post(f"{embeddings_server.url}/v1/embeddings", content=body).json() for body in bodies]
    recorder.commit({})
    assert calls == [0]  # recording: nothing recorded before matches a new request

    with recording.Recorder("replay", directory, "fixture").stage(STAGE):
        replayed = [client.post(f"{embeddings_server.url}/v1/embeddings", content=body).json() for body in bodies]
    client.close()
    assert replayed == recorded
    assert calls == [2 * len(bodies)]  # one comparison to find it, one to play it


def test_identical_requests_replay_their_answers_in_recorded_order(
    embeddings_server: FakeEmbeddingsServer, tmp_path: Path
) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    url = f"{embeddings_server.url}/v1/embeddings"
    body = b'{"input":["a"],"model":"fixture-e5"}'
    answers = [b'{"answer": 1}', b'{"answer": 2}']
    embeddings_server.script.extend((200, answer) for answer in answers)
    client = new_client(5)
    recorder = recording.Recorder("record", directory, "fixture")
    with recorder.stage(STAGE):
        for _ in answers:
            client.post(url, content=body)
    recorder.commit({})

    with recording.Recorder("replay", directory, "fixture").stage(STAGE):
        assert [client.post(url, content=body).json() for _ in answers] == [{"answer": 1}, {"answer": 2}]
    with pytest.raises(Exception) as caught, recording.Recorder("replay", directory, "fixture").stage(STAGE):
        for _ in range(3):
            client.post(url, content=body)
    client.close()
    assert misses.missed_request(caught.value) == (
        f"POST {url} (recorded, but sent more times than when it was recorded)"
    )


def test_a_cassette_whose_matchers_the_key_does_not_summarise_is_left_to_scan(tmp_path: Path) -> None:
    # Without a body matcher, requests with other bodies match: a body key would hide them.
    from vcr.cassette import Cassette
    from vcr.matchers import method, uri

    cassette = Cassette(str(tmp_path / "c.json"), match_on=(method, uri))
    scan = cassette._responses
    assert index_cassette(cassette) is False
    assert cassette._responses == scan
