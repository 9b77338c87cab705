"""A block of a page generated from the code, between two markers, and the command that keeps it.

The scripts that generate a page's block (readme_table, config_reference, architecture_tree,
suite_figures) share this: the block replaced in every page that shows it, `--check` exiting 1
when one is stale (what a test or CI runs), and a page without its markers refused in one line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class BlockError(RuntimeError):
    """The block cannot be rendered or placed; the message says what to fix."""


def replace_block(text: str, start: str, end: str, block: str, page: Path) -> str:
    """`text` with the region from `start` to `end` (markers included) replaced by `block`."""
    first, last = text.find(start), text.find(end)
    if not 0 <= first < last:
        raise BlockError(f"{_shown(page)} must contain {start} then {end} where the generated block goes.")
    return text[:first] + block + text[last + len(end) :]


def _shown(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)


def write_or_check(
    pages: Sequence[Path], start: str, end: str, render: Callable[[], str], check: bool, command: str
) -> int:
    """Put the rendered block in every page (0), or with `check` say which are stale (1); 2 when
    the block cannot be rendered or a page lost its markers."""
    try:
        block = render()
        texts = {page: page.read_text(encoding="utf-8") for page in pages}
        updated = {page: replace_block(text, start, end, block, page) for page, text in texts.items()}
    except (BlockError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stale = [page for page in pages if updated[page] != texts[page]]
    names = ", ".join(_shown(page) for page in stale)
    if check:
        if stale:
            print(f"{names}: the generated block is stale: run `{command}` and commit it.", file=sys.stderr)
            return 1
        return 0
    for page in stale:
        page.write_text(updated[page], encoding="utf-8")
    print(f"updated {names}" if stale else "up to date")
    return 0


def block_main(
    argv: Sequence[str] | None,
    doc: str,
    pages: Sequence[Path],
    start: str,
    end: str,
    render: Callable[[], str],
    command: str,
) -> int:
    """The command line of a script that renders one generated block: write it, or `--check`."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a page's block is stale")
    args = parser.parse_args(argv)
    return write_or_check(pages, start, end, render, args.check, command)
