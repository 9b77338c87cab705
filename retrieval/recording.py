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
from retrieval.network import cause_of

__all__ = [
    "CassetteError",
    "Mode",
    "Recorder",
    "find_secrets",
    "is_replay_miss",
    "record_command",
]

Mode = Literal["replay", "live", "record"]

# Headers that carry credentials whatever the service (a user's retriever too); each provider
# declares its own on top of these (retrieval.providers.PROVIDERS).
FILTERED_HEADERS = ("authorization", "x-api-key", "api-key", "cookie", "set-cookie")
MATCH_ON = ("method", "scheme", "host", "port", "path", "query", "body")
_SECRET_PATTERNS = (
    re.compile(r"AIza[0-9A-Za-z_-]{30,}"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"),
    re.compile(r'"(x-goog-api-key|authorization)"\s*:', re.IGNORECASE),
    re.compile(r"[?&]key=[^&\"\s]{8,}"),
)
META_FILE = "recording.json"


class CassetteError(RuntimeError):
    """A cassette is missing, empty or unsafe; the message says which and how to re-record."""


def record_command(profile: str, key_variables: tuple[str, ...] = ()) -> str:
    """The command that re-records a profile's cassettes, with the key it needs, if any."""
    prefix = f"{key_variables[0]}=... " if key_variables else ""
    return f"{prefix}pytest --record --profile {profile}"


def is_replay_miss(exc: BaseException) -> bool:
    """True when vcrpy refused a request because the cassette has no answer for it."""
    from vcr.errors import CannotOverwriteExistingCassetteException

    return cause_of(exc, CannotOverwriteExistingCassetteException) is not None


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
    # The profile's providers' declarations: key variables whose values must never reach a
    # cassette, and the headers carrying them (retrieval.providers.credentials).
    key_variables: tuple[str, ...] = ()
    auth_headers: tuple[str, ...] = ()
    needed_keys: tuple[str, ...] = ()  # what a recording must set, named in the record command
    _staging: Path | None = field(default=None, init=False)
    _recorded: list[str] = field(default_factory=list, init=False)  # cassette file names, staged

    def _staged(self, name: str) -> Path:
        if self._staging is None:
            self._staging = Path(tempfile.mkdtemp(prefix=f"cassettes-{self.profile}-"))
        self._recorded.append(name)
        return self._staging / name

    @property
    def record_command(self) -> str:
        """The command that re-records this profile's cassettes."""
        return record_command(self.profile, self.needed_keys)

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
                raise CassetteError(f"no cassette {self.path(stage)}: record it with `{self.record_command}`")
            path, record_mode = self.path(stage), "none"
        else:
            path, record_mode = self._staged(f"{stage}.json"), "all"
        recorder = vcr.VCR(
            serializer="json",
            record_mode=record_mode,
            match_on=MATCH_ON,
            filter_headers=tuple(dict.fromkeys((*FILTERED_HEADERS, *self.auth_headers))),
            filter_query_parameters=("key",),
            decode_compressed_response=True,
            before_record_request=_upper_method,
            before_record_response=_clean_response,
            record_on_exception=False,
        )
        with recorder.use_cassette(str(path)):
            yield

    def rankings_path(self, channel: str) -> Path:
        """The committed ranking cassette of a method that declares calls = "rankings"."""
        from retrieval.ranking_cassettes import SUFFIX

        return self.directory / f"{channel}{SUFFIX}"

    def replay_rankings(self, channel: str, dataset: Any, depth: int) -> list[Any]:
        """The recorded rankings of every question (replay mode)."""
        from retrieval.ranking_cassettes import load_rankings

        path = self.rankings_path(channel)
        if not path.is_file():
            raise CassetteError(f"no ranking cassette {path}: record it with `{self.record_command}`")
        return load_rankings(path, dataset, depth)

    def record_rankings(self, channel: str, dataset: Any, method: str, rankings: Any) -> None:
        """Record mode: stage the rankings, committed with the other cassettes."""
        from retrieval.ranking_cassettes import dump_rankings

        self._staged(self.rankings_path(channel).name).write_text(
            dump_rankings(dataset, method, rankings), encoding="utf-8"
        )

    def metadata(self) -> dict[str, Any]:
        """What the last recording wrote beside its cassettes (dataset fingerprint, config, usage)."""
        path = self.directory / META_FILE
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}

    def commit(self, metadata: dict[str, Any]) -> list[Path]:
        """Record mode: check every new cassette, then move them and `metadata` into place atomically."""
        if self.mode != "record" or self._staging is None:
            return []
        keys = {name: os.environ.get(name, "") for name in self.key_variables}
        for name in self._recorded:
            staged = self._staging / name
            text = staged.read_text(encoding="utf-8") if staged.is_file() else ""
            data = json.loads(text) if text else {}
            if not (data.get("interactions") or data.get("rankings")):
                raise CassetteError(
                    f"recording {name} produced no interaction: every call failed (error answers are not "
                    "recorded) or the HTTP client was not intercepted. Nothing was replaced."
                )
            secrets = find_secrets(text, keys)
            if secrets:
                raise CassetteError(f"recording {name} holds secrets ({', '.join(secrets)}). Nothing was replaced.")
        # Each file is replaced atomically; the checks above ran first, so a failure here is an
        # I/O error, not a bad recording.
        written = []
        for name in self._recorded:
            atomic_write_text(self.directory / name, (self._staging / name).read_text(encoding="utf-8"))
            written.append(self.directory / name)
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
