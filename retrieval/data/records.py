"""The records of a dataset's files: UTF-8 text, JSON lines with their line numbers, checked
fields. Every error names the file and the line (DatasetError)."""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["DatasetError"]


class DatasetError(ValueError):
    """The dataset on disk cannot be evaluated; the message says where and how to fix it."""


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector off while a file's records are built: JSON values hold no cycle,
    so it would find nothing, yet its full passes (each one over every object alive) come ever
    more often as a large corpus's hundreds of thousands of dicts and documents are made
    (a fifth of the corpus load's CPU at 100,000 documents). Back as it was afterwards."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _read_text(path: Path) -> str:
    """A file's text: UTF-8, a byte order mark ignored; DatasetError naming the file otherwise."""
    try:
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise DatasetError(
            f"{path}:{line}: not UTF-8 ({exc.reason} at byte {exc.start}). Re-save the file as UTF-8."
        ) from exc


def _jsonl(path: Path, text: str | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSON-lines file (its `text` when already read), with their line numbers."""
    lines = (_read_text(path) if text is None else text).splitlines()
    for number, line in enumerate(lines, start=1):
        if line.strip():
            yield number, _record(line, path, number)


def _record(line: str, path: Path, number: int) -> dict[str, Any]:
    """The JSON object on line `number` (not blank) of `path`; DatasetError naming the line otherwise."""
    try:
        # The decoder's own step without json.loads's wrapping; a line with whitespace around the
        # object, or anything else, is decoded again by json.loads for its exact result or error.
        record, end = _RAW_DECODE(line)
        if end != len(line):
            record = json.loads(line)
    except json.JSONDecodeError:
        record = _loads_or_raise(line, path, number)
    if not isinstance(record, dict):
        raise DatasetError(
            f"{path}:{number}: expected a JSON object, got {type(record).__name__}. Write one JSON object per line."
        )
    return record


_RAW_DECODE = json.JSONDecoder().raw_decode
# The decoder's scanner itself, for the corpus's fast path (retrieval.data.dataset): raw_decode
# without its Python frame per line; no value at the start raises StopIteration, not JSONDecodeError.
_SCAN_ONCE: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _loads_or_raise(line: str, path: Path, number: int) -> Any:
    """json.loads of one line, its error as a DatasetError naming the file and the line."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise DatasetError(
            f"{path}:{number}: invalid JSON ({exc.msg} at column {exc.colno}). Each line must be one JSON object."
        ) from exc


def _text_field(record: dict[str, Any], key: str, where: str, *, required: bool = True) -> str:
    value = record.get(key)
    if value is None and not required:
        return ""
    if value is None:
        raise DatasetError(f'{where}: missing field "{key}". Add "{key}": "..." to this line.')
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise DatasetError(f'{where}: field "{key}" must be a string. Quote the value.')
    return _valid_unicode(str(value), where, key)


def _valid_unicode(value: str, where: str, key: str) -> str:
    # A JSON escape such as "\ud800" gives a lone surrogate: no encoder, HTTP body or hash takes it.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise DatasetError(
            f'{where}: field "{key}" holds a lone surrogate ({value[exc.start]!r} at character {exc.start}), '
            "which is not text. Fix the \\u escape."
        ) from exc
    return value


def _record_id_and_text(
    record: dict[str, Any], where: str, number: int, what: str, seen: dict[str, int]
) -> tuple[str, str]:
    """The id (BEIR's "_id" or "id") and text of the record on line `number`, checked: present,
    unique among `seen` (id -> line, updated), not empty."""
    key = "_id" if "_id" in record else "id"
    record_id = _text_field(record, key, where).strip()
    if not record_id:
        raise DatasetError(f'{where}: empty "{key}". Give every {what} a unique id.')
    if record_id in seen:
        raise DatasetError(
            f'{where}: duplicate {what} id "{record_id}" (first at line {seen[record_id]}). Ids must be unique.'
        )
    text = _text_field(record, "text", where)
    if not text.strip():
        raise DatasetError(f'{where}: {what} "{record_id}" has an empty "text". Fill it or remove the line.')
    seen[record_id] = number
    return record_id, text
