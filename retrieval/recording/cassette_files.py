"""The cassette files of a profile as files: read (damage and Git LFS pointers named in one line),
scanned for credentials, digested for the baseline; the command that records them again."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from retrieval.text.redaction import find_secrets

__all__ = [
    "LARGE_FILE",
    "META_FILE",
    "STORE_MANIFEST",
    "CassetteError",
    "cassette_digest",
    "cassette_digests",
    "large_file_notice",
    "metadata_problem",
    "read_cassette",
    "read_committed",
    "record_command",
    "scan_cassettes",
]

META_FILE = "recording.json"
# The corpus vectors' manifest (retrieval.recording.vector_store): a file of the cassette set, so a recording
# commits it with the cassettes (all or none), the secret scan reads it and the baseline holds its
# digest; the segments it lists, in `Recorder.vectors`, are new files that no commit rewrites.
STORE_MANIFEST = "corpus-vectors.json"


class CassetteError(RuntimeError):
    """A cassette is missing, empty or unsafe; the message says which and how to re-record."""


# GitHub refuses files over 100 MiB and warns over 50: a corpus cassette passes 50 MiB from
# about 15,000 documents at 384 dimensions (its texts and vectors), far fewer with Gemini's
# vectors, which it answers as JSON lists of floats.
LARGE_FILE = 50 * 2**20
_LFS_POINTER = b"version https://git-lfs.github.com/spec/v1"


def read_committed(path: Path) -> bytes:
    """A committed cassette file's bytes; CassetteError when the checkout holds its Git LFS
    pointer instead (a clone or a CI checkout without LFS)."""
    raw = path.read_bytes()
    if raw.startswith(_LFS_POINTER):
        raise CassetteError(
            f"{path} is a Git LFS pointer, not the file: fetch it with `git lfs pull` "
            "(in GitHub Actions: `lfs: true` on actions/checkout)."
        )
    return raw


def large_file_notice(name: str, size: int, tracked: str = "cassettes/**/*.json") -> str | None:
    """One line for a recorded file too large for GitHub without Git LFS, else None; `tracked` is
    the pattern to give `git lfs track` (the vector segments': "vectors/**/*.npy")."""
    if size <= LARGE_FILE:
        return None
    what = "the cassettes" if tracked.startswith("cassettes") else "the vector segments"
    return (
        f"{name} is {size / 2**20:.1f} MiB: GitHub refuses files over 100 MiB and warns over 50 MiB; "
        f"keep {what} in Git LFS (`git lfs track '{tracked}'`, and `lfs: true` on the "
        "workflow's actions/checkout)"
    )


def record_command(profile: str, key_variables: tuple[str, ...] = (), baseline_ref: str | None = None) -> str:
    """The command that re-records a profile's cassettes, with the key it needs, if any; with
    `baseline_ref`, the gate's own recording against that ref (it evaluates what the ref gates too)."""
    prefix = f"{key_variables[0]}=... " if key_variables else ""
    if baseline_ref is not None:
        return f"{prefix}python -m retrieval --gate --record --baseline-ref {baseline_ref} --profile {profile}"
    return f"{prefix}pytest --record --retrieval-profile {profile}"


def scan_cassettes(
    directory: str | Path, keys: Mapping[str, str] | None = None, variables: Iterable[str] = ()
) -> list[str]:
    """Every secret in the cassettes under `directory`, one line each ("<file>: <what>"); a file
    that cannot be read as UTF-8 is reported too (it cannot be shown to be clean).
    `keys` defaults to the values of the providers' key variables and of `variables` (the
    methods' own) in the environment."""
    if keys is None:
        from retrieval.providers import PROVIDERS

        names = dict.fromkeys(
            [*(name for declared in PROVIDERS.values() for name in declared.key_variables), *variables]
        )
        keys = {name: os.environ.get(name, "") for name in names}
    found = []
    for path in sorted(Path(directory).rglob("*.json")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            found.append(f"{path}: cannot be scanned ({exc}); re-record or delete it")
            continue
        found += [f"{path}: {secret}" for secret in find_secrets(text, keys)]
    return found


def damaged(path: Path, reason: str, profile: str) -> CassetteError:
    return CassetteError(
        f"{path}: damaged cassette ({reason}). Restore it with `git checkout -- {path}` "
        f"or re-record with `{record_command(profile)}`."
    )


def read_cassette(path: Path, profile: str) -> dict[str, Any]:
    """A cassette file, checked to be vcrpy's JSON shape; CassetteError naming the file otherwise."""
    try:
        data = json.loads(read_committed(path).decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise damaged(path, f"not UTF-8: {exc.reason} at byte {exc.start}", profile) from exc
    except json.JSONDecodeError as exc:
        raise damaged(path, f"invalid JSON at line {exc.lineno}: {exc.msg}", profile) from exc
    except OSError as exc:
        raise damaged(path, f"unreadable: {exc.strerror or exc}", profile) from exc
    if not isinstance(data, dict):
        raise damaged(path, f"expected a JSON object, got {type(data).__name__}", profile)
    interactions = data.get("interactions")
    if not isinstance(interactions, list) or not all(
        isinstance(i, dict) and isinstance(i.get("request"), dict) and isinstance(i.get("response"), dict)
        for i in interactions
    ):
        raise damaged(path, '"interactions" must be a list of {"request": ..., "response": ...}', profile)
    return data


def cassette_digests(directory: str | Path, names: Iterable[str]) -> dict[str, str]:
    """sha256 of each named cassette of a profile: the files a run replayed or recorded. The
    baseline records them, so a hand-edited cassette shows as a changed digest, while a file no
    gated method reads (an experiment recorded with the CLI, a removed method's) changes nothing."""
    import hashlib

    folder = Path(directory)
    return {name: "sha256:" + hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in sorted(names)}


def cassette_digest(directory: str | Path) -> str:
    """sha256 over all of a profile's cassettes (sorted file names and bytes; recording.json
    excluded, it holds timings): the one digest baselines held before `cassette_digests`."""
    import hashlib

    digest = hashlib.sha256()
    folder = Path(directory)
    files = sorted(p for p in folder.glob("*.json") if p.name != META_FILE) if folder.is_dir() else []
    for path in files:
        data = path.read_bytes()
        digest.update(f"{path.name}\0{len(data)}\0".encode())
        digest.update(data)
    return "sha256:" + digest.hexdigest()


def metadata_problem(data: dict[str, Any]) -> str | None:
    """What is wrong with the types of recording.json's keys (the report and drift read them), or None."""
    typed = (("fingerprint", str, "a string"), ("config", dict, "an object"), ("drift", dict, "an object"))
    for key, kind, shape in typed:
        if key in data and not isinstance(data[key], kind):
            return f'"{key}" is {type(data[key]).__name__}, expected {shape}'
    usage = data.get("usage", {})
    if not isinstance(usage, dict):
        return f'"usage" is {type(usage).__name__}, expected an object (stage -> counters)'
    for stage, counters in usage.items():
        if not isinstance(counters, dict):
            return f'"usage" of {stage!r} is {type(counters).__name__}, expected an object of counters'
        for name, value in counters.items():
            if not isinstance(value, int | float) or isinstance(value, bool):
                return f'"usage" of {stage!r}: {name} is {value!r}, not a number'
    return None
