"""FIXTURE: the child processes a method may start during replay, each trying to reach a service
on 127.0.0.1 and saying how it ended (test_replay_closure.py). Standard library only, and nothing
runs on import: a multiprocessing spawn child imports this module to find its target."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from typing import Any

# Every child's wait is bounded (curl -m, wget -T, socket timeouts, join timeouts).
CHILD_SECONDS = 10


def python_connect(port: int) -> None:
    """In a multiprocessing child: exit 0 only if it connected."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=CHILD_SECONDS).close()
    except OSError:
        os._exit(3)


def multiprocessing_child(method: str) -> Callable[[int], object]:
    """A child of the `method` start method (spawn, forkserver, fork): its exit code."""

    def start(port: int) -> object:
        child = multiprocessing.get_context(method).Process(target=python_connect, args=(port,))  # type: ignore[attr-defined]
        child.start()
        child.join(CHILD_SECONDS * 3)
        if child.is_alive():
            child.kill()
            child.join(CHILD_SECONDS)
        return child.exitcode

    return start


def run(command: list[str], **options: Any) -> int:
    """A command's exit code."""
    done = subprocess.run(command, capture_output=True, timeout=CHILD_SECONDS * 3, check=False, **options)
    return done.returncode


def python_connect_command(port: int, *flags: str) -> list[str]:
    return [sys.executable, *flags, "-c", f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=10)"]


def python_subprocess(port: int) -> object:
    return run(python_connect_command(port))


def curl(port: int) -> object:
    return run(["curl", "-sS", "-m", str(CHILD_SECONDS), f"http://127.0.0.1:{port}/"])


def wget(port: int) -> object:
    return run(["wget", "-q", "-t", "1", "-T", str(CHILD_SECONDS), "-O", "-", f"http://127.0.0.1:{port}/"])


class _Address(ctypes.Structure):
    _fields_ = (
        ("family", ctypes.c_ushort),
        ("port", ctypes.c_uint16),
        ("address", ctypes.c_uint32),
        ("zero", ctypes.c_char * 8),
    )


def libc_connect(port: int) -> object:
    """connect(2) through ctypes in this process, which Python's socket module never sees: 0 or -1."""
    libc = ctypes.CDLL(None, use_errno=True)
    address = _Address(socket.AF_INET, socket.htons(port), int.from_bytes(socket.inet_aton("127.0.0.1"), "little"))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return int(libc.connect(sock.fileno(), ctypes.byref(address), ctypes.sizeof(address)))


CHILDREN: dict[str, Callable[[int], object]] = {
    "curl": curl,
    "wget": wget,
    "python subprocess": python_subprocess,
    "multiprocessing spawn": multiprocessing_child("spawn"),
    "multiprocessing forkserver": multiprocessing_child("forkserver"),
    "libc connect through ctypes": libc_connect,
}
# The kinds that need a program installed.
TOOLS = {"curl": "curl", "wget": "wget"}
