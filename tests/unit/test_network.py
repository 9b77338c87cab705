"""Replay is closed: every way Python's socket module leaves the process is refused inside
closed_network(), loopback name lookups still answer, and everything is restored after."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest

from retrieval.recording.network import LOOKUPS, NetworkBlockedError, closed_network, running

TCP = (socket.AF_INET, socket.SOCK_STREAM)


def _connect_ex() -> object:
    with socket.socket(*TCP) as sock:
        return sock.connect_ex(("192.0.2.1", 80))


def _connect() -> None:
    with socket.socket(*TCP) as sock:
        sock.connect(("192.0.2.1", 80))


LEAKS: dict[str, tuple[Callable[[], object], str]] = {
    "connect": (_connect, "connect to 192.0.2.1:80"),
    "connect_ex": (_connect_ex, "connect to 192.0.2.1:80"),
    "create_connection": (lambda: socket.create_connection(("192.0.2.1", 80)), "connect to 192.0.2.1:80"),
    "create_connection loopback": (lambda: socket.create_connection(("127.0.0.1", 9)), "connect to 127.0.0.1:9"),
    "getaddrinfo": (lambda: socket.getaddrinfo("example.invalid", 80), "look up the address of example.invalid"),
    "gethostbyname": (lambda: socket.gethostbyname("example.invalid"), "look up the address of example.invalid"),
    "gethostbyname_ex": (lambda: socket.gethostbyname_ex("example.invalid"), "look up the address of example.invalid"),
    "gethostbyaddr": (lambda: socket.gethostbyaddr("192.0.2.1"), "look up the address of 192.0.2.1"),
    "getnameinfo": (lambda: socket.getnameinfo(("192.0.2.1", 80), 0), "look up the address of 192.0.2.1"),
}


@pytest.mark.parametrize("leak", sorted(LEAKS))
def test_every_way_out_is_refused_in_replay(leak: str) -> None:
    call, what = LEAKS[leak]
    with closed_network(), pytest.raises(NetworkBlockedError) as caught, running("method 'leaky'"):
        call()
    assert str(caught.value).startswith(f"method 'leaky' tried to {what} during replay, and replay is closed")


def test_getfqdn_swallowing_the_refusal_is_still_caught() -> None:
    # socket.getfqdn catches the lookup's OSError and returns the name: `running` still raises.
    with closed_network(), pytest.raises(NetworkBlockedError) as caught, running("method 'quiet'"):
        assert socket.getfqdn("example.invalid") == "example.invalid"
    assert str(caught.value).startswith("method 'quiet' tried to connect during replay (1 attempt(s))")


def test_every_lookup_function_of_the_socket_module_is_guarded() -> None:
    # A lookup function the guard does not list would be a way out: the list follows the module.
    public = {name for name in dir(socket) if name.startswith(("gethostby", "getaddr", "getnameinfo"))}
    assert public == set(LOOKUPS)


@pytest.mark.parametrize("name", ["localhost", "127.0.0.1"])
def test_loopback_lookups_answer_and_everything_is_restored(name: str) -> None:
    before = {n: getattr(socket, n) for n in (*LOOKUPS, "create_connection")}
    methods = {n: getattr(socket.socket, n) for n in ("connect", "connect_ex", "sendto", "sendmsg")}
    with closed_network(), closed_network():  # re-entrant
        assert socket.gethostbyname(name) == "127.0.0.1"
        assert socket.getaddrinfo(name, 9, socket.AF_INET)[0][4] == ("127.0.0.1", 9)
        assert socket.getnameinfo(("127.0.0.1", 9), socket.NI_NUMERICHOST | socket.NI_NUMERICSERV) == ("127.0.0.1", "9")
    assert {n: getattr(socket, n) for n in before} == before
    assert {n: getattr(socket.socket, n) for n in methods} == methods


def test_a_refusal_behind_an_exception_group_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # A name with two addresses: anyio (httpx's async client) tries both, then raises "All
    # connection attempts failed" from a group of the two refusals. The evaluator finds the
    # refusal there (cause_of) and prints its one line, not a traceback.
    import anyio._core._sockets
    import httpx

    from retrieval.providers.base import cause_of

    async def two_addresses(host: str, port: int, **_: object) -> list[tuple[object, ...]]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port)) for address in ("127.0.0.1", "127.0.0.2")]

    monkeypatch.setattr(anyio._core._sockets, "getaddrinfo", two_addresses)

    async def get() -> None:
        # trust_env=False: a proxy in the environment would be the one address tried.
        async with httpx.AsyncClient(timeout=5, trust_env=False) as client:
            await client.get("http://search.internal:9/")

    with closed_network(), pytest.raises(httpx.ConnectError) as caught, running("method 'async'"):
        anyio.run(get)
    group = cause_of(caught.value, ExceptionGroup)
    assert group is not None and len(group.exceptions) == 2
    blocked = cause_of(caught.value, NetworkBlockedError)
    assert blocked is group.exceptions[0]
    assert str(blocked).startswith("method 'async' tried to connect to 127.0.0.1:9 during replay")
