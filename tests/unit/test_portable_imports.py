"""The evaluator imports where fcntl does not exist (Windows): its locks are filelock's."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from retrieval.providers.server_watchdog import LOCK_FILE, locked

# Importing a module set to None in sys.modules raises ImportError, as on Windows.
# filelock itself then falls back to a soft lock and says so (on Windows it locks with msvcrt).
CODE = """
import sys, warnings
sys.modules["fcntl"] = None
warnings.filterwarnings("ignore", "only soft file lock is available")
import retrieval.recording.cache, retrieval.evaluation.evaluate, retrieval.cli, retrieval.gate.plugin
import retrieval.providers.local_server, retrieval.providers.server_watchdog
print("imported")
"""


def test_the_evaluator_imports_without_fcntl() -> None:
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, "imported\n", "")


def _exclusive(lock: object, folder: Path) -> list[str]:
    """Two threads take the lock in turn: their enter/leave events never interleave."""
    events: list[str] = []

    def hold(name: str) -> None:
        with lock(folder):  # type: ignore[operator]
            events.append(f"{name} in")
            time.sleep(0.05)
            events.append(f"{name} out")

    threads = [threading.Thread(target=hold, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return events


def test_the_server_state_lock_excludes_and_stays_in_its_private_folder(tmp_path: Path) -> None:
    folder = tmp_path / "servers"
    events = _exclusive(locked, folder)
    assert events in (["a in", "a out", "b in", "b out"], ["b in", "b out", "a in", "a out"])
    assert [p.name for p in folder.iterdir()] == [LOCK_FILE] and list(tmp_path.iterdir()) == [folder]
