"""A judgment written through the page survives a kill -9 of the server, even one that lands while
the server is writing: the judgments file is the old one or the new one, never a part, a judgment
the page was told is saved is in it, and the next server removes what the killed one left."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

import pytest
from judging_fixture import JudgeProcess, copy_demo, get, post

from retrieval.data.judgment_file import JUDGMENTS_FILE, Judgment, read_judgments, render_judgments

# A server process killed with SIGKILL mid-write (10-17 s): CI's slow job. Its logic is tested
# fast: the atomic write in test_atomic.py, leftovers in test_atomic_set.py, and a killed writer's
# temporary file removed by the page's next grade in test_judging_page.py.
pytestmark = pytest.mark.slow

# Judgments of another dataset's questions, kept in the file (not used here): enough lines that a
# write takes long enough to be caught in the middle (about 7 MB, then fsync).
OLD_LINES = 60_000


def _old_judgments() -> list[Judgment]:
    return [
        Judgment(f"zz-{i:06}", "HEL-4010", i % 4, "import:old.csv", "2024-01-01T00:00:00Z") for i in range(OLD_LINES)
    ]


def _temporaries(folder: Path) -> list[Path]:
    return sorted(folder.glob(f".{JUDGMENTS_FILE}.*.tmp"))


def test_a_judgment_survives_a_kill_9_of_the_server_mid_write(tmp_path: Path) -> None:
    root = copy_demo(tmp_path / "project")
    folder = root / "data" / "demo"
    path = folder / JUDGMENTS_FILE
    old = _old_judgments()
    path.write_text(render_judgments(old), encoding="utf-8")
    server = JudgeProcess(root, "--judge", "ana", "--methods", "bm25")
    try:
        _, state = get(server.url + "api/state", timeout=120)
        first, second = state["pairs"][0], state["pairs"][1]
        status, saved = post(server.url + "api/judge", {**_pair(first), "grade": 3}, timeout=120)
        assert status == 200
        before = path.read_bytes()
        assert Judgment(first["question"], first["document"], 3, "human:ana", saved["judgment"]["date"]) in (
            read_judgments(path)
        )
        # The next grade: the server is killed the moment its temporary file exists, before the rename.
        sent = threading.Thread(target=lambda: _post_quietly(server.url, {**_pair(second), "grade": 1}), daemon=True)
        sent.start()
        deadline = time.monotonic() + 60
        while not _temporaries(folder) and time.monotonic() < deadline:
            time.sleep(0.0005)
        assert _temporaries(folder), "the server never started writing"
        server.kill()
        sent.join(timeout=30)
    finally:
        server.stop()
    # Old or new, whole: the saved judgment and every old line are there.
    after = path.read_bytes()
    found = read_judgments(path)
    assert after == before or {(j.question, j.document, j.grade) for j in found} >= {
        (second["question"], second["document"], 1)
    }
    assert (first["question"], first["document"], 3, "human:ana") in {
        (j.question, j.document, j.grade, j.source) for j in found
    }
    assert len([j for j in found if j.source == "import:old.csv"]) == OLD_LINES
    left = _temporaries(folder)
    assert left, "kill -9 leaves the half-written temporary file: the next server must remove it"
    # The next server removes the killed one's leftover, and the grade it lost is written again.
    again = JudgeProcess(root, "--judge", "ana", "--methods", "bm25")
    try:
        assert _temporaries(folder) == []
        assert post(again.url + "api/judge", {**_pair(second), "grade": 1}, timeout=120)[0] == 200
    finally:
        again.stop()
    final = {(j.question, j.document, j.grade) for j in read_judgments(path) if j.source == "human:ana"}
    assert final == {(first["question"], first["document"], 3), (second["question"], second["document"], 1)}


def _pair(entry: dict) -> dict:
    return {"question": entry["question"], "document": entry["document"]}


def _post_quietly(url: str, body: dict) -> None:
    with contextlib.suppress(OSError):  # the server was killed under it: the page would say "not saved"
        post(url + "api/judge", body, timeout=120)
