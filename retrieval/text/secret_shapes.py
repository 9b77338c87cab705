"""The one table of credentials known by their shape, which the cassette scan (`find_secrets`) and
the redaction of messages (`redacted`) both read (retrieval.text.redaction).

Each shape says what it is (the scan says that, never the match: its message reaches CI logs),
its pattern, and what a message keeps of a match (the group `kept`, "ghp_" or "password=", then
"…"). Where it is searched in a large text: a shape runs only around the places where one of its
hints occurs (`Hints.regions`): a token's literal prefixes as written, found together in a few
passes (`Hints.exact_positions`), or lower-case words in the lower-cased text, each found once
for every shape and name that asks. The gate scans every committed cassette on every run
(scripts/secret_scan_speed.py measures it).

The near-misses a shape must leave (a page token, a sort key, a commit sha, a publishable key,
`hf_hub_download`) are in tests/unit/test_secret_shapes.py, one per shape.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = ["SHAPES", "Hints", "Shape", "cut", "matches", "search"]


@dataclass(frozen=True)
class Shape:
    """A credential's shape. `hints`: strings one of which every match holds, a match lying within
    `before` characters before one and `after` after it; found as written with `exact` (a token's
    literal prefixes, "ghp_"), else lower-case in the lower-cased text ("bearer"). `free_text`: a
    form of free text (password=…), which the scan says only where no credential name was found
    (the name says more), and only when its group `value` looks like a secret (a digit, or 12
    characters), not a word: "password: must be long" in a corpus is no credential, while a
    message cuts any value."""

    what: str
    pattern: re.Pattern[str]
    hints: tuple[str, ...]
    before: int = 0
    after: int = 0
    free_text: bool = False
    exact: bool = False


_LOOKS_SECRET = re.compile(r"(?=.*\d).{4,}|.{12,}", re.DOTALL)


def _token_start(width: int, word: str = "A-Za-z0-9") -> str:
    """After a literal prefix of `width` characters: that prefix starts a token, not the middle of
    one. A JSON escape before it (\\n, \\t, \\r: a line of a body) counts as a separator."""
    dots = "." * width
    return f"(?:(?<![{word}]{dots})|(?<=\\\\[nrt]{dots}))"


def _shape(what: str, pattern: str, *hints: str, before: int = 0, after: int = 0, flags: int = 0) -> Shape:
    return Shape(what, re.compile(pattern, flags), hints, before, after)


def _exact(what: str, pattern: str, prefixes: tuple[str, ...], after: int, before: int = 0, flags: int = 0) -> Shape:
    """A token known by its literal prefixes (case as written): `after` is how long it may run past one."""
    return Shape(what, re.compile(pattern, flags), prefixes, before, after, exact=True)


# Order matters where two shapes can match the same text: the first one's is said (Anthropic's
# sk-ant- before OpenAI's sk-). A token's start is checked by a lookbehind after its literal, so
# that the pattern still starts with the literal.
SHAPES: tuple[Shape, ...] = (
    _exact(
        "a private key (-----BEGIN … PRIVATE KEY-----)",
        r"(?P<kept>-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)(?:(?!-----END ).){0,16384}"
        r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)?",
        ("-----BEGIN ",),
        17000,
        flags=re.DOTALL,
    ),
    _exact(
        "a GitHub token (ghp_…)",
        r"(?P<kept>gh[pousr]_)" + _token_start(4) + r"[A-Za-z0-9]{36}(?![A-Za-z0-9])",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        40,
    ),
    _exact(
        "a GitHub fine-grained token (github_pat_…)",
        r"(?P<kept>github_pat_)[A-Za-z0-9]{22}_[A-Za-z0-9]{59}(?![A-Za-z0-9])",
        ("github_pat_",),
        96,
    ),
    _exact(
        "a GitLab token (glpat-…)",
        r"(?P<kept>gl(?:pat|dt|rt|ptt|cbt|imt|ft|soat|oas|agent)-)[A-Za-z0-9_-]{20,}",
        tuple(f"gl{kind}-" for kind in ("pat", "dt", "rt", "ptt", "cbt", "imt", "ft", "soat", "oas", "agent")),
        128,
    ),
    _exact(
        "an AWS access key id (AKIA…)",
        r"(?P<kept>A(?:KIA|SIA|BIA|CCA|3T[A-Z0-9]))" + _token_start(4) + r"[A-Z0-9]{16}(?![A-Za-z0-9])",
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
        20,
    ),
    _shape(
        "an AWS secret access key",
        r"(?P<kept>(?:aws_?secret_?(?:access_?)?key|secret_?access_?key)\\*[\"']?\s*[:=]\s*\\*[\"']?)"
        r"(?-i:[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        "secret",
        before=8,
        after=96,
        flags=re.IGNORECASE,
    ),
    _exact(
        "a Slack token (xox…)",
        r"(?P<kept>x(?:ox[abeoprs]|app)-)[0-9]+-[A-Za-z0-9-]{8,}",
        (*(f"xox{kind}-" for kind in "abeoprs"), "xapp-"),
        256,
    ),
    _exact(
        "a Slack webhook (hooks.slack.com/…)",
        r"(?P<kept>https://hooks\.slack\.com/)[A-Za-z]+/[A-Za-z0-9/_-]{20,}",
        ("https://hooks.slack.com/",),
        128,
    ),
    _exact(
        "a Stripe secret key (sk_live_…)",
        r"(?P<kept>[rs]k_(?:live|test)_)[A-Za-z0-9]{16,}",
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_"),
        128,
    ),
    _exact("a Stripe webhook secret (whsec_…)", r"(?P<kept>whsec_)[A-Za-z0-9+/]{24,}", ("whsec_",), 128),
    _exact(
        "a JSON Web Token (eyJ…)",
        r"(?P<kept>eyJ)" + _token_start(3, "A-Za-z0-9_-") + r"[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
        ("eyJ",),
        4096,
    ),
    _exact(
        "a Hugging Face token (hf_…)",
        r"(?P<kept>hf_)" + _token_start(3, "A-Za-z0-9_") + r"[A-Za-z0-9]{34,}(?![A-Za-z0-9])",
        ("hf_",),
        64,
    ),
    _exact(
        "a Hugging Face organization token (api_org_…)",
        r"(?P<kept>api_org_)[A-Za-z0-9]{34,}(?![A-Za-z0-9])",
        ("api_org_",),
        64,
    ),
    _exact(
        "an Anthropic key (sk-ant-…)", r"(?P<kept>sk-ant-)" + _token_start(7) + r"[A-Za-z0-9_-]{32,}", ("sk-ant-",), 256
    ),
    # A key body holds a digit or a capital (48 random characters do): "sk-learn-compatible-estimators" does not.
    _exact(
        "an OpenAI-style key (sk-…)",
        r"(?P<kept>sk-" + _token_start(3) + r"(?!ant-)(?:proj-|svcacct-|admin-)?)"
        r"(?=[A-Za-z0-9_-]*[0-9A-Z])[A-Za-z0-9_-]{20,}",
        ("sk-",),
        256,
    ),
    _exact("a Google API key (AIza…)", r"(?P<kept>AIza)[0-9A-Za-z_-]{30,}", ("AIza",), 64),
    _exact("a Google OAuth client secret (GOCSPX-…)", r"(?P<kept>GOCSPX-)[A-Za-z0-9_-]{24,}", ("GOCSPX-",), 64),
    _exact(
        "a Google OAuth access token (ya29.…)",
        r"(?P<kept>ya29\.)" + _token_start(5) + r"[0-9A-Za-z_-]{20,}",
        ("ya29.",),
        256,
    ),
    _exact(
        "an Azure account key (AccountKey=…)",
        r"(?P<kept>(?:AccountKey|SharedAccessKey)=)[A-Za-z0-9+/]{20,}={0,2}",
        ("AccountKey=", "SharedAccessKey="),
        128,
    ),
    _exact("an Azure SAS signature (sig=…)", r"(?P<kept>sig=)(?<=[?&]sig=)[A-Za-z0-9%+/]{20,}={0,2}", ("sig=",), 256),
    _exact(
        "an Azure client secret (…Q~…)",
        _token_start(0, "A-Za-z0-9_~.-") + r"[A-Za-z0-9_~.-]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])",
        ("Q~",),
        40,
        before=4,
    ),
    # A token holds a digit or a sign: "Bearer tokens" and "Basic usage" are words.
    _shape(
        "a Bearer token",
        _token_start(0) + r"(?P<kept>Bearer\s+)(?=[A-Za-z0-9._~+/-]*[0-9._~+/-])[A-Za-z0-9._~+/-]{6,}=*",
        "bearer",
        after=128,
        flags=re.IGNORECASE,
    ),
    _shape(
        "a Basic authorization",
        _token_start(0) + r"(?P<kept>Basic\s+)(?=[A-Za-z0-9+/]*[0-9+/])[A-Za-z0-9+/]{8,}=*",
        "basic",
        after=128,
        flags=re.IGNORECASE,
    ),
    # Credential headers, in a cassette's headers or inside a JSON body (quotes escaped there):
    # found with any value; a message's are cut by name (retrieval.text.redaction).
    _shape(
        'a "{name}" header',
        r'(?P<kept>\\*"(?P<name>x-goog-api-key|authorization|api-key|x-api-key|proxy-authorization)\\*"\s*:)',
        "key",
        "auth",
        before=24,
        after=32,
        flags=re.IGNORECASE,
    ),
    _shape(
        "a key in a query string",
        r"(?P<kept>(?:[?&]|%3F|%26)(?:api[_-]?)?key(?:=|%3D))[^&\"\s\\]{8,}",
        "key",
        before=10,
        after=64,
        flags=re.IGNORECASE,
    ),
    # A password in a URL (https://user:password@host/).
    _shape(
        "a password in a URL",
        r"(?P<kept>\b[a-z][a-z0-9+.-]*://[^/\s:@\"'\\]+:)[^/\s@\"'\\]+(?=@)",
        "@",
        before=512,
        after=1,
        flags=re.IGNORECASE,
    ),
)
# Free text: password=…, passwd: …, secret=… (a message, a log line, a config echoed in an error).
SHAPES += (
    Shape(
        "a password or secret in the text",
        re.compile(
            _token_start(0) + r"(?P<kept>(?:password|passwd|passphrase|pwd|secret)\s*[:=]\s*)"
            r"(?P<value>[^\s\"'`,;&)}\]<>]+)",
            re.IGNORECASE,
        ),
        ("pass", "pwd", "secret"),
        before=0,
        after=160,
        free_text=True,
    ),
)


# A hint is found through one character it holds, the rarest in a cassette: for a token's prefix
# a separator base64 does not use (else its first character), for a lower-case word a letter rare
# in prose. One regex per such character finds every hint holding it in one pass, each occurrence
# checked by lookarounds inside the regex engine: one `str.find` pass per hint took 1.4 s of a
# 44 MiB scan's 2.6 s, and the table has 50 hints.
_SEPARATORS = "-_.=~"
_RARE_FIRST = "%@~_-=.kwzyxjqhfbgvpmcdluonrtiase"

Group = tuple[re.Pattern[str], tuple[tuple[str, int], ...]]


def _anchor(hint: str, exact: bool) -> int:
    if exact:
        return next((i for i, c in enumerate(hint) if c in _SEPARATORS), 0)
    rank = {c: i for i, c in enumerate(_RARE_FIRST)}
    return min(range(len(hint)), key=lambda i: rank.get(hint[i], len(rank)))


@functools.cache
def _groups(hints: tuple[str, ...], exact: bool) -> tuple[Group, ...]:
    """(regex, its hints with the anchor's offset in each) for each anchor character of `hints`."""
    by_anchor: dict[str, list[tuple[str, int]]] = {}
    for hint in hints:
        at = _anchor(hint, exact)
        by_anchor.setdefault(hint[at], []).append((hint, at))
    return tuple(
        (
            re.compile(
                re.escape(char)
                + "(?:"
                + "|".join(f"(?<={re.escape(h[: at + 1])})(?={re.escape(h[at + 1 :])})" for h, at in group)
                + ")"
            ),
            tuple(group),
        )
        for char, group in by_anchor.items()
    )


_EXACT_HINTS = tuple(dict.fromkeys(h for shape in SHAPES if shape.exact for h in shape.hints))
_WORD_HINTS = tuple(dict.fromkeys(h for shape in SHAPES if not shape.exact for h in shape.hints))


class Hints:
    """Where each hint occurs in a text: an exact hint as written, a word (lower-case) in the
    lower-cased text. `words` adds the words a caller will ask for (a name's hints): found with
    the table's, in the same passes. Each group of hints is searched once, when first asked."""

    def __init__(self, text: str, words: Iterable[str] = ()) -> None:
        self.text = text
        self.words = tuple(dict.fromkeys((*_WORD_HINTS, *words)))
        self._lowered: str | None = None
        self._found: dict[tuple[str, bool], list[int]] = {}

    def _search(self, hint: str, exact: bool) -> None:
        if exact:
            text = self.text
        else:
            if self._lowered is None:
                self._lowered = self.text.lower()
            text = self._lowered
        for pattern, group in _groups(_EXACT_HINTS if exact else self.words, exact):
            if any(h == hint for h, _ in group):
                for h, _ in group:
                    self._found[(h, exact)] = []
                for m in pattern.finditer(text):
                    for h, at in group:  # the lookarounds said one of them is here: which ones
                        if text.startswith(h, m.start() - at):
                            self._found[(h, exact)].append(m.start() - at)
                return
        raise KeyError(f"{hint!r} is no hint of the table nor of `words`")

    def positions(self, hint: str, exact: bool = False) -> list[int]:
        """Where `hint` occurs (as written with `exact`, else in the lower-cased text), in order."""
        if (hint, exact) not in self._found:
            self._search(hint, exact)
        return self._found[(hint, exact)]

    def regions(self, hints: Iterable[str], before: int, after: int, exact: bool = False) -> list[tuple[int, int]]:
        """The stretches around each occurrence of a hint (merged where they meet): the only
        places a pattern holding one can match."""
        spans = sorted(
            (max(0, at - before), at + len(hint) + after) for hint in hints for at in self.positions(hint, exact)
        )
        merged: list[tuple[int, int]] = []
        for start, end in spans:
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        return merged


def search(pattern: re.Pattern[str], text: str, regions: list[tuple[int, int]]) -> Iterator[re.Match[str]]:
    """`pattern`'s matches within the regions (pos/endpos, not slices: no copy, and lookbehinds
    still see what precedes a region)."""
    for start, end in regions:
        yield from pattern.finditer(text, start, end)


def _found(shape: Shape, match: re.Match[str]) -> bool:
    return not shape.free_text or bool(_LOOKS_SECRET.fullmatch(match.group("value")))


def matches(text: str, hints: Hints, free_text: bool = False) -> Iterator[tuple[Shape, re.Match[str]]]:
    """The shapes' matches in `text` (the scan's), the first shape's where two overlap: the
    free-text forms' alone with `free_text`, the others' without."""
    taken: list[tuple[int, int]] = []
    for shape in (s for s in SHAPES if s.free_text is free_text):
        for match in search(shape.pattern, text, hints.regions(shape.hints, shape.before, shape.after, shape.exact)):
            if _found(shape, match) and not any(s < match.end() and match.start() < e for s, e in taken):
                taken.append(match.span())
                yield shape, match


def _cut_match(match: re.Match[str]) -> str:
    kept = match.group("kept") if "kept" in match.re.groupindex else None
    kept = kept or ""
    return match.group(0) if len(kept) == len(match.group(0)) else kept + "…"


def cut(text: str) -> str:
    """`text` with every shape's match cut to what it keeps, then "…" (messages: short texts)."""
    lowered = text.lower()
    for shape in SHAPES:
        if any(hint in (text if shape.exact else lowered) for hint in shape.hints):
            text = shape.pattern.sub(_cut_match, text)
    return text
