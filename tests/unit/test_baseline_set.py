"""The baseline and its ranking snapshots are one set: written under one lock, a full disk said
in one line naming the file, a failed commit leaves (or the next run of any kind puts back) the
old set, a killed run's leftovers are removed by the next run, and two concurrent updates of
different profiles lose no entry."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from trust_project import GOOD, failing, gate, make_project, write_ranks

from retrieval.gate.accept import accept
from retrieval.gate.schema import BaselineError, load_baseline
from retrieval.gate.update import update_baseline

BASELINE = Path("baselines/metrics.json")
SNAPSHOTS = Path("baselines/rankings/local.json")
# A process id no process has (Linux pids stop at 2**22).
DEAD = 2**22 + 7


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return make_project(tmp_path)


def _set(root: Path) -> dict[str, bytes]:
    return {str(p): (root / p).read_bytes() for p in (BASELINE, SNAPSHOTS)}


def _leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "baselines").rglob(".*") if p.suffix != ".lock")


def _worse(root: Path) -> None:
    write_ranks(root, {**GOOD, "q2": ["d5", "d1"]})


def test_a_full_disk_is_named_with_the_file_and_leaves_the_old_set(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _worse(project)
    result = gate(project)
    before = _set(project)
    real = os.fsync

    def full(fd: int) -> None:
        # FAULT: the disk fills while the snapshot file, the second of the set, is flushed.
        if os.readlink(f"/proc/self/fd/{fd}").split("/")[-1].startswith(".local.json."):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd)

    with monkeypatch.context() as patched, pytest.raises(BaselineError) as caught:
        patched.setattr(os, "fsync", full)
        accept(result, allow_regression="q2 is out of scope")
    assert str(caught.value) == (
        f"{project / SNAPSHOTS}: the disk is full (no space left on device): nothing was written, the previous "
        "baseline and snapshots are in place. Free some space and run again."
    )
    assert _set(project) == before and _leftovers(project) == []


def test_a_failed_commit_puts_the_old_set_back(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _worse(project)
    result = gate(project)
    before = _set(project)
    real = os.replace

    def second_fails(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        # FAULT: the snapshot file cannot be moved into place after the baseline was.
        if str(dst).endswith("rankings/local.json") and ".tmp" in str(src):
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(dst))
        real(src, dst)

    with monkeypatch.context() as patched, pytest.raises(BaselineError, match="cannot write"):
        patched.setattr(os, "replace", second_fails)
        accept(result, allow_regression="q2 is out of scope")
    assert _set(project) == before and _leftovers(project) == []


def test_a_failed_commit_and_rollback_are_restored_by_the_next_run_of_any_kind(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _worse(project)
    result = gate(project)
    before = _set(project)
    real = os.replace

    def stuck(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        # FAULT: the snapshots cannot be moved into place, nor the old baseline put back.
        if str(dst).endswith("rankings/local.json") or ".old-" in str(src):
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(dst))
        real(src, dst)

    with monkeypatch.context() as patched, pytest.raises(BaselineError) as caught:
        patched.setattr(os, "replace", stuck)
        accept(result, allow_regression="q2 is out of scope")
    assert "the next run of any kind restores it" in str(caught.value)
    assert (project / BASELINE).read_bytes() != before[str(BASELINE)]  # half written, for now
    # The next run, a plain gate, restores the old set first and compares with it.
    assert failing(gate(project)) == ["table recall@2", "table mrr", "table recall@2[exact]"]
    assert _set(project) == before and _leftovers(project) == []


def test_a_killed_runs_leftovers_are_removed_by_the_next_run(project: Path) -> None:
    before = _set(project)
    # A run killed mid-commit: its temporary files, a backup, and the journal naming them.
    tmp = project / "baselines" / f".metrics.json.{DEAD}-abc.tmp"
    tmp.write_text("{half")
    snap_tmp = project / "baselines" / "rankings" / f".local.json.{DEAD}-def.tmp"
    snap_tmp.write_text("[")
    backup = project / "baselines" / f".metrics.json.old-{DEAD}-abc"
    os.link(project / BASELINE, backup)
    moved_in = project / "baselines" / "moved-in"
    moved_in.write_text("{broken: the new file moved in before the kill")
    os.replace(moved_in, project / BASELINE)  # a new file, as a commit renames it over the old one
    journal = project / "baselines" / ".metrics.json.journal"
    journal.write_text(
        json.dumps({"pid": DEAD, "files": [[str(project / BASELINE), str(tmp), str(backup)]]}), encoding="utf-8"
    )
    stray = project / "baselines" / "rankings" / f".local.json.{DEAD}-zzz.tmp"  # not in any journal
    stray.write_text("x")
    assert failing(gate(project)) == []
    assert _set(project) == before and _leftovers(project) == []
    assert not snap_tmp.exists()


def test_the_report_command_removes_a_killed_runs_leftovers_too(project: Path) -> None:
    from retrieval.cli import main

    before = _set(project)
    tmp = project / "baselines" / f".metrics.json.{DEAD}-abc.tmp"
    tmp.write_text("{half")
    assert main(["--output", str(project / "report.md")]) == 0
    assert _set(project) == before and _leftovers(project) == []


CONCURRENT = """
import sys, time
import retrieval.gate.update as update

real = update.load_baseline

def slow(path):
    data = real(path)
    time.sleep(0.02)  # FAULT: widen the read-modify-write window
    return data

update.load_baseline = slow
entry = __import__("json").loads(sys.argv[3])
for i in range(int(sys.argv[2])):
    update.update_baseline(sys.argv[1], f"{sys.argv[4]}-{i}", entry)
"""


def test_two_concurrent_updates_of_different_profiles_lose_no_entry(project: Path) -> None:
    entry = load_baseline(project / BASELINE)["profiles"]["local"]
    path = project / "baselines" / "shared.json"
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", CONCURRENT, str(path), "8", json.dumps(entry), name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for name in ("a", "b")
    ]
    for run in runs:
        _, err = run.communicate(timeout=120)
        assert run.returncode == 0, err.decode()
    assert sorted(load_baseline(path)["profiles"]) == sorted(f"{n}-{i}" for n in "ab" for i in range(8))


def test_update_baseline_waits_for_the_lock(project: Path) -> None:
    from filelock import FileLock

    path = project / "baselines" / "other.json"
    entry = load_baseline(project / BASELINE)["profiles"]["local"]
    with FileLock(path.parent / ".other.json.lock"):
        held = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys, json, retrieval.gate.update as u; u.LOCK_SECONDS = 0.05; "
                "u.update_baseline(sys.argv[1], 'p', json.loads(sys.argv[2]))",
                str(path),
                json.dumps(entry),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert held.returncode == 1 and "another update holds" in held.stderr
    assert not path.exists()
    update_baseline(path, "p", entry)
    assert list(load_baseline(path)["profiles"]) == ["p"]
