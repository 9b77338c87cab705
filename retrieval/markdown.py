"""Text from the data (question types, ids) made safe inside a Markdown table cell.

A report is Markdown that GitHub also renders as HTML (the CI job summary): a `|` or a
newline in a question type would break the table, and `<script>` would pass through raw.
"""

from __future__ import annotations

import html

__all__ = ["escape_cell"]


def escape_cell(text: str) -> str:
    """`text` as one Markdown table cell: whitespace runs (newlines included) become one space,
    HTML is escaped (`<`, `>`, `&`), and `|` and `\\` are backslash-escaped."""
    flat = " ".join(text.split())
    escaped = html.escape(flat, quote=False)
    # The backslash first, so that the one escaping `|` is not itself escaped.
    return escaped.replace("\\", "\\\\").replace("|", "\\|")
