"""Corpus and questions: loading (native and BEIR folders), validation, fingerprint.

Every error names the file, the line and the fix, and nothing is evaluated on an
invalid dataset: loading either returns a whole `Dataset` or raises `DatasetError`.

The corpus is sorted by document id at load time, whatever the order of the lines in
corpus.jsonl. So "lower corpus index" means "lower document id" everywhere: every tie
rule that falls back to the corpus index (retrieval.run.ranking.top_k, fusion) is a rule on
ids, the embedding requests (and so the cassettes) are the same for a shuffled file, and
the fingerprint is computed on the sorted corpus. Ids compare as Python strings (code
point order: "HEL-4010" < "faq-sla", "doc10" < "doc9"). Questions keep the file's order:
they are the report's rows and do not take part in any ranking.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from json.encoder import encode_basestring
from pathlib import Path
from types import MappingProxyType
from typing import Any

__all__ = ["Dataset", "DatasetError", "Document", "Question", "content_of", "load_dataset"]


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
        return content_of(self.title, self.text)


def content_of(title: str, text: str) -> str:
    """A document's indexed content from its title and text (`Document.content`)."""
    return f"{title}\n{text}" if title else text


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
    # BEIR: queries judged in the qrels with score 0 only (no relevant document), left out.
    dropped_questions: int = 0

    @property
    def doc_ids(self) -> list[str]:
        return [d.id for d in self.documents]

    @cached_property
    def positions(self) -> Mapping[str, int]:
        """Document id -> its index in `documents`, the number a Ranking holds (built once)."""
        return MappingProxyType({d.id: i for i, d in enumerate(self.documents)})

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
    dropped = 0
    if (root / "questions.jsonl").is_file():
        questions = _load_native_questions(root / "questions.jsonl", documents)
    elif (root / "queries.jsonl").is_file():
        questions, dropped = _load_beir_questions(root, documents)
    else:
        raise DatasetError(f"{root}: no questions.jsonl (native format) nor queries.jsonl + qrels/test.tsv (BEIR).")
    # The corpus digest is the fingerprint's first part (documents sorted by id in both): hashed
    # once, and carried by the documents for corpus_fingerprint (a second pass over the corpus).
    digest = hashlib.sha256()
    _hash_documents(digest, documents.values())
    corpus = _Documents(documents.values())
    corpus.corpus_fingerprint = "sha256:" + digest.hexdigest()[:16]
    return Dataset(
        name=root.name,
        documents=corpus,
        questions=tuple(questions),
        fingerprint=_fingerprint(digest, questions),
        dropped_questions=dropped,
    )


def _read_text(path: Path) -> str:
    """A file's text: UTF-8, a byte order mark ignored; DatasetError naming the file otherwise."""
    try:
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise DatasetError(
            f"{path}:{line}: not UTF-8 ({exc.reason} at byte {exc.start}). Re-save the file as UTF-8."
        ) from exc


def _jsonl(path: Path, text: str | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSON-lines file (its `text` when already read), with their line numbers."""
    lines = (_read_text(path) if text is None else text).splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            # The decoder's own step without json.loads's wrapping; a line with whitespace around the
            # object, or anything else, is decoded again by json.loads for its exact result or error.
            record, end = _RAW_DECODE(line)
            if end != len(line):
                record = json.loads(line)
        except json.JSONDecodeError:
            record = _loads_or_raise(line, path, number)
        if not isinstance(record, dict):
            raise DatasetError(
                f"{path}:{number}: expected a JSON object, got {type(record).__name__}. Write one JSON object per line."
            )
        yield number, record


_RAW_DECODE = json.JSONDecoder().raw_decode


def _loads_or_raise(line: str, path: Path, number: int) -> Any:
    """json.loads of one line, its error as a DatasetError naming the file and the line."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise DatasetError(
            f"{path}:{number}: invalid JSON ({exc.msg} at column {exc.colno}). Each line must be one JSON object."
        ) from exc


def _text_field(record: dict[str, Any], key: str, where: str, *, required: bool = True) -> str:
    value = record.get(key)
    if value is None and not required:
        return ""
    if value is None:
        raise DatasetError(f'{where}: missing field "{key}". Add "{key}": "..." to this line.')
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise DatasetError(f'{where}: field "{key}" must be a string. Quote the value.')
    return _valid_unicode(str(value), where, key)


def _valid_unicode(value: str, where: str, key: str) -> str:
    # A JSON escape such as "\ud800" gives a lone surrogate: no encoder, HTTP body or hash takes it.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise DatasetError(
            f'{where}: field "{key}" holds a lone surrogate ({value[exc.start]!r} at character {exc.start}), '
            "which is not text. Fix the \\u escape."
        ) from exc
    return value


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
    content = _read_text(path)
    # Only a \\uD8xx-\\uDFxx escape makes a lone surrogate (the file itself is valid UTF-8): without one
    # in the file, no field needs the per-field check (a valid escaped pair merely takes the slow path).
    surrogates_possible = _SURROGATE_ESCAPE.search(content) is not None
    for number, record in _jsonl(path, content):
        if not surrogates_possible:
            # The common record (string id, text and title, new id, metadata an object) is accepted here
            # without the checks' function calls; anything else goes through them for the exact error.
            key = "_id" if "_id" in record else "id"
            raw_id, text, title = record.get(key), record.get("text"), record.get("title")
            if type(raw_id) is str and type(text) is str and (title is None or type(title) is str):
                doc_id = raw_id.strip()
                metadata = record.get("metadata") or {}
                if doc_id and doc_id not in first_line and text.strip() and type(metadata) is dict:
                    first_line[doc_id] = number
                    documents[doc_id] = Document(doc_id, title or "", text, metadata)
                    continue
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
        qtype = _question_type(_text_field(record, "type", where), where)
        relevant = record.get("relevant")
        if relevant is None:
            raise DatasetError(f'{where}: missing field "relevant". Add "relevant": ["doc-id", ...].')
        if not isinstance(relevant, list) or not all(isinstance(r, str) for r in relevant):
            raise DatasetError(f'{where}: "relevant" must be a list of document ids (strings).')
        # Stripped as the corpus ids are, so " HEL-4040" finds HEL-4040.
        relevant = [_valid_unicode(r, where, "relevant").strip() for r in relevant]
        if "" in relevant:
            raise DatasetError(f'{where}: an empty id in "relevant". Remove it or give the document id.')
        _check_relevant(relevant, documents, where, qid)
        questions.append(Question(qid, text, qtype, tuple(dict.fromkeys(relevant))))
    if not questions:
        raise DatasetError(f"{path}: no question. Add one JSON object per line.")
    return questions


def _question_type(value: str, where: str) -> str:
    qtype = value.strip()
    if not qtype:
        raise DatasetError(f'{where}: empty "type". Give the question a type (a report column), e.g. "paraphrase".')
    return qtype


_QRELS_HEADER_IDS = {"query-id", "query_id", "qid"}


def _load_beir_questions(root: Path, documents: dict[str, Document]) -> tuple[list[Question], int]:
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
        source = record if "type" in record else metadata
        qtype = _question_type(_text_field(source, "type", where), where) if "type" in source else "all"
        texts[qid] = (text, qtype, where)

    relevant: dict[str, list[str]] = {}
    judged: set[str] = set()
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
            if qid not in texts:
                raise DatasetError(f'{where}: query "{qid}" is not in queries.jsonl.')
            judged.add(qid)
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
    return questions, len(judged - set(relevant))


class _Documents(tuple[Document, ...]):
    """A loaded corpus (sorted by id) that carries its corpus_fingerprint, computed when loading."""

    corpus_fingerprint: str


def _fingerprint(documents_digest: Any, questions: list[Question]) -> str:
    """The dataset's fingerprint, from the digest of its sorted documents (_hash_documents) on."""
    digest = documents_digest.copy()
    digest.update(b"\x00questions\x00")
    for q in questions:
        digest.update(json.dumps([q.id, q.text, q.type, list(q.relevant)], ensure_ascii=False).encode())
    return "sha256:" + digest.hexdigest()[:16]


def corpus_fingerprint(documents: Iterable[Document]) -> str:
    """A digest of the corpus alone (ids, titles, texts): what a ranking cassette is keyed by,
    so that editing a question does not invalidate the other questions' recorded rankings."""
    if isinstance(documents, _Documents):  # load_dataset's corpus: its digest is known
        return documents.corpus_fingerprint
    digest = hashlib.sha256()
    _hash_documents(digest, sorted(documents, key=lambda d: d.id))
    return "sha256:" + digest.hexdigest()[:16]


# A JSON escape that can decode to a surrogate code point (lone or paired): \\uD800 to \\uDFFF.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# Documents hashed per block: one string, one encode and one digest update per block instead of per document.
_HASH_BLOCK = 4096


def _needs_no_escape(text: str) -> bool:
    """Whether json's string encoder would write `text` as is between quotes: it escapes only
    `"`, backslash and the control characters below U+0020 (which are not printable; a text with
    another unprintable character merely takes the encoder's path). C scans, no copy."""
    return text.isprintable() and '"' not in text and "\\" not in text


def _hash_documents(digest: Any, documents: Iterable[Document]) -> None:
    """Feed `digest` what `json.dumps([id, title, text], ensure_ascii=False).encode()` gives for each
    document, in order: the same bytes (a digest of the concatenation is the digest of the updates),
    built with the C string encoder json.dumps itself uses, a block of documents at a time."""
    block: list[str] = []
    for doc in documents:
        if type(doc.id) is str and type(doc.title) is str and type(doc.text) is str:
            fields = (doc.id, doc.title, doc.text)
            if all(map(_needs_no_escape, fields)):
                block.append(f'["{doc.id}", "{doc.title}", "{doc.text}"]')
            else:
                block.append(
                    f"[{encode_basestring(doc.id)}, {encode_basestring(doc.title)}, {encode_basestring(doc.text)}]"
                )
        else:  # not strings (a Document built by hand): json.dumps decides how they are written
            block.append(json.dumps([doc.id, doc.title, doc.text], ensure_ascii=False))
        if len(block) == _HASH_BLOCK:
            digest.update("".join(block).encode())
            block.clear()
    digest.update("".join(block).encode())
