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

import contextlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from retrieval.files.atomic import AtomicSetError, recover_directory, replace_files, staging_directory
from retrieval.providers.base import ReplayMissError
from retrieval.recording.cassette_files import (
    META_FILE,
    STORE_MANIFEST,
    CassetteError,
    damaged,
    large_file_notice,
    metadata_problem,
    read_cassette,
    read_committed,
    record_command,
)
from retrieval.recording.matching import (
    MATCH_ON,
    index_cassette,
    loopback_port,
    prepare_request,
    same_body,
)
from retrieval.recording.misses import counting_misses, describe_miss
from retrieval.recording.persisters import CODE_KEY, CheckedLoad, counted_live
from retrieval.recording.recording_lock import hold_recording
from retrieval.text.redaction import credential_name, find_secrets

if TYPE_CHECKING:
    from retrieval.recording.vector_store import VectorStore


__all__ = ["Mode", "Recorder"]

Mode = Literal["replay", "live", "record"]


# Answer headers whose name says credential (Set-Cookie, X-Session-Token): never committed. The
# client reads answer headers on replay, but none it needs is named like this.
_CREDENTIAL_HEADER = re.compile(r"key|token|secret|passw|auth|signature|credential|session|cookie", re.IGNORECASE)


VOLATILE_HEADERS = ("date", "server", "x-request-id", "server-timing", "alt-svc")


def _clean_response(response: dict[str, Any]) -> dict[str, Any] | None:
    # A 429/5xx seen while recording would replay as a failure forever.
    if response["status"]["code"] >= 400:
        return None
    # Headers that change on every call would make an identical re-recording show as a diff;
    # a session cookie or a token handed back must not be committed.
    headers = response.get("headers", {})
    dropped = [h for h in headers if h.lower() in VOLATILE_HEADERS or _CREDENTIAL_HEADER.search(h)]
    for name in [*dropped, *(h for h in headers if h not in dropped and credential_name(h))]:
        del headers[name]
    return response


@dataclass
class Recorder:
    """Where a profile's cassettes live, and how each stage of an evaluation uses them."""

    mode: Mode
    directory: Path
    profile: str
    # The profile's providers' declarations: key variables whose values must never reach a
    # cassette (retrieval.providers.credentials).
    key_variables: tuple[str, ...] = ()
    needed_keys: tuple[str, ...] = ()  # what a recording must set, named in the record command
    # Ranking cassettes replay only for the code that recorded them; off when a recording replays
    # the committed ones to measure its drift (what the old code gave is the point there).
    verify_code: bool = True
    # The model server this run embedded with (server_identity.ServerInfo.as_dict), set by the
    # evaluator; a recording keeps it in recording.json under "server".
    server: dict[str, Any] | None = field(default=None, init=False)
    _staging: Path | None = field(default=None, init=False)
    _recorded: list[str] = field(default_factory=list, init=False)  # cassette file names, staged
    # Cassette file names this run replayed or recorded: the ones its figures come from.
    used: set[str] = field(default_factory=set, init=False)
    # HTTP calls answered through each stage's cassette this run (replayed, or recorded): what a
    # method that does not count its own calls (a team's search service) is charged with.
    calls: dict[str, int] = field(default_factory=dict, init=False)
    # What the last commit has to say beyond its drift (files too large for GitHub), one line each.
    notices: list[str] = field(default_factory=list, init=False)
    # The folder of the profile's corpus vector segments (None: this profile stores none).
    vectors: Path | None = None
    # Segment files this recording created: removed when it is discarded (nothing lists them).
    _created: list[Path] = field(default_factory=list, init=False)
    # The lock a recording of this profile holds from its start to its commit or discard
    # (`hold`): a second recording at the same time is refused, never interleaved. In the cache
    # folder, which is not committed, as the baseline's lock.
    lock: Path | None = None
    _held: Any = field(default=None, init=False, repr=False)
    # The git ref whose gate this run serves when it evaluates what that ref measures besides the
    # project (a question the ref's relevant_grade keeps): only a recording made against the ref
    # holds those calls, so the record command names it.
    baseline_ref: str | None = None

    def hold(self) -> None:
        """Take the profile's recording lock for a whole recording or compaction (released by
        `commit` or `discard`); CassetteError in one line when another run holds it."""
        if self.lock is not None and self._held is None:
            self._held = hold_recording(self.lock, self.directory, self.profile)

    def recover(self) -> None:
        """Finish or undo a commit of this profile's cassettes that a killed run left half done, and
        remove killed runs' staging folders: every run calls it before it reads a cassette."""
        try:
            recover_directory(self.directory)
        except OSError as exc:
            raise CassetteError(
                f"{self.directory}: a killed recording's files could not be put back ({exc.strerror or exc}); "
                "make the folder writable, then run again"
            ) from exc

    def _unwritable(self, folder: Path, exc: OSError) -> CassetteError:
        return CassetteError(
            f"{folder}: the recording could not be written there ({exc.strerror or exc}); free space on its disk "
            "or make the folder writable, then record again. Nothing was replaced."
        )

    def _staged(self, name: str) -> Path:
        if self._staging is None:
            # Beside the committed folder: same file system, so the commit is a rename; a
            # killed run's staging folder is found there and removed by the next one.
            self.recover()
            try:
                self._staging = staging_directory(self.directory)
            except AtomicSetError as exc:  # the folder is a link: its own fix, not a disk's
                raise CassetteError(f"{self.directory}: {exc.strerror or exc}. Nothing was written.") from exc
            except OSError as exc:
                raise self._unwritable(self.directory.parent, exc) from exc
        self._recorded.append(name)
        return self._staging / name

    def _write_staged(self, name: str, data: bytes) -> None:
        path = self._staged(name)
        try:
            path.write_bytes(data)
        except OSError as exc:
            raise self._unwritable(path.parent.parent, exc) from exc

    @property
    def record_command(self) -> str:
        """The command that re-records this profile's cassettes."""
        return record_command(self.profile, self.needed_keys, self.baseline_ref)

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
            for interaction in read_cassette(self.path(stage), self.profile)["interactions"]:
                try:
                    walk(json.loads(interaction["request"].get("body") or "null"))
                except (KeyError, TypeError, ValueError):
                    continue
        return found

    def has_any(self) -> bool:
        """True when the profile has at least one committed cassette."""
        return self.directory.is_dir() and any(p.name != META_FILE for p in self.directory.glob("*.json"))

    @contextmanager
    def stage(self, stage: str, count_live: bool = False, code: dict[str, str] | None = None) -> Iterator[None]:
        """Route the HTTP calls made inside the block through the stage's cassette. In a live run
        there is none: with `count_live`, the calls are only counted (for code that counts none
        of its own, a team's search client), as a recording would. `code` (the digests of the
        method's declared `sources`) is written into the recorded cassette, and replay refuses a
        cassette recorded from other sources or without them."""
        if self.mode == "live":
            if not count_live:
                yield
                return
            with counted_live() as cassette:
                yield
            self.calls[stage] = self.calls.get(stage, 0) + len(cassette.data)
            return
        import vcr

        if self.mode == "replay":
            if not self.has(stage):
                raise CassetteError(f"no cassette {self.path(stage)}: record it with `{self.record_command}`")
            path, record_mode = self.path(stage), "none"
        else:
            path, record_mode = self._staged(f"{stage}.json"), "all"
        self.used.add(path.name)
        recorder = vcr.VCR(
            serializer="json",
            record_mode=record_mode,
            match_on=MATCH_ON,
            decode_compressed_response=True,
            before_record_request=prepare_request,
            before_record_response=_clean_response,
            record_on_exception=False,
        )
        recorder.register_matcher("loopback_port", loopback_port)
        recorder.register_matcher("same_body", same_body)
        if self.mode == "replay":
            recorder.register_persister(CheckedLoad(self.profile, code if self.verify_code else None))
        with ExitStack() as stack:
            try:
                cassette = stack.enter_context(recorder.use_cassette(str(path)))
            except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
                # Whatever vcrpy's own loader trips on is a damaged file, not a bug to show as a traceback.
                raise damaged(path, f"{type(exc).__name__}: {exc}", self.profile) from exc
            index_cassette(cassette)  # without it (another vcrpy), the same answers, found by a scan
            missed = counting_misses(cassette) if self.mode == "replay" else []
            # A recording's staged cassette may hold an earlier block's calls (two methods sharing a
            # channel): this block answered only those it adds.
            loaded = len(cassette.data)

            def unanswered(then: str) -> ReplayMissError:
                more = f" and {len(missed) - 1} more request(s)" if len(missed) > 1 else ""
                first = describe_miss(missed[0], cassette)
                return ReplayMissError(f"no recorded answer in {path} for {first}{more}; {then}", "replay miss")

            try:
                yield
            except Exception as exc:
                # The code caught the refusal and raised an error of its own, out of the chain.
                from retrieval.providers.http import is_replay_miss  # httpx: not in the gate plugin's imports

                if missed and not is_replay_miss(exc):
                    raise unanswered(f"the code that sent it then raised {type(exc).__name__}: {exc}") from exc
                raise
            if missed:
                raise unanswered("the code that sent it caught the error and carried on")
            answered = cassette.play_count if self.mode == "replay" else len(cassette.data) - loaded
            self.calls[stage] = self.calls.get(stage, 0) + answered
            if self.mode == "record":
                try:
                    stack.close()  # vcrpy writes the staged cassette here: a full disk is said here
                except OSError as exc:
                    raise self._unwritable(path.parent.parent, exc) from exc
        if self.mode == "record" and code and path.is_file():
            # vcrpy has saved the staged cassette as the block ended: the sources that answered join it.
            data = json.loads(path.read_text(encoding="utf-8"))
            data[CODE_KEY] = dict(sorted(code.items()))
            try:
                path.write_text(json.dumps(data, indent=4) + "\n", encoding="utf-8")
            except OSError as exc:
                raise self._unwritable(path.parent.parent, exc) from exc

    def rankings_path(self, channel: str) -> Path:
        """The committed ranking cassette of a method that declares calls = "rankings"."""
        from retrieval.recording.ranking_cassettes import SUFFIX

        return self.directory / f"{channel}{SUFFIX}"

    def replay_rankings(self, channel: str, dataset: Any, depth: int, code: dict[str, str] | None = None) -> list[Any]:
        """The recorded rankings of every question (replay mode), if recorded from `code`."""
        from retrieval.recording.ranking_cassettes import load_rankings

        path = self.rankings_path(channel)
        if not path.is_file():
            raise CassetteError(f"no ranking cassette {path}: record it with `{self.record_command}`")
        self.used.add(path.name)
        return load_rankings(path, dataset, depth, code if self.verify_code else None)

    def record_rankings(
        self, channel: str, dataset: Any, method: str, rankings: Any, code: dict[str, str] | None = None
    ) -> None:
        """Record mode: stage the rankings and the digests of the `code` that ranked, committed
        with the other cassettes."""
        from retrieval.recording.ranking_cassettes import dump_rankings

        self.used.add(self.rankings_path(channel).name)
        self._write_staged(self.rankings_path(channel).name, dump_rankings(dataset, method, rankings, code).encode())

    def committed_store(self) -> VectorStore:
        """The committed corpus vector store (empty when none is recorded); CassetteError, one line
        naming the file and the fix, when it is damaged or a Git LFS pointer."""
        restore = f"git checkout -- {self.directory} {self.vectors}"
        fix = f"restore it with `{restore}` or re-record with `{self.record_command}`"
        from retrieval.recording.vector_store import StoreError, VectorStore  # numpy: not at the plugin's import

        try:
            return VectorStore.open(self.directory / STORE_MANIFEST, self.vectors or self.directory, fix)
        except StoreError as exc:
            raise CassetteError(str(exc)) from exc

    def stage_vectors(self, store: VectorStore, created: list[Path]) -> None:
        """Record mode: `store` (the committed one with this recording's segments added) is committed
        with the cassettes; `created` are the segment files this recording wrote (new files only)."""
        self._created += created
        self.used.add(STORE_MANIFEST)
        self._write_staged(STORE_MANIFEST, store.manifest_bytes())

    def metadata(self) -> dict[str, Any]:
        """What the last recording wrote beside its cassettes (dataset fingerprint, config, usage)."""
        path = self.directory / META_FILE
        if not path.is_file():
            return {}
        try:
            data = json.loads(read_committed(path).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, OSError) as exc:
            raise CassetteError(
                f"{path}: damaged recording metadata ({exc}). Restore it with `git checkout -- {path}` "
                f"or re-record with `{record_command(self.profile)}`."
            ) from exc
        problem = "expected a JSON object" if not isinstance(data, dict) else metadata_problem(data)
        if problem:
            raise CassetteError(
                f"{path}: damaged recording metadata ({problem}). Restore it with "
                f"`git checkout -- {path}` or re-record with `{record_command(self.profile)}`."
            )
        return data

    def commit(
        self, metadata: dict[str, Any], drift: Callable[[dict[str, Path]], dict[str, Any]] | None = None
    ) -> list[Path]:
        """Record mode: check every new cassette, then replace the profile's cassettes and
        `metadata` as one set (all or none, see `retrieval.files.atomic.replace_files`).

        `drift`, given the staged cassettes (file name -> staged path) while the committed ones
        are still in place, returns what the metadata keeps under "drift" (retrieval.recording.drift)."""
        if self.mode != "record" or self._staging is None:
            return []
        keys = {name: os.environ.get(name, "") for name in self.key_variables}
        kept = f"The cassettes in {self.directory} were kept as they were; the recording was discarded."
        files: dict[str, bytes] = {}
        try:
            for name in self._recorded:
                staged = self._staging / name
                text = staged.read_text(encoding="utf-8") if staged.is_file() else ""
                data = json.loads(text) if text else {}
                if not (data.get("interactions") or data.get("rankings") or data.get("segments")):
                    raise CassetteError(
                        f"recording {name} produced no interaction: every call failed (error answers are not "
                        "recorded) or the HTTP client was not intercepted. Nothing was replaced."
                    )
                secrets = find_secrets(text, keys)
                if secrets:
                    raise CassetteError(
                        f"recording {name} holds secrets ({', '.join(secrets)}): a request or an answer carries a "
                        "credential in its body or its URL path. Send it in a header, or in a query parameter "
                        "named like a key or a token: neither is recorded. Nothing was replaced."
                    )
                files[name] = text.encode("utf-8")
            previous = self.metadata()
            # Stages not re-recorded this time keep the usage measured when they were.
            meta = {**previous, **metadata, "usage": {**previous.get("usage", {}), **metadata.get("usage", {})}}
            # The previous recording's drift says nothing about this one.
            meta.pop("drift", None)
            if drift is not None:
                meta["drift"] = drift({name: self._staging / name for name in dict.fromkeys(self._recorded)})
            files[META_FILE] = (json.dumps(meta, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
            replace_files(self.directory, files)
            self.notices = [n for name, data in files.items() if (n := large_file_notice(name, len(data)))]
            self.notices += [
                n for p in self._created if (n := large_file_notice(p.name, p.stat().st_size, "vectors/**/*.npy"))
            ]
        except CassetteError:
            self.discard()
            raise
        except AtomicSetError as exc:
            self.discard()
            raise CassetteError(f"recording not saved: {exc}") from exc
        except OSError as exc:
            self.discard()
            raise CassetteError(f"recording not saved: {exc}. {kept}") from exc
        except BaseException:
            # Interrupted (Ctrl-C) or a bug while checking or comparing: nothing was replaced, and
            # no staging folder is left for `git add cassettes` to pick up.
            self.discard()
            raise
        written = [self.directory / name for name in self._recorded]
        self._created = []  # listed by the committed manifest now
        self.discard()
        return written

    @property
    def staged(self) -> dict[str, Path]:
        """Record mode: the cassettes recorded and not yet committed (file name -> staged path)."""
        if self._staging is None:
            return {}
        return {name: self._staging / name for name in dict.fromkeys(self._recorded)}

    def discard(self) -> None:
        """Forget a recording in progress (after a failure): the committed cassettes stay as they
        were, and the vector segments it wrote, which nothing lists, are removed."""
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
        for path in self._created:
            with contextlib.suppress(OSError):  # a read-only folder: the file is unlisted either way
                path.unlink(missing_ok=True)
        self._staging = None
        self._recorded = []
        self._created = []
        if self._held is not None:
            self._held.release()
            self._held = None
