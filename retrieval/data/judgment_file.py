"""The judgments file: `judgments.jsonl` in the dataset folder, one judgment per line.

Each line is one source's judgment of one (question, document) pair, with its provenance and
its date, for review in a pull request's diff:

    {"question": "q11", "document": "faq-sla", "grade": 3, "source": "human:ana", "date": "2025-06-02T09:14:05Z"}

`source` says who judged: `human:<name>` (the judging page, a person), `llm:<model>` (the LLM
judge's proposal), `import:<file>` (a spreadsheet or qrels file brought in). A grade of 0 or
below is "judged not relevant", kept apart from a document never judged (no line). A source has
at most one line per pair: judging a pair again replaces its line. The file is written sorted by
question, document and source, so a judgment added or changed is one line of the diff, and
written whole, at once (retrieval.files.atomic), under a lock, so that two writers (two tabs of
the judging page, the page and an import) lose nothing and a killed writer leaves the old file or
the new one, never a part.

How the judgments of the several sources (this file and the dataset's own `relevant` or qrels)
make one grade per pair is retrieval.data.judgment_merge.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from json.encoder import encode_basestring as _string
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from retrieval.data.records import DatasetError, _jsonl
from retrieval.files.atomic import atomic_write_text, clean_stale

__all__ = [
    "JUDGMENTS_FILE",
    "SOURCE_KINDS",
    "Judgment",
    "Key",
    "known_judgments",
    "read_judgments",
    "render_judgments",
    "source_problem",
    "timestamp",
    "update_judgments",
    "valid_date",
]

JUDGMENTS_FILE = "judgments.jsonl"
# Who judged: a person (the page), an LLM's proposal, a file brought in (a spreadsheet, qrels).
SOURCE_KINDS = ("human", "llm", "import")
FIELDS = ("question", "document", "grade", "source", "date")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
_SOURCE = re.compile(r"(human|llm|import):(\S(?:[^\x00-\x1f\x7f]*\S)?)")

# (question, document, source): a source judges a pair once.
Key = tuple[str, str, str]
T = TypeVar("T")


class Judgment(NamedTuple):
    """One source's grade of one (question, document) pair, and when it was given.

    `date` is UTC, to the second (`2025-06-02T09:14:05Z`); "" for the judgments a dataset's own
    files give (`relevant`, qrels), which carry none and are older than any line of the file."""

    question: str
    document: str
    grade: int
    source: str
    date: str = ""

    @property
    def kind(self) -> str:
        """`human`, `llm` or `import`."""
        return self.source.split(":", 1)[0]

    @property
    def name(self) -> str:
        """Who, within the kind: the person, the model, the file."""
        return self.source.split(":", 1)[1]

    @property
    def key(self) -> Key:
        return (self.question, self.document, self.source)

    @property
    def pair(self) -> tuple[str, str]:
        return (self.question, self.document)

    def line(self) -> str:
        """The judgment as its line of the file (no newline): what json.dumps(ensure_ascii=False) writes
        of {"question", "document", "grade", "source", "date"}, by its own string encoder."""
        return (
            f'{{"question": {_string(self.question)}, "document": {_string(self.document)}, '
            f'"grade": {int(self.grade)}, "source": {_string(self.source)}, "date": {_string(self.date)}}}'
        )


def timestamp(now: datetime | None = None) -> str:
    """A judgment's date: UTC to the second (`2025-06-02T09:14:05Z`)."""
    return (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def source_problem(source: Any) -> str | None:
    """What is wrong with a provenance (`human:<name>`, `llm:<model>`, `import:<file>`), or None."""
    if not isinstance(source, str) or not _SOURCE.fullmatch(source):
        return (
            f"source is {source!r}: write who judged as human:<name>, llm:<model> or import:<file> "
            "(a name without line breaks)"
        )
    return None


def _judgment(record: Mapping[str, Any], path: Path, number: int) -> Judgment:
    # The common line (the fields the tool writes, of the types it writes) is taken with type checks
    # alone; anything else goes through the checks one by one, for the error that names its fix.
    if record.keys() == _FIELD_SET:
        question, document, grade = record["question"], record["document"], record["grade"]
        source, date = record["source"], record["date"]
        if (
            type(question) is str
            and type(document) is str
            and type(grade) is int
            and (source in _GOOD_SOURCES or source_problem(source) is None)
            and question
            and document
            and question.strip() == question
            and document.strip() == document
            and (date in _GOOD_DATES or valid_date(date))
        ):
            _GOOD_SOURCES.add(source)
            if len(_GOOD_DATES) < _DATES_KEPT:
                _GOOD_DATES.add(date)
            return Judgment(question, document, grade, source, date)
    where = f"{path}:{number}"
    unknown = sorted(set(record) - set(FIELDS))
    if unknown:
        raise DatasetError(f"{where}: unknown field(s) {', '.join(unknown)}. A judgment has {', '.join(FIELDS)}.")
    missing = [f for f in FIELDS if f not in record]
    if missing:
        raise DatasetError(
            f"{where}: missing {', '.join(missing)}. Each line is "
            '{"question": ID, "document": ID, "grade": N, "source": "human:NAME", "date": "YYYY-MM-DDTHH:MM:SSZ"}.'
        )
    question, document, grade, source, date = (record[f] for f in FIELDS)
    for field, value in (("question", question), ("document", document)):
        if not isinstance(value, str) or not value.strip() or value != value.strip():
            raise DatasetError(
                f"{where}: {field} is {value!r}: give the {field}'s id as a string, without spaces around."
            )
    if isinstance(grade, bool) or not isinstance(grade, int):
        raise DatasetError(
            f"{where}: grade is {grade!r}: a whole number, 0 (judged not relevant), 1, 2, 3 (write it without quotes)."
        )
    problem = source_problem(source)
    if problem:
        raise DatasetError(f"{where}: {problem}.")
    if not valid_date(date):
        raise DatasetError(f"{where}: date is {date!r}: write it in UTC as YYYY-MM-DDTHH:MM:SSZ.")
    return Judgment(question, document, grade, source, date)


_FIELD_SET = frozenset(FIELDS)
# Sources and dates already found good: a file holds few sources, and dates shared by many lines
# (an import's, an LLM run's). Dates kept up to a bound: each line of a page's session has its own.
_GOOD_SOURCES: set[str] = set()
_GOOD_DATES: set[str] = set()
_DATES_KEPT = 100_000


def valid_date(date: Any) -> bool:
    """Whether `date` is a judgment's date: UTC to the second, `YYYY-MM-DDTHH:MM:SSZ`, a real day."""
    if not isinstance(date, str) or not _DATE.fullmatch(date):
        return False
    try:
        datetime.fromisoformat(date[:-1])
    except ValueError:
        return False
    return True


def read_judgments(path: str | Path) -> list[Judgment]:
    """The judgments of a file, in its order, each line checked (DatasetError naming the file,
    the line and the fix); a source judging a pair twice names both lines. No file: none."""
    path = Path(path)
    if not path.is_file():
        return []
    found: dict[Key, int] = {}
    out = []
    for number, record in _jsonl(path):
        judgment = _judgment(record, path, number)
        first = found.setdefault((judgment.question, judgment.document, judgment.source), number)
        if first != number:
            raise DatasetError(
                f"{path}:{number}: {judgment.source} judges question {judgment.question!r}, document "
                f"{judgment.document!r} again (first at line {first}). Keep one line per source and pair: "
                "remove one of them."
            )
        out.append(judgment)
    return out


# The judgments of each file this process last read or wrote through `known_judgments` or
# `update_judgments`, with the file's identity then (inode, change and modification times, size):
# a page's every grade rereads the file under the lock, and it is most often the one it wrote.
_KNOWN: dict[str, tuple[tuple[int, int, int, int], dict[Key, Judgment]]] = {}


def _identity(path: Path) -> tuple[int, int, int, int] | None:
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return (found.st_ino, found.st_ctime_ns, found.st_mtime_ns, found.st_size)


def known_judgments(path: str | Path) -> dict[Key, Judgment]:
    """The file's judgments by key (a copy, the caller's to change): parsed again only when the file
    changed since this process last read or wrote it. No file: none."""
    target = Path(path)
    identity = _identity(target)
    if identity is None:
        return {}
    known = _KNOWN.get(str(target))
    if known is None or known[0] != identity:
        known = (identity, {j.key: j for j in read_judgments(target)})
        _KNOWN[str(target)] = known
    return dict(known[1])


def render_judgments(judgments: Iterable[Judgment]) -> str:
    """The file's text: one line per judgment, sorted by question, document and source."""
    lines = [j.line() for j in sorted(judgments, key=lambda j: j.key)]
    return "".join(f"{line}\n" for line in lines)


def update_judgments(path: str | Path, lock: str | Path, change: Callable[[dict[Key, Judgment]], T]) -> T:
    """Read the file, let `change` edit its judgments (key -> judgment, in place), write it back
    whole and at once; under `lock`, so that concurrent writers each see the others' judgments.

    Returns what `change` returns. The file is written only when the judgments changed; a damaged
    file is never rewritten (DatasetError: fix it first, nothing is lost)."""
    from filelock import FileLock  # here: the page and imports write; loading a dataset does not

    target = Path(path)
    Path(lock).parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lock)):
        clean_stale(target.parent, target.name)  # a killed writer's temporary file
        current = known_judgments(target)
        before = dict(current)
        result = change(current)
        if current != before:
            atomic_write_text(target, render_judgments(current.values()))
            identity = _identity(target)
            if identity is not None:  # still under the lock: nobody else wrote since
                _KNOWN[str(target)] = (identity, current)
    return result
