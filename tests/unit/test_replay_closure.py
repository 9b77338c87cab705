"""Replay is closed for the whole process tree: a method that declares no calls, evaluated in replay,
starts curl, wget, a Python subprocess, a multiprocessing spawn or forkserver child, or calls libc's
connect() through ctypes, and a real service on 127.0.0.1 (its own port) receives nothing.

Each child kind is tried against each layer alone (retrieval.recording.process_tree): the network
namespace with the environment switched off, the environment (proxies, the children's guard) with
the namespace switched off, and both as shipped; the same child outside replay reaches the service,
so that a closure that lets it through fails here. The allowances are tested too: threads that
predate the closure (Ray's driver, pytest-xdist's channel), multiprocessing's forkserver, BM25's
forked analysis workers.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from closure_children import (
    CHILDREN,
    TOOLS,
    libc_connect,
    multiprocessing_child,
    python_connect_command,
    run,
)
from demo_fixture import DEMO_DATA, demo_dataset

from retrieval import Context, Ranking
from retrieval.config import Profile, Settings
from retrieval.data.dataset import Dataset
from retrieval.evaluation.evaluate import evaluate
from retrieval.recording import process_tree
from retrieval.recording.network import OpenReplayWarning, closed_network
from retrieval.recording.process_tree import PROXY_VARIABLES, Closure


class CountingService:
    """A real TCP service on 127.0.0.1, on a port of its own: counts every connection it accepts
    (a bare connect() sends nothing) and answers each an HTTP 200."""

    def __init__(self) -> None:
        self._connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=16)
        self._listener.settimeout(0.05)
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._marked = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(1)
                with contextlib.suppress(OSError):
                    if conn.recv(4096) == _MARK:
                        self._marked.set()
                        continue
                    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                self._connections += 1

    @property
    def connections(self) -> int:
        """The connections received so far, every one the kernel queued included: a marked
        connection is made from here and waited for (accepted in order, it comes after them)."""
        self._marked.clear()
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as mark:
            mark.sendall(_MARK)
            assert self._marked.wait(10), "the service did not answer its mark within 10 s"
        return self._connections

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def stop(self) -> None:
        self._stop.set()
        # Wakes the accept() under way (it fails, and the thread returns) rather than waiting for its
        # timeout: up to 50 ms a test, 29 tests.
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)
        self._listener.close()


_MARK = b"counting-service-mark"


@pytest.fixture
def service() -> Iterator[CountingService]:
    # Started before any closure: its listening socket is in this process's own namespace.
    running = CountingService()
    try:
        yield running
    finally:
        running.stop()


def _available(kind: str) -> None:
    if kind in TOOLS and shutil.which(TOOLS[kind]) is None:
        pytest.skip(f"{TOOLS[kind]} is not installed here")


def _may_make_namespaces() -> bool:
    """CAP_SYS_ADMIN in this process's effective set (root, as CI runs): then a namespace must be made."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return False
    effective = next(line.split()[1] for line in status.splitlines() if line.startswith("CapEff:"))
    return bool(int(effective, 16) >> 21 & 1)


# Where namespaces can be made, these tests run (and fail if none is made): not skipped on a broken closure.
NAMESPACES = pytest.mark.skipif(not _may_make_namespaces(), reason="this process may not create a network namespace")


@NAMESPACES
def test_replay_runs_in_a_network_namespace_where_one_can_be_made() -> None:
    with closed_network() as closure:
        assert closure == Closure(namespace=True, open=None)


class StartsAChild:
    """A method that declares no calls (calls = "none") yet starts a child that tries the
    service; it ranks documents in their order: a fixture."""

    requires: tuple[str, ...] = ()
    needs_vectors = False
    calls = "none"

    def __init__(self, child: Callable[[int], object], port: int) -> None:
        self.name = "kids"
        self.child, self.port = child, port
        self.outcomes: list[object] = []

    def rank(self, context: Context) -> list[Ranking]:
        self.outcomes.append(self.child(self.port))
        n = len(context.dataset.documents)
        return [Ranking(np.arange(n), np.arange(n, 0, -1, dtype=float)) for _ in context.dataset.questions]


@pytest.fixture
def dataset() -> Dataset:
    demo = demo_dataset()
    return replace(demo, questions=demo.questions[:2])


def _settings(tmp_path: Path) -> Settings:
    return Settings(
        dataset=str(DEMO_DATA),
        profile=Profile("fixture"),
        methods=("bm25",),
        cassettes=str(tmp_path / "cassettes"),
        cache=str(tmp_path / "cache"),
    )


def _namespace_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process_tree, "_environment", lambda port, started_by: {})


def _environment_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process_tree, "_enter_namespace", lambda: "namespaces switched off by the test")


SWITCHED_OFF_LINE = (
    "replay is not closed by a network namespace here (namespaces switched off by the test): child processes "
    "are closed only by proxy variables on a closed port and the guard Python children load, so a program "
    "that ignores proxies or its environment (ssh, a compiled client, libc connect() through ctypes, here or "
    "in a child) can reach the network"
)


@pytest.mark.parametrize("kind", sorted(CHILDREN))
def test_outside_replay_each_child_reaches_the_service(kind: str, service: CountingService) -> None:
    # The control: what the closure must stop does reach the service when nothing stops it.
    _available(kind)
    CHILDREN[kind](service.port)
    assert service.connections >= 1


@NAMESPACES
@pytest.mark.parametrize("kind", sorted(CHILDREN))
@pytest.mark.parametrize("layers", ["namespace alone", "namespace and environment"])
def test_in_replay_no_child_reaches_the_service(
    kind: str, layers: str, service: CountingService, dataset: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _available(kind)
    if layers == "namespace alone":
        _namespace_only(monkeypatch)
    method = StartsAChild(CHILDREN[kind], service.port)
    run = evaluate(dataset, _settings(tmp_path), methods=[], extra=[method])
    assert len(run.results) == 2 and len(method.outcomes) == 1
    assert method.outcomes[0] != 0  # the child failed to connect ...
    assert service.connections == 0  # ... and the service received nothing


@pytest.mark.parametrize("kind", sorted(set(CHILDREN) - {"libc connect through ctypes"}))
def test_without_a_namespace_the_environment_still_closes_the_children(
    kind: str, service: CountingService, dataset: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _available(kind)
    _environment_only(monkeypatch)
    # A team's proxy exceptions, which would let curl and wget past the proxy to 127.0.0.1.
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    method = StartsAChild(CHILDREN[kind], service.port)
    with pytest.warns(OpenReplayWarning) as said:
        evaluate(dataset, _settings(tmp_path), methods=[], extra=[method])
    assert [str(w.message) for w in said if w.category is OpenReplayWarning] == [SWITCHED_OFF_LINE]
    assert method.outcomes[0] != 0
    assert service.connections == 0


def test_without_a_namespace_the_line_says_true_what_stays_open(
    service: CountingService, dataset: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # libc's connect() through ctypes is one of what the line names: it does get through.
    _environment_only(monkeypatch)
    method = StartsAChild(libc_connect, service.port)
    with pytest.warns(OpenReplayWarning, match=r"libc connect\(\) through ctypes"):
        evaluate(dataset, _settings(tmp_path), methods=[], extra=[method])
    assert (method.outcomes, service.connections) == ([0], 1)


@NAMESPACES
def test_a_child_that_drops_the_environment_is_closed_by_the_namespace(service: CountingService) -> None:
    # env={} loses the proxies and the guard, curl --noproxy ignores proxies, python -I ignores
    # PYTHONPATH: only the namespace stops them.
    _available("curl")
    with closed_network():
        outcomes = [
            run(python_connect_command(service.port), env={}),
            run(python_connect_command(service.port, "-I")),
            run(["curl", "-sS", "--noproxy", "*", "-m", "5", service.url]),
        ]
    assert all(outcome != 0 for outcome in outcomes) and service.connections == 0


def test_a_python_child_is_refused_by_its_guard_naming_the_method(
    service: CountingService, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval.recording.network import running

    _environment_only(monkeypatch)
    code = f"import socket; socket.socket().connect(('127.0.0.1', {service.port}))"
    with pytest.warns(OpenReplayWarning), closed_network(), running("method 'kids'"):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("_retrieval_socket_guard.NetworkBlockedError: process ")
    assert last.endswith(
        f", started by method 'kids', tried to connect to 127.0.0.1:{service.port} during replay, and replay is "
        "closed for child processes too: declare the method's calls (calls = 'http' or 'rankings') and record "
        "them with `pytest --record`, or run it with --live"
    )
    assert service.connections == 0


def test_the_childrens_own_sitecustomize_still_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sitecustomize.py").write_text("import builtins\nbuiltins.TEAM_SITECUSTOMIZE = True\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    code = "import builtins, socket; print(builtins.TEAM_SITECUSTOMIZE, socket.socket.connect.__name__)"
    with closed_network():
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["True", "connect"]
    assert socket.socket.connect.__qualname__ != "install.<locals>.connect"  # restored here


def test_a_forkserver_started_before_replay_is_replaced_inside_and_after(
    service: CountingService, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A forkserver started outside forks its children outside the closure: replay starts a new
    # one (closed), and stops it after, so that a child after replay is open again.
    start = multiprocessing_child("forkserver")
    assert start(service.port) == 0 and service.connections == 1
    _environment_only(monkeypatch)
    with pytest.warns(OpenReplayWarning), closed_network():
        assert start(service.port) == 3
    assert service.connections == 1
    assert start(service.port) == 0 and service.connections == 2


def test_everything_is_restored_after_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "localhost")
    monkeypatch.delenv("http_proxy", raising=False)
    before = dict(os.environ)
    with closed_network():
        assert os.environ["HTTPS_PROXY"] == os.environ["http_proxy"] != "http://proxy.example:3128"
        assert os.environ["NO_PROXY"] == ""
        assert os.environ["PYTHONPATH"].split(os.pathsep)[0] == str(process_tree.CHILD_GUARD)
        assert {os.environ[name] for name in PROXY_VARIABLES} == {os.environ["http_proxy"]}
    assert dict(os.environ) == before


@NAMESPACES
def test_the_replaying_thread_gets_its_network_back(service: CountingService) -> None:
    with closed_network():
        assert libc_connect(service.port) == -1
    assert libc_connect(service.port) == 0 and service.connections == 1


@NAMESPACES
def test_threads_started_before_replay_keep_their_network(service: CountingService) -> None:
    # The allowance Ray's driver needs: the cluster is joined before replay closes, and its
    # threads keep reaching it. A thread started inside is closed like a child.
    go, done = threading.Event(), threading.Event()
    outcome: list[object] = []

    def before() -> None:
        go.wait(30)
        outcome.append(libc_connect(service.port))
        done.set()

    earlier = threading.Thread(target=before)
    earlier.start()
    with closed_network():
        go.set()
        done.wait(30)
        inside = threading.Thread(target=lambda: outcome.append(libc_connect(service.port)))
        inside.start()
        inside.join(30)
    earlier.join(30)
    assert (outcome, service.connections) == ([0, -1], 1)


def test_bm25s_forked_analysis_workers_run_in_replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_corpus_parts import _PIDS, _assert_identical, _documents, _recording_analysis

    from retrieval.data import corpus_parts, corpus_terms
    from retrieval.data.corpus_terms import analyze_corpus, forget_analyses

    monkeypatch.setattr(corpus_parts, "START_DOCUMENTS", 80)
    monkeypatch.setattr(corpus_parts, "PART_DOCUMENTS", 10)
    monkeypatch.setattr(corpus_terms, "_SMALL_CORPUS", 0)
    monkeypatch.setattr(corpus_terms, "_CORPUS_BATCH", 16)
    documents = _documents(120, seed=5)
    forget_analyses()
    expected = analyze_corpus(d.content for d in documents)
    forget_analyses()
    monkeypatch.setattr(corpus_parts, "analyze_corpus", _recording_analysis)
    monkeypatch.setitem(_PIDS, "folder", tmp_path)
    with closed_network():
        pending = corpus_parts.start_analysis(documents, processes=2)
        assert pending is not None
        workers = set(pending._pool._processes)
        for future in pending._futures:
            future.result(timeout=60)
        _assert_identical(corpus_parts.analyze_documents(documents, pending=pending), expected)
    pids = {int(p.read_text()) for p in tmp_path.glob("*.pid")}
    assert pids and pids <= workers


@pytest.mark.slow
@NAMESPACES
def test_ray_on_a_local_cluster_replays_inside_the_closure(monkeypatch: pytest.MonkeyPatch) -> None:
    """The allowance Ray needs, on a real local Ray (executor = "ray", no RAY_ADDRESS): joined
    before replay closes, the driver's threads and the cluster's processes keep their network,
    and the sharded searches run on the cluster while the replaying thread is closed."""
    ray = pytest.importorskip("ray", reason="Ray is not installed here: pip install 'retrieval-regression[ray]'")
    import tempfile

    from demo_fixture import demo_settings

    import retrieval.executors.ray_cluster as ray_executor

    if ray.is_initialized():
        pytest.skip("a Ray instance is already initialised in this process")
    folder = Path(tempfile.mkdtemp(prefix="ray"))  # short: Ray's socket paths stay under 108 characters
    monkeypatch.setenv("RAY_TMPDIR", str(folder))
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    seen: list[tuple[bool, object]] = []
    real = ray_executor.search_on_cluster

    def spy(search: object, context: Context, n_shards: int | None = None) -> list[Ranking]:
        closure = process_tree._tree.closure
        seen.append((closure.namespace, libc_connect(9)))
        return real(search, context, n_shards)  # type: ignore[arg-type]

    monkeypatch.setattr(ray_executor, "search_on_cluster", spy)
    dataset = demo_dataset()
    try:
        on_cluster = evaluate(dataset, demo_settings(executor="ray"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    local = evaluate(dataset, demo_settings())
    # bm25 and vector were searched on the cluster, each with this thread closed (no network at all).
    assert seen == [(True, -1), (True, -1)]
    assert {m: on_cluster.ranked_ids(m) for m in local.methods} == {m: local.ranked_ids(m) for m in local.methods}


def test_a_platform_without_namespaces_is_said_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process_tree.sys, "platform", "darwin")
    with pytest.warns(OpenReplayWarning) as said, closed_network() as closure:
        pass
    assert closure.namespace is False and closure.open == str(said[0].message)
    assert str(said[0].message).startswith("replay is not closed by a network namespace here (darwin has no ")
    assert "\n" not in str(said[0].message)
