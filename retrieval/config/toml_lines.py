"""Where a key is written in a TOML file, for error messages: tomllib keeps no positions.

A configuration error names the file, the line and the fix. The line is found again in the
text: the table headers (`[tool.retrieval.profiles.local]`) and the assignments under them
(`dimension = 384`, dotted `embeddings.model = ...`, quoted `"acme-search" = ...`) are read
line by line. Multi-line strings and arrays are not parsed: a line inside one that looks like a
key could be taken for it, which costs at worst a wrong line number, never a wrong message.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

__all__ = ["key_line"]

_BARE = r"[A-Za-z0-9_-]+"
_PART = re.compile(rf'"([^"]*)"|\'([^\']*)\'|({_BARE})')
_KEY = rf'(?:"[^"]*"|\'[^\']*\'|{_BARE})'
_HEADER = re.compile(rf"^\s*\[\[?\s*({_KEY}(?:\s*\.\s*{_KEY})*)\s*\]\]?\s*(?:#.*)?$")
_ASSIGN = re.compile(rf"^\s*({_KEY}(?:\s*\.\s*{_KEY})*)\s*=")


def _keys(dotted: str) -> tuple[str, ...]:
    return tuple(next(g for g in m.groups() if g is not None) for m in _PART.finditer(dotted))


def key_line(path: Path, at: Sequence[str]) -> int | None:
    """The line (from 1) of the TOML file `path` that sets the key `at` (a path of keys from the
    document's root) or opens its table, else the line whose value (an inline table) holds it;
    None when it is not written there or the file cannot be read."""
    want = tuple(at)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    table: tuple[str, ...] = ()
    nearest: tuple[int, int] | None = None  # (keys matched, line) of an enclosing key
    for number, line in enumerate(lines, 1):
        header = _HEADER.match(line)
        if header:
            table = _keys(header[1])
            if table[: len(want)] == want:
                return number
            continue
        assign = _ASSIGN.match(line)
        if not assign:
            continue
        written = (*table, *_keys(assign[1]))
        if written[: len(want)] == want:
            return number
        # `profiles = { local = { ... } }`: the key is inside the value written here.
        if want[: len(written)] == written and (nearest is None or len(written) > nearest[0]):
            nearest = (len(written), number)
    return nearest[1] if nearest else None
