"""Judging in a spreadsheet: the pool exported as CSV, the graded sheet imported back.

The export has one row per pair (question, its type, the document's title and text, the methods
and ranks that retrieved it) and an empty `grade` column; it is UTF-8 with a byte order mark, so
that Excel opens accents as they are. The import reads what came back (comma, semicolon or tab
separated: a French Excel writes semicolons), checks every row first, and writes nothing unless
every row is good: a bad row is one line naming the file, the line and the fix. Each grade goes to
judgments.jsonl as `import:<file name>`, dated now (or by the sheet's own `date` column).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

from retrieval.data.dataset import Dataset
from retrieval.data.judgment_file import Judgment, Key, source_problem, timestamp, update_judgments, valid_date
from retrieval.data.records import DatasetError, _read_text
from retrieval.files.atomic import atomic_write_text
from retrieval.judging.pool import Candidate
from retrieval.judging.session import GRADES

__all__ = ["COLUMNS", "export_csv", "import_csv", "read_grades"]

COLUMNS = ("question_id", "question", "type", "document_id", "title", "text", "retrieved_by", "needed", "grade")
REQUIRED = ("question_id", "document_id", "grade")
# A cell holds at most 32,767 characters in Excel; the start of a document is what a judge reads.
TEXT_CELL = 2000


def export_csv(
    path: str | Path, dataset: Dataset, pool: Sequence[Candidate], needed: frozenset[tuple[str, str]]
) -> int:
    """Write the pool's pairs to `path` (atomically), one row each, `grade` left empty; returns the count."""
    questions = {q.id: q for q in dataset.questions}
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    for c in pool:
        question, document = questions[c.question], dataset.documents[dataset.positions[c.document]]
        text = " ".join(document.text.split())
        writer.writerow(
            [
                c.question,
                question.text,
                question.type,
                c.document,
                document.title,
                text if len(text) <= TEXT_CELL else text[:TEXT_CELL] + " […]",
                "; ".join(f"{method} #{rank}" for method, rank in c.hits),
                "yes" if c.pair in needed else "",
                "",
            ]
        )
    atomic_write_text(path, "\ufeff" + buffer.getvalue())
    return len(pool)


def _dialect(text: str) -> type[csv.Dialect] | csv.Dialect:
    first = text.split("\n", 1)[0]
    try:
        return csv.Sniffer().sniff(first, delimiters=",;\t")
    except csv.Error:
        return csv.excel


def _whole(value: str) -> int | None:
    try:
        number = float(value.replace(",", "."))
    except ValueError:
        return None
    return int(number) if number.is_integer() else None


def read_grades(path: str | Path, dataset: Dataset, now: str | None = None) -> list[Judgment]:
    """The graded rows of a sheet as judgments (`import:<file name>`); rows without a grade are
    not judged yet and left out. DatasetError on the first bad row: file, line, fix."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: no such file. Give the CSV exported by `python -m retrieval judge --export`.")
    text = _read_text(path)
    rows = csv.reader(io.StringIO(text, newline=""), _dialect(text))
    header = [cell.strip().lower() for cell in next(rows, [])]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise DatasetError(
            f"{path}:1: no column {', '.join(missing)} (the header has: {', '.join(header) or 'nothing'}). "
            "Keep the export's header row: question_id, document_id and grade at least."
        )
    at = {name: header.index(name) for name in header}
    questions = {q.id for q in dataset.questions}
    source = f"import:{path.name}"
    if source_problem(source):
        raise DatasetError(
            f"{path}: its name becomes the judgments' source ({source!r}): rename it without spaces around."
        )
    date = now or timestamp()
    seen: dict[tuple[str, str], int] = {}
    out = []
    for number, row in enumerate(rows, start=2):
        cells = {name: (row[i].strip() if i < len(row) else "") for name, i in at.items()}
        if not any(cells.values()):
            continue
        where = f"{path}:{number}"
        question, document, grade = cells["question_id"], cells["document_id"], cells["grade"]
        if question not in questions:
            raise DatasetError(f"{where}: question {question!r} is not a question of the dataset. Fix question_id.")
        if document not in dataset.positions:
            raise DatasetError(f"{where}: document {document!r} is not in the corpus. Fix document_id.")
        if not grade:
            continue
        value = _whole(grade)
        if value not in GRADES:
            raise DatasetError(
                f"{where}: grade {grade!r} is not one of 0, 1, 2, 3 (0 not relevant, 1 related, 2 partly answers, "
                "3 answers it). Fix it, or leave it empty for a pair not judged yet."
            )
        if (question, document) in seen:
            raise DatasetError(
                f"{where}: question {question!r}, document {document!r} is graded again (first at line "
                f"{seen[(question, document)]}). Keep one row per pair."
            )
        seen[(question, document)] = number
        row_date = cells.get("date", "")
        if row_date and not valid_date(row_date):
            raise DatasetError(
                f"{where}: date {row_date!r}: write it in UTC as YYYY-MM-DDTHH:MM:SSZ, or leave it empty."
            )
        out.append(Judgment(question, document, int(value), source, row_date or date))
    return out


def import_csv(path: str | Path, dataset: Dataset, judgments_path: str | Path, lock: str | Path) -> tuple[int, int]:
    """Read every row of a graded sheet, then write all its grades to the judgments file at once.
    Returns (grades written or changed, grades the file already held)."""
    found = read_grades(path, dataset)

    def write(current: dict[Key, Judgment]) -> int:
        same = 0
        for judgment in found:
            held = current.get(judgment.key)
            if held is not None and held.grade == judgment.grade:
                same += 1  # kept with its own date: importing the sheet again changes nothing
            else:
                current[judgment.key] = judgment
        return same

    same = update_judgments(judgments_path, lock, write)
    return len(found) - same, same
