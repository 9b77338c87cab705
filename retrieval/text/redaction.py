"""Credentials kept out of what the tool writes: committed cassettes are scanned for them
(`find_secrets`, refused when found), and messages, warnings and tracebacks bound for a terminal
or a CI log are cut (`redacted`, `failure_text`).

A credential is found by its shape, from the one table both read (retrieval.text.secret_shapes:
GitHub, GitLab, AWS, Slack, Stripe, Azure, Hugging Face, Anthropic, OpenAI and Google keys, JWTs,
PEM private keys, Bearer and Basic tokens, a password in a URL, `password=`, `passwd:` and
`secret=` in free text), and by its name: any header, query parameter, cookie, form field or JSON
key whose name says key, token, secret, auth, password, cookie or session (`credential_name`),
after percent-decoding and case folding. The recorder drops such headers and query parameters
from what it keeps; what it cannot drop (a body must match byte for byte on replay) the scan
refuses.
"""

from __future__ import annotations

import os
import re
import traceback
from collections.abc import Iterable, Iterator, Mapping
from urllib.parse import unquote_plus

from retrieval.text.secret_shapes import Hints, Shape, cut, matches, search

__all__ = [
    "MIN_KEY_LENGTH",
    "credential_name",
    "declare_key_variables",
    "failure_text",
    "find_secrets",
    "redacted",
]

# JSON may spell any character as \\uXXXX (once per level of nesting: a body is JSON in JSON).
# Only escapes of ASCII characters are decoded: every shape matches ASCII alone, and keys are
# ASCII, while a cassette of French text holds a million escaped accents. Found by the literal
# "u00" (the regex engine's fast search; a pattern led by the backslashes took 0.7 s of a 44 MiB
# scan), their backslashes checked after.
_ASCII_ESCAPE = re.compile(r"u00([0-7][0-9a-fA-F])")


def _unescaped(text: str) -> str:
    """`text` with every JSON escape of an ASCII character decoded, at any level of nesting."""
    out: list[str] = []
    last = 0
    for m in _ASCII_ESCAPE.finditer(text):
        start = m.start()
        while start > last and text[start - 1] == "\\":
            start -= 1
        if start < m.start():
            out += [text[last:start], chr(int(m.group(1), 16))]
            last = m.end()
    return "".join([*out, text[last:]]) if out else text


_QUERY_STRING = re.compile(r"\?[^\s'\")]+")
# Environment variables whose value is a credential, by name (GEMINI_API_KEY, SEARCH_TOKEN, PGPASSWORD).
# Narrower than `credential_name`: AUTH or SESSION would take GIT_AUTHOR_NAME or XDG_SESSION_ID,
# and replacing their values would garble ordinary messages. Declared variables are added.
_CREDENTIAL_VARIABLE = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL", re.IGNORECASE)
# A declared key's value shorter than this is no credential to look for in a cassette: a
# placeholder (GEMINI_API_KEY=test) is found in any text, and would fail a clean keyless gate.
MIN_KEY_LENGTH = 12
# Shorter values are not replaced in messages either: "abc" would garble ordinary words.
_MIN_REDACTED_LENGTH = 8

# --- names ---------------------------------------------------------------------------------

# A name says credential when one of its words (split on anything not a letter or a digit)
# ends with one of these (apikey, access_token, x-session-token, jsessionid, oauth)...
_CREDENTIAL_ENDINGS = (
    "key",
    "token",
    "secret",
    "auth",
    "password",
    "passwd",
    "pwd",
    "cookie",
    "session",
    "sessionid",
    "sessid",
    "credential",
    "credentials",
)
# ... or begins with one of these (Authorization, authentication_header).
_CREDENTIAL_BEGINNINGS = ("authoriz", "authent")
# Names that say a position, not a secret: a page token or a sort key dropped from a replay
# match would make the requests for page 1 and page 2 answer alike.
_NOT_CREDENTIAL = re.compile(r"(page|next|continuation|sync|resume|sort|partition|primary|max|num)[_-]?(token|key)$")
_WORD = re.compile(r"[a-z0-9]+")


def credential_name(name: str) -> bool:
    """True when a header, parameter, cookie, form field or JSON key named `name` holds a
    credential by its name (X-Algolia-API-Key, access_token, k%65y, Set-Cookie, sessionid);
    percent-encoding is decoded and case folded first."""
    for _ in range(3):  # a name encoded twice (a URL inside a URL) is decoded twice
        decoded = unquote_plus(name)
        if decoded == name:
            break
        name = decoded
    folded = name.casefold().strip()
    if _NOT_CREDENTIAL.search(folded):
        return False
    return any(
        word.endswith(_CREDENTIAL_ENDINGS) or word.startswith(_CREDENTIAL_BEGINNINGS) for word in _WORD.findall(folded)
    )


# A JSON key (or a Python mapping's, in a message) with a string value, or a list of them as
# vcrpy stores headers; quotes may be escaped (a body is JSON in JSON).
_KEYED_VALUE = re.compile(r"""(\\*["'])([^"'\\\n]{1,100})\1\s*:\s*(\[\s*)?(\\*["'])([^"'\\\n]*)""")
# A query parameter, form field or cookie: name=value after ?, &, ;, a space, a bracket or a
# comma, or at the start of a string.
_PARAMETER = re.compile(r"""(?:(?<=[?&;"'\s(,])|^|%3F|%26)([A-Za-z0-9_.+%\[\]-]{1,100})(?:=|%3D)([^&;"'\s\\#]+)""")
# A value that is a credential, not prose: no space but after a scheme (Bearer ...), or a cookie string.
_TOKEN_VALUE = re.compile(r"(?:(?:bearer|basic|token|digest)\s+)?\S{8,}|.*=.*", re.IGNORECASE)
# Any text naming one of these may hold a named credential (the check that skips the regexes).
_NAME_HINTS = ("key", "token", "secret", "auth", "pass", "pwd", "cookie", "sess", "credential", "%")


# Around a name's hint: the rest of the name before it (64 characters: "ocp-apim-subscription-" is 22),
# the rest of the name and enough of the value after it.
_NAME_BEFORE, _NAME_AFTER = 64, 128


def _named(text: str, hints: Hints) -> Iterator[tuple[int, int, str]]:
    """(start, end, what) of each value a credential name holds in `text`."""
    regions = hints.regions(_NAME_HINTS, _NAME_BEFORE, _NAME_AFTER)
    ends: list[int] = []
    for m in search(_KEYED_VALUE, text, regions):
        name, listed, value = m.group(2), m.group(3), m.group(5)
        # A header (a list, as vcrpy keeps them) holds a credential with any value; a JSON
        # field with one shaped like one (a "key_points" of prose is no secret).
        if value and credential_name(name) and (listed or _TOKEN_VALUE.fullmatch(value)):
            ends.append(m.end())
            yield m.start(), m.end(), f'"{name}" with a value'
    for m in search(_PARAMETER, text, regions):
        # A cookie's own name=value inside a credential header's value is the same credential.
        if credential_name(m.group(1)) and not any(m.start() < end <= m.end() for end in ends):
            yield m.start(), m.end(), f"parameter {unquote_plus(m.group(1))!r} with a value"


def _overlaps(start: int, end: int, spans: list[tuple[int, int]]) -> bool:
    return any(s < end and start < e for s, e in spans)


def _what(shape: Shape, match: re.Match[str]) -> str:
    return shape.what.format(name=match.group("name")) if "{name}" in shape.what else shape.what


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def find_secrets(text: str, keys: Mapping[str, str] | None = None) -> list[str]:
    """What in a cassette looks like a credential, each said without any part of it ('a Bearer
    token at line 12', '"X-Api-Key" with a value at line 3', 'value of $GEMINI_API_KEY'): key
    shapes, auth headers, any header, parameter or field named like a credential with a value,
    and the values of `keys` (variable name -> value, e.g. the environment's API keys) of
    MIN_KEY_LENGTH characters or more."""
    decoded = _unescaped(text)
    texts = (text,) if decoded == text else (text, decoded)
    held = {
        name: value
        for name, value in (keys or {}).items()
        if len(value.strip()) >= MIN_KEY_LENGTH and (value in text or value in decoded)
    }
    found: dict[str, None] = {}
    for t in texts:
        hints = Hints(t, _NAME_HINTS)
        shapes = list(matches(t, hints))
        found.update((f"{_what(shape, m)} at line {_line(t, m.start())}", None) for shape, m in shapes)
        # A credential already found by its shape or as a key's value is said once; a free-text
        # form (password=…) only where neither a shape nor a name found it.
        spans = [m.span() for _, m in shapes]
        named = [
            (start, end, what)
            for start, end, what in _named(t, hints)
            if not _overlaps(start, end, spans) and not any(value in t[start:end] for value in held.values())
        ]
        found.update((f"{what} at line {_line(t, start)}", None) for start, _, what in named)
        spans += [(start, end) for start, end, _ in named]
        found.update(
            (f"{_what(shape, m)} at line {_line(t, m.start())}", None)
            for shape, m in matches(t, hints, free_text=True)
            if not _overlaps(*m.span(), spans)
        )
    return [*found, *(f"value of ${name}" for name in held)]


# --- messages ------------------------------------------------------------------------------

# Variables that methods and providers declared as their keys (their names need not say so:
# api_key_env = "SEARCH_BEARER"). Process-wide: a warning is printed far from the declaration.
_DECLARED: set[str] = set()


def declare_key_variables(names: Iterable[str]) -> None:
    """Make `redacted` replace the values of these environment variables too, whatever their names."""
    _DECLARED.update(name for name in names if name)


# A header as a server echoes a request ("X-Api-Key: value"), in a message only.
# A header line's value that may be a secret, not a word of a sentence ("an API key: set
# GEMINI_API_KEY"): with a digit, or long.
_SECRET_LIKE = re.compile(r"(?=\S*\d)\S{4,}|\S{12,}")
# The value is looked ahead at, not consumed: "echo: X-Api-Key: v" holds two names.
_HEADER_LINE = re.compile(r"(?<![\w-])([A-Za-z][\w-]{0,60}):[ \t]*(?=([^\s,;\"'}\]]+))")


def _cut_named(text: str) -> str:
    """`text` with the value of every credential-named field, header or parameter cut to "…"."""
    cuts = sorted(
        {(m.start(5), m.end(5)) for m in _KEYED_VALUE.finditer(text) if m.group(5) and credential_name(m.group(2))}
        | {(m.start(2), m.end(2)) for m in _PARAMETER.finditer(text) if credential_name(m.group(1))}
        | {
            (m.start(2), m.end(2))
            for m in _HEADER_LINE.finditer(text)
            if credential_name(m.group(1)) and _SECRET_LIKE.fullmatch(m.group(2))
        }
    )
    out, last = [], 0
    for start, end in cuts:
        if start >= last:
            out += [text[last:start], "…"]
            last = end
        elif end > last:  # overlapping cuts: the longer one
            last = end
    return "".join([*out, text[last:]])


def redacted(text: str, environ: Mapping[str, str] | None = None) -> str:
    """`text` fit for a CI log: the value of every environment variable named like a credential
    or declared as a key (`declare_key_variables`) replaced by the variable's name; Bearer and
    Basic tokens, key shapes and the values of credential-named fields, headers and parameters
    (an error body that echoes the request) cut to "…"; every URL query string cut to "?…" (an
    HTTP client's error names the URL it failed on, and a key may ride in its query)."""
    environ = os.environ if environ is None else environ
    # Longest first: a key that holds another variable's value is replaced whole.
    values = sorted(
        (
            (value, name)
            for name, value in environ.items()
            if len(value) >= _MIN_REDACTED_LENGTH and (name in _DECLARED or _CREDENTIAL_VARIABLE.search(name))
        ),
        key=lambda pair: -len(pair[0]),
    )
    for value, name in values:
        text = text.replace(value, f"${name}")
    text = cut(text)
    if any(hint in text.lower() for hint in _NAME_HINTS):
        text = _cut_named(text)
    return _QUERY_STRING.sub("?…", text)


def failure_text(exc: BaseException) -> str:
    """An unexpected exception as the user needs it (type, message, the notes naming the method
    that raised it, then the traceback into their code), redacted for a CI log."""
    notes = "; ".join(getattr(exc, "__notes__", []))
    trace = "".join(traceback.format_exception(exc)).rstrip()
    return redacted(f"{type(exc).__name__}: {exc}{f' ({notes})' if notes else ''}\n{trace}")
