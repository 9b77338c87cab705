"""Text from the data in the Markdown report, in a table cell or inline: no broken row or list
item, no raw HTML."""

from __future__ import annotations

import pytest

from retrieval.text.markdown import escape_cell, escape_text


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


@pytest.mark.parametrize(
    ("text", "inline"),
    [
        ("Que veut dire ERR-4040 ?", "Que veut dire ERR-4040 ?"),
        ("Comment fermer </details> ?", "Comment fermer &lt;/details> ?"),
        ("<!-- tout le reste", "&lt;!-- tout le reste"),
        ("deux\nlignes", "deux lignes"),
        ("R&D, Q&A", "R&D, Q&A"),  # read as such in a terminal: no entity follows
        ("&lt; et &#60;", "&amp;lt; et &amp;#60;"),  # would render as "<"
        ("a|b *c*", "a|b *c*"),  # Markdown outside a table: shown as the question wrote it
    ],
)
def test_escape_text(text: str, inline: str) -> None:
    assert escape_text(text) == inline
