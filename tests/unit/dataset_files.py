"""FIXTURE: a native dataset folder (corpus.jsonl, questions.jsonl) written from rows, as a project holds one."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

Rows = Sequence[Mapping[str, Any]]


def write_dataset(folder: Path, documents: Rows, questions: Rows) -> Path:
    """`folder` holding `documents` ({"id", "title", "text"}) and `questions` ({"id", "text", "type",
    "relevant"}), one JSON object a line; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (("corpus.jsonl", documents), ("questions.jsonl", questions)):
        (folder / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return folder


def document_rows(documents: Sequence[tuple[str, str, str]]) -> list[dict[str, str]]:
    """(id, title, text) triples as corpus rows."""
    return [{"id": i, "title": t, "text": x} for i, t, x in documents]


def question_rows(questions: Sequence[tuple[str, str, str, Sequence[str]]]) -> list[dict[str, Any]]:
    """(id, text, type, relevant ids) as question rows."""
    return [{"id": i, "text": t, "type": y, "relevant": list(r)} for i, t, y, r in questions]
