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
from typing import Any

from retrieval.providers.base import cause_of

__all__ = ["LOOKUPS", "NetworkBlockedError", "cause_of", "closed_network", "running"]


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


def _refuse_to(what: str) -> Any:
    _refused.append(_current)
    raise NetworkBlockedError(
        f"{_current} tried to {what} during replay, and replay is closed: "
        "declare its calls (calls = 'http' or 'rankings') and record them with `pytest --record`, "
        "or run it with --live"
    )


def _refuse(sock: socket.socket, address: Any, *_: Any) -> Any:
    return _refuse_to(f"connect to {_address(address)}")


def _refuse_datagram(sock: socket.socket, data: Any, *args: Any) -> Any:
    # sendto(data, address) or sendto(data, flags, address); sendmsg(buffers, ancdata, flags, address)
    return _refuse_to(f"send a datagram to {_address(args[-1]) if args else 'a peer'}")


_LOOPBACK_NAMES = frozenset({None, "", "localhost", "127.0.0.1", "::1"})


def _host(function: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The host a lookup function is asked about: getnameinfo takes a (host, port) address."""
    first = args[0] if args else kwargs.get("host", kwargs.get("hostname", kwargs.get("sockaddr")))
    return first[0] if function == "getnameinfo" and isinstance(first, tuple) else first


def _lookup_guard(function: str) -> Any:
    def refuse_lookup(*args: Any, **kwargs: Any) -> Any:
        # A name lookup reaches a resolver (often over the network); a loopback name does not.
        host = _host(function, args, kwargs)
        if host in _LOOPBACK_NAMES:
            return _originals[function](*args, **kwargs)
        return _refuse_to(f"look up the address of {host}")

    return refuse_lookup


def _refuse_connection(address: Any, *_: Any, **__: Any) -> Any:
    # socket.create_connection resolves then connects; refused before either, loopback or not,
    # like socket.connect.
    return _refuse_to(f"connect to {_address(address)}")


# What leaves the process through Python's socket module: connections, datagrams sent without
# one, and every name-resolution function (module functions, looked up as socket.X at call time
# by the socket module itself: create_connection and getfqdn use the replaced ones).
_SOCKET_METHODS = {"connect": _refuse, "connect_ex": _refuse, "sendto": _refuse_datagram, "sendmsg": _refuse_datagram}
LOOKUPS = ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr", "getnameinfo")
_MODULE_FUNCTIONS = {**{name: _lookup_guard(name) for name in LOOKUPS}, "create_connection": _refuse_connection}


@contextmanager
def closed_network() -> Iterator[None]:
    """Refuse every connection, datagram and name lookup inside the block (re-entrant, restored
    on exit)."""
    global _depth
    with _lock:
        if _depth == 0:
            for name, replacement in _SOCKET_METHODS.items():
                _originals[name] = getattr(socket.socket, name)
                setattr(socket.socket, name, replacement)
            for name, replacement in _MODULE_FUNCTIONS.items():
                _originals[name] = getattr(socket, name)
                setattr(socket, name, replacement)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for name in _SOCKET_METHODS:
                    setattr(socket.socket, name, _originals.pop(name))
                for name in _MODULE_FUNCTIONS:
                    setattr(socket, name, _originals.pop(name))


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
