"""Questions and their judgments: the native questions.jsonl (relevant ids, or ids with grades)
and BEIR's queries.jsonl with qrels/<split>.tsv, validated; the grades kept.

`Question.judgments` is the one accessor of a question's judgments: document id -> grade, 0 (or
below) for a document judged not relevant, absent for one never judged.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from retrieval.data.records import DatasetError, _jsonl, _read_text, _record_id_and_text, _text_field, _valid_unicode

__all__ = ["Merge", "Question", "load_beir_questions", "load_native_questions"]

# A question's grades from the dataset's files -> its grades once judgments.jsonl is merged in
# (retrieval.data.judgment_merge), or None when the file judges nothing of that question.
Merge = Callable[[str, dict[str, int]], dict[str, int] | None]


@dataclass(frozen=True)
class Question:
    """A question, its type (a report column) and the ids of the documents that answer it.

    `relevant` holds the documents that count as relevant (a grade at least the run's
    `relevant_grade`): what recall, MRR and the failure analysis read. `grades` holds every
    judgment the data gave, (document id, grade) in the file's order, grade 0 (or below) for a
    document judged not relevant; empty when the data gave no grades (a list of relevant ids):
    each relevant document is then of grade 1. Read them through `judgments`.
    """

    id: str
    text: str
    type: str
    relevant: tuple[str, ...]
    grades: tuple[tuple[str, int], ...] = ()

    @property
    def judgments(self) -> Mapping[str, int]:
        """Every judged document -> its grade (1 for each relevant id when the data gave no
        grades; 0 or below: judged not relevant). A document absent was never judged."""
        return MappingProxyType(dict(self.grades) if self.grades else dict.fromkeys(self.relevant, 1))

    @property
    def graded(self) -> bool:
        """Whether the judgments say more than "these documents are relevant": a grade other
        than 1, or a document judged not relevant."""
        return bool(self.grades) and (
            any(grade != 1 for _, grade in self.grades) or len(self.grades) != len(self.relevant)
        )


def _check_relevant(relevant: list[str], documents: Collection[str], where: str, qid: str) -> None:
    if not relevant:
        raise DatasetError(
            f'{where}: question "{qid}" has no relevant document. '
            'List at least one document id in "relevant" or remove the question.'
        )
    for doc_id in relevant:
        if doc_id not in documents:
            raise DatasetError(
                f'{where}: question "{qid}" lists relevant document "{doc_id}", '
                "which is not in corpus.jsonl. Fix the id or add the document."
            )


def _grade(value: Any, where: str, what: str) -> int:
    """A judgment's grade: a whole number (1.0 is 1), or DatasetError naming `what` holds it."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise DatasetError(
            f"{where}: {what} is {value!r}, not a grade. Use whole numbers: 0 (judged not relevant), 1, 2..."
        )
    if value != int(value):
        raise DatasetError(
            f"{where}: {what} is {value!r}, not a whole number. Grades are whole numbers: 0 (judged not "
            "relevant), 1, 2..."
        )
    return int(value)


def _graded_question(
    qid: str, text: str, qtype: str, judged: Mapping[str, int], relevant_grade: int, from_grades: bool
) -> Question:
    """The question with its judgments (`grades` kept when the data gave grades); its `relevant`
    empty when no document reaches `relevant_grade` (the question is then left out)."""
    relevant = tuple(doc for doc, grade in judged.items() if grade >= relevant_grade)
    return Question(qid, text, qtype, relevant, tuple(judged.items()) if from_grades else ())


def _merged(merge: Merge | None, qid: str, judged: dict[str, int], from_grades: bool) -> tuple[dict[str, int], bool]:
    """The question's grades with judgments.jsonl's merged in; grades kept when the file judged it."""
    found = merge(qid, judged) if merge else None
    return (judged, from_grades) if found is None else (found, True)


def load_native_questions(
    path: Path, documents: Collection[str], relevant_grade: int = 1, merge: Merge | None = None
) -> tuple[list[Question], list[Question]]:
    """The questions of a native questions.jsonl, and those left out (no document of
    `relevant_grade` or more: their `relevant` empty, their grades kept)."""
    questions: list[Question] = []
    seen: dict[str, int] = {}
    dropped: list[Question] = []
    for number, record in _jsonl(path):
        where = f"{path}:{number}"
        qid, text = _record_id_and_text(record, where, number, "question", seen)
        qtype = _question_type(_text_field(record, "type", where), where)
        relevant = record.get("relevant")
        if relevant is None:
            raise DatasetError(
                f'{where}: missing field "relevant". Add "relevant": ["doc-id", ...] or {{"doc-id": grade, ...}}.'
            )
        from_grades = isinstance(relevant, dict)
        if from_grades:
            pairs = [(str(doc), _grade(g, where, f'the grade of "{doc}" in "relevant"')) for doc, g in relevant.items()]
        elif isinstance(relevant, list) and all(isinstance(r, str) for r in relevant):
            pairs = [(r, 1) for r in relevant]
        else:
            raise DatasetError(
                f'{where}: "relevant" must be a list of document ids (strings) or an object of document id -> '
                "grade (0 judged not relevant, 1, 2...)."
            )
        # Stripped as the corpus ids are, so " HEL-4040" finds HEL-4040.
        judged = {_valid_unicode(doc, where, "relevant").strip(): grade for doc, grade in pairs}
        if "" in judged:
            raise DatasetError(f'{where}: an empty id in "relevant". Remove it or give the document id.')
        _check_relevant([doc for doc, grade in judged.items() if grade > 0], documents, where, qid)
        for doc in judged:
            if doc not in documents:
                raise DatasetError(
                    f'{where}: question "{qid}" judges document "{doc}", which is not in corpus.jsonl. '
                    "Fix the id or add the document."
                )
        judged, from_grades = _merged(merge, qid, judged, from_grades)
        question = _graded_question(qid, text, qtype, judged, relevant_grade, from_grades)
        (questions if question.relevant else dropped).append(question)
    if not questions:
        if dropped:
            raise DatasetError(
                f"{path}: no question has a document of grade {relevant_grade} or more (relevant_grade). "
                "Lower relevant_grade or grade the documents."
            )
        raise DatasetError(f"{path}: no question. Add one JSON object per line.")
    return questions, dropped


def _question_type(value: str, where: str) -> str:
    qtype = value.strip()
    if not qtype:
        raise DatasetError(f'{where}: empty "type". Give the question a type (a report column), e.g. "paraphrase".')
    return qtype


_QRELS_HEADER_IDS = {"query-id", "query_id", "qid"}


def load_beir_questions(
    root: Path, documents: Collection[str], split: str = "test", relevant_grade: int = 1, merge: Merge | None = None
) -> tuple[list[Question], list[Question]]:
    """The queries of a BEIR folder judged in qrels/<split>.tsv, and those left out (no document
    of `relevant_grade` or more: their `relevant` empty, their grades kept)."""
    queries_path = root / "queries.jsonl"
    qrels_path = root / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        found = sorted(p.stem for p in (root / "qrels").glob("*.tsv")) if (root / "qrels").is_dir() else []
        offer = f" The folder has qrels for: {', '.join(found)} (choose one with split)." if found else ""
        raise DatasetError(f"{qrels_path}: missing. A BEIR folder needs qrels/{split}.tsv.{offer}")
    texts: dict[str, tuple[str, str, str]] = {}
    seen: dict[str, int] = {}
    for number, record in _jsonl(queries_path):
        where = f"{queries_path}:{number}"
        qid, text = _record_id_and_text(record, where, number, "query", seen)
        metadata: dict[str, Any] = record["metadata"] if isinstance(record.get("metadata"), dict) else {}
        source = record if "type" in record else metadata
        qtype = _question_type(_text_field(source, "type", where), where) if "type" in source else "all"
        texts[qid] = (text, qtype, where)

    judged: dict[str, dict[str, int]] = {}
    with io.StringIO(_read_text(qrels_path), newline="") as handle:
        for number, row in enumerate(csv.reader(handle, delimiter="\t"), start=1):
            # Cells are read stripped: a header written "query-id " is still the header.
            if not row or (number == 1 and row[0].strip().lower() in _QRELS_HEADER_IDS):
                continue
            where = f"{qrels_path}:{number}"
            if len(row) != 3:
                raise DatasetError(f"{where}: expected 3 tab-separated columns (query-id, corpus-id, score).")
            qid, doc_id, score = (cell.strip() for cell in row)
            try:
                graded = float(score)
            except ValueError as exc:
                if number == 1:  # a header BEIR would not recognise, not a score
                    raise DatasetError(
                        f"{where}: the first line is neither a judgment nor the header: write the header "
                        f"query-id<TAB>corpus-id<TAB>score, got {chr(9).join(row)!r}."
                    ) from exc
                raise DatasetError(f'{where}: score "{score}" is not a number.') from exc
            if not math.isfinite(graded):
                raise DatasetError(
                    f'{where}: score "{score}" is not a finite number. Use 0 (not relevant) or a positive grade.'
                )
            grade = _grade(graded, where, f'score "{score}"')
            if qid not in texts:
                raise DatasetError(f'{where}: query "{qid}" is not in queries.jsonl.')
            grades = judged.setdefault(qid, {})
            if grade > 0:
                _check_relevant([doc_id], documents, where, qid)
            elif doc_id not in documents:
                continue  # judged not relevant, and not in the corpus: no ranking can hold it
            grades[doc_id] = grade  # a pair judged twice: the last line holds, as in trec_eval's reading
    # BEIR ships queries for every split: evaluate those judged in <split>.tsv, in queries.jsonl order.
    questions: list[Question] = []
    dropped: list[Question] = []
    for qid, (text, qtype, _) in texts.items():
        if qid not in judged:
            continue  # another split's query (judgments.jsonl does not bring it into this one)
        grades, _ = _merged(merge, qid, judged[qid], True)
        question = _graded_question(qid, text, qtype, grades, relevant_grade, True)
        (questions if question.relevant else dropped).append(question)
    if not questions:
        least = "score > 0" if relevant_grade == 1 else f"score >= {relevant_grade}, the relevant_grade"
        raise DatasetError(f"{qrels_path}: no query with a relevant document ({least}).")
    return questions, dropped
