"""Question types and ids inside a Markdown table cell: no broken row, no raw HTML."""

from __future__ import annotations

import pytest

from retrieval.markdown import escape_cell


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("paraphrase", "paraphrase"),
        ("a|b", "a\\|b"),
        ("deux\nlignes\r\n ici", "deux lignes ici"),
        ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
        ("R&D", "R&amp;D"),
        ("fin\\", "fin\\\\"),  # a trailing backslash would otherwise escape the next cell's `|`
        ("a\\|b", "a\\\\\\|b"),
    ],
)
def test_escape_cell(text: str, cell: str) -> None:
    assert escape_cell(text) == cell
