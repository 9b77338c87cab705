"""Markdown helpers of the report: text from the data (questions, ids, question types) made safe
inline or inside a table cell, and long lists folded.

A report is Markdown that GitHub also renders as HTML (the CI job summary): a `|` or a
newline in a question type would break the table, `<script>` would pass through raw, and a
question about HTML (`</details>`, `<!--`) would end a folded list early or hide the rest.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

__all__ = ["JOB_SUMMARY_BYTES", "SHOWN_ITEMS", "escape_cell", "escape_text", "fit", "folded"]

# List items shown before the rest folds: a 400-question run's job summary listed 1,600 lines
# of failures and remedies, and the figures and cost were at the bottom of it.
SHOWN_ITEMS = 20
# GitHub refuses a step's job summary over 1 MiB (and shows none of it); the rest of the 1 MiB is
# room for the workflow's own lines.
JOB_SUMMARY_BYTES = 1_000_000
_FOLDED = re.compile(r"\n<details><summary>(\d+ more [^<]*)</summary>\n.*?\n</details>", re.S)
# What starts HTML in Markdown text: `<` (a tag, a comment), and `&` before an entity's name.
_HTML_START = re.compile(r"<|&(?=#?\w+;)")


def escape_text(text: str) -> str:
    """`text` from the data as inline Markdown that renders as itself: whitespace runs (newlines
    included, which would end a list item) become one space, `<` becomes `&lt;` and `&` before an
    entity's name `&amp;`. Other `&` stay as they are, so "R&D" still reads as such in a terminal."""
    flat = " ".join(text.split())
    return _HTML_START.sub(lambda m: "&lt;" if m[0] == "<" else "&amp;", flat)


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


def fit(markdown: str, limit: int = JOB_SUMMARY_BYTES) -> str:
    """`markdown` in at most `limit` UTF-8 bytes, for a CI job summary: as it is when it fits;
    else with each folded list (`folded`) replaced by one line counting what it held; else also
    cut after the last whole line that fits, saying so. The full report says the rest."""
    if len(markdown.encode()) <= limit:
        return markdown
    text = _FOLDED.sub(
        lambda m: f"\n_{m[1]}: left out of this summary, over its size limit; the full report has them._", markdown
    )
    if len(text.encode()) <= limit:
        return text
    note = "\n\n_The summary stops here, at its size limit: the full report has the rest._\n"
    kept = text.encode()[: max(limit - len(note.encode()), 0)].decode(errors="ignore")
    return kept[: kept.rfind("\n") + 1].rstrip("\n") + note
