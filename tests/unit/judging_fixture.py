"""FIXTURE: a copy of the unit tests' demo project (tests/unit/fixtures/demo) in a temporary folder,
where the judging tests write judgments.jsonl; its pool from the committed recording, replayed.

A judging server started as a real process (`JudgeProcess`): `python -m retrieval judge` on the
copy, on a free port of 127.0.0.1, stopped (or killed) by the test that started it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from demo_fixture import DEMO_PROJECT

from retrieval.config import Settings, load_settings
from retrieval.data.dataset import Dataset, load_dataset
from retrieval.evaluation.evaluate import evaluate
from retrieval.judging.pool import Candidate, depth_pool

__all__ = ["JudgeProcess", "copy_demo", "demo_pool", "get", "post", "project_in"]

_URL = re.compile(r"(http://127\.0\.0\.1:\d+/)")


def project_in(tmp_path: Path, monkeypatch: Any) -> Path:
    """copy_demo in `tmp_path`, made the working directory, with no profile or model variable set."""
    root = copy_demo(tmp_path / "project")
    monkeypatch.chdir(root)
    for name in ("RETRIEVAL_PROFILE", "EMBEDDING_MODEL", "MODEL"):
        monkeypatch.delenv(name, raising=False)
    return root


def copy_demo(root: Path) -> Path:
    """The fixture demo project copied to `root` (its data, recording and baseline); returns `root`."""
    root.mkdir(parents=True, exist_ok=True)
    for part in ("retrieval.toml", "data", "cassettes", "vectors", "baselines"):
        source = DEMO_PROJECT / part
        if source.is_dir():
            shutil.copytree(source, root / part)
        elif source.exists():
            shutil.copy(source, root / part)
    return root


def demo_pool(root: Path, depth: int = 5, **overrides: Any) -> tuple[Settings, Dataset, list[Candidate]]:
    """The copied project's settings, dataset and depth-`depth` pool of its methods (replayed)."""
    settings = load_settings(root, overrides, environ={})
    dataset = load_dataset(settings.dataset, accept_llm=settings.accept_llm_judgments)
    run = evaluate(dataset, settings)
    return settings, dataset, depth_pool(run, depth)


def post(url: str, body: Any, headers: dict[str, str] | None = None, timeout: float = 30) -> tuple[int, Any]:
    """POST `body` as the page does (its JSON and its header); (status, decoded answer)."""
    sent = {"Content-Type": "application/json", "X-Judging-Page": "1", **(headers or {})}
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=sent, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def get(url: str, headers: dict[str, str] | None = None, timeout: float = 30) -> tuple[int, Any]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            data = answer.read()
            kind = answer.headers.get("Content-Type", "")
            return answer.status, json.loads(data) if "json" in kind else data
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


class JudgeProcess:
    """`python -m retrieval judge ARGS` in `root`, as a process of its own; `url` once it serves."""

    def __init__(self, root: Path, *args: str, timeout: float = 120) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("RETRIEVAL_PROFILE", "EMBEDDING_MODEL", "MODEL")}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "retrieval", "judge", "--port", "0", *args],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.url = ""
        self.lines: list[str] = []
        deadline = time.monotonic() + timeout
        assert self.process.stderr is not None
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line:
                break
            self.lines.append(line)
            found = _URL.search(line)
            if found:
                self.url = found.group(1)
                return
        self.stop()
        raise AssertionError(f"the judging server did not start: {''.join(self.lines)}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        """kill -9: no cleanup of any kind runs."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.process.stderr:
            self.process.stderr.close()
