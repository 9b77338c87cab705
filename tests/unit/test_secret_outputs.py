"""No credential shape of the table survives into what the tool writes or prints: a recording
(refused, nothing replaced, its message naming the shape), a committed cassette (the gate's scan
names it), a warning (a degraded rerank), the run log and the report (the reason a method did not
run), a traceback (the CLI's). The shapes' FIXTURE credentials come from test_secret_shapes.py."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from demo_fixture import DEMO_DATA, demo_dataset
from loopback_http import LoopbackHTTPServer
from test_secret_shapes import CASES, Case, _secret_part

from retrieval.cli import main
from retrieval.config import Profile, Settings
from retrieval.evaluation.evaluate import evaluate
from retrieval.methods.base import MethodUnavailable
from retrieval.methods.support.llm import ask_or_degrade
from retrieval.providers.base import ProviderError
from retrieval.providers.http import new_client
from retrieval.recording.cassette_files import CassetteError, scan_cassettes
from retrieval.recording.recorder import Recorder
from retrieval.report.build import build_report, render_json
from retrieval.report.sections import render_markdown
from retrieval.run.results import run_log

# The shapes that are credential values (the header-name shape names a header, whatever its value).
VALUES = {what: case for what, case in CASES.items() if _secret_part(case) is not None}
EVERY_SHAPE = " ; ".join(case.credential for case in VALUES.values())


def _leaks(text: str) -> list[str]:
    """The shapes of which some part past their kept prefix is in `text`."""
    return [what for what, case in VALUES.items() if str(_secret_part(case)) in text]


def test_the_fixture_text_holds_every_shape() -> None:
    assert len(_leaks(EVERY_SHAPE)) == len(VALUES) == len(CASES) - 1


class _Answers(BaseHTTPRequestHandler):
    """A fixture service answering every POST with the JSON the server's `answer` holds."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        payload = json.dumps(self.server.answer).encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def service() -> Iterator[LoopbackHTTPServer]:
    server = LoopbackHTTPServer(_Answers)
    server.answer = {"hits": [["doc-1", 2.5]]}  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.stop()


def _record(server: LoopbackHTTPServer, directory: Path, body: dict[str, Any]) -> CassetteError:
    recorder = Recorder("record", directory, "fixture")
    with new_client(5) as client, recorder.stage("search"):
        client.post(f"http://127.0.0.1:{server.port}/search", json=body)
    with pytest.raises(CassetteError) as caught:
        recorder.commit({})
    return caught.value


@pytest.mark.parametrize("what", sorted(w for w, case in VALUES.items() if "body" in case.contexts))
def test_a_recording_whose_request_body_holds_a_shape_is_refused(
    what: str, service: LoopbackHTTPServer, tmp_path: Path
) -> None:
    directory = tmp_path / "cassettes" / "fixture"
    error = _record(service, directory, {"query": "vpn", "context": f"note {VALUES[what].credential} end"})
    assert str(error).startswith(f"recording search.json holds secrets ({what} at line ")
    assert _leaks(str(error)) == []
    assert list(directory.parent.iterdir()) == []  # nothing written, nothing replaced


def test_a_recording_whose_answer_holds_the_shapes_is_refused(service: LoopbackHTTPServer, tmp_path: Path) -> None:
    service.answer = {"hits": [], "debug": EVERY_SHAPE}  # type: ignore[attr-defined]
    directory = tmp_path / "cassettes" / "fixture"
    error = _record(service, directory, {"query": "vpn"})
    said = str(error)
    assert [what for what in VALUES if what.format(name="") in said] == [
        what for what in VALUES if "body" in VALUES[what].contexts
    ]
    assert _leaks(said) == [] and list(directory.parent.iterdir()) == []


@pytest.mark.parametrize("what", sorted(w for w, case in VALUES.items() if "body" in case.contexts))
def test_the_gates_scan_names_each_shape_in_a_committed_cassette(what: str, tmp_path: Path) -> None:
    folder = tmp_path / "cassettes" / "local"
    folder.mkdir(parents=True)
    path = folder / "search.json"
    body = json.dumps({"text": f"note {VALUES[what].credential} end"})
    path.write_text(json.dumps({"interactions": [{"request": {"body": body}, "response": {}}]}, indent=2))
    found = scan_cassettes(folder, {})
    assert found == [f"{path}: {what} at line 5"]
    assert _leaks(" ".join(found)) == []


def test_a_degraded_call_warns_without_any_shape(caplog: pytest.LogCaptureFixture) -> None:
    def ask() -> object:
        raise ProviderError(f"HTTP 400 from the model server: {EVERY_SHAPE}", "http 400")

    with caplog.at_level(logging.WARNING, logger="retrieval.methods.support.llm"):
        outcome = ask_or_degrade(ask, "rerank of question q01", "m")
    assert isinstance(outcome, ProviderError)
    assert caplog.text.count("rerank of question q01 degraded: HTTP 400 from the model server: ") == 1
    assert _leaks(caplog.text) == []


def unavailable_factory(settings: object) -> object:
    """A team's method that cannot sign in, and says with what: a fixture."""
    raise MethodUnavailable(f"the search engine refused the login ({EVERY_SHAPE})")


def test_the_reason_a_method_did_not_run_reaches_the_log_and_the_report_without_any_shape(tmp_path: Path) -> None:
    settings = Settings(
        dataset=str(DEMO_DATA),
        profile=Profile("fixture"),
        methods=("bm25", "test_secret_outputs:unavailable_factory"),
        cassettes=str(tmp_path / "cassettes"),
        cache=str(tmp_path / "cache"),
    )
    dataset = demo_dataset()
    run = evaluate(dataset, settings)
    [reason] = run.skipped.values()
    assert reason.startswith("the search engine refused the login (")
    report = build_report(run, dataset.documents, {})
    for output in (run_log(run), render_markdown(report), render_json(report)):
        assert "the search engine refused the login" in output
        assert _leaks(output) == []


class Raises:
    """A method whose engine fails with every shape in its message and in its cause: a fixture."""

    name = "raises"
    requires: tuple[str, ...] = ()
    needs_vectors = False

    def __init__(self, settings: object) -> None:
        pass

    def rank(self, context: object) -> list[Any]:
        try:
            raise ConnectionResetError(f"engine dropped the session {EVERY_SHAPE}")
        except ConnectionResetError as cause:
            raise RuntimeError(f"search failed: {EVERY_SHAPE}") from cause


def test_a_methods_traceback_holds_no_shape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["--dataset", str(DEMO_DATA), "--methods", "bm25,test_secret_outputs:Raises", "--live"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("error: RuntimeError: search failed: ")
    assert "Traceback (most recent call last):" in err and "ConnectionResetError: engine dropped the session" in err
    assert _leaks(err) == []


def test_every_case_is_a_case() -> None:
    assert all(isinstance(case, Case) for case in CASES.values())
