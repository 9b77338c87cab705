"""Markdown helpers of the report: text from the data (question types, ids) made safe inside a
table cell, and long lists folded.

A report is Markdown that GitHub also renders as HTML (the CI job summary): a `|` or a
newline in a question type would break the table, and `<script>` would pass through raw.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

__all__ = ["SHOWN_ITEMS", "escape_cell", "folded"]

# List items shown before the rest folds: a 400-question run's job summary listed 1,600 lines
# of failures and remedies, and the figures and cost were at the bottom of it.
SHOWN_ITEMS = 20


def escape_cell(text: str) -> str:
    """`text` as one Markdown table cell: whitespace runs (newlines included) become one space,
    HTML is escaped (`<`, `>`, `&`), and `|` and `\\` are backslash-escaped."""
    flat = " ".join(text.split())
    escaped = html.escape(flat, quote=False)
    # The backslash first, so that the one escaping `|` is not itself escaped.
    return escaped.replace("\\", "\\\\").replace("|", "\\|")


def folded(items: Sequence[Sequence[str]], what: str, shown: int = SHOWN_ITEMS) -> list[str]:
    """The lines of `items` (each one list item's lines): the first `shown` as they are, the rest
    in a collapsed `<details>` block titled "N more `what`" (nothing is left out)."""
    lines = [line for item in items[:shown] for line in item]
    rest = items[shown:]
    if rest:
        lines += ["", f"<details><summary>{len(rest)} more {what}</summary>", ""]
        lines += [line for item in rest for line in item]
        lines += ["", "</details>"]
    return lines
