"""Atomic writes: all or nothing, with a normal file's permissions."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import BinaryIO

import pytest

from retrieval import atomic
from retrieval.atomic import atomic_write, atomic_write_text


def test_replaces_the_file_with_umask_permissions(tmp_path: Path) -> None:
    target = tmp_path / "metrics.json"
    target.write_text("old")
    atomic_write_text(target, "new")
    assert target.read_text() == "new"
    # What open() would give: 0o644 under the usual umask 022, never mkstemp's 0o600.
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~atomic._UMASK
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def test_a_failing_writer_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "metrics.json"
    target.write_text("old")

    def fail(handle: BinaryIO) -> None:
        handle.write(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, fail)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]
