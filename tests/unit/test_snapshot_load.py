"""A snapshot file edited by hand and saved in another encoding is one line naming it, not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.gate.schema import BaselineError
from retrieval.gate.snapshots import load_snapshots, render_snapshots


def test_a_latin1_snapshot_file_is_one_line_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "local.json"
    text = render_snapshots("local", {"bm25": {"q1": ["café", "d2"]}})
    path.write_bytes(text.encode("latin-1"))
    start = text.encode("latin-1").index(b"caf\xe9") + 3
    line = text[:start].count("\n") + 1
    with pytest.raises(BaselineError) as caught:
        load_snapshots(path)
    assert str(caught.value) == (
        f"{path}:{line}: not UTF-8 (invalid continuation byte at byte {start}). Restore it with "
        f"`git checkout {path}`, or rewrite it with `pytest --update-baseline`."
    )
    assert line > 1
    path.write_text(text, encoding="utf-8")
    assert load_snapshots(path) == {"bm25": {"q1": ["café", "d2"]}}
