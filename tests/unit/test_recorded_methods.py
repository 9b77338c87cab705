"""Every method a recorded stage: a user retriever over HTTP is recorded and replayed without its
service, an engine without HTTP replays from a ranking cassette, in-process code always runs,
and replay is closed. The search service and its answers are fixtures (fake_search.py)."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from demo_fixture import DEMO_DATA, demo_dataset
from fake_search import URL_VARIABLE, FakeSearchService, IdSearchService

from retrieval import Context, Ranking
from retrieval.cli import main
from retrieval.config import ConfigError, Profile, Settings
from retrieval.data.dataset import Dataset
from retrieval.evaluation.evaluate import evaluate
from retrieval.providers.base import ProviderError, ReplayMissError
from retrieval.recording.cassette_files import CassetteError

PROFILE = "fixture"


@pytest.fixture
def dataset() -> Dataset:
    demo = demo_dataset()
    return replace(demo, questions=demo.questions[:3])


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSearchService]:
    search = FakeSearchService()
    monkeypatch.setenv(URL_VARIABLE, search.url)
    try:
        yield search
    finally:
        search.stop()


def _settings(tmp_path: Path, **changes: object) -> Settings:
    return Settings(
        dataset=str(DEMO_DATA),
        profile=Profile(PROFILE),
        methods=("bm25",),
        cassettes=str(tmp_path / "cassettes"),
        cache=str(tmp_path / "cache"),
        **changes,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        ("fake_search:factory", "search"),
        ("fake_search:urllib_factory", "search-urllib"),
        ("fake_search:async_factory", "search-async"),
        ("fake_search:aiohttp_factory", "search-aiohttp"),
    ],
)
def test_an_http_retriever_is_recorded_then_replayed_with_its_service_stopped(
    tmp_path: Path, dataset: Dataset, service: FakeSearchService, spec: str, name: str
) -> None:
    settings = _settings(tmp_path)
    # Live, each client's calls are counted on their way out (no cassette is written).
    live = evaluate(dataset, settings, mode="live", methods=["bm25", spec])
    assert (len(service.requests), live.usage[name].calls) == (3, 3)
    assert not (tmp_path / "cassettes").exists()
    service.requests.clear()
    recorded = evaluate(dataset, settings, mode="record", methods=["bm25", spec])
    assert len(service.requests) == 3
    assert recorded.ranked_ids(name) == live.ranked_ids(name)
    cassette = tmp_path / "cassettes" / PROFILE / f"{name}.json"
    assert len(json.loads(cassette.read_text())["interactions"]) == 3
    service.stop()

    replayed = evaluate(dataset, settings, methods=["bm25", spec])
    assert replayed.methods == ["bm25", name]
    assert replayed.ranked_ids(name) == recorded.ranked_ids(name)
    assert replayed.ranked_ids(name)["q01"][:2] == ["HEL-4020", "HEL-4040"]  # the fixture service's order
    assert len(service.requests) == 3  # nothing reached the (stopped) service


def test_a_service_priced_per_call_is_charged_for_the_calls_its_cassette_answered(
    tmp_path: Path, dataset: Dataset, service: FakeSearchService
) -> None:
    from retrieval.report.build import build_report

    settings = replace(_settings(tmp_path), prices={"fixture-search": {"call": 0.002}})
    methods = ["bm25", "fake_search:priced_factory"]
    live = evaluate(dataset, settings, mode="live", methods=methods)
    recorded = evaluate(dataset, settings, mode="record", methods=methods)
    service.stop()
    replayed = evaluate(dataset, settings, methods=methods)
    # One call per question, whether sent (live: counted on the way; recorded) or answered by the
    # cassette (replayed).
    assert [run.usage["search-priced"].calls for run in (live, recorded, replayed)] == [3, 3, 3]
    assert len(service.requests) == 6  # the live run's calls reached the service
    assert replayed.recorded_usage["search-priced"]["calls"] == 3  # as recording.json keeps it
    cost = {row.method: row for row in build_report(replayed, dataset.documents, settings.prices).cost}
    assert (cost["search-priced"].calls, cost["search-priced"].cost) == (3, pytest.approx(0.006))
    assert cost["search-priced"].cost_per_1000_questions == pytest.approx(2.0)
    assert (cost["bm25"].calls, cost["bm25"].cost) == (0, 0.0)


def test_methods_sharing_a_cassette_are_each_charged_for_their_own_calls(
    tmp_path: Path, dataset: Dataset, service: FakeSearchService
) -> None:
    # Two configurations of one service, one cassette (channel "search"): the second method runs
    # after the first's calls are in the channel's count, and is charged for its own three only.
    methods = ["fake_search:factory", "fake_search:narrow_factory"]
    settings = _settings(tmp_path)
    live = evaluate(dataset, settings, mode="live", methods=methods)
    recorded = evaluate(dataset, settings, mode="record", methods=methods)
    assert len(service.requests) == 12
    service.stop()
    replayed = evaluate(dataset, settings, methods=methods)
    for run in (live, recorded, replayed):
        assert (run.mode, run.usage["search"].calls, run.usage["search-narrow"].calls) == (run.mode, 3, 3)
    assert replayed.ranked_ids("search-narrow") == live.ranked_ids("search-narrow")
    assert replayed.cassettes == ("search.json",)
    assert [replayed.recorded_usage[m]["calls"] for m in ("search", "search-narrow")] == [3, 3]


def test_an_async_retriever_runs_even_where_an_event_loop_is_already_running(
    tmp_path: Path, dataset: Dataset, service: FakeSearchService
) -> None:
    settings = _settings(tmp_path)
    recorded = evaluate(dataset, settings, mode="record", methods=["fake_search:async_factory"])
    service.stop()

    async def under_a_running_loop() -> list[str]:  # as under pytest-asyncio, or in a notebook
        return evaluate(dataset, settings, methods=["fake_search:async_factory"]).methods

    assert asyncio.run(under_a_running_loop()) == ["search-async"]
    replayed = evaluate(dataset, settings, methods=["fake_search:async_factory"])
    assert replayed.ranked_ids("search-async") == recorded.ranked_ids("search-async")


CAUGHT = " and 2 more request(s); the code that sent it"


@pytest.mark.parametrize(
    ("recorded_with", "replayed_with", "expected", "after"),
    [
        # The method's own client meets the refusal: named in one line, not vcrpy's advice.
        (
            "fake_search:factory",
            "fake_search:edited_factory",
            "method 'search': no recorded answer for POST {url} ",
            "",
        ),
        (
            "fake_search:urllib_factory",
            "fake_search:edited_urllib_factory",
            "method 'search-urllib': no recorded answer for POST {url} ",
            "",
        ),
        (
            "fake_search:async_factory",
            "fake_search:edited_async_factory",
            "method 'search-async': no recorded answer for POST {url} ",
            "",
        ),
        (
            "fake_search:aiohttp_factory",
            "fake_search:edited_aiohttp_factory",
            "method 'search-aiohttp': no recorded answer for POST {url} ",
            "",
        ),
        # The method catches the refusal and falls back to empty rankings: the run still fails.
        (
            "fake_search:factory",
            "fake_search:fallback_factory",
            "no recorded answer in {cassette} for POST {url} ",
            f"{CAUGHT} caught the error and carried on",
        ),
        (
            "fake_search:urllib_factory",
            "fake_search:fallback_urllib_factory",
            "no recorded answer in {cassette} for POST {url} ",
            f"{CAUGHT} caught the error and carried on",
        ),
        # ...or raises an error of its own, out of the exception chain: still the miss, named.
        (
            "fake_search:factory",
            "fake_search:raising_factory",
            "no recorded answer in {cassette} for POST {url} ",
            f"{CAUGHT} then raised RuntimeError: search unavailable",
        ),
    ],
)
def test_a_method_whose_requests_changed_fails_replay_in_one_line_with_the_command(
    tmp_path: Path,
    dataset: Dataset,
    service: FakeSearchService,
    recorded_with: str,
    replayed_with: str,
    expected: str,
    after: str,
) -> None:
    settings = _settings(tmp_path)
    recorded = evaluate(dataset, settings, mode="record", methods=[recorded_with])
    service.stop()
    with pytest.raises(ReplayMissError) as caught:
        evaluate(dataset, settings, methods=[replayed_with])
    cassette = tmp_path / "cassettes" / PROFILE / f"{recorded.methods[0]}.json"
    assert str(caught.value) == (
        expected.format(url=service.url, cassette=cassette)
        + "(the closest recorded request differs in its body, first at $.documents (length): recorded 8, sent 9)"
        + f"{after}. The cassettes in {cassette.parent} no"
        " longer match this run: the dataset, a model, a prompt or a method (its requests or its code) changed since"
        f" they were recorded. Re-record with `pytest --record --retrieval-profile {PROFILE}` (it replaces them)."
    )
    assert len(service.requests) == 3  # the recording's; replay reached nothing


def test_the_documented_search_retriever_records_replays_and_names_an_edited_request(
    tmp_path: Path, dataset: Dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "methods.md").read_text(encoding="utf-8")
    source = readme.split("# searchret.py\n", 1)[1].split("```", 1)[0]
    edited = source.replace('"size": context.depth}', '"size": context.depth * 2}')
    assert edited != source
    (tmp_path / "searchret.py").write_text(source, encoding="utf-8")
    (tmp_path / "searchret_edited.py").write_text(edited, encoding="utf-8")
    # The service the example declares in `sources`: its code lives in the repository.
    (tmp_path / "search_service").mkdir()
    (tmp_path / "search_service" / "__init__.py").write_text("")
    tokenizer = tmp_path / "search_service" / "tokenizer.py"
    tokenizer.write_text("SEPARATORS = ' -'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    service = IdSearchService([(d.id, d.content) for d in dataset.documents])
    monkeypatch.setenv("SEARCH_URL", service.url)
    settings = _settings(tmp_path, root=str(tmp_path))
    try:
        recorded = evaluate(dataset, settings, mode="record", methods=["searchret:factory"])
    finally:
        service.stop()
    assert [r["size"] for r in service.requests] == [settings.depth] * 3
    cassette = tmp_path / "cassettes" / PROFILE / "search.json"
    assert sorted(json.loads(cassette.read_text())["code"]) == ["search_service", "search_service.tokenizer"]
    replayed = evaluate(dataset, settings, methods=["searchret:factory"])
    assert replayed.ranked_ids("search") == recorded.ranked_ids("search")
    assert replayed.ranked_ids("search")["q01"][0] == "faq-agent-helios"  # the fixture service's first
    with pytest.raises(ReplayMissError) as caught:
        evaluate(dataset, settings, methods=["searchret_edited:factory"])
    assert str(caught.value).startswith(
        f"method 'search': no recorded answer for POST {service.url}"
        f" (the closest recorded request differs in its body, first at $.size: recorded {settings.depth}, sent "
        f"{settings.depth * 2})."
    )
    # The service's tokenizer edited, the requests the same: replay would give the old service's answers.
    tokenizer.write_text("SEPARATORS = ' -_'\n")
    with pytest.raises(ReplayMissError) as caught:
        evaluate(dataset, settings, methods=["searchret:factory"])
    assert str(caught.value).startswith(
        f"{cassette} was recorded from another version of the method's code (search_service.tokenizer changed "
        "since): replay would give the old code's answers, not those of the code under test."
    )
    tokenizer.write_text("SEPARATORS = ' -'\n")
    # A cassette stripped of its digests cannot say which sources answered: refused too.
    data = json.loads(cassette.read_text())
    del data["code"]
    cassette.write_text(json.dumps(data))
    with pytest.raises(ReplayMissError, match=re.escape(f"{cassette} holds no digest of the method's declared")):
        evaluate(dataset, settings, methods=["searchret:factory"])
    assert len(service.requests) == 3


@pytest.mark.parametrize(
    ("spec", "name", "error"),
    [
        ("fake_search:factory", "search", "ConnectError: [Errno 111] Connection refused"),
        ("fake_search:urllib_factory", "search-urllib", "ConnectionRefusedError: [Errno 111] Connection refused"),
    ],
)
def test_recording_with_the_service_down_is_one_line_and_records_nothing(
    tmp_path: Path, dataset: Dataset, service: FakeSearchService, spec: str, name: str, error: str
) -> None:
    service.stop()
    with pytest.raises(ProviderError) as caught:
        evaluate(dataset, _settings(tmp_path), mode="record", methods=["bm25", spec])
    assert str(caught.value) == (
        f"method {name!r} could not reach its service ({error}): start it or check its address, then run again"
    )
    assert caught.value.reason == "connect"
    assert not (tmp_path / "cassettes").exists() or list((tmp_path / "cassettes").rglob("*")) == []


def test_a_key_in_the_url_of_an_unreachable_service_stays_out_of_the_message(
    tmp_path: Path, dataset: Dataset, service: FakeSearchService
) -> None:
    # requests names the URL in its error: the message drops its query string, key included.
    service.stop()
    with pytest.raises(ProviderError) as caught:
        evaluate(dataset, _settings(tmp_path), mode="record", methods=["fake_search:requests_factory"])
    message = str(caught.value)
    assert "fixture-secret" not in message
    assert re.fullmatch(
        r"method 'search-requests' could not reach its service \(ConnectionError: "
        r"HTTPConnectionPool\(host='127\.0\.0\.1', port=\d+\): Max retries exceeded with url: /search\?… "
        r"\(Caused by NewConnectionError.*\): start it or check its address, then run again",
        message,
    ), message


def test_the_cli_shows_a_method_error_with_its_traceback_and_no_key(
    tmp_path: Path,
    service: FakeSearchService,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # requests' HTTPError is an OSError: it used to read "cannot write or read", key in the URL.
    monkeypatch.setenv("FIXTURE_SEARCH_TOKEN", "fixture-path-token-4567")
    monkeypatch.chdir(tmp_path)
    service.status = 500
    code = main(["--dataset", str(DEMO_DATA), "--methods", "bm25,fake_search:checked_factory", "--live"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.splitlines()[0] == (
        f"error: HTTPError: 500 Server Error: Internal Server Error for url: {service.url}/$FIXTURE_SEARCH_TOKEN?… "
        "(raised by method 'search-checked')"
    )
    assert 'fake_search.py", line' in err and "in rank\n    answer.raise_for_status()" in err
    assert "fixture-secret" not in err and "fixture-path-token" not in err
    assert len(service.requests) == 1


def test_a_recording_holding_the_value_of_a_key_variable_the_method_declares_is_refused(
    tmp_path: Path, dataset: Dataset, service: FakeSearchService, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A key no pattern knows, sent in the body: only the declaration names it.
    monkeypatch.setenv("FIXTURE_SEARCH_KEY", "fixture-body-key-0123")
    with pytest.raises(CassetteError) as caught:
        evaluate(dataset, _settings(tmp_path), mode="record", methods=["fake_search:keyed_factory"])
    assert str(caught.value) == (
        "recording search-keyed.json holds secrets (value of $FIXTURE_SEARCH_KEY): a request or an answer carries "
        "a credential in its body or its URL path. Send it in a header, or in a query parameter named like a key "
        "or a token: neither is recorded. Nothing was replaced."
    )
    assert len(service.requests) == 3 and list((tmp_path / "cassettes").rglob("*.json")) == []


def test_before_any_recording_replay_fails_in_one_line_without_reaching_the_service(
    tmp_path: Path, dataset: Dataset, service: FakeSearchService
) -> None:
    with pytest.raises(CassetteError) as caught:
        evaluate(dataset, _settings(tmp_path), methods=["fake_search:factory"])
    cassette = tmp_path / "cassettes" / PROFILE / "search.json"
    assert str(caught.value) == (
        f"no cassette {cassette}: record it with `pytest --record --retrieval-profile {PROFILE}`"
    )
    assert service.requests == []


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("fake_search:undeclared_factory", "method 'search-undeclared' tried to connect to 127.0.0.1:"),
        ("fake_search:undeclared_async_factory", "method 'search-async-undeclared' tried to connect to 127.0.0.1:"),
        ("fake_search:swallowing_factory", "method 'search-swallowing' tried to connect during replay (1 attempt(s))"),
    ],
)
def test_replay_is_closed_to_a_method_that_did_not_declare_its_calls(
    tmp_path: Path, dataset: Dataset, service: FakeSearchService, spec: str, message: str
) -> None:
    with pytest.raises(CassetteError) as caught:
        evaluate(dataset, _settings(tmp_path), methods=[spec])
    assert str(caught.value).startswith(message)
    assert "replay is closed: declare its calls" in str(caught.value) and "pytest --record" in str(caught.value)
    assert "\n" not in str(caught.value)
    assert service.requests == []
    # Live, the same method reaches its service: only replay is closed.
    live = evaluate(dataset, _settings(tmp_path), mode="live", methods=[spec])
    assert len(service.requests) == 3 and len(live.results) == 3


class CountingEngine:
    """An engine reached without HTTP (think of a database driver): a fixture that ranks by id
    length and counts how often it really ran."""

    name = "engine"
    requires: tuple[str, ...] = ()
    needs_vectors = False
    calls = "rankings"

    def __init__(self) -> None:
        self.runs = 0
        self.config: dict[str, str] = {}

    def rank(self, context: Context) -> list[Ranking]:
        self.runs += 1
        order = np.argsort([len(d.id) + i / 1000 for i, d in enumerate(context.dataset.documents)])[:10]
        return [Ranking(order, np.arange(10, 0, -1, dtype=float)) for _ in context.dataset.questions]


def test_an_engine_without_http_replays_from_its_ranking_cassette(tmp_path: Path, dataset: Dataset) -> None:
    settings = _settings(tmp_path)
    engine = CountingEngine()
    recorded = evaluate(dataset, settings, mode="record", methods=[], extra=[engine])
    assert engine.runs == 1
    cassette = tmp_path / "cassettes" / PROFILE / "engine.rankings.json"
    data = json.loads(cassette.read_text())
    assert sorted(data["rankings"]) == sorted(q.text for q in dataset.questions)

    replayed = evaluate(dataset, settings, methods=[], extra=[engine])
    assert engine.runs == 1  # replay read the cassette: the engine did not run
    assert replayed.ranked_ids("engine") == recorded.ranked_ids("engine")

    edited = replace(dataset, questions=(replace(dataset.questions[0], text="Une question nouvelle ?"),))
    with pytest.raises(ReplayMissError, match=re.escape("was recorded: q01 «Une question nouvelle ?»")):
        evaluate(edited, settings, methods=[], extra=[engine])
    other_corpus = replace(dataset, documents=dataset.documents[1:])
    with pytest.raises(ReplayMissError, match=re.escape("engine.rankings.json was recorded for another corpus")):
        evaluate(other_corpus, settings, methods=[], extra=[engine])
    assert engine.runs == 1


ENGINE_MODULE = '''"""FIXTURE: an engine reached without HTTP, in a file the test edits as a pull request would."""

import numpy as np

from retrieval import Ranking


class FileEngine:
    name = "file-engine"
    requires = ()
    needs_vectors = False
    calls = "rankings"

    def rank(self, context):
        order = np.arange(len(context.dataset.documents))[:10]
        return [Ranking(order, np.arange(len(order), 0, -1, dtype=float)) for _ in context.dataset.questions]


def factory(settings):
    return FileEngine()
'''


def test_an_engine_whose_code_changed_since_its_recording_fails_replay(
    tmp_path: Path, dataset: Dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = tmp_path / "engine_under_review.py"
    module.write_text(ENGINE_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "engine_under_review", raising=False)
    settings, spec = _settings(tmp_path), ["engine_under_review:factory"]
    recorded = evaluate(dataset, settings, mode="record", methods=spec).ranked_ids("file-engine")
    cassette = tmp_path / "cassettes" / PROFILE / "file-engine.rankings.json"
    # The same code checked out with CRLF line endings replays.
    module.write_bytes(ENGINE_MODULE.replace("\n", "\r\n").encode())
    assert evaluate(dataset, settings, methods=spec).ranked_ids("file-engine") == recorded
    # A pull request edits the engine: replay must not give the old code's rankings.
    module.write_text(ENGINE_MODULE.replace("[:10]", "[:5]"))
    with pytest.raises(ReplayMissError) as caught:
        evaluate(dataset, settings, methods=spec)
    assert str(caught.value).startswith(
        f"{cassette} was recorded from another version of the method's code (engine_under_review changed since): "
        "replay would give the old code's rankings, not those of the code under test. The cassettes in "
    )
    assert str(caught.value).endswith(
        f"Re-record with `pytest --record --retrieval-profile {PROFILE}` (it replaces them)."
    )
    # Re-recorded with the edit (imported again, as a new pytest run would): the drift compares
    # with what the old code gave.
    monkeypatch.delitem(sys.modules, "engine_under_review")
    again = evaluate(dataset, settings, mode="record", methods=spec)
    assert again.drift[1:] == [
        "  file-engine.rankings: recorded rankings changed for 3 of 3 questions",
        "  file-engine: top 10 changed for 3 of 3 questions; mrr 0.1310 -> 0.0833 (-0.0476), "
        "mrr identifiant 0.1310 -> 0.0833 (-0.0476)",
    ]
    shorter = again.ranked_ids("file-engine")
    assert evaluate(dataset, settings, methods=spec).ranked_ids("file-engine") == shorter != recorded
    # A cassette recorded before code digests existed replays as before.
    data = json.loads(cassette.read_text())
    del data["code"]
    cassette.write_text(json.dumps(data))
    assert evaluate(dataset, settings, methods=spec).ranked_ids("file-engine") == shorter


def test_an_engine_whose_declared_config_changed_fails_replay(tmp_path: Path, dataset: Dataset) -> None:
    # The settings it gives its engine (a text search configuration) decide its rankings too.
    settings, engine = _settings(tmp_path), CountingEngine()
    engine.config = {"text_search_config": "french"}
    evaluate(dataset, settings, mode="record", methods=[], extra=[engine])
    engine.config = {"text_search_config": "simple"}
    with pytest.raises(ReplayMissError, match=re.escape("method's code (its declared config changed since)")):
        evaluate(dataset, settings, methods=[], extra=[engine])
    engine.config = {"text_search_config": "french"}
    assert evaluate(dataset, settings, methods=[], extra=[engine]).methods == ["engine"]
    assert engine.runs == 1


# FIXTURE: a thin engine wrapper whose ranking logic lives in the team's app (a package) and
# a SQL file, as most database retrievers are written.
WRAPPER_MODULE = ENGINE_MODULE.replace('calls = "rankings"', 'calls = "rankings"\n    sources = SOURCES').replace(
    "import numpy as np\n", "import numpy as np\n\nSOURCES = ()\n"
)


def test_an_engine_replays_only_while_its_declared_sources_are_unchanged(
    tmp_path: Path, dataset: Dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "searchapp").mkdir()
    (tmp_path / "searchapp" / "__init__.py").write_text("")
    (tmp_path / "searchapp" / "tokenize.py").write_text("SEPARATORS = ' -'\n")
    (tmp_path / "queries").mkdir()
    (tmp_path / "queries" / "search.sql").write_text("SELECT id FROM docs WHERE docs MATCH ?\n")
    module = tmp_path / "wrapper_under_review.py"
    module.write_text(WRAPPER_MODULE.replace("SOURCES = ()", 'SOURCES = ("searchapp", "queries/search.sql")'))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "wrapper_under_review", raising=False)
    settings, spec = _settings(tmp_path, root=str(tmp_path)), ["wrapper_under_review:factory"]
    evaluate(dataset, settings, mode="record", methods=spec)
    cassette = tmp_path / "cassettes" / PROFILE / "file-engine.rankings.json"
    assert sorted(json.loads(cassette.read_text())["code"]) == [
        "queries/search.sql",
        "searchapp",
        "searchapp.tokenize",
        "wrapper_under_review",
    ]
    assert evaluate(dataset, settings, methods=spec).methods == ["file-engine"]
    for path, edit, named in [
        (tmp_path / "searchapp" / "tokenize.py", "SEPARATORS = ' -_'\n", "searchapp.tokenize"),
        (tmp_path / "queries" / "search.sql", "SELECT id FROM docs WHERE docs MATCH ? LIMIT 5\n", "queries/search.sql"),
    ]:
        before = path.read_text()
        path.write_text(edit)
        with pytest.raises(ReplayMissError, match=re.escape(f"another version of the method's code ({named} changed")):
            evaluate(dataset, settings, methods=spec)
        path.write_text(before)
    # A source that is neither a project file nor a module: one line, at recording as in replay.
    missing = tmp_path / "wrapper_missing_source.py"
    missing.write_text(WRAPPER_MODULE.replace("SOURCES = ()", 'SOURCES = ("queries/missing.sql",)'))
    monkeypatch.delitem(sys.modules, "wrapper_missing_source", raising=False)
    with pytest.raises(ConfigError) as caught:
        evaluate(dataset, settings, mode="record", methods=["wrapper_missing_source:factory"])
    assert str(caught.value) == (
        "method 'file-engine': `sources` entry 'queries/missing.sql' is neither a file under "
        f"{tmp_path} nor an importable module"
    )


class InProcess:
    """The team's own ranking logic, in process: no declaration, so it always runs for real."""

    name = "in-process"
    requires: tuple[str, ...] = ()
    needs_vectors = False

    def __init__(self, reverse: bool) -> None:
        self.reverse = reverse

    def rank(self, context: Context) -> list[Ranking]:
        n = len(context.dataset.documents)
        order = np.arange(n)[::-1] if self.reverse else np.arange(n)
        return [Ranking(order, np.arange(n, 0, -1, dtype=float)) for _ in context.dataset.questions]


def test_in_process_code_runs_in_replay_without_any_cassette(tmp_path: Path, dataset: Dataset) -> None:
    first = evaluate(dataset, _settings(tmp_path), methods=[], extra=[InProcess(reverse=False)])
    changed = evaluate(dataset, _settings(tmp_path), methods=[], extra=[InProcess(reverse=True)])
    assert first.ranked_ids("in-process")["q01"][0] == dataset.doc_ids[0]
    assert changed.ranked_ids("in-process")["q01"][0] == dataset.doc_ids[-1]
    assert not (tmp_path / "cassettes").exists()


class Fixed:
    """A first-stage method with a fixed ranking for every question (a fixture)."""

    requires: tuple[str, ...] = ()
    needs_vectors = False

    def __init__(self, name: str, order: list[int]) -> None:
        self.name, self.order = name, order

    def rank(self, context: Context) -> list[Ranking]:
        scores = np.arange(len(self.order), 0, -1, dtype=float)
        return [Ranking(np.asarray(self.order), scores) for _ in context.dataset.questions]


@pytest.mark.parametrize(("rrf_k", "first"), [(1, 0), (60, 4)])
def test_rrf_k_and_the_inputs_reach_hybrid(tmp_path: Path, dataset: Dataset, rrf_k: int, first: int) -> None:
    """Document 0 is first in one list only; document 4 is 4th in both. RRF gives 0 the lead
    when 1/(k+1) > 2/(k+4), that is for k < 2: with k = 1 it is first, with k = 60 it is not."""
    lists = [Fixed("left", [0, 1, 2, 4]), Fixed("right", [5, 6, 7, 4])]
    settings = _settings(tmp_path, rrf_k=rrf_k, hybrid_inputs=("left", "right"))
    run = evaluate(dataset, settings, methods=["hybrid"], extra=lists)
    assert run.ranked_ids("hybrid")["q01"][0] == dataset.doc_ids[first]
    assert run.config["hybrid.rrf_k"] == rrf_k and run.config["hybrid.inputs"] == ["left", "right"]
    assert run.pipelines["hybrid"] == ["left", "right", "hybrid"]


def test_weights_reach_hybrid_and_its_recorded_configuration(tmp_path: Path, dataset: Dataset) -> None:
    """Equal weights put document 4 (4th in both lists) first at k = 60 (see
    test_rrf_k_and_the_inputs_reach_hybrid); weights (0, 1) switch the left list off, so the
    right list's order comes out: document 5 first, and document 0 nowhere."""
    lists = [Fixed("left", [0, 1, 2, 4]), Fixed("right", [5, 6, 7, 4])]
    settings = _settings(tmp_path, hybrid_inputs=("left", "right"), hybrid_weights=(0.0, 1.0))
    run = evaluate(dataset, settings, methods=["hybrid"], extra=lists)
    ids = dataset.doc_ids
    assert run.ranked_ids("hybrid")["q01"] == [ids[5], ids[6], ids[7], ids[4]]
    assert run.config["hybrid.weights"] == [0.0, 1.0]


def test_weights_are_checked_against_the_inputs(tmp_path: Path) -> None:
    from retrieval.config import ConfigError, load_settings

    (tmp_path / "retrieval.toml").write_text("hybrid_weights = [1.0]\n")
    with pytest.raises(ConfigError, match=r"hybrid_weights must give one finite number >= 0 per hybrid input"):
        load_settings(tmp_path, environ={})


class Leaky:
    """In-process by its declaration, yet it sends a datagram or looks a name up: fixtures."""

    requires: tuple[str, ...] = ()
    needs_vectors = False

    def __init__(self, name: str, leak: Callable[[], object]) -> None:
        self.name, self.leak = name, leak

    def rank(self, context: Context) -> list[Ranking]:
        self.leak()
        n = len(context.dataset.documents)
        return [Ranking(np.arange(n), np.arange(n, 0, -1, dtype=float)) for _ in context.dataset.questions]


@pytest.mark.parametrize(
    ("leak", "what"),
    [
        (
            lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"q", ("127.0.0.1", 9)),
            "send a datagram to 127.0.0.1:9",
        ),
        (lambda: socket.getaddrinfo("example.invalid", 80), "look up the address of example.invalid"),
    ],
    ids=["udp", "dns"],
)
def test_replay_refuses_datagrams_and_name_lookups(
    tmp_path: Path, dataset: Dataset, leak: Callable[[], object], what: str
) -> None:
    with pytest.raises(CassetteError) as caught:
        evaluate(dataset, _settings(tmp_path), methods=[], extra=[Leaky("leaky", leak)])
    assert str(caught.value).startswith(f"method 'leaky' tried to {what} during replay, and replay is closed")
    # Restored after the evaluation.
    assert socket.getaddrinfo("127.0.0.1", 9)[0][4][:2] == ("127.0.0.1", 9)
