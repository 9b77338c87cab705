"""Which profile and method names are safe: they become folder and file names.

A profile names the folders `cassettes/<profile>/` and `baselines/rankings/<profile>.json`; a
method names its cassette `cassettes/<profile>/<method>.json` (or `.rankings.json`). A name with
`/`, `..` or a space would write outside those folders or confuse a shell, and a method named
after a shared cassette would overwrite it or mix its calls into it. Names are compared without
case: on macOS and Windows `Recording.json` is `recording.json`.
"""

from __future__ import annotations

import re

__all__ = ["RANKINGS", "RESERVED_CASSETTES", "SAFE_NAME", "name_problem"]

# Letters, digits, `_`, `-` and single dots inside, starting with a letter or a digit: no path
# separator, no `..`, no space, no trailing dot (Windows drops it, so two names would meet).
SAFE_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_-]|\.(?![.]|$)){0,63}")
# The cassettes every method of a profile shares (retrieval.recording.recorder.META_FILE and the
# embedding stages of retrieval.evaluation.evaluate); a test keeps this list equal to theirs.
RESERVED_CASSETTES = frozenset({"recording", "corpus-embeddings", "question-embeddings"})
# Method m's recorded rankings are `m.rankings.json` (retrieval.recording.ranking_cassettes.SUFFIX): a
# method named `m.rankings` would write its HTTP cassette there.
RANKINGS = ".rankings"
_PLAIN = "use letters, digits, '_', '-' and single dots inside (no '/', '..', space), at most 64 characters"


def name_problem(kind: str, name: object) -> str | None:
    """What is wrong with `name` as a `kind` name, with the fix; None when it is safe.

    "profile" and "method" names must be plain; a "method" or "channel" (the cassette a method
    declares: a plain file name, checked by retrieval.methods.base) may not be a shared
    cassette's name nor end like a rankings cassette."""
    if kind != "channel" and (not isinstance(name, str) or not SAFE_NAME.fullmatch(name)):
        return f"{kind} name {name!r} is not a plain name: {_PLAIN}, starting with a letter or digit."
    lower = str(name).lower()
    if kind != "profile" and (lower in RESERVED_CASSETTES or lower.endswith(RANKINGS)):
        return (
            f"{kind} name {name!r} would share a cassette file with every method "
            f"({', '.join(sorted(RESERVED_CASSETTES))}) or with a method's recorded rankings (NAME{RANKINGS}): "
            f"give the {kind} another name."
        )
    return None
