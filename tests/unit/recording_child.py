"""FIXTURE: a real recording in a process of its own, stopped at a chosen point of its commit, for
the tests that kill it there (SIGKILL) or run a second recording beside it.

    python recording_child.py SPEC.json

SPEC: {"root", "url" (the fake embeddings server), "edited" (record the dataset with one document changed),
"pause" (None or a point of POINTS), "marker" (the file touched when the point is reached), "go" (a
FIFO; stdin if absent)}. At its point the child touches the marker and waits: for the parent's
SIGKILL, or for a line from "go" ("staged" only), after which it commits. The settings are those of
`settings(root, url)`, so the parent replays, updates and records the same project.

    python recording_child.py --serve

The tests' children come from one such process of the test process's (`Recordings`): it imports
the package and the recording's libraries once, then forks a child per SPEC path read on its stdin
(each a process of its own, as the one above: its own lock, its own SIGKILL), its stdout and stderr
to SPEC's "stderr" file. A child started the first way spent nearly all of its 0.7 s of CPU importing.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from dataset_files import document_rows, question_rows, write_dataset
from demo_fixture import demo_dataset
from fake_embeddings import make_profile

from retrieval.config import Settings
from retrieval.data.dataset import Dataset, load_dataset

# Where a commit can be killed: the new set staged, not yet swapped; the two folders exchanged,
# the old one not yet removed; without RENAME_EXCHANGE, the set renamed away, the new one not yet in
# place; the new one in place, the old not yet removed; the swap done, the recording not yet told.
POINTS = ("before swap", "after exchange", "renamed away", "renamed in", "after swap")


def settings(root: Path, url: str, edited: bool = False) -> Settings:
    """The project both the child and the parent run: the fake server's profile, paths in `root`;
    `edited`: its dataset with the first document changed (a recording that differs)."""
    return Settings(
        dataset=str(_written(root, edited)),
        profile=make_profile(url),
        methods=("bm25", "vector", "hybrid"),
        cassettes=str(root / "cassettes"),
        cache=str(root / "cache"),
        baseline=str(root / "baselines" / "metrics.json"),
        snapshots=str(root / "baselines" / "rankings"),
        root=str(root),
    )


def dataset(root: Path, edited: bool = False) -> Dataset:
    """The project's dataset: a few questions of the demo (`edited`: its first document changed)."""
    return load_dataset(_written(root, edited))


def _written(root: Path, edited: bool) -> Path:
    folder = root / "data" / ("edited" if edited else "small")
    if folder.is_dir():
        return folder
    demo = demo_dataset()
    documents = list(demo.documents)
    if edited:
        documents[0] = replace(documents[0], text=documents[0].text + " Révisé.")
    corpus = document_rows([(d.id, d.title, d.text) for d in documents])
    questions = question_rows([(q.id, q.text, q.type, q.relevant) for q in demo.questions[::5]])
    return write_dataset(folder, corpus, questions)


def _stop(marker: Path) -> None:
    marker.write_text(str(os.getpid()))
    while True:  # until SIGKILL
        time.sleep(60)


def _pause_at(point: str, marker: Path) -> None:
    from retrieval.files import atomic

    if point == "before swap" or point == "after swap":
        real_swap = atomic._swap

        def swap(target: Path, new: Path) -> None:
            if point == "before swap":
                _stop(marker)
            real_swap(target, new)
            _stop(marker)

        atomic._swap = swap
        return
    if point == "after exchange":
        real_exchange = atomic._exchange

        def exchange(a: Path, b: Path) -> bool:
            done = real_exchange(a, b)
            _stop(marker)
            return done

        atomic._exchange = exchange
        return
    # The fallback of a file system without RENAME_EXCHANGE: two renames.
    atomic._exchange = lambda a, b: False
    real_rename = os.rename

    def rename(source: Any, target: Any) -> None:
        real_rename(source, target)
        away = ".old-" in str(target)
        if (point == "renamed away" and away) or (point == "renamed in" and ".staging-" in str(source)):
            _stop(marker)

    atomic.os.rename = rename  # type: ignore[assignment]


def main(spec_path: str) -> None:
    from retrieval.evaluation.evaluate import StagedRecording, evaluate

    spec = json.loads(Path(spec_path).read_text())
    root, marker = Path(spec["root"]), Path(spec["marker"])
    pause = spec.get("pause")
    edited = spec.get("edited", False)
    project = settings(root, spec["url"], edited)
    if pause in POINTS:
        _pause_at(pause, marker)
    if pause != "staged":
        evaluate(dataset(root, edited), project, mode="record")
        return
    staged: list[StagedRecording] = []
    evaluate(dataset(root, edited), project, mode="record", on_staged=staged.append)
    marker.write_text(str(os.getpid()))  # holding the recording lock, its segments written
    if "go" in spec:
        with open(spec["go"]) as go:
            go.readline()
    else:
        sys.stdin.readline()
    staged[0].commit()


def _preload() -> None:
    """What a recording imports, on the way or lazily (its stages, vcrpy, aiohttp's patch, httpx's
    transport, vcrpy's stubs, the recording lock), and the TLS context its client is built on: each
    child would otherwise load them again (0.05 s of CPU a child)."""
    import aiohttp  # noqa: F401
    import filelock  # noqa: F401
    import httpcore  # noqa: F401
    import vcr

    import retrieval.evaluation.evaluate
    import retrieval.methods.bm25
    import retrieval.methods.hybrid
    import retrieval.methods.vector
    import retrieval.providers.local_server
    import retrieval.recording.drift
    import retrieval.recording.recorder  # noqa: F401
    from retrieval.providers.http import tls_context

    tls_context()
    with vcr.VCR(record_mode="none").use_cassette("preloaded-never-saved"):
        pass  # vcrpy imports its stubs for the installed clients when it first patches them


def _forked(spec_path: str) -> None:
    """In the forked child: SPEC's files for its output, then the recording; never returns."""
    code = 1
    try:
        out = os.open(json.loads(Path(spec_path).read_text())["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, 1)  # the server's stdout answers the test process: never the child's
        os.dup2(out, 2)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        main(spec_path)
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve() -> None:
    """One child at a time: a SPEC path read, its pid answered, then its exit code once it ended."""
    _preload()
    while spec_path := sys.stdin.readline().strip():
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _forked(spec_path)
        print(pid, flush=True)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), flush=True)


class Recordings:
    """The test process's end of `serve`: started on the first child, ended with the process."""

    def __init__(self) -> None:
        self._server: subprocess.Popen[bytes] | None = None
        self._read = b""
        self.live: int | None = None  # the child started and not yet ended

    def start(self, spec_path: Path) -> int:
        """A child started on SPEC (the one before, if any is left, killed first): its pid."""
        self.stop_live()
        if self._server is None or self._server.poll() is not None:
            # One BLAS thread, as in a pytest-xdist worker: the server forks single-threaded.
            env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
            command = [sys.executable, __file__, "--serve"]
            self._server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0, env=env)
            self._read = b""
        assert self._server.stdin is not None
        self._server.stdin.write(f"{spec_path}\n".encode())
        pid = self._line(120)
        assert pid is not None, "the recording server did not fork within 120 s"
        self.live = int(pid)
        return self.live

    def ended(self, timeout: float) -> int | None:
        """The live child's exit code once it ended, waiting up to `timeout` (None: still running)."""
        line = self._line(timeout)
        if line is None:
            return None
        self.live = None
        return int(line)

    def stop_live(self) -> None:
        if self.live is not None:
            os.kill(self.live, signal.SIGKILL)
            self.ended(30)

    def close(self) -> None:
        self.stop_live()
        if self._server is not None:
            self._server.communicate(timeout=30)  # its stdin closed: it ends

    def _line(self, timeout: float) -> str | None:
        assert self._server is not None and self._server.stdout is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self._read:
            left = deadline - time.monotonic()
            if not select.select([self._server.stdout], [], [], max(left, 0))[0]:
                if left <= 0:
                    return None
                continue
            chunk = os.read(self._server.stdout.fileno(), 4096)
            if not chunk:
                raise AssertionError(f"the recording server ended ({self._server.wait()})")
            self._read += chunk
        line, self._read = self._read.split(b"\n", 1)
        return line.decode()


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve()
    else:
        main(sys.argv[1])
