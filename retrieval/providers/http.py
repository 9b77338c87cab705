"""JSON over HTTP with timeouts, bounded retries and errors that say what happened.

Shared by the OpenAI-compatible clients. Bodies are serialised deterministically
(sorted keys, fixed separators) because cassettes match requests byte for byte.
"""

from __future__ import annotations

import functools
import json
import os
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from retrieval.config import Profile
from retrieval.providers.base import MissingKeyError, ProviderError, ReplayMissError, cause_of
from retrieval.run.cost import Usage
from retrieval.text.redaction import credential_name, redacted

__all__ = [
    "HTTPProvider",
    "RetryPolicy",
    "bearer_header",
    "dumps",
    "is_replay_miss",
    "new_client",
    "post_json",
    "post_json_value",
    "tls_context",
]

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The one TLS context of the process (certifi's roots, or SSL_CERT_FILE / SSL_CERT_DIR).

    Loading the certificate store takes about 20 ms, and httpx and google-genai each do it
    for every client they build; a run builds a client per provider, a test suite hundreds.
    An SSLContext is safe to share between clients and threads.
    """
    return httpx.create_ssl_context(trust_env=True)


def new_client(timeout: float, headers: Mapping[str, str] | None = None) -> httpx.Client:
    """An httpx client on the shared TLS context."""
    return httpx.Client(timeout=timeout, headers=dict(headers or {}), verify=tls_context())


@dataclass(frozen=True)
class RetryPolicy:
    """Attempts and exponential backoff for 408/429/5xx and transport errors."""

    attempts: int = 4
    backoff: float = 1.0
    max_wait: float = 30.0

    @classmethod
    def for_profile(cls, profile: Profile) -> RetryPolicy:
        """The live-call policy a profile sets (retry_attempts, retry_backoff)."""
        return cls(attempts=profile.retries.attempts, backoff=profile.retries.backoff)

    @classmethod
    def for_mode(cls, profile: Profile, replay: bool, retry: RetryPolicy | None = None) -> RetryPolicy:
        """One attempt in replay (a replayed request is answered or missing, never transient);
        live, `retry` or the profile's policy."""
        return cls(attempts=1) if replay else (retry or cls.for_profile(profile))

    def wait(self, attempt: int, retry_after: str | None = None) -> float:
        if retry_after:
            try:
                return min(float(retry_after), self.max_wait)
            except ValueError:
                pass
        return min(self.backoff * 2 ** (attempt - 1), self.max_wait)


def bearer_header(variable: str, who: str, replay: bool) -> dict[str, str]:
    """The Authorization header of a live call keyed by `variable` ({} without one, or in replay,
    where no key is needed or sent); MissingKeyError naming `who` when the variable is unset."""
    if not variable or replay:
        return {}
    key = os.environ.get(variable, "").strip()
    if not key:
        raise MissingKeyError([variable], who)
    return {"authorization": f"Bearer {key}"}


class HTTPProvider:
    """A provider that calls one JSON API over HTTP, keyed by a Bearer token: its usage, its retry
    policy (one attempt in replay), its Authorization header (none in replay, where no key is
    needed or sent) and its httpx.Client, which `client` lets callers share (its own timeout then
    applies instead of the profile's; `close` leaves a shared one open).

    A subclass reads its settings in `_configure`, raising on a profile that does not name its
    API before any key is looked for, and returns the key's variable ("" for none) and who needs
    it, as MissingKeyError names them."""

    def __init__(
        self,
        profile: Profile,
        *,
        replay: bool = False,
        retry: RetryPolicy | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        variable, who = self._configure(profile)
        self.usage = Usage()
        self._retry = RetryPolicy.for_mode(profile, replay, retry)
        self._headers = bearer_header(variable, who, replay)
        self._owns_client = client is None
        self._client = client or new_client(profile.retries.timeout)

    def _configure(self, profile: Profile) -> tuple[str, str]:
        raise NotImplementedError

    def close(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._owns_client:
            self._client.close()


def dumps(body: Any) -> bytes:
    """Deterministic JSON bytes: the same request always has the same body."""
    return json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _describe(url: str, what: str) -> str:
    return f"POST {url} ({what})" if what else f"POST {url}"


def _error_detail(text: str, sent: Mapping[str, str]) -> str:
    """An error body as a message may quote it: a server that echoes the request answers with
    the key it was sent. The credentials sent (whole, and the key of "Bearer KEY") are replaced
    by their header's name over the whole body before it is cut, so no part of a key is left,
    whatever variable it came from; then the usual redaction."""
    for name, value in sent.items():
        if not credential_name(name):
            continue
        for part in sorted({value, *value.split()[1:]}, key=len, reverse=True):
            if len(part) >= 8:
                text = text.replace(part, f"<{name}>")
    return redacted(" ".join(text.split()))[:300]


def post_json(
    client: httpx.Client,
    url: str,
    body: Any,
    *,
    headers: Mapping[str, str] | None = None,
    retry: RetryPolicy = RetryPolicy(),
    what: str = "",
) -> dict[str, Any]:
    """POST a JSON body and return the decoded JSON object, retrying transient failures.

    Raises ReplayMissError when a cassette has no answer for the request (never retried),
    ProviderError with reason "timeout", "http NNN", "connect" or "bad json" otherwise.
    """
    data = post_json_value(client, url, body, headers=headers, retry=retry, what=what)
    if not isinstance(data, dict):
        raise ProviderError(f"{_describe(url, what)} answered with a non-object JSON", "bad json")
    return data


def post_json_value(
    client: httpx.Client,
    url: str,
    body: Any,
    *,
    headers: Mapping[str, str] | None = None,
    retry: RetryPolicy = RetryPolicy(),
    what: str = "",
) -> Any:
    """`post_json` for an API whose answer may be any JSON value (text-embeddings-inference's
    /rerank answers with a bare list)."""
    content = dumps(body)
    request_headers = {"content-type": "application/json", **(headers or {})}
    last: ProviderError | None = None
    for attempt in range(1, retry.attempts + 1):
        retry_after = None
        try:
            response = client.post(url, content=content, headers=request_headers)
        except Exception as exc:
            if is_replay_miss(exc):
                raise ReplayMissError(f"no recorded answer for {_describe(url, what)}", "replay miss") from exc
            if isinstance(exc, httpx.TimeoutException):
                last = ProviderError(f"{_describe(url, what)} timed out after {attempt} attempt(s)", "timeout")
            elif isinstance(exc, httpx.RequestError):
                last = ProviderError(redacted(f"{_describe(url, what)} failed: {exc}"), "connect")
            else:
                raise
        else:
            if response.status_code < 400:
                try:
                    data = response.json()
                except ValueError as exc:
                    raise ProviderError(f"{_describe(url, what)} answered with invalid JSON", "bad json") from exc
                return data
            detail = _error_detail(response.text, {**client.headers, **request_headers})
            last = ProviderError(
                f"{_describe(url, what)} -> HTTP {response.status_code}: {detail}", f"http {response.status_code}"
            )
            if response.status_code not in RETRY_STATUSES:
                raise last
            retry_after = response.headers.get("retry-after")
        if attempt < retry.attempts:
            time.sleep(retry.wait(attempt, retry_after))
    assert last is not None
    raise last


def is_replay_miss(exc: BaseException) -> bool:
    """True when vcrpy refused a request because the cassette has no answer for it."""
    from vcr.errors import CannotOverwriteExistingCassetteException

    return cause_of(exc, CannotOverwriteExistingCassetteException) is not None
