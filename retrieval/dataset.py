"""Corpus and questions: loading (native and BEIR folders), validation, fingerprint.

Every error names the file, the line and the fix, and nothing is evaluated on an
invalid dataset: loading either returns a whole `Dataset` or raises `DatasetError`.

The corpus is sorted by document id at load time, whatever the order of the lines in
corpus.jsonl. So "lower corpus index" means "lower document id" everywhere: every tie
rule that falls back to the corpus index (retrieval.ranking.top_k, fusion) is a rule on
ids, the embedding requests (and so the cassettes) are the same for a shuffled file, and
the fingerprint is computed on the sorted corpus. Ids compare as Python strings (code
point order: "HEL-4010" < "faq-sla", "doc10" < "doc9"). Questions keep the file's order:
they are the report's rows and do not take part in any ranking.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Dataset", "DatasetError", "Document", "Question", "load_dataset"]


class DatasetError(ValueError):
    """The dataset on disk cannot be evaluated; the message says where and how to fix it."""


@dataclass(frozen=True)
class Document:
    """One corpus entry; retrievers index its title and text (`content`)."""

    id: str
    title: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def content(self) -> str:
        """What retrievers index: the title then the text."""
        return f"{self.title}\n{self.text}" if self.title else self.text


@dataclass(frozen=True)
class Question:
    """A question, its type (a report column) and the ids of the documents that answer it."""

    id: str
    text: str
    type: str
    relevant: tuple[str, ...]


@dataclass(frozen=True)
class Dataset:
    """A validated corpus and question set, with the fingerprint that ties baselines and cassettes to it."""

    name: str
    documents: tuple[Document, ...]
    questions: tuple[Question, ...]
    fingerprint: str

    @property
    def doc_ids(self) -> list[str]:
        return [d.id for d in self.documents]

    @property
    def question_types(self) -> list[str]:
        """Question types in order of first appearance (the report's column order)."""
        return list(dict.fromkeys(q.type for q in self.questions))


def load_dataset(path: str | Path) -> Dataset:
    """Load a native folder (corpus.jsonl + questions.jsonl) or a BEIR folder
    (corpus.jsonl + queries.jsonl + qrels/test.tsv), validated."""
    root = Path(path)
    if not root.is_dir():
        raise DatasetError(f"{root}: not a folder. Pass --dataset a folder holding corpus.jsonl.")
    corpus_path = root / "corpus.jsonl"
    if not corpus_path.is_file():
        raise DatasetError(f"{corpus_path}: missing. A dataset folder needs corpus.jsonl.")
    documents = _load_corpus(corpus_path)
    # Sorted by id, so that nothing downstream depends on the order of the lines (module docstring).
    documents = dict(sorted(documents.items()))
    if (root / "questions.jsonl").is_file():
        questions = _load_native_questions(root / "questions.jsonl", documents)
    elif (root / "queries.jsonl").is_file():
        questions = _load_beir_questions(root, documents)
    else:
        raise DatasetError(f"{root}: no questions.jsonl (native format) nor queries.jsonl + qrels/test.tsv (BEIR).")
    return Dataset(
        name=root.name,
        documents=tuple(documents.values()),
        questions=tuple(questions),
        fingerprint=_fingerprint(documents.values(), questions),
    )


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 ({exc.reason}). Re-save the file as UTF-8.") from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(
                f"{path}:{number}: invalid JSON ({exc.msg} at column {exc.colno}). Each line must be one JSON object."
            ) from exc
        if not isinstance(record, dict):
            raise DatasetError(
                f"{path}:{number}: expected a JSON object, got {type(record).__name__}. Write one JSON object per line."
            )
        yield number, record


def _text_field(record: dict[str, Any], key: str, where: str, *, required: bool = True) -> str:
    value = record.get(key)
    if value is None and not required:
        return ""
    if value is None:
        raise DatasetError(f'{where}: missing field "{key}". Add "{key}": "..." to this line.')
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise DatasetError(f'{where}: field "{key}" must be a string. Quote the value.')
    return str(value)


def _record_id_and_text(
    record: dict[str, Any], where: str, number: int, what: str, seen: dict[str, int]
) -> tuple[str, str]:
    """The id (BEIR's "_id" or "id") and text of the record on line `number`, checked: present,
    unique among `seen` (id -> line, updated), not empty."""
    key = "_id" if "_id" in record else "id"
    record_id = _text_field(record, key, where).strip()
    if not record_id:
        raise DatasetError(f'{where}: empty "{key}". Give every {what} a unique id.')
    if record_id in seen:
        raise DatasetError(
            f'{where}: duplicate {what} id "{record_id}" (first at line {seen[record_id]}). Ids must be unique.'
        )
    text = _text_field(record, "text", where)
    if not text.strip():
        raise DatasetError(f'{where}: {what} "{record_id}" has an empty "text". Fill it or remove the line.')
    seen[record_id] = number
    return record_id, text


def _load_corpus(path: Path) -> dict[str, Document]:
    documents: dict[str, Document] = {}
    first_line: dict[str, int] = {}
    for number, record in _jsonl(path):
        where = f"{path}:{number}"
        doc_id, text = _record_id_and_text(record, where, number, "document", first_line)
        metadata = record.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise DatasetError(f'{where}: "metadata" must be an object.')
        title = _text_field(record, "title", where, required=False)
        documents[doc_id] = Document(doc_id, title, text, metadata)
    if not documents:
        raise DatasetError(f"{path}: no document. Add one JSON object per line.")
    return documents


def _check_relevant(relevant: list[str], documents: dict[str, Document], where: str, qid: str) -> None:
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


def _load_native_questions(path: Path, documents: dict[str, Document]) -> list[Question]:
    questions: list[Question] = []
    seen: dict[str, int] = {}
    for number, record in _jsonl(path):
        where = f"{path}:{number}"
        qid, text = _record_id_and_text(record, where, number, "question", seen)
        qtype = _text_field(record, "type", where).strip()
        relevant = record.get("relevant")
        if relevant is None:
            raise DatasetError(f'{where}: missing field "relevant". Add "relevant": ["doc-id", ...].')
        if not isinstance(relevant, list) or not all(isinstance(r, str) for r in relevant):
            raise DatasetError(f'{where}: "relevant" must be a list of document ids (strings).')
        _check_relevant(relevant, documents, where, qid)
        questions.append(Question(qid, text, qtype, tuple(dict.fromkeys(relevant))))
    if not questions:
        raise DatasetError(f"{path}: no question. Add one JSON object per line.")
    return questions


def _load_beir_questions(root: Path, documents: dict[str, Document]) -> list[Question]:
    queries_path = root / "queries.jsonl"
    qrels_path = root / "qrels" / "test.tsv"
    if not qrels_path.is_file():
        raise DatasetError(f"{qrels_path}: missing. A BEIR folder needs qrels/test.tsv.")
    texts: dict[str, tuple[str, str, str]] = {}
    seen: dict[str, int] = {}
    for number, record in _jsonl(queries_path):
        where = f"{queries_path}:{number}"
        qid, text = _record_id_and_text(record, where, number, "query", seen)
        metadata: dict[str, Any] = record["metadata"] if isinstance(record.get("metadata"), dict) else {}
        qtype = str(record.get("type") or metadata.get("type") or "all")
        texts[qid] = (text, qtype, where)

    relevant: dict[str, list[str]] = {}
    with qrels_path.open(encoding="utf-8", newline="") as handle:
        for number, row in enumerate(csv.reader(handle, delimiter="\t"), start=1):
            if not row or (number == 1 and row[0] in {"query-id", "query_id", "qid"}):
                continue
            where = f"{qrels_path}:{number}"
            if len(row) != 3:
                raise DatasetError(f"{where}: expected 3 tab-separated columns (query-id, corpus-id, score).")
            qid, doc_id, score = (cell.strip() for cell in row)
            try:
                graded = float(score)
            except ValueError as exc:
                raise DatasetError(f'{where}: score "{score}" is not a number.') from exc
            if qid not in texts:
                raise DatasetError(f'{where}: query "{qid}" is not in queries.jsonl.')
            if graded > 0:
                _check_relevant([doc_id], documents, where, qid)
                relevant.setdefault(qid, []).append(doc_id)
    # BEIR ships queries for every split: evaluate those judged in test.tsv, in queries.jsonl order.
    questions = [
        Question(qid, text, qtype, tuple(dict.fromkeys(relevant[qid])))
        for qid, (text, qtype, _) in texts.items()
        if qid in relevant
    ]
    if not questions:
        raise DatasetError(f"{qrels_path}: no query with a relevant document (score > 0).")
    return questions


def _fingerprint(documents: Any, questions: list[Question]) -> str:
    digest = hashlib.sha256()
    for doc in documents:
        digest.update(json.dumps([doc.id, doc.title, doc.text], ensure_ascii=False).encode())
    digest.update(b"\x00questions\x00")
    for q in questions:
        digest.update(json.dumps([q.id, q.text, q.type, list(q.relevant)], ensure_ascii=False).encode())
    return "sha256:" + digest.hexdigest()[:16]
