"""The base branch's files read in one `git cat-file --batch` (reference._shown) give, byte for
byte, what `git show REF:path` gives one file at a time (reference._show): a file, a missing
one, a folder, an empty file, a file named with spaces, the same path twice, a path `git show`
resolves from the top (`./`), and a path holding a newline (left to `git show`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from retrieval.gate import reference


def _repository(root: Path) -> str:
    (root / "data").mkdir(parents=True)
    (root / "data" / "questions.jsonl").write_bytes(b'{"id": "q1", "text": "caf\xc3\xa9"}\n')
    (root / "data" / "no newline.json").write_bytes(b'{"a": 1}')  # no final newline: every byte counts
    (root / "empty.toml").write_bytes(b"")
    (root / "binary").write_bytes(bytes(range(256)) * 3)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=root, check=True)
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, check=True, capture_output=True, text=True)
    return done.stdout.strip()


PATHS = [
    "data/questions.jsonl",
    "data/no newline.json",
    "missing.json",
    "data",  # a folder: git show lists it
    "empty.toml",
    "binary",
    "data/questions.jsonl",
    "./empty.toml",
    "data/../binary",  # git show refuses it: missing
    "line\nbreak.json",
]


def test_one_batch_gives_what_git_show_gives_file_by_file(tmp_path: Path) -> None:
    commit = _repository(tmp_path)
    shown = reference._shown(commit, PATHS, tmp_path)
    assert list(shown) == list(dict.fromkeys(PATHS))
    assert shown == {path: reference._show(commit, path, tmp_path) for path in PATHS}
    assert shown["data/no newline.json"] == b'{"a": 1}' and shown["missing.json"] is None
    assert shown["binary"] == bytes(range(256)) * 3 and shown["empty.toml"] == b""


def test_the_files_come_from_one_git_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commit = _repository(tmp_path)
    calls: list[list[str]] = []
    run = reference._git

    def counted(args: list[str], folder: Path, given: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        calls.append(args)
        return run(args, folder, given)

    monkeypatch.setattr(reference, "_git", counted)
    files = ["data/questions.jsonl", "missing.json", "binary", "empty.toml"]
    assert reference._shown(commit, files, tmp_path)["binary"] == bytes(range(256)) * 3
    assert calls == [["cat-file", "--batch"]]
