"""TREC run and qrels files: what trec_eval, ir_measures, ranx and the engines that batch-search
(Anserini/Pyserini, Elasticsearch, Vespa, any offline job) read and write.

A run line is `qid Q0 docid rank score tag`, whitespace-separated; a qrels line is
`qid 0 docid grade`. A run is read as trec_eval reads it: each question's documents by score,
highest first, tied scores in decreasing document id order (trec_eval sorts so; its rank column
is checked to be an integer and otherwise ignored). A run written here scores each question's
documents by their rank (the first of N scores N, the last 1), whatever the method's own scores:
tied scores would otherwise be put in another order by each reader, and the figures would not be
this run's. Judgments go through `judgments`, one place for what a question's relevance holds:
their grades, so that graded nDCG reads the same; recall and MRR count grade >= `relevant_grade`,
which ir_measures writes R(rel=2)@5, trec_eval `-l 2`.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from retrieval.data.dataset import Dataset, Question
from retrieval.run.results import Run

__all__ = [
    "QRELS_FILE",
    "RUN_SUFFIX",
    "TrecRun",
    "TrecRunError",
    "judgments",
    "qrels_text",
    "read_trec_run",
    "run_text",
    "trec_files",
]

QRELS_FILE = "qrels.txt"
RUN_SUFFIX = ".run"
_FIELDS = "qid Q0 docid rank score tag"


class TrecRunError(ValueError):
    """A run file that cannot be evaluated; the message names the file, the line and the fix."""


@dataclass(frozen=True)
class TrecRun:
    """A run file read for a dataset: each question's document ids best first, with their scores,
    and the file's SHA-256 (the baseline records it: another file is another configuration)."""

    path: str
    rankings: Mapping[str, tuple[tuple[str, float], ...]]
    sha256: str
    tags: tuple[str, ...]


def judgments(question: Question) -> dict[str, int]:
    """A question's judged documents and their grades, as the dataset gave them (a list of
    relevant ids: each of grade 1; graded qrels: every grade, 0 for a document judged not
    relevant), whatever `relevant_grade` the run counts from."""
    return dict(question.judgments)


def qrels_text(questions: Iterable[Question]) -> str:
    """The qrels of `questions`, one `qid 0 docid grade` line per judged document."""
    return "".join(f"{q.id} 0 {doc} {grade}\n" for q in questions for doc, grade in judgments(q).items())


def run_text(rankings: Iterable[tuple[str, Sequence[str]]], tag: str) -> str:
    """A run of (question id, ranked document ids) pairs, the first of N scored N (module docstring)."""
    lines = []
    for qid, ids in rankings:
        lines += [f"{qid} Q0 {doc} {rank} {len(ids) - rank + 1} {tag}\n" for rank, doc in enumerate(ids, start=1)]
    return "".join(lines)


def trec_files(run: Run) -> dict[str, bytes]:
    """Every method's run (`<method>.run`, the ids the run kept, tagged with the method's name) and
    the qrels of its questions (`qrels.txt`): file name -> content, for one folder."""
    files = {QRELS_FILE: qrels_text(r.question for r in run.results).encode("utf-8")}
    for method in run.methods:
        ranked = ((r.question.id, r.methods[method].ids) for r in run.results)
        files[f"{method}{RUN_SUFFIX}"] = run_text(ranked, method).encode("utf-8")
    return files


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def read_trec_run(path: str | Path, dataset: Dataset, shown: str | None = None) -> TrecRun:
    """Read and check a run for `dataset`: every question ranked, every document in the corpus.

    TrecRunError (one line, `shown` or the path, the line and the fix) for a line without its six
    fields, a score that is not a finite number, a rank that is not an integer, a document the
    corpus does not hold, a document twice for one question, or a dataset question the run does
    not rank. Questions the dataset does not hold are left out (a run over more topics)."""
    where = shown or str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TrecRunError(f"{where}: cannot read the run file ({exc.strerror or exc}).") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TrecRunError(f"{where}: not UTF-8 text (byte {exc.start}). Write the run as UTF-8.") from exc
    asked = {q.id for q in dataset.questions}
    positions = dataset.positions
    found: dict[str, dict[str, float]] = {}
    tags: dict[str, None] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 6:
            raise TrecRunError(
                f"{where}:{number}: {len(fields)} field(s); a run line has 6: {_FIELDS} (whitespace-separated)."
            )
        qid, _, doc, rank, score, tag = fields
        value = _number(score)
        if value is None:
            raise TrecRunError(f"{where}:{number}: score {score!r} is not a finite number ({_FIELDS}).")
        if not rank.lstrip("-").isdigit():
            raise TrecRunError(f"{where}:{number}: rank {rank!r} is not an integer ({_FIELDS}).")
        if qid not in asked:
            continue
        if doc not in positions:
            raise TrecRunError(
                f"{where}:{number}: document {doc!r} is not in the corpus of {dataset.name}: a run ranks the "
                "evaluated documents (leaving it out would raise the figures); search the dataset's corpus."
            )
        ranked = found.setdefault(qid, {})
        if doc in ranked:
            raise TrecRunError(
                f"{where}:{number}: document {doc!r} ranked twice for question {qid}: a document has one rank."
            )
        ranked[doc] = value
        tags.setdefault(tag, None)
    missing = [q.id for q in dataset.questions if q.id not in found]
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise TrecRunError(
            f"{where}: no line ranks question {missing[0]}{more} of {dataset.name}: a run ranks every question of "
            "the dataset; make the run with its questions and their ids (queries.jsonl or questions.jsonl)."
        )
    # Sorted twice (stable): tied scores stay in decreasing document id order, trec_eval's.
    rankings = {
        qid: tuple(sorted(sorted(ranked.items(), reverse=True), key=lambda item: -item[1]))
        for qid, ranked in found.items()
    }
    return TrecRun(str(path), rankings, hashlib.sha256(data).hexdigest(), tuple(tags))
