"""The ways out of one Python process through its socket module, replaced by a refusal.

Standard library only, on purpose: the Python child processes of a closed replay load this file
by its path (child_guard/sitecustomize.py), whatever their interpreter has installed, and the
replaying process installs it through retrieval.recording.network for the time of the replay.

What it replaces: `connect` and `connect_ex` of every socket (Unix sockets too: a local
service is a service), datagrams sent without a connection, `create_connection`, and every
name-resolution function; a loopback name is still resolved (no resolver is asked).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any, NoReturn

__all__ = ["CHILD_VARIABLE", "LOOKUPS", "NetworkBlockedError", "close_child", "install"]

# Set in a closed replay's environment: what started the child processes (a method's label),
# for the guard they load at start-up.
CHILD_VARIABLE = "RETRIEVAL_REPLAY_CLOSED"

LOOKUPS = ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr", "getnameinfo")
_LOOPBACK_NAMES = frozenset({None, "", "localhost", "127.0.0.1", "::1"})
_SOCKET_METHODS = ("connect", "connect_ex", "sendto", "sendmsg")
_MODULE_FUNCTIONS = (*LOOKUPS, "create_connection")

Refuse = Callable[[str], NoReturn]
# (socket, address) -> True for a connection the replay allows (multiprocessing's own, see network.py).
Allowance = Callable[[socket.socket, Any], bool]


class NetworkBlockedError(ConnectionRefusedError):
    """A connection attempted during replay. It is an OSError so that HTTP clients wrap it
    like any refused connection; the evaluator finds it in the exception chain."""


def _address(address: Any) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return str(address)


def _host(function: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The host a lookup function is asked about: getnameinfo takes a (host, port) address."""
    first = args[0] if args else kwargs.get("host", kwargs.get("hostname", kwargs.get("sockaddr")))
    return first[0] if function == "getnameinfo" and isinstance(first, tuple) else first


def _never(sock: socket.socket, address: Any) -> bool:
    return False


def install(refuse: Refuse, allowed: Allowance = _never) -> Callable[[], None]:
    """Replace the socket module's ways out by `refuse` (called with what was tried, it raises);
    a connection `allowed` accepts goes through. Returns what puts the originals back."""
    originals: dict[str, Any] = {name: getattr(socket.socket, name) for name in _SOCKET_METHODS}
    functions: dict[str, Any] = {name: getattr(socket, name) for name in _MODULE_FUNCTIONS}

    def connect(sock: socket.socket, address: Any, *rest: Any) -> Any:
        if allowed(sock, address):
            return originals["connect"](sock, address, *rest)
        return refuse(f"connect to {_address(address)}")

    def connect_ex(sock: socket.socket, address: Any, *rest: Any) -> Any:
        if allowed(sock, address):
            return originals["connect_ex"](sock, address, *rest)
        return refuse(f"connect to {_address(address)}")

    def sendto(sock: socket.socket, data: Any, *args: Any) -> Any:
        # sendto(data, address) or sendto(data, flags, address): a datagram, or TCP Fast Open's connect.
        return refuse(f"send a datagram to {_address(args[-1]) if args else 'a peer'}")

    def sendmsg(sock: socket.socket, buffers: Any, *args: Any) -> Any:
        # sendmsg(buffers, ancdata, flags, address); without an address it writes to a socket
        # connected already (multiprocessing passes descriptors to its forkserver so).
        if len(args) >= 3 and args[2] is not None:
            return refuse(f"send a datagram to {_address(args[2])}")
        return originals["sendmsg"](sock, buffers, *args)

    def lookup_guard(function: str) -> Any:
        def refuse_lookup(*args: Any, **kwargs: Any) -> Any:
            # A name lookup reaches a resolver (often over the network); a loopback name does not.
            host = _host(function, args, kwargs)
            if host in _LOOPBACK_NAMES:
                return functions[function](*args, **kwargs)
            return refuse(f"look up the address of {host}")

        return refuse_lookup

    def create_connection(address: Any, *_: Any, **__: Any) -> Any:
        # Resolves then connects; refused before either, loopback or not, like socket.connect.
        return refuse(f"connect to {_address(address)}")

    replacements = {"connect": connect, "connect_ex": connect_ex, "sendto": sendto, "sendmsg": sendmsg}
    for name, replacement in replacements.items():
        setattr(socket.socket, name, replacement)
    for name in LOOKUPS:
        setattr(socket, name, lookup_guard(name))
    socket.create_connection = create_connection

    def restore() -> None:
        for name, original in originals.items():
            setattr(socket.socket, name, original)
        for name, original in functions.items():
            setattr(socket, name, original)

    return restore


def close_child(started_by: str) -> None:
    """Refuse every way out for the rest of this process: a child process of a closed replay."""

    def refuse(what: str) -> NoReturn:
        raise NetworkBlockedError(
            f"process {os.getpid()}, started by {started_by}, tried to {what} during replay, and replay is "
            "closed for child processes too: declare the method's calls (calls = 'http' or 'rankings') and "
            "record them with `pytest --record`, or run it with --live"
        )

    install(refuse)
