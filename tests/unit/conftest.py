"""Fixtures shared by the unit tests.

Nothing heavy is imported here at collection: a run of one test module pays for what that module
imports, not for the whole package (pytester's in-process runs keep what they import, see
kept_modules.py; the LLM clients load when a test asks for one)."""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import importlib.util
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cache
from typing import TYPE_CHECKING, Any

import _pytest.pytester
import pytest

from retrieval.adapters import pg_cluster  # the standard library only
from retrieval.adapters.pg_cluster import Cluster, ClusterError

if TYPE_CHECKING:
    from fake_embeddings import FakeEmbeddingsServer
    from fake_servers import FakeGeminiServer, FakeOpenAIServer

    from retrieval.providers.base import GenerationProvider
    from retrieval.providers.gemini import GeminiGenerator
    from retrieval.providers.openai_chat import OpenAIChat


@pytest.fixture
def _runs_keep_modules(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """pytester's snapshots of sys.modules are kept_modules.KeepingSnapshot's while the test runs."""
    from kept_modules import KeepingSnapshot

    config = request.config
    lasting = tuple(os.path.join(str(p), "") for p in {config.rootpath, sys.prefix, sys.base_prefix, sys.exec_prefix})
    temporary = os.path.join(str(tmp_path_factory.getbasetemp()), "")
    monkeypatch.setattr(_pytest.pytester, "SysModulesSnapshot", functools.partial(KeepingSnapshot, lasting, temporary))


# The installed plugins no test reads (langsmith's, platformdirs'), off in this session (pyproject.toml's
# addopts) and in the runs the tests start: the root conftest.py puts them in PYTEST_ADDOPTS, which
# pytester deletes ("outer options"), so the fixture below sets them again. Without that, every
# pytester run loaded both, and each worker imported langsmith (about 0.6 s of CPU) to keep it loaded.
UNUSED_PLUGINS = ("langsmith_plugin", "platformdirs")


class _Remembered(importlib.metadata.PathDistribution):
    """An installed distribution whose file list, entry points and metadata are read once a process."""

    @functools.cached_property
    def files(self) -> list[importlib.metadata.PackagePath] | None:
        return super().files

    @functools.cached_property
    def entry_points(self) -> importlib.metadata.EntryPoints:
        return super().entry_points

    @functools.cached_property
    def metadata(self) -> Any:  # the header's list of plugins and their versions, in each run
        return super().metadata


_DISTRIBUTIONS = importlib.metadata.distributions


@cache
def _installed() -> tuple[importlib.metadata.Distribution, ...]:
    return tuple(
        _Remembered(d._path) if type(d) is importlib.metadata.PathDistribution else d for d in _DISTRIBUTIONS()
    )


@pytest.fixture
def pytester(_runs_keep_modules: None, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytest's own, its snapshots of sys.modules keeping what the package and its dependencies
    imported (kept_modules.py), its runs without UNUSED_PLUGINS. _runs_keep_modules comes before
    pytest's fixture is made: it takes a snapshot of sys.modules and puts it back when the test ends.

    Its runs read the installed distributions once a process: each run looks for plugins twice
    (pluggy's entry points, then pytest's modules to rewrite), and parsing the file lists again
    (langsmith's has 938 files) was 20 ms of each of the suite's 125 runs. Nothing installs into
    this environment during a session."""
    monkeypatch.setenv("PYTEST_ADDOPTS", " ".join(f"-p no:{name}" for name in UNUSED_PLUGINS))
    monkeypatch.setattr(
        importlib.metadata,
        "distributions",
        lambda **kwargs: iter(_installed()) if not kwargs else _DISTRIBUTIONS(**kwargs),
    )
    return pytester


@pytest.fixture
def embeddings_server() -> Iterator[FakeEmbeddingsServer]:
    """A fake OpenAI-compatible embeddings server on 127.0.0.1, stopped after the test."""
    from fake_embeddings import FakeEmbeddingsServer

    fake = FakeEmbeddingsServer()
    try:
        yield fake
    finally:
        fake.stop()


# The LLM clients the rerank, rewrite and enrich tests drive against local fake servers, whose
# answers are fixtures (fake_servers.py). A module may define its own to override them.


@pytest.fixture(scope="module")
def gemini_server() -> Iterator[FakeGeminiServer]:
    from fake_servers import FakeGeminiServer

    with FakeGeminiServer() as fake:
        yield fake


@pytest.fixture(scope="module")
def openai_server() -> Iterator[FakeOpenAIServer]:
    from fake_servers import FakeOpenAIServer

    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture(scope="module")
def gemini(gemini_server: FakeGeminiServer) -> Iterator[GeminiGenerator]:
    from fake_servers import FAST_RETRY, gemini_profile, with_fixture_key

    from retrieval.providers.gemini import GeminiGenerator

    generator = with_fixture_key(lambda: GeminiGenerator(gemini_profile(gemini_server.url), retry=FAST_RETRY))
    yield generator
    generator.close()


@pytest.fixture(scope="module")
def gemini_unanswered(gemini_server: FakeGeminiServer) -> Iterator[GeminiGenerator]:
    """For the call a timeout case leaves unanswered: one attempt, UNANSWERED_TIMEOUT."""
    from fake_servers import UNANSWERED_TIMEOUT, gemini_profile, with_fixture_key

    from retrieval.providers.gemini import GeminiGenerator
    from retrieval.providers.http import RetryPolicy

    generator = with_fixture_key(
        lambda: GeminiGenerator(
            gemini_profile(gemini_server.url, timeout=UNANSWERED_TIMEOUT), retry=RetryPolicy(attempts=1)
        )
    )
    yield generator
    generator.close()


class FirstCallApart:
    """A generation provider whose first call goes to `first` and every later one to `rest`; its
    usage is theirs, summed as the calls return. Calls are made one at a time (a method on one
    worker)."""

    def __init__(self, first: GenerationProvider, rest: GenerationProvider) -> None:
        from retrieval.run.cost import Usage

        self.first, self.rest = first, rest
        self.provider, self.model = rest.provider, rest.model
        self.usage = Usage()
        self._called = False

    def generate_json(self, prompt: str, schema: Mapping[str, Any], schema_name: str) -> str:
        target = self.rest if self._called else self.first
        self._called = True
        was = target.usage
        calls, tokens_in, tokens_out, seconds = was.calls, was.input_tokens, was.output_tokens, was.seconds
        try:
            return target.generate_json(prompt, schema, schema_name)
        finally:
            now = target.usage
            self.usage.add(
                now.calls - calls, now.input_tokens - tokens_in, now.output_tokens - tokens_out, now.seconds - seconds
            )


@pytest.fixture
def gemini_first_unanswered(gemini_unanswered: GeminiGenerator, gemini: GeminiGenerator) -> FirstCallApart:
    """For a timeout case of a method on one worker: its first call, the one the fake server leaves
    unanswered, on UNANSWERED_TIMEOUT, the others on `gemini`'s TIMEOUT. One bound for every call
    cost a second a case (1 s: the answered calls shared it, and at 0.05 s a loaded machine made
    one of them time out too); an unanswered call can only time out, whatever the bound."""
    return FirstCallApart(gemini_unanswered, gemini)


@pytest.fixture(scope="module")
def chat(openai_server: FakeOpenAIServer) -> Iterator[OpenAIChat]:
    from fake_servers import FAST_RETRY, openai_profile

    from retrieval.providers.openai_chat import OpenAIChat

    provider = OpenAIChat(openai_profile(openai_server.url), retry=FAST_RETRY)
    yield provider
    provider.close()


# --- PostgreSQL, started early ------------------------------------------------------------------
# initdb and the server start take about 0.7 s, nearly all of it in PostgreSQL's own processes.
# When the session is to run a test of the live cluster (test_postgres.py, slow), they start as
# soon as collection ends, on the other core, while the tests before it run; its cluster fixture
# then takes that cluster. Not in
# a pytest-xdist worker: every worker collects test_postgres.py but few run it, and `-n auto` on
# a machine of many cores would start a cluster per core; there the fixture starts one on demand.
_PG_START = pytest.StashKey[Future[Cluster]]()


def pytest_collection_finish(session: pytest.Session) -> None:
    wanted = (
        not session.config.option.collectonly
        and not hasattr(session.config, "workerinput")
        and any("pg_cluster_fixture" in getattr(item, "fixturenames", ()) for item in session.items)
    )
    if wanted and pg_cluster.unavailable_reason() is None and importlib.util.find_spec("psycopg"):
        pool = ThreadPoolExecutor(1, thread_name_prefix="pg-cluster")
        # The folder is chosen now: a test may point the temporary folder elsewhere meanwhile.
        session.config.stash[_PG_START] = pool.submit(pg_cluster.start_cluster, tempfile.gettempdir())
        pool.shutdown(wait=False)


def pytest_sessionfinish(session: pytest.Session) -> None:
    future = session.config.stash.get(_PG_START, None)
    if future is not None:  # started, never taken (its tests deselected or not reached)
        with contextlib.suppress(ClusterError):
            future.result().stop()


@pytest.fixture(scope="session")
def start_pg_cluster(request: pytest.FixtureRequest) -> Callable[[], Cluster]:
    """pg_cluster.start_cluster, or the cluster started at the end of collection (ClusterError
    either way when it could not start)."""

    def start() -> Cluster:
        future = request.config.stash.get(_PG_START, None)
        if future is None:
            return pg_cluster.start_cluster()
        del request.config.stash[_PG_START]
        return future.result()

    return start
