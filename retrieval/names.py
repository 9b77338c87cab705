"""Which profile and method names are safe: they become folder and file names.

A profile names the folders `cassettes/<profile>/` and `baselines/rankings/<profile>.json`; a
method names its cassette `cassettes/<profile>/<method>.json` (or `.rankings.json`). A name with
`/`, `..` or a space would write outside those folders or confuse a shell, and a method named
after a shared cassette would overwrite it or mix its calls into it. Names are compared without
case: on macOS and Windows `Recording.json` is `recording.json`.
"""

from __future__ import annotations

import re

__all__ = ["RESERVED_CASSETTES", "SAFE_NAME", "name_problem"]

# Letters, digits, `_` and `-`, starting with a letter or a digit: no path separator, no dot
# (so no `..` and no `x.rankings` colliding with method x's rankings cassette), no space.
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
# The cassettes every method of a profile shares (retrieval.recording.META_FILE and the
# embedding stages of retrieval.evaluate); a test keeps this list equal to theirs.
RESERVED_CASSETTES = frozenset({"recording", "corpus-embeddings", "question-embeddings"})


def name_problem(kind: str, name: object) -> str | None:
    """What is wrong with `name` as a `kind` name, with the fix; None when it is safe.

    "profile" and "method" names must be plain; a "method" or "channel" (the cassette a method
    declares: a plain file name, checked by retrieval.methods.base, which may hold a model's
    dots) may not be a shared cassette's name."""
    if kind != "channel" and (not isinstance(name, str) or not SAFE_NAME.fullmatch(name)):
        return (
            f"{kind} name {name!r} is not a plain name: use letters, digits, '_' and '-' only (no '/', '.', "
            "space), starting with a letter or digit, at most 64 characters."
        )
    if kind != "profile" and str(name).lower() in RESERVED_CASSETTES:
        return (
            f"{kind} name {name!r} is the name of a cassette every method shares "
            f"({', '.join(sorted(RESERVED_CASSETTES))}): give the {kind} another name."
        )
    return None
