"""Joining a Ray cluster within a bounded time, and noticing when it goes away.

Left to itself, Ray answers a bad address with a long traceback, keeps retrying an address
where nothing listens for a quarter of an hour with SIGTERM ignored (its handler waits for the
main thread, which is blocked in its C++ client), and waits forever on a cluster that died
mid-run. Here every fault ends in one line (`RayClusterError`, a ConfigError: exit 2 from the
command, the failed checks' line in the gate) within `timeout` seconds (the `ray_timeout` setting):

- the address is read and checked before Ray sees it, and probed: a refused connection, or a
  port where no gRPC server answers HTTP/2's opening within 10 s, is said at once;
- `ray.init` runs in a helper thread (`_Host`), waited for at most `timeout` seconds (so Ray
  installs no SIGTERM handler either: the default one ends the process);
- results are awaited in short rounds (`gather`) while a helper thread asks the cluster for its
  nodes (`Watch`): no answer for `timeout` seconds, the run stops.

Ray's own files go to `temp_dir` (the project's `<cache>/ray`) when Ray is started here (else,
a path too long for Ray's sockets, to Ray's default place), and its session folder is removed
when it shuts down.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray

from retrieval.config import ConfigError

__all__ = [
    "DEFAULT_TIMEOUT",
    "Address",
    "RayClusterError",
    "cluster_size",
    "connect",
    "first_done",
    "gather",
    "parse_address",
]

# Seconds a connection, a start or a lost cluster may take before the run stops (`ray_timeout`).
DEFAULT_TIMEOUT = 180.0
# Seconds between two looks at the cluster while results are awaited.
POLL = 1.0
# Seconds a shutdown may take (it waits on the cluster, which may be gone).
SHUTDOWN = 30.0
# Ray puts Unix sockets under <temp dir>/session_<date>_<pid>/sockets/: the kernel's limit is
# 107 bytes, and the session part is about 65 of them.
TEMP_DIR_LIMIT = 40
# HTTP/2's client preface and an empty SETTINGS frame: a gRPC server answers with its SETTINGS.
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
# Ray Client's port when `ray://host` names none.
CLIENT_PORT = 10001
_HOST = re.compile(r"\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)")

# The cluster's watch while `connect`'s block runs (`gather` reads it).
_WATCHES: list[Watch] = []


class RayClusterError(ConfigError):
    """The Ray cluster cannot be used: a bad address, none reachable, a failed start, or a
    cluster lost mid-run. One line, naming the address and what to do."""


@dataclass(frozen=True)
class Address:
    """A cluster address as RAY_ADDRESS gives it: `host:port` (the GCS) or `ray://host[:port]`."""

    text: str
    host: str
    port: int
    client: bool

    @property
    def endpoint(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_address(text: str) -> Address:
    """The address in `text`, checked; a RayClusterError naming the forms Ray accepts otherwise."""
    rest, client = text.strip(), False
    if "://" in rest:
        scheme, _, rest = rest.partition("://")
        client = scheme == "ray"
        if not client:
            raise RayClusterError(_bad(text, f"the scheme {scheme}:// is not Ray's"))
    host_part, port_text = rest, ""
    match = _HOST.match(rest)
    if match is not None:
        host_part, port_text = rest[: match.end()], rest[match.end() :]
    host = match.group("v6") or match.group("name") if match else None
    if host is None or (port_text and not re.fullmatch(r":\d{1,5}", port_text)):
        raise RayClusterError(_bad(text, "it is not host:port"))
    if not port_text and not client:
        raise RayClusterError(_bad(text, "it names no port"))
    port = int(port_text[1:]) if port_text else CLIENT_PORT
    if not 1 <= port <= 65535:
        raise RayClusterError(_bad(text, f"port {port} is out of range"))
    if match and match.group("v6"):
        try:
            socket.inet_pton(socket.AF_INET6, host)
        except OSError:
            raise RayClusterError(_bad(text, f"{host_part} is not an IPv6 address")) from None
    return Address(text, host, port, client)


def _bad(text: str, why: str) -> str:
    return (
        f"RAY_ADDRESS={text!r} is not a Ray cluster address ({why}): give the head's host:port "
        "(its GCS, e.g. 127.0.0.1:6379), ray://host:10001 for Ray Client, or unset RAY_ADDRESS to start a local Ray."
    )


def _probe(host: str, port: int, seconds: float) -> str | None:
    """None when a gRPC server (Ray's GCS and Ray Client both are) answers at host:port within
    `seconds`, else why not: the connection refused, or no HTTP/2 answer to HTTP/2's opening."""
    deadline = time.monotonic() + max(0.1, seconds)
    try:
        with socket.create_connection((host, port), timeout=max(0.1, seconds)) as connection:
            connection.sendall(_HTTP2_PREFACE)
            answer = b""
            while len(answer) < 9:
                connection.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = connection.recv(9 - len(answer))
                if not chunk:
                    return "the connection was closed without an answer"
                answer += chunk
    except TimeoutError:
        return f"no answer within {seconds:g} s"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    # A server's first frame is its SETTINGS (type 4), on stream 0.
    return None if answer[3] == 4 else "what answered is not a gRPC server"


class _Host:
    """A helper thread that initialises Ray, keeps it until `close`, then shuts it down.

    `ray.init` waits there, at most `seconds` (`opened`). The thread lives as long as Ray: the
    processes of a local Ray are its children, and Linux ends them when the thread that started
    them exits (their parent-death signal). The helper is a daemon: a thread still waiting on
    Ray when the run gives up does not keep the process alive."""

    def __init__(self, init: Callable[[], Any]) -> None:
        self._init = init
        self.error: BaseException | None = None
        self._ready, self._closing = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._run, name="ray-host", daemon=True)

    def _run(self) -> None:
        try:
            self._init()
        except BaseException as exc:  # handed to the caller's thread
            self.error = exc
            with contextlib.suppress(Exception):
                ray.shutdown()  # what a failed start left running
            return
        finally:
            self._ready.set()
        self._closing.wait()
        ray.shutdown()

    def opened(self, seconds: float, late: str, failed: str) -> None:
        self._thread.start()
        if not self._ready.wait(seconds):
            self._closing.set()  # should ray.init return after all, Ray is shut down at once
            raise RayClusterError(late)
        if self.error is not None:
            raise RayClusterError(f"{failed}: {_first_line(self.error)}") from None

    def close(self, seconds: float) -> None:
        self._closing.set()
        self._thread.join(seconds)  # a shutdown waits on the cluster, which may be gone


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else 'no message'}"


@contextlib.contextmanager
def connect(timeout: float = DEFAULT_TIMEOUT, temp_dir: str | None = None) -> Iterator[bool]:
    """Ray initialised for the block: joined to $RAY_ADDRESS (checked and probed first), or a
    local Ray started in `temp_dir`; yields whether this started it (and so shuts it down).
    One already initialised in this process is used as it is."""
    if ray.is_initialized():
        with _watching(timeout):
            yield False
        return
    value = os.environ.get("RAY_ADDRESS", "").strip()
    address = parse_address(value) if value and value not in ("auto", "local") else None
    options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
    session: Path | None = None
    if address is not None:
        why = _probe(address.host, address.port, min(timeout, 10.0))
        if why is not None:
            raise RayClusterError(
                f"cannot reach the Ray cluster at {address.text} (RAY_ADDRESS): {why}. Start it, fix RAY_ADDRESS, "
                'or unset it to start a local Ray; executor = "local" runs without Ray.'
            )
        target: str | None = f"ray://{address.endpoint}" if address.client else address.endpoint
        late = f"the Ray cluster at {address.text} (RAY_ADDRESS) did not answer within {timeout:g} s (ray_timeout)"
        failed = f"could not join the Ray cluster at {address.text} (RAY_ADDRESS)"
    else:
        target = value or None
        folder = _temp_dir(temp_dir)
        if folder is not None:
            options["_temp_dir"] = str(folder)
        session = folder or Path(os.environ.get("RAY_TMPDIR") or tempfile.gettempdir()) / "ray"
        late = f"a local Ray did not start within {timeout:g} s (ray_timeout)"
        failed = "a local Ray did not start"
    before = set(session.glob("session_*")) if session is not None and session.is_dir() else set()
    host = _Host(lambda: ray.init(address=target, **options))
    try:
        host.opened(timeout, late, failed)
        try:
            with _watching(timeout):
                yield True
        finally:
            host.close(SHUTDOWN)
    finally:
        if session is not None:
            _remove_sessions(session, before)


def _temp_dir(wanted: str | None) -> Path | None:
    """Where a Ray started here writes: `wanted` (created), when short enough for Ray's socket
    paths; else Ray's own default ($RAY_TMPDIR, or the system temp folder), said in the README."""
    if not wanted or os.environ.get("RAY_TMPDIR"):
        return None
    folder = Path(wanted).resolve()
    if len(str(folder)) > TEMP_DIR_LIMIT:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _remove_sessions(folder: Path, before: set[Path]) -> None:
    # The session folders this run's Ray made (logs, sockets, spilled objects): new, and named
    # for this process (session_<date>_<pid>); another Ray's, even started meanwhile, are left.
    for session in set(folder.glob(f"session_*_{os.getpid()}")) - before:
        shutil.rmtree(session, ignore_errors=True)
    latest = folder / "session_latest"
    if latest.is_symlink() and not latest.exists():
        latest.unlink()


class Watch:
    """A helper thread asking the cluster's control service (GCS) for its nodes every POLL
    seconds, through Ray's own client (no Python socket: replay's closed network stays closed);
    `lost()` says when it has not answered for `timeout` seconds."""

    def __init__(self, timeout: float, clock: Callable[[], float] = time.monotonic, start: bool = True) -> None:
        self.timeout, self.clock = timeout, clock
        self.answered = clock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ray-watch", daemon=True)
        if start:
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.ask()
            self._stop.wait(POLL)

    def ask(self) -> None:
        """One question to the cluster; `answered` moves when it answers."""
        with contextlib.suppress(Exception):
            ray.nodes()
            self.answered = self.clock()

    def lost(self) -> bool:
        return self.clock() - self.answered > self.timeout

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(2 * POLL)  # not asking the cluster while it shuts down


@contextlib.contextmanager
def _watching(timeout: float) -> Iterator[Watch]:
    watch = Watch(timeout)
    _WATCHES.append(watch)
    try:
        yield watch
    finally:
        _WATCHES.remove(watch)
        watch.stop()


def gather(refs: Sequence[Any], timeout: float = DEFAULT_TIMEOUT) -> list[Any]:
    """`ray.get(refs)`, awaited in rounds of POLL seconds; when the cluster has not answered
    its watch for `timeout` seconds (in `connect`'s block), the run stops (RayClusterError)."""
    _awaited(refs, len(refs))
    try:
        return list(ray.get(list(refs)))
    except Exception:
        settle(refs)
        raise


def settle(refs: Sequence[Any]) -> None:
    """Wait for `refs` and read their errors, if any: a failed result nobody reads is printed
    by Ray (a traceback on stderr) when it is collected, though the run already said why it stopped."""
    with contextlib.suppress(RayClusterError):
        _awaited(refs, len(refs))
    for ref in refs:
        with contextlib.suppress(Exception):
            ray.get(ref, timeout=0)


def first_done(refs: Sequence[Any]) -> Any:
    """The first of `refs` whose result is ready, awaited as `gather` awaits."""
    return _awaited(refs, 1)[0]


def _awaited(refs: Sequence[Any], count: int) -> list[Any]:
    while count:
        ready, _ = ray.wait(list(refs), num_returns=count, timeout=POLL)
        if len(ready) >= count:
            return list(ready)
        if _WATCHES and _WATCHES[-1].lost():
            raise RayClusterError(
                f"lost the Ray cluster: it has not answered for {_WATCHES[-1].timeout:g} s (ray_timeout) while the "
                "run waited for it. Nothing was written; run again when the cluster is back."
            )
    return []


def cluster_size() -> dict[str, int]:
    """The cluster's alive nodes and CPUs, for the report."""
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    return {"nodes": len(nodes), "cpus": int(sum(node.get("Resources", {}).get("CPU", 0) for node in nodes))}
