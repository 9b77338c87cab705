"""Replay is closed: while the gate replays, no connection leaves the process.

vcrpy answers recorded HTTP calls above the socket layer, so a replayed call never opens
a socket. Anything that does (a method that forgot to declare its calls, a client vcrpy
does not patch, a database driver written in Python) reaches `socket.connect`, which
this guard refuses with one line naming the method and the fix.

Connections opened by C extensions (libpq, for instance) do not go through Python's
socket module and are not seen here: such engines declare `calls = "rankings"`, so their
code does not run at all in replay.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ["NetworkBlockedError", "cause_of", "closed_network", "running"]

E = TypeVar("E", bound=BaseException)


class NetworkBlockedError(ConnectionRefusedError):
    """A connection attempted during replay. It is an OSError so that HTTP clients wrap it
    like any refused connection; the evaluator finds it in the exception chain."""


_lock = threading.Lock()
_depth = 0
_originals: dict[str, Any] = {}
# Methods run one after another; their worker threads share the label, so it is global.
_current = "the evaluation"
# Every refusal, so a caller that swallowed the error (a retriever catching ConnectError and
# returning nothing) is still caught by the evaluator after the method returns.
_refused: list[str] = []


def _address(address: Any) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return str(address)


def _refuse(sock: socket.socket, address: Any, *_: Any) -> Any:
    _refused.append(_current)
    raise NetworkBlockedError(
        f"{_current} tried to connect to {_address(address)} during replay, and replay is closed: "
        "declare its calls (calls = 'http' or 'rankings') and record them with `pytest --record`, "
        "or run it with --live"
    )


@contextmanager
def closed_network() -> Iterator[None]:
    """Refuse every socket connection inside the block (re-entrant, restored on exit)."""
    global _depth
    with _lock:
        if _depth == 0:
            _originals["connect"] = socket.socket.connect
            _originals["connect_ex"] = socket.socket.connect_ex
            socket.socket.connect = _refuse  # type: ignore[method-assign,assignment]
            socket.socket.connect_ex = _refuse  # type: ignore[method-assign,assignment]
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                socket.socket.connect = _originals.pop("connect")  # type: ignore[method-assign]
                socket.socket.connect_ex = _originals.pop("connect_ex")  # type: ignore[method-assign]


@contextmanager
def running(label: str) -> Iterator[None]:
    """Name what runs now, for the message of a refused connection; raises after the block
    if a connection was refused in it, even when the code inside caught the error."""
    global _current
    previous, _current = _current, label
    start = len(_refused)
    try:
        yield
    finally:
        _current = previous
    if len(_refused) > start:
        raise NetworkBlockedError(
            f"{label} tried to connect during replay ({len(_refused) - start} attempt(s)), and replay is "
            "closed: declare its calls (calls = 'http' or 'rankings') and record them with `pytest --record`, "
            "or run it with --live"
        )


def cause_of(exc: BaseException, kind: type[E]) -> E | None:
    """The first exception of `kind` in the chain behind `exc` (HTTP clients and SDKs wrap the
    error that matters: a refused connection, a replay miss), or None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
