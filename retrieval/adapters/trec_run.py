"""A TREC run file gated as a method: `trec:path/to/run` in `methods` (or `--run FILE`).

An engine that already searches in batch (Anserini/Pyserini, Elasticsearch, Vespa, an offline
job) writes its rankings once as a TREC run (`qid Q0 docid rank score tag`); the tool measures,
diagnoses and gates them like any method's, without reaching the engine. The method is named
after the file (`runs/elastic.run` is `elastic`, `bm25.run` is `bm25-run`); its configuration in the baseline holds the
file's path and SHA-256, so a pull request that changes the run shows as another configuration
and the gate compares its figures. Reading it is in-process (`calls = "none"`): the file is read
in every mode. A run that misses a question of the dataset, names a document the corpus does not
hold, or has a malformed line is refused in one line naming the file and the line
(retrieval.run.trec).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING

from retrieval.config import ConfigError
from retrieval.methods import builtin_methods
from retrieval.methods.base import Context
from retrieval.run.ranking import Ranking, ranking_from_ids
from retrieval.run.trec import TrecRunError, read_trec_run

if TYPE_CHECKING:
    from retrieval.config import Settings

__all__ = ["TrecRunMethod", "from_spec", "method_name"]

# Suffixes a run file is commonly given, dropped from its method name.
_SUFFIXES = (".run", ".trec", ".txt", ".tsv")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def method_name(path: Path) -> str:
    """The method a run file is gated as: its file name without a run suffix, made plain; a file
    named like a built-in method (`bm25.run`, as --export-trec writes it) is `bm25-run`."""
    name = path.name
    for suffix in _SUFFIXES:
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
            break
    name = _UNSAFE.sub("_", name).strip("._-")[:60] or "run"
    return f"{name}-run" if name in builtin_methods() else name


class TrecRunMethod:
    """The rankings of a TREC run file, one per question of the dataset, at most `depth` deep."""

    requires: tuple[str, ...] = ()
    needs_vectors = False
    calls = "none"

    def __init__(self, path: Path, shown: str, name: str | None = None) -> None:
        self.path = path
        self.shown = shown
        self.name = name or method_name(path)
        try:
            self.sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as exc:
            raise ConfigError(f"method 'trec:{shown}': cannot read the run file ({exc.strerror or exc}).") from exc

    @property
    def config(self) -> dict[str, str]:
        """Recorded in the baseline configuration: another file is another configuration."""
        return {"file": self.shown, "sha256": self.sha256}

    def rank(self, context: Context) -> list[Ranking]:
        """The run's ranking of every question, in dataset order."""
        try:
            run = read_trec_run(self.path, context.dataset, self.shown)
        except TrecRunError as exc:
            raise ConfigError(str(exc)) from None
        if run.sha256 != self.sha256:
            raise ConfigError(f"{self.shown}: the run file changed while the evaluation ran; run it again.")
        rankings = []
        for question in context.dataset.questions:
            ranked = run.rankings[question.id][: context.depth]
            rankings.append(ranking_from_ids([d for d, _ in ranked], context.dataset, [s for _, s in ranked]))
        return rankings


def from_spec(rest: str, settings: Settings) -> TrecRunMethod:
    """The method of `trec:PATH`: PATH from the project root unless absolute, shown as written."""
    if not rest:
        raise ConfigError("method 'trec:': give the run file's path, e.g. trec:runs/engine.run.")
    path = Path(rest).expanduser()
    if not path.is_absolute():
        path = Path(settings.root) / path
    try:
        shown = path.resolve().relative_to(Path(settings.root).resolve()).as_posix()
    except ValueError:
        shown = rest
    return TrecRunMethod(path, shown)
