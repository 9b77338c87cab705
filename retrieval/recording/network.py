"""Replay is closed: while the gate replays, nothing reaches the network, from this process or
from any process it starts.

vcrpy answers recorded HTTP calls above the socket layer, so a replayed call never opens
a socket. Anything that does (a method that forgot to declare its calls, a client vcrpy
does not patch, a database driver written in Python) reaches `socket.connect`, which
the guard (retrieval.recording.socket_guard) refuses with one line naming the method and the fix.
What the guard cannot see, C code's own sockets and the processes a method starts, is closed by
retrieval.recording.process_tree: a network namespace where the platform allows one, an
environment that refuses the rest; where no namespace can be made, a warning
(`OpenReplayWarning`) says in one line what stays open.

The one allowance of the guard: multiprocessing's forkserver, reached through its own Unix
socket (the children it forks are closed like any other).
"""

from __future__ import annotations

import socket
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

from retrieval.providers.base import cause_of
from retrieval.recording.process_tree import Closure, closed_tree, name_children
from retrieval.recording.socket_guard import LOOKUPS, NetworkBlockedError, install

__all__ = ["LOOKUPS", "NetworkBlockedError", "OpenReplayWarning", "cause_of", "closed_network", "running"]


class OpenReplayWarning(UserWarning):
    """Replay could not be closed for the whole process tree here; the message says what stays open."""


_lock = threading.Lock()
_depth = 0
_restore: Callable[[], None] | None = None
# Methods run one after another; their worker threads share the label, so it is global.
_current = "the evaluation"
# Every refusal, so a caller that swallowed the error (a retriever catching ConnectError and
# returning nothing) is still caught by the evaluator after the method returns.
_refused: list[str] = []


def _refuse_to(what: str) -> NoReturn:
    _refused.append(_current)
    raise NetworkBlockedError(
        f"{_current} tried to {what} during replay, and replay is closed: "
        "declare its calls (calls = 'http' or 'rankings') and record them with `pytest --record`, "
        "or run it with --live"
    )


def _multiprocessing_own(sock: socket.socket, address: Any) -> bool:
    """The forkserver's Unix socket: a method's `multiprocessing` children start through it."""
    if sock.family != getattr(socket, "AF_UNIX", None):
        return False
    forkserver = getattr(sys.modules.get("multiprocessing.forkserver"), "_forkserver", None)
    own = getattr(forkserver, "_forkserver_address", None)
    return own is not None and address == own


@contextmanager
def closed_network() -> Iterator[Closure]:
    """Refuse every connection, datagram and name lookup inside the block, in this process and
    in the processes it starts (re-entrant, restored on exit). Yields how the process tree was
    closed (retrieval.recording.process_tree.Closure)."""
    global _depth, _restore
    with closed_tree(_current) as closure:
        with _lock:
            if _depth == 0:
                _restore = install(_refuse_to, _multiprocessing_own)
                if closure.open:
                    warnings.warn(closure.open, OpenReplayWarning, stacklevel=3)
            _depth += 1
        try:
            yield closure
        finally:
            with _lock:
                _depth -= 1
                if _depth == 0 and _restore is not None:
                    _restore()
                    _restore = None


@contextmanager
def running(label: str) -> Iterator[None]:
    """Name what runs now, for the message of a refused connection (a child process's too);
    raises after the block if a connection was refused in it, even when the code inside caught
    the error."""
    global _current
    previous, _current = _current, label
    name_children(label)
    start = len(_refused)
    try:
        yield
    finally:
        _current = previous
        name_children(previous)
    if len(_refused) > start:
        raise NetworkBlockedError(
            f"{label} tried to connect during replay ({len(_refused) - start} attempt(s)), and replay is "
            "closed: declare its calls (calls = 'http' or 'rankings') and record them with `pytest --record`, "
            "or run it with --live"
        )
