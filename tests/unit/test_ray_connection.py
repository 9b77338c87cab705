"""Joining a Ray cluster within a bound, without a cluster (retrieval.executors.ray_connection):
the address checked before Ray sees it, the probe, the bounded start, the watch that stops a
run whose cluster is gone. The end-to-end faults on real clusters: tests/unit/test_ray_executor.py."""

from __future__ import annotations

import importlib
import importlib.util
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from retrieval.cli import main
from retrieval.config import setting_values

# Ray (0.5 s of imports) loads when these tests run, not when they are collected.
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason="Ray is not installed here: pip install 'retrieval-regression[ray]'",
)
HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def connection() -> ModuleType:
    """retrieval.executors.ray_connection, which imports Ray."""
    return importlib.import_module("retrieval.executors.ray_connection")


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("127.0.0.1:6379", ("127.0.0.1:6379", "127.0.0.1", 6379, False)),
        (" head.example:6380 ", (" head.example:6380 ", "head.example", 6380, False)),
        ("[::1]:6379", ("[::1]:6379", "::1", 6379, False)),
        ("ray://head", ("ray://head", "head", 10001, True)),
        ("ray://[fd00::2]:20001", ("ray://[fd00::2]:20001", "fd00::2", 20001, True)),
    ],
)
def test_the_address_forms_ray_accepts_are_read(
    connection: ModuleType, text: str, address: tuple[str, str, int, bool]
) -> None:
    endpoint, host, port, client = address
    assert connection.parse_address(text) == connection.Address(endpoint, host, port, client=client)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("garbage", "it names no port"),
        ("http://[::1", "the scheme http:// is not Ray's"),
        ("ray://[::1", "it is not host:port"),
        ("head:", "it is not host:port"),
        ("head:6379/x", "it is not host:port"),
        ("head:70000", "port 70000 is out of range"),
        ("[1:2:3:4:5:6:7:8:9]:1", "[1:2:3:4:5:6:7:8:9] is not an IPv6 address"),
    ],
)
def test_a_bad_address_is_one_line_naming_the_forms(connection: ModuleType, text: str, why: str) -> None:
    with pytest.raises(connection.RayClusterError) as caught:
        connection.parse_address(text)
    assert str(caught.value) == (
        f"RAY_ADDRESS={text!r} is not a Ray cluster address ({why}): give the head's host:port (its GCS, e.g. "
        "127.0.0.1:6379), ray://host:10001 for Ray Client, or unset RAY_ADDRESS to start a local Ray."
    )


@pytest.fixture
def silent_port() -> Iterator[int]:
    """FIXTURE: a port of 127.0.0.1 that accepts connections and never says a word."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    server.settimeout(0.01)  # how soon the accepting thread sees `stop` (each teardown waited for it)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(2)
        for peer in accepted:
            peer.close()
        server.close()


def _closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as server:
        return int(server.getsockname()[1])


def test_the_probe_says_refused_at_once_and_silence_within_its_bound(connection: ModuleType, silent_port: int) -> None:
    assert connection._probe("127.0.0.1", _closed_port(), 5) == "Connection refused"
    started = time.monotonic()
    # The probe's shortest bound: the port never answers, and a connection slower than the bound
    # is the same TimeoutError, so no load can make it say anything else.
    assert connection._probe("127.0.0.1", silent_port, 0.1) == "no answer within 0.1 s"
    assert time.monotonic() - started < 3


@pytest.fixture
def no_ray_yet(connection: ModuleType, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """As in a fresh process: Ray not initialised; `ray.init` is recorded, never run."""
    inits: list[Any] = []
    monkeypatch.setattr(connection.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(connection.ray, "init", lambda *a, **k: inits.append((a, k)))
    monkeypatch.setattr(connection.ray, "shutdown", lambda: None)
    return inits


def test_an_unreachable_cluster_never_reaches_ray_init(
    no_ray_yet: list[Any], silent_port: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{silent_port}")
    # The command's least bound (1 s, for a real cluster) lowered here: the wait is the whole bound
    # the flag gives the probe, and the probe's shortest (0.1 s) proves the same line a second sooner.
    monkeypatch.setitem(setting_values.NUMBERS, "ray_timeout", (False, 0.1, 86_400.0))
    started = time.monotonic()
    code = main(["--dataset", str(HERE / "fixtures" / "fixture_native"), "--executor", "ray", "--ray-timeout", "0.1"])
    assert (code, capsys.readouterr().err) == (
        2,
        f"error: cannot reach the Ray cluster at 127.0.0.1:{silent_port} (RAY_ADDRESS): no answer within 0.1 s. "
        'Start it, fix RAY_ADDRESS, or unset it to start a local Ray; executor = "local" runs without Ray.\n',
    )
    assert time.monotonic() - started < 10
    assert no_ray_yet == []


def test_a_start_that_hangs_or_fails_is_one_line_within_the_bound(
    connection: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, release = threading.Event(), threading.Event()
    monkeypatch.setattr(connection.ray, "is_initialized", lambda: False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)

    def hangs(*args: Any, **kwargs: Any) -> None:
        entered.set()
        release.wait(30)

    monkeypatch.setattr(connection.ray, "init", hangs)
    started = time.monotonic()
    # A start that never returns: however short the bound, it ends the wait.
    with pytest.raises(connection.RayClusterError, match=r"^a local Ray did not start within 0\.05 s \(ray_timeout\)$"):
        connection.connect(0.05).__enter__()
    assert time.monotonic() - started < 3
    # The helper thread did call (this test's) ray.init, which is still waiting: the line is the bound's.
    assert entered.wait(5)
    release.set()

    def fails(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("The current node timed out during startup.\nMore lines Ray prints")

    monkeypatch.setattr(connection.ray, "init", fails)
    with pytest.raises(connection.RayClusterError) as caught:
        connection.connect(5).__enter__()
    assert str(caught.value) == "a local Ray did not start: RuntimeError: The current node timed out during startup."


def test_a_local_ray_is_started_in_the_project_folder_when_it_fits(
    connection: ModuleType, no_ray_yet: list[Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    monkeypatch.setattr(connection, "Watch", lambda timeout: _Answering())
    short = Path("/tmp") / f"rc{tmp_path.name[-8:]}"
    try:
        with connection.connect(5, str(short / ".cache" / "ray")) as started:
            assert started
        assert no_ray_yet[0][1]["_temp_dir"] == str((short / ".cache" / "ray").resolve())
    finally:
        for folder in (short / ".cache" / "ray", short / ".cache", short):
            folder.rmdir()
    # A folder too long for Ray's socket paths: Ray's default place (the README says so).
    with connection.connect(5, str(tmp_path / ("x" * 40))):
        pass
    assert "_temp_dir" not in no_ray_yet[1][1]


class _Answering:
    timeout = 5.0

    def lost(self) -> bool:
        return False

    def stop(self) -> None:
        pass


class _Silent(_Answering):
    def lost(self) -> bool:
        return True


def test_a_cluster_that_stops_answering_stops_the_wait(connection: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []

    def never_ready(refs: list[Any], num_returns: int, timeout: float) -> tuple[list[Any], list[Any]]:
        waits.append(timeout)
        return [], refs

    monkeypatch.setattr(connection.ray, "wait", never_ready)
    monkeypatch.setattr(connection, "_WATCHES", [_Silent()])
    with pytest.raises(
        connection.RayClusterError, match=r"^lost the Ray cluster: it has not answered for 5 s \(ray_timeout\)"
    ):
        connection.gather(["ref"])
    assert waits == [connection.POLL]  # one round, then the watch's verdict


def test_the_watch_is_lost_only_after_its_bound_without_an_answer(
    connection: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    up = [True]

    def nodes() -> list[Any]:
        if not up[0]:
            raise RuntimeError("GCS gone")
        return []

    monkeypatch.setattr(connection.ray, "nodes", nodes)
    watch = connection.Watch(5.0, clock=lambda: now[0], start=False)
    now[0] = 103.0
    watch.ask()  # answered at 103
    up[0] = False
    now[0] = 107.0
    watch.ask()  # no answer: 4 s without one
    assert not watch.lost()
    now[0] = 108.5
    watch.ask()
    assert watch.lost()  # 5.5 s without an answer
    up[0] = True
    watch.ask()
    assert not watch.lost()  # back


def test_a_corpus_gets_a_shard_per_cpu_and_more_when_a_shard_would_be_too_large() -> None:
    from retrieval.executors.ray_cluster import SHARD_DOCUMENTS, shard_count

    assert SHARD_DOCUMENTS == 1_000_000  # the shard size measured in docs/performance.md
    assert [shard_count(20_000, cpus) for cpus in (0, 1, 2, 8)] == [1, 1, 2, 8]
    assert [shard_count(n, 2) for n in (2_000_000, 2_000_001, 3_500_000)] == [2, 3, 4]
