"""Atomic writes: all or nothing, with a normal file's permissions."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import BinaryIO

import pytest

from retrieval.cli import main
from retrieval.files import atomic
from retrieval.files.atomic import atomic_write, atomic_write_text

FIXTURES = Path(__file__).parent / "fixtures"


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


def test_a_named_pipe_is_written_through_and_stays_a_pipe(tmp_path: Path) -> None:
    # As `--output /dev/null` or `--log /dev/stdout`: renaming over such a path replaced it with
    # a regular file (as root, /dev/null for the whole machine).
    pipe = tmp_path / "report.fifo"
    os.mkfifo(pipe)
    read: list[bytes] = []
    reader = threading.Thread(target=lambda: read.append(pipe.read_bytes()), daemon=True)
    reader.start()
    atomic_write_text(pipe, "report")
    reader.join(timeout=5)
    assert read == [b"report"]
    assert stat.S_ISFIFO(pipe.stat().st_mode) and [p.name for p in tmp_path.iterdir()] == ["report.fifo"]


def test_through_a_symbolic_link_the_file_is_replaced_and_the_link_kept(tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    real = tmp_path / "reports" / "summary-2026.md"
    real.write_text("old")
    link = tmp_path / "summary.md"
    link.symlink_to(real)
    atomic_write_text(link, "new")
    assert link.is_symlink() and link.resolve() == real and real.read_text() == "new"
    assert [p.name for p in (tmp_path / "reports").iterdir()] == ["summary-2026.md"]


def test_the_cli_writes_its_report_through_a_pipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `--output /dev/null` takes this path; a pipe stands in for the device, which a regression
    # would replace on the machine running the tests.
    monkeypatch.chdir(tmp_path)
    pipe = tmp_path / "report.fifo"
    os.mkfifo(pipe)
    read: list[bytes] = []
    reader = threading.Thread(target=lambda: read.append(pipe.read_bytes()), daemon=True)
    reader.start()
    assert main(["--dataset", str(FIXTURES / "fixture_native"), "--methods", "bm25", "--output", str(pipe)]) == 0
    reader.join(timeout=5)
    assert read and read[0].startswith(b"## Retrieval evaluation: fixture_native")
    assert stat.S_ISFIFO(pipe.stat().st_mode)
