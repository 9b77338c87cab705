"""The watchdog of a server the tool started (see `local_server`), and the state-file helpers
both share. Standard library and filelock only: it is run by path (`python server_watchdog.py
STATE LOG CMD...`), so it starts without importing the package.

The watchdog starts the server as its child (the server dies with it: PR_SET_PDEATHSIG on
Linux), then stops it as soon as no process listed as a user in the state file is alive.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from filelock import FileLock

WATCH_INTERVAL = 0.1  # how often the watchdog checks that a run still uses the server (a small file read)
STOP_TIMEOUT = 10.0


def alive(pid: int | None) -> bool:
    """True when process `pid` runs (a zombie, exited but not yet reaped, does not)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):
        if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
            return False
    return True


LOCK_FILE = ".lock"


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    """An exclusive lock on the state folder: its LOCK_FILE, through filelock (POSIX and Windows).
    Inside the folder, private to the user: a lock file beside it in the shared temporary folder
    could be planted by another user as a link to a file of ours."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    with FileLock(directory / LOCK_FILE):
        yield


def read_state(path: Path) -> dict[str, Any]:
    """A state file's content; {} when it is missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_state(path: Path, state: dict[str, Any]) -> None:
    """Replace a state file atomically (a reader never sees half of it)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(state, handle, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _die_with_parent() -> None:
    # Runs in the server's process before exec: SIGTERM it when the watchdog dies, however it dies.
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def watch(path: Path, log: Path, command: list[str]) -> int:
    """Start the server, then stop it when no run listed in the state file is alive."""
    with log.open("wb") as err:
        server = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, preexec_fn=_die_with_parent
        )

    def stop(*_: object) -> None:
        server.terminate()
        try:
            server.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    with locked(path.parent):
        state = read_state(path)
        if state.get("watchdog") == os.getpid():
            write_state(path, {**state, "server": server.pid})
    # Bounded by the runs using the server: the loop ends when the last one is gone.
    while server.poll() is None:
        state = read_state(path)
        if state.get("watchdog") != os.getpid() or not any(alive(u) for u in state.get("users", [])):
            stop()
        time.sleep(WATCH_INTERVAL)
    return server.returncode or 1


if __name__ == "__main__":
    sys.exit(watch(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]))
