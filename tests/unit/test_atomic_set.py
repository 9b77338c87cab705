"""Replacing a set of files (a profile's cassettes) all or nothing, whatever step fails."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from retrieval.files import atomic
from retrieval.files.atomic import STALE_SECONDS, AtomicSetError, clean_stale, recover_directory, replace_files

OLD = {"corpus-embeddings.json": b"old corpus", "question-embeddings.json": b"old questions", "recording.json": b"{}"}
NEW = {"corpus-embeddings.json": b"new corpus", "question-embeddings.json": b"new questions", "recording.json": b"[1]"}


def _folder(tmp_path: Path) -> Path:
    target = tmp_path / "cassettes" / "local"
    target.mkdir(parents=True)
    for name, data in OLD.items():
        (target / name).write_bytes(data)
    (target / "rerank-m.json").write_bytes(b"rerank kept")
    return target


def _contents(target: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(target.iterdir())}


def _failing(real: Callable[..., Any], fail_on: set[int]) -> Callable[..., Any]:
    """`real`, except that the calls numbered in `fail_on` (1-based) raise an I/O error."""
    calls = {"n": 0}

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] in fail_on:
            raise OSError(5, "Input/output error (injected)")
        return real(*args, **kwargs)

    return wrapper


def test_replaces_the_set_and_keeps_the_other_files(tmp_path: Path) -> None:
    target = _folder(tmp_path)
    replace_files(target, NEW)
    assert _contents(target) == {**NEW, "rerank-m.json": b"rerank kept"}
    assert [p.name for p in target.parent.iterdir()] == ["local"]


@pytest.mark.skipif(os.uname().sysname != "Linux", reason="renameat2 is Linux's")
def test_on_linux_the_two_folders_are_swapped_in_one_step(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "from-a").write_bytes(b"")
    assert atomic._exchange(tmp_path / "a", tmp_path / "b") is True
    assert [p.name for p in (tmp_path / "b").iterdir()] == ["from-a"] and not any((tmp_path / "a").iterdir())


def test_creates_a_missing_folder(tmp_path: Path) -> None:
    target = tmp_path / "cassettes" / "local"
    replace_files(target, NEW)
    assert _contents(target) == NEW
    assert [p.name for p in target.parent.iterdir()] == ["local"]


@pytest.mark.parametrize(
    ("where", "fail_on"),
    [
        ("shutil.copy2", {1}),  # carrying over a kept file
        ("os.fsync", {1}),  # writing the first new file
        ("os.fsync", {3}),  # writing the last new file
        ("os.chmod", {2}),  # permissions
    ],
)
def test_a_failure_while_building_the_set_leaves_the_old_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, fail_on: set[int]
) -> None:
    target = _folder(tmp_path)
    before = _contents(target)
    module, name = where.split(".")
    real = getattr(getattr(atomic, module), name)
    monkeypatch.setattr(getattr(atomic, module), name, _failing(real, fail_on))
    with pytest.raises(OSError, match="injected"):
        replace_files(target, NEW)
    monkeypatch.undo()
    assert _contents(target) == before
    assert [p.name for p in target.parent.iterdir()] == ["local"]


def test_a_failing_exchange_leaves_the_old_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = _folder(tmp_path)
    before = _contents(target)

    def exchange(a: Path, b: Path) -> bool:
        raise OSError(5, "Input/output error (injected)")

    monkeypatch.setattr(atomic, "_exchange", exchange)
    with pytest.raises(OSError, match="injected"):
        replace_files(target, NEW)
    assert _contents(target) == before
    assert [p.name for p in target.parent.iterdir()] == ["local"]


@pytest.mark.parametrize("fail_on", [{1}, {2}], ids=["moving the old set away", "moving the new set in"])
def test_without_exchange_a_failing_rename_is_rolled_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_on: set[int]
) -> None:
    target = _folder(tmp_path)
    before = _contents(target)
    monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)
    monkeypatch.setattr(atomic.os, "rename", _failing(os.rename, fail_on))
    with pytest.raises(OSError, match="injected"):
        replace_files(target, NEW)
    monkeypatch.undo()
    assert _contents(target) == before
    assert [p.name for p in target.parent.iterdir()] == ["local"]


def test_without_exchange_the_renames_give_the_new_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = _folder(tmp_path)
    monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)
    replace_files(target, NEW)
    assert _contents(target) == {**NEW, "rerank-m.json": b"rerank kept"}
    assert [p.name for p in target.parent.iterdir()] == ["local"]


def test_a_failed_rollback_keeps_the_old_set_aside_and_the_next_run_restores_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = _folder(tmp_path)
    before = _contents(target)
    monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)
    monkeypatch.setattr(atomic.os, "rename", _failing(os.rename, {2, 3}))
    with pytest.raises(AtomicSetError) as caught:
        replace_files(target, NEW)
    monkeypatch.undo()
    aside = next(target.parent.glob(".local.old-*"))
    assert str(caught.value) == (
        f"{target}: the new files could not be moved into place ([Errno 5] Input/output error (injected)) nor "
        f"the previous ones put back ([Errno 5] Input/output error (injected)); the previous set is intact in "
        f"{aside} and the next run restores it."
    )
    assert not target.exists()
    recover_directory(target)
    assert _contents(target) == before
    assert [p.name for p in target.parent.iterdir()] == ["local"]


def test_a_run_killed_between_the_two_renames_is_undone(tmp_path: Path) -> None:
    target = _folder(tmp_path)
    before = _contents(target)
    # What a SIGKILL after the first rename leaves: the set moved aside, a staging folder, nothing in place.
    os.rename(target, target.parent / ".local.old-999999999-abcd1234")
    (target.parent / ".local.staging-999999999-abcd1234").mkdir()
    removed = recover_directory(target)
    assert _contents(target) == before
    assert [p.name for p in removed] == [".local.staging-999999999-abcd1234"]
    assert [p.name for p in target.parent.iterdir()] == ["local"]


def test_a_live_process_between_its_two_renames_is_left_to_finish(tmp_path: Path) -> None:
    # Another run (a replay) recovering at that moment must not put the old set back under it:
    # the live process is about to rename its new set into place, or its old one back.
    target = _folder(tmp_path)
    before = _contents(target)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        aside = target.parent / f".local.old-{live.pid}-abcd1234"
        os.rename(target, aside)
        assert recover_directory(target) == []
        assert not target.exists() and _contents(aside) == before
    finally:
        live.kill()
        live.wait()
    recover_directory(target)  # its process gone: the old set is put back
    assert _contents(target) == before
    assert [p.name for p in target.parent.iterdir()] == ["local"]


def test_stale_leftovers_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    cache = tmp_path / "embeddings"
    cache.mkdir()
    (cache / "m.npz").write_bytes(b"cache")
    dead = cache / ".m.npz.999999999-abcd1234.tmp"  # its writer was killed (no such process)
    old_format = cache / ".m.npz.k2j4h5g6.tmp"  # no process id in the name, two days old
    live = cache / f".m.npz.{os.getpid()}-abcd1234.tmp"  # a concurrent save in progress
    old_live = cache / f".m.npz.{os.getpid()}-zzzz9999.tmp"  # same pid, but two days old: pid reused
    for path in (dead, old_format, live, old_live):
        path.write_bytes(b"x" * 10)
    two_days_ago = time.time() - 2 * STALE_SECONDS
    for path in (old_format, old_live):
        os.utime(path, (two_days_ago, two_days_ago))
    removed = clean_stale(cache, "m.npz")
    assert sorted(p.name for p in removed) == sorted(p.name for p in (dead, old_format, old_live))
    assert sorted(p.name for p in cache.iterdir()) == sorted([live.name, "m.npz"])
