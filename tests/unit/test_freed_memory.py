"""keep_freed_memory: the command's process sets glibc's malloc to reuse what it frees, and
does nothing where the C library is not glibc."""

from __future__ import annotations

import ctypes
import os

import pytest

from retrieval.data import freed_memory


class _Libc:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, parameter: int, value: int) -> int:
        self.calls.append((parameter, value))
        return 1


def test_glibc_gets_the_three_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    libc = _Libc()
    monkeypatch.setattr(os, "confstr", lambda name: "glibc 2.36", raising=False)
    monkeypatch.setattr(ctypes, "CDLL", lambda name: libc)
    freed_memory.keep_freed_memory()
    # M_MMAP_THRESHOLD 32 MiB (glibc's largest), M_TRIM_THRESHOLD 1 GiB, M_TOP_PAD 64 MiB.
    assert libc.calls == [(-3, 32 << 20), (-1, 1 << 30), (-2, 64 << 20)]


@pytest.mark.parametrize("confstr", [None, ValueError("unrecognized configuration name")])
def test_another_libc_is_left_alone(confstr: object, monkeypatch: pytest.MonkeyPatch) -> None:
    def answer(name: str) -> object:
        if isinstance(confstr, Exception):
            raise confstr
        return confstr

    libc = _Libc()
    monkeypatch.setattr(os, "confstr", answer, raising=False)
    monkeypatch.setattr(ctypes, "CDLL", lambda name: libc)
    freed_memory.keep_freed_memory()
    assert libc.calls == []


def test_on_this_machine_the_call_succeeds() -> None:
    freed_memory.keep_freed_memory()  # glibc here: the real mallopt; elsewhere a no-op
    if os.confstr("CS_GNU_LIBC_VERSION"):
        assert ctypes.CDLL(None).mallopt(-3, 32 << 20) == 1  # glibc accepts the value the module sets


def test_numpy_huge_pages_are_turned_off_by_the_command_setting() -> None:
    before = freed_memory.numpy_huge_pages(True)
    try:
        freed_memory.keep_freed_memory()
        # Off: the switch gives back the setting keep_freed_memory left.
        assert freed_memory.numpy_huge_pages(True) is False
        assert freed_memory.numpy_huge_pages(False) is True
    finally:
        freed_memory.numpy_huge_pages(before)
