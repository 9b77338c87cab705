"""Replay closed beyond this process: what a method starts during replay (a subprocess, a
multiprocessing child, curl or wget) cannot reach the network either.

The socket guard (retrieval.recording.network) sees only this process's Python. Three layers
close the rest, each for what the others miss:

- A network namespace without interfaces for the thread that replays (Linux, where this process
  may create one: root, or CAP_SYS_ADMIN, as CI runs). Every thread and process that thread
  starts is created inside it, so C code's own connect() (curl, a compiled client, libc through
  ctypes) finds no network, not even loopback. The thread goes back to its namespace after the
  block. Files are not touched: replay still reads the cassettes and the vector store.
- An environment for child processes: every proxy variable names a port on 127.0.0.1 that is
  bound and never listened on (a refused connection), the proxy exceptions emptied, so that
  curl, wget, git, pip and Python's HTTP clients go nowhere; and Python children load the socket
  guard at start-up (child_guard/sitecustomize.py, put first on PYTHONPATH).
- multiprocessing's forkserver restarted inside the closure (one started before would fork the
  children outside it), and stopped after it (its socket lives in the closed namespace).

The allowance: threads and processes that exist before the block keep their network, the
namespace being per thread. Ray needs exactly that: the evaluator joins the cluster before replay
closes (retrieval.evaluation.evaluate), so the driver's Ray threads keep reaching the GCS, the
raylets and the object store, and the cluster's workers (started by the raylet, outside the
closure) run a sharded search on what the driver sends them. pytest-xdist's channel is kept alike.

Where no namespace can be made (an unprivileged user: a user namespace needs a single-threaded
process; macOS, Windows), `Closure.open` says in one line what stays open.
"""

from __future__ import annotations

import ctypes
import functools
import os
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.recording.socket_guard import CHILD_VARIABLE

__all__ = ["CHILD_GUARD", "PROXY_VARIABLES", "Closure", "closed_tree", "name_children"]

# The folder put first on the children's PYTHONPATH: it holds their sitecustomize alone.
CHILD_GUARD = Path(__file__).with_name("child_guard")
PROXY_VARIABLES = tuple(
    name for scheme in ("http", "https", "ftp", "all") for name in (f"{scheme}_proxy", f"{scheme.upper()}_PROXY")
)
# Emptied: a NO_PROXY=localhost,127.0.0.1 would let curl reach a local service directly.
_BYPASS_VARIABLES = ("no_proxy", "NO_PROXY")
_CLONE_NEWNET = 0x40000000  # <sched.h>


@dataclass(frozen=True)
class Closure:
    """How a replay's process tree is closed: `namespace` when the replaying thread runs in a
    network namespace without interfaces; `open` says in one line what stays open, or None."""

    namespace: bool
    open: str | None = None


def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    return _linux_libc()


@functools.cache  # asked twice a replay (into the namespace and out), the same library each time
def _linux_libc() -> Any:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    return libc if hasattr(libc, "unshare") and hasattr(libc, "setns") else None


def _enter_namespace() -> int | str:
    """Move this thread into a new network namespace: the descriptor of the one it left, or why not."""
    libc = _libc()
    if libc is None:
        return f"{sys.platform} has no network namespaces"
    try:
        left = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        return f"/proc/thread-self/ns/net cannot be opened: {exc.strerror}"
    # Joining the namespace this thread is in changes nothing but needs the right to come back: inside
    # a user namespace (`unshare -r`, a rootless container) a new one could be made and never left.
    if libc.setns(left, _CLONE_NEWNET) != 0:
        code = ctypes.get_errno()
        os.close(left)
        return f"setns(CLONE_NEWNET): {os.strerror(code)}; this thread could not return to its network namespace"
    if libc.unshare(_CLONE_NEWNET) != 0:
        code = ctypes.get_errno()
        os.close(left)
        return (
            f"unshare(CLONE_NEWNET): {os.strerror(code)}; a network namespace needs root or CAP_SYS_ADMIN, "
            "an unprivileged one a single-threaded process"
        )
    return left


def _leave_namespace(left: int) -> None:
    try:
        if _libc().setns(left, _CLONE_NEWNET) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"cannot return to the network namespace replay left: {os.strerror(code)}")
    finally:
        os.close(left)


def _stop_forkserver() -> None:
    """Stop multiprocessing's forkserver if it runs: the next child starts a new one, where it is started."""
    forkserver = sys.modules.get("multiprocessing.forkserver")
    server = getattr(forkserver, "_forkserver", None)
    if getattr(server, "_forkserver_pid", None) is not None:
        server._stop()  # type: ignore[union-attr]


class _Tree:
    """The closure's state: the environment and the closed port for the whole process, held
    while any thread replays; the namespace per thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.saved: dict[str, str | None] = {}
        self.port: socket.socket | None = None
        self.closure = Closure(namespace=False)
        self.local = threading.local()


_tree = _Tree()


def _environment(port: int, started_by: str) -> dict[str, str]:
    proxy = f"http://127.0.0.1:{port}"
    python_path = os.pathsep.join([str(CHILD_GUARD), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {
        **dict.fromkeys(PROXY_VARIABLES, proxy),
        **dict.fromkeys(_BYPASS_VARIABLES, ""),
        "PYTHONPATH": python_path,
        CHILD_VARIABLE: started_by,
    }


def _open_tree(started_by: str) -> None:
    port = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    port.bind(("127.0.0.1", 0))  # never listened on: held so that nothing else takes it
    variables = _environment(port.getsockname()[1], started_by)
    _tree.saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    _tree.port = port
    _stop_forkserver()


def _close_tree() -> None:
    _stop_forkserver()
    for name, value in _tree.saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    if _tree.port is not None:
        _tree.port.close()
    _tree.saved, _tree.port = {}, None


def _open_line(reason: str) -> str:
    return (
        f"replay is not closed by a network namespace here ({reason}): child processes are closed only by "
        "proxy variables on a closed port and the guard Python children load, so a program that ignores "
        "proxies or its environment (ssh, a compiled client, libc connect() through ctypes, here or in a "
        "child) can reach the network"
    )


@contextmanager
def closed_tree(started_by: str = "the evaluation") -> Iterator[Closure]:
    """Close the network to every process and thread this thread starts inside the block
    (re-entrant; everything restored on exit), the calling thread's own C code included where a
    namespace can be made. Yields how it closed, with what stays open."""
    with _tree.lock:
        if _tree.depth == 0:
            _open_tree(started_by)
        _tree.depth += 1
    local = _tree.local
    outermost = getattr(local, "depth", 0) == 0
    try:
        if outermost:
            entered = _enter_namespace()
            local.left = entered if isinstance(entered, int) else None
            _tree.closure = (
                Closure(namespace=True)
                if isinstance(entered, int)
                else Closure(namespace=False, open=_open_line(entered))
            )
        local.depth = getattr(local, "depth", 0) + 1
        try:
            yield _tree.closure
        finally:
            local.depth -= 1
            if outermost and local.left is not None:
                _leave_namespace(local.left)
    finally:
        with _tree.lock:
            _tree.depth -= 1
            if _tree.depth == 0:
                _close_tree()


def name_children(started_by: str) -> None:
    """Say who starts the child processes from now on (their guard's message names it)."""
    with _tree.lock:
        if _tree.depth:
            os.environ[CHILD_VARIABLE] = started_by
