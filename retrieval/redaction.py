"""Credentials kept out of what the tool writes: committed cassettes are scanned for them
(`find_secrets`, refused when found), and messages and tracebacks bound for a terminal or a CI
log are cut (`redacted`, `failure_text`)."""

from __future__ import annotations

import os
import re
import traceback
from collections.abc import Mapping

__all__ = ["failure_text", "find_secrets", "redacted"]

# Each pattern with the lower-case strings one of which any match holds: a pattern runs only
# on a text holding one. Most patterns are tried at every position (\b, IGNORECASE): about
# 25 ms per scan of the demo's embedding cassettes otherwise, and the gate scans on every run.
_SECRET_PATTERNS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"AIza[0-9A-Za-z_-]{30,}"), ("aiza",)),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"), ("sk-",)),
    # Credential headers, in a cassette's headers or inside a JSON body (quotes escaped there).
    (
        re.compile(r'\\?"(x-goog-api-key|authorization|api-key|x-api-key|proxy-authorization)\\?"\s*:', re.IGNORECASE),
        ('"x-goog-api-key', '"authorization', '"api-key', '"x-api-key', '"proxy-authorization'),
    ),
    (re.compile(r"\bBearer\s+[A-Za-z0-9._~+/-]{8,}=*", re.IGNORECASE), ("bearer",)),
    (re.compile(r"(?:[?&]|%3F|%26)(?:api[_-]?)?key(?:=|%3D)[^&\"\s\\]{8,}", re.IGNORECASE), ("key=", "key%3d")),
)
# JSON may spell any character as \\uXXXX (once per level of nesting: a body is JSON in JSON).
# Only escapes of ASCII characters are decoded: every pattern above matches ASCII alone, and
# keys are ASCII, while a cassette of French text holds a million escaped accents (decoding
# them took 1 s of a 44 MiB cassette's 1.8 s scan, on every gate run).
_UNICODE_ESCAPE = re.compile(r"\\+u(00[0-7][0-9a-fA-F])")
_QUERY_STRING = re.compile(r"\?[^\s'\")]+")
# Environment variables whose value is a credential, by name (GEMINI_API_KEY, SEARCH_TOKEN, PGPASSWORD).
# Narrower than the recorder's header names: AUTH or SESSION would take GIT_AUTHOR_NAME or
# XDG_SESSION_ID, and replacing their values would garble ordinary messages.
_CREDENTIAL_VARIABLE = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL", re.IGNORECASE)


def redacted(text: str, environ: Mapping[str, str] | None = None) -> str:
    """`text` fit for a CI log: every URL query string cut to "?…" (an HTTP client's error names
    the URL it failed on, and a key may ride in its query), and the value of every environment
    variable named like a credential replaced by the variable's name."""
    environ = os.environ if environ is None else environ
    # Longest first: a key that holds another variable's value is replaced whole.
    values = sorted(
        ((value, name) for name, value in environ.items() if len(value) >= 8 and _CREDENTIAL_VARIABLE.search(name)),
        key=lambda pair: -len(pair[0]),
    )
    for value, name in values:
        text = text.replace(value, f"${name}")
    return _QUERY_STRING.sub("?…", text)


def find_secrets(text: str, keys: Mapping[str, str] | None = None) -> list[str]:
    """What in a cassette looks like a credential: key patterns, auth headers, and the values
    of `keys` (variable name -> value, e.g. the environment's API keys)."""
    decoded = _UNICODE_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)
    texts = (text,) if decoded == text else (text, decoded)
    found = list(
        dict.fromkeys(
            m.group(0)[:12] + "…"
            for t in texts
            for lowered in (t.lower(),)
            for pattern, words in _SECRET_PATTERNS
            if any(w in lowered for w in words)
            for m in pattern.finditer(t)
        )
    )
    found += [
        f"value of ${name}" for name, value in (keys or {}).items() if value and (value in text or value in decoded)
    ]
    return found


def failure_text(exc: BaseException) -> str:
    """An unexpected exception as the user needs it (type, message, the notes naming the method
    that raised it, then the traceback into their code), redacted for a CI log."""
    notes = "; ".join(getattr(exc, "__notes__", []))
    trace = "".join(traceback.format_exception(exc)).rstrip()
    return redacted(f"{type(exc).__name__}: {exc}{f' ({notes})' if notes else ''}\n{trace}")
