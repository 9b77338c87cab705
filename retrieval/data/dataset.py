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

import hashlib
import json
import re
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import count
from json import JSONDecodeError
from json.encoder import encode_basestring
from operator import attrgetter
from pathlib import Path
from types import MappingProxyType
from typing import Any

from retrieval.data.judgment_file import JUDGMENTS_FILE, Judgment, read_judgments
from retrieval.data.judgment_merge import LLMCheck, by_question, llm_checks, merged_grades
from retrieval.data.judgments import Question, load_beir_questions, load_native_questions
from retrieval.data.records import (
    _SCAN_ONCE,
    DatasetError,
    _no_cycle_collection,
    _read_text,
    _record,
    _record_id_and_text,
    _text_field,
)

__all__ = ["Dataset", "DatasetError", "Document", "Question", "content_of", "document_positions", "load_dataset"]


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


def contents_of(documents: Iterable[Document]) -> Iterator[str]:
    """The documents' `content`, in order: content_of inlined, without the property's and the
    function's calls per document (the analysis reads every document of a large corpus)."""
    return (f"{title}\n{text}" if title else text for title, text in map(_TITLE_AND_TEXT, documents))


_ID = attrgetter("id")
_TITLE_AND_TEXT = attrgetter("title", "text")


@dataclass(frozen=True)
class Dataset:
    """A validated corpus and question set, with the fingerprint that ties baselines and cassettes to it."""

    name: str
    documents: tuple[Document, ...]
    questions: tuple[Question, ...]
    fingerprint: str
    # Questions with no document of relevant_grade or more (BEIR: queries judged 0 only), left out.
    dropped_questions: int = 0
    # The lines of the dataset's judgments.jsonl (retrieval.data.judgment_file), every source's,
    # merged into the questions' grades by retrieval.data.judgment_merge.
    judgment_records: tuple[Judgment, ...] = ()
    # Lines of judgments.jsonl that judge a question not evaluated or a document not in the corpus.
    unused_judgments: int = 0
    # The pairs an LLM and a person (or the dataset's own files) both judged: its agreement.
    llm_checks: tuple[LLMCheck, ...] = ()
    # The (question, document) pairs whose grade is an LLM's (accept_llm: it filled a hole).
    llm_graded: frozenset[tuple[str, str]] = frozenset()
    # The questions left out (`dropped_questions`), their `relevant` empty and their grades kept:
    # what a base branch that judges them otherwise is still compared on (retrieval.gate.result).
    left_out: tuple[Question, ...] = ()

    @property
    def doc_ids(self) -> list[str]:
        positions = self.positions
        # Ids given once (every loaded corpus's): the positions' keys, with no step per document.
        return list(positions) if len(positions) == len(self.documents) else list(map(_ID, self.documents))

    @cached_property
    def positions(self) -> Mapping[str, int]:
        """Document id -> its index in `documents`, the number a Ranking holds (built once)."""
        return document_positions(self.documents)

    @property
    def question_types(self) -> list[str]:
        """Question types in order of first appearance (the report's column order)."""
        return list(dict.fromkeys(q.type for q in self.questions))


def load_dataset(
    path: str | Path, split: str = "test", relevant_grade: int = 1, *, accept_llm: bool = False
) -> Dataset:
    """Load a native folder (corpus.jsonl + questions.jsonl) or a BEIR folder
    (corpus.jsonl + queries.jsonl + qrels/<split>.tsv), validated, with the judgments of its
    judgments.jsonl merged in (retrieval.data.judgment_merge; LLM ones only with `accept_llm`).

    Judgments keep their grades (`Question.judgments`); a document counts as relevant (is in
    `Question.relevant`) from `relevant_grade` on. A question with no document that high is
    left out and counted in `dropped_questions`."""
    # Without the cycle collector throughout (records.py: JSON values and these objects hold no
    # cycle): its passes over the young corpus come once the load is done, or never where the
    # caller freezes the dataset at once (retrieval.cli).
    with _no_cycle_collection():
        return _load_dataset(path, split, relevant_grade, accept_llm)


def _load_dataset(path: str | Path, split: str, relevant_grade: int, accept_llm: bool) -> Dataset:
    if relevant_grade < 1:
        raise ValueError(f"relevant_grade must be at least 1, got {relevant_grade!r}")
    root = Path(path)
    if not root.is_dir():
        raise DatasetError(f"{root}: not a folder. Pass --dataset a folder holding corpus.jsonl.")
    corpus_path = root / "corpus.jsonl"
    if not corpus_path.is_file():
        raise DatasetError(f"{corpus_path}: missing. A dataset folder needs corpus.jsonl.")
    documents, escaped = _load_corpus(corpus_path)
    # Sorted by id, so that nothing downstream depends on the order of the lines (module docstring).
    # Sorting the ids alone takes list.sort's path for strings: several times faster than the items.
    ids = sorted(documents)
    documents = {doc_id: documents[doc_id] for doc_id in ids}
    records = read_judgments(root / JUDGMENTS_FILE)
    lines = {
        q: {d: found for d, found in judged.items() if d in documents} for q, judged in by_question(records).items()
    }
    checks: list[LLMCheck] = []
    by_llm: set[tuple[str, str]] = set()
    own_source = ""

    def merge(qid: str, own: dict[str, int]) -> dict[str, int] | None:
        if not lines.get(qid):
            return None
        checks.extend(llm_checks(own, qid, lines[qid], own_source))
        grades, from_llm = merged_grades(own, lines[qid], accept_llm, own_source)
        by_llm.update((qid, d) for d in from_llm)
        return grades

    if (root / "questions.jsonl").is_file():
        own_source = "import:questions.jsonl"
        questions, dropped = load_native_questions(root / "questions.jsonl", documents, relevant_grade, merge)
    elif (root / "queries.jsonl").is_file():
        own_source = f"import:qrels/{split}.tsv"
        questions, dropped = load_beir_questions(root, documents, split, relevant_grade, merge)
    else:
        raise DatasetError(f"{root}: no questions.jsonl (native format) nor queries.jsonl + qrels/{split}.tsv (BEIR).")
    evaluated = {q.id for q in questions}
    # The corpus digest is the fingerprint's first part (documents sorted by id in both): hashed
    # once, and carried by the documents for corpus_fingerprint (a second pass over the corpus).
    digest = hashlib.sha256()
    _hash_documents(digest, documents.values(), escaped)
    corpus = _Documents(documents.values())
    corpus.corpus_fingerprint = "sha256:" + digest.hexdigest()[:16]
    corpus.__dict__["positions"] = MappingProxyType(dict(zip(ids, count())))  # document_positions, from the ids
    return Dataset(
        name=root.name,
        documents=corpus,
        questions=tuple(questions),
        fingerprint=_fingerprint(digest, questions),
        dropped_questions=len(dropped),
        judgment_records=tuple(records),
        unused_judgments=sum(j.question not in evaluated or j.document not in documents for j in records),
        llm_checks=tuple(c for c in checks if c.question in evaluated),
        llm_graded=frozenset(p for p in by_llm if p[0] in evaluated),
        left_out=tuple(dropped),
    )


def _load_corpus(path: Path) -> tuple[dict[str, Document], set[str]]:
    """The documents by id, and the ids of those whose line holds a backslash (or took the checks'
    path): only their fields may hold what JSON writes escaped (`"`, a backslash, a control character)."""
    documents: dict[str, Document] = {}
    first_line: dict[str, int] = {}
    escaped: set[str] = set()
    content = _read_text(path)
    # Only a \\uD8xx-\\uDFxx escape makes a lone surrogate (the file itself is valid UTF-8): without one
    # in the file, no field needs the per-field check (a valid escaped pair merely takes the slow path).
    fast = _SURROGATE_ESCAPE.search(content) is None
    for number, line in enumerate(content.splitlines(), start=1):
        if fast:
            # The common line (one JSON object and nothing around it; string id, text and title, a new
            # id, metadata an object) is accepted here, decoded by the decoder's own step, without
            # _jsonl's and the checks' function calls; anything else takes their path for the exact error.
            try:
                record, end = _SCAN_ONCE(line, 0)
            except (JSONDecodeError, StopIteration):
                end = -1
            if end == len(line) and type(record) is dict:
                key = "_id" if "_id" in record else "id"
                raw_id, text, title = record.get(key), record.get("text"), record.get("title")
                if type(raw_id) is str and type(text) is str and (title is None or type(title) is str):
                    doc_id = raw_id.strip()
                    metadata = record.get("metadata") or {}
                    if doc_id and doc_id not in first_line and text.strip() and type(metadata) is dict:
                        first_line[doc_id] = number
                        documents[doc_id] = Document(doc_id, title or "", text, metadata)
                        if "\\" in line:
                            escaped.add(doc_id)
                        continue
        if not line.strip():
            continue
        record = _record(line, path, number)
        where = f"{path}:{number}"
        doc_id, text = _record_id_and_text(record, where, number, "document", first_line)
        metadata = record.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise DatasetError(f'{where}: "metadata" must be an object.')
        title = _text_field(record, "title", where, required=False)
        documents[doc_id] = Document(doc_id, title, text, metadata)
        escaped.add(doc_id)
    if not documents:
        raise DatasetError(f"{path}: no document. Add one JSON object per line.")
    return documents, escaped


class _Documents(tuple[Document, ...]):
    """A loaded corpus (sorted by id) that carries its corpus_fingerprint, computed when loading,
    and its document_positions once made (not pickled: a copy makes its own)."""

    corpus_fingerprint: str

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "positions"}


def document_positions(documents: Sequence[Document]) -> Mapping[str, int]:
    """Document id -> its index in `documents` (the last one's, for an id given twice), made in C
    (attrgetter, zip, count: no Python step per document); a loaded corpus's is made once, for
    the evaluation's rankings and the report's diagnoses alike."""
    known = documents.__dict__.get("positions") if isinstance(documents, _Documents) else None
    if known is None:
        known = MappingProxyType(dict(zip(map(_ID, documents), count())))
        if isinstance(documents, _Documents):
            documents.__dict__["positions"] = known
    return known


def _fingerprint(documents_digest: Any, questions: list[Question]) -> str:
    """The dataset's fingerprint, from the digest of its sorted documents (_hash_documents) on."""
    digest = documents_digest.copy()
    digest.update(b"\x00questions\x00")
    for q in questions:
        # Grades only when they say more than the relevant ids: a dataset without grades (or
        # whose grades are all 1) keeps the fingerprint it had before grades were read.
        graded = [[doc, grade] for doc, grade in q.grades] if q.graded else None
        fields = [q.id, q.text, q.type, list(q.relevant), *([graded] if graded else [])]
        digest.update(json.dumps(fields, ensure_ascii=False).encode())
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


def _hash_documents(digest: Any, documents: Iterable[Document], escaped: Container[str] | None = None) -> None:
    """Feed `digest` what `json.dumps([id, title, text], ensure_ascii=False).encode()` gives for each
    document, in order: the same bytes (a digest of the concatenation is the digest of the updates),
    built with the C string encoder json.dumps itself uses, a block of documents at a time.

    `escaped`, from _load_corpus: the ids of the only documents whose fields may hold what JSON
    writes escaped. JSON writes `"`, the backslash and the control characters escaped, so a line
    without a backslash has string fields that json.dumps writes as they are: the other documents'
    lines are made by two joins in C, a run of them at a time, with no check or step per document."""
    if escaped is None:
        _hash_lines(digest, documents)
        return
    documents = list(documents)
    # The documents hashed line by line, and the end of the corpus, bound the plain runs.
    stops = [i for i, doc_id in enumerate(map(_ID, documents)) if doc_id in escaped]
    start = 0
    for stop in [*stops, len(documents)]:
        for at in range(start, stop, _HASH_BLOCK):
            fields = map(_ID_TITLE_TEXT, documents[at : min(stop, at + _HASH_BLOCK)])
            digest.update(('["' + '"]["'.join(map('", "'.join, fields)) + '"]').encode())
        if stop < len(documents):
            _hash_lines(digest, documents[stop : stop + 1])
        start = stop + 1


_ID_TITLE_TEXT = attrgetter("id", "title", "text")


def _hash_lines(digest: Any, documents: Iterable[Document]) -> None:
    """_hash_documents, a line per document: each checked, and written by json's encoder if need be."""
    block: list[str] = []
    for doc in documents:
        doc_id, title, text = doc.id, doc.title, doc.text
        if type(doc_id) is str and type(title) is str and type(text) is str:
            line = f'["{doc_id}", "{title}", "{text}"]'
            # json's string encoder writes a field as is between quotes unless it holds `"`, a
            # backslash or a control character below U+0020 (not printable; a text with another
            # unprintable character merely takes the encoder's path): three C scans of the line,
            # whose own six quotes and separators are printable, and no function call per field.
            if line.isprintable() and "\\" not in line and line.count('"') == 6:
                block.append(line)
            else:
                block.append(f"[{encode_basestring(doc_id)}, {encode_basestring(title)}, {encode_basestring(text)}]")
        else:  # not strings (a Document built by hand): json.dumps decides how they are written
            block.append(json.dumps([doc.id, doc.title, doc.text], ensure_ascii=False))
        if len(block) == _HASH_BLOCK:
            digest.update("".join(block).encode())
            block.clear()
    digest.update("".join(block).encode())
