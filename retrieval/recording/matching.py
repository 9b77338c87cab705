"""How a request finds its recorded answer in a vcrpy cassette: the matchers, and an index that
keeps the look-up from scanning the whole cassette.

vcrpy looks a request up by running every matcher against every recorded request, twice per
request (`can_play_response_for`, then `play_response`), and does the same while recording. A
corpus embedded in N batches thus cost N² body comparisons: 12,000 documents (375 batches of
32) took 20 s to replay, 13.6 s of it parsing the same JSON bodies again and again. The index
keys each recorded request by what every match requires (method, path, body as canonical JSON),
so only requests that can match reach the matchers; the matchers still decide which one does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from retrieval.text.redaction import credential_name

__all__ = [
    "KEPT_REQUEST_HEADERS",
    "LOOPBACK_HOSTS",
    "MATCH_ON",
    "body_difference",
    "index_cassette",
    "loopback_port",
    "match_key",
    "prepare_request",
    "same_body",
    "without_credentials",
]

# "loopback_port" instead of vcrpy's "port": a local server may get another port than the one
# it was recorded on, and the committed local cassettes must still match.
# "same_body" instead of vcrpy's "body": the same test, without the diff vcrpy builds on a mismatch.
MATCH_ON = ("method", "scheme", "host", "loopback_port", "path", "query", "same_body")
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
# The matchers `match_key` summarises; any other in MATCH_ON only narrows a match further.
_KEYED = {"method", "path", "same_body"}


def loopback_port(r1: Any, r2: Any) -> None:
    """vcrpy matcher: the same port, or both on loopback (raises AssertionError otherwise)."""
    if r1.port != r2.port and not (r1.host in LOOPBACK_HOSTS and r2.host in LOOPBACK_HOSTS):
        raise AssertionError(f"port {r1.port} != {r2.port}")


def without_credentials(request: Any) -> Any:
    """`request` without the query parameters named like a credential (`credential_name`: key,
    token, secret, auth, password, cookie, session, after percent-decoding) and without a
    user:password in its URL. Applied on both sides of a replay match, so a recording made with
    a key replays without one; the names dropped never separate requests (a page token or a sort
    key is not a credential name)."""
    from vcr.filters import replace_query_parameters

    parts = urlsplit(request.uri)
    if "@" in parts.netloc:
        request.uri = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    credentials = [(name, None) for name, _ in request.query if credential_name(name)]
    return replace_query_parameters(request, credentials) if credentials else request


_NOT_JSON = object()


def _as_json(body: Any) -> Any:
    """A request body as parsed JSON, or _NOT_JSON. vcrpy holds bytes or text for most clients,
    but the object itself for aiohttp's `json=`."""
    if isinstance(body, dict | list):
        return body
    if not isinstance(body, bytes | str):
        return _NOT_JSON
    try:
        return json.loads(body)
    except ValueError:  # not JSON (UnicodeDecodeError is one)
        return _NOT_JSON


def same_body(r1: Any, r2: Any) -> None:
    """vcrpy's "body" matcher for the bodies sent here (equal bytes, else equal as parsed JSON),
    without the unified diff it builds on every mismatch, which nobody reads and which took a
    third of a recording's time."""
    from vcr.matchers import read_body

    b1, b2 = read_body(r1), read_body(r2)
    if b1 == b2:
        return
    v1 = _as_json(b1)
    if v1 is _NOT_JSON or v1 != _as_json(b2):
        raise AssertionError("the bodies differ")


_NOTHING = object()


def _first_difference(old: Any, new: Any, path: str) -> tuple[str, Any, Any] | None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*old, *(k for k in new if k not in old)]:
            found = _first_difference(old.get(key, _NOTHING), new.get(key, _NOTHING), f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(old, list) and isinstance(new, list):
        for index, (a, b) in enumerate(zip(old, new, strict=False)):
            found = _first_difference(a, b, f"{path}[{index}]")
            if found:
                return found
        return None if len(old) == len(new) else (f"{path} (length)", len(old), len(new))
    return None if old == new else (path, old, new)


def _shown(value: Any) -> str:
    if value is _NOTHING:
        return "nothing"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:59] + "…"


def _differences(old: Any, new: Any) -> int:
    """How many values differ between two parsed JSON bodies (a list of another length counts once more)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return sum(_differences(old.get(k, _NOTHING), new.get(k, _NOTHING)) for k in {*old, *new})
    if isinstance(old, list) and isinstance(new, list):
        return sum(_differences(a, b) for a, b in zip(old, new, strict=False)) + (len(old) != len(new))
    return int(old != new)


def body_difference(recorded: Sequence[Any], sent: Any) -> str | None:
    """Where a sent request's body first differs from the closest of the `recorded` ones (the
    fewest values apart), as JSON ("at $.size: recorded 1000, sent 10"); None when the bodies are
    not JSON."""
    from vcr.util import read_body

    new = _as_json(read_body(sent))
    olds = [old for old in (_as_json(read_body(r)) for r in recorded) if old is not _NOT_JSON]
    if new is _NOT_JSON or not olds:
        return None
    found = _first_difference(min(olds, key=lambda old: _differences(old, new)), new, "$")
    if found is None:
        return None
    path, was, now = found
    return f"at {path}: recorded {_shown(was)}, sent {_shown(now)}"


def _numbers_as_floats(value: Any) -> Any:
    # Parsed JSON compares 1 == 1.0 == True and 0.0 == -0.0: one spelling for each, so requests
    # `same_body` accepts always share a key. An int too large for a float equals no float.
    if isinstance(value, dict):
        return {k: _numbers_as_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers_as_floats(v) for v in value]
    if isinstance(value, (bool, int, float)):
        try:
            return float(value) + 0.0
        except OverflowError:
            return value
    return value


def match_key(request: Any) -> tuple[str, str, bytes]:
    """What the matchers require two requests to share: the method, the path and the body (a
    digest of its canonical JSON when it parses, else of its bytes). Requests `MATCH_ON`
    accepts always have equal keys; requests with equal keys may still differ elsewhere."""
    from vcr.util import read_body

    body = read_body(request)
    parsed = _as_json(body)
    if parsed is not _NOT_JSON:
        key = json.dumps(_numbers_as_floats(parsed), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    elif isinstance(body, bytes | str):  # not JSON: its bytes are the key
        key = body.encode("utf-8") if isinstance(body, str) else body
    else:  # nothing (None), or what only equality can tell apart: every such request shares one key
        key = b""
    return request.method.upper(), request.path, hashlib.sha256(key).digest()


def index_cassette(cassette: Any) -> bool:
    """Make `cassette` find a request's answers through an index instead of a scan: the same
    answers, in recorded order. False (the cassette left as it is) when its matchers are not
    ones `match_key` summarises, or this vcrpy lacks the internals the index relies on."""
    from vcr.matchers import requests_match

    if not all(hasattr(cassette, name) for name in ("_responses", "_before_record_request", "_match_on", "data")):
        return False
    if not {matcher.__name__ for matcher in cassette._match_on} >= _KEYED:
        return False
    by_key: dict[tuple[str, str, bytes], list[int]] = {}
    indexed = 0

    def responses(request: Any) -> Iterator[tuple[int, Any]]:
        nonlocal indexed
        # Interactions appended while recording join the index on the next look-up.
        for index in range(indexed, len(cassette.data)):
            by_key.setdefault(match_key(cassette.data[index][0]), []).append(index)
        indexed = len(cassette.data)
        prepared = cassette._before_record_request(request)
        if not prepared:
            return
        for index in by_key.get(match_key(prepared), ()):
            stored, response = cassette.data[index]
            if requests_match(prepared, stored, cassette._match_on):
                yield index, response

    cassette._responses = responses
    return True


# The request headers a cassette keeps. Replay never matches on headers, and a service may take
# its key in any header (X-Algolia-API-Key, Ocp-Apim-Subscription-Key...): every other one is
# dropped, so no list of credential headers has to foresee them.
KEPT_REQUEST_HEADERS = frozenset(
    {"host", "accept", "accept-encoding", "connection", "user-agent", "content-type", "content-length"}
)


def prepare_request(request: Any) -> Any:
    """What a cassette keeps of a request (vcrpy passes a copy, and applies this on replay too
    before matching: it must be idempotent)."""
    from vcr.filters import replace_headers

    # aiohttp records "post" where httpx records "POST".
    request.method = request.method.upper()
    request = replace_headers(request, [(h, None) for h in request.headers if h.lower() not in KEPT_REQUEST_HEADERS])
    # Query parameters named like a credential, on both sides of a replay match.
    return without_credentials(request)
