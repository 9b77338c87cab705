"""Record and replay of model HTTP calls with vcrpy, shared by the CLI and conftest.py.

Three modes:
- replay (default): answers come from `cassettes/<profile>/<stage>.json`; a request
  missing there fails at once (never sent, never turned into degraded reranking);
- live: calls go to the providers (with the embedding cache), nothing is recorded;
- record: live calls, written to a staging folder; only when the whole run succeeded
  and every cassette passed its checks (not empty, no secret) do they replace the
  committed ones, so a failed recording never leaves a half-written cassette.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from retrieval.atomic import atomic_write_text

__all__ = [
    "CassetteError",
    "Mode",
    "Recorder",
    "cassette_digest",
    "find_secrets",
    "is_replay_miss",
    "record_command",
]

Mode = Literal["replay", "live", "record"]

FILTERED_HEADERS = ("x-goog-api-key", "authorization", "cookie", "set-cookie")
MATCH_ON = ("method", "scheme", "host", "port", "path", "query", "body")
_SECRET_PATTERNS = (
    re.compile(r"AIza[0-9A-Za-z_-]{30,}"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"),
    re.compile(r'"(x-goog-api-key|authorization)"\s*:', re.IGNORECASE),
    re.compile(r"[?&]key=[^&\"\s]{8,}"),
)
META_FILE = "recording.json"
KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_API_KEY")


class CassetteError(RuntimeError):
    """A cassette is missing, empty or unsafe; the message says which and how to re-record."""


def record_command(profile: str) -> str:
    """The command that re-records a profile's cassettes."""
    prefix = "GEMINI_API_KEY=... " if profile == "gemini" else ""
    return f"{prefix}pytest --record --retrieval-profile {profile}"


def is_replay_miss(exc: BaseException) -> bool:
    """True when vcrpy refused a request because the cassette has no answer for it."""
    from vcr.errors import CannotOverwriteExistingCassetteException

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, CannotOverwriteExistingCassetteException):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def find_secrets(text: str, keys: Mapping[str, str] | None = None) -> list[str]:
    """What in a cassette looks like a credential: key patterns, auth headers, and the values
    of `keys` (variable name -> value, e.g. the environment's API keys)."""
    found = [m.group(0)[:12] + "…" for p in _SECRET_PATTERNS for m in p.finditer(text)]
    found += [f"value of ${name}" for name, value in (keys or {}).items() if value and value in text]
    return found


def _upper_method(request: Any) -> Any:
    # aiohttp records "post" where httpx records "POST"; runs on replay too, so it must be idempotent.
    request.method = request.method.upper()
    return request


VOLATILE_HEADERS = ("date", "server", "x-request-id", "server-timing", "alt-svc")


def _clean_response(response: dict[str, Any]) -> dict[str, Any] | None:
    # A 429/5xx seen while recording would replay as a failure forever.
    if response["status"]["code"] >= 400:
        return None
    # Headers that change on every call would make an identical re-recording show as a diff.
    headers = response.get("headers", {})
    for name in [h for h in headers if h.lower() in VOLATILE_HEADERS]:
        del headers[name]
    return response


@dataclass
class Recorder:
    """Where a profile's cassettes live, and how each stage of an evaluation uses them."""

    mode: Mode
    directory: Path
    profile: str
    key_variable: str = ""  # a profile's own api_key_env, whose value must not reach a cassette
    _staging: Path | None = field(default=None, init=False)
    _recorded: list[str] = field(default_factory=list, init=False)

    def path(self, stage: str) -> Path:
        """The committed cassette of a stage."""
        return self.directory / f"{stage}.json"

    def has(self, stage: str) -> bool:
        """True when a cassette for the stage is committed."""
        return self.path(stage).is_file()

    def recorded_strings(self, stage: str) -> set[str]:
        """Every string in the request bodies of a committed cassette: to tell which texts it lacks."""
        found: set[str] = set()

        def walk(value: Any) -> None:
            if isinstance(value, str):
                found.add(value)
            elif isinstance(value, dict):
                for v in value.values():
                    walk(v)
            elif isinstance(value, list):
                for v in value:
                    walk(v)

        if self.has(stage):
            for interaction in json.loads(self.path(stage).read_text(encoding="utf-8")).get("interactions", []):
                try:
                    walk(json.loads(interaction["request"]["body"] or "null"))
                except (KeyError, TypeError, ValueError):
                    continue
        return found

    def has_any(self) -> bool:
        """True when the profile has at least one committed cassette."""
        return self.directory.is_dir() and any(p.name != META_FILE for p in self.directory.glob("*.json"))

    @contextmanager
    def stage(self, stage: str) -> Iterator[None]:
        """Route the HTTP calls made inside the block through the stage's cassette."""
        if self.mode == "live":
            yield
            return
        import vcr

        if self.mode == "replay":
            if not self.has(stage):
                raise CassetteError(f"no cassette {self.path(stage)}: record it with `{record_command(self.profile)}`")
            path, record_mode = self.path(stage), "none"
        else:
            if self._staging is None:
                self._staging = Path(tempfile.mkdtemp(prefix=f"cassettes-{self.profile}-"))
            path, record_mode = self._staging / f"{stage}.json", "all"
            self._recorded.append(stage)
        recorder = vcr.VCR(
            serializer="json",
            record_mode=record_mode,
            match_on=MATCH_ON,
            filter_headers=FILTERED_HEADERS,
            filter_query_parameters=("key",),
            decode_compressed_response=True,
            before_record_request=_upper_method,
            before_record_response=_clean_response,
            record_on_exception=False,
        )
        with recorder.use_cassette(str(path)):
            yield

    def metadata(self) -> dict[str, Any]:
        """What the last recording wrote beside its cassettes (dataset fingerprint, config, usage)."""
        path = self.directory / META_FILE
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}

    def commit(self, metadata: dict[str, Any]) -> list[Path]:
        """Record mode: check every new cassette, then move them and `metadata` into place atomically."""
        if self.mode != "record" or self._staging is None:
            return []
        keys = {name: os.environ.get(name, "") for name in (*KEY_VARIABLES, self.key_variable) if name}
        for stage in self._recorded:
            staged = self._staging / f"{stage}.json"
            text = staged.read_text(encoding="utf-8") if staged.is_file() else ""
            interactions = json.loads(text).get("interactions", []) if text else []
            if not interactions:
                raise CassetteError(
                    f"recording {stage} produced no interaction: every call failed (error answers are not "
                    "recorded) or the HTTP client was not intercepted. Nothing was replaced."
                )
            secrets = find_secrets(text, keys)
            if secrets:
                raise CassetteError(f"recording {stage} holds secrets ({', '.join(secrets)}). Nothing was replaced.")
        # Each file is replaced atomically; the checks above ran first, so a failure here is an
        # I/O error, not a bad recording.
        written = []
        for stage in self._recorded:
            atomic_write_text(self.path(stage), (self._staging / f"{stage}.json").read_text(encoding="utf-8"))
            written.append(self.path(stage))
        previous = self.metadata()
        # Stages not re-recorded this time keep the usage measured when they were.
        meta = {**previous, **metadata, "usage": {**previous.get("usage", {}), **metadata.get("usage", {})}}
        atomic_write_text(
            self.directory / META_FILE, json.dumps(meta, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        )
        self.discard()
        return written

    def discard(self) -> None:
        """Forget a recording in progress (after a failure): the committed cassettes stay as they were."""
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
        self._staging = None
        self._recorded = []


def cassette_digest(directory: str | Path) -> str:
    """sha256 over a profile's cassettes (sorted file names and bytes; recording.json excluded,
    it holds timings): the baseline records it, so a hand-edited cassette shows as a changed
    digest. A profile without cassettes (no model call) has the digest of nothing."""
    import hashlib

    digest = hashlib.sha256()
    folder = Path(directory)
    files = sorted(p for p in folder.glob("*.json") if p.name != META_FILE) if folder.is_dir() else []
    for path in files:
        data = path.read_bytes()
        digest.update(f"{path.name}\0{len(data)}\0".encode())
        digest.update(data)
    return "sha256:" + digest.hexdigest()
