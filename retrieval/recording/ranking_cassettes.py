"""Ranking cassettes: the recorded rankings of a method that reaches an engine without HTTP.

A database driver does not speak HTTP, so vcrpy cannot record it. Such a method declares
`calls = "rankings"`: when recording, it runs against the engine and its ranking of every
question is written here, keyed by the question's text and the corpus fingerprint; when
replaying, its code does not run and the rankings come from this file. A question whose
text is not in the file, a corpus that changed, or a method whose code changed since the
recording (its rankings would not be those of the code under review) is a replay miss naming
what changed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.config import ConfigError
from retrieval.data.dataset import Dataset, corpus_fingerprint
from retrieval.providers.base import ReplayMissError
from retrieval.recording.cassette_files import CassetteError, read_committed
from retrieval.run.ranking import Ranking

__all__ = [
    "FORMAT",
    "SUFFIX",
    "RankingCassetteError",
    "code_changed",
    "dump_rankings",
    "load_rankings",
    "method_code",
    "source_code",
]

FORMAT = "retrieval-rankings-1"
SUFFIX = ".rankings.json"


def _digest(path: Path) -> str:
    # Line endings normalised: a checkout with autocrlf is the same code.
    return hashlib.sha256(path.read_bytes().replace(b"\r\n", b"\n")).hexdigest()[:16]


# The key of the method's declared `config` among the module names: no module is named so.
CONFIG_KEY = "(declared config)"


def method_code(
    method: object, sources: Sequence[str] = (), root: str | Path = ".", config: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """Which code ranked: name -> digest of its content, for the modules defining the method's
    class and its `rank`, for each of its declared `sources` (a module, every module of a
    package, or a file relative to the project `root`: the search module of the team's app, a
    SQL file), and for its declared `config` (a text search configuration given to the engine).
    Replay runs none of it, so a PR that edits the query, the tokenizer or those settings must
    not replay the old rankings. A method whose class is not what ranks (an adapter of this
    package around the adopter's retriever) says what does instead, as `ranking_code` (name ->
    a version or digest: the framework's release, the adapter's own version), so that upgrading
    this package does not invalidate recordings of code that did not change. ConfigError names a
    source that is neither."""
    code: dict[str, str] = {}
    if config:
        text = json.dumps(config, sort_keys=True, default=str).encode()
        code[CONFIG_KEY] = hashlib.sha256(text).hexdigest()[:16]
    ranked_by = getattr(method, "ranking_code", None)
    if isinstance(ranked_by, Mapping):
        code.update({str(name): str(version) for name, version in ranked_by.items()})
    for obj in (type(method), getattr(type(method), "rank", None)) if not isinstance(ranked_by, Mapping) else ():
        module = inspect.getmodule(obj) if obj is not None else None
        try:
            path = Path(inspect.getsourcefile(module) or "") if module is not None else None
            if module is not None and path is not None and path.is_file():
                code[module.__name__] = _digest(path)
        except TypeError:  # a built-in or a class made at run time: no source to follow
            pass
    code.update(source_code(getattr(method, "name", type(method).__name__), sources, root))
    return code


def source_code(method: str, sources: Sequence[str], root: str | Path = ".") -> dict[str, str]:
    """The digests of a method's declared `sources` alone (name -> digest): what ties the
    cassette of a `calls = "http"` method to the code of a service that lives in the repository
    (its tokenizer, its query builder), which replay does not run. ConfigError names a source
    that is neither a project file nor an importable module."""
    code: dict[str, str] = {}
    for source in sources:
        code.update(_source_digests(source, Path(root), method))
    return code


def code_changed(
    path: Path, code: Mapping[str, str], recorded: Any, *, required: bool = False, what: str = "rankings"
) -> None:
    """ReplayMissError when the cassette at `path` was recorded from other code than `code`
    (its recorded digests, `recorded`), naming what changed (`what` it would replay: "rankings",
    or an HTTP service's "answers"). A cassette without digests is read
    as recorded before they existed unless `required` (an HTTP method's declared `sources`: its
    cassette must say which sources answered, or any edit of them would replay unseen)."""
    if not code:
        return
    if not isinstance(recorded, dict) or not recorded:
        if not required:
            return
        raise ReplayMissError(
            f"{path} holds no digest of the method's declared sources ({', '.join(sorted(code))}): it was recorded "
            "before they were declared, so replay cannot tell whether they changed since",
            "replay miss",
        )
    changed = sorted(m for m in set(code) | set(recorded) if code.get(m) != recorded.get(m))
    if changed:
        named = ", ".join("its declared config" if m == CONFIG_KEY else m for m in changed)
        raise ReplayMissError(
            f"{path} was recorded from another version of the method's code ({named} changed since): replay "
            f"would give the old code's {what}, not those of the code under test",
            "replay miss",
        )


def _source_digests(source: str, root: Path, method: str) -> dict[str, str]:
    if (root / source).is_file():
        return {source: _digest(root / source)}
    try:
        spec = importlib.util.find_spec(source)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin or not Path(spec.origin).is_file():
        raise ConfigError(
            f"method {method!r}: `sources` entry {source!r} is neither a file under {root} nor an importable module"
        )
    if not spec.submodule_search_locations:
        return {source: _digest(Path(spec.origin))}
    folders = [Path(f) for f in spec.submodule_search_locations]
    return {
        f"{source}.{'.'.join(f.relative_to(folder).with_suffix('').parts)}".removesuffix(".__init__"): _digest(f)
        for folder in folders
        for f in sorted(folder.rglob("*.py"))
    }


def dump_rankings(
    dataset: Dataset, method: str, rankings: Sequence[Ranking], code: dict[str, str] | None = None
) -> str:
    """The cassette text for one method's rankings of every question of `dataset`, with the
    digests of the code that ranked (`method_code`)."""
    ids = dataset.doc_ids
    entries: dict[str, Any] = {}
    for question, ranking in zip(dataset.questions, rankings, strict=True):
        entries[question.text] = {
            "ids": [ids[int(i)] for i in ranking.indices],
            "scores": [round(float(s), 9) for s in ranking.scores],
            "status": ranking.status,
        }
    data = {
        "format": FORMAT,
        "method": method,
        "corpus": corpus_fingerprint(dataset.documents),
        "code": dict(sorted((code or {}).items())),
        "rankings": entries,
    }
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


class RankingCassetteError(CassetteError):
    """A ranking cassette that cannot be read; the message names the file and the fix."""


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_committed(path).decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RankingCassetteError(f"{path}: unreadable ranking cassette ({exc}). Re-record it.") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("rankings"), dict):
        raise RankingCassetteError(f"{path}: not a ranking cassette (expected format {FORMAT!r}). Re-record it.")
    return data


def load_rankings(path: Path, dataset: Dataset, depth: int, code: dict[str, str] | None = None) -> list[Ranking]:
    """The recorded ranking of every question of `dataset`, in dataset order.

    Raises ReplayMissError naming the questions the cassette has never seen, or saying the
    corpus changed since it was recorded (its documents, hence every ranking, may differ), or
    naming the modules of `code` (`method_code`) that differ from the recorded ones. A cassette
    recorded before code digests existed is read without that check.
    """
    data = _read(path)
    code_changed(path, code or {}, data.get("code"))
    corpus = corpus_fingerprint(dataset.documents)
    if data.get("corpus") != corpus:
        raise ReplayMissError(
            f"{path} was recorded for another corpus (fingerprint {data.get('corpus')}; {dataset.name} is {corpus})",
            "replay miss",
        )
    recorded: dict[str, Any] = data["rankings"]
    missing = [q for q in dataset.questions if q.text not in recorded]
    if missing:
        listed = "; ".join(f"{q.id} «{' '.join(q.text.split())[:60]}»" for q in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise ReplayMissError(f"questions new or changed since {path} was recorded: {listed}{more}", "replay miss")
    position = dataset.positions
    rankings = []
    for question in dataset.questions:
        entry = recorded[question.text]
        try:
            ids, scores = list(entry["ids"])[:depth], [float(s) for s in entry["scores"]][:depth]
            indices = [position[d] for d in ids]
        except (KeyError, TypeError, ValueError) as exc:
            raise RankingCassetteError(f"{path}: the entry of {question.id} is damaged ({exc}). Re-record it.") from exc
        if len(scores) != len(indices) or not all(math.isfinite(s) for s in scores):
            raise RankingCassetteError(f"{path}: the entry of {question.id} is damaged (scores). Re-record it.")
        rankings.append(
            Ranking(np.asarray(indices, dtype=np.int64), np.asarray(scores), str(entry.get("status", "ok")))
        )
    return rankings
