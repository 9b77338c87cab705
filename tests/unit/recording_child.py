"""FIXTURE: a real recording in a process of its own, stopped at a chosen point of its commit, for
the tests that kill it there (SIGKILL) or run a second recording beside it.

    python recording_child.py SPEC.json

SPEC: {"root", "url" (the fake embeddings server), "edited" (record the dataset with one document changed),
"pause" (None or a point of POINTS), "marker" (the file touched when the point is reached)}. At its
point the child touches the marker and waits: for the parent's SIGKILL, or for a line on stdin
("staged" only), after which it commits. The settings are those of `settings(root, url)`, so the
parent replays, updates and records the same project.
"""

from __future__ import annotations

import json
import os
import sys
import time
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
    sys.stdin.readline()
    staged[0].commit()


if __name__ == "__main__":
    main(sys.argv[1])
